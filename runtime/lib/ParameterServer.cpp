//===- ParameterServer.cpp - ps tasks in processes of their own -----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A server process keeps its task's variables in one block of memory per
// device and runs an executor per worker on it; one thread per worker
// takes that worker's requests (ClusterProtocol.h) in order. Kernels and
// copies of the variables hold one lock, so that two workers' updates of a
// variable do not interleave (TensorFlow's use_locking), while the
// transfers of different workers proceed side by side.
//
//===----------------------------------------------------------------------===//

#include "mdrt/ParameterServer.h"
#include "mdrt/Random.h"

#include "ClusterProtocol.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

using namespace mdrt;

Status mdrt::checkMirroredProcessCount(const fb::Plan &P, int Processes) {
  const fb::Deployment *D = P.deployment();
  if (Processes <= 1 || !D || !D->strategy() ||
      D->strategy()->str() != "mirrored" || D->num_replicas() <= 1 ||
      Processes == D->num_replicas())
    return Status::ok();
  return Status::error(
      "the plan is replica " + std::to_string(D->replica_id()) + " of " +
      std::to_string(D->num_replicas()) + " (mirrored), but the run has " +
      std::to_string(Processes) + " processes; it needs " +
      std::to_string(D->num_replicas()) + ", one per replica");
}

StatusOr<ClusterLayout> mdrt::clusterLayout(const fb::Plan &P, int Processes) {
  MDRT_RETURN_IF_ERROR(checkMirroredProcessCount(P, Processes));
  ClusterLayout L;
  L.Workers = Processes;
  const fb::Deployment *D = P.deployment();
  if (Processes <= 1 || !D || !D->strategy() || D->strategy()->str() != "ps" ||
      D->num_ps_tasks() < 1)
    return L;
  int W = D->num_replicas(), T = D->num_ps_tasks();
  if (Processes != W + T)
    return Status::error(
        "the plan is replica " + std::to_string(D->replica_id()) + " of " +
        std::to_string(W) + " (ps strategy, " + std::to_string(T) +
        " parameter-server task" + (T == 1 ? "" : "s") + "), but the run has " +
        std::to_string(Processes) + " processes; it needs " +
        std::to_string(W + T) +
        ": one per replica, then one per ps task (mpirun -n " +
        std::to_string(W + T) + " mdrun ...)");
  L.Workers = W;
  L.PsTasks = T;
  return L;
}

StatusOr<std::vector<std::shared_ptr<const PlanFile>>>
mdrt::loadWorkerPlans(const std::string &PlanPath, int Workers) {
  if (Workers > 1 && replicaPath(PlanPath, 0) == PlanPath)
    return Status::error(
        "the parameter servers run the plans of " + std::to_string(Workers) +
        " workers, one per replica: the plan path '" + PlanPath +
        "' needs '{replica}', which stands for each replica's "
        "(mdplan -o 'plan.{replica}.mdp')");
  std::vector<std::shared_ptr<const PlanFile>> Plans;
  for (int R = 0; R < Workers; ++R) {
    auto P = PlanFile::load(replicaPath(PlanPath, R));
    if (!P.isOk())
      return P.status();
    Plans.push_back(P.take());
  }
  return Plans;
}

namespace {

/// A persistent buffer as the layout check compares it.
using Layout =
    std::vector<std::tuple<uint64_t, uint64_t, int, std::string, std::string>>;

/// The persistent buffers of device \p Dev of \p P, in offset order.
Layout persistentLayout(const fb::Plan &P, uint32_t Dev) {
  Layout L;
  if (P.buffers())
    for (const fb::Buffer *B : *P.buffers()) {
      if (B->device() != Dev || !B->persistent() || B->alias_of() >= 0)
        continue;
      std::string Shape;
      if (B->shape())
        for (int64_t D : *B->shape())
          Shape += std::to_string(D) + ",";
      L.emplace_back(B->offset(), B->bytes(), int(B->dtype()), Shape,
                     B->name()->str());
    }
  std::sort(L.begin(), L.end());
  return L;
}

} // namespace

struct ParameterServer::Impl {
  ProcessGroup *Cluster = nullptr;
  int Task = 0;
  /// Owners of the task's variables' memory, one per device.
  std::vector<std::unique_ptr<Device>> Memory;
  std::mutex KernelLock;
  std::vector<std::unique_ptr<Executor>> Execs;
  const std::atomic<int> *Stop = nullptr;
  int64_t TermAtStep = -1;
  /// The first nonzero outcome a worker disconnected with.
  std::atomic<int> Outcome{0};

  Status serveWorker(int Worker);
  /// A request the server cannot answer leaves its worker waiting.
  [[noreturn]] void lost(const Status &S) {
    std::fprintf(stderr, "error: ps task %d: %s; stopping every process\n",
                 Task, S.message().c_str());
    Cluster->abort(1);
    std::abort(); // abort() does not return; the compiler cannot know.
  }
};

StatusOr<std::unique_ptr<ParameterServer>>
ParameterServer::create(std::vector<std::shared_ptr<const PlanFile>> Plans,
                        ProcessGroup &Cluster, int Task,
                        const ServerOptions &Opts) {
  if (Plans.empty())
    return Status::error("a parameter server needs the plans of its workers");
  int W = int(Plans.size());
  const fb::Plan &First = Plans[0]->plan();
  // The plans are the replicas of one ps deployment with this task.
  for (int R = 0; R < W; ++R) {
    const fb::Plan &P = Plans[size_t(R)]->plan();
    const fb::Deployment *D = P.deployment();
    std::string Name = "plan '" + Plans[size_t(R)]->name() + "'";
    if (!D || !D->strategy() || D->strategy()->str() != "ps" ||
        D->num_ps_tasks() <= Task)
      return Status::error(Name + " has no ps task " + std::to_string(Task) +
                           " (compile it with --num-ps-tasks)");
    if (D->num_replicas() != W || D->replica_id() != R)
      return Status::error(
          Name + " is replica " + std::to_string(D->replica_id()) + " of " +
          std::to_string(D->num_replicas()) + ", where the parameter servers " +
          "expect replica " + std::to_string(R) + " of " + std::to_string(W));
    if (P.fingerprint() != First.fingerprint() ||
        D->num_ps_tasks() != First.deployment()->num_ps_tasks())
      return Status::error(Name + " is not a replica of the deployment of '" +
                           Plans[0]->name() +
                           "' (compiled from another model or deployment?)");
  }
  std::unique_ptr<ParameterServer> S(new ParameterServer());
  S->I = std::make_unique<Impl>();
  Impl &I = *S->I;
  I.Cluster = &Cluster;
  I.Task = Task;
  I.Stop = Opts.Stop;
  I.TermAtStep = Opts.TermAtStep;
  // The task's devices, and their variables' memory, which every worker's
  // plan must lay out alike.
  ExecutorOptions EO;
  EO.Threads = Opts.Threads;
  EO.Seed = Opts.Seed;
  EO.Cluster.Group = &Cluster;
  EO.Cluster.ServeTask = Task;
  EO.Cluster.KernelLock = &I.KernelLock;
  std::string PsJob = psJobName(*First.deployment());
  for (uint32_t Dev = 0; Dev < First.devices()->size(); ++Dev) {
    const fb::Device *D = First.devices()->Get(Dev);
    if (!D->job() || D->job()->str() != PsJob || D->task() != Task)
      continue;
    std::string Name = D->name()->str();
    Layout Mine = persistentLayout(First, Dev);
    for (int R = 1; R < W; ++R) {
      const fb::Plan &P = Plans[size_t(R)]->plan();
      const fb::Device *Other = nullptr;
      uint32_t OtherId = 0;
      for (; OtherId < P.devices()->size(); ++OtherId)
        if (P.devices()->Get(OtherId)->name()->str() == Name) {
          Other = P.devices()->Get(OtherId);
          break;
        }
      if (!Other || Other->persistent_bytes() != D->persistent_bytes() ||
          persistentLayout(P, OtherId) != Mine)
        return Status::error("plan '" + Plans[size_t(R)]->name() +
                             "' lays out the variables of " + Name +
                             " unlike plan '" + Plans[0]->name() +
                             "' (compiled from another model or deployment?)");
    }
    auto Holder = createCpuDevice(Name, 1);
    MDRT_RETURN_IF_ERROR(Holder->allocate(0, D->persistent_bytes()));
    EO.Cluster.SharedPersistent[Name] = Holder->persistent();
    I.Memory.push_back(std::move(Holder));
  }
  for (int R = 0; R < W; ++R) {
    auto E = Executor::create(Plans[size_t(R)], EO);
    if (!E.isOk())
      return E.status();
    I.Execs.push_back(E.take());
  }
  // Every worker's executor sees the same variables: one initializes them.
  MDRT_RETURN_IF_ERROR(I.Execs[0]->initialize());
  return std::move(S);
}

ParameterServer::~ParameterServer() = default;

Status ParameterServer::Impl::serveWorker(int Worker) {
  Executor &E = *Execs[size_t(Worker)];
  const fb::Plan &P = E.plan().plan();
  uint32_t Programs = P.programs() ? P.programs()->size() : 0;
  Status First = Status::ok();
  std::vector<uint8_t> Buf;
  for (;;) {
    cluster::Request Q;
    if (Status S = Cluster->recv(Worker, cluster::RequestTag, &Q, sizeof(Q));
        !S.isOk())
      lost(S);
    Status Done = Status::ok();
    switch (cluster::RequestKind(Q.Kind)) {
    case cluster::RequestKind::Run:
      if (Q.Program >= Programs)
        lost(Status::error("replica " + std::to_string(Worker) +
                           " asks for program " + std::to_string(Q.Program) +
                           " of " + std::to_string(Programs)));
      Done = E.run(int(Q.Program), Q.Step);
      if (Worker == 0 && Q.Program == uint32_t(E.programIndex("train")) &&
          int64_t(Q.Step) + 1 == TermAtStep)
        std::raise(SIGTERM);
      if (Status S = cluster::sendReply(
              *Cluster, Worker, Done,
              Stop ? Stop->load(std::memory_order_relaxed) : 0);
          !S.isOk())
        lost(S);
      break;
    case cluster::RequestKind::ReadVariable:
    case cluster::RequestKind::WriteVariable: {
      if (Q.Index >= E.variables().size() || E.variables()[Q.Index].Remote)
        lost(Status::error("replica " + std::to_string(Worker) +
                           " asks for variable " + std::to_string(Q.Index) +
                           " of " + std::to_string(E.variables().size()) +
                           ", which this task does not keep"));
      Buf.resize(E.variables()[Q.Index].Type.bytes());
      bool Read =
          cluster::RequestKind(Q.Kind) == cluster::RequestKind::ReadVariable;
      if (Read) {
        Done = E.readVariable(Q.Index, Buf.data());
      } else {
        if (Status S = Cluster->recv(Worker, cluster::RequestTag, Buf.data(),
                                     Buf.size());
            !S.isOk())
          lost(S);
        Done = E.writeVariable(Q.Index, Buf.data());
      }
      if (Status S = cluster::sendReply(*Cluster, Worker, Done); !S.isOk())
        lost(S);
      if (Read && Done.isOk())
        if (Status S = Cluster->send(Worker, cluster::RequestTag, Buf.data(),
                                     Buf.size());
            !S.isOk())
          lost(S);
      break;
    }
    case cluster::RequestKind::Disconnect: {
      int None = 0;
      Outcome.compare_exchange_strong(None, int(Q.Step));
      return First;
    }
    default:
      lost(Status::error("replica " + std::to_string(Worker) +
                         " sent a request of unknown kind " +
                         std::to_string(Q.Kind)));
    }
    if (First.isOk() && !Done.isOk())
      First = Done;
  }
}

Status ParameterServer::serve() {
  size_t W = I->Execs.size();
  std::vector<Status> Errors(W, Status::ok());
  std::vector<std::thread> Threads;
  for (size_t R = 0; R < W; ++R)
    Threads.emplace_back(
        [this, R, &Errors] { Errors[R] = I->serveWorker(int(R)); });
  for (std::thread &T : Threads)
    T.join();
  for (const Status &S : Errors)
    if (!S.isOk())
      return S;
  return Status::ok();
}

int ParameterServer::workersOutcome() const { return I->Outcome.load(); }

uint64_t mdrt::planDigest(const PlanFile &Plan) {
  return digestBytes(Plan.bytes().data(), Plan.bytes().size());
}

Status mdrt::agreeOnPlans(ProcessGroup &Cluster, const ClusterLayout &Layout,
                          const std::vector<const PlanFile *> &Plans,
                          uint64_t Seed) {
  // Each process: a digest per worker's plan it read, then its seed.
  size_t W = size_t(Layout.Workers), Row = W + 1;
  std::vector<uint64_t> Mine(Row, 0), All(Row * size_t(Cluster.size()), 0);
  bool Server = Layout.isServer(Cluster.rank());
  for (size_t R = 0; R < W; ++R)
    if (Server ? R < Plans.size() : R == size_t(Cluster.rank()))
      Mine[R] = planDigest(*Plans[Server ? R : 0]);
  Mine[W] = Seed;
  MDRT_RETURN_IF_ERROR(
      Cluster.allGather(Mine.data(), All.data(), Row * sizeof(uint64_t)));
  for (int S = Layout.Workers; S < Cluster.size(); ++S)
    for (size_t R = 0; R < W; ++R)
      if (All[size_t(S) * Row + R] != All[R * Row + R])
        return Status::error(
            Cluster.rankName(S) + " read another plan for replica " +
            std::to_string(R) + " than " + Cluster.rankName(int(R)) +
            " runs: every process must read the same plan files");
  // A server gives its variables their initial values from the seed.
  for (int S = Layout.Workers; S < Cluster.size(); ++S)
    if (All[size_t(S) * Row + W] != All[W])
      return Status::error(Cluster.rankName(S) + " has --seed " +
                           std::to_string(All[size_t(S) * Row + W]) + ", " +
                           Cluster.rankName(0) + " has " +
                           std::to_string(All[W]) +
                           ": every process of the run needs the same seed "
                           "(the servers' variables start from it)");
  return Status::ok();
}
