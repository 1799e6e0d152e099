//===- StopSignal.h - The stop signal processes agree on --------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime. The processes of a run stop after the same step
// when any of them gets a stop signal (TrainOptions::Stop), and report the
// same signal: the one the processes that stopped got, or SIGTERM where
// they got different ones. The agreement rides on the means the processes
// compute anyway (a step's outputs): each adds its votes, and the means of
// the votes say whether some process stopped and whether all that stopped
// got one signal (the variance of their signals is 0).
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_STOPSIGNAL_H
#define MDRT_LIB_STOPSIGNAL_H

#include <array>
#include <cmath>
#include <csignal>

namespace mdrt {

/// A process's votes for the signal it stopped by (\p Signal, 0 if none):
/// whether it stopped, the signal, and the signal squared. Take \p Signal
/// from one read of the stop flag (a signal may arrive in between).
inline std::array<double, 3> stopVotes(int Signal) {
  return {double(Signal != 0), double(Signal), double(Signal) * double(Signal)};
}

/// The signal agreed from the votes summed (or averaged: only ratios count)
/// over the processes: 0 when none stopped, the signal when every process
/// that stopped got the same one, SIGTERM otherwise.
inline int agreedStopSignal(const double *Votes) {
  double Stopped = Votes[0];
  if (Stopped <= 0)
    return 0;
  double Mean = Votes[1] / Stopped;
  double Variance = Votes[2] / Stopped - Mean * Mean;
  if (std::abs(Variance) < 1e-6 && std::abs(Mean - std::round(Mean)) < 1e-6)
    return int(std::lround(Mean));
  return SIGTERM;
}

} // namespace mdrt

#endif // MDRT_LIB_STOPSIGNAL_H
