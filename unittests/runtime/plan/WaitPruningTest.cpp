//===- WaitPruningTest.cpp - Waits implied by a device's order ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The executor's rule (runtime/lib/WaitPruning.h): of several waits for
// in-order slots of one device only the last in that device's list stays;
// waits for other devices, for collectives and for transfers between
// processes stay as they are.
//
//===----------------------------------------------------------------------===//

#include "WaitPruning.h"

#include "gtest/gtest.h"

using namespace mdrt;

namespace {

using Ids = std::vector<uint32_t>;

/// Device 0: slots 0-3 in order; device 1: slots 4-6, of which 5 is a
/// collective; slot 7 is device 2's.
std::vector<WaitedSlot> slots() {
  return {{0, 0, true}, {0, 1, true},  {0, 2, true}, {0, 3, true},
          {1, 0, true}, {1, 1, false}, {1, 2, true}, {2, 0, true}};
}

TEST(WaitPruning, KeepsTheLastSlotOfEachDevice) {
  // The mirrored plan's global-step update waiting for the updates.
  EXPECT_EQ(pruneImpliedWaits({0, 1, 2, 3}, slots()), Ids({3}));
  // The plan's order of the waits does not matter.
  EXPECT_EQ(pruneImpliedWaits({3, 1, 2}, slots()), Ids({3}));
  EXPECT_EQ(pruneImpliedWaits({2, 0, 6, 4}, slots()), Ids({2, 6}));
}

TEST(WaitPruning, KeepsOtherDevicesAndOutOfOrderSlots) {
  EXPECT_EQ(pruneImpliedWaits({0, 4, 7}, slots()), Ids({0, 4, 7}));
  // A collective may finish after later slots of its device: its wait
  // stays beside the one for the device's last in-order slot.
  EXPECT_EQ(pruneImpliedWaits({4, 5, 6}, slots()), Ids({5, 6}));
  EXPECT_EQ(pruneImpliedWaits({5}, slots()), Ids({5}));
}

TEST(WaitPruning, LeavesSingleAndNoWaits) {
  EXPECT_EQ(pruneImpliedWaits({}, slots()), Ids());
  EXPECT_EQ(pruneImpliedWaits({2}, slots()), Ids({2}));
  EXPECT_EQ(pruneImpliedWaits({2, 2}, slots()), Ids({2, 2}));
}

} // namespace
