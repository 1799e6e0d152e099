//===- PassUtilsTest.cpp - Use lists of the passes ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Transforms/PassUtils.h"
#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Support/Diagnostic.h"
#include "mdplan/Transforms/Pass.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

TEST(PassUtilsTest, UsesInConsumerOrderWithInputIndices) {
  Graph G;
  Node *A = G.createNode("a", opDef(OpKind::Const));
  Node *B = G.createNode("b", opDef(OpKind::Const));
  Node *Sum = G.createNode("sum", opDef(OpKind::AddN));
  Node *R = G.createNode("r", opDef(OpKind::Relu));
  Sum->addInput(B);
  Sum->addInput(A);
  Sum->addInput(B);
  R->addInput(B);
  R->addControlInput(A); // Control edges are not uses.

  UseMap Uses = computeUses(G);
  std::vector<Use> OfB(usesOf(Uses, B).begin(), usesOf(Uses, B).end());
  EXPECT_EQ(OfB, (std::vector<Use>{{Sum, 0}, {Sum, 2}, {R, 0}}));
  std::vector<Use> OfA(usesOf(Uses, A).begin(), usesOf(Uses, A).end());
  EXPECT_EQ(OfA, (std::vector<Use>{{Sum, 1}}));
  EXPECT_TRUE(usesOf(Uses, R).empty());

  // Nodes created later have no uses in the snapshot.
  Node *Late = G.createNode("late", opDef(OpKind::Relu));
  R->addInput(Late);
  EXPECT_TRUE(usesOf(Uses, Late).empty());
  EXPECT_EQ(usesOf(computeUses(G), Late).size(), 1u);
}

TEST(PassUtilsTest, CreatedNodesTakeTheirOpsRole) {
  Graph G;
  EXPECT_EQ(G.createNode("x", opDef(OpKind::Input))->getRole(),
            NodeRole::Input);
  EXPECT_EQ(G.createNode("w", opDef(OpKind::Variable))->getRole(),
            NodeRole::Variable);
  EXPECT_EQ(G.createNode("r", opDef(OpKind::Relu))->getRole(), NodeRole::Model);
}

TEST(PassUtilsTest, PipelineErrorsAddNoPass) {
  PassManager PM;
  llvm::Error E = PM.parsePipeline("verify,infer-shapes,frob");
  EXPECT_TRUE(bool(E));
  llvm::consumeError(std::move(E));
  EXPECT_EQ(PM.size(), 0u);
  E = PM.parsePipeline("verify,infer-shapes,");
  EXPECT_EQ(errorMessage(std::move(E)), "empty pass name in pipeline");
  EXPECT_EQ(PM.size(), 0u);
  ASSERT_FALSE(bool(PM.parsePipeline("verify,infer-shapes")));
  ASSERT_EQ(PM.size(), 2u);
  EXPECT_EQ(PM.passes().back()->getName(), "infer-shapes");
}

/// A node added to a partitioned graph (through the library: the passes
/// that add nodes refuse a placed graph) has no device; schedule and
/// plan-memory refuse it instead of indexing device -1.
TEST(PassUtilsTest, SchedulingNeedsEveryNodePlaced) {
  const char *Text = R"(name: "M"
training { batch_size: 2 optimizer { kind: SGD learning_rate: 0.1 } }
node { name: "x" op: "Input" data { feature: "x" shape: [3] } }
node { name: "w" op: "Variable" variable { shape: [3, 1] } }
node { name: "y" op: "MatMul" input: "x" input: "w" }
node { name: "loss" op: "Mean" input: "y" }
loss: "loss"
)";
  auto G = readModelBuffer(Text, "m.mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  PassContext Ctx(Config);
  PassManager PM;
  ASSERT_FALSE(bool(PM.parsePipeline(
      "verify,infer-shapes,replicate-clones,scale-losses,build-gradients,"
      "sum-gradients,apply-optimizer,prune,place-devices,partition")));
  llvm::Error E = PM.run(**G, Ctx);
  ASSERT_FALSE(bool(E)) << errorMessage(std::move(E));
  (*G)->createNode("late", opDef(OpKind::NoOp));
  for (const char *Pass : {"schedule", "plan-memory"}) {
    if (llvm::StringRef(Pass) == "plan-memory")
      (*G)->deployState().Scheduled = true;
    PassManager Next;
    ASSERT_FALSE(bool(Next.parsePipeline(Pass)));
    EXPECT_EQ(errorMessage(Next.run(**G, Ctx)),
              "node 'late': has no device; " + std::string(Pass) +
                  " needs every node placed (was it added after "
                  "place-devices?)");
  }
}

} // namespace
