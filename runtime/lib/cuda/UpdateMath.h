//===- UpdateMath.h - One element of the optimizer updates ------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda, and host code as well as device code (no CUDA
// header), so that the CPU unit tests check it against the CPU's update
// kernels bit for bit (unittests/runtime/kernels/UpdateMathTest.cpp).
//
// The CPU's updates (lib/cpu/Optimizer.cpp) run with FTZ and DAZ set
// (FlushDenormalsScope): denormal operands read as zero and denormal
// results become zero. The GPU's flush every operand and result explicitly
// (flushDenormal), float64 too, in the CPU's order of operations, so that
// both compute the same numbers where slots decay towards zero. The
// per-step scalars (learning rate, Adam's bias correction) come from the
// caller, rounded once to T.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_UPDATEMATH_H
#define MDRT_LIB_CUDA_UPDATEMATH_H

#include <cfloat>
#include <cmath>
#include <type_traits>

#ifndef MDRT_HOST_DEVICE
#ifdef __CUDACC__
#define MDRT_HOST_DEVICE __host__ __device__
#else
#define MDRT_HOST_DEVICE
#endif
#endif

namespace mdrt {
namespace cuda {

/// \p X, or a zero of its sign where \p X is denormal.
template <typename T> MDRT_HOST_DEVICE inline T flushDenormal(T X) {
  constexpr T Min = std::is_same<T, float>::value ? T(FLT_MIN) : T(DBL_MIN);
  return X > -Min && X < Min ? X * T(0) : X;
}

/// The correctly rounded square root of \p X (IEEE on both sides: nvcc's
/// default -prec-sqrt=true).
template <typename T> MDRT_HOST_DEVICE inline T updateSqrt(T X) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same<T, float>::value)
    return sqrtf(X);
  else
    return ::sqrt(X);
#else
  return std::sqrt(X);
#endif
}

/// var -= (var - value) * F, F = 1 - decay.
template <typename T>
MDRT_HOST_DEVICE inline T movingAverageUpdate(T Var, T Value, T F) {
  const T V = flushDenormal(Var);
  const T D = flushDenormal(V - flushDenormal(Value));
  return flushDenormal(V - flushDenormal(D * F));
}

/// var -= lr * g.
template <typename T>
MDRT_HOST_DEVICE inline T gradientDescentUpdate(T Var, T G, T Lr) {
  return flushDenormal(flushDenormal(Var) -
                       flushDenormal(Lr * flushDenormal(G)));
}

/// acc = mo * acc + g; var -= lr * acc, or lr * (g + mo * acc) (Nesterov).
template <typename T>
MDRT_HOST_DEVICE inline void momentumUpdate(T &Var, T &Acc, T G, T Lr, T Mo,
                                            bool Nesterov) {
  const T GK = flushDenormal(G);
  const T A = flushDenormal(flushDenormal(Mo * flushDenormal(Acc)) + GK);
  Acc = A;
  const T Step = Nesterov ? flushDenormal(GK + flushDenormal(Mo * A)) : A;
  Var = flushDenormal(flushDenormal(Var) - flushDenormal(Lr * Step));
}

/// Adam's constants in T: B1, 1 - B1, B2, 1 - B2, epsilon, and Alpha, the
/// step's lr * sqrt(1 - b2^t) / (1 - b1^t).
template <typename T> struct AdamScalars { T B1, C1, B2, C2, Eps, Alpha; };

/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; var -= alpha m / (sqrt(v) +
/// eps).
template <typename T>
MDRT_HOST_DEVICE inline void adamUpdate(T &Var, T &M, T &V, T G,
                                        const AdamScalars<T> &S) {
  const T GK = flushDenormal(G);
  const T NM = flushDenormal(flushDenormal(S.B1 * flushDenormal(M)) +
                             flushDenormal(S.C1 * GK));
  const T NV = flushDenormal(flushDenormal(S.B2 * flushDenormal(V)) +
                             flushDenormal(flushDenormal(S.C2 * GK) * GK));
  M = NM;
  V = NV;
  const T Den = flushDenormal(updateSqrt(NV) + S.Eps);
  Var = flushDenormal(flushDenormal(Var) -
                      flushDenormal(flushDenormal(S.Alpha * NM) / Den));
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_UPDATEMATH_H
