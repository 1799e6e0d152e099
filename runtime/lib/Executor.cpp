//===- Executor.cpp - Running the programs of a plan ----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Executor.h"

#include "mdrt/Cuda.h"
#include "mdrt/ParameterServer.h"
#include "mdrt/Random.h"

#include "ClusterProtocol.h"
#include "EnvFlag.h"
#include "Notifier.h"
#include "WaitPruning.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#ifdef __linux__
#include <sched.h>
#endif

using namespace mdrt;

namespace {

int hardwareCpus() {
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

/// The number of CPUs this process may run on.
int allowedCpus() {
#ifdef __linux__
  cpu_set_t Set;
  CPU_ZERO(&Set);
  if (sched_getaffinity(0, sizeof(Set), &Set) == 0)
    return CPU_COUNT(&Set);
#endif
  return hardwareCpus();
}

/// The CPUs this process has to itself: those it may run on, shared with
/// the run's other processes that may run on them too (an unbound launch
/// of several processes on one machine); 0 when it has less than one.
int cpusPerProcess(const ProcessGroup *Processes) {
  int Sharers = Processes ? std::max(1, Processes->cpuSharers()) : 1;
  return allowedCpus() / Sharers;
}

uint64_t nowNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

TensorDesc bufferType(const fb::Buffer &B) {
  TensorDesc T;
  T.Type = DType(B.dtype());
  if (B.shape())
    T.Shape.assign(B.shape()->begin(), B.shape()->end());
  return T;
}

/// "float32[2,3], float32[3]".
std::string typesText(const std::vector<TensorDesc> &Types) {
  std::string S;
  for (const TensorDesc &T : Types)
    S += (S.empty() ? "" : ", ") + T.str();
  return S;
}

AttrMap convertAttrs(const fb::Kernel &K) {
  AttrMap M;
  if (!K.attrs())
    return M;
  for (const fb::Attr *A : *K.attrs()) {
    std::string N = A->name()->str();
    switch (A->kind()) {
    case fb::AttrKind::Int:
      M.set(N, int64_t(A->i()));
      break;
    case fb::AttrKind::Float:
      M.set(N, A->f());
      break;
    case fb::AttrKind::Bool:
      M.set(N, bool(A->i()));
      break;
    case fb::AttrKind::String:
      M.set(N, A->s() ? A->s()->str() : std::string());
      break;
    case fb::AttrKind::Type:
      M.set(N, DType(A->i()));
      break;
    case fb::AttrKind::Shape:
    case fb::AttrKind::IntList:
      M.set(N, A->ints()
                   ? std::vector<int64_t>(A->ints()->begin(), A->ints()->end())
                   : std::vector<int64_t>());
      break;
    case fb::AttrKind::FloatList:
      M.set(N, A->floats() ? std::vector<double>(A->floats()->begin(),
                                                 A->floats()->end())
                           : std::vector<double>());
      break;
    case fb::AttrKind::StringList: {
      std::vector<std::string> L;
      if (A->strings())
        for (const auto *S : *A->strings())
          L.push_back(S->str());
      M.set(N, L);
      break;
    }
    }
  }
  return M;
}

template <typename T>
void toDoubles(const void *Src, size_t N, std::vector<double> &Out) {
  const T *P = static_cast<const T *>(Src);
  Out.resize(N);
  for (size_t I = 0; I < N; ++I)
    Out[I] = double(P[I]);
}

/// Checks that the run's processes fit the plan: one process per replica
/// of a multi-worker mirrored plan, this one the plan's replica; for a
/// ps-strategy plan in a cluster (ExecutorOptions::Cluster), one process
/// per replica and one per ps task; one process for every other plan.
Status checkProcesses(const fb::Plan &P, const ExecutorOptions &Opts,
                      std::vector<std::string> &Notes) {
  const ProcessGroup *Processes = Opts.Processes;
  int Procs = Processes ? Processes->size() : 1;
  int Rank = Processes ? Processes->rank() : 0;
  const fb::Deployment *D = P.deployment();
  int Replicas = D ? D->num_replicas() : 1;
  int Replica = D ? D->replica_id() : 0;
  int PsTasks = D ? D->num_ps_tasks() : 0;
  std::string Strategy = D && D->strategy() ? D->strategy()->str() : "";
  bool Mirrored = Strategy == "mirrored";
  std::string Which = "the plan is replica " + std::to_string(Replica) +
                      " of " + std::to_string(Replicas);
  if (const ProcessGroup *C = Opts.Cluster.Group) {
    if (Strategy != "ps" || PsTasks < 1)
      return Status::error(
          "a cluster of workers and parameter servers runs a ps-strategy "
          "plan with parameter-server tasks; " +
          Which + " of strategy '" + Strategy + "' with " +
          std::to_string(PsTasks) + " ps tasks");
    int Need = Replicas + PsTasks;
    std::string Tasks = std::to_string(PsTasks) + " parameter-server task" +
                        (PsTasks == 1 ? "" : "s");
    if (C->size() != Need)
      return Status::error(Which + " (ps strategy, " + Tasks +
                           "), but the run has " + std::to_string(C->size()) +
                           " processes; it needs " + std::to_string(Need) +
                           ": one per replica, then one per ps task");
    int Task = Opts.Cluster.ServeTask;
    if (Task >= PsTasks)
      return Status::error("ps task " + std::to_string(Task) +
                           " serves none of the plan's " + Tasks);
    int Expected = Task < 0 ? Replica : Replicas + Task;
    if (C->rank() != Expected)
      return Status::error(
          Which + ", but it runs in process " + std::to_string(C->rank()) +
          (Task < 0 ? ": give each worker process the plan compiled with "
                      "--replica-id=<its rank> ({replica} in the plan path "
                      "stands for it)"
                    : ", not process " + std::to_string(Expected) +
                          ", which serves ps task " + std::to_string(Task)));
    if (Task >= 0)
      return Status::ok();
    if (Procs != Replicas || Rank != Replica)
      return Status::error(
          "the workers' group (ExecutorOptions::Processes) has " +
          std::to_string(Procs) + " process" + (Procs == 1 ? "" : "es") +
          ", this one process " + std::to_string(Rank) + "; " + Which +
          ", which needs the " + std::to_string(Replicas) +
          " workers, this one process " + std::to_string(Replica));
    Notes.push_back(
        "replica " + std::to_string(Replica) + " of " +
        std::to_string(Replicas) + "; the variables on " + Tasks + " (process" +
        (PsTasks == 1 ? " " : "es ") + std::to_string(Replicas) +
        (PsTasks == 1 ? "" : " to " + std::to_string(Replicas + PsTasks - 1)) +
        "), which apply each replica's updates as they come "
        "(asynchronous training), over " +
        C->transport());
    return Status::ok();
  }
  if (Mirrored && Replicas > 1) {
    if (Procs == 1)
      return Status::error(
          Which + " (mirrored): its all-reduces span " +
          std::to_string(Replicas) +
          " processes; start one mdrun per replica with an MPI launcher "
          "(mpirun -n " +
          std::to_string(Replicas) + " mdrun ...)" +
          (haveMpi() ? "" : ", which needs an mdrun built with MPI"));
    MDRT_RETURN_IF_ERROR(checkMirroredProcessCount(P, Procs));
    if (Rank != Replica)
      return Status::error(
          Which + ", but it runs in process " + std::to_string(Rank) +
          ": give each process the plan compiled with --replica-id=<its "
          "rank> ({replica} in the plan path stands for it)");
    Notes.push_back("replica " + std::to_string(Rank) + " of " +
                    std::to_string(Procs) + "; all-reduces across the " +
                    "processes over " + Processes->transport());
    return Status::ok();
  }
  if (Procs > 1 && Strategy == "ps" && PsTasks > 0)
    return Status::error(
        "the run has " + std::to_string(Procs) + " processes, but " + Which +
        " of the ps strategy, whose processes are its workers and parameter "
        "servers, and the run was not started as one (were the processes "
        "given the plans of different deployments? a library caller gives "
        "the executor ExecutorOptions::Cluster)");
  if (Procs > 1)
    return Status::error(
        "the run has " + std::to_string(Procs) +
        " processes, but the plan is for one process; several processes "
        "need one mirrored plan each, compiled with --strategy=mirrored "
        "--num-replicas=" +
        std::to_string(Procs) + " --replica-id=R");
  if (Replicas > 1)
    Notes.push_back(Which + "; mdrun runs it alone, with its "
                            "parameter-server devices in this process");
  return Status::ok();
}

/// Stands in for a device another process runs: nothing is allocated and
/// nothing runs on it here.
class RemoteDevice : public Device {
public:
  RemoteDevice(std::string Name, DeviceKind Kind)
      : Device(std::move(Name), 1), Kind(Kind) {}
  DeviceKind kind() const override { return Kind; }
  Status allocate(uint64_t, uint64_t) override { return Status::ok(); }
  void copyFromHost(void *, const void *, size_t) override {
    assert(false && "a copy to a device of another process");
  }
  void copyToHost(void *, const void *, size_t) override {
    assert(false && "a copy from a device of another process");
  }
  void copyFrom(Device &, int, void *, const void *, size_t) override {
    assert(false && "a copy to a device of another process");
  }

private:
  DeviceKind Kind;
};

} // namespace

struct Executor::Impl {
  const fb::Plan *P = nullptr;
  ExecutorOptions Opts;
  /// The seed of the kernels' random draws (dropout): the run seed, mixed
  /// with the replica in the processes of a multi-worker run, whose plans
  /// number their kernels alike but must not draw the same masks.
  uint64_t KernelSeed = 0;
  std::vector<std::unique_ptr<Device>> Devices;
  /// CPU device memory page-locked for the GPUs (unless
  /// MDRT_CUDA_PIN_HOST=0);
  /// declared after Devices, so unpinned before the devices free it.
  struct PinnedHost {
    std::vector<void *> Regions;
    ~PinnedHost() {
      for (void *P : Regions)
        cuda::unpinHostMemory(P);
    }
  } Pinned;
  std::vector<uint8_t *> BufPtr;
  std::vector<TensorDesc> BufType;

  enum class SlotKind {
    Compute,
    NoOp,
    Send,
    Recv,
    Collective,
    /// Transfers to and from a device of another process.
    SendRemote,
    RecvRemote,
  };
  struct Slot {
    const fb::Kernel *K = nullptr;
    uint32_t Device = 0;
    SlotKind Kind = SlotKind::Compute;
    std::unique_ptr<Kernel> Impl;
    std::vector<void *> In, Out;
    std::vector<uint32_t> Waits;
    bool Signals = false;
    int Event = -1;
    // Recv.
    uint32_t SrcKernel = 0;
    const void *SrcPtr = nullptr;
    size_t Bytes = 0;
    // Collectives.
    CollectiveGroup *Group = nullptr;
    unsigned Participant = 0;
    std::vector<TensorDesc> Types;
    std::vector<const void *> CIn;
    /// An asynchronous collective: its sums arrive after the slot returns.
    bool Async = false;
    /// Asynchronous collectives to finish before this slot runs: it reads
    /// or writes memory their sums go to.
    std::vector<uint32_t> Finish;
    // Another process (ExecutorOptions::Cluster).
    /// Send, Recv: the plan's channel.
    int64_t Channel = -1;
    /// SendRemote, RecvRemote: the peer process and the message's tag.
    int Peer = -1;
    uint32_t Tag = 0;
    /// SendRemote: copy the tensor to Staging first (GPU memory, or
    /// persistent memory that other threads update); RecvRemote: receive
    /// into Staging, then copy it in.
    bool Staged = false;
    std::vector<uint8_t> Staging;
    /// SendRemote: the message on its way, completed by the first of the
    /// device's end of step and a slot that must not run before.
    std::unique_ptr<ProcessGroup::PendingSend> InFlight;
    std::unique_ptr<std::mutex> InFlightM;
    /// SendRemote slots whose messages must have left before this slot
    /// runs (it overwrites what they send, or waits for their receipt).
    std::vector<uint32_t> SendsDone;
    /// Processes whose signal (one each entry) this slot waits for: a
    /// kernel of theirs it waits for has run. They come with SignalTag.
    std::vector<int> SignalsFrom;
    uint32_t SignalTag = 0;
    /// Signals this slot sends once it has run: (process, tag).
    std::vector<std::pair<int, uint32_t>> SignalsTo;
    std::vector<std::unique_ptr<ProcessGroup::PendingSend>> SignalsSent;
  };
  /// CUDA graphs: a device's kernel list cut into segments at waits,
  /// signals and slots that cannot be captured.
  struct Segment {
    /// Positions in the device's kernel list.
    uint32_t Begin = 0, End = 0;
    bool Capture = false;
    std::unique_ptr<cuda::Graph> Graph;
  };
  struct Program {
    std::string Name;
    int64_t Batch = 0;
    std::vector<Slot> Slots;
    std::vector<std::vector<uint32_t>> PerDevice;
    /// Per device: asynchronous collectives no later slot of the device
    /// touches, finished at the end of its step.
    std::vector<std::vector<uint32_t>> FinishAtEnd;
    /// Every asynchronous collective slot, finished again (a no-op) after
    /// the step: nothing may be left on the queue when run() returns, since
    /// the caller's own calls across processes come next.
    std::vector<uint32_t> AsyncSlots;
    std::vector<uint32_t> Active;
    /// The device of Active that the calling thread runs.
    uint32_t Lead = 0;
    std::vector<InputSlot> Inputs;
    std::vector<uint32_t> InputBuffers;
    std::vector<std::vector<uint8_t>> Staging;
    /// Pinned staging of inputs bound to GPU buffers (null: Staging).
    std::vector<std::unique_ptr<void, void (*)(void *)>> Pinned;
    /// Per device; empty without CUDA graphs.
    std::vector<std::vector<Segment>> Segments;
    std::vector<uint8_t> GraphFailed;
    uint64_t Runs = 0;
    std::vector<std::unique_ptr<CollectiveGroup>> Groups;
    std::unique_ptr<std::atomic<uint64_t>[]> Done;
    /// A worker: the servers that run a part of the program.
    std::vector<int> Servers;
    /// Per device: slots whose messages (sends, signals) are completed at
    /// the end of its step.
    std::vector<std::vector<uint32_t>> Messages;
  };
  std::vector<Program> Programs;

  // A process of a cluster (ExecutorOptions::Cluster).
  ProcessGroup *Cluster = nullptr;
  /// The worker whose plan this is, and how many there are.
  int Worker = 0, NumWorkers = 1;
  /// The process each device runs in (empty: this one runs all).
  std::vector<int> DevRank;
  bool Disconnected = false;
  /// The stop signal a server's reply carried (Executor::serverStop).
  std::atomic<int> ServerStop{0};
  bool isLocal(uint32_t D) const {
    return DevRank.empty() || DevRank[D] == Cluster->rank();
  }
  bool isServer() const { return Cluster && Opts.Cluster.ServeTask >= 0; }
  /// The servers' ranks (a worker).
  std::vector<int> ServerRanks;
  /// Held around kernels and copies of shared memory (a server).
  std::mutex *KernelLock = nullptr;
  /// Fails the whole run: a process whose messages stop leaves the others
  /// waiting for them.
  [[noreturn]] void lostMessages(const Status &S) {
    std::fprintf(stderr, "error: %s: %s; stopping every process\n",
                 Cluster->rankName(Cluster->rank()).c_str(),
                 S.message().c_str());
    Cluster->abort(1);
    std::abort(); // abort() does not return; the compiler cannot know.
  }
  /// The tag of a transfer's (channel \p Index) or a signal's (to kernel
  /// \p Index) messages; an error above the largest tag.
  Status messageTag(bool Signal, uint64_t Index, uint32_t &Tag) const {
    uint64_t T = cluster::messageTag(Signal, Index, Worker, NumWorkers);
    if (T > Cluster->maxTag())
      return Status::error(
          "the plan's messages between processes need tags up to " +
          std::to_string(T) + ", more than the largest the transport has (" +
          std::to_string(Cluster->maxTag()) + ")");
    Tag = uint32_t(T);
    return Status::ok();
  }
  Status mapCluster();
  Status classifyRemote(Program &Prog);
  void completeSend(Slot &S);
  void beforeSlot(Program &Prog, Slot &S, Device &Dev);
  void afterSlot(Program &Prog, Slot &S, uint32_t Id, Device &Dev);
  void finishMessages(Program &Prog, uint32_t DevId);
  Status remoteRequest(int Rank, cluster::RequestKind Kind, uint32_t Program,
                       uint64_t Step, uint64_t Index);

  /// Where the sums across processes travel (ExecutorOptions::Overlap),
  /// and whether they may.
  std::unique_ptr<CollectiveQueue> Queue;
  bool OverlapOn = false;
  /// Programs that could not overlap: a GPU takes part in their sums
  /// across processes.
  std::vector<std::string> GpuBlocked;

  // Cross-device waits: Program::Done, announced to the waiters here.
  uint64_t RunId = 0;
  Notifier Signalled;

  // Device threads (started when a program spans several devices). The
  // calling thread runs one device of a step itself (Program::Lead) and
  // hands the others to their threads, then waits until Remaining, which
  // each thread counts down, is 0.
  struct WorkerJob {
    /// The step's RunId, released after Program and Step are written.
    std::atomic<uint64_t> Id{0};
    int Program = 0;
    uint64_t Step = 0;
    Notifier Ready;
  };
  std::vector<std::thread> Workers;
  std::unique_ptr<WorkerJob[]> Jobs;
  std::atomic<bool> Stopping{false};
  std::atomic<unsigned> Remaining{0};
  Notifier Finished;
  /// How long a thread polls before it sleeps: for a kernel of another
  /// device or the devices' ends (HandOffSpin, within a step), and for
  /// the next step (NextStepSpin: the caller reads the outputs and stages
  /// the next batch in between). Zero unless MDRT_SPIN_WAIT is set: a
  /// polling thread saves the wake-up (tens of microseconds) only where
  /// it has a core to itself; where other work keeps the cores busy, each
  /// of its yields gives a core away for a time slice, and a step takes
  /// ten to sixty times as long.
  std::chrono::microseconds HandOffSpin{0}, NextStepSpin{0};

  // Tracing.
  struct TraceEvent {
    uint32_t Kernel;
    int Program;
    uint64_t Start, End;
    /// The device waiting for the sums of the collective Kernel.
    bool Wait = false;
  };
  std::atomic<bool> Tracing{false};
  std::vector<std::vector<TraceEvent>> Trace;
  uint64_t TraceStart = 0;

  ~Impl() {
    if (Workers.empty())
      return;
    Stopping.store(true, std::memory_order_release);
    for (size_t D = 0; D < Workers.size(); ++D)
      Jobs[D].Ready.notify();
    for (std::thread &T : Workers)
      if (T.joinable())
        T.join();
  }

  Status createDevices(std::vector<std::string> &Notes);
  void pinHostMemoryForGpus();
  Status createProgram(const fb::Program &FP);
  void runDevice(Program &Prog, int ProgIndex, uint32_t Dev, uint64_t Step);
  void execSlot(Program &Prog, Slot &S, Device &Dev, uint64_t Step);
  bool runGraphs(Program &Prog, uint32_t DevId, uint64_t Step);
  void planSegments(Program &Prog, std::vector<std::string> &Notes);
  void pruneImpliedWaits(Program &Prog);
  void planFinishes(Program &Prog);
  std::string chooseOverlap();
  /// Errors of device threads (CUDA activation, step counter), per device.
  std::vector<Status> RunErrors;
  void waitFor(Program &Prog, uint32_t Kernel) {
    std::atomic<uint64_t> &D = Prog.Done[Kernel];
    Signalled.wait([&] { return D.load(std::memory_order_acquire) >= RunId; },
                   HandOffSpin);
  }
  void signal(Program &Prog, uint32_t Kernel) {
    Prog.Done[Kernel].store(RunId, std::memory_order_release);
    Signalled.notify();
  }
  void worker(uint32_t Dev);
};

/// Which process runs each device: a worker runs its replica's devices,
/// process W + T those of ps task T.
Status Executor::Impl::mapCluster() {
  Cluster = Opts.Cluster.Group;
  KernelLock = Opts.Cluster.KernelLock;
  const fb::Deployment &D = *P->deployment();
  NumWorkers = D.num_replicas();
  Worker = D.replica_id();
  int Tasks = D.num_ps_tasks();
  std::string WorkerJob = workerJobName(D), PsJob = psJobName(D);
  for (int T = 0; T < Tasks; ++T)
    ServerRanks.push_back(NumWorkers + T);
  for (const fb::Device *Dev : *P->devices()) {
    std::string Job = Dev->job() ? Dev->job()->str() : "";
    int Rank = -1;
    if (Job == WorkerJob && Dev->task() == Worker)
      Rank = Worker;
    else if (Job == PsJob && Dev->task() >= 0 && Dev->task() < Tasks)
      Rank = NumWorkers + Dev->task();
    if (Rank < 0)
      return Status::error(
          "device " + Dev->name()->str() + " is neither replica " +
          std::to_string(Worker) + "'s (job '" + WorkerJob + "', task " +
          std::to_string(Worker) + ") nor a parameter server's (job '" + PsJob +
          "', task " +
          (Tasks == 1 ? std::string("0")
                      : "0 to " + std::to_string(Tasks - 1)) +
          "): a cluster of workers and parameter servers cannot run it");
    if (isServer() && Rank == Cluster->rank() &&
        Dev->kind() == fb::DeviceKind::GPU)
      return Status::error("device " + Dev->name()->str() +
                           " is a GPU; mdrun's parameter servers run on "
                           "CPUs (place the variables on the ps tasks' CPUs)");
    DevRank.push_back(Rank);
  }
  return Status::ok();
}

Status Executor::Impl::createDevices(std::vector<std::string> &Notes) {
  // A server shares the machine with the cluster's other processes.
  int Threads =
      Opts.Threads > 0
          ? Opts.Threads
          : std::max(1, cpusPerProcess(Opts.Processes ? Opts.Processes
                                                      : Opts.Cluster.Group));
  if (Opts.Cluster.Group)
    MDRT_RETURN_IF_ERROR(mapCluster());
  int Gpus = -1;
  if (!Opts.GpuMap.empty())
    for (const fb::Device *D : *P->devices()) {
      if (D->kind() != fb::DeviceKind::GPU)
        continue;
      if (size_t(D->index()) >= Opts.GpuMap.size())
        return Status::error("the GPU map has no entry for " +
                             D->name()->str());
      // Not a GPU: below any count of GPUs, it would reach CUDA as is.
      if (int G = Opts.GpuMap[size_t(D->index())]; G < 0)
        return Status::error("the GPU map puts " + D->name()->str() +
                             " on GPU " + std::to_string(G) +
                             ", which cannot exist");
    }
  for (const fb::Device *D : *P->devices()) {
    std::string Name = D->name()->str();
    if (!isLocal(uint32_t(Devices.size()))) {
      Devices.push_back(std::make_unique<RemoteDevice>(
          Name, D->kind() == fb::DeviceKind::GPU ? DeviceKind::GPU
                                                 : DeviceKind::CPU));
      continue;
    }
    if (D->kind() == fb::DeviceKind::GPU) {
      if (Gpus < 0)
        Gpus = cudaDeviceCount();
      int Ordinal = D->index();
      if (!Opts.GpuMap.empty())
        Ordinal = Opts.GpuMap[size_t(D->index())];
      if (Ordinal < Gpus) {
        auto Dev = createCudaDevice(Name, Ordinal);
        if (!Dev.isOk())
          return Dev.status();
        Devices.push_back(Dev.take());
        continue;
      }
      std::string Why =
          "the plan places work on " + Name + ", but " +
          (Gpus == 0 ? std::string("this machine has no GPU")
                     : "this machine has " + std::to_string(Gpus) + " GPU" +
                           (Gpus == 1 ? "" : "s"));
      if (!Opts.SoftPlacement)
        return Status::error(Why + " (compile with --clone-on-cpu, or run with "
                                   "--soft-placement to use the CPU instead)");
      Notes.push_back(Why + "; running it on the CPU (soft placement)");
    }
    Devices.push_back(createCpuDevice(Name, Threads));
  }
  // A misspelt backend would quietly run the default one.
  if (const char *K = std::getenv("MDRT_CPU_KERNELS"))
    if (*K && std::strcmp(K, "auto") && std::strcmp(K, "openblas") &&
        std::strcmp(K, "reference"))
      Notes.push_back(std::string("MDRT_CPU_KERNELS='") + K +
                      "' is none of auto, openblas and reference: the CPU "
                      "kernels are auto's");
  if (const char *K = std::getenv("MDRT_CUDA_KERNELS"))
    if (*K && std::strcmp(K, "auto") && std::strcmp(K, "reference"))
      Notes.push_back(std::string("MDRT_CUDA_KERNELS='") + K +
                      "' is neither auto nor reference: the GPU kernels are "
                      "auto's");
  // A server's persistent memory is its task's, shared with its executors
  // for the other workers.
  std::vector<uint8_t *> Persistent(Devices.size(), nullptr);
  for (size_t I = 0; I < Devices.size(); ++I) {
    const fb::Device *D = P->devices()->Get(I);
    uint64_t PersistentBytes = D->persistent_bytes();
    if (isServer() && isLocal(uint32_t(I))) {
      auto It = Opts.Cluster.SharedPersistent.find(D->name()->str());
      if (It == Opts.Cluster.SharedPersistent.end())
        return Status::error("no shared memory for the variables of " +
                             D->name()->str());
      Persistent[I] = It->second;
      PersistentBytes = 0;
    }
    MDRT_RETURN_IF_ERROR(
        Devices[I]->allocate(D->arena_bytes(), PersistentBytes));
    if (!Persistent[I])
      Persistent[I] = Devices[I]->persistent();
  }
  pinHostMemoryForGpus();
  size_t NB = P->buffers() ? P->buffers()->size() : 0;
  BufPtr.resize(NB);
  BufType.resize(NB);
  for (size_t I = 0; I < NB; ++I) {
    const fb::Buffer *B = P->buffers()->Get(I);
    Device &D = *Devices[B->device()];
    BufType[I] = bufferType(*B);
    if (!isLocal(B->device()))
      continue;
    BufPtr[I] =
        (B->persistent() ? Persistent[B->device()] : D.arena()) + B->offset();
  }
  Trace.resize(Devices.size());
  return Status::ok();
}

/// Unless MDRT_CUDA_PIN_HOST=0 (docs/Cuda.md; on an H200 the CNN's default
/// placement ran 2.1x faster with it): page-locks the memory of this
/// executor's CPU devices when it also has GPU devices, so that the weights and
/// gradients of the default deployment (variables on the CPU) move between host
/// and GPU by DMA, without the GPU thread staging them. Safe because a buffer
/// another device reads stays unchanged to the end of the step, when every
/// device is synchronized, and a CPU kernel that overwrites what a GPU copy
/// reads waits for that GPU's event first. Memory that cannot be pinned stays
/// as it is.
void Executor::Impl::pinHostMemoryForGpus() {
  if (!envFlagOr("MDRT_CUDA_PIN_HOST", true))
    return;
  // Only this process's GPUs read the memory (a ps server's executors see
  // the workers' GPUs as remote stand-ins).
  bool AnyGpu = false;
  for (size_t I = 0; I < Devices.size(); ++I)
    AnyGpu |= isLocal(uint32_t(I)) && Devices[I]->kind() == DeviceKind::GPU;
  if (!AnyGpu || isServer())
    return;
  for (size_t I = 0; I < Devices.size(); ++I) {
    Device &D = *Devices[I];
    if (D.kind() != DeviceKind::CPU || !isLocal(uint32_t(I)))
      continue;
    const fb::Device *FD = P->devices()->Get(uint32_t(I));
    std::pair<uint8_t *, uint64_t> Regions[] = {
        {D.arena(), FD->arena_bytes()},
        {D.persistent(), FD->persistent_bytes()}};
    for (auto [Ptr, Bytes] : Regions)
      if (cuda::pinHostMemory(Ptr, size_t(Bytes)))
        Pinned.Regions.push_back(Ptr);
  }
}

Status Executor::Impl::createProgram(const fb::Program &FP) {
  Programs.emplace_back();
  Program &Prog = Programs.back();
  Prog.Name = FP.name()->str();
  Prog.Batch = FP.batch_size();
  Prog.PerDevice.resize(Devices.size());
  // Kernels, numbered through the devices in order.
  int Events = 0;
  if (FP.devices())
    for (const fb::DeviceProgram *DP : *FP.devices()) {
      if (!DP->kernels())
        continue;
      for (const fb::Kernel *K : *DP->kernels()) {
        Slot S;
        S.K = K;
        S.Device = DP->device();
        S.Signals = K->signals();
        if (K->waits())
          S.Waits.assign(K->waits()->begin(), K->waits()->end());
        if (K->inputs())
          for (uint32_t B : *K->inputs())
            S.In.push_back(BufPtr[B]);
        if (K->outputs())
          for (uint32_t B : *K->outputs())
            S.Out.push_back(BufPtr[B]);
        Prog.PerDevice[DP->device()].push_back(uint32_t(Prog.Slots.size()));
        Prog.Slots.push_back(std::move(S));
      }
    }
  // Sends and Recvs by channel, for each other.
  std::map<int64_t, uint32_t> SendOf, RecvOf;
  for (uint32_t Id = 0; Id < Prog.Slots.size(); ++Id) {
    Slot &S = Prog.Slots[Id];
    std::string Op = S.K->op()->str();
    if (Op == "Send")
      SendOf[convertAttrs(*S.K).getInt("channel", -1)] = Id;
    else if (Op == "Recv")
      RecvOf[convertAttrs(*S.K).getInt("channel", -1)] = Id;
  }
  // A persistent buffer, or a view into one: a server's executors for the
  // other workers write it too.
  auto Shared = [&](uint32_t B) {
    const fb::Buffer *Buf = P->buffers()->Get(B);
    while (Buf->alias_of() >= 0)
      Buf = P->buffers()->Get(uint32_t(Buf->alias_of()));
    return isServer() && Buf->persistent();
  };
  for (uint32_t Id = 0; Id < Prog.Slots.size(); ++Id) {
    Slot &S = Prog.Slots[Id];
    const fb::Kernel &K = *S.K;
    std::string Op = K.op()->str();
    Device &Dev = *Devices[S.Device];
    bool Local = isLocal(S.Device);
    if (Op == "NoOp") {
      S.Kind = SlotKind::NoOp;
    } else if (Op == "Send") {
      S.Kind = SlotKind::Send;
      S.Signals = true;
      int64_t Channel = convertAttrs(K).getInt("channel", -1);
      S.Channel = Channel;
      auto It = RecvOf.find(Channel);
      if (Local && It != RecvOf.end() &&
          !isLocal(Prog.Slots[It->second].Device)) {
        S.Kind = SlotKind::SendRemote;
        S.Signals = false;
        S.Peer = DevRank[Prog.Slots[It->second].Device];
        S.Bytes = BufType[K.inputs()->Get(0)].bytes();
        S.Staged = Dev.kind() != DeviceKind::CPU || Shared(K.inputs()->Get(0));
        if (S.Staged)
          S.Staging.resize(S.Bytes);
        S.InFlightM = std::make_unique<std::mutex>();
      }
    } else if (Op == "Recv") {
      S.Kind = SlotKind::Recv;
      int64_t Channel = convertAttrs(K).getInt("channel", -1);
      S.Channel = Channel;
      auto It = SendOf.find(Channel);
      if (It == SendOf.end())
        return Status::error("recv '" + K.name()->str() +
                             "' has no matching send in program '" + Prog.Name +
                             "'");
      S.SrcKernel = It->second;
      const Slot &Send = Prog.Slots[It->second];
      S.SrcPtr = Send.In[0];
      S.Bytes = BufType[K.outputs()->Get(0)].bytes();
      if (BufType[Send.K->inputs()->Get(0)].bytes() != S.Bytes)
        return Status::error("recv '" + K.name()->str() +
                             "' and its send disagree on the size");
      if (Local && !isLocal(Send.Device)) {
        // The message itself says the send has run.
        S.Kind = SlotKind::RecvRemote;
        S.Peer = DevRank[Send.Device];
        S.Staged = Dev.kind() != DeviceKind::CPU || Shared(K.outputs()->Get(0));
        if (S.Staged)
          S.Staging.resize(S.Bytes);
      } else if (std::find(S.Waits.begin(), S.Waits.end(), It->second) ==
                 S.Waits.end()) {
        S.Waits.push_back(It->second);
      }
    } else if (Op == "AllReduce") {
      S.Kind = SlotKind::Collective;
      for (uint32_t I = 0; I < K.inputs()->size(); ++I) {
        uint32_t B = K.inputs()->Get(I);
        const TensorDesc &Out = BufType[K.outputs()->Get(I)];
        if (Out.Type != BufType[B].Type || Out.Shape != BufType[B].Shape)
          return Status::error("all-reduce '" + K.name()->str() +
                               "' writes its sum " + std::to_string(I) + " (" +
                               BufType[B].str() + ") to a " + Out.str() +
                               " buffer");
        S.Types.push_back(BufType[B]);
        S.CIn.push_back(BufPtr[B]);
        DType T = BufType[B].Type;
        if (T != DType::Float32 && T != DType::Float64)
          return Status::error("all-reduce '" + K.name()->str() + "' sums " +
                               dtypeName(T) +
                               " tensors; collectives add float32 and "
                               "float64 only");
      }
    } else if (Local) {
      KernelInfo Info;
      Info.Name = K.name()->str();
      Info.Op = Op;
      Info.Attrs = convertAttrs(K);
      Info.Index = Id;
      Info.NumThreads = Dev.threads();
      if (K.inputs())
        for (uint32_t B : *K.inputs())
          Info.Inputs.push_back(BufType[B]);
      if (K.outputs())
        for (uint32_t B : *K.outputs())
          Info.Outputs.push_back(BufType[B]);
      // GPU kernels bind to the device current on this thread.
      MDRT_RETURN_IF_ERROR(cuda::activate(Dev));
      auto Impl = KernelRegistry::get().create(Dev.kind(), Info);
      if (!Impl.isOk())
        return Impl.status().withContext("program '" + Prog.Name + "'");
      S.Impl = Impl.take();
    }
  }
  if (Cluster)
    MDRT_RETURN_IF_ERROR(classifyRemote(Prog));
  pruneImpliedWaits(Prog);
  for (uint32_t D = 0; D < Prog.PerDevice.size(); ++D)
    if (!Prog.PerDevice[D].empty())
      Prog.Active.push_back(D);
  // The calling thread runs a CPU device where there is one: on a GPU
  // plan the CPU sends the inputs first, so the GPU's thread finds them
  // there when it starts, and the CPU's step ends after the GPU's.
  if (!Prog.Active.empty()) {
    Prog.Lead = Prog.Active.front();
    for (uint32_t D : Prog.Active)
      if (Devices[D]->kind() == DeviceKind::CPU) {
        Prog.Lead = D;
        break;
      }
  }
  // Every waited kernel signals; events for asynchronous devices.
  for (Slot &S : Prog.Slots)
    for (uint32_t W : S.Waits)
      Prog.Slots[W].Signals = true;
  for (Slot &S : Prog.Slots)
    if (S.Signals)
      S.Event = Events++;
  for (auto &D : Devices)
    MDRT_RETURN_IF_ERROR(D->createEvents(Events));
  Prog.Done.reset(new std::atomic<uint64_t>[Prog.Slots.size()]);
  for (size_t I = 0; I < Prog.Slots.size(); ++I)
    Prog.Done[I].store(0);

  // Collectives: one group per bucket, participants in the listed order.
  // The sums across processes go through the queue only when all of the
  // program's do (host memory only: the queue's thread writes them); a
  // blocking one among queued ones would call MPI out of their order.
  bool Overlap = OverlapOn;
  if (FP.collectives())
    for (const fb::Collective *C : *FP.collectives())
      if (C->replicas() > 1)
        for (uint32_t D : *C->devices())
          Overlap &= Devices[D]->kind() == DeviceKind::CPU;
  if (OverlapOn && !Overlap)
    GpuBlocked.push_back(Prog.Name);
  if (Cluster && FP.collectives())
    for (const fb::Collective *C : *FP.collectives())
      for (uint32_t D : *C->devices())
        if (!isLocal(D))
          return Status::error(
              "program '" + Prog.Name + "': an all-reduce of bucket " +
              std::to_string(C->bucket()) + " sums on " + Devices[D]->name() +
              ", which another process of the cluster runs (mdplan writes "
              "no such plan: recompile it)");
  if (FP.collectives())
    for (const fb::Collective *C : *FP.collectives()) {
      std::vector<Device *> Devs;
      for (uint32_t D : *C->devices())
        Devs.push_back(Devices[D].get());
      std::unique_ptr<CollectiveGroup> G;
      bool AllGpu = std::all_of(Devs.begin(), Devs.end(), [](Device *D) {
        return D->kind() == DeviceKind::GPU;
      });
      // Across processes: this process's sum on the host, then MPI.
      bool CrossProcess = C->replicas() > 1;
      if (AllGpu && !CrossProcess) {
        size_t MaxBytes = 0;
        if (C->kernels()->size())
          for (const TensorDesc &T : Prog.Slots[C->kernels()->Get(0)].Types)
            MaxBytes = std::max(MaxBytes, T.bytes());
        G = createNcclCollective(Devs, MaxBytes);
      }
      if (CrossProcess && Overlap && !Queue)
        Queue = std::make_unique<CollectiveQueue>();
      if (!G)
        G = createHostCollective(
            unsigned(Devs.size()), CrossProcess ? Opts.Processes : nullptr,
            CrossProcess && Overlap ? Queue.get() : nullptr,
            C->kernels()->size()
                ? Prog.Slots[C->kernels()->Get(0)].K->name()->str()
                : "all-reduce");
      for (size_t I = 0; I < C->kernels()->size(); ++I) {
        Slot &S = Prog.Slots[C->kernels()->Get(I)];
        // The sum is taken over the participants' tensors position by
        // position.
        const Slot &First = Prog.Slots[C->kernels()->Get(0)];
        if (S.Types.size() != First.Types.size() ||
            !std::equal(S.Types.begin(), S.Types.end(), First.Types.begin(),
                        [](const TensorDesc &A, const TensorDesc &B) {
                          return A.Type == B.Type && A.Shape == B.Shape;
                        }))
          return Status::error(
              "the all-reduces '" + First.K->name()->str() + "' and '" +
              S.K->name()->str() + "' of program '" + Prog.Name +
              "' sum different tensors (" + typesText(First.Types) + " and " +
              typesText(S.Types) + ")");
        S.Group = G.get();
        S.Participant = unsigned(I);
        S.Async = G->asynchronous();
      }
      Prog.Groups.push_back(std::move(G));
    }
  // Collectives across processes must complete in the same order in every
  // process. They do when one device takes part in all of them: each waits
  // for that device, which reaches them in its (the plan's) order.
  if (FP.collectives()) {
    std::vector<uint32_t> Common;
    bool Any = false;
    for (const fb::Collective *C : *FP.collectives()) {
      if (C->replicas() <= 1)
        continue;
      std::vector<uint32_t> Devs(C->devices()->begin(), C->devices()->end());
      std::sort(Devs.begin(), Devs.end());
      if (Any) {
        std::vector<uint32_t> Both;
        std::set_intersection(Common.begin(), Common.end(), Devs.begin(),
                              Devs.end(), std::back_inserter(Both));
        Common.swap(Both);
      } else {
        Common = Devs;
        Any = true;
      }
    }
    if (Any && Common.empty())
      return Status::error("program '" + Prog.Name +
                           "': its all-reduces across processes have no "
                           "device in common, so the processes could run "
                           "them in different orders (mdplan writes no such "
                           "plan: recompile it)");
  }
  for (Slot &S : Prog.Slots)
    if (S.Kind == SlotKind::Collective && !S.Group)
      return Status::error("all-reduce '" + S.K->name()->str() +
                           "' belongs to no collective");

  // Inputs: written on the host, moved to the device at the step's start.
  if (FP.inputs())
    for (const fb::InputBinding *In : *FP.inputs()) {
      InputSlot IS;
      IS.Name = In->name()->str();
      IS.Feature = In->feature() ? In->feature()->str() : "";
      IS.Type = BufType[In->buffer()];
      uint32_t DevId = P->buffers()->Get(In->buffer())->device();
      Device &D = *Devices[DevId];
      if (!isLocal(DevId)) {
        // A server feeds no inputs: the worker's devices read the data.
        if (isServer())
          continue;
        return Status::error("program '" + Prog.Name + "' reads input '" +
                             IS.Name + "' on " + D.name() +
                             ", which another process runs");
      }
      Prog.Staging.emplace_back();
      Prog.Pinned.emplace_back(nullptr, cuda::freePinned);
      if (D.kind() == DeviceKind::CPU) {
        IS.Host = BufPtr[In->buffer()];
      } else if (void *P = cuda::allocPinned(IS.Type.bytes())) {
        // Page-locked: copied to the GPU asynchronously at the step's start.
        Prog.Pinned.back().reset(P);
        IS.Host = P;
      } else {
        Prog.Staging.back().resize(IS.Type.bytes());
        IS.Host = Prog.Staging.back().data();
      }
      Prog.Inputs.push_back(IS);
      Prog.InputBuffers.push_back(In->buffer());
    }
  if (Cluster && !isServer() && FP.outputs())
    for (const fb::Output *O : *FP.outputs()) {
      uint32_t DevId = P->buffers()->Get(O->buffer())->device();
      if (!isLocal(DevId))
        return Status::error(
            "program '" + Prog.Name + "' has output '" + O->name()->str() +
            "' on " + Devices[DevId]->name() + ", which another process runs");
    }
  planFinishes(Prog);
  return Status::ok();
}

/// A cluster: what each wait between kernels of different processes
/// becomes. A kernel that waits for a Send of another process needs
/// nothing more when it is that Send's Recv, or when the Recv ran before
/// it on its device (the message arriving says the Send ran); one that
/// waits for another process's Recv of a Send of its own waits until that
/// Send's message has left (what the wait protects is the Send's memory,
/// and the Recv needed the Send anyway); any other wait is a signal, an
/// empty message the other process sends once the kernel waited for has
/// run. Every process of the run derives the
/// same from the plan, the waiting side and the waited side alike.
Status Executor::Impl::classifyRemote(Program &Prog) {
  int Me = Cluster->rank();
  auto RankOf = [&](uint32_t Id) { return DevRank[Prog.Slots[Id].Device]; };
  auto IsSend = [&](uint32_t Id) {
    SlotKind K = Prog.Slots[Id].Kind;
    return K == SlotKind::Send || K == SlotKind::SendRemote;
  };
  auto IsRecv = [&](uint32_t Id) {
    SlotKind K = Prog.Slots[Id].Kind;
    return K == SlotKind::Recv || K == SlotKind::RecvRemote;
  };
  std::map<uint32_t, uint32_t> RecvOfSend;
  for (uint32_t Id = 0; Id < Prog.Slots.size(); ++Id)
    if (IsRecv(Id))
      RecvOfSend[Prog.Slots[Id].SrcKernel] = Id;
  // Kernel ids count through each device's list in order: on one device,
  // a smaller id runs earlier.
  auto RunsBefore = [&](uint32_t A, uint32_t B) {
    return Prog.Slots[A].Device != Prog.Slots[B].Device || A < B;
  };
  // Messages are numbered densely, the transfers between processes by
  // channel and the kernels that wait for signals by id (tags stay small
  // however large the plan), alike in every process.
  std::map<int64_t, uint64_t> TransferIndex;
  for (uint32_t Id = 0; Id < Prog.Slots.size(); ++Id)
    if (IsRecv(Id) && RankOf(Id) != RankOf(Prog.Slots[Id].SrcKernel))
      TransferIndex.emplace(Prog.Slots[Id].Channel, TransferIndex.size());
  for (Slot &S : Prog.Slots)
    if (S.Kind == SlotKind::SendRemote || S.Kind == SlotKind::RecvRemote)
      MDRT_RETURN_IF_ERROR(
          messageTag(false, TransferIndex.at(S.Channel), S.Tag));
  std::map<uint32_t, uint64_t> SignalIndex;
  enum class How { Implied, OwnRecv, SendLeft, Signal };
  // How waiter L keeps its wait for W, a kernel of another process.
  auto Classify = [&](uint32_t L, uint32_t W, uint32_t &Via) {
    int RL = RankOf(L);
    if (IsSend(W)) {
      auto It = RecvOfSend.find(W);
      if (It != RecvOfSend.end()) {
        Via = It->second;
        if (Via == L)
          return How::Implied;
        // Only when the Recv comes first anyway: waiting for a Recv on
        // another device would add a dependency the plan does not have.
        if (Prog.Slots[Via].Device == Prog.Slots[L].Device && Via < L)
          return How::OwnRecv;
      }
    }
    if (IsRecv(W)) {
      Via = Prog.Slots[W].SrcKernel;
      if (RankOf(Via) == RL && RunsBefore(Via, L))
        return How::SendLeft;
    }
    return How::Signal;
  };
  for (uint32_t L = 0; L < Prog.Slots.size(); ++L) {
    Slot &S = Prog.Slots[L];
    bool LocalWaiter = RankOf(L) == Me;
    std::vector<uint32_t> Waits;
    for (uint32_t W : S.Waits) {
      if (RankOf(W) == RankOf(L)) {
        Waits.push_back(W);
        continue;
      }
      uint32_t Via = 0;
      How H = Classify(L, W, Via);
      uint32_t Tag = 0;
      if (H == How::Signal)
        MDRT_RETURN_IF_ERROR(messageTag(
            true, SignalIndex.emplace(L, SignalIndex.size()).first->second,
            Tag));
      if (!LocalWaiter) {
        // Another process's kernel waits for one of ours: signal it.
        if (RankOf(W) == Me && H == How::Signal)
          Prog.Slots[W].SignalsTo.push_back({RankOf(L), Tag});
        continue;
      }
      switch (H) {
      case How::Implied:
        break;
      case How::OwnRecv:
        // Earlier on the same device: it has run already.
        break;
      case How::SendLeft:
        S.SendsDone.push_back(Via);
        if (Prog.Slots[Via].Device != S.Device)
          Waits.push_back(Via);
        break;
      case How::Signal:
        S.SignalsFrom.push_back(RankOf(W));
        S.SignalTag = Tag;
        break;
      }
    }
    std::sort(Waits.begin(), Waits.end());
    Waits.erase(std::unique(Waits.begin(), Waits.end()), Waits.end());
    S.Waits = LocalWaiter ? std::move(Waits) : std::vector<uint32_t>();
  }
  // Only this process's devices run here; a worker asks the servers to run
  // theirs.
  Prog.Messages.assign(Devices.size(), {});
  for (uint32_t D = 0; D < Devices.size(); ++D) {
    if (isLocal(D)) {
      for (uint32_t Id : Prog.PerDevice[D]) {
        const Slot &S = Prog.Slots[Id];
        if (S.Kind == SlotKind::SendRemote || !S.SignalsTo.empty())
          Prog.Messages[D].push_back(Id);
      }
      continue;
    }
    if (!isServer() && !Prog.PerDevice[D].empty())
      Prog.Servers.push_back(DevRank[D]);
    Prog.PerDevice[D].clear();
  }
  std::sort(Prog.Servers.begin(), Prog.Servers.end());
  Prog.Servers.erase(std::unique(Prog.Servers.begin(), Prog.Servers.end()),
                     Prog.Servers.end());
  return Status::ok();
}

/// Sets OverlapOn from the options and the machine; says why for a note
/// ("" when the plan has no all-reduces across processes).
std::string Executor::Impl::chooseOverlap() {
  OverlapOn = false;
  bool Across = false;
  for (const fb::Program *FP : *P->programs())
    if (FP->collectives())
      for (const fb::Collective *C : *FP->collectives())
        Across |= C->replicas() > 1;
  if (!Across || !Opts.Processes || Opts.Processes->size() <= 1)
    return "";
  switch (Opts.Overlap) {
  case OverlapMode::On:
    OverlapOn = true;
    return "--overlap=on";
  case OverlapMode::Off:
    return "--overlap=off";
  case OverlapMode::Auto:
    break;
  }
  int Threads = 0;
  for (const auto &D : Devices)
    if (D->kind() == DeviceKind::CPU)
      Threads += D->threads();
  int Cpus = cpusPerProcess(Opts.Processes);
  OverlapOn = Cpus > Threads;
  std::string Counts =
      Cpus == 0
          ? std::to_string(allowedCpus()) +
                (allowedCpus() == 1 ? " CPU" : " CPUs") + " for " +
                std::to_string(Opts.Processes->cpuSharers()) + " processes"
          : std::to_string(Cpus) + " CPU" + (Cpus == 1 ? "" : "s") +
                " per process for " + std::to_string(Threads) +
                " intra-op thread" + (Threads == 1 ? "" : "s");
  return OverlapOn ? "a core to spare: " + Counts
                   : "no core to spare: " + Counts + "; --overlap=on to " +
                         "overlap anyway";
}

/// Where each device waits for the sums of its asynchronous collectives:
/// before the first later slot of its list whose buffers overlap the sums'
/// memory (the memory plan may give the same bytes to other buffers once
/// the sums are dead, so this compares addresses, not buffer ids), or at
/// the end of the step. A collective whose slot another device waits for
/// is finished at once (runDevice), before the signal.
void Executor::Impl::planFinishes(Program &Prog) {
  Prog.FinishAtEnd.assign(Devices.size(), {});
  Prog.AsyncSlots.clear();
  // The sums still in flight at a point of a device's list, by address:
  // begin -> (end, collective slot). They are live together, so they do not
  // overlap each other.
  std::map<uintptr_t, std::pair<uintptr_t, uint32_t>> InFlight;
  std::vector<uint32_t> Due;
  for (uint32_t D = 0; D < Devices.size(); ++D) {
    InFlight.clear();
    for (uint32_t Id : Prog.PerDevice[D]) {
      Slot &S = Prog.Slots[Id];
      // The sums in flight that this slot's buffers overlap.
      Due.clear();
      auto Check = [&](const flatbuffers::Vector<uint32_t> *Bufs) {
        if (!Bufs)
          return;
        for (uint32_t B : *Bufs) {
          uintptr_t Begin = reinterpret_cast<uintptr_t>(BufPtr[B]);
          uintptr_t End = Begin + BufType[B].bytes();
          if (End == Begin)
            continue;
          auto It = InFlight.upper_bound(Begin);
          if (It != InFlight.begin())
            --It;
          for (; It != InFlight.end() && It->first < End; ++It)
            if (Begin < It->second.first)
              Due.push_back(It->second.second);
        }
      };
      Check(S.K->inputs());
      Check(S.K->outputs());
      std::sort(Due.begin(), Due.end());
      Due.erase(std::unique(Due.begin(), Due.end()), Due.end());
      for (uint32_t C : Due) {
        S.Finish.push_back(C);
        for (auto It = InFlight.begin(); It != InFlight.end();)
          It = It->second.second == C ? InFlight.erase(It) : std::next(It);
      }
      if (!S.Async)
        continue;
      Prog.AsyncSlots.push_back(Id);
      if (S.Signals)
        continue;
      bool Any = false;
      for (uint32_t B : *S.K->outputs()) {
        uintptr_t Begin = reinterpret_cast<uintptr_t>(BufPtr[B]);
        if (uint64_t Bytes = BufType[B].bytes()) {
          InFlight[Begin] = {Begin + Bytes, Id};
          Any = true;
        }
      }
      // Sums of no bytes touch nothing, but their round still ends.
      if (!Any)
        Prog.FinishAtEnd[D].push_back(Id);
    }
    for (const auto &[Begin, Sum] : InFlight)
      Prog.FinishAtEnd[D].push_back(Sum.second);
    std::sort(Prog.FinishAtEnd[D].begin(), Prog.FinishAtEnd[D].end());
    Prog.FinishAtEnd[D].erase(
        std::unique(Prog.FinishAtEnd[D].begin(), Prog.FinishAtEnd[D].end()),
        Prog.FinishAtEnd[D].end());
  }
}

void Executor::Impl::execSlot(Program &Prog, Slot &S, Device &Dev,
                              uint64_t Step) {
  switch (S.Kind) {
  case SlotKind::Compute: {
    ExecContext C;
    C.In = S.In.data();
    C.Out = S.Out.data();
    C.Step = Step;
    C.Seed = KernelSeed;
    C.Stream = Dev.stream();
    C.Error = &RunErrors[S.Device];
    if (KernelLock) {
      std::lock_guard<std::mutex> L(*KernelLock);
      S.Impl->run(C);
    } else {
      S.Impl->run(C);
    }
    break;
  }
  case SlotKind::NoOp:
  case SlotKind::Send:
    break;
  case SlotKind::Recv: {
    const Slot &Send = Prog.Slots[S.SrcKernel];
    // A server's devices may copy the variables other threads update.
    std::unique_lock<std::mutex> L;
    if (KernelLock)
      L = std::unique_lock<std::mutex>(*KernelLock);
    Dev.copyFrom(*Devices[Send.Device], Send.Event, S.Out[0], S.SrcPtr,
                 S.Bytes);
    break;
  }
  case SlotKind::Collective:
    S.Group->allReduce(S.Participant, Dev, S.CIn, S.Out, S.Types);
    break;
  case SlotKind::SendRemote: {
    const void *Src = S.In[0];
    if (S.Staged) {
      if (Dev.kind() != DeviceKind::CPU) {
        Dev.copyToHost(S.Staging.data(), Src, S.Bytes);
      } else if (S.Bytes) {
        std::lock_guard<std::mutex> L(*KernelLock);
        std::memcpy(S.Staging.data(), Src, S.Bytes);
      }
      Src = S.Staging.data();
    }
    auto Sent = Cluster->isend(S.Peer, S.Tag, Src, S.Bytes);
    if (!Sent.isOk())
      lostMessages(Sent.status());
    std::lock_guard<std::mutex> L(*S.InFlightM);
    S.InFlight = Sent.take();
    break;
  }
  case SlotKind::RecvRemote: {
    void *Dst = S.Staged ? S.Staging.data() : S.Out[0];
    if (Status R = Cluster->recv(S.Peer, S.Tag, Dst, S.Bytes); !R.isOk())
      lostMessages(R);
    if (!S.Staged)
      break;
    if (Dev.kind() != DeviceKind::CPU) {
      Dev.copyFromHost(S.Out[0], S.Staging.data(), S.Bytes);
    } else if (S.Bytes) {
      std::lock_guard<std::mutex> L(*KernelLock);
      std::memcpy(S.Out[0], S.Staging.data(), S.Bytes);
    }
    break;
  }
  }
}

/// Waits until the message of SendRemote slot \p S has left.
void Executor::Impl::completeSend(Slot &S) {
  std::lock_guard<std::mutex> L(*S.InFlightM);
  if (!S.InFlight)
    return;
  Status Done = S.InFlight->wait();
  S.InFlight.reset();
  if (!Done.isOk())
    lostMessages(Done);
}

/// What slot \p S waits for before it runs: kernels of other devices,
/// messages it must not overwrite, signals from other processes.
void Executor::Impl::beforeSlot(Program &Prog, Slot &S, Device &Dev) {
  for (uint32_t W : S.Waits) {
    waitFor(Prog, W);
    const Slot &From = Prog.Slots[W];
    Dev.waitEvent(*Devices[From.Device], From.Event);
  }
  for (uint32_t Send : S.SendsDone)
    completeSend(Prog.Slots[Send]);
  for (int From : S.SignalsFrom)
    if (Status R = Cluster->recv(From, S.SignalTag, nullptr, 0); !R.isOk())
      lostMessages(R);
}

/// What slot \p Id tells others once it has run: the devices of this
/// process that wait for it, and the processes whose kernels do.
void Executor::Impl::afterSlot(Program &Prog, Slot &S, uint32_t Id,
                               Device &Dev) {
  if (S.Signals) {
    if (S.Async)
      S.Group->finish(S.Participant);
    Dev.recordEvent(S.Event);
    signal(Prog, Id);
  }
  if (S.SignalsTo.empty())
    return;
  // The kernel has run when the process is told: an asynchronous device
  // finishes it first.
  if (Dev.kind() != DeviceKind::CPU)
    if (Status Sync = Dev.synchronizeInStep(); !Sync.isOk())
      lostMessages(Sync.withContext(Dev.name()));
  for (const auto &[Rank, Tag] : S.SignalsTo) {
    auto Sent = Cluster->isend(Rank, Tag, nullptr, 0);
    if (!Sent.isOk())
      lostMessages(Sent.status());
    S.SignalsSent.push_back(Sent.take());
  }
}

void Executor::Impl::runDevice(Program &Prog, int ProgIndex, uint32_t DevId,
                               uint64_t Step) {
  Device &Dev = *Devices[DevId];
  if (Dev.kind() == DeviceKind::GPU) {
    Status S = cuda::activate(Dev);
    if (S.isOk())
      S = cuda::setStep(Dev, Step);
    if (!S.isOk() && RunErrors[DevId].isOk())
      RunErrors[DevId] = S.withContext(Dev.name());
  }
  bool Trace = Tracing.load(std::memory_order_relaxed);
  if (!Trace && runGraphs(Prog, DevId, Step))
    return;
  // Waits for the queued sums of collective slot F, traced as a wait.
  auto FinishSums = [&](uint32_t F) {
    uint64_t Start = Trace ? nowNs() : 0;
    Prog.Slots[F].Group->finish(Prog.Slots[F].Participant);
    if (Trace)
      this->Trace[DevId].push_back({F, ProgIndex, Start, nowNs(), true});
  };
  for (uint32_t Id : Prog.PerDevice[DevId]) {
    Slot &S = Prog.Slots[Id];
    for (uint32_t F : S.Finish)
      FinishSums(F);
    beforeSlot(Prog, S, Dev);
    uint64_t Start = Trace ? nowNs() : 0;
    execSlot(Prog, S, Dev, Step);
    if (Trace) {
      Dev.synchronizeInStep().isOk();
      this->Trace[DevId].push_back({Id, ProgIndex, Start, nowNs()});
    }
    afterSlot(Prog, S, Id, Dev);
  }
  for (uint32_t F : Prog.FinishAtEnd[DevId])
    FinishSums(F);
  finishMessages(Prog, DevId);
}

/// The device's messages of the step have all left: their memory is
/// reused by the next step.
void Executor::Impl::finishMessages(Program &Prog, uint32_t DevId) {
  if (Prog.Messages.empty())
    return;
  for (uint32_t Id : Prog.Messages[DevId]) {
    Slot &S = Prog.Slots[Id];
    if (S.Kind == SlotKind::SendRemote)
      completeSend(S);
    for (auto &Sent : S.SignalsSent)
      if (Status Done = Sent->wait(); !Done.isOk())
        lostMessages(Done);
    S.SignalsSent.clear();
  }
}

/// Runs the device's kernel list segment by segment: waits before a
/// segment, its graph (captured on the program's second run) or its slots,
/// then the signal of its last slot. False when the device runs without
/// graphs.
bool Executor::Impl::runGraphs(Program &Prog, uint32_t DevId, uint64_t Step) {
  if (Prog.Segments.empty() || Prog.Segments[DevId].empty() ||
      Prog.GraphFailed[DevId])
    return false;
  Device &Dev = *Devices[DevId];
  const std::vector<uint32_t> &List = Prog.PerDevice[DevId];
  for (Segment &Seg : Prog.Segments[DevId]) {
    Slot &First = Prog.Slots[List[Seg.Begin]];
    beforeSlot(Prog, First, Dev);
    bool Eager = !Seg.Capture || Prog.Runs == 0 || Prog.GraphFailed[DevId];
    if (!Eager && !Seg.Graph) {
      // Capture: nothing submitted runs until the graph is launched.
      Status S = cuda::beginCapture(Dev);
      if (S.isOk()) {
        for (uint32_t P = Seg.Begin; P < Seg.End; ++P)
          execSlot(Prog, Prog.Slots[List[P]], Dev, Step);
        auto G = cuda::endCapture(Dev);
        if (G.isOk())
          Seg.Graph = G.take();
        else
          S = G.status();
      }
      if (!S.isOk()) {
        std::fprintf(stderr,
                     "note: cuda graph capture of program '%s' on %s failed "
                     "(%s); it runs without graphs\n",
                     Prog.Name.c_str(), Dev.name().c_str(),
                     S.message().c_str());
        Prog.GraphFailed[DevId] = 1;
        for (Segment &Other : Prog.Segments[DevId])
          Other.Graph.reset();
        Eager = true;
      }
    }
    if (Eager) {
      for (uint32_t P = Seg.Begin; P < Seg.End; ++P)
        execSlot(Prog, Prog.Slots[List[P]], Dev, Step);
    } else {
      Status S = Seg.Graph->launch();
      if (!S.isOk() && RunErrors[DevId].isOk())
        RunErrors[DevId] = S.withContext(Dev.name());
    }
    afterSlot(Prog, Prog.Slots[List[Seg.End - 1]], List[Seg.End - 1], Dev);
  }
  finishMessages(Prog, DevId);
  return true;
}

/// Waits implied by a device's order go (WaitPruning.h): fewer events, and
/// on a GPU longer runs of slots that one CUDA graph captures, since every
/// slot another device waits for ends a graph (the CPU's global-step
/// update waits for each of the mirrored plan's optimizer updates).
/// Compute, no-op and receive slots no longer waited for stop signalling;
/// sends keep signalling (a receive copies after the send's event).
void Executor::Impl::pruneImpliedWaits(Program &Prog) {
  std::vector<WaitedSlot> View(Prog.Slots.size());
  for (const std::vector<uint32_t> &List : Prog.PerDevice)
    for (uint32_t P = 0; P < List.size(); ++P) {
      const Slot &S = Prog.Slots[List[P]];
      View[List[P]] = {S.Device, P,
                       isLocal(S.Device) && (S.Kind == SlotKind::Compute ||
                                             S.Kind == SlotKind::NoOp ||
                                             S.Kind == SlotKind::Send ||
                                             S.Kind == SlotKind::Recv)};
    }
  std::vector<uint8_t> Waited(Prog.Slots.size(), 0);
  for (Slot &S : Prog.Slots) {
    S.Waits = mdrt::pruneImpliedWaits(S.Waits, View);
    for (uint32_t W : S.Waits)
      Waited[W] = 1;
  }
  for (uint32_t Id = 0; Id < Prog.Slots.size(); ++Id) {
    Slot &S = Prog.Slots[Id];
    if ((S.Kind == SlotKind::Compute || S.Kind == SlotKind::NoOp ||
         S.Kind == SlotKind::Recv) &&
        !Waited[Id] && S.SignalsTo.empty())
      S.Signals = false;
  }
}

void Executor::Impl::planSegments(Program &Prog,
                                  std::vector<std::string> &Notes) {
  Prog.Segments.clear();
  Prog.Segments.resize(Devices.size());
  Prog.GraphFailed.assign(Devices.size(), 0);
  for (uint32_t D = 0; D < Devices.size(); ++D) {
    if (Devices[D]->kind() != DeviceKind::GPU || Prog.PerDevice[D].empty())
      continue;
    const std::vector<uint32_t> &List = Prog.PerDevice[D];
    auto Capturable = [&](const Slot &S) {
      return S.Kind == SlotKind::Compute || S.Kind == SlotKind::NoOp ||
             S.Kind == SlotKind::Send;
    };
    std::vector<Segment> &Segs = Prog.Segments[D];
    for (uint32_t P = 0; P < List.size(); ++P) {
      const Slot &S = Prog.Slots[List[P]];
      bool Start = P == 0 || !S.Waits.empty() || !S.SendsDone.empty() ||
                   !S.SignalsFrom.empty() || !Capturable(S);
      if (P > 0) {
        const Slot &Prev = Prog.Slots[List[P - 1]];
        Start |= !Capturable(Prev) || Prev.Signals || !Prev.SignalsTo.empty();
      }
      if (Start) {
        Segs.emplace_back();
        Segs.back().Begin = P;
        Segs.back().Capture = Capturable(S);
      }
      Segs.back().End = P + 1;
    }
    size_t Graphs = 0, Captured = 0, Computes = 0;
    for (Segment &Seg : Segs) {
      size_t N = 0;
      for (uint32_t P = Seg.Begin; P < Seg.End; ++P)
        N += Prog.Slots[List[P]].Kind == SlotKind::Compute;
      Computes += N;
      // A single kernel gains nothing from a graph.
      Seg.Capture = Seg.Capture && N >= 2;
      if (Seg.Capture) {
        ++Graphs;
        Captured += N;
      }
    }
    size_t Total = 0;
    for (uint32_t Id : List)
      Total += Prog.Slots[Id].Kind == SlotKind::Compute;
    (void)Computes;
    Notes.push_back("cuda graph: program '" + Prog.Name + "' on " +
                    Devices[D]->name() + ": " + std::to_string(Captured) +
                    " of " + std::to_string(Total) + " kernels in " +
                    std::to_string(Graphs) +
                    " graphs, captured on the second run; the rest (host "
                    "transfers, waits on other devices, collectives) runs "
                    "eagerly between them");
  }
}

void Executor::Impl::worker(uint32_t Dev) {
  WorkerJob &Job = Jobs[Dev];
  uint64_t Seen = 0;
  for (;;) {
    Job.Ready.wait(
        [&] {
          return Job.Id.load(std::memory_order_acquire) != Seen ||
                 Stopping.load(std::memory_order_acquire);
        },
        NextStepSpin);
    if (Stopping.load(std::memory_order_acquire))
      return;
    Seen = Job.Id.load(std::memory_order_acquire);
    runDevice(Programs[Job.Program], Job.Program, Dev, Job.Step);
    if (Remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
      Finished.notify();
  }
}

StatusOr<std::unique_ptr<Executor>>
Executor::create(std::shared_ptr<const PlanFile> Plan,
                 const ExecutorOptions &Opts) {
  std::unique_ptr<Executor> E(new Executor());
  E->Plan = std::move(Plan);
  E->I = std::make_unique<Impl>();
  Impl &I = *E->I;
  I.P = &E->Plan->plan();
  I.Opts = Opts;
  I.KernelSeed = Opts.Seed;
  if (Opts.Processes && Opts.Processes->rank() > 0)
    I.KernelSeed ^= hashName(
        ("mdrt.replica." + std::to_string(Opts.Processes->rank())).c_str());
  MDRT_RETURN_IF_ERROR(checkProcesses(*I.P, Opts, E->Notes));
  MDRT_RETURN_IF_ERROR(I.createDevices(E->Notes));
  std::string OverlapNote = I.chooseOverlap();
  for (const fb::Program *FP : *I.P->programs())
    MDRT_RETURN_IF_ERROR(I.createProgram(*FP));
  if (!OverlapNote.empty()) {
    std::string Note = "all-reduces across processes ";
    if (!I.Queue)
      Note += "block their device (" +
              (I.GpuBlocked.empty() ? OverlapNote
                                    : std::string("their devices include a "
                                                  "GPU")) +
              ")";
    else
      Note += "overlap the computation (" + OverlapNote + ")";
    if (I.Queue && !I.GpuBlocked.empty())
      Note += ", except in program '" + I.GpuBlocked.front() +
              "', where a GPU takes part in them";
    E->Notes.push_back(Note);
  }
  I.RunErrors.assign(I.Devices.size(), Status::ok());
  if (Opts.CudaGraph) {
    bool AnyGpu =
        std::any_of(I.Devices.begin(), I.Devices.end(),
                    [](const auto &D) { return D->kind() == DeviceKind::GPU; });
    if (!AnyGpu)
      E->Notes.push_back("--cuda-graph: the plan runs no device on a GPU; "
                         "running without CUDA graphs");
    else
      for (Impl::Program &Prog : I.Programs)
        I.planSegments(Prog, E->Notes);
  }
  bool Multi = false;
  for (const Impl::Program &Prog : I.Programs)
    Multi |= Prog.Active.size() > 1;
  if (envFlag("MDRT_SPIN_WAIT")) {
    I.HandOffSpin = std::chrono::microseconds(50);
    I.NextStepSpin = std::chrono::microseconds(200);
  }
  if (Multi) {
    // A thread for each device that some step hands to one.
    std::vector<uint8_t> Handed(I.Devices.size(), 0);
    for (const Impl::Program &Prog : I.Programs)
      if (Prog.Active.size() > 1)
        for (uint32_t D : Prog.Active)
          Handed[D] |= D != Prog.Lead;
    I.Jobs.reset(new Impl::WorkerJob[I.Devices.size()]);
    I.Workers.resize(I.Devices.size());
    for (uint32_t D = 0; D < I.Devices.size(); ++D)
      if (Handed[D])
        I.Workers[D] = std::thread([&I, D] { I.worker(D); });
  }
  if (I.P->variables())
    for (const fb::Variable *V : *I.P->variables())
      E->Variables.push_back(
          {V->name()->str(), I.BufType[V->buffer()], V->trainable(),
           !I.isLocal(I.P->buffers()->Get(V->buffer())->device())});
  return std::move(E);
}

Executor::~Executor() = default;

Status Executor::initialize() {
  const fb::Plan &P = *I->P;
  std::vector<uint8_t> Host;
  if (P.variables()) {
    for (const fb::Variable *V : *P.variables()) {
      // A server keeps the variables on its devices.
      if (V->mirror_of() >= 0 ||
          !I->isLocal(P.buffers()->Get(V->buffer())->device()))
        continue;
      const TensorDesc &T = I->BufType[V->buffer()];
      Host.assign(T.bytes(), 0);
      MDRT_RETURN_IF_ERROR(initialValue(*V, T, I->Opts.Seed, Host.data()));
      Device &D = *I->Devices[P.buffers()->Get(V->buffer())->device()];
      D.copyFromHost(I->BufPtr[V->buffer()], Host.data(), Host.size());
    }
    // Mirrored copies start from their original's value (computed again
    // when another process keeps the original).
    for (const fb::Variable *V : *P.variables()) {
      if (V->mirror_of() < 0 ||
          !I->isLocal(P.buffers()->Get(V->buffer())->device()))
        continue;
      const fb::Variable *Orig = P.variables()->Get(V->mirror_of());
      const TensorDesc &T = I->BufType[V->buffer()];
      Host.assign(T.bytes(), 0);
      uint32_t FromId = P.buffers()->Get(Orig->buffer())->device();
      if (!I->isLocal(FromId)) {
        MDRT_RETURN_IF_ERROR(initialValue(*Orig, T, I->Opts.Seed, Host.data()));
        Device &D = *I->Devices[P.buffers()->Get(V->buffer())->device()];
        D.copyFromHost(I->BufPtr[V->buffer()], Host.data(), Host.size());
        continue;
      }
      Device &From = *I->Devices[FromId];
      From.copyToHost(Host.data(), I->BufPtr[Orig->buffer()], Host.size());
      Device &D = *I->Devices[P.buffers()->Get(V->buffer())->device()];
      D.copyFromHost(I->BufPtr[V->buffer()], Host.data(), Host.size());
    }
  }
  if (P.constants())
    for (const fb::Constant *C : *P.constants()) {
      if (!I->isLocal(P.buffers()->Get(C->buffer())->device()))
        continue;
      const TensorDesc &T = I->BufType[C->buffer()];
      size_t N = size_t(T.numElements());
      std::vector<double> Values(N, 0.0);
      if (C->values() && C->values()->size() == N)
        Values.assign(C->values()->begin(), C->values()->end());
      else if (C->values() && C->values()->size() == 1)
        std::fill(Values.begin(), Values.end(), C->values()->Get(0));
      Host.assign(T.bytes(), 0);
      for (size_t E = 0; E < N; ++E)
        switch (T.Type) {
        case DType::Float32:
          reinterpret_cast<float *>(Host.data())[E] = float(Values[E]);
          break;
        case DType::Float64:
          reinterpret_cast<double *>(Host.data())[E] = Values[E];
          break;
        case DType::Int32:
          reinterpret_cast<int32_t *>(Host.data())[E] = int32_t(Values[E]);
          break;
        case DType::Int64:
          reinterpret_cast<int64_t *>(Host.data())[E] = int64_t(Values[E]);
          break;
        default:
          Host[E] = Values[E] != 0;
          break;
        }
      Device &D = *I->Devices[P.buffers()->Get(C->buffer())->device()];
      D.copyFromHost(I->BufPtr[C->buffer()], Host.data(), Host.size());
    }
  for (auto &D : I->Devices)
    MDRT_RETURN_IF_ERROR(D->synchronize());
  return Status::ok();
}

int Executor::programIndex(const std::string &Name) const {
  for (size_t P = 0; P < I->Programs.size(); ++P)
    if (I->Programs[P].Name == Name)
      return int(P);
  return -1;
}

const std::vector<InputSlot> &Executor::inputs(int Program) const {
  return I->Programs[Program].Inputs;
}

int64_t Executor::batchSize(int Program) const {
  return I->Programs[Program].Batch;
}

/// Sends a request to server \p Rank.
Status Executor::Impl::remoteRequest(int Rank, cluster::RequestKind Kind,
                                     uint32_t Program, uint64_t Step,
                                     uint64_t Index) {
  if (Disconnected)
    return Status::error("the executor disconnected from its parameter "
                         "servers");
  cluster::Request R;
  R.Kind = uint32_t(Kind);
  R.Program = Program;
  R.Step = Step;
  R.Index = Index;
  return Cluster->send(Rank, cluster::RequestTag, &R, sizeof(R));
}

Status Executor::run(int ProgIndex, uint64_t Step) {
  Impl::Program &Prog = I->Programs[ProgIndex];
  if (I->Disconnected && !Prog.Servers.empty())
    return Status::error("program '" + Prog.Name +
                         "' needs the parameter servers, from which the "
                         "executor disconnected");
  ++I->RunId;
  // The servers run their part beside this process's.
  for (int Rank : Prog.Servers)
    if (Status S = I->remoteRequest(Rank, cluster::RequestKind::Run,
                                    uint32_t(ProgIndex), Step, 0);
        !S.isOk())
      I->lostMessages(S);
  // Inputs staged on the host go to their devices first.
  for (size_t K = 0; K < Prog.Inputs.size(); ++K) {
    uint32_t B = Prog.InputBuffers[K];
    Device &D = *I->Devices[I->P->buffers()->Get(B)->device()];
    if (D.kind() == DeviceKind::CPU)
      continue;
    if (Prog.Pinned[K])
      cuda::copyFromHostAsync(D, I->BufPtr[B], Prog.Inputs[K].Host,
                              Prog.Inputs[K].Type.bytes());
    else
      D.copyFromHost(I->BufPtr[B], Prog.Inputs[K].Host,
                     Prog.Inputs[K].Type.bytes());
  }
  if (Prog.Active.size() <= 1) {
    if (!Prog.Active.empty())
      I->runDevice(Prog, ProgIndex, Prog.Active[0], Step);
  } else {
    // The other devices' threads first, then the lead device here.
    I->Remaining.store(unsigned(Prog.Active.size() - 1),
                       std::memory_order_relaxed);
    for (uint32_t D : Prog.Active) {
      if (D == Prog.Lead)
        continue;
      Impl::WorkerJob &Job = I->Jobs[D];
      Job.Program = ProgIndex;
      Job.Step = Step;
      Job.Id.store(I->RunId, std::memory_order_release);
      Job.Ready.notify();
    }
    // As on the devices' own threads, an exception ends the process: the
    // other threads may be waiting for this device's kernels.
    auto RunLead = [&]() noexcept {
      I->runDevice(Prog, ProgIndex, Prog.Lead, Step);
    };
    RunLead();
    I->Finished.wait(
        [&] { return I->Remaining.load(std::memory_order_acquire) == 0; },
        I->HandOffSpin);
  }
  for (uint32_t Id : Prog.AsyncSlots)
    Prog.Slots[Id].Group->finish(Prog.Slots[Id].Participant);
  // The step ends when the servers' parts have, updates included.
  Status ServerErr = Status::ok();
  for (int Rank : Prog.Servers) {
    Status Remote = Status::ok();
    int Stop = 0;
    if (Status S = cluster::recvReply(*I->Cluster, Rank, Remote, &Stop);
        !S.isOk())
      I->lostMessages(S);
    if (Stop)
      I->ServerStop.store(Stop, std::memory_order_relaxed);
    if (ServerErr.isOk() && !Remote.isOk())
      ServerErr = Remote.withContext(I->Cluster->rankName(Rank));
  }
  ++Prog.Runs;
  // Every device finishes its step, also when one fails: the next step
  // reuses the staging buffers the others may still be copying from.
  Status SyncErr = Status::ok();
  for (uint32_t D : Prog.Active) {
    Status S = I->Devices[D]->synchronize();
    if (SyncErr.isOk() && !S.isOk())
      SyncErr = S;
  }
  // What GPU kernels found in their inputs (a CPU kernel's report is in
  // RunErrors already).
  for (uint32_t D : Prog.Active)
    if (I->Devices[D]->kind() == DeviceKind::GPU)
      if (Status R = cuda::takeInputReports(*I->Devices[D]);
          !R.isOk() && I->RunErrors[D].isOk())
        I->RunErrors[D] = std::move(R);
  // The devices' own reports, cleared for the next step.
  Status RunErr = Status::ok();
  for (Status &S : I->RunErrors) {
    if (RunErr.isOk())
      RunErr = std::move(S);
    S = Status::ok();
  }
  MDRT_RETURN_IF_ERROR(SyncErr);
  MDRT_RETURN_IF_ERROR(ServerErr);
  return RunErr;
}

Status Executor::readOutputs(int ProgIndex, std::vector<OutputValue> &Out,
                             bool Histograms) {
  const fb::Program &FP = *I->P->programs()->Get(ProgIndex);
  Out.clear();
  if (!FP.outputs())
    return Status::ok();
  std::vector<uint8_t> Host;
  for (const fb::Output *O : *FP.outputs()) {
    OutputValue V;
    V.Name = O->name()->str();
    V.Kind = O->kind();
    V.Type = I->BufType[O->buffer()];
    if (!Histograms && V.Kind == fb::OutputKind::Histogram) {
      Out.push_back(std::move(V));
      continue;
    }
    Host.resize(V.Type.bytes());
    Device &D = *I->Devices[I->P->buffers()->Get(O->buffer())->device()];
    D.copyToHost(Host.data(), I->BufPtr[O->buffer()], Host.size());
    // A device records a failed copy; the values would be garbage.
    MDRT_RETURN_IF_ERROR(D.synchronize());
    size_t N = size_t(V.Type.numElements());
    switch (V.Type.Type) {
    case DType::Float32:
      toDoubles<float>(Host.data(), N, V.Values);
      break;
    case DType::Float64:
      toDoubles<double>(Host.data(), N, V.Values);
      break;
    case DType::Int32:
      toDoubles<int32_t>(Host.data(), N, V.Values);
      break;
    case DType::Int64:
      toDoubles<int64_t>(Host.data(), N, V.Values);
      break;
    default:
      toDoubles<uint8_t>(Host.data(), N, V.Values);
      break;
    }
    Out.push_back(std::move(V));
  }
  return Status::ok();
}

Status Executor::readVariable(size_t Index, void *Host) {
  const fb::Variable *V = I->P->variables()->Get(uint32_t(Index));
  uint32_t DevId = I->P->buffers()->Get(V->buffer())->device();
  size_t Bytes = I->BufType[V->buffer()].bytes();
  if (!I->isLocal(DevId)) {
    // Its server sends it.
    int Rank = I->DevRank[DevId];
    Status Remote = Status::ok();
    if (Status S = I->remoteRequest(Rank, cluster::RequestKind::ReadVariable, 0,
                                    0, Index);
        !S.isOk())
      return S;
    if (Status S = cluster::recvReply(*I->Cluster, Rank, Remote); !S.isOk())
      I->lostMessages(S);
    MDRT_RETURN_IF_ERROR(Remote.withContext(I->Cluster->rankName(Rank)));
    if (Status S = I->Cluster->recv(Rank, cluster::RequestTag, Host, Bytes);
        !S.isOk())
      I->lostMessages(S);
    return Status::ok();
  }
  Device &D = *I->Devices[DevId];
  std::unique_lock<std::mutex> L;
  if (I->KernelLock)
    L = std::unique_lock<std::mutex>(*I->KernelLock);
  D.copyToHost(Host, I->BufPtr[V->buffer()], Bytes);
  return D.synchronize();
}

Status Executor::writeVariable(size_t Index, const void *Host) {
  const fb::Variable *V = I->P->variables()->Get(uint32_t(Index));
  uint32_t DevId = I->P->buffers()->Get(V->buffer())->device();
  size_t Bytes = I->BufType[V->buffer()].bytes();
  if (!I->isLocal(DevId)) {
    int Rank = I->DevRank[DevId];
    Status Remote = Status::ok();
    if (Status S = I->remoteRequest(Rank, cluster::RequestKind::WriteVariable,
                                    0, 0, Index);
        !S.isOk())
      return S;
    if (Status S = I->Cluster->send(Rank, cluster::RequestTag, Host, Bytes);
        !S.isOk())
      I->lostMessages(S);
    if (Status S = cluster::recvReply(*I->Cluster, Rank, Remote); !S.isOk())
      I->lostMessages(S);
    return Remote.withContext(I->Cluster->rankName(Rank));
  }
  Device &D = *I->Devices[DevId];
  std::unique_lock<std::mutex> L;
  if (I->KernelLock)
    L = std::unique_lock<std::mutex>(*I->KernelLock);
  D.copyFromHost(I->BufPtr[V->buffer()], Host, Bytes);
  return D.synchronize();
}

int Executor::serverStop() const {
  return I->ServerStop.load(std::memory_order_relaxed);
}

Status Executor::disconnect(int Outcome) {
  if (!I->Cluster || I->isServer() || I->Disconnected)
    return Status::ok();
  Status First = Status::ok();
  for (int Rank : I->ServerRanks) {
    Status S = I->remoteRequest(Rank, cluster::RequestKind::Disconnect, 0,
                                uint64_t(uint32_t(Outcome)), 0);
    if (First.isOk() && !S.isOk())
      First = S;
  }
  I->Disconnected = true;
  return First;
}

void Executor::setTracing(bool On) {
  if (On && !I->TraceStart)
    I->TraceStart = nowNs();
  I->Tracing.store(On);
  if (I->Queue)
    I->Queue->setTracing(On);
}

void Executor::writeTrace(std::ostream &OS) const {
  auto Escape = [](const std::string &S) {
    std::string R;
    for (char C : S) {
      if (C == '"' || C == '\\')
        R += '\\';
      R += C;
    }
    return R;
  };
  OS << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  // One trace process per process of the run, so that the traces of a
  // run's processes load together (they were all pid 1).
  const ProcessGroup *Procs = I->Opts.Processes;
  const std::string P = std::to_string(Procs ? Procs->rank() + 1 : 1);
  OS << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << P
     << ",\"args\":{\"name\":\""
     << Escape(Procs ? Procs->rankName(Procs->rank()) : std::string("mdrun"))
     << "\"}}";
  bool First = false;
  for (size_t D = 0; D < I->Devices.size(); ++D) {
    OS << (First ? "" : ",\n")
       << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << P
       << ",\"tid\":" << D << ",\"args\":{\"name\":\""
       << Escape(I->Devices[D]->name()) << "\"}}";
    First = false;
    for (const Impl::TraceEvent &E : I->Trace[D]) {
      const Impl::Slot &S = I->Programs[E.Program].Slots[E.Kernel];
      char Buf[128];
      snprintf(Buf, sizeof(Buf), "%.3f,\"dur\":%.3f",
               double(E.Start - I->TraceStart) / 1000.0,
               double(E.End - E.Start) / 1000.0);
      // A wait for queued sums is named after their all-reduce.
      OS << ",\n{\"name\":\"" << (E.Wait ? "wait for " : "")
         << Escape(S.K->name()->str()) << "\",\"cat\":\""
         << (E.Wait ? "Wait" : Escape(S.K->op()->str()))
         << "\",\"ph\":\"X\",\"pid\":" << P << ",\"tid\":" << D
         << ",\"ts\":" << Buf << ",\"args\":{\"program\":\""
         << I->Programs[E.Program].Name << "\"}}";
    }
  }
  if (I->Queue) {
    // The sums crossing processes, on the queue's thread: one track.
    size_t Tid = I->Devices.size();
    OS << (First ? "" : ",\n")
       << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << P
       << ",\"tid\":" << Tid
       << ",\"args\":{\"name\":\"all-reduces across processes\"}}";
    for (const CollectiveQueue::Event &E : I->Queue->events()) {
      char Buf[128];
      snprintf(Buf, sizeof(Buf), "%.3f,\"dur\":%.3f",
               double(E.StartNs - I->TraceStart) / 1000.0,
               double(E.EndNs - E.StartNs) / 1000.0);
      OS << ",\n{\"name\":\"" << Escape(E.Label)
         << "\",\"cat\":\"AllReduce\",\"ph\":\"X\",\"pid\":" << P
         << ",\"tid\":" << Tid << ",\"ts\":" << Buf
         << ",\"args\":{\"across\":\"processes\"}}";
    }
  }
  OS << "\n]}\n";
}
