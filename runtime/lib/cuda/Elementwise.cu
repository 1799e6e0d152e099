//===- Elementwise.cu - Elementwise, loss and update kernels on GPUs ------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The GPU versions of lib/cpu/{Elementwise,Plumbing,Loss,Optimizer}.cpp:
// broadcasting binary ops, BiasAdd, BroadcastGrad, AddN, the unary math and
// activations with their gradients, Softmax(Grad), Dropout (the same
// counter-based draws as the CPU), Identity / Reshape / BatchSlice /
// Concat / Slice / Pad / Cast,
// the losses and Accuracy, and the state updates. Same formulas, element
// types and rounding points as the CPU kernels (docs/Ops.md); sums over
// rows run in double like theirs, in a different order (the CPU's order,
// one thread a row, for Softmax, SoftmaxGrad and SparseSoftmaxCrossEntropy
// with MDRT_CUDA_KERNELS=reference: ReferenceMath.h).
//
// The step that Dropout and the Apply ops see is read on the device (the
// Context's step counter, the global-step buffer), so a captured CUDA graph
// stays valid from step to step.
//
//===----------------------------------------------------------------------===//

#include "../LearningRate.h"
#include "Broadcast.h"
#include "CudaCommon.h"
#include "InputReport.h"
#include "ReferenceMath.h"
#include "UpdateMath.h"

#include "mdrt/Random.h"

#include <cassert>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

using namespace mdrt;
using namespace mdrt::cuda;

namespace {

template <typename T> using Unsigned = std::make_unsigned_t<T>;

template <typename T> __device__ inline T dExp(T X) {
  if constexpr (std::is_same<T, float>::value)
    return expf(X);
  else
    return ::exp(X);
}
template <typename T> __device__ inline T dTanh(T X) {
  if constexpr (std::is_same<T, float>::value)
    return tanhf(X);
  else
    return ::tanh(X);
}
template <typename T> __device__ inline T dSqrt(T X) {
  if constexpr (std::is_same<T, float>::value)
    return sqrtf(X);
  else
    return ::sqrt(X);
}

template <typename T> __device__ inline T dNan() {
  if constexpr (std::is_same<T, float>::value)
    return __int_as_float(0x7fc00000);
  else
    return __longlong_as_double(0x7ff8000000000000ll);
}

/// Calls Fn((E *)nullptr) for the C++ type of \p T.
/// Integer types only when !FloatOnly (so that float-only functors are
/// never instantiated for them).
template <bool FloatOnly, typename F> KernelOr dispatch(DType T, F &&Fn) {
  switch (T) {
  case DType::Float32:
    return Fn((float *)nullptr);
  case DType::Float64:
    return Fn((double *)nullptr);
  case DType::Int32:
    if constexpr (!FloatOnly)
      return Fn((int32_t *)nullptr);
    break;
  case DType::Int64:
    if constexpr (!FloatOnly)
      return Fn((int64_t *)nullptr);
    break;
  default:
    break;
  }
  return Status::error(std::string("unsupported element type ") + dtypeName(T));
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

struct AddF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) + Unsigned<T>(B));
    else
      return A + B;
  }
};
struct SubF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) - Unsigned<T>(B));
    else
      return A - B;
  }
};
struct MulF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(A) * Unsigned<T>(B));
    else
      return A * B;
  }
};
struct DivF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value) {
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

/// The larger of A and B; NaN where either is (as the CPU's).
struct MaxF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return A < B ? B : A;
    else
      return A > B || A != A ? A : B;
  }
};

/// The smaller of A and B; NaN where either is (as the CPU's).
struct MinF {
  template <typename T> __device__ T operator()(T A, T B) const {
    if constexpr (std::is_integral<T>::value)
      return B < A ? B : A;
    else
      return A < B || A != A ? A : B;
  }
};

/// 1 where A >= B, else 0 (where either is NaN too; as the CPU's).
struct GreaterEqualMaskF {
  template <typename T> __device__ T operator()(T A, T B) const {
    return A >= B ? T(1) : T(0);
  }
};

/// Y = Op(A, B) over the collapsed dimensions of \p P, with indices of type
/// \p Idx: uint32_t when int32Indexable(N) (32-bit division is several
/// times cheaper than 64-bit, and BiasAdd divides twice an element; offsets
/// into A and B stay below N), int64_t otherwise. One collapsed dimension (same
/// shapes, or a scalar operand) needs no division at all.
template <typename T, typename Op, bool ConstB, typename Idx>
__global__ void binaryKernel(Bcast P, const T *A, const T *B, T *Y) {
  Op F;
  const T CB = T(P.ConstB);
  const Idx N = Idx(P.N);
  GRID_STRIDE_AS(Idx, I, N) {
    Idx OA, OB;
    broadcastOffsets(P, I, OA, OB);
    Y[I] = F(A[OA], ConstB ? CB : B[OB]);
  }
}

template <typename T, typename Op, bool ConstB>
class BinaryKernel : public CudaKernel {
public:
  explicit BinaryKernel(const Bcast &P) : P(P) {}
  void run(const ExecContext &C) override {
    if (!P.N)
      return;
    const T *A = static_cast<const T *>(C.In[0]);
    const T *B = ConstB ? nullptr : static_cast<const T *>(C.In[1]);
    T *Y = static_cast<T *>(C.Out[0]);
    if (int32Indexable(P.N))
      binaryKernel<T, Op, ConstB, uint32_t>
          <<<gridFor(P.N), 256, 0, Ctx->Stream>>>(P, A, B, Y);
    else
      binaryKernel<T, Op, ConstB, int64_t>
          <<<gridFor(P.N), 256, 0, Ctx->Stream>>>(P, A, B, Y);
    Ctx->checkLaunch("a broadcasting kernel");
  }

private:
  Bcast P;
};

template <typename Op, bool FloatOnly, bool ConstB = false>
KernelOr makeBinary(const KernelInfo &I, const std::vector<int64_t> &AShape,
                    const std::vector<int64_t> &BShape, double Const = 0) {
  Bcast P;
  MDRT_RETURN_IF_ERROR(planBroadcast(I.Outputs[0].Shape, AShape, BShape, P));
  P.ConstB = Const;
  return dispatch<FloatOnly>(I.Outputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<BinaryKernel<E, Op, ConstB>>(P));
  });
}

template <typename Op> KernelOr createBinary(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 2, 2, 1));
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0, 1}, {0}, I.Inputs[0].Type));
  return makeBinary<Op, false>(I, I.Inputs[0].Shape, I.Inputs[1].Shape);
}

KernelOr createBiasAdd(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 2, 2, 1));
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0, 1}, {0}, I.Inputs[0].Type));
  const TensorDesc &X = I.Inputs[0], &Bias = I.Inputs[1];
  if (X.rank() < 1 || Bias.rank() != 1 || Bias.Shape[0] != X.Shape.back())
    return Status::error("bias " + Bias.str() +
                         " does not match the last dimension of " + X.str());
  if (I.Outputs[0].Shape != X.Shape)
    return Status::error("output " + I.Outputs[0].str() + " differs from " +
                         X.str());
  return makeBinary<AddF, true>(I, X.Shape, Bias.Shape);
}

KernelOr createBroadcastGrad(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  const std::vector<int64_t> &Target = I.Outputs[0].Shape;
  if (I.Attrs.has("shape") && I.Attrs.getInts("shape") != Target)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'shape' attribute's shape " +
                         cpu::shapeStr(I.Attrs.getInts("shape")));
  std::vector<bool> Reduced;
  MDRT_RETURN_IF_ERROR(
      cpu::reductionAxes(I.Attrs.getInts("axes"), Target.size(), Reduced));
  std::vector<int64_t> Kept = Target;
  int64_t N = 1;
  for (size_t K = 0; K < Kept.size(); ++K) {
    if (Reduced[K])
      Kept[K] = 1;
    N *= Kept[K];
  }
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Inputs[0], N, "input"));
  return makeBinary<MulF, true, true>(I, Kept, {},
                                      I.Attrs.getFloat("scale", 1.0));
}

//===----------------------------------------------------------------------===//
// AddN and the collective's sum
//===----------------------------------------------------------------------===//

constexpr int AddNChunk = 8;
template <typename T> struct PtrPack { const T *P[AddNChunk]; };

/// Y = (First ? 0-free start : Y) + X0 + X1 + ... for up to AddNChunk inputs,
/// in input order.
template <typename T>
__global__ void addNKernel(PtrPack<T> X, int Count, bool First, T *Y,
                           int64_t N) {
  AddF Add;
  GRID_STRIDE(I, N) {
    T Acc = First ? X.P[0][I] : Add(Y[I], X.P[0][I]);
    for (int K = 1; K < Count; ++K)
      Acc = Add(Acc, X.P[K][I]);
    Y[I] = Acc;
  }
}

template <typename T> class AddNKernel : public CudaKernel {
public:
  AddNKernel(int64_t N, unsigned Count) : N(N), Count(Count) {}
  void run(const ExecContext &C) override {
    if (!N)
      return;
    T *Y = static_cast<T *>(C.Out[0]);
    // An input aliasing the output is read before the output is written
    // only in the first chunk; the executor never aliases AddN inputs
    // with its output beyond the first.
    for (unsigned B = 0; B < Count; B += AddNChunk) {
      PtrPack<T> P{};
      int K = 0;
      for (; K < AddNChunk && B + unsigned(K) < Count; ++K)
        P.P[K] = static_cast<const T *>(C.In[B + unsigned(K)]);
      addNKernel<T><<<gridFor(N), 256, 0, Ctx->Stream>>>(P, K, B == 0, Y, N);
    }
    Ctx->checkLaunch("AddN");
  }

private:
  int64_t N;
  unsigned Count;
};

KernelOr createAddN(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, size_t(-1), 1));
  DType T = I.Outputs[0].Type;
  for (unsigned K = 0; K < I.Inputs.size(); ++K) {
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {K}, {}, T));
    MDRT_RETURN_IF_ERROR(cpu::checkElements(
        I, I.Inputs[K], I.Outputs[0].numElements(), "input"));
  }
  int64_t N = I.Outputs[0].numElements();
  unsigned Count = unsigned(I.Inputs.size());
  return dispatch<false>(T, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<AddNKernel<E>>(N, Count));
  });
}

//===----------------------------------------------------------------------===//
// Same-shape elementwise ops
//===----------------------------------------------------------------------===//

struct NegF {
  template <typename T> __device__ T operator()(T X) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(0) - Unsigned<T>(X));
    else
      return -X;
  }
};
struct SquareF {
  template <typename T> __device__ T operator()(T X) const {
    if constexpr (std::is_integral<T>::value)
      return T(Unsigned<T>(X) * Unsigned<T>(X));
    else
      return X * X;
  }
};
struct SqrtF {
  // Correctly rounded (sqrtf is, without -use_fast_math), as the CPU's.
  template <typename T> __device__ T operator()(T X) const { return sqrt(X); }
};
struct ExpF {
  template <typename T> __device__ T operator()(T X) const { return dExp(X); }
};
struct LogF {
  template <typename T> __device__ T operator()(T X) const {
    if constexpr (std::is_same<T, float>::value)
      return logf(X);
    else
      return ::log(X);
  }
};
struct ReluF {
  template <typename T> __device__ T operator()(T X) const {
    return X < T(0) ? T(0) : X;
  }
};
struct SigmoidF {
  template <typename T> __device__ T operator()(T X) const {
    return T(1) / (T(1) + dExp(-X));
  }
};
struct TanhF {
  template <typename T> __device__ T operator()(T X) const { return dTanh(X); }
};
struct ReluGradF {
  template <typename T> __device__ T operator()(T DY, T Y) const {
    return Y > T(0) ? DY : T(0);
  }
};
struct SigmoidGradF {
  template <typename T> __device__ T operator()(T Y, T DY) const {
    return DY * Y * (T(1) - Y);
  }
};
struct TanhGradF {
  template <typename T> __device__ T operator()(T Y, T DY) const {
    return DY * (T(1) - Y * Y);
  }
};
/// Both losses in double, as on the CPU.
struct LogLossF {
  double Eps = 1e-7;
  template <typename T> __device__ T operator()(T P, T L) const {
    double PD = P, LD = L;
    return T(-LD * ::log(PD + Eps) - (1 - LD) * ::log(1 - PD + Eps));
  }
};
struct LogLossGradF {
  double Eps = 1e-7;
  template <typename T> __device__ T operator()(T P, T L, T DY) const {
    double PD = P, LD = L;
    return T(double(DY) * (-LD / (PD + Eps) + (1 - LD) / (1 - PD + Eps)));
  }
};

template <typename T, typename F, int NIn>
__global__ void zipKernel(F Fn, const T *A, const T *B, const T *C, T *Y,
                          int64_t N) {
  GRID_STRIDE(I, N) {
    if constexpr (NIn == 1)
      Y[I] = Fn(A[I]);
    else if constexpr (NIn == 2)
      Y[I] = Fn(A[I], B[I]);
    else
      Y[I] = Fn(A[I], B[I], C[I]);
  }
}

template <typename T, typename F, int NIn> class ZipKernel : public CudaKernel {
public:
  ZipKernel(F Fn, int64_t N) : Fn(Fn), N(N) {}
  void run(const ExecContext &C) override {
    if (!N)
      return;
    zipKernel<T, F, NIn><<<gridFor(N), 256, 0, Ctx->Stream>>>(
        Fn, static_cast<const T *>(C.In[0]),
        NIn > 1 ? static_cast<const T *>(C.In[1]) : nullptr,
        NIn > 2 ? static_cast<const T *>(C.In[2]) : nullptr,
        static_cast<T *>(C.Out[0]), N);
    Ctx->checkLaunch("an elementwise kernel");
  }

private:
  F Fn;
  int64_t N;
};

template <typename F, int NIn, bool Floats>
KernelOr makeZip(const KernelInfo &I, F Fn = F()) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, NIn, NIn, 1));
  DType T = I.Inputs[0].Type;
  int64_t N = I.Outputs[0].numElements();
  for (unsigned K = 0; K < unsigned(NIn); ++K) {
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {K}, {}, T));
    MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Inputs[K], N, "input"));
  }
  if (I.Outputs[0].Type != T)
    return typeError(I, I.Outputs[0].Type);
  return dispatch<Floats>(T, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<ZipKernel<E, F, NIn>>(Fn, N));
  });
}

template <typename F, int NIn, bool Floats>
KernelOr createZip(const KernelInfo &I) {
  return makeZip<F, NIn, Floats>(I);
}

KernelOr createLogLoss(const KernelInfo &I) {
  LogLossF F;
  F.Eps = I.Attrs.getFloat("epsilon", 1e-7);
  return makeZip<LogLossF, 2, true>(I, F);
}

KernelOr createLogLossGrad(const KernelInfo &I) {
  LogLossGradF F;
  F.Eps = I.Attrs.getFloat("epsilon", 1e-7);
  return makeZip<LogLossGradF, 3, true>(I, F);
}

//===----------------------------------------------------------------------===//
// Row kernels: Softmax, SoftmaxGrad, SparseSoftmaxCrossEntropy (one warp
// per row)
//===----------------------------------------------------------------------===//

template <typename T> __device__ inline T warpMax(T V) {
  for (int O = 16; O > 0; O /= 2) {
    T W = __shfl_xor_sync(0xffffffffu, V, O);
    V = W > V ? W : V;
  }
  return V;
}
__device__ inline double warpSum(double V) {
  for (int O = 16; O > 0; O /= 2)
    V += __shfl_xor_sync(0xffffffffu, V, O);
  return V;
}

constexpr int RowsPerBlock = 8;

/// A warp a row: each warp of a block of 32 * RowsPerBlock threads takes
/// rows blockIdx.x * RowsPerBlock + warp, then every gridDim.x *
/// RowsPerBlock rows after it (rowBlocks caps the grid). R is the same in a
/// whole warp, so the warp's shuffles stay converged.
#define WARP_ROW_STRIDE(R, Rows)                                               \
  for (int64_t R = int64_t(blockIdx.x) * RowsPerBlock + threadIdx.x / 32;      \
       R < (Rows); R += int64_t(gridDim.x) * RowsPerBlock)

template <typename T>
__global__ void softmaxKernel(const T *X, T *Y, int64_t Rows, int64_t Cols) {
  const int Lane = threadIdx.x % 32;
  WARP_ROW_STRIDE(R, Rows) {
    const T *XR = X + R * Cols;
    T *YR = Y + R * Cols;
    T Max = XR[0];
    for (int64_t J = Lane; J < Cols; J += 32)
      Max = XR[J] > Max ? XR[J] : Max;
    Max = warpMax(Max);
    double Sum = 0;
    for (int64_t J = Lane; J < Cols; J += 32) {
      T E = refSoftmaxExp<T>(XR[J] - Max);
      YR[J] = E;
      Sum += double(E);
    }
    const T S = T(warpSum(Sum));
    for (int64_t J = Lane; J < Cols; J += 32)
      YR[J] = YR[J] / S;
  }
}

template <typename T>
__global__ void softmaxGradKernel(const T *Y, const T *DY, T *DX, int64_t Rows,
                                  int64_t Cols) {
  const int Lane = threadIdx.x % 32;
  WARP_ROW_STRIDE(R, Rows) {
    const T *YR = Y + R * Cols, *DR = DY + R * Cols;
    double Dot = 0;
    for (int64_t J = Lane; J < Cols; J += 32)
      Dot += double(DR[J]) * double(YR[J]);
    const T D = T(warpSum(Dot));
    for (int64_t J = Lane; J < Cols; J += 32)
      DX[R * Cols + J] = YR[J] * (DR[J] - D);
  }
}

/// \p Report (null: none) gets the first row whose label is out of range
/// (InputReport.h); that row's loss and gradient are NaN.
template <typename T, typename L>
__global__ void ssceKernel(const T *X, const L *Labels, T *Loss, T *Back,
                           int64_t Rows, int64_t Cols,
                           unsigned long long *Report) {
  const int Lane = threadIdx.x % 32;
  WARP_ROW_STRIDE(R, Rows) {
    const T *XR = X + R * Cols;
    T *BR = Back + R * Cols;
    int64_t Label = int64_t(Labels[R]);
    if (Label < 0 || Label >= Cols) {
      const T Nan = dNan<T>();
      if (Lane == 0) {
        Loss[R] = Nan;
        if (Report)
          atomicMin(Report, (unsigned long long)packLabelReport(R, Label));
      }
      for (int64_t J = Lane; J < Cols; J += 32)
        BR[J] = Nan;
      continue;
    }
    T Max = XR[0];
    for (int64_t J = Lane; J < Cols; J += 32)
      Max = XR[J] > Max ? XR[J] : Max;
    Max = warpMax(Max);
    double Sum = 0;
    for (int64_t J = Lane; J < Cols; J += 32) {
      T E = refSoftmaxExp<T>(XR[J] - Max);
      BR[J] = E;
      Sum += double(E);
    }
    Sum = warpSum(Sum);
    if (Lane == 0)
      Loss[R] = T(::log(Sum) + (double(Max) - double(XR[Label])));
    const double Inv = 1.0 / Sum;
    for (int64_t J = Lane; J < Cols; J += 32) {
      T V = T(double(BR[J]) * Inv);
      BR[J] = J == Label ? V - T(1) : V;
    }
  }
}

/// The reference rows (ReferenceMath.h): one thread a row.
template <typename T>
__global__ void refSoftmaxKernel(const T *X, T *Y, int64_t Rows, int64_t Cols) {
  GRID_STRIDE(R, Rows) { refSoftmaxRow(X + R * Cols, Y + R * Cols, Cols); }
}
template <typename T>
__global__ void refSoftmaxGradKernel(const T *Y, const T *DY, T *DX,
                                     int64_t Rows, int64_t Cols) {
  GRID_STRIDE(R, Rows) {
    refSoftmaxGradRow(Y + R * Cols, DY + R * Cols, DX + R * Cols, Cols);
  }
}
template <typename T, typename L>
__global__ void refSsceKernel(const T *X, const L *Labels, T *Loss, T *Back,
                              int64_t Rows, int64_t Cols,
                              unsigned long long *Report) {
  GRID_STRIDE(R, Rows) {
    T *BR = Back + R * Cols;
    const int64_t Label = int64_t(Labels[R]);
    if (Label < 0 || Label >= Cols) {
      const T Nan = dNan<T>();
      Loss[R] = Nan;
      for (int64_t J = 0; J < Cols; ++J)
        BR[J] = Nan;
      if (Report)
        atomicMin(Report, (unsigned long long)packLabelReport(R, Label));
      continue;
    }
    Loss[R] = refSsceRow(X + R * Cols, Label, BR, Cols);
  }
}

/// SoftmaxCrossEntropy: one thread a row, in the CPU's order.
template <typename T>
__global__ void sceKernel(const T *X, const T *Y, T *Loss, T *Back,
                          int64_t Rows, int64_t Cols) {
  GRID_STRIDE(R, Rows) {
    Loss[R] = refSceRow(X + R * Cols, Y + R * Cols, Back + R * Cols, Cols);
  }
}

/// OneHot: one thread an element of the output.
template <typename T, typename Idx>
__global__ void oneHotKernel(const Idx *X, T *Y, int64_t N, int64_t Depth, T On,
                             T Off) {
  GRID_STRIDE(I, N * Depth) {
    int64_t K = int64_t(X[I / Depth]);
    Y[I] = K == I % Depth ? On : Off;
  }
}

/// Blocks for the WARP_ROW_STRIDE kernels: a warp a row, capped like gridFor
/// (the kernels' loops take the rows past the cap).
inline unsigned rowBlocks(int64_t Rows) { return gridFor(Rows, RowsPerBlock); }

template <typename T> class SoftmaxKernel : public CudaKernel {
public:
  SoftmaxKernel(int64_t Rows, int64_t Cols, bool Grad)
      : Rows(Rows), Cols(Cols), Grad(Grad), Reference(referenceKernels()) {}
  void run(const ExecContext &C) override {
    if (!Rows || !Cols)
      return;
    if (Reference && Grad)
      refSoftmaxGradKernel<T><<<gridFor(Rows), 256, 0, Ctx->Stream>>>(
          static_cast<const T *>(C.In[0]), static_cast<const T *>(C.In[1]),
          static_cast<T *>(C.Out[0]), Rows, Cols);
    else if (Reference)
      refSoftmaxKernel<T><<<gridFor(Rows), 256, 0, Ctx->Stream>>>(
          static_cast<const T *>(C.In[0]), static_cast<T *>(C.Out[0]), Rows,
          Cols);
    else if (Grad)
      softmaxGradKernel<T>
          <<<rowBlocks(Rows), 32 * RowsPerBlock, 0, Ctx->Stream>>>(
              static_cast<const T *>(C.In[0]), static_cast<const T *>(C.In[1]),
              static_cast<T *>(C.Out[0]), Rows, Cols);
    else
      softmaxKernel<T><<<rowBlocks(Rows), 32 * RowsPerBlock, 0, Ctx->Stream>>>(
          static_cast<const T *>(C.In[0]), static_cast<T *>(C.Out[0]), Rows,
          Cols);
    Ctx->checkLaunch("Softmax");
  }

private:
  int64_t Rows, Cols;
  bool Grad;
  /// MDRT_CUDA_KERNELS=reference.
  bool Reference;
};

KernelOr createSoftmaxLike(const KernelInfo &I, bool Grad) {
  unsigned NumIn = Grad ? 2 : 1;
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, NumIn, NumIn, 1));
  const TensorDesc &X = I.Inputs[0];
  if (X.rank() < 1)
    return Status::error(I.Op + " needs rank >= 1, got " + X.str());
  for (unsigned K = 0; K < NumIn; ++K) {
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {K}, {}, X.Type));
    if (I.Inputs[K].Shape != X.Shape)
      return Status::error("input " + std::to_string(K) + " " +
                           I.Inputs[K].str() + " differs from " + X.str());
  }
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {}, {0}, X.Type));
  MDRT_RETURN_IF_ERROR(
      cpu::checkElements(I, I.Outputs[0], X.numElements(), "output"));
  int64_t Cols = X.Shape.back(), Rows = Cols ? X.numElements() / Cols : 0;
  return dispatch<true>(X.Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<SoftmaxKernel<E>>(Rows, Cols, Grad));
  });
}

KernelOr createSoftmax(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("Softmax takes 1 input, got 0");
  return createSoftmaxLike(I, false);
}
KernelOr createSoftmaxGrad(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("SoftmaxGrad takes 2 inputs, got 0");
  return createSoftmaxLike(I, true);
}

template <typename T, typename L> class SsceKernel : public CudaKernel {
public:
  SsceKernel(std::string Name, int64_t N, int64_t C)
      : Name(std::move(Name)), N(N), C(C), Reference(referenceKernels()) {}
  /// After bind(): a label out of range fails the step, as on the CPU,
  /// once the step's work has finished.
  Status init() {
    if (N > MaxReportRow)
      return Status::ok(); // Too many rows to name one: NaN only.
    Report = std::make_shared<ReportWord>();
    Ctx->addInputReport([Report = Report, Name = Name, C = C]() -> Status {
      uint64_t V = Report->take();
      if (V == NoReport)
        return Status::ok();
      LabelReport R = unpackLabelReport(V);
      std::string Label = std::to_string(R.Label);
      if (R.Clamped)
        Label += R.Label < 0 ? " or less" : " or more";
      return Status::error(
          "node '" + Name + "' (SparseSoftmaxCrossEntropy): label " + Label +
          " of example " + std::to_string(R.Row) +
          " is not one of the logits' classes [0, " + std::to_string(C) + ")");
    });
    return Status::ok();
  }
  void run(const ExecContext &X) override {
    if (!N)
      return;
    const T *Logits = static_cast<const T *>(X.In[0]);
    const L *Labels = static_cast<const L *>(X.In[1]);
    T *Loss = static_cast<T *>(X.Out[0]), *Back = static_cast<T *>(X.Out[1]);
    unsigned long long *Word = Report ? Report->device() : nullptr;
    if (Reference)
      refSsceKernel<T, L><<<gridFor(N), 256, 0, Ctx->Stream>>>(
          Logits, Labels, Loss, Back, N, C, Word);
    else
      ssceKernel<T, L><<<rowBlocks(N), 32 * RowsPerBlock, 0, Ctx->Stream>>>(
          Logits, Labels, Loss, Back, N, C, Word);
    Ctx->checkLaunch("SparseSoftmaxCrossEntropy");
    if (Report)
      Report->collect(*Ctx);
  }

private:
  std::string Name;
  int64_t N, C;
  /// MDRT_CUDA_KERNELS=reference: refSsceKernel.
  bool Reference;
  std::shared_ptr<ReportWord> Report;
};

template <typename T, typename L>
KernelOr makeSsce(const KernelInfo &I, int64_t N, int64_t C) {
  auto K = std::make_unique<SsceKernel<T, L>>(I.Name, N, C);
  MDRT_RETURN_IF_ERROR(K->bind());
  MDRT_RETURN_IF_ERROR(K->init());
  return std::unique_ptr<Kernel>(std::move(K));
}

KernelOr createSsce(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 2, 2, 2));
  const TensorDesc &X = I.Inputs[0], &Lab = I.Inputs[1];
  if (X.rank() != 2 || Lab.rank() != 1 || Lab.Shape[0] != X.Shape[0])
    return Status::error("logits " + X.str() + " and labels " + Lab.str() +
                         " do not match");
  if (!isIntType(Lab.Type))
    return Status::error("labels must be int32 or int64, got " + Lab.str());
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {}, {0, 1}, X.Type));
  MDRT_RETURN_IF_ERROR(
      cpu::checkElements(I, I.Outputs[0], X.Shape[0], "output"));
  MDRT_RETURN_IF_ERROR(
      cpu::checkElements(I, I.Outputs[1], X.numElements(), "output"));
  int64_t N = X.Shape[0], C = X.Shape[1];
  if (C < 1 && N > 0)
    return Status::error("logits " + X.str() + " have no classes");
  bool L64 = Lab.Type == DType::Int64;
  return dispatch<true>(X.Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    if (L64)
      return makeSsce<E, int64_t>(I, N, C);
    return makeSsce<E, int32_t>(I, N, C);
  });
}

template <typename T> class SceKernel : public CudaKernel {
public:
  SceKernel(int64_t N, int64_t C) : N(N), C(C) {}
  void run(const ExecContext &E) override {
    if (!N || !C)
      return;
    sceKernel<T><<<gridFor(N), 256, 0, Ctx->Stream>>>(
        static_cast<const T *>(E.In[0]), static_cast<const T *>(E.In[1]),
        static_cast<T *>(E.Out[0]), static_cast<T *>(E.Out[1]), N, C);
    Ctx->checkLaunch("SoftmaxCrossEntropy");
  }

private:
  int64_t N, C;
};

KernelOr createSce(const KernelInfo &I) {
  int64_t N = 0, C = 0;
  MDRT_RETURN_IF_ERROR(cpu::softmaxCrossEntropyDims(I, N, C));
  return dispatch<true>(I.Inputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<SceKernel<E>>(N, C));
  });
}

template <typename T, typename Idx> class OneHotKernel : public CudaKernel {
public:
  OneHotKernel(int64_t N, int64_t Depth, T On, T Off)
      : N(N), Depth(Depth), On(On), Off(Off) {}
  void run(const ExecContext &C) override {
    if (!N)
      return;
    oneHotKernel<T, Idx><<<gridFor(N * Depth), 256, 0, Ctx->Stream>>>(
        static_cast<const Idx *>(C.In[0]), static_cast<T *>(C.Out[0]), N, Depth,
        On, Off);
    Ctx->checkLaunch("OneHot");
  }

private:
  int64_t N, Depth;
  T On, Off;
};

KernelOr createOneHot(const KernelInfo &I) {
  int64_t N = 0, Depth = 0;
  MDRT_RETURN_IF_ERROR(cpu::oneHotDims(I, N, Depth));
  double On = I.Attrs.getFloat("on_value", 1.0),
         Off = I.Attrs.getFloat("off_value", 0.0);
  bool I64 = I.Inputs[0].Type == DType::Int64;
  return dispatch<true>(I.Outputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    if (I64)
      return finish(
          std::make_unique<OneHotKernel<E, int64_t>>(N, Depth, E(On), E(Off)));
    return finish(
        std::make_unique<OneHotKernel<E, int32_t>>(N, Depth, E(On), E(Off)));
  });
}

//===----------------------------------------------------------------------===//
// Accuracy
//===----------------------------------------------------------------------===//

template <typename P, typename L>
__global__ void accuracyKernel(const P *X, const L *Labels, float *Y, int64_t N,
                               int64_t C, bool Sparse) {
  GRID_STRIDE(I, N) {
    if (Sparse) {
      const P *XR = X + I * C;
      int64_t Best = 0;
      for (int64_t J = 1; J < C; ++J)
        if (XR[J] > XR[Best])
          Best = J;
      Y[I] = C > 0 && Best == int64_t(Labels[I]) ? 1.0f : 0.0f;
    } else {
      int64_t Right = 0;
      for (int64_t J = I * C; J < (I + 1) * C; ++J)
        Right += (double(X[J]) > 0.5) == (double(Labels[J]) > 0.5);
      Y[I] = C ? float(double(Right) / double(C)) : 0.0f;
    }
  }
}

template <typename P, typename L> class AccuracyKernel : public CudaKernel {
public:
  AccuracyKernel(int64_t N, int64_t C, bool Sparse)
      : N(N), C(C), Sparse(Sparse) {}
  void run(const ExecContext &X) override {
    if (!N)
      return;
    accuracyKernel<P, L><<<gridFor(N), 256, 0, Ctx->Stream>>>(
        static_cast<const P *>(X.In[0]), static_cast<const L *>(X.In[1]),
        static_cast<float *>(X.Out[0]), N, C, Sparse);
    Ctx->checkLaunch("Accuracy");
  }

private:
  int64_t N, C;
  bool Sparse;
};

KernelOr createAccuracy(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 2, 2, 1));
  const TensorDesc &X = I.Inputs[0], &Lab = I.Inputs[1];
  if (X.rank() < 1)
    return Status::error("predictions must have a batch dimension, got " +
                         X.str());
  if (I.Outputs[0].Type != DType::Float32)
    return Status::error("Accuracy output must be float32, got " +
                         I.Outputs[0].str());
  int64_t N = X.Shape[0];
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[0], N, "output"));
  bool Sparse = X.rank() == 2 && Lab.rank() == 1 && isIntType(Lab.Type);
  int64_t C;
  if (Sparse) {
    if (Lab.Shape[0] != N)
      return Status::error("predictions " + X.str() + " and labels " +
                           Lab.str() + " have different batch sizes");
    C = X.Shape[1];
  } else {
    if (X.Shape != Lab.Shape)
      return Status::error("predictions " + X.str() + " and labels " +
                           Lab.str() + " must have the same shape");
    C = N ? X.numElements() / N : 0;
  }
  // Float predictions; labels of any numeric type.
  return dispatch<true>(X.Type, [&](auto *PT) -> KernelOr {
    using PP = std::remove_pointer_t<decltype(PT)>;
    return dispatch<false>(Lab.Type, [&](auto *LT) -> KernelOr {
      using LL = std::remove_pointer_t<decltype(LT)>;
      return finish(std::make_unique<AccuracyKernel<PP, LL>>(N, C, Sparse));
    });
  });
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void dropoutKernel(const T *X, T *Y, T *Mask, uint64_t Seed,
                              uint64_t Stream, const uint64_t *StepPtr,
                              float Thr, T Scale, int64_t N) {
  const uint64_t Step = *StepPtr;
  GRID_STRIDE(K, N) {
    float U = uniformRandomFloat(Seed, Stream, Step, uint64_t(K));
    T M = U >= Thr ? Scale : T(0);
    Mask[K] = M;
    Y[K] = X[K] * M;
  }
}

template <typename T> class DropoutKernel : public CudaKernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 2));
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0}, {0, 1}, I.Inputs[0].Type));
    N = I.Inputs[0].numElements();
    MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[0], N, "output"));
    MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[1], N, "output"));
    double Rate = I.Attrs.getFloat("rate", 0.5);
    MDRT_RETURN_IF_ERROR(cpu::checkDropoutRate(Rate));
    Threshold = float(Rate);
    if (double(Threshold) < Rate)
      Threshold =
          std::nextafter(Threshold, std::numeric_limits<float>::infinity());
    Scale = T(1.0 / (1.0 - Rate));
    SeedAttr = uint64_t(I.Attrs.getInt("seed", 0));
    Stream = cpu::dropoutStream(I);
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    if (!N)
      return;
    dropoutKernel<T><<<gridFor(N), 256, 0, Ctx->Stream>>>(
        static_cast<const T *>(C.In[0]), static_cast<T *>(C.Out[0]),
        static_cast<T *>(C.Out[1]), C.Seed ^ SeedAttr, Stream, Ctx->DevStep,
        Threshold, Scale, N);
    Ctx->checkLaunch("Dropout");
  }

private:
  int64_t N = 0;
  float Threshold = 0;
  T Scale = 1;
  uint64_t SeedAttr = 0, Stream = 0;
};

KernelOr createDropout(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("Dropout takes 1 input, got 0");
  return dispatch<true>(I.Inputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    auto K = std::make_unique<DropoutKernel<E>>();
    MDRT_RETURN_IF_ERROR(K->init(I));
    return finish(std::move(K));
  });
}

//===----------------------------------------------------------------------===//
// Identity, Reshape, BatchSlice, Cast
//===----------------------------------------------------------------------===//

class CopyKernel : public CudaKernel {
public:
  CopyKernel(size_t Offset, size_t Bytes) : Offset(Offset), Bytes(Bytes) {}
  void run(const ExecContext &C) override {
    const char *Src = static_cast<const char *>(C.In[0]) + Offset;
    char *Dst = static_cast<char *>(C.Out[0]);
    if (Src == Dst || !Bytes)
      return;
    cudaError_t E =
        cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyDeviceToDevice, Ctx->Stream);
    if (E != cudaSuccess)
      Ctx->fail(cudaStatus(E, "cudaMemcpyAsync"));
  }

private:
  size_t Offset, Bytes;
};

KernelOr createCopy(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  if (I.Inputs[0].Type != I.Outputs[0].Type)
    return Status::error("output " + I.Outputs[0].str() +
                         " differs in element type from input " +
                         I.Inputs[0].str());
  MDRT_RETURN_IF_ERROR(
      cpu::checkElements(I, I.Outputs[0], I.Inputs[0].numElements(), "output"));
  return finish(std::make_unique<CopyKernel>(0, I.Outputs[0].bytes()));
}

KernelOr createBatchSlice(const KernelInfo &I) {
  size_t Offset = 0;
  MDRT_RETURN_IF_ERROR(cpu::batchSliceOffset(I, Offset));
  return finish(std::make_unique<CopyKernel>(Offset, I.Outputs[0].bytes()));
}

/// Concat, Slice, Pad: the boxes of lib/cpu's CopyBox, one thread an
/// element (any element type: copied by its size). A verified plan's
/// tensors have at most 2^40 elements, so a box has at most 40 dimensions
/// of two or more (the only ones CopyBox keeps) and a run of one.
constexpr int MaxBoxRank = 41;
struct BoxArgs {
  int Rank = 0;
  int64_t Dims[MaxBoxRank] = {}, Src[MaxBoxRank] = {}, Dst[MaxBoxRank] = {};
  int64_t SrcOffset = 0, DstOffset = 0, N = 0;
};

template <typename T>
__global__ void boxCopyKernel(BoxArgs P, const T *X, T *Y) {
  GRID_STRIDE(I, P.N) {
    int64_t Rest = I, S = P.SrcOffset, D = P.DstOffset;
    for (int K = P.Rank - 1; K >= 0; --K) {
      int64_t Idx = Rest % P.Dims[K];
      Rest /= P.Dims[K];
      S += Idx * P.Src[K];
      D += Idx * P.Dst[K];
    }
    Y[D] = X[S];
  }
}

/// Copies box K from input K (Concat: a box per input; Slice and Pad:
/// one); with Zero, the output is zeroed first (Pad).
class BoxCopyKernel : public CudaKernel {
public:
  BoxCopyKernel(std::vector<BoxArgs> Boxes, size_t ElemSize, size_t OutBytes,
                bool Zero)
      : Boxes(std::move(Boxes)), ElemSize(ElemSize), OutBytes(OutBytes),
        Zero(Zero) {}

  void run(const ExecContext &C) override {
    if (Zero && OutBytes) {
      cudaError_t E = cudaMemsetAsync(C.Out[0], 0, OutBytes, Ctx->Stream);
      if (E != cudaSuccess) {
        Ctx->fail(cudaStatus(E, "cudaMemsetAsync"));
        return;
      }
    }
    for (size_t K = 0; K < Boxes.size(); ++K) {
      const BoxArgs &P = Boxes[K];
      if (!P.N)
        continue;
      unsigned G = gridFor(P.N);
      cudaStream_t S = Ctx->Stream;
      if (ElemSize == 8)
        boxCopyKernel<<<G, 256, 0, S>>>(P,
                                        static_cast<const uint64_t *>(C.In[K]),
                                        static_cast<uint64_t *>(C.Out[0]));
      else if (ElemSize == 4)
        boxCopyKernel<<<G, 256, 0, S>>>(P,
                                        static_cast<const uint32_t *>(C.In[K]),
                                        static_cast<uint32_t *>(C.Out[0]));
      else
        boxCopyKernel<<<G, 256, 0, S>>>(P,
                                        static_cast<const uint8_t *>(C.In[K]),
                                        static_cast<uint8_t *>(C.Out[0]));
      Ctx->checkLaunch("box copy");
    }
  }

private:
  std::vector<BoxArgs> Boxes;
  size_t ElemSize, OutBytes;
  bool Zero;
};

KernelOr makeBoxCopy(const KernelInfo &I,
                     const std::vector<cpu::CopyBox> &Boxes, bool Zero) {
  size_t ElemSize = dtypeSize(I.Outputs[0].Type);
  assert((ElemSize == 1 || ElemSize == 4 || ElemSize == 8) &&
         "an element type of another size");
  std::vector<BoxArgs> Args;
  for (const cpu::CopyBox &B : Boxes) {
    assert(B.Dims.size() <= size_t(MaxBoxRank) && "a box of 2^41 elements");
    BoxArgs P;
    P.Rank = int(B.Dims.size());
    for (int K = 0; K < P.Rank; ++K) {
      P.Dims[K] = B.Dims[size_t(K)];
      P.Src[K] = B.SrcStrides[size_t(K)];
      P.Dst[K] = B.DstStrides[size_t(K)];
    }
    P.SrcOffset = B.SrcOffset;
    P.DstOffset = B.DstOffset;
    P.N = B.elements();
    Args.push_back(P);
  }
  return finish(std::make_unique<BoxCopyKernel>(std::move(Args), ElemSize,
                                                I.Outputs[0].bytes(), Zero));
}

KernelOr createConcat(const KernelInfo &I) {
  std::vector<cpu::CopyBox> Boxes;
  MDRT_RETURN_IF_ERROR(cpu::concatBoxes(I, Boxes));
  return makeBoxCopy(I, Boxes, /*Zero=*/false);
}

KernelOr createSlice(const KernelInfo &I) {
  cpu::CopyBox Box;
  MDRT_RETURN_IF_ERROR(cpu::sliceBox(I, Box));
  return makeBoxCopy(I, {Box}, /*Zero=*/false);
}

KernelOr createPad(const KernelInfo &I) {
  cpu::CopyBox Box;
  MDRT_RETURN_IF_ERROR(cpu::padBox(I, Box));
  return makeBoxCopy(I, {Box}, /*Zero=*/true);
}

template <typename From, typename To>
__global__ void castKernel(const From *X, To *Y, int64_t N) {
  GRID_STRIDE(K, N) { Y[K] = castValue<To>(X[K]); }
}

template <typename From, typename To> class CastKernel : public CudaKernel {
public:
  explicit CastKernel(int64_t N) : N(N) {}
  void run(const ExecContext &C) override {
    if (!N)
      return;
    castKernel<From, To><<<gridFor(N), 256, 0, Ctx->Stream>>>(
        static_cast<const From *>(C.In[0]), static_cast<To *>(C.Out[0]), N);
    Ctx->checkLaunch("Cast");
  }

private:
  int64_t N;
};

template <typename F> KernelOr dispatchAll(DType T, F &&Fn) {
  if (T == DType::Bool)
    return Fn((bool *)nullptr);
  return dispatch<false>(T, Fn);
}

KernelOr createCast(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  DType From = I.Inputs[0].Type, To = I.Outputs[0].Type;
  int64_t N = I.Inputs[0].numElements();
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[0], N, "output"));
  if (I.Attrs.has("dtype") && I.Attrs.getType("dtype") != To)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'dtype' attribute's type " +
                         dtypeName(I.Attrs.getType("dtype")));
  if (From == To && To != DType::Invalid)
    return finish(std::make_unique<CopyKernel>(0, I.Outputs[0].bytes()));
  return dispatchAll(From, [&](auto *FT) -> KernelOr {
    using FF = std::remove_pointer_t<decltype(FT)>;
    return dispatchAll(To, [&](auto *TT) -> KernelOr {
      using TTy = std::remove_pointer_t<decltype(TT)>;
      return finish(std::make_unique<CastKernel<FF, TTy>>(N));
    });
  });
}

//===----------------------------------------------------------------------===//
// State updates
//===----------------------------------------------------------------------===//

enum class Update {
  MovingAverage,
  GradientDescent,
  Momentum,
  Adam,
  RMSProp,
  CenteredRMSProp,
  Adagrad
};

/// How many slots an update has between its variable and its gradient.
constexpr unsigned slotsOf(Update U) {
  return U == Update::CenteredRMSProp                    ? 3
         : U == Update::Adam || U == Update::RMSProp     ? 2
         : U == Update::Momentum || U == Update::Adagrad ? 1
                                                         : 0;
}

/// The attributes, with the defaults of Momentum and Adam (createUpdate
/// reads the RMSProps' momentum and epsilon with their own defaults, 0 and
/// 1e-10).
struct UpdateParams {
  LearningRate LR;
  double Decay = 0.999, Momentum = 0.9, Beta1 = 0.9, Beta2 = 0.999, Eps = 1e-8,
         Rho = 0.9;
  bool Nesterov = false;
};

/// In[0] is the variable; the slots follow; then the gradient (or value)
/// and the int64 step (Apply ops). The grid is at most what the GPU keeps
/// resident (residentGridFor), so each block's scalars in double are
/// computed once for many elements.
template <typename T, Update U>
__global__ void updateKernel(UpdateParams P, T *__restrict__ Var,
                             T *__restrict__ S1, T *__restrict__ S2,
                             T *__restrict__ S3, const T *__restrict__ G,
                             const int64_t *__restrict__ StepPtr, int64_t N) {
  // Per-step scalars in double, rounded once to T (as on the CPU).
  __shared__ T Sc[2];
  if (threadIdx.x == 0) {
    if constexpr (U == Update::MovingAverage) {
      Sc[0] = T(1.0 - P.Decay);
    } else if constexpr (U == Update::Adam) {
      int64_t Step = *StepPtr;
      Sc[0] = T(P.LR.at(Step) * ::sqrt(1.0 - integerPower(P.Beta2, Step + 1)) /
                (1.0 - integerPower(P.Beta1, Step + 1)));
    } else {
      Sc[0] = T(P.LR.at(*StepPtr));
    }
  }
  __syncthreads();
  const T A = Sc[0];
  // One element as the CPU computes it, denormals flushed (UpdateMath.h).
  GRID_STRIDE(K, N) {
    if constexpr (U == Update::MovingAverage) {
      Var[K] = movingAverageUpdate(Var[K], G[K], A);
    } else if constexpr (U == Update::GradientDescent) {
      Var[K] = gradientDescentUpdate(Var[K], G[K], A);
    } else if constexpr (U == Update::Momentum) {
      T V = Var[K], Acc = S1[K];
      momentumUpdate(V, Acc, G[K], A, T(P.Momentum), P.Nesterov);
      S1[K] = Acc;
      Var[K] = V;
    } else if constexpr (U == Update::Adam) {
      const AdamScalars<T> S = {T(P.Beta1),       T(1.0 - P.Beta1), T(P.Beta2),
                                T(1.0 - P.Beta2), T(P.Eps),         A};
      T V = Var[K], M = S1[K], Sq = S2[K];
      adamUpdate(V, M, Sq, G[K], S);
      S1[K] = M;
      S2[K] = Sq;
      Var[K] = V;
    } else if constexpr (U == Update::RMSProp) {
      const RMSPropScalars<T> S = {T(1) - T(P.Rho), T(P.Momentum), T(P.Eps), A};
      T V = Var[K], Ms = S1[K], Mom = S2[K];
      rmspropUpdate(V, Ms, Mom, G[K], S);
      S1[K] = Ms;
      S2[K] = Mom;
      Var[K] = V;
    } else if constexpr (U == Update::CenteredRMSProp) {
      const RMSPropScalars<T> S = {T(1) - T(P.Rho), T(P.Momentum), T(P.Eps), A};
      T V = Var[K], Ms = S1[K], Mg = S2[K], Mom = S3[K];
      centeredRmspropUpdate(V, Ms, Mg, Mom, G[K], S);
      S1[K] = Ms;
      S2[K] = Mg;
      S3[K] = Mom;
      Var[K] = V;
    } else if constexpr (U == Update::Adagrad) {
      T V = Var[K], Acc = S1[K];
      adagradUpdate(V, Acc, G[K], A);
      S1[K] = Acc;
      Var[K] = V;
    }
  }
}

template <typename T, Update U> class UpdateKernel : public CudaKernel {
public:
  UpdateKernel(const UpdateParams &P, int64_t N) : P(P), N(N) {}
  void run(const ExecContext &C) override {
    if (!N)
      return;
    constexpr unsigned Slots = slotsOf(U);
    T *Var = static_cast<T *>(C.In[0]);
    T *S1 = Slots > 0 ? static_cast<T *>(C.In[1]) : nullptr;
    T *S2 = Slots > 1 ? static_cast<T *>(C.In[2]) : nullptr;
    T *S3 = Slots > 2 ? static_cast<T *>(C.In[3]) : nullptr;
    const T *G = static_cast<const T *>(C.In[1 + Slots]);
    const int64_t *Step = U == Update::MovingAverage
                              ? nullptr
                              : static_cast<const int64_t *>(C.In[2 + Slots]);
    updateKernel<T, U><<<residentGridFor(*Ctx, N), 256, 0, Ctx->Stream>>>(
        P, Var, S1, S2, S3, G, Step, N);
    Ctx->checkLaunch("a state update");
  }

private:
  UpdateParams P;
  int64_t N;
};

Status checkApply(const KernelInfo &I, unsigned NumTensors) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, NumTensors + 1, NumTensors + 1, 0));
  std::vector<unsigned> Ins;
  for (unsigned K = 0; K < NumTensors; ++K) {
    Ins.push_back(K);
    MDRT_RETURN_IF_ERROR(
        cpu::checkElements(I, I.Inputs[K], I.Inputs[0].numElements(), "input"));
  }
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, Ins, {}, I.Inputs[0].Type));
  const TensorDesc &Step = I.Inputs[NumTensors];
  if (Step.Type != DType::Int64 || Step.numElements() != 1)
    return Status::error("the step input must be an int64 scalar, got " +
                         Step.str());
  return Status::ok();
}

template <Update U> KernelOr createUpdate(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error(I.Op + " takes a variable input");
  UpdateParams P;
  if (U == Update::MovingAverage) {
    MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 2, 2, 0));
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0, 1}, {}, I.Inputs[0].Type));
    MDRT_RETURN_IF_ERROR(
        cpu::checkElements(I, I.Inputs[1], I.Inputs[0].numElements(), "input"));
    P.Decay = I.Attrs.getFloat("decay", 0.999);
  } else {
    MDRT_RETURN_IF_ERROR(checkApply(I, slotsOf(U) + 2));
    MDRT_RETURN_IF_ERROR(P.LR.init(I));
    if (U == Update::RMSProp || U == Update::CenteredRMSProp) {
      P.Rho = I.Attrs.getFloat("rho", 0.9);
      P.Momentum = I.Attrs.getFloat("momentum", 0.0);
      P.Eps = I.Attrs.getFloat("epsilon", 1e-10);
    } else {
      P.Momentum = I.Attrs.getFloat("momentum", 0.9);
      P.Nesterov = I.Attrs.getBool("nesterov", false);
      P.Beta1 = I.Attrs.getFloat("beta1", 0.9);
      P.Beta2 = I.Attrs.getFloat("beta2", 0.999);
      P.Eps = I.Attrs.getFloat("epsilon", 1e-8);
    }
  }
  int64_t N = I.Inputs[0].numElements();
  return dispatch<true>(I.Inputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<UpdateKernel<E, U>>(P, N));
  });
}

template <typename T> __global__ void assignAddKernel(T *Var, int64_t Amount) {
  if constexpr (std::is_integral<T>::value)
    *Var = T(Unsigned<T>(*Var) + Unsigned<T>(Amount));
  else
    *Var += T(Amount);
}

template <typename T> class AssignAddKernel : public CudaKernel {
public:
  explicit AssignAddKernel(int64_t Amount) : Amount(Amount) {}
  void run(const ExecContext &C) override {
    assignAddKernel<T>
        <<<1, 1, 0, Ctx->Stream>>>(static_cast<T *>(C.In[0]), Amount);
    Ctx->checkLaunch("AssignAdd");
  }

private:
  int64_t Amount;
};

KernelOr createAssignAdd(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("AssignAdd takes 1 input, got 0");
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 0));
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Inputs[0], 1, "input"));
  int64_t Amount = I.Attrs.getInt("amount", 1);
  return dispatch<false>(I.Inputs[0].Type, [&](auto *Tag) -> KernelOr {
    using E = std::remove_pointer_t<decltype(Tag)>;
    return finish(std::make_unique<AssignAddKernel<E>>(Amount));
  });
}

} // namespace

void cuda::launchSumInto(void *Dst, const void *A, const void *B, int64_t N,
                         DType T, cudaStream_t S) {
  if (N <= 0)
    return;
  if (T == DType::Float64) {
    PtrPack<double> P{};
    P.P[0] = static_cast<const double *>(A);
    P.P[1] = static_cast<const double *>(B);
    addNKernel<double>
        <<<gridFor(N), 256, 0, S>>>(P, 2, true, static_cast<double *>(Dst), N);
  } else {
    PtrPack<float> P{};
    P.P[0] = static_cast<const float *>(A);
    P.P[1] = static_cast<const float *>(B);
    addNKernel<float>
        <<<gridFor(N), 256, 0, S>>>(P, 2, true, static_cast<float *>(Dst), N);
  }
}

void cuda::registerElementwiseKernels(KernelRegistry &R) {
  const DeviceKind GPU = DeviceKind::GPU;
  R.add(GPU, "Add", createBinary<AddF>);
  R.add(GPU, "Sub", createBinary<SubF>);
  R.add(GPU, "Mul", createBinary<MulF>);
  R.add(GPU, "Div", createBinary<DivF>);
  R.add(GPU, "Maximum", createBinary<MaxF>);
  R.add(GPU, "Minimum", createBinary<MinF>);
  R.add(GPU, "GreaterEqualMask", createBinary<GreaterEqualMaskF>);
  R.add(GPU, "BiasAdd", createBiasAdd);
  R.add(GPU, "BroadcastGrad", createBroadcastGrad);
  R.add(GPU, "AddN", createAddN);
  R.add(GPU, "Neg", createZip<NegF, 1, false>);
  R.add(GPU, "Square", createZip<SquareF, 1, false>);
  R.add(GPU, "Sqrt", createZip<SqrtF, 1, true>);
  R.add(GPU, "Exp", createZip<ExpF, 1, true>);
  R.add(GPU, "Log", createZip<LogF, 1, true>);
  R.add(GPU, "Relu", createZip<ReluF, 1, true>);
  R.add(GPU, "Sigmoid", createZip<SigmoidF, 1, true>);
  R.add(GPU, "Tanh", createZip<TanhF, 1, true>);
  R.add(GPU, "ReluGrad", createZip<ReluGradF, 2, true>);
  R.add(GPU, "SigmoidGrad", createZip<SigmoidGradF, 2, true>);
  R.add(GPU, "TanhGrad", createZip<TanhGradF, 2, true>);
  R.add(GPU, "Softmax", createSoftmax);
  R.add(GPU, "SoftmaxGrad", createSoftmaxGrad);
  R.add(GPU, "Dropout", createDropout);
  R.add(GPU, "Identity", createCopy);
  R.add(GPU, "Reshape", createCopy);
  R.add(GPU, "BatchSlice", createBatchSlice);
  R.add(GPU, "Concat", createConcat);
  R.add(GPU, "Slice", createSlice);
  R.add(GPU, "Pad", createPad);
  R.add(GPU, "Cast", createCast);
  R.add(GPU, "SparseSoftmaxCrossEntropy", createSsce);
  R.add(GPU, "SoftmaxCrossEntropy", createSce);
  R.add(GPU, "OneHot", createOneHot);
  R.add(GPU, "LogLoss", createLogLoss);
  R.add(GPU, "LogLossGrad", createLogLossGrad);
  R.add(GPU, "Accuracy", createAccuracy);
  R.add(GPU, "AssignMovingAverage", createUpdate<Update::MovingAverage>);
  R.add(GPU, "AssignAdd", createAssignAdd);
  R.add(GPU, "ApplyGradientDescent", createUpdate<Update::GradientDescent>);
  R.add(GPU, "ApplyMomentum", createUpdate<Update::Momentum>);
  R.add(GPU, "ApplyAdam", createUpdate<Update::Adam>);
  R.add(GPU, "ApplyRMSProp", createUpdate<Update::RMSProp>);
  R.add(GPU, "ApplyCenteredRMSProp", createUpdate<Update::CenteredRMSProp>);
  R.add(GPU, "ApplyAdagrad", createUpdate<Update::Adagrad>);
}
