//===- CudaCommon.h - Shared by the CUDA backend ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/cuda. A Context is what the kernels of one GPU device
// share: the device's stream, its cuBLAS and cuDNN handles (bound to that
// stream), the step counter Dropout reads, and the first error of an
// asynchronous operation (reported by Device::synchronize). Kernels are
// created while their device is current (cuda::activate) and keep its
// Context.
//
// The argument checks are the CPU kernels' (lib/KernelChecks.h, defined
// in lib/cpu/CpuKernels.cpp); nvcc never sees CpuCommon.h (OpenMP,
// oneDNN, target_clones).
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_CUDACOMMON_H
#define MDRT_LIB_CUDA_CUDACOMMON_H

#include "../KernelChecks.h"
#include "mdrt/Kernel.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef MDRT_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace mdrt {

namespace cuda {

using KernelOr = StatusOr<std::unique_ptr<Kernel>>;

/// "cuda <What>: <error string>" for a failed CUDA runtime call.
Status cudaStatus(cudaError_t E, const char *What);
Status cublasError(cublasStatus_t E, const char *What);
#ifdef MDRT_HAVE_CUDNN
Status cudnnError(cudnnStatus_t E, const char *What);
#endif

#define MDRT_CUDA_TRY(Call)                                                    \
  do {                                                                         \
    cudaError_t _E = (Call);                                                   \
    if (_E != cudaSuccess)                                                     \
      return ::mdrt::cuda::cudaStatus(_E, #Call);                              \
  } while (false)

/// What the kernels of one GPU device share.
struct Context {
  int Ordinal = 0;
  /// The GPU's streaming multiprocessors (sizes grids that loop).
  int Multiprocessors = 1;
  std::string Name;
  cudaStream_t Stream = nullptr;
  cublasHandle_t Blas = nullptr;
  /// cuBLAS's workspace, given explicitly so that graph capture never
  /// makes cuBLAS allocate.
  void *BlasWorkspace = nullptr;
#ifdef MDRT_HAVE_CUDNN
  cudnnHandle_t Dnn = nullptr;
#endif
  /// The step (device memory) and its pinned host source.
  uint64_t *DevStep = nullptr;
  uint64_t *HostStep = nullptr;

  /// Records the first failure of an asynchronous operation. While the
  /// device's thread captures a graph, its failures are the capture's (see
  /// beginCapture()); other threads' (a copy to the host they asked for)
  /// stay the device's.
  void fail(const Status &S) {
    if (S.isOk())
      return;
    std::lock_guard<std::mutex> L(M);
    if (Capturing && CaptureThread == std::this_thread::get_id()) {
      if (!CaptureFailed) {
        CaptureFailed = true;
        CaptureMessage = S.message();
      }
      return;
    }
    if (!Failed) {
      Failed = true;
      Message = S.message();
    }
  }
  /// From now on, the calling thread's failures belong to a capture.
  void beginCapture() {
    std::lock_guard<std::mutex> L(M);
    Captured = true;
    Capturing = true;
    CaptureThread = std::this_thread::get_id();
    CaptureFailed = false;
    CaptureMessage.clear();
  }
  /// Ends the capture: the first failure recorded during it.
  Status endCapture() {
    std::lock_guard<std::mutex> L(M);
    Capturing = false;
    bool Was = CaptureFailed;
    CaptureFailed = false;
    return Was ? Status::error(std::move(CaptureMessage)) : Status::ok();
  }
  /// Records a failed launch (cudaGetLastError after a kernel launch).
  void checkLaunch(const char *What) {
    cudaError_t E = cudaGetLastError();
    if (E != cudaSuccess)
      fail(cudaStatus(E, What));
  }
  /// The first recorded error.
  Status error() {
    std::lock_guard<std::mutex> L(M);
    return Failed ? Status::error(Message) : Status::ok();
  }

  /// Scratch memory the kernels of this device share: at least \p Bytes
  /// from now on. Called while kernels are set up (the executor creates
  /// every program's kernels before the first run); kernels take scratch()
  /// when they run, never at set-up. Sharing is safe because one host
  /// thread enqueues this device's kernels, in order, on its one stream. A
  /// growth frees the old buffer once the stream is idle, unless a graph
  /// was captured on this device (whose nodes may hold it): then it stays
  /// until the device goes.
  Status reserveScratch(size_t Bytes) {
    std::lock_guard<std::mutex> L(M);
    if (Bytes <= ScratchBytes)
      return Status::ok();
    void *P = nullptr;
    cudaError_t E = cudaMalloc(&P, Bytes);
    if (E != cudaSuccess)
      return cudaStatus(E, "cudaMalloc");
    if (!Scratch.empty() && !Captured) {
      // The old buffer goes once the work that used it has finished.
      E = cudaStreamSynchronize(Stream);
      if (E != cudaSuccess) {
        (void)cudaFree(P);
        return cudaStatus(E, "cudaStreamSynchronize");
      }
      E = cudaFree(Scratch.back());
      Scratch.pop_back();
      if (E != cudaSuccess) {
        (void)cudaFree(P);
        if (Scratch.empty())
          ScratchBytes = 0;
        return cudaStatus(E, "cudaFree");
      }
    }
    Scratch.push_back(P);
    ScratchBytes = Bytes;
    return Status::ok();
  }
  void *scratch() {
    std::lock_guard<std::mutex> L(M);
    return Scratch.empty() ? nullptr : Scratch.back();
  }
  /// Kernels' reports of input values they could not compute with (a
  /// label out of range), taken once the step's work has finished: each
  /// returns its report and clears it (see InputReport.h).
  using InputReport = std::function<Status()>;
  void addInputReport(InputReport R) {
    std::lock_guard<std::mutex> L(M);
    InputReports.push_back(std::move(R));
  }
  /// The first report of the kernels (in the order they were created), and
  /// every kernel's cleared.
  Status takeInputReports() {
    std::vector<InputReport> Reports;
    {
      std::lock_guard<std::mutex> L(M);
      Reports = InputReports;
    }
    Status First = Status::ok();
    for (const InputReport &R : Reports)
      if (Status S = R(); First.isOk() && !S.isOk())
        (void)(First = std::move(S)); // (void): see ExecContext::fail.
    return First;
  }

  /// Frees the scratch buffers (the device, when it goes).
  void releaseScratch() {
    std::lock_guard<std::mutex> L(M);
    for (void *P : Scratch)
      (void)cudaFree(P); // Nothing to report to on the way out.
    Scratch.clear();
    ScratchBytes = 0;
  }

private:
  std::mutex M;
  bool Failed = false;
  std::string Message;
  bool Capturing = false;
  bool Captured = false;
  std::vector<void *> Scratch;
  size_t ScratchBytes = 0;
  std::thread::id CaptureThread;
  bool CaptureFailed = false;
  std::string CaptureMessage;
  std::vector<InputReport> InputReports;
};

/// The Context of the device made current on this thread by activate(), or
/// null.
Context *currentContext();

/// Device memory owned by a kernel (freed with it).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  Status allocate(size_t Bytes);
  /// Frees the memory now.
  void release();
  void *get() const { return P; }
  size_t size() const { return Size; }

private:
  void *P = nullptr;
  size_t Size = 0;
};

/// One 64-bit word that kernels write in device memory (atomicMin; it
/// holds NoReport, InputReport.h, until one does) and the host reads after
/// a step from page-locked memory: collect() enqueues the copy and the
/// reset after the kernels, also inside a captured graph. (Atomics on
/// mapped host memory are not atomic over PCIe on every platform.) Where
/// the memory cannot be had, device() is null and kernels report nothing.
class ReportWord {
public:
  /// Allocates both words, the device's on the current GPU.
  ReportWord();
  ~ReportWord();
  ReportWord(const ReportWord &) = delete;
  ReportWord &operator=(const ReportWord &) = delete;
  unsigned long long *device() const { return Dev; }
  /// Enqueues on \p Ctx's stream, after the kernels that write the word,
  /// its copy to the host and its reset.
  void collect(Context &Ctx);
  /// The value the last collect() copied (NoReport if none), and the host
  /// word reset. Call it once that copy has finished (a synchronize).
  uint64_t take();

private:
  volatile uint64_t *Host = nullptr;
  unsigned long long *Dev = nullptr;
};

/// Base of the GPU kernels: the Context they were created for.
class CudaKernel : public Kernel {
public:
  Status bind() {
    Ctx = currentContext();
    if (!Ctx)
      return Status::error("no GPU is current while creating the kernel");
    return Status::ok();
  }

protected:
  Context *Ctx = nullptr;
};

/// Wraps a kernel object as a factory result after binding it to the
/// current device.
template <typename K> KernelOr finish(std::unique_ptr<K> P) {
  MDRT_RETURN_IF_ERROR(P->bind());
  return std::unique_ptr<Kernel>(std::move(P));
}

inline bool isFloatType(DType T) {
  return T == DType::Float32 || T == DType::Float64;
}
inline bool isIntType(DType T) {
  return T == DType::Int32 || T == DType::Int64;
}
Status typeError(const KernelInfo &I, DType T);

#ifdef __CUDACC__
/// A grid-stride loop: \p I (int64_t) takes the values below \p N this
/// thread owns.
#define GRID_STRIDE(I, N)                                                      \
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < (N);    \
       I += int64_t(blockDim.x) * gridDim.x)
/// GRID_STRIDE with \p I of type \p Idx; 32-bit types need
/// int32Indexable(N).
#define GRID_STRIDE_AS(Idx, I, N)                                              \
  for (Idx I = Idx(blockIdx.x) * Idx(blockDim.x) + Idx(threadIdx.x); I < (N);  \
       I += Idx(blockDim.x) * Idx(gridDim.x))
#endif

/// Whether a grid-stride loop over \p N items (grids of at most gridFor's
/// 2^27 threads) and offsets below \p N can use int32_t indices: I plus the
/// grid's stride stays below 2^31.
inline bool int32Indexable(int64_t N) { return N <= (int64_t(1) << 30); }

/// Launch geometry of a grid-stride loop over \p N items.
inline unsigned gridFor(int64_t N, unsigned Block = 256) {
  int64_t G = (N + Block - 1) / Block;
  if (G < 1)
    G = 1;
  if (G > 65535 * 8)
    G = 65535 * 8;
  return unsigned(G);
}

/// At most as many blocks of \p Block threads as \p Ctx's GPU keeps
/// resident at once (2048 threads a multiprocessor), fewer for small \p N:
/// for grid-stride loops whose blocks do set-up work worth sharing.
inline unsigned residentGridFor(const Context &Ctx, int64_t N,
                                unsigned Block = 256) {
  int64_t Resident = int64_t(Ctx.Multiprocessors) * (2048 / Block);
  int64_t G = gridFor(N, Block);
  return unsigned(G < Resident ? G : Resident);
}

/// Whether MDRT_CUDA_KERNELS=reference asks for the reference kernels
/// (ReferenceMath.h: the CPU's reference loops' order of additions, one
/// output element per thread) for matrix products, convolutions, Sum, Mean,
/// SumToShape, BiasAddGrad, Softmax and SparseSoftmaxCrossEntropy. Read
/// when a kernel is created; another value than "reference" and "auto" is
/// noted by the executor.
inline bool referenceKernels() {
  const char *V = std::getenv("MDRT_CUDA_KERNELS");
  return V && std::strcmp(V, "reference") == 0;
}

/// Dst[i] = sum of Srcs[p][i] over p, added in order (the same-GPU
/// collective); float32 or float64.
void launchSumInto(void *Dst, const void *A, const void *B, int64_t N, DType T,
                   cudaStream_t S);

void registerElementwiseKernels(KernelRegistry &R);
void registerReduceKernels(KernelRegistry &R);
void registerConvKernels(KernelRegistry &R);

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_CUDACOMMON_H
