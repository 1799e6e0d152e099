//===- DeploymentConfig.h - How a model is deployed -------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The deployment: TF-slim's DeploymentConfig (clones, replicas, ps tasks,
// job names) plus a strategy (model_deploy's parameter servers or
// MirroredStrategy's all-reduce), the batch size and the optimizer. It gives
// the role devices (clone, inputs, variables, optimizer) that become the
// outer entries of every node's device stack, and the cluster that placed
// devices must exist in.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_DEPLOY_DEPLOYMENTCONFIG_H
#define MDPLAN_DEPLOY_DEPLOYMENTCONFIG_H

#include "mdplan/IR/DeviceSpec.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mdplan {

/// How gradients are combined across clones.
enum class Strategy : uint8_t {
  /// model_deploy: variables shared (on the variables device or ps tasks),
  /// gradients summed with add_n on the optimizer device.
  ParameterServer,
  /// MirroredStrategy: a copy of every variable per clone device, gradients
  /// all-reduced, every copy updated identically.
  Mirrored,
};

llvm::StringRef strategyName(Strategy S);

/// The devices of the cluster a deployment runs on.
class Cluster {
public:
  std::string WorkerJob;
  std::string PsJob;
  int NumWorkers = 1;
  int NumPs = 0;
  int GpusPerWorker = 0;
  /// The worker task this plan is for.
  int WorkerTask = 0;

  /// True when the complete device \p D exists.
  bool contains(const DeviceSpec &D) const;
  /// Why \p D does not exist (for messages), "" when it does.
  std::string whyMissing(const DeviceSpec &D) const;
  /// Fills missing fields: the worker job and this replica's task, replica
  /// 0, CPU, index 0.
  DeviceSpec complete(const DeviceSpec &D) const;
  /// The host CPU of the task \p D belongs to.
  DeviceSpec hostOf(const DeviceSpec &D) const;
};

class DeploymentConfig {
public:
  /// The most clones per replica, replicas and ps tasks validate() accepts.
  static constexpr int MaxDeploymentCount = 65536;
  /// The most devices (clones times replicas) of one mirrored all-reduce.
  static constexpr int64_t MaxMirroredDevices = 1 << 20;

  // DeploymentConfig parameters (model_deploy's names and defaults).
  int NumClones = 1;
  bool CloneOnCPU = false;
  int ReplicaId = 0;
  int NumReplicas = 1;
  int NumPsTasks = 0;
  std::string WorkerJobName = "worker";
  std::string PsJobName = "ps";

  Strategy Strat = Strategy::ParameterServer;
  /// Batch size, at most one of them set (0 = not given): the batch of each
  /// clone, or the global batch of one step, split evenly over the clones of
  /// globalBatchClones(): with the ps strategy the clones of this replica,
  /// with the mirrored strategy every clone of every worker (num_clones x
  /// num_replicas).
  int64_t BatchPerClone = 0;
  int64_t GlobalBatch = 0;
  /// GPUs on each worker; -1 means as many as clones (none with
  /// clone_on_cpu).
  int GpusPerWorker = -1;
  /// Fall back to the host CPU for devices the cluster lacks.
  bool SoftPlacement = false;
  /// Place each gradient op with its forward op.
  bool ColocateGradients = false;
  /// model_deploy's summarize_gradients: sum-gradients adds, per variable
  /// with a gradient, histogram summaries of the summed gradient
  /// (`<var>:gradient`) and of its norm (`<var>:gradient_norm`).
  bool SummarizeGradients = false;
  /// Optimizer; when unset, the graph file's (or SGD, learning rate 0.01).
  std::optional<OptimizerSettings> Optimizer;
  /// Fields of Optimizer that were given explicitly (the rest may come from
  /// the graph file).
  llvm::StringMap<bool> OptimizerFieldsSet;
  /// All-reduce bucket sizes in bytes (mirrored); 0 = one per variable.
  int64_t FirstBucketBytes = 1 << 20;
  int64_t BucketBytes = 25 << 20;

  /// Where each setting was given (a flag or a config-file field), by
  /// model_deploy name; used to locate validation errors.
  llvm::StringMap<SourceLoc> Origins;
  /// Where settings without an origin of their own come from.
  SourceLoc DefaultOrigin;

  /// Checks everything, in model_deploy's order first, then mdplan's own
  /// checks. Messages are model_deploy's, lower-cased.
  llvm::Error validate() const;

  /// The number of clones the global batch is split over: num_clones, times
  /// num_replicas with the mirrored strategy (whose workers form one
  /// all-reduce group and so share one global batch).
  int64_t globalBatchClones() const;

  /// Per-clone batch size from the settings (BatchPerClone, or GlobalBatch
  /// / globalBatchClones()), or \p Default (the graph file's suggestion)
  /// when none is given; errors when neither is.
  llvm::Expected<int64_t> perCloneBatch(int64_t Default) const;

  // The role devices (model_deploy's methods).
  llvm::Expected<DeviceSpec> cloneDevice(int CloneIndex) const;
  llvm::Expected<std::string> cloneScope(int CloneIndex) const;
  DeviceSpec optimizerDevice() const;
  DeviceSpec inputsDevice() const;
  /// The variables device as a spec; with ps tasks the variables device is
  /// the ps-round-robin function instead (see createVariablesEntry).
  DeviceSpec variablesDeviceSpec() const;
  /// "/job:<worker>" with ps tasks, else "".
  std::string workerDevice() const;
  std::string psDevice() const;
  /// True when reads of a variable are cached on the reading device.
  bool hasCachingDevice() const { return NumPsTasks > 0; }

  /// The optimizer: the graph file's (or SGD at 0.01) with the fields this
  /// deployment sets on top.
  OptimizerSettings
  resolveOptimizer(const std::optional<OptimizerSettings> &FromGraph) const;

  /// The cluster implied by the settings.
  Cluster cluster() const;

  /// The location of setting \p Name for messages.
  SourceLoc originOf(llvm::StringRef Name) const;
  /// The location of the first of \p Names that was given (DefaultOrigin
  /// when none was).
  SourceLoc originOf(llvm::ArrayRef<llvm::StringRef> Names) const;
};

/// Creates the stack entry for the variables device in \p G: a spec without
/// ps tasks, else a fresh ps-round-robin function (one shared chooser per
/// call, as model_deploy's variables_device()).
DeviceEntry *createVariablesEntry(Graph &G, const DeploymentConfig &C,
                                  llvm::StringRef Origin);
/// Creates a spec entry.
DeviceEntry *createSpecEntry(Graph &G, const DeviceSpec &D,
                             llvm::StringRef Origin);

} // namespace mdplan

#endif // MDPLAN_DEPLOY_DEPLOYMENTCONFIG_H
