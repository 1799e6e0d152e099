//===- CudaDevice.cpp - GPU devices, CUDA graphs and NCCL collectives -----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A CudaDevice is one plan device on one GPU: one non-blocking stream, its
// arena and persistent region from cudaMalloc, events for the plan's
// cross-device waits, cuBLAS / cuDNN handles bound to the stream. Copies
// that the Device interface makes synchronous are asynchronous copies on
// the stream followed by a stream synchronization, so they are ordered
// after the kernels already submitted.
//
// Errors of asynchronous operations (launches, copies, NCCL calls) are
// recorded in the device's Context and returned by the next synchronize().
//
// Collectives: NCCL over distinct GPUs (one communicator per GPU from
// ncclCommInitAll, shared by every all-reduce over the same devices; every
// participant's host thread enqueues its all-reduces between ncclGroupStart
// and ncclGroupEnd on its own stream), and a device-side sum when several
// plan devices share one GPU (NCCL refuses two ranks on one GPU). Anything
// else falls back to the host collective.
//
// An all-reduce enqueued on one GPU waits in the kernel for the other
// ranks, so a rank that fails before enqueuing its part would hang the
// others' streams. A device with NCCL ranks therefore waits for its stream
// by polling (AbortableWait.h) and aborts the communicators when a rank
// failed or NCCL reports an asynchronous error; a rank that fails to
// enqueue aborts them at once.
//
//===----------------------------------------------------------------------===//

#include "../AbortableWait.h"
#include "../EnvFlag.h"
#include "CudaCommon.h"
#include "InputReport.h"

#include "mdrt/Cuda.h"
#include "mdrt/Device.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <shared_mutex>

#ifdef MDRT_HAVE_NCCL
#include <nccl.h>
#endif

using namespace mdrt;
using namespace mdrt::cuda;

//===----------------------------------------------------------------------===//
// Errors and helpers
//===----------------------------------------------------------------------===//

Status cuda::cudaStatus(cudaError_t E, const char *What) {
  // The call's text is "cudaFoo(args)": keep the function name.
  std::string Call = What;
  size_t Paren = Call.find('(');
  if (Paren != std::string::npos)
    Call.resize(Paren);
  return Status::error("cuda error in " + Call + ": " + cudaGetErrorString(E) +
                       " (" + cudaGetErrorName(E) + ")");
}

Status cuda::cublasError(cublasStatus_t E, const char *What) {
  return Status::error(std::string("cublas error in ") + What + ": " +
                       cublasGetStatusString(E));
}

#ifdef MDRT_HAVE_CUDNN
Status cuda::cudnnError(cudnnStatus_t E, const char *What) {
  return Status::error(std::string("cudnn error in ") + What + ": " +
                       cudnnGetErrorString(E));
}
#endif

Status cuda::typeError(const KernelInfo &I, DType T) {
  return Status::error("no GPU kernel for " + I.Op + " on element type " +
                       dtypeName(T));
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  if (P)
    cudaFree(P);
  P = nullptr;
  Size = 0;
}

Status DeviceBuffer::allocate(size_t Bytes) {
  if (P && Size >= Bytes)
    return Status::ok();
  if (P)
    cudaFree(P);
  P = nullptr;
  Size = 0;
  if (!Bytes)
    return Status::ok();
  MDRT_CUDA_TRY(cudaMalloc(&P, Bytes));
  Size = Bytes;
  return Status::ok();
}

ReportWord::ReportWord() {
  void *H = nullptr, *D = nullptr;
  if (cudaHostAlloc(&H, sizeof(uint64_t), cudaHostAllocDefault) !=
      cudaSuccess) {
    (void)cudaGetLastError(); // Not sticky; reports are only lost.
    return;
  }
  // The device word starts as NoReport, copied from the pinned word: such
  // a cudaMemcpy returns once the copy is done, where a cudaMemset on the
  // legacy stream would not be ordered before the kernels' own streams.
  *static_cast<uint64_t *>(H) = NoReport;
  if (cudaMalloc(&D, sizeof(uint64_t)) != cudaSuccess ||
      cudaMemcpy(D, H, sizeof(uint64_t), cudaMemcpyHostToDevice) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    if (D)
      (void)cudaFree(D);
    (void)cudaFreeHost(H);
    return;
  }
  Host = static_cast<volatile uint64_t *>(H);
  *Host = NoReport;
  Dev = static_cast<unsigned long long *>(D);
}

ReportWord::~ReportWord() {
  if (Dev)
    (void)cudaFree(Dev);
  if (Host)
    (void)cudaFreeHost(const_cast<uint64_t *>(Host));
}

void ReportWord::collect(Context &Ctx) {
  if (!Dev)
    return;
  cudaError_t E =
      cudaMemcpyAsync(const_cast<uint64_t *>(Host), Dev, sizeof(uint64_t),
                      cudaMemcpyDeviceToHost, Ctx.Stream);
  if (E == cudaSuccess)
    E = cudaMemsetAsync(Dev, 0xff, sizeof(uint64_t), Ctx.Stream);
  if (E != cudaSuccess)
    Ctx.fail(cudaStatus(E, "a kernel's report"));
}

uint64_t ReportWord::take() {
  if (!Host)
    return NoReport;
  uint64_t V = *Host;
  if (V != NoReport)
    *Host = NoReport;
  return V;
}

namespace {

thread_local Context *Current = nullptr;

constexpr size_t BlasWorkspaceBytes = size_t(32) << 20;

//===----------------------------------------------------------------------===//
// CudaDevice
//===----------------------------------------------------------------------===//

/// Makes \p Ordinal the calling thread's current device for the guard's
/// lifetime. Copies for another device's thread (host transfers, the host
/// collective's reduction) must leave that thread on its own GPU: a kernel
/// launched on a stream of another device than the current one fails.
class CurrentDevice {
public:
  explicit CurrentDevice(int Ordinal) {
    if (cudaGetDevice(&Saved) != cudaSuccess)
      Saved = -1;
    if (Saved != Ordinal)
      E = cudaSetDevice(Ordinal);
  }
  ~CurrentDevice() {
    if (Saved >= 0)
      cudaSetDevice(Saved);
  }
  cudaError_t error() const { return E; }

private:
  int Saved = -1;
  cudaError_t E = cudaSuccess;
};

#ifdef MDRT_HAVE_NCCL
class NcclComms;
#endif

class CudaDevice : public Device {
public:
  CudaDevice(std::string Name, int Ordinal) : Device(Name, 1) {
    Ctx.Ordinal = Ordinal;
    Ctx.Name = std::move(Name);
  }
  ~CudaDevice() override {
    // Nothing can be reported from here; the run's result was already
    // taken from synchronize().
    if (cudaSetDevice(Ctx.Ordinal) != cudaSuccess)
      return;
    if (Ctx.Stream)
      cudaStreamSynchronize(Ctx.Stream);
#ifdef MDRT_HAVE_NCCL
    retireNcclSets();
    Nccl.clear(); // The last device of a set destroys its communicators.
#endif
    for (cudaEvent_t E : Events)
      cudaEventDestroy(E);
#ifdef MDRT_HAVE_CUDNN
    if (Ctx.Dnn)
      cudnnDestroy(Ctx.Dnn);
#endif
    if (Ctx.Blas)
      cublasDestroy(Ctx.Blas);
    cudaFree(Ctx.BlasWorkspace);
    Ctx.releaseScratch();
    cudaFree(Ctx.DevStep);
    cudaFreeHost(Ctx.HostStep);
    cudaFree(Arena);
    cudaFree(Persistent);
    if (Ctx.Stream)
      cudaStreamDestroy(Ctx.Stream);
    if (ToHost)
      cudaStreamDestroy(ToHost);
  }

  Status init() {
    MDRT_CUDA_TRY(cudaSetDevice(Ctx.Ordinal));
    MDRT_CUDA_TRY(cudaDeviceGetAttribute(
        &Ctx.Multiprocessors, cudaDevAttrMultiProcessorCount, Ctx.Ordinal));
    MDRT_CUDA_TRY(
        cudaStreamCreateWithFlags(&Ctx.Stream, cudaStreamNonBlocking));
    MDRT_CUDA_TRY(cudaStreamCreateWithFlags(&ToHost, cudaStreamNonBlocking));
    cublasStatus_t B = cublasCreate(&Ctx.Blas);
    if (B != CUBLAS_STATUS_SUCCESS)
      return cublasError(B, "cublasCreate");
    if ((B = cublasSetStream(Ctx.Blas, Ctx.Stream)) != CUBLAS_STATUS_SUCCESS)
      return cublasError(B, "cublasSetStream");
    MDRT_CUDA_TRY(cudaMalloc(&Ctx.BlasWorkspace, BlasWorkspaceBytes));
    if ((B = cublasSetWorkspace(Ctx.Blas, Ctx.BlasWorkspace,
                                BlasWorkspaceBytes)) != CUBLAS_STATUS_SUCCESS)
      return cublasError(B, "cublasSetWorkspace");
    // Full float32 products, as on the CPU (no TF32).
    if ((B = cublasSetMathMode(Ctx.Blas, CUBLAS_DEFAULT_MATH)) !=
        CUBLAS_STATUS_SUCCESS)
      return cublasError(B, "cublasSetMathMode");
#ifdef MDRT_HAVE_CUDNN
    // cuDNN is an optimisation for convolutions: without it (a library
    // that does not load, MDRT_CUDA_NO_CUDNN) they run on the own kernels.
    if (!envFlag("MDRT_CUDA_NO_CUDNN")) {
      cudnnStatus_t D = cudnnCreate(&Ctx.Dnn);
      if (D == CUDNN_STATUS_SUCCESS)
        D = cudnnSetStream(Ctx.Dnn, Ctx.Stream);
      if (D != CUDNN_STATUS_SUCCESS) {
        std::fprintf(stderr,
                     "note: %s: %s; convolutions run on mdrun's own "
                     "kernels\n",
                     Ctx.Name.c_str(),
                     cudnnError(D, "cuDNN").message().c_str());
        if (Ctx.Dnn)
          cudnnDestroy(Ctx.Dnn);
        Ctx.Dnn = nullptr;
      }
    }
#endif
    MDRT_CUDA_TRY(
        cudaMalloc(reinterpret_cast<void **>(&Ctx.DevStep), sizeof(uint64_t)));
    // On the device's stream: the legacy stream's work is not ordered
    // with a non-blocking stream's.
    MDRT_CUDA_TRY(
        cudaMemsetAsync(Ctx.DevStep, 0, sizeof(uint64_t), Ctx.Stream));
    MDRT_CUDA_TRY(cudaStreamSynchronize(Ctx.Stream));
    MDRT_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&Ctx.HostStep),
                                sizeof(uint64_t), cudaHostAllocDefault));
    *Ctx.HostStep = 0;
    return Status::ok();
  }

  DeviceKind kind() const override { return DeviceKind::GPU; }
  Context &context() { return Ctx; }
  int ordinal() const { return Ctx.Ordinal; }

  Status allocate(uint64_t ArenaBytes, uint64_t PersistentBytes) override {
    MDRT_CUDA_TRY(cudaSetDevice(Ctx.Ordinal));
    auto Alloc = [&](uint64_t Bytes, uint8_t *&Out) -> Status {
      size_t Size = (std::max<uint64_t>(Bytes, 256) + 255) & ~uint64_t(255);
      void *P = nullptr;
      cudaError_t E = cudaMalloc(&P, Size);
      if (E != cudaSuccess)
        return Status::error("cannot allocate " + std::to_string(Bytes) +
                             " bytes on " + Name + ": " +
                             cudaGetErrorString(E));
      Out = static_cast<uint8_t *>(P);
      // Zeroed like the CPU device's memory.
      MDRT_CUDA_TRY(cudaMemsetAsync(P, 0, Size, Ctx.Stream));
      MDRT_CUDA_TRY(cudaStreamSynchronize(Ctx.Stream));
      return Status::ok();
    };
    MDRT_RETURN_IF_ERROR(Alloc(ArenaBytes, Arena));
    return Alloc(PersistentBytes, Persistent);
  }

  void copyFromHost(void *Dst, const void *Src, size_t Bytes) override {
    if (!Bytes)
      return;
    CurrentDevice On(Ctx.Ordinal);
    check(On.error(), "cudaSetDevice");
    check(cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyHostToDevice, Ctx.Stream),
          "cudaMemcpyAsync");
    Ctx.fail(waitStream(Ctx.Stream));
  }
  void copyToHost(void *Dst, const void *Src, size_t Bytes) override {
    if (!Bytes)
      return;
    CurrentDevice On(Ctx.Ordinal);
    check(On.error(), "cudaSetDevice");
    check(cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyDeviceToHost, Ctx.Stream),
          "cudaMemcpyAsync");
    Ctx.fail(waitStream(Ctx.Stream));
  }
  /// On the ToHost stream, after the event: the main stream is never
  /// synchronized from another thread, which would break a capture in
  /// progress on it (--cuda-graph) and wait for more than the transfer
  /// needs. The planner keeps a sent buffer unchanged to the end of the step.
  void copyToHostAfter(int Event, void *Dst, const void *Src,
                       size_t Bytes) override {
    if (Event < 0 || size_t(Event) >= Events.size()) {
      // Not from the executor: its local Send slots always signal, so a
      // receive always names the send's event.
      Device::copyToHostAfter(Event, Dst, Src, Bytes);
      return;
    }
    if (!Bytes)
      return;
    CurrentDevice On(Ctx.Ordinal);
    check(On.error(), "cudaSetDevice");
    check(cudaStreamWaitEvent(ToHost, Events[size_t(Event)], 0),
          "cudaStreamWaitEvent");
    check(cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyDeviceToHost, ToHost),
          "cudaMemcpyAsync");
    Ctx.fail(waitStream(ToHost));
  }
  void copyFrom(Device &From, int FromEvent, void *Dst, const void *Src,
                size_t Bytes) override {
    if (!Bytes)
      return;
    if (From.kind() != DeviceKind::GPU) {
      // Host memory, ready: the executor waited for the sender.
      check(
          cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyHostToDevice, Ctx.Stream),
          "cudaMemcpyAsync");
      return;
    }
    auto &F = static_cast<CudaDevice &>(From);
    if (FromEvent >= 0 && size_t(FromEvent) < F.Events.size())
      check(cudaStreamWaitEvent(Ctx.Stream, F.Events[size_t(FromEvent)], 0),
            "cudaStreamWaitEvent");
    if (F.ordinal() == Ctx.Ordinal)
      check(cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyDeviceToDevice,
                            Ctx.Stream),
            "cudaMemcpyAsync");
    else
      check(cudaMemcpyPeerAsync(Dst, Ctx.Ordinal, Src, F.ordinal(), Bytes,
                                Ctx.Stream),
            "cudaMemcpyPeerAsync");
  }

  /// The host waits for the work before event \p Id: a CPU kernel that
  /// must not run before this device's copy from host memory has read it
  /// (a write after that read), for which the enqueuing alone is not
  /// enough.
  void synchronizeEvent(int Id) override {
    if (Id >= 0 && size_t(Id) < Events.size())
      Ctx.fail(waitEventDone(Events[size_t(Id)]));
  }
  void recordEvent(int Id) override {
    if (Id >= 0 && size_t(Id) < Events.size())
      check(cudaEventRecord(Events[size_t(Id)], Ctx.Stream), "cudaEventRecord");
  }
  void waitEvent(Device &Other, int Id) override {
    if (Other.kind() != DeviceKind::GPU || &Other == this)
      return; // Host devices: the executor's host-side wait is enough.
    auto &O = static_cast<CudaDevice &>(Other);
    if (Id >= 0 && size_t(Id) < O.Events.size())
      check(cudaStreamWaitEvent(Ctx.Stream, O.Events[size_t(Id)], 0),
            "cudaStreamWaitEvent");
  }
  Status createEvents(int Count) override {
    MDRT_CUDA_TRY(cudaSetDevice(Ctx.Ordinal));
    while (Events.size() < size_t(std::max(Count, 0))) {
      cudaEvent_t E;
      MDRT_CUDA_TRY(cudaEventCreateWithFlags(&E, cudaEventDisableTiming));
      Events.push_back(E);
    }
    return Status::ok();
  }

  void *stream() const override { return Ctx.Stream; }

  Status synchronize() override { return sync(/*BetweenSteps=*/true); }
  Status synchronizeInStep() override { return sync(/*BetweenSteps=*/false); }

  void check(cudaError_t E, const char *What) {
    if (E != cudaSuccess)
      Ctx.fail(cudaStatus(E, What));
  }

#ifdef MDRT_HAVE_NCCL
  /// The communicator set over exactly \p Devs (in that order) this device
  /// has a rank in, or null.
  std::shared_ptr<NcclComms>
  ncclSetFor(const std::vector<CudaDevice *> &Devs) const;
  void addNcclSet(std::shared_ptr<NcclComms> Set) {
    Nccl.push_back(std::move(Set));
  }
  /// Device lists whose communicators failed to initialize (noted once).
  std::vector<std::vector<CudaDevice *>> NcclUnusable;
  /// Called by the destructor: the sets stop reading their devices.
  void retireNcclSets();
#endif

private:
  /// Waits for the device's stream; the error stays: a failed device fails
  /// every later step too. \p BetweenSteps: see waitStream.
  Status sync(bool BetweenSteps) {
    Status S = Ctx.error();
    Status W = waitStream(Ctx.Stream, BetweenSteps);
    if (!S.isOk())
      return S.withContext(Name);
    return W.withContext(Name);
  }
  /// Waits until the work before the end of \p S (a stream of this device)
  /// has run; \p BetweenSteps: no device thread is running a step (so the
  /// wait may query every stream of the NCCL sets the device is in).
  Status waitStream(cudaStream_t S, bool BetweenSteps = false) {
    return waitUntil([S] { return cudaStreamSynchronize(S); },
                     [S] { return cudaStreamQuery(S); },
                     "cudaStreamSynchronize", BetweenSteps);
  }
  /// Waits until the work before event \p E of this device has run.
  Status waitEventDone(cudaEvent_t E) {
    return waitUntil([E] { return cudaEventSynchronize(E); },
                     [E] { return cudaEventQuery(E); }, "cudaEventSynchronize",
                     /*BetweenSteps=*/false);
  }
  /// \p Block waits. While the process has NCCL communicators, the wait
  /// polls \p Query instead and aborts them when an all-reduce enqueued on
  /// them can no longer complete (AbortableWait.h), reporting why.
  template <typename BlockFn, typename QueryFn>
  Status waitUntil(BlockFn Block, QueryFn Query, const char *What,
                   bool BetweenSteps);

  Context Ctx;
  /// Transfers to the host that other devices' threads ask for.
  cudaStream_t ToHost = nullptr;
  std::vector<cudaEvent_t> Events;
#ifdef MDRT_HAVE_NCCL
  /// The communicator sets the device has a rank in.
  std::vector<std::shared_ptr<NcclComms>> Nccl;
#endif
};

CudaDevice *asCuda(Device &D) {
  return D.kind() == DeviceKind::GPU ? static_cast<CudaDevice *>(&D) : nullptr;
}

//===----------------------------------------------------------------------===//
// CUDA graphs
//===----------------------------------------------------------------------===//

class CudaGraph : public cuda::Graph {
public:
  CudaGraph(CudaDevice &D, cudaGraph_t G, cudaGraphExec_t E)
      : D(D), G(G), E(E) {}
  ~CudaGraph() override {
    cudaGraphExecDestroy(E);
    cudaGraphDestroy(G);
  }
  Status launch() override {
    MDRT_CUDA_TRY(cudaGraphLaunch(E, D.context().Stream));
    return Status::ok();
  }

private:
  CudaDevice &D;
  cudaGraph_t G;
  cudaGraphExec_t E;
};

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Meeting point of the participants of one collective: the last to arrive
/// runs Fn, the others wait for it.
class Rendezvous {
public:
  explicit Rendezvous(unsigned N) : N(N) {}
  template <typename F> void meet(F &&Last) {
    std::unique_lock<std::mutex> L(M);
    uint64_t MyRound = Round;
    if (++Arrived < N) {
      CV.wait(L, [&] { return Round != MyRound; });
      return;
    }
    Last();
    Arrived = 0;
    ++Round;
    CV.notify_all();
  }

private:
  unsigned N;
  std::mutex M;
  std::condition_variable CV;
  unsigned Arrived = 0;
  uint64_t Round = 0;
};

/// Several plan devices on one GPU: the last participant to arrive waits
/// for everyone's stream, sums the inputs in participant order into a
/// scratch buffer on its stream and copies the sum to every output; the
/// others' streams wait for that.
class SameGpuCollective : public CollectiveGroup {
public:
  explicit SameGpuCollective(std::vector<CudaDevice *> Devs)
      : Devs(std::move(Devs)), Meet(unsigned(this->Devs.size())),
        In(this->Devs.size()), Out(this->Devs.size()),
        Arrive(this->Devs.size(), nullptr) {}
  ~SameGpuCollective() override {
    for (cudaEvent_t E : Arrive)
      if (E)
        cudaEventDestroy(E);
    if (Done)
      cudaEventDestroy(Done);
  }

  /// Events, and the scratch for tensors of up to \p MaxTensorBytes.
  Status init(size_t MaxTensorBytes) {
    // The events and the scratch on the first participant's GPU, the
    // calling thread left on its own.
    CurrentDevice On(Devs[0]->ordinal());
    MDRT_CUDA_TRY(On.error());
    for (cudaEvent_t &E : Arrive)
      MDRT_CUDA_TRY(cudaEventCreateWithFlags(&E, cudaEventDisableTiming));
    MDRT_CUDA_TRY(cudaEventCreateWithFlags(&Done, cudaEventDisableTiming));
    return Scratch.allocate(MaxTensorBytes);
  }

  void allReduce(unsigned P, Device &Dev, const std::vector<const void *> &Ins,
                 const std::vector<void *> &Outs,
                 const std::vector<TensorDesc> &Types) override {
    CudaDevice &Me = *Devs[P];
    Me.check(cudaEventRecord(Arrive[P], Me.context().Stream),
             "cudaEventRecord");
    In[P] = Ins;
    Out[P] = Outs;
    Meet.meet([&] { reduce(Me, Types); });
    // Everyone (the reducer too, harmlessly) waits for the sums.
    Me.check(cudaStreamWaitEvent(Me.context().Stream, Done, 0),
             "cudaStreamWaitEvent");
  }

private:
  void reduce(CudaDevice &Me, const std::vector<TensorDesc> &Types) {
    cudaStream_t S = Me.context().Stream;
    for (cudaEvent_t E : Arrive)
      Me.check(cudaStreamWaitEvent(S, E, 0), "cudaStreamWaitEvent");
    size_t Max = 0;
    for (const TensorDesc &T : Types)
      Max = std::max(Max, T.bytes());
    // init sized it for the program's tensors: nothing is allocated here.
    Status A = Scratch.allocate(Max);
    if (!A.isOk()) {
      Me.context().fail(A);
      return;
    }
    size_t N = Devs.size();
    for (size_t I = 0; I < Types.size(); ++I) {
      size_t Bytes = Types[I].bytes();
      int64_t Count = Types[I].numElements();
      if (!Bytes)
        continue;
      Me.check(cudaMemcpyAsync(Scratch.get(), In[0][I], Bytes,
                               cudaMemcpyDeviceToDevice, S),
               "cudaMemcpyAsync");
      for (size_t Q = 1; Q < N; ++Q)
        launchSumInto(Scratch.get(), Scratch.get(), In[Q][I], Count,
                      Types[I].Type, S);
      Me.context().checkLaunch("the collective's sum");
      for (size_t Q = 0; Q < N; ++Q)
        Me.check(cudaMemcpyAsync(Out[Q][I], Scratch.get(), Bytes,
                                 cudaMemcpyDeviceToDevice, S),
                 "cudaMemcpyAsync");
    }
    Me.check(cudaEventRecord(Done, S), "cudaEventRecord");
  }

  std::vector<CudaDevice *> Devs;
  Rendezvous Meet;
  std::vector<std::vector<const void *>> In;
  std::vector<std::vector<void *>> Out;
  std::vector<cudaEvent_t> Arrive;
  cudaEvent_t Done = nullptr;
  DeviceBuffer Scratch;
};

#ifdef MDRT_HAVE_NCCL
/// One NCCL communicator per GPU of a list of plan devices (the rank is
/// the position), shared by every all-reduce over exactly those devices in
/// that order, in every program: the plan's buckets run one after another
/// on each stream, in the same order on every device (the plan verifier
/// checks), as NCCL requires of operations on one communicator. It also
/// knows whether the all-reduces enqueued on it can still complete.
class NcclComms {
public:
  explicit NcclComms(std::vector<CudaDevice *> Devs)
      : Devs(std::move(Devs)), Comms(this->Devs.size(), nullptr) {}
  ~NcclComms() {
    // ncclCommAbort freed them.
    if (!Aborted)
      for (ncclComm_t C : Comms)
        if (C)
          ncclCommDestroy(C);
  }

  Status init() {
    std::vector<int> Ordinals;
    for (CudaDevice *D : Devs)
      Ordinals.push_back(D->ordinal());
    prepareNcclEnvironment();
    ncclResult_t R =
        ncclCommInitAll(Comms.data(), int(Comms.size()), Ordinals.data());
    if (R != ncclSuccess) {
      std::fill(Comms.begin(), Comms.end(), nullptr);
      return Status::error(std::string("nccl error in ncclCommInitAll: ") +
                           ncclGetErrorString(R));
    }
    return connect();
  }
  const std::vector<CudaDevice *> &devices() const { return Devs; }

  /// One all-reduce of a float over every rank, enqueued from this thread
  /// inside one group: the communicators work (and whatever NCCL still
  /// connects lazily is connected) before any step.
  Status connect() {
    size_t N = Devs.size();
    std::vector<DeviceBuffer> One(N);
    for (size_t I = 0; I < N; ++I) {
      CurrentDevice On(Devs[I]->ordinal());
      if (On.error() != cudaSuccess)
        return cudaStatus(On.error(), "cudaSetDevice");
      MDRT_RETURN_IF_ERROR(One[I].allocate(sizeof(float)));
      MDRT_CUDA_TRY(cudaMemsetAsync(One[I].get(), 0, sizeof(float),
                                    Devs[I]->context().Stream));
    }
    ncclResult_t R = ncclGroupStart();
    if (R == ncclSuccess) {
      for (size_t I = 0; I < N && R == ncclSuccess; ++I)
        R = ncclAllReduce(One[I].get(), One[I].get(), 1, ncclFloat32, ncclSum,
                          Comms[I], Devs[I]->context().Stream);
      ncclResult_t End = ncclGroupEnd();
      if (R == ncclSuccess)
        R = End;
    }
    for (size_t I = 0; I < N; ++I) {
      CurrentDevice On(Devs[I]->ordinal());
      cudaError_t E = cudaStreamSynchronize(Devs[I]->context().Stream);
      if (E != cudaSuccess && R == ncclSuccess)
        return cudaStatus(E, "cudaStreamSynchronize");
    }
    if (R != ncclSuccess)
      return Status::error(std::string("nccl error in the first all-reduce: ") +
                           ncclGetErrorString(R));
    return Status::ok();
  }

  /// Enqueues rank \p P's all-reduces on its stream, in one NCCL group. A
  /// rank that cannot records the failure on its device and aborts the
  /// communicators: the other ranks' all-reduces would wait for it forever.
  void allReduce(unsigned P, const std::vector<const void *> &In,
                 const std::vector<void *> &Out,
                 const std::vector<TensorDesc> &Types) {
    Context &C = Devs[P]->context();
    std::string Error;
    {
      std::shared_lock<std::shared_mutex> L(M);
      if (Aborted) {
        C.fail(Status::error("the all-reduce cannot run: its NCCL "
                             "communicators were aborted after a failure"));
        return;
      }
      auto Check = [&](ncclResult_t R, const char *What) {
        if (R != ncclSuccess && Error.empty())
          Error = std::string("nccl error in ") + What + ": " +
                  ncclGetErrorString(R);
      };
      ncclResult_t Start = ncclGroupStart();
      Check(Start, "ncclGroupStart");
      if (Start == ncclSuccess) {
        for (size_t I = 0; I < Types.size(); ++I) {
          ncclDataType_t T =
              Types[I].Type == DType::Float64 ? ncclFloat64 : ncclFloat32;
          Check(ncclAllReduce(In[I], Out[I], size_t(Types[I].numElements()), T,
                              ncclSum, Comms[P], C.Stream),
                "ncclAllReduce");
        }
        // Closes the group also after a failed call.
        Check(ncclGroupEnd(), "ncclGroupEnd");
      }
    }
    if (Error.empty())
      return;
    C.fail(Status::error(Error));
    {
      std::lock_guard<std::mutex> L(FailM);
      if (Failure.empty())
        Failure = Devs[P]->name() + " failed: " + Error;
    }
    abort();
  }

  /// Why the all-reduces enqueued on the communicators can never complete,
  /// or ok: a rank failed to enqueue its part, a participating device
  /// recorded a failure, or NCCL reports an asynchronous error. With
  /// \p QueryStreams (only between steps, when no stream is being captured:
  /// querying a capturing stream would break its capture), also a rank
  /// whose stream failed (a sticky error) without anyone recording it.
  Status hopeless(bool QueryStreams) {
    std::shared_lock<std::shared_mutex> L(M);
    if (Retired)
      return Status::ok();
    {
      std::lock_guard<std::mutex> F(FailM);
      if (!Failure.empty())
        return Status::error("all-reduce aborted, since " + Failure);
    }
    if (Aborted)
      return Status::error("all-reduce aborted after a failure");
    for (CudaDevice *D : Devs) {
      Status S = D->context().error();
      if (S.isOk() && QueryStreams) {
        cudaError_t E = cudaStreamQuery(D->context().Stream);
        if (E == cudaErrorNotReady &&
            cudaPeekAtLastError() == cudaErrorNotReady)
          cudaGetLastError(); // Not an error; see waitUntil.
        else if (E != cudaSuccess && E != cudaErrorNotReady)
          S = cudaStatus(E, "cudaStreamQuery");
      }
      if (!S.isOk())
        return Status::error("all-reduce aborted, since " + D->name() +
                             " failed: " + S.message());
    }
    for (size_t I = 0; I < Comms.size(); ++I) {
      ncclResult_t R = ncclSuccess;
      if (ncclCommGetAsyncError(Comms[I], &R) == ncclSuccess &&
          R != ncclSuccess && R != ncclInProgress)
        return Status::error("all-reduce aborted, since NCCL reports on " +
                             Devs[I]->name() + ": " + ncclGetErrorString(R));
    }
    return Status::ok();
  }

  /// Aborts the communicators, once: the all-reduces enqueued on them end
  /// without a result, later ones fail at once.
  void abort() {
    std::unique_lock<std::shared_mutex> L(M);
    if (Aborted || Retired)
      return;
    Aborted = true;
    for (ncclComm_t C : Comms)
      if (C)
        ncclCommAbort(C);
  }

  /// A device of the set is being destroyed (its executor is): the set
  /// reads none of its devices from now on, and no wait of another
  /// executor in the process looks at it.
  void retire() {
    std::unique_lock<std::shared_mutex> L(M);
    Retired = true;
  }

private:
  std::vector<CudaDevice *> Devs;
  std::vector<ncclComm_t> Comms;
  /// Enqueuing, checking (shared) against aborting, retiring (exclusive).
  std::shared_mutex M;
  bool Aborted = false;
  bool Retired = false;
  std::mutex FailM;
  /// The first rank that failed to enqueue, and why.
  std::string Failure;
};

/// Every communicator set of the process. Any GPU's wait can sit behind an
/// all-reduce (an event recorded after one on a rank's stream), so every
/// GPU device polls while a set exists, not only the ranks.
std::mutex RegistryM;
std::vector<std::weak_ptr<NcclComms>> Registry;

void registerNcclSet(const std::shared_ptr<NcclComms> &Set) {
  std::lock_guard<std::mutex> L(RegistryM);
  Registry.push_back(Set);
}

std::vector<std::shared_ptr<NcclComms>> liveNcclSets() {
  std::lock_guard<std::mutex> L(RegistryM);
  std::vector<std::shared_ptr<NcclComms>> Live;
  size_t Kept = 0;
  for (std::weak_ptr<NcclComms> &W : Registry)
    if (std::shared_ptr<NcclComms> Set = W.lock()) {
      Live.push_back(std::move(Set));
      Registry[Kept++] = W;
    }
  Registry.resize(Kept);
  return Live;
}

void CudaDevice::retireNcclSets() {
  for (const std::shared_ptr<NcclComms> &Set : Nccl)
    Set->retire();
}

std::shared_ptr<NcclComms>
CudaDevice::ncclSetFor(const std::vector<CudaDevice *> &Devs) const {
  for (const std::shared_ptr<NcclComms> &Set : Nccl)
    if (Set->devices() == Devs)
      return Set;
  return nullptr;
}

template <typename BlockFn, typename QueryFn>
Status CudaDevice::waitUntil(BlockFn Block, QueryFn Query, const char *What,
                             bool BetweenSteps) {
  std::vector<std::shared_ptr<NcclComms>> Sets = liveNcclSets();
  std::vector<NcclComms *> Doomed;
  if (Sets.empty()) {
    cudaError_t E = Block();
    return E == cudaSuccess ? Status::ok() : cudaStatus(E, What);
  }
  return waitOrAbort(
      [&]() -> std::optional<Status> {
        cudaError_t E = Query();
        if (E == cudaErrorNotReady) {
          // Not an error: keep it out of the thread's last error, which
          // the kernels check after their launches.
          if (cudaPeekAtLastError() == cudaErrorNotReady)
            cudaGetLastError();
          return std::nullopt;
        }
        return E == cudaSuccess ? Status::ok() : cudaStatus(E, What);
      },
      [&] {
        // Every set that cannot complete is aborted, not the others (which
        // may belong to another executor in the process).
        Status First = Status::ok();
        for (const std::shared_ptr<NcclComms> &Set : Sets) {
          Status W = Set->hopeless(BetweenSteps);
          if (W.isOk())
            continue;
          Doomed.push_back(Set.get());
          if (First.isOk())
            First = W;
        }
        return First;
      },
      [&] {
        for (NcclComms *Set : Doomed)
          Set->abort();
      });
}
#else
template <typename BlockFn, typename QueryFn>
Status CudaDevice::waitUntil(BlockFn Block, QueryFn, const char *What, bool) {
  cudaError_t E = Block();
  return E == cudaSuccess ? Status::ok() : cudaStatus(E, What);
}
#endif

#ifdef MDRT_HAVE_NCCL
/// An all-reduce over GPUs of their own: participant P is rank P of a
/// communicator set shared with the other buckets over the same devices.
class NcclCollective : public CollectiveGroup {
public:
  explicit NcclCollective(std::shared_ptr<NcclComms> Set)
      : Set(std::move(Set)) {}

  void allReduce(unsigned P, Device &, const std::vector<const void *> &In,
                 const std::vector<void *> &Out,
                 const std::vector<TensorDesc> &Types) override {
    Set->allReduce(P, In, Out, Types);
  }

private:
  std::shared_ptr<NcclComms> Set;
};
#endif

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

StatusOr<std::unique_ptr<Device>>
mdrt::createCudaDevice(const std::string &Name, int Ordinal) {
  auto D = std::make_unique<CudaDevice>(Name, Ordinal);
  Status S = D->init();
  if (!S.isOk())
    return S.withContext("creating " + Name + " on GPU " +
                         std::to_string(Ordinal));
  return std::unique_ptr<Device>(std::move(D));
}

int mdrt::cudaDeviceCount() {
  int N = 0;
  // No driver, no GPU, or a driver too old: the plan's GPUs are missing.
  if (cudaGetDeviceCount(&N) != cudaSuccess) {
    cudaGetLastError(); // Clears the error.
    return 0;
  }
  return N;
}

void mdrt::prepareNcclEnvironment() {
  // NCCL (2.22 on) connects each algorithm the first time a collective
  // uses it, inside ncclGroupEnd, which then blocks the host thread until
  // every rank arrives; a rank that failed before arriving would leave it
  // blocked where no abort can reach it (allReduce holds the set's lock
  // while it enqueues). Connect everything at initialization instead,
  // unless the user chose otherwise.
  static std::once_flag Once;
  std::call_once(Once,
                 [] { setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0); });
}

std::unique_ptr<CollectiveGroup>
mdrt::createNcclCollective(const std::vector<Device *> &Devices,
                           size_t MaxTensorBytes) {
  std::vector<CudaDevice *> Devs;
  std::set<int> Ordinals;
  for (Device *D : Devices) {
    CudaDevice *C = asCuda(*D);
    if (!C)
      return nullptr;
    Devs.push_back(C);
    Ordinals.insert(C->ordinal());
  }
  if (Devs.empty())
    return nullptr;
  if (Ordinals.size() == 1) {
    auto G = std::make_unique<SameGpuCollective>(Devs);
    if (Status S = G->init(MaxTensorBytes); !S.isOk()) {
      // Not sticky (out of memory): no later launch check must take it for
      // its own.
      (void)cudaGetLastError();
      fprintf(stderr,
              "note: an all-reduce on GPU %d cannot be set up there (%s); it "
              "goes through the host\n",
              Devs[0]->ordinal(), S.message().c_str());
      return nullptr;
    }
    return G;
  }
#ifdef MDRT_HAVE_NCCL
  if (Ordinals.size() == Devs.size()) {
    // One communicator set per list of devices, not per bucket.
    if (std::shared_ptr<NcclComms> Set = Devs[0]->ncclSetFor(Devs))
      return std::make_unique<NcclCollective>(std::move(Set));
    std::vector<std::vector<CudaDevice *>> &Unusable = Devs[0]->NcclUnusable;
    if (std::find(Unusable.begin(), Unusable.end(), Devs) != Unusable.end())
      return nullptr;
    auto Set = std::make_shared<NcclComms>(Devs);
    Status S = Set->init();
    if (S.isOk()) {
      registerNcclSet(Set);
      for (CudaDevice *D : Devs)
        D->addNcclSet(Set);
      return std::make_unique<NcclCollective>(std::move(Set));
    }
    Unusable.push_back(Devs);
    fprintf(stderr, "note: %s; all-reduces go through the host\n",
            S.message().c_str());
  }
#endif
  // Some GPUs shared and some not, or no NCCL: the host collective.
  return nullptr;
}

cuda::Graph::~Graph() = default;

Context *cuda::currentContext() { return Current; }

Status cuda::activate(Device &D) {
  CudaDevice *C = asCuda(D);
  if (!C)
    return Status::ok();
  MDRT_CUDA_TRY(cudaSetDevice(C->ordinal()));
  Current = &C->context();
  return Status::ok();
}

Status cuda::takeInputReports(Device &D) {
  CudaDevice *C = asCuda(D);
  return C ? C->context().takeInputReports() : Status::ok();
}

Status cuda::setStep(Device &D, uint64_t Step) {
  CudaDevice *C = asCuda(D);
  if (!C)
    return Status::ok();
  Context &Ctx = C->context();
  // The previous step's copy finished: the executor synchronizes every
  // device at the end of a step.
  *Ctx.HostStep = Step;
  MDRT_CUDA_TRY(cudaMemcpyAsync(Ctx.DevStep, Ctx.HostStep, sizeof(uint64_t),
                                cudaMemcpyHostToDevice, Ctx.Stream));
  return Status::ok();
}

void *cuda::allocPinned(size_t Bytes) {
  void *P = nullptr;
  if (cudaHostAlloc(&P, std::max<size_t>(Bytes, 1), cudaHostAllocPortable) !=
      cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return P;
}

void cuda::freePinned(void *P) {
  if (P)
    cudaFreeHost(P);
}

bool cuda::pinHostMemory(void *P, size_t Bytes) {
  if (!P || !Bytes)
    return false;
  if (cudaHostRegister(P, Bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

void cuda::unpinHostMemory(void *P) {
  if (P && cudaHostUnregister(P) != cudaSuccess)
    cudaGetLastError();
}

void cuda::copyFromHostAsync(Device &D, void *Dst, const void *Src,
                             size_t Bytes) {
  CudaDevice *C = asCuda(D);
  if (!C) {
    D.copyFromHost(Dst, Src, Bytes);
    return;
  }
  if (!Bytes)
    return;
  // The calling thread's current GPU is left as it was.
  CurrentDevice On(C->ordinal());
  C->check(On.error(), "cudaSetDevice");
  C->check(cudaMemcpyAsync(Dst, Src, Bytes, cudaMemcpyHostToDevice,
                           C->context().Stream),
           "cudaMemcpyAsync");
}

Status cuda::beginCapture(Device &D) {
  CudaDevice *C = asCuda(D);
  if (!C)
    return Status::error("device " + D.name() + " is not a GPU");
  // A failure from before the capture is not the capture's: leave it for
  // the step's synchronize to report (endCapture takes only the capture's).
  if (Status Before = C->context().error(); !Before.isOk())
    return Status::error("the device failed before the capture: " +
                         Before.message());
  MDRT_CUDA_TRY(cudaStreamBeginCapture(C->context().Stream,
                                       cudaStreamCaptureModeThreadLocal));
  C->context().beginCapture();
  return Status::ok();
}

StatusOr<std::unique_ptr<cuda::Graph>> cuda::endCapture(Device &D) {
  CudaDevice *C = asCuda(D);
  if (!C)
    return Status::error("device " + D.name() + " is not a GPU");
  cudaGraph_t G = nullptr;
  cudaError_t E = cudaStreamEndCapture(C->context().Stream, &G);
  // Errors this thread recorded while capturing (an operation that cannot
  // be captured invalidates the capture); other threads' stay the device's.
  Status Pending = C->context().endCapture();
  if (E != cudaSuccess) {
    cudaGetLastError();
    if (G)
      cudaGraphDestroy(G);
    return Pending.isOk() ? cudaStatus(E, "cudaStreamEndCapture") : Pending;
  }
  if (!Pending.isOk()) {
    cudaGraphDestroy(G);
    return Pending;
  }
  cudaGraphExec_t X = nullptr;
  E = cudaGraphInstantiate(&X, G, 0);
  if (E != cudaSuccess) {
    cudaGraphDestroy(G);
    return cudaStatus(E, "cudaGraphInstantiate");
  }
  return std::unique_ptr<cuda::Graph>(std::make_unique<CudaGraph>(*C, G, X));
}

void mdrt::registerCudaKernels(KernelRegistry &R) {
  registerElementwiseKernels(R);
  registerReduceKernels(R);
  registerConvKernels(R);
}
