//===- StopSignalTest.cpp - Agreeing on a stop signal ---------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "StopSignal.h"

#include "gtest/gtest.h"

#include <csignal>
#include <vector>

using namespace mdrt;

namespace {

/// The signal the processes agree on when they got \p Signals (0: none),
/// their votes averaged as the runtime's means are.
int agree(const std::vector<int> &Signals) {
  double Means[3] = {0, 0, 0};
  for (int S : Signals) {
    std::array<double, 3> V = stopVotes(S);
    for (int I = 0; I < 3; ++I)
      Means[I] += V[I] / double(Signals.size());
  }
  return agreedStopSignal(Means);
}

TEST(StopSignalTest, NoneStopped) {
  EXPECT_EQ(agree({0}), 0);
  EXPECT_EQ(agree({0, 0, 0}), 0);
}

TEST(StopSignalTest, OneSignal) {
  EXPECT_EQ(agree({SIGINT}), SIGINT);
  EXPECT_EQ(agree({0, SIGINT}), SIGINT);
  EXPECT_EQ(agree({SIGTERM, 0, SIGTERM}), SIGTERM);
  EXPECT_EQ(agree({0, 0, 0, 0, 0, 0, SIGHUP}), SIGHUP);
}

TEST(StopSignalTest, DifferentSignalsGiveSigterm) {
  EXPECT_EQ(agree({SIGINT, SIGTERM}), SIGTERM);
  // Their mean is a signal too (SIGINT): not taken for it.
  EXPECT_EQ(agree({SIGHUP, SIGQUIT}), SIGTERM);
  EXPECT_EQ(agree({SIGHUP, 0, SIGQUIT, 0, 0}), SIGTERM);
  EXPECT_EQ(agree({SIGINT, SIGINT, SIGINT, SIGHUP}), SIGTERM);
}

} // namespace
