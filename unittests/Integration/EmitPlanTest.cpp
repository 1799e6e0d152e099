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
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Plan/Compiler.h"
#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/Support/Diagnostic.h"
#include "mdrt/Plan.h"
#include "mdrt/Random.h"

#include "gtest/gtest.h"

#include <algorithm>

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

TEST(EmitPlanTest, FingerprintHashesTheSortedNameAndTypeStrings) {
  // Variables whose names are prefixes of others ("a" of "a.b", "a-b",
  // "a/GradientDescent"...), and one made through the API whose name has a
  // space ("a b"): the plan's fingerprint must hash the strings
  // "name type" in their sorted order, as plans always have (checkpoints
  // record it), however the emitter sorts them.
  const char *Text = R"(
name: "Prefixes"
training { batch_size: 4 optimizer { kind: SGD learning_rate: 0.1 } }
node { name: "x" op: "Input" data { feature: "x" shape: [3] } }
node { name: "y" op: "Input" data { feature: "y" shape: [1] } }
node { name: "a" op: "Variable" variable { shape: [3, 1] } }
node { name: "a.b" op: "Variable" variable { shape: [1] } }
node { name: "a-b" op: "Variable" variable { shape: [1] } }
node { name: "ab" op: "Variable" variable { shape: [1] } }
node { name: "a0" op: "Variable" variable { shape: [1] } }
node { name: "mm" op: "MatMul" input: "x" input: "a" }
node { name: "b1" op: "BiasAdd" input: "mm" input: "a.b" }
node { name: "b2" op: "BiasAdd" input: "b1" input: "a-b" }
node { name: "b3" op: "BiasAdd" input: "b2" input: "ab" }
node { name: "b4" op: "BiasAdd" input: "b3" input: "a0" }
node { name: "s" op: "Sigmoid" input: "b4" }
node { name: "l" op: "LogLoss" input: "s" input: "y" }
node { name: "loss" op: "Mean" input: "l" }
loss: "loss"
)";
  auto G = readModelBuffer(Text, "prefixes.mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
  // "a0" becomes "a b", which the graph format cannot spell.
  (*G)->rename((*G)->lookup("a0"), "a b");

  DeploymentConfig Config;
  Config.NumClones = 2;
  Config.CloneOnCPU = true;
  PassContext Ctx(Config);
  auto C = compileModel(std::move(*G), Ctx, CompileOptions());
  ASSERT_TRUE(bool(C)) << errorMessage(C.takeError());

  std::vector<std::string> Sig;
  for (const auto &N : C->Train->nodes())
    if (N->getOp().isVariable())
      Sig.push_back((N->getName() + " " + N->getOutputType(0).str()).str());
  EXPECT_TRUE(std::count(Sig.begin(), Sig.end(), "a b float32[1]"));
  std::sort(Sig.begin(), Sig.end());
  uint64_t Expected = mdrt::hashName("Prefixes");
  for (const std::string &S : Sig)
    Expected = mdrt::hashName(S.c_str(), Expected);
  Expected = mdrt::hashName("8", Expected); // the batch of both clones
  Expected = mdrt::hashName("ps", Expected);

  auto Plan = mdrt::PlanFile::fromBytes(C->Plan.toVector(), "prefixes.mdp");
  ASSERT_TRUE(Plan.isOk()) << Plan.status().message();
  EXPECT_EQ((*Plan)->plan().fingerprint(), Expected);
}

TEST(EmitPlanTest, VariableWithoutInitializerAttributesGetsTheDefaults) {
  // A variable a library caller left without its initializer attributes
  // (the readers and builders complete them; verify checks a completed
  // copy and keeps the node's own): the plan says what the registry's
  // defaults say, glorot_uniform, trainable, the uniform range +-0.05.
  const char *Text = R"(
name: "Bare"
training { batch_size: 4 optimizer { kind: SGD learning_rate: 0.1 } }
node { name: "x" op: "Input" data { feature: "x" shape: [3] } }
node { name: "y" op: "Input" data { feature: "y" shape: [1] } }
node { name: "w" op: "Variable" variable { shape: [3, 1] } }
node { name: "mm" op: "MatMul" input: "x" input: "w" }
node { name: "s" op: "Sigmoid" input: "mm" }
node { name: "l" op: "LogLoss" input: "s" input: "y" }
node { name: "loss" op: "Mean" input: "l" }
loss: "loss"
)";
  auto G = readModelBuffer(Text, "bare.mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
  Node *W = (*G)->lookup("w");
  ASSERT_TRUE(W);
  AttrDict Bare;
  Bare.set("shape", *W->attrs().get("shape"));
  Bare.set("dtype", *W->attrs().get("dtype"));
  W->attrs() = Bare;

  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  PassContext Ctx(Config);
  auto C = compileModel(std::move(*G), Ctx, CompileOptions());
  ASSERT_TRUE(bool(C)) << errorMessage(C.takeError());
  auto Plan = mdrt::PlanFile::fromBytes(C->Plan.toVector(), "bare.mdp");
  ASSERT_TRUE(Plan.isOk()) << Plan.status().message();
  const mdplan::plan::Variable *V = nullptr;
  for (const mdplan::plan::Variable *X : *(*Plan)->plan().variables())
    if (X->name()->str() == "w")
      V = X;
  ASSERT_TRUE(V);
  EXPECT_EQ(V->init(), mdplan::plan::InitKind::GlorotUniform);
  EXPECT_TRUE(V->trainable());
  EXPECT_EQ(V->stddev(), 1.0);
  EXPECT_EQ(V->minval(), -0.05);
  EXPECT_EQ(V->maxval(), 0.05);
}

} // namespace
