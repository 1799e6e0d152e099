//===- Compiler.cpp - From a model to a plan ------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Plan/Compiler.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Plan/PlanEmitter.h"

using namespace llvm;
using namespace mdplan;

std::string mdplan::evalPipelineBeforePlacement() {
  return "verify,infer-shapes,replicate-clones,eval-mode,place-devices";
}

std::string mdplan::evalPipelineAfterPlacement() {
  return "partition,schedule,plan-memory";
}

/// Builds the evaluation graph: one clone at the evaluation batch, placed
/// like clone 0, its variables where \p Train keeps them.
static Expected<std::unique_ptr<Graph>>
buildEval(std::unique_ptr<Graph> G, const Graph &Train, PassContext &TrainCtx,
          const CompileOptions &Opts) {
  DeploymentConfig C = TrainCtx.Config;
  C.GpusPerWorker = TrainCtx.Config.cluster().GpusPerWorker;
  C.NumClones = 1;
  C.Strat = Strategy::ParameterServer;
  C.BatchPerClone = Opts.EvalBatch > 0 ? Opts.EvalBatch : 100;
  C.GlobalBatch = 0;
  PassContext Ctx(C);
  Ctx.Diags = TrainCtx.Diags;
  PassManager Before, After;
  if (Error E = Before.parsePipeline(evalPipelineBeforePlacement()))
    return std::move(E);
  if (Error E = After.parsePipeline(evalPipelineAfterPlacement()))
    return std::move(E);
  if (Error E = Before.run(*G, Ctx))
    return appendToMessage(std::move(E), " (in the evaluation program)");
  for (const auto &N : G->nodes()) {
    if (!N->getOp().isVariable())
      continue;
    Node *T = Train.lookup(N->getName());
    if (T && T->getOp().isVariable() && T->isPlaced())
      N->setDevice(G->getOrAddDevice(Train.deviceOf(*T)));
  }
  if (Error E = After.run(*G, Ctx))
    return appendToMessage(std::move(E), " (in the evaluation program)");
  return std::move(G);
}

Expected<Compilation> mdplan::compileModel(std::unique_ptr<Graph> Model,
                                           PassContext &Ctx,
                                           const CompileOptions &Opts) {
  Compilation R;
  std::string Pipeline =
      Opts.Pipeline.empty() ? defaultPipeline() : Opts.Pipeline;
  bool Full = Opts.EmitPlan && StringRef(Pipeline).endswith("plan-memory");
  std::unique_ptr<Graph> EvalCopy;
  if (Opts.BuildEval && Full)
    EvalCopy = Model->clone();
  PassManager PM(Opts.PM);
  if (Error E = PM.parsePipeline(Pipeline))
    return std::move(E);
  if (Error E = PM.run(*Model, Ctx))
    return std::move(E);
  R.Train = std::move(Model);
  if (!Full)
    return std::move(R);
  if (EvalCopy) {
    auto Eval = buildEval(std::move(EvalCopy), *R.Train, Ctx, Opts);
    if (!Eval)
      return Eval.takeError();
    R.Eval = std::move(*Eval);
  }
  auto Plan = emitPlan(*R.Train, R.Eval.get(), Ctx.Config);
  if (!Plan)
    return Plan.takeError();
  R.Plan = std::move(*Plan);
  return std::move(R);
}
