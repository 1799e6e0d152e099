//===- PlacementTest.cpp - The device-stack walk --------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// semantics.md section 2: the walk from the innermost entry outwards,
// empty specs, clear markers, device functions, colocation, summaries,
// completion from the cluster and soft placement.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/Placement.h"
#include "mdplan/Deploy/DeviceFunctions.h"
#include "mdplan/IR/OpRegistry.h"

#include "gtest/gtest.h"

#include <initializer_list>

using namespace mdplan;

namespace {

DeviceSpec spec(llvm::StringRef S) {
  auto D = DeviceSpec::parse(S);
  if (!D) {
    ADD_FAILURE() << "cannot parse '" << S.str()
                  << "': " << errorMessage(D.takeError());
    return DeviceSpec();
  }
  return *D;
}

/// A device function that records the device it was given and returns a
/// fixed one.
class FixedFunction : public DeviceFunction {
public:
  explicit FixedFunction(DeviceSpec Result) : Result(std::move(Result)) {}
  llvm::StringRef getName() const override { return "fixed"; }
  const AttrDict &getArgs() const override { return Args; }
  DeviceSpec apply(const Node &N, const DeviceSpec &Current) override {
    Seen.push_back(Current.toString());
    return Result;
  }
  std::unique_ptr<DeviceFunction> clone() const override {
    return std::make_unique<FixedFunction>(Result);
  }
  DeviceSpec Result;
  AttrDict Args;
  std::vector<std::string> Seen;
};

/// A graph with helpers to build stacks and nodes.
class PlacementTest : public ::testing::Test {
protected:
  const DeviceEntry *specEntry(llvm::StringRef S) {
    DeviceEntry E;
    E.K = DeviceEntry::Kind::Spec;
    E.Spec = spec(S);
    E.Origin = "test";
    return G.createEntry(std::move(E));
  }
  const DeviceEntry *clearEntry() {
    DeviceEntry E;
    E.K = DeviceEntry::Kind::Clear;
    return G.createEntry(std::move(E));
  }
  const DeviceEntry *fnEntry(std::unique_ptr<DeviceFunction> F) {
    DeviceEntry E;
    E.K = DeviceEntry::Kind::Function;
    E.Fn = G.addFunction(std::move(F));
    return G.createEntry(std::move(E));
  }
  const DeviceEntry *roleEntry(NodeRole R) {
    DeviceEntry E;
    E.K = DeviceEntry::Kind::Role;
    E.RoleKind = R;
    return G.createEntry(std::move(E));
  }
  /// The stack of \p Entries, outermost first.
  const DeviceStack *stack(std::initializer_list<const DeviceEntry *> Entries) {
    const DeviceStack *S = G.getRootStack();
    for (const DeviceEntry *E : Entries)
      S = G.pushStack(S, E);
    return S;
  }
  Node *node(llvm::StringRef Name, OpKind K, const DeviceStack *S = nullptr,
             llvm::StringRef Requested = "") {
    Node *N = G.createNode(Name, opDef(K));
    N->setStack(S ? S : G.getRootStack());
    N->setRequestedDevice(spec(Requested));
    return N;
  }
  std::string walk(const Node &N) { return walkDeviceStack(N).toString(); }

  /// A cluster: worker job with \p Gpus GPUs per task, \p Ps ps tasks.
  static Cluster cluster(int Gpus = 2, int Ps = 0, int Workers = 1,
                         int WorkerTask = 0) {
    Cluster C;
    C.WorkerJob = "worker";
    C.PsJob = "ps";
    C.NumWorkers = Workers;
    C.NumPs = Ps;
    C.GpusPerWorker = Gpus;
    C.WorkerTask = WorkerTask;
    return C;
  }

  /// Runs placeDevices; returns the error message or "".
  std::string place(const Cluster &C, bool Soft = false) {
    PlacementOptions Opts;
    Opts.TheCluster = C;
    Opts.SoftPlacement = Soft;
    Opts.ShouldRecord = [](const Node &) { return true; };
    Records.clear();
    Warnings.clear();
    DiagnosticHandler Diags(
        [this](Severity S, const SourceLoc &L, llvm::StringRef Msg) {
          std::string W = L.str();
          Warnings.push_back((W.empty() ? "" : W + ": ") + Msg.str());
        });
    if (llvm::Error E = placeDevices(G, Opts, Diags, &Records))
      return errorMessage(std::move(E));
    return "";
  }
  std::string dev(const Node *N) { return G.deviceOf(*N).toString(); }

  Graph G;
  llvm::MapVector<const Node *, PlacementRecord> Records;
  std::vector<std::string> Warnings;
};

//===----------------------------------------------------------------------===//
// The walk
//===----------------------------------------------------------------------===//

TEST_F(PlacementTest, InnerSpecWins) {
  const DeviceStack *S = stack({specEntry("/job:w/device:CPU:1")});
  Node *N = node("n", OpKind::NoOp, S, "/gpu");
  EXPECT_EQ(walk(*N), "/job:w/device:GPU:1");
}

TEST_F(PlacementTest, WalkGoesFromInnerToOuter) {
  // Outermost first: the innermost entry decides every field it sets.
  const DeviceStack *S =
      stack({specEntry("/job:a/replica:0/task:1/device:CPU:0"),
             specEntry("/job:b/task:2"), specEntry("/task:3")});
  Node *N = node("n", OpKind::NoOp, S);
  EXPECT_EQ(walk(*N), "/job:b/replica:0/task:3/device:CPU:0");

  PlacementRecord R;
  walkDeviceStack(*N, &R);
  ASSERT_EQ(R.Steps.size(), 3u);
  EXPECT_EQ(R.Steps[0].Entry->Spec.toString(), "/task:3");
  EXPECT_EQ(R.Steps[1].Entry->Spec.toString(), "/job:b/task:2");
  EXPECT_EQ(R.Steps[2].Entry->Spec.toString(),
            "/job:a/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(R.Steps[0].Before.toString(), "");
  EXPECT_EQ(R.Steps[0].After.toString(), "/task:3");
  EXPECT_EQ(R.Steps[1].After.toString(), "/job:b/task:3");
  EXPECT_FALSE(R.StoppedAtClear);
}

TEST_F(PlacementTest, RequestedDeviceIsInnermost) {
  const DeviceStack *S = stack({specEntry("/job:w/task:1/device:GPU:0")});
  Node *N = node("n", OpKind::NoOp, S, "/task:5/cpu:0");
  EXPECT_EQ(walk(*N), "/job:w/task:5/device:CPU:0");
  PlacementRecord R;
  walkDeviceStack(*N, &R);
  EXPECT_EQ(R.Requested.toString(), "/task:5/device:CPU:0");
}

TEST_F(PlacementTest, NoStackKeepsRequested) {
  Node *A = node("a", OpKind::NoOp, nullptr, "/gpu:1");
  Node *B = node("b", OpKind::NoOp);
  EXPECT_EQ(walk(*A), "/device:GPU:1");
  EXPECT_EQ(walk(*B), "");
}

TEST_F(PlacementTest, EmptySpecIsSkipped) {
  const DeviceStack *S =
      stack({specEntry("/job:w"), specEntry(""), specEntry("/gpu:0")});
  Node *N = node("n", OpKind::NoOp, S);
  PlacementRecord R;
  EXPECT_EQ(walkDeviceStack(*N, &R).toString(), "/job:w/device:GPU:0");
  // The empty entry is not applied (and not recorded as a step).
  ASSERT_EQ(R.Steps.size(), 2u);
  EXPECT_EQ(R.Steps[0].Entry->Spec.toString(), "/device:GPU:0");
  EXPECT_EQ(R.Steps[1].Entry->Spec.toString(), "/job:w");
}

TEST_F(PlacementTest, EmptySpecDoesNotStopTheWalk) {
  // Unlike tf.device(None), an empty spec lets outer entries apply.
  const DeviceStack *S =
      stack({specEntry("/job:w/device:GPU:1"), specEntry("")});
  Node *N = node("n", OpKind::NoOp, S);
  EXPECT_EQ(walk(*N), "/job:w/device:GPU:1");
}

TEST_F(PlacementTest, ClearStopsTheWalk) {
  const DeviceStack *S = stack(
      {specEntry("/job:w/device:GPU:0"), clearEntry(), specEntry("/task:1")});
  Node *N = node("n", OpKind::NoOp, S);
  PlacementRecord R;
  EXPECT_EQ(walkDeviceStack(*N, &R).toString(), "/task:1");
  EXPECT_TRUE(R.StoppedAtClear);
  ASSERT_EQ(R.Steps.size(), 2u);
  EXPECT_EQ(R.Steps[1].Entry->K, DeviceEntry::Kind::Clear);
}

TEST_F(PlacementTest, ClearInnermostKeepsOnlyRequested) {
  const DeviceStack *S = stack({specEntry("/job:w/task:3"), clearEntry()});
  Node *A = node("a", OpKind::NoOp, S, "/cpu:0");
  Node *B = node("b", OpKind::NoOp, S);
  EXPECT_EQ(walk(*A), "/device:CPU:0");
  EXPECT_EQ(walk(*B), "");
}

TEST_F(PlacementTest, ClearAlsoStopsFunctions) {
  auto F = std::make_unique<FixedFunction>(spec("/job:x/device:CPU:0"));
  FixedFunction *FP = F.get();
  const DeviceStack *S = stack({fnEntry(std::move(F)), clearEntry()});
  Node *N = node("n", OpKind::NoOp, S);
  EXPECT_EQ(walk(*N), "");
  EXPECT_TRUE(FP->Seen.empty());
}

TEST_F(PlacementTest, FunctionReceivesDeviceSoFar) {
  auto F = std::make_unique<FixedFunction>(spec("/job:x/device:CPU:0"));
  FixedFunction *FP = F.get();
  const DeviceStack *S = stack({specEntry("/job:outer/task:4"),
                                fnEntry(std::move(F)), specEntry("/gpu:1")});
  Node *N = node("n", OpKind::NoOp, S, "/replica:0");
  // The function overrides the device so far; outer specs then fill only
  // the fields it left unset.
  EXPECT_EQ(walk(*N), "/job:x/task:4/device:CPU:0");
  ASSERT_EQ(FP->Seen.size(), 1u);
  EXPECT_EQ(FP->Seen[0], "/replica:0/device:GPU:1");
}

TEST_F(PlacementTest, RoleEntriesAreSkippedUntilResolved) {
  const DeviceStack *S =
      stack({specEntry("/job:w"), roleEntry(NodeRole::Variable)});
  Node *N = node("n", OpKind::NoOp, S);
  EXPECT_EQ(walk(*N), "/job:w");
}

//===----------------------------------------------------------------------===//
// Device functions inside the walk
//===----------------------------------------------------------------------===//

TEST_F(PlacementTest, PsRoundRobinWrapsInGraphOrder) {
  const DeviceStack *S = stack({fnEntry(std::make_unique<PsRoundRobin>(
      spec("/job:ps/device:CPU:0"), 2, std::vector<std::string>{"Variable"}))});
  Node *A = node("a", OpKind::Variable, S);
  Node *B = node("b", OpKind::Variable, S);
  Node *C = node("c", OpKind::NoOp, S);
  Node *D = node("d", OpKind::Variable, S);
  EXPECT_EQ(place(cluster(0, 2)), "");
  EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0");
  // Not a variable: left alone, completed to the worker's CPU.
  EXPECT_EQ(dev(C), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(Records[C].AfterStack.toString(), "");
  EXPECT_EQ(dev(D), "/job:ps/replica:0/task:0/device:CPU:0");
}

TEST_F(PlacementTest, PsRoundRobinCounterAdvancesOnlyWhenItAssigns) {
  const DeviceStack *S = stack({fnEntry(std::make_unique<PsRoundRobin>(
      spec("/job:ps/device:CPU:0"), 3, std::vector<std::string>{"Variable"}))});
  const DeviceStack *Pinned = G.pushStack(S, specEntry("/job:ps/task:2"));
  Node *A = node("a", OpKind::Variable, S);
  node("x", OpKind::NoOp, S);
  // Has a device already (requested or from an inner scope): keeps it.
  Node *Keep1 = node("keep1", OpKind::Variable, S, "/job:worker/cpu:0");
  Node *Keep2 = node("keep2", OpKind::Variable, Pinned);
  node("y", OpKind::Const, S);
  Node *B = node("b", OpKind::Variable, S);
  Node *C = node("c", OpKind::Variable, S);
  Node *D = node("d", OpKind::Variable, S);
  EXPECT_EQ(place(cluster(0, 3)), "");
  EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(Keep1), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(Records[Keep1].AfterStack.toString(), "/job:worker/device:CPU:0");
  EXPECT_EQ(Records[Keep2].AfterStack.toString(), "/job:ps/task:2");
  EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(C), "/job:ps/replica:0/task:2/device:CPU:0");
  EXPECT_EQ(dev(D), "/job:ps/replica:0/task:0/device:CPU:0");
}

TEST_F(PlacementTest, PsRoundRobinCounterIsResetForEachPlacement) {
  const DeviceStack *S = stack({fnEntry(std::make_unique<PsRoundRobin>(
      spec("/job:ps/device:CPU:0"), 2, std::vector<std::string>{"Variable"}))});
  Node *A = node("a", OpKind::Variable, S);
  Node *B = node("b", OpKind::Variable, S);
  Node *C = node("c", OpKind::Variable, S);
  for (int Run = 0; Run < 2; ++Run) {
    EXPECT_EQ(place(cluster(0, 2)), "");
    EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0") << Run;
    EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0") << Run;
    EXPECT_EQ(dev(C), "/job:ps/replica:0/task:0/device:CPU:0") << Run;
  }
}

TEST_F(PlacementTest, SharedFunctionCounterAcrossStacks) {
  // One chooser in two stacks (model_deploy: one chooser for the whole
  // deployment, shared across clones).
  const DeviceEntry *Fn = fnEntry(std::make_unique<PsRoundRobin>(
      spec("/job:ps/device:CPU:0"), 2, std::vector<std::string>{"Variable"}));
  const DeviceStack *S0 = stack({specEntry("/job:worker/gpu:0"), Fn});
  const DeviceStack *S1 = stack({specEntry("/job:worker/gpu:1"), Fn});
  Node *A = node("a", OpKind::Variable, S0);
  Node *B = node("b", OpKind::Variable, S1);
  Node *C = node("c", OpKind::Variable, S0);
  Node *X = node("x", OpKind::NoOp, S1);
  EXPECT_EQ(place(cluster(2, 2)), "");
  EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(C), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(X), "/job:worker/replica:0/task:0/device:GPU:1");
}

TEST_F(PlacementTest, ReplicaDeviceSetterInStack) {
  const DeviceStack *S = stack({fnEntry(std::make_unique<ReplicaDeviceSetter>(
      2, spec("/job:ps"), spec("/job:worker"),
      std::vector<std::string>{"Variable"}, true))});
  Node *A = node("a", OpKind::Variable, S);
  Node *X = node("x", OpKind::MatMul, S, "/gpu:1");
  Node *B = node("b", OpKind::Variable, S);
  Node *C = node("c", OpKind::Variable, S);
  EXPECT_EQ(place(cluster(2, 2)), "");
  EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(X), "/job:worker/replica:0/task:0/device:GPU:1");
  EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(C), "/job:ps/replica:0/task:0/device:CPU:0");
}

//===----------------------------------------------------------------------===//
// Colocation
//===----------------------------------------------------------------------===//

TEST_F(PlacementTest, ColocationFollowsTheTarget) {
  Node *A =
      node("a", OpKind::Variable, stack({specEntry("/job:worker/gpu:1")}));
  // B's own stack is skipped.
  Node *B = node("b", OpKind::Identity, stack({specEntry("/cpu:0")}));
  B->setColocateWith(A);
  EXPECT_EQ(place(cluster(2)), "");
  EXPECT_EQ(dev(A), "/job:worker/replica:0/task:0/device:GPU:1");
  EXPECT_EQ(dev(B), "/job:worker/replica:0/task:0/device:GPU:1");
  EXPECT_EQ(Records[B].ColocatedWith, A);
  EXPECT_TRUE(Records[B].Steps.empty());
}

TEST_F(PlacementTest, ColocationChains) {
  Node *A = node("a", OpKind::Variable, nullptr, "/gpu:1");
  Node *B = node("b", OpKind::Identity);
  Node *C = node("c", OpKind::Identity, stack({specEntry("/cpu:0")}));
  Node *D = node("d", OpKind::Identity);
  D->setColocateWith(C);
  C->setColocateWith(B);
  B->setColocateWith(A);
  EXPECT_EQ(place(cluster(2)), "");
  for (const Node *N : {A, B, C, D})
    EXPECT_EQ(dev(N), "/job:worker/replica:0/task:0/device:GPU:1")
        << N->getName().str();
}

TEST_F(PlacementTest, ColocationAfterDeviceFunctions) {
  // The target's device is the one its functions chose; a colocated
  // variable does not advance the round robin.
  const DeviceStack *S = stack({fnEntry(std::make_unique<PsRoundRobin>(
      spec("/job:ps/device:CPU:0"), 2, std::vector<std::string>{"Variable"}))});
  Node *A = node("a", OpKind::Variable, S);
  Node *B = node("b", OpKind::Variable, S);
  Node *Slot = node("b_slot", OpKind::Variable, S);
  Slot->setColocateWith(B);
  Node *C = node("c", OpKind::Variable, S);
  EXPECT_EQ(place(cluster(0, 2)), "");
  EXPECT_EQ(dev(A), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(B), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(Slot), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(C), "/job:ps/replica:0/task:0/device:CPU:0");
}

TEST_F(PlacementTest, ColocationCycleIsAnError) {
  Node *A = node("a", OpKind::Identity);
  Node *B = node("b", OpKind::Identity);
  A->setColocateWith(B);
  B->setColocateWith(A);
  EXPECT_EQ(place(cluster()), "node 'a': colocation cycle: a -> b -> a");
}

TEST_F(PlacementTest, ColocationCycleThreeNodes) {
  Node *A = node("a", OpKind::Identity);
  Node *B = node("b", OpKind::Identity);
  Node *C = node("c", OpKind::Identity);
  A->setColocateWith(B);
  B->setColocateWith(C);
  C->setColocateWith(A);
  EXPECT_EQ(place(cluster()), "node 'a': colocation cycle: a -> b -> c -> a");
}

TEST_F(PlacementTest, ColocationConflictingExplicitDevice) {
  Node *A = node("a", OpKind::Variable, nullptr, "/gpu:1");
  Node *B = node("b", OpKind::Identity, nullptr, "/gpu:0");
  B->setColocateWith(A);
  EXPECT_EQ(place(cluster(2)),
            "node 'b': is colocated with 'a' on "
            "'/job:worker/replica:0/task:0/device:GPU:1' but asks for "
            "device '/device:GPU:0'");
}

TEST_F(PlacementTest, ColocationCompatibleExplicitDevice) {
  Node *A = node("a", OpKind::Variable, nullptr, "/job:worker/gpu:1");
  Node *B = node("b", OpKind::Identity, nullptr, "/gpu:1");
  B->setColocateWith(A);
  EXPECT_EQ(place(cluster(2)), "");
  EXPECT_EQ(dev(B), "/job:worker/replica:0/task:0/device:GPU:1");
}

TEST_F(PlacementTest, ColocationErrorIsLocated) {
  Node *A = node("a", OpKind::Variable, nullptr, "/gpu:1");
  Node *B = node("b", OpKind::Identity, nullptr, "/cpu:0");
  B->setLoc(SourceLoc{internFileName("m.mdg"), 7, 3});
  B->setColocateWith(A);
  PlacementOptions Opts;
  Opts.TheCluster = cluster(2);
  llvm::Error E = placeDevices(G, Opts, DiagnosticHandler());
  ASSERT_TRUE(bool(E));
  std::string S;
  llvm::raw_string_ostream OS(S);
  printErrors(std::move(E), OS);
  EXPECT_EQ(OS.str(), "m.mdg:7:3: error: node 'b': is colocated with 'a' on "
                      "'/job:worker/replica:0/task:0/device:GPU:1' but asks "
                      "for device '/device:CPU:0'\n");
}

//===----------------------------------------------------------------------===//
// Completion, the cluster check and soft placement
//===----------------------------------------------------------------------===//

TEST_F(PlacementTest, CompletionFromTheCluster) {
  Node *Empty = node("empty", OpKind::NoOp);
  Node *Gpu = node("gpu", OpKind::NoOp, nullptr, "/gpu:1");
  Node *AnyGpu = node("anygpu", OpKind::NoOp, nullptr, "/gpu:*");
  Node *Ps = node("ps", OpKind::NoOp, nullptr, "/job:ps");
  Node *PsTask = node("pstask", OpKind::NoOp, nullptr, "/job:ps/task:1");
  Node *Task = node("task", OpKind::NoOp, nullptr, "/job:worker/task:2");
  EXPECT_EQ(place(cluster(2, 2, 4, 3)), "");
  // The worker job and this replica's task, replica 0, CPU:0.
  EXPECT_EQ(dev(Empty), "/job:worker/replica:0/task:3/device:CPU:0");
  EXPECT_EQ(dev(Gpu), "/job:worker/replica:0/task:3/device:GPU:1");
  EXPECT_EQ(dev(AnyGpu), "/job:worker/replica:0/task:3/device:GPU:0");
  EXPECT_EQ(dev(Ps), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(PsTask), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev(Task), "/job:worker/replica:0/task:2/device:CPU:0");
  EXPECT_EQ(Records[Empty].AfterStack.toString(), "");
  EXPECT_TRUE(Records[Empty].Final.isComplete());
}

TEST_F(PlacementTest, DeviceTableIsShared) {
  Node *A = node("a", OpKind::NoOp, nullptr, "/gpu:1");
  Node *B = node("b", OpKind::NoOp, nullptr, "/job:worker/device:GPU:1");
  Node *C = node("c", OpKind::NoOp);
  EXPECT_EQ(place(cluster(2)), "");
  EXPECT_EQ(A->getDevice(), B->getDevice());
  EXPECT_NE(A->getDevice(), C->getDevice());
  EXPECT_EQ(G.getDevices().size(), 2u);
}

TEST_F(PlacementTest, MissingGpuIsAnError) {
  Node *N = node("n", OpKind::NoOp, nullptr, "/device:GPU:3");
  N->setLoc(SourceLoc{internFileName("m.mdg"), 2, 8});
  EXPECT_EQ(place(cluster(2)),
            "node 'n': placed on '/job:worker/replica:0/task:0/device:GPU:3', "
            "which the cluster does not have: the worker tasks have 2 GPUs, "
            "GPU:0 to GPU:1 (--soft-placement moves such nodes to the host "
            "CPU)");
}

TEST_F(PlacementTest, SoftPlacementFallsBackToHostCpu) {
  Node *N = node("n", OpKind::NoOp, nullptr, "/device:GPU:3");
  N->setLoc(SourceLoc{internFileName("m.mdg"), 2, 8});
  Node *Ok = node("ok", OpKind::NoOp, nullptr, "/device:GPU:1");
  EXPECT_EQ(place(cluster(2), /*Soft=*/true), "");
  EXPECT_EQ(dev(N), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(dev(Ok), "/job:worker/replica:0/task:0/device:GPU:1");
  ASSERT_TRUE(Records[N].SoftFrom.has_value());
  EXPECT_EQ(Records[N].SoftFrom->toString(),
            "/job:worker/replica:0/task:0/device:GPU:3");
  ASSERT_EQ(Warnings.size(), 1u);
  EXPECT_EQ(Warnings[0],
            "m.mdg:2:8: '/job:worker/replica:0/task:0/device:GPU:3' does not "
            "exist (the worker tasks have 2 GPUs, GPU:0 to GPU:1): its node "
            "'n' is placed on '/job:worker/replica:0/task:0/device:CPU:0' "
            "instead (soft placement)");
}

TEST_F(PlacementTest, SoftPlacementWarnsOncePerMissingDevice) {
  Node *A = node("a", OpKind::NoOp, nullptr, "/device:GPU:3");
  A->setLoc(SourceLoc{internFileName("m.mdg"), 2, 8});
  node("b", OpKind::NoOp, nullptr, "/device:GPU:3");
  node("c", OpKind::NoOp, nullptr, "/device:GPU:4");
  node("ok", OpKind::NoOp, nullptr, "/device:GPU:1");
  EXPECT_EQ(place(cluster(2), /*Soft=*/true), "");
  ASSERT_EQ(Warnings.size(), 2u);
  EXPECT_EQ(Warnings[0],
            "m.mdg:2:8: '/job:worker/replica:0/task:0/device:GPU:3' does not "
            "exist (the worker tasks have 2 GPUs, GPU:0 to GPU:1): its 2 "
            "nodes (the first 'a') are placed on "
            "'/job:worker/replica:0/task:0/device:CPU:0' instead (soft "
            "placement)");
  EXPECT_EQ(Warnings[1],
            "'/job:worker/replica:0/task:0/device:GPU:4' does not exist (the "
            "worker tasks have 2 GPUs, GPU:0 to GPU:1): its node 'c' is "
            "placed on '/job:worker/replica:0/task:0/device:CPU:0' instead "
            "(soft placement)");
}

TEST_F(PlacementTest, SoftPlacementKeepsTheTask) {
  Node *N = node("n", OpKind::NoOp, nullptr, "/job:worker/task:1/gpu:0");
  EXPECT_EQ(place(cluster(0, 0, 2), /*Soft=*/true), "");
  EXPECT_EQ(dev(N), "/job:worker/replica:0/task:1/device:CPU:0");
}

TEST_F(PlacementTest, SoftPlacementCannotInventAJob) {
  Node *N = node("n", OpKind::NoOp, nullptr, "/job:foo/gpu:0");
  (void)N;
  EXPECT_EQ(place(cluster(2), /*Soft=*/true),
            "node 'n': placed on '/job:foo/replica:0/task:0/device:GPU:0', "
            "which the cluster does not have: the cluster has no job 'foo' "
            "(its jobs: 'worker')");
}

TEST_F(PlacementTest, MissingDeviceMessages) {
  struct Case {
    const char *Requested;
    const char *Why;
  } Cases[] = {
      {"/job:foo", "the cluster has no job 'foo' (its jobs: 'worker' and "
                   "'ps')"},
      {"/replica:1", "the cluster has replica 0 only"},
      {"/job:worker/task:2", "job 'worker' has 2 tasks"},
      {"/job:ps/task:1", "job 'ps' has 1 task"},
      {"/device:CPU:1", "each task has one CPU, CPU:0"},
      {"/job:ps/device:GPU:0", "parameter-server tasks have no GPU"},
      {"/device:TPU:0", "the cluster has no devices of type 'TPU'"},
  };
  for (const Case &C : Cases) {
    Graph Fresh;
    Node *N = Fresh.createNode("n", opDef(OpKind::NoOp));
    N->setStack(Fresh.getRootStack());
    N->setRequestedDevice(spec(C.Requested));
    PlacementOptions Opts;
    Opts.TheCluster = cluster(1, 1, 2);
    std::string Msg =
        errorMessage(placeDevices(Fresh, Opts, DiagnosticHandler()));
    EXPECT_NE(
        Msg.find(std::string("which the cluster does not have: ") + C.Why),
        std::string::npos)
        << C.Requested << ": " << Msg;
  }
}

TEST_F(PlacementTest, NoGpuCluster) {
  Cluster C = cluster(0);
  EXPECT_EQ(C.whyMissing(spec("/job:worker/replica:0/task:0/device:GPU:0")),
            "the worker tasks have no GPU");
  EXPECT_EQ(
      cluster(1).whyMissing(spec("/job:worker/replica:0/task:0/device:GPU:1")),
      "the worker tasks have 1 GPU, GPU:0");
  EXPECT_TRUE(
      cluster(1).contains(spec("/job:worker/replica:0/task:0/device:GPU:0")));
  EXPECT_EQ(C.hostOf(spec("/job:ps/task:1/device:GPU:0")).toString(),
            "/job:ps/replica:0/task:1/device:CPU:0");
}

//===----------------------------------------------------------------------===//
// Summaries and explanations
//===----------------------------------------------------------------------===//

TEST_F(PlacementTest, SummariesGoToTheHostCpu) {
  const DeviceStack *S = stack({specEntry("/job:worker/task:1/device:GPU:1")});
  Node *V = node("v", OpKind::Const, S);
  Node *Sum = node("s", OpKind::ScalarSummary, S);
  Sum->addInput(TensorRef(V));
  EXPECT_EQ(place(cluster(2, 0, 2)), "");
  EXPECT_EQ(dev(V), "/job:worker/replica:0/task:1/device:GPU:1");
  EXPECT_EQ(dev(Sum), "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(Records[Sum].MovedToHost);
  EXPECT_FALSE(Records[V].MovedToHost);
}

TEST_F(PlacementTest, ExplanationText) {
  const DeviceStack *S =
      stack({specEntry("/job:worker/device:GPU:0"), specEntry("/task:0")});
  Node *N = node("n", OpKind::NoOp, S, "/gpu:1");
  EXPECT_EQ(place(cluster(2)), "");
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  printPlacementRecord(OS, *N, Records[N]);
  EXPECT_EQ(OS.str(),
            "placement of 'n' (NoOp, model)\n"
            "  requested: /device:GPU:1\n"
            "  /task:0 [test]: /device:GPU:1 -> /task:0/device:GPU:1\n"
            "  /job:worker/device:GPU:0 [test]: /task:0/device:GPU:1 "
            "-> /job:worker/task:0/device:GPU:1\n"
            "  decided by: /job:worker/device:GPU:0 [test]\n"
            "  after stack: /job:worker/task:0/device:GPU:1\n"
            "  final: /job:worker/replica:0/task:0/device:GPU:1\n");
}

} // namespace
