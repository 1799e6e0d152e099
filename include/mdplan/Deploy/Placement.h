//===- Placement.h - Resolving every node to a device -----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Placement walks each node's device stack from the innermost entry outwards,
// starting from the node's own requested device (semantics.md section 2):
// specs merge under the device so far, functions rewrite it, empty specs are
// skipped and a clear marker stops the walk. Colocated nodes then take the
// device of the node they follow, summaries move to their task's host CPU,
// and every device is completed from the deployment and checked against
// the cluster.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_DEPLOY_PLACEMENT_H
#define MDPLAN_DEPLOY_PLACEMENT_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

namespace mdplan {

/// One stack entry applied to a node.
struct PlacementStep {
  const DeviceEntry *Entry = nullptr;
  DeviceSpec Before;
  DeviceSpec After;
};

/// How one node's device was decided.
struct PlacementRecord {
  DeviceSpec Requested;
  /// Entries in the order they were applied (innermost first).
  llvm::SmallVector<PlacementStep, 8> Steps;
  /// The walk stopped at a clear marker.
  bool StoppedAtClear = false;
  /// The node followed this one (colocation), skipping its own stack.
  const Node *ColocatedWith = nullptr;
  /// A summary moved to its task's host CPU.
  bool MovedToHost = false;
  /// The device after the stack (and colocation), before completion.
  DeviceSpec AfterStack;
  /// The final, complete device.
  DeviceSpec Final;
  /// The device the cluster lacked when soft placement moved the node.
  std::optional<DeviceSpec> SoftFrom;
};

struct PlacementOptions {
  Cluster TheCluster;
  bool SoftPlacement = false;
  /// When set, the nodes to keep a PlacementRecord for.
  llvm::function_ref<bool(const Node &)> ShouldRecord;
};

/// Places every node of \p G. Records go to \p Records for the nodes
/// ShouldRecord selects. Warnings (soft placement) go to \p Diags.
llvm::Error
placeDevices(Graph &G, const PlacementOptions &Opts,
             const DiagnosticHandler &Diags,
             llvm::MapVector<const Node *, PlacementRecord> *Records = nullptr);

/// Walks the stack of \p N from its requested device (no colocation, no
/// completion). Functions with state advance.
DeviceSpec walkDeviceStack(const Node &N, PlacementRecord *Rec = nullptr);

/// Prints the explanation of one node's placement.
void printPlacementRecord(llvm::raw_ostream &OS, const Node &N,
                          const PlacementRecord &R);

} // namespace mdplan

#endif // MDPLAN_DEPLOY_PLACEMENT_H
