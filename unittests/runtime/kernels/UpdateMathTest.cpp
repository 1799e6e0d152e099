//===- UpdateMathTest.cpp - The GPU's update arithmetic against the CPU ---===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/UpdateMath.h is host code as well as device code: these
// tests run the CPU's update kernels (FTZ and DAZ set) and the functions
// the GPU's update kernel calls (FtzMath, the default floating-point
// environment) on the same values, normal, denormal and ones whose
// products underflow, and require the same bits; and, on x86, FtzMath's
// operations against the hardware's with FTZ and DAZ around the smallest
// normal number.
//
//===----------------------------------------------------------------------===//

#include "cuda/UpdateMath.h"
#include "KernelChecks.h"

#include "KernelTestUtil.h"

#include <cfloat>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

using namespace mdrt;
using namespace mdrt::test;
using mdrt::cuda::AdamScalars;

namespace {

TT step(int64_t S) { return TT(DType::Int64, {}, {double(S)}); }

/// Values whose flushing matters, then random ones, \p N in all.
std::vector<double> values(DType T, Rng &G, size_t N, double Scale) {
  const double Tiny = T == DType::Float32 ? double(FLT_MIN) : DBL_MIN;
  std::vector<double> V = {0.0,    -0.0,       Tiny / 4, -Tiny / 3,
                           Tiny,   Tiny * 1.5, 1e-20,    -3e-21,
                           1e-160, -2e-170,    Scale,    -Scale / 7};
  while (V.size() < N)
    V.push_back(G.uniform(-Scale, Scale));
  V.resize(N);
  for (double &E : V)
    E = roundTo(T, E);
  return V;
}

/// The same bits (a -0 is not a 0).
void expectSameBits(const std::vector<double> &Got,
                    const std::vector<double> &Want, const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size());
  for (size_t K = 0; K < Got.size(); ++K)
    EXPECT_EQ(std::memcmp(&Got[K], &Want[K], sizeof(double)), 0)
        << What << " element " << K << ": cpu " << Got[K] << ", gpu math "
        << Want[K];
}

/// \p F applied in T, element by element.
template <typename T, typename F> std::vector<double> inT(size_t N, F &&Fn) {
  std::vector<double> Out(N);
  for (size_t K = 0; K < N; ++K)
    Out[K] = double(Fn(K));
  return Out;
}

template <typename T> void checkUpdates(DType Ty) {
  Rng G(99);
  constexpr size_t N = 64;
  const std::string Name = dtypeName(Ty);
  auto Var = values(Ty, G, N, 1.0), Slot = values(Ty, G, N, 1e-3),
       Slot2 = values(Ty, G, N, 1e-6), Grad = values(Ty, G, N, 0.5);
  // Squares and products that underflow: gradients near 1e-20.
  for (size_t K = N / 2; K < N * 3 / 4; ++K)
    Grad[K] = roundTo(Ty, Grad[K] * 1e-19);

  {
    OpRunner R("AssignMovingAverage");
    R.attr("decay", 0.999).input(TT(Ty, {N}, Var)).input(TT(Ty, {N}, Grad));
    R.run();
    const T F = T(1.0 - 0.999);
    expectSameBits(R.in(0),
                   inT<T>(N,
                          [&](size_t K) {
                            return cuda::movingAverageUpdate(T(Var[K]),
                                                             T(Grad[K]), F);
                          }),
                   "AssignMovingAverage " + Name);
  }
  {
    OpRunner R("ApplyGradientDescent");
    R.attr("learning_rate", 0.1)
        .input(TT(Ty, {N}, Var))
        .input(TT(Ty, {N}, Grad))
        .input(step(0));
    R.run();
    expectSameBits(R.in(0),
                   inT<T>(N,
                          [&](size_t K) {
                            return cuda::gradientDescentUpdate(
                                T(Var[K]), T(Grad[K]), T(0.1));
                          }),
                   "ApplyGradientDescent " + Name);
  }
  for (bool Nesterov : {false, true}) {
    OpRunner R("ApplyMomentum");
    R.attr("learning_rate", 0.01)
        .attr("momentum", 0.9)
        .attr("nesterov", Nesterov)
        .input(TT(Ty, {N}, Var))
        .input(TT(Ty, {N}, Slot))
        .input(TT(Ty, {N}, Grad))
        .input(step(3));
    R.run();
    std::vector<T> V(N), A(N);
    for (size_t K = 0; K < N; ++K) {
      V[K] = T(Var[K]);
      A[K] = T(Slot[K]);
      cuda::momentumUpdate(V[K], A[K], T(Grad[K]), T(0.01), T(0.9), Nesterov);
    }
    std::string What =
        "ApplyMomentum" + std::string(Nesterov ? " (Nesterov) " : " ") + Name;
    expectSameBits(R.in(0), inT<T>(N, [&](size_t K) { return V[K]; }),
                   What + " var");
    expectSameBits(R.in(1), inT<T>(N, [&](size_t K) { return A[K]; }),
                   What + " accumulator");
  }
  {
    OpRunner R("ApplyAdam");
    R.attr("learning_rate", 0.001)
        .attr("beta1", 0.9)
        .attr("beta2", 0.999)
        .attr("epsilon", 1e-8)
        .input(TT(Ty, {N}, Var))
        .input(TT(Ty, {N}, Slot))
        .input(TT(Ty, {N}, Slot2))
        .input(TT(Ty, {N}, Grad))
        .input(step(4));
    R.run();
    // The CPU's (and the GPU's) scalars: in double (beta^t as products,
    // integerPower), rounded once.
    const AdamScalars<T> S = {
        T(0.9),
        T(1.0 - 0.9),
        T(0.999),
        T(1.0 - 0.999),
        T(1e-8),
        T(0.001 * std::sqrt(1.0 - mdrt::integerPower(0.999, 5)) /
          (1.0 - mdrt::integerPower(0.9, 5)))};
    std::vector<T> V(N), M(N), Q(N);
    for (size_t K = 0; K < N; ++K) {
      V[K] = T(Var[K]);
      M[K] = T(Slot[K]);
      Q[K] = T(Slot2[K]);
      cuda::adamUpdate(V[K], M[K], Q[K], T(Grad[K]), S);
    }
    expectSameBits(R.in(0), inT<T>(N, [&](size_t K) { return V[K]; }),
                   "ApplyAdam var " + Name);
    expectSameBits(R.in(1), inT<T>(N, [&](size_t K) { return M[K]; }),
                   "ApplyAdam m " + Name);
    expectSameBits(R.in(2), inT<T>(N, [&](size_t K) { return Q[K]; }),
                   "ApplyAdam v " + Name);
  }
  // RMSProp, on the values above (the mean square's made positive) and on
  // values around the smallest normal number, where the flushes show: mean
  // squares, momenta and variables of a few times it, gradients whose
  // squares are (even elements) or that are themselves (odd ones).
  const double Tiny = Ty == DType::Float32 ? double(FLT_MIN) : DBL_MIN;
  std::vector<double> RVar = Var, RMs = Slot2, RMom = Slot, RGrad = Grad;
  for (double &E : RMs)
    E = std::fabs(E);
  for (size_t K = 0; K < 256; ++K) {
    RVar.push_back(roundTo(Ty, G.uniform(-4, 4) * Tiny));
    RMs.push_back(roundTo(Ty, G.uniform(0, 4) * Tiny));
    RMom.push_back(roundTo(Ty, G.uniform(-4, 4) * Tiny));
    const double Sign = K % 4 < 2 ? 1 : -1;
    RGrad.push_back(
        roundTo(Ty, Sign * (K % 2 ? G.uniform(0, 4) * Tiny
                                  : std::sqrt(G.uniform(0, 8) * Tiny))));
  }
  const size_t RN = RVar.size();
  const Shape RS = {int64_t(RN)};
  // With a decayed rate and momentum; the defaults (momentum 0, epsilon
  // 1e-10); lr_t 8 with epsilon 256 (quotients of tiny gradients
  // underflow) and rho 0.25 (so can the mean square's sum); and lr_t 8 with
  // epsilon 4 and momentum 4, where denormal gradients and momenta would
  // give normal numbers.
  struct RMSPropCase {
    const char *Label;
    double Lr, Rho, Momentum, Eps;
    bool Defaults;
  };
  for (const RMSPropCase &P :
       {RMSPropCase{"decay and momentum", 0.001, 0.9, 0.9, 1e-10, false},
        RMSPropCase{"defaults", 0.01, 0.9, 0.0, 1e-10, true},
        RMSPropCase{"lr_t 8, epsilon 256", 16.0, 0.25, 0.5, 256.0, false},
        RMSPropCase{"lr_t 8, epsilon 4", 16.0, 0.9, 4.0, 4.0, false}}) {
    OpRunner R("ApplyRMSProp");
    R.attr("learning_rate", P.Lr)
        .attr("decay_steps", int64_t(3))
        .attr("decay_rate", 0.5);
    if (!P.Defaults)
      R.attr("rho", P.Rho).attr("momentum", P.Momentum).attr("epsilon", P.Eps);
    R.input(TT(Ty, RS, RVar))
        .input(TT(Ty, RS, RMs))
        .input(TT(Ty, RS, RMom))
        .input(TT(Ty, RS, RGrad))
        .input(step(4));
    R.run();
    // The CPU's (and the GPU's) scalars: in double, rounded once.
    const cuda::RMSPropScalars<T> S = {T(1) - T(P.Rho), T(P.Momentum), T(P.Eps),
                                       T(P.Lr * mdrt::integerPower(0.5, 1))};
    std::vector<T> V(RN), Q(RN), M(RN);
    for (size_t K = 0; K < RN; ++K) {
      V[K] = T(RVar[K]);
      Q[K] = T(RMs[K]);
      M[K] = T(RMom[K]);
      cuda::rmspropUpdate(V[K], Q[K], M[K], T(RGrad[K]), S);
    }
    const std::string What = "ApplyRMSProp (" + std::string(P.Label) + ") ";
    expectSameBits(R.in(0), inT<T>(RN, [&](size_t K) { return V[K]; }),
                   What + "var " + Name);
    expectSameBits(R.in(1), inT<T>(RN, [&](size_t K) { return Q[K]; }),
                   What + "ms " + Name);
    expectSameBits(R.in(2), inT<T>(RN, [&](size_t K) { return M[K]; }),
                   What + "mom " + Name);
  }
  // Adagrad, on the values above and on values around the smallest normal
  // number: variables of a few times it, gradients whose squares are (even
  // elements) or that are themselves (odd ones), accumulators of a few
  // times it (K % 8 < 4) or between 16 and 4096, where quotients of tiny
  // gradients underflow (at lr_t 8 too). The accumulators are positive, and
  // normal where the gradient is zero or denormal: 0 / sqrt(0) is NaN, whose
  // bits are the hardware's own (x86's and a GPU's differ).
  std::vector<double> AVar = Var, AAcc = Slot, AGrad = Grad;
  for (size_t K = 0; K < 256; ++K) {
    AVar.push_back(roundTo(Ty, G.uniform(-4, 4) * Tiny));
    AAcc.push_back(
        roundTo(Ty, K % 8 < 4 ? G.uniform(0, 4) * Tiny : G.uniform(16, 4096)));
    const double Sign = K % 4 < 2 ? 1 : -1;
    AGrad.push_back(
        roundTo(Ty, Sign * (K % 2 ? G.uniform(0, 4) * Tiny
                                  : std::sqrt(G.uniform(0, 8) * Tiny))));
  }
  for (size_t K = 0; K < AAcc.size(); ++K) {
    AAcc[K] = std::fabs(AAcc[K]);
    if (AAcc[K] < Tiny && std::fabs(AGrad[K]) < Tiny)
      AAcc[K] = Tiny;
  }
  const size_t AN = AVar.size();
  const Shape AS = {int64_t(AN)};
  // lr_t 0.005, where products of tiny gradients underflow, and lr_t 8,
  // where denormal gradients would give normal numbers.
  for (double Lr : {0.01, 16.0}) {
    OpRunner R("ApplyAdagrad");
    R.attr("learning_rate", Lr)
        .attr("decay_steps", int64_t(3))
        .attr("decay_rate", 0.5)
        .input(TT(Ty, AS, AVar))
        .input(TT(Ty, AS, AAcc))
        .input(TT(Ty, AS, AGrad))
        .input(step(4));
    R.run();
    const T LrT = T(Lr * mdrt::integerPower(0.5, 1));
    std::vector<T> V(AN), A(AN);
    for (size_t K = 0; K < AN; ++K) {
      V[K] = T(AVar[K]);
      A[K] = T(AAcc[K]);
      cuda::adagradUpdate(V[K], A[K], T(AGrad[K]), LrT);
    }
    const std::string What =
        "ApplyAdagrad (lr_t " + std::to_string(double(LrT)) + ") ";
    expectSameBits(R.in(0), inT<T>(AN, [&](size_t K) { return V[K]; }),
                   What + "var " + Name);
    expectSameBits(R.in(1), inT<T>(AN, [&](size_t K) { return A[K]; }),
                   What + "accumulator " + Name);
  }
  // Centered RMSProp, on the values above (mean squares |Slot|, of 1e-3,
  // well above the squares of the mean gradients, Slot2, of 1e-6; new
  // momenta) and on values around the smallest normal number: variables,
  // momenta and (K % 8 >= 4) mean gradients of a few times it, mean
  // gradients (K % 8 < 4) whose squares are a few times it, mean squares a
  // few times it above the mean gradient's square, gradients whose squares
  // are (even elements) or that are themselves (odd ones), the two signs
  // in every combination. The new mean square, a convex combination, stays
  // above the new mean gradient's square but for rounding errors far below
  // the smallest normal number, so (ms - mg^2) + eps is positive: no NaN,
  // whose bits are the hardware's own.
  std::vector<double> CVar = Var, CMs = Slot, CMg = Slot2, CMom, CGrad = Grad;
  for (double &E : CMs)
    E = std::fabs(E);
  for (size_t K = 0; K < N; ++K)
    CMom.push_back(roundTo(Ty, G.uniform(-1e-3, 1e-3)));
  for (size_t K = 0; K < 256; ++K) {
    CVar.push_back(roundTo(Ty, G.uniform(-4, 4) * Tiny));
    CMom.push_back(roundTo(Ty, G.uniform(-4, 4) * Tiny));
    const double Sign = K % 4 < 2 ? 1 : -1;
    const double MgSign = K % 16 < 8 ? 1 : -1;
    const double Mg =
        roundTo(Ty, MgSign * (K % 8 < 4 ? std::sqrt(G.uniform(0, 4) * Tiny)
                                        : G.uniform(0, 4) * Tiny));
    CMg.push_back(Mg);
    CMs.push_back(roundTo(Ty, Mg * Mg + G.uniform(0, 4) * Tiny));
    CGrad.push_back(
        roundTo(Ty, Sign * (K % 2 ? G.uniform(0, 4) * Tiny
                                  : std::sqrt(G.uniform(0, 8) * Tiny))));
  }
  const size_t CN = CVar.size();
  const Shape CS = {int64_t(CN)};
  // RMSProp's cases, and epsilon twice the smallest normal number, where
  // the flushes of mg^2 and of ms - mg^2 show in the denominator.
  for (const RMSPropCase &P :
       {RMSPropCase{"decay and momentum", 0.001, 0.9, 0.9, 1e-10, false},
        RMSPropCase{"defaults", 0.01, 0.9, 0.0, 1e-10, true},
        RMSPropCase{"lr_t 8, epsilon 256", 16.0, 0.25, 0.5, 256.0, false},
        RMSPropCase{"lr_t 8, epsilon 4", 16.0, 0.9, 4.0, 4.0, false},
        RMSPropCase{"epsilon 2 min", 0.01, 0.9, 0.5, 2 * Tiny, false}}) {
    OpRunner R("ApplyCenteredRMSProp");
    R.attr("learning_rate", P.Lr)
        .attr("decay_steps", int64_t(3))
        .attr("decay_rate", 0.5);
    if (!P.Defaults)
      R.attr("rho", P.Rho).attr("momentum", P.Momentum).attr("epsilon", P.Eps);
    R.input(TT(Ty, CS, CVar))
        .input(TT(Ty, CS, CMs))
        .input(TT(Ty, CS, CMg))
        .input(TT(Ty, CS, CMom))
        .input(TT(Ty, CS, CGrad))
        .input(step(4));
    R.run();
    const cuda::RMSPropScalars<T> S = {T(1) - T(P.Rho), T(P.Momentum), T(P.Eps),
                                       T(P.Lr * mdrt::integerPower(0.5, 1))};
    std::vector<T> V(CN), Q(CN), A(CN), M(CN);
    size_t NaNs = 0;
    for (size_t K = 0; K < CN; ++K) {
      V[K] = T(CVar[K]);
      Q[K] = T(CMs[K]);
      A[K] = T(CMg[K]);
      M[K] = T(CMom[K]);
      cuda::centeredRmspropUpdate(V[K], Q[K], A[K], M[K], T(CGrad[K]), S);
      NaNs += std::isnan(V[K]);
    }
    const std::string What =
        "ApplyCenteredRMSProp (" + std::string(P.Label) + ") ";
    EXPECT_EQ(NaNs, 0u) << What << Name;
    expectSameBits(R.in(0), inT<T>(CN, [&](size_t K) { return V[K]; }),
                   What + "var " + Name);
    expectSameBits(R.in(1), inT<T>(CN, [&](size_t K) { return Q[K]; }),
                   What + "ms " + Name);
    expectSameBits(R.in(2), inT<T>(CN, [&](size_t K) { return A[K]; }),
                   What + "mg " + Name);
    expectSameBits(R.in(3), inT<T>(CN, [&](size_t K) { return M[K]; }),
                   What + "mom " + Name);
  }
}

TEST(CudaUpdateMath, MatchesTheCpuUpdatesBitForBitFloat32) {
  checkUpdates<float>(DType::Float32);
}

TEST(CudaUpdateMath, MatchesTheCpuUpdatesBitForBitFloat64) {
  checkUpdates<double>(DType::Float64);
}

#if defined(__x86_64__)
/// The hardware's results with FTZ and DAZ set, operation by operation.
template <typename T> struct Hardware {
  static T run(char Op, T A, T B) {
    volatile T VA = A, VB = B;
    const unsigned Saved = _mm_getcsr();
    _mm_setcsr(Saved | 0x8040);
    T R;
    switch (Op) {
    case '+':
      R = VA + VB;
      break;
    case '-':
      R = VA - VB;
      break;
    case '*':
      R = VA * VB;
      break;
    default:
      R = VA / VB;
      break;
    }
    volatile T Out = R;
    _mm_setcsr(Saved);
    return Out;
  }
};

template <typename T> T soft(char Op, T A, T B) {
  using M = cuda::FtzMath<T>;
  A = M::in(A);
  B = M::in(B);
  switch (Op) {
  case '+':
    return M::add(A, B);
  case '-':
    return M::sub(A, B);
  case '*':
    return M::mul(A, B);
  default:
    return M::div(A, B);
  }
}

/// Operands whose results fall around the smallest normal number, where
/// flushing after rounding to a denormal and x86's flushing differ.
template <typename T> void checkOperations(T Min) {
  std::mt19937_64 G(5);
  std::uniform_real_distribution<double> U(0.5, 2.0);
  std::vector<std::pair<T, T>> Cases = {
      {T(1) - std::numeric_limits<T>::epsilon() / 2, Min},
      {T(1) - std::numeric_limits<T>::epsilon(), Min},
      {T(1.5), Min / 2},
      {Min, T(1) + std::numeric_limits<T>::epsilon()},
      {Min * 3, T(-3)},
      {-Min, T(0.5)}};
  for (int K = 0; K < 4000; ++K) {
    T A = T(U(G)), B = T(U(G)) * Min;
    Cases.push_back({K % 2 ? -A : A, B});
  }
  for (const auto &C : Cases)
    for (char Op : {'+', '-', '*', '/'}) {
      T A = C.first, B = Op == '/' ? T(1) / C.first : C.second;
      if (Op == '+' || Op == '-')
        A = C.second * C.first;
      T Hard = Hardware<T>::run(Op, Op == '/' ? C.second : A, B);
      T Soft = soft<T>(Op, Op == '/' ? C.second : A, B);
      ASSERT_EQ(std::memcmp(&Hard, &Soft, sizeof(T)), 0)
          << double(Op == '/' ? C.second : A) << " " << Op << " " << double(B)
          << ": hardware " << double(Hard) << ", FtzMath " << double(Soft);
    }
}

TEST(CudaUpdateMath, OperationsMatchTheHardwareWithFtzAndDaz) {
  checkOperations<float>(FLT_MIN);
  checkOperations<double>(DBL_MIN);
}
#endif

TEST(CudaUpdateMath, FlushKeepsTheSign) {
  float Neg = cuda::flushDenormal(-FLT_MIN / 2);
  EXPECT_EQ(Neg, 0.0f);
  EXPECT_TRUE(std::signbit(Neg));
  EXPECT_EQ(cuda::flushDenormal(FLT_MIN), FLT_MIN);
  EXPECT_EQ(cuda::flushDenormal(DBL_MIN / 8), 0.0);
  EXPECT_EQ(cuda::flushDenormal(-1.5), -1.5);
}

} // namespace
