//===- Builder.h - Creating nodes from passes -------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A GraphBuilder creates nodes with generated names under a name prefix, on
// a fixed device stack, with a fixed clone index and role, and infers each
// node's output types at once so that the next node can use them. Errors
// are sticky: after the first failure every create() returns null and
// takeError() reports it, so rules read as straight-line code.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_BUILDER_H
#define MDPLAN_IR_BUILDER_H

#include "mdplan/IR/Graph.h"
#include "mdplan/IR/OpRegistry.h"

#include <initializer_list>

namespace mdplan {

class GraphBuilder {
public:
  explicit GraphBuilder(Graph &G) : G(G) {}
  virtual ~GraphBuilder();

  Graph &graph() { return G; }

  /// Names are `<prefix>/<name>`, made unique.
  void setPrefix(llvm::StringRef P) { Prefix = P.str(); }
  llvm::StringRef getPrefix() const { return Prefix; }
  void setStack(const DeviceStack *S) { Stack = S; }
  const DeviceStack *getStack() const { return Stack; }
  void setClone(int C) { Clone = C; }
  void setRole(NodeRole R) { Role = R; }
  void setLoc(SourceLoc L) { Loc = L; }

  /// Creates a node of op \p K. \p Name is the last path component (the op
  /// name when empty). Fills default attributes and infers output types.
  /// Returns null once an error happened.
  Node *create(OpKind K, llvm::ArrayRef<TensorRef> Inputs, AttrDict Attrs = {},
               llvm::StringRef Name = {});
  /// As create(), with an exact full name (no prefix, no uniquing).
  Node *createNamed(llvm::StringRef FullName, OpKind K,
                    llvm::ArrayRef<TensorRef> Inputs, AttrDict Attrs = {});
  /// create() and return output 0.
  TensorRef out(OpKind K, llvm::ArrayRef<TensorRef> Inputs, AttrDict Attrs = {},
                llvm::StringRef Name = {});

  /// A scalar or filled constant of type \p T.
  TensorRef constant(double Value, DType T, Shape S = {},
                     llvm::StringRef Name = {});
  /// Reshape \p X to \p S (X itself when it already has that shape).
  TensorRef reshape(TensorRef X, const Shape &S);
  /// Sums \p X down to \p S after broadcasting (X when shapes match).
  TensorRef sumToShape(TensorRef X, const Shape &S);

  /// Records an error; later creates return null.
  void fail(llvm::Error E);
  bool failed() const { return Failed; }
  llvm::Error takeError();

protected:
  /// Called for each node created, after shape inference.
  virtual void onCreate(Node &N) {}

private:
  Node *finish(Node *N, llvm::ArrayRef<TensorRef> Inputs, AttrDict Attrs);

  Graph &G;
  std::string Prefix;
  const DeviceStack *Stack = nullptr;
  int Clone = -1;
  NodeRole Role = NodeRole::Model;
  SourceLoc Loc;
  bool Failed = false;
  llvm::Error Err = llvm::Error::success();
};

/// The builder gradient rules receive. needs(I) says whether the gradient of
/// input I is wanted; rules may skip the others.
class GradBuilder : public GraphBuilder {
public:
  using GraphBuilder::GraphBuilder;

  bool needs(unsigned Input) const {
    return Input >= Needed.size() || Needed[Input];
  }
  void setNeeded(llvm::ArrayRef<bool> N) { Needed.assign(N.begin(), N.end()); }

private:
  llvm::SmallVector<bool, 4> Needed;
};

} // namespace mdplan

#endif // MDPLAN_IR_BUILDER_H
