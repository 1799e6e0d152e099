//===- Verifier.cpp - Structural checks of a graph ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Verifier.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <optional>

using namespace llvm;
using namespace mdplan;

/// Finds a cycle among the nodes not yet ordered and describes it.
static Error describeCycle(const Graph &G, ArrayRef<unsigned> Remaining) {
  auto Pending = [&](const Node *N) { return Remaining[N->getId()] != 0; };
  // Every pending node has a pending predecessor; walk predecessors until a
  // node repeats.
  const Node *Start = nullptr;
  for (const auto &N : G.nodes())
    if (Pending(N.get())) {
      Start = N.get();
      break;
    }
  auto PendingPred = [&](const Node *N) -> const Node * {
    for (const TensorRef &In : N->getInputs())
      if (Pending(In.N))
        return In.N;
    for (const Node *C : N->getControlInputs())
      if (Pending(C))
        return C;
    return nullptr;
  };
  DenseMap<const Node *, unsigned> Seen;
  std::vector<const Node *> Path;
  const Node *Cur = Start;
  while (Cur && !Seen.count(Cur)) {
    Seen[Cur] = Path.size();
    Path.push_back(Cur);
    Cur = PendingPred(Cur);
  }
  assert(Cur && "no cycle among pending nodes");
  // Path[Seen[Cur]..] is the cycle, walking against the edges.
  std::vector<const Node *> Cycle(Path.begin() + Seen[Cur], Path.end());
  std::reverse(Cycle.begin(), Cycle.end());
  std::string Text;
  for (const Node *N : Cycle)
    Text += N->getName().str() + " -> ";
  Text += Cycle.front()->getName().str();
  return Cycle.front()->error("is part of a cycle: " + Text);
}

/// The nodes in id order when every edge goes from a smaller id to a
/// larger one (a graph built front to back: read, differentiated, copied),
/// else nothing. Then the order topologicalOrder() computes is the id
/// order: the smallest id not yet emitted has all its predecessors emitted,
/// so it is the smallest ready one. Found without consumer lists or a heap.
static std::optional<std::vector<Node *>> idOrderIfTopological(const Graph &G) {
  std::vector<Node *> ById(G.getIdBound(), nullptr);
  for (const auto &NP : G.nodes()) {
    const Node &N = *NP;
    unsigned Id = N.getId();
    for (const TensorRef &In : N.getInputs())
      if (In.N->getId() >= Id)
        return std::nullopt;
    for (const Node *C : N.getControlInputs())
      if (C->getId() >= Id)
        return std::nullopt;
    ById[Id] = NP.get();
  }
  std::vector<Node *> Order;
  Order.reserve(G.size());
  for (Node *N : ById)
    if (N)
      Order.push_back(N);
  return Order;
}

Expected<std::vector<Node *>> mdplan::topologicalOrder(const Graph &G) {
  if (auto Order = idOrderIfTopological(G))
    return std::move(*Order);
  ConsumerTable Users(G);
  std::vector<unsigned> Remaining(G.getIdBound(), 0);
  for (const auto &NP : G.nodes())
    Remaining[NP->getId()] = numInEdges(*NP);
  // Kahn's algorithm; a ready node is emitted as soon as its turn in graph
  // order comes, which keeps the order stable.
  std::vector<Node *> Order;
  Order.reserve(G.size());
  // Process in graph order: a min-heap of ids, so ordering it reads no
  // node.
  std::vector<Node *> ById(G.getIdBound(), nullptr);
  std::vector<unsigned> Ready;
  for (const auto &NP : G.nodes()) {
    ById[NP->getId()] = NP.get();
    if (Remaining[NP->getId()] == 0)
      Ready.push_back(NP->getId());
  }
  std::make_heap(Ready.begin(), Ready.end(), std::greater<unsigned>());
  while (!Ready.empty()) {
    std::pop_heap(Ready.begin(), Ready.end(), std::greater<unsigned>());
    unsigned Id = Ready.back();
    Ready.pop_back();
    Order.push_back(ById[Id]);
    for (unsigned U : Users.idsOf(Id))
      if (--Remaining[U] == 0) {
        Ready.push_back(U);
        std::push_heap(Ready.begin(), Ready.end(), std::greater<unsigned>());
      }
  }
  if (Order.size() != G.size())
    return describeCycle(G, Remaining);
  return Order;
}

Error mdplan::verifyGraph(const Graph &G) {
  // Membership by id (ids are never reused); a node of another graph may
  // have the same id.
  std::vector<bool> Present(G.getIdBound(), false);
  for (const auto &N : G.nodes())
    Present[N->getId()] = true;
  auto InGraph = [&](const Node *N) {
    return &N->getGraph() == &G && N->getId() < Present.size() &&
           Present[N->getId()];
  };
  for (const auto &NP : G.nodes()) {
    const Node &N = *NP;
    if (G.lookup(N.getName()) != &N)
      return N.error("is not registered under its name");
    std::string Arity = N.getOp().checkArity(N.getNumInputs());
    if (!Arity.empty())
      return N.error(Arity);
    for (const TensorRef &In : N.getInputs()) {
      if (!In.N || !InGraph(In.N))
        return N.error("reads a node that is not in the graph");
      if (In.Index >= In.N->getNumOutputs())
        return N.error("reads '" + In.str() + "', but '" + In.N->getName() +
                       "' has " + Twine(In.N->getNumOutputs()) + " output" +
                       (In.N->getNumOutputs() == 1 ? "" : "s"));
    }
    for (const Node *C : N.getControlInputs())
      if (!InGraph(C))
        return N.error("has a control input that is not in the graph");
    if (N.getColocateWith() && !InGraph(N.getColocateWith()))
      return N.error("is colocated with a node that is not in the graph");
  }
  for (unsigned C = 0; C < NumCollections; ++C)
    for (const Node *N : G.collection(Collection(C)))
      if (!InGraph(N))
        return makeError("collection " + collectionName(Collection(C)) +
                         " names a node that is not in the graph");
  auto Order = topologicalOrder(G);
  if (!Order)
    return Order.takeError();
  return Error::success();
}
