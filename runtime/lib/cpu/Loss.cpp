//===- Loss.cpp - Losses and accuracy -------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// SparseSoftmaxCrossEntropy, SoftmaxCrossEntropy, OneHot, LogLoss,
// LogLossGrad and Accuracy.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <atomic>
#include <cmath>
#include <limits>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

/// Calls Fn((E *)nullptr) for the C++ type E of \p D's element type
/// (numeric types); \p What names \p D in the error.
template <typename F>
KernelOr dispatchNumeric(const TensorDesc &D, const char *What, F &&Fn) {
  switch (D.Type) {
  case DType::Float32:
    return Fn((float *)nullptr);
  case DType::Float64:
    return Fn((double *)nullptr);
  case DType::Int32:
    return Fn((int32_t *)nullptr);
  case DType::Int64:
    return Fn((int64_t *)nullptr);
  default:
    return Status::error(std::string(What) +
                         " must be float32, float64, int32 or int64, got " +
                         D.str());
  }
}

//===----------------------------------------------------------------------===//
// SparseSoftmaxCrossEntropy
//===----------------------------------------------------------------------===//

/// loss[i] = logsumexp(x_i) - x_i[label_i]; backprop = softmax - onehot.
/// A label outside [0, C) fails the step (as TensorFlow's CPU kernel does),
/// its row NaN.
template <typename T, typename L> class SsceKernel : public Kernel {
public:
  SsceKernel(std::string Name, int64_t N, int64_t C, int Threads)
      : Name(std::move(Name)), N(N), C(C), Threads(Threads) {}

  void run(const ExecContext &Ctx) override {
    const T *X = static_cast<const T *>(Ctx.In[0]);
    const L *Labels = static_cast<const L *>(Ctx.In[1]);
    T *Loss = static_cast<T *>(Ctx.Out[0]);
    T *Back = static_cast<T *>(Ctx.Out[1]);
    const int64_t NC = C;
    // [0, 0] logits (the factory rejects classless logits of a batch).
    if (!NC)
      return;
    std::atomic<bool> Bad{false};
    parallelFor(N, std::max<int64_t>(1, GrainExpensive / NC), Threads,
                [&](int64_t B, int64_t E) {
                  for (int64_t I = B; I < E; ++I) {
                    const T *XR = X + I * NC;
                    T *BR = Back + I * NC;
                    int64_t Label = int64_t(Labels[I]);
                    if (Label < 0 || Label >= NC) {
                      const T Nan = std::numeric_limits<T>::quiet_NaN();
                      Loss[I] = Nan;
                      for (int64_t J = 0; J < NC; ++J)
                        BR[J] = Nan;
                      Bad.store(true, std::memory_order_relaxed);
                      continue;
                    }
                    T Max;
                    const double Sum = softmaxNumerators(XR, BR, NC, Max);
                    Loss[I] =
                        T(std::log(Sum) + (double(Max) - double(XR[Label])));
                    const double Inv = 1.0 / Sum;
                    for (int64_t J = 0; J < NC; ++J)
                      BR[J] = T(double(BR[J]) * Inv);
                    BR[Label] -= T(1);
                  }
                });
    if (Bad.load(std::memory_order_relaxed))
      reportLabel(Ctx, Labels);
  }

private:
  /// Fails the step with the first label out of range.
  void reportLabel(const ExecContext &Ctx, const L *Labels) const {
    for (int64_t I = 0; I < N; ++I)
      if (int64_t(Labels[I]) < 0 || int64_t(Labels[I]) >= C) {
        Ctx.fail(Status::error(
            "node '" + Name + "' (SparseSoftmaxCrossEntropy): label " +
            std::to_string(int64_t(Labels[I])) + " of example " +
            std::to_string(I) + " is not one of the logits' classes [0, " +
            std::to_string(C) + ")"));
        return;
      }
  }

  std::string Name;
  int64_t N, C;
  int Threads;
};

KernelOr createSsce(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 2));
  const TensorDesc &X = I.Inputs[0], &Lab = I.Inputs[1];
  if (X.rank() != 2 || Lab.rank() != 1 || Lab.Shape[0] != X.Shape[0])
    return Status::error("logits " + X.str() + " and labels " + Lab.str() +
                         " do not match");
  if (!isIntType(Lab.Type))
    return Status::error("labels must be int32 or int64, got " + Lab.str());
  MDRT_RETURN_IF_ERROR(checkTypes(I, {}, {0, 1}, X.Type));
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], X.Shape[0], "output"));
  MDRT_RETURN_IF_ERROR(
      checkElements(I, I.Outputs[1], X.numElements(), "output"));
  int64_t N = X.Shape[0], C = X.Shape[1];
  if (C < 1 && N > 0)
    return Status::error("logits " + X.str() + " have no classes");
  int T = I.NumThreads;
  bool L64 = Lab.Type == DType::Int64;
  if (X.Type == DType::Float32)
    return L64 ? wrap(std::make_unique<SsceKernel<float, int64_t>>(I.Name, N, C,
                                                                   T))
               : wrap(std::make_unique<SsceKernel<float, int32_t>>(I.Name, N, C,
                                                                   T));
  if (X.Type == DType::Float64)
    return L64 ? wrap(std::make_unique<SsceKernel<double, int64_t>>(I.Name, N,
                                                                    C, T))
               : wrap(std::make_unique<SsceKernel<double, int32_t>>(I.Name, N,
                                                                    C, T));
  return typeError(I, X.Type);
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropy and OneHot
//===----------------------------------------------------------------------===//

/// loss[i] = sum_j y_ij (logsumexp(x_i) - x_ij); backprop = softmax - y,
/// with SparseSoftmaxCrossEntropy's rounding (sums in double).
template <typename T> class SceKernel : public Kernel {
public:
  SceKernel(int64_t N, int64_t C, int Threads) : N(N), C(C), Threads(Threads) {}

  void run(const ExecContext &Ctx) override {
    const T *X = static_cast<const T *>(Ctx.In[0]);
    const T *Y = static_cast<const T *>(Ctx.In[1]);
    T *Loss = static_cast<T *>(Ctx.Out[0]);
    T *Back = static_cast<T *>(Ctx.Out[1]);
    const int64_t NC = C;
    if (!NC)
      return;
    parallelFor(N, std::max<int64_t>(1, GrainExpensive / NC), Threads,
                [&](int64_t B, int64_t E) {
                  for (int64_t I = B; I < E; ++I)
                    row(X + I * NC, Y + I * NC, Loss[I], Back + I * NC);
                });
  }

private:
  void row(const T *XR, const T *YR, T &Loss, T *BR) const {
    T Max;
    const double Sum = softmaxNumerators(XR, BR, C, Max);
    const double LogSum = std::log(Sum);
    double L = 0;
    for (int64_t J = 0; J < C; ++J)
      L += double(YR[J]) * (LogSum + (double(Max) - double(XR[J])));
    Loss = T(L);
    const double Inv = 1.0 / Sum;
    for (int64_t J = 0; J < C; ++J)
      BR[J] = T(double(BR[J]) * Inv) - YR[J];
  }

  int64_t N, C;
  int Threads;
};

KernelOr createSce(const KernelInfo &I) {
  int64_t N = 0, C = 0;
  MDRT_RETURN_IF_ERROR(softmaxCrossEntropyDims(I, N, C));
  if (I.Inputs[0].Type == DType::Float32)
    return wrap(std::make_unique<SceKernel<float>>(N, C, I.NumThreads));
  return wrap(std::make_unique<SceKernel<double>>(N, C, I.NumThreads));
}

/// Each index a row of off values with the on value at the index; an index
/// outside [0, depth) gives a row of off values (as TensorFlow's).
template <typename T, typename Idx> class OneHotKernel : public Kernel {
public:
  OneHotKernel(int64_t N, int64_t Depth, T On, T Off, int Threads)
      : N(N), Depth(Depth), On(On), Off(Off), Threads(Threads) {}

  void run(const ExecContext &Ctx) override {
    const Idx *X = static_cast<const Idx *>(Ctx.In[0]);
    T *Y = static_cast<T *>(Ctx.Out[0]);
    parallelFor(N, std::max<int64_t>(1, GrainCheap / Depth), Threads,
                [&](int64_t B, int64_t E) {
                  for (int64_t I = B; I < E; ++I) {
                    T *Row = Y + I * Depth;
                    std::fill(Row, Row + Depth, Off);
                    int64_t K = int64_t(X[I]);
                    if (K >= 0 && K < Depth)
                      Row[K] = On;
                  }
                });
  }

private:
  int64_t N, Depth;
  T On, Off;
  int Threads;
};

KernelOr createOneHot(const KernelInfo &I) {
  int64_t N = 0, Depth = 0;
  MDRT_RETURN_IF_ERROR(oneHotDims(I, N, Depth));
  double On = I.Attrs.getFloat("on_value", 1.0),
         Off = I.Attrs.getFloat("off_value", 0.0);
  bool I64 = I.Inputs[0].Type == DType::Int64;
  int T = I.NumThreads;
  if (I.Outputs[0].Type == DType::Float32)
    return I64 ? wrap(std::make_unique<OneHotKernel<float, int64_t>>(
                     N, Depth, float(On), float(Off), T))
               : wrap(std::make_unique<OneHotKernel<float, int32_t>>(
                     N, Depth, float(On), float(Off), T));
  return I64 ? wrap(std::make_unique<OneHotKernel<double, int64_t>>(N, Depth,
                                                                    On, Off, T))
             : wrap(std::make_unique<OneHotKernel<double, int32_t>>(
                   N, Depth, On, Off, T));
}

//===----------------------------------------------------------------------===//
// LogLoss
//===----------------------------------------------------------------------===//

} // namespace

// Functors of the ZipKernel template.
namespace mdrt {
namespace cpu {
namespace loss {

// Both compute in double: near p = 1, log(p + eps) is as small as the
// rounding of p + eps in float32 (the loss is a reference value).
template <typename T> struct LogLossF {
  static constexpr int64_t Grain = GrainExpensive;
  double Eps;
  explicit LogLossF(const KernelInfo &I)
      : Eps(I.Attrs.getFloat("epsilon", 1e-7)) {}
  T operator()(T P, T L) const {
    double PD = P, LD = L;
    return T(-LD * std::log(PD + Eps) - (1 - LD) * std::log(1 - PD + Eps));
  }
};

/// Inputs p, labels, dy.
template <typename T> struct LogLossGradF {
  static constexpr int64_t Grain = GrainMedium;
  double Eps;
  explicit LogLossGradF(const KernelInfo &I)
      : Eps(I.Attrs.getFloat("epsilon", 1e-7)) {}
  T operator()(T P, T L, T DY) const {
    double PD = P, LD = L;
    return T(double(DY) * (-LD / (PD + Eps) + (1 - LD) / (1 - PD + Eps)));
  }
};

} // namespace loss
} // namespace cpu
} // namespace mdrt

namespace {
using namespace mdrt::cpu::loss;

KernelOr createLogLoss(const KernelInfo &I) {
  return makeZip<LogLossF, 2, /*Floats=*/true>(I);
}

KernelOr createLogLossGrad(const KernelInfo &I) {
  return makeZip<LogLossGradF, 3, /*Floats=*/true>(I);
}

//===----------------------------------------------------------------------===//
// Accuracy
//===----------------------------------------------------------------------===//

/// [N, C] predictions and [N] integer labels: argmax (first maximum) ==
/// label.
template <typename P, typename L> class SparseAccuracyKernel : public Kernel {
public:
  SparseAccuracyKernel(int64_t N, int64_t C) : N(N), C(C) {}
  void run(const ExecContext &Ctx) override {
    const P *X = static_cast<const P *>(Ctx.In[0]);
    const L *Labels = static_cast<const L *>(Ctx.In[1]);
    float *Y = static_cast<float *>(Ctx.Out[0]);
    for (int64_t I = 0; I < N; ++I) {
      const P *XR = X + I * C;
      int64_t Best = 0;
      for (int64_t J = 1; J < C; ++J)
        if (XR[J] > XR[Best])
          Best = J;
      Y[I] = C > 0 && Best == int64_t(Labels[I]) ? 1.0f : 0.0f;
    }
  }

private:
  int64_t N, C;
};

/// Same shapes: the mean over each example's elements of
/// (p > 0.5) == (label > 0.5).
template <typename P, typename L> class BinaryAccuracyKernel : public Kernel {
public:
  BinaryAccuracyKernel(int64_t N, int64_t E) : N(N), E(E) {}
  void run(const ExecContext &Ctx) override {
    const P *X = static_cast<const P *>(Ctx.In[0]);
    const L *Labels = static_cast<const L *>(Ctx.In[1]);
    float *Y = static_cast<float *>(Ctx.Out[0]);
    for (int64_t I = 0; I < N; ++I) {
      int64_t Right = 0;
      for (int64_t J = I * E; J < (I + 1) * E; ++J)
        Right += (double(X[J]) > 0.5) == (double(Labels[J]) > 0.5);
      Y[I] = E ? float(double(Right) / double(E)) : 0.0f;
    }
  }

private:
  int64_t N, E;
};

KernelOr createAccuracy(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 1));
  const TensorDesc &X = I.Inputs[0], &Lab = I.Inputs[1];
  if (X.rank() < 1)
    return Status::error("predictions must have a batch dimension, got " +
                         X.str());
  if (I.Outputs[0].Type != DType::Float32)
    return Status::error("Accuracy output must be float32, got " +
                         I.Outputs[0].str());
  int64_t N = X.Shape[0];
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], N, "output"));
  bool Sparse = X.rank() == 2 && Lab.rank() == 1 && isIntType(Lab.Type);
  if (Sparse) {
    if (Lab.Shape[0] != N)
      return Status::error("predictions " + X.str() + " and labels " +
                           Lab.str() + " have different batch sizes");
    int64_t C = X.Shape[1];
    return dispatchNumeric(X, "predictions", [&](auto *PT) {
      using PP = std::remove_pointer_t<decltype(PT)>;
      return dispatchNumeric(Lab, "labels", [&](auto *LT) -> KernelOr {
        using LL = std::remove_pointer_t<decltype(LT)>;
        return wrap(std::make_unique<SparseAccuracyKernel<PP, LL>>(N, C));
      });
    });
  }
  if (X.Shape != Lab.Shape)
    return Status::error("predictions " + X.str() + " and labels " + Lab.str() +
                         " must have the same shape");
  int64_t E = N ? X.numElements() / N : 0;
  return dispatchNumeric(X, "predictions", [&](auto *PT) {
    using PP = std::remove_pointer_t<decltype(PT)>;
    return dispatchNumeric(Lab, "labels", [&](auto *LT) -> KernelOr {
      using LL = std::remove_pointer_t<decltype(LT)>;
      return wrap(std::make_unique<BinaryAccuracyKernel<PP, LL>>(N, E));
    });
  });
}

} // namespace

void cpu::registerLossKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "SparseSoftmaxCrossEntropy", createSsce);
  R.add(DeviceKind::CPU, "SoftmaxCrossEntropy", createSce);
  R.add(DeviceKind::CPU, "OneHot", createOneHot);
  R.add(DeviceKind::CPU, "LogLoss", createLogLoss);
  R.add(DeviceKind::CPU, "LogLossGrad", createLogLossGrad);
  R.add(DeviceKind::CPU, "Accuracy", createAccuracy);
}
