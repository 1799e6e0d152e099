//===- PlumbingTest.cpp - Identity, Reshape, BatchSlice, Cast, registry ---===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <algorithm>
#include <limits>

using namespace mdrt;
using namespace mdrt::test;

namespace {

TEST(CpuKernelRegistry, EveryComputeOpHasAKernel) {
  const char *Ops[] = {"Identity",
                       "BatchSlice",
                       "Reshape",
                       "Cast",
                       "Concat",
                       "Slice",
                       "Pad",
                       "MatMul",
                       "BiasAdd",
                       "Add",
                       "Sub",
                       "Mul",
                       "Div",
                       "Maximum",
                       "Minimum",
                       "AddN",
                       "Neg",
                       "Square",
                       "Sqrt",
                       "Exp",
                       "Log",
                       "Relu",
                       "Sigmoid",
                       "Tanh",
                       "Softmax",
                       "SparseSoftmaxCrossEntropy",
                       "SoftmaxCrossEntropy",
                       "OneHot",
                       "LogLoss",
                       "L2Loss",
                       "Mean",
                       "Sum",
                       "Accuracy",
                       "Conv2D",
                       "MaxPool",
                       "BatchNorm",
                       "BatchNormInference",
                       "Dropout",
                       "ReluGrad",
                       "GreaterEqualMask",
                       "SigmoidGrad",
                       "TanhGrad",
                       "SoftmaxGrad",
                       "BiasAddGrad",
                       "SumToShape",
                       "BroadcastGrad",
                       "LogLossGrad",
                       "Conv2DBackpropInput",
                       "Conv2DBackpropFilter",
                       "MaxPoolGrad",
                       "BatchNormGrad",
                       "AssignMovingAverage",
                       "AssignAdd",
                       "ApplyGradientDescent",
                       "ApplyMomentum",
                       "ApplyAdam",
                       "ApplyRMSProp",
                       "ApplyCenteredRMSProp",
                       "ApplyAdagrad"};
  KernelRegistry &R = KernelRegistry::get();
  for (const char *Op : Ops)
    EXPECT_NE(R.lookup(DeviceKind::CPU, Op), nullptr) << Op;
  // The executor's own ops have none.
  for (const char *Op : {"Input", "Const", "Variable", "NoOp", "Send", "Recv",
                         "AllReduce", "ScalarSummary", "HistogramSummary"})
    EXPECT_EQ(R.lookup(DeviceKind::CPU, Op), nullptr) << Op;
  EXPECT_EQ(R.ops(DeviceKind::CPU).size(), std::size(Ops));
}

TEST(CpuKernels, IdentityAndReshapeCopyEveryType) {
  Rng G;
  for (DType T : {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                  DType::Bool}) {
    TT X = G.tensor(T, {3, 5}, -100, 100);
    if (T == DType::Bool)
      for (double &V : X.V)
        V = V > 0;
    OpRunner Id("Identity");
    Id.input(X).output(T, {3, 5}).run();
    expectEqual(Id.out(0), X.V, "identity");
    OpRunner Re("Reshape");
    Re.attr("shape", std::vector<int64_t>{5, -1})
        .input(X)
        .output(T, {5, 3})
        .run();
    expectEqual(Re.out(0), X.V, "reshape");
  }
  OpRunner Bad("Reshape");
  Bad.input(G.tensor(DType::Float32, {3, 5})).output(DType::Float32, {4, 4});
  EXPECT_EQ(Bad.create(), "node 'test/Reshape' (Reshape): output float32[4,4] "
                          "should have 15 elements");
}

TEST(CpuKernels, IdentityLargeCopyOnTwoThreads) {
  Rng G;
  TT X = G.tensor(DType::Float32, {700, 1000});
  OpRunner Id("Identity");
  Id.input(X).output(DType::Float32, {700, 1000}).threads(2).run();
  expectEqual(Id.out(0), X.V);
}

TEST(CpuKernels, BatchSliceTakesItsRows) {
  Rng G;
  for (DType T : NumericTypes) {
    TT X = G.tensor(T, {6, 2, 3}, -50, 50);
    for (int64_t Index = 0; Index < 3; ++Index) {
      OpRunner S("BatchSlice");
      S.attr("index", Index)
          .attr("count", int64_t(3))
          .input(X)
          .output(T, {2, 2, 3})
          .run();
      std::vector<double> Want(X.V.begin() + Index * 12,
                               X.V.begin() + (Index + 1) * 12);
      expectEqual(S.out(0), Want, "slice " + std::to_string(Index));
    }
  }
  OpRunner Bad("BatchSlice");
  Bad.attr("index", int64_t(3))
      .attr("count", int64_t(3))
      .input(G.tensor(DType::Float32, {6, 2}))
      .output(DType::Float32, {2, 2});
  EXPECT_EQ(
      Bad.create(),
      "node 'test/BatchSlice' (BatchSlice): slice 3 of 3 is out of range");
  OpRunner Rows("BatchSlice");
  Rows.attr("index", int64_t(0))
      .attr("count", int64_t(2))
      .input(G.tensor(DType::Float32, {6, 2}))
      .output(DType::Float32, {2, 2});
  EXPECT_EQ(Rows.create(),
            "node 'test/BatchSlice' (BatchSlice): slice 0 of 2 of float32[6,2] "
            "has 3 rows, output is float32[2,2]");
}

/// `[a,b,c]`.
std::string dimsText(const std::vector<int64_t> &Dims) {
  std::string S = "[";
  for (size_t K = 0; K < Dims.size(); ++K)
    S += (K ? "," : "") + std::to_string(Dims[K]);
  return S + "]";
}

/// The row-major index of \p Idx in \p Dims.
int64_t flatIndex(const Shape &Dims, const std::vector<int64_t> &Idx) {
  int64_t F = 0;
  for (size_t K = 0; K < Dims.size(); ++K)
    F = F * Dims[K] + Idx[K];
  return F;
}

/// Calls \p Fn with every index of \p Dims, in row-major order.
template <typename F> void forEachIndex(const Shape &Dims, F &&Fn) {
  if (numElements(Dims) == 0)
    return;
  std::vector<int64_t> Idx(Dims.size(), 0);
  for (;;) {
    Fn(Idx);
    size_t K = Dims.size();
    while (K-- > 0) {
      if (++Idx[K] < Dims[K])
        break;
      Idx[K] = 0;
    }
    if (K == size_t(-1))
      return;
  }
}

/// The box of \p X at \p Begin of \p Size (no -1), element by element.
std::vector<double> sliceOf(const TT &X, const std::vector<int64_t> &Begin,
                            const Shape &Size) {
  std::vector<double> Y;
  forEachIndex(Size, [&](const std::vector<int64_t> &Idx) {
    std::vector<int64_t> At(Idx);
    for (size_t K = 0; K < At.size(); ++K)
      At[K] += Begin[K];
    Y.push_back(X.V[size_t(flatIndex(X.Dims, At))]);
  });
  return Y;
}

TEST(CpuKernels, SliceTakesItsBox) {
  Rng G;
  struct SliceCase {
    Shape X;
    std::vector<int64_t> Begin, Size;
    Shape Y;
  } Cases[] = {
      {{4, 5, 6}, {1, 0, 2}, {2, -1, 3}, {2, 5, 3}},
      {{4, 5, 6}, {0, 0, 5}, {-1, -1, 1}, {4, 5, 1}}, // strided runs of one
      {{4, 5, 6}, {3, 4, 0}, {1, 1, 6}, {1, 1, 6}},   // one contiguous run
      {{7}, {2}, {0}, {0}},                           // empty
      {{300, 500}, {10, 3}, {280, 490}, {280, 490}},  // rows on two threads
  };
  for (DType T : {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                  DType::Bool})
    for (const SliceCase &C : Cases)
      for (int Threads : {1, 2}) {
        TT X = G.tensor(T, C.X, -100, 100);
        if (T == DType::Bool)
          for (double &V : X.V)
            V = V > 0;
        OpRunner R("Slice");
        R.attr("begin", C.Begin)
            .attr("size", C.Size)
            .input(X)
            .output(T, C.Y)
            .threads(Threads)
            .run();
        expectEqual(R.out(0), sliceOf(X, C.Begin, C.Y),
                    std::string(dtypeName(T)) + " " + dimsText(C.X) + " at " +
                        dimsText(C.Begin));
      }
  OpRunner Out("Slice");
  Out.attr("begin", std::vector<int64_t>{1, 0})
      .attr("size", std::vector<int64_t>{4, -1})
      .input(G.tensor(DType::Float32, {4, 3}))
      .output(DType::Float32, {3, 3});
  EXPECT_EQ(Out.create(), "node 'test/Slice' (Slice): box at [1,0] of size "
                          "[4,-1] is out of bounds of float32[4,3] in "
                          "dimension 0");
  OpRunner Size("Slice");
  Size.attr("begin", std::vector<int64_t>{1, 0})
      .attr("size", std::vector<int64_t>{1, -3})
      .input(G.tensor(DType::Float32, {4, 3}))
      .output(DType::Float32, {1, 3});
  EXPECT_EQ(Size.create(), "node 'test/Slice' (Slice): size -3 in dimension 1 "
                           "is invalid (-1 takes the rest)");
  OpRunner Shape2("Slice");
  Shape2.attr("begin", std::vector<int64_t>{1, 0})
      .attr("size", std::vector<int64_t>{2, -1})
      .input(G.tensor(DType::Float32, {4, 3}))
      .output(DType::Float32, {2, 2});
  EXPECT_EQ(Shape2.create(), "node 'test/Slice' (Slice): output float32[2,2] "
                             "is not the slice's [2,3]");
  OpRunner Rank("Slice");
  Rank.attr("begin", std::vector<int64_t>{1})
      .attr("size", std::vector<int64_t>{2})
      .input(G.tensor(DType::Float32, {4, 3}))
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Rank.create(), "node 'test/Slice' (Slice): 'begin' [1] and "
                           "'size' [2] must have one value per dimension of "
                           "float32[4,3]");
}

TEST(CpuKernels, PadSurroundsWithZeros) {
  Rng G;
  for (DType T : NumericTypes)
    for (int Threads : {1, 2}) {
      Shape XS = {3, 4, 5};
      std::vector<int64_t> P = {1, 0, 2, 3, 0, 1};
      Shape YS = {4, 9, 6};
      TT X = G.tensor(T, XS, -100, 100);
      OpRunner R("Pad");
      R.attr("paddings", P).input(X).output(T, YS).threads(Threads).run();
      // The padded region is zero; the input's box is the input.
      std::vector<double> Want(size_t(numElements(YS)), 0);
      forEachIndex(XS, [&](const std::vector<int64_t> &Idx) {
        std::vector<int64_t> At = {Idx[0] + 1, Idx[1] + 2, Idx[2]};
        Want[size_t(flatIndex(YS, At))] = X.V[size_t(flatIndex(XS, Idx))];
      });
      expectEqual(R.out(0), Want, dtypeName(T));
      // Pad then Slice is the identity.
      OpRunner S("Slice");
      S.attr("begin", std::vector<int64_t>{1, 2, 0})
          .attr("size", std::vector<int64_t>{3, 4, 5})
          .input(TT(T, YS, R.out(0)))
          .output(T, XS)
          .run();
      expectEqual(S.out(0), X.V, "slice of the padded");
    }
  OpRunner Bad("Pad");
  Bad.attr("paddings", std::vector<int64_t>{1, -1})
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {4});
  EXPECT_EQ(Bad.create(), "node 'test/Pad' (Pad): paddings [1,-1] of "
                          "dimension 0 must be between 0 and 2^40");
  OpRunner Out("Pad");
  Out.attr("paddings", std::vector<int64_t>{1, 1})
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {5});
  EXPECT_EQ(Out.create(), "node 'test/Pad' (Pad): output float32[5] is not "
                          "the padded [6]");
  OpRunner Count("Pad");
  Count.attr("paddings", std::vector<int64_t>{1})
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {5});
  EXPECT_EQ(Count.create(), "node 'test/Pad' (Pad): 'paddings' [1] must have "
                            "two values per dimension of float32[4]");
}

TEST(CpuKernels, ConcatJoinsAlongItsAxis) {
  Rng G;
  for (DType T : NumericTypes)
    for (int64_t Axis : {0, 1, 2, -1})
      for (int Threads : {1, 2}) {
        size_t A = size_t(Axis < 0 ? Axis + 3 : Axis);
        std::vector<TT> In;
        Shape YS = {3, 4, 5};
        YS[A] = 0;
        for (int64_t Len : {2, 1, 3}) {
          Shape S = {3, 4, 5};
          S[A] = Len;
          YS[A] += Len;
          In.push_back(G.tensor(T, S, -100, 100));
        }
        OpRunner R("Concat");
        R.attr("axis", Axis);
        for (const TT &X : In)
          R.input(X);
        R.output(T, YS).threads(Threads).run();
        std::vector<double> Want(size_t(numElements(YS)));
        int64_t Offset = 0;
        for (const TT &X : In) {
          forEachIndex(X.Dims, [&](const std::vector<int64_t> &Idx) {
            std::vector<int64_t> At = Idx;
            At[A] += Offset;
            Want[size_t(flatIndex(YS, At))] =
                X.V[size_t(flatIndex(X.Dims, Idx))];
          });
          Offset += X.Dims[A];
        }
        expectEqual(R.out(0), Want,
                    std::string(dtypeName(T)) + " axis " +
                        std::to_string(Axis));
      }
  OpRunner Sum("Concat");
  Sum.attr("axis", int64_t(0))
      .input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {1, 3}))
      .output(DType::Float32, {4, 3});
  EXPECT_EQ(Sum.create(), "node 'test/Concat' (Concat): the inputs add up to "
                          "3 along axis 0, the output float32[4,3] has 4");
  OpRunner Other("Concat");
  Other.attr("axis", int64_t(0))
      .input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {1, 2}))
      .output(DType::Float32, {3, 3});
  EXPECT_EQ(Other.create(), "node 'test/Concat' (Concat): input 1 "
                            "float32[1,2] does not match output float32[3,3] "
                            "but along axis 0");
  OpRunner Axis("Concat");
  Axis.attr("axis", int64_t(2))
      .input(G.tensor(DType::Float32, {2, 3}))
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Axis.create(), "node 'test/Concat' (Concat): axis 2 is out of "
                           "range for float32[2,3]");
}

// Large copies on two threads: rows split between them (Pad, Concat along
// the last axis), and single runs split by bytes (Concat along the first).
TEST(CpuKernels, BoxCopiesOnTwoThreads) {
  Rng G;
  TT A = G.tensor(DType::Float32, {400, 300}),
     B = G.tensor(DType::Float32, {400, 200});
  OpRunner Cols("Concat");
  Cols.attr("axis", int64_t(1))
      .input(A)
      .input(B)
      .output(DType::Float32, {400, 500});
  Cols.threads(2).run();
  std::vector<double> Want;
  for (int64_t R = 0; R < 400; ++R) {
    Want.insert(Want.end(), A.V.begin() + R * 300, A.V.begin() + (R + 1) * 300);
    Want.insert(Want.end(), B.V.begin() + R * 200, B.V.begin() + (R + 1) * 200);
  }
  expectEqual(Cols.out(0), Want, "concat along axis 1");
  TT C = G.tensor(DType::Float32, {1000, 300});
  OpRunner Rows("Concat");
  Rows.attr("axis", int64_t(0))
      .input(A)
      .input(C)
      .output(DType::Float32, {1400, 300});
  Rows.threads(2).run();
  Want = A.V;
  Want.insert(Want.end(), C.V.begin(), C.V.end());
  expectEqual(Rows.out(0), Want, "concat along axis 0");
  OpRunner P("Pad");
  P.attr("paddings", std::vector<int64_t>{1, 1, 2, 0})
      .input(A)
      .output(DType::Float32, {402, 302})
      .threads(2)
      .run();
  std::vector<double> Padded(402 * 302, 0);
  for (int64_t R = 0; R < 400; ++R)
    for (int64_t K = 0; K < 300; ++K)
      Padded[size_t((R + 1) * 302 + K + 2)] = A.V[size_t(R * 300 + K)];
  expectEqual(P.out(0), Padded, "pad");
}

// Empty tensors: a Concat input of size zero along the axis, a Pad of an
// empty tensor (all padding), paddings of zero (a copy).
TEST(CpuKernels, BoxCopiesOfEmptyTensors) {
  Rng G;
  TT A = G.tensor(DType::Float64, {2, 3});
  OpRunner Cat("Concat");
  Cat.attr("axis", int64_t(1))
      .input(TT(DType::Float64, {2, 0}, {}))
      .input(A)
      .input(TT(DType::Float64, {2, 0}, {}))
      .output(DType::Float64, {2, 3})
      .run();
  expectEqual(Cat.out(0), A.V, "concat with empty inputs");
  OpRunner Empty("Pad");
  Empty.attr("paddings", std::vector<int64_t>{1, 0, 0, 2})
      .input(TT(DType::Float64, {0, 2}, {}))
      .output(DType::Float64, {1, 4})
      .run();
  expectEqual(Empty.out(0), std::vector<double>(4, 0), "pad of nothing");
  OpRunner Zero("Pad");
  Zero.attr("paddings", std::vector<int64_t>{0, 0, 0, 0})
      .input(A)
      .output(DType::Float64, {2, 3})
      .run();
  expectEqual(Zero.out(0), A.V, "zero padding");
}

TEST(CpuKernels, CastConvertsAndTruncatesTowardZero) {
  TT F(DType::Float32, {6}, {-2.75, -0.5, 0, 0.5, 2.75, 7});
  for (DType To : {DType::Int32, DType::Int64}) {
    OpRunner C("Cast");
    C.attr("dtype", To).input(F).output(To, {6}).run();
    expectEqual(C.out(0), {-2, 0, 0, 0, 2, 7}, "float to int");
  }
  // NaN and values outside the integer range give its minimum, on every
  // device (C++ leaves them undefined, CUDA saturates).
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  const double Inf = std::numeric_limits<double>::infinity();
  TT Odd(DType::Float64, {8},
         {NaN, Inf, -Inf, 3e9, -3e9, 2147483647.9, -2147483648.9, -1e19});
  OpRunner O32("Cast");
  O32.attr("dtype", DType::Int32).input(Odd).output(DType::Int32, {8}).run();
  const double Min32 = -2147483648.0;
  expectEqual(O32.out(0),
              {Min32, Min32, Min32, Min32, Min32, 2147483647, Min32, Min32},
              "double to int32, out of range");
  OpRunner O64("Cast");
  O64.attr("dtype", DType::Int64).input(Odd).output(DType::Int64, {8}).run();
  std::vector<double> G64 = O64.out(0);
  const double Min64 = -9223372036854775808.0;
  EXPECT_EQ(G64[0], Min64);
  EXPECT_EQ(G64[1], Min64);
  EXPECT_EQ(G64[2], Min64);
  EXPECT_EQ(G64[3], 3e9);
  EXPECT_EQ(G64[4], -3e9);
  EXPECT_EQ(G64[7], Min64);
  TT OddF(DType::Float32, {3}, {NaN, 2147483648.0, -2147483648.0});
  OpRunner F32("Cast");
  F32.attr("dtype", DType::Int32).input(OddF).output(DType::Int32, {3}).run();
  expectEqual(F32.out(0), {Min32, Min32, Min32}, "float to int32, edges");

  OpRunner B("Cast");
  B.attr("dtype", DType::Bool).input(F).output(DType::Bool, {6}).run();
  expectEqual(B.out(0), {1, 1, 0, 1, 1, 1}, "float to bool");

  TT D(DType::Float64, {3}, {0.1, -1e300, 3.5});
  OpRunner DF("Cast");
  DF.attr("dtype", DType::Float32).input(D).output(DType::Float32, {3}).run();
  std::vector<double> Got = DF.out(0);
  EXPECT_EQ(Got[0], double(0.1f));
  EXPECT_TRUE(std::isinf(Got[1]) && Got[1] < 0);
  EXPECT_EQ(Got[2], 3.5);

  TT I(DType::Int32, {3}, {-7, 0, 2147483647});
  OpRunner IL("Cast");
  IL.attr("dtype", DType::Int64).input(I).output(DType::Int64, {3}).run();
  expectEqual(IL.out(0), {-7, 0, 2147483647});
  OpRunner IF("Cast");
  IF.attr("dtype", DType::Float64).input(I).output(DType::Float64, {3}).run();
  expectEqual(IF.out(0), {-7, 0, 2147483647});

  TT L(DType::Int64, {2}, {-3, 4});
  OpRunner LI("Cast");
  LI.attr("dtype", DType::Int32).input(L).output(DType::Int32, {2}).run();
  expectEqual(LI.out(0), {-3, 4});

  TT Bo(DType::Bool, {3}, {1, 0, 1});
  OpRunner BF("Cast");
  BF.attr("dtype", DType::Float32).input(Bo).output(DType::Float32, {3}).run();
  expectEqual(BF.out(0), {1, 0, 1});

  // Same type is a copy.
  OpRunner Same("Cast");
  Same.attr("dtype", DType::Float32).input(F).output(DType::Float32, {6}).run();
  expectEqual(Same.out(0), F.V);
}

} // namespace
