//===- PassUtilsTest.cpp - Use lists of the passes ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Transforms/PassUtils.h"
#include "mdplan/IR/OpRegistry.h"

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

} // namespace
