//===- BuildGradients.cpp - Reverse-mode differentiation per clone --------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// For each clone with a loss, differentiates its summed loss with respect to
// the trainable variables it reads, in reverse topological order, with the
// gradient rule each op declares next to its shape function. Gradient nodes
// are named <scope>gradients/<forward name>_grad/... and go on the clone's
// device (or, with colocate_gradients, with their forward node). Gradients
// reaching one tensor from several consumers are summed with AddN. Nodes a
// rule made that no variable's gradient needs are removed again.
//
// The backward pass starts from grad_ys, a constant 1, or 1/W with the
// mirrored strategy over W > 1 worker processes, whose all-reduce then sums
// into the mean over the workers.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"

using namespace llvm;
using namespace mdplan;

namespace {

class BuildGradientsPass : public Pass {
public:
  StringRef getName() const override { return "build-gradients"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

/// Records the nodes it creates; optionally colocates them with the forward
/// node being differentiated.
class RecordingGradBuilder : public GradBuilder {
public:
  using GradBuilder::GradBuilder;
  std::vector<Node *> Created;
  Node *ColocateWith = nullptr;

protected:
  void onCreate(Node &N) override {
    Created.push_back(&N);
    if (ColocateWith)
      N.setColocateWith(ColocateWith);
  }
};

using TensorKey = std::pair<Node *, unsigned>;

} // namespace

/// The part of a name after the clone scope.
static StringRef stripScope(StringRef Name, StringRef Scope) {
  if (!Scope.empty() && Name.startswith(Scope))
    return Name.drop_front(Scope.size());
  return Name;
}

static bool isTrainable(const Node &N) {
  return N.getOp().isVariable() && N.attrs().getBool("trainable", true) &&
         isFloat(N.getOutputType(0).Elt);
}

/// When no gradient reaches any variable although \p Loss depends on a
/// trainable one (a node of \p DependsOnVar, through tensors of any type):
/// the error at a node that blocks the gradients, an op without a gradient
/// or one that makes a non-float tensor of a float one.
static Error noGradientsError(Node *Loss, const DenseSet<Node *> &DependsOnVar,
                              int CloneIndex) {
  std::string Why = "no gradients for any variable: the loss of clone " +
                    std::to_string(CloneIndex) +
                    " depends on the trainable variables only through ops "
                    "without a gradient, such as this ";
  // Depth first from the loss, each node with the type of the tensor it was
  // reached through: only float tensors carry gradients.
  SmallVector<std::pair<Node *, unsigned>, 16> Work{{Loss, 1}};
  DenseSet<std::pair<Node *, unsigned>> Seen;
  while (!Work.empty()) {
    auto [N, FloatOut] = Work.pop_back_val();
    if (!Seen.insert({N, FloatOut}).second || N->getOp().isVariable())
      continue;
    const OpDef &Op = N->getOp();
    // replicate-clones' slice of a node built once for every clone.
    if (FloatOut && Op.Kind == OpKind::BatchSlice)
      return N->error(
          "no gradients for any variable: the loss of clone " +
          Twine(CloneIndex) +
          " depends on the trainable variables only through '" +
          N->getInput(0).N->getName() +
          "', which is built once for all clones (an input role) and "
          "sliced per clone, and gradients do not flow back through the "
          "slices: build it in the model, outside the INPUTS role");
    if (FloatOut && (Op.is(OF_NoGradient) || !Op.Gradient))
      return N->error(Why + Op.Name);
    for (const TensorRef &In : llvm::reverse(N->getInputs())) {
      if (!DependsOnVar.count(In.N))
        continue;
      bool InFloat = isFloat(In.type().Elt);
      if (!FloatOut && InFloat)
        return N->error(Why + Op.Name + ", whose output is " +
                        dtypeName(N->getOutputType(0).Elt) +
                        " (only float tensors carry gradients)");
      Work.push_back({In.N, InFloat});
    }
  }
  return Loss->error("no gradients for any variable: the loss of clone " +
                     Twine(CloneIndex) +
                     " depends on the trainable variables only through "
                     "tensors without a gradient");
}

/// The first loss the graph file wrote that \p SumLoss adds (scale-losses
/// makes the sums), or \p SumLoss when none has a line: where an error
/// about the clone's loss points.
static const Node *writtenLoss(const Node *SumLoss) {
  SmallVector<const Node *, 8> Work{SumLoss};
  DenseSet<const Node *> Seen;
  while (!Work.empty()) {
    const Node *N = Work.pop_back_val();
    if (!Seen.insert(N).second)
      continue;
    if (N->getLoc().Line)
      return N;
    for (const TensorRef &In : llvm::reverse(N->getInputs()))
      Work.push_back(In.N);
  }
  return SumLoss;
}

Error BuildGradientsPass::run(Graph &G, PassContext &Ctx) {
  if (Error E = requireReplicated(G, getName()))
    return E;
  DeployState &S = G.deployState();
  if (!S.LossesScaled)
    return makeError("build-gradients needs scale-losses to run first");
  if (S.GradientsBuilt)
    return makeError("build-gradients: the gradients are already built");
  if (Error E = requireUnplaced(G, getName()))
    return E;

  // The seed of every clone's backward pass. With the mirrored strategy over
  // W worker processes, the all-reduce sums the gradients of all W workers;
  // seeding with 1/W makes that sum the mean over the workers (each worker's
  // losses are already means over its own clones), while the losses the
  // plan reports stay each worker's own.
  const DeploymentConfig &C = Ctx.Config;
  double Seed = C.Strat == Strategy::Mirrored && C.NumReplicas > 1
                    ? 1.0 / C.NumReplicas
                    : 1.0;

  // As TensorFlow's apply_gradients, a step in which the losses depend on
  // trainable variables but no variable gets a gradient is an error.
  Error Blocked = Error::success();
  auto DropBlocked = make_scope_exit([&] { consumeError(std::move(Blocked)); });
  bool AnyGradient = false;
  // The work for one clone is proportional to the nodes its loss depends
  // on and the nodes it creates, not to the graph, which holds every
  // clone: the tables below are made once and each clone clears what it
  // set, and the nodes no gradient needs are erased once, at the end.
  //
  // Per-node flags of the forward graph (every node the pass starts with;
  // no loss depends on a gradient node), indexed by node id.
  enum : uint8_t { SeenFlag = 1, RelevantFlag = 2, DependsFlag = 4 };
  std::vector<uint8_t> Flags(G.getIdBound(), 0);
  auto Has = [&](const Node *N, uint8_t F) {
    return N->getId() < Flags.size() && (Flags[N->getId()] & F);
  };
  // Per-node flags of the gradient nodes, indexed by node id: each clone
  // creates its own, so they need no clearing; a created node that no
  // gradient of its clone needs is erased.
  enum : uint8_t { CreatedFlag = 1, NeededFlag = 2 };
  std::vector<uint8_t> Made;
  auto ClearFlags = [&](ArrayRef<Node *> Nodes) {
    for (Node *N : Nodes)
      Flags[N->getId()] = 0;
  };
  for (CloneInfo &CI : S.Clones) {
    if (!CI.SumLoss)
      continue;
    // Nodes the loss depends on, in post-order (inputs first).
    std::vector<Node *> Order;
    auto Clear = make_scope_exit([&] { ClearFlags(Order); });
    SmallVector<std::pair<Node *, unsigned>, 64> Stack;
    Stack.push_back({CI.SumLoss, 0});
    Flags[CI.SumLoss->getId()] |= SeenFlag;
    while (!Stack.empty()) {
      auto &[N, Next] = Stack.back();
      if (Next < N->getNumInputs()) {
        Node *In = N->getInput(Next++).N;
        if (!(Flags[In->getId()] & SeenFlag)) {
          Flags[In->getId()] |= SeenFlag;
          Stack.push_back({In, 0});
        }
        continue;
      }
      Order.push_back(N);
      Stack.pop_back();
    }
    // Nodes that depend on a trainable variable through float tensors, and
    // through tensors of any type.
    for (Node *N : Order) {
      uint8_t &F = Flags[N->getId()];
      if (isTrainable(*N)) {
        F |= RelevantFlag | DependsFlag;
        continue;
      }
      for (const TensorRef &In : N->getInputs()) {
        if (Has(In.N, DependsFlag))
          F |= DependsFlag;
        if (Has(In.N, RelevantFlag) && isFloat(In.type().Elt)) {
          F |= RelevantFlag;
          break;
        }
      }
    }
    auto Relevant = [&](const Node *N) { return Has(N, RelevantFlag); };
    DenseSet<Node *> DependsOnVar;
    auto DependsOn = [&](const Node *N) { return Has(N, DependsFlag); };
    // A loss whose gradients cannot reach the variables it depends on.
    auto NoteBlocked = [&] {
      if (!Blocked && DependsOn(CI.SumLoss)) {
        for (Node *N : Order)
          if (DependsOn(N))
            DependsOnVar.insert(N);
        Blocked = noGradientsError(CI.SumLoss, DependsOnVar, CI.Index);
      }
    };
    if (!Relevant(CI.SumLoss)) {
      NoteBlocked();
      continue;
    }

    RecordingGradBuilder B(G);
    B.setStack(CI.Stack);
    B.setClone(CI.Index);
    B.setRole(NodeRole::Gradient);
    std::string Prefix = CI.Scope + "gradients/";
    DenseMap<TensorKey, SmallVector<TensorRef, 2>> Grads;

    // Sums the gradients that reached one tensor.
    auto Total = [&](Node *N, unsigned Out) -> TensorRef {
      auto It = Grads.find({N, Out});
      if (It == Grads.end() || It->second.empty())
        return TensorRef();
      if (It->second.size() == 1)
        return It->second[0];
      return B.out(OpKind::AddN, It->second, {},
                   Out ? "AddN_" + std::to_string(Out) : "AddN");
    };

    B.setPrefix(StringRef(Prefix).rtrim('/'));
    const TensorType &LT = CI.SumLoss->getOutputType(0);
    Grads[{CI.SumLoss, 0}].push_back(
        B.constant(Seed, LT.Elt, LT.Dims, "grad_ys"));

    for (auto It = Order.rbegin(), E = Order.rend(); It != E; ++It) {
      Node *N = *It;
      if (!Relevant(N) || N->getOp().isVariable())
        continue;
      std::string GradScope =
          Prefix + stripScope(N->getName(), CI.Scope).str() + "_grad";
      B.setPrefix(GradScope);
      B.ColocateWith = Ctx.Config.ColocateGradients ? N : nullptr;
      SmallVector<TensorRef, 4> OutGrads;
      bool Any = false;
      for (unsigned O = 0, NO = N->getNumOutputs(); O != NO; ++O) {
        OutGrads.push_back(Total(N, O));
        Any |= bool(OutGrads.back());
      }
      if (!Any)
        continue;
      const OpDef &Op = N->getOp();
      if (Op.is(OF_NoGradient))
        continue;
      if (!Op.Gradient)
        return N->error("the loss of clone " + Twine(CI.Index) +
                        " depends on a trainable variable through this " +
                        Op.Name + ", which has no gradient rule");
      SmallVector<TensorRef, 4> InGrads(N->getNumInputs());
      SmallVector<bool, 4> Needed;
      for (const TensorRef &In : N->getInputs())
        Needed.push_back(Relevant(In.N) && isFloat(In.type().Elt));
      B.setNeeded(Needed);
      if (Error Err = Op.Gradient(B, *N, OutGrads, InGrads))
        return Err;
      if (Error Err = B.takeError())
        return Err;
      for (unsigned I = 0, NI = N->getNumInputs(); I != NI; ++I) {
        TensorRef In = N->getInput(I);
        if (!InGrads[I] || !Relevant(In.N) || !isFloat(In.type().Elt))
          continue;
        if (!(InGrads[I].type().Dims == In.type().Dims))
          return N->error("gradient rule of " + Op.Name + " produced " +
                          InGrads[I].type().str() + " for input " + Twine(I) +
                          " of type " + In.type().str());
        Grads[{In.N, In.Index}].push_back(InGrads[I]);
      }
    }

    // The gradient of each variable the clone reads.
    std::vector<Node *> Roots;
    for (Node *N : Order) {
      if (!isTrainable(*N) || !Relevant(N))
        continue;
      B.setPrefix(Prefix + stripScope(N->getName(), CI.Scope).str() + "_grad");
      B.ColocateWith = nullptr;
      unsigned Ready = 0;
      for (const TensorRef &Part : Grads.lookup({N, 0}))
        Ready = std::max(Ready, Part.N->getId());
      TensorRef Grad = Total(N, 0);
      if (Error Err = B.takeError())
        return Err;
      if (!Grad)
        continue;
      CI.Gradients[N] = Grad;
      CI.GradientReady[N] = Ready;
      Roots.push_back(Grad.N);
    }

    if (Roots.empty())
      NoteBlocked();
    else
      AnyGradient = true;

    // Drop what the rules made that no gradient needs (e.g. the gradient of
    // the first layer's input).
    if (Made.size() < G.getIdBound())
      Made.resize(G.getIdBound(), 0);
    for (Node *N : B.Created)
      Made[N->getId()] |= CreatedFlag;
    SmallVector<Node *, 64> Work(Roots.begin(), Roots.end());
    for (Node *R : Roots)
      Made[R->getId()] |= NeededFlag;
    while (!Work.empty()) {
      Node *N = Work.pop_back_val();
      for (const TensorRef &In : N->getInputs()) {
        uint8_t &F = Made[In.N->getId()];
        if ((F & CreatedFlag) && !(F & NeededFlag)) {
          F |= NeededFlag;
          Work.push_back(In.N);
        }
      }
    }
  }
  G.eraseIf([&](const Node &N) {
    uint8_t F = N.getId() < Made.size() ? Made[N.getId()] : 0;
    return (F & CreatedFlag) && !(F & NeededFlag);
  });
  if (Blocked && !AnyGradient)
    return Blocked;
  // As TensorFlow's minimize: losses that depend on no trainable variable
  // at all train nothing.
  if (!AnyGradient)
    for (const CloneInfo &CI : S.Clones)
      if (CI.SumLoss)
        return writtenLoss(CI.SumLoss)
            ->error(
                "no gradients for any variable: the loss of clone " +
                Twine(CI.Index) +
                " depends on no trainable variable, so training would change "
                "nothing");
  S.GradientsBuilt = true;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createBuildGradientsPass() {
  return std::make_unique<BuildGradientsPass>();
}
