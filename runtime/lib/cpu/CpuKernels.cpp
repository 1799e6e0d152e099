//===- CpuKernels.cpp - Registration of the CPU kernels -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Registers every CPU kernel and holds the helpers of CpuCommon.h that are
// not templates.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mdrt;
using namespace mdrt::cpu;

void mdrt::registerCpuKernels(KernelRegistry &R) {
  registerPlumbingKernels(R);
  registerElementwiseKernels(R);
  registerReduceKernels(R);
  registerLossKernels(R);
  registerMatMulKernels(R);
  registerConvKernels(R);
  registerPoolKernels(R);
  registerBatchNormKernels(R);
  registerOptimizerKernels(R);
}

Backend cpu::selectedBackend() {
  const char *V = std::getenv("MDRT_CPU_KERNELS");
  if (!V)
    return Backend::Auto;
  if (!std::strcmp(V, "openblas"))
    return Backend::OpenBlas;
  if (!std::strcmp(V, "reference"))
    return Backend::Reference;
  return Backend::Auto;
}

std::string cpu::shapeStr(const std::vector<int64_t> &S) {
  std::string R = "[";
  for (size_t I = 0; I < S.size(); ++I) {
    if (I)
      R += ',';
    R += std::to_string(S[I]);
  }
  return R + "]";
}

Status cpu::typeError(const KernelInfo &I, DType T) {
  return Status::error("no CPU kernel for " + I.Op + " on element type " +
                       dtypeName(T));
}

Status cpu::checkArity(const KernelInfo &I, size_t MinIn, size_t MaxIn,
                       size_t NumOut) {
  size_t N = I.Inputs.size();
  if (N < MinIn || N > MaxIn) {
    std::string Want = std::to_string(MinIn);
    if (MaxIn != MinIn)
      Want += MaxIn == size_t(-1) ? " or more" : " to " + std::to_string(MaxIn);
    return Status::error(I.Op + " takes " + Want + " inputs, got " +
                         std::to_string(N));
  }
  if (I.Outputs.size() != NumOut)
    return Status::error(I.Op + " has " + std::to_string(NumOut) +
                         " outputs, got " + std::to_string(I.Outputs.size()));
  return Status::ok();
}

Status cpu::checkTypes(const KernelInfo &I, const std::vector<unsigned> &Ins,
                       const std::vector<unsigned> &Outs, DType T) {
  for (unsigned K : Ins)
    if (I.Inputs[K].Type != T)
      return Status::error("input " + std::to_string(K) + " is " +
                           I.Inputs[K].str() + ", expected element type " +
                           dtypeName(T));
  for (unsigned K : Outs)
    if (I.Outputs[K].Type != T)
      return Status::error("output " + std::to_string(K) + " is " +
                           I.Outputs[K].str() + ", expected element type " +
                           dtypeName(T));
  return Status::ok();
}

Status cpu::checkElements(const KernelInfo &I, const TensorDesc &D, int64_t N,
                          const char *What) {
  if (D.numElements() != N)
    return Status::error(std::string(What) + " " + D.str() + " should have " +
                         std::to_string(N) + " elements");
  return Status::ok();
}

Status cpu::checkDropoutRate(double Rate) {
  if (Rate >= 0 && Rate < 1)
    return Status::ok();
  char Text[32];
  std::snprintf(Text, sizeof(Text), "%g", Rate);
  return Status::error(std::string("dropout rate must be in [0, 1), got ") +
                       Text);
}

Status cpu::reductionAxes(const std::vector<int64_t> &Axes, size_t Rank,
                          std::vector<bool> &Reduced) {
  Reduced.assign(Rank, Axes.empty());
  for (int64_t A : Axes) {
    int64_t N = A < 0 ? A + int64_t(Rank) : A;
    if (N < 0 || N >= int64_t(Rank))
      return Status::error("reduction axis " + std::to_string(A) +
                           " is out of range for rank " + std::to_string(Rank));
    if (Reduced[size_t(N)])
      return Status::error("reduction axis " + std::to_string(A) +
                           " given twice");
    Reduced[size_t(N)] = true;
  }
  return Status::ok();
}

/// Strides of \p In, padded on the left to the rank of \p Out, with 0 for
/// dimensions broadcast along Out.
static Status broadcastStrides(const std::vector<int64_t> &Out,
                               const std::vector<int64_t> &In,
                               std::vector<int64_t> &Strides) {
  size_t R = Out.size();
  if (In.size() > R)
    return Status::error("cannot broadcast " + shapeStr(In) + " to " +
                         shapeStr(Out));
  Strides.assign(R, 0);
  int64_t S = 1;
  for (size_t K = R; K-- > 0;) {
    size_t J = K + In.size();
    if (J < R) // Padded dimension.
      continue;
    int64_t D = In[J - R];
    if (D != Out[K] && D != 1)
      return Status::error("cannot broadcast " + shapeStr(In) + " to " +
                           shapeStr(Out));
    Strides[K] = D == 1 ? 0 : S;
    S *= D;
  }
  return Status::ok();
}

Status cpu::BroadcastPlan::init(const std::vector<int64_t> &Out,
                                const std::vector<int64_t> &A,
                                const std::vector<int64_t> &B) {
  std::vector<int64_t> StA, StB;
  MDRT_RETURN_IF_ERROR(broadcastStrides(Out, A, StA));
  MDRT_RETURN_IF_ERROR(broadcastStrides(Out, B, StB));
  N = 1;
  for (int64_t D : Out)
    N *= D;
  Dims.clear();
  SA.clear();
  SB.clear();
  // Innermost first, then reversed.
  for (size_t K = Out.size(); K-- > 0;) {
    if (Out[K] == 1)
      continue;
    if (!Dims.empty() && StA[K] == SA.back() * Dims.back() &&
        StB[K] == SB.back() * Dims.back()) {
      Dims.back() *= Out[K];
      continue;
    }
    Dims.push_back(Out[K]);
    SA.push_back(StA[K]);
    SB.push_back(StB[K]);
  }
  if (Dims.empty()) {
    Dims.push_back(1);
    SA.push_back(0);
    SB.push_back(0);
  }
  std::reverse(Dims.begin(), Dims.end());
  std::reverse(SA.begin(), SA.end());
  std::reverse(SB.begin(), SB.end());
  return Status::ok();
}

Status cpu::windowGeometry(const KernelInfo &I, const std::vector<int64_t> &In,
                           int64_t KH, int64_t KW, const char *DefaultPadding,
                           Window2D &G) {
  if (In.size() != 4)
    return Status::error("expected an NHWC tensor, got " + shapeStr(In));
  std::vector<int64_t> S = I.Attrs.has("strides") ? I.Attrs.getInts("strides")
                                                  : std::vector<int64_t>{1, 1};
  if (S.size() != 2 || S[0] < 1 || S[1] < 1)
    return Status::error("'strides' must be two positive integers, got " +
                         shapeStr(S));
  if (KH < 1 || KW < 1)
    return Status::error("window must be positive, got " + shapeStr({KH, KW}));
  std::string Pad = I.Attrs.getString("padding", DefaultPadding);
  if (Pad != "SAME" && Pad != "VALID")
    return Status::error("padding must be SAME or VALID, got '" + Pad + "'");
  bool Same = Pad == "SAME";
  G.N = In[0];
  G.C = In[3];
  G.H = windowDim(In[1], KH, S[0], Same);
  G.W = windowDim(In[2], KW, S[1], Same);
  return Status::ok();
}

Status cpu::matMulDims(const KernelInfo &I, MatMulDims &D) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 1));
  const TensorDesc &A = I.Inputs[0], &B = I.Inputs[1];
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1}, {0}, A.Type));
  if (A.rank() != 2 || B.rank() != 2)
    return Status::error("MatMul needs rank-2 inputs, got " + A.str() +
                         " and " + B.str());
  D.TA = I.Attrs.getBool("transpose_a");
  D.TB = I.Attrs.getBool("transpose_b");
  D.M = D.TA ? A.Shape[1] : A.Shape[0];
  D.K = D.TA ? A.Shape[0] : A.Shape[1];
  int64_t KB = D.TB ? B.Shape[1] : B.Shape[0];
  D.N = D.TB ? B.Shape[0] : B.Shape[1];
  if (D.K != KB)
    return Status::error("inner dimensions do not match: " + A.str() +
                         (D.TA ? "^T" : "") + " x " + B.str() +
                         (D.TB ? "^T" : ""));
  if (I.Outputs[0].Shape != std::vector<int64_t>{D.M, D.N})
    return Status::error("output " + I.Outputs[0].str() + " should be [" +
                         std::to_string(D.M) + "," + std::to_string(D.N) + "]");
  return Status::ok();
}

int64_t cpu::CopyBox::elements() const {
  int64_t N = 1;
  for (int64_t D : Dims)
    N *= D;
  return N;
}

/// The row-major element strides of \p Shape.
static std::vector<int64_t> stridesOf(const std::vector<int64_t> &Shape) {
  std::vector<int64_t> S(Shape.size(), 1);
  for (size_t K = Shape.size(); K-- > 1;)
    S[K - 1] = S[K] * Shape[K];
  return S;
}

/// A box of \p Dims at \p SrcAt in a tensor of \p SrcShape, copied to
/// \p DstAt in one of \p DstShape; its dimensions of one element dropped
/// and contiguous runs merged.
static cpu::CopyBox makeBox(const std::vector<int64_t> &Dims,
                            const std::vector<int64_t> &SrcShape,
                            const std::vector<int64_t> &SrcAt,
                            const std::vector<int64_t> &DstShape,
                            const std::vector<int64_t> &DstAt) {
  std::vector<int64_t> SS = stridesOf(SrcShape), DS = stridesOf(DstShape);
  cpu::CopyBox B;
  for (size_t K = 0; K < Dims.size(); ++K) {
    B.SrcOffset += SrcAt[K] * SS[K];
    B.DstOffset += DstAt[K] * DS[K];
  }
  // Innermost first, then reversed.
  for (size_t K = Dims.size(); K-- > 0;) {
    if (Dims[K] == 1)
      continue;
    if (!B.Dims.empty() && SS[K] == B.SrcStrides.back() * B.Dims.back() &&
        DS[K] == B.DstStrides.back() * B.Dims.back()) {
      B.Dims.back() *= Dims[K];
      continue;
    }
    B.Dims.push_back(Dims[K]);
    B.SrcStrides.push_back(SS[K]);
    B.DstStrides.push_back(DS[K]);
  }
  // A box of one element, or one whose innermost run is strided (its last
  // dimension sliced to one element): a run of one.
  if (B.Dims.empty() || B.SrcStrides.front() != 1 ||
      B.DstStrides.front() != 1) {
    B.Dims.insert(B.Dims.begin(), 1);
    B.SrcStrides.insert(B.SrcStrides.begin(), 1);
    B.DstStrides.insert(B.DstStrides.begin(), 1);
  }
  std::reverse(B.Dims.begin(), B.Dims.end());
  std::reverse(B.SrcStrides.begin(), B.SrcStrides.end());
  std::reverse(B.DstStrides.begin(), B.DstStrides.end());
  if (std::find(Dims.begin(), Dims.end(), 0) != Dims.end())
    B.Dims.assign(B.Dims.size(), 0);
  return B;
}

Status cpu::concatBoxes(const KernelInfo &I, std::vector<CopyBox> &Boxes) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, SIZE_MAX, 1));
  const TensorDesc &Y = I.Outputs[0];
  std::vector<unsigned> All(I.Inputs.size());
  for (unsigned K = 0; K < All.size(); ++K)
    All[K] = K;
  MDRT_RETURN_IF_ERROR(checkTypes(I, All, {0}, I.Inputs[0].Type));
  int64_t Rank = int64_t(Y.rank()), Axis = I.Attrs.getInt("axis");
  if (Rank == 0 || Axis < -Rank || Axis >= Rank)
    return Status::error("axis " + std::to_string(Axis) +
                         " is out of range for " + Y.str());
  size_t A = size_t(Axis < 0 ? Axis + Rank : Axis);
  Boxes.clear();
  int64_t Offset = 0;
  for (size_t In = 0; In < I.Inputs.size(); ++In) {
    const TensorDesc &X = I.Inputs[In];
    bool Ok = X.rank() == Y.rank();
    for (size_t K = 0; Ok && K < X.rank(); ++K)
      Ok = K == A || X.Shape[K] == Y.Shape[K];
    if (!Ok)
      return Status::error("input " + std::to_string(In) + " " + X.str() +
                           " does not match output " + Y.str() +
                           " but along axis " + std::to_string(Axis));
    std::vector<int64_t> At(X.rank(), 0), Zero(X.rank(), 0);
    At[A] = Offset;
    Boxes.push_back(makeBox(X.Shape, X.Shape, Zero, Y.Shape, At));
    Offset += X.Shape[A];
  }
  if (Offset != Y.Shape[A])
    return Status::error("the inputs add up to " + std::to_string(Offset) +
                         " along axis " + std::to_string(Axis) +
                         ", the output " + Y.str() + " has " +
                         std::to_string(Y.Shape[A]));
  return Status::ok();
}

/// Checks \p Begin and \p Size (-1: the rest) of a box of \p X; fills
/// \p Dims with the box's dimensions.
static Status checkBox(const TensorDesc &X, const std::vector<int64_t> &Begin,
                       const std::vector<int64_t> &Size,
                       std::vector<int64_t> &Dims) {
  if (Begin.size() != X.rank() || Size.size() != X.rank())
    return Status::error("'begin' " + shapeStr(Begin) + " and 'size' " +
                         shapeStr(Size) +
                         " must have one value per dimension of " + X.str());
  Dims.clear();
  for (size_t K = 0; K < X.rank(); ++K) {
    int64_t D = X.Shape[K];
    if (Size[K] < -1)
      return Status::error("size " + std::to_string(Size[K]) +
                           " in dimension " + std::to_string(K) +
                           " is invalid (-1 takes the rest)");
    if (Begin[K] < 0 || Begin[K] > D ||
        (Size[K] >= 0 && Size[K] > D - Begin[K]))
      return Status::error("box at " + shapeStr(Begin) + " of size " +
                           shapeStr(Size) + " is out of bounds of " + X.str() +
                           " in dimension " + std::to_string(K));
    Dims.push_back(Size[K] >= 0 ? Size[K] : D - Begin[K]);
  }
  return Status::ok();
}

Status cpu::sliceBox(const KernelInfo &I, CopyBox &Box) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const TensorDesc &X = I.Inputs[0], &Y = I.Outputs[0];
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, X.Type));
  std::vector<int64_t> Begin = I.Attrs.getInts("begin"), Dims;
  MDRT_RETURN_IF_ERROR(checkBox(X, Begin, I.Attrs.getInts("size"), Dims));
  if (Y.Shape != Dims)
    return Status::error("output " + Y.str() + " is not the slice's " +
                         shapeStr(Dims));
  Box =
      makeBox(Dims, X.Shape, Begin, Y.Shape, std::vector<int64_t>(Y.rank(), 0));
  return Status::ok();
}

Status cpu::padBox(const KernelInfo &I, CopyBox &Box) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const TensorDesc &X = I.Inputs[0], &Y = I.Outputs[0];
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, X.Type));
  std::vector<int64_t> P = I.Attrs.getInts("paddings");
  if (P.size() != 2 * X.rank())
    return Status::error("'paddings' " + shapeStr(P) +
                         " must have two values per dimension of " + X.str());
  std::vector<int64_t> Want, Before;
  for (size_t K = 0; K < X.rank(); ++K) {
    // The plan verifier's bound on a dimension: the sums cannot overflow.
    constexpr int64_t MaxPad = int64_t(1) << 40;
    if (P[2 * K] < 0 || P[2 * K + 1] < 0 || P[2 * K] > MaxPad ||
        P[2 * K + 1] > MaxPad)
      return Status::error("paddings " + shapeStr(P) + " of dimension " +
                           std::to_string(K) + " must be between 0 and 2^40");
    Want.push_back(X.Shape[K] + P[2 * K] + P[2 * K + 1]);
    Before.push_back(P[2 * K]);
  }
  if (Y.Shape != Want)
    return Status::error("output " + Y.str() + " is not the padded " +
                         shapeStr(Want));
  Box = makeBox(X.Shape, X.Shape, std::vector<int64_t>(X.rank(), 0), Y.Shape,
                Before);
  return Status::ok();
}

Status cpu::softmaxCrossEntropyDims(const KernelInfo &I, int64_t &N,
                                    int64_t &C) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 2));
  const TensorDesc &X = I.Inputs[0], &Y = I.Inputs[1];
  if (X.rank() != 2 || Y.Shape != X.Shape)
    return Status::error("logits " + X.str() + " and labels " + Y.str() +
                         " must have one shape [batch, classes]");
  if (X.Type != DType::Float32 && X.Type != DType::Float64)
    return Status::error("logits must be float32 or float64, got " + X.str());
  MDRT_RETURN_IF_ERROR(checkTypes(I, {1}, {0, 1}, X.Type));
  N = X.Shape[0];
  C = X.Shape[1];
  if (C < 1 && N > 0)
    return Status::error("logits " + X.str() + " have no classes");
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], N, "output"));
  return checkElements(I, I.Outputs[1], X.numElements(), "output");
}

Status cpu::oneHotDims(const KernelInfo &I, int64_t &N, int64_t &Depth) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const TensorDesc &X = I.Inputs[0], &Y = I.Outputs[0];
  if (X.Type != DType::Int32 && X.Type != DType::Int64)
    return Status::error("indices must be int32 or int64, got " + X.str());
  if (Y.Type != DType::Float32 && Y.Type != DType::Float64)
    return Status::error("output must be float32 or float64, got " + Y.str());
  Depth = I.Attrs.getInt("depth");
  std::vector<int64_t> Want = X.Shape;
  Want.push_back(Depth);
  if (Depth < 1 || Y.Shape != Want)
    return Status::error("output " + Y.str() + " is not " + X.str() +
                         " with a last dimension of depth " +
                         std::to_string(Depth));
  N = X.numElements();
  return Status::ok();
}

Status cpu::batchSliceOffset(const KernelInfo &I, size_t &OffsetBytes) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const TensorDesc &X = I.Inputs[0], &Y = I.Outputs[0];
  if (X.Type != Y.Type || X.rank() == 0 || Y.rank() != X.rank())
    return Status::error("cannot slice " + X.str() + " into " + Y.str());
  int64_t Index = I.Attrs.getInt("index"), Count = I.Attrs.getInt("count");
  int64_t B = X.Shape[0];
  if (Count < 1 || Index < 0 || Index >= Count)
    return Status::error("slice " + std::to_string(Index) + " of " +
                         std::to_string(Count) + " is out of range");
  int64_t Begin = Index * B / Count, End = (Index + 1) * B / Count;
  if (Y.Shape[0] != End - Begin)
    return Status::error("slice " + std::to_string(Index) + " of " +
                         std::to_string(Count) + " of " + X.str() + " has " +
                         std::to_string(End - Begin) + " rows, output is " +
                         Y.str());
  for (unsigned K = 1; K < X.rank(); ++K)
    if (X.Shape[K] != Y.Shape[K])
      return Status::error("cannot slice " + X.str() + " into " + Y.str());
  size_t RowBytes = B ? X.bytes() / size_t(B) : 0;
  OffsetBytes = size_t(Begin) * RowBytes;
  return Status::ok();
}

Status cpu::batchNormDims(const KernelInfo &I, BatchNormOp Op,
                          BatchNormDims &D) {
  bool Train = Op == BatchNormOp::Train;
  MDRT_RETURN_IF_ERROR(checkArity(I, Train ? 2 : 4, Train ? 3 : 5,
                                  Op == BatchNormOp::Inference ? 1 : 3));
  // x: input 1 of the gradient, input 0 otherwise.
  const TensorDesc &X = I.Inputs[Op == BatchNormOp::Grad ? 1 : 0];
  if (X.rank() < 2)
    return Status::error(I.Op + " input must have rank >= 2, got " + X.str());
  D.C = X.Shape.back();
  D.M = D.C ? X.numElements() / D.C : 0;
  D.Pieces = D.M ? reductionPieces(D.M * D.C, D.M) : 1;
  D.Eps = I.Attrs.getFloat("epsilon", 0.001);
  D.Scale = I.Attrs.getBool("scale", false);
  size_t Want = (Train ? 2 : 4) + (D.Scale ? 1 : 0);
  if (I.Inputs.size() != Want)
    return Status::error(
        I.Op + " with scale=" + std::string(D.Scale ? "true" : "false") +
        " takes " + std::to_string(Want) + " inputs, got " +
        std::to_string(I.Inputs.size()));
  std::vector<unsigned> Ins;
  for (unsigned K = 0; K < Want; ++K)
    Ins.push_back(K);
  DType T = I.Inputs[0].Type;
  int64_t NX = X.numElements();
  switch (Op) {
  case BatchNormOp::Train:
    MDRT_RETURN_IF_ERROR(checkTypes(I, Ins, {0, 1, 2}, T));
    for (unsigned K = 1; K < Want; ++K)
      MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[K], D.C, "input"));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], NX, "output"));
    break;
  case BatchNormOp::Inference:
    for (unsigned K = 1; K < Want; ++K)
      MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[K], D.C, "input"));
    MDRT_RETURN_IF_ERROR(checkTypes(I, Ins, {0}, T));
    return checkElements(I, I.Outputs[0], NX, "output");
  case BatchNormOp::Grad:
    MDRT_RETURN_IF_ERROR(checkTypes(I, Ins, {0, 1, 2}, T));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[0], NX, "input"));
    for (unsigned K = 2; K < Want; ++K)
      MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[K], D.C, "input"));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], NX, "output"));
    break;
  }
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[1], D.C, "output"));
  return checkElements(I, I.Outputs[2], D.C, "output");
}

Status cpu::convGeometry(const KernelInfo &I, ConvMode Mode, ConvGeometry &G) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 1));
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1}, {0}, I.Outputs[0].Type));
  std::vector<int64_t> &X = G.X, &F = G.F, &Y = G.Y;
  switch (Mode) {
  case ConvMode::Forward:
    X = I.Inputs[0].Shape;
    F = I.Inputs[1].Shape;
    Y = I.Outputs[0].Shape;
    break;
  case ConvMode::BackwardData:
    F = I.Inputs[0].Shape;
    Y = I.Inputs[1].Shape;
    X = I.Outputs[0].Shape;
    if (I.Attrs.has("input_shape") && I.Attrs.getInts("input_shape") != X)
      return Status::error(
          "output " + I.Outputs[0].str() +
          " does not have the 'input_shape' attribute's shape " +
          shapeStr(I.Attrs.getInts("input_shape")));
    break;
  case ConvMode::BackwardFilter:
    X = I.Inputs[0].Shape;
    Y = I.Inputs[1].Shape;
    F = I.Outputs[0].Shape;
    if (I.Attrs.has("filter_shape") && I.Attrs.getInts("filter_shape") != F)
      return Status::error(
          "output " + I.Outputs[0].str() +
          " does not have the 'filter_shape' attribute's shape " +
          shapeStr(I.Attrs.getInts("filter_shape")));
    break;
  }
  if (F.size() != 4)
    return Status::error("filter must be HWIO, got " + shapeStr(F));
  MDRT_RETURN_IF_ERROR(windowGeometry(I, X, F[0], F[1], "SAME", G.Win));
  if (F[2] != X[3])
    return Status::error("input " + shapeStr(X) +
                         " does not match the filter " + shapeStr(F));
  G.Co = F[3];
  std::vector<int64_t> Want = {G.Win.N, G.Win.H.Out, G.Win.W.Out, G.Co};
  if (Y != Want)
    return Status::error("output of the convolution of " + shapeStr(X) +
                         " by " + shapeStr(F) + " should be " + shapeStr(Want) +
                         ", got " + shapeStr(Y));
  return Status::ok();
}

#ifdef MDRT_HAVE_DNNL
dnnl::engine &cpu::dnnlEngine() {
  static dnnl::engine E(dnnl::engine::kind::cpu, 0);
  return E;
}

void DnnlCall::init(dnnl::primitive P, const dnnl::memory::desc &Scratch) {
  Prim = std::move(P);
  if (Scratch.get_size())
    arg(DNNL_ARG_SCRATCHPAD, dnnl::memory(Scratch, dnnlEngine()));
}

unsigned DnnlCall::arg(int Arg, const dnnl::memory &M) {
  // The C handle stays valid while Mems holds a reference to it.
  Mems.push_back(M);
  Args.push_back({Arg, M.get()});
  return unsigned(Mems.size() - 1);
}

void DnnlCall::exec(dnnl::stream &S) {
  dnnl_primitive_execute(Prim.get(), S.get(), int(Args.size()), Args.data());
}
#endif
