//===- ModelWriter.h - Writing graph descriptions ---------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Prints a graph in the text format that readModelFile() reads: nodes in
// graph order with full names and their attributes, device stacks as nested
// scopes (anonymous, device entries only), collections and named outputs.
// Printing, reading back and printing again gives the same text.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FRONTEND_MODELWRITER_H
#define MDPLAN_FRONTEND_MODELWRITER_H

#include "mdplan/IR/Graph.h"

#include "llvm/Support/raw_ostream.h"

namespace mdplan {

struct WriteOptions {
  /// Print placed nodes with their assigned device and no scopes.
  bool UseAssignedDevices = true;
};

void writeModel(const Graph &G, llvm::raw_ostream &OS,
                const WriteOptions &Opts = {});

} // namespace mdplan

#endif // MDPLAN_FRONTEND_MODELWRITER_H
