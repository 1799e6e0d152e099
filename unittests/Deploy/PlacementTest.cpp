//===- PlacementTest.cpp - The device-stack walk --------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/OpRegistry.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

TEST(PlacementTest, InnerSpecWins) {
  Graph G;
  DeviceEntry Outer;
  Outer.Spec = *DeviceSpec::parse("/job:w/device:CPU:1");
  const DeviceStack *S = G.pushStack(G.getRootStack(), G.createEntry(Outer));
  Node *N = G.createNode("n", opDef(OpKind::NoOp));
  N->setStack(S);
  N->setRequestedDevice(*DeviceSpec::parse("/gpu"));
  EXPECT_EQ(walkDeviceStack(*N).toString(), "/job:w/device:GPU:1");
}

} // namespace
