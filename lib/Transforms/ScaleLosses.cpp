//===- ScaleLosses.cpp - Gather and scale each clone's loss ---------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// model_deploy's _gather_clone_loss, per clone, on the clone's device:
//
//   <scope>clone_loss          = add_n(losses of the clone)
//   <scope>scaled_clone_loss   = clone_loss / num_clones   (num_clones > 1)
//   <scope>regularization_loss = add_n(regularization losses)  (first clone)
//   <scope>sum_loss            = add_n(the above)
//
// and, on the optimizer device, total_loss = add_n(sum_loss of every clone).
// Scalar summaries <scope>clone_loss, regularization_loss and total_loss go
// to the host CPU. A clone without losses contributes nothing.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

using namespace llvm;
using namespace mdplan;

namespace {

class ScaleLossesPass : public Pass {
public:
  StringRef getName() const override { return "scale-losses"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

} // namespace

/// Adds a scalar summary of \p Value tagged \p Tag on the optimizer device.
static void addSummary(Graph &G, DeployState &S, TensorRef Value, StringRef Tag,
                       int Clone) {
  GraphBuilder B(G);
  B.setStack(G.pushStack(G.getRootStack(), S.OptimizerEntry));
  B.setRole(NodeRole::Summary);
  B.setClone(Clone);
  AttrDict A;
  A.set("tag", Tag);
  Node *N = B.createNamed(G.uniqueName((Tag + "/summary").str()),
                          OpKind::ScalarSummary, {Value}, std::move(A));
  if (N)
    G.collection(Collection::Summaries).insert(N);
  consumeError(B.takeError());
}

Error ScaleLossesPass::run(Graph &G, PassContext &Ctx) {
  DeployState &S = G.deployState();
  if (Error E = requireReplicated(G, getName()))
    return E;
  if (S.LossesScaled)
    return makeError("scale-losses: the losses are already gathered");
  if (S.EvalMode)
    return makeError("scale-losses: the graph is an evaluation step "
                     "(eval-mode ran), which trains nothing");
  if (Error E = requireUnplaced(G, getName()))
    return E;
  int NumClones = int(S.Clones.size());

  // Losses by clone (the collection holds every clone's, in clone order).
  std::vector<SmallVector<TensorRef, 4>> Losses(NumClones);
  for (Node *N : G.collection(Collection::Losses)) {
    if (N->getClone() < 0)
      return N->error("is a loss but is not part of the replicated model; "
                      "losses must be computed by the clones");
    const TensorType &T = N->getOutputType(0);
    if (!isFloat(T.Elt) || T.Dims.numElements() != 1)
      return N->error("a loss must be a float scalar, got " + T.str());
    Losses[N->getClone()].push_back(TensorRef(N, 0));
  }
  SmallVector<TensorRef, 4> RegLosses;
  for (Node *N : G.collection(Collection::RegularizationLosses)) {
    const TensorType &T = N->getOutputType(0);
    if (!isFloat(T.Elt) || T.Dims.numElements() != 1)
      return N->error("a regularization loss must be a float scalar, got " +
                      T.str());
    RegLosses.push_back(TensorRef(N, 0));
    // One the model computes is every clone's: all are added, as
    // model_deploy adds its collection's entries. A variable's regularizer
    // is built once.
    if (N->getClone() == 0 && NumClones > 1)
      Ctx.Diags.warning(
          N->getLoc(),
          "regularization loss '" +
              StringRef(N->getName()).drop_front(S.Clones[0].Scope.size()) +
              "' is part of the replicated model, so each of the " +
              Twine(NumClones) +
              " clones adds its own (as model_deploy adds every clone's "
              "entry of REGULARIZATION_LOSSES); a variable's regularizer "
              "is added once");
  }

  // They are added up: one element type for all.
  const Node *First = nullptr;
  for (auto *C : {&G.collection(Collection::Losses),
                  &G.collection(Collection::RegularizationLosses)})
    for (Node *N : *C) {
      if (!First) {
        First = N;
        continue;
      }
      DType A = First->getOutputType(0).Elt, B = N->getOutputType(0).Elt;
      if (A != B)
        return N->error("is a " + dtypeName(B) + " loss, but '" +
                        First->getName() + "' is " + dtypeName(A) +
                        "; the losses are added, so they must have one "
                        "element type");
    }

  SmallVector<TensorRef, 8> SumLosses;
  bool RegPending = !RegLosses.empty();
  for (CloneInfo &CI : S.Clones) {
    GraphBuilder B(G);
    B.setPrefix(StringRef(CI.Scope).rtrim('/'));
    B.setStack(CI.Stack);
    B.setClone(CI.Index);
    B.setRole(NodeRole::Loss);
    SmallVector<TensorRef, 2> All;
    TensorRef CloneLoss, RegLoss;
    if (!Losses[CI.Index].empty()) {
      // A loss of one element may have any rank ([1], [1,1]): summed as a
      // scalar.
      for (TensorRef &L : Losses[CI.Index])
        L = B.reshape(L, Shape());
      CloneLoss = B.out(OpKind::AddN, Losses[CI.Index], {}, "clone_loss");
      if (Error E = B.takeError())
        return E;
      if (NumClones > 1) {
        TensorRef N = B.constant(double(NumClones), CloneLoss.type().Elt, {},
                                 "scaled_clone_loss/y");
        CloneLoss = B.out(OpKind::Div, {CloneLoss, N}, {}, "scaled_clone_loss");
      }
      All.push_back(CloneLoss);
    }
    // Regularization goes to the first clone that has a loss; model_deploy
    // adds it to the first clone, which always has one.
    if (RegPending && !All.empty()) {
      for (TensorRef &L : RegLosses)
        L = B.reshape(L, Shape());
      RegLoss = B.out(OpKind::AddN, RegLosses, {}, "regularization_loss");
      All.push_back(RegLoss);
      S.RegularizationLoss = RegLoss.N;
      RegPending = false;
    }
    if (All.empty())
      continue;
    TensorRef Sum =
        All.size() == 1 ? All[0] : B.out(OpKind::AddN, All, {}, "sum_loss");
    if (Error E = B.takeError())
      return E;
    CI.SumLoss = Sum.N;
    SumLosses.push_back(Sum);
    if (CloneLoss)
      addSummary(G, S, CloneLoss, (CI.Scope + "clone_loss").c_str(), CI.Index);
    if (RegLoss)
      addSummary(G, S, RegLoss, "regularization_loss", CI.Index);
  }
  if (SumLosses.empty()) {
    // model_deploy allows it (its total_loss is None); mdrun refuses to
    // train such a plan, so say so where the model can be fixed.
    Ctx.Diags.warning(SourceLoc{internFileName(G.getFileName()), 0, 0},
                      "the model names no loss ('loss:'): the training "
                      "program computes no gradients and updates nothing, "
                      "and mdrun refuses to train it");
    S.LossesScaled = true;
    return Error::success();
  }
  GraphBuilder B(G);
  B.setStack(G.pushStack(G.getRootStack(), S.OptimizerEntry));
  B.setRole(NodeRole::Loss);
  if (Node *Taken = G.lookup("total_loss"))
    // Also what a graph printed after the passes (--emit=graph) holds.
    return Taken->error("scale-losses gives the sum of the losses this name; "
                        "rename this node (a graph printed by --emit=graph "
                        "after the passes has it: compile the model it came "
                        "from)");
  Node *Total = B.createNamed("total_loss", OpKind::AddN, SumLosses);
  if (Error E = B.takeError())
    return E;
  S.TotalLoss = Total;
  addSummary(G, S, TensorRef(Total), "total_loss", -1);
  S.LossesScaled = true;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createScaleLossesPass() {
  return std::make_unique<ScaleLossesPass>();
}
