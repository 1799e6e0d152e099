//===- Lowering.h - Convolutions as one matrix product ----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code (no CUDA
// header), so that the CPU unit tests check the index arithmetic the GPU's
// im2col kernel runs (unittests/runtime/kernels/ConvLoweringTest.cpp).
//
// Each mode of a convolution is one matrix product over a column matrix
// made by im2col:
//  - Forward:        y[p, co]  = col(x)[p, :] f           (p: output pixel)
//  - BackwardFilter: df        = col(x)^T dy
//  - BackwardData:   dx[p, ci] = col(dy)[p, :] turned(f)  (p: input pixel)
// The input gradient is the forward convolution, with stride 1, of dy
// dilated by the strides (zeros between its rows and columns, which im2col
// produces rather than reads) and padded by K - 1 - (leading padding), with
// the filter turned 180 degrees and its channels swapped.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_LOWERING_H
#define MDRT_LIB_CUDA_LOWERING_H

#include "Geometry.h"

#include <cstdint>

namespace mdrt {
namespace cuda {

/// The column matrix of one mode: row p is position (n, gh, gw) of an
/// N x GH x GW grid, p = (n * GH + gh) * GW + gw; column
/// k = (kh * KW + kw) * SrcC + c holds Src[n, vh / DH, vw / DW, c] at
/// vh = gh * StepH + OffH + kh (vw likewise), or 0 where vh or vw falls
/// outside Src or is not a multiple of DH or DW.
struct Lowering {
  int64_t N = 0, SrcH = 0, SrcW = 0, SrcC = 0, GH = 0, GW = 0, KH = 1, KW = 1;
  int64_t StepH = 1, StepW = 1, OffH = 0, OffW = 0, DH = 1, DW = 1;

  /// Columns: KH * KW * SrcC.
  int64_t columns() const { return KH * KW * SrcC; }
  /// Rows: N * GH * GW.
  int64_t rows() const { return N * GH * GW; }
  /// Whether D is not 1 (the input gradient of a strided convolution).
  bool dilated() const { return DH != 1 || DW != 1; }
};

/// The column matrix of \p Mode of \p G: of x with the output's grid, the
/// strides and the padding (forward, filter gradient), or of dy with the
/// input's grid, stride 1, dilated by the strides (input gradient).
inline Lowering lowerConvolution(const Geometry &G, cpu::ConvMode Mode) {
  Lowering L;
  L.N = G.N;
  L.KH = G.KH;
  L.KW = G.KW;
  if (Mode == cpu::ConvMode::BackwardData) {
    L.SrcH = G.OH, L.SrcW = G.OW, L.SrcC = G.Co, L.GH = G.H, L.GW = G.W;
    L.OffH = -(G.KH - 1 - G.PT), L.OffW = -(G.KW - 1 - G.PL);
    L.DH = G.SH, L.DW = G.SW;
  } else {
    L.SrcH = G.H, L.SrcW = G.W, L.SrcC = G.C, L.GH = G.OH, L.GW = G.OW;
    L.StepH = G.SH, L.StepW = G.SW, L.OffH = -G.PT, L.OffW = -G.PL;
  }
  return L;
}

/// Row \p P of \p L: the offset of its image in Src and the window's
/// corner (vh, vw of kh = kw = 0).
struct LoweredRow {
  int64_t Image, Top, Left;
};
MDRT_HOST_DEVICE inline LoweredRow lowerRow(const Lowering &L, int64_t P) {
  const int64_t Gw = P % L.GW, Q = P / L.GW;
  const int64_t Gh = Q % L.GH, Img = Q / L.GH;
  return {Img * L.SrcH * L.SrcW * L.SrcC, Gh * L.StepH + L.OffH,
          Gw * L.StepW + L.OffW};
}

/// The offset in row \p R's image of column (Kh, Kw, C), or -1 for a 0.
/// \p Dilated must be L.dilated(); its divisions are 32-bit (the caller
/// checks that vh and vw stay below 2^31).
template <bool Dilated>
MDRT_HOST_DEVICE inline int64_t
lowerColumn(const Lowering &L, const LoweredRow &R, int Kh, int Kw, int C) {
  int64_t Vh = R.Top + Kh, Vw = R.Left + Kw;
  if (Vh < 0 || Vw < 0)
    return -1;
  if (Dilated) {
    const uint32_t Uh = uint32_t(Vh), Uw = uint32_t(Vw);
    const uint32_t Dh = uint32_t(L.DH), Dw = uint32_t(L.DW);
    if (Uh % Dh != 0 || Uw % Dw != 0)
      return -1; // Between two rows or columns of dy.
    Vh = Uh / Dh;
    Vw = Uw / Dw;
  }
  if (Vh >= L.SrcH || Vw >= L.SrcW)
    return -1;
  return (Vh * L.SrcW + Vw) * L.SrcC + C;
}

/// The index in the HWIO filter [KH, KW, Ci, Co] of element \p I of the
/// turned filter [KH, KW, Co, Ci] (the input gradient's right operand):
/// turned[kh, kw, co, ci] = f[KH - 1 - kh, KW - 1 - kw, ci, co].
MDRT_HOST_DEVICE inline int64_t
turnedFilterSource(int64_t I, int64_t KH, int64_t KW, int64_t Ci, int64_t Co) {
  int64_t C = I % Ci, R = I / Ci;
  int64_t O = R % Co;
  R /= Co;
  int64_t Kw = R % KW, Kh = R / KW;
  return (((KH - 1 - Kh) * KW + (KW - 1 - Kw)) * Ci + C) * Co + O;
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_LOWERING_H
