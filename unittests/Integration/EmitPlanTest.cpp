//===- EmitPlanTest.cpp - emitPlan's preconditions ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// emitPlan called by a library user on graphs that have not been through
// plan-memory: an error, not a crash (the mdplan tool checks its pipeline
// before it gets there).
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/Support/Diagnostic.h"
#include "mdrt/Plan.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

TEST(EmitPlanTest, NeedsPlanMemory) {
  Graph Train, Eval;
  Train.createNode("c", opDef(OpKind::Const));
  Eval.createNode("c", opDef(OpKind::Const));
  DeploymentConfig Config;
  for (Graph *E : {static_cast<Graph *>(nullptr), &Eval}) {
    auto Plan = emitPlan(Train, E, Config);
    ASSERT_FALSE(bool(Plan));
    EXPECT_EQ(errorMessage(Plan.takeError()),
              "emitting a plan needs plan-memory to run first");
  }
}

TEST(EmitPlanTest, InitializerNamesAreThePlanFormats) {
  // The Variable op allows the initializers the plan format numbers, in
  // its order: the emitter maps one list onto the other by position.
  const OpDef *Var = OpRegistry::get().lookup("Variable");
  ASSERT_TRUE(Var);
  const AttrDef *Init = Var->findAttr("initializer");
  ASSERT_TRUE(Init);
  std::vector<std::string> Allowed(Init->Allowed.begin(), Init->Allowed.end());
  EXPECT_EQ(Allowed, mdrt::initKindNames());
  EXPECT_STREQ(mdrt::initKindName(mdplan::plan::InitKind::HeNormal),
               "he_normal");
  EXPECT_STREQ(mdrt::initKindName(mdplan::plan::InitKind(200)), "unknown");
}

} // namespace
