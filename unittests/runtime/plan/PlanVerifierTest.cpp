//===- PlanVerifierTest.cpp - verifyPlan and printPlanText ----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Plans built with the FlatBuffers builder: the smallest valid plan, one
// AllReduce over one CPU, with the settings of its collective and
// deployment varied.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Plan.h"

#include "gtest/gtest.h"

#include <sstream>

using namespace mdrt;

namespace {

/// What a test plan holds.
struct PlanSpec {
  /// Collective.replicas; unset leaves the field at its default (1).
  int Replicas = 1;
  bool SetReplicas = false;
  /// No Deployment table when false.
  bool HasDeployment = true;
  std::string Strategy = "mirrored";
  int NumReplicas = 1;
};

/// One CPU, two float32[1] buffers, a train program with one AllReduce
/// kernel and its collective.
std::vector<uint8_t> buildPlan(const PlanSpec &S) {
  flatbuffers::FlatBufferBuilder FB;
  const char *DevName = "/job:worker/replica:0/task:0/device:CPU:0";
  std::vector<flatbuffers::Offset<fb::Device>> Devices = {
      fb::CreateDeviceDirect(FB, DevName, fb::DeviceKind::CPU, "worker", 0, 0,
                             0, /*arena_bytes=*/128, /*persistent_bytes=*/0)};
  std::vector<int64_t> Shape = {1};
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers = {
      fb::CreateBufferDirect(FB, "g", 0, fb::DType::Float32, &Shape, 0, 4),
      fb::CreateBufferDirect(FB, "sum", 0, fb::DType::Float32, &Shape, 64, 4)};
  std::vector<uint32_t> In = {0}, Out = {1};
  std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
      fb::CreateKernelDirect(FB, "allreduce/bucket_0/replica_0", "AllReduce",
                             nullptr, &In, &Out)};
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
      fb::CreateDeviceProgramDirect(FB, 0, &Kernels, 128, 128,
                                    "greedy-by-size")};
  // The vectors first: a table is built after its children.
  std::vector<uint32_t> CollDevices = {0}, CollKernels = {0};
  auto Group = FB.CreateString("gradients");
  auto CD = FB.CreateVector(CollDevices);
  auto CK = FB.CreateVector(CollKernels);
  fb::CollectiveBuilder CB(FB);
  CB.add_group(Group);
  CB.add_devices(CD);
  CB.add_kernels(CK);
  if (S.SetReplicas)
    CB.add_replicas(S.Replicas);
  std::vector<flatbuffers::Offset<fb::Collective>> Colls = {CB.Finish()};
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", /*batch_size=*/1, &DevProgs, nullptr,
                              nullptr, &Colls)};
  flatbuffers::Offset<fb::Deployment> Dep;
  if (S.HasDeployment)
    Dep = fb::CreateDeploymentDirect(FB, S.Strategy.c_str(), 1, true, 0,
                                     S.NumReplicas, 0, 1, "sgd", 0.1);
  auto Root =
      fb::CreatePlanDirect(FB, kPlanVersion, "test", "Test", 0, Dep, &Devices,
                           &Buffers, nullptr, nullptr, &Progs);
  fb::FinishPlanBuffer(FB, Root);
  return std::vector<uint8_t>(FB.GetBufferPointer(),
                              FB.GetBufferPointer() + FB.GetSize());
}

std::string verify(const PlanSpec &S) {
  std::vector<uint8_t> B = buildPlan(S);
  Status St = verifyPlan(B.data(), B.size());
  return St.isOk() ? "" : St.message();
}

/// The collective line of the plan's text form.
std::string collectiveLine(const PlanSpec &S) {
  std::vector<uint8_t> B = buildPlan(S);
  std::ostringstream OS;
  printPlanText(*fb::GetPlan(B.data()), OS);
  std::istringstream Lines(OS.str());
  for (std::string L; std::getline(Lines, L);)
    if (L.rfind("  collective ", 0) == 0)
      return L;
  return "";
}

} // namespace

TEST(PlanVerifierTest, CollectiveWithinOneProcess) {
  PlanSpec S;
  EXPECT_EQ(verify(S), "");
  S.SetReplicas = true; // written explicitly, same value
  EXPECT_EQ(verify(S), "");
  // Any deployment: one process needs no multi-worker setting.
  S.Strategy = "ps";
  S.NumReplicas = 3;
  EXPECT_EQ(verify(S), "");
  S.HasDeployment = false;
  EXPECT_EQ(verify(S), "");
}

TEST(PlanVerifierTest, CollectiveAcrossWorkers) {
  PlanSpec S;
  S.SetReplicas = true;
  S.Replicas = 2;
  S.NumReplicas = 2;
  EXPECT_EQ(verify(S), "");
  S.Replicas = 4;
  S.NumReplicas = 4;
  EXPECT_EQ(verify(S), "");
}

TEST(PlanVerifierTest, BadReplicas) {
  PlanSpec S;
  S.SetReplicas = true;
  S.Replicas = 0;
  EXPECT_EQ(verify(S), "a collective of program 'train' has replicas 0; it "
                       "must be at least 1");
  S.Replicas = -3;
  EXPECT_EQ(verify(S), "a collective of program 'train' has replicas -3; it "
                       "must be at least 1");

  S.Replicas = 2;
  S.Strategy = "ps";
  S.NumReplicas = 2;
  EXPECT_EQ(verify(S),
            "a collective of program 'train' spans 2 replicas, but the plan's "
            "deployment has strategy 'ps' (only the mirrored strategy reduces "
            "across replicas)");

  S.Strategy = "mirrored";
  S.NumReplicas = 3;
  EXPECT_EQ(verify(S), "a collective of program 'train' spans 2 replicas, but "
                       "the plan's deployment has num_replicas 3");
  S.NumReplicas = 1;
  EXPECT_EQ(verify(S), "a collective of program 'train' spans 2 replicas, but "
                       "the plan's deployment has num_replicas 1");

  S.HasDeployment = false;
  EXPECT_EQ(verify(S), "a collective of program 'train' spans 2 replicas, but "
                       "the plan has no deployment");
}

TEST(PlanTextTest, CollectiveLine) {
  PlanSpec S;
  EXPECT_EQ(collectiveLine(S), "  collective gradients bucket=0 d0:k0");
  S.SetReplicas = true;
  EXPECT_EQ(collectiveLine(S), "  collective gradients bucket=0 d0:k0");
  S.Replicas = 2;
  S.NumReplicas = 2;
  EXPECT_EQ(collectiveLine(S),
            "  collective gradients bucket=0 d0:k0 replicas=2");
}
