//===- ParameterServerTest.cpp - ps tasks in processes of their own -------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Workers and parameter servers of a ps-strategy plan, with thread groups
// standing in for the processes (mpirun runs them in test/mdrun): one
// worker trains exactly as the plan does in one process, two workers share
// the servers' variables, and the executor's and the server's checks of a
// cluster that does not fit the plans.
//
//===----------------------------------------------------------------------===//

#include "mdrt/ParameterServer.h"
#include "../runtime/process/ForwardingGroup.h"
#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Plan/Compiler.h"
#include "mdplan/Support/Diagnostic.h"
#include "mdrt/Trainer.h"

#include "gtest/gtest.h"

#include <sstream>
#include <thread>

using namespace mdplan;
using mdrt::ProcessGroup;
using mdrt::Status;

namespace {

/// Two layers and Adam: slots, global_step and, with two ps tasks, updates
/// on one task that wait for the other's global_step.
const char *const ModelText = R"(
name: "Two"
training {
  batch_size: 8
  optimizer { kind: ADAM learning_rate: 0.01 }
}
node { name: "x" op: "Input" data { feature: "x" shape: [3] } }
node { name: "y" op: "Input" data { feature: "y" shape: [1] } }
node { name: "w1" op: "Variable" variable { shape: [3, 4] } }
node { name: "b1" op: "Variable" variable { shape: [4] } }
node { name: "w2" op: "Variable" variable { shape: [4, 1] } }
node { name: "h" op: "MatMul" input: "x" input: "w1" }
node { name: "hb" op: "BiasAdd" input: "h" input: "b1" }
node { name: "r" op: "Relu" input: "hb" }
node { name: "o" op: "MatMul" input: "r" input: "w2" }
node { name: "s" op: "Sigmoid" input: "o" }
node { name: "l" op: "LogLoss" input: "s" input: "y" }
node { name: "loss" op: "Mean" input: "l" }
loss: "loss"
)";

/// The plan of replica \p Replica of \p Replicas with \p PsTasks ps tasks
/// (the mirrored strategy when \p Mirrored).
std::shared_ptr<const mdrt::PlanFile> plan(int Replica, int Replicas,
                                           int PsTasks, int Clones = 1,
                                           bool Mirrored = false) {
  auto G = readModelBuffer(ModelText, "two.mdg", {});
  EXPECT_TRUE(bool(G)) << errorMessage(G.takeError());
  if (!G)
    return nullptr;
  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  Config.NumClones = Clones;
  Config.NumReplicas = Replicas;
  Config.ReplicaId = Replica;
  Config.NumPsTasks = PsTasks;
  Config.Strat = Mirrored ? Strategy::Mirrored : Strategy::ParameterServer;
  EXPECT_FALSE(bool(Config.validate()));
  PassContext Ctx(Config);
  auto C = compileModel(std::move(*G), Ctx, CompileOptions());
  EXPECT_TRUE(bool(C)) << errorMessage(C.takeError());
  if (!C)
    return nullptr;
  auto P = mdrt::PlanFile::fromBytes(C->Plan.toVector(),
                                     "two." + std::to_string(Replica) + ".mdp");
  EXPECT_TRUE(P.isOk()) << P.status().message();
  return P.isOk() ? std::shared_ptr<const mdrt::PlanFile>(P.take()) : nullptr;
}

mdrt::TrainOptions trainOptions(int Steps) {
  mdrt::TrainOptions T;
  T.Synthetic = true;
  T.SyntheticExamples = 400;
  T.Steps = Steps;
  T.Seed = 3;
  T.Eval = false;
  T.PrintLosses = true;
  T.LogEvery = 0;
  T.Progress = 0;
  T.Exec.Threads = 1;
  return T;
}

/// What the workers of a cluster run report.
struct ClusterRun {
  std::string Log;
  /// Read by worker 0 once every worker is done.
  std::vector<std::vector<uint8_t>> Variables;
  std::vector<mdrt::VariableInfo> Infos;
  std::vector<std::string> Errors;
  /// Collective calls of each worker's group.
  std::vector<int> Collectives;
  /// Worker 0's errors of a step and of reading and writing a variable
  /// once disconnected.
  std::vector<std::string> AfterDisconnect;
};

/// Counts the collective calls of the group it wraps.
class CountingGroup : public mdrt::ForwardingGroup {
public:
  CountingGroup(std::unique_ptr<ProcessGroup> Inner, int &Count)
      : ForwardingGroup(std::move(Inner), "counting"), Count(Count) {}
  using ProcessGroup::allReduceSum;
  Status allReduceSum(mdrt::DType Type, const void *Send, void *Buf,
                      size_t N) override {
    ++Count;
    return ForwardingGroup::allReduceSum(Type, Send, Buf, N);
  }
  Status broadcast(void *Buf, size_t Bytes, int Root) override {
    ++Count;
    return ForwardingGroup::broadcast(Buf, Bytes, Root);
  }
  Status allGather(const void *Local, void *All, size_t Bytes) override {
    ++Count;
    return ForwardingGroup::allGather(Local, All, Bytes);
  }

private:
  int &Count;
};

/// Runs \p Plans (one per worker) with \p PsTasks servers on threads, as
/// mdrun runs the processes: start, agree, train, disconnect, serve.
ClusterRun
runCluster(const std::vector<std::shared_ptr<const mdrt::PlanFile>> &Plans,
           int PsTasks, int Steps) {
  int W = int(Plans.size());
  auto Groups = mdrt::createThreadProcessGroups(W + PsTasks);
  ClusterRun Run;
  Run.Errors.resize(size_t(W + PsTasks));
  Run.Collectives.assign(size_t(W), 0);
  std::ostringstream Log;
  std::vector<std::thread> Threads;
  for (int Rank = 0; Rank < W + PsTasks; ++Rank)
    Threads.emplace_back([&, Rank] {
      ProcessGroup &World = *Groups[size_t(Rank)];
      auto Sub = World.subgroup(0, W);
      if (!Sub.isOk()) {
        Run.Errors[size_t(Rank)] = Sub.status().message();
        return;
      }
      std::unique_ptr<ProcessGroup> Workers = Sub.take();
      if (Workers)
        Workers = std::make_unique<CountingGroup>(
            std::move(Workers), Run.Collectives[size_t(Rank)]);
      if (Rank >= W) {
        mdrt::ServerOptions SO;
        SO.Threads = 1;
        SO.Seed = 3;
        auto Server = mdrt::ParameterServer::create(Plans, World, Rank - W, SO);
        Status Started =
            World.agree(Server.isOk() ? Status::ok() : Server.status());
        if (!Started.isOk()) {
          Run.Errors[size_t(Rank)] = Started.message();
          return;
        }
        Status Served = (*Server)->serve();
        if (!Served.isOk())
          Run.Errors[size_t(Rank)] = Served.message();
        return;
      }
      mdrt::TrainOptions T = trainOptions(Steps);
      T.Exec.Processes = Workers.get();
      T.Exec.Cluster.Group = &World;
      std::ostringstream Null;
      auto Tr = mdrt::Trainer::create(
          Plans[size_t(Rank)], T,
          Rank == 0 ? static_cast<std::ostream &>(Log) : Null);
      Status Started = World.agree(Tr.isOk() ? Status::ok() : Tr.status());
      if (!Started.isOk()) {
        Run.Errors[size_t(Rank)] = Started.message();
        return;
      }
      mdrt::TrainResult R;
      Status Trained = (*Tr)->run(R);
      if (Trained.isOk() && Rank == 0) {
        mdrt::Executor &E = (*Tr)->executor();
        Run.Infos = E.variables();
        for (size_t V = 0; V < Run.Infos.size(); ++V) {
          Run.Variables.emplace_back(Run.Infos[V].Type.bytes());
          Status Read = E.readVariable(V, Run.Variables.back().data());
          EXPECT_TRUE(Read.isOk()) << Read.message();
        }
      }
      mdrt::Executor &E = (*Tr)->executor();
      EXPECT_TRUE(E.disconnect().isOk());
      if (Rank == 0) {
        // Nothing reaches the servers afterwards.
        Run.AfterDisconnect.push_back(E.run(0, 99).message());
        std::vector<uint8_t> Buf(E.variables()[0].Type.bytes());
        Run.AfterDisconnect.push_back(E.readVariable(0, Buf.data()).message());
        Run.AfterDisconnect.push_back(E.writeVariable(0, Buf.data()).message());
        EXPECT_TRUE(E.disconnect().isOk());
      }
      if (!Trained.isOk())
        Run.Errors[size_t(Rank)] = Trained.message();
    });
  for (std::thread &T : Threads)
    T.join();
  Run.Log = Log.str();
  return Run;
}

TEST(ParameterServerTest, OneWorkerTrainsAsOneProcess) {
  for (int PsTasks : {1, 2}) {
    SCOPED_TRACE(PsTasks);
    auto P = plan(0, 1, PsTasks, /*Clones=*/2);
    ASSERT_TRUE(P);
    std::ostringstream Alone;
    auto Tr = mdrt::Trainer::create(P, trainOptions(6), Alone);
    ASSERT_TRUE(Tr.isOk()) << Tr.status().message();
    mdrt::TrainResult R;
    ASSERT_TRUE((*Tr)->run(R).isOk());

    ClusterRun Run = runCluster({P}, PsTasks, 6);
    for (const std::string &E : Run.Errors)
      EXPECT_EQ(E, "");
    // The notes differ; the losses do not.
    auto Losses = [](const std::string &Log) {
      std::string L;
      std::istringstream In(Log);
      for (std::string Line; std::getline(In, Line);)
        if (Line.rfind("step ", 0) == 0)
          L += Line + "\n";
      return L;
    };
    EXPECT_NE(Losses(Alone.str()), "");
    EXPECT_EQ(Losses(Run.Log), Losses(Alone.str()));
    // The same variables at the end, read from the servers.
    mdrt::Executor &E = (*Tr)->executor();
    ASSERT_EQ(Run.Variables.size(), E.variables().size());
    for (size_t V = 0; V < Run.Variables.size(); ++V) {
      std::vector<uint8_t> Mine(E.variables()[V].Type.bytes());
      ASSERT_TRUE(E.readVariable(V, Mine.data()).isOk());
      EXPECT_EQ(Run.Variables[V], Mine) << E.variables()[V].Name;
      EXPECT_TRUE(Run.Infos[V].Remote) << Run.Infos[V].Name;
      EXPECT_FALSE(E.variables()[V].Remote);
    }
  }
}

TEST(ParameterServerTest, TwoWorkersUpdateTheSameVariables) {
  ClusterRun Run = runCluster({plan(0, 2, 2), plan(1, 2, 2)}, 2, 5);
  for (const std::string &E : Run.Errors)
    EXPECT_EQ(E, "");
  // The workers meet at the start and the end only (no logging, no
  // checkpoints, no evaluation): twice the steps, as many meetings.
  ClusterRun Longer = runCluster({plan(0, 2, 2), plan(1, 2, 2)}, 2, 10);
  EXPECT_GT(Run.Collectives[0], 0);
  EXPECT_EQ(Longer.Collectives, Run.Collectives);
  EXPECT_EQ(Run.AfterDisconnect,
            (std::vector<std::string>{
                "program 'train' needs the parameter servers, from which "
                "the executor disconnected",
                "the executor disconnected from its parameter servers",
                "the executor disconnected from its parameter servers"}));
  bool Found = false;
  for (size_t V = 0; V < Run.Infos.size(); ++V)
    if (Run.Infos[V].Name == "global_step") {
      int64_t Step = 0;
      std::memcpy(&Step, Run.Variables[V].data(), sizeof(Step));
      EXPECT_EQ(Step, 10); // 5 steps of each worker
      Found = true;
    }
  EXPECT_TRUE(Found);
}

/// The message of Executor::create's failure for \p P in \p Opts.
std::string createError(std::shared_ptr<const mdrt::PlanFile> P,
                        const mdrt::ExecutorOptions &Opts) {
  auto E = mdrt::Executor::create(std::move(P), Opts);
  return E.isOk() ? "" : E.status().message();
}

TEST(ParameterServerTest, ExecutorChecksTheCluster) {
  auto Three = mdrt::createThreadProcessGroups(3);
  auto Two = mdrt::createThreadProcessGroups(2);
  auto WorkersOfTwo = mdrt::createThreadProcessGroups(2);
  mdrt::ExecutorOptions O;
  O.Threads = 1;

  O.Cluster.Group = Three[0].get();
  EXPECT_EQ(createError(plan(0, 1, 0, 2, /*Mirrored=*/true), O),
            "a cluster of workers and parameter servers runs a ps-strategy "
            "plan with parameter-server tasks; the plan is replica 0 of 1 of "
            "strategy 'mirrored' with 0 ps tasks");
  EXPECT_EQ(createError(plan(0, 1, 1), O),
            "the plan is replica 0 of 1 (ps strategy, 1 parameter-server "
            "task), but the run has 3 processes; it needs 2: one per "
            "replica, then one per ps task");
  O.Cluster.Group = Three[1].get();
  O.Processes = WorkersOfTwo[1].get();
  EXPECT_EQ(createError(plan(0, 2, 1), O),
            "the plan is replica 0 of 2, but it runs in process 1: give each "
            "worker process the plan compiled with --replica-id=<its rank> "
            "({replica} in the plan path stands for it)");
  O.Processes = nullptr;
  EXPECT_EQ(createError(plan(1, 2, 1), O),
            "the workers' group (ExecutorOptions::Processes) has 1 "
            "process, this one process 0; the plan is replica 1 of 2, which "
            "needs the 2 workers, this one process 1");
  O.Cluster.ServeTask = 0;
  EXPECT_EQ(createError(plan(1, 2, 1), O),
            "the plan is replica 1 of 2, but it runs in process 1, not "
            "process 2, which serves ps task 0");
  O.Cluster.ServeTask = 1;
  EXPECT_EQ(createError(plan(1, 2, 1), O),
            "ps task 1 serves none of the plan's 1 parameter-server task");
  O.Cluster.Group = Two[1].get();
  O.Cluster.ServeTask = 0;
  EXPECT_EQ(createError(plan(0, 1, 1), O),
            "no shared memory for the variables of "
            "/job:ps/replica:0/task:0/device:CPU:0");

  // Without the cluster, a ps plan in several processes.
  mdrt::ExecutorOptions Plain;
  Plain.Processes = Two[0].get();
  EXPECT_EQ(createError(plan(0, 2, 1), Plain),
            "the run has 2 processes, but the plan is replica 0 of 2 of the "
            "ps strategy, whose processes are its workers and parameter "
            "servers, and the run was not started as one (were the "
            "processes given the plans of different deployments? a library "
            "caller gives the executor ExecutorOptions::Cluster)");
}

/// A transport whose tags end early.
class FewTags : public mdrt::ForwardingGroup {
public:
  explicit FewTags(std::unique_ptr<ProcessGroup> Inner)
      : ForwardingGroup(std::move(Inner), "few tags") {}
  uint32_t maxTag() const override { return 4; }
};

TEST(ParameterServerTest, MessagesNeedTags) {
  auto Groups = mdrt::createThreadProcessGroups(2);
  FewTags Cluster(std::move(Groups[0]));
  mdrt::ExecutorOptions O;
  O.Threads = 1;
  O.Cluster.Group = &Cluster;
  std::string E = createError(plan(0, 1, 1), O);
  EXPECT_EQ(
      E.rfind("the plan's messages between processes need tags up to ", 0), 0u)
      << E;
  EXPECT_NE(E.find(", more than the largest the transport has (4)"),
            std::string::npos)
      << E;
}

TEST(ParameterServerTest, ServerChecksThePlans) {
  auto Groups = mdrt::createThreadProcessGroups(3);
  ProcessGroup &Server = *Groups[2];
  auto Error = [&](std::vector<std::shared_ptr<const mdrt::PlanFile>> Plans,
                   int Task) {
    auto S = mdrt::ParameterServer::create(std::move(Plans), Server, Task, {});
    return S.isOk() ? "" : S.status().message();
  };
  EXPECT_EQ(Error({}, 0), "a parameter server needs the plans of its workers");
  auto R0 = plan(0, 2, 1), R1 = plan(1, 2, 1);
  EXPECT_EQ(Error({R0, R1}, 1),
            "plan 'two.0.mdp' has no ps task 1 (compile it with "
            "--num-ps-tasks)");
  EXPECT_EQ(Error({R0, R0}, 0),
            "plan 'two.0.mdp' is replica 0 of 2, where the parameter servers "
            "expect replica 1 of 2");
  EXPECT_EQ(Error({R0}, 0),
            "plan 'two.0.mdp' is replica 0 of 2, where the parameter servers "
            "expect replica 0 of 1");
}

TEST(ParameterServerTest, Layout) {
  auto Ps = plan(0, 2, 1);
  auto L = mdrt::clusterLayout(Ps->plan(), 3);
  ASSERT_TRUE(L.isOk());
  EXPECT_EQ(L->Workers, 2);
  EXPECT_EQ(L->PsTasks, 1);
  EXPECT_FALSE(L->isServer(1));
  EXPECT_TRUE(L->isServer(2));
  // One process runs the parameter servers itself.
  auto Alone = mdrt::clusterLayout(Ps->plan(), 1);
  ASSERT_TRUE(Alone.isOk());
  EXPECT_EQ(Alone->PsTasks, 0);
  // Mirrored: every process is a worker.
  auto M = mdrt::clusterLayout(plan(0, 2, 0, 1, true)->plan(), 2);
  ASSERT_TRUE(M.isOk());
  EXPECT_EQ(M->Workers, 2);
  EXPECT_EQ(M->PsTasks, 0);
}

} // namespace
