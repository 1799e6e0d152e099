//===- Verifier.h - Structural checks of a graph ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_VERIFIER_H
#define MDPLAN_IR_VERIFIER_H

#include "mdplan/IR/Graph.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace mdplan {

/// Checks that every input names an existing output, every op has the right
/// number of inputs, names are unique, collections and colocation point into
/// the graph, and that data and control edges form no cycle (the error
/// lists the cycle).
llvm::Error verifyGraph(const Graph &G);

/// The nodes of \p G in a topological order of data and control edges, ties
/// broken by graph order; an error naming a cycle when there is one.
llvm::Expected<std::vector<Node *>> topologicalOrder(const Graph &G);

} // namespace mdplan

#endif // MDPLAN_IR_VERIFIER_H
