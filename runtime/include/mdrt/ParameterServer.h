//===- ParameterServer.h - ps tasks in processes of their own ---*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A ps-strategy deployment of W replicas and P parameter-server tasks
// (mdplan --num-replicas=W --num-ps-tasks=P) is model_deploy's
// between-graph replication: each replica's plan has its worker's devices
// and every ps task's device, which keeps a share of the variables and
// applies that replica's updates to them. Run as W + P processes, process
// R (R < W) is the worker of replica R and runs its plan's worker devices
// (mdrt::Executor with ExecutorOptions::Cluster); process W + T runs ps
// task T for every worker: one executor per worker's plan, all on the same
// variables, each serving its worker's requests as they come on a thread of
// its own. A worker's training step sends it the variables, and each
// worker's gradients are applied when they arrive: asynchronous training,
// as TensorFlow's between-graph replication without a synchronizing
// optimizer. A worker's step ends once the servers applied its updates, so
// after the workers meet (evaluation, checkpoints) the variables hold every
// step's.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_PARAMETERSERVER_H
#define MDRT_PARAMETERSERVER_H

#include "mdrt/Executor.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace mdrt {

/// How the processes of a run share its work, as its plans say.
struct ClusterLayout {
  /// Workers, processes 0 to Workers - 1.
  int Workers = 1;
  /// Parameter-server tasks in processes of their own, after the workers
  /// (0: the plan's parameter servers, if any, run inside the worker).
  int PsTasks = 0;
  bool isServer(int Rank) const { return PsTasks > 0 && Rank >= Workers; }
};

/// The layout of a run of \p Processes processes whose replica 0 runs
/// \p Plan: W + P processes for a ps-strategy plan of W replicas and P > 0
/// ps tasks run by several processes; otherwise every process is a worker.
/// An error when a ps-strategy plan's processes are not W + P.
/// An error also when a multi-worker mirrored plan's processes are not
/// one per replica (checkMirroredProcessCount).
StatusOr<ClusterLayout> clusterLayout(const fb::Plan &Plan, int Processes);

/// For a mirrored plan of several replicas run by several processes: an
/// error unless there is one process per replica.
Status checkMirroredProcessCount(const fb::Plan &Plan, int Processes);

struct ServerOptions {
  /// Intra-op threads of the task's devices (0: the process's CPUs).
  int Threads = 0;
  /// The run seed, which the variables' initial values derive from (the
  /// workers' seed: a variable starts as it would in one process).
  uint64_t Seed = 0;
  /// Polled as the task replies to each step: a nonzero value (mdrun
  /// stores a stop signal's number) goes to the workers with the reply,
  /// and they stop the run as if they had got it (Executor::serverStop).
  const std::atomic<int> *Stop = nullptr;
  /// Testing: raise SIGTERM once the task has served step \p TermAtStep
  /// (1-based, as the workers count) of replica 0's training program
  /// (-1: never).
  int64_t TermAtStep = -1;
};

class ParameterServer {
public:
  /// Serves ps task \p Task, process Plans.size() + \p Task of \p Cluster,
  /// to the workers whose plans are \p Plans (replica order): checks that
  /// the plans are the replicas of one deployment and lay the task's
  /// variables out alike, creates an executor per plan on shared variables
  /// and gives the variables their initial values.
  static StatusOr<std::unique_ptr<ParameterServer>>
  create(std::vector<std::shared_ptr<const PlanFile>> Plans,
         ProcessGroup &Cluster, int Task, const ServerOptions &Opts);
  ~ParameterServer();

  /// Serves the workers' requests until every worker has disconnected
  /// (Executor::disconnect); the first error of a request (which its worker
  /// was told of) or of the exchange itself.
  Status serve();

  /// After serve(): how the workers' run ended, the first nonzero outcome
  /// they disconnected with (Executor::disconnect), or 0.
  int workersOutcome() const;

  struct Impl;

private:
  ParameterServer() = default;
  std::unique_ptr<Impl> I;
};

/// Loads the plans of a cluster's \p Workers workers: \p PlanPath with
/// "{replica}" replaced by each replica (mdrt::replicaPath), which it must
/// contain when there are several.
StatusOr<std::vector<std::shared_ptr<const PlanFile>>>
loadWorkerPlans(const std::string &PlanPath, int Workers);

/// A 64-bit digest of the plan's bytes.
uint64_t planDigest(const PlanFile &Plan);

/// A collective of a cluster's processes: checks that the servers read the
/// plans the workers run (the files could differ between machines) and
/// have replica 0's run seed \p Seed, which their variables start from.
/// \p Plans: a worker's own plan, or a server's plans of every worker.
Status agreeOnPlans(ProcessGroup &Cluster, const ClusterLayout &Layout,
                    const std::vector<const PlanFile *> &Plans, uint64_t Seed);

} // namespace mdrt

#endif // MDRT_PARAMETERSERVER_H
