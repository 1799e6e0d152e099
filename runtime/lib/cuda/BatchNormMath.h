//===- BatchNormMath.h - Batch normalization, per element -------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code, so that the
// CPU unit tests check the GPU's batch normalization against the CPU's
// (unittests/runtime/kernels/BatchNormMathTest.cpp): what the column sums
// (Reduce.cu's ColumnSums) load per element and store per column, and the
// elementwise formulas, with the CPU's rounding points.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_BATCHNORMMATH_H
#define MDRT_LIB_CUDA_BATCHNORMMATH_H

#include "Geometry.h"

#include <cmath>

namespace mdrt {
namespace cuda {

/// sqrt(var + eps) in double.
template <typename T> MDRT_HOST_DEVICE inline double bnStd(T Var, double Eps) {
#ifdef __CUDA_ARCH__
  return ::sqrt(double(Var) + Eps);
#else
  return std::sqrt(double(Var) + Eps);
#endif
}

/// 1 / sqrt(var + eps) in double.
template <typename T>
MDRT_HOST_DEVICE inline double bnInvStd(T Var, double Eps) {
  return 1.0 / bnStd(Var, Eps);
}

/// x[r, c] (a plain column sum; also Sum's and BiasAddGrad's).
template <typename T> struct LoadElement {
  const T *X;
  int64_t Cols;
  MDRT_HOST_DEVICE void operator()(int64_t R, int64_t C, double (&V)[1]) const {
    V[0] = double(X[R * Cols + C]);
  }
};

/// Batch normalization's statistics are column sums (ColumnSums): the mean
/// in double, then the biased variance as the mean of squared deviations
/// from it (two passes, as on the CPU), and the normalization's factors
/// rounded to T.
struct StoreMean {
  double *MeanD;
  int64_t M;
  MDRT_HOST_DEVICE void operator()(int64_t J, const double (&S)[1]) const {
    MeanD[J] = S[0] / double(M);
  }
};

template <typename T> struct LoadSquaredDeviation {
  const T *X;
  const double *MeanD;
  int64_t Cols;
  MDRT_HOST_DEVICE void operator()(int64_t R, int64_t C, double (&V)[1]) const {
    double D = double(X[R * Cols + C]) - MeanD[C];
    V[0] = D * D;
  }
};

template <typename T> struct StoreBatchStats {
  const double *MeanD;
  const T *Gamma;
  T *Mean, *Var, *Factor, *MeanT;
  int64_t M;
  double Eps;
  MDRT_HOST_DEVICE void operator()(int64_t J, const double (&S)[1]) const {
    T Mn = T(MeanD[J]), V = T(S[0] / double(M));
    Mean[J] = Mn;
    Var[J] = V;
    double G = Gamma ? double(Gamma[J]) : 1.0;
    Factor[J] = T(G / bnStd(V, Eps));
    MeanT[J] = Mn;
  }
};

/// The column sums of dy and of dy (x - mean) / std (ColumnSums).
template <typename T> struct LoadBatchGrad {
  const T *DY, *X, *Mean;
  const double *Inv;
  int64_t Cols;
  MDRT_HOST_DEVICE void operator()(int64_t R, int64_t C, double (&V)[2]) const {
    double D = double(DY[R * Cols + C]);
    V[0] = D;
    V[1] = D * (double(X[R * Cols + C]) - double(Mean[C])) * Inv[C];
  }
};

/// dbeta, dgamma, and the factors of dx rounded to T.
template <typename T> struct StoreBatchGrad {
  const double *Inv;
  const T *Gamma;
  T *DBeta, *DGamma, *FA, *FB, *FC;
  int64_t M;
  MDRT_HOST_DEVICE void operator()(int64_t J, const double (&S)[2]) const {
    double SB = S[0], SG = S[1], I = Inv[J];
    DBeta[J] = T(SB);
    DGamma[J] = T(SG);
    double G = Gamma ? double(Gamma[J]) : 1.0;
    FA[J] = T(G * I);
    FB[J] = T(SB / double(M));
    FC[J] = T(SG / double(M) * I);
  }
};

/// Element \p I (column \p J) of y = (x - mean) * factor + beta; with
/// \p Var, the factor is computed from gamma and the variance
/// (BatchNormInference).
template <typename T>
MDRT_HOST_DEVICE inline T
bnNormalizeAt(const T *X, const T *Mean, const T *Factor, const T *Beta,
              const T *Gamma, const T *Var, double Eps, int64_t I, int64_t J) {
  T F = Var ? T((Gamma ? double(Gamma[J]) : 1.0) / bnStd(Var[J], Eps))
            : Factor[J];
  return (X[I] - Mean[J]) * F + Beta[J];
}

/// Element \p I (column \p J) of dx = a (dy - b - (x - mean) c), with the
/// per-column factors of StoreBatchGrad.
template <typename T>
MDRT_HOST_DEVICE inline T bnGradAt(const T *DY, const T *X, const T *Mean,
                                   const T *A, const T *B, const T *CC,
                                   int64_t I, int64_t J) {
  return A[J] * (DY[I] - B[J] - (X[I] - Mean[J]) * CC[J]);
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_BATCHNORMMATH_H
