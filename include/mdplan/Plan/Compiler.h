//===- Compiler.h - From a model to a plan ----------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The whole compilation as a library call: the training pipeline on the
// model, the evaluation pipeline on a copy of it (one clone, moving averages,
// no dropout, variables where training keeps them), and the plan.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_PLAN_COMPILER_H
#define MDPLAN_PLAN_COMPILER_H

#include "mdplan/IR/Graph.h"
#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Timer;
} // namespace llvm

namespace mdplan {

/// Timers for the phases of compileModel (the training pipeline's passes
/// have their own, PassManagerOptions::TimePasses). Any may be null; they
/// accumulate over calls.
struct CompileTimers {
  /// Copying the model for the evaluation program.
  llvm::Timer *EvalCopy = nullptr;
  /// The training pipeline as a whole.
  llvm::Timer *Training = nullptr;
  /// The evaluation program's pipeline.
  llvm::Timer *Eval = nullptr;
  /// Emitting the plan and verifying it with the runtime's verifier.
  llvm::Timer *Emit = nullptr;
};

struct CompileOptions {
  /// The training pipeline; empty for defaultPipeline().
  std::string Pipeline;
  /// Emit the plan (when the pipeline reaches plan-memory).
  bool EmitPlan = true;
  /// Build the evaluation program into the plan.
  bool BuildEval = true;
  /// Examples per evaluation step; 0 for 100.
  int64_t EvalBatch = 0;
  PassManagerOptions PM;
  CompileTimers Timers;
};

struct Compilation {
  std::unique_ptr<Graph> Train;
  std::unique_ptr<Graph> Eval;
  /// The plan, when the pipeline went as far as plan-memory.
  PlanBytes Plan;
};

/// The evaluation pipeline's passes before and after placement.
std::string evalPipelineBeforePlacement();
std::string evalPipelineAfterPlacement();

/// Compiles \p Model with the deployment in \p Ctx. Emits a plan when the
/// training pipeline ends with plan-memory.
llvm::Expected<Compilation> compileModel(std::unique_ptr<Graph> Model,
                                         PassContext &Ctx,
                                         const CompileOptions &Opts);

} // namespace mdplan

#endif // MDPLAN_PLAN_COMPILER_H
