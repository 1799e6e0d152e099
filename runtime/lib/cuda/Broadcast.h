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

inline Status broadcastStrides(const std::vector<int64_t> &Out,
                               const std::vector<int64_t> &In,
                               std::vector<int64_t> &Strides) {
  size_t R = Out.size();
  if (In.size() > R)
    return Status::error("cannot broadcast " + cpu::shapeStr(In) + " to " +
                         cpu::shapeStr(Out));
  Strides.assign(R, 0);
  int64_t S = 1;
  for (size_t K = R; K-- > 0;) {
    size_t J = K + In.size();
    if (J < R)
      continue;
    int64_t D = In[J - R];
    if (D != Out[K] && D != 1)
      return Status::error("cannot broadcast " + cpu::shapeStr(In) + " to " +
                           cpu::shapeStr(Out));
    Strides[K] = D == 1 ? 0 : S;
    S *= D;
  }
  return Status::ok();
}

inline Status planBroadcast(const std::vector<int64_t> &Out,
                            const std::vector<int64_t> &A,
                            const std::vector<int64_t> &B, Bcast &P) {
  std::vector<int64_t> StA, StB;
  MDRT_RETURN_IF_ERROR(broadcastStrides(Out, A, StA));
  MDRT_RETURN_IF_ERROR(broadcastStrides(Out, B, StB));
  P.N = 1;
  for (int64_t D : Out)
    P.N *= D;
  std::vector<int64_t> Dims, SA, SB;
  for (size_t K = Out.size(); K-- > 0;) {
    if (Out[K] == 1)
      continue;
    if (!Dims.empty() && StA[K] == SA.back() * Dims.back() &&
        StB[K] == SB.back() * Dims.back()) {
      Dims.back() *= Out[K];
      continue;
    }
    Dims.push_back(Out[K]);
    SA.push_back(StA[K]);
    SB.push_back(StB[K]);
  }
  if (Dims.empty()) {
    Dims.push_back(1);
    SA.push_back(0);
    SB.push_back(0);
  }
  if (Dims.size() > size_t(MaxBroadcastRank))
    return Status::error("broadcast of rank " + std::to_string(Dims.size()) +
                         " is not supported on GPUs");
  P.R = int(Dims.size());
  for (int D = 0; D < P.R; ++D) {
    P.Dims[D] = Dims[size_t(P.R - 1 - D)];
    P.SA[D] = SA[size_t(P.R - 1 - D)];
    P.SB[D] = SB[size_t(P.R - 1 - D)];
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
