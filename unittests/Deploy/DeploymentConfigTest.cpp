//===- DeploymentConfigTest.cpp - model_deploy's DeploymentConfig ---------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// semantics.md section 3 and the DeploymentConfig cases of section 5
// (model_deploy_test.py): role devices, clone scopes, the variables device
// with and without ps tasks, the cluster, and every validation error in
// model_deploy's order.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Deploy/DeviceFunctions.h"
#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/OpRegistry.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>

using namespace mdplan;

namespace {

std::string cloneDevice(const DeploymentConfig &C, int I) {
  auto D = C.cloneDevice(I);
  if (!D)
    return "<error: " + errorMessage(D.takeError()) + ">";
  return D->toString();
}

std::string cloneScope(const DeploymentConfig &C, int I) {
  auto S = C.cloneScope(I);
  if (!S)
    return "<error: " + errorMessage(S.takeError()) + ">";
  return *S;
}

/// The validation message, "" when valid.
std::string validate(const DeploymentConfig &C) {
  return errorMessage(C.validate());
}

/// Applies the variables device of \p C to a sequence of nodes the way
/// model_deploy's `with tf.device(config.variables_device())` does, and
/// returns each node's device.
std::vector<std::string> variablesDevice(const DeploymentConfig &C,
                                         llvm::ArrayRef<OpKind> Ops) {
  Graph G;
  const DeviceEntry *E = createVariablesEntry(G, C, "variables_device");
  const DeviceStack *S = G.pushStack(G.getRootStack(), E);
  std::vector<std::string> R;
  unsigned I = 0;
  std::vector<Node *> Nodes;
  for (OpKind K : Ops) {
    Node *N = G.createNode("n" + std::to_string(I++), opDef(K));
    N->setStack(S);
    Nodes.push_back(N);
  }
  for (Node *N : Nodes)
    R.push_back(walkDeviceStack(*N).toString());
  return R;
}

//===----------------------------------------------------------------------===//
// model_deploy_test.py: DeploymentConfigTest
//===----------------------------------------------------------------------===//

TEST(DeploymentConfigTest, Defaults) {
  DeploymentConfig C;
  EXPECT_EQ(C.NumClones, 1);
  EXPECT_FALSE(C.CloneOnCPU);
  EXPECT_EQ(C.ReplicaId, 0);
  EXPECT_EQ(C.NumReplicas, 1);
  EXPECT_EQ(C.NumPsTasks, 0);
  EXPECT_EQ(C.WorkerJobName, "worker");
  EXPECT_EQ(C.PsJobName, "ps");
  EXPECT_EQ(validate(C), "");

  EXPECT_EQ(cloneDevice(C, 0), "/device:GPU:0");
  EXPECT_EQ(cloneScope(C, 0), "");
  EXPECT_EQ(C.optimizerDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.variablesDeviceSpec().toString(), "/device:CPU:0");
  EXPECT_FALSE(C.hasCachingDevice());
  EXPECT_EQ(C.workerDevice(), "");
  EXPECT_EQ(C.psDevice(), "");
}

TEST(DeploymentConfigTest, CloneOnCpu) {
  DeploymentConfig C;
  C.CloneOnCPU = true;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/device:CPU:0");
  EXPECT_EQ(cloneScope(C, 0), "");
  EXPECT_EQ(C.optimizerDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.variablesDeviceSpec().toString(), "/device:CPU:0");
  EXPECT_FALSE(C.hasCachingDevice());
}

TEST(DeploymentConfigTest, MultiGpu) {
  DeploymentConfig C;
  C.NumClones = 2;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/device:GPU:0");
  EXPECT_EQ(cloneDevice(C, 1), "/device:GPU:1");
  EXPECT_EQ(cloneScope(C, 0), "clone_0");
  EXPECT_EQ(cloneScope(C, 1), "clone_1");
  EXPECT_EQ(C.optimizerDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/device:CPU:0");
  EXPECT_EQ(C.variablesDeviceSpec().toString(), "/device:CPU:0");
  EXPECT_FALSE(C.hasCachingDevice());
}

TEST(DeploymentConfigTest, MultiCloneOnCpu) {
  DeploymentConfig C;
  C.NumClones = 2;
  C.CloneOnCPU = true;
  EXPECT_EQ(cloneDevice(C, 0), "/device:CPU:0");
  EXPECT_EQ(cloneDevice(C, 1), "/device:CPU:0");
  EXPECT_EQ(cloneScope(C, 1), "clone_1");
}

TEST(DeploymentConfigTest, PsDevice) {
  DeploymentConfig C;
  C.NumPsTasks = 1;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:worker/device:GPU:0");
  EXPECT_EQ(cloneScope(C, 0), "");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.workerDevice(), "/job:worker");
  EXPECT_EQ(C.psDevice(), "/job:ps");
  EXPECT_TRUE(C.hasCachingDevice());
  // with tf.device(variables_device()): a = Variable, b = Variable,
  // c = no_op, d = variable. A non-variable op keeps no device.
  EXPECT_EQ(variablesDevice(C, {OpKind::Variable, OpKind::Variable,
                                OpKind::NoOp, OpKind::Variable}),
            (std::vector<std::string>{"/job:ps/task:0/device:CPU:0",
                                      "/job:ps/task:0/device:CPU:0", "",
                                      "/job:ps/task:0/device:CPU:0"}));
}

TEST(DeploymentConfigTest, MultiplePsDevices) {
  DeploymentConfig C;
  C.NumPsTasks = 2;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:worker/device:GPU:0");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/job:worker/device:CPU:0");
  // a, b, (c: no_op), d -> tasks 0, 1, 0: the round robin wraps and skips
  // the non-variable op.
  EXPECT_EQ(variablesDevice(C, {OpKind::Variable, OpKind::Variable,
                                OpKind::NoOp, OpKind::Variable}),
            (std::vector<std::string>{"/job:ps/task:0/device:CPU:0",
                                      "/job:ps/task:1/device:CPU:0", "",
                                      "/job:ps/task:0/device:CPU:0"}));
}

TEST(DeploymentConfigTest, VariablesEntryWithoutPsIsASpec) {
  DeploymentConfig C;
  Graph G;
  const DeviceEntry *E = createVariablesEntry(G, C, "variables_device");
  EXPECT_EQ(E->K, DeviceEntry::Kind::Spec);
  EXPECT_EQ(E->Spec.toString(), "/device:CPU:0");
  EXPECT_EQ(E->Origin, "variables_device");
  // A spec applies to every op in the scope, variable or not.
  EXPECT_EQ(variablesDevice(C, {OpKind::Variable, OpKind::NoOp}),
            (std::vector<std::string>{"/device:CPU:0", "/device:CPU:0"}));
}

TEST(DeploymentConfigTest, VariablesEntryWithPsIsAFreshChooser) {
  DeploymentConfig C;
  C.NumPsTasks = 2;
  Graph G;
  const DeviceEntry *E1 = createVariablesEntry(G, C, "variables_device");
  const DeviceEntry *E2 = createVariablesEntry(G, C, "variables_device");
  ASSERT_EQ(E1->K, DeviceEntry::Kind::Function);
  EXPECT_EQ(E1->Fn->getName(), "ps-round-robin");
  EXPECT_NE(E1->Fn, E2->Fn);
  EXPECT_EQ(E1->Fn->describe(),
            "ps-round-robin(ps_device=\"/job:ps/device:CPU:0\", "
            "ps_ops=[\"Variable\"], tasks=2)");
}

TEST(DeploymentConfigTest, MultiGpuWithPs) {
  DeploymentConfig C;
  C.NumClones = 2;
  C.NumPsTasks = 1;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:worker/device:GPU:0");
  EXPECT_EQ(cloneDevice(C, 1), "/job:worker/device:GPU:1");
  EXPECT_EQ(cloneScope(C, 0), "clone_0");
  EXPECT_EQ(cloneScope(C, 1), "clone_1");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/job:worker/device:CPU:0");
}

TEST(DeploymentConfigTest, ReplicasWithPs) {
  DeploymentConfig C;
  C.NumReplicas = 2;
  C.NumPsTasks = 2;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:worker/device:GPU:0");
  EXPECT_EQ(cloneScope(C, 0), "");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/job:worker/device:CPU:0");
}

TEST(DeploymentConfigTest, ReplicasWithPsAndClones) {
  DeploymentConfig C;
  C.NumReplicas = 2;
  C.NumPsTasks = 2;
  C.NumClones = 2;
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:worker/device:GPU:0");
  EXPECT_EQ(cloneDevice(C, 1), "/job:worker/device:GPU:1");
  EXPECT_EQ(cloneScope(C, 0), "clone_0");
  EXPECT_EQ(cloneScope(C, 1), "clone_1");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(C.inputsDevice().toString(), "/job:worker/device:CPU:0");
}

TEST(DeploymentConfigTest, CustomJobNames) {
  DeploymentConfig C;
  C.NumPsTasks = 1;
  C.WorkerJobName = "trainer";
  C.PsJobName = "params";
  EXPECT_EQ(validate(C), "");
  EXPECT_EQ(cloneDevice(C, 0), "/job:trainer/device:GPU:0");
  EXPECT_EQ(C.optimizerDevice().toString(), "/job:trainer/device:CPU:0");
  EXPECT_EQ(variablesDevice(C, {OpKind::Variable}),
            (std::vector<std::string>{"/job:params/task:0/device:CPU:0"}));
  Cluster Cl = C.cluster();
  EXPECT_EQ(Cl.WorkerJob, "trainer");
  EXPECT_EQ(Cl.PsJob, "params");
}

TEST(DeploymentConfigTest, CloneIndexOutOfRange) {
  DeploymentConfig C;
  C.NumClones = 2;
  EXPECT_EQ(cloneDevice(C, 2),
            "<error: clone_index must be less than num_clones>");
  EXPECT_EQ(cloneScope(C, 2),
            "<error: clone_index must be less than num_clones>");
  EXPECT_EQ(cloneDevice(C, -1),
            "<error: clone_index must be less than num_clones>");
}

//===----------------------------------------------------------------------===//
// The cluster
//===----------------------------------------------------------------------===//

TEST(DeploymentConfigTest, Cluster) {
  DeploymentConfig C;
  C.NumClones = 3;
  Cluster Cl = C.cluster();
  EXPECT_EQ(Cl.WorkerJob, "worker");
  EXPECT_EQ(Cl.NumWorkers, 1);
  EXPECT_EQ(Cl.NumPs, 0);
  EXPECT_EQ(Cl.GpusPerWorker, 3); // one per clone by default
  EXPECT_EQ(Cl.WorkerTask, 0);

  C.CloneOnCPU = true;
  EXPECT_EQ(C.cluster().GpusPerWorker, 0);
  C.GpusPerWorker = 8;
  EXPECT_EQ(C.cluster().GpusPerWorker, 8);

  DeploymentConfig R;
  R.NumReplicas = 4;
  R.NumPsTasks = 2;
  R.ReplicaId = 3;
  Cl = R.cluster();
  EXPECT_EQ(Cl.NumWorkers, 4);
  EXPECT_EQ(Cl.NumPs, 2);
  EXPECT_EQ(Cl.WorkerTask, 3);
  // The replica's worker task completes devices without a task.
  EXPECT_EQ(Cl.complete(DeviceSpec()).toString(),
            "/job:worker/replica:0/task:3/device:CPU:0");
  EXPECT_EQ(Cl.complete(*R.cloneDevice(0)).toString(),
            "/job:worker/replica:0/task:3/device:GPU:0");
  EXPECT_EQ(Cl.complete(*DeviceSpec::parse("/job:ps")).toString(),
            "/job:ps/replica:0/task:0/device:CPU:0");
}

TEST(DeploymentConfigTest, PerCloneBatch) {
  DeploymentConfig C;
  C.NumClones = 4;
  auto B = C.perCloneBatch(16);
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(*B, 16);
  C.GlobalBatch = 32;
  B = C.perCloneBatch(16);
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(*B, 8);
  C.GlobalBatch = 0;
  C.BatchPerClone = 5;
  B = C.perCloneBatch(16);
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(*B, 5);
  C.BatchPerClone = 0;
  EXPECT_EQ(errorMessage(C.perCloneBatch(0).takeError()),
            "no batch size: give --batch-per-clone or --global-batch (or "
            "training { batch_size } in the graph file)");
}

TEST(DeploymentConfigTest, GlobalBatchSpansEveryMirroredWorker) {
  // Mirrored: split over the clones of every worker.
  DeploymentConfig M;
  M.Strat = Strategy::Mirrored;
  M.NumClones = 2;
  M.NumReplicas = 4;
  M.GlobalBatch = 64;
  EXPECT_EQ(M.globalBatchClones(), 8);
  auto B = M.perCloneBatch(16);
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(*B, 8);
  EXPECT_EQ(validate(M), "");
  M.GlobalBatch = 12;
  EXPECT_EQ(validate(M), "global batch of 12 cannot be split evenly over 8 "
                         "clones (2 per worker on 4 workers)");
  M.NumClones = 1;
  M.NumReplicas = 2;
  M.GlobalBatch = 5;
  EXPECT_EQ(validate(M), "global batch of 5 cannot be split evenly over 2 "
                         "clones (1 per worker on 2 workers)");
  // One worker: the message of a single process.
  M.NumClones = 2;
  M.NumReplicas = 1;
  EXPECT_EQ(M.globalBatchClones(), 2);
  EXPECT_EQ(validate(M),
            "global batch of 5 cannot be split evenly over 2 clones");

  // ps: the global batch of this replica.
  DeploymentConfig P;
  P.NumClones = 2;
  P.NumReplicas = 4;
  P.NumPsTasks = 1;
  P.GlobalBatch = 6;
  EXPECT_EQ(P.globalBatchClones(), 2);
  B = P.perCloneBatch(16);
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(*B, 3);
  EXPECT_EQ(validate(P), "");
}

//===----------------------------------------------------------------------===//
// Validation: model_deploy's checks, in its order
//===----------------------------------------------------------------------===//

TEST(DeploymentConfigTest, ReplicasNeedPsTasks) {
  DeploymentConfig C;
  C.NumReplicas = 2;
  EXPECT_EQ(validate(C), "when using replicas num_ps_tasks must be positive");
  C.NumPsTasks = -1;
  EXPECT_EQ(validate(C), "when using replicas num_ps_tasks must be positive");
  C.NumPsTasks = 1;
  EXPECT_EQ(validate(C), "");
}

TEST(DeploymentConfigTest, WorkerJobNameNeeded) {
  DeploymentConfig C;
  C.NumPsTasks = 1;
  C.WorkerJobName = "";
  EXPECT_EQ(validate(C), "must specify worker_job_name when using replicas");
  DeploymentConfig R;
  R.NumReplicas = 2;
  R.NumPsTasks = 1;
  R.WorkerJobName = "";
  EXPECT_EQ(validate(R), "must specify worker_job_name when using replicas");
  // Without replicas and ps tasks the job names are not used.
  DeploymentConfig L;
  L.WorkerJobName = "";
  L.PsJobName = "";
  EXPECT_EQ(validate(L), "");
}

TEST(DeploymentConfigTest, PsJobNameNeeded) {
  DeploymentConfig C;
  C.NumPsTasks = 1;
  C.PsJobName = "";
  EXPECT_EQ(validate(C),
            "must specify ps_job_name when using parameter server");
}

TEST(DeploymentConfigTest, ReplicaIdInRange) {
  DeploymentConfig C;
  C.ReplicaId = 1;
  EXPECT_EQ(validate(C), "replica_id must be less than num_replicas");
  C.NumReplicas = 2;
  C.NumPsTasks = 1;
  EXPECT_EQ(validate(C), "");
  C.ReplicaId = 2;
  EXPECT_EQ(validate(C), "replica_id must be less than num_replicas");
}

TEST(DeploymentConfigTest, ValidationOrder) {
  // Every check fails; the first in model_deploy's order is reported.
  DeploymentConfig C;
  C.NumReplicas = 2;
  C.NumPsTasks = 0;
  C.WorkerJobName = "";
  C.PsJobName = "";
  C.ReplicaId = 5;
  C.NumClones = 0;
  EXPECT_EQ(validate(C), "when using replicas num_ps_tasks must be positive");
  C.NumPsTasks = 1;
  EXPECT_EQ(validate(C), "must specify worker_job_name when using replicas");
  C.WorkerJobName = "worker";
  EXPECT_EQ(validate(C),
            "must specify ps_job_name when using parameter server");
  C.PsJobName = "ps";
  EXPECT_EQ(validate(C), "replica_id must be less than num_replicas");
  C.ReplicaId = 1;
  // Then mdplan's own checks.
  EXPECT_EQ(validate(C), "num_clones must be at least 1, got 0");
  C.NumClones = 1;
  EXPECT_EQ(validate(C), "");
}

TEST(DeploymentConfigTest, NoReplicasBeforeReplicaIdInRange) {
  // With num_replicas < 1 every replica_id is out of range; the count is
  // what is wrong.
  DeploymentConfig C;
  C.NumReplicas = 0;
  EXPECT_EQ(validate(C), "num_replicas must be at least 1, got 0");
  C.ReplicaId = 2;
  EXPECT_EQ(validate(C), "num_replicas must be at least 1, got 0");
  C.NumReplicas = -1;
  EXPECT_EQ(validate(C), "num_replicas must be at least 1, got -1");
}

TEST(DeploymentConfigTest, ModelDeployChecksBeforeMdplanChecks) {
  DeploymentConfig C;
  C.ReplicaId = 1;
  C.NumClones = 0;
  C.GlobalBatch = 7;
  EXPECT_EQ(validate(C), "replica_id must be less than num_replicas");
}

//===----------------------------------------------------------------------===//
// Validation: mdplan's own checks
//===----------------------------------------------------------------------===//

TEST(DeploymentConfigTest, MdplanChecks) {
  struct Case {
    std::function<void(DeploymentConfig &)> Set;
    const char *Message;
  } Cases[] = {
      {[](DeploymentConfig &C) { C.NumClones = 0; },
       "num_clones must be at least 1, got 0"},
      {[](DeploymentConfig &C) { C.NumClones = -3; },
       "num_clones must be at least 1, got -3"},
      {[](DeploymentConfig &C) { C.NumPsTasks = -1; },
       "num_ps_tasks must not be negative, got -1"},
      {[](DeploymentConfig &C) { C.ReplicaId = -1; },
       "replica_id must not be negative, got -1"},
      {[](DeploymentConfig &C) { C.WorkerJobName = "a/b"; },
       "invalid worker_job_name 'a/b': use letters, digits, '_', '-' and "
       "'.'"},
      {[](DeploymentConfig &C) { C.PsJobName = "p s"; },
       "invalid ps_job_name 'p s': use letters, digits, '_', '-' and '.'"},
      {[](DeploymentConfig &C) {
         C.NumPsTasks = 1;
         C.PsJobName = "worker";
       },
       "worker_job_name and ps_job_name are both 'worker'"},
      {[](DeploymentConfig &C) {
         C.Strat = Strategy::Mirrored;
         C.NumPsTasks = 1;
       },
       "the mirrored strategy uses no parameter servers; num_ps_tasks must "
       "be 0"},
      {[](DeploymentConfig &C) { C.GpusPerWorker = -2; },
       "gpus_per_worker must not be negative"},
      {[](DeploymentConfig &C) {
         C.NumClones = 3;
         C.GpusPerWorker = 2;
       },
       "3 clones on GPUs need 3 GPUs per worker, but gpus_per_worker is 2 "
       "(use clone_on_cpu or soft placement)"},
      {[](DeploymentConfig &C) {
         C.BatchPerClone = 4;
         C.GlobalBatch = 8;
       },
       "give the batch size per clone or global, not both"},
      {[](DeploymentConfig &C) { C.BatchPerClone = -4; },
       "batch size must be positive, got -4"},
      {[](DeploymentConfig &C) { C.GlobalBatch = -8; },
       "batch size must be positive, got -8"},
      {[](DeploymentConfig &C) {
         C.NumClones = 2;
         C.GlobalBatch = 9;
       },
       "global batch of 9 cannot be split evenly over 2 clones"},
      {[](DeploymentConfig &C) { C.BucketBytes = -1; },
       "bucket sizes must not be negative"},
      {[](DeploymentConfig &C) { C.FirstBucketBytes = -1; },
       "bucket sizes must not be negative"},
      {[](DeploymentConfig &C) {
         C.Optimizer = OptimizerSettings();
         C.Optimizer->LearningRate = 0;
       },
       "learning rate must be positive"},
      {[](DeploymentConfig &C) {
         C.Optimizer = OptimizerSettings();
         C.Optimizer->LearningRate = HUGE_VAL;
       },
       "learning rate must be finite"},
      {[](DeploymentConfig &C) {
         C.Optimizer = OptimizerSettings();
         C.Optimizer->DecaySteps = -1;
       },
       "decay_steps must not be negative"},
  };
  for (const Case &K : Cases) {
    DeploymentConfig C;
    K.Set(C);
    EXPECT_EQ(validate(C), K.Message);
  }
}

TEST(DeploymentConfigTest, ValidConfigurations) {
  DeploymentConfig C;
  C.NumClones = 3;
  C.GpusPerWorker = 2;
  C.CloneOnCPU = true; // no GPUs needed
  EXPECT_EQ(validate(C), "");
  C.CloneOnCPU = false;
  C.SoftPlacement = true; // missing GPUs fall back to the CPU
  EXPECT_EQ(validate(C), "");

  DeploymentConfig M;
  M.Strat = Strategy::Mirrored;
  M.NumReplicas = 2; // mirrored replicas need no ps tasks
  EXPECT_EQ(validate(M), "");

  DeploymentConfig B;
  B.NumClones = 4;
  B.GlobalBatch = 32;
  EXPECT_EQ(validate(B), "");
  DeploymentConfig J;
  J.WorkerJobName = "my-worker.0_x";
  EXPECT_EQ(validate(J), "");
}

TEST(DeploymentConfigTest, ErrorsCarryTheOriginOfTheSetting) {
  DeploymentConfig C;
  C.DefaultOrigin = SourceLoc{internFileName("<command line>"), 0, 0};
  C.Origins["num_replicas"] = SourceLoc{internFileName("deploy.cfg"), 2, 1};
  C.Origins["replica_id"] = SourceLoc{internFileName("deploy.cfg"), 3, 1};
  C.NumReplicas = 2;
  C.NumPsTasks = 1;
  C.ReplicaId = 2;
  std::string S;
  llvm::raw_string_ostream OS(S);
  printErrors(C.validate(), OS);
  EXPECT_EQ(
      OS.str(),
      "deploy.cfg:3:1: error: replica_id must be less than num_replicas\n");

  // Settings without an origin of their own report the default origin.
  DeploymentConfig D;
  D.DefaultOrigin = SourceLoc{internFileName("<command line>"), 0, 0};
  D.NumClones = 0;
  std::string T;
  llvm::raw_string_ostream OT(T);
  printErrors(D.validate(), OT);
  EXPECT_EQ(OT.str(),
            "<command line>: error: num_clones must be at least 1, got 0\n");
}

TEST(DeploymentConfigTest, StrategyNames) {
  EXPECT_EQ(strategyName(Strategy::ParameterServer), "ps");
  EXPECT_EQ(strategyName(Strategy::Mirrored), "mirrored");
}

} // namespace
