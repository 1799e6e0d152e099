//===- Broadcast.h - Broadcasting binary ops on GPUs ------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code, so that the
// CPU unit tests check the GPU's broadcasting against the CPU's
// (unittests/runtime/kernels/BroadcastMathTest.cpp): a broadcast planned
// as lib/cpu plans it (collapsed dimensions and the inputs' strides along
// them), and the offsets of an output element in the inputs.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_BROADCAST_H
#define MDRT_LIB_CUDA_BROADCAST_H

#include "Geometry.h"

#include <string>
#include <vector>

namespace mdrt {
namespace cuda {

constexpr int MaxBroadcastRank = 8;

/// Collapsed output dimensions (outermost first) and the inputs' element
/// strides along them (0: broadcast), as lib/cpu plans them.
struct Bcast {
  int R = 1;
  int64_t Dims[MaxBroadcastRank] = {1}, SA[MaxBroadcastRank] = {0},
          SB[MaxBroadcastRank] = {0};
  int64_t N = 0;
  /// BroadcastGrad: B is this constant.
  double ConstB = 0;
};

/// \p P from the backends' shared plan (KernelChecks.h).
inline Status planBroadcast(const std::vector<int64_t> &Out,
                            const std::vector<int64_t> &A,
                            const std::vector<int64_t> &B, Bcast &P) {
  cpu::BroadcastPlan Plan;
  MDRT_RETURN_IF_ERROR(Plan.init(Out, A, B));
  if (Plan.Dims.size() > size_t(MaxBroadcastRank))
    return Status::error("broadcast of rank " +
                         std::to_string(Plan.Dims.size()) +
                         " is not supported on GPUs");
  P.N = Plan.N;
  P.R = int(Plan.Dims.size());
  for (int D = 0; D < P.R; ++D) {
    P.Dims[D] = Plan.Dims[size_t(D)];
    P.SA[D] = Plan.SA[size_t(D)];
    P.SB[D] = Plan.SB[size_t(D)];
  }
  return Status::ok();
}

/// The offsets in A and B of output element \p I of \p P, with indices of
/// type \p Idx (32-bit where int32Indexable(P.N): offsets into A and B stay
/// below N). One collapsed dimension (same shapes, or a scalar operand)
/// needs no division.
template <typename Idx>
MDRT_HOST_DEVICE inline void broadcastOffsets(const Bcast &P, Idx I, Idx &OA,
                                              Idx &OB) {
  if (P.R == 1) {
    OA = I * Idx(P.SA[0]);
    OB = I * Idx(P.SB[0]);
    return;
  }
  OA = 0;
  OB = 0;
  Idx R = I;
  for (int D = P.R - 1; D >= 0; --D) {
    const Idx Dim = Idx(P.Dims[D]);
    const Idx Q = R % Dim;
    R /= Dim;
    OA += Q * Idx(P.SA[D]);
    OB += Q * Idx(P.SB[D]);
  }
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_BROADCAST_H
