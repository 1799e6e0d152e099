//===- BatchNormTest.cpp - Batch normalization and its gradient -----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

struct BnRef {
  std::vector<double> Y, Mean, Var;
};

/// Batch normalization of an [M, C] view in double.
BnRef refBatchNorm(const std::vector<double> &X, int64_t C,
                   const std::vector<double> &Beta,
                   const std::vector<double> &Gamma, double Eps) {
  int64_t M = int64_t(X.size()) / C;
  BnRef R;
  R.Mean.assign(size_t(C), 0.0);
  R.Var.assign(size_t(C), 0.0);
  R.Y.resize(X.size());
  for (int64_t I = 0; I < M; ++I)
    for (int64_t J = 0; J < C; ++J)
      R.Mean[size_t(J)] += X[size_t(I * C + J)] / double(M);
  for (int64_t I = 0; I < M; ++I)
    for (int64_t J = 0; J < C; ++J) {
      double D = X[size_t(I * C + J)] - R.Mean[size_t(J)];
      R.Var[size_t(J)] += D * D / double(M);
    }
  for (int64_t I = 0; I < M; ++I)
    for (int64_t J = 0; J < C; ++J)
      R.Y[size_t(I * C + J)] = (X[size_t(I * C + J)] - R.Mean[size_t(J)]) /
                                   std::sqrt(R.Var[size_t(J)] + Eps) *
                                   (Gamma.empty() ? 1.0 : Gamma[size_t(J)]) +
                               Beta[size_t(J)];
  return R;
}

TEST(CpuKernels, BatchNormNormalizesOverAllButTheLastAxis) {
  Rng G;
  for (DType T : FloatTypes)
    for (bool Scale : {false, true})
      for (Shape S : {Shape{4, 3}, Shape{2, 3, 4, 5}, Shape{64, 7},
                      Shape{50, 20, 20, 16}}) {
        int64_t C = S.back();
        TT X = G.tensor(T, S, -2, 3);
        TT Beta = G.tensor(T, {C}), Gamma = G.tensor(T, {C}, 0.5, 2);
        OpRunner R("BatchNorm");
        R.attr("epsilon", 0.01).attr("scale", Scale).input(X).input(Beta);
        if (Scale)
          R.input(Gamma);
        R.output(T, S).output(T, {C}).output(T, {C}).threads(2).run();
        BnRef Want = refBatchNorm(
            X.V, C, Beta.V, Scale ? Gamma.V : std::vector<double>(), 0.01);
        std::string What = std::string(dtypeName(T)) + (Scale ? " scale" : "") +
                           " rank " + std::to_string(S.size());
        // Values of a few units: errors scale with them.
        expectClose(R.out(1), Want.Mean, T, std::vector<double>(size_t(C), 3),
                    "mean " + What);
        expectClose(R.out(2), Want.Var, T, {}, "variance " + What);
        expectClose(R.out(0), Want.Y, T, {}, "y " + What, 4);
      }
  OpRunner Bad("BatchNorm");
  Rng H;
  Bad.attr("scale", true)
      .input(H.tensor(DType::Float32, {4, 3}))
      .input(H.tensor(DType::Float32, {3}))
      .output(DType::Float32, {4, 3})
      .output(DType::Float32, {3})
      .output(DType::Float32, {3});
  EXPECT_EQ(Bad.create(), "node 'test/BatchNorm' (BatchNorm): BatchNorm with "
                          "scale=true takes 3 inputs, got 2");
}

TEST(CpuKernels, BatchNormInferenceUsesTheGivenStatistics) {
  Rng G;
  for (DType T : FloatTypes)
    for (bool Scale : {false, true})
      for (Shape S : {Shape{4, 3}, Shape{2, 3, 4, 5}, Shape{500, 100}}) {
        int64_t C = S.back();
        TT X = G.tensor(T, S, -2, 3), Beta = G.tensor(T, {C}),
           Gamma = G.tensor(T, {C}, 0.5, 2), Mean = G.tensor(T, {C}),
           Var = G.tensor(T, {C}, 0.1, 3);
        OpRunner R("BatchNormInference"); // x, beta, gamma, mean, variance.
        R.attr("epsilon", 0.01).attr("scale", Scale).input(X).input(Beta);
        if (Scale)
          R.input(Gamma);
        R.input(Mean).input(Var).output(T, S).threads(2).run();
        std::vector<double> Want(X.V.size());
        for (size_t K = 0; K < Want.size(); ++K) {
          size_t J = K % size_t(C);
          Want[K] = (X.V[K] - Mean.V[J]) / std::sqrt(Var.V[J] + 0.01) *
                        (Scale ? Gamma.V[J] : 1.0) +
                    Beta.V[J];
        }
        expectClose(R.out(0), Want, T, std::vector<double>(Want.size(), 5),
                    std::string("BatchNormInference ") + dtypeName(T) +
                        (Scale ? " scale" : ""));
      }
  Rng H;
  OpRunner Bad("BatchNormInference");
  Bad.attr("scale", true)
      .input(H.tensor(DType::Float32, {4, 3}))
      .input(H.tensor(DType::Float32, {3}))
      .input(H.tensor(DType::Float32, {3}))
      .input(H.tensor(DType::Float32, {3}))
      .output(DType::Float32, {4, 3});
  EXPECT_EQ(Bad.create(),
            "node 'test/BatchNormInference' (BatchNormInference): "
            "BatchNormInference with scale=true takes 5 inputs, got 4");
}

TEST(CpuKernels, BatchNormGradMatchesFormulaAndFiniteDifferences) {
  Rng G;
  const double Eps = 0.001;
  for (DType T : FloatTypes)
    for (bool Scale : {false, true})
      for (Shape S : {Shape{5, 3}, Shape{2, 3, 2, 4}, Shape{3000, 40}}) {
        int64_t C = S.back(), M = numElements(S) / C;
        TT X = G.tensor(T, S, -2, 2), Dy = G.tensor(T, S, -1, 1);
        TT Beta = G.tensor(T, {C}), Gamma = G.tensor(T, {C}, 0.5, 2);
        std::vector<double> NoGamma;
        const std::vector<double> &Gm = Scale ? Gamma.V : NoGamma;
        BnRef F = refBatchNorm(X.V, C, Beta.V, Gm, Eps);
        TT Mean(T, {C}, F.Mean), Var(T, {C}, F.Var);
        for (double &V : Mean.V)
          V = roundTo(T, V);
        for (double &V : Var.V)
          V = roundTo(T, V);
        OpRunner R("BatchNormGrad"); // dy, x, mean, variance, gamma.
        R.attr("epsilon", Eps)
            .attr("scale", Scale)
            .input(Dy)
            .input(X)
            .input(Mean)
            .input(Var);
        if (Scale)
          R.input(Gamma);
        R.output(T, S).output(T, {C}).output(T, {C}).threads(2).run();

        // The closed form.
        std::vector<double> DX(X.V.size()), DB(size_t(C), 0.0),
            DG(size_t(C), 0.0), Mag(size_t(C), 0.0);
        for (int64_t I = 0; I < M; ++I)
          for (int64_t J = 0; J < C; ++J) {
            size_t K = size_t(I * C + J);
            double XH = (X.V[K] - Mean.V[size_t(J)]) /
                        std::sqrt(Var.V[size_t(J)] + Eps);
            DB[size_t(J)] += Dy.V[K];
            DG[size_t(J)] += Dy.V[K] * XH;
            Mag[size_t(J)] += std::fabs(Dy.V[K]) * (1 + std::fabs(XH));
          }
        for (int64_t I = 0; I < M; ++I)
          for (int64_t J = 0; J < C; ++J) {
            size_t K = size_t(I * C + J);
            double Inv = 1 / std::sqrt(Var.V[size_t(J)] + Eps);
            double XH = (X.V[K] - Mean.V[size_t(J)]) * Inv;
            double Gv = Gm.empty() ? 1.0 : Gm[size_t(J)];
            DX[K] = Gv * Inv *
                    (Dy.V[K] - DB[size_t(J)] / double(M) -
                     XH * DG[size_t(J)] / double(M));
          }
        std::string What = std::string(dtypeName(T)) + (Scale ? " scale" : "") +
                           " " + std::to_string(M) + "x" + std::to_string(C);
        expectClose(R.out(1), DB, T, Mag, "dbeta " + What);
        expectClose(R.out(2), DG, T, Mag, "dgamma " + What);
        expectClose(R.out(0), DX, T, {}, "dx " + What, 10);

        if (T != DType::Float64 || M > 10)
          continue;
        // The closed form is the gradient of sum(dy * y(x)).
        auto Loss = [&](const std::vector<double> &XV,
                        const std::vector<double> &BV,
                        const std::vector<double> &GV) {
          BnRef B = refBatchNorm(XV, C, BV, GV, Eps);
          double L = 0;
          for (size_t K = 0; K < XV.size(); ++K)
            L += Dy.V[K] * B.Y[K];
          return L;
        };
        std::vector<double> Got = R.out(0), GotB = R.out(1), GotG = R.out(2);
        const double H = 1e-6;
        for (size_t K = 0; K < X.V.size(); ++K) {
          std::vector<double> Xp = X.V, Xm = X.V;
          Xp[K] += H;
          Xm[K] -= H;
          double FD = (Loss(Xp, Beta.V, Gm) - Loss(Xm, Beta.V, Gm)) / (2 * H);
          EXPECT_NEAR(Got[K], FD, 1e-6) << "dx " << K;
        }
        for (size_t J = 0; J < size_t(C); ++J) {
          std::vector<double> Bp = Beta.V, Bm = Beta.V;
          Bp[J] += H;
          Bm[J] -= H;
          EXPECT_NEAR(GotB[J],
                      (Loss(X.V, Bp, Gm) - Loss(X.V, Bm, Gm)) / (2 * H), 1e-6);
          std::vector<double> Gp = Scale ? Gamma.V
                                         : std::vector<double>(size_t(C), 1.0),
                              Gn = Gp;
          Gp[J] += H;
          Gn[J] -= H;
          EXPECT_NEAR(GotG[J],
                      (Loss(X.V, Beta.V, Gp) - Loss(X.V, Beta.V, Gn)) / (2 * H),
                      1e-6);
        }
      }
}

} // namespace
