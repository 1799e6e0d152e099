//===- CpuKernels.cpp - Registration of the CPU kernels -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Kernel.h"

using namespace mdrt;

void mdrt::registerCpuKernels(KernelRegistry &R) {}
