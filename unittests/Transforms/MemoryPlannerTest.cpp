//===- MemoryPlannerTest.cpp - Arena planning of live ranges --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// planGreedyBySize, planBestFitInOrder and planArena on random live ranges
// (many seeds, sizes and alignments) and on hand cases with known optimal
// arenas: no two buffers live at the same time share a byte, offsets are
// aligned, every buffer fits the arena, the arena is at most the naive sum
// and at least the largest amount live at one time, and planArena keeps
// the smaller of the two plans. Small cases are compared with the optimum
// found by exhaustive search.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Transforms/MemoryPlanner.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace mdplan;

namespace {

using Planner = ArenaPlan (*)(llvm::ArrayRef<LiveRange>, uint64_t);

ArenaPlan arenaDefault(llvm::ArrayRef<LiveRange> R, uint64_t A) {
  return planArena(R, A);
}

struct NamedPlanner {
  const char *Name;
  Planner Fn;
};

const NamedPlanner Planners[] = {
    {"greedy-by-size", planGreedyBySize},
    {"best-fit-in-order", planBestFitInOrder},
    {"arena", arenaDefault},
};

uint64_t slot(const LiveRange &R, uint64_t Alignment) {
  return alignUp(std::max<uint64_t>(R.Bytes, 1), Alignment);
}

bool liveTogether(const LiveRange &A, const LiveRange &B) {
  return !(A.End < B.Start || B.End < A.Start);
}

uint64_t naiveBytes(llvm::ArrayRef<LiveRange> Ranges, uint64_t Alignment) {
  uint64_t Sum = 0;
  for (const LiveRange &R : Ranges)
    Sum += slot(R, Alignment);
  return Sum;
}

/// The most bytes live at one time: no plan can do with less.
uint64_t lowerBound(llvm::ArrayRef<LiveRange> Ranges, uint64_t Alignment) {
  std::map<int64_t, int64_t> Delta;
  for (const LiveRange &R : Ranges) {
    Delta[R.Start] += int64_t(slot(R, Alignment));
    Delta[R.End + 1] -= int64_t(slot(R, Alignment));
  }
  int64_t Live = 0, Max = 0;
  for (auto &[T, D] : Delta) {
    Live += D;
    Max = std::max(Max, Live);
  }
  return uint64_t(Max);
}

/// Checks a plan; returns the first problem, or "" when it is valid.
std::string validate(llvm::ArrayRef<LiveRange> Ranges, const ArenaPlan &P,
                     uint64_t Alignment) {
  if (P.Offsets.size() != Ranges.size())
    return "one offset per buffer expected, got " +
           std::to_string(P.Offsets.size());
  for (size_t I = 0; I < Ranges.size(); ++I) {
    if (P.Offsets[I] % Alignment)
      return "buffer " + std::to_string(I) + " at offset " +
             std::to_string(P.Offsets[I]) + " is not aligned";
    if (P.Offsets[I] + slot(Ranges[I], Alignment) > P.ArenaBytes)
      return "buffer " + std::to_string(I) + " does not fit the arena";
  }
  for (size_t I = 0; I < Ranges.size(); ++I)
    for (size_t J = I + 1; J < Ranges.size(); ++J) {
      if (!liveTogether(Ranges[I], Ranges[J]))
        continue;
      uint64_t AI = P.Offsets[I], AJ = P.Offsets[J];
      if (AI < AJ + slot(Ranges[J], Alignment) &&
          AJ < AI + slot(Ranges[I], Alignment))
        return "buffers " + std::to_string(I) + " and " + std::to_string(J) +
               " are live together and share bytes";
    }
  if (P.ArenaBytes > naiveBytes(Ranges, Alignment))
    return "arena " + std::to_string(P.ArenaBytes) + " exceeds the naive " +
           std::to_string(naiveBytes(Ranges, Alignment));
  if (P.ArenaBytes < lowerBound(Ranges, Alignment))
    return "arena below the bytes live at one time";
  return "";
}

/// The smallest arena, by trying every order of placing the buffers, each
/// at the lowest offset free of the buffers placed before it that live at
/// the same time (some order gives an optimal plan).
uint64_t optimalArena(llvm::ArrayRef<LiveRange> Ranges, uint64_t Alignment) {
  std::vector<size_t> Order(Ranges.size());
  std::iota(Order.begin(), Order.end(), 0);
  uint64_t Best = UINT64_MAX;
  do {
    std::vector<uint64_t> Off(Ranges.size());
    uint64_t Arena = 0;
    for (size_t K = 0; K < Order.size(); ++K) {
      size_t I = Order[K];
      uint64_t Size = slot(Ranges[I], Alignment);
      // Candidate offsets: 0 and the end of every placed buffer.
      std::vector<uint64_t> Cands = {0};
      for (size_t L = 0; L < K; ++L)
        Cands.push_back(Off[Order[L]] + slot(Ranges[Order[L]], Alignment));
      std::sort(Cands.begin(), Cands.end());
      for (uint64_t C : Cands) {
        bool Free = true;
        for (size_t L = 0; L < K && Free; ++L) {
          size_t J = Order[L];
          if (liveTogether(Ranges[I], Ranges[J]) &&
              C < Off[J] + slot(Ranges[J], Alignment) && Off[J] < C + Size)
            Free = false;
        }
        if (Free) {
          Off[I] = C;
          break;
        }
      }
      Arena = std::max(Arena, Off[I] + Size);
    }
    Best = std::min(Best, Arena);
  } while (std::next_permutation(Order.begin(), Order.end()));
  return Ranges.empty() ? 0 : Best;
}

std::vector<LiveRange> randomRanges(std::mt19937_64 &Rng, size_t N,
                                    int64_t Steps, uint64_t MaxBytes) {
  std::vector<LiveRange> R(N);
  std::uniform_int_distribution<int64_t> Time(-1, Steps);
  std::uniform_int_distribution<int64_t> Len(0,
                                             std::max<int64_t>(Steps / 4, 1));
  std::uniform_int_distribution<uint64_t> Bytes(0, MaxBytes);
  std::bernoulli_distribution Forever(0.05);
  for (LiveRange &L : R) {
    L.Start = Time(Rng);
    L.End = Forever(Rng) ? INT64_MAX / 4 : L.Start + Len(Rng);
    L.Bytes = Bytes(Rng);
  }
  return R;
}

//===----------------------------------------------------------------------===//
// Random live ranges
//===----------------------------------------------------------------------===//

TEST(MemoryPlannerTest, RandomRangesAreValid) {
  const size_t Sizes[] = {1, 2, 3, 5, 8, 17, 40, 100, 300};
  const uint64_t Alignments[] = {1, 8, 64, 256};
  for (uint64_t Seed = 1; Seed <= 40; ++Seed)
    for (size_t N : Sizes)
      for (uint64_t Align : Alignments) {
        std::mt19937_64 Rng(Seed * 1000003 + N * 31 + Align);
        int64_t Steps = int64_t(N) * (1 + int64_t(Seed % 3));
        uint64_t MaxBytes =
            Seed % 4 == 0 ? 16 : (Seed % 4 == 1 ? 5000 : 1 << 20);
        std::vector<LiveRange> R = randomRanges(Rng, N, Steps, MaxBytes);
        for (const NamedPlanner &P : Planners) {
          ArenaPlan Plan = P.Fn(R, Align);
          std::string Problem = validate(R, Plan, Align);
          EXPECT_EQ(Problem, "") << P.Name << ", seed " << Seed << ", " << N
                                 << " buffers, alignment " << Align;
        }
      }
}

TEST(MemoryPlannerTest, ArenaKeepsTheSmallerPlan) {
  for (uint64_t Seed = 1; Seed <= 200; ++Seed) {
    std::mt19937_64 Rng(Seed);
    size_t N = 1 + Seed % 60;
    std::vector<LiveRange> R = randomRanges(Rng, N, int64_t(N), 4096);
    ArenaPlan G = planGreedyBySize(R, 64);
    ArenaPlan B = planBestFitInOrder(R, 64);
    ArenaPlan A = planArena(R, 64);
    EXPECT_EQ(A.ArenaBytes, std::min(G.ArenaBytes, B.ArenaBytes))
        << "seed " << Seed;
    EXPECT_EQ(A.Method, G.ArenaBytes <= B.ArenaBytes ? G.Method : B.Method)
        << "seed " << Seed;
    EXPECT_EQ(validate(R, A, 64), "") << "seed " << Seed;
    // Over the limit only the in-order planner runs.
    ArenaPlan Limited = planArena(R, 64, /*GreedyLimit=*/N - 1);
    EXPECT_EQ(Limited.Method, "best-fit-in-order") << "seed " << Seed;
    EXPECT_EQ(Limited.ArenaBytes, B.ArenaBytes) << "seed " << Seed;
    EXPECT_EQ(Limited.Offsets, B.Offsets) << "seed " << Seed;
  }
}

TEST(MemoryPlannerTest, SmallRandomCasesAgainstTheOptimum) {
  for (uint64_t Seed = 1; Seed <= 300; ++Seed) {
    std::mt19937_64 Rng(Seed * 7919);
    size_t N = 1 + Seed % 6;
    std::vector<LiveRange> R = randomRanges(Rng, N, 6, 300);
    for (uint64_t Align : {uint64_t(1), uint64_t(64)}) {
      uint64_t Opt = optimalArena(R, Align);
      EXPECT_LE(lowerBound(R, Align), Opt);
      for (const NamedPlanner &P : Planners) {
        ArenaPlan Plan = P.Fn(R, Align);
        EXPECT_EQ(validate(R, Plan, Align), "") << P.Name << " seed " << Seed;
        EXPECT_GE(Plan.ArenaBytes, Opt) << P.Name << " seed " << Seed;
      }
    }
  }
}

TEST(MemoryPlannerTest, Deterministic) {
  std::mt19937_64 Rng(42);
  std::vector<LiveRange> R = randomRanges(Rng, 200, 150, 1 << 16);
  for (const NamedPlanner &P : Planners) {
    ArenaPlan A = P.Fn(R, 256), B = P.Fn(R, 256);
    EXPECT_EQ(A.Offsets, B.Offsets) << P.Name;
    EXPECT_EQ(A.ArenaBytes, B.ArenaBytes) << P.Name;
  }
}

//===----------------------------------------------------------------------===//
// Hand cases
//===----------------------------------------------------------------------===//

struct HandCase {
  const char *Name;
  std::vector<LiveRange> Ranges;
  uint64_t Alignment;
  uint64_t Optimal;
};

std::vector<HandCase> handCases() {
  return {
      {"empty", {}, 64, 0},
      {"one buffer, rounded up", {{0, 0, 100}}, 64, 128},
      {"a zero-byte buffer takes one aligned slot", {{0, 3, 0}}, 256, 256},
      {"all live together: the sum",
       {{0, 5, 100}, {1, 4, 200}, {2, 3, 300}},
       1,
       600},
      {"one after another: the largest",
       {{0, 0, 100}, {1, 1, 300}, {2, 2, 200}, {3, 3, 50}},
       1,
       300},
      {"a chain: the first and the third share",
       {{0, 1, 100}, {1, 2, 100}, {2, 3, 100}},
       1,
       200},
      {"the end is inclusive: touching ranges overlap",
       {{0, 2, 64}, {2, 4, 64}},
       64,
       128},
      {"a long buffer and short ones around it",
       {{0, 10, 1000}, {0, 1, 500}, {2, 3, 500}, {4, 5, 500}, {6, 10, 500}},
       1,
       1500},
      {"a large buffer reuses two freed small ones",
       {{0, 1, 100}, {0, 1, 100}, {2, 3, 200}},
       1,
       200},
      {"alignment pads every slot",
       {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}},
       256,
       768},
      {"live to the end of the step",
       {{-1, INT64_MAX / 4, 400},
        {0, 0, 300},
        {1, 1, 300},
        {2, INT64_MAX / 4, 100}},
       1,
       700},
  };
}

TEST(MemoryPlannerTest, HandCasesHaveTheirOptimum) {
  for (const HandCase &C : handCases()) {
    EXPECT_EQ(optimalArena(C.Ranges, C.Alignment), C.Optimal) << C.Name;
    for (const NamedPlanner &P : Planners) {
      ArenaPlan Plan = P.Fn(C.Ranges, C.Alignment);
      EXPECT_EQ(validate(C.Ranges, Plan, C.Alignment), "")
          << P.Name << ": " << C.Name;
      EXPECT_GE(Plan.ArenaBytes, C.Optimal) << P.Name << ": " << C.Name;
    }
    // planArena finds the optimum of every one of these.
    EXPECT_EQ(planArena(C.Ranges, C.Alignment).ArenaBytes, C.Optimal) << C.Name;
  }
}

TEST(MemoryPlannerTest, GreedyBySizePlacesTheLargestFirst) {
  // The largest buffer goes to offset 0; a smaller one live at the same
  // time above it; one live at another time reuses offset 0.
  std::vector<LiveRange> R = {{0, 1, 100}, {0, 1, 1000}, {2, 3, 700}};
  ArenaPlan P = planGreedyBySize(R, 1);
  EXPECT_EQ(P.Method, "greedy-by-size");
  EXPECT_EQ(P.Offsets[1], 0u);
  EXPECT_EQ(P.Offsets[0], 1000u);
  EXPECT_EQ(P.Offsets[2], 0u);
  EXPECT_EQ(P.ArenaBytes, 1100u);
}

TEST(MemoryPlannerTest, BestFitInOrderPicksTheSmallestFreeBlock) {
  // After t=0, blocks of 300 (at 0) and 100 (at 500) are free, with 200 in
  // between still live; a buffer of 100 goes to the 100-byte hole.
  std::vector<LiveRange> R = {
      {0, 0, 300}, {0, 5, 200}, {0, 0, 100}, {0, 5, 50}, {1, 2, 100}};
  ArenaPlan P = planBestFitInOrder(R, 1);
  EXPECT_EQ(P.Method, "best-fit-in-order");
  EXPECT_EQ(P.Offsets[0], 0u);
  EXPECT_EQ(P.Offsets[1], 300u);
  EXPECT_EQ(P.Offsets[2], 500u);
  EXPECT_EQ(P.Offsets[3], 600u);
  EXPECT_EQ(P.Offsets[4], 500u);
  EXPECT_EQ(P.ArenaBytes, 650u);
  EXPECT_EQ(validate(R, P, 1), "");
}

TEST(MemoryPlannerTest, BestFitInOrderCoalescesFreedNeighbours) {
  // Two neighbours freed at t=0 form one block large enough for the third.
  std::vector<LiveRange> R = {
      {0, 0, 100}, {0, 0, 100}, {0, 3, 100}, {1, 3, 200}};
  ArenaPlan P = planBestFitInOrder(R, 1);
  EXPECT_EQ(P.Offsets[3], 0u);
  EXPECT_EQ(P.ArenaBytes, 300u);
  EXPECT_EQ(validate(R, P, 1), "");
}

TEST(MemoryPlannerTest, AlignUp) {
  EXPECT_EQ(alignUp(0, 64), 0u);
  EXPECT_EQ(alignUp(1, 64), 64u);
  EXPECT_EQ(alignUp(64, 64), 64u);
  EXPECT_EQ(alignUp(65, 64), 128u);
  EXPECT_EQ(alignUp(255, 256), 256u);
  EXPECT_EQ(alignUp(7, 1), 7u);
}

} // namespace
