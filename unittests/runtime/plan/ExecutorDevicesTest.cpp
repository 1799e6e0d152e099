//===- ExecutorDevicesTest.cpp - The devices of a run ---------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// What goes wrong when the executor creates a plan's devices: a GPU map
// entry that is no GPU, CPU memory that cannot be had, a GPU in a build
// without CUDA.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"
#include "mdrt/Executor.h"

#include "gtest/gtest.h"

#include <cstdint>

using namespace mdrt;

namespace {

const char *GpuName = "/job:worker/replica:0/task:0/device:GPU:0";

/// One GPU, an Identity kernel between two float32[1] buffers.
std::shared_ptr<const PlanFile> gpuPlan() {
  flatbuffers::FlatBufferBuilder FB;
  std::vector<flatbuffers::Offset<fb::Device>> Devices = {
      fb::CreateDeviceDirect(FB, GpuName, fb::DeviceKind::GPU, "worker", 0, 0,
                             0, /*arena_bytes=*/128, /*persistent_bytes=*/0)};
  std::vector<int64_t> Shape = {1};
  std::vector<flatbuffers::Offset<fb::Buffer>> Buffers = {
      fb::CreateBufferDirect(FB, "x", 0, fb::DType::Float32, &Shape, 0, 4),
      fb::CreateBufferDirect(FB, "y", 0, fb::DType::Float32, &Shape, 64, 4)};
  std::vector<uint32_t> In = {0}, Out = {1};
  std::vector<flatbuffers::Offset<fb::Kernel>> Kernels = {
      fb::CreateKernelDirect(FB, "y", "Identity", nullptr, &In, &Out)};
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs = {
      fb::CreateDeviceProgramDirect(FB, 0, &Kernels, 128, 128, "naive")};
  std::vector<flatbuffers::Offset<fb::Program>> Progs = {
      fb::CreateProgramDirect(FB, "train", /*batch_size=*/1, &DevProgs)};
  auto Root =
      fb::CreatePlanDirect(FB, kPlanVersion, "test", "Test", 0, 0, &Devices,
                           &Buffers, nullptr, nullptr, &Progs);
  fb::FinishPlanBuffer(FB, Root);
  auto P = PlanFile::fromBytes(
      std::vector<uint8_t>(FB.GetBufferPointer(),
                           FB.GetBufferPointer() + FB.GetSize()),
      "gpu.mdp");
  EXPECT_TRUE(P.isOk()) << P.status().message();
  return P.isOk() ? std::shared_ptr<const PlanFile>(P.take()) : nullptr;
}

std::string errorOf(const Status &S) { return S.isOk() ? "<ok>" : S.message(); }

} // namespace

TEST(ExecutorDevicesTest, GpuMapEntryThatIsNoGpu) {
  auto Plan = gpuPlan();
  ASSERT_TRUE(Plan);
  ExecutorOptions O;
  O.Threads = 1;
  O.GpuMap = {-1};
  auto E = Executor::create(Plan, O);
  EXPECT_EQ(E.isOk() ? "<ok>" : E.status().message(),
            std::string("the GPU map puts ") + GpuName +
                " on GPU -1, which cannot exist");
}

TEST(ExecutorDevicesTest, CpuMemoryThatCannotBeHad) {
  // A plan asks for at most 2^50 bytes (mdrun's test of it is in
  // test/Plan/verifier-errors.test); here the size rounded up to a cache
  // line would wrap.
  auto D = createCpuDevice("cpu", 1);
  std::string Why = errorOf(D->allocate(64, UINT64_MAX));
  EXPECT_EQ(Why.substr(0, Why.find(':')),
            "cannot allocate 16.00 EiB (18446744073709551615 bytes) for the "
            "persistent buffers of device cpu");
  EXPECT_NE(Why.find("mdrun PLAN --dump-plan shows what each device needs"),
            std::string::npos)
      << Why;
}

#if !MDPLAN_HAVE_CUDA
TEST(ExecutorDevicesTest, NoCudaInThisBuild) {
  EXPECT_EQ(cudaDeviceCount(), 0);
  auto D = createCudaDevice(GpuName, 0);
  EXPECT_EQ(D.isOk() ? "<ok>" : D.status().message(),
            std::string("device ") + GpuName +
                " is a GPU, but this mdrun was built without CUDA");
}
#endif
