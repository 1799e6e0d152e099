//===- NotifierTest.cpp - Spin, then sleep, until a condition ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The executor's hand-offs between threads (Notifier.h). A lost wake-up
// hangs the executor, so every test here runs under a watchdog that fails
// it instead.
//
//===----------------------------------------------------------------------===//

#include "Notifier.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

using namespace mdrt;
using std::chrono::microseconds;

namespace {

/// Runs \p Body on a thread and fails if it has not returned after a
/// minute (a lost wake-up), detaching it so that the suite goes on.
template <typename Fn> void withinAMinute(Fn Body) {
  std::packaged_task<void()> Task(Body);
  std::future<void> Done = Task.get_future();
  std::thread T(std::move(Task));
  if (Done.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
    T.detach();
    FAIL() << "a waiter was never woken";
  }
  T.join();
}

TEST(Notifier, ReturnsAtOnceWhenTheConditionHolds) {
  Notifier N;
  int Checks = 0;
  N.wait(
      [&] {
        ++Checks;
        return true;
      },
      microseconds(0));
  EXPECT_EQ(Checks, 1);
}

TEST(Notifier, NotifyWithoutSleepersIsHarmless) {
  Notifier N;
  N.notify();
  std::atomic<bool> Flag{true};
  N.wait([&] { return Flag.load(); }, microseconds(0));
}

/// Two threads pass a token back and forth; each waits for its turn. With
/// no spinning every hand-off goes through the sleeping path.
void pingPong(microseconds Spin, int Rounds) {
  Notifier N;
  std::atomic<int> Turn{0};
  std::thread Other([&] {
    for (int R = 0; R < Rounds; ++R) {
      N.wait([&] { return Turn.load(std::memory_order_acquire) == 2 * R + 1; },
             Spin);
      Turn.store(2 * R + 2, std::memory_order_release);
      N.notify();
    }
  });
  for (int R = 0; R < Rounds; ++R) {
    Turn.store(2 * R + 1, std::memory_order_release);
    N.notify();
    N.wait([&] { return Turn.load(std::memory_order_acquire) == 2 * R + 2; },
           Spin);
  }
  Other.join();
  EXPECT_EQ(Turn.load(), 2 * Rounds);
}

TEST(Notifier, PingPongSleeping) {
  withinAMinute([] { pingPong(microseconds(0), 20000); });
}

TEST(Notifier, PingPongSpinning) {
  withinAMinute([] { pingPong(microseconds(50), 20000); });
}

/// A waiter that has gone to sleep is woken by the next notify().
TEST(Notifier, WakesASleepingWaiter) {
  withinAMinute([] {
    Notifier N;
    std::atomic<bool> Flag{false};
    std::thread Waiter(
        [&] { N.wait([&] { return Flag.load(); }, microseconds(0)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Flag.store(true);
    N.notify();
    Waiter.join();
  });
}

/// Several waiters on one notifier, each for its own counter value, as the
/// executor's devices wait for each other's kernels.
TEST(Notifier, ManyWaitersEachForItsOwnCondition) {
  withinAMinute([] {
    Notifier N;
    std::atomic<int> Count{0};
    const int Threads = 4, Rounds = 2000;
    std::vector<std::thread> Ts;
    for (int T = 0; T < Threads; ++T)
      Ts.emplace_back([&, T] {
        for (int R = 0; R < Rounds; ++R) {
          // Thread T moves the count from R * Threads + T to the next.
          N.wait(
              [&] {
                return Count.load(std::memory_order_acquire) == R * Threads + T;
              },
              microseconds(T % 2 ? 20 : 0));
          Count.fetch_add(1, std::memory_order_acq_rel);
          N.notify();
        }
      });
    for (std::thread &T : Ts)
      T.join();
    EXPECT_EQ(Count.load(), Threads * Rounds);
  });
}

} // namespace
