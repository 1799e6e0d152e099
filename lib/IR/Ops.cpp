//===- Ops.cpp - Op definitions, shape functions, gradient rules ----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Each op is defined once: inputs, attributes, flags, its shape function and,
// next to it, its gradient rule. Gradient rules build nodes through a
// GradBuilder; inputs that get no gradient are left null.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace llvm;
using namespace mdplan;

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

static Error expectFloat(InferContext &C, unsigned I) {
  if (!isFloat(C.input(I).Elt))
    return C.error(C.node().getOpName() + " input " + Twine(I) +
                   " must be float32 or float64, got " +
                   dtypeName(C.input(I).Elt));
  return Error::success();
}

static Error expectSameType(InferContext &C, unsigned I, unsigned J) {
  if (C.input(I).Elt != C.input(J).Elt)
    return C.error("element types of inputs " + Twine(I) + " and " + Twine(J) +
                   " differ: " + dtypeName(C.input(I).Elt) + " and " +
                   dtypeName(C.input(J).Elt));
  return Error::success();
}

static Error expectRank(InferContext &C, unsigned I, unsigned Rank) {
  if (C.input(I).Dims.rank() != Rank)
    return C.error(C.node().getOpName() + " input " + Twine(I) +
                   " must have rank " + Twine(Rank) + ", got " +
                   C.input(I).Dims.str());
  return Error::success();
}

/// Two dimensions are equal, or one is unknown.
static bool dimsCompatible(int64_t A, int64_t B) {
  return A < 0 || B < 0 || A == B;
}

/// The more precise of two compatible dimensions.
static int64_t mergeDim(int64_t A, int64_t B) { return A >= 0 ? A : B; }

static Error expectSameShape(InferContext &C, unsigned I, unsigned J) {
  const Shape &A = C.input(I).Dims, &B = C.input(J).Dims;
  bool Ok = A.rank() == B.rank();
  for (unsigned K = 0; Ok && K < A.rank(); ++K)
    Ok = dimsCompatible(A[K], B[K]);
  if (!Ok)
    return C.error("shapes of inputs " + Twine(I) + " and " + Twine(J) +
                   " differ: " + A.str() + " and " + B.str());
  return Error::success();
}

/// Numpy broadcasting of two shapes.
static Expected<Shape> broadcastShapes(InferContext &C, const Shape &A,
                                       const Shape &B) {
  unsigned R = std::max(A.rank(), B.rank());
  Shape Out;
  Out.dims().resize(R);
  for (unsigned I = 0; I < R; ++I) {
    int64_t DA = I < R - A.rank() ? 1 : A[I - (R - A.rank())];
    int64_t DB = I < R - B.rank() ? 1 : B[I - (R - B.rank())];
    if (DA == 1)
      Out[I] = DB;
    else if (DB == 1)
      Out[I] = DA;
    else if (dimsCompatible(DA, DB))
      Out[I] = mergeDim(DA, DB);
    else
      return C.error("shapes " + A.str() + " and " + B.str() +
                     " cannot be broadcast together");
  }
  return Out;
}

/// Output size of a window op along one dimension.
static int64_t windowOut(int64_t In, int64_t K, int64_t S, StringRef Pad) {
  if (In < 0)
    return -1;
  if (Pad == "SAME") // ceil(In / S), without In + S overflowing.
    return In == 0 ? 0 : (In - 1) / S + 1;
  return In < K ? 0 : (In - K) / S + 1;
}

/// With VALID padding a window must fit in the input: a larger one leaves
/// an empty output, which would train nothing. With SAME padding a pooling
/// window (\p Pool; a filter's size is bounded by its variable) must not be
/// more than twice the input plus one: from 2 x input on, every window
/// covers the whole input, and the kernels would only walk the padding (a
/// window of 2^31 took a step forever).
static Error checkWindowFits(InferContext &C, const Shape &X, int64_t KH,
                             int64_t KW, StringRef Pad, bool Pool) {
  auto Dim = [](int64_t D) {
    return D < 0 ? std::string("?") : std::to_string(D);
  };
  if (Pad == "SAME") {
    auto TooLarge = [](int64_t K, int64_t In) {
      return In >= 0 && K / 2 > In; // K > 2 * In + 1, without overflow
    };
    if (!Pool || !(TooLarge(KH, X[1]) || TooLarge(KW, X[2])))
      return Error::success();
    return C.error("window " + Twine(KH) + "x" + Twine(KW) +
                   " is more than twice the input's " + Dim(X[1]) + "x" +
                   Dim(X[2]) +
                   " plus one (SAME padding: every window would cover the "
                   "whole input, as one of twice the input's size does)");
  }
  if (!((X[1] >= 0 && X[1] < KH) || (X[2] >= 0 && X[2] < KW)))
    return Error::success();
  return C.error("window " + Twine(KH) + "x" + Twine(KW) +
                 " is larger than the input's " + Dim(X[1]) + "x" + Dim(X[2]) +
                 " (VALID padding: the output would be empty; SAME pads)");
}

/// Normalizes reduction axes (negative counts from the end); empty = all.
static Expected<SmallVector<unsigned, 4>>
reductionAxes(InferContext &C, const std::vector<int64_t> &Axes,
              unsigned Rank) {
  SmallVector<unsigned, 4> R;
  if (Axes.empty()) {
    for (unsigned I = 0; I < Rank; ++I)
      R.push_back(I);
    return R;
  }
  for (int64_t A : Axes) {
    int64_t N = A < 0 ? A + Rank : A;
    if (N < 0 || N >= int64_t(Rank))
      return C.error("reduction axis " + Twine(A) +
                     " is out of range for rank " + Twine(Rank));
    if (is_contained(R, unsigned(N)))
      return C.error("reduction axis " + Twine(A) + " given twice");
    R.push_back(unsigned(N));
  }
  llvm::sort(R);
  return R;
}

static Shape reducedShape(const Shape &In, ArrayRef<unsigned> Axes,
                          bool KeepDims) {
  Shape Out;
  for (unsigned I = 0; I < In.rank(); ++I) {
    if (is_contained(Axes, I)) {
      if (KeepDims)
        Out.dims().push_back(1);
      continue;
    }
    Out.dims().push_back(In[I]);
  }
  return Out;
}

//===----------------------------------------------------------------------===//
// Shape functions
//===----------------------------------------------------------------------===//

static Error shapeInput(InferContext &C) {
  Shape S;
  S.dims().push_back(C.attrs().getInt("batch_size", -1));
  for (int64_t D : C.attrs().getInts("shape")) {
    if (D <= 0)
      return C.error("input dimensions must be positive, got " +
                     writtenDims(C.attrs().getInts("shape")));
    S.dims().push_back(D);
  }
  if (S[0] == 0 || S[0] < -1)
    return C.error("batch size must be positive");
  DType T = C.attrs().getType("dtype");
  if (T == DType::Invalid)
    return C.error("input needs a dtype");
  C.setOutput(0, T, S);
  return Error::success();
}

static Error checkStaticShape(InferContext &C, const Shape &S) {
  for (int64_t D : S.dims())
    if (D < 0)
      return C.error("shape " + writtenDims(S.dims()) +
                     " must have non-negative dimensions");
  return Error::success();
}

/// \p V, a value of \p What, fits integer type \p T (converting a double
/// out of range is undefined; the runtime's verifier rejects such plans).
static Error checkIntegerValue(InferContext &C, DType T, double V,
                               StringRef What) {
  double Lo, Hi;
  if (T == DType::Int32) {
    Lo = -2147483648.0;
    Hi = 2147483647.0;
  } else if (T == DType::Int64) {
    Lo = -9223372036854775808.0;
    Hi = 9223372036854774784.0; // The largest double below 2^63.
  } else {
    return Error::success();
  }
  if (V >= Lo && V <= Hi)
    return Error::success();
  return C.error(What + " " + formatNumber(V) + " does not fit " +
                 dtypeName(T));
}

static Error shapeConst(InferContext &C) {
  Shape S = C.attrs().getShape("shape");
  if (Error E = checkStaticShape(C, S))
    return E;
  const Attr *V = C.attrs().get("value");
  size_t N = V->getFloats().size();
  if (N != 1 && int64_t(N) != S.numElements())
    return C.error(
        "const of shape " + S.str() + " needs " +
        (S.numElements() == 1
             ? std::string("1 value")
             : "1 or " + std::to_string(S.numElements()) + " values") +
        ", got " + Twine(N));
  DType T = C.attrs().getType("dtype");
  for (double X : V->getFloats())
    if (Error E = checkIntegerValue(C, T, X, "value"))
      return E;
  C.setOutput(0, T, S);
  return Error::success();
}

/// The `uniform` initializer's range when minval or maxval is not given.
static constexpr double DefaultUniformMin = -0.05, DefaultUniformMax = 0.05;

static Error shapeVariable(InferContext &C) {
  Shape S = C.attrs().getShape("shape");
  // As the `variable` sugar's shape: a variable has at least one element.
  for (int64_t D : S.dims())
    if (D <= 0)
      return C.error("shape " + writtenDims(S.dims()) +
                     " must have positive dimensions");
  DType T = C.attrs().getType("dtype");
  if (T == DType::Bool || T == DType::Invalid)
    return C.error("variables must be float32, float64, int32 or int64");
  StringRef Init = C.attrs().getString("initializer");
  if (!isFloat(T) && Init != "zeros" && Init != "ones" && Init != "constant")
    return C.error("initializer '" + Init + "' needs a float variable");
  if (Init == "constant")
    if (Error E = checkIntegerValue(C, T, C.attrs().getFloat("init_value"),
                                    "init_value"))
      return E;
  // The distributions' parameters, where the initializer uses them (named
  // as the `variable` sugar's `initializer` fields).
  auto Param = [&](StringRef Name) { return C.attrs().getFloat(Name); };
  auto Finite = [&](StringRef Name, StringRef Field) -> Error {
    if (std::isfinite(Param(Name)))
      return Error::success();
    return C.error("initializer '" + Init + "': " + Field +
                   " must be a finite number, got " +
                   formatNumber(Param(Name)));
  };
  if (Init == "normal" || Init == "truncated_normal") {
    if (Error E = Finite("init_mean", "mean"))
      return E;
    if (Error E = Finite("init_stddev", "stddev"))
      return E;
    if (Param("init_stddev") < 0)
      return C.error("initializer '" + Init +
                     "': stddev must not be negative, got " +
                     formatNumber(Param("init_stddev")));
  }
  if (Init == "uniform") {
    if (Error E = Finite("init_min", "minval"))
      return E;
    if (Error E = Finite("init_max", "maxval"))
      return E;
    if (Param("init_min") > Param("init_max")) {
      // A field not written holds its default, which the message names as
      // such (a value that equals the default may also have been written).
      std::string Defaults;
      if (Param("init_min") == DefaultUniformMin)
        Defaults = "; minval defaults to " + formatNumber(DefaultUniformMin);
      else if (Param("init_max") == DefaultUniformMax)
        Defaults = "; maxval defaults to " + formatNumber(DefaultUniformMax);
      return C.error("initializer 'uniform': minval " +
                     formatNumber(Param("init_min")) +
                     " is greater than maxval " +
                     formatNumber(Param("init_max")) + Defaults);
    }
  }
  C.setOutput(0, T, S);
  return Error::success();
}

static Error shapeSameAsInput0(InferContext &C) {
  C.setOutput(0, C.input(0).Elt, C.input(0).Dims);
  return Error::success();
}

static Error shapeFloatUnary(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  return shapeSameAsInput0(C);
}

static Error shapeNone(InferContext &C) { return Error::success(); }

static Error shapeBatchSlice(InferContext &C) {
  int64_t Count = C.attrs().getInt("count");
  int64_t Index = C.attrs().getInt("index");
  if (Count < 1 || Index < 0 || Index >= Count)
    return C.error("slice " + Twine(Index) + " of " + Twine(Count) +
                   " is out of range");
  Shape S = C.input(0).Dims;
  if (S.rank() == 0)
    return C.error("cannot slice a scalar");
  if (S[0] >= 0) {
    if (S[0] % Count)
      return C.error("batch of " + Twine(S[0]) + " cannot be split into " +
                     Twine(Count) + " equal slices");
    S[0] /= Count;
  }
  C.setOutput(0, C.input(0).Elt, S);
  return Error::success();
}

/// Concat: inputs of one element type and rank, equal but along the
/// axis, where the output has the sum of their sizes.
static Error shapeConcat(InferContext &C) {
  const Shape &First = C.input(0).Dims;
  int64_t Rank = First.rank(), Axis = C.attrs().getInt("axis");
  if (Rank == 0)
    return C.error("cannot concatenate scalars");
  if (Axis < -Rank || Axis >= Rank)
    return C.error("axis " + Twine(Axis) + " is out of range for rank " +
                   Twine(Rank));
  unsigned A = unsigned(Axis < 0 ? Axis + Rank : Axis);
  Shape Out = First;
  for (unsigned I = 1; I < C.numInputs(); ++I) {
    if (Error E = expectSameType(C, 0, I))
      return E;
    const Shape &S = C.input(I).Dims;
    bool Ok = S.rank() == First.rank();
    for (unsigned D = 0; Ok && D < S.rank(); ++D)
      Ok = D == A || dimsCompatible(Out[D], S[D]);
    if (!Ok)
      return C.error("input " + Twine(I) + " " + S.str() +
                     " does not match input 0 " + First.str() +
                     " but along axis " + Twine(Axis));
    for (unsigned D = 0; D < S.rank(); ++D)
      Out[D] = D != A                   ? mergeDim(Out[D], S[D])
               : Out[D] < 0 || S[D] < 0 ? -1
                                        : Out[D] + S[D];
  }
  C.setOutput(0, C.input(0).Elt, Out);
  return Error::success();
}

/// Slice: `begin` and `size` per dimension, a size of -1 taking the rest.
static Error shapeSlice(InferContext &C) {
  const Shape &In = C.input(0).Dims;
  std::vector<int64_t> Begin = C.attrs().getInts("begin"),
                       Size = C.attrs().getInts("size");
  if (Begin.size() != In.rank() || Size.size() != In.rank())
    return C.error("'begin' " + writtenDims(Begin) + " and 'size' " +
                   writtenDims(Size) +
                   " must have one value per dimension of " + In.str());
  Shape Out = In;
  for (unsigned D = 0; D < In.rank(); ++D) {
    if (Size[D] < -1)
      return C.error("size " + Twine(Size[D]) + " in dimension " + Twine(D) +
                     " is invalid (-1 takes the rest)");
    if (Begin[D] < 0 || (In[D] >= 0 && Begin[D] > In[D]) ||
        (In[D] >= 0 && Size[D] >= 0 && Size[D] > In[D] - Begin[D]))
      return C.error("slice of " + In.str() + " at " + writtenDims(Begin) +
                     " of size " + writtenDims(Size) +
                     " is out of bounds in dimension " + Twine(D));
    Out[D] = Size[D] >= 0 ? Size[D] : In[D] < 0 ? -1 : In[D] - Begin[D];
  }
  C.setOutput(0, C.input(0).Elt, Out);
  return Error::success();
}

/// Pad: `paddings`, zeros before and after each dimension in turn.
static Error shapePad(InferContext &C) {
  const Shape &In = C.input(0).Dims;
  std::vector<int64_t> P = C.attrs().getInts("paddings");
  if (P.size() != 2 * size_t(In.rank()))
    return C.error("'paddings' " + writtenDims(P) +
                   " must have two values (before, after) per dimension of " +
                   In.str());
  Shape Out = In;
  for (unsigned D = 0; D < In.rank(); ++D) {
    if (P[2 * D] < 0 || P[2 * D + 1] < 0 ||
        P[2 * D] > Shape::MaxTensorElements ||
        P[2 * D + 1] > Shape::MaxTensorElements)
      return C.error("paddings " + writtenDims(P) + " of dimension " +
                     Twine(D) + " must be between 0 and 2^40");
    Out[D] = In[D] < 0 ? -1 : In[D] + P[2 * D] + P[2 * D + 1];
  }
  C.setOutput(0, C.input(0).Elt, Out);
  return Error::success();
}

static Error shapeReshape(InferContext &C) {
  std::vector<int64_t> Target = C.attrs().getInts("shape");
  const Shape &In = C.input(0).Dims;
  int Infer = -1;
  int64_t Known = 1;
  for (unsigned I = 0; I < Target.size(); ++I) {
    if (Target[I] == -1) {
      if (Infer >= 0)
        return C.error("reshape target " + Shape(Target).str() +
                       " has more than one -1");
      Infer = I;
      continue;
    }
    if (Target[I] < 0)
      return C.error("reshape target dimension " + Twine(Target[I]) +
                     " is invalid");
    if (MulOverflow(Known, Target[I], Known))
      return C.error("reshape target " + Shape(Target).str() +
                     " is too large: a tensor may have at most 2^40 "
                     "elements");
  }
  Shape Out(Target);
  int64_t N = In.numElements();
  if (Infer >= 0) {
    if (N >= 0) {
      if (Known == 0 || N % Known)
        return C.error("cannot reshape " + In.str() + " to " +
                       Shape(Target).str());
      Out[Infer] = N / Known;
    } else {
      // The batch is unknown. With the -1 first (it takes the batch), an
      // example's values must fill whole rows of the rest, or rows whole
      // examples; with a fixed first dimension (TensorFlow's
      // reshape(x, [batch, -1])) some batch always divides, and the count
      // is checked once the batch is known.
      int64_t Rest = 1;
      for (unsigned I = 1; I < In.rank(); ++I)
        Rest *= In[I];
      if (!Known || (Infer == 0 && In.rank() && In[0] < 0 && Rest >= 0 &&
                     Rest % Known && Known % Rest))
        return C.error("cannot reshape " + In.str() + " to " +
                       Shape(Target).str());
      Out[Infer] = -1;
    }
  } else if (N >= 0 && N != Known) {
    return C.error("cannot reshape " + In.str() + " (" + Twine(N) +
                   " elements) to " + Shape(Target).str() + " (" +
                   Twine(Known) + " elements)");
  }
  C.setOutput(0, C.input(0).Elt, Out);
  return Error::success();
}

static Error shapeCast(InferContext &C) {
  C.setOutput(0, C.attrs().getType("dtype"), C.input(0).Dims);
  return Error::success();
}

static Error shapeMatMul(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (Error E = expectRank(C, 0, 2))
    return E;
  if (Error E = expectRank(C, 1, 2))
    return E;
  bool TA = C.attrs().getBool("transpose_a"),
       TB = C.attrs().getBool("transpose_b");
  const Shape &A = C.input(0).Dims, &B = C.input(1).Dims;
  int64_t M = TA ? A[1] : A[0], KA = TA ? A[0] : A[1];
  int64_t KB = TB ? B[1] : B[0], N = TB ? B[0] : B[1];
  if (!dimsCompatible(KA, KB))
    return C.error("inner dimensions do not match: " + A.str() +
                   (TA ? "^T" : "") + " x " + B.str() + (TB ? "^T" : ""));
  C.setOutput(0, C.input(0).Elt, Shape{M, N});
  return Error::success();
}

static Error shapeBiasAdd(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (Error E = expectRank(C, 1, 1))
    return E;
  const Shape &X = C.input(0).Dims;
  if (X.rank() < 1)
    return C.error("BiasAdd input must have rank >= 1");
  if (!dimsCompatible(X[X.rank() - 1], C.input(1).Dims[0]))
    return C.error("bias of shape " + C.input(1).Dims.str() +
                   " does not match the last dimension of " + X.str());
  return shapeSameAsInput0(C);
}

static Error shapeBinary(InferContext &C) {
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (C.input(0).Elt == DType::Bool)
    return C.error("arithmetic on bool tensors");
  auto S = broadcastShapes(C, C.input(0).Dims, C.input(1).Dims);
  if (!S)
    return S.takeError();
  C.setOutput(0, C.input(0).Elt, *S);
  return Error::success();
}

static Error shapeAddN(InferContext &C) {
  Shape S = C.input(0).Dims;
  for (unsigned I = 1; I < C.numInputs(); ++I) {
    if (Error E = expectSameType(C, 0, I))
      return E;
    if (Error E = expectSameShape(C, 0, I))
      return E;
    for (unsigned D = 0; D < S.rank(); ++D)
      S[D] = mergeDim(S[D], C.input(I).Dims[D]);
  }
  C.setOutput(0, C.input(0).Elt, S);
  return Error::success();
}

static Error shapeSoftmax(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (C.input(0).Dims.rank() < 1)
    return C.error("Softmax input must have rank >= 1");
  return shapeSameAsInput0(C);
}

static Error shapeSSCE(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectRank(C, 0, 2))
    return E;
  if (Error E = expectRank(C, 1, 1))
    return E;
  if (!isInteger(C.input(1).Elt))
    return C.error("labels must be int32 or int64, got " +
                   dtypeName(C.input(1).Elt));
  const Shape &L = C.input(0).Dims;
  if (!dimsCompatible(L[0], C.input(1).Dims[0]))
    return C.error("logits " + L.str() + " and labels " +
                   C.input(1).Dims.str() + " have different batch sizes");
  int64_t N = mergeDim(L[0], C.input(1).Dims[0]);
  C.setOutput(0, C.input(0).Elt, Shape{N});
  C.setOutput(1, C.input(0).Elt, Shape{N, L[1]});
  return Error::success();
}

/// SoftmaxCrossEntropy: logits and labels of one float type and shape
/// [batch, classes]; the loss per example and the backprop.
static Error shapeSCE(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectRank(C, 0, 2))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (Error E = expectSameShape(C, 0, 1))
    return E;
  const Shape &L = C.input(0).Dims, &Y = C.input(1).Dims;
  Shape S{mergeDim(L[0], Y[0]), mergeDim(L[1], Y[1])};
  C.setOutput(0, C.input(0).Elt, Shape{S[0]});
  C.setOutput(1, C.input(0).Elt, S);
  return Error::success();
}

/// OneHot: integer indices, a last dimension of `depth` added.
static Error shapeOneHot(InferContext &C) {
  if (!isInteger(C.input(0).Elt))
    return C.error("indices must be int32 or int64, got " +
                   dtypeName(C.input(0).Elt));
  int64_t Depth = C.attrs().getInt("depth");
  if (Depth < 1 || Depth > Shape::MaxTensorElements)
    return C.error("depth must be between 1 and 2^40, got " + Twine(Depth));
  DType T = C.attrs().getType("dtype");
  if (!isFloat(T))
    return C.error("dtype must be float32 or float64, got " + dtypeName(T));
  Shape S = C.input(0).Dims;
  S.dims().push_back(Depth);
  C.setOutput(0, T, S);
  return Error::success();
}

static Error shapeLogLoss(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (Error E = expectSameShape(C, 0, 1))
    return E;
  return shapeSameAsInput0(C);
}

static Error shapeL2Loss(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  C.setOutput(0, C.input(0).Elt, Shape());
  return Error::success();
}

static Error shapeReduce(InferContext &C) {
  if (C.input(0).Elt == DType::Bool)
    return C.error("cannot reduce a bool tensor");
  auto Axes =
      reductionAxes(C, C.attrs().getInts("axes"), C.input(0).Dims.rank());
  if (!Axes)
    return Axes.takeError();
  C.setOutput(
      0, C.input(0).Elt,
      reducedShape(C.input(0).Dims, *Axes, C.attrs().getBool("keep_dims")));
  return Error::success();
}

static Error shapeAccuracy(InferContext &C) {
  const Shape &P = C.input(0).Dims, &L = C.input(1).Dims;
  if (P.rank() < 1)
    return C.error("predictions must have a batch dimension");
  bool Sparse = P.rank() == 2 && L.rank() == 1 && isInteger(C.input(1).Elt);
  if (!Sparse) {
    // Binary predictions compared with 0/1 labels of the same shape.
    if (Error E = expectSameShape(C, 0, 1))
      return E;
  } else if (!dimsCompatible(P[0], L[0])) {
    return C.error("predictions " + P.str() + " and labels " + L.str() +
                   " have different batch sizes");
  }
  C.setOutput(0, DType::Float32, Shape{mergeDim(P[0], L[0])});
  return Error::success();
}

static Error checkWindowAttrs(InferContext &C, StringRef Name,
                              const std::vector<int64_t> &V) {
  if (V.size() != 2 || V[0] < 1 || V[1] < 1)
    return C.error("'" + Name + "' must be two positive integers, got " +
                   writtenDims(V));
  return Error::success();
}

static Error shapeConv2D(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  if (Error E = expectRank(C, 0, 4))
    return E;
  if (Error E = expectRank(C, 1, 4))
    return E;
  auto Strides = C.attrs().getInts("strides");
  if (Error E = checkWindowAttrs(C, "strides", Strides))
    return E;
  const Shape &X = C.input(0).Dims, &F = C.input(1).Dims;
  if (!dimsCompatible(X[3], F[2]))
    return C.error("input channels " + Twine(X[3]) +
                   " do not match the filter's " + Twine(F[2]) + " (filter " +
                   F.str() + ")");
  StringRef Pad = C.attrs().getString("padding");
  if (Error E = checkWindowFits(C, X, F[0], F[1], Pad, /*Pool=*/false))
    return E;
  C.setOutput(0, C.input(0).Elt,
              Shape{X[0], windowOut(X[1], F[0], Strides[0], Pad),
                    windowOut(X[2], F[1], Strides[1], Pad), F[3]});
  return Error::success();
}

static Error shapeMaxPool(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectRank(C, 0, 4))
    return E;
  auto K = C.attrs().getInts("ksize"), S = C.attrs().getInts("strides");
  if (Error E = checkWindowAttrs(C, "ksize", K))
    return E;
  if (Error E = checkWindowAttrs(C, "strides", S))
    return E;
  const Shape &X = C.input(0).Dims;
  StringRef Pad = C.attrs().getString("padding");
  if (Error E = checkWindowFits(C, X, K[0], K[1], Pad, /*Pool=*/true))
    return E;
  C.setOutput(0, C.input(0).Elt,
              Shape{X[0], windowOut(X[1], K[0], S[0], Pad),
                    windowOut(X[2], K[1], S[1], Pad), X[3]});
  return Error::success();
}

static unsigned batchNormInputs(const AttrDict &A) {
  return A.getBool("scale") ? 3 : 2;
}

static Error checkChannelVector(InferContext &C, unsigned I, int64_t Channels) {
  if (Error E = expectSameType(C, 0, I))
    return E;
  const Shape &S = C.input(I).Dims;
  if (S.rank() != 1 || !dimsCompatible(S[0], Channels))
    return C.error("input " + Twine(I) + " must have shape [" +
                   Twine(Channels) + "], got " + S.str());
  return Error::success();
}

static Error shapeBatchNorm(InferContext &C) {
  if (C.numInputs() != batchNormInputs(C.attrs()))
    return C.error("BatchNorm with scale=" +
                   Twine(C.attrs().getBool("scale") ? "true" : "false") +
                   " takes " + Twine(batchNormInputs(C.attrs())) +
                   " inputs (x, beta" +
                   (C.attrs().getBool("scale") ? ", gamma" : "") + "), got " +
                   Twine(C.numInputs()));
  if (Error E = expectFloat(C, 0))
    return E;
  const Shape &X = C.input(0).Dims;
  if (X.rank() < 2)
    return C.error("BatchNorm input must have rank >= 2, got " + X.str());
  double Eps = C.attrs().getFloat("epsilon");
  if (!(Eps >= 0))
    return C.error("batch norm epsilon must be at least 0, got " +
                   formatNumber(Eps));
  int64_t Ch = X[X.rank() - 1];
  for (unsigned I = 1; I < C.numInputs(); ++I)
    if (Error E = checkChannelVector(C, I, Ch))
      return E;
  C.setOutput(0, C.input(0).Elt, X);
  C.setOutput(1, C.input(0).Elt, Shape{Ch});
  C.setOutput(2, C.input(0).Elt, Shape{Ch});
  return Error::success();
}

static Error shapeBatchNormInference(InferContext &C) {
  bool Scale = C.attrs().getBool("scale");
  unsigned Want = Scale ? 5 : 4;
  if (C.numInputs() != Want)
    return C.error("BatchNormInference with scale=" +
                   Twine(Scale ? "true" : "false") + " takes " + Twine(Want) +
                   " inputs (x, beta" + (Scale ? ", gamma" : "") +
                   ", mean, variance), got " + Twine(C.numInputs()));
  if (Error E = expectFloat(C, 0))
    return E;
  const Shape &X = C.input(0).Dims;
  if (X.rank() < 2)
    return C.error("BatchNormInference input must have rank >= 2, got " +
                   X.str());
  for (unsigned I = 1; I < C.numInputs(); ++I)
    if (Error E = checkChannelVector(C, I, X[X.rank() - 1]))
      return E;
  C.setOutput(0, C.input(0).Elt, X);
  return Error::success();
}

static Error shapeDropout(InferContext &C) {
  if (Error E = expectFloat(C, 0))
    return E;
  double Rate = C.attrs().getFloat("rate");
  if (!(Rate >= 0 && Rate < 1))
    return C.error("dropout rate must be in [0, 1), got " + formatNumber(Rate));
  C.setOutput(0, C.input(0).Elt, C.input(0).Dims);
  C.setOutput(1, C.input(0).Elt, C.input(0).Dims);
  return Error::success();
}

/// Gradient helpers whose output has the shape of input \p I.
template <unsigned I> static Error shapeLikeInput(InferContext &C) {
  for (unsigned J = 0; J < C.numInputs(); ++J)
    if (C.input(J).Elt != C.input(0).Elt && isFloat(C.input(J).Elt))
      return expectSameType(C, 0, J);
  C.setOutput(0, C.input(I).Elt, C.input(I).Dims);
  return Error::success();
}

static Error shapeBiasAddGrad(InferContext &C) {
  const Shape &S = C.input(0).Dims;
  if (S.rank() < 1)
    return C.error("BiasAddGrad input must have rank >= 1");
  C.setOutput(0, C.input(0).Elt, Shape{S[S.rank() - 1]});
  return Error::success();
}

static Error shapeFromShapeAttr(InferContext &C, StringRef Attr) {
  Shape S = C.attrs().getShape(Attr);
  C.setOutput(0, C.input(0).Elt, S);
  return Error::success();
}

static Error shapeSumToShape(InferContext &C) {
  Shape Target = C.attrs().getShape("shape");
  const Shape &In = C.input(0).Dims;
  if (Target.rank() > In.rank())
    return C.error("cannot sum " + In.str() + " down to " + Target.str());
  unsigned Off = In.rank() - Target.rank();
  for (unsigned I = 0; I < Target.rank(); ++I)
    if (Target[I] != 1 && !dimsCompatible(Target[I], In[I + Off]))
      return C.error("cannot sum " + In.str() + " down to " + Target.str());
  return shapeFromShapeAttr(C, "shape");
}

static Error shapeBroadcastGrad(InferContext &C) {
  Shape Target = C.attrs().getShape("shape");
  auto Axes = reductionAxes(C, C.attrs().getInts("axes"), Target.rank());
  if (!Axes)
    return Axes.takeError();
  Shape Expect = reducedShape(Target, *Axes, C.attrs().getBool("keep_dims"));
  const Shape &In = C.input(0).Dims;
  bool Ok = Expect.rank() == In.rank();
  for (unsigned I = 0; Ok && I < In.rank(); ++I)
    Ok = dimsCompatible(Expect[I], In[I]);
  if (!Ok)
    return C.error("gradient of shape " + In.str() +
                   " does not match the reduction of " + Target.str());
  return shapeFromShapeAttr(C, "shape");
}

static Error shapeConvBackpropInput(InferContext &C) {
  return shapeFromShapeAttr(C, "input_shape");
}

static Error shapeConvBackpropFilter(InferContext &C) {
  return shapeFromShapeAttr(C, "filter_shape");
}

static Error shapeBatchNormGrad(InferContext &C) {
  const Shape &X = C.input(1).Dims;
  int64_t Ch = X.rank() ? X[X.rank() - 1] : -1;
  C.setOutput(0, C.input(0).Elt, X);
  C.setOutput(1, C.input(0).Elt, Shape{Ch});
  C.setOutput(2, C.input(0).Elt, Shape{Ch});
  return Error::success();
}

static Error checkUpdatesVariable(InferContext &C) {
  Node *V = C.node().getInput(0).N;
  if (!V->getOp().isVariable())
    return C.error(C.node().getOpName() +
                   " must update a variable, but input 0 is '" + V->getName() +
                   "' (" + V->getOpName() + ")");
  return Error::success();
}

static Error shapeAssignMovingAverage(InferContext &C) {
  if (Error E = checkUpdatesVariable(C))
    return E;
  // average -= (1 - decay) * (average - value): a decay outside [0, 1]
  // moves the average away from the values.
  double Decay = C.attrs().getFloat("decay");
  if (!(Decay >= 0 && Decay <= 1))
    return C.error("decay must be between 0 and 1, got " + formatNumber(Decay));
  if (Error E = expectFloat(C, 0))
    return E;
  if (Error E = expectSameType(C, 0, 1))
    return E;
  return expectSameShape(C, 0, 1);
}

static Error shapeAssignAdd(InferContext &C) {
  if (Error E = checkUpdatesVariable(C))
    return E;
  if (C.input(0).Dims.rank() != 0)
    return C.error("AssignAdd updates a scalar variable, got " +
                   C.input(0).Dims.str());
  return Error::success();
}

/// Apply* ops: variable, slots..., gradient, step.
static Error shapeApply(InferContext &C) {
  if (Error E = checkUpdatesVariable(C))
    return E;
  StringRef Decay = C.attrs().getString("decay_type");
  if (Decay != "exponential" && Decay != "polynomial")
    return C.error("unknown decay_type '" + Decay +
                   "' (use exponential or polynomial)");
  if (Error E = expectFloat(C, 0))
    return E;
  unsigned NumIn = C.numInputs();
  for (unsigned I = 1; I + 1 < NumIn; ++I) {
    if (Error E = expectSameType(C, 0, I))
      return E;
    if (Error E = expectSameShape(C, 0, I))
      return E;
  }
  const TensorType &Step = C.input(NumIn - 1);
  if (Step.Elt != DType::Int64 || Step.Dims.rank() != 0)
    return C.error("the step input must be an int64 scalar, got " + Step.str());
  for (unsigned I = 1; I + 2 < NumIn; ++I)
    if (!C.node().getInput(I).N->getOp().isVariable())
      return C.error("optimizer slot input " + Twine(I) +
                     " must be a variable");
  return Error::success();
}

static Error shapeSummary(InferContext &C) {
  if (C.attrs().getString("tag").empty())
    return C.error("summary needs a non-empty 'tag'");
  return Error::success();
}

static Error shapeScalarSummary(InferContext &C) {
  if (C.input(0).Dims.numElements() != 1)
    return C.error("ScalarSummary needs a scalar, got " +
                   C.input(0).Dims.str());
  return shapeSummary(C);
}

static Error shapeAllReduce(InferContext &C) {
  int64_t Replicas = C.attrs().getInt("replicas", 1);
  if (Replicas < 1)
    return C.error("AllReduce replicas must be at least 1, got " +
                   Twine(Replicas));
  for (unsigned I = 0; I < C.numInputs(); ++I) {
    if (!isFloat(C.input(I).Elt))
      return C.error("AllReduce sums float tensors only");
    C.setOutput(I, C.input(I).Elt, C.input(I).Dims);
  }
  return Error::success();
}

static Error shapeRecv(InferContext &C) {
  C.setOutput(0, C.attrs().getType("dtype"), C.attrs().getShape("shape"));
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

static const Shape &shapeOf(TensorRef T) { return T.type().Dims; }

static AttrDict attrs(std::initializer_list<std::pair<StringRef, Attr>> L) {
  SmallVector<std::pair<StringRef, Attr>, 4> Pairs(L.begin(), L.end());
  return AttrDict(Pairs);
}

static Error gradIdentity(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                          MutableArrayRef<TensorRef> DX) {
  DX[0] = DY[0];
  return Error::success();
}

static Error gradReshape(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                         MutableArrayRef<TensorRef> DX) {
  DX[0] = B.reshape(DY[0], shapeOf(F.getInput(0)));
  return Error::success();
}

/// The slices of dy along the axis, each input's part (TF's ConcatOffset
/// and Slice).
static Error gradConcat(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  // One input: dy is its gradient, no slice to take.
  if (F.getNumInputs() == 1) {
    DX[0] = DY[0];
    return Error::success();
  }
  int64_t Rank = shapeOf(F.getInput(0)).rank();
  int64_t Axis = F.attrs().getInt("axis");
  unsigned A = unsigned(Axis < 0 ? Axis + Rank : Axis);
  int64_t Offset = 0;
  for (unsigned I = 0; I < F.getNumInputs(); ++I) {
    // build-gradients runs once replicate-clones fixed the batch: every
    // size is known.
    int64_t Len = shapeOf(F.getInput(I))[A];
    assert(Len >= 0 && "a Concat input of unknown size in build-gradients");
    if (B.needs(I)) {
      std::vector<int64_t> Begin(Rank, 0), Size(Rank, -1);
      Begin[A] = Offset;
      Size[A] = Len;
      DX[I] = B.out(OpKind::Slice, {DY[0]},
                    attrs({{"begin", Begin}, {"size", Size}}));
    }
    Offset += Len;
  }
  return Error::success();
}

/// dy padded with zeros to the input's shape.
static Error gradSlice(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                       MutableArrayRef<TensorRef> DX) {
  const Shape &In = shapeOf(F.getInput(0)), &Out = shapeOf(TensorRef(&F, 0));
  std::vector<int64_t> Begin = F.attrs().getInts("begin"), P;
  assert(In.isFullyDefined() && Out.isFullyDefined() &&
         "a Slice of unknown shape in build-gradients");
  // The whole tensor: dy is its gradient.
  if (In == Out) {
    DX[0] = DY[0];
    return Error::success();
  }
  for (unsigned D = 0; D < In.rank(); ++D) {
    P.push_back(Begin[D]);
    P.push_back(In[D] - Begin[D] - Out[D]);
  }
  DX[0] = B.out(OpKind::Pad, {DY[0]}, attrs({{"paddings", P}}));
  return Error::success();
}

/// The part of dy that is not padding.
static Error gradPad(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  const Shape &In = shapeOf(F.getInput(0));
  std::vector<int64_t> P = F.attrs().getInts("paddings"), Begin, Size;
  assert(In.isFullyDefined() && "a Pad of unknown shape in build-gradients");
  // No padding: dy is its gradient.
  if (llvm::all_of(P, [](int64_t V) { return V == 0; })) {
    DX[0] = DY[0];
    return Error::success();
  }
  for (unsigned D = 0; D < In.rank(); ++D) {
    Begin.push_back(P[2 * D]);
    Size.push_back(In[D]);
  }
  DX[0] =
      B.out(OpKind::Slice, {DY[0]}, attrs({{"begin", Begin}, {"size", Size}}));
  return Error::success();
}

static Error gradCast(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                      MutableArrayRef<TensorRef> DX) {
  DType From = F.getInput(0).type().Elt;
  if (isFloat(From))
    DX[0] = B.out(OpKind::Cast, {DY[0]}, attrs({{"dtype", From}}));
  return Error::success();
}

static Error gradMatMul(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  TensorRef A = F.getInput(0), W = F.getInput(1), G = DY[0];
  bool TA = F.attrs().getBool("transpose_a"),
       TB = F.attrs().getBool("transpose_b");
  auto MM = [&](TensorRef X, TensorRef Y, bool TX, bool TY) {
    return B.out(OpKind::MatMul, {X, Y},
                 attrs({{"transpose_a", TX}, {"transpose_b", TY}}));
  };
  bool NA = B.needs(0), NB = B.needs(1);
  if (!TA && !TB) {
    DX[0] = NA ? MM(G, W, false, true) : TensorRef();
    DX[1] = NB ? MM(A, G, true, false) : TensorRef();
  } else if (!TA && TB) {
    DX[0] = NA ? MM(G, W, false, false) : TensorRef();
    DX[1] = NB ? MM(G, A, true, false) : TensorRef();
  } else if (TA && !TB) {
    DX[0] = NA ? MM(W, G, false, true) : TensorRef();
    DX[1] = NB ? MM(A, G, false, false) : TensorRef();
  } else {
    DX[0] = NA ? MM(W, G, true, true) : TensorRef();
    DX[1] = NB ? MM(G, A, true, true) : TensorRef();
  }
  return Error::success();
}

static Error gradBiasAdd(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                         MutableArrayRef<TensorRef> DX) {
  DX[0] = DY[0];
  if (B.needs(1))
    DX[1] = B.out(OpKind::BiasAddGrad, {DY[0]});
  return Error::success();
}

static Error gradAdd(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  if (B.needs(0))
    DX[0] = B.sumToShape(DY[0], shapeOf(F.getInput(0)));
  if (B.needs(1))
    DX[1] = B.sumToShape(DY[0], shapeOf(F.getInput(1)));
  return Error::success();
}

static Error gradSub(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  if (B.needs(0))
    DX[0] = B.sumToShape(DY[0], shapeOf(F.getInput(0)));
  if (B.needs(1))
    DX[1] = B.sumToShape(B.out(OpKind::Neg, {DY[0]}), shapeOf(F.getInput(1)));
  return Error::success();
}

static Error gradMul(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  TensorRef X = F.getInput(0), Y = F.getInput(1);
  if (B.needs(0))
    DX[0] = B.sumToShape(B.out(OpKind::Mul, {DY[0], Y}), shapeOf(X));
  if (B.needs(1))
    DX[1] = B.sumToShape(B.out(OpKind::Mul, {DY[0], X}), shapeOf(Y));
  return Error::success();
}

/// TF's _MaximumMinimumGrad: dy goes to x where x >= y (Maximum) or
/// x <= y (Minimum), to y elsewhere, a NaN input included (the comparison
/// is false). The mask is 1 or 0 and ReluGrad(dy, m) selects (dy where
/// m > 0, else 0, whatever dy is), so an infinite or NaN dy reaches one
/// side only, as TF's `where`.
template <bool IsMaximum>
static Error gradMaxMin(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  TensorRef X = F.getInput(0), Y = F.getInput(1);
  TensorRef Mask = IsMaximum ? B.out(OpKind::GreaterEqualMask, {X, Y})
                             : B.out(OpKind::GreaterEqualMask, {Y, X});
  if (B.needs(0))
    DX[0] = B.sumToShape(B.out(OpKind::ReluGrad, {DY[0], Mask}), shapeOf(X));
  if (B.needs(1)) {
    TensorRef ToY = B.out(OpKind::Sub, {B.constant(1.0, X.type().Elt), Mask});
    DX[1] = B.sumToShape(B.out(OpKind::ReluGrad, {DY[0], ToY}), shapeOf(Y));
  }
  return Error::success();
}

static Error gradDiv(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  TensorRef X = F.getInput(0), Y = F.getInput(1), Out(&F, 0);
  if (B.needs(0))
    DX[0] = B.sumToShape(B.out(OpKind::Div, {DY[0], Y}), shapeOf(X));
  if (!B.needs(1))
    return Error::success();
  // d(x/y)/dy = -(x/y)/y.
  TensorRef T = B.out(OpKind::Mul, {DY[0], B.out(OpKind::Div, {Out, Y})});
  DX[1] = B.sumToShape(B.out(OpKind::Neg, {T}), shapeOf(Y));
  return Error::success();
}

static Error gradAddN(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                      MutableArrayRef<TensorRef> DX) {
  for (TensorRef &D : DX)
    D = DY[0];
  return Error::success();
}

static Error gradNeg(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  DX[0] = B.out(OpKind::Neg, {DY[0]});
  return Error::success();
}

static Error gradSquare(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  TensorRef X = F.getInput(0);
  TensorRef Two = B.constant(2.0, X.type().Elt);
  DX[0] = B.out(OpKind::Mul, {DY[0], B.out(OpKind::Mul, {X, Two})});
  return Error::success();
}

/// d sqrt(x) = dy / (2 sqrt(x)), from the forward output as TensorFlow's
/// SqrtGrad: dy * 0.5 / y.
static Error gradSqrt(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                      MutableArrayRef<TensorRef> DX) {
  TensorRef Y(&F, 0);
  TensorRef Half = B.constant(0.5, Y.type().Elt);
  DX[0] = B.out(OpKind::Div, {B.out(OpKind::Mul, {DY[0], Half}), Y});
  return Error::success();
}

/// d exp(x) = dy exp(x), from the forward output (TF's _ExpGrad).
static Error gradExp(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  DX[0] = B.out(OpKind::Mul, {DY[0], TensorRef(&F, 0)});
  return Error::success();
}

/// d log(x) = dy / x (TF's _LogGrad: dy * reciprocal(x)).
static Error gradLog(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  DX[0] = B.out(OpKind::Div, {DY[0], F.getInput(0)});
  return Error::success();
}

/// Relu/Sigmoid/Tanh/Softmax: the rule reads the forward output.
template <OpKind GradOp, bool DYFirst>
static Error gradFromOutput(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                            MutableArrayRef<TensorRef> DX) {
  TensorRef Y(&F, 0);
  DX[0] = DYFirst ? B.out(GradOp, {DY[0], Y}) : B.out(GradOp, {Y, DY[0]});
  return Error::success();
}

static Error gradSSCE(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                      MutableArrayRef<TensorRef> DX) {
  if (DY[1])
    return F.error("no gradient is defined for output 1 (the backprop) of "
                   "SparseSoftmaxCrossEntropy");
  const Shape &L = shapeOf(F.getInput(0));
  TensorRef G = B.reshape(DY[0], Shape{L[0], 1});
  DX[0] = B.out(OpKind::Mul, {G, TensorRef(&F, 1)});
  return Error::success();
}

/// The logits' gradient, dy times the backprop (softmax - labels). The
/// labels get none, as in tf.losses.softmax_cross_entropy (which stops
/// their gradient).
static Error gradSCE(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                     MutableArrayRef<TensorRef> DX) {
  if (DY[1])
    return F.error("no gradient is defined for output 1 (the backprop) of "
                   "SoftmaxCrossEntropy");
  if (!B.needs(0))
    return Error::success();
  const Shape &L = shapeOf(F.getInput(0));
  TensorRef G = B.reshape(DY[0], Shape{L[0], 1});
  DX[0] = B.out(OpKind::Mul, {G, TensorRef(&F, 1)});
  return Error::success();
}

static Error gradLogLoss(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                         MutableArrayRef<TensorRef> DX) {
  TensorRef P = F.getInput(0);
  const double Eps = F.attrs().getFloat("epsilon");
  if (B.needs(0))
    DX[0] = B.out(OpKind::LogLossGrad, {P, F.getInput(1), DY[0]},
                  attrs({{"epsilon", Eps}}));
  // The labels' (as TensorFlow's): dy (log(1 - p + eps) - log(p + eps)),
  // which is dy (LogLoss(p, 1) - LogLoss(p, 0)).
  if (B.needs(1)) {
    const TensorType &T = P.type();
    TensorRef AtOne =
        B.out(OpKind::LogLoss, {P, B.constant(1.0, T.Elt, T.Dims)},
              attrs({{"epsilon", Eps}}));
    TensorRef AtZero =
        B.out(OpKind::LogLoss, {P, B.constant(0.0, T.Elt, T.Dims)},
              attrs({{"epsilon", Eps}}));
    DX[1] = B.out(OpKind::Mul, {DY[0], B.out(OpKind::Sub, {AtOne, AtZero})});
  }
  return Error::success();
}

static Error gradL2Loss(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  DX[0] = B.out(OpKind::Mul, {F.getInput(0), DY[0]});
  return Error::success();
}

template <bool IsMean>
static Error gradReduce(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  const Shape &In = shapeOf(F.getInput(0));
  double Scale = 1.0;
  if (IsMean) {
    const Shape &Out = shapeOf(TensorRef(&F, 0));
    int64_t NIn = In.numElements(), NOut = Out.numElements();
    if (NIn < 0 || NOut < 0)
      return F.error("gradient of Mean needs a fully known input shape, got " +
                     In.str());
    Scale = NIn ? double(NOut) / double(NIn) : 0.0;
  }
  DX[0] = B.out(OpKind::BroadcastGrad, {DY[0]},
                attrs({{"shape", In},
                       {"axes", F.attrs().getInts("axes")},
                       {"keep_dims", F.attrs().getBool("keep_dims")},
                       {"scale", Scale}}));
  return Error::success();
}

static Error gradConv2D(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                        MutableArrayRef<TensorRef> DX) {
  TensorRef X = F.getInput(0), W = F.getInput(1);
  auto Common = [&](StringRef ShapeAttr, const Shape &S) {
    return attrs({{ShapeAttr, S},
                  {"strides", F.attrs().getInts("strides")},
                  {"padding", F.attrs().getString("padding")}});
  };
  if (B.needs(0))
    DX[0] = B.out(OpKind::Conv2DBackpropInput, {W, DY[0]},
                  Common("input_shape", shapeOf(X)));
  if (B.needs(1))
    DX[1] = B.out(OpKind::Conv2DBackpropFilter, {X, DY[0]},
                  Common("filter_shape", shapeOf(W)));
  return Error::success();
}

static Error gradMaxPool(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                         MutableArrayRef<TensorRef> DX) {
  DX[0] = B.out(OpKind::MaxPoolGrad, {F.getInput(0), TensorRef(&F, 0), DY[0]},
                attrs({{"ksize", F.attrs().getInts("ksize")},
                       {"strides", F.attrs().getInts("strides")},
                       {"padding", F.attrs().getString("padding")}}));
  return Error::success();
}

static Error gradBatchNorm(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                           MutableArrayRef<TensorRef> DX) {
  if (DY[1] || DY[2])
    return F.error("no gradient is defined for the batch mean and variance "
                   "outputs of BatchNorm");
  bool Scale = F.attrs().getBool("scale");
  SmallVector<TensorRef, 5> Ins = {DY[0], F.getInput(0), TensorRef(&F, 1),
                                   TensorRef(&F, 2)};
  if (Scale)
    Ins.push_back(F.getInput(2));
  Node *G = B.create(
      OpKind::BatchNormGrad, Ins,
      attrs({{"epsilon", F.attrs().getFloat("epsilon")}, {"scale", Scale}}));
  if (!G)
    return Error::success();
  DX[0] = TensorRef(G, 0);
  DX[1] = TensorRef(G, 1);
  if (Scale)
    DX[2] = TensorRef(G, 2);
  return Error::success();
}

static Error gradDropout(GradBuilder &B, Node &F, ArrayRef<TensorRef> DY,
                         MutableArrayRef<TensorRef> DX) {
  if (DY[1])
    return F.error("no gradient is defined for the mask output of Dropout");
  DX[0] = B.out(OpKind::Mul, {DY[0], TensorRef(&F, 1)});
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {
/// Fluent definition of one op.
class Def {
public:
  Def(std::vector<OpDef> &Ops, OpKind K) : D(Ops[unsigned(K)]) {
    static const char *const Names[] = {
#define MDPLAN_OP(NAME, SUMMARY) #NAME,
#include "mdplan/IR/Ops.def"
    };
    static const char *const Summaries[] = {
#define MDPLAN_OP(NAME, SUMMARY) SUMMARY,
#include "mdplan/IR/Ops.def"
    };
    D.Kind = K;
    D.Name = Names[unsigned(K)];
    D.Summary = Summaries[unsigned(K)];
  }
  Def &inputs(std::vector<StringRef> N) {
    D.InputNames = std::move(N);
    return *this;
  }
  Def &variadic(unsigned Min) {
    D.Variadic = true;
    D.MinInputs = Min;
    return *this;
  }
  Def &outputs(int N) {
    D.NumOutputs = N;
    return *this;
  }
  Def &outputsFn(unsigned (*F)(const AttrDict &, unsigned)) {
    D.NumOutputs = -1;
    D.NumOutputsFn = F;
    return *this;
  }
  /// A required attribute.
  Def &attr(StringRef Name, AttrKind K) {
    D.Attrs.push_back(AttrDef{Name, K, std::nullopt, {}, StringRef()});
    return *this;
  }
  /// An attribute with a default (and, for strings, the values allowed).
  /// Two overloads rather than an optional default argument: GCC 12 warns
  /// (-Wmaybe-uninitialized) about a defaulted std::optional<Attr>.
  Def &attr(StringRef Name, AttrKind K, Attr Default,
            std::vector<StringRef> Allowed = {}) {
    D.Attrs.push_back(
        AttrDef{Name, K, std::move(Default), std::move(Allowed), StringRef()});
    return *this;
  }
  Def &flags(unsigned F) {
    D.Flags |= F;
    return *this;
  }
  Def &shape(ShapeFn F) {
    D.Shape = F;
    return *this;
  }
  Def &grad(GradFn F) {
    D.Gradient = F;
    return *this;
  }

private:
  OpDef &D;
};
} // namespace

static const std::vector<StringRef> Paddings = {"SAME", "VALID"};
static const std::vector<StringRef> Initializers = {"zeros",
                                                    "ones",
                                                    "constant",
                                                    "normal",
                                                    "truncated_normal",
                                                    "uniform",
                                                    "glorot_uniform",
                                                    "glorot_normal",
                                                    "he_normal"};

static unsigned numOutputsLikeInputs(const AttrDict &, unsigned N) { return N; }

namespace mdplan {
void registerAllOps(std::vector<OpDef> &Ops) {
  using K = AttrKind;
  auto V = [](std::vector<int64_t> L) { return Attr(std::move(L)); };

  // Sources and plumbing.
  Def(Ops, OpKind::Input)
      .inputs({})
      .attr("dtype", K::Type, Attr(DType::Float32))
      .attr("shape", K::Shape, Attr(Shape()))
      .attr("feature", K::String, Attr(""))
      .attr("batch_size", K::Int, Attr(int64_t(-1)))
      .flags(OF_Input | OF_NoGradient)
      .shape(shapeInput);
  Def(Ops, OpKind::Const)
      .inputs({})
      .attr("dtype", K::Type, Attr(DType::Float32))
      .attr("shape", K::Shape, Attr(Shape()))
      .attr("value", K::FloatList, Attr(std::vector<double>{0.0}))
      .flags(OF_Constant | OF_NoGradient)
      .shape(shapeConst);
  Def(Ops, OpKind::Variable)
      .inputs({})
      .attr("dtype", K::Type, Attr(DType::Float32))
      .attr("shape", K::Shape, Attr(Shape()))
      .attr("initializer", K::String, Attr("glorot_uniform"), Initializers)
      .attr("init_value", K::Float, Attr(0.0))
      .attr("init_mean", K::Float, Attr(0.0))
      .attr("init_stddev", K::Float, Attr(1.0))
      .attr("init_min", K::Float, Attr(DefaultUniformMin))
      .attr("init_max", K::Float, Attr(DefaultUniformMax))
      .attr("seed", K::Int, Attr(int64_t(0)))
      .attr("trainable", K::Bool, Attr(true))
      .attr("mirror_of", K::String, Attr(""))
      .flags(OF_Variable | OF_Stateful)
      .shape(shapeVariable);
  Def(Ops, OpKind::Identity)
      .inputs({"x"})
      .shape(shapeSameAsInput0)
      .grad(gradIdentity);
  Def(Ops, OpKind::NoOp)
      .inputs({})
      .outputs(0)
      .flags(OF_NoGradient)
      .shape(shapeNone);
  Def(Ops, OpKind::BatchSlice)
      .inputs({"x"})
      .attr("index", K::Int)
      .attr("count", K::Int)
      .flags(OF_NoGradient | OF_Internal)
      .shape(shapeBatchSlice);
  Def(Ops, OpKind::Reshape)
      .inputs({"x"})
      .attr("shape", K::IntList)
      .shape(shapeReshape)
      .grad(gradReshape);
  Def(Ops, OpKind::Concat)
      .inputs({"values"})
      .variadic(1)
      .attr("axis", K::Int)
      .shape(shapeConcat)
      .grad(gradConcat);
  Def(Ops, OpKind::Slice)
      .inputs({"x"})
      .attr("begin", K::IntList)
      .attr("size", K::IntList)
      .shape(shapeSlice)
      .grad(gradSlice);
  Def(Ops, OpKind::Pad)
      .inputs({"x"})
      .attr("paddings", K::IntList)
      .shape(shapePad)
      .grad(gradPad);
  Def(Ops, OpKind::Cast)
      .inputs({"x"})
      .attr("dtype", K::Type)
      .shape(shapeCast)
      .grad(gradCast);

  // Dense layers and elementwise math.
  Def(Ops, OpKind::MatMul)
      .inputs({"a", "b"})
      .attr("transpose_a", K::Bool, Attr(false))
      .attr("transpose_b", K::Bool, Attr(false))
      .shape(shapeMatMul)
      .grad(gradMatMul);
  Def(Ops, OpKind::BiasAdd)
      .inputs({"x", "bias"})
      .shape(shapeBiasAdd)
      .grad(gradBiasAdd);
  Def(Ops, OpKind::Add).inputs({"x", "y"}).shape(shapeBinary).grad(gradAdd);
  Def(Ops, OpKind::Sub).inputs({"x", "y"}).shape(shapeBinary).grad(gradSub);
  Def(Ops, OpKind::Mul).inputs({"x", "y"}).shape(shapeBinary).grad(gradMul);
  Def(Ops, OpKind::Div).inputs({"x", "y"}).shape(shapeBinary).grad(gradDiv);
  Def(Ops, OpKind::Maximum)
      .inputs({"x", "y"})
      .shape(shapeBinary)
      .grad(gradMaxMin<true>);
  Def(Ops, OpKind::Minimum)
      .inputs({"x", "y"})
      .shape(shapeBinary)
      .grad(gradMaxMin<false>);
  Def(Ops, OpKind::AddN)
      .inputs({"x"})
      .variadic(1)
      .shape(shapeAddN)
      .grad(gradAddN);
  Def(Ops, OpKind::Neg).inputs({"x"}).shape(shapeSameAsInput0).grad(gradNeg);
  Def(Ops, OpKind::Square)
      .inputs({"x"})
      .shape(shapeSameAsInput0)
      .grad(gradSquare);
  Def(Ops, OpKind::Sqrt).inputs({"x"}).shape(shapeFloatUnary).grad(gradSqrt);
  Def(Ops, OpKind::Exp).inputs({"x"}).shape(shapeFloatUnary).grad(gradExp);
  Def(Ops, OpKind::Log).inputs({"x"}).shape(shapeFloatUnary).grad(gradLog);
  Def(Ops, OpKind::Relu)
      .inputs({"x"})
      .shape(shapeFloatUnary)
      .grad(gradFromOutput<OpKind::ReluGrad, true>);
  Def(Ops, OpKind::Sigmoid)
      .inputs({"x"})
      .shape(shapeFloatUnary)
      .grad(gradFromOutput<OpKind::SigmoidGrad, false>);
  Def(Ops, OpKind::Tanh)
      .inputs({"x"})
      .shape(shapeFloatUnary)
      .grad(gradFromOutput<OpKind::TanhGrad, false>);
  Def(Ops, OpKind::Softmax)
      .inputs({"logits"})
      .shape(shapeSoftmax)
      .grad(gradFromOutput<OpKind::SoftmaxGrad, false>);

  // Losses and reductions.
  Def(Ops, OpKind::SparseSoftmaxCrossEntropy)
      .inputs({"logits", "labels"})
      .outputs(2)
      .shape(shapeSSCE)
      .grad(gradSSCE);
  Def(Ops, OpKind::SoftmaxCrossEntropy)
      .inputs({"logits", "labels"})
      .outputs(2)
      .shape(shapeSCE)
      .grad(gradSCE);
  Def(Ops, OpKind::OneHot)
      .inputs({"indices"})
      .attr("depth", K::Int)
      .attr("on_value", K::Float, Attr(1.0))
      .attr("off_value", K::Float, Attr(0.0))
      .attr("dtype", K::Type, Attr(DType::Float32))
      .flags(OF_NoGradient)
      .shape(shapeOneHot);
  Def(Ops, OpKind::LogLoss)
      .inputs({"predictions", "labels"})
      .attr("epsilon", K::Float, Attr(1e-7))
      .shape(shapeLogLoss)
      .grad(gradLogLoss);
  Def(Ops, OpKind::L2Loss).inputs({"x"}).shape(shapeL2Loss).grad(gradL2Loss);
  Def(Ops, OpKind::Mean)
      .inputs({"x"})
      .attr("axes", K::IntList, V({}))
      .attr("keep_dims", K::Bool, Attr(false))
      .shape(shapeReduce)
      .grad(gradReduce<true>);
  Def(Ops, OpKind::Sum)
      .inputs({"x"})
      .attr("axes", K::IntList, V({}))
      .attr("keep_dims", K::Bool, Attr(false))
      .shape(shapeReduce)
      .grad(gradReduce<false>);
  Def(Ops, OpKind::Accuracy)
      .inputs({"predictions", "labels"})
      .flags(OF_NoGradient)
      .shape(shapeAccuracy);

  // Convolutional layers.
  Def(Ops, OpKind::Conv2D)
      .inputs({"input", "filter"})
      .attr("strides", K::IntList, V({1, 1}))
      .attr("padding", K::String, Attr("SAME"), Paddings)
      .shape(shapeConv2D)
      .grad(gradConv2D);
  Def(Ops, OpKind::MaxPool)
      .inputs({"input"})
      .attr("ksize", K::IntList)
      .attr("strides", K::IntList)
      .attr("padding", K::String, Attr("VALID"), Paddings)
      .shape(shapeMaxPool)
      .grad(gradMaxPool);
  Def(Ops, OpKind::BatchNorm)
      .inputs({"x", "beta", "gamma"})
      .variadic(2)
      .outputs(3)
      .attr("epsilon", K::Float, Attr(0.001))
      .attr("scale", K::Bool, Attr(false))
      .shape(shapeBatchNorm)
      .grad(gradBatchNorm);
  Def(Ops, OpKind::BatchNormInference)
      .inputs({"x", "beta", "gamma", "mean", "variance"})
      .variadic(4)
      .attr("epsilon", K::Float, Attr(0.001))
      .attr("scale", K::Bool, Attr(false))
      .flags(OF_NoGradient)
      .shape(shapeBatchNormInference);
  Def(Ops, OpKind::Dropout)
      .inputs({"x"})
      .outputs(2)
      .attr("rate", K::Float, Attr(0.5))
      .attr("seed", K::Int, Attr(int64_t(0)))
      .flags(OF_Stateful)
      .shape(shapeDropout)
      .grad(gradDropout);

  // Gradient helpers.
  auto Helper = [&](OpKind Kd, std::vector<StringRef> In, ShapeFn S) {
    return Def(Ops, Kd).inputs(std::move(In)).flags(OF_NoGradient).shape(S);
  };
  Helper(OpKind::ReluGrad, {"dy", "y"}, shapeLikeInput<0>);
  Helper(OpKind::GreaterEqualMask, {"x", "y"}, shapeBinary);
  Helper(OpKind::SigmoidGrad, {"y", "dy"}, shapeLikeInput<0>);
  Helper(OpKind::TanhGrad, {"y", "dy"}, shapeLikeInput<0>);
  Helper(OpKind::SoftmaxGrad, {"y", "dy"}, shapeLikeInput<0>);
  Helper(OpKind::BiasAddGrad, {"dy"}, shapeBiasAddGrad);
  Helper(OpKind::SumToShape, {"x"}, shapeSumToShape).attr("shape", K::Shape);
  Helper(OpKind::BroadcastGrad, {"dy"}, shapeBroadcastGrad)
      .attr("shape", K::Shape)
      .attr("axes", K::IntList, V({}))
      .attr("keep_dims", K::Bool, Attr(false))
      .attr("scale", K::Float, Attr(1.0));
  Helper(OpKind::LogLossGrad, {"predictions", "labels", "dy"},
         shapeLikeInput<0>)
      .attr("epsilon", K::Float, Attr(1e-7));
  Helper(OpKind::Conv2DBackpropInput, {"filter", "dy"}, shapeConvBackpropInput)
      .attr("input_shape", K::Shape)
      .attr("strides", K::IntList, V({1, 1}))
      .attr("padding", K::String, Attr("SAME"), Paddings);
  Helper(OpKind::Conv2DBackpropFilter, {"input", "dy"}, shapeConvBackpropFilter)
      .attr("filter_shape", K::Shape)
      .attr("strides", K::IntList, V({1, 1}))
      .attr("padding", K::String, Attr("SAME"), Paddings);
  Helper(OpKind::MaxPoolGrad, {"input", "output", "dy"}, shapeLikeInput<0>)
      .attr("ksize", K::IntList)
      .attr("strides", K::IntList)
      .attr("padding", K::String, Attr("VALID"), Paddings);
  Helper(OpKind::BatchNormGrad, {"dy", "x", "mean", "variance", "gamma"},
         shapeBatchNormGrad)
      .variadic(4)
      .outputs(3)
      .attr("epsilon", K::Float, Attr(0.001))
      .attr("scale", K::Bool, Attr(false));

  // State updates.
  unsigned Update = OF_Stateful | OF_UpdatesInput0 | OF_NoGradient;
  Def(Ops, OpKind::AssignMovingAverage)
      .inputs({"variable", "value"})
      .outputs(0)
      .attr("decay", K::Float, Attr(0.999))
      .flags(Update)
      .shape(shapeAssignMovingAverage);
  Def(Ops, OpKind::AssignAdd)
      .inputs({"variable"})
      .outputs(0)
      .attr("amount", K::Int, Attr(int64_t(1)))
      .flags(Update)
      .shape(shapeAssignAdd);
  auto Apply = [&](OpKind Kd, std::vector<StringRef> In) {
    return Def(Ops, Kd)
        .inputs(std::move(In))
        .outputs(0)
        .attr("learning_rate", K::Float)
        .attr("decay_steps", K::Int, Attr(int64_t(0)))
        .attr("decay_rate", K::Float, Attr(1.0))
        .attr("decay_type", K::String, Attr("exponential"))
        .attr("staircase", K::Bool, Attr(true))
        .attr("end_learning_rate", K::Float, Attr(1e-4))
        .attr("power", K::Float, Attr(1.0))
        .flags(Update | OF_Internal)
        .shape(shapeApply);
  };
  Apply(OpKind::ApplyGradientDescent, {"variable", "gradient", "step"});
  Apply(OpKind::ApplyMomentum, {"variable", "accumulator", "gradient", "step"})
      .attr("momentum", K::Float, Attr(0.9))
      .attr("nesterov", K::Bool, Attr(false));
  Apply(OpKind::ApplyAdam, {"variable", "m", "v", "gradient", "step"})
      .attr("beta1", K::Float, Attr(0.9))
      .attr("beta2", K::Float, Attr(0.999))
      .attr("epsilon", K::Float, Attr(1e-8));
  Apply(OpKind::ApplyRMSProp, {"variable", "ms", "mom", "gradient", "step"})
      .attr("rho", K::Float, Attr(0.9))
      .attr("momentum", K::Float, Attr(0.0))
      .attr("epsilon", K::Float, Attr(1e-10));
  Apply(OpKind::ApplyCenteredRMSProp,
        {"variable", "ms", "mg", "mom", "gradient", "step"})
      .attr("rho", K::Float, Attr(0.9))
      .attr("momentum", K::Float, Attr(0.0))
      .attr("epsilon", K::Float, Attr(1e-10));
  Apply(OpKind::ApplyAdagrad, {"variable", "accumulator", "gradient", "step"});

  // Summaries.
  Def(Ops, OpKind::ScalarSummary)
      .inputs({"value"})
      .outputs(0)
      .attr("tag", K::String)
      .flags(OF_Summary | OF_Stateful | OF_NoGradient)
      .shape(shapeScalarSummary);
  Def(Ops, OpKind::HistogramSummary)
      .inputs({"values"})
      .outputs(0)
      .attr("tag", K::String)
      .flags(OF_Summary | OF_Stateful | OF_NoGradient)
      .shape(shapeSummary);

  // Cross-device.
  Def(Ops, OpKind::AllReduce)
      .inputs({"x"})
      .variadic(1)
      .outputsFn(numOutputsLikeInputs)
      .attr("group", K::String)
      .attr("bucket", K::Int, Attr(int64_t(0)))
      .attr("devices", K::StringList)
      .attr("replicas", K::Int, Attr(int64_t(1)))
      .flags(OF_Collective | OF_Stateful | OF_NoGradient | OF_Internal)
      .shape(shapeAllReduce);
  Def(Ops, OpKind::Send)
      .inputs({"x"})
      .outputs(0)
      .attr("channel", K::Int)
      .attr("to", K::String)
      .flags(OF_Stateful | OF_NoGradient | OF_Internal)
      .shape(shapeNone);
  Def(Ops, OpKind::Recv)
      .inputs({})
      .attr("channel", K::Int)
      .attr("from", K::String)
      .attr("dtype", K::Type)
      .attr("shape", K::Shape)
      .flags(OF_Stateful | OF_NoGradient | OF_Internal)
      .shape(shapeRecv);
}
} // namespace mdplan
