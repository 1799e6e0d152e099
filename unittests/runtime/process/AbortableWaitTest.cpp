//===- AbortableWaitTest.cpp - The wait that aborts hopeless collectives --===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// waitOrAbort() is the loop a GPU device in an NCCL collective waits with
// (lib/cuda/CudaDevice.cpp); here the stream, the peers and the abort are
// fakes, so every path runs without a GPU.
//
//===----------------------------------------------------------------------===//

#include "AbortableWait.h"

#include "gtest/gtest.h"

#include <atomic>
#include <thread>

using namespace mdrt;

namespace {

/// Checks on every poll, never sleeps long: the tests count polls.
PollPolicy eager() {
  PollPolicy P;
  P.SpinFor = std::chrono::microseconds(0);
  P.Sleep = std::chrono::microseconds(1);
  P.CheckEvery = std::chrono::microseconds(0);
  return P;
}

TEST(AbortableWait, FinishedWorkReturnsItsResultWithoutAborting) {
  int Polls = 0, Aborts = 0;
  Status S = waitOrAbort(
      [&]() -> std::optional<Status> {
        return ++Polls < 5 ? std::nullopt : std::optional<Status>(Status::ok());
      },
      [] { return Status::ok(); }, [&] { ++Aborts; }, eager());
  EXPECT_TRUE(S.isOk());
  EXPECT_EQ(Polls, 5);
  EXPECT_EQ(Aborts, 0);
}

TEST(AbortableWait, TheWorksOwnErrorIsReported) {
  Status S = waitOrAbort(
      []() -> std::optional<Status> {
        return Status::error("cuda error in cudaStreamQuery: an illegal "
                             "memory access was encountered");
      },
      [] {
        ADD_FAILURE() << "a finished wait asks nothing more";
        return Status::ok();
      },
      [] { ADD_FAILURE() << "nothing to abort"; }, eager());
  EXPECT_EQ(S.message(), "cuda error in cudaStreamQuery: an illegal memory "
                         "access was encountered");
}

TEST(AbortableWait, AHopelessWaitAbortsOnceAndReportsWhy) {
  // The work finishes only once aborted (an NCCL kernel waiting for a peer
  // that never came); the reason wins over the drained stream's result.
  bool Aborted = false;
  int Aborts = 0, Checks = 0, PollsAfterAbort = 0;
  Status S = waitOrAbort(
      [&, Polls = 0]() mutable -> std::optional<Status> {
        if (!Aborted)
          // Fails (instead of hanging) if the wait never aborts.
          return ++Polls < 1000000
                     ? std::nullopt
                     : std::optional<Status>(Status::error("never aborted"));
        if (++PollsAfterAbort < 3)
          return std::nullopt;
        return Status::ok();
      },
      [&] {
        return ++Checks < 4 ? Status::ok()
                            : Status::error("GPU:1 failed: nccl error in "
                                            "ncclAllReduce: invalid argument");
      },
      [&] {
        ++Aborts;
        Aborted = true;
      },
      eager());
  EXPECT_EQ(S.message(),
            "GPU:1 failed: nccl error in ncclAllReduce: invalid argument");
  EXPECT_EQ(Aborts, 1);
  EXPECT_EQ(Checks, 4) << "no check after the abort";
  EXPECT_EQ(PollsAfterAbort, 3) << "the wait goes on until the work ends";
}

TEST(AbortableWait, ChecksAreSpacedByThePolicy) {
  // With a check interval far longer than the wait, only the first poll's
  // check runs.
  PollPolicy P = eager();
  P.CheckEvery = std::chrono::hours(1);
  int Polls = 0, Checks = 0;
  Status S = waitOrAbort(
      [&]() -> std::optional<Status> {
        return ++Polls < 100 ? std::nullopt
                             : std::optional<Status>(Status::ok());
      },
      [&] {
        ++Checks;
        return Status::ok();
      },
      [] {}, P);
  EXPECT_TRUE(S.isOk());
  EXPECT_EQ(Checks, 1);
}

TEST(AbortableWait, APeerFailingOnAnotherThreadUnblocksTheWait) {
  // The shape of the real use: a device thread waits for its all-reduce;
  // another participant's thread records its failure; the abort drains the
  // waiting stream.
  std::atomic<bool> PeerFailed{false}, Drained{false};
  Status Result;
  std::thread Waiter([&] {
    Result = waitOrAbort(
        [&, Polls = 0]() mutable -> std::optional<Status> {
          if (!Drained.load())
            return ++Polls < 10000000
                       ? std::nullopt
                       : std::optional<Status>(Status::error("never aborted"));
          return Status::ok();
        },
        [&] {
          return PeerFailed.load() ? Status::error("GPU:0 failed")
                                   : Status::ok();
        },
        [&] { Drained.store(true); }, eager());
  });
  PeerFailed.store(true);
  Waiter.join();
  EXPECT_EQ(Result.message(), "GPU:0 failed");
}

} // namespace
