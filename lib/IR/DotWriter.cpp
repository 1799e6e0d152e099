//===- DotWriter.cpp - Graphviz rendering of a graph ----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DotWriter.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/SmallVector.h"

#include <vector>

using namespace mdplan;
using namespace llvm;

/// \p S as the body of a double-quoted DOT string.
static std::string escape(StringRef S) {
  std::string R;
  R.reserve(S.size());
  for (char C : S) {
    if (C == '"' || C == '\\')
      R += '\\';
    R += C;
  }
  return R;
}

/// The Graphviz attributes that tell the kinds of nodes apart.
static StringRef style(const Node &N) {
  const OpDef &Op = N.getOp();
  if (Op.isVariable())
    return "shape=box, style=filled, fillcolor=\"#fff2b3\"";
  if (Op.is(OF_Input))
    return "shape=invhouse, style=filled, fillcolor=\"#d9f2d9\"";
  if (isa(N, OpKind::Send) || isa(N, OpKind::Recv))
    return "shape=cds, style=filled, fillcolor=\"#cfe2ff\"";
  if (Op.is(OF_Collective))
    return "shape=hexagon, style=filled, fillcolor=\"#ffd6cc\"";
  if (Op.is(OF_Summary))
    return "shape=note";
  return "shape=ellipse";
}

static void writeNode(const Node &N, raw_ostream &OS, StringRef Indent) {
  OS << Indent << 'n' << N.getId() << " [label=\"" << escape(N.getName())
     << "\\n"
     << escape(N.getOpName());
  if (N.getNumOutputs() > 0 && N.getOutputType(0).Elt != DType::Invalid)
    OS << ' ' << escape(N.getOutputType(0).str());
  OS << "\", " << style(N) << "];\n";
}

void mdplan::writeDot(const Graph &G, raw_ostream &OS) {
  OS << "digraph \"" << escape(G.getName().empty() ? "graph" : G.getName())
     << "\" {\n";
  OS << "  node [fontname=\"Helvetica\", fontsize=10];\n";
  OS << "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  // Nodes: unplaced ones at the top level, the others in their device's
  // cluster.
  std::vector<SmallVector<const Node *, 0>> ByDevice(G.getDevices().size());
  for (const auto &N : G.nodes()) {
    if (N->isPlaced())
      ByDevice[N->getDevice()].push_back(N.get());
    else
      writeNode(*N, OS, "  ");
  }
  for (unsigned D = 0, E = ByDevice.size(); D != E; ++D) {
    if (ByDevice[D].empty())
      continue;
    OS << "  subgraph cluster_" << D << " {\n";
    OS << "    label=\"" << escape(G.getDevice(D).toString()) << "\";\n";
    OS << "    style=rounded;\n";
    for (const Node *N : ByDevice[D])
      writeNode(*N, OS, "    ");
    OS << "  }\n";
  }

  // Edges, in the order of the consumers and their inputs.
  for (const auto &N : G.nodes()) {
    for (const TensorRef &In : N->getInputs()) {
      OS << "  n" << In.N->getId() << " -> n" << N->getId();
      if (In.Index != 0)
        OS << " [label=\":" << In.Index << "\"]";
      OS << ";\n";
    }
    for (const Node *C : N->getControlInputs())
      OS << "  n" << C->getId() << " -> n" << N->getId()
         << " [style=dashed];\n";
  }
  OS << "}\n";
}
