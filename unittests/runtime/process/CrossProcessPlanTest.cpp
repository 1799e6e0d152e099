//===- CrossProcessPlanTest.cpp - Plans whose collectives span processes --===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The executor's checks of a multi-worker plan against the run's processes
// (thread groups stand in for them), on plans built with the FlatBuffers
// builder: two CPU devices, an all-reduce on each.
//
//===----------------------------------------------------------------------===//

#include "ForwardingGroup.h"
#include "mdrt/Executor.h"
#include "mdrt/Trainer.h"

#include "gtest/gtest.h"

#ifdef __linux__
#include <sched.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <thread>

using namespace mdrt;

namespace {

/// Finishes the plan of \p Devices, \p Buffers and \p Progs (and \p Dep,
/// when not null) and loads it as \p Name; null, with a test failure, when
/// it does not verify.
std::shared_ptr<const PlanFile>
finishPlan(flatbuffers::FlatBufferBuilder &FB,
           const std::vector<flatbuffers::Offset<fb::Device>> &Devices,
           const std::vector<flatbuffers::Offset<fb::Buffer>> &Buffers,
           const std::vector<flatbuffers::Offset<fb::Program>> &Progs,
           flatbuffers::Offset<fb::Deployment> Dep, const char *Name) {
  auto Root =
      fb::CreatePlanDirect(FB, kPlanVersion, "test", "Test", 0, Dep, &Devices,
                           &Buffers, nullptr, nullptr, &Progs);
  fb::FinishPlanBuffer(FB, Root);
  auto P = PlanFile::fromBytes(
      std::vector<uint8_t>(FB.GetBufferPointer(),
                           FB.GetBufferPointer() + FB.GetSize()),
      Name);
  EXPECT_TRUE(P.isOk()) << P.status().message();
  return P.isOk() ? std::shared_ptr<const PlanFile>(P.take()) : nullptr;
}

struct Spec {
  int ReplicaId = 0;
  int NumReplicas = 2;
  /// The devices of each of the two collectives (plan device indices).
  std::vector<uint32_t> FirstDevices = {0, 1};
  std::vector<uint32_t> SecondDevices = {0, 1};
  /// Bind every all-reduce's input as a program input and its output as a
  /// program output.
  bool BindIO = false;
};

/// Two CPUs; on each, two all-reduces (buckets 0 and 1) of one float32[1]
/// buffer; the collectives list the devices \p S names.
std::shared_ptr<const PlanFile> buildPlan(const Spec &S) {
  flatbuffers::FlatBufferBuilder FB;
  std::string Task =
      "/job:worker/replica:0/task:" + std::to_string(S.ReplicaId);
  std::vector<flatbuffers::Offset<fb::Device>> Devices;
  for (int D = 0; D < 2; ++D)
    Devices.push_back(fb::CreateDeviceDirect(
        FB, (Task + "/device:CPU:" + std::to_string(D)).c_str(),
        fb::DeviceKind::CPU, "worker", 0, S.ReplicaId, D,
        /*arena_bytes=*/256, /*persistent_bytes=*/0));
  std::vector<int64_t> Shape = {1};
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers;
  // Device D, bucket K: input buffer 4D+2K, output 4D+2K+1.
  for (uint32_t D = 0; D < 2; ++D)
    for (int K = 0; K < 2; ++K)
      for (int IO = 0; IO < 2; ++IO)
        Buffers.push_back(fb::CreateBufferDirect(
            FB, ("b" + std::to_string(Buffers.size())).c_str(), D,
            fb::DType::Float32, &Shape, uint64_t(64 * (2 * K + IO)), 4));
  // A device runs the all-reduces whose collective lists it; kernel ids
  // count through the devices.
  auto Lists = [&](uint32_t K, uint32_t D) {
    const std::vector<uint32_t> &Devs =
        K == 0 ? S.FirstDevices : S.SecondDevices;
    return std::find(Devs.begin(), Devs.end(), D) != Devs.end();
  };
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs;
  std::vector<std::vector<uint32_t>> CollDevs(2), CollKernels(2);
  uint32_t Id = 0;
  for (uint32_t D = 0; D < 2; ++D) {
    std::vector<flatbuffers::Offset<fb::Kernel>> Kernels;
    for (uint32_t K = 0; K < 2; ++K) {
      if (!Lists(K, D))
        continue;
      std::vector<uint32_t> In = {4 * D + 2 * K}, Out = {4 * D + 2 * K + 1};
      Kernels.push_back(
          fb::CreateKernelDirect(FB,
                                 ("allreduce/bucket_" + std::to_string(K) +
                                  "/replica_" + std::to_string(D))
                                     .c_str(),
                                 "AllReduce", nullptr, &In, &Out));
      CollDevs[K].push_back(D);
      CollKernels[K].push_back(Id++);
    }
    DevProgs.push_back(
        fb::CreateDeviceProgramDirect(FB, D, &Kernels, 256, 256, "naive"));
  }
  std::vector<flatbuffers::Offset<fb::Collective>> Colls;
  for (uint32_t K = 0; K < 2; ++K)
    Colls.push_back(fb::CreateCollectiveDirect(FB, "gradients", K, &CollDevs[K],
                                               &CollKernels[K], S.NumReplicas));
  std::vector<flatbuffers::Offset<fb::InputBinding>> Inputs;
  std::vector<flatbuffers::Offset<fb::Output>> Outputs;
  if (S.BindIO)
    for (uint32_t B = 0; B < Buffers.size(); B += 2) {
      std::string Name = "b" + std::to_string(B);
      Inputs.push_back(
          fb::CreateInputBindingDirect(FB, Name.c_str(), Name.c_str(), B));
      Outputs.push_back(
          fb::CreateOutputDirect(FB, ("b" + std::to_string(B + 1)).c_str(),
                                 fb::OutputKind::Metric, B + 1));
    }
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", 2, &DevProgs,
                              S.BindIO ? &Inputs : nullptr,
                              S.BindIO ? &Outputs : nullptr, &Colls)};
  auto Dep = fb::CreateDeploymentDirect(FB, "mirrored", 2, true, S.ReplicaId,
                                        S.NumReplicas, 0, 1, "sgd", 0.1);
  return finishPlan(FB, Devices, Buffers, Progs, Dep, "test.mdp");
}

/// The executor's error for \p S run as rank \p Rank of \p Procs processes
/// ("" when it is created).
std::string create(const Spec &S, int Procs, int Rank) {
  auto Plan = buildPlan(S);
  if (!Plan)
    return "no plan";
  auto Groups = createThreadProcessGroups(Procs);
  ExecutorOptions O;
  O.Threads = 1;
  O.Processes = Groups[size_t(Rank)].get();
  auto E = Executor::create(Plan, O);
  return E.isOk() ? "" : E.status().message();
}

} // namespace

TEST(CrossProcessPlanTest, FitsItsProcesses) {
  EXPECT_EQ(create(Spec(), 2, 0), "");
  Spec R1;
  R1.ReplicaId = 1;
  EXPECT_EQ(create(R1, 2, 1), "");
}

TEST(CrossProcessPlanTest, NeedsAProcessPerReplica) {
  EXPECT_EQ(create(Spec(), 3, 0),
            "the plan is replica 0 of 2 (mirrored), but the run has 3 "
            "processes; it needs 2, one per replica");
  Spec R1;
  R1.ReplicaId = 1;
  EXPECT_EQ(create(R1, 2, 0),
            "the plan is replica 1 of 2, but it runs in process 0: give each "
            "process the plan compiled with --replica-id=<its rank> "
            "({replica} in the plan path stands for it)");
}

TEST(CrossProcessPlanTest, CollectivesShareADevice) {
  // One device in common: the order is that device's.
  Spec S;
  S.SecondDevices = {1};
  EXPECT_EQ(create(S, 2, 0), "");
  // None: two processes could pair the all-reduces differently.
  S.FirstDevices = {0};
  EXPECT_EQ(create(S, 2, 0),
            "program 'train': its all-reduces across processes have no device "
            "in common, so the processes could run them in different orders "
            "(mdplan writes no such plan: recompile it)");
}

namespace {

/// One CPU, a Dropout kernel of rate 0.5 on an input of 64 ones, its mask
/// an output; a mirrored deployment of \p Replicas, replica \p Replica.
std::shared_ptr<const PlanFile> dropoutPlan(int Replica, int Replicas) {
  flatbuffers::FlatBufferBuilder FB;
  std::string Task = "/job:worker/replica:0/task:" + std::to_string(Replica);
  std::vector<flatbuffers::Offset<fb::Device>> Devices = {
      fb::CreateDeviceDirect(FB, (Task + "/device:CPU:0").c_str(),
                             fb::DeviceKind::CPU, "worker", 0, Replica, 0,
                             /*arena_bytes=*/768, /*persistent_bytes=*/0)};
  std::vector<int64_t> Shape = {64};
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers;
  for (const char *Name : {"x", "y", "mask"})
    Buffers.push_back(fb::CreateBufferDirect(
        FB, Name, 0, fb::DType::Float32, &Shape, 256 * Buffers.size(), 256));
  std::vector<flatbuffers::Offset<fb::Attr>> Attrs = {
      fb::CreateAttrDirect(FB, "rate", fb::AttrKind::Float, 0, 0.5)};
  std::vector<uint32_t> In = {0}, Out = {1, 2};
  std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
      fb::CreateKernelDirect(FB, "dropout", "Dropout", &Attrs, &In, &Out)};
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
      fb::CreateDeviceProgramDirect(FB, 0, &Kernels, 768, 768, "naive")};
  std::vector<flatbuffers::Offset<fb::InputBinding>> Inputs = {
      fb::CreateInputBindingDirect(FB, "x", "x", 0)};
  std::vector<flatbuffers::Offset<fb::Output>> Outputs = {
      fb::CreateOutputDirect(FB, "mask", fb::OutputKind::Metric, 2)};
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", 64, &DevProgs, &Inputs, &Outputs)};
  auto Dep = fb::CreateDeploymentDirect(FB, "mirrored", 1, true, Replica,
                                        Replicas, 0, 64, "sgd", 0.1);
  return finishPlan(FB, Devices, Buffers, Progs, Dep, "dropout.mdp");
}

/// The mask of one step of dropoutPlan, run by \p Procs (null: alone).
std::vector<double> maskOf(int Replica, int Replicas, ProcessGroup *Procs) {
  ExecutorOptions O;
  O.Threads = 1;
  O.Seed = 5;
  O.Processes = Procs;
  auto E = Executor::create(dropoutPlan(Replica, Replicas), O);
  if (!E.isOk()) {
    ADD_FAILURE() << E.status().message();
    return {};
  }
  std::fill_n(static_cast<float *>((*E)->inputs(0)[0].Host), 64, 1.0f);
  EXPECT_TRUE((*E)->run(0, 3).isOk());
  std::vector<OutputValue> Out;
  EXPECT_TRUE((*E)->readOutputs(0, Out).isOk());
  return Out.empty() ? std::vector<double>() : Out[0].Values;
}

} // namespace

/// Every replica's plan numbers its kernels alike; their dropout masks must
/// still differ (each replica's rows are other examples), and replica 0's
/// are a lone process's.
TEST(CrossProcessPlanTest, DropoutMasksDifferPerReplica) {
  auto Groups = createThreadProcessGroups(2);
  std::vector<double> Alone = maskOf(0, 1, nullptr);
  std::vector<double> R0 = maskOf(0, 2, Groups[0].get());
  std::vector<double> R1 = maskOf(1, 2, Groups[1].get());
  ASSERT_EQ(Alone.size(), 64u);
  EXPECT_EQ(R0, Alone);
  EXPECT_NE(R1, R0);
  // Still a dropout mask of rate 0.5: zeros and twos.
  for (double V : R1)
    EXPECT_TRUE(V == 0.0 || V == 2.0) << V;
}

/// One CPU and, in each program of \p Programs, one AllReduce ("sum") of a
/// tensor of two \p Type elements.
std::shared_ptr<const PlanFile>
sumPlan(fb::DType Type, std::initializer_list<const char *> Programs,
        const char *Name) {
  flatbuffers::FlatBufferBuilder FB;
  std::vector<flatbuffers::Offset<fb::Device>> Devices = {
      fb::CreateDeviceDirect(FB, "/job:worker/replica:0/task:0/device:CPU:0",
                             fb::DeviceKind::CPU, "worker", 0, 0, 0, 128, 0)};
  std::vector<int64_t> Shape = {2};
  uint64_t Bytes = 2 * dtypeSize(DType(Type));
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers = {
      fb::CreateBufferDirect(FB, "a", 0, Type, &Shape, 0, Bytes),
      fb::CreateBufferDirect(FB, "s", 0, Type, &Shape, 64, Bytes)};
  std::vector<flatbuffers::Offset<fb::Program>> Progs;
  for (const char *Prog : Programs) {
    std::vector<uint32_t> In = {0}, Out = {1}, Devs = {0}, Ks = {0};
    std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
        fb::CreateKernelDirect(FB, "sum", "AllReduce", nullptr, &In, &Out)};
    std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
        fb::CreateDeviceProgramDirect(FB, 0, &Kernels, 128, 128, "naive")};
    std::vector<flatbuffers::Offset<fb::Collective>> Colls = {
        fb::CreateCollectiveDirect(FB, "gradients", 0, &Devs, &Ks, 1)};
    Progs.push_back(fb::CreateProgramDirect(FB, Prog, 1, &DevProgs, nullptr,
                                            nullptr, &Colls));
  }
  return finishPlan(FB, Devices, Buffers, Progs, 0, Name);
}

TEST(CrossProcessPlanTest, CollectivesAddFloats) {
  // An int64 all-reduce (mdplan writes none) is refused, not misread.
  auto P = sumPlan(fb::DType::Int64, {"train"}, "ints.mdp");
  ASSERT_TRUE(P);
  ExecutorOptions O;
  O.Threads = 1;
  auto E = Executor::create(P, O);
  ASSERT_FALSE(E.isOk());
  EXPECT_EQ(E.status().message(), "all-reduce 'sum' sums int64 tensors; "
                                  "collectives add float32 and float64 only");
}

TEST(CrossProcessPlanTest, EvaluationHasNoCollectives) {
  // Each process evaluates its shard alone, so the trainer refuses an eval
  // program with collectives (mdplan's have none).
  auto P = sumPlan(fb::DType::Float32, {"train", "eval"}, "evalsum.mdp");
  ASSERT_TRUE(P);
  TrainOptions O;
  O.Synthetic = true;
  O.Exec.Threads = 1;
  std::ostringstream Log;
  auto T = Trainer::create(P, O, Log);
  ASSERT_FALSE(T.isOk());
  EXPECT_EQ(T.status().message(), "plan 'evalsum.mdp': its eval program has "
                                  "collectives, which mdrun's evaluation "
                                  "does not run (train with --no-eval)");
}

/// Two processes (threads here) of two devices each, both devices in both
/// buckets: the sums across processes, on each executor's queue or on the
/// devices, are the same, step after step. Each input is
/// 1000 * step + 100 * rank + 10 * device + bucket; its sum over the four
/// participants of a bucket is 4000 * step + 200 + 20 + 4 * bucket.
TEST(CrossProcessPlanTest, OverlappedSumsAreTheBlockingOnes) {
  for (bool Overlap : {true, false}) {
    auto Groups = createThreadProcessGroups(2);
    std::vector<std::vector<double>> Got(2);
    std::vector<std::thread> Threads;
    for (int R = 0; R < 2; ++R)
      Threads.emplace_back([&, R] {
        Spec S;
        S.ReplicaId = R;
        S.BindIO = true;
        auto Plan = buildPlan(S);
        ExecutorOptions O;
        O.Threads = 1;
        O.Processes = Groups[size_t(R)].get();
        O.Overlap = Overlap ? OverlapMode::On : OverlapMode::Off;
        auto E = Executor::create(Plan, O);
        if (!E.isOk()) {
          ADD_FAILURE() << E.status().message();
          Groups[size_t(R)]->abort(1);
        }
        for (int Step = 0; Step < 3; ++Step) {
          for (const InputSlot &In : (*E)->inputs(0)) {
            // "b<buffer>": device D, bucket K is buffer 4D+2K.
            int B = std::stoi(In.Name.substr(1));
            *static_cast<float *>(In.Host) =
                float(1000 * Step + 100 * R + 10 * (B / 4) + (B % 4) / 2);
          }
          EXPECT_TRUE((*E)->run(0, uint64_t(Step)).isOk());
          std::vector<OutputValue> Out;
          EXPECT_TRUE((*E)->readOutputs(0, Out).isOk());
          for (const OutputValue &V : Out)
            Got[size_t(R)].push_back(V.Values.at(0));
        }
      });
    for (std::thread &T : Threads)
      T.join();
    std::vector<double> Want;
    for (int Step = 0; Step < 3; ++Step)
      for (int D = 0; D < 2; ++D)
        for (int K = 0; K < 2; ++K)
          Want.push_back(4000.0 * Step + 220 + 4 * K);
    for (int R = 0; R < 2; ++R)
      EXPECT_EQ(Got[size_t(R)], Want)
          << (Overlap ? "overlapped" : "blocking") << ", rank " << R;
  }
}

namespace {

/// A process group whose sums start late: sums queued without a wait
/// before their first reader would almost surely be read before they are
/// written.
class SlowGroup : public ForwardingGroup {
public:
  explicit SlowGroup(std::unique_ptr<ProcessGroup> Inner)
      : ForwardingGroup(std::move(Inner), "slow") {}
  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Buf,
                      size_t Count) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ForwardingGroup::allReduceSum(Type, Send, Buf, Count);
  }
};

/// One CPU of replica \p Replica of 2: input x (float32[4]), "sum" =
/// AllReduce(x), then a Neg whose output is the program's output "r": of
/// the sum (\p Reuse false), or of x into the sum's bytes, which the
/// memory plan may reuse since nothing reads the sum (\p Reuse true).
std::shared_ptr<const PlanFile> readerPlan(int Replica, bool Reuse) {
  flatbuffers::FlatBufferBuilder FB;
  std::string Task = "/job:worker/replica:0/task:" + std::to_string(Replica);
  std::vector<flatbuffers::Offset<fb::Device>> Devices = {
      fb::CreateDeviceDirect(FB, (Task + "/device:CPU:0").c_str(),
                             fb::DeviceKind::CPU, "worker", 0, Replica, 0,
                             /*arena_bytes=*/192, /*persistent_bytes=*/0)};
  std::vector<int64_t> Shape = {4};
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers = {
      fb::CreateBufferDirect(FB, "x", 0, fb::DType::Float32, &Shape, 0, 16),
      fb::CreateBufferDirect(FB, "sum", 0, fb::DType::Float32, &Shape, 64, 16),
      fb::CreateBufferDirect(FB, "r", 0, fb::DType::Float32, &Shape,
                             Reuse ? 64 : 128, 16)};
  std::vector<uint32_t> In = {0}, Sum = {1}, NegIn = {Reuse ? 0u : 1u},
                        NegOut = {2}, Devs = {0}, Ks = {0};
  std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
      fb::CreateKernelDirect(FB, "allreduce/bucket_0/replica_0", "AllReduce",
                             nullptr, &In, &Sum),
      fb::CreateKernelDirect(FB, "neg", "Neg", nullptr, &NegIn, &NegOut)};
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
      fb::CreateDeviceProgramDirect(FB, 0, &Kernels, 192, 192, "naive")};
  std::vector<flatbuffers::Offset<fb::Collective>> Colls = {
      fb::CreateCollectiveDirect(FB, "gradients", 0, &Devs, &Ks, 2)};
  std::vector<flatbuffers::Offset<fb::InputBinding>> Inputs = {
      fb::CreateInputBindingDirect(FB, "x", "x", 0)};
  std::vector<flatbuffers::Offset<fb::Output>> Outputs = {
      fb::CreateOutputDirect(FB, "r", fb::OutputKind::Metric, 2)};
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", 4, &DevProgs, &Inputs, &Outputs,
                              &Colls)};
  auto Dep = fb::CreateDeploymentDirect(FB, "mirrored", 1, true, Replica, 2, 0,
                                        4, "sgd", 0.1);
  return finishPlan(FB, Devices, Buffers, Progs, Dep, "reader.mdp");
}

} // namespace

/// The queued sums reach the kernel that reads them, and a kernel that
/// reuses their bytes writes after them: each device waits for them just
/// in time. The trace shows the queue's track, so the sums did go through
/// it, and the device's wait.
TEST(CrossProcessPlanTest, QueuedSumsComeBeforeTheirReaders) {
  for (bool Reuse : {false, true}) {
    auto Threads = createThreadProcessGroups(2);
    std::vector<std::unique_ptr<ProcessGroup>> Groups;
    for (auto &T : Threads)
      Groups.push_back(std::make_unique<SlowGroup>(std::move(T)));
    std::vector<std::vector<double>> Got(2);
    std::vector<std::string> Traces(2);
    std::vector<std::thread> Workers;
    for (int R = 0; R < 2; ++R)
      Workers.emplace_back([&, R] {
        ExecutorOptions O;
        O.Threads = 1;
        O.Processes = Groups[size_t(R)].get();
        O.Overlap = OverlapMode::On;
        auto E = Executor::create(readerPlan(R, Reuse), O);
        if (!E.isOk()) {
          ADD_FAILURE() << E.status().message();
          Groups[size_t(R)]->abort(1);
        }
        (*E)->setTracing(true);
        for (int Step = 0; Step < 3; ++Step) {
          float *X = static_cast<float *>((*E)->inputs(0)[0].Host);
          for (int I = 0; I < 4; ++I)
            X[I] = float(1000 * Step + 100 * R + I);
          EXPECT_TRUE((*E)->run(0, uint64_t(Step)).isOk());
          std::vector<OutputValue> Out;
          EXPECT_TRUE((*E)->readOutputs(0, Out).isOk());
          Got[size_t(R)].insert(Got[size_t(R)].end(), Out.at(0).Values.begin(),
                                Out.at(0).Values.end());
        }
        std::ostringstream OS;
        (*E)->writeTrace(OS);
        Traces[size_t(R)] = OS.str();
      });
    for (std::thread &T : Workers)
      T.join();
    for (int R = 0; R < 2; ++R) {
      std::vector<double> Want;
      for (int Step = 0; Step < 3; ++Step)
        for (int I = 0; I < 4; ++I)
          Want.push_back(Reuse ? -(1000.0 * Step + 100 * R + I)
                               : -(2000.0 * Step + 100 + 2 * I));
      EXPECT_EQ(Got[size_t(R)], Want)
          << (Reuse ? "reused bytes" : "reader") << ", rank " << R;
      EXPECT_NE(Traces[size_t(R)].find(
                    "\"args\":{\"name\":\"all-reduces across processes\"}"),
                std::string::npos);
      EXPECT_NE(Traces[size_t(R)].find(
                    "{\"name\":\"wait for allreduce/bucket_0/replica_0\","
                    "\"cat\":\"Wait\""),
                std::string::npos);
    }
  }
}

/// The executor says whether its all-reduces across processes overlap the
/// computation, and why: as told, or (auto) when the process may run on
/// more CPUs than its devices have intra-op threads.
TEST(CrossProcessPlanTest, OverlapIsChosenAndNoted) {
  auto Groups = createThreadProcessGroups(2);
  auto NoteOf = [&](OverlapMode Mode, int Threads) -> std::string {
    ExecutorOptions O;
    O.Threads = Threads;
    O.Processes = Groups[0].get();
    O.Overlap = Mode;
    auto E = Executor::create(readerPlan(0, false), O);
    if (!E.isOk())
      return E.status().message();
    for (const std::string &N : (*E)->notes())
      if (N.rfind("all-reduces across processes", 0) == 0)
        return N;
    return "no note";
  };
  EXPECT_EQ(NoteOf(OverlapMode::On, 1),
            "all-reduces across processes overlap the computation "
            "(--overlap=on)");
  EXPECT_EQ(NoteOf(OverlapMode::Off, 1),
            "all-reduces across processes block their device (--overlap=off)");
  // Auto: the thread groups share this process's CPUs.
  int Allowed = int(std::thread::hardware_concurrency());
#ifdef __linux__
  cpu_set_t Set;
  CPU_ZERO(&Set);
  if (sched_getaffinity(0, sizeof(Set), &Set) == 0)
    Allowed = CPU_COUNT(&Set);
#endif
  int Cpus = Allowed / 2;
  std::string One = NoteOf(OverlapMode::Auto, 1);
  if (Cpus > 1)
    EXPECT_EQ(One, "all-reduces across processes overlap the computation (a "
                   "core to spare: " +
                       std::to_string(Cpus) +
                       " CPUs per process for 1 intra-op thread)");
  else if (Cpus == 1)
    EXPECT_EQ(One, "all-reduces across processes block their device (no core "
                   "to spare: 1 CPU per process for 1 intra-op thread; "
                   "--overlap=on to overlap anyway)");
  else
    EXPECT_EQ(One, "all-reduces across processes block their device (no core "
                   "to spare: 1 CPU for 2 processes; --overlap=on to overlap "
                   "anyway)");
  std::string Auto = NoteOf(OverlapMode::Auto, 100000);
  EXPECT_EQ(Auto.rfind("all-reduces across processes block their device "
                       "(no core to spare: ",
                       0),
            0u)
      << Auto;
  EXPECT_NE(Auto.find(" for 100000 intra-op threads; --overlap=on to "
                      "overlap anyway)"),
            std::string::npos)
      << Auto;
}

/// By default a device has as many intra-op threads as the process has
/// CPUs to itself (its affinity mask, and its share of the machine's among
/// the run's processes there: the two thread groups count as two processes
/// of this machine), which leaves no core to spare for overlapping.
TEST(CrossProcessPlanTest, DefaultThreadsAreTheProcesssShare) {
  auto Groups = createThreadProcessGroups(2);
  ExecutorOptions O;
  O.Processes = Groups[0].get();
  auto E = Executor::create(readerPlan(0, false), O);
  ASSERT_TRUE(E.isOk()) << E.status().message();
  std::string Note;
  for (const std::string &N : (*E)->notes())
    if (N.rfind("all-reduces across processes", 0) == 0)
      Note = N;
  std::smatch M;
  ASSERT_TRUE(std::regex_search(
      Note, M,
      std::regex("block their device \\(no core to spare: ([0-9]+) CPUs? per "
                 "process for ([0-9]+) intra-op threads?;|block their device "
                 "\\(no core to spare: [0-9]+ CPUs? for 2 processes;")))
      << Note;
  if (M[1].matched) {
    EXPECT_EQ(M[1].str(), M[2].str()) << Note;
  }
}
