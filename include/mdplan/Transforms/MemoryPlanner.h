//===- MemoryPlanner.h - Offsets for buffers with lifetimes -----*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Assigns each buffer an offset in one arena so that buffers whose lifetimes
// overlap never share bytes, keeping the arena small. Two methods: greedy by
// decreasing size with best-fit gaps (TFLite's), for up to a few thousand
// buffers, and an allocator simulated in schedule order with best-fit free
// blocks, O(n log n), for any size. planArena() runs what fits and keeps the
// smaller arena.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_TRANSFORMS_MEMORYPLANNER_H
#define MDPLAN_TRANSFORMS_MEMORYPLANNER_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mdplan {

/// A buffer live from step Start to step End, both included.
struct LiveRange {
  int64_t Start = 0;
  int64_t End = 0;
  uint64_t Bytes = 0;
};

struct ArenaPlan {
  std::vector<uint64_t> Offsets;
  uint64_t ArenaBytes = 0;
  std::string Method;
};

/// Greedy by decreasing size, each buffer in the best-fitting gap among the
/// placed buffers that overlap it in time. Quadratic in the worst case.
ArenaPlan planGreedyBySize(llvm::ArrayRef<LiveRange> Ranges,
                           uint64_t Alignment);

/// Walks time in order, freeing buffers after their last use and placing
/// new ones in the smallest free block that fits (coalescing neighbours).
ArenaPlan planBestFitInOrder(llvm::ArrayRef<LiveRange> Ranges,
                             uint64_t Alignment);

/// Both methods when there are at most \p GreedyLimit buffers, else the
/// in-order one; the smaller arena wins.
ArenaPlan planArena(llvm::ArrayRef<LiveRange> Ranges, uint64_t Alignment,
                    size_t GreedyLimit = 4096);

/// Rounds \p V up to a multiple of \p Alignment (a power of two).
inline uint64_t alignUp(uint64_t V, uint64_t Alignment) {
  return (V + Alignment - 1) & ~(Alignment - 1);
}

} // namespace mdplan

#endif // MDPLAN_TRANSFORMS_MEMORYPLANNER_H
