//===- BatchNormMathTest.cpp - The GPU's batch normalization vs the CPU ---===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/BatchNormMath.h is host code as well as device code:
// these tests run what the GPU's batch-normalization kernels compute (the
// column sums' per-element loads and per-column stores, added here row by
// row in double as the GPU's bands add them in another order, then the
// elementwise formulas) and compare with the CPU's BatchNorm,
// BatchNormInference and BatchNormGrad. Only the order of the double sums
// differs, so the results agree to a few units in the last place of T.
//
//===----------------------------------------------------------------------===//

#include "cuda/BatchNormMath.h"

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

/// ColumnSums on the host: K sums per column of a [Rows, Cols] matrix,
/// then Done(column, sums).
template <int K, typename LoadFn, typename DoneFn>
void columnSums(int64_t Rows, int64_t Cols, LoadFn Load, DoneFn Done) {
  for (int64_t C = 0; C < Cols; ++C) {
    double Sums[K] = {};
    for (int64_t R = 0; R < Rows; ++R) {
      double V[K];
      Load(R, C, V);
      for (int J = 0; J < K; ++J)
        Sums[J] += V[J];
    }
    Done(C, Sums);
  }
}

template <typename T> std::vector<T> asT(const std::vector<double> &V) {
  return std::vector<T>(V.begin(), V.end());
}
template <typename T> std::vector<double> asDouble(const std::vector<T> &V) {
  return std::vector<double>(V.begin(), V.end());
}

void expectUlps(const std::vector<double> &Got, const std::vector<double> &Want,
                DType T, const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  const double Eps = T == DType::Float32 ? 1.2e-7 : 2.3e-16;
  for (size_t K = 0; K < Got.size(); ++K)
    ASSERT_NEAR(Got[K], Want[K], 8 * Eps * (1 + std::fabs(Want[K])))
        << What << " element " << K;
}

template <typename T>
void checkForward(DType Ty, const Shape &S, bool Scale, Rng &R) {
  const int64_t C = S.back(), M = numElements(S) / C;
  const double Eps = 0.01;
  TT X = R.tensor(Ty, S, -2, 3), Beta = R.tensor(Ty, {C}),
     Gamma = R.tensor(Ty, {C}, 0.5, 2);
  OpRunner Run("BatchNorm");
  Run.attr("epsilon", Eps).attr("scale", Scale).input(X).input(Beta);
  if (Scale)
    Run.input(Gamma);
  Run.output(Ty, S).output(Ty, {C}).output(Ty, {C}).run();

  std::vector<T> XT = asT<T>(X.V), BT = asT<T>(Beta.V), GT = asT<T>(Gamma.V);
  const T *G = Scale ? GT.data() : nullptr;
  std::vector<double> MeanD(static_cast<size_t>(C));
  std::vector<T> Mean(static_cast<size_t>(C)), Var(static_cast<size_t>(C)),
      Factor(static_cast<size_t>(C)), MeanT(static_cast<size_t>(C)),
      Y(XT.size());
  columnSums<1>(M, C, cuda::LoadElement<T>{XT.data(), C},
                cuda::StoreMean{MeanD.data(), M});
  columnSums<1>(M, C, cuda::LoadSquaredDeviation<T>{XT.data(), MeanD.data(), C},
                cuda::StoreBatchStats<T>{MeanD.data(), G, Mean.data(),
                                         Var.data(), Factor.data(),
                                         MeanT.data(), M, Eps});
  for (int64_t I = 0; I < M * C; ++I)
    Y[size_t(I)] =
        cuda::bnNormalizeAt<T>(XT.data(), MeanT.data(), Factor.data(),
                               BT.data(), nullptr, nullptr, Eps, I, I % C);
  std::string What =
      std::string(dtypeName(Ty)) + (Scale ? " scale " : " ") + cpu::shapeStr(S);
  expectUlps(asDouble(Mean), Run.out(1), Ty, "mean " + What);
  expectUlps(asDouble(Var), Run.out(2), Ty, "variance " + What);
  expectUlps(asDouble(Y), Run.out(0), Ty, "y " + What);

  // Inference from the statistics just computed.
  OpRunner Inf("BatchNormInference"); // x, beta, gamma, mean, variance.
  Inf.attr("epsilon", Eps).attr("scale", Scale).input(X).input(Beta);
  if (Scale)
    Inf.input(Gamma);
  Inf.input(TT(Ty, {C}, asDouble(Mean)))
      .input(TT(Ty, {C}, asDouble(Var)))
      .output(Ty, S)
      .run();
  for (int64_t I = 0; I < M * C; ++I)
    Y[size_t(I)] =
        cuda::bnNormalizeAt<T>(XT.data(), Mean.data(), nullptr, BT.data(), G,
                               Var.data(), Eps, I, I % C);
  expectUlps(asDouble(Y), Inf.out(0), Ty, "inference " + What);
}

template <typename T>
void checkGrad(DType Ty, const Shape &S, bool Scale, Rng &R) {
  const int64_t C = S.back(), M = numElements(S) / C;
  const double Eps = 0.001;
  TT X = R.tensor(Ty, S, -2, 2), Dy = R.tensor(Ty, S, -1, 1),
     Mean = R.tensor(Ty, {C}, -0.5, 0.5), Var = R.tensor(Ty, {C}, 0.5, 2),
     Gamma = R.tensor(Ty, {C}, 0.5, 2);
  OpRunner Run("BatchNormGrad"); // dy, x, mean, variance, gamma.
  Run.attr("epsilon", Eps)
      .attr("scale", Scale)
      .input(Dy)
      .input(X)
      .input(Mean)
      .input(Var);
  if (Scale)
    Run.input(Gamma);
  Run.output(Ty, S).output(Ty, {C}).output(Ty, {C}).run();

  std::vector<T> XT = asT<T>(X.V), DyT = asT<T>(Dy.V), MT = asT<T>(Mean.V),
                 VT = asT<T>(Var.V), GT = asT<T>(Gamma.V);
  std::vector<double> Inv(static_cast<size_t>(C));
  for (int64_t J = 0; J < C; ++J)
    Inv[size_t(J)] = cuda::bnInvStd(VT[size_t(J)], Eps);
  std::vector<T> DBeta(static_cast<size_t>(C)), DGamma(static_cast<size_t>(C)),
      FA(static_cast<size_t>(C)), FB(static_cast<size_t>(C)),
      FC(static_cast<size_t>(C)), DX(XT.size());
  columnSums<2>(
      M, C,
      cuda::LoadBatchGrad<T>{DyT.data(), XT.data(), MT.data(), Inv.data(), C},
      cuda::StoreBatchGrad<T>{Inv.data(), Scale ? GT.data() : nullptr,
                              DBeta.data(), DGamma.data(), FA.data(), FB.data(),
                              FC.data(), M});
  for (int64_t I = 0; I < M * C; ++I)
    DX[size_t(I)] =
        cuda::bnGradAt<T>(DyT.data(), XT.data(), MT.data(), FA.data(),
                          FB.data(), FC.data(), I, I % C);
  std::string What =
      std::string(dtypeName(Ty)) + (Scale ? " scale " : " ") + cpu::shapeStr(S);
  expectUlps(asDouble(DX), Run.out(0), Ty, "dx " + What);
  expectUlps(asDouble(DBeta), Run.out(1), Ty, "dbeta " + What);
  expectUlps(asDouble(DGamma), Run.out(2), Ty, "dgamma " + What);
}

TEST(CudaBatchNormMath, MatchesTheCpuKernels) {
  Rng R(41);
  for (bool Scale : {false, true})
    for (Shape S :
         {Shape{4, 3}, Shape{2, 3, 4, 5}, Shape{64, 7}, Shape{8, 10, 10, 16}}) {
      checkForward<float>(DType::Float32, S, Scale, R);
      checkForward<double>(DType::Float64, S, Scale, R);
      checkGrad<float>(DType::Float32, S, Scale, R);
      checkGrad<double>(DType::Float64, S, Scale, R);
    }
}

} // namespace
