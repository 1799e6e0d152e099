//===- Kernel.h - Kernels and their registry --------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A kernel computes one node of the plan on one kind of device. It is
// created once, at load time, from a KernelInfo (op, attributes, input and
// output types) so it can precompute what it needs (a oneDNN primitive, a
// cuDNN descriptor), and then run once per step with raw buffer pointers.
//
// Op semantics are documented in docs/Ops.md; kernels of every device kind
// must agree with them (the CPU kernels are the reference).
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_KERNEL_H
#define MDRT_KERNEL_H

#include "mdrt/Attrs.h"
#include "mdrt/Status.h"
#include "mdrt/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mdrt {

enum class DeviceKind : uint8_t { CPU = 0, GPU = 1 };

/// What a kernel is created from.
struct KernelInfo {
  /// The node's name (for messages and traces).
  std::string Name;
  /// The op's registry name, e.g. "MatMul".
  std::string Op;
  AttrMap Attrs;
  std::vector<TensorDesc> Inputs;
  std::vector<TensorDesc> Outputs;
  /// Index of the kernel in the plan.
  uint32_t Index = 0;
  /// Intra-op threads a CPU kernel may use.
  int NumThreads = 1;
};

/// The arguments of one execution.
struct ExecContext {
  /// Input buffers. State-updating ops (AssignMovingAverage, AssignAdd,
  /// Apply*) write their variable and slot inputs in place.
  void *const *In = nullptr;
  void *const *Out = nullptr;
  /// The step being executed (0-based count of executions of the program).
  uint64_t Step = 0;
  /// The run's seed.
  uint64_t Seed = 0;
  /// Device stream for asynchronous kernels (a cudaStream_t); null on CPU.
  void *Stream = nullptr;
  /// Where a kernel reports input values it cannot compute with (a label
  /// outside its range). The device's other kernels still run; the step
  /// then fails with the device's first report. Null: nobody listens.
  Status *Error = nullptr;

  /// Reports \p S unless the step already failed on this device. Call it
  /// from the kernel's calling thread, not from its worker threads.
  void fail(Status S) const {
    // (void): nvcc takes the assignment's result, a [[nodiscard]] Status,
    // as discarded.
    if (Error && Error->isOk())
      (void)(*Error = std::move(S));
  }
};

class Kernel {
public:
  virtual ~Kernel();
  virtual void run(const ExecContext &C) = 0;
};

using KernelFactory = StatusOr<std::unique_ptr<Kernel>> (*)(const KernelInfo &);

/// Kernels by device kind and op name.
class KernelRegistry {
public:
  /// The process-wide registry with every kernel built in.
  static KernelRegistry &get();

  void add(DeviceKind K, const std::string &Op, KernelFactory F);
  /// The factory for \p Op on \p K, or null.
  KernelFactory lookup(DeviceKind K, const std::string &Op) const;
  /// The ops with a kernel for \p K, sorted.
  std::vector<std::string> ops(DeviceKind K) const;

  /// Creates the kernel, or an error naming the node.
  StatusOr<std::unique_ptr<Kernel>> create(DeviceKind K,
                                           const KernelInfo &Info) const;

private:
  std::map<std::pair<DeviceKind, std::string>, KernelFactory> Factories;
};

/// Registers the CPU kernels (lib/cpu).
void registerCpuKernels(KernelRegistry &R);
/// Registers the CUDA kernels when built with CUDA (lib/cuda).
void registerCudaKernels(KernelRegistry &R);

} // namespace mdrt

#endif // MDRT_KERNEL_H
