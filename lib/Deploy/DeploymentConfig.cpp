//===- DeploymentConfig.cpp - How a model is deployed ---------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Deploy/DeviceFunctions.h"

#include "llvm/ADT/StringExtras.h"

using namespace llvm;
using namespace mdplan;

StringRef mdplan::strategyName(Strategy S) {
  return S == Strategy::Mirrored ? "mirrored" : "ps";
}

//===----------------------------------------------------------------------===//
// Cluster
//===----------------------------------------------------------------------===//

std::string Cluster::whyMissing(const DeviceSpec &D) const {
  assert(D.isComplete() && "only complete devices are checked");
  bool IsWorker = *D.Job == WorkerJob;
  bool IsPs = NumPs > 0 && *D.Job == PsJob;
  if (!IsWorker && !IsPs) {
    std::string Jobs = "'" + WorkerJob + "'";
    if (NumPs > 0)
      Jobs += " and '" + PsJob + "'";
    return "the cluster has no job '" + *D.Job + "' (its jobs: " + Jobs + ")";
  }
  if (*D.Replica != 0)
    return "the cluster has replica 0 only";
  int Tasks = IsWorker ? NumWorkers : NumPs;
  if (*D.Task >= Tasks)
    return "job '" + *D.Job + "' has " + std::to_string(Tasks) + " task" +
           (Tasks == 1 ? "" : "s");
  if (*D.Type == "CPU") {
    if (*D.Index != 0)
      return "each task has one CPU, CPU:0";
    return "";
  }
  if (*D.Type == "GPU") {
    if (IsPs)
      return "parameter-server tasks have no GPU";
    if (*D.Index >= GpusPerWorker)
      return GpusPerWorker == 0
                 ? std::string("the worker tasks have no GPU")
                 : "the worker tasks have " + std::to_string(GpusPerWorker) +
                       " GPU" + (GpusPerWorker == 1 ? "" : "s") +
                       (GpusPerWorker == 1
                            ? std::string(", GPU:0")
                            : ", GPU:0 to GPU:" +
                                  std::to_string(GpusPerWorker - 1));
    return "";
  }
  return "the cluster has no devices of type '" + *D.Type + "'";
}

bool Cluster::contains(const DeviceSpec &D) const {
  return whyMissing(D).empty();
}

DeviceSpec Cluster::complete(const DeviceSpec &D) const {
  DeviceSpec R = D;
  if (!R.Job)
    R.Job = WorkerJob;
  if (!R.Replica)
    R.Replica = 0;
  if (!R.Task)
    R.Task = *R.Job == WorkerJob ? WorkerTask : 0;
  if (!R.Type)
    R.Type = "CPU";
  if (!R.Index)
    R.Index = 0;
  return R;
}

DeviceSpec Cluster::hostOf(const DeviceSpec &D) const {
  DeviceSpec R = complete(D);
  R.Type = "CPU";
  R.Index = 0;
  return R;
}

//===----------------------------------------------------------------------===//
// DeploymentConfig
//===----------------------------------------------------------------------===//

SourceLoc DeploymentConfig::originOf(StringRef Name) const {
  auto It = Origins.find(Name);
  return It == Origins.end() ? DefaultOrigin : It->second;
}

SourceLoc DeploymentConfig::originOf(ArrayRef<StringRef> Names) const {
  for (StringRef N : Names) {
    auto It = Origins.find(N);
    if (It != Origins.end())
      return It->second;
  }
  return DefaultOrigin;
}

/// "1 clone", "2 clones".
static std::string plural(int64_t N, StringRef Noun) {
  return std::to_string(N) + " " + Noun.str() + (N == 1 ? "" : "s");
}

static bool validJobName(StringRef N) {
  for (char C : N)
    if (!isAlnum(C) && C != '_' && C != '-' && C != '.')
      return false;
  return true;
}

Error DeploymentConfig::validate() const {
  // An error is located at the first of the settings involved that was
  // given (the one it names first), so that a check about a field left at
  // its default points at the setting that made it fail.
  auto Fail = [&](ArrayRef<StringRef> Fields, const Twine &Msg) {
    return makeError(originOf(Fields), Msg);
  };
  bool Ps = Strat == Strategy::ParameterServer;
  // model_deploy's checks, in its order.
  if (Ps && NumReplicas > 1 && NumPsTasks < 1)
    return Fail({"num_ps_tasks", "num_replicas"},
                "when using replicas num_ps_tasks must be positive");
  if (NumReplicas > 1 || NumPsTasks > 0) {
    if (WorkerJobName.empty())
      return Fail({"worker_job_name", "num_replicas", "num_ps_tasks"},
                  "must specify worker_job_name when using replicas");
    if (Ps && PsJobName.empty())
      return Fail({"ps_job_name", "num_ps_tasks", "num_replicas"},
                  "must specify ps_job_name when using parameter server");
  }
  // mdplan's own, before the comparison with replica_id: with no replica
  // at all, every replica_id would be reported as out of range.
  if (NumReplicas < 1)
    return Fail({"num_replicas"},
                "num_replicas must be at least 1, got " + Twine(NumReplicas));
  if (ReplicaId >= NumReplicas)
    return Fail({"replica_id", "num_replicas"},
                "replica_id must be less than num_replicas");

  // mdplan's own checks.
  if (NumClones < 1)
    return Fail({"num_clones"},
                "num_clones must be at least 1, got " + Twine(NumClones));
  if (NumPsTasks < 0)
    return Fail({"num_ps_tasks"},
                "num_ps_tasks must not be negative, got " + Twine(NumPsTasks));
  // Far beyond any cluster, and short of a graph that exhausts memory
  // before it could say so.
  for (auto [Field, Value] :
       {std::pair<StringRef, int>{"num_clones", NumClones},
        {"num_replicas", NumReplicas},
        {"num_ps_tasks", NumPsTasks}})
    if (Value > MaxDeploymentCount)
      return Fail({Field}, Field + " must be at most " +
                               Twine(MaxDeploymentCount) + ", got " +
                               Twine(Value));
  if (Strat == Strategy::Mirrored &&
      int64_t(NumClones) * NumReplicas > MaxMirroredDevices)
    return Fail({"num_clones", "num_replicas"},
                "the mirrored strategy's all-reduce spans at most " +
                    Twine(MaxMirroredDevices) + " devices, but " +
                    Twine(NumClones) + " clones on each of " +
                    Twine(NumReplicas) + " replicas are " +
                    Twine(int64_t(NumClones) * NumReplicas));
  if (ReplicaId < 0)
    return Fail({"replica_id"},
                "replica_id must not be negative, got " + Twine(ReplicaId));
  if (!validJobName(WorkerJobName))
    return Fail({"worker_job_name"},
                "invalid worker_job_name '" + WorkerJobName +
                    "': use letters, digits, '_', '-' and '.'");
  if (!validJobName(PsJobName))
    return Fail({"ps_job_name"},
                "invalid ps_job_name '" + PsJobName +
                    "': use letters, digits, '_', '-' and '.'");
  if (NumPsTasks > 0 && WorkerJobName == PsJobName)
    return Fail({"ps_job_name", "worker_job_name", "num_ps_tasks"},
                "worker_job_name and ps_job_name are both '" + PsJobName + "'");
  if (!Ps && NumPsTasks > 0)
    return Fail({"strategy", "num_ps_tasks"},
                "the mirrored strategy uses no parameter servers; "
                "num_ps_tasks must be 0");
  if (GpusPerWorker < -1)
    return Fail({"gpus_per_worker"}, "gpus_per_worker must not be negative");
  if (!CloneOnCPU && GpusPerWorker >= 0 && NumClones > GpusPerWorker &&
      !SoftPlacement)
    return Fail(
        {"gpus_per_worker", "num_clones"},
        plural(NumClones, "clone") +
            (NumClones == 1 ? " on GPU needs " : " on GPUs need ") +
            plural(NumClones, "GPU") + " per worker, but gpus_per_worker is " +
            Twine(GpusPerWorker) + " (use clone_on_cpu or soft placement)");
  if (BatchPerClone && GlobalBatch)
    return Fail({"global_batch", "batch_per_clone"},
                "give the batch size per clone or global, not both");
  if (BatchPerClone < 0)
    return Fail({"batch_per_clone"},
                "batch size must be positive, got " + Twine(BatchPerClone));
  if (GlobalBatch < 0)
    return Fail({"global_batch"},
                "batch size must be positive, got " + Twine(GlobalBatch));
  if (GlobalBatch && GlobalBatch % globalBatchClones()) {
    if (globalBatchClones() == NumClones)
      return Fail({"global_batch", "num_clones"},
                  "global batch of " + Twine(GlobalBatch) +
                      " cannot be split evenly over " +
                      plural(NumClones, "clone"));
    return Fail({"global_batch", "num_clones", "num_replicas"},
                "global batch of " + Twine(GlobalBatch) +
                    " cannot be split evenly over " +
                    plural(globalBatchClones(), "clone") + " (" +
                    Twine(NumClones) + " per worker on " +
                    plural(NumReplicas, "worker") + ")");
  }
  if (FirstBucketBytes < 0)
    return Fail({"first_bucket_bytes", "bucket_bytes"},
                "bucket sizes must not be negative");
  if (BucketBytes < 0)
    return Fail({"bucket_bytes", "first_bucket_bytes"},
                "bucket sizes must not be negative");
  if (Optimizer) {
    // Fields not given keep their (valid) defaults; the graph file's
    // optimizer is checked by the reader, at its location.
    for (StringRef Field : optimizerValueFields()) {
      std::string Why = checkOptimizerField(*Optimizer, Field);
      if (!Why.empty())
        return Fail(Field, Why);
    }
  }
  return Error::success();
}

int64_t DeploymentConfig::globalBatchClones() const {
  if (Strat == Strategy::Mirrored)
    return int64_t(NumClones) * NumReplicas;
  return NumClones;
}

Expected<int64_t> DeploymentConfig::perCloneBatch(int64_t Default) const {
  int64_t B = BatchPerClone ? BatchPerClone
              : GlobalBatch ? GlobalBatch / globalBatchClones()
              : Default > 0 ? Default
                            : 0;
  if (!B)
    return makeError(DefaultOrigin,
                     "no batch size: give --batch-per-clone or --global-batch "
                     "(or training { batch_size } in the graph file)");
  // A step's batch is a tensor dimension (the inputs'), held to the
  // largest dimension a shape may have.
  constexpr int64_t MaxBatch = int64_t(1) << 40;
  const int64_t Clones = globalBatchClones();
  if (B > MaxBatch / Clones)
    return makeError(originOf({"batch_per_clone", "global_batch"}),
                     "a batch of " + Twine(B) + " per clone" +
                         (BatchPerClone || GlobalBatch
                              ? ""
                              : " (the graph's training { batch_size })") +
                         " over " + plural(Clones, "clone") +
                         " is above the limit of 2^40 examples a step");
  return B;
}

std::string DeploymentConfig::workerDevice() const {
  return NumPsTasks > 0 ? "/job:" + WorkerJobName : "";
}

std::string DeploymentConfig::psDevice() const {
  return NumPsTasks > 0 ? "/job:" + PsJobName : "";
}

/// Parses a device string built from validated settings.
static DeviceSpec mustParse(const std::string &S) {
  auto D = DeviceSpec::parse(S);
  if (!D) {
    consumeError(D.takeError());
    return DeviceSpec();
  }
  return *D;
}

Expected<DeviceSpec> DeploymentConfig::cloneDevice(int CloneIndex) const {
  if (CloneIndex >= NumClones || CloneIndex < 0)
    return makeError(originOf("clone_index"),
                     "clone_index must be less than num_clones");
  std::string D = workerDevice();
  if (CloneOnCPU)
    D += "/device:CPU:0";
  else
    D += "/device:GPU:" + std::to_string(CloneIndex);
  return mustParse(D);
}

Expected<std::string> DeploymentConfig::cloneScope(int CloneIndex) const {
  if (CloneIndex >= NumClones || CloneIndex < 0)
    return makeError(originOf("clone_index"),
                     "clone_index must be less than num_clones");
  if (NumClones > 1)
    return "clone_" + std::to_string(CloneIndex);
  return std::string();
}

DeviceSpec DeploymentConfig::optimizerDevice() const {
  return mustParse(workerDevice() + "/device:CPU:0");
}

DeviceSpec DeploymentConfig::inputsDevice() const {
  return mustParse(workerDevice() + "/device:CPU:0");
}

DeviceSpec DeploymentConfig::variablesDeviceSpec() const {
  return mustParse(psDevice() + "/device:CPU:0");
}

OptimizerSettings DeploymentConfig::resolveOptimizer(
    const std::optional<OptimizerSettings> &FromGraph) const {
  OptimizerSettings O = FromGraph.value_or(OptimizerSettings());
  if (!Optimizer)
    return O;
  const OptimizerSettings &D = *Optimizer;
  auto Set = [&](StringRef F) { return OptimizerFieldsSet.lookup(F); };
  if (Set("kind"))
    O.K = D.K;
  if (Set("learning_rate"))
    O.LearningRate = D.LearningRate;
  if (Set("momentum"))
    O.Momentum = D.Momentum;
  if (Set("nesterov"))
    O.Nesterov = D.Nesterov;
  if (Set("beta1"))
    O.Beta1 = D.Beta1;
  if (Set("beta2"))
    O.Beta2 = D.Beta2;
  if (Set("epsilon"))
    O.Epsilon = D.Epsilon;
  if (Set("decay_steps"))
    O.DecaySteps = D.DecaySteps;
  if (Set("decay_rate"))
    O.DecayRate = D.DecayRate;
  if (Set("rho"))
    O.Rho = D.Rho;
  if (Set("initial_accumulator_value"))
    O.InitialAccumulator = D.InitialAccumulator;
  if (Set("decay_type"))
    O.DecayType = D.DecayType;
  if (Set("staircase"))
    O.Staircase = D.Staircase;
  if (Set("centered"))
    O.Centered = D.Centered;
  if (Set("end_learning_rate"))
    O.EndLearningRate = D.EndLearningRate;
  if (Set("power"))
    O.Power = D.Power;
  if (Set("clip_gradient_norm"))
    O.ClipNorm = D.ClipNorm;
  if (Set("clip_global_norm"))
    O.ClipGlobalNorm = D.ClipGlobalNorm;
  return O;
}

Cluster DeploymentConfig::cluster() const {
  Cluster C;
  C.WorkerJob = WorkerJobName.empty() ? "worker" : WorkerJobName;
  C.PsJob = PsJobName;
  C.NumWorkers = NumReplicas;
  C.NumPs = NumPsTasks;
  C.GpusPerWorker =
      GpusPerWorker >= 0 ? GpusPerWorker : (CloneOnCPU ? 0 : NumClones);
  C.WorkerTask = ReplicaId;
  return C;
}

DeviceEntry *mdplan::createSpecEntry(Graph &G, const DeviceSpec &D,
                                     StringRef Origin) {
  DeviceEntry E;
  E.K = DeviceEntry::Kind::Spec;
  E.Spec = D;
  E.Origin = Origin.str();
  return G.createEntry(std::move(E));
}

DeviceEntry *mdplan::createVariablesEntry(Graph &G, const DeploymentConfig &C,
                                          StringRef Origin) {
  if (C.NumPsTasks == 0)
    return createSpecEntry(G, C.variablesDeviceSpec(), Origin);
  DeviceEntry E;
  E.K = DeviceEntry::Kind::Function;
  E.Fn = G.addFunction(
      std::make_unique<PsRoundRobin>(C.variablesDeviceSpec(), C.NumPsTasks,
                                     std::vector<std::string>{"Variable"}));
  E.Origin = Origin.str();
  return G.createEntry(std::move(E));
}
