//===- ReduceTest.cpp - Sum, Mean, SumToShape, BiasAddGrad, L2Loss --------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

/// Naive sum of \p X over the flagged dimensions: the sums and the sums of
/// absolute values (the rounding scale).
void refReduce(const TT &X, const std::vector<bool> &Red,
               std::vector<double> &Sum, std::vector<double> &Abs,
               int64_t &Count) {
  Shape Kept;
  for (size_t K = 0; K < X.Dims.size(); ++K)
    Kept.push_back(Red[K] ? 1 : X.Dims[K]);
  Sum.assign(size_t(numElements(Kept)), 0.0);
  Abs.assign(Sum.size(), 0.0);
  for (int64_t I = 0; I < X.size(); ++I) {
    int64_t O = broadcastIndex(unflatten(I, X.Dims), Kept);
    Sum[size_t(O)] += X.V[size_t(I)];
    Abs[size_t(O)] += std::fabs(X.V[size_t(I)]);
  }
  Count = Sum.empty() ? 0 : X.size() / int64_t(Sum.size());
}

struct ReduceCase {
  Shape S;
  std::vector<int64_t> Axes;
};

const ReduceCase ReduceCases[] = {{{2, 3, 4, 5}, {}},
                                  {{2, 3, 4, 5}, {0}},
                                  {{2, 3, 4, 5}, {1}},
                                  {{2, 3, 4, 5}, {3}},
                                  {{2, 3, 4, 5}, {-1}},
                                  {{2, 3, 4, 5}, {0, 2}},
                                  {{2, 3, 4, 5}, {1, 3}},
                                  {{2, 3, 4, 5}, {-3, -1}},
                                  {{2, 3, 4, 5}, {0, 1, 2, 3}},
                                  {{2, 1, 4}, {1}},
                                  {{2, 1, 4}, {0, 1}},
                                  {{7}, {0}},
                                  {{}, {}},
                                  {{1000, 300}, {0}},
                                  {{1000, 300}, {1}},
                                  {{7, 50000}, {0}},
                                  {{7, 50000}, {1}},
                                  {{300000}, {}},
                                  {{3, 50000, 2}, {1}},
                                  {{40, 50, 60}, {0, 2}},
                                  {{2, 30000}, {0}}};

void checkReduce(bool IsMean) {
  Rng G;
  const char *Op = IsMean ? "Mean" : "Sum";
  for (DType T : NumericTypes)
    for (const ReduceCase &C : ReduceCases)
      for (bool Keep : {false, true}) {
        TT X = G.tensor(T, C.S, -10, 10);
        std::vector<bool> Red(C.S.size(), C.Axes.empty());
        for (int64_t A : C.Axes)
          Red[size_t(A < 0 ? A + int64_t(C.S.size()) : A)] = true;
        Shape Out;
        for (size_t K = 0; K < C.S.size(); ++K)
          if (!Red[K] || Keep)
            Out.push_back(Red[K] ? 1 : C.S[K]);
        OpRunner R(Op);
        R.attr("axes", C.Axes)
            .attr("keep_dims", Keep)
            .input(X)
            .output(T, Out)
            .threads(2)
            .run();
        std::vector<double> Sum, Abs;
        int64_t Count;
        refReduce(X, Red, Sum, Abs, Count);
        for (size_t K = 0; K < Sum.size(); ++K) {
          if (IsMean) {
            Sum[K] = isFloat(T) ? Sum[K] / double(Count)
                                : std::trunc(Sum[K] / double(Count));
            Abs[K] /= double(Count);
          }
          if (isFloat(T))
            Abs[K] = std::max(Abs[K], 1e-30);
        }
        std::string What = std::string(Op) + " " + dtypeName(T) + " rank " +
                           std::to_string(C.S.size()) + " axes " +
                           std::to_string(C.Axes.size());
        if (isFloat(T))
          expectClose(R.out(0), Sum, T, Abs, What);
        else
          expectEqual(R.out(0), Sum, What);
      }
}

TEST(CpuKernels, SumOverAxes) { checkReduce(false); }

TEST(CpuKernels, MeanOverAxes) { checkReduce(true); }

TEST(CpuKernels, SumAndMeanOfNothing) {
  // Reduced dimensions of size 0: a sum of nothing is 0, a mean 0 / 0,
  // NaN for floats as in TensorFlow and on the GPU (it was 0), 0 for
  // integers. Kept dimensions of size 0 have no output.
  struct Case {
    Shape S;
    std::vector<int64_t> Axes;
    Shape Out;
  };
  for (const Case &C : {Case{{0}, {}, {}}, Case{{3, 0}, {1}, {3}},
                        Case{{0, 4}, {0}, {4}}, Case{{0, 4}, {1}, {0}}})
    for (DType T : NumericTypes)
      for (bool IsMean : {false, true}) {
        OpRunner R(IsMean ? "Mean" : "Sum");
        R.attr("axes", C.Axes)
            .input(TT(T, C.S, {}))
            .output(T, C.Out)
            .threads(2)
            .run();
        std::vector<double> Got = R.out(0);
        std::string What = std::string(IsMean ? "Mean " : "Sum ") +
                           dtypeName(T) + " of " + std::to_string(C.S.size()) +
                           " dims, " + std::to_string(Got.size()) + " out";
        ASSERT_EQ(int64_t(Got.size()), numElements(C.Out)) << What;
        for (double V : Got) {
          if (IsMean && isFloat(T))
            EXPECT_TRUE(std::isnan(V)) << What;
          else
            EXPECT_EQ(V, 0.0) << What;
        }
      }
}

TEST(CpuKernels, SumSingleThreadMatchesTwoThreads) {
  Rng G;
  TT X = G.tensor(DType::Float64, {5000, 64});
  std::vector<double> Outs[2];
  for (int Threads : {1, 2}) {
    OpRunner R("Sum");
    R.attr("axes", std::vector<int64_t>{0})
        .input(X)
        .output(DType::Float64, {64})
        .threads(Threads)
        .run();
    Outs[Threads - 1] = R.out(0);
  }
  expectClose(Outs[0], Outs[1], DType::Float64, {}, "threads");
}

TEST(CpuKernels, ReduceRejectsBadAxes) {
  Rng G;
  const std::pair<std::vector<int64_t>, const char *> Cases[] = {
      {{2}, "reduction axis 2 is out of range for rank 2"},
      {{-3}, "reduction axis -3 is out of range for rank 2"},
      {{0, -2}, "reduction axis -2 given twice"}};
  for (const auto &[Axes, Message] : Cases) {
    OpRunner R("Sum");
    R.attr("axes", Axes)
        .input(G.tensor(DType::Float32, {2, 3}))
        .output(DType::Float32, {3});
    EXPECT_EQ(R.create(), std::string("node 'test/Sum' (Sum): ") + Message);
  }
}

TEST(CpuKernels, SumToShapeInvertsBroadcasting) {
  Rng G;
  const std::pair<Shape, Shape> Cases[] = {
      {{2, 3, 4}, {3, 4}},    {{2, 3, 4}, {3, 1}},     {{2, 3, 4}, {1, 4}},
      {{2, 3, 4}, {2, 1, 4}}, {{2, 3, 4}, {4}},        {{2, 3, 4}, {}},
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {1, 1, 1}},  {{5, 1, 3}, {1, 3}},
      {{1000, 300}, {300}},   {{1000, 300}, {1000, 1}}};
  for (DType T : NumericTypes)
    for (const auto &[XS, TS] : Cases) {
      TT X = G.tensor(T, XS, -10, 10);
      OpRunner R("SumToShape");
      R.attr("shape", TS).input(X).output(T, TS).threads(2).run();
      // Flags: the leading extra dimensions and those where TS has 1.
      std::vector<bool> Red(XS.size());
      size_t Off = XS.size() - TS.size();
      for (size_t K = 0; K < XS.size(); ++K)
        Red[K] = K < Off || (TS[K - Off] == 1 && XS[K] != 1);
      std::vector<double> Sum, Abs;
      int64_t Count;
      refReduce(X, Red, Sum, Abs, Count);
      if (isFloat(T))
        expectClose(R.out(0), Sum, T, Abs, "SumToShape");
      else
        expectEqual(R.out(0), Sum, "SumToShape");
    }
  OpRunner Bad("SumToShape");
  Bad.attr("shape", Shape{3})
      .input(G.tensor(DType::Float32, {2, 4}))
      .output(DType::Float32, {3});
  EXPECT_EQ(
      Bad.create(),
      "node 'test/SumToShape' (SumToShape): cannot sum [2,4] down to [3]");
}

TEST(CpuKernels, BiasAddGradSumsAllButTheLastAxis) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{5}, Shape{5, 3}, Shape{2, 3, 4, 6},
                    Shape{100, 28, 28, 32}, Shape{64, 1024}}) {
      TT Dy = G.tensor(T, S);
      OpRunner R("BiasAddGrad");
      R.input(Dy).output(T, {S.back()}).threads(2).run();
      std::vector<bool> Red(S.size(), true);
      Red.back() = false;
      std::vector<double> Sum, Abs;
      int64_t Count;
      refReduce(Dy, Red, Sum, Abs, Count);
      expectClose(R.out(0), Sum, T, Abs, "BiasAddGrad");
    }
}

TEST(CpuKernels, L2LossIsHalfTheSumOfSquares) {
  Rng G;
  for (DType T : FloatTypes)
    for (Shape S : {Shape{}, Shape{7}, Shape{30, 40}, Shape{3136, 100}}) {
      TT X = G.tensor(T, S, -3, 3);
      OpRunner R("L2Loss");
      R.input(X).output(T, {}).threads(2).run();
      double Want = 0;
      for (double V : X.V)
        Want += V * V;
      expectClose(R.out(0), {Want / 2}, T, {}, "L2Loss");
    }
}

} // namespace
