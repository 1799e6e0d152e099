//===- LossTest.cpp - Cross-entropy, log loss, accuracy -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

TEST(CpuKernels, SparseSoftmaxCrossEntropy) {
  Rng G;
  for (DType T : FloatTypes)
    for (DType L : {DType::Int32, DType::Int64})
      for (Shape S :
           {Shape{1, 1}, Shape{4, 3}, Shape{64, 10}, Shape{3000, 17}}) {
        int64_t N = S[0], C = S[1];
        TT X = G.tensor(T, S, -4, 4);
        X.V[0] = 500; // Needs the max subtracted.
        TT Lab = G.tensor(L, {N}, 0, C - 1);
        OpRunner R("SparseSoftmaxCrossEntropy");
        R.input(X).input(Lab).output(T, {N}).output(T, S).threads(2).run();
        std::vector<double> Loss(static_cast<size_t>(N)),
            Back(static_cast<size_t>(N * C));
        for (int64_t I = 0; I < N; ++I) {
          const double *XR = &X.V[size_t(I * C)];
          double Max = XR[0], Sum = 0;
          for (int64_t J = 0; J < C; ++J)
            Max = std::max(Max, XR[J]);
          for (int64_t J = 0; J < C; ++J)
            Sum += std::exp(XR[J] - Max);
          int64_t Y = int64_t(Lab.V[size_t(I)]);
          Loss[size_t(I)] = Max + std::log(Sum) - XR[Y];
          for (int64_t J = 0; J < C; ++J)
            Back[size_t(I * C + J)] =
                std::exp(XR[J] - Max) / Sum - (J == Y ? 1 : 0);
        }
        std::string What = std::string(dtypeName(T)) + " labels " +
                           dtypeName(L) + " N " + std::to_string(N);
        expectClose(R.out(0), Loss, T, {}, "loss " + What);
        expectClose(R.out(1), Back, T, {}, "backprop " + What);
        EXPECT_EQ(R.runError(), "") << What;
      }
}

TEST(CpuKernels, SoftmaxCrossEntropyOfADistribution) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{1, 1}, Shape{4, 3}, Shape{3000, 17}}) {
      int64_t N = S[0], C = S[1];
      TT X = G.tensor(T, S, -4, 4);
      X.V[0] = 500; // Needs the max subtracted.
      // Label rows that sum to one (smoothed one-hot rows, and spread).
      TT Y = G.tensor(T, S, 0, 1);
      for (int64_t I = 0; I < N; ++I) {
        double Sum = 0;
        for (int64_t J = 0; J < C; ++J)
          Sum += Y.V[size_t(I * C + J)];
        for (int64_t J = 0; J < C; ++J)
          Y.V[size_t(I * C + J)] = roundTo(T, Y.V[size_t(I * C + J)] / Sum);
      }
      OpRunner R("SoftmaxCrossEntropy");
      R.input(X).input(Y).output(T, {N}).output(T, S).threads(2).run();
      std::vector<double> Loss(size_t(N), 0), Back(size_t(N * C));
      for (int64_t I = 0; I < N; ++I) {
        const double *XR = &X.V[size_t(I * C)];
        double Max = XR[0], Sum = 0;
        for (int64_t J = 0; J < C; ++J)
          Max = std::max(Max, XR[J]);
        for (int64_t J = 0; J < C; ++J)
          Sum += std::exp(XR[J] - Max);
        for (int64_t J = 0; J < C; ++J) {
          double YJ = Y.V[size_t(I * C + J)];
          Loss[size_t(I)] += YJ * (Max + std::log(Sum) - XR[J]);
          Back[size_t(I * C + J)] = std::exp(XR[J] - Max) / Sum - YJ;
        }
      }
      std::string What = std::string(dtypeName(T)) + " N " + std::to_string(N);
      expectClose(R.out(0), Loss, T, {}, "loss " + What);
      expectClose(R.out(1), Back, T, {}, "backprop " + What);
    }
}

// With one-hot labels the dense loss is the sparse one, to the bit: the
// same sums in the same order, and adding zero times a finite value.
TEST(CpuKernels, SoftmaxCrossEntropyOfOneHotRowsIsTheSparseOne) {
  Rng G;
  for (DType T : FloatTypes) {
    int64_t N = 64, C = 10;
    TT X = G.tensor(T, {N, C}, -6, 6);
    TT Lab = G.tensor(DType::Int64, {N}, 0, C - 1);
    OpRunner H("OneHot");
    H.attr("depth", C).attr("dtype", T).input(Lab).output(T, {N, C}).run();
    OpRunner D("SoftmaxCrossEntropy");
    D.input(X).input(TT(T, {N, C}, H.out(0))).output(T, {N}).output(T, {N, C});
    D.run();
    OpRunner S("SparseSoftmaxCrossEntropy");
    S.input(X).input(Lab).output(T, {N}).output(T, {N, C}).run();
    expectEqual(D.out(0), S.out(0), std::string("loss ") + dtypeName(T));
    expectEqual(D.out(1), S.out(1), std::string("backprop ") + dtypeName(T));
  }
}

TEST(CpuKernels, OneHotRows) {
  for (DType T : FloatTypes)
    for (DType I : {DType::Int32, DType::Int64}) {
      // Indices outside [0, depth) give rows of off values.
      TT X(I, {2, 3}, {0, 3, -1, 2, 4, 1});
      OpRunner R("OneHot");
      R.attr("depth", int64_t(4))
          .attr("on_value", 0.925)
          .attr("off_value", 0.025)
          .attr("dtype", T)
          .input(X)
          .output(T, {2, 3, 4})
          .run();
      const double O = roundTo(T, 0.925), F = roundTo(T, 0.025);
      expectEqual(R.out(0), {O, F, F, F, F, F, F, O, F, F, F, F,
                             F, F, O, F, F, F, F, F, F, O, F, F},
                  std::string(dtypeName(T)) + " " + dtypeName(I));
    }
  OpRunner Bad("OneHot");
  Bad.attr("depth", int64_t(4))
      .input(TT(DType::Int32, {2}, {0, 1}))
      .output(DType::Float32, {2, 5});
  EXPECT_EQ(Bad.create(), "node 'test/OneHot' (OneHot): output float32[2,5] is "
                          "not int32[2] with a last dimension of depth 4");
  OpRunner Float("OneHot");
  Float.attr("depth", int64_t(2))
      .input(TT(DType::Float32, {2}, {0, 1}))
      .output(DType::Float32, {2, 2});
  EXPECT_EQ(Float.create(), "node 'test/OneHot' (OneHot): indices must be "
                            "int32 or int64, got float32[2]");
  OpRunner Shapes("SoftmaxCrossEntropy");
  Shapes.input(TT(DType::Float32, {2, 3}, {0, 0, 0, 0, 0, 0}))
      .input(TT(DType::Float32, {2, 2}, {0, 0, 0, 0}))
      .output(DType::Float32, {2})
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Shapes.create(),
            "node 'test/SoftmaxCrossEntropy' (SoftmaxCrossEntropy): logits "
            "float32[2,3] and labels float32[2,2] must have one shape "
            "[batch, classes]");
}

TEST(CpuKernels, SoftmaxCrossEntropyAndOneHotTypes) {
  const std::string Sce =
      "node 'test/SoftmaxCrossEntropy' (SoftmaxCrossEntropy): ";
  OpRunner Int("SoftmaxCrossEntropy");
  Int.input(TT(DType::Int32, {2, 1}, {0, 0}))
      .input(TT(DType::Int32, {2, 1}, {0, 0}))
      .output(DType::Int32, {2})
      .output(DType::Int32, {2, 1});
  EXPECT_EQ(Int.create(),
            Sce + "logits must be float32 or float64, got int32[2,1]");
  OpRunner Empty("SoftmaxCrossEntropy");
  Empty.input(TT(DType::Float32, {2, 0}, {}))
      .input(TT(DType::Float32, {2, 0}, {}))
      .output(DType::Float32, {2})
      .output(DType::Float32, {2, 0});
  EXPECT_EQ(Empty.create(), Sce + "logits float32[2,0] have no classes");
  OpRunner Out("OneHot");
  Out.attr("depth", int64_t(2))
      .input(TT(DType::Int32, {2}, {0, 1}))
      .output(DType::Int32, {2, 2});
  EXPECT_EQ(Out.create(), "node 'test/OneHot' (OneHot): output must be "
                          "float32 or float64, got int32[2,2]");
}

TEST(CpuKernels, SparseSoftmaxCrossEntropyBadLabelFailsTheStep) {
  TT X(DType::Float32, {3, 2}, {1, 2, 3, 4, 5, 6});
  TT Lab(DType::Int32, {3}, {1, 2, -1});
  OpRunner R("SparseSoftmaxCrossEntropy");
  R.input(X)
      .input(Lab)
      .output(DType::Float32, {3})
      .output(DType::Float32, {3, 2})
      .threads(2)
      .run();
  // The first bad label is named, whichever thread saw it.
  EXPECT_EQ(R.runError(),
            "node 'test/SparseSoftmaxCrossEntropy' "
            "(SparseSoftmaxCrossEntropy): label 2 of example 1 is not one of "
            "the logits' classes [0, 2)");
  // Its row is NaN, the others computed.
  std::vector<double> Loss = R.out(0), Back = R.out(1);
  EXPECT_FALSE(std::isnan(Loss[0]));
  EXPECT_TRUE(std::isnan(Loss[1]));
  EXPECT_TRUE(std::isnan(Loss[2]));
  EXPECT_FALSE(std::isnan(Back[0]) || std::isnan(Back[1]));
  for (int K = 2; K < 6; ++K)
    EXPECT_TRUE(std::isnan(Back[size_t(K)])) << K;
}

TEST(CpuKernels, SparseSoftmaxCrossEntropyOfAnEmptyBatch) {
  // Nothing to compute. (With [0, 0] logits the kernel used to divide by
  // the number of classes, 0: a SIGFPE unless the optimizer moved the
  // division away.)
  for (Shape S : {Shape{0, 0}, Shape{0, 3}}) {
    OpRunner R("SparseSoftmaxCrossEntropy");
    R.input(TT(DType::Float32, S, {}))
        .input(TT(DType::Int64, {0}, {}))
        .output(DType::Float32, {0})
        .output(DType::Float32, S)
        .run();
    EXPECT_TRUE(R.out(0).empty() && R.out(1).empty());
  }
}

TEST(CpuKernels, LogLossAndItsGradient) {
  Rng G;
  for (DType T : FloatTypes)
    for (double Eps : {1e-7, 0.01})
      for (Shape S : {Shape{5}, Shape{8, 3}, Shape{300, 100}}) {
        TT P = G.tensor(T, S, 0.001, 0.999);
        TT L = G.tensor(T, S, 0, 1);
        for (size_t K = 0; K < L.V.size(); K += 3)
          L.V[K] = K % 2; // Mostly 0/1 labels, some soft.
        TT Dy = G.tensor(T, S, -1, 1);
        OpRunner Loss("LogLoss");
        Loss.attr("epsilon", Eps).input(P).input(L).output(T, S).threads(2);
        Loss.run();
        OpRunner Grad("LogLossGrad"); // Inputs p, labels, dy.
        Grad.attr("epsilon", Eps)
            .input(P)
            .input(L)
            .input(Dy)
            .output(T, S)
            .threads(2)
            .run();
        std::vector<double> WantL(P.V.size()), WantG(P.V.size()),
            MagL(P.V.size()), MagG(P.V.size());
        for (size_t K = 0; K < P.V.size(); ++K) {
          double p = P.V[K], l = L.V[K];
          double A = -l * std::log(p + Eps),
                 B = -(1 - l) * std::log(1 - p + Eps);
          WantL[K] = A + B;
          MagL[K] = std::fabs(A) + std::fabs(B);
          double GA = -l / (p + Eps), GB = (1 - l) / (1 - p + Eps);
          WantG[K] = Dy.V[K] * (GA + GB);
          MagG[K] = std::fabs(Dy.V[K]) * (std::fabs(GA) + std::fabs(GB));
        }
        // A few roundings per element (log's argument, the quotients).
        expectClose(Loss.out(0), WantL, T, MagL, "LogLoss", 4);
        expectClose(Grad.out(0), WantG, T, MagG, "LogLossGrad", 4);
      }
}

TEST(CpuKernels, AccuracySparseUsesTheFirstMaximum) {
  TT P(DType::Float32, {4, 3}, {1, 3, 3, 1, 3, 3, 0, 0, 0, 5, 1, 2});
  TT L(DType::Int64, {4}, {1, 2, 0, 0});
  OpRunner R("Accuracy");
  R.input(P).input(L).output(DType::Float32, {4}).run();
  expectEqual(R.out(0), {1, 0, 1, 1});

  Rng G;
  for (DType T : FloatTypes)
    for (DType LT : {DType::Int32, DType::Int64}) {
      TT X = G.tensor(T, {100, 10});
      TT Y = G.tensor(LT, {100}, 0, 9);
      OpRunner A("Accuracy");
      A.input(X).input(Y).output(DType::Float32, {100}).run();
      std::vector<double> Want(100);
      for (int I = 0; I < 100; ++I) {
        int Best = 0;
        for (int J = 1; J < 10; ++J)
          if (X.V[size_t(I * 10 + J)] > X.V[size_t(I * 10 + Best)])
            Best = J;
        Want[size_t(I)] = Best == int(Y.V[size_t(I)]);
      }
      expectEqual(A.out(0), Want, "sparse accuracy");
    }
}

TEST(CpuKernels, AccuracyBinaryAveragesEachExample) {
  TT P(DType::Float32, {2, 4}, {0.9, 0.2, 0.6, 0.5, 0.1, 0.7, 0.8, 0.3});
  TT L(DType::Float32, {2, 4}, {1, 0, 0, 1, 0, 1, 1, 0});
  OpRunner R("Accuracy");
  R.input(P).input(L).output(DType::Float32, {2}).run();
  // Row 0: right, right, wrong, wrong (0.5 is not > 0.5); row 1: all right.
  expectEqual(R.out(0), {0.5, 1});

  TT P1(DType::Float64, {3}, {0.7, 0.2, 0.51});
  TT L1(DType::Int32, {3}, {1, 1, 0});
  OpRunner R1("Accuracy");
  R1.input(P1).input(L1).output(DType::Float32, {3}).run();
  expectEqual(R1.out(0), {1, 0, 0});
}

} // namespace
