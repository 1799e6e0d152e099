//===- MatMul.cpp - Matrix products ---------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// MatMul: op(a) x op(b). float32 runs oneDNN's matmul primitive, transposes
// expressed as strides. On the 2-core AVX-512 machine of the benchmarks it
// took 0.37 ms for the 11 products of an MLP 784-256-128-100-10 training
// step at batch 64, against 0.71 ms through OpenBLAS 0.3.21's cblas_sgemm,
// and half of OpenBLAS's time on the CNN's dense layer; MDRT_CPU_KERNELS
// (CpuCommon.h) switches. float64 runs cblas_dgemm (oneDNN has no f64 on
// CPU); without either library, blocked loops.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <cstring>

#ifdef MDRT_HAVE_OPENBLAS
#include <cblas.h>
#endif

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

template <typename T> class MatMulKernel : public Kernel {
public:
  Status init(const KernelInfo &I);
  void run(const ExecContext &C) override;

private:
  enum class Impl { Empty, Zero, Dnnl, Blas, Loops };
  void runLoops(const T *A, const T *B, T *C);

  Impl Kind = Impl::Loops;
  int64_t M = 0, N = 0, K = 0;
  bool TA = false, TB = false;
  int Threads = 1;
  /// The loops' transposed copies.
  std::vector<T> ScratchA, ScratchB;
#ifdef MDRT_HAVE_DNNL
  dnnl::stream Stream;
  DnnlCall Call;
  unsigned ArgA = 0, ArgB = 0, ArgC = 0;
#endif
};

template <typename T> Status MatMulKernel<T>::init(const KernelInfo &I) {
  MatMulDims D;
  MDRT_RETURN_IF_ERROR(matMulDims(I, D));
  M = D.M;
  N = D.N;
  K = D.K;
  TA = D.TA;
  TB = D.TB;
  // Products under 2 x 16 Mflop run on one core: on the MLP's shapes a
  // second core gained little and left the outputs spread over two caches,
  // slowing the kernels after them more than it saved.
  Threads = threadsFor(2 * M * N * K, int64_t(1) << 24, I.NumThreads);
  if (M == 0 || N == 0) {
    Kind = Impl::Empty;
    return Status::ok();
  }
  if (K == 0) {
    Kind = Impl::Zero;
    return Status::ok();
  }
  Backend BK = selectedBackend();
#ifdef MDRT_HAVE_DNNL
  if (std::is_same<T, float>::value && BK == Backend::Auto) {
    using namespace dnnl;
    using dims = memory::dims;
    memory::desc AD({M, K}, memory::data_type::f32,
                    TA ? dims{1, M} : dims{K, 1});
    memory::desc BD({K, N}, memory::data_type::f32,
                    TB ? dims{1, K} : dims{N, 1});
    memory::desc CD({M, N}, memory::data_type::f32, dims{N, 1});
    Status S = dnnlTry("matmul", [&] {
      OmpThreadsScope Scope(Threads);
      matmul::primitive_desc PD(matmul::desc(AD, BD, CD), dnnlAttr(),
                                dnnlEngine());
      Call.init(matmul(PD), PD.scratchpad_desc());
      ArgA = Call.arg(DNNL_ARG_SRC, dnnlUnbound(AD));
      ArgB = Call.arg(DNNL_ARG_WEIGHTS, dnnlUnbound(BD));
      ArgC = Call.arg(DNNL_ARG_DST, dnnlUnbound(CD));
      Stream = stream(dnnlEngine());
    });
    MDRT_RETURN_IF_ERROR(S);
    Kind = Impl::Dnnl;
    return Status::ok();
  }
#endif
#ifdef MDRT_HAVE_OPENBLAS
  if (BK != Backend::Reference) {
    Kind = Impl::Blas;
    return Status::ok();
  }
#endif
  (void)BK;
  Kind = Impl::Loops;
  if (TA)
    ScratchA.resize(size_t(M * K));
  if (TB)
    ScratchB.resize(size_t(K * N));
  return Status::ok();
}

template <typename T> void MatMulKernel<T>::run(const ExecContext &Ctx) {
  const T *A = static_cast<const T *>(Ctx.In[0]);
  const T *B = static_cast<const T *>(Ctx.In[1]);
  T *C = static_cast<T *>(Ctx.Out[0]);
  switch (Kind) {
  case Impl::Empty:
    return;
  case Impl::Zero:
    std::memset(C, 0, size_t(M * N) * sizeof(T));
    return;
  case Impl::Dnnl:
#ifdef MDRT_HAVE_DNNL
  {
    OmpThreadsScope Scope(Threads);
    Call.setHandle(ArgA, A);
    Call.setHandle(ArgB, B);
    Call.setHandle(ArgC, C);
    Call.exec(Stream);
  }
#endif
    return;
  case Impl::Blas:
#ifdef MDRT_HAVE_OPENBLAS
  {
    if (openblas_get_num_threads() != Threads)
      openblas_set_num_threads(Threads);
    const CBLAS_TRANSPOSE OA = TA ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE OB = TB ? CblasTrans : CblasNoTrans;
    const blasint LDA = blasint(TA ? M : K), LDB = blasint(TB ? K : N);
    if constexpr (std::is_same<T, float>::value)
      cblas_sgemm(CblasRowMajor, OA, OB, blasint(M), blasint(N), blasint(K),
                  1.0f, A, LDA, B, LDB, 0.0f, C, blasint(N));
    else
      cblas_dgemm(CblasRowMajor, OA, OB, blasint(M), blasint(N), blasint(K),
                  1.0, A, LDA, B, LDB, 0.0, C, blasint(N));
  }
#endif
    return;
  case Impl::Loops:
    runLoops(A, B, C);
    return;
  }
}

template <typename T>
void MatMulKernel<T>::runLoops(const T *A, const T *B, T *C) {
  // Transposed operands are copied to row-major [M,K] and [K,N] first.
  if (TA) {
    T *S = ScratchA.data();
    for (int64_t Kk = 0; Kk < K; ++Kk)
      for (int64_t I = 0; I < M; ++I)
        S[I * K + Kk] = A[Kk * M + I];
    A = S;
  }
  if (TB) {
    T *S = ScratchB.data();
    for (int64_t J = 0; J < N; ++J)
      for (int64_t Kk = 0; Kk < K; ++Kk)
        S[Kk * N + J] = B[J * K + Kk];
    B = S;
  }
  const int64_t NN = N, KK = K;
  parallelFor(M, std::max<int64_t>(1, GrainCheap / (N * K)), Threads,
              [&](int64_t Begin, int64_t End) {
                // Panels of B that stay in cache across rows.
                constexpr int64_t KBlock = 128, NBlock = 512;
                for (int64_t I = Begin; I < End; ++I)
                  std::memset(C + I * NN, 0, size_t(NN) * sizeof(T));
                for (int64_t K0 = 0; K0 < KK; K0 += KBlock) {
                  int64_t K1 = std::min(KK, K0 + KBlock);
                  for (int64_t J0 = 0; J0 < NN; J0 += NBlock) {
                    int64_t J1 = std::min(NN, J0 + NBlock);
                    for (int64_t I = Begin; I < End; ++I) {
                      T *CR = C + I * NN;
                      for (int64_t Kk = K0; Kk < K1; ++Kk) {
                        const T AV = A[I * KK + Kk];
                        const T *BR = B + Kk * NN;
                        for (int64_t J = J0; J < J1; ++J)
                          CR[J] += AV * BR[J];
                      }
                    }
                  }
                }
              });
}

KernelOr createMatMul(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("MatMul takes 2 inputs, got 0");
  return makeFloatKernel<MatMulKernel>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerMatMulKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "MatMul", createMatMul);
}
