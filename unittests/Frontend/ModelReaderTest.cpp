//===- ModelReaderTest.cpp - Reading graph descriptions -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The graph-format reader: what it builds (names, scopes, stacks, roles,
// collections, variables and inputs), relative input lookup in named
// scopes, and every error with its file:line:col.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/Support/thread.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

std::unique_ptr<Graph> read(llvm::StringRef Text,
                            llvm::StringRef Name = "m.mdg") {
  auto G = readModelBuffer(Text, Name, {});
  if (!G) {
    ADD_FAILURE() << "cannot read the model: " << errorMessage(G.takeError());
    return std::make_unique<Graph>();
  }
  return std::move(*G);
}

/// The error printed as the tool prints it (no source line), or
/// "<no error>".
std::string readError(llvm::StringRef Text, llvm::StringRef Name = "m.mdg",
                      InputFormat Format = InputFormat::Auto) {
  ReadOptions Opts;
  Opts.Format = Format;
  auto G = readModelBuffer(Text, Name, Opts);
  if (G)
    return "<no error>";
  std::string S;
  llvm::raw_string_ostream OS(S);
  printErrors(G.takeError(), OS);
  OS.flush();
  if (!S.empty() && S.back() == '\n')
    S.pop_back();
  return S;
}

std::string inputName(const Node *N, unsigned I) {
  return N->getInput(I).str();
}

//===----------------------------------------------------------------------===//
// What the reader builds
//===----------------------------------------------------------------------===//

TEST(ModelReaderTest, ReadsNodes) {
  auto G = readModelBuffer(R"(node { name: "a" op: "Const" })", "m.mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
  EXPECT_NE((*G)->lookup("a"), nullptr);
}

TEST(ModelReaderTest, NodeLocationsAndOrder) {
  auto G = read("name: \"M\"\n"
                "node { name: \"a\" op: \"Const\" }\n"
                "scope {\n"
                "  name: \"s\"\n"
                "  node { name: \"b\" op: \"Const\" }\n"
                "}\n"
                "node { name: \"c\" op: \"Const\" }\n");
  EXPECT_EQ(G->getName(), "M");
  EXPECT_EQ(G->getFileName(), "m.mdg");
  ASSERT_EQ(G->size(), 3u);
  // Text files: nodes in the order written, scopes included.
  EXPECT_EQ(G->nodes()[0]->getName(), "a");
  EXPECT_EQ(G->nodes()[1]->getName(), "s/b");
  EXPECT_EQ(G->nodes()[2]->getName(), "c");
  EXPECT_EQ(G->lookup("a")->getLoc().str(), "m.mdg:2:8");
  EXPECT_EQ(G->lookup("s/b")->getLoc().str(), "m.mdg:5:10");
  EXPECT_EQ(G->lookup("c")->getLoc().str(), "m.mdg:7:8");
}

TEST(ModelReaderTest, ScopesNameAndStack) {
  auto G = read(R"(
scope {
  name: "outer"
  device: "/job:worker/task:1"
  scope {
    device: "/gpu:1"
    node { name: "a" op: "Const" device: "/replica:0" }
  }
  scope {
    name: "clr"
    clear: true
    node { name: "b" op: "Const" }
  }
  scope {
    name: "none"
    device: ""
    node { name: "c" op: "Const" }
  }
}
)");
  Node *A = G->lookup("outer/a");
  Node *B = G->lookup("outer/clr/b");
  Node *C = G->lookup("outer/none/c");
  ASSERT_TRUE(A && B && C);
  EXPECT_EQ(A->getRequestedDevice().toString(), "/replica:0");
  EXPECT_EQ(A->getStack()->entries().size(), 2u);
  EXPECT_EQ(walkDeviceStack(*A).toString(),
            "/job:worker/replica:0/task:1/device:GPU:1");
  EXPECT_EQ(walkDeviceStack(*B).toString(), "");
  EXPECT_EQ(walkDeviceStack(*C).toString(), "/job:worker/task:1");
  // A scope with a name only adds no stack entry.
  EXPECT_EQ(C->getStack()->entries().size(), 2u);
  EXPECT_EQ(A->getStack()->entries()[0]->Loc.str(), "m.mdg:4:3");
}

TEST(ModelReaderTest, ClearFalseIsNoEntry) {
  auto G = read(R"(
scope { device: "/gpu:0" scope { clear: false node { name: "a" op: "Const" } } }
)");
  EXPECT_EQ(walkDeviceStack(*G->lookup("a")).toString(), "/device:GPU:0");
  EXPECT_EQ(G->lookup("a")->getStack()->entries().size(), 1u);
}

TEST(ModelReaderTest, DeviceFunctionScopes) {
  auto G = read(R"(
scope {
  function {
    name: "ps-round-robin"
    arg { name: "tasks" i: 2 }
    instance: "rr"
  }
  node { name: "a" op: "Variable" variable { shape: [1] } }
}
scope {
  function {
    name: "ps-round-robin"
    arg { name: "tasks" i: 2 }
    instance: "rr"
  }
  node { name: "b" op: "Variable" variable { shape: [1] } }
}
scope {
  function { name: "ps-round-robin" arg { name: "tasks" i: 2 } }
  node { name: "c" op: "Variable" variable { shape: [1] } }
}
)");
  const Node *A = G->lookup("a"), *B = G->lookup("b"), *C = G->lookup("c");
  ASSERT_TRUE(A && B && C);
  const DeviceEntry *EA = A->getStack()->Entry;
  const DeviceEntry *EB = B->getStack()->Entry;
  const DeviceEntry *EC = C->getStack()->Entry;
  ASSERT_EQ(EA->K, DeviceEntry::Kind::Function);
  // The same instance name shares one function (and its counter).
  EXPECT_EQ(EA->Fn, EB->Fn);
  EXPECT_NE(EA->Fn, EC->Fn);
  EXPECT_EQ(G->functions().size(), 2u);
  EXPECT_EQ(walkDeviceStack(*A).toString(), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(walkDeviceStack(*B).toString(), "/job:ps/task:1/device:CPU:0");
  EXPECT_EQ(walkDeviceStack(*C).toString(), "/job:ps/task:0/device:CPU:0");
}

TEST(ModelReaderTest, RoleScopes) {
  auto G = read(R"(
scope { role: INPUTS node { name: "x" op: "Input" data { shape: [2] } } }
scope { role: VARIABLES node { name: "c" op: "NoOp" } }
scope { role: OPTIMIZER node { name: "o" op: "NoOp" } }
node { name: "s" op: "ScalarSummary" input: "k" attr { name: "tag" s: "t" } }
node { name: "k" op: "Const" }
)");
  const Node *X = G->lookup("x"), *C = G->lookup("c"), *O = G->lookup("o");
  ASSERT_TRUE(X && C && O);
  ASSERT_EQ(C->getStack()->Entry->K, DeviceEntry::Kind::Role);
  EXPECT_EQ(X->getStack()->Entry->RoleKind, NodeRole::Input);
  EXPECT_EQ(C->getStack()->Entry->RoleKind, NodeRole::Variable);
  EXPECT_EQ(O->getStack()->Entry->RoleKind, NodeRole::Optimizer);
  // Roles: the op's own role first, else the scope's.
  EXPECT_EQ(X->getRole(), NodeRole::Input);
  EXPECT_EQ(C->getRole(), NodeRole::Variable);
  EXPECT_EQ(O->getRole(), NodeRole::Optimizer);
  EXPECT_EQ(G->lookup("s")->getRole(), NodeRole::Summary);
  EXPECT_EQ(G->lookup("k")->getRole(), NodeRole::Model);
}

TEST(ModelReaderTest, VariablesAndInputs) {
  auto G = read(R"(
node {
  name: "w" op: "Variable"
  variable {
    shape: [3, 2] dtype: FLOAT64 trainable: false
    initializer { kind: NORMAL mean: 1 stddev: 0.5 seed: 7 }
  }
}
node { name: "x" op: "Input" data { feature: "image" shape: [3] dtype: INT32 } }
)");
  const Node *W = G->lookup("w"), *X = G->lookup("x");
  ASSERT_TRUE(W && X);
  EXPECT_EQ(W->getRole(), NodeRole::Variable);
  EXPECT_EQ(W->attrs().getShape("shape"), Shape({3, 2}));
  EXPECT_EQ(W->attrs().getType("dtype"), DType::Float64);
  EXPECT_EQ(W->attrs().getString("initializer"), "normal");
  EXPECT_EQ(W->attrs().getFloat("init_mean"), 1.0);
  EXPECT_EQ(W->attrs().getFloat("init_stddev"), 0.5);
  EXPECT_EQ(W->attrs().getInt("seed"), 7);
  EXPECT_FALSE(W->attrs().getBool("trainable", true));
  EXPECT_EQ(X->attrs().getShape("shape"), Shape({3}));
  EXPECT_EQ(X->attrs().getType("dtype"), DType::Int32);
  EXPECT_EQ(X->attrs().getString("feature"), "image");
}

TEST(ModelReaderTest, RegularizerNodes) {
  auto G = read(R"(
node { name: "w" op: "Variable" variable { shape: [2] regularizer { l2: 0.5 } } }
)");
  const Node *Reg = G->lookup("w/Regularizer/l2_regularizer");
  ASSERT_NE(Reg, nullptr);
  EXPECT_EQ(Reg->getColocateWith(), G->lookup("w"));
  ASSERT_EQ(G->collection(Collection::RegularizationLosses).size(), 1u);
  EXPECT_EQ(G->collection(Collection::RegularizationLosses)[0], Reg);
}

TEST(ModelReaderTest, UpdateOpsColocateWithTheirVariable) {
  auto G = read(R"(
node { name: "v" op: "Variable" variable { shape: [2] } }
node { name: "x" op: "Const" attr { name: "shape" ints: [2] } }
node { name: "u" op: "AssignMovingAverage" input: "v" input: "x"
       attr { name: "decay" f: 0.5 } }
update_op: "u"
)");
  EXPECT_EQ(G->lookup("u")->getColocateWith(), G->lookup("v"));
  ASSERT_EQ(G->collection(Collection::UpdateOps).size(), 1u);
}

TEST(ModelReaderTest, CollectionsOutputsAndTraining) {
  auto G = read(R"(
node { name: "a" op: "Const" }
node { name: "r" op: "Const" }
node { name: "s" op: "ScalarSummary" input: "a" attr { name: "tag" s: "a" } }
loss: "a"
regularization_loss: "r"
summary: "s"
output { name: "out" tensor: "a:0" }
training { batch_size: 12 optimizer { kind: MOMENTUM learning_rate: 0.5 } }
)");
  EXPECT_EQ(G->collection(Collection::Losses).size(), 1u);
  EXPECT_EQ(G->collection(Collection::RegularizationLosses).size(), 1u);
  EXPECT_EQ(G->collection(Collection::Summaries).size(), 1u);
  ASSERT_EQ(G->outputs().size(), 1u);
  EXPECT_EQ(G->outputs().begin()->second.str(), "a");
  EXPECT_EQ(G->getDefaultBatchSize(), 12);
  ASSERT_TRUE(G->getOptimizer().has_value());
  EXPECT_EQ(G->getOptimizer()->K, OptimizerSettings::Kind::Momentum);
  EXPECT_EQ(G->getOptimizer()->LearningRate, 0.5);
}

TEST(ModelReaderTest, InputsOutputIndexAndControl) {
  auto G = read(R"(
node { name: "x" op: "Input" data { shape: [4] } }
node { name: "beta" op: "Variable" variable { shape: [4] } }
node { name: "bn" op: "BatchNorm" input: "x" input: "beta" }
node { name: "m" op: "Identity" input: "bn:1" input: "^x" input: "^beta" }
)");
  const Node *M = G->lookup("m");
  ASSERT_EQ(M->getNumInputs(), 1u);
  EXPECT_EQ(inputName(M, 0), "bn:1");
  ASSERT_EQ(M->getControlInputs().size(), 2u);
  EXPECT_EQ(M->getControlInputs()[0]->getName(), "x");
  EXPECT_EQ(M->getControlInputs()[1]->getName(), "beta");
}

//===----------------------------------------------------------------------===//
// Relative lookup in named scopes
//===----------------------------------------------------------------------===//

TEST(ModelReaderTest, RelativeInputLookup) {
  auto G = read(R"(
node { name: "x" op: "Const" }
node { name: "y" op: "Const" }
scope {
  name: "s"
  node { name: "x" op: "Const" }
  node { name: "a" op: "Identity" input: "x" }
  node { name: "b" op: "Identity" input: "y" }
  node { name: "c" op: "Identity" input: "t/z" }
  scope {
    name: "t"
    node { name: "z" op: "Const" }
    node { name: "d" op: "Identity" input: "x" }
    node { name: "e" op: "Identity" input: "z" }
    node { name: "f" op: "Identity" input: "s/x" }
    node { name: "g" op: "Identity" input: "later" }
  }
  node { name: "later" op: "Const" }
}
node { name: "h" op: "Identity" input: "s/t/z" }
node { name: "i" op: "Identity" input: "x" }
)");
  // The innermost scope wins, then the enclosing ones, then the root.
  EXPECT_EQ(inputName(G->lookup("s/a"), 0), "s/x");
  EXPECT_EQ(inputName(G->lookup("s/b"), 0), "y");
  EXPECT_EQ(inputName(G->lookup("s/c"), 0), "s/t/z");
  EXPECT_EQ(inputName(G->lookup("s/t/d"), 0), "s/x");
  EXPECT_EQ(inputName(G->lookup("s/t/e"), 0), "s/t/z");
  EXPECT_EQ(inputName(G->lookup("s/t/f"), 0), "s/x");
  // Names defined later in the file resolve too.
  EXPECT_EQ(inputName(G->lookup("s/t/g"), 0), "s/later");
  EXPECT_EQ(inputName(G->lookup("h"), 0), "s/t/z");
  EXPECT_EQ(inputName(G->lookup("i"), 0), "x");
}

TEST(ModelReaderTest, RelativeLookupInScopesWithoutName) {
  auto G = read(R"(
scope {
  name: "s"
  node { name: "x" op: "Const" }
  scope {
    device: "/cpu:0"
    node { name: "a" op: "Identity" input: "x" }
  }
}
)");
  // An anonymous scope adds no name: a is s/a and reads s/x.
  ASSERT_NE(G->lookup("s/a"), nullptr);
  EXPECT_EQ(inputName(G->lookup("s/a"), 0), "s/x");
}

TEST(ModelReaderTest, RelativeColocation) {
  auto G = read(R"(
scope {
  name: "s"
  node { name: "v" op: "Variable" variable { shape: [1] } }
  node { name: "r" op: "Identity" input: "v" colocate_with: "v" }
}
)");
  EXPECT_EQ(G->lookup("s/r")->getColocateWith(), G->lookup("s/v"));
}

/// \p Depth scopes around a variable with an initializer: Depth + 3
/// nested messages.
static std::string nestedScopes(unsigned Depth) {
  std::string Text;
  for (unsigned I = 0; I < Depth; ++I)
    Text += "scope {\n";
  Text += "node { name: \"w\" op: \"Variable\" "
          "variable { shape: [2] initializer { kind: ZEROS } } }\n";
  for (unsigned I = 0; I < Depth; ++I)
    Text += "}\n";
  return Text;
}

TEST(ModelReaderTest, DeepNestingNeedsNoLargeStackFromTheCaller) {
  // 1000 levels, the most the reader takes, read from a thread with a
  // 256 KiB stack: protobuf's recursive parser alone needs more than 1 MiB
  // for them, so the reader runs on a stack of its own.
  std::string Text = nestedScopes(997);
  bool Read = false;
  std::string Path;
  llvm::thread Small(llvm::Optional<unsigned>(256u << 10), [&] {
    auto G = readModelBuffer(Text, "deep.mdg", {});
    if (!G) {
      Path = llvm::toString(G.takeError());
      return;
    }
    Read = true;
    const Node *W = nullptr;
    for (const auto &N : (*G)->nodes())
      if (N->getOpName() == "Variable")
        W = N.get();
    Path = W ? W->getName().str() : "no variable";
  });
  Small.join();
  EXPECT_TRUE(Read) << Path;
  EXPECT_EQ(Path, "w");
}

//===----------------------------------------------------------------------===//
// Errors, each with file:line:col
//===----------------------------------------------------------------------===//

TEST(ModelReaderTest, SyntaxError) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "node { name \"b\" }\n"),
            "m.mdg:2:13: error: syntax error: expected \":\", found "
            "\"\"b\"\"");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"),
            "m.mdg:2:1: error: syntax error: expected identifier, got: ");
}

TEST(ModelReaderTest, UnknownField) {
  // Protobuf reports an unknown field at the token after its name, so only
  // the line is checked exactly.
  std::string E = readError("node { name: \"a\" opp: \"Const\" }\n");
  EXPECT_EQ(E.rfind("m.mdg:1:", 0), 0u) << E;
  EXPECT_NE(E.find(": error: syntax error: message type \"mdplan.desc.Node\" "
                   "has no field named \"opp\""),
            std::string::npos)
      << E;
}

TEST(ModelReaderTest, UnknownOp) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"MatMull\" }\n"),
            "m.mdg:1:18: error: unknown op 'MatMull'; did you mean "
            "'MatMul'?");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Frobnicate\" }\n"),
            "m.mdg:1:18: error: unknown op 'Frobnicate'");
}

TEST(ModelReaderTest, NodeWithoutNameOrOp) {
  EXPECT_EQ(readError("\n  node { op: \"Const\" }\n"),
            "m.mdg:2:3: error: node without a name");
  EXPECT_EQ(readError("node { name: \"a\" }\n"),
            "m.mdg:1:8: error: node 'a' has no op");
}

TEST(ModelReaderTest, InvalidNames) {
  EXPECT_EQ(readError("node { name: \"a b\" op: \"Const\" }\n"),
            "m.mdg:1:8: error: invalid node name 'a b': use letters, digits, "
            "'_', '.', '-' and '/' between scopes");
  EXPECT_EQ(readError("node { name: \"a//b\" op: \"Const\" }\n"),
            "m.mdg:1:8: error: invalid node name 'a//b': use letters, "
            "digits, '_', '.', '-' and '/' between scopes");
  EXPECT_EQ(readError("scope { name: \"s/\" }\n"),
            "m.mdg:1:9: error: invalid scope name 's/'");
}

TEST(ModelReaderTest, DuplicateNodeName) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "scope { node { name: \"a\" op: \"Const\" } }\n"),
            "m.mdg:2:16: error: duplicate node name 'a' (first defined at "
            "m.mdg:1:8)");
  EXPECT_EQ(readError("node { name: \"s/a\" op: \"Const\" }\n"
                      "scope { name: \"s\" node { name: \"a\" op: \"Const\" } "
                      "}\n"),
            "m.mdg:2:26: error: duplicate node name 's/a' (first defined at "
            "m.mdg:1:8)");
}

TEST(ModelReaderTest, UnknownAttribute) {
  EXPECT_EQ(readError("node {\n  name: \"a\"\n  op: \"Const\"\n"
                      "  attr { name: \"valu\" f: 1 }\n}\n"),
            "m.mdg:2:3: error: node 'a': unknown attribute 'valu' for op "
            "Const (it takes dtype, shape, value)");
  EXPECT_EQ(readError("node { name: \"a\" op: \"NoOp\" "
                      "attr { name: \"x\" i: 1 } }\n"),
            "m.mdg:1:8: error: node 'a': unknown attribute 'x' for op NoOp "
            "(it takes none)");
}

TEST(ModelReaderTest, AttributeErrors) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  attr { name: \"value\" }\n}\n"),
            "m.mdg:2:3: error: attribute 'value' has no value");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  attr { name: \"value\" f: 1 i: 2 }\n}\n"),
            "m.mdg:2:3: error: attribute 'value' has more than one value");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  attr { f: 1 }\n}\n"),
            "m.mdg:2:3: error: attribute without a name");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  attr { name: \"value\" f: 1 }\n"
                      "  attr { name: \"value\" f: 2 }\n}\n"),
            "m.mdg:3:3: error: attribute 'value' given twice");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  attr { name: \"dtype\" s: \"float\" }\n}\n"),
            "m.mdg:1:8: error: node 'a': attribute 'dtype' of Const must be "
            "a type, got a string");
  EXPECT_EQ(readError("node { name: \"x\" op: \"Const\" }\n"
                      "node { name: \"m\" op: \"Mean\" input: \"x\"\n"
                      "  attr { name: \"axes\" i: 0 }\n}\n"),
            "m.mdg:2:8: error: node 'm': attribute 'axes' of Mean must be "
            "an int list, got an int");
}

TEST(ModelReaderTest, MissingInput) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Identity\"\n"
                      "       input: \"b\" }\n"),
            "m.mdg:2:8: error: node 'a' reads 'b', which does not exist");
  EXPECT_EQ(readError("scope { name: \"s\"\n"
                      "  node { name: \"a\" op: \"Identity\" input: \"t/b\" } "
                      "}\n"),
            "m.mdg:2:35: error: node 's/a' reads 't/b', which does not exist");
}

TEST(ModelReaderTest, InputErrors) {
  EXPECT_EQ(readError("node { name: \"x\" op: \"Const\" }\n"
                      "node { name: \"a\" op: \"Identity\" input: \"x:one\" "
                      "}\n"),
            "m.mdg:2:33: error: invalid input 'x:one': expected 'node', "
            "'node:N' or '^node'");
  EXPECT_EQ(readError("node { name: \"x\" op: \"Const\" }\n"
                      "node { name: \"a\" op: \"Identity\" input: \"x:1\" }\n"),
            "m.mdg:2:33: error: node 'a' reads 'x:1', but 'x' (Const) has 1 "
            "output");
  EXPECT_EQ(readError("node { name: \"x\" op: \"Const\" }\n"
                      "node { name: \"a\" op: \"Identity\" input: \"^x\" "
                      "input: \"x\" }\n"),
            "m.mdg:2:45: error: data input 'x' follows a control input");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Identity\" input: \"^\" }\n"),
            "m.mdg:1:33: error: invalid input '^'");
  EXPECT_EQ(readError("node { name: \"x\" op: \"Const\" }\n"
                      "node { name: \"a\" op: \"Add\" input: \"x\" }\n"),
            "m.mdg:2:8: error: node 'a': Add takes 2 inputs, got 1");
}

TEST(ModelReaderTest, Cycle) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Identity\" input: \"b\" }\n"
                      "node { name: \"b\" op: \"Identity\" input: \"a\" }\n"),
            "m.mdg:2:8: error: node 'b': is part of a cycle: b -> a -> b");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Identity\" input: \"a\" }\n"),
            "m.mdg:1:8: error: node 'a': is part of a cycle: a -> a");
  // Control edges count.
  EXPECT_EQ(readError("node { name: \"a\" op: \"NoOp\" input: \"^b\" }\n"
                      "node { name: \"b\" op: \"NoOp\" input: \"^a\" }\n"),
            "m.mdg:2:8: error: node 'b': is part of a cycle: b -> a -> b");
}

TEST(ModelReaderTest, InvalidDevice) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  device: \"/cpu:0/device:GPU:2\" }\n"),
            "m.mdg:2:3: error: invalid device: two device types ('CPU' and "
            "'GPU') in device '/cpu:0/device:GPU:2'");
  EXPECT_EQ(readError("scope {\n  device: \"/job:ps/task:x\"\n}\n"),
            "m.mdg:2:3: error: invalid device: 'task' must be a non-negative "
            "integer, got 'x' in device '/job:ps/task:x'");
}

TEST(ModelReaderTest, DeviceFunctionErrors) {
  // An unknown function at its name, a bad argument at the argument.
  EXPECT_EQ(readError("scope {\n  function { name: \"round-robin\" }\n}\n"),
            "m.mdg:2:14: error: unknown device function 'round-robin' (known: "
            "ps-round-robin, replica-device-setter)");
  EXPECT_EQ(readError("scope {\n  function { name: \"ps-round-robin\" }\n}\n"),
            "m.mdg:2:3: error: device function ps-round-robin needs argument "
            "'tasks'");
  EXPECT_EQ(readError("scope { function { name: \"ps-round-robin\"\n"
                      "  arg { name: \"tasks\" } } }\n"),
            "m.mdg:2:3: error: attribute 'tasks' has no value");
  EXPECT_EQ(readError("scope { function { name: \"ps-round-robin\"\n"
                      "  arg { name: \"tasks\" i: 0 } } }\n"),
            "m.mdg:2:3: error: argument 'tasks' of ps-round-robin must be at "
            "least 1, got 0");
  EXPECT_EQ(
      readError("scope { function { name: \"ps-round-robin\" instance: \"i\"\n"
                "  arg { name: \"tasks\" i: 2 } } }\n"
                "scope {\n"
                "  function { name: \"ps-round-robin\" instance: \"i\"\n"
                "  arg { name: \"tasks\" i: 3 } } }\n"),
      "m.mdg:4:3: error: device function instance 'i' was defined with "
      "other arguments");
}

TEST(ModelReaderTest, RoleScopeWithoutRole) {
  EXPECT_EQ(readError("scope {\n  role: NO_ROLE\n}\n"),
            "m.mdg:2:3: error: a role scope needs INPUTS, VARIABLES or "
            "OPTIMIZER");
}

TEST(ModelReaderTest, VariableAndDataErrors) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  variable { shape: [1] } }\n"),
            "m.mdg:2:3: error: 'variable' is only allowed on Variable nodes");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  data { shape: [1] } }\n"),
            "m.mdg:2:3: error: 'data' is only allowed on Input nodes");
  EXPECT_EQ(readError("node { name: \"w\" op: \"Variable\"\n"
                      "  variable { shape: [2, 0] } }\n"),
            "m.mdg:2:14: error: dimensions must be positive, got [2,0]");
  EXPECT_EQ(readError("node { name: \"x\" op: \"Input\"\n"
                      "  data { shape: [-1] } }\n"),
            "m.mdg:2:10: error: dimensions must be positive, got [-1]");
  EXPECT_EQ(readError("node { name: \"w\" op: \"Variable\"\n"
                      "  variable { shape: [2] regularizer { l2: -1 } } }\n"),
            "m.mdg:2:25: error: l2 regularization scale must not be "
            "negative");
}

TEST(ModelReaderTest, ColocationErrors) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  colocate_with: \"b\" }\n"),
            "m.mdg:2:3: error: node 'a' is colocated with 'b', which does "
            "not exist");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\"\n"
                      "  colocate_with: \"a\" }\n"),
            "m.mdg:2:3: error: node 'a' is colocated with itself");
}

TEST(ModelReaderTest, CollectionErrors) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\nupdate_op: \"b\"\n"),
            "m.mdg:2:1: error: update_op 'b' is not a node of the graph");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\nsummary: \"a\"\n"),
            "m.mdg:2:1: error: summary 'a' is a Const, not a summary op");
  EXPECT_EQ(readError("node { name: \"a\" op: \"NoOp\" }\nloss: \"a\"\n"),
            "m.mdg:2:1: error: loss 'a' has no output");
  EXPECT_EQ(readError("node { name: \"a\" op: \"NoOp\" }\n"
                      "regularization_loss: \"a\"\n"),
            "m.mdg:2:1: error: regularization_loss 'a' has no output");
}

// The collection is named by its field ("loss", not "losse").
TEST(ModelReaderTest, CollectionNotANodeMessages) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\nloss: \"b\"\n"),
            "m.mdg:2:1: error: loss 'b' is not a node of the graph");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "regularization_loss: \"b\"\n"),
            "m.mdg:2:1: error: regularization_loss 'b' is not a node of the "
            "graph");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\nsummary: \"b\"\n"),
            "m.mdg:2:1: error: summary 'b' is not a node of the graph");
}

TEST(ModelReaderTest, OutputErrors) {
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "output { name: \"o\" tensor: \"b\" }\n"),
            "m.mdg:2:20: error: output 'o' names 'b', which does not exist");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "output { name: \"o\" tensor: \"a:2\" }\n"),
            "m.mdg:2:20: error: output 'o' names output 2 of 'a', which has 1");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "output { tensor: \"a\" }\n"),
            "m.mdg:2:1: error: output without a name");
  EXPECT_EQ(readError("node { name: \"a\" op: \"Const\" }\n"
                      "output { name: \"o\" tensor: \"a\" }\n"
                      "output { name: \"o\" tensor: \"a\" }\n"),
            "m.mdg:3:1: error: output 'o' given twice");
}

TEST(ModelReaderTest, TrainingErrors) {
  EXPECT_EQ(readError("training {\n  batch_size: -4\n}\n"),
            "m.mdg:2:3: error: batch size must be positive, got -4");
  // Written as 0 (which proto3 cannot tell from unset): the same error at
  // the field, rather than "no batch size" later, without a location.
  EXPECT_EQ(readError("training {\n  batch_size: 0\n}\n"),
            "m.mdg:2:3: error: batch size must be positive, got 0");
  EXPECT_EQ(readError("training {\n}\n"), "<no error>");
}

TEST(ModelReaderTest, ShapeMismatch) {
  EXPECT_EQ(
      readError(R"(node { name: "x" op: "Input" data { shape: [4] } }
node { name: "w" op: "Variable" variable { shape: [5, 1] } }
node { name: "y" op: "MatMul" input: "x" input: "w" }
)"),
      "<no error>"); // shapes are inferred by infer-shapes, not the reader
}

TEST(ModelReaderTest, BinaryGarbage) {
  EXPECT_EQ(readError("\xff\xff\xff\xff\x0f garbage", "m.pb"),
            "m.pb: error: cannot parse the binary model (not a serialized "
            "mdplan.desc.Model)");
  EXPECT_EQ(readError("\x12\x05\x0a\x01", "m.mdg", InputFormat::Binary),
            "m.mdg: error: cannot parse the binary model (not a serialized "
            "mdplan.desc.Model)");
}

TEST(ModelReaderTest, BinaryErrorsHaveTheFileNameOnly) {
  // A Model with node { name: "a" op: "MatMull" }.
  std::string Bin = "\x12\x0c\x0a\x01"
                    "a"
                    "\x12\x07"
                    "MatMull";
  EXPECT_EQ(readError(Bin, "m.pb"),
            "m.pb: error: unknown op 'MatMull'; did you mean 'MatMul'?");
}

TEST(ModelReaderTest, EmptyModel) {
  auto G = read("", "empty.mdg");
  EXPECT_EQ(G->size(), 0u);
  auto B = readModelBuffer("", "empty.pb", {});
  ASSERT_TRUE(bool(B)) << errorMessage(B.takeError());
  EXPECT_EQ((*B)->size(), 0u);
}

TEST(ModelReaderTest, MissingFile) {
  auto G = readModelFile("/nonexistent/dir/m.mdg", {});
  ASSERT_FALSE(bool(G));
  std::string S;
  llvm::raw_string_ostream OS(S);
  printErrors(G.takeError(), OS);
  EXPECT_EQ(OS.str(), "/nonexistent/dir/m.mdg: error: cannot read file: No "
                      "such file or directory\n");
}

} // namespace
