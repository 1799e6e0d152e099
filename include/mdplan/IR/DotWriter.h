//===- DotWriter.h - Graphviz rendering of a graph --------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Writes a graph as a Graphviz digraph (`mdplan --emit=dot`): one cluster
// per assigned device (in device-table order), nodes in graph order labelled
// with their name, op and first output's type, solid edges for data (with
// the output index when it is not 0) and dashed edges for control inputs.
// Variables, inputs, transfers and collectives get shapes and colours of
// their own so the structure of a placed step is visible at a glance.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_DOTWRITER_H
#define MDPLAN_IR_DOTWRITER_H

#include "mdplan/IR/Graph.h"

#include "llvm/Support/raw_ostream.h"

namespace mdplan {

/// Writes \p G as a Graphviz digraph to \p OS. The output depends only on
/// the graph (node order, device table), never on pointer values.
void writeDot(const Graph &G, llvm::raw_ostream &OS);

} // namespace mdplan

#endif // MDPLAN_IR_DOTWRITER_H
