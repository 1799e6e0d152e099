//===- GraphTest.cpp - Node ids, consumer tables, topological order -------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The tables indexed by node id that the passes use instead of maps keyed
// by node (ConsumerTable, UseMap, OutputTable), and topologicalOrder built
// on them.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Graph.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/IR/Verifier.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>

using namespace mdplan;

namespace {

std::vector<std::string> names(llvm::ArrayRef<Node *> Nodes) {
  std::vector<std::string> R;
  for (const Node *N : Nodes)
    R.push_back(N->getName().str());
  return R;
}

using Names = std::vector<std::string>;

/// a -> b -> d, a -> c -> d (twice), c --ctl--> b.
class GraphTest : public ::testing::Test {
protected:
  GraphTest() {
    A = G.createNode("a", opDef(OpKind::Const));
    B = G.createNode("b", opDef(OpKind::Relu));
    C = G.createNode("c", opDef(OpKind::Relu));
    D = G.createNode("d", opDef(OpKind::AddN));
    B->addInput(A);
    C->addInput(A);
    D->addInput(B);
    D->addInput(C);
    D->addInput(C);
    B->addControlInput(C);
  }
  Graph G;
  Node *A, *B, *C, *D;
};

TEST_F(GraphTest, IdsStayBelowTheBound) {
  EXPECT_EQ(G.getIdBound(), 4u);
  for (const auto &N : G.nodes())
    EXPECT_LT(N->getId(), G.getIdBound());
  // Erasing leaves a gap; ids are not reused.
  Node *E = G.createNode("e", opDef(OpKind::Relu));
  E->addInput(D);
  G.eraseIf([&](const Node &N) { return &N == E; });
  Node *F = G.createNode("f", opDef(OpKind::Relu));
  EXPECT_EQ(F->getId(), 5u);
  EXPECT_EQ(G.getIdBound(), 6u);
}

TEST_F(GraphTest, ConsumersInGraphOrderWithRepeats) {
  ConsumerTable T(G);
  EXPECT_EQ(names(T.of(*A)), (Names{"b", "c"}));
  EXPECT_EQ(names(T.of(*B)), (Names{"d"}));
  // Control edge to b first (b comes first in graph order), then d's two
  // data inputs.
  EXPECT_EQ(names(T.of(*C)), (Names{"b", "d", "d"}));
  EXPECT_TRUE(T.of(*D).empty());
  EXPECT_EQ(numInEdges(*B), 2u);
  EXPECT_EQ(numInEdges(*D), 3u);
}

TEST_F(GraphTest, ConsumerTableIsASnapshot) {
  ConsumerTable T(G);
  Node *E = G.createNode("e", opDef(OpKind::Relu));
  E->addInput(D);
  EXPECT_TRUE(T.of(*E).empty());
  EXPECT_TRUE(T.of(*D).empty());
  EXPECT_EQ(names(ConsumerTable(G).of(*D)), (Names{"e"}));
}

TEST_F(GraphTest, OutputTableHasASlotPerOutput) {
  A->setNumOutputs(1);
  B->setNumOutputs(3);
  C->setNumOutputs(0);
  D->setNumOutputs(2);
  OutputTable<int> T(G, -1);
  // Every slot starts at the initial value and is its own.
  int Next = 0;
  for (Node *N : {A, B, D})
    for (unsigned I = 0; I < N->getNumOutputs(); ++I) {
      ASSERT_NE(T.find(*N, I), nullptr) << N->getName().str() << ':' << I;
      EXPECT_EQ(*T.find(*N, I), -1);
      *T.find(*N, I) = Next++;
    }
  EXPECT_EQ(*T.find(*A, 0), 0);
  EXPECT_EQ(*T.find(*B, 2), 3);
  EXPECT_EQ(*T.find(*D, 1), 5);
  // No such output, a node without outputs, another graph's node, and a
  // node created after the table: no slot.
  EXPECT_EQ(T.find(*B, 3), nullptr);
  EXPECT_EQ(T.find(*C, 0), nullptr);
  Graph Other;
  Node *X = Other.createNode("x", opDef(OpKind::Const));
  X->setNumOutputs(1);
  EXPECT_EQ(T.find(*X, 0), nullptr);
  Node *E = G.createNode("e", opDef(OpKind::Relu));
  E->setNumOutputs(1);
  EXPECT_EQ(T.find(*E, 0), nullptr);
}

TEST_F(GraphTest, TopologicalOrderFollowsEdgesThenGraphOrder) {
  auto Order = topologicalOrder(G);
  ASSERT_TRUE(bool(Order)) << errorMessage(Order.takeError());
  // b waits for c (control edge), so c comes before b.
  EXPECT_EQ(names(*Order), (Names{"a", "c", "b", "d"}));
}

TEST_F(GraphTest, TopologicalOrderAfterErasingNodes) {
  Node *E = G.createNode("e", opDef(OpKind::Relu));
  E->addInput(A);
  Node *F = G.createNode("f", opDef(OpKind::Relu));
  F->addInput(A);
  G.eraseIf([&](const Node &N) { return &N == E; });
  auto Order = topologicalOrder(G);
  ASSERT_TRUE(bool(Order)) << errorMessage(Order.takeError());
  EXPECT_EQ(names(*Order), (Names{"a", "c", "b", "d", "f"}));
}

TEST_F(GraphTest, TopologicalOrderNamesACycle) {
  C->addControlInput(D);
  auto Order = topologicalOrder(G);
  ASSERT_FALSE(bool(Order));
  std::string Msg = errorMessage(Order.takeError());
  EXPECT_NE(Msg.find("is part of a cycle: "), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("c -> "), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("d -> "), std::string::npos) << Msg;
}

TEST(TopologicalOrder, ForwardEdgesGiveTheIdOrder) {
  // Every edge from a smaller id to a larger one (the shortcut without
  // consumer lists): the id order, also across an erased node, whatever
  // the graph order.
  Graph G;
  Node *In = G.createNode("in", opDef(OpKind::Const));
  Node *X = G.createNode("x", opDef(OpKind::Relu));
  Node *Gone = G.createNode("gone", opDef(OpKind::Relu));
  Node *Y = G.createNode("y", opDef(OpKind::Relu));
  Node *Z = G.createNode("z", opDef(OpKind::AddN));
  X->addInput(In);
  Gone->addInput(In);
  Y->addInput(In);
  Z->addInput(Y);
  Z->addInput(X);
  Z->addControlInput(In);
  G.eraseIf([&](const Node &N) { return &N == Gone; });
  G.setOrder({Z, Y, X, In});
  auto Order = topologicalOrder(G);
  ASSERT_TRUE(bool(Order)) << errorMessage(Order.takeError());
  EXPECT_EQ(names(*Order), (Names{"in", "x", "y", "z"}));
  // One edge backwards (x now reads y): the full algorithm, same rule.
  X->addInput(Y);
  Order = topologicalOrder(G);
  ASSERT_TRUE(bool(Order)) << errorMessage(Order.takeError());
  EXPECT_EQ(names(*Order), (Names{"in", "y", "x", "z"}));
}

TEST(TopologicalOrder, ANodeReadingItselfIsACycle) {
  Graph G;
  Node *X = G.createNode("x", opDef(OpKind::AddN));
  X->addInput(X);
  auto Order = topologicalOrder(G);
  ASSERT_FALSE(bool(Order));
  EXPECT_NE(errorMessage(Order.takeError()).find("is part of a cycle: x -> x"),
            std::string::npos);
}

} // namespace

TEST_F(GraphTest, RequestedDevicesAreSharedAndCloned) {
  EXPECT_TRUE(A->getRequestedDevice().empty());
  DeviceSpec Gpu;
  Gpu.Type = "GPU";
  Gpu.Index = 1;
  B->setRequestedDevice(Gpu);
  C->setRequestedDevice(Gpu);
  EXPECT_EQ(B->getRequestedDevice(), Gpu);
  // One copy per distinct spec.
  EXPECT_EQ(&B->getRequestedDevice(), &C->getRequestedDevice());
  DeviceSpec Ps;
  Ps.Job = "ps";
  C->setRequestedDevice(Ps);
  EXPECT_EQ(C->getRequestedDevice().toString(), "/job:ps");
  EXPECT_EQ(B->getRequestedDevice(), Gpu);
  // Setting the empty spec clears the request.
  B->setRequestedDevice(DeviceSpec());
  EXPECT_TRUE(B->getRequestedDevice().empty());

  std::unique_ptr<Graph> Copy = G.clone();
  EXPECT_EQ(Copy->lookup("c")->getRequestedDevice().toString(), "/job:ps");
  EXPECT_TRUE(Copy->lookup("b")->getRequestedDevice().empty());
  // The copy owns its specs.
  EXPECT_NE(&Copy->lookup("c")->getRequestedDevice(), &C->getRequestedDevice());
}

TEST(GraphOutputsTest, LocationsAreCopied) {
  Graph G;
  G.setFileName("m.mdg");
  Node *A = G.createNode("a", opDef(OpKind::Const));
  G.outputs()["o"] = TensorRef(A);
  G.outputs()["p"] = TensorRef(A);
  G.setOutputLoc("o", SourceLoc{internFileName("m.mdg"), 3, 1});
  EXPECT_EQ(G.getOutputLoc("o").str(), "m.mdg:3:1");
  // Without a location of its own (a graph built in code), the file.
  EXPECT_EQ(G.getOutputLoc("p").str(), "m.mdg");
  std::unique_ptr<Graph> Copy = G.clone();
  EXPECT_EQ(Copy->getOutputLoc("o").str(), "m.mdg:3:1");
  EXPECT_EQ(Copy->getOutputLoc("p").str(), "m.mdg");
}

TEST(AttrDictTest, ReserveKeepsValuesAndOrder) {
  AttrDict D;
  D.reserve(5);
  for (const char *N : {"e", "c", "a", "d", "b"})
    D.set(N, Attr(int64_t(N[0])));
  std::string Order;
  for (const auto &[Name, Value] : D)
    Order += Name;
  EXPECT_EQ(Order, "abcde");
  EXPECT_EQ(D.getInt("d"), int64_t('d'));
  AttrDict Copy = D;
  EXPECT_TRUE(Copy == D);
}

TEST(AttrDictTest, CopiesShareUntilOneChanges) {
  AttrDict D;
  D.set("a", Attr(int64_t(1)));
  D.set("s", Attr("x"));
  AttrDict Copy = D;
  EXPECT_TRUE(Copy.sharesStorageWith(D));
  // A change to a float's sign is a change (0.0 and -0.0 are different
  // attributes in a plan).
  AttrDict Zero;
  Zero.set("f", Attr(0.0));
  AttrDict Negative = Zero;
  Negative.set("f", Attr(-0.0));
  EXPECT_TRUE(std::signbit(Negative.getFloat("f")));
  EXPECT_FALSE(std::signbit(Zero.getFloat("f")));
  // The first change copies; the original keeps its values.
  const Attr *Before = D.get("s");
  Copy.set("a", Attr(int64_t(2)));
  Copy.set("b", Attr(true));
  EXPECT_FALSE(Copy.sharesStorageWith(D));
  EXPECT_EQ(D.getInt("a"), 1);
  EXPECT_FALSE(D.has("b"));
  EXPECT_EQ(D.get("s"), Before);
  EXPECT_EQ(Copy.getInt("a"), 2);
  EXPECT_TRUE(Copy.getBool("b"));
  EXPECT_EQ(Copy.getString("s"), "x");
  EXPECT_FALSE(Copy == D);
  // Erasing from a shared dictionary leaves the other copy whole.
  AttrDict Third = D;
  EXPECT_TRUE(Third.erase("s"));
  EXPECT_FALSE(Third.erase("s"));
  EXPECT_EQ(D.getString("s"), "x");
  EXPECT_EQ(Third.size(), 1u);
  // Erasing what is not there changes nothing, not even sharing.
  AttrDict Fourth = D;
  EXPECT_FALSE(Fourth.erase("zz"));
  EXPECT_TRUE(Fourth.sharesStorageWith(D));
  // An empty dictionary has no storage and shares nothing.
  AttrDict E, F = E;
  EXPECT_TRUE(E.empty());
  EXPECT_FALSE(F.sharesStorageWith(E));
  EXPECT_TRUE(F == E);
}

TEST(AttrDictTest, IdenticalComparesFloatsByTheirBits) {
  EXPECT_TRUE(Attr(0.0) == Attr(-0.0));
  EXPECT_FALSE(Attr(0.0).isIdentical(Attr(-0.0)));
  double NaN = std::nan("");
  EXPECT_FALSE(Attr(NaN) == Attr(NaN));
  EXPECT_TRUE(Attr(NaN).isIdentical(Attr(NaN)));
  EXPECT_FALSE(Attr(std::vector<double>{1.0, 0.0})
                   .isIdentical(Attr(std::vector<double>{1.0, -0.0})));
  EXPECT_FALSE(Attr(std::vector<double>{1.0})
                   .isIdentical(Attr(std::vector<double>{1.0, 1.0})));
  EXPECT_TRUE(Attr("s").isIdentical(Attr("s")));
  // Another kind is another value, even when == converts.
  EXPECT_FALSE(Attr(int64_t(1)).isIdentical(Attr(1.0)));
  EXPECT_EQ(hash_value(Attr(NaN)), hash_value(Attr(NaN)));
  EXPECT_EQ(hash_value(Attr(Shape({2, 3}))), hash_value(Attr(Shape({2, 3}))));

  AttrDict A, B;
  A.set("x", Attr(0.0));
  B.set("x", Attr(-0.0));
  EXPECT_TRUE(A == B);
  EXPECT_FALSE(A.isIdentical(B));
  B.set("x", Attr(0.0));
  EXPECT_TRUE(A.isIdentical(B));
  EXPECT_EQ(hash_value(A), hash_value(B));
  B.set("y", Attr(true));
  EXPECT_FALSE(A.isIdentical(B));
}

TEST(AttrDictTest, UniquerSharesIdenticalDictionaries) {
  auto Make = [](double F, llvm::StringRef S) {
    AttrDict D;
    D.set("f", Attr(F));
    D.set("s", Attr(S));
    return D;
  };
  AttrDictUniquer U;
  AttrDict First = U.unique(Make(1.5, "a"));
  AttrDict Same = U.unique(Make(1.5, "a"));
  EXPECT_TRUE(Same.sharesStorageWith(First));
  EXPECT_FALSE(U.unique(Make(1.5, "b")).sharesStorageWith(First));
  // 0.0 and -0.0 stay apart.
  AttrDict Zero = U.unique(Make(0.0, "a"));
  AttrDict Negative = U.unique(Make(-0.0, "a"));
  EXPECT_FALSE(Negative.sharesStorageWith(Zero));
  EXPECT_TRUE(std::signbit(Negative.getFloat("f")));
  // Changing a shared dictionary copies it (the uniquer's stays).
  Same.set("s", Attr("c"));
  EXPECT_EQ(First.getString("s"), "a");
  EXPECT_TRUE(U.unique(Make(1.5, "a")).sharesStorageWith(First));
  // The empty dictionary has no storage to share.
  EXPECT_TRUE(U.unique(AttrDict()).empty());
}

TEST(AttrDictTest, SetAndEraseOnSharedStorageKeepTheOrder) {
  AttrDict D;
  for (const char *N : {"b", "d"})
    D.set(N, Attr(int64_t(N[0])));
  for (const char *N : {"a", "c", "e", "d"}) {
    AttrDict Copy = D;
    Copy.set(N, Attr(int64_t(1)));
    std::string Order;
    for (const auto &[Name, Value] : Copy)
      Order += Name;
    std::string Want = std::string("bd") + N;
    std::sort(Want.begin(), Want.end());
    Want.erase(std::unique(Want.begin(), Want.end()), Want.end());
    EXPECT_EQ(Order, Want) << "set " << N;
    EXPECT_EQ(Copy.getInt(N), 1);
    EXPECT_EQ(D.size(), 2u);
    EXPECT_EQ(D.getInt("d"), int64_t('d'));
  }
  AttrDict Copy = D;
  EXPECT_TRUE(Copy.erase("b"));
  EXPECT_EQ(Copy.size(), 1u);
  EXPECT_TRUE(Copy.has("d"));
  EXPECT_TRUE(D.has("b"));
}

TEST(AttrDictTest, FromPairsAsSuccessiveSets) {
  std::pair<llvm::StringRef, Attr> Pairs[] = {{"to", Attr("/cpu:0")},
                                              {"channel", Attr(int64_t(3))},
                                              {"b", Attr(true)},
                                              {"channel", Attr(int64_t(4))},
                                              {"a", Attr(1.5)}};
  AttrDict Want;
  for (auto &[Name, Value] : Pairs)
    Want.set(Name, Value);
  AttrDict D(Pairs); // moves the values out
  std::string Order;
  for (const auto &[Name, Value] : D)
    Order += Name + ",";
  EXPECT_EQ(Order, "a,b,channel,to,");
  EXPECT_EQ(D.getInt("channel"), 4) << "the later pair wins";
  EXPECT_TRUE(D.isIdentical(Want));
  EXPECT_TRUE(
      AttrDict(llvm::MutableArrayRef<std::pair<llvm::StringRef, Attr>>())
          .empty());
}

TEST(AttrDictTest, GraphCopiesShareAttributes) {
  Graph G;
  const OpDef *Var = OpRegistry::get().lookup("Variable");
  ASSERT_TRUE(Var);
  Node *V = G.createNode("v", *Var);
  V->attrs().set("shape", Attr(Shape({2, 3})));
  V->attrs().set("dtype", Attr(DType::Float32));
  ASSERT_FALSE(llvm::errorToBool(verifyAndCompleteAttrs(*V)));
  AttrDict Completed = V->attrs();
  EXPECT_TRUE(Completed.size() > 2) << "defaults were added";
  // A complete dictionary is checked, not rebuilt.
  ASSERT_FALSE(llvm::errorToBool(verifyAndCompleteAttrs(*V)));
  EXPECT_TRUE(V->attrs().sharesStorageWith(Completed));
  std::unique_ptr<Graph> Copy = G.clone();
  Node *W = Copy->lookup("v");
  EXPECT_TRUE(W->attrs().sharesStorageWith(V->attrs()));
  W->attrs().set("trainable", Attr(false));
  EXPECT_TRUE(V->attrs().getBool("trainable", true));
  EXPECT_FALSE(W->attrs().getBool("trainable", true));
}
