//===- CudaStubs.cpp - The CUDA entry points of a CPU-only build ----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Compiled instead of lib/cuda when the CUDA toolkit is absent or
// MDPLAN_ENABLE_CUDA is off. cudaDeviceCount() is 0, so the executor never
// creates a GPU device and reports a plan's GPU devices as missing (or runs
// them on the CPU with --soft-placement).
//
//===----------------------------------------------------------------------===//

#include "mdrt/Cuda.h"
#include "mdrt/Kernel.h"

using namespace mdrt;

void mdrt::registerCudaKernels(KernelRegistry &) {}

StatusOr<std::unique_ptr<Device>>
mdrt::createCudaDevice(const std::string &Name, int) {
  return Status::error("device " + Name +
                       " is a GPU, but this mdrun was built without CUDA");
}

int mdrt::cudaDeviceCount() { return 0; }

std::unique_ptr<CollectiveGroup>
mdrt::createNcclCollective(const std::vector<Device *> &, size_t) {
  return nullptr;
}

void mdrt::prepareNcclEnvironment() {}

cuda::Graph::~Graph() = default;

Status cuda::activate(Device &) { return Status::ok(); }
Status cuda::setStep(Device &, uint64_t) { return Status::ok(); }
Status cuda::takeInputReports(Device &) { return Status::ok(); }
void *cuda::allocPinned(size_t) { return nullptr; }
void cuda::freePinned(void *) {}
bool cuda::pinHostMemory(void *, size_t) { return false; }
void cuda::unpinHostMemory(void *) {}
void cuda::copyFromHostAsync(Device &D, void *Dst, const void *Src,
                             size_t Bytes) {
  D.copyFromHost(Dst, Src, Bytes);
}
Status cuda::beginCapture(Device &) {
  return Status::error("this mdrun was built without CUDA");
}
StatusOr<std::unique_ptr<cuda::Graph>> cuda::endCapture(Device &) {
  return Status::error("this mdrun was built without CUDA");
}
