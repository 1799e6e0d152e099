//===- AbortableWait.h - Waiting for work a peer can block ------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A collective that one participant never joins blocks the others forever:
// an NCCL all-reduce enqueued on a GPU waits in the kernel for the ranks
// that failed before enqueuing theirs. A device that takes part in such a
// collective therefore does not block in cudaStreamSynchronize; it polls its
// stream, asks between polls whether the wait has become hopeless (a peer
// failed, the communicator reports an error), and if so aborts the
// collective, which lets the stream drain, and reports why.
//
// Private to the runtime's sources; free of CUDA so that the loop is
// unit-tested on any machine.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_ABORTABLEWAIT_H
#define MDRT_LIB_ABORTABLEWAIT_H

#include "mdrt/Status.h"

#include <chrono>
#include <optional>
#include <thread>

namespace mdrt {

/// How waitOrAbort() polls.
struct PollPolicy {
  /// Polls back to back (yielding the core between them) for this long,
  /// then sleeps Sleep between polls: short steps see no added latency,
  /// long waits do not keep a core busy.
  std::chrono::microseconds SpinFor{2000};
  std::chrono::microseconds Sleep{20};
  /// How often the (costlier) hopelessness check runs.
  std::chrono::microseconds CheckEvery{1000};
};

/// Waits for asynchronous work. \p Query says whether it finished: nullopt
/// while it runs, else its own result. Every PollPolicy::CheckEvery,
/// \p Hopeless says whether it can still finish: a non-ok Status (the
/// reason) means it cannot; the first time, \p Abort is called, which must
/// make the work finish (an aborted collective), and the wait goes on until
/// \p Query reports the end. Returns the reason, or else \p Query's
/// result. \p Abort runs at most once.
template <typename QueryFn, typename HopelessFn, typename AbortFn>
Status waitOrAbort(QueryFn &&Query, HopelessFn &&Hopeless, AbortFn &&Abort,
                   const PollPolicy &Policy = PollPolicy()) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point Start = Clock::now();
  Clock::time_point NextCheck = Start;
  std::optional<Status> Reason;
  for (;;) {
    std::optional<Status> Done = Query();
    if (Done)
      return Reason ? *Reason : *Done;
    Clock::time_point Now = Clock::now();
    if (!Reason && Now >= NextCheck) {
      Status Why = Hopeless();
      if (!Why.isOk()) {
        Reason = Why;
        Abort();
        continue;
      }
      NextCheck = Now + Policy.CheckEvery;
    }
    if (Now - Start < Policy.SpinFor)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(Policy.Sleep);
  }
}

} // namespace mdrt

#endif // MDRT_LIB_ABORTABLEWAIT_H
