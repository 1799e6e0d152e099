//===- ReferenceMath.h - The GPU's reference kernels' elements -*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code, so that the
// CPU unit tests check it against the CPU's reference loops bit for bit
// (unittests/runtime/kernels/ReferenceMathTest.cpp).
//
// With MDRT_CUDA_KERNELS=reference the GPU's matrix products, convolutions,
// reductions (Sum, Mean, SumToShape, BiasAddGrad, L2Loss), batch
// normalization's column sums and softmax rows (Softmax, SoftmaxGrad,
// SparseSoftmaxCrossEntropy) are computed one output element (or one piece
// of a sum) per thread by these functions: each adds its terms in the order the
// CPU's plain loops (MDRT_CPU_KERNELS=reference, lib/cpu) add them, in the same
// precision, so that a GPU run and a CPU run of one plan give the same bits
// step after step. The kernels are built without FMA contraction
// (--fmad=false), like the CPU's (-ffp-contract=off), so every product and sum
// rounds alone on both sides. They are slow (no tiling, long dependent chains):
// they are there to check the GPU against the CPU, not to train.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_REFERENCEMATH_H
#define MDRT_LIB_CUDA_REFERENCEMATH_H

#include "Geometry.h"

#include <cmath>
#include <cstdint>

namespace mdrt {
namespace cuda {

/// Element \p I of the row-major product Y[M,N] = op(A) op(B), A [M,K]
/// ([K,M] when \p TA), B [K,N] ([N,K] when \p TB): k ascending from zero
/// (lib/cpu/MatMul.cpp's loops).
template <typename T>
MDRT_HOST_DEVICE inline T refMatMulAt(const T *A, const T *B, int64_t M,
                                      int64_t N, int64_t K, bool TA, bool TB,
                                      int64_t I) {
  const int64_t Row = I / N, Col = I % N;
  T Acc = T(0);
  for (int64_t Kk = 0; Kk < K; ++Kk) {
    const T AV = TA ? A[Kk * M + Row] : A[Row * K + Kk];
    const T BV = TB ? B[Col * K + Kk] : B[Kk * N + Col];
    Acc += AV * BV;
  }
  return Acc;
}

/// Element \p I of Conv2D's NHWC output y[n,oh,ow,co] = sum of x f over the
/// window: kh, kw, ci ascending (lib/cpu/Conv.cpp's forwardLoops).
template <typename T>
MDRT_HOST_DEVICE inline T refConvForwardAt(const Geometry &G, const T *X,
                                           const T *F, int64_t I) {
  const int64_t Co = I % G.Co;
  int64_t R = I / G.Co;
  const int64_t Ow = R % G.OW;
  R /= G.OW;
  const int64_t Oh = R % G.OH, Img = R / G.OH;
  T Acc = T(0);
  for (int64_t Kh = 0; Kh < G.KH; ++Kh) {
    const int64_t Ih = Oh * G.SH - G.PT + Kh;
    if (Ih < 0 || Ih >= G.H)
      continue;
    for (int64_t Kw = 0; Kw < G.KW; ++Kw) {
      const int64_t Iw = Ow * G.SW - G.PL + Kw;
      if (Iw < 0 || Iw >= G.W)
        continue;
      const T *XP = X + ((Img * G.H + Ih) * G.W + Iw) * G.C;
      const T *FP = F + (Kh * G.KW + Kw) * G.C * G.Co + Co;
      for (int64_t Ci = 0; Ci < G.C; ++Ci)
        Acc += XP[Ci] * FP[Ci * G.Co];
    }
  }
  return Acc;
}

/// The first output position in [0, Out) whose window, of size \p K at
/// stride \p S, covers the padded position \p P (>= 0), and the one past
/// the last.
MDRT_HOST_DEVICE inline void refWindowsCovering(int64_t P, int64_t K, int64_t S,
                                                int64_t Out, int64_t &First,
                                                int64_t &End) {
  First = P - K + 1 <= 0 ? 0 : (P - K + 1 + S - 1) / S;
  const int64_t Last = P / S;
  End = Last + 1 < Out ? Last + 1 : Out;
}

/// The terms of the reference kernels' lane sums (laneSum, KernelChecks.h): products A[i] B[i]; elements in Acc;
/// squares in double.
template <typename T> struct RefProducts {
  const T *A, *B;
  MDRT_HOST_DEVICE T operator()(int64_t I) const { return A[I] * B[I]; }
};
template <typename Acc, typename S> struct RefElements {
  const S *P;
  MDRT_HOST_DEVICE Acc operator()(int64_t I) const { return Acc(P[I]); }
};
template <typename T> struct RefSquares {
  const T *X;
  MDRT_HOST_DEVICE double operator()(int64_t I) const {
    const double V = double(X[I]);
    return V * V;
  }
};

/// Element \p I of Conv2DBackpropInput's dx[n,ih,iw,ci]: the CPU scatters
/// each output position's sum over co of f dy (laneSum's order) into
/// dx, output positions in row-major order (lib/cpu/Conv.cpp's
/// backwardDataLoops); this adds the same sums in the same order.
template <typename T>
MDRT_HOST_DEVICE inline T refConvBackwardDataAt(const Geometry &G, const T *F,
                                                const T *DY, int64_t I) {
  const int64_t Ci = I % G.C;
  int64_t R = I / G.C;
  const int64_t Iw = R % G.W;
  R /= G.W;
  const int64_t Ih = R % G.H, Img = R / G.H;
  int64_t Oh0, Oh1, Ow0, Ow1;
  refWindowsCovering(Ih + G.PT, G.KH, G.SH, G.OH, Oh0, Oh1);
  refWindowsCovering(Iw + G.PL, G.KW, G.SW, G.OW, Ow0, Ow1);
  T Acc = T(0);
  for (int64_t Oh = Oh0; Oh < Oh1; ++Oh) {
    const int64_t Kh = Ih + G.PT - Oh * G.SH;
    for (int64_t Ow = Ow0; Ow < Ow1; ++Ow) {
      const int64_t Kw = Iw + G.PL - Ow * G.SW;
      const T *DP = DY + ((Img * G.OH + Oh) * G.OW + Ow) * G.Co;
      const T *FP = F + ((Kh * G.KW + Kw) * G.C + Ci) * G.Co;
      Acc += laneSum<T>(0, G.Co, RefProducts<T>{FP, DP});
    }
  }
  return Acc;
}

/// Element \p I of Conv2DBackpropFilter's HWIO df[kh,kw,ci,co]: images,
/// then output rows and columns ascending (lib/cpu/Conv.cpp's
/// backwardFilterLoops).
template <typename T>
MDRT_HOST_DEVICE inline T refConvBackwardFilterAt(const Geometry &G, const T *X,
                                                  const T *DY, int64_t I) {
  const int64_t Co = I % G.Co;
  int64_t R = I / G.Co;
  const int64_t Ci = R % G.C, Tap = R / G.C;
  const int64_t Kh = Tap / G.KW, Kw = Tap % G.KW;
  T Acc = T(0);
  for (int64_t Img = 0; Img < G.N; ++Img)
    for (int64_t Oh = 0; Oh < G.OH; ++Oh) {
      const int64_t Ih = Oh * G.SH - G.PT + Kh;
      if (Ih < 0 || Ih >= G.H)
        continue;
      for (int64_t Ow = 0; Ow < G.OW; ++Ow) {
        const int64_t Iw = Ow * G.SW - G.PL + Kw;
        if (Iw < 0 || Iw >= G.W)
          continue;
        Acc += X[((Img * G.H + Ih) * G.W + Iw) * G.C + Ci] *
               DY[((Img * G.OH + Oh) * G.OW + Ow) * G.Co + Co];
      }
    }
  return Acc;
}

/// The sum in \p Acc of rows [R0, R1) of column \p Kk of output row \p Ai of
/// \p St, Src viewed as [A, R, K]: rows ascending, or for K == 1 in 8
/// interleaved lanes added in a fixed tree at the end (lib/cpu/Reduce.cpp's
/// sumRows and CpuCommon.h's laneSum).
template <typename Acc, typename S>
MDRT_HOST_DEVICE inline Acc refRowSum(const cpu::ReduceStep &St, const S *Src,
                                      int64_t Ai, int64_t R0, int64_t R1,
                                      int64_t Kk) {
  if (St.K == 1)
    return laneSum<Acc>(R0, R1, RefElements<Acc, S>{Src + Ai * St.R});
  Acc D = Acc(0);
  for (int64_t I = R0; I < R1; ++I)
    D += Acc(Src[(Ai * St.R + I) * St.K + Kk]);
  return D;
}

/// The sum in double of the squares of \p X[Begin, End) in 8 interleaved
/// lanes (lib/cpu/Reduce.cpp's sumSquares: L2Loss's pieces).
template <typename T>
MDRT_HOST_DEVICE inline double refSumSquares(const T *X, int64_t Begin,
                                             int64_t End) {
  return laneSum<double>(Begin, End, RefSquares<T>{X});
}

/// Piece \p Piece's rows of a step: [R * p / Pieces, R * (p + 1) / Pieces).
MDRT_HOST_DEVICE inline void refPieceRows(const cpu::ReduceStep &St,
                                          int64_t Piece, int64_t &R0,
                                          int64_t &R1) {
  R0 = St.R * Piece / St.Pieces;
  R1 = St.R * (Piece + 1) / St.Pieces;
}

/// Sum \p J (= a * K + k) of a step from its pieces' sums, \p Partial
/// [Pieces][A * K]: piece 0's, then each next one's added in order.
template <typename Acc>
MDRT_HOST_DEVICE inline Acc refAddPieces(const cpu::ReduceStep &St,
                                         const Acc *Partial, int64_t J) {
  const int64_t Size = St.A * St.K;
  Acc Sum = Partial[J];
  for (int64_t Piece = 1; Piece < St.Pieces; ++Piece)
    Sum += Partial[Piece * Size + J];
  return Sum;
}

/// Piece \p Piece of batch normalization's \p K column sums of column \p Col
/// (lib/cpu/BatchNorm.cpp's columnSums, BatchNormDims::Pieces): its rows of
/// [0, \p Rows) added from zero in row order, each row's terms from
/// Load(row, Col, V) (BatchNormMath.h's loads).
template <int K, typename LoadFn>
MDRT_HOST_DEVICE inline void refColumnPiece(const LoadFn &Load, int64_t Rows,
                                            int64_t Pieces, int64_t Piece,
                                            int64_t Col, double (&Sums)[K]) {
  for (int J = 0; J < K; ++J)
    Sums[J] = 0;
  for (int64_t R = Rows * Piece / Pieces; R < Rows * (Piece + 1) / Pieces;
       ++R) {
    double V[K];
    Load(R, Col, V);
    for (int J = 0; J < K; ++J)
      Sums[J] += V[J];
  }
}

/// Column \p Col's K sums from its pieces' sums, \p Partial [Pieces][K][Cols]:
/// piece 0's, then each next one's added in order.
template <int K>
MDRT_HOST_DEVICE inline void
refColumnAddPieces(const double *Partial, int64_t Pieces, int64_t Cols,
                   int64_t Col, double (&Sums)[K]) {
  for (int J = 0; J < K; ++J) {
    double Sum = Partial[J * Cols + Col];
    for (int64_t Piece = 1; Piece < Pieces; ++Piece)
      Sum += Partial[(Piece * K + J) * Cols + Col];
    Sums[J] = Sum;
  }
}

/// A reduction's result from its double sum: the mean over \p Divisor
/// (nonzero), or the sum times \p Scale (lib/cpu's Reducer::run).
template <typename T>
MDRT_HOST_DEVICE inline T refFinishSum(double V, double Scale,
                                       int64_t Divisor) {
  if (Divisor)
    return T(V / double(Divisor));
  return Scale == 1.0 ? T(V) : T(V * Scale);
}

/// exp and log in double: the CUDA math library's on the device, the C
/// library's on the host (both within an ulp of double, so their results
/// rounded to float agree but about once in 2^28).
MDRT_HOST_DEVICE inline double refExp(double X) {
#ifdef __CUDA_ARCH__
  return ::exp(X);
#else
  return std::exp(X);
#endif
}
MDRT_HOST_DEVICE inline double refLog(double X) {
#ifdef __CUDA_ARCH__
  return ::log(X);
#else
  return std::log(X);
#endif
}

/// exp(X) as Softmax and SparseSoftmaxCrossEntropy take it on both sides:
/// in double, rounded once to T (lib/cpu's softmaxExp).
template <typename T> MDRT_HOST_DEVICE inline T refSoftmaxExp(T X) {
  return T(refExp(double(X)));
}

/// The largest of \p X[0, N) (N >= 1), the first of equal ones.
template <typename T>
MDRT_HOST_DEVICE inline T refRowMax(const T *X, int64_t N) {
  T Max = X[0];
  for (int64_t J = 1; J < N; ++J)
    Max = X[J] > Max ? X[J] : Max;
  return Max;
}

/// The numerators of a softmax row, E[j] = exp(x_j - max) (\p Max gets the
/// row's maximum), and their sum in double in column order: the CPU's
/// softmaxNumerators (lib/cpu/CpuCommon.h).
template <typename T>
MDRT_HOST_DEVICE inline double refSoftmaxNumerators(const T *X, T *E, int64_t N,
                                                    T &Max) {
  Max = refRowMax(X, N);
  double Sum = 0;
  for (int64_t J = 0; J < N; ++J) {
    E[J] = refSoftmaxExp<T>(X[J] - Max);
    Sum += double(E[J]);
  }
  return Sum;
}

/// One row of Softmax (lib/cpu/Elementwise.cpp): y = exp(x - max) / the
/// sum, the sum added in double in column order and rounded to T.
template <typename T>
MDRT_HOST_DEVICE inline void refSoftmaxRow(const T *X, T *Y, int64_t N) {
  T Max;
  const double Sum = refSoftmaxNumerators(X, Y, N, Max);
  const T S = T(Sum);
  for (int64_t J = 0; J < N; ++J)
    Y[J] = Y[J] / S;
}

/// One row of SoftmaxGrad (lib/cpu/Elementwise.cpp): dx = y (dy - d), d the
/// sum of dy y in double in column order, rounded to T.
template <typename T>
MDRT_HOST_DEVICE inline void refSoftmaxGradRow(const T *Y, const T *DY, T *DX,
                                               int64_t N) {
  double Dot = 0;
  for (int64_t J = 0; J < N; ++J)
    Dot += double(DY[J]) * double(Y[J]);
  const T D = T(Dot);
  for (int64_t J = 0; J < N; ++J)
    DX[J] = Y[J] * (DY[J] - D);
}

/// One row of SparseSoftmaxCrossEntropy with a label in [0, N) (lib/cpu/
/// Loss.cpp): \p Back gets softmax - onehot; returns the loss,
/// log(sum) + max - x[label] in double.
template <typename T>
MDRT_HOST_DEVICE inline T refSsceRow(const T *X, int64_t Label, T *Back,
                                     int64_t N) {
  T Max;
  const double Sum = refSoftmaxNumerators(X, Back, N, Max);
  const T Loss = T(refLog(Sum) + (double(Max) - double(X[Label])));
  const double Inv = 1.0 / Sum;
  for (int64_t J = 0; J < N; ++J)
    Back[J] = T(double(Back[J]) * Inv);
  Back[Label] -= T(1);
  return Loss;
}

/// One row of SoftmaxCrossEntropy (lib/cpu/Loss.cpp): \p Back gets
/// softmax - y; returns the loss, the sum over the classes of
/// y (log(sum) + max - x) in double. The GPU's only kernel of the op.
template <typename T>
MDRT_HOST_DEVICE inline T refSceRow(const T *X, const T *Y, T *Back,
                                    int64_t N) {
  T Max;
  const double Sum = refSoftmaxNumerators(X, Back, N, Max);
  const double LogSum = refLog(Sum);
  double L = 0;
  for (int64_t J = 0; J < N; ++J)
    L += double(Y[J]) * (LogSum + (double(Max) - double(X[J])));
  const double Inv = 1.0 / Sum;
  for (int64_t J = 0; J < N; ++J)
    Back[J] = T(double(Back[J]) * Inv) - Y[J];
  return T(L);
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_REFERENCEMATH_H
