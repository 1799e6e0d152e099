//===- Compiler.cpp - From a model to a plan ------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Plan/Compiler.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/Transforms/PassUtils.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Timer.h"

#include <memory>
#include <set>
#include <tuple>
#include <vector>

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
/// The diagnostics the training pipeline reported: severity, location and
/// message, and severity and location alone.
namespace {
struct ReportedDiags {
  std::set<std::tuple<int, std::string, std::string>> Messages;
  std::set<std::pair<int, std::string>> Locations;
};
} // namespace

/// A handler that passes diagnostics to \p Next and records them in \p R.
static DiagnosticHandler
recordingHandler(const DiagnosticHandler &Next,
                 const std::shared_ptr<ReportedDiags> &R) {
  return DiagnosticHandler(
      [Next, R](Severity Sev, const SourceLoc &Loc, StringRef Msg) {
        R->Messages.emplace(int(Sev), Loc.str(), Msg.str());
        if (Loc.isValid())
          R->Locations.emplace(int(Sev), Loc.str());
        if (Sev == Severity::Warning)
          Next.warning(Loc, Msg);
        else
          Next.note(Loc, Msg);
      });
}

/// A handler for the evaluation pipeline: it places the model's nodes a
/// second time, so a diagnostic the training pipeline already reported
/// (the same message, or any at the same source location: the model node
/// it is about) is dropped; the others say which program they are about.
static DiagnosticHandler evalHandler(const DiagnosticHandler &Next,
                                     const std::shared_ptr<ReportedDiags> &R) {
  return DiagnosticHandler(
      [Next, R](Severity Sev, const SourceLoc &Loc, StringRef Msg) {
        if (R->Messages.count({int(Sev), Loc.str(), Msg.str()}) ||
            (Loc.isValid() && R->Locations.count({int(Sev), Loc.str()})))
          return;
        std::string Full = (Msg + " (in the evaluation program)").str();
        if (Sev == Severity::Warning)
          Next.warning(Loc, Full);
        else
          Next.note(Loc, Full);
      });
}

/// \p Verified: the model \p G copies passed the verify pass already (the
/// training pipeline starts with it), so the copy needs no second check.
static Expected<std::unique_ptr<Graph>>
buildEval(std::unique_ptr<Graph> G, const Graph &Train, PassContext &TrainCtx,
          DiagnosticHandler Diags, const CompileOptions &Opts, bool Verified) {
  DeploymentConfig C = TrainCtx.Config;
  C.GpusPerWorker = TrainCtx.Config.cluster().GpusPerWorker;
  C.NumClones = 1;
  // One clone, no gradients: the strategy only decides where variables
  // would go, and they are moved to the training program's devices below.
  // A multi-worker mirrored deployment stays mirrored (the ps strategy
  // needs ps tasks with several replicas).
  if (!(C.Strat == Strategy::Mirrored && C.NumReplicas > 1))
    C.Strat = Strategy::ParameterServer;
  C.BatchPerClone = Opts.EvalBatch > 0 ? Opts.EvalBatch : 100;
  C.GlobalBatch = 0;
  PassContext Ctx(C);
  Ctx.Diags = std::move(Diags);
  PassManager Before, After;
  std::string BeforeText = evalPipelineBeforePlacement();
  StringRef BeforeRef = BeforeText;
  if (Verified && BeforeRef.consume_front("verify,"))
    BeforeText = BeforeRef.str();
  if (Error E = Before.parsePipeline(BeforeText))
    return std::move(E);
  if (Error E = After.parsePipeline(evalPipelineAfterPlacement()))
    return std::move(E);
  if (Error E = Before.run(*G, Ctx))
    return appendToMessage(std::move(E), " (in the evaluation program)");
  // The evaluation program's index of each training device, added once.
  std::vector<int> DeviceFor(Train.getDevices().size(), -1);
  for (const auto &N : G->nodes()) {
    if (!N->getOp().isVariable())
      continue;
    Node *T = Train.lookup(N->getName());
    if (T && T->getOp().isVariable() && T->isPlaced()) {
      int &D = DeviceFor[T->getDevice()];
      if (D < 0)
        D = G->getOrAddDevice(Train.deviceOf(*T));
      N->setDevice(D);
    }
  }
  if (Error E = After.run(*G, Ctx))
    return appendToMessage(std::move(E), " (in the evaluation program)");
  // mdrun reports a named output as its mean over the examples of a batch:
  // one value, or one per example of the evaluation batch. infer-shapes
  // took a first dimension equal to the model's batch (a reshape to
  // [batch, -1]) for the batch; here the batch is known.
  for (const auto &[Name, T] : G->outputs()) {
    const Shape &S = T.type().Dims;
    auto Ones = [](ArrayRef<int64_t> D) {
      return llvm::all_of(D, [](int64_t X) { return X == 1; });
    };
    if (Ones(S.dims()) ||
        (S.rank() && S[0] == C.BatchPerClone && Ones(S.dims().drop_front())))
      continue;
    return makeError(G->getOutputLoc(Name),
                     "output '" + Name + "': tensor '" + T.str() +
                         "' has shape " + S.str() +
                         " in the evaluation program, whose batch is " +
                         Twine(C.BatchPerClone) +
                         ": a named output must be one value or one value "
                         "per example (a reshape to a fixed batch needs "
                         "--eval-batch to match it)");
  }
  return std::move(G);
}

/// mdrun reports a step's summaries and an evaluation's outputs by name,
/// next to names of its own (docs/UserGuide.md, --metrics): two values
/// under one name would be one lost or, in an evaluation, added together.
static Error checkReportNames(Graph &G) {
  StringMap<const Node *> Tags;
  for (Node *N : reportedSummaries(G)) {
    if (!isa(*N, OpKind::ScalarSummary))
      continue;
    StringRef Tag = N->attrs().getString("tag");
    if (Tag == "step" || Tag == "loss" || Tag == "examples_per_sec")
      return N->error("has tag '" + Tag +
                      "', a name mdrun's step reports use for their own "
                      "value (step, loss, examples_per_sec); choose another "
                      "tag");
    auto Ins = Tags.try_emplace(Tag, N);
    if (!Ins.second) {
      // The user's node is the one to rename (the passes' come later).
      const Node *Other = Ins.first->second;
      const Node *Mine = Other->getLoc().isValid() ? Other : N;
      const Node *Then = Mine == Other ? N : Other;
      return Mine->error("has tag '" + Tag + "', as '" + Then->getName() +
                         "' has: a step reports one value per tag");
    }
  }
  for (const auto &[Name, T] : G.outputs())
    if (Name == "loss" || Name == "examples")
      return makeError(G.getOutputLoc(Name),
                       "output '" + Name +
                           "': mdrun's evaluation reports its own value "
                           "under that name (the loss, the number of "
                           "examples); choose another name");
  return Error::success();
}

Expected<Compilation> mdplan::compileModel(std::unique_ptr<Graph> Model,
                                           PassContext &Ctx,
                                           const CompileOptions &Opts) {
  Compilation R;
  std::string Pipeline =
      Opts.Pipeline.empty() ? defaultPipeline() : Opts.Pipeline;
  PassManager PM(Opts.PM);
  if (Error E = PM.parsePipeline(Pipeline))
    return std::move(E);
  bool Full = Opts.EmitPlan && PM.size() &&
              PM.passes().back()->getName() == "plan-memory";
  std::unique_ptr<Graph> EvalCopy;
  if (Opts.BuildEval && Full) {
    TimeRegion T(Opts.Timers.EvalCopy);
    EvalCopy = Model->clone();
  }
  // Record what the training pipeline reports, so that the evaluation
  // pipeline does not report it again.
  auto Reported = std::make_shared<ReportedDiags>();
  DiagnosticHandler Diags = Ctx.Diags;
  Ctx.Diags = recordingHandler(Diags, Reported);
  // A model variable the training step does not read may still be the
  // evaluation program's (batch norm's moving statistics): warned about
  // once that is known.
  std::vector<std::pair<std::string, SourceLoc>> Pruned;
  auto *CallerPruned = Ctx.PrunedVariables;
  if (EvalCopy && !CallerPruned)
    Ctx.PrunedVariables = &Pruned;
  // At the end: those the evaluation program does not read either, or all
  // of them when the compilation fails before it is built.
  const Graph *EvalGraph = nullptr;
  auto WarnPruned = make_scope_exit([&] {
    for (const auto &[Name, Loc] : Pruned)
      if (!EvalGraph || !EvalGraph->lookup(Name))
        warnPrunedVariable(Diags, Name, Loc);
  });
  Error TrainErr = [&] {
    TimeRegion T(Opts.Timers.Training);
    return PM.run(*Model, Ctx);
  }();
  Ctx.Diags = Diags;
  Ctx.PrunedVariables = CallerPruned;
  if (TrainErr)
    return std::move(TrainErr);
  R.Train = std::move(Model);
  if (!Full)
    return std::move(R);
  if (Error E = checkReportNames(*R.Train))
    return std::move(E);
  if (EvalCopy) {
    TimeRegion T(Opts.Timers.Eval);
    StringRef First = StringRef(Pipeline).split(',').first.trim();
    auto Eval = buildEval(std::move(EvalCopy), *R.Train, Ctx,
                          evalHandler(Diags, Reported), Opts,
                          /*Verified=*/First == "verify");
    if (!Eval)
      return Eval.takeError();
    R.Eval = std::move(*Eval);
    EvalGraph = R.Eval.get();
  }
  TimeRegion T(Opts.Timers.Emit);
  auto Plan = emitPlan(*R.Train, R.Eval.get(), Ctx.Config);
  if (!Plan)
    return Plan.takeError();
  R.Plan = std::move(*Plan);
  return std::move(R);
}
