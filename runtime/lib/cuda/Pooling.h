//===- Pooling.h - One element of max pooling and its gradient --*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code, so that the
// CPU unit tests check what the GPU's pooling kernels compute, with 32-bit
// and 64-bit indices, against the CPU kernels
// (unittests/runtime/kernels/PoolingMathTest.cpp). The gradient of a window
// goes to its first maximum in row-major order (the CPU's tie rule) and a
// pixel's gradient adds its windows' in window order (the order in which
// the CPU scatters them), so both give the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_POOLING_H
#define MDRT_LIB_CUDA_POOLING_H

#include "Geometry.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace mdrt {
namespace cuda {

/// \p G with indices of type \p Idx (int32_t where poolingFitsInt32).
template <typename Idx> struct WindowAs {
  Idx N, H, W, C, KH, KW, OH, OW, SH, SW, PT, PL;
  explicit WindowAs(const Geometry &G)
      : N(Idx(G.N)), H(Idx(G.H)), W(Idx(G.W)), C(Idx(G.C)), KH(Idx(G.KH)),
        KW(Idx(G.KW)), OH(Idx(G.OH)), OW(Idx(G.OW)), SH(Idx(G.SH)),
        SW(Idx(G.SW)), PT(Idx(G.PT)), PL(Idx(G.PL)) {}
};

/// Whether 32-bit indices hold every index, window position and bound
/// (H + PT + SH, ...) of \p G's kernels: tensors of at most 2^30 elements
/// and window attributes of at most 2^28 (grids of at most 2^27 threads
/// add their stride to an index below 2^30).
inline bool poolingFitsInt32(const Geometry &G) {
  constexpr int64_t Elements = int64_t(1) << 30, Small = int64_t(1) << 28;
  return G.N * G.H * G.W * G.C <= Elements &&
         G.N * G.OH * G.OW * G.C <= Elements &&
         std::max({G.KH, G.KW, G.SH, G.SW, G.PT, G.PB, G.PL, G.PR}) <= Small;
}

/// Whether the windows tile the input exactly (stride = window, no
/// padding, no remainder; 2x2 pooling of even sizes): the gradient can then
/// be written a window at a time (maxPoolGradTiledAt).
inline bool poolingTiles(const Geometry &G) {
  return G.SH == G.KH && G.SW == G.KW && G.PT == 0 && G.PL == 0 &&
         G.OH * G.SH == G.H && G.OW * G.SW == G.W;
}

/// Where a window's maximum starts: the lowest finite value, as oneDNN's
/// pooling and TensorFlow's CPU kernels start (a window of NaNs only, or
/// of -infinity only, gives it).
template <typename T> MDRT_HOST_DEVICE constexpr T poolingLowest();
template <> MDRT_HOST_DEVICE constexpr float poolingLowest<float>() {
  return -FLT_MAX;
}
template <> MDRT_HOST_DEVICE constexpr double poolingLowest<double>() {
  return -DBL_MAX;
}

/// Output element \p I of max pooling (poolingLowest for a window of
/// padding only).
template <typename T, typename Idx>
MDRT_HOST_DEVICE inline T maxPoolAt(const WindowAs<Idx> &G, const T *X, Idx I) {
  Idx Cc = I % G.C, R = I / G.C;
  Idx Ow = R % G.OW;
  R /= G.OW;
  Idx Oh = R % G.OH, Img = R / G.OH;
  T Best = poolingLowest<T>();
  for (Idx Kh = 0; Kh < G.KH; ++Kh) {
    Idx Ih = Oh * G.SH - G.PT + Kh;
    if (Ih < 0 || Ih >= G.H)
      continue;
    for (Idx Kw = 0; Kw < G.KW; ++Kw) {
      Idx Iw = Ow * G.SW - G.PL + Kw;
      if (Iw < 0 || Iw >= G.W)
        continue;
      T V = X[((Img * G.H + Ih) * G.W + Iw) * G.C + Cc];
      Best = V > Best ? V : Best;
    }
  }
  return Best;
}

/// The input pixel (Ih * W + Iw) holding the first maximum of window
/// (Oh, Ow) in channel Cc, or -1 for a window of padding only. From
/// poolingLowest, as maxPoolAt: a NaN never wins (the window's first pixel
/// when none is above the lowest finite value).
template <typename T, typename Idx>
MDRT_HOST_DEVICE inline Idx windowArgMax(const WindowAs<Idx> &G, const T *XImg,
                                         Idx Oh, Idx Ow, Idx Cc) {
  Idx Arg = -1;
  T Best = poolingLowest<T>();
  for (Idx Kh = 0; Kh < G.KH; ++Kh) {
    Idx Ih = Oh * G.SH - G.PT + Kh;
    if (Ih < 0 || Ih >= G.H)
      continue;
    for (Idx Kw = 0; Kw < G.KW; ++Kw) {
      Idx Iw = Ow * G.SW - G.PL + Kw;
      if (Iw < 0 || Iw >= G.W)
        continue;
      T V = XImg[(Ih * G.W + Iw) * G.C + Cc];
      if (Arg < 0)
        Arg = Ih * G.W + Iw;
      if (V > Best) {
        Best = V;
        Arg = Ih * G.W + Iw;
      }
    }
  }
  return Arg;
}

/// Element \p I of dx: the sum of dy over the windows whose first maximum
/// is that pixel, in window order.
template <typename T, typename Idx>
MDRT_HOST_DEVICE inline T maxPoolGradAt(const WindowAs<Idx> &G, const T *X,
                                        const T *DY, Idx I) {
  Idx Cc = I % G.C, R = I / G.C;
  Idx Iw = R % G.W;
  R /= G.W;
  Idx Ih = R % G.H, Img = R / G.H;
  const T *XImg = X + Img * G.H * G.W * G.C;
  const Idx Pix = Ih * G.W + Iw;
  // Windows containing (Ih, Iw): Oh*SH - PT <= Ih <= Oh*SH - PT + KH - 1.
  Idx OhLo = Ih + G.PT - G.KH + 1, OwLo = Iw + G.PL - G.KW + 1;
  OhLo = OhLo <= 0 ? 0 : (OhLo + G.SH - 1) / G.SH;
  OwLo = OwLo <= 0 ? 0 : (OwLo + G.SW - 1) / G.SW;
  Idx OhHi = (Ih + G.PT) / G.SH, OwHi = (Iw + G.PL) / G.SW;
  T Acc = 0;
  for (Idx Oh = OhLo; Oh <= OhHi && Oh < G.OH; ++Oh)
    for (Idx Ow = OwLo; Ow <= OwHi && Ow < G.OW; ++Ow)
      if (windowArgMax<T, Idx>(G, XImg, Oh, Ow, Cc) == Pix)
        Acc += DY[((Img * G.OH + Oh) * G.OW + Ow) * G.C + Cc];
  return Acc;
}

/// The gradient of window \p I (an element of dy) where poolingTiles:
/// dy at its first maximum, 0 at its other pixels (what maxPoolGradAt
/// gives them, with one argmax per window instead of one per pixel).
template <typename T, typename Idx>
MDRT_HOST_DEVICE inline void maxPoolGradTiledAt(const WindowAs<Idx> &G,
                                                const T *X, const T *DY, T *DX,
                                                Idx I) {
  Idx Cc = I % G.C, R = I / G.C;
  Idx Ow = R % G.OW;
  R /= G.OW;
  Idx Oh = R % G.OH, Img = R / G.OH;
  const Idx Off = Img * G.H * G.W * G.C;
  const Idx Arg = windowArgMax<T, Idx>(G, X + Off, Oh, Ow, Cc);
  const T D = DY[I];
  for (Idx Kh = 0; Kh < G.KH; ++Kh)
    for (Idx Kw = 0; Kw < G.KW; ++Kw) {
      Idx Pix = (Oh * G.SH + Kh) * G.W + Ow * G.SW + Kw;
      DX[Off + Pix * G.C + Cc] = Pix == Arg ? D : T(0);
    }
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_POOLING_H
