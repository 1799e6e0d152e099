//===- PassUtils.h - Helpers shared by the deployment passes ----*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_TRANSFORMS_PASSUTILS_H
#define MDPLAN_TRANSFORMS_PASSUTILS_H

#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace mdplan {

/// An error unless replicate-clones ran on \p G.
inline llvm::Error requireReplicated(Graph &G, llvm::StringRef Pass) {
  if (!G.hasDeployState() || !G.deployState().Replicated)
    return makeError(Pass + " needs replicate-clones to run first");
  return llvm::Error::success();
}

/// The consumers of every node output: (consumer, input index) pairs.
/// An error at the first node (in graph order) with an output whose type
/// was never inferred, for passes that need the types.
llvm::Error requireTypes(const Graph &G, llvm::StringRef Pass);

using Use = std::pair<Node *, unsigned>;
using UseMap = llvm::DenseMap<const Node *, llvm::SmallVector<Use, 4>>;
UseMap computeUses(const Graph &G);

/// The uses of \p N in \p Uses, without copying them (DenseMap::lookup
/// returns a copy, which is quadratic over a node with many outputs).
inline llvm::ArrayRef<Use> usesOf(const UseMap &Uses, const Node *N) {
  auto It = Uses.find(N);
  return It == Uses.end() ? llvm::ArrayRef<Use>()
                          : llvm::ArrayRef<Use>(It->second);
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

} // namespace mdplan

#endif // MDPLAN_TRANSFORMS_PASSUTILS_H
