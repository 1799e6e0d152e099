//===- Notifier.h - Spin briefly, then sleep, until a condition -*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime. The executor's threads hand work to each other
// several times a step: the caller starts the device threads, a device
// waits for a kernel of another, the caller waits for the devices. Woken
// from a futex, a thread starts tens of microseconds later on a busy
// machine, which for a GPU is tens of microseconds idle per hand-off. So a
// waiter first polls the condition for a short while (most hand-offs come
// within it), and only then sleeps on a condition variable; and a notifier
// takes the mutex and wakes only when someone sleeps.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_NOTIFIER_H
#define MDRT_LIB_NOTIFIER_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace mdrt {

/// Waiters for a condition that the state's writers announce with
/// notify(). The state itself lives elsewhere, in atomics: a waiter's
/// predicate reads them, a writer changes them and then calls notify().
class Notifier {
public:
  /// Returns once \p Ready() holds: polls it for \p Spin (yielding the core
  /// now and then, so that a busy machine runs the thread that is to make
  /// it true), then sleeps until a notify() after which it holds.
  template <typename Pred>
  void wait(Pred &&Ready, std::chrono::microseconds Spin) {
    using Clock = std::chrono::steady_clock;
    if (Ready())
      return;
    if (Spin.count() > 0) {
      const Clock::time_point Until = Clock::now() + Spin;
      for (unsigned I = 1;; ++I) {
        if (Ready())
          return;
        if (I % 64 == 0) {
          if (Clock::now() >= Until)
            break;
          std::this_thread::yield();
        }
      }
    }
    std::unique_lock<std::mutex> L(M);
    Sleepers.fetch_add(1, std::memory_order_relaxed);
    // Pairs with the fence in notify(): either this thread sees the new
    // state, or the notifier sees it sleeping (store-buffering order).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    CV.wait(L, Ready);
    Sleepers.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Wakes the sleepers. Call after the state change that makes their
  /// condition true.
  void notify() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (Sleepers.load(std::memory_order_relaxed) == 0)
      return;
    // A sleeper holds the mutex from its last check of the condition
    // until it sleeps: taking it here orders the notification after.
    { std::lock_guard<std::mutex> L(M); }
    CV.notify_all();
  }

private:
  std::mutex M;
  std::condition_variable CV;
  std::atomic<unsigned> Sleepers{0};
};

} // namespace mdrt

#endif // MDRT_LIB_NOTIFIER_H
