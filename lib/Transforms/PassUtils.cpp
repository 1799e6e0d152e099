//===- PassUtils.cpp - Helpers shared by the deployment passes ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Transforms/PassUtils.h"

#include "mdplan/IR/OpRegistry.h"

using namespace llvm;
using namespace mdplan;

Error mdplan::requirePlaced(const Graph &G, StringRef Pass) {
  for (const auto &N : G.nodes())
    if (!N->isPlaced())
      return N->error("has no device; " + Pass +
                      " needs every node placed (was it added after "
                      "place-devices?)");
  return Error::success();
}

Error mdplan::requireTypes(const Graph &G, StringRef Pass) {
  for (const auto &N : G.nodes())
    for (unsigned I = 0, E = N->getNumOutputs(); I != E; ++I)
      if (N->getOutputType(I).Elt == DType::Invalid)
        return N->error("output " + Twine(I) + " has no type; " + Pass +
                        " needs the types that infer-shapes sets (run "
                        "infer-shapes before it)");
  return Error::success();
}

UseMap::UseMap(const Graph &G) : Begin(G.getIdBound() + 1, 0) {
  // Count the uses of each node, turn the counts into offsets, then fill
  // each node's slice in graph order of the consumers. The producers' ids
  // are read once, in the first walk: each is a read of another node,
  // mostly a cache miss on a large graph.
  std::vector<unsigned> Producer;
  Producer.reserve(2 * G.size());
  for (const auto &N : G.nodes())
    for (const TensorRef &In : N->getInputs()) {
      unsigned Id = In.N->getId();
      Producer.push_back(Id);
      ++Begin[Id + 1];
    }
  for (size_t I = 1; I < Begin.size(); ++I)
    Begin[I] += Begin[I - 1];
  All.resize(Begin.back());
  std::vector<unsigned> Next(Begin.begin(), Begin.end() - 1);
  const unsigned *P = Producer.data();
  for (const auto &N : G.nodes())
    for (unsigned I = 0, E = N->getNumInputs(); I != E; ++I)
      All[Next[*P++]++] = {N.get(), I};
}

size_t mdplan::pruneUnreachable(Graph &G, ArrayRef<Node *> Roots) {
  // Live nodes by id.
  std::vector<bool> Live(G.getIdBound(), false);
  SmallVector<const Node *, 64> Work;
  auto Visit = [&](const Node *M) {
    assert((!M || M->getId() < Live.size()) && "a node of another graph");
    if (M && !Live[M->getId()]) {
      Live[M->getId()] = true;
      Work.push_back(M);
    }
  };
  for (Node *R : Roots)
    Visit(R);
  while (!Work.empty()) {
    const Node *N = Work.pop_back_val();
    for (const TensorRef &In : N->getInputs())
      Visit(In.N);
    for (const Node *C : N->getControlInputs())
      Visit(C);
    Visit(N->getColocateWith());
  }
  size_t Before = G.size();
  // Control inputs and colocation of live nodes only point to live nodes.
  G.eraseIf([&](const Node &N) { return !Live[N.getId()]; });
  return Before - G.size();
}

std::vector<Node *> mdplan::reportedSummaries(Graph &G) {
  std::vector<Node *> R;
  for (Node *N : G.collection(Collection::Summaries))
    if (N->getClone() <= 0)
      R.push_back(N);
  return R;
}

std::vector<TensorRef> mdplan::programOutputs(Graph &G) {
  std::vector<TensorRef> R;
  if (G.hasDeployState()) {
    DeployState &S = G.deployState();
    if (S.TotalLoss)
      R.push_back(TensorRef(S.TotalLoss));
    if (S.TrainOp && S.TrainOp->getNumOutputs())
      R.push_back(TensorRef(S.TrainOp));
  }
  for (Node *N : reportedSummaries(G))
    R.push_back(N->getInput(0));
  for (const auto &[Name, T] : G.outputs())
    R.push_back(T);
  return R;
}

SmallVector<unsigned, 3> mdplan::writtenInputs(const Node &N) {
  SmallVector<unsigned, 3> R;
  if (!N.getOp().is(OF_UpdatesInput0))
    return R;
  R.push_back(0);
  switch (N.getOp().Kind) {
  case OpKind::ApplyMomentum:
  case OpKind::ApplyAdagrad:
    R.push_back(1);
    break;
  case OpKind::ApplyAdam:
  case OpKind::ApplyRMSProp:
    R.push_back(1);
    R.push_back(2);
    break;
  case OpKind::ApplyCenteredRMSProp:
    R.append({1, 2, 3});
    break;
  default:
    break;
  }
  return R;
}

std::string mdplan::deviceShortName(const DeviceSpec &D) {
  std::string S;
  if (D.Job)
    S += *D.Job + "_";
  if (D.Task)
    S += std::to_string(*D.Task) + "_";
  S += D.Type ? *D.Type : std::string("ANY");
  S += "_" + (D.Index ? std::to_string(*D.Index) : std::string("0"));
  return S;
}

SourceLoc mdplan::optimizerFieldLoc(const Graph &G, const DeploymentConfig &C,
                                    StringRef Field) {
  return C.OptimizerFieldsSet.lookup(Field) ? C.originOf(Field)
                                            : G.getOptimizerLoc(Field);
}
