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

#include <set>
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
  /// The shape of buffer 0 (float32, 4 bytes).
  std::vector<int64_t> Shape0 = {1};
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
      fb::CreateBufferDirect(FB, "g", 0, fb::DType::Float32, &S.Shape0, 0, 4),
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

/// verifyPlan's message ("" when it accepts). The buffers of these tests
/// come from a FlatBufferBuilder (changed in place at most), so
/// checkBuiltPlan, mdplan's check of what it writes, must agree.
std::string verifyBuilt(const uint8_t *Data, size_t Size) {
  Status St = verifyPlan(Data, Size);
  Status Built = checkBuiltPlan(Data, Size);
  EXPECT_EQ(St.isOk(), Built.isOk());
  EXPECT_EQ(St.message(), Built.message());
  return St.isOk() ? "" : St.message();
}

std::string verifyBytes(const std::vector<uint8_t> &B) {
  return verifyBuilt(B.data(), B.size());
}

std::string verify(const PlanSpec &S) { return verifyBytes(buildPlan(S)); }

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

TEST(PlanVerifierTest, MisalignedShape) {
  // FlatBuffers' verifier checks the alignment of a vector's length, not of
  // its elements. Buffer 0's shape [1, 1] made [x] one word later: its
  // length where the first dim began, its dim 4 bytes off the 8-byte
  // alignment of an int64.
  PlanSpec S;
  S.Shape0 = {1, 1};
  std::vector<uint8_t> B = buildPlan(S);
  ASSERT_EQ(verifyBytes(B), "");
  // The generated tables hide flatbuffers::Table (a private base).
  auto *Table = reinterpret_cast<const flatbuffers::Table *>(
      fb::GetPlan(B.data())->buffers()->Get(0));
  auto *Field =
      const_cast<uint8_t *>(Table->GetAddressOf(fb::Buffer::VT_SHAPE));
  ASSERT_NE(Field, nullptr);
  using flatbuffers::uoffset_t;
  uoffset_t Off = flatbuffers::ReadScalar<uoffset_t>(Field);
  flatbuffers::WriteScalar<uoffset_t>(Field + Off + 4, 1);
  flatbuffers::WriteScalar<uoffset_t>(Field, Off + 4);
  const auto *Shape = fb::GetPlan(B.data())->buffers()->Get(0)->shape();
  ASSERT_EQ(Shape->size(), 1u);
  ASSERT_NE(reinterpret_cast<uintptr_t>(Shape->Data()) % alignof(int64_t), 0u);
  EXPECT_EQ(verifyBytes(B), "buffer 0 has a misaligned shape");
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

namespace {

/// One kernel of a progress test: an AllReduce (of the collectives that
/// list it) or an Identity, and the kernels it waits for.
struct KSpec {
  std::string Name;
  bool AllReduce = false;
  std::vector<uint32_t> Waits = {};
  /// "Send" or "Recv" (then Channel is its channel), else as above.
  std::string Op = {};
  int64_t Channel = -1;
};

/// Two CPUs, each with its kernels (ids count through device 0, then 1),
/// each kernel on its own pair of float32[1] buffers; \p Colls lists the
/// kernels of each collective.
std::string verifyProgress(const std::vector<std::vector<KSpec>> &PerDevice,
                           const std::vector<std::vector<uint32_t>> &Colls) {
  flatbuffers::FlatBufferBuilder FB;
  std::vector<flatbuffers::Offset<fb::Device>> Devices;
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers;
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs;
  std::vector<int64_t> Shape = {1};
  std::set<uint32_t> Waited;
  for (const auto &Ks : PerDevice)
    for (const KSpec &K : Ks)
      Waited.insert(K.Waits.begin(), K.Waits.end());
  uint32_t Id = 0;
  for (uint32_t D = 0; D < PerDevice.size(); ++D) {
    std::string Name =
        "/job:worker/replica:0/task:0/device:CPU:" + std::to_string(D);
    uint64_t Bytes = 64 * 2 * PerDevice[D].size() + 64;
    Devices.push_back(fb::CreateDeviceDirect(FB, Name.c_str(),
                                             fb::DeviceKind::CPU, "worker", 0,
                                             0, int(D), Bytes, 0));
    std::vector<flatbuffers::Offset<fb::Kernel>> Kernels;
    for (uint32_t I = 0; I < PerDevice[D].size(); ++I, ++Id) {
      const KSpec &K = PerDevice[D][I];
      std::vector<uint32_t> In = {uint32_t(Buffers.size())};
      Buffers.push_back(fb::CreateBufferDirect(FB, (K.Name + "/in").c_str(), D,
                                               fb::DType::Float32, &Shape,
                                               128 * I, 4));
      std::vector<uint32_t> Out = {uint32_t(Buffers.size())};
      Buffers.push_back(fb::CreateBufferDirect(
          FB, K.Name.c_str(), D, fb::DType::Float32, &Shape, 128 * I + 64, 4));
      std::string Op = !K.Op.empty() ? K.Op
                       : K.AllReduce ? "AllReduce"
                                     : "Identity";
      std::vector<flatbuffers::Offset<fb::Attr>> Attrs;
      if (K.Channel >= 0)
        Attrs.push_back(
            fb::CreateAttrDirect(FB, "channel", fb::AttrKind::Int, K.Channel));
      std::vector<uint32_t> None;
      // Sends also signal: the executor waits for them.
      Kernels.push_back(fb::CreateKernelDirect(
          FB, K.Name.c_str(), Op.c_str(), Attrs.empty() ? nullptr : &Attrs,
          Op == "Recv" ? &None : &In, Op == "Send" ? &None : &Out,
          K.Waits.empty() ? nullptr : &K.Waits,
          Waited.count(Id) != 0 || Op == "Send"));
    }
    DevProgs.push_back(
        fb::CreateDeviceProgramDirect(FB, D, &Kernels, Bytes, Bytes, "none"));
  }
  std::vector<flatbuffers::Offset<fb::Collective>> Collectives;
  for (uint32_t C = 0; C < Colls.size(); ++C) {
    std::vector<uint32_t> Devs;
    for (uint32_t K : Colls[C])
      Devs.push_back(K < PerDevice[0].size() ? 0 : 1);
    Collectives.push_back(
        fb::CreateCollectiveDirect(FB, "gradients", C, &Devs, &Colls[C]));
  }
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", 1, &DevProgs, nullptr, nullptr,
                              &Collectives)};
  auto Dep =
      fb::CreateDeploymentDirect(FB, "ps", 2, true, 0, 1, 0, 1, "sgd", 0.1);
  auto Root =
      fb::CreatePlanDirect(FB, kPlanVersion, "test", "Test", 0, Dep, &Devices,
                           &Buffers, nullptr, nullptr, &Progs);
  fb::FinishPlanBuffer(FB, Root);
  return verifyBuilt(FB.GetBufferPointer(), FB.GetSize());
}

KSpec allReduce(std::string Name) { return {std::move(Name), true}; }
KSpec identity(std::string Name, std::vector<uint32_t> Waits = {}) {
  return {std::move(Name), false, std::move(Waits)};
}
KSpec send(std::string Name, int64_t Channel) {
  return {std::move(Name), false, {}, "Send", Channel};
}
KSpec recv(std::string Name, int64_t Channel) {
  return {std::move(Name), false, {}, "Recv", Channel};
}

} // namespace

TEST(PlanVerifierTest, CollectivesInOneOrderOnEveryDevice) {
  // Two buckets, met in the same order on both devices, and a wait.
  EXPECT_EQ(verifyProgress(
                {{allReduce("a0"), allReduce("b0")},
                 {allReduce("a1"), allReduce("b1"), identity("after", {1})}},
                {{0, 2}, {1, 3}}),
            "");
}

TEST(PlanVerifierTest, CollectivesInCrossedOrdersNeverFinish) {
  // Device 0 reaches bucket a first, device 1 bucket b: each waits in its
  // first all-reduce for the other's second.
  EXPECT_EQ(verifyProgress({{allReduce("a0"), allReduce("b0")},
                            {allReduce("b1"), allReduce("a1")}},
                           {{0, 3}, {1, 2}}),
            "program 'train' can never finish a step: kernel 'a0' "
            "(AllReduce) on /job:worker/replica:0/task:0/device:CPU:0 waits "
            "for itself through its devices' kernel order, its waits and its "
            "all-reduces (a cycle)");
}

TEST(PlanVerifierTest, WaitsInACycleNeverFinish) {
  // x0 waits for y1, which runs after y0, which waits for x1, which runs
  // after x0.
  EXPECT_EQ(verifyProgress({{identity("x0", {3}), identity("x1")},
                            {identity("y0", {1}), identity("y1")}},
                           {}),
            "program 'train' can never finish a step: kernel 'x0' (Identity) "
            "on /job:worker/replica:0/task:0/device:CPU:0 waits for itself "
            "through its devices' kernel order, its waits and its "
            "all-reduces (a cycle)");
}

TEST(PlanVerifierTest, AWaitAcrossACollectiveNeverFinishes) {
  // The all-reduce needs y's part, which waits for x, which device 0 runs
  // only after the all-reduce.
  EXPECT_EQ(verifyProgress({{allReduce("r0"), identity("x")},
                            {identity("y", {1}), allReduce("r1")}},
                           {{0, 3}}),
            "program 'train' can never finish a step: kernel 'x' (Identity) "
            "on /job:worker/replica:0/task:0/device:CPU:0 waits for itself "
            "through its devices' kernel order, its waits and its "
            "all-reduces (a cycle)");
}

TEST(PlanVerifierTest, CollectiveMembership) {
  EXPECT_EQ(
      verifyProgress({{allReduce("a0"), allReduce("b0")}, {allReduce("a1")}},
                     {{0, 1, 2}}),
      "a collective of program 'train' has two kernels on "
      "/job:worker/replica:0/task:0/device:CPU:0, whose thread would "
      "wait for itself");
  EXPECT_EQ(
      verifyProgress({{allReduce("a0")}, {allReduce("a1")}}, {{0, 1}, {0, 1}}),
      "kernel 'a0' (AllReduce) on "
      "/job:worker/replica:0/task:0/device:CPU:0 of program 'train' "
      "takes part in two collectives (or twice in one)");
}

TEST(PlanVerifierTest, ARecvWaitsForItsSend) {
  // A transfer in a consistent order verifies.
  EXPECT_EQ(
      verifyProgress(
          {{identity("x"), send("s", 1)}, {recv("r", 1), identity("y")}}, {}),
      "");
  // x waits for y, which device 1 runs after r, which waits for s, which
  // device 0 runs after x: a cycle only through the transfer's wait.
  EXPECT_EQ(verifyProgress({{identity("x", {3}), send("s", 1)},
                            {recv("r", 1), identity("y")}},
                           {}),
            "program 'train' can never finish a step: kernel 'x' (Identity) "
            "on /job:worker/replica:0/task:0/device:CPU:0 waits for itself "
            "through its devices' kernel order, its waits and its "
            "all-reduces (a cycle)");
  // On one device, a Recv before its Send waits for itself.
  EXPECT_EQ(verifyProgress({{recv("r", 2), send("s", 2)}, {identity("y")}}, {}),
            "program 'train' can never finish a step: kernel 'r' (Recv) on "
            "/job:worker/replica:0/task:0/device:CPU:0 waits for itself "
            "through its devices' kernel order, its waits and its "
            "all-reduces (a cycle)");
}

TEST(PlanVerifierTest, OnlyAllReducesTakePartInCollectives) {
  // The executor would run the Identity as a plain kernel, and the other
  // participant would wait in the collective for ever.
  EXPECT_EQ(verifyProgress({{identity("a0")}, {allReduce("a1")}}, {{0, 1}}),
            "kernel 'a0' (Identity) on "
            "/job:worker/replica:0/task:0/device:CPU:0 of program 'train' "
            "takes part in a collective, but only AllReduce kernels do");
}

TEST(PlanVerifierTest, BuiltPlanWithoutRequiredFields) {
  // FlatBufferBuilder only asserts the fields the schema requires (not at
  // all in release builds): checkBuiltPlan reports a missing one, where
  // verifyPlan's FlatBuffers verification rejects the plan.
  for (bool MissingName : {true, false}) {
    flatbuffers::FlatBufferBuilder FB;
    auto Name = FB.CreateString("k");
    auto Op = FB.CreateString("Identity");
    flatbuffers::uoffset_t Start = FB.StartTable();
    if (!MissingName)
      FB.AddOffset(fb::Kernel::VT_NAME, Name);
    else
      FB.AddOffset(fb::Kernel::VT_OP, Op);
    std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
        flatbuffers::Offset<fb::Kernel>(FB.EndTable(Start))};
    std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
        fb::CreateDeviceProgramDirect(FB, 0, &Kernels)};
    std::vector<flatbuffers::Offset<fb::Program>> Progs = {
        fb::CreateProgramDirect(FB, "train", 1, &DevProgs)};
    auto Root =
        fb::CreatePlanDirect(FB, kPlanVersion, "test", "Test", 0, 0, nullptr,
                             nullptr, nullptr, nullptr, &Progs);
    fb::FinishPlanBuffer(FB, Root);
    Status Built = checkBuiltPlan(FB.GetBufferPointer(), FB.GetSize());
    EXPECT_EQ(Built.message(),
              std::string("kernel 0 of device 0 of program 'train' has no ") +
                  (MissingName ? "name" : "op"));
    EXPECT_EQ(verifyPlan(FB.GetBufferPointer(), FB.GetSize()).message(),
              "the plan is corrupted or truncated (FlatBuffers verification "
              "failed)");
  }
}
