//===- DeviceFunctionsTest.cpp - ps-round-robin, replica-device-setter ----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The built-in device functions of semantics.md section 2, applied to one
// node at a time, and their construction from graph-file arguments.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeviceFunctions.h"
#include "mdplan/IR/OpRegistry.h"

#include "gtest/gtest.h"

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

class DeviceFunctionsTest : public ::testing::Test {
protected:
  DeviceFunctionsTest() {
    Var = G.createNode("var", opDef(OpKind::Variable));
    Var2 = G.createNode("var2", opDef(OpKind::Variable));
    Op = G.createNode("op", opDef(OpKind::MatMul));
    Const = G.createNode("const", opDef(OpKind::Const));
  }
  /// Applies \p F to \p N with device \p Current, canonical result.
  static std::string apply(DeviceFunction &F, const Node &N,
                           llvm::StringRef Current = "") {
    return F.apply(N, spec(Current)).toString();
  }

  Graph G;
  Node *Var, *Var2, *Op, *Const;
};

std::vector<std::string> variableOps() { return {"Variable"}; }

//===----------------------------------------------------------------------===//
// ps-round-robin
//===----------------------------------------------------------------------===//

TEST_F(DeviceFunctionsTest, PsRoundRobinAssignsTasksInTurn) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 3, variableOps());
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(F, *Var2), "/job:ps/task:1/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:2/device:CPU:0");
  // Wraps.
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:1/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinSingleTask) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 1, variableOps());
  for (int I = 0; I < 3; ++I)
    EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinLeavesOtherOpsAlone) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 2, variableOps());
  EXPECT_EQ(apply(F, *Op), "");
  EXPECT_EQ(apply(F, *Op, "/gpu:1"), "/device:GPU:1");
  EXPECT_EQ(apply(F, *Const), "");
  // The counter did not move.
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(F, *Op), "");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:1/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinNodeWithDeviceKeepsIt) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 2, variableOps());
  EXPECT_EQ(apply(F, *Var, "/job:worker/device:GPU:0"),
            "/job:worker/device:GPU:0");
  EXPECT_EQ(apply(F, *Var, "/cpu:0"), "/device:CPU:0");
  EXPECT_EQ(apply(F, *Var, "/job:ps/task:1"), "/job:ps/task:1");
  // None of these advanced the counter.
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinReset) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 2, variableOps());
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
  F.reset();
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:1/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinCustomOps) {
  PsRoundRobin F(spec("/job:ps/device:CPU:0"), 2, {"Const", "Variable"});
  EXPECT_EQ(apply(F, *Const), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:1/device:CPU:0");
  EXPECT_EQ(apply(F, *Op), "");
  PsRoundRobin OnlyConst(spec("/job:ps/device:CPU:0"), 2, {"Const"});
  EXPECT_EQ(apply(OnlyConst, *Var), "");
}

TEST_F(DeviceFunctionsTest, PsRoundRobinDescribe) {
  PsRoundRobin F(spec("/job:ps/cpu:0"), 2, variableOps());
  EXPECT_EQ(F.getName(), "ps-round-robin");
  EXPECT_EQ(F.describe(), "ps-round-robin(ps_device=\"/job:ps/device:CPU:0\", "
                          "ps_ops=[\"Variable\"], tasks=2)");
}

//===----------------------------------------------------------------------===//
// replica-device-setter
//===----------------------------------------------------------------------===//

ReplicaDeviceSetter setter(int Tasks, llvm::StringRef Ps = "/job:ps",
                           llvm::StringRef Worker = "/job:worker",
                           bool Merge = true) {
  return ReplicaDeviceSetter(Tasks, spec(Ps), spec(Worker), variableOps(),
                             Merge);
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterZeroTasksIsNoOp) {
  ReplicaDeviceSetter F = setter(0);
  EXPECT_EQ(apply(F, *Var), "");
  EXPECT_EQ(apply(F, *Op), "");
  EXPECT_EQ(apply(F, *Var, "/gpu:0"), "/device:GPU:0");
  EXPECT_EQ(apply(F, *Op, "/job:x/task:3"), "/job:x/task:3");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterRoundRobin) {
  ReplicaDeviceSetter F = setter(2);
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
  EXPECT_EQ(apply(F, *Op), "/job:worker");
  EXPECT_EQ(apply(F, *Var2), "/job:ps/task:1");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterMergesUnderCurrent) {
  ReplicaDeviceSetter F =
      setter(2, "/job:ps/device:CPU:0", "/job:worker/device:GPU:0");
  // The node's own fields win over the ps / worker device.
  EXPECT_EQ(apply(F, *Var, "/device:GPU:1"), "/job:ps/task:0/device:GPU:1");
  EXPECT_EQ(apply(F, *Op, "/gpu:1"), "/job:worker/device:GPU:1");
  EXPECT_EQ(apply(F, *Op, "/task:3"), "/job:worker/task:3/device:GPU:0");
  EXPECT_EQ(apply(F, *Op), "/job:worker/device:GPU:0");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterJobPinning) {
  ReplicaDeviceSetter F = setter(3);
  // A variable pinned to another job gets no round-robin task, and the
  // counter does not move.
  EXPECT_EQ(apply(F, *Var, "/job:local"), "/job:local");
  EXPECT_EQ(apply(F, *Var, "/job:local/cpu:0"), "/job:local/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
  // The same job as the ps device: round robin.
  EXPECT_EQ(apply(F, *Var, "/job:ps"), "/job:ps/task:1");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:2");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterPsDeviceWithoutJob) {
  // No job in the ps spec: no task is chosen.
  ReplicaDeviceSetter F = setter(2, "/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/device:CPU:0");
  EXPECT_EQ(apply(F, *Var), "/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterNoMerge) {
  ReplicaDeviceSetter F = setter(2, "/job:ps", "/job:worker", false);
  // merge_devices=false: a node with a device keeps it untouched.
  EXPECT_EQ(apply(F, *Var, "/gpu:0"), "/device:GPU:0");
  EXPECT_EQ(apply(F, *Op, "/gpu:0"), "/device:GPU:0");
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
  EXPECT_EQ(apply(F, *Op), "/job:worker");
}

TEST_F(DeviceFunctionsTest, ReplicaDeviceSetterReset) {
  ReplicaDeviceSetter F = setter(2);
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
  F.reset();
  EXPECT_EQ(apply(F, *Var), "/job:ps/task:0");
}

//===----------------------------------------------------------------------===//
// createDeviceFunction
//===----------------------------------------------------------------------===//

std::string createError(llvm::StringRef Name, const AttrDict &Args) {
  auto F = createDeviceFunction(Name, Args);
  if (F)
    return "<no error>";
  return errorMessage(F.takeError());
}

TEST_F(DeviceFunctionsTest, CreatePsRoundRobin) {
  AttrDict Args;
  Args.set("tasks", int64_t(2));
  auto F = createDeviceFunction("ps-round-robin", Args);
  ASSERT_TRUE(bool(F)) << errorMessage(F.takeError());
  EXPECT_EQ((*F)->getName(), "ps-round-robin");
  // Default ps_device /job:ps/device:CPU:0, default ps_ops Variable.
  EXPECT_EQ(apply(**F, *Var), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(apply(**F, *Op), "");
  EXPECT_EQ(apply(**F, *Var), "/job:ps/task:1/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, CreatePsRoundRobinWithArgs) {
  AttrDict Args;
  Args.set("tasks", int64_t(2));
  Args.set("ps_device", "/job:params/cpu:0");
  Args.set("ps_ops", "Const");
  auto F = createDeviceFunction("ps-round-robin", Args);
  ASSERT_TRUE(bool(F)) << errorMessage(F.takeError());
  EXPECT_EQ(apply(**F, *Var), "");
  EXPECT_EQ(apply(**F, *Const), "/job:params/task:0/device:CPU:0");
}

TEST_F(DeviceFunctionsTest, CreateReplicaDeviceSetter) {
  AttrDict Args;
  Args.set("ps_tasks", int64_t(2));
  auto F = createDeviceFunction("replica-device-setter", Args);
  ASSERT_TRUE(bool(F)) << errorMessage(F.takeError());
  EXPECT_EQ((*F)->getName(), "replica-device-setter");
  EXPECT_EQ(apply(**F, *Var), "/job:ps/task:0");
  EXPECT_EQ(apply(**F, *Op), "/job:worker");
  AttrDict Zero;
  Zero.set("ps_tasks", int64_t(0));
  auto Z = createDeviceFunction("replica-device-setter", Zero);
  ASSERT_TRUE(bool(Z)) << errorMessage(Z.takeError());
  EXPECT_EQ(apply(**Z, *Var), "");
}

TEST_F(DeviceFunctionsTest, CreateErrors) {
  AttrDict None;
  EXPECT_EQ(createError("round-robin", None),
            "unknown device function 'round-robin' (known: ps-round-robin, "
            "replica-device-setter)");
  EXPECT_EQ(createError("ps-round-robin", None),
            "device function ps-round-robin needs argument 'tasks'");
  EXPECT_EQ(createError("replica-device-setter", None),
            "device function replica-device-setter needs argument "
            "'ps_tasks'");

  AttrDict Unknown;
  Unknown.set("tasks", int64_t(1));
  Unknown.set("shards", int64_t(1));
  EXPECT_EQ(createError("ps-round-robin", Unknown),
            "unknown argument 'shards' for device function ps-round-robin "
            "(it takes ps_device, tasks, ps_ops)");

  AttrDict ZeroTasks;
  ZeroTasks.set("tasks", int64_t(0));
  EXPECT_EQ(createError("ps-round-robin", ZeroTasks),
            "argument 'tasks' of ps-round-robin must be at least 1, got 0");

  AttrDict Negative;
  Negative.set("ps_tasks", int64_t(-1));
  EXPECT_EQ(createError("replica-device-setter", Negative),
            "argument 'ps_tasks' of replica-device-setter must be at least 0, "
            "got -1");

  AttrDict NotInt;
  NotInt.set("tasks", "two");
  EXPECT_EQ(createError("ps-round-robin", NotInt),
            "argument 'tasks' of ps-round-robin must be an integer");

  AttrDict BadDevice;
  BadDevice.set("tasks", int64_t(1));
  BadDevice.set("ps_device", "/job:ps/foo:1");
  EXPECT_EQ(createError("ps-round-robin", BadDevice),
            "argument 'ps_device' of ps-round-robin: unknown field 'foo' in "
            "device '/job:ps/foo:1'");

  AttrDict DeviceNotString;
  DeviceNotString.set("ps_tasks", int64_t(1));
  DeviceNotString.set("worker_device", int64_t(3));
  EXPECT_EQ(createError("replica-device-setter", DeviceNotString),
            "argument 'worker_device' of replica-device-setter must be a "
            "device string");

  AttrDict BadOp;
  BadOp.set("tasks", int64_t(1));
  BadOp.set("ps_ops", std::vector<std::string>{"Variable", "VariableV2"});
  EXPECT_EQ(createError("ps-round-robin", BadOp),
            "argument 'ps_ops' of ps-round-robin names unknown op "
            "'VariableV2'");

  // A single op name is checked like a list (it used to match nothing,
  // silently).
  AttrDict BadSingleOp;
  BadSingleOp.set("ps_tasks", int64_t(1));
  BadSingleOp.set("ps_ops", "VariableV2");
  EXPECT_EQ(createError("replica-device-setter", BadSingleOp),
            "argument 'ps_ops' of replica-device-setter names unknown op "
            "'VariableV2'");

  AttrDict OpsNotList;
  OpsNotList.set("tasks", int64_t(1));
  OpsNotList.set("ps_ops", int64_t(1));
  EXPECT_EQ(createError("ps-round-robin", OpsNotList),
            "argument 'ps_ops' of ps-round-robin must be a list of op names");

  AttrDict BadBool;
  BadBool.set("ps_tasks", int64_t(1));
  BadBool.set("merge_devices", int64_t(1));
  EXPECT_EQ(createError("replica-device-setter", BadBool),
            "argument 'merge_devices' of replica-device-setter must be true "
            "or false");
}

TEST_F(DeviceFunctionsTest, Names) {
  auto Names = deviceFunctionNames();
  ASSERT_EQ(Names.size(), 2u);
  EXPECT_EQ(Names[0], "ps-round-robin");
  EXPECT_EQ(Names[1], "replica-device-setter");
}

} // namespace
