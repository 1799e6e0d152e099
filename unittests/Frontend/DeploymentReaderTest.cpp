//===- DeploymentReaderTest.cpp - Deployment config files -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// readDeploymentBuffer: the fields it sets, where each came from (for
// validation errors), and its own errors with file:line:col.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

std::string printed(llvm::Error E) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  printErrors(std::move(E), OS);
  OS.flush();
  if (!S.empty() && S.back() == '\n')
    S.pop_back();
  return S;
}

TEST(DeploymentReaderTest, ReadsEveryField) {
  DeploymentConfig C;
  llvm::Error E = readDeploymentBuffer(R"(
num_clones: 4
clone_on_cpu: true
replica_id: 1
num_replicas: 3
num_ps_tasks: 2
worker_job_name: "trainer"
ps_job_name: "params"
strategy: "ps"
global_batch: 64
gpus_per_worker: 8
soft_placement: true
colocate_gradients: true
first_bucket_bytes: 1024
bucket_bytes: 4096
optimizer { kind: MOMENTUM learning_rate: 0.1 momentum: 0.5 }
summarize_gradients: true
)",
                                       "d.cfg", C);
  ASSERT_FALSE(bool(E)) << errorMessage(std::move(E));
  EXPECT_EQ(C.NumClones, 4);
  EXPECT_TRUE(C.CloneOnCPU);
  EXPECT_EQ(C.ReplicaId, 1);
  EXPECT_EQ(C.NumReplicas, 3);
  EXPECT_EQ(C.NumPsTasks, 2);
  EXPECT_EQ(C.WorkerJobName, "trainer");
  EXPECT_EQ(C.PsJobName, "params");
  EXPECT_EQ(C.Strat, Strategy::ParameterServer);
  EXPECT_EQ(C.GlobalBatch, 64);
  EXPECT_EQ(C.GpusPerWorker, 8);
  EXPECT_TRUE(C.SoftPlacement);
  EXPECT_TRUE(C.ColocateGradients);
  EXPECT_TRUE(C.SummarizeGradients);
  EXPECT_EQ(C.FirstBucketBytes, 1024);
  EXPECT_EQ(C.BucketBytes, 4096);
  ASSERT_TRUE(C.Optimizer.has_value());
  EXPECT_EQ(C.Optimizer->K, OptimizerSettings::Kind::Momentum);
  EXPECT_EQ(C.Optimizer->LearningRate, 0.1);
  EXPECT_EQ(C.Optimizer->Momentum, 0.5);
  EXPECT_TRUE(C.OptimizerFieldsSet.lookup("learning_rate"));
  EXPECT_FALSE(C.OptimizerFieldsSet.lookup("beta1"));
  EXPECT_EQ(errorMessage(C.validate()), "");
  EXPECT_EQ(C.originOf("num_clones").str(), "d.cfg:2:1");
  EXPECT_EQ(C.originOf("ps_job_name").str(), "d.cfg:8:1");
  // Optimizer fields are located at the field itself, inside the block.
  EXPECT_EQ(C.originOf("learning_rate").str(), "d.cfg:16:28");
  EXPECT_EQ(C.originOf("momentum").str(), "d.cfg:16:47");
  EXPECT_TRUE(C.OptimizerFieldsSet.lookup("kind"));
}

// An optimizer block without a kind leaves the kind alone (proto3 optional):
// it does not turn the graph file's Adam into SGD.
TEST(DeploymentReaderTest, OptimizerWithoutKind) {
  DeploymentConfig C;
  llvm::Error E =
      readDeploymentBuffer("optimizer { learning_rate: 0.01 }\n", "d.cfg", C);
  ASSERT_FALSE(bool(E)) << errorMessage(std::move(E));
  EXPECT_FALSE(C.OptimizerFieldsSet.lookup("kind"));
  EXPECT_TRUE(C.OptimizerFieldsSet.lookup("learning_rate"));
  OptimizerSettings Graph;
  Graph.K = OptimizerSettings::Kind::Adam;
  OptimizerSettings O = C.resolveOptimizer(Graph);
  EXPECT_EQ(O.K, OptimizerSettings::Kind::Adam);
  EXPECT_EQ(O.LearningRate, 0.01);
}

TEST(DeploymentReaderTest, OptimizerValueErrors) {
  auto Err = [](llvm::StringRef Text) {
    DeploymentConfig C;
    if (llvm::Error E = readDeploymentBuffer(Text, "d.cfg", C))
      return printed(std::move(E));
    return printed(C.validate());
  };
  EXPECT_EQ(Err("optimizer {\n  learning_rate: 0\n}\n"),
            "d.cfg:2:3: error: learning rate must be positive");
  EXPECT_EQ(Err("optimizer { kind: MOMENTUM momentum: -0.5 }\n"),
            "d.cfg:1:28: error: momentum must not be negative");
  EXPECT_EQ(Err("optimizer { beta1: 1 }\n"),
            "d.cfg:1:13: error: beta1 must be in [0, 1)");
  EXPECT_EQ(Err("optimizer { beta2: -0.1 }\n"),
            "d.cfg:1:13: error: beta2 must be in [0, 1)");
  EXPECT_EQ(Err("optimizer { epsilon: 0 }\n"),
            "d.cfg:1:13: error: epsilon must be positive");
  EXPECT_EQ(Err("optimizer { decay_steps: -1 }\n"),
            "d.cfg:1:13: error: decay_steps must not be negative");
  EXPECT_EQ(Err("optimizer { decay_rate: 0 }\n"),
            "d.cfg:1:13: error: decay_rate must be positive");
  EXPECT_EQ(Err("gpus_per_worker: -1\n"),
            "d.cfg:1:1: error: gpus_per_worker must not be negative, got -1");
}

// A check about a setting left at its default is located at the setting
// that was given and made it fail.
TEST(DeploymentReaderTest, ErrorsPointAtTheFieldSet) {
  auto Err = [](llvm::StringRef Text) {
    DeploymentConfig C;
    C.DefaultOrigin = SourceLoc{internFileName("<command line>"), 0, 0};
    if (llvm::Error E = readDeploymentBuffer(Text, "d.cfg", C))
      return printed(std::move(E));
    return printed(C.validate());
  };
  EXPECT_EQ(Err("\nnum_replicas: 2\n"),
            "d.cfg:2:1: error: when using replicas num_ps_tasks must be "
            "positive");
  EXPECT_EQ(Err("num_ps_tasks: 1\nps_job_name: \"worker\"\n"),
            "d.cfg:2:1: error: worker_job_name and ps_job_name are both "
            "'worker'");
  EXPECT_EQ(Err("num_ps_tasks: 1\nworker_job_name: \"ps\"\n"),
            "d.cfg:2:1: error: worker_job_name and ps_job_name are both 'ps'");
  EXPECT_EQ(Err("num_replicas: 2\nnum_ps_tasks: 1\nreplica_id: 0\n"
                "strategy: \"mirrored\"\n"),
            "d.cfg:4:1: error: the mirrored strategy uses no parameter "
            "servers; num_ps_tasks must be 0");
  EXPECT_EQ(Err("num_clones: 3\nglobal_batch: 8\n"),
            "d.cfg:2:1: error: global batch of 8 cannot be split evenly over "
            "3 clones");
}

TEST(DeploymentReaderTest, UnsetFieldsKeepDefaults) {
  DeploymentConfig C;
  ASSERT_FALSE(
      bool(readDeploymentBuffer("strategy: \"mirrored\"\n", "d.cfg", C)));
  EXPECT_EQ(C.Strat, Strategy::Mirrored);
  EXPECT_EQ(C.NumClones, 1);
  EXPECT_EQ(C.WorkerJobName, "worker");
  EXPECT_EQ(C.Origins.count("num_clones"), 0u);
}

TEST(DeploymentReaderTest, ValidationErrorsPointIntoTheFile) {
  DeploymentConfig C;
  C.DefaultOrigin = SourceLoc{internFileName("<command line>"), 0, 0};
  ASSERT_FALSE(bool(readDeploymentBuffer("num_replicas: 2\n"
                                         "num_ps_tasks: 0\n",
                                         "d.cfg", C)));
  EXPECT_EQ(printed(C.validate()),
            "d.cfg:2:1: error: when using replicas num_ps_tasks must be "
            "positive");

  DeploymentConfig R;
  ASSERT_FALSE(bool(readDeploymentBuffer("num_ps_tasks: 1\n"
                                         "  replica_id: 3\n",
                                         "d.cfg", R)));
  EXPECT_EQ(printed(R.validate()),
            "d.cfg:2:3: error: replica_id must be less than num_replicas");
}

TEST(DeploymentReaderTest, UnknownValueMessage) {
  // The wording of a config file's unknown strategy, which mdplan's enum
  // flags share (test/mdplan/flag-values.test).
  EXPECT_EQ(unknownValueMessage("strategy", "x", {"ps", "mirrored"}),
            "unknown strategy 'x' (use 'ps' or 'mirrored')");
  EXPECT_EQ(unknownValueMessage("optimizer", "", {"sgd", "momentum", "adam"}),
            "unknown optimizer '' (use 'sgd', 'momentum' or 'adam')");
  EXPECT_EQ(unknownValueMessage("kind", "b", {"a"}),
            "unknown kind 'b' (use 'a')");
}

TEST(DeploymentReaderTest, Errors) {
  struct Case {
    const char *Text;
    const char *Error;
  } Cases[] = {
      {"num_clones: 2\nstrategy: \"allreduce\"\n",
       "d.cfg:2:1: error: unknown strategy 'allreduce' (use 'ps' or "
       "'mirrored')"},
      {"batch_per_clone: 0\n",
       "d.cfg:1:1: error: batch size must be positive, got 0"},
      {"\n global_batch: -5\n",
       "d.cfg:2:2: error: batch size must be positive, got -5"},
      {"num_clones: two\n",
       "d.cfg:1:13: error: syntax error: expected integer, got: two"},
      {"num_clone: 2\n",
       "d.cfg:1:10: error: syntax error: message type "
       "\"mdplan.desc.Deployment\" has no field named \"num_clone\""},
      {"num_clones: 99999999999\n",
       "d.cfg:1:13: error: syntax error: integer out of range "
       "(99999999999)"},
  };
  for (const Case &K : Cases) {
    DeploymentConfig C;
    EXPECT_EQ(printed(readDeploymentBuffer(K.Text, "d.cfg", C)), K.Error)
        << K.Text;
  }
}

TEST(DeploymentReaderTest, MissingFile) {
  DeploymentConfig C;
  EXPECT_EQ(printed(readDeploymentFile("/nonexistent/d.cfg", C)),
            "/nonexistent/d.cfg: error: cannot read file: No such file or "
            "directory");
}

} // namespace
