//===- BasicPasses.cpp - verify, infer-shapes, place-devices --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/IR/Verifier.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace llvm;
using namespace mdplan;

namespace {

class VerifyPass : public Pass {
public:
  StringRef getName() const override { return "verify"; }
  Error run(Graph &G, PassContext &Ctx) override {
    for (const auto &N : G.nodes()) {
      // Attributes were completed when the node was made; check them again
      // on a copy so the pass changes nothing (the copy shares their
      // storage, and a complete dictionary is not rebuilt).
      Node &M = *N;
      AttrDict Saved = M.attrs();
      Error E = verifyAndCompleteAttrs(M);
      M.attrs() = std::move(Saved);
      if (E)
        return E;
    }
    return verifyGraph(G);
  }
};

class InferShapesPass : public Pass {
public:
  StringRef getName() const override { return "infer-shapes"; }
  Error run(Graph &G, PassContext &Ctx) override {
    auto Order = topologicalOrder(G);
    if (!Order)
      return Order.takeError();
    for (Node *N : *Order)
      if (Error E = inferNodeShapes(*N))
        return E;
    return checkNamedOutputs(G);
  }

private:
  /// Evaluation reports each named output as its mean over the examples:
  /// mdrun adds up the first value of a vector output's tensor for each
  /// example and takes a scalar as the mean over the batch. So an output
  /// must be a scalar or one value per example: [?], or [?,1] (the same
  /// values in memory). Once replicate-clones has fixed the batch size,
  /// shapes no longer tell the batch dimension apart, so the check is made
  /// before (the pipelines start with infer-shapes). A graph read back
  /// from --emit=graph has its inputs' batch fixed already: not checked.
  static Error checkNamedOutputs(const Graph &G) {
    if (G.getBatchSize() > 0)
      return Error::success();
    for (const auto &N : G.nodes())
      if (N->getOp().Kind == OpKind::Input && N->getNumOutputs() &&
          N->getOutputType(0).Dims.rank() &&
          N->getOutputType(0).Dims[0] != Shape::Unknown)
        return Error::success();
    // The batch dimension is unknown here, or the model's batch where a
    // reshape fixed it ([batch, -1]).
    int64_t Batch = G.getDefaultBatchSize();
    auto OnePerExample = [&](const Shape &S) {
      return S.rank() && (S[0] == Shape::Unknown || S[0] == Batch) &&
             llvm::all_of(S.dims().drop_front(),
                          [](int64_t D) { return D == 1; });
    };
    // One value in all ([1], [1,1]: a mean kept as a vector) reads as a
    // scalar.
    auto OneValue = [](const Shape &S) {
      return llvm::all_of(S.dims(), [](int64_t D) { return D == 1; });
    };
    // A first dimension fixed at the model's batch is one per example only
    // if it comes from the examples ([batch, -1] reshapes): a constant or
    // variable of that length is not.
    auto FromExamples = [](const Node *Root) {
      SmallVector<const Node *, 16> Work{Root};
      DenseSet<const Node *> Seen{Root};
      while (!Work.empty()) {
        const Node *N = Work.pop_back_val();
        if (N->getOp().Kind == OpKind::Input)
          return true;
        for (const TensorRef &In : N->getInputs())
          if (Seen.insert(In.N).second)
            Work.push_back(In.N);
      }
      return false;
    };
    for (const auto &[Name, T] : G.outputs()) {
      const Shape &S = T.type().Dims;
      if (OneValue(S))
        continue;
      if (OnePerExample(S)) {
        if (S[0] == Shape::Unknown || FromExamples(T.N))
          continue;
        return makeError(G.getOutputLoc(Name),
                         "output '" + Name + "': tensor '" + T.str() +
                             "' has shape " + S.str() +
                             " but does not depend on the examples (no "
                             "Input reaches it); a named output must be one "
                             "value ([], [1]) or one value per example");
      }
      return makeError(G.getOutputLoc(Name),
                       "output '" + Name + "': tensor '" + T.str() +
                           "' has shape " + S.str() +
                           "; a named output must be one value ([], [1]) or "
                           "one value per example ([?] or [?,1])");
    }
    return Error::success();
  }
};

class PlaceDevicesPass : public Pass {
public:
  StringRef getName() const override { return "place-devices"; }
  Error run(Graph &G, PassContext &Ctx) override {
    for (const auto &E : Ctx.Explain)
      if (!G.lookup(E.getKey()))
        return makeError("--explain-placement: no node named '" + E.getKey() +
                         "' after the passes that ran");
    PlacementOptions Opts;
    Opts.TheCluster = Ctx.Config.cluster();
    Opts.SoftPlacement = Ctx.Config.SoftPlacement;
    auto Filter = [&](const Node &N) {
      return Ctx.Explain.count(N.getName()) != 0;
    };
    Opts.ShouldRecord = Filter;
    return placeDevices(G, Opts, Ctx.Diags, &Ctx.Explanations);
  }
};

class PrunePass : public Pass {
public:
  StringRef getName() const override { return "prune"; }
  Error run(Graph &G, PassContext &Ctx) override {
    if (!G.hasDeployState() || !G.deployState().TrainOp)
      return Error::success(); // Nothing defines the step yet.
    if (Error E = requireUnplaced(G, getName()))
      return E;
    std::vector<Node *> Roots = reportedSummaries(G);
    Roots.push_back(G.deployState().TrainOp);
    for (const auto &[Name, T] : G.outputs())
      Roots.push_back(T.N);
    // The model's variables (not the passes' slots, nor mirrored copies).
    std::vector<std::pair<std::string, SourceLoc>> Variables;
    for (const auto &N : G.nodes())
      if (N->getOp().isVariable() && N->getLoc().isValid() &&
          !G.deployState().MirrorOf.count(N.get()))
        Variables.emplace_back(N->getName(), N->getLoc());
    pruneUnreachable(G, Roots);
    for (auto &[Name, Loc] : Variables) {
      if (G.lookup(Name))
        continue;
      if (Ctx.PrunedVariables)
        Ctx.PrunedVariables->emplace_back(std::move(Name), Loc);
      else
        warnPrunedVariable(Ctx.Diags, Name, Loc);
    }
    return Error::success();
  }
};

} // namespace

void mdplan::warnPrunedVariable(const DiagnosticHandler &Diags, StringRef Name,
                                const SourceLoc &Loc) {
  // TF's Saver would still save such a variable; here it is gone.
  Diags.warning(Loc, "variable '" + Name +
                         "' is read by nothing the training step computes "
                         "nor by a named output: pruned (it is not in the "
                         "plan, nor in its checkpoints)");
}

std::unique_ptr<Pass> mdplan::createPrunePass() {
  return std::make_unique<PrunePass>();
}

std::unique_ptr<Pass> mdplan::createVerifyPass() {
  return std::make_unique<VerifyPass>();
}
std::unique_ptr<Pass> mdplan::createInferShapesPass() {
  return std::make_unique<InferShapesPass>();
}
std::unique_ptr<Pass> mdplan::createPlaceDevicesPass() {
  return std::make_unique<PlaceDevicesPass>();
}
