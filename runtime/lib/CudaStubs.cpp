//===- CudaStubs.cpp - The CUDA entry points of a CPU-only build ----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Kernel.h"

using namespace mdrt;

void mdrt::registerCudaKernels(KernelRegistry &) {}

#include "mdrt/Device.h"

StatusOr<std::unique_ptr<Device>> mdrt::createCudaDevice(const std::string &Name,
                                                         int Ordinal) {
  return Status::error("device " + Name +
                       " is a GPU, but this mdrun was built without CUDA");
}

int mdrt::cudaDeviceCount() { return 0; }

std::unique_ptr<CollectiveGroup>
mdrt::createNcclCollective(const std::vector<Device *> &) {
  return nullptr;
}
