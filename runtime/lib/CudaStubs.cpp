//===- CudaStubs.cpp - The CUDA entry points of a CPU-only build ----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Kernel.h"

using namespace mdrt;

void mdrt::registerCudaKernels(KernelRegistry &) {}
