//===- Conv.cu - Matrix products, convolutions and pooling on GPUs --------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// MatMul through cuBLAS (row-major products as column-major ones with the
// operands swapped). Convolutions on NHWC images and HWIO filters:
// Conv2DBackpropFilter as im2col and one cuBLAS product, any type and
// padding; Conv2D and Conv2DBackpropInput through cuDNN for float32 with
// symmetric padding (filters transposed to cuDNN's KRSC layout, i.e. OHWI,
// per run; FMA math, no TF32, deterministic algorithms), otherwise
// (float64, TensorFlow's asymmetric SAME padding, builds without cuDNN,
// MDRT_CUDA_CONV_GEMM=1) also as im2col and one product (Lowering; the
// input gradient as a convolution of dy dilated by the strides with the
// turned filter). Own direct kernels where the column matrix cannot be
// allocated (the filter gradient too), or cuDNN fails on a run. With
// MDRT_CUDA_KERNELS=reference, products and convolutions are one element per
// thread in the CPU reference loops' order (ReferenceMath.h), never cuBLAS or
// cuDNN. MaxPool and MaxPoolGrad are own kernels with the CPU's tie rule (the
// first maximum of a window in row-major order gets the gradient), which cuDNN
// does not promise.
//
//===----------------------------------------------------------------------===//

#include "../EnvFlag.h"
#include "CudaCommon.h"
#include "Lowering.h"
#include "Pooling.h"
#include "ReferenceMath.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

using namespace mdrt;
using namespace mdrt::cuda;

namespace {

template <template <typename> class KT, typename... Args>
KernelOr makeFloat(const KernelInfo &I, DType T, Args... A) {
  if (T == DType::Float32) {
    auto K = std::make_unique<KT<float>>(A...);
    MDRT_RETURN_IF_ERROR(K->bind());
    MDRT_RETURN_IF_ERROR(K->init(I));
    return std::unique_ptr<Kernel>(std::move(K));
  }
  if (T == DType::Float64) {
    auto K = std::make_unique<KT<double>>(A...);
    MDRT_RETURN_IF_ERROR(K->bind());
    MDRT_RETURN_IF_ERROR(K->init(I));
    return std::unique_ptr<Kernel>(std::move(K));
  }
  return typeError(I, T);
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

/// Row-major Y[M,N] = op(A) op(B) + Beta Y with cuBLAS, which is
/// column-major: Y^T = op(B)^T op(A)^T. A is [M,K] ([K,M] when \p TA), B is
/// [K,N] ([N,K] when \p TB); the sizes are below 2^31.
template <typename T>
cublasStatus_t gemmRowMajor(cublasHandle_t H, bool TA, bool TB, int64_t M,
                            int64_t N, int64_t K, const T *A, const T *B,
                            T Beta, T *Y) {
  cublasOperation_t OB = TB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t OA = TA ? CUBLAS_OP_T : CUBLAS_OP_N;
  int LdB = int(TB ? K : N), LdA = int(TA ? M : K);
  const T One = 1;
  if constexpr (std::is_same<T, float>::value)
    return cublasSgemm(H, OB, OA, int(N), int(M), int(K), &One, B, LdB, A, LdA,
                       &Beta, Y, int(N));
  else
    return cublasDgemm(H, OB, OA, int(N), int(M), int(K), &One, B, LdB, A, LdA,
                       &Beta, Y, int(N));
}

/// The reference product (ReferenceMath.h), one element per thread.
template <typename T>
__global__ void refMatMulKernel(const T *A, const T *B, T *Y, int64_t M,
                                int64_t N, int64_t K, bool TA, bool TB) {
  GRID_STRIDE(I, M * N) { Y[I] = refMatMulAt(A, B, M, N, K, TA, TB, I); }
}

template <typename T> class MatMulKernel : public CudaKernel {
public:
  Status init(const KernelInfo &I) {
    cpu::MatMulDims D;
    MDRT_RETURN_IF_ERROR(cpu::matMulDims(I, D));
    M = D.M;
    N = D.N;
    K = D.K;
    TA = D.TA;
    TB = D.TB;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
      return Status::error("MatMul dimensions beyond 2^31 are not supported "
                           "on GPUs");
    Reference = referenceKernels();
    return Status::ok();
  }

  void run(const ExecContext &C) override {
    if (!M || !N)
      return;
    T *Y = static_cast<T *>(C.Out[0]);
    if (!K) {
      cudaError_t E =
          cudaMemsetAsync(Y, 0, size_t(M * N) * sizeof(T), Ctx->Stream);
      if (E != cudaSuccess)
        Ctx->fail(cudaStatus(E, "cudaMemsetAsync"));
      return;
    }
    const T *A = static_cast<const T *>(C.In[0]);
    const T *B = static_cast<const T *>(C.In[1]);
    if (Reference) {
      refMatMulKernel<T>
          <<<gridFor(M * N), 256, 0, Ctx->Stream>>>(A, B, Y, M, N, K, TA, TB);
      Ctx->checkLaunch("MatMul");
      return;
    }
    cublasStatus_t S =
        gemmRowMajor<T>(Ctx->Blas, TA, TB, M, N, K, A, B, T(0), Y);
    if (S != CUBLAS_STATUS_SUCCESS)
      Ctx->fail(cublasError(S, "cublasSgemm/cublasDgemm"));
  }

private:
  int64_t M = 0, N = 0, K = 0;
  bool TA = false, TB = false;
  /// MDRT_CUDA_KERNELS=reference: refMatMulKernel instead of cuBLAS.
  bool Reference = false;
};

//===----------------------------------------------------------------------===//
// Window geometry (as lib/cpu pads: TensorFlow's SAME / VALID)
//===----------------------------------------------------------------------===//

Status windowGeometry(const KernelInfo &I, const std::vector<int64_t> &X,
                      int64_t KH, int64_t KW, const char *DefaultPadding,
                      Geometry &G) {
  cpu::Window2D Win;
  MDRT_RETURN_IF_ERROR(cpu::windowGeometry(I, X, KH, KW, DefaultPadding, Win));
  fromWindow(Win, G);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

using cpu::ConvMode;

/// The direct convolution kernels, one element per thread in the CPU
/// reference loops' order (ReferenceMath.h): the reference kernels, and
/// the fallback where a column matrix cannot be had.
template <typename T>
__global__ void convForwardKernel(Geometry G, const T *X, const T *F, T *Y) {
  GRID_STRIDE(I, G.N * G.OH * G.OW * G.Co) {
    Y[I] = refConvForwardAt(G, X, F, I);
  }
}
template <typename T>
__global__ void convBackwardDataKernel(Geometry G, const T *F, const T *DY,
                                       T *DX) {
  GRID_STRIDE(I, G.N * G.H * G.W * G.C) {
    DX[I] = refConvBackwardDataAt(G, F, DY, I);
  }
}
template <typename T>
__global__ void convBackwardFilterKernel(Geometry G, const T *X, const T *DY,
                                         T *DF) {
  GRID_STRIDE(I, G.KH * G.KW * G.C * G.Co) {
    DF[I] = refConvBackwardFilterAt(G, X, DY, I);
  }
}

constexpr int Im2colBlock = 256;

/// Rows P0 .. P0 + Rows - 1 of the column matrix of \p L (Lowering.h). A
/// group of \p Lanes threads (a power of two up to 32, so that a group
/// never straddles a warp) makes a row: each of its threads decomposes the
/// row's grid position, then copies k = lane, lane + Lanes, ... (\p Tab
/// holds each k's kh, kw, c), so that consecutive threads write consecutive
/// k. No shared memory, no barrier: the index arithmetic is paid once a
/// row, not once an element.
template <typename T, bool Dilated>
__global__ void im2colKernel(Lowering L, const int4 *__restrict__ Tab, int Kc,
                             int Lanes, const T *__restrict__ Src,
                             T *__restrict__ Col, int64_t P0, int64_t Rows) {
  const int64_t First =
      (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / Lanes;
  const int64_t Groups = int64_t(gridDim.x) * blockDim.x / Lanes;
  const int Lane = int(threadIdx.x) & (Lanes - 1);
  for (int64_t R = First; R < Rows; R += Groups) {
    const LoweredRow Row = lowerRow(L, P0 + R);
    const T *SrcImg = Src + Row.Image;
    T *Out = Col + R * Kc;
#pragma unroll 4
    for (int K = Lane; K < Kc; K += Lanes) {
      const int4 E = Tab[K];
      const int64_t Off = lowerColumn<Dilated>(L, Row, E.x, E.y, E.z);
      Out[K] = Off < 0 ? T(0) : SrcImg[Off];
    }
  }
}

/// The input gradient's filter (Lowering.h): Out[i] = F[turnedFilterSource(i)].
template <typename T>
__global__ void turnFilter(const T *__restrict__ F, T *__restrict__ Out,
                           int64_t KH, int64_t KW, int64_t Ci, int64_t Co) {
  GRID_STRIDE(I, KH * KW * Ci * Co) {
    Out[I] = F[turnedFilterSource(I, KH, KW, Ci, Co)];
  }
}

/// HWIO [KH*KW, Ci, Co] -> OHWI [Co, KH*KW, Ci] (cuDNN's KRSC filters).
template <typename T>
__global__ void hwioToOhwi(const T *In, T *Out, int64_t KHW, int64_t Ci,
                           int64_t Co) {
  GRID_STRIDE(I, KHW * Ci * Co) {
    int64_t O = I % Co, R = I / Co;
    int64_t C = R % Ci, P = R / Ci;
    Out[(O * KHW + P) * Ci + C] = In[I];
  }
}

#ifdef MDRT_HAVE_CUDNN
/// Whether MDRT_CUDNN_FIND asks for timed algorithm choice (set, not "0").
static bool timeCudnnAlgorithms() {
  static const bool On = envFlag("MDRT_CUDNN_FIND");
  return On;
}

/// Whether MDRT_CUDA_CONV_GEMM asks for im2col and cuBLAS (Lowering) also
/// where cuDNN would run a convolution (set, not "0").
static bool lowerAllConvolutions() {
  static const bool On = envFlag("MDRT_CUDA_CONV_GEMM");
  return On;
}

/// Says once that MDRT_CUDNN_FIND could not time a convolution's algorithms.
static void noteTimingSkipped(const char *Why) {
  static std::once_flag Once;
  std::call_once(Once, [&] {
    std::fprintf(stderr,
                 "note: MDRT_CUDNN_FIND: cannot time a convolution's "
                 "algorithms (%s); cuDNN's heuristics choose them\n",
                 Why);
  });
}

/// Algorithms that compute in a transformed domain (FFT, Winograd).
static bool isTransformAlgo(cudnnConvolutionFwdAlgo_t A) {
  return A == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
         A == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         A == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         A == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
static bool isTransformAlgo(cudnnConvolutionBwdDataAlgo_t A) {
  return A == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         A == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         A == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         A == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
#endif

template <typename T> class ConvKernel : public CudaKernel {
public:
  explicit ConvKernel(ConvMode Mode) : Mode(Mode) {}
  ~ConvKernel() override {
#ifdef MDRT_HAVE_CUDNN
    if (XDesc)
      cudnnDestroyTensorDescriptor(XDesc);
    if (YDesc)
      cudnnDestroyTensorDescriptor(YDesc);
    if (FDesc)
      cudnnDestroyFilterDescriptor(FDesc);
    if (CDesc)
      cudnnDestroyConvolutionDescriptor(CDesc);
#endif
  }

  Status init(const KernelInfo &I) {
    cpu::ConvGeometry CG;
    MDRT_RETURN_IF_ERROR(cpu::convGeometry(I, Mode, CG));
    fromWindow(CG.Win, G);
    G.Co = CG.Co;
    OutBytes = I.Outputs[0].bytes();
    Degenerate = !G.N || !G.H || !G.W || !G.C || !G.Co || !G.OH || !G.OW;
    if (Degenerate)
      return Status::ok();
    Reference = referenceKernels();
    if (Reference)
      return Status::ok();
#ifdef MDRT_HAVE_CUDNN
    // The filter gradient stays off cuDNN: it is one matrix product,
    // im2col(x)^T dy, which cuBLAS runs several times faster than cuDNN's
    // deterministic float32 algorithms (NHWC) and than a direct kernel.
    if (Mode != ConvMode::BackwardFilter && std::is_same<T, float>::value &&
        G.PT == G.PB && G.PL == G.PR && Ctx->Dnn && !lowerAllConvolutions()) {
      // cuDNN is an optimisation: what it rejects runs on the own kernels.
      Status S = initCudnn();
      if (!S.isOk()) {
        UseCudnn = false;
        cudaGetLastError(); // A failed allocation must not fail a launch.
        static std::once_flag Once;
        std::call_once(Once, [&] {
          std::fprintf(stderr,
                       "note: cuDNN cannot run a convolution (%s); mdrun's "
                       "own kernels run it\n",
                       S.message().c_str());
        });
      }
    }
    if (UseCudnn)
      return Status::ok();
#endif
    // Otherwise im2col and cuBLAS; the direct kernels where the column
    // matrix or its table cannot be had (a note, once).
    Status S = initLowering();
    if (!S.isOk()) {
      cudaGetLastError();
      Lowered = false;
      Table.release();
      Turned.release();
      static std::once_flag Once;
      std::call_once(Once, [&] {
        std::fprintf(stderr,
                     "note: a convolution runs on mdrun's direct kernels "
                     "(%s)\n",
                     S.message().c_str());
      });
    }
    return Status::ok();
  }

  void run(const ExecContext &C) override {
    cudaStream_t S = Ctx->Stream;
    if (Degenerate) {
      if (OutBytes) {
        cudaError_t E = cudaMemsetAsync(C.Out[0], 0, OutBytes, S);
        if (E != cudaSuccess)
          Ctx->fail(cudaStatus(E, "cudaMemsetAsync"));
      }
      return;
    }
    if (Reference) {
      runDirect(C);
      return;
    }
#ifdef MDRT_HAVE_CUDNN
    if (UseCudnn) {
      cudnnStatus_t E = runCudnn(C);
      if (E == CUDNN_STATUS_SUCCESS)
        return;
      // The heuristics run nothing: an algorithm they ranked can still fail
      // on its first call (not supported, a sublibrary missing). A failed
      // call leaves no sticky error, so this convolution goes over to the
      // own kernels for good, from this call on (the first run of a program
      // is eager, before any CUDA graph is captured).
      UseCudnn = false;
      static std::once_flag Once;
      std::call_once(Once, [&] {
        std::fprintf(stderr,
                     "note: cuDNN failed a convolution (%s); mdrun's own "
                     "kernels run it\n",
                     cudnnGetErrorString(E));
      });
    }
#endif
    if (Lowered) {
      runLowered(static_cast<const T *>(C.In[0]),
                 static_cast<const T *>(C.In[1]), static_cast<T *>(C.Out[0]));
      return;
    }
    runDirect(C);
  }

private:
  /// The direct kernels (the reference kernels' order).
  void runDirect(const ExecContext &C) {
    cudaStream_t S = Ctx->Stream;
    const T *A = static_cast<const T *>(C.In[0]);
    const T *B = static_cast<const T *>(C.In[1]);
    T *Y = static_cast<T *>(C.Out[0]);
    switch (Mode) {
    case ConvMode::Forward:
      convForwardKernel<T>
          <<<gridFor(G.N * G.OH * G.OW * G.Co), 256, 0, S>>>(G, A, B, Y);
      break;
    case ConvMode::BackwardData:
      convBackwardDataKernel<T>
          <<<gridFor(G.N * G.H * G.W * G.C), 256, 0, S>>>(G, A, B, Y);
      break;
    case ConvMode::BackwardFilter:
      convBackwardFilterKernel<T>
          <<<gridFor(G.KH * G.KW * G.C * G.Co), 256, 0, S>>>(G, A, B, Y);
      break;
    }
    Ctx->checkLaunch("a convolution");
  }

  /// Sets up the column matrix of this mode (Lowering): its table, at
  /// most MaxColumnBytes of rows at a time, and for the input gradient the
  /// turned filter.
  Status initLowering() {
    const bool Data = Mode == ConvMode::BackwardData;
    L = lowerConvolution(G, Mode);
    // The dilated path divides in 32 bits (lowerColumn).
    if (L.dilated() &&
        (G.H + G.PT + G.KH >= INT32_MAX || G.W + G.PL + G.KW >= INT32_MAX ||
         G.SH > INT32_MAX || G.SW > INT32_MAX))
      return Status::error("the input is too large for im2col");
    const int64_t Kc = L.columns(), Rows = L.rows();
    if (Kc > INT32_MAX - 32 || G.Co > INT32_MAX || G.C > INT32_MAX)
      return Status::error("convolution filters of more than 2^31 elements "
                           "are not supported on GPUs");
    ChunkRows = std::max<int64_t>(1, MaxColumnBytes / int64_t(Kc * sizeof(T)));
    ChunkRows = std::min<int64_t>({ChunkRows, Rows, INT32_MAX});
    Lanes = 1;
    while (Lanes < 32 && Lanes < Kc)
      Lanes *= 2;
    // As many blocks as fit on the GPU at once (the kernel's registers
    // allow fewer than 8 of 256 threads a multiprocessor).
    int PerSM = 0;
    cudaError_t Occ = L.dilated()
                          ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &PerSM, im2colKernel<T, true>, Im2colBlock, 0)
                          : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &PerSM, im2colKernel<T, false>, Im2colBlock, 0);
    if (Occ != cudaSuccess || PerSM < 1) {
      cudaGetLastError();
      PerSM = 2048 / Im2colBlock;
    }
    MaxIm2colBlocks = int64_t(Ctx->Multiprocessors) * PerSM;
    std::vector<int4> Tab;
    Tab.reserve(size_t(Kc));
    for (int64_t Kh = 0; Kh < G.KH; ++Kh)
      for (int64_t Kw = 0; Kw < G.KW; ++Kw)
        for (int64_t Ci = 0; Ci < L.SrcC; ++Ci)
          Tab.push_back(make_int4(int(Kh), int(Kw), int(Ci), 0));
    MDRT_RETURN_IF_ERROR(Table.allocate(Tab.size() * sizeof(int4)));
    // On the kernels' stream, and waited for: a cudaMemcpy from pageable
    // memory may return before the data reached the device, and is not
    // ordered with a non-blocking stream.
    cudaError_t E =
        cudaMemcpyAsync(Table.get(), Tab.data(), Tab.size() * sizeof(int4),
                        cudaMemcpyHostToDevice, Ctx->Stream);
    if (E != cudaSuccess)
      return cudaStatus(E, "cudaMemcpyAsync");
    E = cudaStreamSynchronize(Ctx->Stream);
    if (E != cudaSuccess)
      return cudaStatus(E, "cudaStreamSynchronize");
    if (Data)
      MDRT_RETURN_IF_ERROR(
          Turned.allocate(size_t(G.KH * G.KW * G.C * G.Co) * sizeof(T)));
    MDRT_RETURN_IF_ERROR(
        Ctx->reserveScratch(size_t(ChunkRows * Kc) * sizeof(T)));
    Lowered = true;
    return Status::ok();
  }

  /// Rows P0 .. P0 + R - 1 of the column matrix of \p Src.
  void im2col(const T *Src, int64_t P0, int64_t R) {
    const int Kc = int(L.columns());
    const unsigned Blocks = unsigned(
        std::min<int64_t>(gridFor(R * Lanes, Im2colBlock), MaxIm2colBlocks));
    const auto *Tab = static_cast<const int4 *>(Table.get());
    T *ColP = static_cast<T *>(Ctx->scratch());
    if (!L.dilated())
      im2colKernel<T, false><<<Blocks, Im2colBlock, 0, Ctx->Stream>>>(
          L, Tab, Kc, Lanes, Src, ColP, P0, R);
    else
      im2colKernel<T, true><<<Blocks, Im2colBlock, 0, Ctx->Stream>>>(
          L, Tab, Kc, Lanes, Src, ColP, P0, R);
    Ctx->checkLaunch("im2col");
  }

  /// The mode's product, chunk by chunk:
  ///  - Forward (In: x, f): y[p, co] = col(x)[p, :] f.
  ///  - BackwardData (In: f, dy): dx[p, ci] = col(dy)[p, :] turned(f).
  ///  - BackwardFilter (In: x, dy): df = col(x)^T dy, summed over the
  ///    chunks (beta 1 after the first).
  void runLowered(const T *A, const T *B, T *Y) {
    const int64_t Kc = L.columns(), Rows = L.rows();
    const T *ColP = static_cast<const T *>(Ctx->scratch());
    const T *Right = B;
    int64_t Cols = G.Co;
    if (Mode == ConvMode::BackwardData) {
      turnFilter<T><<<gridFor(G.KH * G.KW * G.C * G.Co), 256, 0, Ctx->Stream>>>(
          A, static_cast<T *>(Turned.get()), G.KH, G.KW, G.C, G.Co);
      Ctx->checkLaunch("a filter transposition");
      Right = static_cast<const T *>(Turned.get());
      Cols = G.C;
    }
    for (int64_t P0 = 0; P0 < Rows; P0 += ChunkRows) {
      const int64_t R = std::min(ChunkRows, Rows - P0);
      im2col(Mode == ConvMode::BackwardData ? B : A, P0, R);
      cublasStatus_t St;
      if (Mode == ConvMode::BackwardFilter)
        St = gemmRowMajor<T>(Ctx->Blas, true, false, Kc, G.Co, R, ColP,
                             B + P0 * G.Co, P0 ? T(1) : T(0), Y);
      else
        St = gemmRowMajor<T>(Ctx->Blas, false, false, R, Cols, Kc, ColP, Right,
                             T(0), Y + P0 * Cols);
      if (St != CUBLAS_STATUS_SUCCESS) {
        Ctx->fail(cublasError(St, "cublasSgemm/cublasDgemm"));
        return;
      }
    }
  }

  /// The column matrix's largest chunk (in the device's scratch, shared
  /// by its kernels: Context::reserveScratch).
  static constexpr int64_t MaxColumnBytes = int64_t(128) << 20;

  Lowering L;
  bool Lowered = false;
  int Lanes = 1;
  int64_t MaxIm2colBlocks = 1;
  int64_t ChunkRows = 0;
  DeviceBuffer Table, Turned;

#ifdef MDRT_HAVE_CUDNN
  Status initCudnn() {
    auto Try = [](cudnnStatus_t E, const char *What) {
      return E == CUDNN_STATUS_SUCCESS ? Status::ok() : cudnnError(E, What);
    };
    const cudnnDataType_t DT = CUDNN_DATA_FLOAT;
    MDRT_RETURN_IF_ERROR(Try(cudnnCreateTensorDescriptor(&XDesc), "create"));
    MDRT_RETURN_IF_ERROR(Try(cudnnCreateTensorDescriptor(&YDesc), "create"));
    MDRT_RETURN_IF_ERROR(Try(cudnnCreateFilterDescriptor(&FDesc), "create"));
    MDRT_RETURN_IF_ERROR(
        Try(cudnnCreateConvolutionDescriptor(&CDesc), "create"));
    MDRT_RETURN_IF_ERROR(
        Try(cudnnSetTensor4dDescriptor(XDesc, CUDNN_TENSOR_NHWC, DT, int(G.N),
                                       int(G.C), int(G.H), int(G.W)),
            "cudnnSetTensor4dDescriptor"));
    MDRT_RETURN_IF_ERROR(
        Try(cudnnSetTensor4dDescriptor(YDesc, CUDNN_TENSOR_NHWC, DT, int(G.N),
                                       int(G.Co), int(G.OH), int(G.OW)),
            "cudnnSetTensor4dDescriptor"));
    // NHWC filters are KRSC: [Co, KH, KW, Ci].
    MDRT_RETURN_IF_ERROR(
        Try(cudnnSetFilter4dDescriptor(FDesc, DT, CUDNN_TENSOR_NHWC, int(G.Co),
                                       int(G.C), int(G.KH), int(G.KW)),
            "cudnnSetFilter4dDescriptor"));
    // Cross-correlation, as TensorFlow's Conv2D.
    MDRT_RETURN_IF_ERROR(Try(cudnnSetConvolution2dDescriptor(
                                 CDesc, int(G.PT), int(G.PL), int(G.SH),
                                 int(G.SW), 1, 1, CUDNN_CROSS_CORRELATION, DT),
                             "cudnnSetConvolution2dDescriptor"));
    // Full float32 arithmetic (no TF32), as on the CPU.
    MDRT_RETURN_IF_ERROR(Try(cudnnSetConvolutionMathType(CDesc, CUDNN_FMA_MATH),
                             "cudnnSetConvolutionMathType"));
    cudnnHandle_t H = Ctx->Dnn;
    constexpr int MaxAlgos = 16;
    constexpr size_t MaxWorkspace = size_t(256) << 20;
    int Got = 0;
    size_t Work = 0;
    bool Found = false;
    // MDRT_CUDNN_FIND=1: rank the algorithms by running them on scratch
    // tensors (cudnnFind*AlgorithmEx, as PyTorch's cudnn.benchmark does)
    // rather than by cuDNN's heuristics, whose first pick for the CNN's
    // second convolution took 3.5x the time of the one PyTorch found. Not
    // the default until measured on a GPU (docs/Cuda.md). Scratch that does
    // not fit, or a timing that fails, leaves the choice to the heuristics
    // (with a note). The scratch is freed before the kernel's own buffers
    // are allocated.
    struct {
      bool Ok = false;
      DeviceBuffer X, F, Y, Work;
    } Timed;
    // In the ranking, the first deterministic float32 (FMA) algorithm that
    // fits; one computed like a matrix product before the FFT and Winograd
    // ones, whose rounding is further from the CPU's direct convolution.
    // Timed entries must have been timed with FMA math (a default-math
    // time may be TF32's).
    auto Pick = [&](auto *Perf, auto &Algo) {
      for (int Pass = 0; Pass < 2 && !Found; ++Pass)
        for (int K = 0; K < Got && !Found; ++K)
          if (Perf[K].status == CUDNN_STATUS_SUCCESS &&
              Perf[K].determinism == CUDNN_DETERMINISTIC &&
              (Perf[K].mathType == CUDNN_FMA_MATH ||
               (!Timed.Ok && Perf[K].mathType == CUDNN_DEFAULT_MATH)) &&
              Perf[K].memory <= MaxWorkspace &&
              (Pass == 1 || !isTransformAlgo(Perf[K].algo))) {
            Algo = Perf[K].algo;
            Work = Perf[K].memory;
            Found = true;
          }
    };
    if (Mode != ConvMode::BackwardFilter && timeCudnnAlgorithms()) {
      // Zeroed on the device's stream, which cuDNN's timing runs on.
      auto Zeroed = [&](DeviceBuffer &B, size_t Bytes) {
        return B.allocate(Bytes).isOk() &&
               cudaMemsetAsync(B.get(), 0, Bytes, Ctx->Stream) == cudaSuccess;
      };
      Timed.Ok =
          Zeroed(Timed.X, size_t(G.N * G.H * G.W * G.C) * sizeof(T)) &&
          Zeroed(Timed.F, size_t(G.KH * G.KW * G.C * G.Co) * sizeof(T)) &&
          Zeroed(Timed.Y, size_t(G.N * G.OH * G.OW * G.Co) * sizeof(T)) &&
          Timed.Work.allocate(MaxWorkspace).isOk();
      if (!Timed.Ok) {
        cudaGetLastError(); // A failed cudaMalloc is not sticky.
        noteTimingSkipped("no device memory for the scratch tensors");
      }
    }
    // A failed timing: the heuristics choose.
    auto Timing = [&](cudnnStatus_t E) {
      if (E == CUDNN_STATUS_SUCCESS)
        return true;
      cudaGetLastError();
      noteTimingSkipped(cudnnGetErrorString(E));
      Timed.Ok = false;
      return false;
    };
    switch (Mode) {
    case ConvMode::Forward: {
      cudnnConvolutionFwdAlgoPerf_t Perf[MaxAlgos];
      if (!Timed.Ok || !Timing(cudnnFindConvolutionForwardAlgorithmEx(
                           H, XDesc, Timed.X.get(), FDesc, Timed.F.get(), CDesc,
                           YDesc, Timed.Y.get(), MaxAlgos, &Got, Perf,
                           Timed.Work.get(), Timed.Work.size())))
        MDRT_RETURN_IF_ERROR(
            Try(cudnnGetConvolutionForwardAlgorithm_v7(
                    H, XDesc, FDesc, CDesc, YDesc, MaxAlgos, &Got, Perf),
                "cudnnGetConvolutionForwardAlgorithm_v7"));
      Pick(Perf, FwdAlgo);
      break;
    }
    case ConvMode::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t Perf[MaxAlgos];
      if (!Timed.Ok || !Timing(cudnnFindConvolutionBackwardDataAlgorithmEx(
                           H, FDesc, Timed.F.get(), YDesc, Timed.Y.get(), CDesc,
                           XDesc, Timed.X.get(), MaxAlgos, &Got, Perf,
                           Timed.Work.get(), Timed.Work.size())))
        MDRT_RETURN_IF_ERROR(
            Try(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                    H, FDesc, YDesc, CDesc, XDesc, MaxAlgos, &Got, Perf),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
      Pick(Perf, DataAlgo);
      break;
    }
    case ConvMode::BackwardFilter: // im2col and cuBLAS (initLowering).
      return Status::ok();
    }
    Timed.X.release();
    Timed.F.release();
    Timed.Y.release();
    Timed.Work.release();
    if (!Found)
      return Status::ok(); // The own kernels then.
    // The descriptor stays at CUDNN_FMA_MATH whatever math type the
    // algorithm was ranked with: CUDNN_DEFAULT_MATH allows TF32 on A100 and
    // later GPUs. The workspace is what cuDNN asks for the algorithm.
    size_t Need = 0;
    switch (Mode) {
    case ConvMode::Forward:
      MDRT_RETURN_IF_ERROR(
          Try(cudnnGetConvolutionForwardWorkspaceSize(H, XDesc, FDesc, CDesc,
                                                      YDesc, FwdAlgo, &Need),
              "cudnnGetConvolutionForwardWorkspaceSize"));
      break;
    case ConvMode::BackwardData:
      MDRT_RETURN_IF_ERROR(
          Try(cudnnGetConvolutionBackwardDataWorkspaceSize(
                  H, FDesc, YDesc, CDesc, XDesc, DataAlgo, &Need),
              "cudnnGetConvolutionBackwardDataWorkspaceSize"));
      break;
    case ConvMode::BackwardFilter:
      break;
    }
    Work = std::max(Work, Need);
    MDRT_RETURN_IF_ERROR(Workspace.allocate(Work));
    MDRT_RETURN_IF_ERROR(
        Filter.allocate(size_t(G.KH * G.KW * G.C * G.Co) * sizeof(T)));
    UseCudnn = true;
    return Status::ok();
  }

  /// Runs the convolution with cuDNN; what cuDNN returned (a launch error
  /// of the filter transpose goes to the context).
  cudnnStatus_t runCudnn(const ExecContext &C) {
    cudaStream_t S = Ctx->Stream;
    const float One = 1, Zero = 0;
    int64_t KHW = G.KH * G.KW, NF = KHW * G.C * G.Co;
    T *Ohwi = static_cast<T *>(Filter.get());
    cudnnStatus_t E = CUDNN_STATUS_SUCCESS;
    switch (Mode) {
    case ConvMode::Forward:
      hwioToOhwi<T><<<gridFor(NF), 256, 0, S>>>(static_cast<const T *>(C.In[1]),
                                                Ohwi, KHW, G.C, G.Co);
      Ctx->checkLaunch("a filter transpose");
      E = cudnnConvolutionForward(Ctx->Dnn, &One, XDesc, C.In[0], FDesc, Ohwi,
                                  CDesc, FwdAlgo, Workspace.get(),
                                  Workspace.size(), &Zero, YDesc, C.Out[0]);
      break;
    case ConvMode::BackwardData:
      hwioToOhwi<T><<<gridFor(NF), 256, 0, S>>>(static_cast<const T *>(C.In[0]),
                                                Ohwi, KHW, G.C, G.Co);
      Ctx->checkLaunch("a filter transpose");
      E = cudnnConvolutionBackwardData(
          Ctx->Dnn, &One, FDesc, Ohwi, YDesc, C.In[1], CDesc, DataAlgo,
          Workspace.get(), Workspace.size(), &Zero, XDesc, C.Out[0]);
      break;
    case ConvMode::BackwardFilter:
      break;
    }
    // A failed call falls back to the own kernels: a launch error it may
    // have left in the thread's last error (not sticky) must not be taken
    // for theirs by the next check. The transpose's was checked above.
    if (E != CUDNN_STATUS_SUCCESS)
      cudaGetLastError();
    return E;
  }

  bool UseCudnn = false;
  cudnnTensorDescriptor_t XDesc = nullptr, YDesc = nullptr;
  cudnnFilterDescriptor_t FDesc = nullptr;
  cudnnConvolutionDescriptor_t CDesc = nullptr;
  cudnnConvolutionFwdAlgo_t FwdAlgo{};
  cudnnConvolutionBwdDataAlgo_t DataAlgo{};
  DeviceBuffer Workspace, Filter;
#endif

  ConvMode Mode;
  Geometry G;
  size_t OutBytes = 0;
  bool Degenerate = false;
  /// MDRT_CUDA_KERNELS=reference: the direct kernels, never cuDNN or a
  /// column matrix.
  bool Reference = false;
};

template <ConvMode Mode> KernelOr createConv(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error(I.Op + " takes 2 inputs, got 0");
  return makeFloat<ConvKernel>(
      I, I.Outputs.empty() ? I.Inputs[0].Type : I.Outputs[0].Type, Mode);
}

//===----------------------------------------------------------------------===//
// Max pooling
//===----------------------------------------------------------------------===//

template <typename T, typename Idx>
__global__ void maxPoolKernel(WindowAs<Idx> G, const T *X, T *Y) {
  GRID_STRIDE_AS(Idx, I, G.N * G.OH * G.OW * G.C) { Y[I] = maxPoolAt(G, X, I); }
}

/// dx[pixel] = sum of dy over the windows whose first maximum is the pixel,
/// added in window order (as the CPU scatters them).
template <typename T, typename Idx>
__global__ void maxPoolGradKernel(WindowAs<Idx> G, const T *X, const T *DY,
                                  T *DX) {
  GRID_STRIDE_AS(Idx, I, G.N * G.H * G.W * G.C) {
    DX[I] = maxPoolGradAt(G, X, DY, I);
  }
}

/// The gradient when the windows tile the input exactly (poolingTiles):
/// one thread per window.
template <typename T, typename Idx>
__global__ void maxPoolGradTiledKernel(WindowAs<Idx> G, const T *X, const T *DY,
                                       T *DX) {
  GRID_STRIDE_AS(Idx, I, G.N * G.OH * G.OW * G.C) {
    maxPoolGradTiledAt(G, X, DY, DX, I);
  }
}

template <typename T> class MaxPoolKernel : public CudaKernel {
public:
  explicit MaxPoolKernel(bool Grad) : Grad(Grad) {}
  Status init(const KernelInfo &I) {
    unsigned NumIn = Grad ? 3 : 1;
    MDRT_RETURN_IF_ERROR(cpu::checkArity(I, NumIn, NumIn, 1));
    std::vector<unsigned> Ins = {0};
    if (Grad)
      Ins = {0, 1, 2};
    MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, Ins, {0}, I.Inputs[0].Type));
    std::vector<int64_t> K = I.Attrs.getInts("ksize");
    if (K.size() != 2)
      return Status::error("'ksize' must be two positive integers, got " +
                           cpu::shapeStr(K));
    MDRT_RETURN_IF_ERROR(
        windowGeometry(I, I.Inputs[0].Shape, K[0], K[1], "VALID", G));
    const std::vector<int64_t> &Y =
        Grad ? I.Inputs[2].Shape : I.Outputs[0].Shape;
    if (Y != std::vector<int64_t>{G.N, G.OH, G.OW, G.C})
      return Status::error("pooling " + cpu::shapeStr(I.Inputs[0].Shape) +
                           " gives " + cpu::shapeStr({G.N, G.OH, G.OW, G.C}) +
                           ", got " + cpu::shapeStr(Y));
    if (Grad && (I.Inputs[1].Shape != I.Inputs[2].Shape ||
                 I.Outputs[0].Shape != I.Inputs[0].Shape))
      return Status::error("MaxPoolGrad shapes do not match: input " +
                           I.Inputs[0].str() + ", output " + I.Inputs[1].str() +
                           ", dy " + I.Inputs[2].str() + ", dx " +
                           I.Outputs[0].str());
    Tiled = poolingTiles(G);
    return Status::ok();
  }
  void run(const ExecContext &C) override {
    if (!G.N || !G.C || !G.H || !G.W)
      return;
    const T *X = static_cast<const T *>(C.In[0]);
    T *Y = static_cast<T *>(C.Out[0]);
    if (poolingFitsInt32(G))
      launch<int32_t>(C, X, Y);
    else
      launch<int64_t>(C, X, Y);
    Ctx->checkLaunch("MaxPool");
  }

private:
  template <typename Idx> void launch(const ExecContext &C, const T *X, T *Y) {
    cudaStream_t S = Ctx->Stream;
    const WindowAs<Idx> W(G);
    if (Grad && Tiled)
      maxPoolGradTiledKernel<T, Idx>
          <<<gridFor(G.N * G.OH * G.OW * G.C), 256, 0, S>>>(
              W, X, static_cast<const T *>(C.In[2]), Y);
    else if (Grad)
      maxPoolGradKernel<T, Idx><<<gridFor(G.N * G.H * G.W * G.C), 256, 0, S>>>(
          W, X, static_cast<const T *>(C.In[2]), Y);
    else if (G.OH && G.OW)
      maxPoolKernel<T, Idx>
          <<<gridFor(G.N * G.OH * G.OW * G.C), 256, 0, S>>>(W, X, Y);
  }

  bool Grad;
  bool Tiled = false;
  Geometry G;
};

KernelOr createMatMul(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("MatMul takes 2 inputs, got 0");
  return makeFloat<MatMulKernel>(I, I.Inputs[0].Type);
}

template <bool Grad> KernelOr createMaxPool(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error(I.Op + " takes " + (Grad ? "3" : "1") +
                         " inputs, got 0");
  return makeFloat<MaxPoolKernel>(I, I.Inputs[0].Type, Grad);
}

} // namespace

void cuda::registerConvKernels(KernelRegistry &R) {
  const DeviceKind GPU = DeviceKind::GPU;
  R.add(GPU, "MatMul", createMatMul);
  R.add(GPU, "Conv2D", createConv<ConvMode::Forward>);
  R.add(GPU, "Conv2DBackpropInput", createConv<ConvMode::BackwardData>);
  R.add(GPU, "Conv2DBackpropFilter", createConv<ConvMode::BackwardFilter>);
  R.add(GPU, "MaxPool", createMaxPool<false>);
  R.add(GPU, "MaxPoolGrad", createMaxPool<true>);
}
