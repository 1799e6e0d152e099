//===- Geometry.h - Windows of GPU convolutions, pooling --------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code (no CUDA
// header): the window geometry the convolution and pooling kernels share,
// taken from lib/cpu's (one definition of padding and checks).
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_GEOMETRY_H
#define MDRT_LIB_CUDA_GEOMETRY_H

#include "../KernelChecks.h"
#include "mdrt/HostDevice.h"

#include <cstdint>

namespace mdrt {
namespace cuda {

/// A convolution's or pooling's window geometry on NHWC images (as lib/cpu
/// pads: TensorFlow's SAME / VALID, or explicit padding): the input is
/// N x H x W x C, the output N x OH x OW x Co, the window KH x KW with
/// strides SH, SW and padding PT (top), PB, PL (left), PR.
struct Geometry {
  int64_t N = 0, H = 0, W = 0, C = 0, KH = 1, KW = 1, OH = 0, OW = 0, Co = 0;
  int64_t SH = 1, SW = 1, PT = 0, PL = 0, PB = 0, PR = 0;
};

/// \p G from lib/cpu's geometry (one definition of padding and checks).
inline void fromWindow(const cpu::Window2D &Win, Geometry &G) {
  G.N = Win.N;
  G.C = Win.C;
  G.H = Win.H.In;
  G.W = Win.W.In;
  G.KH = Win.H.K;
  G.KW = Win.W.K;
  G.SH = Win.H.Stride;
  G.SW = Win.W.Stride;
  G.OH = Win.H.Out;
  G.OW = Win.W.Out;
  G.PT = Win.H.PadBefore;
  G.PB = Win.H.PadAfter;
  G.PL = Win.W.PadBefore;
  G.PR = Win.W.PadAfter;
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_GEOMETRY_H
