//===- Elementwise.cpp - Elementwise and broadcasting kernels -------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Add, Sub, Mul, Div, Maximum, Minimum, GreaterEqualMask (NumPy
// broadcasting), BiasAdd, BroadcastGrad, AddN, the unary math and
// activations with their gradients, Softmax, SoftmaxGrad and Dropout.
//
// Broadcasting is planned once: the output shape is collapsed to the fewest
// dimensions over which both inputs are either contiguous or broadcast, so
// a run is an outer odometer around an inner loop of one of four
// vectorizable forms (both contiguous, either one broadcast, or both).
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include "mdrt/Random.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

/// Integer arithmetic wraps around (two's complement), as on GPUs.
template <typename T> using Unsigned = std::make_unsigned_t<T>;

//===----------------------------------------------------------------------===//
// Broadcasting plan
//===----------------------------------------------------------------------===//

constexpr unsigned MaxRank = 16;

/// BroadcastPlan (KernelChecks.h, shared with the GPU's kernels) within
/// the CPU loops' MaxRank dimensions.
Status planLoop(const std::vector<int64_t> &Out, const std::vector<int64_t> &A,
                const std::vector<int64_t> &B, BroadcastPlan &P) {
  MDRT_RETURN_IF_ERROR(P.init(Out, A, B));
  if (P.Dims.size() > MaxRank)
    return Status::error("broadcasting " + shapeStr(A) + " and " + shapeStr(B) +
                         " to " + shapeStr(Out) + " takes " +
                         std::to_string(P.Dims.size()) +
                         " loop dimensions; at most " +
                         std::to_string(MaxRank) + " are supported");
  return Status::ok();
}

/// Y[0..N) = F(A[i * SA], B[i * SB]) for inner strides in {0, 1}.
template <typename T, typename Op>
inline void innerLoop(T *Y, const T *A, const T *B, int64_t N, bool CA, bool CB,
                      const Op &F) {
  if (CA && CB) {
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(A[I], B[I]);
  } else if (CA) {
    const T BV = *B;
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(A[I], BV);
  } else if (CB) {
    const T AV = *A;
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(AV, B[I]);
  } else {
    const T V = F(*A, *B);
    for (int64_t I = 0; I < N; ++I)
      Y[I] = V;
  }
}

/// Runs F over the output elements [Begin, End) of plan \p P.
template <typename T, typename Op>
MDRT_CPU_CLONES void runBroadcast(const BroadcastPlan &P, const T *A,
                                  const T *B, T *Y, int64_t Begin, int64_t End,
                                  const Op &F) {
  const unsigned R = unsigned(P.Dims.size());
  const int64_t L = P.Dims[R - 1];
  const bool CA = P.SA[R - 1] != 0, CB = P.SB[R - 1] != 0;
  // Position the odometer of the outer dimensions at Begin's row.
  int64_t Idx[MaxRank];
  int64_t Row = Begin / L, OffA = 0, OffB = 0;
  for (unsigned D = R - 1; D-- > 0;) {
    Idx[D] = Row % P.Dims[D];
    Row /= P.Dims[D];
    OffA += Idx[D] * P.SA[D];
    OffB += Idx[D] * P.SB[D];
  }
  int64_t J = Begin % L, Pos = Begin;
  while (Pos < End) {
    int64_t Len = std::min(L - J, End - Pos);
    innerLoop(Y + Pos, A + OffA + (CA ? J : 0), B + OffB + (CB ? J : 0), Len,
              CA, CB, F);
    Pos += Len;
    J = 0;
    for (unsigned D = R - 1; D-- > 0;) {
      OffA += P.SA[D];
      OffB += P.SB[D];
      if (++Idx[D] < P.Dims[D])
        break;
      OffA -= P.SA[D] * P.Dims[D];
      OffB -= P.SB[D] * P.Dims[D];
      Idx[D] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

template <typename T> struct AddF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) + Unsigned<T>(B));
    else
      return A + B;
  }
};
template <typename T> struct SubF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) - Unsigned<T>(B));
    else
      return A - B;
  }
};
template <typename T> struct MulF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) * Unsigned<T>(B));
    else
      return A * B;
  }
};
template <typename T> struct DivF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value) {
      // Truncating division; x / 0 gives 0 and MIN / -1 wraps, instead of
      // trapping.
      if (B == 0)
        return 0;
      if (B == -1)
        return T(Unsigned<T>(0) - Unsigned<T>(A));
      return A / B;
    } else {
      return A / B;
    }
  }
};

/// The larger of A and B; NaN where either is (as NumPy's maximum).
template <typename T> struct MaxF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return A < B ? B : A;
    else
      return A > B || A != A ? A : B;
  }
};

/// The smaller of A and B; NaN where either is (as NumPy's minimum).
template <typename T> struct MinF {
  T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return B < A ? B : A;
    else
      return A < B || A != A ? A : B;
  }
};

/// 1 where A >= B, else 0 (where either is NaN too): where the gradient of
/// Maximum(A, B) goes to A, and that of Minimum(B, A) to B, as TF's
/// greater_equal and less_equal masks.
template <typename T> struct GreaterEqualMaskF {
  T operator()(T A, T B) const { return A >= B ? T(1) : T(0); }
};

/// Y = F(A, B) with broadcasting. With a constant B (BroadcastGrad's
/// scale), input 1 is not read.
template <typename T, template <typename> class F>
class BinaryKernel : public Kernel {
public:
  BinaryKernel(BroadcastPlan P, int Threads, int64_t Grain)
      : P(std::move(P)), Threads(Threads), Grain(Grain) {}
  void setConstantB(T V) {
    HasConstB = true;
    ConstB = V;
  }

  void run(const ExecContext &C) override {
    const T *A = static_cast<const T *>(C.In[0]);
    const T *B = HasConstB ? &ConstB : static_cast<const T *>(C.In[1]);
    T *Y = static_cast<T *>(C.Out[0]);
    F<T> Op;
    parallelFor(P.N, Grain, Threads, [&](int64_t Begin, int64_t End) {
      runBroadcast(P, A, B, Y, Begin, End, Op);
    });
  }

private:
  BroadcastPlan P;
  int Threads;
  int64_t Grain;
  bool HasConstB = false;
  T ConstB = T(0);
};

template <template <typename> class F>
KernelOr makeBinary(const KernelInfo &I, const std::vector<int64_t> &AShape,
                    const std::vector<int64_t> &BShape, bool FloatOnly,
                    double ConstB = 0, bool HasConstB = false) {
  BroadcastPlan P;
  MDRT_RETURN_IF_ERROR(planLoop(I.Outputs[0].Shape, AShape, BShape, P));
  DType T = I.Outputs[0].Type;
  int64_t Grain =
      std::is_same<F<float>, DivF<float>>::value ? GrainMedium : GrainCheap;
  auto Make = [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    auto K =
        std::make_unique<BinaryKernel<E, F>>(std::move(P), I.NumThreads, Grain);
    if (HasConstB)
      K->setConstantB(E(ConstB));
    return wrap(std::move(K));
  };
  switch (T) {
  case DType::Float32:
    return Make((float *)nullptr);
  case DType::Float64:
    return Make((double *)nullptr);
  case DType::Int32:
    if (!FloatOnly)
      return Make((int32_t *)nullptr);
    break;
  case DType::Int64:
    if (!FloatOnly)
      return Make((int64_t *)nullptr);
    break;
  default:
    break;
  }
  return typeError(I, T);
}

template <template <typename> class F>
KernelOr createBinary(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 1));
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1}, {0}, I.Inputs[0].Type));
  return makeBinary<F>(I, I.Inputs[0].Shape, I.Inputs[1].Shape,
                       /*FloatOnly=*/false);
}

KernelOr createBiasAdd(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 1));
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1}, {0}, I.Inputs[0].Type));
  const TensorDesc &X = I.Inputs[0], &Bias = I.Inputs[1];
  if (X.rank() < 1 || Bias.rank() != 1 || Bias.Shape[0] != X.Shape.back())
    return Status::error("bias " + Bias.str() +
                         " does not match the last dimension of " + X.str());
  if (I.Outputs[0].Shape != X.Shape)
    return Status::error("output " + I.Outputs[0].str() + " differs from " +
                         X.str());
  return makeBinary<AddF>(I, X.Shape, Bias.Shape, /*FloatOnly=*/true);
}

/// out[i] = dy[reduced(i)] * scale.
KernelOr createBroadcastGrad(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  const std::vector<int64_t> &Target = I.Outputs[0].Shape;
  if (I.Attrs.has("shape") && I.Attrs.getInts("shape") != Target)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'shape' attribute's shape " +
                         shapeStr(I.Attrs.getInts("shape")));
  std::vector<bool> Reduced;
  MDRT_RETURN_IF_ERROR(
      reductionAxes(I.Attrs.getInts("axes"), Target.size(), Reduced));
  std::vector<int64_t> Kept = Target;
  int64_t N = 1;
  for (size_t K = 0; K < Kept.size(); ++K) {
    if (Reduced[K])
      Kept[K] = 1;
    N *= Kept[K];
  }
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[0], N, "input"));
  return makeBinary<MulF>(I, Kept, {}, /*FloatOnly=*/true,
                          I.Attrs.getFloat("scale", 1.0), true);
}

//===----------------------------------------------------------------------===//
// AddN
//===----------------------------------------------------------------------===//

/// Y = X0 + X1 + ... over [B, E), added in input order.
template <typename T>
MDRT_CPU_CLONES void addNRange(const T *const *Ptrs, unsigned Count, T *Y,
                               int64_t B, int64_t E) {
  AddF<T> Add;
  // Blocks that stay in L1; each element is still added in input order.
  constexpr int64_t Block = 2048;
  for (int64_t S = B; S < E; S += Block) {
    int64_t SE = std::min(E, S + Block);
    const T *X0 = Ptrs[0];
    if (Count == 1) {
      std::memmove(Y + S, X0 + S, size_t(SE - S) * sizeof(T));
      continue;
    }
    const T *X1 = Ptrs[1];
    for (int64_t J = S; J < SE; ++J)
      Y[J] = Add(X0[J], X1[J]);
    for (unsigned K = 2; K < Count; ++K) {
      const T *XK = Ptrs[K];
      for (int64_t J = S; J < SE; ++J)
        Y[J] = Add(Y[J], XK[J]);
    }
  }
}

template <typename T> class AddNKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    N = I.Outputs[0].numElements();
    Count = unsigned(I.Inputs.size());
    Threads = I.NumThreads;
    Ptrs.resize(Count);
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    for (unsigned K = 0; K < Count; ++K)
      Ptrs[K] = static_cast<const T *>(C.In[K]);
    T *const Y = static_cast<T *>(C.Out[0]);
    const unsigned Count = this->Count;
    const T *const *Ptrs = this->Ptrs.data();
    parallelFor(N, GrainCheap, Threads,
                [=](int64_t B, int64_t E) { addNRange(Ptrs, Count, Y, B, E); });
  }

private:
  int64_t N = 0;
  unsigned Count = 0;
  int Threads = 1;
  std::vector<const T *> Ptrs;
};

KernelOr createAddN(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, size_t(-1), 1));
  DType T = I.Outputs[0].Type;
  for (unsigned K = 0; K < I.Inputs.size(); ++K) {
    MDRT_RETURN_IF_ERROR(checkTypes(I, {K}, {}, T));
    MDRT_RETURN_IF_ERROR(
        checkElements(I, I.Inputs[K], I.Outputs[0].numElements(), "input"));
  }
  return makeNumericKernel<AddNKernel>(I, T);
}

//===----------------------------------------------------------------------===//
// Unary math, activations and their gradients
//===----------------------------------------------------------------------===//

} // namespace

// Functors of the ZipKernel template (a named namespace: the template
// outside this file is instantiated with them).
namespace mdrt {
namespace cpu {
namespace elementwise {

template <typename T> struct NegF {
  static constexpr int64_t Grain = GrainCheap;
  explicit NegF(const KernelInfo &) {}
  T operator()(T X) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(0) - Unsigned<T>(X));
    else
      return -X;
  }
};
template <typename T> struct SquareF {
  static constexpr int64_t Grain = GrainCheap;
  explicit SquareF(const KernelInfo &) {}
  T operator()(T X) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(X) * Unsigned<T>(X));
    else
      return X * X;
  }
};
template <typename T> struct SqrtF {
  static constexpr int64_t Grain = GrainCheap;
  explicit SqrtF(const KernelInfo &) {}
  // NaN for x < 0, as std::sqrt.
  T operator()(T X) const { return std::sqrt(X); }
};
template <typename T> struct ExpF {
  static constexpr int64_t Grain = GrainExpensive;
  explicit ExpF(const KernelInfo &) {}
  T operator()(T X) const { return std::exp(X); }
};
template <typename T> struct LogF {
  static constexpr int64_t Grain = GrainExpensive;
  explicit LogF(const KernelInfo &) {}
  // -inf for 0, NaN for x < 0, as std::log.
  T operator()(T X) const { return std::log(X); }
};
template <typename T> struct ReluF {
  static constexpr int64_t Grain = GrainCheap;
  explicit ReluF(const KernelInfo &) {}
  // max(x, 0); NaN stays NaN.
  T operator()(T X) const { return X < T(0) ? T(0) : X; }
};
template <typename T> struct SigmoidF {
  static constexpr int64_t Grain = GrainExpensive;
  explicit SigmoidF(const KernelInfo &) {}
  T operator()(T X) const { return T(1) / (T(1) + std::exp(-X)); }
};
template <typename T> struct TanhF {
  static constexpr int64_t Grain = GrainExpensive;
  explicit TanhF(const KernelInfo &) {}
  T operator()(T X) const { return std::tanh(X); }
};
template <typename T> struct ReluGradF {
  static constexpr int64_t Grain = GrainCheap;
  explicit ReluGradF(const KernelInfo &) {}
  T operator()(T DY, T Y) const { return Y > T(0) ? DY : T(0); }
};
template <typename T> struct SigmoidGradF {
  static constexpr int64_t Grain = GrainCheap;
  explicit SigmoidGradF(const KernelInfo &) {}
  T operator()(T Y, T DY) const { return DY * Y * (T(1) - Y); }
};
template <typename T> struct TanhGradF {
  static constexpr int64_t Grain = GrainCheap;
  explicit TanhGradF(const KernelInfo &) {}
  T operator()(T Y, T DY) const { return DY * (T(1) - Y * Y); }
};

} // namespace elementwise
} // namespace cpu
} // namespace mdrt

namespace {
using namespace mdrt::cpu::elementwise;

template <template <typename> class F, unsigned NIn, bool Floats>
KernelOr createZip(const KernelInfo &I) {
  return makeZip<F, NIn, Floats>(I);
}

//===----------------------------------------------------------------------===//
// Softmax and its gradient
//===----------------------------------------------------------------------===//

/// Rows of the last dimension.
template <typename T> class RowKernelBase : public Kernel {
public:
  Status initRows(const KernelInfo &I, unsigned NumIn) {
    MDRT_RETURN_IF_ERROR(checkArity(I, NumIn, NumIn, 1));
    const TensorDesc &X = I.Inputs[0];
    if (X.rank() < 1)
      return Status::error(I.Op + " needs rank >= 1, got " + X.str());
    for (unsigned K = 0; K < NumIn; ++K) {
      MDRT_RETURN_IF_ERROR(checkTypes(I, {K}, {}, X.Type));
      if (I.Inputs[K].Shape != X.Shape)
        return Status::error("input " + std::to_string(K) + " " +
                             I.Inputs[K].str() + " differs from " + X.str());
    }
    MDRT_RETURN_IF_ERROR(checkTypes(I, {}, {0}, X.Type));
    MDRT_RETURN_IF_ERROR(
        checkElements(I, I.Outputs[0], X.numElements(), "output"));
    Cols = X.Shape.back();
    Rows = Cols ? X.numElements() / Cols : 0;
    Threads = I.NumThreads;
    return Status::ok();
  }

protected:
  int64_t Rows = 0, Cols = 0;
  int Threads = 1;
};

template <typename T> class SoftmaxKernel : public RowKernelBase<T> {
public:
  Status init(const KernelInfo &I) { return this->initRows(I, 1); }
  void run(const ExecContext &C) override {
    const T *X = static_cast<const T *>(C.In[0]);
    T *Y = static_cast<T *>(C.Out[0]);
    const int64_t NC = this->Cols;
    // An empty last dimension: nothing to compute (and no grain below).
    if (!NC)
      return;
    parallelFor(this->Rows, std::max<int64_t>(1, GrainExpensive / NC),
                this->Threads, [&](int64_t B, int64_t E) {
                  for (int64_t R = B; R < E; ++R) {
                    const T *XR = X + R * NC;
                    T *YR = Y + R * NC;
                    T Max;
                    const double Sum = softmaxNumerators(XR, YR, NC, Max);
                    const T S = T(Sum);
                    for (int64_t J = 0; J < NC; ++J)
                      YR[J] = YR[J] / S;
                  }
                });
  }
};

/// y (dy - sum(dy y)) over the last axis; inputs y, dy.
template <typename T> class SoftmaxGradKernel : public RowKernelBase<T> {
public:
  Status init(const KernelInfo &I) { return this->initRows(I, 2); }
  void run(const ExecContext &C) override {
    const T *Y = static_cast<const T *>(C.In[0]);
    const T *DY = static_cast<const T *>(C.In[1]);
    T *DX = static_cast<T *>(C.Out[0]);
    const int64_t NC = this->Cols;
    if (!NC)
      return;
    parallelFor(this->Rows, std::max<int64_t>(1, GrainMedium / NC),
                this->Threads, [&](int64_t B, int64_t E) {
                  for (int64_t R = B; R < E; ++R) {
                    const T *YR = Y + R * NC, *DR = DY + R * NC;
                    double Dot = 0;
                    for (int64_t J = 0; J < NC; ++J)
                      Dot += double(DR[J]) * double(YR[J]);
                    const T D = T(Dot);
                    T *OR = DX + R * NC;
                    for (int64_t J = 0; J < NC; ++J)
                      OR[J] = YR[J] * (DR[J] - D);
                  }
                });
  }
};

KernelOr createSoftmax(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("Softmax takes 1 input, got 0");
  return makeFloatKernel<SoftmaxKernel>(I, I.Inputs[0].Type);
}

KernelOr createSoftmaxGrad(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("SoftmaxGrad takes 2 inputs, got 0");
  return makeFloatKernel<SoftmaxGradKernel>(I, I.Inputs[0].Type);
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// The Dropout loop over elements [Begin, End).
template <typename T>
MDRT_CPU_CLONES void dropoutLoop(const T *X, T *Y, T *Mask, uint64_t Seed,
                                 uint64_t Stream, uint64_t Step, float Thr,
                                 T Scale, int64_t Begin, int64_t End) {
  for (int64_t K = Begin; K < End; ++K) {
    float U = uniformRandomFloat(Seed, Stream, Step, uint64_t(K));
    T M = U >= Thr ? Scale : T(0);
    Mask[K] = M;
    Y[K] = X[K] * M;
  }
}

/// y = x * mask; element i is kept when
/// uniformRandomFloat(seed ^ attr seed, hash of the node's name, step, i) >=
/// rate (dropoutStream).
template <typename T> class DropoutKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 2));
    MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0, 1}, I.Inputs[0].Type));
    N = I.Inputs[0].numElements();
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], N, "output"));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[1], N, "output"));
    double Rate = I.Attrs.getFloat("rate", 0.5);
    MDRT_RETURN_IF_ERROR(cpu::checkDropoutRate(Rate));
    // u >= rate in exact arithmetic is u >= the least float not below rate
    // (u is a float).
    Threshold = float(Rate);
    if (double(Threshold) < Rate)
      Threshold =
          std::nextafter(Threshold, std::numeric_limits<float>::infinity());
    Scale = T(1.0 / (1.0 - Rate));
    SeedAttr = uint64_t(I.Attrs.getInt("seed", 0));
    Stream = cpu::dropoutStream(I);
    Threads = I.NumThreads;
    return Status::ok();
  }

  void run(const ExecContext &C) override {
    const T *X = static_cast<const T *>(C.In[0]);
    T *Y = static_cast<T *>(C.Out[0]);
    T *Mask = static_cast<T *>(C.Out[1]);
    const uint64_t Seed = C.Seed ^ SeedAttr, Step = C.Step;
    const float Thr = Threshold;
    const T S = Scale;
    const uint64_t Str = Stream;
    parallelFor(N, GrainMedium, Threads, [=](int64_t B, int64_t E) {
      dropoutLoop(X, Y, Mask, Seed, Str, Step, Thr, S, B, E);
    });
  }

private:
  int64_t N = 0;
  float Threshold = 0;
  T Scale = 1;
  uint64_t SeedAttr = 0, Stream = 0;
  int Threads = 1;
};

KernelOr createDropout(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("Dropout takes 1 input, got 0");
  return makeFloatKernel<DropoutKernel>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerElementwiseKernels(KernelRegistry &R) {
  const DeviceKind CPU = DeviceKind::CPU;
  R.add(CPU, "Add", createBinary<AddF>);
  R.add(CPU, "Sub", createBinary<SubF>);
  R.add(CPU, "Mul", createBinary<MulF>);
  R.add(CPU, "Div", createBinary<DivF>);
  R.add(CPU, "Maximum", createBinary<MaxF>);
  R.add(CPU, "Minimum", createBinary<MinF>);
  R.add(CPU, "GreaterEqualMask", createBinary<GreaterEqualMaskF>);
  R.add(CPU, "BiasAdd", createBiasAdd);
  R.add(CPU, "BroadcastGrad", createBroadcastGrad);
  R.add(CPU, "AddN", createAddN);
  R.add(CPU, "Neg", createZip<NegF, 1, false>);
  R.add(CPU, "Square", createZip<SquareF, 1, false>);
  R.add(CPU, "Sqrt", createZip<SqrtF, 1, true>);
  R.add(CPU, "Exp", createZip<ExpF, 1, true>);
  R.add(CPU, "Log", createZip<LogF, 1, true>);
  R.add(CPU, "Relu", createZip<ReluF, 1, true>);
  R.add(CPU, "Sigmoid", createZip<SigmoidF, 1, true>);
  R.add(CPU, "Tanh", createZip<TanhF, 1, true>);
  R.add(CPU, "ReluGrad", createZip<ReluGradF, 2, true>);
  R.add(CPU, "SigmoidGrad", createZip<SigmoidGradF, 2, true>);
  R.add(CPU, "TanhGrad", createZip<TanhGradF, 2, true>);
  R.add(CPU, "Softmax", createSoftmax);
  R.add(CPU, "SoftmaxGrad", createSoftmaxGrad);
  R.add(CPU, "Dropout", createDropout);
}
