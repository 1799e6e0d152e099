//===- ElementwiseTest.cpp - Elementwise and broadcasting kernels ---------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include "mdrt/Random.h"

#include <functional>
#include <limits>

using namespace mdrt;
using namespace mdrt::test;

namespace {

Shape broadcastShape(const Shape &A, const Shape &B) {
  size_t R = std::max(A.size(), B.size());
  Shape Out(R);
  for (size_t K = 0; K < R; ++K) {
    int64_t DA = K < R - A.size() ? 1 : A[K - (R - A.size())];
    int64_t DB = K < R - B.size() ? 1 : B[K - (R - B.size())];
    Out[K] = DA == 1 ? DB : DA;
  }
  return Out;
}

using BinFn = std::function<double(double, double)>;

/// The naive broadcast of F over A and B, rounded to T.
std::vector<double> refBinary(const TT &A, const TT &B, const BinFn &F) {
  Shape Out = broadcastShape(A.Dims, B.Dims);
  std::vector<double> R(size_t(numElements(Out)));
  for (int64_t I = 0; I < int64_t(R.size()); ++I) {
    Shape Idx = unflatten(I, Out);
    R[size_t(I)] = roundTo(A.Type, F(A.V[size_t(broadcastIndex(Idx, A.Dims))],
                                     B.V[size_t(broadcastIndex(Idx, B.Dims))]));
  }
  return R;
}

struct BinaryCase {
  Shape A, B;
};

const BinaryCase BinaryCases[] = {{{2, 3}, {2, 3}},
                                  {{2, 3}, {3}},
                                  {{2, 3}, {2, 1}},
                                  {{4, 1, 3}, {1, 5, 1}},
                                  {{}, {2, 3}},
                                  {{2, 3}, {}},
                                  {{3, 1, 5}, {3, 4, 1}},
                                  {{1}, {7}},
                                  {{2, 1, 3, 1}, {4, 1, 5}},
                                  {{5, 1}, {1, 1}},
                                  {{1, 1, 1}, {2, 3, 4}},
                                  {{3, 4, 5}, {4, 5}},
                                  {{700, 400}, {400}},
                                  {{400, 1}, {400, 700}},
                                  {{1, 700}, {400, 1}},
                                  {{60, 70, 80}, {60, 70, 80}}};

void checkBinary(const char *Op, const BinFn &F, bool PositiveB) {
  Rng G;
  for (DType T : NumericTypes)
    for (const BinaryCase &C : BinaryCases)
      for (int Threads : {1, 2}) {
        TT A = G.tensor(T, C.A, -20, 20);
        TT B = G.tensor(T, C.B, -20, 20);
        if (PositiveB)
          for (double &V : B.V)
            V = V == 0 ? 3 : V; // No division by zero.
        OpRunner R(Op);
        R.input(A)
            .input(B)
            .output(T, broadcastShape(A.Dims, B.Dims))
            .threads(Threads)
            .run();
        std::string What = std::string(Op) + " " + dtypeName(T) + " " +
                           std::to_string(C.A.size()) + "d x " +
                           std::to_string(C.B.size()) + "d threads " +
                           std::to_string(Threads);
        expectClose(R.out(0), refBinary(A, B, F), T, {}, What);
      }
}

double truncDiv(double A, double B) { return std::trunc(A / B); }

TEST(CpuKernels, AddBroadcasts) {
  checkBinary(
      "Add", [](double A, double B) { return A + B; }, false);
}

TEST(CpuKernels, SubBroadcasts) {
  checkBinary(
      "Sub", [](double A, double B) { return A - B; }, false);
}

TEST(CpuKernels, MulBroadcasts) {
  checkBinary(
      "Mul", [](double A, double B) { return A * B; }, false);
}

TEST(CpuKernels, MaximumBroadcasts) {
  checkBinary(
      "Maximum", [](double A, double B) { return A < B ? B : A; }, false);
}

TEST(CpuKernels, MaximumPropagatesNaN) {
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  for (DType T : FloatTypes) {
    TT A(T, {4}, {NaN, 1, -0.5, 2});
    TT B(T, {4}, {1, NaN, -0.25, 2});
    OpRunner R("Maximum");
    R.input(A).input(B).output(T, {4}).run();
    std::vector<double> Y = R.out(0);
    EXPECT_TRUE(std::isnan(Y[0])) << dtypeName(T);
    EXPECT_TRUE(std::isnan(Y[1])) << dtypeName(T);
    EXPECT_EQ(Y[2], -0.25);
    EXPECT_EQ(Y[3], 2);
  }
}

TEST(CpuKernels, MinimumBroadcasts) {
  checkBinary(
      "Minimum", [](double A, double B) { return B < A ? B : A; }, false);
}

TEST(CpuKernels, MinimumPropagatesNaN) {
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  for (DType T : FloatTypes) {
    TT A(T, {4}, {NaN, 1, -0.5, 2});
    TT B(T, {4}, {1, NaN, -0.25, 2});
    OpRunner R("Minimum");
    R.input(A).input(B).output(T, {4}).run();
    std::vector<double> Y = R.out(0);
    EXPECT_TRUE(std::isnan(Y[0])) << dtypeName(T);
    EXPECT_TRUE(std::isnan(Y[1])) << dtypeName(T);
    EXPECT_EQ(Y[2], -0.5);
    EXPECT_EQ(Y[3], 2);
  }
}

TEST(CpuKernels, GreaterEqualMaskBroadcasts) {
  checkBinary(
      "GreaterEqualMask", [](double A, double B) { return A >= B ? 1.0 : 0.0; },
      false);
}

TEST(CpuKernels, GreaterEqualMaskIsZeroWhereAnInputIsNaN) {
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  const double Inf = std::numeric_limits<double>::infinity();
  for (DType T : FloatTypes) {
    TT A(T, {6}, {NaN, 1, NaN, 2, Inf, -0.0});
    TT B(T, {6}, {1, NaN, NaN, 2, Inf, 0.0});
    OpRunner R("GreaterEqualMask");
    R.input(A).input(B).output(T, {6}).run();
    EXPECT_EQ(R.out(0), (std::vector<double>{0, 0, 0, 1, 1, 1}))
        << dtypeName(T);
  }
}

TEST(CpuKernels, DivBroadcasts) {
  Rng G;
  for (DType T : FloatTypes)
    for (const BinaryCase &C : BinaryCases) {
      TT A = G.tensor(T, C.A, -20, 20);
      TT B = G.tensor(T, C.B, 0.5, 4);
      OpRunner R("Div");
      R.input(A).input(B).output(T, broadcastShape(A.Dims, B.Dims)).run();
      expectClose(R.out(0),
                  refBinary(A, B, [](double X, double Y) { return X / Y; }), T,
                  {}, "Div");
    }
  for (DType T : {DType::Int32, DType::Int64})
    for (const BinaryCase &C : BinaryCases) {
      TT A = G.tensor(T, C.A, -50, 50);
      TT B = G.tensor(T, C.B, 1, 9);
      for (size_t K = 0; K < B.V.size(); K += 2)
        B.V[K] = -B.V[K];
      OpRunner R("Div");
      R.input(A).input(B).output(T, broadcastShape(A.Dims, B.Dims)).run();
      expectEqual(R.out(0), refBinary(A, B, truncDiv), "int Div");
    }
}

TEST(CpuKernels, IntegerDivisionEdgeCases) {
  TT A(DType::Int32, {4}, {-7, 7, 5, -2147483648.0});
  TT B(DType::Int32, {4}, {2, -2, 0, -1});
  OpRunner R("Div");
  R.input(A).input(B).output(DType::Int32, {4}).run();
  // Truncation toward zero; x / 0 gives 0; MIN / -1 wraps to MIN.
  expectEqual(R.out(0), {-3, -3, 0, -2147483648.0});
}

TEST(CpuKernels, IntegerArithmeticWraps) {
  TT A(DType::Int32, {2}, {2147483647, -2147483648.0});
  TT B(DType::Int32, {2}, {1, 1});
  OpRunner Add("Add");
  Add.input(A).input(B).output(DType::Int32, {2}).run();
  expectEqual(Add.out(0), {-2147483648.0, -2147483647});
}

TEST(CpuKernels, BinaryRejectsBadShapes) {
  Rng G;
  OpRunner R("Add");
  R.input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(R.create(), "node 'test/Add' (Add): cannot broadcast [4] to [2,3]");
  OpRunner Mixed("Mul");
  Mixed.input(G.tensor(DType::Float32, {3}))
      .input(G.tensor(DType::Float64, {3}))
      .output(DType::Float32, {3});
  EXPECT_EQ(Mixed.create(), "node 'test/Mul' (Mul): input 1 is float64[3], "
                            "expected element type float32");
}

TEST(CpuKernels, BiasAddAddsAlongTheLastDimension) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{5}, Shape{2, 3, 4}, Shape{7, 3}, Shape{700, 400}}) {
      TT X = G.tensor(T, S);
      TT Bias = G.tensor(T, {S.back()});
      OpRunner R("BiasAdd");
      R.input(X).input(Bias).output(T, S).threads(2).run();
      expectClose(R.out(0),
                  refBinary(X, Bias, [](double A, double B) { return A + B; }),
                  T, {}, "BiasAdd");
    }
  OpRunner Bad("BiasAdd");
  Bad.input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {2}))
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Bad.create(), "node 'test/BiasAdd' (BiasAdd): bias float32[2] does "
                          "not match the last dimension of float32[2,3]");
}

TEST(CpuKernels, BroadcastGradSpreadsAndScales) {
  Rng G;
  struct Case {
    Shape Target;
    std::vector<int64_t> Axes;
    bool KeepDims;
  };
  const Case Cases[] = {{{2, 3, 4}, {1}, false},    {{2, 3, 4}, {1}, true},
                        {{2, 3, 4}, {}, false},     {{2, 3, 4}, {-1}, true},
                        {{2, 3, 4}, {0, 2}, false}, {{5}, {0}, false},
                        {{700, 400}, {0}, false}};
  for (DType T : FloatTypes)
    for (const Case &C : Cases) {
      std::vector<bool> Red(C.Target.size(), C.Axes.empty());
      for (int64_t A : C.Axes)
        Red[size_t(A < 0 ? A + int64_t(C.Target.size()) : A)] = true;
      Shape Kept = C.Target, DyShape;
      for (size_t K = 0; K < C.Target.size(); ++K) {
        if (Red[K])
          Kept[K] = 1;
        if (!Red[K] || C.KeepDims)
          DyShape.push_back(Kept[K]);
      }
      TT Dy = G.tensor(T, DyShape);
      OpRunner R("BroadcastGrad");
      R.attr("shape", C.Target)
          .attr("axes", C.Axes)
          .attr("keep_dims", C.KeepDims)
          .attr("scale", 0.25)
          .input(Dy)
          .output(T, C.Target)
          .threads(2)
          .run();
      std::vector<double> Want(size_t(numElements(C.Target)));
      for (int64_t I = 0; I < int64_t(Want.size()); ++I)
        Want[size_t(I)] = roundTo(
            T,
            Dy.V[size_t(broadcastIndex(unflatten(I, C.Target), Kept))] * 0.25);
      expectClose(R.out(0), Want, T, {}, "BroadcastGrad");
    }
}

TEST(CpuKernels, AddNAddsInInputOrder) {
  // (1e8 + -1e8) + 1 = 1 in float, whereas 1e8 + (-1e8 + 1) = 0.
  TT A(DType::Float32, {2}, {1e8, 1}), B(DType::Float32, {2}, {-1e8, 2}),
      C(DType::Float32, {2}, {1, 3});
  OpRunner R("AddN");
  R.input(A).input(B).input(C).output(DType::Float32, {2}).run();
  expectEqual(R.out(0), {1, 6});
  OpRunner R2("AddN");
  R2.input(C).input(B).input(A).output(DType::Float32, {2}).run();
  expectEqual(R2.out(0), {0, 6});

  Rng G;
  for (DType T : NumericTypes)
    for (int N : {1, 2, 5})
      for (Shape S : {Shape{3, 4}, Shape{}, Shape{1000, 300}}) {
        OpRunner Sum("AddN");
        std::vector<double> Want(size_t(numElements(S)), 0.0);
        for (int K = 0; K < N; ++K) {
          TT X = G.tensor(T, S, -100, 100);
          Sum.input(X);
          for (size_t J = 0; J < Want.size(); ++J)
            Want[J] = roundTo(T, Want[J] + X.V[J]);
        }
        Sum.output(T, S).threads(2).run();
        expectEqual(Sum.out(0), Want, "AddN");
      }
}

using UnFn = std::function<double(double)>;

void checkUnary(const char *Op, const UnFn &F, bool IntsToo, double Lo,
                double Hi) {
  Rng G;
  for (DType T : NumericTypes) {
    if (!isFloat(T) && !IntsToo)
      continue;
    for (Shape S : {Shape{}, Shape{7}, Shape{3, 5}, Shape{700, 400}}) {
      TT X = G.tensor(T, S, Lo, Hi);
      OpRunner R(Op);
      R.input(X).output(T, S).threads(2).run();
      std::vector<double> Want(X.V.size());
      for (size_t K = 0; K < Want.size(); ++K)
        Want[K] = roundTo(T, F(X.V[K]));
      expectClose(R.out(0), Want, T, {}, std::string(Op) + " " + dtypeName(T));
    }
  }
}

TEST(CpuKernels, ExpAndLogAtTheEdges) {
  const double Inf = std::numeric_limits<double>::infinity();
  for (DType T : FloatTypes) {
    OpRunner E("Exp");
    E.input(TT(T, {4}, {0, -Inf, Inf, -1000})).output(T, {4}).run();
    EXPECT_EQ(E.out(0), (std::vector<double>{1, 0, Inf, 0})) << dtypeName(T);
    OpRunner L("Log");
    L.input(TT(T, {3}, {1, 0, -1})).output(T, {3}).run();
    std::vector<double> Y = L.out(0);
    EXPECT_EQ(Y[0], 0);
    EXPECT_EQ(Y[1], -Inf);
    EXPECT_TRUE(std::isnan(Y[2])) << dtypeName(T);
  }
}

TEST(CpuKernels, UnaryMath) {
  checkUnary(
      "Neg", [](double X) { return -X; }, true, -50, 50);
  checkUnary(
      "Square", [](double X) { return X * X; }, true, -50, 50);
  checkUnary(
      "Sqrt", [](double X) { return std::sqrt(X); }, false, 0, 50);
  checkUnary(
      "Exp", [](double X) { return std::exp(X); }, false, -20, 20);
  checkUnary(
      "Log", [](double X) { return std::log(X); }, false, 1e-3, 1e3);
  checkUnary(
      "Relu", [](double X) { return X > 0 ? X : 0; }, false, -3, 3);
  checkUnary(
      "Sigmoid", [](double X) { return 1 / (1 + std::exp(-X)); }, false, -30,
      30);
  checkUnary(
      "Tanh", [](double X) { return std::tanh(X); }, false, -5, 5);
  // Relu and friends are float only.
  Rng G;
  OpRunner R("Relu");
  R.input(G.tensor(DType::Int32, {3}, -3, 3)).output(DType::Int32, {3});
  EXPECT_EQ(
      R.create(),
      "node 'test/Relu' (Relu): no CPU kernel for Relu on element type int32");
}

TEST(CpuKernels, SigmoidSaturates) {
  TT X(DType::Float32, {2}, {-200, 200});
  OpRunner R("Sigmoid");
  R.input(X).output(DType::Float32, {2}).run();
  expectEqual(R.out(0), {0, 1});
}

TEST(CpuKernels, ActivationGradients) {
  Rng G;
  for (DType T : FloatTypes) {
    Shape S = {6, 7};
    TT Y = G.tensor(T, S, -1, 1), Dy = G.tensor(T, S, -2, 2);
    Y.V[0] = 0; // ReluGrad passes nothing where y == 0.
    {
      OpRunner R("ReluGrad"); // Inputs dy, y.
      R.input(Dy).input(Y).output(T, S).run();
      std::vector<double> Want(Y.V.size());
      for (size_t K = 0; K < Want.size(); ++K)
        Want[K] = Y.V[K] > 0 ? Dy.V[K] : 0;
      expectEqual(R.out(0), Want, "ReluGrad");
    }
    TT P = G.tensor(T, S, 0.01, 0.99);
    {
      OpRunner R("SigmoidGrad"); // Inputs y, dy.
      R.input(P).input(Dy).output(T, S).run();
      std::vector<double> Want(Y.V.size());
      for (size_t K = 0; K < Want.size(); ++K)
        Want[K] = Dy.V[K] * P.V[K] * (1 - P.V[K]);
      expectClose(R.out(0), Want, T, {}, "SigmoidGrad");
    }
    {
      OpRunner R("TanhGrad"); // Inputs y, dy.
      R.input(Y).input(Dy).output(T, S).run();
      std::vector<double> Want(Y.V.size());
      for (size_t K = 0; K < Want.size(); ++K)
        Want[K] = Dy.V[K] * (1 - Y.V[K] * Y.V[K]);
      expectClose(R.out(0), Want, T, {}, "TanhGrad");
    }
  }
}

std::vector<double> refSoftmax(const std::vector<double> &X, int64_t C) {
  std::vector<double> Y(X.size());
  for (size_t R = 0; R < X.size() / size_t(C); ++R) {
    double Max = -INFINITY, Sum = 0;
    for (int64_t J = 0; J < C; ++J)
      Max = std::max(Max, X[R * size_t(C) + size_t(J)]);
    for (int64_t J = 0; J < C; ++J)
      Sum += std::exp(X[R * size_t(C) + size_t(J)] - Max);
    for (int64_t J = 0; J < C; ++J)
      Y[R * size_t(C) + size_t(J)] =
          std::exp(X[R * size_t(C) + size_t(J)] - Max) / Sum;
  }
  return Y;
}

TEST(CpuKernels, SoftmaxOverTheLastDimension) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{1}, Shape{3, 5}, Shape{2, 3, 4}, Shape{2000, 10}}) {
      TT X = G.tensor(T, S, -5, 5);
      X.V[0] = 1000; // Overflows without the max subtracted.
      OpRunner R("Softmax");
      R.input(X).output(T, S).threads(2).run();
      expectClose(R.out(0), refSoftmax(X.V, S.back()), T, {},
                  "Softmax " + std::string(dtypeName(T)));
    }
}

TEST(CpuKernels, SoftmaxGrad) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{3, 5}, Shape{2, 3, 4}, Shape{900, 30}}) {
      TT X = G.tensor(T, S, -3, 3);
      TT Y(T, S, refSoftmax(X.V, S.back()));
      for (double &V : Y.V)
        V = roundTo(T, V);
      TT Dy = G.tensor(T, S, -1, 1);
      OpRunner R("SoftmaxGrad"); // Inputs y, dy.
      R.input(Y).input(Dy).output(T, S).threads(2).run();
      std::vector<double> Want(Y.V.size()), Mag(Y.V.size());
      int64_t C = S.back();
      for (size_t Row = 0; Row < Y.V.size() / size_t(C); ++Row) {
        double Dot = 0, AbsDot = 0;
        for (int64_t J = 0; J < C; ++J) {
          size_t K = Row * size_t(C) + size_t(J);
          Dot += Dy.V[K] * Y.V[K];
          AbsDot += std::fabs(Dy.V[K] * Y.V[K]);
        }
        for (int64_t J = 0; J < C; ++J) {
          size_t K = Row * size_t(C) + size_t(J);
          Want[K] = Y.V[K] * (Dy.V[K] - Dot);
          Mag[K] = Y.V[K] * (std::fabs(Dy.V[K]) + AbsDot);
        }
      }
      expectClose(R.out(0), Want, T, Mag, "SoftmaxGrad");
    }
}

TEST(CpuKernels, SoftmaxOfAnEmptyLastDimension) {
  // Nothing to compute. (The kernels used to divide by the row length, 0:
  // a SIGFPE unless the optimizer moved the division away.)
  for (DType T : FloatTypes)
    for (Shape S : {Shape{0}, Shape{3, 0}, Shape{0, 0}}) {
      OpRunner R("Softmax");
      R.input(TT(T, S, {})).output(T, S).run();
      OpRunner G("SoftmaxGrad");
      G.input(TT(T, S, {})).input(TT(T, S, {})).output(T, S).run();
      EXPECT_TRUE(R.out(0).empty() && G.out(0).empty());
    }
}

/// The documented mask of one element of the Dropout node \p Name.
double refMask(uint64_t RunSeed, int64_t SeedAttr, const char *Name,
               uint64_t Step, uint64_t Element, double Rate) {
  float U = uniformRandomFloat(RunSeed ^ uint64_t(SeedAttr), hashName(Name),
                               Step, Element);
  return double(U) >= Rate ? 1.0 / (1.0 - Rate) : 0.0;
}

TEST(CpuKernels, DropoutMaskFollowsTheCounterBasedRng) {
  Rng G;
  for (DType T : FloatTypes)
    for (double Rate : {0.4, 0.5, 0.9}) {
      Shape S = {600, 500};
      TT X = G.tensor(T, S, -2, 2);
      OpRunner R("Dropout");
      R.attr("rate", Rate)
          .attr("seed", int64_t(77))
          .input(X)
          .output(T, S)
          .output(T, S)
          .name("net/dropout")
          .index(5)
          .threads(2);
      R.run(/*Step=*/3, /*Seed=*/1234);
      std::vector<double> Y = R.out(0), Mask = R.out(1);
      std::vector<double> WantMask(X.V.size()), WantY(X.V.size());
      size_t Kept = 0;
      for (size_t K = 0; K < X.V.size(); ++K) {
        WantMask[K] = roundTo(T, refMask(1234, 77, "net/dropout", 3, K, Rate));
        WantY[K] = roundTo(T, X.V[K] * WantMask[K]);
        Kept += WantMask[K] != 0;
      }
      expectEqual(Mask, WantMask, "mask");
      expectEqual(Y, WantY, "y");
      // About 1 - rate of the elements are kept.
      EXPECT_NEAR(double(Kept) / double(X.V.size()), 1 - Rate, 0.02);

      // Another step draws another mask.
      R.run(/*Step=*/4, /*Seed=*/1234);
      std::vector<double> Mask4 = R.out(1);
      size_t Differ = 0;
      for (size_t K = 0; K < Mask4.size(); ++K) {
        Differ += Mask4[K] != Mask[K];
        ASSERT_EQ(Mask4[K],
                  roundTo(T, refMask(1234, 77, "net/dropout", 4, K, Rate)));
      }
      EXPECT_GT(Differ, Mask4.size() / 10);
    }
}

TEST(CpuKernels, DropoutStreamsDifferByNodeAndSeed) {
  Rng G;
  TT X = G.tensor(DType::Float32, {1000}, 1, 2);
  auto MaskOf = [&](const char *Name, uint32_t Index, int64_t Seed,
                    uint64_t RunSeed) {
    OpRunner R("Dropout");
    R.attr("rate", 0.5)
        .attr("seed", Seed)
        .input(X)
        .output(DType::Float32, {1000})
        .output(DType::Float32, {1000})
        .name(Name)
        .index(Index)
        .run(0, RunSeed);
    return R.out(1);
  };
  std::vector<double> Base = MaskOf("a/dropout", 1, 2, 3);
  EXPECT_NE(Base, MaskOf("b/dropout", 1, 2, 3));
  EXPECT_NE(Base, MaskOf("a/dropout", 1, 5, 3));
  EXPECT_NE(Base, MaskOf("a/dropout", 1, 2, 4));
  // The seeds combine by xor.
  EXPECT_EQ(Base, MaskOf("a/dropout", 1, 3, 2));
  // The kernel's place in the plan does not matter (mdplan's schedule may
  // order the same model's kernels differently).
  EXPECT_EQ(Base, MaskOf("a/dropout", 7, 2, 3));
}

TEST(CpuKernels, DropoutRateZeroKeepsEverything) {
  Rng G;
  TT X = G.tensor(DType::Float64, {50});
  OpRunner R("Dropout");
  R.attr("rate", 0.0)
      .input(X)
      .output(DType::Float64, {50})
      .output(DType::Float64, {50})
      .run(9, 9);
  expectEqual(R.out(0), X.V);
  expectEqual(R.out(1), std::vector<double>(50, 1.0));
  OpRunner Bad("Dropout");
  Bad.attr("rate", 1.0)
      .input(X)
      .output(DType::Float64, {50})
      .output(DType::Float64, {50});
  EXPECT_EQ(
      Bad.create(),
      "node 'test/Dropout' (Dropout): dropout rate must be in [0, 1), got 1");
}

} // namespace
