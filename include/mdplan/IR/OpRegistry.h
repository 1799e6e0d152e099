//===- OpRegistry.h - Op definitions ----------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Every op declares its inputs, outputs, attributes (validated), a shape
// function and, when it is differentiable, a gradient rule. The list of ops
// is in Ops.def; the definitions (shape functions and gradient rules side by
// side) are in lib/IR/Ops.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_OPREGISTRY_H
#define MDPLAN_IR_OPREGISTRY_H

#include "mdplan/IR/Attr.h"
#include "mdplan/IR/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace mdplan {

class GradBuilder;

/// Identifies an op without string compares.
enum class OpKind : uint16_t {
#define MDPLAN_OP(NAME, SUMMARY) NAME,
#include "mdplan/IR/Ops.def"
  NumOps
};

/// Declares one attribute of an op.
struct AttrDef {
  llvm::StringRef Name;
  AttrKind Kind;
  /// Set when the attribute may be omitted.
  std::optional<Attr> Default;
  /// For string attributes: the allowed values (empty = any).
  std::vector<llvm::StringRef> Allowed;
  llvm::StringRef Doc;
};

/// Passed to shape functions.
class InferContext {
public:
  explicit InferContext(Node &N) : N(N) {}
  Node &node() { return N; }
  unsigned numInputs() const { return N.getNumInputs(); }
  const TensorType &input(unsigned I) const;
  const AttrDict &attrs() const { return N.attrs(); }
  void setOutput(unsigned I, DType T, Shape S) {
    N.setOutputType(I, TensorType{T, std::move(S)});
  }
  /// An error located at the node, naming it and its op.
  llvm::Error error(const llvm::Twine &Message) const;

private:
  Node &N;
};

/// Flags of an op.
enum OpFlags : unsigned {
  OF_None = 0,
  /// Holds state across steps (variable-like; ps_ops default).
  OF_Variable = 1u << 0,
  /// Fed by the data pipeline.
  OF_Input = 1u << 1,
  /// Has side effects: never pruned, never merged.
  OF_Stateful = 1u << 2,
  /// Writes into its first input, which must be a variable: it runs on the
  /// variable's device (colocated with it).
  OF_UpdatesInput0 = 1u << 3,
  /// A summary: placed on the host CPU.
  OF_Summary = 1u << 4,
  /// A collective across devices.
  OF_Collective = 1u << 5,
  /// A constant: its value is known at compile time.
  OF_Constant = 1u << 6,
  /// Produces no gradient for any input (a gradient through it is zero).
  OF_NoGradient = 1u << 7,
  /// Produced by the compiler (BatchSlice, Send, Recv, AllReduce, Apply*).
  /// A graph file may use it too, so that --emit=graph output reads back
  /// (docs/GraphFormat.md); nothing checks this flag.
  OF_Internal = 1u << 8,
};

/// A gradient rule: given the forward node and the gradients of its outputs
/// (null where an output has none), sets the gradients of its inputs (leave
/// null for inputs that get none). Nodes are created through the builder.
using GradFn = llvm::Error (*)(GradBuilder &B, Node &Fwd,
                               llvm::ArrayRef<TensorRef> OutGrads,
                               llvm::MutableArrayRef<TensorRef> InGrads);

/// A shape function: checks the input types and attributes and sets every
/// output type.
using ShapeFn = llvm::Error (*)(InferContext &C);

/// The definition of one op.
struct OpDef {
  OpKind Kind;
  llvm::StringRef Name;
  llvm::StringRef Summary;
  /// Input names, for documentation and error messages. When Variadic is
  /// set, the last name repeats.
  std::vector<llvm::StringRef> InputNames;
  bool Variadic = false;
  /// Minimum number of inputs when variadic.
  unsigned MinInputs = 0;
  /// Number of outputs, or -1 when NumOutputsFn decides.
  int NumOutputs = 1;
  unsigned (*NumOutputsFn)(const AttrDict &Attrs, unsigned NumInputs) = nullptr;
  std::vector<AttrDef> Attrs;
  unsigned Flags = OF_None;
  ShapeFn Shape = nullptr;
  GradFn Gradient = nullptr;

  bool is(OpFlags F) const { return (Flags & F) != 0; }
  bool isVariable() const { return is(OF_Variable); }
  const AttrDef *findAttr(llvm::StringRef Name) const;
  /// Number of outputs of a node with these attributes and inputs.
  unsigned numOutputs(const AttrDict &Attrs, unsigned NumInputs) const {
    return NumOutputs >= 0 ? unsigned(NumOutputs)
                           : NumOutputsFn(Attrs, NumInputs);
  }
  /// Checks the number of inputs; an error message or "".
  std::string checkArity(unsigned NumInputs) const;
};

/// The registry of every op.
class OpRegistry {
public:
  /// The process-wide registry.
  static const OpRegistry &get();

  const OpDef *lookup(llvm::StringRef Name) const;
  const OpDef &get(OpKind K) const { return Ops[unsigned(K)]; }
  llvm::ArrayRef<OpDef> ops() const { return Ops; }

private:
  OpRegistry();
  std::vector<OpDef> Ops;
};

/// Shorthand: the definition of op \p K.
inline const OpDef &opDef(OpKind K) { return OpRegistry::get().get(K); }

/// True when \p N is of op \p K.
inline bool isa(const Node &N, OpKind K) { return N.getOp().Kind == K; }

/// Validates the attributes of \p N against its op: unknown attributes,
/// wrong kinds and disallowed values are errors; defaults are filled in.
llvm::Error verifyAndCompleteAttrs(Node &N);

/// Runs the shape function of \p N (its inputs must have types).
llvm::Error inferNodeShapes(Node &N);

} // namespace mdplan

#endif // MDPLAN_IR_OPREGISTRY_H
