//===- Optimizer.cpp - State updates --------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// AssignMovingAverage, AssignAdd, ApplyGradientDescent, ApplyMomentum,
// ApplyAdam, ApplyRMSProp, ApplyCenteredRMSProp and ApplyAdagrad. They
// write their variable (and slot) inputs in place and have no outputs. The
// Apply ops read the global step (before this step's increment) from their
// last input, an int64 scalar. Per-step scalars (decayed learning rate,
// Adam's bias correction) are computed in double and rounded once to the
// variable's type. Updates flush denormals to zero (see
// FlushDenormalsScope).
//
//===----------------------------------------------------------------------===//

#include "../LearningRate.h"
#include "CpuCommon.h"

#include <cmath>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

//===----------------------------------------------------------------------===//
// Update loops (the variable and slots are distinct buffers)
//===----------------------------------------------------------------------===//

template <typename T>
MDRT_CPU_CLONES void movingAverageLoop(T *__restrict Var,
                                       const T *__restrict Value, T F,
                                       int64_t N) {
  for (int64_t K = 0; K < N; ++K)
    Var[K] -= (Var[K] - Value[K]) * F;
}

template <typename T>
MDRT_CPU_CLONES void
gradientDescentLoop(T *__restrict Var, const T *__restrict G, T Lr, int64_t N) {
  for (int64_t K = 0; K < N; ++K)
    Var[K] -= Lr * G[K];
}

template <typename T>
MDRT_CPU_CLONES void momentumLoop(T *__restrict Var, T *__restrict Acc,
                                  const T *__restrict G, T Lr, T Mo,
                                  bool Nesterov, int64_t N) {
  if (Nesterov) {
    for (int64_t K = 0; K < N; ++K) {
      T A = Mo * Acc[K] + G[K];
      Acc[K] = A;
      Var[K] -= Lr * (G[K] + Mo * A);
    }
  } else {
    for (int64_t K = 0; K < N; ++K) {
      T A = Mo * Acc[K] + G[K];
      Acc[K] = A;
      Var[K] -= Lr * A;
    }
  }
}

template <typename T> struct AdamConsts { T B1, C1, B2, C2, Alpha, Eps; };

template <typename T>
MDRT_CPU_CLONES void adamLoop(T *__restrict Var, T *__restrict Mv,
                              T *__restrict Vv, const T *__restrict G,
                              AdamConsts<T> A, int64_t N) {
  for (int64_t K = 0; K < N; ++K) {
    const T GK = G[K];
    const T M = A.B1 * Mv[K] + A.C1 * GK;
    const T V = A.B2 * Vv[K] + A.C2 * GK * GK;
    Mv[K] = M;
    Vv[K] = V;
    Var[K] -= A.Alpha * M / (std::sqrt(V) + A.Eps);
  }
}

/// RMSProp's constants in T: the step's learning rate, 1 - rho, momentum
/// and epsilon.
template <typename T> struct RMSPropConsts { T Lr, C, Mo, Eps; };

template <typename T>
MDRT_CPU_CLONES void rmspropLoop(T *__restrict Var, T *__restrict Ms,
                                 T *__restrict Mom, const T *__restrict G,
                                 RMSPropConsts<T> A, int64_t N) {
  for (int64_t K = 0; K < N; ++K) {
    const T GK = G[K], S = Ms[K];
    const T NS = S + (GK * GK - S) * A.C;
    const T NM = A.Mo * Mom[K] + A.Lr * GK / std::sqrt(NS + A.Eps);
    Ms[K] = NS;
    Mom[K] = NM;
    Var[K] -= NM;
  }
}

template <typename T>
MDRT_CPU_CLONES void centeredRmspropLoop(T *__restrict Var, T *__restrict Ms,
                                         T *__restrict Mg, T *__restrict Mom,
                                         const T *__restrict G,
                                         RMSPropConsts<T> A, int64_t N) {
  for (int64_t K = 0; K < N; ++K) {
    const T GK = G[K], S = Ms[K], Mean = Mg[K];
    const T NS = S + (GK * GK - S) * A.C;
    const T NG = Mean + (GK - Mean) * A.C;
    const T Den = (NS - NG * NG) + A.Eps;
    const T NM = A.Mo * Mom[K] + A.Lr * GK / std::sqrt(Den);
    Ms[K] = NS;
    Mg[K] = NG;
    Mom[K] = NM;
    Var[K] -= NM;
  }
}

template <typename T>
MDRT_CPU_CLONES void adagradLoop(T *__restrict Var, T *__restrict Acc,
                                 const T *__restrict G, T Lr, int64_t N) {
  for (int64_t K = 0; K < N; ++K) {
    const T GK = G[K];
    const T A = Acc[K] + GK * GK;
    Acc[K] = A;
    Var[K] -= Lr * GK / std::sqrt(A);
  }
}

/// var -= (var - value) (1 - decay).
template <typename T> class MovingAverageKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(checkArity(I, 2, 2, 0));
    MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1}, {}, I.Inputs[0].Type));
    N = I.Inputs[0].numElements();
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[1], N, "input"));
    OneMinusDecay = T(1.0 - I.Attrs.getFloat("decay", 0.999));
    Threads = I.NumThreads;
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    const T *Value = static_cast<const T *>(C.In[1]);
    const T F = OneMinusDecay;
    parallelFor(N, GrainUpdate, Threads, [=](int64_t B, int64_t E) {
      FlushDenormalsScope Flush;
      movingAverageLoop(Var + B, Value + B, F, E - B);
    });
  }

private:
  int64_t N = 0;
  T OneMinusDecay = 0;
  int Threads = 1;
};

/// var += amount, for a scalar of any numeric type.
template <typename T> class AssignAddKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 0));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[0], 1, "input"));
    Amount = I.Attrs.getInt("amount", 1);
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    if constexpr (std::is_integral<T>::value)
      *Var = T(std::make_unsigned_t<T>(*Var) + std::make_unsigned_t<T>(Amount));
    else
      *Var += T(Amount);
  }

private:
  int64_t Amount = 1;
};

/// Common checks of the Apply ops: \p NumTensors float tensors of the same
/// type and size, then the int64 scalar step.
Status checkApply(const KernelInfo &I, unsigned NumTensors) {
  MDRT_RETURN_IF_ERROR(checkArity(I, NumTensors + 1, NumTensors + 1, 0));
  std::vector<unsigned> Ins;
  for (unsigned K = 0; K < NumTensors; ++K) {
    Ins.push_back(K);
    MDRT_RETURN_IF_ERROR(
        checkElements(I, I.Inputs[K], I.Inputs[0].numElements(), "input"));
  }
  MDRT_RETURN_IF_ERROR(checkTypes(I, Ins, {}, I.Inputs[0].Type));
  const TensorDesc &Step = I.Inputs[NumTensors];
  if (Step.Type != DType::Int64 || Step.numElements() != 1)
    return Status::error("the step input must be an int64 scalar, got " +
                         Step.str());
  return Status::ok();
}

inline int64_t readStep(const ExecContext &C, unsigned Index) {
  return *static_cast<const int64_t *>(C.In[Index]);
}

/// What the Apply kernels share: the checks of their inputs, the element
/// count, the learning rate and the loop over the elements.
class ApplyKernel : public Kernel {
protected:
  /// checkApply's checks of \p NumTensors tensors and the step; reads the
  /// learning rate's attributes.
  Status initApply(const KernelInfo &I, unsigned NumTensors) {
    MDRT_RETURN_IF_ERROR(checkApply(I, NumTensors));
    N = I.Inputs[0].numElements();
    Threads = I.NumThreads;
    StepInput = NumTensors;
    return LR.init(I);
  }
  /// The learning rate at this step (the global step before its increment).
  double rate(const ExecContext &C) const {
    return LR.at(readStep(C, StepInput));
  }
  /// Loop(Begin, End) over ranges of the elements on the kernel's threads,
  /// denormals flushed.
  template <typename F> void forRanges(F Loop) const {
    parallelFor(N, GrainUpdate, Threads, [=](int64_t B, int64_t E) {
      FlushDenormalsScope Flush;
      Loop(B, E);
    });
  }

private:
  int64_t N = 0;
  LearningRate LR;
  int Threads = 1;
  unsigned StepInput = 0;
};

/// var -= lr_t g.
template <typename T> class GradientDescentKernel : public ApplyKernel {
public:
  Status init(const KernelInfo &I) { return initApply(I, 2); }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    const T *G = static_cast<const T *>(C.In[1]);
    const T Lr = T(rate(C));
    forRanges([=](int64_t B, int64_t E) {
      gradientDescentLoop(Var + B, G + B, Lr, E - B);
    });
  }
};

/// a = m a + g; var -= lr_t a (Nesterov: var -= lr_t (g + m a)).
template <typename T> class MomentumKernel : public ApplyKernel {
public:
  Status init(const KernelInfo &I) {
    Momentum = T(I.Attrs.getFloat("momentum", 0.9));
    Nesterov = I.Attrs.getBool("nesterov", false);
    return initApply(I, 3);
  }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    T *Acc = static_cast<T *>(C.In[1]);
    const T *G = static_cast<const T *>(C.In[2]);
    const T Lr = T(rate(C)), Mo = Momentum;
    const bool Nest = Nesterov;
    forRanges([=](int64_t B, int64_t E) {
      momentumLoop(Var + B, Acc + B, G + B, Lr, Mo, Nest, E - B);
    });
  }

private:
  T Momentum = 0;
  bool Nesterov = false;
};

/// t = step + 1; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// var -= lr_t sqrt(1-b2^t) / (1-b1^t) m / (sqrt(v) + eps).
template <typename T> class AdamKernel : public ApplyKernel {
public:
  Status init(const KernelInfo &I) {
    Beta1 = I.Attrs.getFloat("beta1", 0.9);
    Beta2 = I.Attrs.getFloat("beta2", 0.999);
    Eps = T(I.Attrs.getFloat("epsilon", 1e-8));
    return initApply(I, 4);
  }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    T *Mv = static_cast<T *>(C.In[1]);
    T *Vv = static_cast<T *>(C.In[2]);
    const T *G = static_cast<const T *>(C.In[3]);
    int64_t Step = readStep(C, 4);
    const T Alpha = T(rate(C) * std::sqrt(1.0 - integerPower(Beta2, Step + 1)) /
                      (1.0 - integerPower(Beta1, Step + 1)));
    const AdamConsts<T> A = {T(Beta1),       T(1.0 - Beta1), T(Beta2),
                             T(1.0 - Beta2), Alpha,          Eps};
    forRanges([=](int64_t B, int64_t E) {
      adamLoop(Var + B, Mv + B, Vv + B, G + B, A, E - B);
    });
  }

private:
  double Beta1 = 0.9, Beta2 = 0.999;
  T Eps = 0;
};

/// ms += (g^2 - ms) (1 - rho); mom = momentum mom + lr_t g / sqrt(ms + eps);
/// var -= mom (TF's ApplyRMSProp: inputs var, ms, mom, gradient, step).
/// \p Centered (TF's ApplyCenteredRMSProp, in its order of operations;
/// inputs var, ms, mg, mom, gradient, step): also mg += (g - mg) (1 - rho),
/// and (ms - mg^2) + eps under the root. Nothing keeps that positive:
/// where it is negative mom and var become NaN, as TF's do.
template <typename T, bool Centered> class RMSPropKernels : public ApplyKernel {
public:
  Status init(const KernelInfo &I) {
    // In T, as TF computes it (its rho is a tensor of the variable's type):
    // in float32, 1 - rho then differs from the double's rounding by ulps.
    OneMinusRho = T(1) - T(I.Attrs.getFloat("rho", 0.9));
    Momentum = T(I.Attrs.getFloat("momentum", 0.0));
    Eps = T(I.Attrs.getFloat("epsilon", 1e-10));
    return initApply(I, Centered ? 5 : 4);
  }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    T *Ms = static_cast<T *>(C.In[1]);
    const RMSPropConsts<T> A = {T(rate(C)), OneMinusRho, Momentum, Eps};
    if constexpr (Centered) {
      T *Mg = static_cast<T *>(C.In[2]);
      T *Mom = static_cast<T *>(C.In[3]);
      const T *G = static_cast<const T *>(C.In[4]);
      forRanges([=](int64_t B, int64_t E) {
        centeredRmspropLoop(Var + B, Ms + B, Mg + B, Mom + B, G + B, A, E - B);
      });
    } else {
      T *Mom = static_cast<T *>(C.In[2]);
      const T *G = static_cast<const T *>(C.In[3]);
      forRanges([=](int64_t B, int64_t E) {
        rmspropLoop(Var + B, Ms + B, Mom + B, G + B, A, E - B);
      });
    }
  }

private:
  T OneMinusRho = 0, Momentum = 0, Eps = 0;
};
template <typename T> using RMSPropKernel = RMSPropKernels<T, false>;
template <typename T> using CenteredRMSPropKernel = RMSPropKernels<T, true>;

/// acc += g^2; var -= lr_t g / sqrt(acc) (TF's ApplyAdagrad with
/// update_slots, no epsilon: a zero accumulator and gradient give NaN, as
/// TF's do).
template <typename T> class AdagradKernel : public ApplyKernel {
public:
  Status init(const KernelInfo &I) { return initApply(I, 3); }
  void run(const ExecContext &C) override {
    T *Var = static_cast<T *>(C.In[0]);
    T *Acc = static_cast<T *>(C.In[1]);
    const T *G = static_cast<const T *>(C.In[2]);
    const T Lr = T(rate(C));
    forRanges([=](int64_t B, int64_t E) {
      adagradLoop(Var + B, Acc + B, G + B, Lr, E - B);
    });
  }
};

KernelOr createMovingAverage(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("AssignMovingAverage takes 2 inputs, got 0");
  return makeFloatKernel<MovingAverageKernel>(I, I.Inputs[0].Type);
}

KernelOr createAssignAdd(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("AssignAdd takes 1 input, got 0");
  return makeNumericKernel<AssignAddKernel>(I, I.Inputs[0].Type);
}

template <template <typename> class KT>
KernelOr createApply(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error(I.Op + " takes a variable input");
  return makeFloatKernel<KT>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerOptimizerKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "AssignMovingAverage", createMovingAverage);
  R.add(DeviceKind::CPU, "AssignAdd", createAssignAdd);
  R.add(DeviceKind::CPU, "ApplyGradientDescent",
        createApply<GradientDescentKernel>);
  R.add(DeviceKind::CPU, "ApplyMomentum", createApply<MomentumKernel>);
  R.add(DeviceKind::CPU, "ApplyAdam", createApply<AdamKernel>);
  R.add(DeviceKind::CPU, "ApplyRMSProp", createApply<RMSPropKernel>);
  R.add(DeviceKind::CPU, "ApplyCenteredRMSProp",
        createApply<CenteredRMSPropKernel>);
  R.add(DeviceKind::CPU, "ApplyAdagrad", createApply<AdagradKernel>);
}
