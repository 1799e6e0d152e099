//===- PassUtils.h - Helpers shared by the deployment passes ----*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_TRANSFORMS_PASSUTILS_H
#define MDPLAN_TRANSFORMS_PASSUTILS_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace mdplan {

/// An error unless replicate-clones ran on \p G.
inline llvm::Error requireReplicated(Graph &G, llvm::StringRef Pass) {
  if (!G.hasDeployState() || !G.deployState().Replicated)
    return makeError(Pass + " needs replicate-clones to run first");
  return llvm::Error::success();
}

/// An error when \p G's nodes already have devices: the passes after
/// place-devices (partition, schedule, plan-memory) work on placed nodes,
/// so a pass that adds or removes nodes must run before it.
inline llvm::Error requireUnplaced(const Graph &G, llvm::StringRef Pass) {
  if (!G.getDevices().empty())
    return makeError(Pass + ": the graph is already placed (run " + Pass +
                     " before place-devices)");
  return llvm::Error::success();
}

/// An error at the first node (in graph order) without a device, for the
/// passes after partition (a node added after place-devices).
llvm::Error requirePlaced(const Graph &G, llvm::StringRef Pass);

/// An error at the first node (in graph order) with an output whose type
/// was never inferred, for passes that need the types.
llvm::Error requireTypes(const Graph &G, llvm::StringRef Pass);

/// A data use of a node: (consumer, input index).
using Use = std::pair<Node *, unsigned>;

/// The data uses of every node of a graph as they were when computed, in
/// graph order of the consumers. One array for all nodes, indexed by node
/// id: no hashing and no allocation per node. Nodes created afterwards have
/// no uses here.
class UseMap {
public:
  explicit UseMap(const Graph &G);
  /// The uses of \p N.
  llvm::ArrayRef<Use> uses(const Node *N) const {
    unsigned Id = N->getId();
    if (Id + 1 >= Begin.size())
      return {};
    return llvm::ArrayRef<Use>(All).slice(Begin[Id], Begin[Id + 1] - Begin[Id]);
  }

private:
  /// Node id -> index of its first use in All; one more entry than ids.
  std::vector<unsigned> Begin;
  std::vector<Use> All;
};

inline UseMap computeUses(const Graph &G) { return UseMap(G); }
inline llvm::ArrayRef<Use> usesOf(const UseMap &Uses, const Node *N) {
  return Uses.uses(N);
}

/// Removes every node that \p Roots do not need (through data inputs,
/// control inputs and colocation targets), keeping stateful nodes only when
/// they are reachable. Collections and named outputs lose the removed
/// nodes. Returns the number of nodes removed.
size_t pruneUnreachable(Graph &G, llvm::ArrayRef<Node *> Roots);

/// The tensors a training step reports, which stay alive to its end:
/// total_loss, train_op, the inputs of the summaries the step reports (the
/// first clone's and the shared ones) and the named outputs.
std::vector<TensorRef> programOutputs(Graph &G);

/// The summaries a step reports: model_deploy merges the first clone's
/// summaries with the shared ones (total_loss).
std::vector<Node *> reportedSummaries(Graph &G);

/// The inputs an op writes in place: the variable of a state update and,
/// for optimizer updates, the slots.
llvm::SmallVector<unsigned, 3> writtenInputs(const Node &N);

/// A short name for a device usable inside node names: "worker_0_GPU_1".
std::string deviceShortName(const DeviceSpec &D);

/// Where optimizer field \p Field (a graph-format name) was given: the flag
/// or config-file field that set it, else the graph file's field.
SourceLoc optimizerFieldLoc(const Graph &G, const DeploymentConfig &C,
                            llvm::StringRef Field);

} // namespace mdplan

#endif // MDPLAN_TRANSFORMS_PASSUTILS_H
