//===- Graph.cpp - The mdplan graph IR ------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Graph.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <cstring>

using namespace llvm;
using namespace mdplan;

std::string TensorRef::str() const {
  if (!N)
    return "<null>";
  if (Index == 0)
    return N->getName().str();
  return (N->getName() + ":" + Twine(Index)).str();
}

const TensorType &TensorRef::type() const { return N->getOutputType(Index); }

DeviceFunction::~DeviceFunction() = default;

std::string DeviceFunction::describe() const {
  std::string S = getName().str();
  raw_string_ostream OS(S);
  OS << '(';
  bool First = true;
  for (const auto &[K, V] : getArgs()) {
    OS << (First ? "" : ", ") << K << '=';
    V.print(OS);
    First = false;
  }
  OS << ')';
  return OS.str();
}

std::string DeviceEntry::describe() const {
  switch (K) {
  case Kind::Spec: {
    std::string S = Spec.toString();
    return S.empty() ? "<empty>" : S;
  }
  case Kind::Function:
    return Fn->describe();
  case Kind::Clear:
    return "<clear>";
  case Kind::Role:
    return ("<" + nodeRoleName(RoleKind) + " device>").str();
  }
  llvm_unreachable("bad entry kind");
}

SmallVector<const DeviceEntry *, 8> DeviceStack::entries() const {
  SmallVector<const DeviceEntry *, 8> R;
  for (const DeviceStack *S = this; S && !S->isRoot(); S = S->Parent)
    R.push_back(S->Entry);
  std::reverse(R.begin(), R.end());
  return R;
}

StringRef mdplan::nodeRoleName(NodeRole R) {
  switch (R) {
  case NodeRole::Model:
    return "model";
  case NodeRole::Input:
    return "input";
  case NodeRole::Variable:
    return "variable";
  case NodeRole::Loss:
    return "loss";
  case NodeRole::Gradient:
    return "gradient";
  case NodeRole::Optimizer:
    return "optimizer";
  case NodeRole::Summary:
    return "summary";
  case NodeRole::Transfer:
    return "transfer";
  }
  llvm_unreachable("bad role");
}

StringRef mdplan::collectionName(Collection C) {
  switch (C) {
  case Collection::Losses:
    return "losses";
  case Collection::RegularizationLosses:
    return "regularization_losses";
  case Collection::UpdateOps:
    return "update_ops";
  case Collection::Summaries:
    return "summaries";
  }
  llvm_unreachable("bad collection");
}

StringRef mdplan::optimizerKindName(OptimizerSettings::Kind K) {
  switch (K) {
  case OptimizerSettings::Kind::SGD:
    return "sgd";
  case OptimizerSettings::Kind::Momentum:
    return "momentum";
  case OptimizerSettings::Kind::Adam:
    return "adam";
  case OptimizerSettings::Kind::RMSProp:
    return "rmsprop";
  case OptimizerSettings::Kind::Adagrad:
    return "adagrad";
  }
  llvm_unreachable("bad optimizer");
}

StringRef mdplan::decayTypeName(OptimizerSettings::Decay D) {
  switch (D) {
  case OptimizerSettings::Decay::Exponential:
    return "exponential";
  case OptimizerSettings::Decay::Polynomial:
    return "polynomial";
  }
  llvm_unreachable("bad decay type");
}

ArrayRef<StringRef> mdplan::optimizerValueFields() {
  static const StringRef Fields[] = {"learning_rate",
                                     "momentum",
                                     "beta1",
                                     "beta2",
                                     "epsilon",
                                     "rho",
                                     "initial_accumulator_value",
                                     "decay_steps",
                                     "decay_rate",
                                     "end_learning_rate",
                                     "power",
                                     "clip_gradient_norm",
                                     "clip_global_norm"};
  return Fields;
}

std::string mdplan::checkOptimizerField(const OptimizerSettings &O,
                                        StringRef Field) {
  // Written so that NaN fails every check. Infinity (also what a number
  // beyond a double's range, 1e400, reads as) passes the sign checks but
  // turns the variables into NaN or stops training: it fails as not finite.
  auto Fraction = [](double V) { return V >= 0 && V < 1; };
  auto Check = [](double V, bool Ok, StringRef Name,
                  StringRef Rule) -> std::string {
    if (!Ok)
      return (Name + " must " + Rule).str();
    if (!std::isfinite(V))
      return (Name + " must be finite").str();
    return "";
  };
  if (Field == "learning_rate")
    return Check(O.LearningRate, O.LearningRate > 0, "learning rate",
                 "be positive");
  if (Field == "momentum")
    return Check(O.momentum(), O.momentum() >= 0, "momentum",
                 "not be negative");
  if (Field == "beta1")
    return Fraction(O.Beta1) ? "" : "beta1 must be in [0, 1)";
  if (Field == "beta2")
    return Fraction(O.Beta2) ? "" : "beta2 must be in [0, 1)";
  if (Field == "epsilon")
    return Check(O.epsilon(), O.epsilon() > 0, "epsilon", "be positive");
  if (Field == "rho")
    return Fraction(O.Rho) ? "" : "rho must be in [0, 1)";
  if (Field == "end_learning_rate")
    return Check(O.EndLearningRate, O.EndLearningRate >= 0, "end_learning_rate",
                 "not be negative");
  if (Field == "power")
    return Check(O.Power, O.Power > 0, "power", "be positive");
  if (Field == "clip_gradient_norm")
    return Check(O.ClipNorm, O.ClipNorm >= 0, "clip_gradient_norm",
                 "not be negative");
  if (Field == "clip_global_norm")
    return Check(O.ClipGlobalNorm, O.ClipGlobalNorm >= 0, "clip_global_norm",
                 "not be negative");
  if (Field == "initial_accumulator_value")
    return Check(O.InitialAccumulator, O.InitialAccumulator > 0,
                 "initial_accumulator_value", "be positive");
  if (Field == "decay_steps")
    return O.DecaySteps >= 0 ? "" : "decay_steps must not be negative";
  if (Field == "decay_rate")
    return Check(O.DecayRate, O.DecayRate > 0, "decay_rate", "be positive");
  return "";
}

StringRef Node::getOpName() const { return Op->Name; }

void Node::addControlInput(Node *N) {
  if (!is_contained(ControlInputs, N))
    ControlInputs.push_back(N);
}

void Node::addControlInputs(ArrayRef<Node *> Ns) {
  SmallPtrSet<Node *, 16> Seen(ControlInputs.begin(), ControlInputs.end());
  for (Node *N : Ns)
    if (Seen.insert(N).second)
      ControlInputs.push_back(N);
}

Error Node::error(const Twine &Message) const {
  return makeError(Loc, "node '" + Name + "': " + Message);
}

Graph::Graph() = default;
Graph::~Graph() = default;

std::unique_ptr<Graph> Graph::clone() const {
  auto C = std::make_unique<Graph>();
  DenseMap<const DeviceFunction *, DeviceFunction *> Fns;
  for (const auto &F : Functions)
    Fns[F.get()] = C->addFunction(F->clone());
  for (const auto &E : Instances)
    C->Instances[E.getKey()] = Fns.lookup(E.getValue());
  DenseMap<const DeviceEntry *, const DeviceEntry *> Ents;
  for (const DeviceEntry &E : Entries) {
    DeviceEntry Copy = E;
    if (Copy.Fn)
      Copy.Fn = Fns.lookup(E.Fn);
    Ents[&E] = C->createEntry(std::move(Copy));
  }
  DenseMap<const DeviceStack *, const DeviceStack *> Stks;
  Stks[&Root] = &C->Root;
  // Stacks were interned parent first.
  for (const DeviceStack &S : Stacks)
    Stks[&S] = C->pushStack(Stks.lookup(S.Parent), Ents.lookup(S.Entry));
  // The copy of each node, by node id; the tables are sized once.
  std::vector<Node *> Copies(NextId, nullptr);
  auto Map = [&](const Node *N) -> Node * {
    if (!N)
      return nullptr;
    assert(N->getId() < Copies.size() && "a node of another graph");
    return Copies[N->getId()];
  };
  C->NodeList.reserve(NodeList.size());
  C->Names.reserve(NodeList.size());
  for (const auto &N : NodeList) {
    Node *M = C->createNode(N->getName(), N->getOp());
    M->Attrs = N->Attrs;
    if (N->Requested)
      M->Requested = C->internRequested(*N->Requested);
    M->Stack = N->Stack ? Stks.lookup(N->Stack) : nullptr;
    M->Outputs = N->Outputs;
    M->Loc = N->Loc;
    M->Role = N->Role;
    M->Clone = N->Clone;
    Copies[N->getId()] = M;
  }
  for (const auto &N : NodeList) {
    Node *M = Map(N.get());
    M->Inputs.reserve(N->Inputs.size());
    for (const TensorRef &In : N->Inputs)
      M->Inputs.push_back(TensorRef(Map(In.N), In.Index));
    M->ControlInputs.reserve(N->ControlInputs.size());
    for (Node *Ctl : N->ControlInputs)
      M->ControlInputs.push_back(Map(Ctl));
    M->ColocateWith = Map(N->ColocateWith);
  }
  for (unsigned I = 0; I < NumCollections; ++I)
    for (Node *N : Collections[I])
      C->Collections[I].insert(Map(N));
  for (const auto &[Name, T] : Outputs)
    C->Outputs[Name] = TensorRef(Map(T.N), T.Index);
  for (const auto &L : OutputLocs)
    C->OutputLocs[L.getKey()] = L.getValue();
  C->Name = Name;
  C->FileName = FileName;
  C->BatchSize = BatchSize;
  C->DefaultBatch = DefaultBatch;
  C->Optimizer = Optimizer;
  C->OptimizerLocs = OptimizerLocs;
  return C;
}

DeployState &Graph::deployState() {
  if (!State)
    State = std::make_unique<DeployState>();
  return *State;
}

void NodeDestroyer::operator()(Node *N) const { N->~Node(); }

StringRef Graph::copyName(StringRef S) {
  char *P = Alloc.Allocate<char>(S.size() + 1);
  if (!S.empty())
    std::memcpy(P, S.data(), S.size());
  P[S.size()] = '\0';
  return StringRef(P, S.size());
}

Node *Graph::createNode(StringRef Name, const OpDef &Op) {
  auto Ins = Names.try_emplace(NodeNameKey(Name), nullptr);
  assert(Ins.second && "node name already taken");
  return createNewNode(Ins.first->first, Ins.first->second, Op);
}

Node *Graph::createNewNode(NodeNameKey &Key, Node *&Slot, const OpDef &Op) {
  // The table's key is the caller's string until now: it becomes the
  // graph's copy (equal, so the table's order holds).
  Key.Data = copyName(Key.str()).data();
  auto *N = new (Alloc.Allocate<Node>()) Node(*this, NextId++, Key.str(), Op);
  Slot = N;
  NodeList.emplace_back(N);
  N->setNumOutputs(Op.NumOutputs >= 0 ? Op.NumOutputs : 0);
  // Outside every device scope until told otherwise: the passes may rely
  // on every node having a stack.
  N->setStack(&Root);
  // The role its op implies (an Input is built once on the inputs device,
  // a Variable shared by the clones), as the reader gives it.
  if (Op.isVariable())
    N->setRole(NodeRole::Variable);
  else if (Op.is(OF_Input))
    N->setRole(NodeRole::Input);
  else if (Op.is(OF_Summary))
    N->setRole(NodeRole::Summary);
  return N;
}

std::string Graph::uniqueName(StringRef Base) {
  if (!Names.count(NodeNameKey(Base)))
    return Base.str();
  unsigned &Next = NextSuffix[Base];
  for (;;) {
    std::string Candidate = (Base + "_" + Twine(++Next)).str();
    if (!Names.count(NodeNameKey(Candidate)))
      return Candidate;
  }
}

Node *Graph::createNodeUnique(StringRef Base, const OpDef &Op) {
  // One lookup when the name is free (the common case).
  auto Ins = Names.try_emplace(NodeNameKey(Base), nullptr);
  if (Ins.second)
    return createNewNode(Ins.first->first, Ins.first->second, Op);
  return createNode(uniqueName(Base), Op);
}

SourceLoc Graph::getOutputLoc(StringRef OutputName) const {
  auto It = OutputLocs.find(OutputName);
  if (It != OutputLocs.end() && It->getValue().isValid())
    return It->getValue();
  return SourceLoc{FileName, 0, 0};
}

void Graph::rename(Node *N, StringRef NewName) {
  assert(!Names.count(NodeNameKey(NewName)) && "node name already taken");
  Names.erase(NodeNameKey(N->Name));
  N->Name = copyName(NewName);
  Names.try_emplace(NodeNameKey(N->Name), N);
}

void Graph::eraseIf(function_ref<bool(const Node &)> Pred) {
  for (auto &C : Collections)
    C.remove_if([&](Node *N) { return Pred(*N); });
  for (auto It = Outputs.begin(); It != Outputs.end();) {
    if (Pred(*It->second.N))
      It = Outputs.erase(It);
    else
      ++It;
  }
  std::vector<NodePtr> Kept;
  Kept.reserve(NodeList.size());
  for (auto &N : NodeList) {
    if (Pred(*N)) {
      Names.erase(NodeNameKey(N->getName()));
      continue;
    }
    Kept.push_back(std::move(N));
  }
  NodeList = std::move(Kept);
}

void Graph::setOrder(ArrayRef<Node *> Order) {
  assert(Order.size() == NodeList.size() && "not a permutation");
  // Each node's place in the list, by node id.
  std::vector<unsigned> Slot(NextId, 0);
  for (unsigned I = 0, E = NodeList.size(); I != E; ++I)
    Slot[NodeList[I]->getId()] = I;
  std::vector<NodePtr> New;
  New.reserve(Order.size());
  for (Node *N : Order) {
    assert(N->getId() < NextId && "a node of another graph");
    New.push_back(std::move(NodeList[Slot[N->getId()]]));
  }
  NodeList = std::move(New);
}

const DeviceStack *Graph::pushStack(const DeviceStack *Parent,
                                    const DeviceEntry *E) {
  if (!Parent)
    Parent = &Root;
  auto &Slot = StackIndex[{Parent, E}];
  if (!Slot) {
    Stacks.push_back(DeviceStack{Parent, E, Parent->Depth + 1});
    Slot = &Stacks.back();
  }
  return Slot;
}

DeviceEntry *Graph::createEntry(DeviceEntry E) {
  Entries.push_back(std::move(E));
  return &Entries.back();
}

DeviceFunction *Graph::addFunction(std::unique_ptr<DeviceFunction> F) {
  Functions.push_back(std::move(F));
  return Functions.back().get();
}

const DeviceSpec &Node::getRequestedDevice() const {
  static const DeviceSpec Empty;
  return Requested ? *Requested : Empty;
}

void Node::setRequestedDevice(const DeviceSpec &D) {
  Requested = D.empty() ? nullptr : Parent->internRequested(D);
}

const DeviceSpec *Graph::internRequested(const DeviceSpec &D) {
  auto Ins = RequestedIndex.try_emplace(D.toString(), nullptr);
  if (Ins.second)
    Ins.first->second = &RequestedSpecs.emplace_back(D);
  return Ins.first->second;
}

int Graph::getOrAddDevice(const DeviceSpec &D) {
  auto Ins = DeviceIndex.try_emplace(D.toString(), int(Devices.size()));
  if (Ins.second)
    Devices.push_back(D);
  return Ins.first->second;
}

const DeviceSpec &Graph::deviceOf(const Node &N) const {
  static const DeviceSpec Empty;
  return N.isPlaced() ? Devices[N.getDevice()] : Empty;
}

ConsumerTable::ConsumerTable(const Graph &G) : Begin(G.getIdBound() + 1, 0) {
  // Count each node's consumers, turn the counts into offsets, then fill
  // each node's slice in graph order. The producers' ids are read once, in
  // the first walk: each is a read of another node, mostly a cache miss on
  // a large graph.
  std::vector<unsigned> Producer;
  Producer.reserve(2 * G.size());
  for (const auto &N : G.nodes()) {
    for (const TensorRef &In : N->getInputs()) {
      unsigned Id = In.N->getId();
      Producer.push_back(Id);
      ++Begin[Id + 1];
    }
    for (const Node *C : N->getControlInputs()) {
      unsigned Id = C->getId();
      Producer.push_back(Id);
      ++Begin[Id + 1];
    }
  }
  for (size_t I = 1; I < Begin.size(); ++I)
    Begin[I] += Begin[I - 1];
  All.resize(Begin.back());
  AllIds.resize(Begin.back());
  std::vector<unsigned> Next(Begin.begin(), Begin.end() - 1);
  const unsigned *P = Producer.data();
  for (const auto &N : G.nodes()) {
    unsigned Id = N->getId();
    for (size_t I = 0, E = numInEdges(*N); I != E; ++I) {
      unsigned K = Next[*P++]++;
      All[K] = N.get();
      AllIds[K] = Id;
    }
  }
}
