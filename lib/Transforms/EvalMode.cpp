//===- EvalMode.cpp - The forward-only evaluation program -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Turns a replicated single-clone graph into the evaluation step: batch
// normalization uses the moving averages its update ops maintain
// (BatchNormInference), dropout passes its input through, the losses are
// summed into eval_loss, and everything that neither eval_loss nor a named
// output needs (update ops, summaries) is removed.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

using namespace llvm;
using namespace mdplan;

namespace {

class EvalModePass : public Pass {
public:
  StringRef getName() const override { return "eval-mode"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

} // namespace

/// Replaces every use of \p From by \p To.
static void replaceUses(UseMap &Uses, TensorRef From, TensorRef To) {
  for (auto &[User, I] : usesOf(Uses, From.N))
    if (User->getInput(I) == From)
      User->setInput(I, To);
}

Error EvalModePass::run(Graph &G, PassContext &Ctx) {
  if (Error E = requireReplicated(G, getName()))
    return E;
  DeployState &S = G.deployState();
  if (S.Clones.size() != 1)
    return makeError("eval-mode needs a graph replicated for one clone");
  if (S.EvalMode)
    return makeError("eval-mode: the graph is already an evaluation step");
  // It removes what evaluation does not need; the training passes keep
  // their nodes in the deployment state.
  if (S.LossesScaled)
    return makeError("eval-mode: scale-losses has run; eval-mode makes the "
                     "evaluation step of a graph just replicated (run it "
                     "right after replicate-clones)");
  if (Error E = requireUnplaced(G, getName()))
    return E;
  S.EvalMode = true;
  UseMap Uses = computeUses(G);
  std::vector<Node *> Nodes;
  for (const auto &N : G.nodes())
    Nodes.push_back(N.get());

  for (Node *N : Nodes) {
    if (isa(*N, OpKind::Dropout)) {
      replaceUses(Uses, TensorRef(N, 0), N->getInput(0));
      continue;
    }
    if (!isa(*N, OpKind::BatchNorm))
      continue;
    // The moving averages are the variables the update ops of the batch
    // statistics write.
    Node *Stats[2] = {nullptr, nullptr};
    for (auto &[User, I] : usesOf(Uses, N)) {
      unsigned Out = User->getInput(I).Index;
      if (isa(*User, OpKind::AssignMovingAverage) && I == 1 && Out >= 1)
        Stats[Out - 1] = User->getInput(0).N;
    }
    if (!Stats[0] || !Stats[1])
      continue; // No moving averages: keep the batch statistics.
    GraphBuilder B(G);
    B.setStack(N->getStack());
    B.setClone(N->getClone());
    B.setRole(N->getRole());
    B.setLoc(N->getLoc());
    SmallVector<TensorRef, 5> Ins(N->getInputs().begin(), N->getInputs().end());
    Ins.push_back(TensorRef(Stats[0]));
    Ins.push_back(TensorRef(Stats[1]));
    AttrDict A;
    A.set("epsilon", N->attrs().getFloat("epsilon"));
    A.set("scale", N->attrs().getBool("scale"));
    Node *Inf = B.createNamed(G.uniqueName((N->getName() + "/inference").str()),
                              OpKind::BatchNormInference, Ins, std::move(A));
    if (Error E = B.takeError())
      return E;
    replaceUses(Uses, TensorRef(N, 0), TensorRef(Inf, 0));
  }

  // eval_loss = the sum of the clone's losses.
  SmallVector<TensorRef, 4> Losses;
  for (Node *N : G.collection(Collection::Losses))
    Losses.push_back(TensorRef(N));
  std::vector<Node *> Roots;
  if (!Losses.empty()) {
    if (Node *Taken = G.lookup("eval_loss"))
      return Taken->error(
          "eval-mode gives the evaluation program's loss this name; rename "
          "this node (or compile without an evaluation program: --no-eval)");
    GraphBuilder B(G);
    B.setStack(S.Clones[0].Stack);
    B.setClone(0);
    B.setRole(NodeRole::Loss);
    // As scale-losses does: a loss of one element of any rank is a scalar.
    for (TensorRef &T : Losses)
      T = B.reshape(T, Shape());
    Node *L = B.createNamed("eval_loss", OpKind::AddN, Losses);
    if (Error E = B.takeError())
      return E;
    S.TotalLoss = L;
    Roots.push_back(L);
  }
  for (const auto &[Name, T] : G.outputs())
    Roots.push_back(T.N);
  G.collection(Collection::Summaries).clear();
  G.collection(Collection::UpdateOps).clear();
  pruneUnreachable(G, Roots);
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createEvalModePass() {
  return std::make_unique<EvalModePass>();
}
