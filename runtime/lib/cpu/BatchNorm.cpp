//===- BatchNorm.cpp - Batch normalization and its gradient ---------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// BatchNorm, BatchNormInference and BatchNormGrad over every axis but the
// last (x is viewed as [M, C]). Statistics are exact two-pass sums in double,
// the rows in pieces fixed by the shape (BatchNormDims::Pieces) that threads
// take whole, the pieces' sums added in order: the same bits on any number of
// threads, and the order of the GPU's reference kernels. Plain loops:
// the exact statistics outputs (biased variance) and the gradient's input order
// make oneDNN's batch normalization an awkward fit for little gain on the model
// sizes this runs.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <cmath>
#include <limits>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

/// Shared parameters: [M, C] view, epsilon, scale, and the threads.
struct BnShape : BatchNormDims {
  int Threads = 1;

  Status init(const KernelInfo &I, BatchNormOp Op) {
    MDRT_RETURN_IF_ERROR(batchNormDims(I, Op, *this));
    Threads = threadsFor(M * C, GrainCheap, I.NumThreads);
    return Status::ok();
  }
};

/// \p K column sums of rows of the [M, C] view, in double, into \p Out0[C]
/// (and \p Out1[C]): Fn(row, P0, P1) adds row's terms to P0[C] (and P1[C]).
/// Piece p of S.Pieces sums its rows from zero in row order into
/// \p Partials[p * K * C ...] (Pieces * K * C of them); a column's sum is
/// piece 0's plus the others' in piece order (the Reducer's order).
template <typename F>
void columnSums(const BnShape &S, std::vector<double> &Partials, unsigned K,
                F &&Fn, double *Out0, double *Out1 = nullptr) {
  const int64_t M = S.M, C = S.C, Pieces = S.Pieces, Size = int64_t(K) * C;
  double *P = Partials.data();
  parallelFor(Pieces, 1, S.Threads, [&](int64_t B, int64_t E) {
    for (int64_t Piece = B; Piece < E; ++Piece) {
      double *Mine = P + Piece * Size;
      for (int64_t J = 0; J < Size; ++J)
        Mine[J] = 0;
      for (int64_t R = M * Piece / Pieces; R < M * (Piece + 1) / Pieces; ++R)
        Fn(R, Mine, Mine + C);
    }
  });
  for (int64_t J = 0; J < C; ++J) {
    double A = P[J], B = K > 1 ? P[C + J] : 0.0;
    for (int64_t Piece = 1; Piece < Pieces; ++Piece) {
      A += P[Piece * Size + J];
      if (K > 1)
        B += P[Piece * Size + C + J];
    }
    Out0[J] = A;
    if (Out1)
      Out1[J] = B;
  }
}

/// y = (x - mean) * (gamma / sqrt(var + eps)) + beta with per-column
/// factors rounded to T (BatchNorm's output and BatchNormInference).
template <typename T>
MDRT_CPU_CLONES void normalizeRows(const T *X, T *Y, const T *Mean,
                                   const T *Factor, const T *Beta, int64_t C,
                                   int64_t R0, int64_t R1) {
  for (int64_t R = R0; R < R1; ++R) {
    const T *XR = X + R * C;
    T *YR = Y + R * C;
    for (int64_t J = 0; J < C; ++J)
      YR[J] = (XR[J] - Mean[J]) * Factor[J] + Beta[J];
  }
}

/// Inputs x, beta, gamma (with scale); outputs y, mean, variance.
template <typename T> class BatchNormKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(S.init(I, BatchNormOp::Train));
    Partials.resize(size_t(S.Pieces) * size_t(S.C));
    Sum.resize(size_t(S.C));
    MeanD.resize(size_t(S.C));
    Factor.resize(size_t(S.C));
    MeanT.resize(size_t(S.C));
    return Status::ok();
  }

  void run(const ExecContext &Ctx) override {
    const T *X = static_cast<const T *>(Ctx.In[0]);
    const T *Beta = static_cast<const T *>(Ctx.In[1]);
    const T *Gamma = S.Scale ? static_cast<const T *>(Ctx.In[2]) : nullptr;
    T *Y = static_cast<T *>(Ctx.Out[0]);
    T *Mean = static_cast<T *>(Ctx.Out[1]);
    T *Var = static_cast<T *>(Ctx.Out[2]);
    const int64_t M = S.M, C = S.C;
    if (!C)
      return;
    if (!M) {
      for (int64_t J = 0; J < C; ++J)
        Mean[J] = Var[J] = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    double *Sm = Sum.data();
    columnSums(
        S, Partials, 1,
        [&](int64_t R, double *P, double *) {
          const T *XR = X + R * C;
          for (int64_t J = 0; J < C; ++J)
            P[J] += double(XR[J]);
        },
        Sm);
    // Mean in double for the variance pass; the output rounds it.
    for (int64_t J = 0; J < C; ++J) {
      MeanD[size_t(J)] = Sm[J] / double(M);
      Mean[J] = T(MeanD[size_t(J)]);
    }
    const double *MD = MeanD.data();
    columnSums(
        S, Partials, 1,
        [&](int64_t R, double *P, double *) {
          const T *XR = X + R * C;
          for (int64_t J = 0; J < C; ++J) {
            double D = double(XR[J]) - MD[J];
            P[J] += D * D;
          }
        },
        Sm);
    for (int64_t J = 0; J < C; ++J)
      Var[J] = T(Sm[J] / double(M));
    // y = (x - mean) * (gamma / sqrt(var + eps)) + beta, per column
    // factors rounded to T.
    std::vector<T> &Fac = Factor, &Mn = MeanT;
    for (int64_t J = 0; J < C; ++J) {
      double G = Gamma ? double(Gamma[J]) : 1.0;
      Fac[size_t(J)] = T(G / std::sqrt(double(Var[J]) + S.Eps));
      Mn[size_t(J)] = Mean[J];
    }
    const T *FP = Fac.data(), *MP = Mn.data();
    parallelFor(M, std::max<int64_t>(1, GrainCheap / C), S.Threads,
                [=](int64_t B, int64_t E) {
                  normalizeRows(X, Y, MP, FP, Beta, C, B, E);
                });
  }

private:
  BnShape S;
  std::vector<double> Partials, Sum, MeanD;
  std::vector<T> Factor, MeanT;
};

/// Inputs x, beta, gamma (with scale), mean, variance: the normalization
/// with given statistics (the evaluation program's BatchNorm).
template <typename T> class BatchNormInferenceKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(S.init(I, BatchNormOp::Inference));
    Factor.resize(size_t(S.C));
    return Status::ok();
  }

  void run(const ExecContext &Ctx) override {
    unsigned K = S.Scale ? 3 : 2;
    const T *X = static_cast<const T *>(Ctx.In[0]);
    const T *Beta = static_cast<const T *>(Ctx.In[1]);
    const T *Gamma = S.Scale ? static_cast<const T *>(Ctx.In[2]) : nullptr;
    const T *Mean = static_cast<const T *>(Ctx.In[K]);
    const T *Var = static_cast<const T *>(Ctx.In[K + 1]);
    T *Y = static_cast<T *>(Ctx.Out[0]);
    const int64_t C = S.C;
    T *F = Factor.data();
    for (int64_t J = 0; J < C; ++J)
      F[J] = T((Gamma ? double(Gamma[J]) : 1.0) /
               std::sqrt(double(Var[J]) + S.Eps));
    parallelFor(S.M, std::max<int64_t>(1, GrainCheap / std::max<int64_t>(C, 1)),
                S.Threads, [=](int64_t B, int64_t E) {
                  normalizeRows(X, Y, Mean, static_cast<const T *>(F), Beta, C,
                                B, E);
                });
  }

private:
  BnShape S;
  std::vector<T> Factor;
};

/// Inputs dy, x, mean, variance, gamma (with scale); outputs dx, dbeta,
/// dgamma.
template <typename T> class BatchNormGradKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(S.init(I, BatchNormOp::Grad));
    Partials.resize(size_t(S.Pieces) * size_t(2 * S.C));
    DBeta.resize(size_t(S.C));
    DGamma.resize(size_t(S.C));
    Inv.resize(size_t(S.C));
    FA.resize(size_t(S.C));
    FB.resize(size_t(S.C));
    FC.resize(size_t(S.C));
    return Status::ok();
  }

  void run(const ExecContext &Ctx) override {
    const T *DY = static_cast<const T *>(Ctx.In[0]);
    const T *X = static_cast<const T *>(Ctx.In[1]);
    const T *Mean = static_cast<const T *>(Ctx.In[2]);
    const T *Var = static_cast<const T *>(Ctx.In[3]);
    const T *Gamma = S.Scale ? static_cast<const T *>(Ctx.In[4]) : nullptr;
    T *DX = static_cast<T *>(Ctx.Out[0]);
    T *DBetaOut = static_cast<T *>(Ctx.Out[1]);
    T *DGammaOut = static_cast<T *>(Ctx.Out[2]);
    const int64_t M = S.M, C = S.C;
    if (!C)
      return;
    double *IV = Inv.data();
    for (int64_t J = 0; J < C; ++J)
      IV[J] = 1.0 / std::sqrt(double(Var[J]) + S.Eps);
    // dbeta = sum dy, dgamma = sum dy x_hat.
    columnSums(
        S, Partials, 2,
        [&](int64_t R, double *PB, double *PG) {
          const T *DR = DY + R * C, *XR = X + R * C;
          for (int64_t J = 0; J < C; ++J) {
            double D = double(DR[J]);
            PB[J] += D;
            PG[J] += D * (double(XR[J]) - double(Mean[J])) * IV[J];
          }
        },
        DBeta.data(), DGamma.data());
    // dx = gamma inv (dy - dbeta / M - x_hat dgamma / M).
    for (int64_t J = 0; J < C; ++J) {
      DBetaOut[J] = T(DBeta[size_t(J)]);
      DGammaOut[J] = T(DGamma[size_t(J)]);
      double G = Gamma ? double(Gamma[J]) : 1.0;
      FA[size_t(J)] = T(G * IV[J]);
      FB[size_t(J)] = T(M ? DBeta[size_t(J)] / double(M) : 0.0);
      FC[size_t(J)] = T(M ? DGamma[size_t(J)] / double(M) * IV[J] : 0.0);
    }
    const T *A = FA.data(), *B = FB.data(), *CC = FC.data();
    parallelFor(M, std::max<int64_t>(1, GrainCheap / C), S.Threads,
                [&](int64_t Begin, int64_t End) {
                  for (int64_t R = Begin; R < End; ++R) {
                    const T *DR = DY + R * C, *XR = X + R * C;
                    T *OR = DX + R * C;
                    for (int64_t J = 0; J < C; ++J)
                      OR[J] = A[J] * (DR[J] - B[J] - (XR[J] - Mean[J]) * CC[J]);
                  }
                });
  }

private:
  BnShape S;
  std::vector<double> Partials, DBeta, DGamma, Inv;
  std::vector<T> FA, FB, FC;
};

KernelOr createBatchNorm(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("BatchNorm takes 2 or 3 inputs, got 0");
  return makeFloatKernel<BatchNormKernel>(I, I.Inputs[0].Type);
}

KernelOr createBatchNormInference(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("BatchNormInference takes 4 or 5 inputs, got 0");
  return makeFloatKernel<BatchNormInferenceKernel>(I, I.Inputs[0].Type);
}

KernelOr createBatchNormGrad(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("BatchNormGrad takes 4 or 5 inputs, got 0");
  return makeFloatKernel<BatchNormGradKernel>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerBatchNormKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "BatchNorm", createBatchNorm);
  R.add(DeviceKind::CPU, "BatchNormInference", createBatchNormInference);
  R.add(DeviceKind::CPU, "BatchNormGrad", createBatchNormGrad);
}
