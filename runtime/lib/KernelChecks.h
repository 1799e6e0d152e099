//===- KernelChecks.h - Argument checks shared by all kernels ---*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime's kernel libraries. The checks every device's
// kernels make of their KernelInfo (arity, element types, shapes) and the
// geometry of window ops (convolutions, pooling), defined once in
// lib/cpu/CpuKernels.cpp so that a CPU and a GPU kernel accept and reject
// the same plans with the same messages. Plain C++ (no OpenMP, oneDNN or
// CUDA headers): lib/cuda's .cu files include it through nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_KERNELCHECKS_H
#define MDRT_LIB_KERNELCHECKS_H

#include "mdrt/HostDevice.h"
#include "mdrt/Kernel.h"
#include "mdrt/Random.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace mdrt {

/// \p B to the power \p E (>= 0) by binary exponentiation: the decayed
/// learning rate's decay_rate^periods and Adam's beta^t. Plain products,
/// which round the same on the CPU and the GPU (whose pow functions do not
/// agree to the last bit).
MDRT_HOST_DEVICE inline double integerPower(double B, int64_t E) {
  double R = 1.0;
  for (; E > 0; E >>= 1) {
    if (E & 1)
      R *= B;
    B *= B;
  }
  return R;
}

/// The sum in \p Acc of Fn(I) over [Begin, End) kept in 8 interleaved
/// lanes added in a fixed order at the end: it vectorizes without
/// reassociation, so every instruction set gives the same sum, and the
/// GPU's reference kernels (lib/cuda/ReferenceMath.h) add in this order too.
template <typename Acc, typename F>
MDRT_HOST_DEVICE inline Acc laneSum(int64_t Begin, int64_t End, const F &Fn) {
  Acc L[8] = {Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0)};
  int64_t I = Begin;
  for (; I + 8 <= End; I += 8)
    for (int J = 0; J < 8; ++J)
      L[J] += Fn(I + J);
  for (int J = 0; I < End; ++I, ++J)
    L[J] += Fn(I);
  return ((L[0] + L[1]) + (L[2] + L[3])) + ((L[4] + L[5]) + (L[6] + L[7]));
}

/// Cast's conversion of one element, the same on every device. Float to
/// integer truncates toward zero; NaN and values outside the integer
/// type's range give its minimum (what x86's conversions give; C++ leaves
/// them undefined, and CUDA's saturate). Anything to bool is `!= 0`.
template <typename To, typename From>
MDRT_HOST_DEVICE inline To castValue(From V) {
  if constexpr (std::is_same<To, bool>::value) {
    return V != From(0);
  } else if constexpr (std::is_floating_point<From>::value &&
                       std::is_integral<To>::value) {
    static_assert(std::is_signed<To>::value, "integer types are signed");
    // 2^(bits-1) as a float is exact; values that truncate into the range
    // lie in (-2^(bits-1) - 1, 2^(bits-1)). (-Limit - 1 may round to
    // -Limit, whose truncation is the minimum anyway.) No numeric_limits:
    // device code may not call it.
    constexpr From Limit = From(uint64_t(1) << (sizeof(To) * 8 - 1));
    constexpr int64_t Min = -(int64_t(1) << (sizeof(To) * 8 - 2)) * 2;
    if (!(V > -Limit - From(1) && V < Limit))
      return To(Min);
    return static_cast<To>(V);
  } else {
    return static_cast<To>(V);
  }
}

namespace cpu {

/// Checks the number of inputs (in [MinIn, MaxIn]) and outputs.
Status checkArity(const KernelInfo &I, size_t MinIn, size_t MaxIn,
                  size_t NumOut);
/// Checks that input or output descs have element type \p T.
Status checkTypes(const KernelInfo &I, const std::vector<unsigned> &Inputs,
                  const std::vector<unsigned> &Outputs, DType T);
/// Checks that \p D has \p N elements.
Status checkElements(const KernelInfo &I, const TensorDesc &D, int64_t N,
                     const char *What);
/// Checks that a Dropout rate is in [0, 1).
Status checkDropoutRate(double Rate);
/// The random stream of a Dropout kernel: from its node's name, so that
/// the same model and seed draw the same masks whatever the plan's kernel
/// order (mdplan's schedule) and on every device kind.
inline uint64_t dropoutStream(const KernelInfo &I) {
  return hashName(I.Name.c_str());
}
/// Flags the dimensions of a rank-\p Rank tensor named by \p Axes
/// (negative counts from the end; empty: all).
Status reductionAxes(const std::vector<int64_t> &Axes, size_t Rank,
                     std::vector<bool> &Reduced);
/// "[2,3]".
std::string shapeStr(const std::vector<int64_t> &S);

/// One [A, R, K] -> [A, K] step of a reduction: each of the A x K sums
/// adds R rows (one element every K, rows of the K == 1 case in 8
/// interleaved lanes, laneSum), in \p Pieces runs of consecutive
/// rows (piece p: rows R * p / Pieces up to R * (p + 1) / Pieces) whose sums
/// are then added in piece order. The plan depends on the shape alone, never on
/// the thread count: a sum has the same bits on every machine, and the
/// GPU's reference kernels (MDRT_CUDA_KERNELS=reference) add in this order.
struct ReduceStep {
  int64_t A = 1, R = 1, K = 1, Pieces = 1;
};

/// The pieces of a sum of \p Elems elements over \p Rows rows: about 2^15
/// elements each, at most 64, at least one row each (L2Loss: a sum of
/// N elements over N rows of one).
int64_t reductionPieces(int64_t Elems, int64_t Rows);

/// The steps of a sum of a tensor of \p Shape over the dimensions flagged in
/// \p Reduced (same length): one per maximal run of reduced dimensions
/// (size-1 dimensions vanish), innermost first, each reading the previous
/// one's [A, K] sums. None when nothing is reduced (or the tensor is empty).
std::vector<ReduceStep> planReduction(const std::vector<int64_t> &Shape,
                                      const std::vector<bool> &Reduced);

/// The dimensions of a MatMul: op(A)[M,K] x op(B)[K,N] = Y[M,N].
struct MatMulDims {
  int64_t M = 0, N = 0, K = 0;
  bool TA = false, TB = false;
};

/// Checks a MatMul kernel (arity, one element type, rank-2 operands, the
/// inner dimensions, the output shape) and fills \p D.
Status matMulDims(const KernelInfo &I, MatMulDims &D);

/// Checks a BatchSlice kernel (rows [Index*B/Count, (Index+1)*B/Count) of
/// its input) and returns the byte offset of the slice in \p OffsetBytes.
Status batchSliceOffset(const KernelInfo &I, size_t &OffsetBytes);

/// BatchNorm (training: x, beta[, gamma] -> y, mean, variance), its
/// gradient (dy, x, mean, variance[, gamma] -> dx, dbeta, dgamma) and
/// BatchNormInference (x, beta[, gamma], mean, variance -> y).
enum class BatchNormOp { Train, Grad, Inference };

/// x viewed as [M, C] (C the last dimension), epsilon and scale.
struct BatchNormDims {
  int64_t M = 0, C = 0;
  /// The statistics' column sums add the rows in this many pieces of
  /// consecutive rows (piece p: rows M * p / Pieces up to M * (p + 1) /
  /// Pieces), each from zero in row order, then the pieces' sums in piece
  /// order: reductionPieces(M * C, M), fixed by the shape, never by the
  /// thread count (the GPU's reference kernels add in this order too).
  int64_t Pieces = 1;
  double Eps = 0.001;
  bool Scale = false;
};

/// Checks a kernel of \p Op (arity, inputs for the 'scale' attribute, one
/// element type, per-channel and per-element sizes) and fills \p D.
Status batchNormDims(const KernelInfo &I, BatchNormOp Op, BatchNormDims &D);

//===----------------------------------------------------------------------===//
// Window geometry (convolutions and pooling)
//===----------------------------------------------------------------------===//

/// One spatial dimension of a window op, padded as TensorFlow pads.
struct WindowDim {
  int64_t In = 0, K = 1, Stride = 1, Out = 0, PadBefore = 0, PadAfter = 0;
};

inline WindowDim windowDim(int64_t In, int64_t K, int64_t Stride, bool Same) {
  WindowDim W;
  W.In = In;
  W.K = K;
  W.Stride = Stride;
  if (Same) {
    W.Out = In <= 0 ? 0 : (In - 1) / Stride + 1; // ceil, without overflow
    int64_t Total = std::max<int64_t>((W.Out - 1) * Stride + K - In, 0);
    W.PadBefore = Total / 2;
    W.PadAfter = Total - W.PadBefore;
  } else {
    W.Out = In < K ? 0 : (In - K) / Stride + 1;
    // What oneDNN needs to see the same output size.
    W.PadAfter = 0;
  }
  // One output: the stride moves nothing, and one as large as the input
  // gives the same window (a stride of 2^62 is more than oneDNN takes).
  if (W.Out == 1 && In >= 1)
    W.Stride = std::min(Stride, In);
  return W;
}

/// The 2-D geometry of Conv2D / MaxPool on NHWC tensors.
struct Window2D {
  int64_t N = 0, C = 0;
  WindowDim H, W;
};

/// Reads `strides` (default [1,1]), `padding` (\p DefaultPadding) and the
/// window size from \p Ksize; fills \p G for an NHWC input of \p In.
Status windowGeometry(const KernelInfo &I, const std::vector<int64_t> &In,
                      int64_t KH, int64_t KW, const char *DefaultPadding,
                      Window2D &G);

/// A Conv2D kernel (Forward) or one of its gradients: which of x (NHWC),
/// filter (HWIO) and y (NHWC) are inputs and which is the output.
/// The loop of a broadcasting binary op, on either backend: the output's
/// dimensions collapsed where both inputs allow (outermost first, at least
/// one), the element strides of the two inputs along them (0: broadcast),
/// and the output's element count.
struct BroadcastPlan {
  std::vector<int64_t> Dims, SA, SB;
  int64_t N = 0;

  /// Fails with "cannot broadcast X to Y" for an input that does not
  /// broadcast to \p Out.
  Status init(const std::vector<int64_t> &Out, const std::vector<int64_t> &A,
              const std::vector<int64_t> &B);
};

/// A strided copy of a box of elements, on either backend: the box's
/// dimensions (outermost first, collapsed where source and destination are
/// both contiguous; the last one is contiguous on both sides, and there is
/// at least one), the element strides of source and destination along
/// them, and where the box starts on each side, in elements.
struct CopyBox {
  std::vector<int64_t> Dims, SrcStrides, DstStrides;
  int64_t SrcOffset = 0, DstOffset = 0;

  /// The elements of the box.
  int64_t elements() const;
};

/// Concat's copies, one box per input (into the output), after checking
/// the inputs, the output and the 'axis' attribute.
Status concatBoxes(const KernelInfo &I, std::vector<CopyBox> &Boxes);
/// Slice's copy of its box of the input ('begin', 'size').
Status sliceBox(const KernelInfo &I, CopyBox &Box);
/// Pad's copy of the input into the output ('paddings'), whose other
/// elements are zeros.
Status padBox(const KernelInfo &I, CopyBox &Box);

/// Checks a SoftmaxCrossEntropy kernel (logits and labels of one float type
/// and shape [N, C], a loss of N values and a backprop like the logits);
/// fills \p N and \p C.
Status softmaxCrossEntropyDims(const KernelInfo &I, int64_t &N, int64_t &C);
/// Checks a OneHot kernel (integer indices, a float output of the indices'
/// shape and a last dimension of 'depth'); fills \p N (the indices) and
/// \p Depth.
Status oneHotDims(const KernelInfo &I, int64_t &N, int64_t &Depth);

enum class ConvMode { Forward, BackwardData, BackwardFilter };

/// The checked shapes and window of a convolution kernel.
struct ConvGeometry {
  /// Input, filter and output shapes, wherever each comes from.
  std::vector<int64_t> X, F, Y;
  /// Batch, input channels and the spatial dimensions.
  Window2D Win;
  /// Output channels.
  int64_t Co = 0;
};

/// Checks a convolution kernel of \p Mode (arity, one float type, the
/// 'input_shape' / 'filter_shape' attributes of the gradients, SAME
/// padding by default, the output shape) and fills \p G. Shared by every
/// device's convolution kernels so that they accept the same plans.
Status convGeometry(const KernelInfo &I, ConvMode Mode, ConvGeometry &G);

} // namespace cpu
} // namespace mdrt

#endif // MDRT_LIB_KERNELCHECKS_H
