//===- MemoryPlanner.cpp - Offsets for buffers with lifetimes -------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Transforms/MemoryPlanner.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

using namespace llvm;
using namespace mdplan;

ArenaPlan mdplan::planGreedyBySize(ArrayRef<LiveRange> Ranges,
                                   uint64_t Alignment) {
  ArenaPlan P;
  P.Method = "greedy-by-size";
  size_t N = Ranges.size();
  P.Offsets.assign(N, 0);
  std::vector<size_t> Order(N);
  std::iota(Order.begin(), Order.end(), 0);
  std::stable_sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
    if (Ranges[A].Bytes != Ranges[B].Bytes)
      return Ranges[A].Bytes > Ranges[B].Bytes;
    return Ranges[A].Start < Ranges[B].Start;
  });
  // Placed buffers sorted by offset (equal offsets in placement order), with
  // what the scan reads of them: one contiguous array.
  struct PlacedBuf {
    uint64_t Off;
    int64_t Start, End;
    uint64_t Size;
  };
  std::vector<PlacedBuf> Placed;
  Placed.reserve(N);
  for (size_t I : Order) {
    const LiveRange &R = Ranges[I];
    uint64_t Size = alignUp(std::max<uint64_t>(R.Bytes, 1), Alignment);
    uint64_t Prev = 0, Best = UINT64_MAX, BestGap = UINT64_MAX;
    for (const PlacedBuf &O : Placed) {
      if (O.End < R.Start || R.End < O.Start)
        continue; // Not live at the same time.
      if (O.Off >= Prev && O.Off - Prev >= Size && O.Off - Prev < BestGap) {
        Best = Prev;
        BestGap = O.Off - Prev;
      }
      Prev = std::max(Prev, O.Off + O.Size);
    }
    uint64_t Off = Best != UINT64_MAX ? Best : Prev;
    P.Offsets[I] = Off;
    auto At = std::upper_bound(
        Placed.begin(), Placed.end(), Off,
        [](uint64_t V, const PlacedBuf &B) { return V < B.Off; });
    Placed.insert(At, {Off, R.Start, R.End, Size});
    P.ArenaBytes = std::max(P.ArenaBytes, Off + Size);
  }
  return P;
}

ArenaPlan mdplan::planBestFitInOrder(ArrayRef<LiveRange> Ranges,
                                     uint64_t Alignment) {
  ArenaPlan P;
  P.Method = "best-fit-in-order";
  size_t N = Ranges.size();
  P.Offsets.assign(N, 0);
  std::vector<size_t> ByStart(N), ByEnd(N);
  std::iota(ByStart.begin(), ByStart.end(), 0);
  std::iota(ByEnd.begin(), ByEnd.end(), 0);
  std::stable_sort(ByStart.begin(), ByStart.end(), [&](size_t A, size_t B) {
    return Ranges[A].Start < Ranges[B].Start;
  });
  std::stable_sort(ByEnd.begin(), ByEnd.end(), [&](size_t A, size_t B) {
    return Ranges[A].End < Ranges[B].End;
  });
  std::map<uint64_t, uint64_t> FreeByOffset;          // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> FreeBySize; // (size, offset)
  uint64_t Top = 0;
  auto Size = [&](size_t I) {
    return alignUp(std::max<uint64_t>(Ranges[I].Bytes, 1), Alignment);
  };
  auto Release = [&](uint64_t Off, uint64_t Sz) {
    // Coalesce with the neighbours.
    auto Next = FreeByOffset.lower_bound(Off);
    if (Next != FreeByOffset.end() && Off + Sz == Next->first) {
      FreeBySize.erase({Next->second, Next->first});
      Sz += Next->second;
      Next = FreeByOffset.erase(Next);
    }
    if (Next != FreeByOffset.begin()) {
      auto Prev = std::prev(Next);
      if (Prev->first + Prev->second == Off) {
        FreeBySize.erase({Prev->second, Prev->first});
        Off = Prev->first;
        Sz += Prev->second;
        FreeByOffset.erase(Prev);
      }
    }
    if (Off + Sz == Top) {
      Top = Off; // Give the top back.
      return;
    }
    FreeByOffset[Off] = Sz;
    FreeBySize.insert({Sz, Off});
  };
  size_t E = 0;
  for (size_t I : ByStart) {
    // Free everything whose last use is before this buffer's first.
    while (E < N && Ranges[ByEnd[E]].End < Ranges[I].Start) {
      Release(P.Offsets[ByEnd[E]], Size(ByEnd[E]));
      ++E;
    }
    uint64_t Sz = Size(I);
    auto It = FreeBySize.lower_bound({Sz, 0});
    if (It != FreeBySize.end()) {
      auto [BlockSz, Off] = *It;
      FreeBySize.erase(It);
      FreeByOffset.erase(Off);
      P.Offsets[I] = Off;
      if (BlockSz > Sz) {
        FreeByOffset[Off + Sz] = BlockSz - Sz;
        FreeBySize.insert({BlockSz - Sz, Off + Sz});
      }
    } else {
      P.Offsets[I] = Top;
      Top += Sz;
    }
    P.ArenaBytes = std::max(P.ArenaBytes, P.Offsets[I] + Sz);
  }
  return P;
}

ArenaPlan mdplan::planArena(ArrayRef<LiveRange> Ranges, uint64_t Alignment,
                            size_t GreedyLimit) {
  ArenaPlan InOrder = planBestFitInOrder(Ranges, Alignment);
  if (Ranges.size() > GreedyLimit)
    return InOrder;
  ArenaPlan Greedy = planGreedyBySize(Ranges, Alignment);
  return Greedy.ArenaBytes <= InOrder.ArenaBytes ? Greedy : InOrder;
}
