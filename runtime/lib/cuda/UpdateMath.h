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
// (FlushDenormalsScope): denormal operands read as zero and tiny results
// become zero. The GPU's compute every operation through FtzMath, which
// gives those results in the default floating-point environment, float64
// too, in the CPU's order of operations, so that both compute the same
// numbers where slots decay towards zero. The per-step scalars (learning
// rate, Adam's bias correction) and the constants (RMSProp's momentum and
// epsilon) come from the caller, rounded once to T; RMSProp's 1 - rho is
// computed in T from rho rounded to T, as TF computes it.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_UPDATEMATH_H
#define MDRT_LIB_CUDA_UPDATEMATH_H

#include "mdrt/HostDevice.h"

#include <cfloat>
#include <cmath>
#include <type_traits>

namespace mdrt {
namespace cuda {

/// \p X, or a zero of its sign where \p X is denormal (DAZ on an operand;
/// FTZ on a sum or difference, which is exact when it is that small).
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

/// The arithmetic of x86's SSE with FTZ and DAZ set, in the default
/// floating-point environment (and on GPUs without -ftz): denormal operands
/// read as zero; a result is tiny, and becomes a zero of its sign, when its
/// value rounded to T's precision with an unbounded exponent is below the
/// smallest normal number. For a product or quotient that is not the
/// denormal result's magnitude (which rounds on a coarser grid), so the
/// test rounds a copy scaled by 2^64 into the normal range.
template <typename T> struct FtzMath {
  static constexpr T Min =
      std::is_same<T, float>::value ? T(FLT_MIN) : T(DBL_MIN);
  static constexpr T Scale = T(0x1p64);

  MDRT_HOST_DEVICE static T in(T X) { return flushDenormal(X); }
  MDRT_HOST_DEVICE static T add(T A, T B) { return flushDenormal(A + B); }
  MDRT_HOST_DEVICE static T sub(T A, T B) { return flushDenormal(A - B); }
  MDRT_HOST_DEVICE static T mul(T A, T B) {
    return tiny((A * Scale) * B) ? (A * B) * T(0) : A * B;
  }
  MDRT_HOST_DEVICE static T div(T A, T B) {
    return tiny((A * Scale) / B) ? (A / B) * T(0) : A / B;
  }
  /// Of a normal number or zero: never tiny.
  MDRT_HOST_DEVICE static T sqrt(T A) { return updateSqrt(A); }

private:
  /// Whether a result scaled by 2^64 was tiny. Scaling overflows only for
  /// operands whose result cannot be tiny (inf, or NaN for a zero operand,
  /// both compare false).
  MDRT_HOST_DEVICE static bool tiny(T Scaled) {
    return Scaled > -Min * Scale && Scaled < Min * Scale;
  }
};

/// var -= (var - value) * F, F = 1 - decay.
template <typename T>
MDRT_HOST_DEVICE inline T movingAverageUpdate(T Var, T Value, T F) {
  using M = FtzMath<T>;
  const T V = M::in(Var);
  return M::sub(V, M::mul(M::sub(V, M::in(Value)), M::in(F)));
}

/// var -= lr * g.
template <typename T>
MDRT_HOST_DEVICE inline T gradientDescentUpdate(T Var, T G, T Lr) {
  using M = FtzMath<T>;
  return M::sub(M::in(Var), M::mul(M::in(Lr), M::in(G)));
}

/// acc = mo * acc + g; var -= lr * acc, or lr * (g + mo * acc) (Nesterov).
template <typename T>
MDRT_HOST_DEVICE inline void momentumUpdate(T &Var, T &Acc, T G, T Lr, T Mo,
                                            bool Nesterov) {
  using M = FtzMath<T>;
  const T GK = M::in(G), MoK = M::in(Mo);
  const T A = M::add(M::mul(MoK, M::in(Acc)), GK);
  Acc = A;
  const T Step = Nesterov ? M::add(GK, M::mul(MoK, A)) : A;
  Var = M::sub(M::in(Var), M::mul(M::in(Lr), Step));
}

/// Adam's constants in T: B1, 1 - B1, B2, 1 - B2, epsilon, and Alpha, the
/// step's lr * sqrt(1 - b2^t) / (1 - b1^t).
template <typename T> struct AdamScalars { T B1, C1, B2, C2, Eps, Alpha; };

/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; var -= alpha m / (sqrt(v) +
/// eps).
template <typename T>
MDRT_HOST_DEVICE inline void adamUpdate(T &Var, T &Mom, T &Sq, T G,
                                        const AdamScalars<T> &S) {
  using M = FtzMath<T>;
  const T GK = M::in(G);
  const T NM = M::add(M::mul(M::in(S.B1), M::in(Mom)), M::mul(M::in(S.C1), GK));
  const T NV = M::add(M::mul(M::in(S.B2), M::in(Sq)),
                      M::mul(M::mul(M::in(S.C2), GK), GK));
  Mom = NM;
  Sq = NV;
  const T Den = M::add(M::sqrt(NV), M::in(S.Eps));
  Var = M::sub(M::in(Var), M::div(M::mul(M::in(S.Alpha), NM), Den));
}

/// RMSProp's scalars in T: C = 1 - rho, momentum, epsilon, and the step's
/// learning rate.
template <typename T> struct RMSPropScalars { T C, Mo, Eps, Lr; };

/// ms += (g^2 - ms) (1 - rho); mom = mo mom + lr g / sqrt(ms + eps);
/// var -= mom (TF's order of operations).
template <typename T>
MDRT_HOST_DEVICE inline void rmspropUpdate(T &Var, T &Ms, T &Mom, T G,
                                           const RMSPropScalars<T> &S) {
  using M = FtzMath<T>;
  const T GK = M::in(G), Sq = M::in(Ms);
  const T NS = M::add(Sq, M::mul(M::sub(M::mul(GK, GK), Sq), M::in(S.C)));
  const T Den = M::sqrt(M::add(NS, M::in(S.Eps)));
  const T NM = M::add(M::mul(M::in(S.Mo), M::in(Mom)),
                      M::div(M::mul(M::in(S.Lr), GK), Den));
  Ms = NS;
  Mom = NM;
  Var = M::sub(M::in(Var), NM);
}

/// ms += (g^2 - ms) (1 - rho); mg += (g - mg) (1 - rho);
/// mom = mo mom + lr g / sqrt((ms - mg^2) + eps); var -= mom (TF's
/// ApplyCenteredRMSProp, in its order of operations; the scalars as
/// rmspropUpdate's).
template <typename T>
MDRT_HOST_DEVICE inline void centeredRmspropUpdate(T &Var, T &Ms, T &Mg, T &Mom,
                                                   T G,
                                                   const RMSPropScalars<T> &S) {
  using M = FtzMath<T>;
  const T GK = M::in(G), Sq = M::in(Ms), Mean = M::in(Mg), C = M::in(S.C);
  const T NS = M::add(Sq, M::mul(M::sub(M::mul(GK, GK), Sq), C));
  const T NG = M::add(Mean, M::mul(M::sub(GK, Mean), C));
  const T Den = M::sqrt(M::add(M::sub(NS, M::mul(NG, NG)), M::in(S.Eps)));
  const T NM = M::add(M::mul(M::in(S.Mo), M::in(Mom)),
                      M::div(M::mul(M::in(S.Lr), GK), Den));
  Ms = NS;
  Mg = NG;
  Mom = NM;
  Var = M::sub(M::in(Var), NM);
}

/// acc += g^2; var -= lr g / sqrt(acc) (TF's ApplyAdagrad, no epsilon).
template <typename T>
MDRT_HOST_DEVICE inline void adagradUpdate(T &Var, T &Acc, T G, T Lr) {
  using M = FtzMath<T>;
  const T GK = M::in(G);
  const T A = M::add(M::in(Acc), M::mul(GK, GK));
  Acc = A;
  Var = M::sub(M::in(Var), M::div(M::mul(M::in(Lr), GK), M::sqrt(A)));
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_UPDATEMATH_H
