//===- Builder.cpp - Creating nodes from passes ---------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"

#include "llvm/ADT/STLExtras.h"

using namespace llvm;
using namespace mdplan;

GraphBuilder::~GraphBuilder() { consumeError(std::move(Err)); }

void GraphBuilder::fail(Error E) {
  if (Failed) {
    consumeError(std::move(E));
    return;
  }
  Failed = true;
  Err = std::move(E);
}

Error GraphBuilder::takeError() {
  Failed = false;
  return std::move(Err);
}

Node *GraphBuilder::finish(Node *N, ArrayRef<TensorRef> Inputs,
                           AttrDict Attrs) {
  assert(llvm::all_of(Inputs, [](const TensorRef &T) { return bool(T); }) &&
         "null input");
  N->setInputs(Inputs);
  N->attrs() = std::move(Attrs);
  N->setStack(Stack ? Stack : G.getRootStack());
  N->setClone(Clone);
  N->setRole(Role);
  N->setLoc(Loc);
  if (Error E = verifyAndCompleteAttrs(*N)) {
    fail(std::move(E));
    return nullptr;
  }
  if (Error E = inferNodeShapes(*N)) {
    fail(std::move(E));
    return nullptr;
  }
  onCreate(*N);
  return N;
}

Node *GraphBuilder::create(OpKind K, ArrayRef<TensorRef> Inputs, AttrDict Attrs,
                           StringRef Name) {
  if (Failed)
    return nullptr;
  for (const TensorRef &T : Inputs)
    if (!T)
      return nullptr;
  const OpDef &Op = opDef(K);
  std::string Base = Prefix;
  if (!Base.empty())
    Base += '/';
  Base += Name.empty() ? Op.Name : Name;
  return finish(G.createNodeUnique(Base, Op), Inputs, std::move(Attrs));
}

Node *GraphBuilder::createNamed(StringRef FullName, OpKind K,
                                ArrayRef<TensorRef> Inputs, AttrDict Attrs) {
  if (Failed)
    return nullptr;
  if (Node *Taken = G.lookup(FullName)) {
    // Where the user wrote the node whose name the passes need.
    fail(makeError(Taken->getLoc().isValid() ? Taken->getLoc() : Loc,
                   "cannot create node '" + FullName + "' (" + opDef(K).Name +
                       "): a node of that name already exists; rename it"));
    return nullptr;
  }
  return finish(G.createNode(FullName, opDef(K)), Inputs, std::move(Attrs));
}

TensorRef GraphBuilder::out(OpKind K, ArrayRef<TensorRef> Inputs,
                            AttrDict Attrs, StringRef Name) {
  Node *N = create(K, Inputs, std::move(Attrs), Name);
  return N ? TensorRef(N, 0) : TensorRef();
}

TensorRef GraphBuilder::constant(double Value, DType T, Shape S,
                                 StringRef Name) {
  std::pair<StringRef, Attr> A[] = {{"dtype", T},
                                    {"shape", std::move(S)},
                                    {"value", std::vector<double>{Value}}};
  return out(OpKind::Const, {}, AttrDict(A), Name.empty() ? "Const" : Name);
}

TensorRef GraphBuilder::reshape(TensorRef X, const Shape &S) {
  if (!X)
    return X;
  if (X.type().Dims == S)
    return X;
  AttrDict A;
  A.set("shape", std::vector<int64_t>(S.dims().begin(), S.dims().end()));
  return out(OpKind::Reshape, {X}, std::move(A));
}

TensorRef GraphBuilder::sumToShape(TensorRef X, const Shape &S) {
  if (!X)
    return X;
  if (X.type().Dims == S)
    return X;
  AttrDict A;
  A.set("shape", S);
  return out(OpKind::SumToShape, {X}, std::move(A));
}
