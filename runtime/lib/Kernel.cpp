//===- Kernel.cpp - Kernels and their registry ----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Kernel.h"

using namespace mdrt;

Kernel::~Kernel() = default;

KernelRegistry &KernelRegistry::get() {
  static KernelRegistry *R = [] {
    auto *Reg = new KernelRegistry();
    registerCpuKernels(*Reg);
    registerCudaKernels(*Reg);
    return Reg;
  }();
  return *R;
}

void KernelRegistry::add(DeviceKind K, const std::string &Op, KernelFactory F) {
  Factories[{K, Op}] = F;
}

KernelFactory KernelRegistry::lookup(DeviceKind K,
                                     const std::string &Op) const {
  auto It = Factories.find({K, Op});
  return It == Factories.end() ? nullptr : It->second;
}

std::vector<std::string> KernelRegistry::ops(DeviceKind K) const {
  std::vector<std::string> R;
  for (const auto &[Key, F] : Factories)
    if (Key.first == K)
      R.push_back(Key.second);
  return R;
}

StatusOr<std::unique_ptr<Kernel>>
KernelRegistry::create(DeviceKind K, const KernelInfo &Info) const {
  KernelFactory F = lookup(K, Info.Op);
  if (!F)
    return Status::error(
        "no " + std::string(K == DeviceKind::CPU ? "CPU" : "GPU") +
        " kernel for op " + Info.Op + " (node '" + Info.Name + "')");
  auto R = F(Info);
  if (!R.isOk())
    return R.status().withContext("node '" + Info.Name + "' (" + Info.Op + ")");
  return R;
}
