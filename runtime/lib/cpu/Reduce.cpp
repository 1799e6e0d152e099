//===- Reduce.cpp - Sums over dimensions ----------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The Reducer of CpuCommon.h and the kernels built on it: Sum, Mean,
// SumToShape, BiasAddGrad; and L2Loss. Sums accumulate in double (floats)
// or int64 (ints), in an order fixed by the shape (planReduction's pieces),
// so that the number of threads never changes a result.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

using namespace mdrt;
using namespace mdrt::cpu;

//===----------------------------------------------------------------------===//
// Reducer
//===----------------------------------------------------------------------===//

int64_t cpu::reductionPieces(int64_t Elems, int64_t Rows) {
  constexpr int64_t PieceElems = int64_t(1) << 15, MaxPieces = 64;
  return std::max<int64_t>(1, std::min({Elems / PieceElems, MaxPieces, Rows}));
}

std::vector<ReduceStep> cpu::planReduction(const std::vector<int64_t> &Shape,
                                           const std::vector<bool> &Reduced) {
  std::vector<ReduceStep> Steps;
  // Maximal runs of reduced / kept dimensions (size-1 dimensions vanish).
  std::vector<std::pair<int64_t, bool>> G;
  for (size_t K = 0; K < Shape.size(); ++K) {
    if (Shape[K] == 0)
      return Steps;
    if (Shape[K] == 1)
      continue;
    if (!G.empty() && G.back().second == Reduced[K])
      G.back().first *= Shape[K];
    else
      G.push_back({Shape[K], Reduced[K]});
  }
  // Sums of many rows into few outputs split their rows into pieces, which
  // threads take; reductions with 1024 outputs or more are parallel over
  // them instead.
  constexpr int64_t ManyOutputs = 1024;
  for (;;) {
    int J = -1;
    for (size_t K = 0; K < G.size(); ++K)
      if (G[K].second)
        J = int(K);
    if (J < 0)
      break;
    ReduceStep St;
    St.R = G[size_t(J)].first;
    for (int K = 0; K < J; ++K)
      St.A *= G[size_t(K)].first;
    for (size_t K = size_t(J) + 1; K < G.size(); ++K)
      St.K *= G[K].first;
    if (St.A * St.K < ManyOutputs)
      St.Pieces = reductionPieces(St.A * St.R * St.K, St.R);
    Steps.push_back(St);
    G.erase(G.begin() + J);
    if (J > 0 && size_t(J) < G.size() && !G[size_t(J) - 1].second &&
        !G[size_t(J)].second) {
      G[size_t(J) - 1].first *= G[size_t(J)].first;
      G.erase(G.begin() + J);
    }
  }
  return Steps;
}

template <typename T>
void Reducer<T>::init(const std::vector<int64_t> &Shape,
                      const std::vector<bool> &Reduced, int NumThreads) {
  Threads = std::max(NumThreads, 1);
  InElems = 1;
  OutElems = 1;
  for (size_t K = 0; K < Shape.size(); ++K) {
    InElems *= Shape[K];
    if (!Reduced[K])
      OutElems *= Shape[K];
  }
  Steps.clear();
  size_t BufSize = 0, PartialSize = 0;
  for (const ReduceStep &RS : planReduction(Shape, Reduced)) {
    Step St;
    St.S = RS;
    St.Threads = threadsFor(RS.A * RS.R * RS.K, GrainCheap, Threads);
    if (RS.Pieces > 1) {
      St.Mode = 2;
      PartialSize = std::max(PartialSize, size_t(RS.Pieces * RS.A * RS.K));
    } else {
      St.Mode = RS.A >= St.Threads ? 0 : 1;
    }
    BufSize = std::max(BufSize, size_t(RS.A * RS.K));
    Steps.push_back(St);
  }
  Buf[0].assign(BufSize, Acc(0));
  Buf[1].assign(Steps.size() > 1 ? BufSize : 0, Acc(0));
  Partials.assign(PartialSize, Acc(0));
}

namespace {
/// D[k] = sum over r in [R0, R1) of Src[(A * R + r) * K + k], k in [K0, K1).
template <typename S, typename Acc>
MDRT_CPU_CLONES void sumRows(const S *Src, int64_t A, int64_t R, int64_t K,
                             int64_t R0, int64_t R1, int64_t K0, int64_t K1,
                             Acc *D) {
  if (K == 1) {
    const S *P = Src + A * R;
    D[0] = laneSum<Acc>(R0, R1, [P](int64_t I) { return Acc(P[I]); });
    return;
  }
  for (int64_t I = K0; I < K1; ++I)
    D[I] = 0;
  for (int64_t I = R0; I < R1; ++I) {
    const S *P = Src + (A * R + I) * K;
    for (int64_t J = K0; J < K1; ++J)
      D[J] += Acc(P[J]);
  }
}
} // namespace

template <typename T>
template <typename S>
void Reducer<T>::runStep(const Step &St, const S *Src, Acc *Dst) {
  const int64_t A = St.S.A, R = St.S.R, K = St.S.K;
  switch (St.Mode) {
  case 0:
    parallelFor(A, 1, St.Threads, [&](int64_t B, int64_t E) {
      for (int64_t I = B; I < E; ++I)
        sumRows(Src, I, R, K, 0, R, 0, K, Dst + I * K);
    });
    return;
  case 1:
    parallelFor(K, 64, St.Threads, [&](int64_t B, int64_t E) {
      for (int64_t I = 0; I < A; ++I)
        sumRows(Src, I, R, K, 0, R, B, E, Dst + I * K);
    });
    return;
  default: {
    // Item p * A + a sums piece p of output row a into Partials.
    Acc *P = Partials.data();
    const int64_t Pieces = St.S.Pieces, Size = A * K;
    parallelFor(Pieces * A, 1, St.Threads, [&](int64_t B, int64_t E) {
      for (int64_t It = B; It < E; ++It) {
        int64_t Piece = It / A, I = It % A;
        sumRows(Src, I, R, K, R * Piece / Pieces, R * (Piece + 1) / Pieces, 0,
                K, P + It * K);
      }
    });
    for (int64_t J = 0; J < Size; ++J) {
      Acc Sum = P[J];
      for (int64_t Piece = 1; Piece < Pieces; ++Piece)
        Sum += P[Piece * Size + J];
      Dst[J] = Sum;
    }
    return;
  }
  }
}

template <typename T>
void Reducer<T>::run(const T *In, T *Out, double Scale, int64_t Divisor) {
  auto Finish = [&](Acc V) -> T {
    if constexpr (std::is_floating_point<T>::value) {
      if (Divisor)
        return T(V / double(Divisor));
      return Scale == 1.0 ? T(V) : T(V * Scale);
    } else {
      return T(Divisor ? V / Divisor : V);
    }
  };
  if (InElems == 0) {
    // Empty sums are 0; an empty mean is 0 / 0.
    T V = T(0);
    if constexpr (std::is_floating_point<T>::value)
      if (Divisor)
        V = std::numeric_limits<T>::quiet_NaN();
    for (int64_t J = 0; J < OutElems; ++J)
      Out[J] = V;
    return;
  }
  if (Steps.empty()) {
    parallelFor(OutElems, GrainCheap, Threads, [&](int64_t B, int64_t E) {
      for (int64_t J = B; J < E; ++J)
        Out[J] = Finish(Acc(In[J]));
    });
    return;
  }
  for (size_t S = 0; S < Steps.size(); ++S) {
    Acc *Dst = Buf[S % 2].data();
    if (S == 0)
      runStep(Steps[S], In, Dst);
    else
      runStep(Steps[S], static_cast<const Acc *>(Buf[(S - 1) % 2].data()), Dst);
  }
  const Acc *Final = Buf[(Steps.size() - 1) % 2].data();
  parallelFor(OutElems, GrainCheap, Threads, [&](int64_t B, int64_t E) {
    for (int64_t J = B; J < E; ++J)
      Out[J] = Finish(Final[J]);
  });
}

namespace mdrt {
namespace cpu {
template class Reducer<float>;
template class Reducer<double>;
template class Reducer<int32_t>;
template class Reducer<int64_t>;
} // namespace cpu
} // namespace mdrt

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

namespace {

/// Where a reduce kernel's plan comes from (filled by the factory).
struct ReduceSpec {
  std::vector<int64_t> Shape;
  std::vector<bool> Reduced;
  bool IsMean = false;
  double Scale = 1.0;
};

template <typename T> class ReduceKernel : public Kernel {
public:
  ReduceKernel(const ReduceSpec &S, int Threads) : IsMean(S.IsMean) {
    R.init(S.Shape, S.Reduced, Threads);
    Scale = S.Scale;
    for (size_t K = 0; K < S.Shape.size(); ++K)
      if (S.Reduced[K])
        Count *= S.Shape[K];
  }
  void run(const ExecContext &C) override {
    T *Out = static_cast<T *>(C.Out[0]);
    if (IsMean && !Count) {
      // The mean of nothing is 0 / 0 (TensorFlow's and the GPU's NaN);
      // integers have no NaN and give 0.
      T V = T(0);
      if constexpr (std::is_floating_point<T>::value)
        V = std::numeric_limits<T>::quiet_NaN();
      std::fill(Out, Out + R.outElements(), V);
      return;
    }
    R.run(static_cast<const T *>(C.In[0]), Out, Scale, IsMean ? Count : 0);
  }

private:
  Reducer<T> R;
  bool IsMean;
  double Scale;
  /// Elements each output sums: the product of the reduced dimensions.
  int64_t Count = 1;
};

KernelOr makeReduce(const KernelInfo &I, const ReduceSpec &S, bool FloatOnly) {
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  int64_t Kept = 1;
  for (size_t K = 0; K < S.Shape.size(); ++K)
    if (!S.Reduced[K])
      Kept *= S.Shape[K];
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], Kept, "output"));
  int T = I.NumThreads;
  switch (I.Inputs[0].Type) {
  case DType::Float32:
    return wrap(std::make_unique<ReduceKernel<float>>(S, T));
  case DType::Float64:
    return wrap(std::make_unique<ReduceKernel<double>>(S, T));
  case DType::Int32:
    if (!FloatOnly)
      return wrap(std::make_unique<ReduceKernel<int32_t>>(S, T));
    break;
  case DType::Int64:
    if (!FloatOnly)
      return wrap(std::make_unique<ReduceKernel<int64_t>>(S, T));
    break;
  default:
    break;
  }
  return typeError(I, I.Inputs[0].Type);
}

template <bool IsMean> KernelOr createSumOrMean(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  ReduceSpec S;
  S.Shape = I.Inputs[0].Shape;
  S.IsMean = IsMean;
  MDRT_RETURN_IF_ERROR(
      reductionAxes(I.Attrs.getInts("axes"), S.Shape.size(), S.Reduced));
  return makeReduce(I, S, /*FloatOnly=*/false);
}

/// x summed down to `shape` (the inverse of broadcasting).
KernelOr createSumToShape(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const std::vector<int64_t> &X = I.Inputs[0].Shape;
  const std::vector<int64_t> &Target = I.Outputs[0].Shape;
  if (I.Attrs.has("shape") && I.Attrs.getInts("shape") != Target)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'shape' attribute's shape " +
                         shapeStr(I.Attrs.getInts("shape")));
  if (Target.size() > X.size())
    return Status::error("cannot sum " + shapeStr(X) + " down to " +
                         shapeStr(Target));
  ReduceSpec S;
  S.Shape = X;
  S.Reduced.assign(X.size(), false);
  size_t Off = X.size() - Target.size();
  for (size_t K = 0; K < X.size(); ++K) {
    if (K < Off || (Target[K - Off] == 1 && X[K] != 1)) {
      S.Reduced[K] = true;
      continue;
    }
    if (Target[K - Off] != X[K])
      return Status::error("cannot sum " + shapeStr(X) + " down to " +
                           shapeStr(Target));
  }
  return makeReduce(I, S, /*FloatOnly=*/false);
}

/// Sum over every axis but the last.
KernelOr createBiasAddGrad(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  const std::vector<int64_t> &X = I.Inputs[0].Shape;
  if (X.empty())
    return Status::error("BiasAddGrad input must have rank >= 1, got " +
                         I.Inputs[0].str());
  ReduceSpec S;
  S.Shape = X;
  S.Reduced.assign(X.size(), true);
  S.Reduced.back() = false;
  return makeReduce(I, S, /*FloatOnly=*/true);
}

template <typename T>
MDRT_CPU_CLONES double sumSquares(const T *X, int64_t Begin, int64_t End) {
  return laneSum<double>(Begin, End, [X](int64_t I) {
    double V = double(X[I]);
    return V * V;
  });
}

/// sum(x^2) / 2, in planReduction's pieces (a one-row sum of N elements).
template <typename T> class L2LossKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
    MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, I.Inputs[0].Type));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], 1, "output"));
    N = I.Inputs[0].numElements();
    Pieces = N ? reductionPieces(N, N) : 1;
    Threads = threadsFor(N, GrainCheap, I.NumThreads);
    Partials.assign(size_t(Pieces), 0.0);
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    const T *X = static_cast<const T *>(C.In[0]);
    double *P = Partials.data();
    const int64_t Len = N, Np = Pieces;
    parallelFor(Np, 1, Threads, [&](int64_t B, int64_t E) {
      for (int64_t Piece = B; Piece < E; ++Piece)
        P[Piece] = sumSquares(X, Len * Piece / Np, Len * (Piece + 1) / Np);
    });
    double Sum = P[0];
    for (int64_t Piece = 1; Piece < Np; ++Piece)
      Sum += P[Piece];
    *static_cast<T *>(C.Out[0]) = T(Sum / 2);
  }

private:
  int64_t N = 0, Pieces = 1;
  int Threads = 1;
  std::vector<double> Partials;
};

KernelOr createL2Loss(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("L2Loss takes 1 input, got 0");
  return makeFloatKernel<L2LossKernel>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerReduceKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "Sum", createSumOrMean<false>);
  R.add(DeviceKind::CPU, "Mean", createSumOrMean<true>);
  R.add(DeviceKind::CPU, "SumToShape", createSumToShape);
  R.add(DeviceKind::CPU, "BiasAddGrad", createBiasAddGrad);
  R.add(DeviceKind::CPU, "L2Loss", createL2Loss);
}
