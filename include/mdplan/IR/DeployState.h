//===- DeployState.h - What the deployment passes know ----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The deployment passes hand results to each other through a DeployState
// attached to the graph: the clones and their stack entries, mirrored
// variable copies, the loss nodes, the gradients of each clone, the summed
// gradients and the training step's final nodes.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_DEPLOYSTATE_H
#define MDPLAN_IR_DEPLOYSTATE_H

#include "mdplan/IR/Graph.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace mdplan {

/// One clone of the model.
struct CloneInfo {
  int Index = 0;
  /// Name scope with a trailing '/', or "" for a single clone.
  std::string Scope;
  DeviceSpec Device;
  /// The clone's device entry (outermost entry of its nodes).
  const DeviceEntry *Entry = nullptr;
  /// The stack of nodes created for this clone outside the model
  /// (losses, gradients): optimizer device, then the clone device.
  const DeviceStack *Stack = nullptr;
  /// Index of the clone's device among the distinct clone devices.
  int DeviceGroup = 0;
  /// scale-losses: the clone's summed loss (null when it has none).
  Node *SumLoss = nullptr;
  /// build-gradients: the gradient of SumLoss for each trainable variable
  /// it influences (key: the variable the clone reads).
  llvm::MapVector<Node *, TensorRef> Gradients;
  /// When each gradient is complete: the largest node id among its parts
  /// (gradient nodes are created in reverse topological order, so a
  /// smaller number is ready earlier in the backward pass).
  llvm::DenseMap<Node *, unsigned> GradientReady;
};

struct DeployState {
  bool Replicated = false;
  std::vector<CloneInfo> Clones;
  /// The deployment's role entries.
  const DeviceEntry *InputsEntry = nullptr;
  const DeviceEntry *OptimizerEntry = nullptr;
  /// Mirrored strategy: each variable's copies, one per device group
  /// (element 0 is the variable itself).
  llvm::MapVector<Node *, llvm::SmallVector<Node *, 2>> Mirrors;
  /// The variable each node of the model was copied from (mirror -> var).
  llvm::DenseMap<Node *, Node *> MirrorOf;
  /// Number of distinct clone devices.
  int NumDeviceGroups = 1;
  /// Mirrored strategy: the device each group runs on, as the all-reduces
  /// list it (the clone device as written, or its task's CPU when soft
  /// placement moves the clones there).
  std::vector<std::string> GroupDevices;

  // eval-mode: the graph is an evaluation step, which trains nothing.
  bool EvalMode = false;

  // scale-losses.
  Node *TotalLoss = nullptr;
  Node *RegularizationLoss = nullptr;
  bool LossesScaled = false;

  // build-gradients.
  bool GradientsBuilt = false;

  // sum-gradients: per variable (each mirrored copy), the gradient that
  // updates it.
  llvm::MapVector<Node *, TensorRef> SummedGradients;
  bool GradientsSummed = false;

  // apply-optimizer.
  Node *GlobalStep = nullptr;
  Node *TrainOp = nullptr;

  // partition.
  bool Partitioned = false;
  unsigned NumChannels = 0;

  // schedule: the kernels of each device (index = Graph device id) in the
  // order they run. Variables, constants and inputs have no kernel.
  std::vector<std::vector<Node *>> Schedules;
  bool Scheduled = false;

  // plan-memory.
  struct Buffer {
    /// Offset in the device's arena, or in its persistent region.
    uint64_t Offset = 0;
    uint64_t Bytes = 0;
    /// Set when the buffer is a view into another node's output.
    TensorRef AliasOf;
    /// -1 until plan-memory gives the output a buffer.
    int Device = -1;
    bool Persistent = false;
  };
  /// Every output's buffer, made by plan-memory (for the nodes of then).
  std::optional<OutputTable<Buffer>> Buffers;
  /// The buffer of output \p Index of \p N, or null when it has none.
  const Buffer *bufferOf(const Node &N, unsigned Index) const {
    if (!Buffers)
      return nullptr;
    const Buffer *B = Buffers->find(N, Index);
    return B && B->Device >= 0 ? B : nullptr;
  }
  struct DeviceMemory {
    uint64_t ArenaBytes = 0;
    uint64_t PersistentBytes = 0;
    /// Every transient buffer with its own bytes (no reuse).
    uint64_t NaiveBytes = 0;
    unsigned NumBuffers = 0;
    /// "greedy-by-size" or "best-fit-in-order".
    std::string Method;
  };
  std::vector<DeviceMemory> Memory;
  bool MemoryPlanned = false;

  /// The copy of variable \p V that clone \p C reads (V itself unless
  /// mirrored).
  Node *copyFor(Node *V, const CloneInfo &C) const {
    auto It = Mirrors.find(V);
    if (It == Mirrors.end() || C.DeviceGroup >= int(It->second.size()))
      return V;
    return It->second[C.DeviceGroup];
  }
};

} // namespace mdplan

#endif // MDPLAN_IR_DEPLOYSTATE_H
