//===- VerifierTest.cpp - Graph verifier and shape inference errors -------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The errors that only a program building graphs through the library can
// cause (a graph file cannot express them): references to nodes of another
// graph, and attribute values the reader never produces.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Verifier.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Support/Diagnostic.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

/// The message of a failing verifyGraph; "" if it passes.
std::string verifyMessage(const Graph &G) {
  llvm::Error E = verifyGraph(G);
  return E ? errorMessage(std::move(E)) : std::string();
}

class VerifierTest : public ::testing::Test {
protected:
  VerifierTest() {
    A = G.createNode("a", opDef(OpKind::Const));
    B = G.createNode("b", opDef(OpKind::Relu));
    B->addInput(A);
    Foreign = Other.createNode("foreign", opDef(OpKind::Const));
  }
  Graph G, Other;
  Node *A, *B, *Foreign;
};

TEST_F(VerifierTest, AValidGraphPasses) { EXPECT_EQ(verifyMessage(G), ""); }

TEST_F(VerifierTest, InputFromAnotherGraph) {
  B->setInput(0, Foreign);
  EXPECT_EQ(verifyMessage(G),
            "node 'b': reads a node that is not in the graph");
}

TEST_F(VerifierTest, InputOfAnErasedNode) {
  Node *C = G.createNode("c", opDef(OpKind::Relu));
  C->addInput(B);
  G.eraseIf([&](const Node &N) { return &N == B; });
  EXPECT_EQ(verifyMessage(G),
            "node 'c': reads a node that is not in the graph");
}

TEST_F(VerifierTest, MissingOutput) {
  B->setInput(0, TensorRef(A, 1));
  EXPECT_EQ(verifyMessage(G), "node 'b': reads 'a:1', but 'a' has 1 output");
}

TEST_F(VerifierTest, ControlInputFromAnotherGraph) {
  B->addControlInput(Foreign);
  EXPECT_EQ(verifyMessage(G),
            "node 'b': has a control input that is not in the graph");
}

TEST_F(VerifierTest, ColocatedWithANodeOfAnotherGraph) {
  B->setColocateWith(Foreign);
  EXPECT_EQ(verifyMessage(G),
            "node 'b': is colocated with a node that is not in the graph");
}

TEST_F(VerifierTest, CollectionNamesANodeOfAnotherGraph) {
  G.collection(Collection::Losses).insert(Foreign);
  EXPECT_EQ(verifyMessage(G), "collection " +
                                  collectionName(Collection::Losses).str() +
                                  " names a node that is not in the graph");
}

TEST_F(VerifierTest, Arity) {
  B->addInput(A);
  EXPECT_EQ(verifyMessage(G), "node 'b': Relu takes 1 input, got 2");
}

/// Runs verifyAndCompleteAttrs and inferNodeShapes on each node in order;
/// the first error's message, "" if none.
std::string inferMessage(llvm::ArrayRef<Node *> Nodes) {
  for (Node *N : Nodes) {
    if (llvm::Error E = verifyAndCompleteAttrs(*N))
      return errorMessage(std::move(E));
    if (llvm::Error E = inferNodeShapes(*N))
      return errorMessage(std::move(E));
  }
  return "";
}

TEST(InferShapesTest, InputWithoutAType) {
  Graph G;
  Node *X = G.createNode("x", opDef(OpKind::Input));
  X->attrs().set("dtype", Attr(DType::Invalid));
  EXPECT_EQ(inferMessage({X}), "node 'x': input needs a dtype");
}

TEST(InferShapesTest, VariableWithoutAType) {
  Graph G;
  Node *V = G.createNode("v", opDef(OpKind::Variable));
  V->attrs().set("dtype", Attr(DType::Invalid));
  EXPECT_EQ(inferMessage({V}),
            "node 'v': variables must be float32, float64, int32 or int64");
}

TEST(InferShapesTest, InputNotInferredYet) {
  Graph G;
  Node *C = G.createNode("c", opDef(OpKind::Const));
  Node *R = G.createNode("r", opDef(OpKind::Relu));
  R->addInput(C);
  // The consumer before its producer.
  EXPECT_EQ(inferMessage({R, C}), "node 'r': input 'c' has no type yet");
  EXPECT_EQ(inferMessage({C, R}), "");
}

TEST(InferShapesTest, SameWindowOutputWithAHugeStride) {
  // SAME padding's output is ceil(input / stride): a stride near the
  // largest int64 gives one output, not an overflowed 0.
  Graph G;
  Node *X = G.createNode("x", opDef(OpKind::Input));
  X->attrs().set("shape", Attr(Shape{3, 5, 1}));
  Node *P = G.createNode("p", opDef(OpKind::MaxPool));
  P->addInput(X);
  P->attrs().set("ksize", Attr(std::vector<int64_t>{2, 2}));
  P->attrs().set("strides", Attr(std::vector<int64_t>{INT64_MAX, 2}));
  P->attrs().set("padding", Attr(std::string("SAME")));
  ASSERT_EQ(inferMessage({X, P}), "");
  EXPECT_EQ(P->getOutputType(0).str(), "float32[?,1,3,1]");
}

} // namespace
