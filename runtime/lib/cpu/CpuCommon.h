//===- CpuCommon.h - Helpers shared by the CPU kernels ----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cpu. Each kernel file registers its kernels through one
// register*Kernels function declared here; the helpers cover argument
// checks, OpenMP loops with a size threshold, window geometry, the generic
// same-shape elementwise kernel and the oneDNN plumbing (engine, primitives
// executed through pre-built argument arrays so that a run allocates
// nothing).
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CPU_CPUCOMMON_H
#define MDRT_LIB_CPU_CPUCOMMON_H

#include "../KernelChecks.h"
#include "mdrt/Kernel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#ifdef MDRT_HAVE_DNNL
#include "oneapi/dnnl/dnnl.hpp"
#endif

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/// Hot loops are compiled for AVX-512, AVX2 and baseline x86-64, the
/// best picked when the library loads. The kernels are built with
/// -ffp-contract=off, so every clone rounds exactly alike.
#define MDRT_CPU_CLONES                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MDRT_CPU_CLONES
#endif

namespace mdrt {
namespace cpu {

using KernelOr = StatusOr<std::unique_ptr<Kernel>>;

void registerPlumbingKernels(KernelRegistry &R);
void registerElementwiseKernels(KernelRegistry &R);
void registerReduceKernels(KernelRegistry &R);
void registerLossKernels(KernelRegistry &R);
void registerMatMulKernels(KernelRegistry &R);
void registerConvKernels(KernelRegistry &R);
void registerPoolKernels(KernelRegistry &R);
void registerBatchNormKernels(KernelRegistry &R);
void registerOptimizerKernels(KernelRegistry &R);

//===----------------------------------------------------------------------===//
// Backend selection
//===----------------------------------------------------------------------===//

/// Which library implementations the factories pick, from the environment
/// variable MDRT_CPU_KERNELS read when a kernel is created:
///   unset or "auto": oneDNN where built with it (MatMul, convolutions,
///                    MaxPool), OpenBLAS for float64 MatMul;
///   "openblas":      like auto, but float32 MatMul through cblas_sgemm;
///   "reference":     the plain C++ loops everywhere (what a build without
///                    the libraries runs; the tests compare both).
enum class Backend { Auto, OpenBlas, Reference };
Backend selectedBackend();

/// True when oneDNN is built in and not disabled by MDRT_CPU_KERNELS.
inline bool useDnnl() {
#ifdef MDRT_HAVE_DNNL
  return selectedBackend() != Backend::Reference;
#else
  return false;
#endif
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

inline bool isFloatType(DType T) {
  return T == DType::Float32 || T == DType::Float64;
}
inline bool isIntType(DType T) {
  return T == DType::Int32 || T == DType::Int64;
}

/// An error naming the op and the unsupported element type.
Status typeError(const KernelInfo &I, DType T);
/// Wraps a kernel object as a factory result.
template <typename K> KernelOr wrap(std::unique_ptr<K> P) {
  return std::unique_ptr<Kernel>(std::move(P));
}

/// Float dispatch: KT<float> or KT<double> built from \p Info.
template <template <typename> class KT>
KernelOr makeFloatKernel(const KernelInfo &Info, DType T) {
  if (T == DType::Float32) {
    auto K = std::make_unique<KT<float>>();
    MDRT_RETURN_IF_ERROR(K->init(Info));
    return wrap(std::move(K));
  }
  if (T == DType::Float64) {
    auto K = std::make_unique<KT<double>>();
    MDRT_RETURN_IF_ERROR(K->init(Info));
    return wrap(std::move(K));
  }
  return typeError(Info, T);
}

/// Numeric dispatch: floats and int32/int64.
template <template <typename> class KT>
KernelOr makeNumericKernel(const KernelInfo &Info, DType T) {
  if (isFloatType(T))
    return makeFloatKernel<KT>(Info, T);
  if (T == DType::Int32) {
    auto K = std::make_unique<KT<int32_t>>();
    MDRT_RETURN_IF_ERROR(K->init(Info));
    return wrap(std::move(K));
  }
  if (T == DType::Int64) {
    auto K = std::make_unique<KT<int64_t>>();
    MDRT_RETURN_IF_ERROR(K->init(Info));
    return wrap(std::move(K));
  }
  return typeError(Info, T);
}

/// The accumulator of sums over \p T: double for floats, int64 for ints.
template <typename T>
using AccType =
    std::conditional_t<std::is_floating_point<T>::value, double, int64_t>;

//===----------------------------------------------------------------------===//
// Parallel loops
//===----------------------------------------------------------------------===//

/// Minimum work items per thread before a loop is split: memory-bound loops
/// (a load, an add, a store), loops with a few flops per element, loops
/// calling exp/log/tanh, and the optimizer updates (several streams per
/// element). Measured on 2 cores: below these, tensors that sit in one
/// core's cache run faster on that core alone than split across two.
constexpr int64_t GrainCheap = int64_t(1) << 17;
constexpr int64_t GrainMedium = int64_t(1) << 15;
constexpr int64_t GrainExpensive = int64_t(1) << 11;
constexpr int64_t GrainUpdate = int64_t(1) << 20;

/// Threads to use for \p Work items at \p Grain items per thread at least.
inline int threadsFor(int64_t Work, int64_t Grain, int MaxThreads) {
  if (MaxThreads <= 1 || Work < 2 * Grain)
    return 1;
  int64_t T = Work / std::max<int64_t>(Grain, 1);
  return int(std::min<int64_t>(T, MaxThreads));
}

/// Runs Body(Begin, End) over a static partition of [0, N) into at most
/// \p MaxThreads contiguous ranges of at least \p Grain items.
template <typename F>
void parallelFor(int64_t N, int64_t Grain, int MaxThreads, F &&Body) {
  if (N <= 0)
    return;
  int T = threadsFor(N, Grain, MaxThreads);
  if (T <= 1) {
    Body(int64_t(0), N);
    return;
  }
#pragma omp parallel num_threads(T)
  {
    int64_t Id = omp_get_thread_num(), Nt = omp_get_num_threads();
    int64_t B = N * Id / Nt, E = N * (Id + 1) / Nt;
    if (B < E)
      Body(B, E);
  }
}

/// Runs Body(ThreadId, NumThreads) on \p T threads (T >= 1); returns the
/// number of threads that ran (the team may be smaller than asked).
template <typename F> int parallelTeam(int T, F &&Body) {
  if (T <= 1) {
    Body(0, 1);
    return 1;
  }
  int Ran = 1;
#pragma omp parallel num_threads(T)
  {
    int Nt = omp_get_num_threads();
#pragma omp single nowait
    Ran = Nt;
    Body(omp_get_thread_num(), Nt);
  }
  return Ran;
}

/// Sets the OpenMP thread count of the calling thread for a scope (oneDNN
/// reads it when primitives are created and executed).
class OmpThreadsScope {
public:
  explicit OmpThreadsScope(int N) : Saved(omp_get_max_threads()) {
    N = std::max(N, 1);
    if (N != Saved)
      omp_set_num_threads(N);
    else
      Saved = 0;
  }
  ~OmpThreadsScope() {
    if (Saved)
      omp_set_num_threads(Saved);
  }
  OmpThreadsScope(const OmpThreadsScope &) = delete;
  OmpThreadsScope &operator=(const OmpThreadsScope &) = delete;

private:
  int Saved;
};

/// exp(X) as Softmax and SparseSoftmaxCrossEntropy take it: in double,
/// rounded once to T. float's own exp differs between libraries (glibc,
/// CUDA) in the last bit; exp in double rounded to float agrees on both
/// sides (but where the double results straddle a rounding boundary, about
/// once in 2^28 values), so the GPU's reference kernels give the CPU's bits.
template <typename T> inline T softmaxExp(T X) {
  return T(std::exp(double(X)));
}

/// The numerators of a softmax row of \p N values, E[j] = exp(x_j - max)
/// (\p Max gets the row's maximum), and their sum in double in column
/// order: Softmax, SparseSoftmaxCrossEntropy and SoftmaxCrossEntropy.
template <typename T>
inline double softmaxNumerators(const T *X, T *E, int64_t N, T &Max) {
  Max = X[0];
  for (int64_t J = 1; J < N; ++J)
    Max = X[J] > Max ? X[J] : Max;
  double Sum = 0;
  for (int64_t J = 0; J < N; ++J) {
    E[J] = softmaxExp(X[J] - Max);
    Sum += double(E[J]);
  }
  return Sum;
}

/// Flushes denormal results and operands to zero in the calling thread for
/// a scope (the optimizer slots of units that stop learning decay into
/// denormals, which are several times slower to compute with).
class FlushDenormalsScope {
public:
#if defined(__x86_64__)
  FlushDenormalsScope() : Saved(_mm_getcsr()) {
    _mm_setcsr(Saved | 0x8040); // FTZ and DAZ.
  }
  ~FlushDenormalsScope() { _mm_setcsr(Saved); }
#else
  FlushDenormalsScope() = default;
#endif
  FlushDenormalsScope(const FlushDenormalsScope &) = delete;
  FlushDenormalsScope &operator=(const FlushDenormalsScope &) = delete;

#if defined(__x86_64__)
private:
  unsigned Saved;
#endif
};

//===----------------------------------------------------------------------===//
// Same-shape elementwise kernels
//===----------------------------------------------------------------------===//

/// Y[i] = Op(A[i], B[i], C[i]) over [0, N), with the inputs NIn uses.
template <typename T, typename Op, unsigned NIn>
MDRT_CPU_CLONES void zipLoop(Op F, const T *A, const T *B, const T *C, T *Y,
                             int64_t N) {
  if constexpr (NIn == 1) {
    (void)B;
    (void)C;
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(A[I]);
  } else if constexpr (NIn == 2) {
    (void)C;
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(A[I], B[I]);
  } else {
    for (int64_t I = 0; I < N; ++I)
      Y[I] = F(A[I], B[I], C[I]);
  }
}

/// out[i] = F(in0[i], ..., in{N-1}[i]) for float (or numeric) T. F<T> is
/// built from the KernelInfo (for attributes) and declares its cost class
/// as `static constexpr int64_t Grain`.
template <typename T, template <typename> class F, unsigned NIn>
class ZipKernel : public Kernel {
public:
  explicit ZipKernel(const KernelInfo &Info)
      : Fn(Info), N(Info.Outputs[0].numElements()), Threads(Info.NumThreads) {}

  void run(const ExecContext &C) override {
    const T *X0 = static_cast<const T *>(C.In[0]);
    const T *X1 = NIn > 1 ? static_cast<const T *>(C.In[1]) : nullptr;
    const T *X2 = NIn > 2 ? static_cast<const T *>(C.In[2]) : nullptr;
    T *Y = static_cast<T *>(C.Out[0]);
    const F<T> Op = Fn;
    parallelFor(N, F<T>::Grain, Threads, [=](int64_t B, int64_t E) {
      zipLoop<T, F<T>, NIn>(Op, X0 + B, X1 ? X1 + B : nullptr,
                            X2 ? X2 + B : nullptr, Y + B, E - B);
    });
  }

private:
  F<T> Fn;
  int64_t N;
  int Threads;
};

/// Factory of a ZipKernel: every input and the output of the same element
/// type (\p Floats: float only, else int32/int64 too) and element count.
/// Functors live in named namespaces (they instantiate this template).
template <template <typename> class F, unsigned NIn, bool Floats>
KernelOr makeZip(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, NIn, NIn, 1));
  DType T = I.Inputs[0].Type;
  int64_t N = I.Outputs[0].numElements();
  for (unsigned K = 0; K < NIn; ++K) {
    if (I.Inputs[K].Type != T)
      return Status::error("input " + std::to_string(K) + " is " +
                           I.Inputs[K].str() + ", expected element type " +
                           dtypeName(T));
    MDRT_RETURN_IF_ERROR(checkElements(I, I.Inputs[K], N, "input"));
  }
  if (I.Outputs[0].Type != T)
    return typeError(I, I.Outputs[0].Type);
  switch (T) {
  case DType::Float32:
    return wrap(std::make_unique<ZipKernel<float, F, NIn>>(I));
  case DType::Float64:
    return wrap(std::make_unique<ZipKernel<double, F, NIn>>(I));
  case DType::Int32:
    if constexpr (!Floats)
      return wrap(std::make_unique<ZipKernel<int32_t, F, NIn>>(I));
    break;
  case DType::Int64:
    if constexpr (!Floats)
      return wrap(std::make_unique<ZipKernel<int64_t, F, NIn>>(I));
    break;
  default:
    break;
  }
  return typeError(I, T);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Sums a tensor over some of its dimensions in the order of
/// planReduction's steps, accumulated in AccType<T>, with the parallel
/// strategy of each step chosen at plan time (it never changes the order).
/// The result is scaled and converted at the end.
template <typename T> class Reducer {
public:
  using Acc = AccType<T>;

  /// Plans the sum of a tensor of \p Shape over the dimensions flagged in
  /// \p Reduced (same length).
  void init(const std::vector<int64_t> &Shape, const std::vector<bool> &Reduced,
            int NumThreads);
  /// Out (OutElements of T) = sum * Scale, or sum / Divisor when Divisor
  /// is nonzero (Mean; integer division for ints).
  void run(const T *In, T *Out, double Scale, int64_t Divisor);

  int64_t inElements() const { return InElems; }
  int64_t outElements() const { return OutElems; }

private:
  struct Step {
    ReduceStep S;
    /// 0: parallel over A; 1: over K; 2: over pieces and A, with the
    /// pieces' sums in Partials.
    int Mode;
    int Threads;
  };
  template <typename S> void runStep(const Step &St, const S *Src, Acc *Dst);

  std::vector<Step> Steps;
  std::vector<Acc> Buf[2];
  std::vector<Acc> Partials;
  int64_t InElems = 0, OutElems = 0;
  int Threads = 1;
};

//===----------------------------------------------------------------------===//
// oneDNN
//===----------------------------------------------------------------------===//

#ifdef MDRT_HAVE_DNNL
/// The process-wide CPU engine.
dnnl::engine &dnnlEngine();

/// Primitive attributes with a user-managed scratchpad.
inline dnnl::primitive_attr dnnlAttr() {
  dnnl::primitive_attr A;
  A.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return A;
}

/// One primitive with its argument array, executed through the C API so
/// that no argument map is built per run. Buffers given by the executor
/// are bound with setHandle before exec.
class DnnlCall {
public:
  DnnlCall() = default;
  /// \p P with its scratchpad of \p ScratchDesc (allocated here).
  void init(dnnl::primitive P, const dnnl::memory::desc &ScratchDesc);
  /// Adds argument \p Arg; returns its index for setHandle.
  unsigned arg(int Arg, const dnnl::memory &M);
  void setHandle(unsigned Index, const void *Ptr) {
    Mems[Index].set_data_handle(const_cast<void *>(Ptr));
  }
  void exec(dnnl::stream &S);
  explicit operator bool() const { return bool(Prim); }

private:
  dnnl::primitive Prim;
  std::vector<dnnl::memory> Mems;
  std::vector<dnnl_exec_arg_t> Args;
};

/// A memory object with no buffer yet (bound per run).
inline dnnl::memory dnnlUnbound(const dnnl::memory::desc &D) {
  return dnnl::memory(D, dnnlEngine(), DNNL_MEMORY_NONE);
}

/// Runs \p F, turning oneDNN exceptions into an error status.
template <typename F> Status dnnlTry(const char *What, F &&Fn) {
  try {
    Fn();
  } catch (const dnnl::error &E) {
    return Status::error(std::string("onednn ") + What + ": " + E.what());
  }
  return Status::ok();
}
#endif

} // namespace cpu
} // namespace mdrt

#endif // MDRT_LIB_CPU_CPUCOMMON_H
