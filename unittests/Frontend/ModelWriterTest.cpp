//===- ModelWriterTest.cpp - Writing graph descriptions -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// writeModel -> readModelBuffer -> writeModel gives the same text: for a
// model using every feature of the format, for the examples, and for the
// graphs after replicate-clones and place-devices.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelWriter.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

std::string write(const Graph &G, WriteOptions Opts = {}) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  writeModel(G, OS, Opts);
  return OS.str();
}

std::unique_ptr<Graph> read(llvm::StringRef Text, llvm::StringRef Name) {
  auto G = readModelBuffer(Text, Name, {});
  if (!G) {
    ADD_FAILURE() << Name.str() << ": " << errorMessage(G.takeError())
                  << "\n--- text ---\n"
                  << Text.str();
    return nullptr;
  }
  return std::move(*G);
}

/// Writes \p G, reads the text back, writes again: both texts must match.
void expectRoundTrip(const Graph &G, llvm::StringRef What) {
  std::string First = write(G);
  auto Again = read(First, "roundtrip.mdg");
  ASSERT_TRUE(Again) << What.str();
  std::string Second = write(*Again);
  EXPECT_EQ(First, Second) << What.str();
}

const char *FullModel = R"(# Every feature of the format.
name: "Full"
training {
  batch_size: 8
  optimizer { kind: ADAM learning_rate: 0.001 beta1: 0.8 decay_steps: 100 decay_rate: 0.5 }
}
scope {
  role: INPUTS
  node { name: "x" op: "Input" data { feature: "image" shape: [4] } }
  node { name: "y" op: "Input" data { feature: "label" dtype: INT32 } }
}
scope {
  name: "net"
  device: "/job:worker/gpu:0"
  scope {
    function {
      name: "replica-device-setter"
      arg { name: "ps_tasks" i: 2 }
      arg { name: "merge_devices" b: false }
    }
    node {
      name: "w" op: "Variable"
      variable { shape: [4, 3] initializer { kind: UNIFORM minval: -1 maxval: 1 seed: 3 } regularizer { l2: 0.01 } }
    }
  }
  scope {
    function {
      name: "ps-round-robin"
      arg { name: "tasks" i: 2 }
      arg { name: "ps_ops" strings: ["Variable", "Const"] }
      instance: "shared"
    }
    node { name: "b" op: "Variable" variable { shape: [3] initializer { kind: ZEROS } trainable: false } }
  }
  scope {
    function {
      name: "ps-round-robin"
      arg { name: "tasks" i: 2 }
      arg { name: "ps_ops" strings: ["Variable", "Const"] }
      instance: "shared"
    }
    node { name: "k" op: "Const" attr { name: "value" floats: [1, 2.5, -3] } attr { name: "shape" ints: [3] } }
  }
  node { name: "mm" op: "MatMul" input: "x" input: "w" attr { name: "transpose_a" b: false } }
  node { name: "ba" op: "BiasAdd" input: "mm" input: "b" device: "/gpu:0" }
  node { name: "r" op: "Relu" input: "ba" input: "^k" }
  scope {
    clear: true
    node { name: "id" op: "Identity" input: "r" colocate_with: "r" }
  }
  scope {
    name: "loss"
    node { name: "xent" op: "SparseSoftmaxCrossEntropy" input: "net/r" input: "y" }
    node { name: "value" op: "Mean" input: "xent" attr { name: "axes" ints: [0] } }
  }
  node { name: "s" op: "ScalarSummary" input: "loss/value" attr { name: "tag" s: "loss \"quoted\"" } }
}
scope { role: OPTIMIZER node { name: "noop" op: "NoOp" } }
scope { role: VARIABLES node { name: "v2" op: "Variable" variable { shape: [1] dtype: FLOAT64 } } }
loss: "net/loss/value"
summary: "net/s"
output { name: "relu" tensor: "net/r" }
output { name: "bn1" tensor: "net/id:0" }
)";

TEST(ModelWriterTest, RoundTripEveryFeature) {
  auto G = read(FullModel, "full.mdg");
  ASSERT_TRUE(G);
  expectRoundTrip(*G, "full");
}

TEST(ModelWriterTest, WrittenTextKeepsStacksAndNames) {
  auto G = read(FullModel, "full.mdg");
  ASSERT_TRUE(G);
  std::string Text = write(*G);
  // Full names, anonymous scopes with the device entries.
  EXPECT_NE(Text.find("name: \"net/loss/value\""), std::string::npos) << Text;
  EXPECT_NE(Text.find("device: \"/job:worker/device:GPU:0\""),
            std::string::npos);
  EXPECT_NE(Text.find("clear: true"), std::string::npos);
  EXPECT_NE(Text.find("role: INPUTS"), std::string::npos);
  EXPECT_NE(Text.find("instance: \"shared\""), std::string::npos);
  EXPECT_NE(Text.find("colocate_with: \"net/r\""), std::string::npos);
  EXPECT_NE(Text.find("input: \"^net/k\""), std::string::npos);
  EXPECT_EQ(Text.find("name: \"net\"\n"), std::string::npos)
      << "scopes are written without names";
  auto Again = read(Text, "again.mdg");
  ASSERT_TRUE(Again);
  ASSERT_EQ(Again->size(), G->size());
  for (unsigned I = 0; I < G->size(); ++I) {
    const Node &A = *G->nodes()[I], &B = *Again->nodes()[I];
    EXPECT_EQ(A.getName(), B.getName());
    EXPECT_EQ(A.getOpName(), B.getOpName());
    EXPECT_TRUE(A.attrs() == B.attrs()) << A.getName().str();
    EXPECT_EQ(A.getRequestedDevice(), B.getRequestedDevice());
    EXPECT_EQ(A.getStack()->entries().size(), B.getStack()->entries().size())
        << A.getName().str();
  }
}

TEST(ModelWriterTest, RoundTripKeepsSharedInstances) {
  auto G = read(FullModel, "full.mdg");
  ASSERT_TRUE(G);
  auto Again = read(write(*G), "again.mdg");
  ASSERT_TRUE(Again);
  const DeviceEntry *EB = Again->lookup("net/b")->getStack()->Entry;
  const DeviceEntry *EK = Again->lookup("net/k")->getStack()->Entry;
  ASSERT_EQ(EB->K, DeviceEntry::Kind::Function);
  EXPECT_EQ(EB->Fn, EK->Fn);
}

std::string readFile(llvm::StringRef Path) {
  auto MB = llvm::MemoryBuffer::getFile(Path);
  if (!MB) {
    ADD_FAILURE() << "cannot read " << Path.str();
    return "";
  }
  return (*MB)->getBuffer().str();
}

class ExampleRoundTrip : public ::testing::TestWithParam<const char *> {};

TEST_P(ExampleRoundTrip, AsRead) {
  std::string Path = std::string(MDPLAN_EXAMPLES_DIR) + "/" + GetParam();
  auto G = read(readFile(Path), Path);
  ASSERT_TRUE(G);
  expectRoundTrip(*G, Path);
}

/// Runs \p Pipeline on the example with \p Config; round-trips the result.
void roundTripAfter(const char *Example, llvm::StringRef Pipeline,
                    const DeploymentConfig &Config) {
  std::string Path = std::string(MDPLAN_EXAMPLES_DIR) + "/" + Example;
  auto G = read(readFile(Path), Path);
  ASSERT_TRUE(G);
  PassManager PM;
  ASSERT_FALSE(bool(PM.parsePipeline(Pipeline)));
  PassContext Ctx(Config);
  llvm::Error E = PM.run(*G, Ctx);
  ASSERT_FALSE(bool(E)) << errorMessage(std::move(E));
  expectRoundTrip(*G, (Path + " after " + Pipeline).str());
}

TEST_P(ExampleRoundTrip, AfterReplicateClones) {
  DeploymentConfig C;
  C.NumClones = 2;
  C.NumPsTasks = 2;
  roundTripAfter(GetParam(), "replicate-clones", C);
}

TEST_P(ExampleRoundTrip, AfterPlacement) {
  DeploymentConfig C;
  C.NumClones = 2;
  roundTripAfter(GetParam(),
                 "verify,infer-shapes,replicate-clones,"
                 "place-devices",
                 C);
}

TEST_P(ExampleRoundTrip, AfterMirroredPlacement) {
  DeploymentConfig C;
  C.NumClones = 3;
  C.Strat = Strategy::Mirrored;
  roundTripAfter(GetParam(), "replicate-clones,place-devices", C);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleRoundTrip,
                         ::testing::Values("logistic_classifier.mdg",
                                           "batchnorm_classifier.mdg",
                                           "fashion_mlp.mdg",
                                           "tf_tutorial_cnn.mdg"));

TEST(ModelWriterTest, PlacedNodesPrintTheirDevice) {
  auto G = read(R"(
node { name: "x" op: "Input" data { shape: [2] } }
scope { device: "/gpu:0" node { name: "y" op: "Relu" input: "x" } }
training { batch_size: 2 }
)",
                "p.mdg");
  ASSERT_TRUE(G);
  DeploymentConfig C;
  PassManager PM;
  ASSERT_FALSE(bool(PM.parsePipeline("replicate-clones,place-devices")));
  PassContext Ctx(C);
  ASSERT_FALSE(bool(PM.run(*G, Ctx)));
  std::string Placed = write(*G);
  EXPECT_NE(
      Placed.find("device: \"/job:worker/replica:0/task:0/device:GPU:0\""),
      std::string::npos)
      << Placed;
  EXPECT_EQ(Placed.find("scope {"), std::string::npos) << Placed;
  // Without assigned devices the stacks are written instead.
  WriteOptions Stacks;
  Stacks.UseAssignedDevices = false;
  std::string Unplaced = write(*G, Stacks);
  EXPECT_NE(Unplaced.find("scope {"), std::string::npos) << Unplaced;
}

} // namespace
