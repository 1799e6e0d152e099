//===- PlanEmitter.h - Writing FlatBuffers plans ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Turns scheduled, memory-planned graphs into a plan (schema/plan.fbs): the
// training step as program "train" and, when given, the evaluation step as
// program "eval" sharing the training step's variables.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_PLAN_PLANEMITTER_H
#define MDPLAN_PLAN_PLANEMITTER_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mdplan {

/// The producer string written into plans: "mdplan <version>".
llvm::StringRef planProducer();

/// Emits the plan. \p Train and \p Eval (optional) must have gone through
/// plan-memory; \p Eval's variables must be placed like \p Train's.
llvm::Expected<std::vector<uint8_t>> emitPlan(Graph &Train, Graph *Eval,
                                              const DeploymentConfig &Config);

} // namespace mdplan

#endif // MDPLAN_PLAN_PLANEMITTER_H
