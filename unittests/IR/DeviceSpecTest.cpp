//===- DeviceSpecTest.cpp - Device spec parsing, printing, merging --------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeviceSpec.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

std::string canon(llvm::StringRef S) {
  auto D = DeviceSpec::parse(S);
  if (!D) {
    llvm::consumeError(D.takeError());
    return "<error>";
  }
  return D->toString();
}

TEST(DeviceSpecTest, SemanticsExamples) {
  EXPECT_EQ(canon("/cpu:0"), "/device:CPU:0");
  EXPECT_EQ(canon("/replica:0/job:foo"), "/job:foo/replica:0");
  EXPECT_EQ(canon("/job:ps/device:CPU:0/task:0"), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(canon("gpu"), "/device:GPU:*");
}

} // namespace
