//===- KernelTestUtil.h - Helpers of the CPU kernel tests -------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Tests hold tensors as double values with a dtype and a shape; OpRunner
// packs them into buffers of the dtype, creates the kernel through the
// registry, runs it, and unpacks outputs (and inputs, which state updates
// write in place). Random values are rounded to the dtype first, so the
// float64 references compute on exactly what the kernel read.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_UNITTESTS_RUNTIME_KERNELS_KERNELTESTUTIL_H
#define MDPLAN_UNITTESTS_RUNTIME_KERNELS_KERNELTESTUTIL_H

#include "mdrt/Kernel.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mdrt {
namespace test {

using Shape = std::vector<int64_t>;

inline int64_t numElements(const Shape &S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

/// A tensor of the tests: values as doubles.
struct TT {
  DType Type = DType::Float32;
  Shape Dims;
  std::vector<double> V;

  TT() = default;
  TT(DType T, Shape S, std::vector<double> Values)
      : Type(T), Dims(std::move(S)), V(std::move(Values)) {}
  int64_t size() const { return numElements(Dims); }
};

/// \p V as stored in \p T (float rounding, integer truncation).
inline double roundTo(DType T, double V) {
  switch (T) {
  case DType::Float32:
    return double(float(V));
  case DType::Int32:
    return double(int32_t(V));
  case DType::Int64:
    return double(int64_t(V));
  case DType::Bool:
    return V != 0 ? 1.0 : 0.0;
  default:
    return V;
  }
}

inline bool isFloat(DType T) {
  return T == DType::Float32 || T == DType::Float64;
}

/// A deterministic source of test values.
class Rng {
public:
  explicit Rng(uint64_t Seed = 1234) : G(Seed) {}
  double uniform(double Lo, double Hi) {
    return std::uniform_real_distribution<double>(Lo, Hi)(G);
  }
  int64_t integer(int64_t Lo, int64_t Hi) {
    return std::uniform_int_distribution<int64_t>(Lo, Hi)(G);
  }
  /// Uniform values in [Lo, Hi) (integers in [Lo, Hi] for int types),
  /// rounded to \p T.
  TT tensor(DType T, Shape S, double Lo = -1, double Hi = 1) {
    TT R(T, S, {});
    R.V.resize(size_t(numElements(S)));
    for (double &X : R.V)
      X = isFloat(T) ? roundTo(T, uniform(Lo, Hi))
                     : double(integer(int64_t(Lo), int64_t(Hi)));
    return R;
  }

private:
  std::mt19937_64 G;
};

/// Sets MDRT_CPU_KERNELS for a scope (kernels read it when created).
class BackendScope {
public:
  explicit BackendScope(const char *Name) {
    const char *Old = std::getenv("MDRT_CPU_KERNELS");
    HadOld = Old != nullptr;
    if (Old)
      OldValue = Old;
    if (Name)
      setenv("MDRT_CPU_KERNELS", Name, 1);
    else
      unsetenv("MDRT_CPU_KERNELS");
  }
  ~BackendScope() {
    if (HadOld)
      setenv("MDRT_CPU_KERNELS", OldValue.c_str(), 1);
    else
      unsetenv("MDRT_CPU_KERNELS");
  }

private:
  bool HadOld = false;
  std::string OldValue;
};

/// Packs values into a buffer of \p T.
inline std::vector<uint8_t> pack(const TT &X) {
  size_t N = X.V.size(), S = dtypeSize(X.Type);
  std::vector<uint8_t> B(std::max<size_t>(N * S, 1));
  for (size_t I = 0; I < N; ++I) {
    double V = X.V[I];
    switch (X.Type) {
    case DType::Float32: {
      float F = float(V);
      std::memcpy(&B[I * S], &F, S);
      break;
    }
    case DType::Float64:
      std::memcpy(&B[I * S], &V, S);
      break;
    case DType::Int32: {
      int32_t F = int32_t(V);
      std::memcpy(&B[I * S], &F, S);
      break;
    }
    case DType::Int64: {
      int64_t F = int64_t(V);
      std::memcpy(&B[I * S], &F, S);
      break;
    }
    case DType::Bool:
      B[I] = V != 0;
      break;
    default:
      break;
    }
  }
  return B;
}

inline std::vector<double> unpack(DType T, const std::vector<uint8_t> &B,
                                  size_t N) {
  std::vector<double> R(N);
  size_t S = dtypeSize(T);
  for (size_t I = 0; I < N; ++I) {
    switch (T) {
    case DType::Float32: {
      float F;
      std::memcpy(&F, &B[I * S], S);
      R[I] = F;
      break;
    }
    case DType::Float64:
      std::memcpy(&R[I], &B[I * S], S);
      break;
    case DType::Int32: {
      int32_t F;
      std::memcpy(&F, &B[I * S], S);
      R[I] = F;
      break;
    }
    case DType::Int64: {
      int64_t F;
      std::memcpy(&F, &B[I * S], S);
      R[I] = double(F);
      break;
    }
    case DType::Bool:
      R[I] = B[I];
      break;
    default:
      break;
    }
  }
  return R;
}

/// Builds, creates and runs one kernel.
class OpRunner {
public:
  explicit OpRunner(std::string Op) {
    Info.Op = std::move(Op);
    Info.Name = "test/" + Info.Op;
  }
  template <typename V> OpRunner &attr(const std::string &Name, V Value) {
    Info.Attrs.set(Name, AttrValue(std::move(Value)));
    return *this;
  }
  OpRunner &input(const TT &X) {
    Info.Inputs.push_back(TensorDesc{X.Type, X.Dims});
    In.push_back(pack(X));
    return *this;
  }
  OpRunner &output(DType T, Shape S) {
    Info.Outputs.push_back(TensorDesc{T, std::move(S)});
    return *this;
  }
  OpRunner &threads(int N) {
    Info.NumThreads = N;
    return *this;
  }
  OpRunner &index(uint32_t I) {
    Info.Index = I;
    return *this;
  }
  OpRunner &name(std::string N) {
    Info.Name = std::move(N);
    return *this;
  }

  /// Creates the kernel; the error message, or "" on success.
  std::string create() {
    auto K = KernelRegistry::get().create(DeviceKind::CPU, Info);
    if (!K.isOk())
      return K.status().message();
    Kern = K.take();
    Out.clear();
    for (const TensorDesc &D : Info.Outputs)
      // Garbage-filled, so a kernel that skips elements is caught.
      Out.push_back(
          std::vector<uint8_t>(std::max<size_t>(D.bytes(), 1), uint8_t(0xA5)));
    return "";
  }
  /// Creates (if needed) and runs; fails the test if creation fails.
  OpRunner &run(uint64_t Step = 0, uint64_t Seed = 0) {
    if (!Kern) {
      std::string E = create();
      EXPECT_EQ(E, "") << "creating " << Info.Op;
      if (!E.empty())
        return *this;
    }
    std::vector<void *> InP, OutP;
    for (auto &B : In)
      InP.push_back(B.data());
    for (auto &B : Out)
      OutP.push_back(B.data());
    ExecContext C;
    C.In = InP.data();
    C.Out = OutP.data();
    C.Step = Step;
    C.Seed = Seed;
    RunError = Status::ok();
    C.Error = &RunError;
    Kern->run(C);
    return *this;
  }
  /// What the last run reported through ExecContext::fail, or "".
  std::string runError() const { return RunError.message(); }
  std::vector<double> out(unsigned I) const {
    if (I >= Out.size())
      return {};
    return unpack(Info.Outputs[I].Type, Out[I],
                  size_t(Info.Outputs[I].numElements()));
  }
  /// Input \p I as it is now (state updates write it).
  std::vector<double> in(unsigned I) const {
    return unpack(Info.Inputs[I].Type, In[I],
                  size_t(Info.Inputs[I].numElements()));
  }
  /// Replaces input \p I's values.
  void setInput(unsigned I, const TT &X) { In[I] = pack(X); }

  KernelInfo Info;

private:
  std::unique_ptr<Kernel> Kern;
  std::vector<std::vector<uint8_t>> In, Out;
  Status RunError;
};

/// The relative tolerance of a dtype: float32 ~1e-5, float64 1e-12.
inline double tolerance(DType T) {
  return T == DType::Float32 ? 1e-5 : T == DType::Float64 ? 1e-12 : 0.0;
}

/// Expects |got - want| <= tol * (|want| + mag) element by element, where
/// \p Mag (same size, or empty for 1) bounds the terms summed into each
/// value (rounding grows with them).
inline void expectClose(const std::vector<double> &Got,
                        const std::vector<double> &Want, DType T,
                        const std::vector<double> &Mag = {},
                        const std::string &What = "", double Scale = 1.0) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  double Tol = tolerance(T) * Scale;
  int Bad = 0;
  for (size_t I = 0; I < Got.size(); ++I) {
    double M = Mag.empty() ? 1.0 : Mag[I];
    bool Ok = (std::isnan(Want[I]) && std::isnan(Got[I])) ||
              Got[I] == Want[I] ||
              std::fabs(Got[I] - Want[I]) <= Tol * (std::fabs(Want[I]) + M);
    if (!Ok && ++Bad <= 5)
      ADD_FAILURE() << What << " element " << I << ": got " << Got[I]
                    << ", want " << Want[I] << " (" << dtypeName(T) << ")";
  }
}

/// Exact equality, element by element (NaN equals NaN).
inline void expectEqual(const std::vector<double> &Got,
                        const std::vector<double> &Want,
                        const std::string &What = "") {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  int Bad = 0;
  for (size_t I = 0; I < Got.size(); ++I) {
    bool Ok = Got[I] == Want[I] || (std::isnan(Got[I]) && std::isnan(Want[I]));
    if (!Ok && ++Bad <= 5)
      ADD_FAILURE() << What << " element " << I << ": got " << Got[I]
                    << ", want " << Want[I];
  }
}

/// Row-major strides of \p S.
inline Shape stridesOf(const Shape &S) {
  Shape R(S.size(), 1);
  for (size_t K = S.size(); K-- > 1;)
    R[K - 1] = R[K] * S[K];
  return R;
}

/// The multi-index of flat index \p I in \p S.
inline Shape unflatten(int64_t I, const Shape &S) {
  Shape Idx(S.size());
  for (size_t K = S.size(); K-- > 0;) {
    Idx[K] = S[K] ? I % S[K] : 0;
    I = S[K] ? I / S[K] : 0;
  }
  return Idx;
}

/// The flat index in \p S (rank <= rank of \p Idx, aligned on the right,
/// size-1 dimensions broadcast) of the multi-index \p Idx.
inline int64_t broadcastIndex(const Shape &Idx, const Shape &S) {
  int64_t F = 0;
  size_t Off = Idx.size() - S.size();
  for (size_t K = 0; K < S.size(); ++K)
    F = F * S[K] + (S[K] == 1 ? 0 : Idx[K + Off]);
  return F;
}

inline const DType FloatTypes[] = {DType::Float32, DType::Float64};

/// A max-pooling case of the CPU kernel tests and the GPU-arithmetic tests.
struct PoolCase {
  int64_t N, H, W, C, KH, KW, SH, SW;
  bool Same;
};

/// Tiling and overlapping windows, SAME and VALID, remainders, windows
/// larger than the image, strides past it (one output; 2^40 is more than
/// oneDNN takes, and the window geometry makes it the image's size).
inline const PoolCase PoolCases[] = {
    {2, 4, 4, 3, 2, 2, 2, 2, false},
    {2, 5, 5, 3, 2, 2, 2, 2, false},
    {2, 5, 5, 3, 2, 2, 2, 2, true},
    {1, 7, 6, 2, 3, 3, 2, 2, true},
    {1, 7, 6, 2, 3, 3, 1, 1, true},
    {2, 6, 7, 4, 3, 2, 1, 2, false},
    {1, 3, 3, 1, 3, 3, 1, 1, true},
    {3, 9, 9, 5, 3, 3, 2, 2, false},
    {4, 28, 28, 32, 2, 2, 2, 2, false},
    {1, 2, 2, 3, 3, 3, 1, 1, false},
    {2, 8, 6, 2, 2, 3, 2, 3, false},
    {1, 9, 9, 2, 4, 4, 3, 3, true},
    {1, 3, 3, 1, 2, 2, 5, 7, true},
    {1, 3, 3, 2, 2, 3, int64_t(1) << 40, 4, false},
    {2, 3, 4, 1, 2, 2, int64_t(1) << 40, int64_t(1) << 40, true}};
inline const DType NumericTypes[] = {DType::Float32, DType::Float64,
                                     DType::Int32, DType::Int64};

inline std::vector<double> absValues(std::vector<double> V) {
  for (double &X : V)
    X = std::fabs(X);
  return V;
}

} // namespace test
} // namespace mdrt

#endif // MDPLAN_UNITTESTS_RUNTIME_KERNELS_KERNELTESTUTIL_H
