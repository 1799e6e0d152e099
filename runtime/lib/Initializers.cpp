//===- Initializers.cpp - Initial values of variables ---------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Every value is a pure function of (run seed, the variable's stream,
// element), computed on the host in double precision, so every device kind
// starts from the same numbers.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Executor.h"
#include "mdrt/Random.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace mdrt;

namespace {

/// fan_in and fan_out as Keras computes them.
void fans(const std::vector<int64_t> &S, double &In, double &Out) {
  if (S.empty()) {
    In = Out = 1;
  } else if (S.size() == 1) {
    In = Out = double(S[0]);
  } else {
    double Receptive = 1;
    for (size_t I = 0; I + 2 < S.size(); ++I)
      Receptive *= double(S[I]);
    In = double(S[S.size() - 2]) * Receptive;
    Out = double(S.back()) * Receptive;
  }
}

/// A standard normal draw for element \p E (Box-Muller), attempt \p A.
double normal(uint64_t Seed, uint64_t Stream, uint64_t E, uint64_t A) {
  double U1 = 1.0 - uniformRandom(Seed, Stream, A, 2 * E);
  double U2 = uniformRandom(Seed, Stream, A, 2 * E + 1);
  return std::sqrt(-2.0 * std::log(U1)) * std::cos(2.0 * M_PI * U2);
}

/// Redrawn until within two standard deviations (tf.truncated_normal).
double truncatedNormal(uint64_t Seed, uint64_t Stream, uint64_t E) {
  for (uint64_t A = 0;; ++A) {
    double Z = normal(Seed, Stream, E, A);
    if (std::fabs(Z) <= 2.0)
      return Z;
  }
}

/// \p X as a T. Integers saturate and take NaN as 0 (a plan may give an
/// integer variable any initializer; converting a double out of range is
/// undefined).
template <typename T> T convert(double X) {
  if constexpr (std::is_floating_point_v<T>) {
    return T(X);
  } else {
    if (std::isnan(X))
      return 0;
    // The limits as doubles: the upper one rounds up to a power of two,
    // which is out of range, hence >=.
    if (X <= double(std::numeric_limits<T>::min()))
      return std::numeric_limits<T>::min();
    if (X >= double(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return T(X);
  }
}

template <typename T> void store(void *Host, const std::vector<double> &V) {
  T *P = static_cast<T *>(Host);
  for (size_t I = 0; I < V.size(); ++I)
    P[I] = convert<T>(V[I]);
}

} // namespace

Status mdrt::initialValue(const fb::Variable &V, const TensorDesc &Type,
                          uint64_t Seed, void *Host) {
  size_t N = size_t(Type.numElements());
  std::vector<double> Values(N);
  uint64_t Stream = V.stream();
  double FanIn, FanOut;
  fans(Type.Shape, FanIn, FanOut);
  // Truncation at two standard deviations shrinks the spread by this much.
  const double TruncatedStd = 0.87962566103423978;
  switch (V.init()) {
  case fb::InitKind::Zeros:
    break;
  case fb::InitKind::Ones:
    std::fill(Values.begin(), Values.end(), 1.0);
    break;
  case fb::InitKind::Constant:
    std::fill(Values.begin(), Values.end(), V.value());
    break;
  case fb::InitKind::Normal:
    for (size_t I = 0; I < N; ++I)
      Values[I] = V.mean() + V.stddev() * normal(Seed, Stream, I, 0);
    break;
  case fb::InitKind::TruncatedNormal:
    for (size_t I = 0; I < N; ++I)
      Values[I] = V.mean() + V.stddev() * truncatedNormal(Seed, Stream, I);
    break;
  case fb::InitKind::Uniform:
    for (size_t I = 0; I < N; ++I)
      Values[I] = V.minval() +
                  (V.maxval() - V.minval()) * uniformRandom(Seed, Stream, 0, I);
    break;
  case fb::InitKind::GlorotUniform: {
    double Limit = std::sqrt(6.0 / (FanIn + FanOut));
    for (size_t I = 0; I < N; ++I)
      Values[I] = Limit * (2.0 * uniformRandom(Seed, Stream, 0, I) - 1.0);
    break;
  }
  case fb::InitKind::GlorotNormal: {
    double Std = std::sqrt(2.0 / (FanIn + FanOut)) / TruncatedStd;
    for (size_t I = 0; I < N; ++I)
      Values[I] = Std * truncatedNormal(Seed, Stream, I);
    break;
  }
  case fb::InitKind::HeNormal: {
    double Std = std::sqrt(2.0 / FanIn) / TruncatedStd;
    for (size_t I = 0; I < N; ++I)
      Values[I] = Std * truncatedNormal(Seed, Stream, I);
    break;
  }
  default:
    return Status::error("variable '" + V.name()->str() +
                         "' has an unknown initializer");
  }
  switch (Type.Type) {
  case DType::Float32:
    store<float>(Host, Values);
    break;
  case DType::Float64:
    store<double>(Host, Values);
    break;
  case DType::Int32:
    store<int32_t>(Host, Values);
    break;
  case DType::Int64:
    store<int64_t>(Host, Values);
    break;
  case DType::Bool:
    for (size_t I = 0; I < N; ++I)
      static_cast<uint8_t *>(Host)[I] = Values[I] != 0;
    break;
  default:
    return Status::error("variable '" + V.name()->str() +
                         "' has an invalid type");
  }
  return Status::ok();
}
