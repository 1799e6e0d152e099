//===- GradientStructureTest.cpp - What build-gradients builds ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Small graphs built in code (the graph format read from strings) run
// through the training passes, then the gradient structure is checked:
// which gradient ops each forward op gets, that gradients have the shapes
// of the forward inputs they belong to, that every trainable variable a
// clone's loss depends on has exactly one gradient of its own type (and
// nothing else has one), where the gradient nodes go, and that
// sum-gradients leaves one summed gradient per variable (per copy with the
// mirrored strategy).
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace mdplan;

namespace {

const char *const UpToGradients =
    "verify,infer-shapes,replicate-clones,scale-losses,build-gradients";
const char *const UpToSums = "verify,infer-shapes,replicate-clones,scale-"
                             "losses,build-gradients,sum-gradients";

struct Compiled {
  std::unique_ptr<Graph> G;
  std::string Error;
};

/// Reads \p Text and runs \p Pipeline with \p Config.
Compiled compile(llvm::StringRef Text, const DeploymentConfig &Config,
                 llvm::StringRef Pipeline = UpToGradients) {
  Compiled R;
  auto G = readModelBuffer(Text, "m.mdg", {});
  if (!G) {
    R.Error = "read: " + errorMessage(G.takeError());
    return R;
  }
  if (llvm::Error E = Config.validate()) {
    R.Error = "config: " + errorMessage(std::move(E));
    return R;
  }
  PassManager PM;
  if (llvm::Error E = PM.parsePipeline(Pipeline)) {
    R.Error = "pipeline: " + errorMessage(std::move(E));
    return R;
  }
  PassContext Ctx(Config);
  if (llvm::Error E = PM.run(**G, Ctx)) {
    R.Error = errorMessage(std::move(E));
    return R;
  }
  R.G = std::move(*G);
  return R;
}

DeploymentConfig config(int Clones = 1, Strategy S = Strategy::ParameterServer,
                        int PsTasks = 0) {
  DeploymentConfig C;
  C.NumClones = Clones;
  C.Strat = S;
  C.NumPsTasks = PsTasks;
  return C;
}

bool isTrainableVariable(const Node &N) {
  return N.getOp().isVariable() && N.attrs().getBool("trainable", true) &&
         isFloat(N.getOutputType(0).Elt);
}

/// The trainable variables \p Loss depends on through float tensors.
std::set<const Node *> trainableDependencies(const Node *Loss) {
  std::set<const Node *> Vars;
  llvm::DenseSet<const Node *> Seen;
  std::vector<const Node *> Work = {Loss};
  while (!Work.empty()) {
    const Node *N = Work.back();
    Work.pop_back();
    if (!Seen.insert(N).second)
      continue;
    if (isTrainableVariable(*N))
      Vars.insert(N);
    for (const TensorRef &In : N->getInputs())
      if (isFloat(In.type().Elt))
        Work.push_back(In.N);
  }
  return Vars;
}

/// Gradient nodes of clone \p Clone (role Gradient), by op name.
std::multimap<std::string, const Node *> gradientOps(const Graph &G,
                                                     int Clone = -2) {
  std::multimap<std::string, const Node *> Ops;
  for (const auto &N : G.nodes())
    if (N->getRole() == NodeRole::Gradient &&
        (Clone == -2 || N->getClone() == Clone))
      Ops.emplace(N->getOpName().str(), N.get());
  return Ops;
}

std::vector<int64_t> dims(const TensorType &T) {
  return std::vector<int64_t>(T.Dims.dims().begin(), T.Dims.dims().end());
}

std::vector<int64_t> dims(TensorRef T) { return dims(T.type()); }

/// Checks the invariants every gradient must satisfy; returns a problem or
/// "".
std::string checkGradientInvariants(Graph &G) {
  DeployState &S = G.deployState();
  for (const CloneInfo &CI : S.Clones) {
    if (!CI.SumLoss)
      continue;
    std::set<const Node *> Want = trainableDependencies(CI.SumLoss);
    std::set<const Node *> Have;
    for (const auto &[Var, Grad] : CI.Gradients) {
      Have.insert(Var);
      if (!Grad)
        return "clone " + std::to_string(CI.Index) + ": empty gradient for " +
               Var->getName().str();
      if (!(Grad.type() == Var->getOutputType(0)))
        return "clone " + std::to_string(CI.Index) + ": gradient of " +
               Var->getName().str() + " is " + Grad.type().str() +
               ", the variable " + Var->getOutputType(0).str();
      if (Grad.N->getRole() != NodeRole::Gradient)
        return "gradient of " + Var->getName().str() +
               " is not a gradient node";
      if (Grad.N->getClone() != CI.Index)
        return "gradient of " + Var->getName().str() +
               " belongs to another clone";
    }
    if (Want != Have) {
      std::string Msg =
          "clone " + std::to_string(CI.Index) + ": gradients for {";
      for (const Node *N : Have)
        Msg += N->getName().str() + " ";
      Msg += "}, trainable dependencies {";
      for (const Node *N : Want)
        Msg += N->getName().str() + " ";
      return Msg + "}";
    }
  }
  // Gradient nodes: named <scope>gradients/..., on their clone's stack
  // (colocation aside), with known types.
  for (const auto &N : G.nodes()) {
    if (N->getRole() != NodeRole::Gradient)
      continue;
    if (N->getClone() < 0 || N->getClone() >= int(S.Clones.size()))
      return N->getName().str() + ": no clone";
    const CloneInfo &CI = S.Clones[N->getClone()];
    if (!N->getName().startswith(CI.Scope + "gradients/"))
      return N->getName().str() + ": not under " + CI.Scope + "gradients/";
    if (!N->getColocateWith() && N->getStack() != CI.Stack)
      return N->getName().str() + ": not on its clone's stack";
    for (unsigned O = 0; O < N->getNumOutputs(); ++O)
      if (N->getOutputType(O).byteSize() < 0)
        return N->getName().str() + ": output of unknown size";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// One forward op at a time
//===----------------------------------------------------------------------===//

struct OpCase {
  const char *Name;
  /// The model, after `training { batch_size: 4 }`.
  const char *Body;
  /// Gradient ops expected (op name -> count), grad_ys excluded.
  std::map<std::string, int> Ops;
  /// Shapes of some gradient ops' output 0 (op name -> dims): the shapes
  /// of the forward inputs they are the gradients of.
  std::map<std::string, std::vector<int64_t>> Shapes;
};

std::vector<OpCase> opCases() {
  return {
      {"MatMul, weights only",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "w" op: "Variable" variable { shape: [3, 2] } }
          node { name: "y" op: "MatMul" input: "x" input: "w" }
          node { name: "l" op: "Mean" input: "y" })",
       {{"BroadcastGrad", 1}, {"MatMul", 1}},
       {{"BroadcastGrad", {4, 2}}, {"MatMul", {3, 2}}}},
      {"MatMul with transposes, both operands variables",
       R"(node { name: "a" op: "Variable" variable { shape: [5, 3] } }
          node { name: "b" op: "Variable" variable { shape: [2, 5] } }
          node { name: "y" op: "MatMul" input: "a" input: "b"
                 attr { name: "transpose_a" b: true }
                 attr { name: "transpose_b" b: true } }
          node { name: "x" op: "Input" data { shape: [1] } }
          node { name: "l" op: "Mean" input: "y" })",
       {{"BroadcastGrad", 1}, {"MatMul", 2}},
       {{"BroadcastGrad", {3, 2}}}},
      {"BiasAdd",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "b" op: "Variable" variable { shape: [3] } }
          node { name: "y" op: "BiasAdd" input: "x" input: "b" }
          node { name: "l" op: "Sum" input: "y" })",
       {{"BroadcastGrad", 1}, {"BiasAddGrad", 1}},
       {{"BiasAddGrad", {3}}}},
      {"Add with broadcasting",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "b" op: "Variable" variable { shape: [3] } }
          node { name: "y" op: "Add" input: "x" input: "b" }
          node { name: "l" op: "Mean" input: "y" })",
       {{"BroadcastGrad", 1}, {"SumToShape", 1}},
       {{"SumToShape", {3}}}},
      {"Sub, Mul, Div, Neg, Square",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "u" op: "Variable" variable { shape: [3] } }
          node { name: "v" op: "Variable" variable { shape: [4, 3] } }
          node { name: "a" op: "Sub" input: "x" input: "u" }
          node { name: "b" op: "Mul" input: "a" input: "v" }
          node { name: "c" op: "Square" input: "b" }
          node { name: "d" op: "Neg" input: "c" }
          node { name: "e" op: "Div" input: "d" input: "v" }
          node { name: "l" op: "Mean" input: "e" })",
       {},
       {}},
      {"Relu, Sigmoid, Tanh, Softmax",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "w" op: "Variable" variable { shape: [3, 3] } }
          node { name: "m" op: "MatMul" input: "x" input: "w" }
          node { name: "r" op: "Relu" input: "m" }
          node { name: "s" op: "Sigmoid" input: "r" }
          node { name: "t" op: "Tanh" input: "s" }
          node { name: "sm" op: "Softmax" input: "t" }
          node { name: "l" op: "Mean" input: "sm" })",
       {{"BroadcastGrad", 1},
        {"SoftmaxGrad", 1},
        {"TanhGrad", 1},
        {"SigmoidGrad", 1},
        {"ReluGrad", 1},
        {"MatMul", 1}},
       {{"SoftmaxGrad", {4, 3}},
        {"TanhGrad", {4, 3}},
        {"SigmoidGrad", {4, 3}},
        {"ReluGrad", {4, 3}},
        {"MatMul", {3, 3}}}},
      {"Reshape and Identity",
       R"(node { name: "x" op: "Input" data { shape: [6] } }
          node { name: "w" op: "Variable" variable { shape: [6] } }
          node { name: "m" op: "Mul" input: "x" input: "w" }
          node { name: "r" op: "Reshape" input: "m"
                 attr { name: "shape" ints: [-1, 2, 3] } }
          node { name: "i" op: "Identity" input: "r" }
          node { name: "l" op: "Sum" input: "i" })",
       {{"BroadcastGrad", 1}, {"Reshape", 1}, {"Mul", 1}, {"SumToShape", 1}},
       {{"BroadcastGrad", {4, 2, 3}},
        {"Reshape", {4, 6}},
        {"SumToShape", {6}}}},
      {"Mean over an axis, keep_dims",
       R"(node { name: "x" op: "Input" data { shape: [5] } }
          node { name: "w" op: "Variable" variable { shape: [5] } }
          node { name: "m" op: "Mul" input: "x" input: "w" }
          node { name: "r" op: "Mean" input: "m"
                 attr { name: "axes" ints: [-1] }
                 attr { name: "keep_dims" b: true } }
          node { name: "l" op: "Sum" input: "r" })",
       {{"BroadcastGrad", 2}, {"Mul", 1}, {"SumToShape", 1}},
       {{"SumToShape", {5}}}},
      {"softmax cross-entropy",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "y" op: "Input" data { dtype: INT32 } }
          node { name: "w" op: "Variable" variable { shape: [3, 4] } }
          node { name: "m" op: "MatMul" input: "x" input: "w" }
          node { name: "ce" op: "SparseSoftmaxCrossEntropy" input: "m"
                 input: "y" }
          node { name: "l" op: "Mean" input: "ce" })",
       {{"BroadcastGrad", 1}, {"Reshape", 1}, {"Mul", 1}, {"MatMul", 1}},
       {{"BroadcastGrad", {4}},
        {"Reshape", {4, 1}},
        {"Mul", {4, 4}},
        {"MatMul", {3, 4}}}},
      {"log loss",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "y" op: "Input" data { shape: [1] } }
          node { name: "w" op: "Variable" variable { shape: [3, 1] } }
          node { name: "m" op: "MatMul" input: "x" input: "w" }
          node { name: "p" op: "Sigmoid" input: "m" }
          node { name: "ll" op: "LogLoss" input: "p" input: "y" }
          node { name: "l" op: "Mean" input: "ll" })",
       {{"BroadcastGrad", 1},
        {"LogLossGrad", 1},
        {"SigmoidGrad", 1},
        {"MatMul", 1}},
       {{"LogLossGrad", {4, 1}}, {"MatMul", {3, 1}}}},
      {"L2 loss",
       R"(node { name: "x" op: "Input" data { shape: [1] } }
          node { name: "w" op: "Variable" variable { shape: [7, 2] } }
          node { name: "l" op: "L2Loss" input: "w" })",
       {{"Mul", 1}},
       {{"Mul", {7, 2}}}},
      {"convolution and pooling",
       R"(node { name: "x" op: "Input" data { shape: [8, 8, 2] } }
          node { name: "k1" op: "Variable" variable { shape: [3, 3, 2, 4] } }
          node { name: "c1" op: "Conv2D" input: "x" input: "k1"
                 attr { name: "padding" s: "SAME" } }
          node { name: "p" op: "MaxPool" input: "c1"
                 attr { name: "ksize" ints: [2, 2] }
                 attr { name: "strides" ints: [2, 2] } }
          node { name: "k2" op: "Variable" variable { shape: [2, 2, 4, 5] } }
          node { name: "c2" op: "Conv2D" input: "p" input: "k2"
                 attr { name: "padding" s: "VALID" } }
          node { name: "l" op: "Mean" input: "c2" })",
       {{"BroadcastGrad", 1},
        {"Conv2DBackpropFilter", 2},
        {"Conv2DBackpropInput", 1},
        {"MaxPoolGrad", 1}},
       {{"BroadcastGrad", {4, 3, 3, 5}},
        {"Conv2DBackpropInput", {4, 4, 4, 4}},
        {"MaxPoolGrad", {4, 8, 8, 4}}}},
      {"batch norm with scale",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "beta" op: "Variable" variable { shape: [3] } }
          node { name: "gamma" op: "Variable" variable { shape: [3] } }
          node { name: "bn" op: "BatchNorm" input: "x" input: "beta"
                 input: "gamma" attr { name: "scale" b: true } }
          node { name: "l" op: "Mean" input: "bn" })",
       {{"BroadcastGrad", 1}, {"BatchNormGrad", 1}},
       {{"BatchNormGrad", {4, 3}}}},
      {"dropout",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "w" op: "Variable" variable { shape: [3] } }
          node { name: "m" op: "Mul" input: "x" input: "w" }
          node { name: "d" op: "Dropout" input: "m" }
          node { name: "l" op: "Mean" input: "d" })",
       {{"BroadcastGrad", 1}, {"Mul", 2}, {"SumToShape", 1}},
       {{"SumToShape", {3}}}},
      {"cast to float64 and back",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "w" op: "Variable" variable { shape: [3] } }
          node { name: "m" op: "Mul" input: "x" input: "w" }
          node { name: "c" op: "Cast" input: "m"
                 attr { name: "dtype" type: FLOAT64 } }
          node { name: "l" op: "Mean" input: "c" })",
       {{"BroadcastGrad", 1}, {"Cast", 1}, {"Mul", 1}, {"SumToShape", 1}},
       {{"Cast", {4, 3}}, {"SumToShape", {3}}}},
      {"a variable read twice: the gradients are added",
       R"(node { name: "x" op: "Input" data { shape: [3] } }
          node { name: "w" op: "Variable" variable { shape: [3] } }
          node { name: "a" op: "Mul" input: "x" input: "w" }
          node { name: "b" op: "Add" input: "a" input: "w" }
          node { name: "l" op: "Sum" input: "b" })",
       {{"BroadcastGrad", 1}, {"Mul", 1}, {"SumToShape", 2}, {"AddN", 1}},
       {{"AddN", {3}}}},
  };
}

TEST(GradientStructureTest, OpByOp) {
  for (const OpCase &C : opCases()) {
    SCOPED_TRACE(C.Name);
    std::string Text = std::string("training { batch_size: 4 }\n") + C.Body +
                       "\nloss: \"l\"\n";
    Compiled R = compile(Text, config());
    ASSERT_EQ(R.Error, "");
    EXPECT_EQ(checkGradientInvariants(*R.G), "");
    auto Ops = gradientOps(*R.G);
    // grad_ys seeds the pass: a constant 1 of the loss's type.
    const Node *Seed = R.G->lookup("gradients/grad_ys");
    ASSERT_NE(Seed, nullptr);
    EXPECT_EQ(Seed->getOpName(), "Const");
    ASSERT_NE(Seed->attrs().get("value"), nullptr);
    EXPECT_EQ(Seed->attrs().get("value")->getFloats(),
              std::vector<double>{1.0});
    EXPECT_TRUE(dims(Seed->getOutputType(0)).empty());
    std::map<std::string, int> Got;
    for (const auto &[Op, N] : Ops)
      if (N != Seed)
        ++Got[Op];
    if (!C.Ops.empty()) {
      EXPECT_EQ(Got, C.Ops);
    }
    for (const auto &[Op, Dims] : C.Shapes) {
      auto It = Ops.find(Op);
      ASSERT_NE(It, Ops.end()) << Op;
      EXPECT_EQ(dims(It->second->getOutputType(0)), Dims) << Op;
    }
  }
}

TEST(GradientStructureTest, NamesFollowTheForwardNodes) {
  Compiled R = compile(R"(training { batch_size: 4 }
      node { name: "x" op: "Input" data { shape: [3] } }
      scope {
        name: "layer"
        node { name: "w" op: "Variable" variable { shape: [3, 2] } }
        node { name: "b" op: "Variable" variable { shape: [2] } }
        node { name: "m" op: "MatMul" input: "x" input: "w" }
        node { name: "y" op: "BiasAdd" input: "m" input: "b" }
      }
      node { name: "l" op: "Mean" input: "layer/y" }
      loss: "l")",
                       config(2));
  ASSERT_EQ(R.Error, "");
  Graph &G = *R.G;
  for (const char *Name : {"clone_0/gradients/grad_ys",
                           "clone_0/gradients/scaled_clone_loss_grad/Div",
                           "clone_0/gradients/l_grad/BroadcastGrad",
                           "clone_0/gradients/layer/y_grad/BiasAddGrad",
                           "clone_0/gradients/layer/m_grad/MatMul",
                           "clone_1/gradients/layer/m_grad/MatMul"})
    EXPECT_NE(G.lookup(Name), nullptr) << Name;
  // The gradient of the input x is not needed and not built.
  EXPECT_EQ(G.lookup("clone_0/gradients/layer/m_grad/MatMul_1"), nullptr);
  // The weights' gradient is x^T dy, with x clone 0's slice.
  const Node *GW = G.lookup("clone_0/gradients/layer/m_grad/MatMul");
  ASSERT_NE(GW, nullptr);
  EXPECT_EQ(GW->getInput(0).N->getName(), "clone_0/x");
  EXPECT_TRUE(GW->attrs().getBool("transpose_a"));
  EXPECT_EQ(dims(TensorRef(const_cast<Node *>(GW))),
            (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(checkGradientInvariants(G), "");
}

TEST(GradientStructureTest, ColocatedGradientsFollowTheirForwardOp) {
  const char *Text = R"(training { batch_size: 4 }
      node { name: "x" op: "Input" data { shape: [3] } }
      node { name: "w" op: "Variable" variable { shape: [3, 1] } }
      node { name: "m" op: "MatMul" input: "x" input: "w" }
      node { name: "p" op: "Sigmoid" input: "m" }
      node { name: "l" op: "Mean" input: "p" }
      loss: "l")";
  DeploymentConfig C = config(2);
  C.ColocateGradients = true;
  Compiled R = compile(Text, C);
  ASSERT_EQ(R.Error, "");
  Graph &G = *R.G;
  for (int I = 0; I < 2; ++I) {
    std::string P = "clone_" + std::to_string(I) + "/";
    const Node *GM = G.lookup(P + "gradients/m_grad/MatMul");
    const Node *GP = G.lookup(P + "gradients/p_grad/SigmoidGrad");
    ASSERT_NE(GM, nullptr);
    ASSERT_NE(GP, nullptr);
    EXPECT_EQ(GM->getColocateWith(), G.lookup(P + "m"));
    EXPECT_EQ(GP->getColocateWith(), G.lookup(P + "p"));
    // grad_ys has no forward op.
    EXPECT_EQ(G.lookup(P + "gradients/grad_ys")->getColocateWith(), nullptr);
  }
  EXPECT_EQ(checkGradientInvariants(G), "");
  // Without the flag nothing is colocated.
  Compiled D = compile(Text, config(2));
  ASSERT_EQ(D.Error, "");
  for (const auto &N : D.G->nodes()) {
    if (N->getRole() == NodeRole::Gradient) {
      EXPECT_EQ(N->getColocateWith(), nullptr) << N->getName().str();
    }
  }
}

TEST(GradientStructureTest, OnlyWhatInfluencesTheLoss) {
  Compiled R = compile(R"(training { batch_size: 4 }
      node { name: "x" op: "Input" data { shape: [3] } }
      node { name: "w" op: "Variable" variable { shape: [3, 1] } }
      node { name: "v" op: "Variable" variable { shape: [3, 1] } }
      node { name: "frozen" op: "Variable"
             variable { shape: [1] trainable: false } }
      node { name: "m" op: "MatMul" input: "x" input: "w" }
      node { name: "b" op: "BiasAdd" input: "m" input: "frozen" }
      node { name: "l" op: "Mean" input: "b" }
      node { name: "o" op: "MatMul" input: "x" input: "v" }
      loss: "l"
      output { name: "o" tensor: "o" })",
                       config(2), UpToSums);
  ASSERT_EQ(R.Error, "");
  Graph &G = *R.G;
  DeployState &S = G.deployState();
  for (const CloneInfo &CI : S.Clones) {
    ASSERT_EQ(CI.Gradients.size(), 1u);
    EXPECT_EQ(CI.Gradients.begin()->first, G.lookup("w"));
  }
  ASSERT_EQ(S.SummedGradients.size(), 1u);
  EXPECT_EQ(S.SummedGradients.begin()->first, G.lookup("w"));
  EXPECT_EQ(S.SummedGradients.begin()->second.N, G.lookup("w/sum_grads"));
  EXPECT_EQ(gradientOps(G).count("BiasAddGrad"), 0u);
  EXPECT_EQ(checkGradientInvariants(G), "");
}

TEST(GradientStructureTest, NoGradientForTheBatchStatistics) {
  Compiled R = compile(R"(training { batch_size: 4 }
      node { name: "x" op: "Input" data { shape: [3] } }
      node { name: "beta" op: "Variable" variable { shape: [3] } }
      node { name: "bn" op: "BatchNorm" input: "x" input: "beta" }
      node { name: "l" op: "Mean" input: "bn:1" }
      loss: "l")",
                       config());
  EXPECT_NE(R.Error.find("node 'bn': no gradient is defined for the batch "
                         "mean and variance outputs of BatchNorm"),
            std::string::npos)
      << R.Error;
}

//===----------------------------------------------------------------------===//
// The examples, in several deployments
//===----------------------------------------------------------------------===//

std::string readExample(const char *Name) {
  auto B = llvm::MemoryBuffer::getFile(std::string(MDPLAN_EXAMPLES_DIR) + "/" +
                                       Name);
  if (!B) {
    ADD_FAILURE() << "cannot read " << Name;
    return "";
  }
  return (*B)->getBuffer().str();
}

struct Deployment {
  int Clones;
  Strategy Strat;
  int PsTasks;
};

const Deployment Deployments[] = {
    {1, Strategy::ParameterServer, 0}, {2, Strategy::ParameterServer, 0},
    {4, Strategy::ParameterServer, 2}, {2, Strategy::Mirrored, 0},
    {4, Strategy::Mirrored, 0},
};

const char *const Examples[] = {"logistic_classifier.mdg",
                                "batchnorm_classifier.mdg", "fashion_mlp.mdg",
                                "tf_tutorial_cnn.mdg"};

TEST(GradientStructureTest, ExamplesHaveEveryGradient) {
  for (const char *Example : Examples) {
    std::string Text = readExample(Example);
    for (const Deployment &D : Deployments) {
      SCOPED_TRACE(std::string(Example) + ", " + std::to_string(D.Clones) +
                   " clones, " + strategyName(D.Strat).str() + ", " +
                   std::to_string(D.PsTasks) + " ps tasks");
      Compiled R =
          compile(Text, config(D.Clones, D.Strat, D.PsTasks), UpToSums);
      ASSERT_EQ(R.Error, "");
      Graph &G = *R.G;
      DeployState &S = G.deployState();
      ASSERT_EQ(S.Clones.size(), size_t(D.Clones));
      EXPECT_EQ(checkGradientInvariants(G), "");
      // Every clone has a gradient for every trainable variable (its copy
      // under the mirrored strategy).
      std::vector<Node *> Trainable;
      for (const auto &N : G.nodes())
        if (isTrainableVariable(*N) && !S.MirrorOf.count(N.get()))
          Trainable.push_back(N.get());
      ASSERT_FALSE(Trainable.empty());
      for (const CloneInfo &CI : S.Clones)
        for (Node *V : Trainable) {
          Node *Copy = S.copyFor(V, CI);
          EXPECT_TRUE(CI.Gradients.count(Copy))
              << "clone " << CI.Index << " has no gradient for "
              << Copy->getName().str();
        }
      // One summed gradient per variable, or per copy when mirrored, of
      // the variable's type; nothing for non-trainable variables.
      size_t Copies = D.Strat == Strategy::Mirrored ? D.Clones : 1;
      EXPECT_EQ(S.SummedGradients.size(), Trainable.size() * Copies);
      for (const auto &[Var, Sum] : S.SummedGradients) {
        EXPECT_TRUE(isTrainableVariable(*Var)) << Var->getName().str();
        EXPECT_TRUE(Sum.type() == Var->getOutputType(0))
            << Var->getName().str() << ": " << Sum.type().str();
        if (D.Strat == Strategy::Mirrored && D.Clones > 1)
          EXPECT_EQ(Sum.N->getOpName(), "AllReduce") << Var->getName().str();
        else if (D.Clones > 1)
          EXPECT_EQ(Sum.N->getName(), (Var->getName() + "/sum_grads").str());
        else
          EXPECT_EQ(Sum.N->getRole(), NodeRole::Gradient);
      }
    }
  }
}

TEST(GradientStructureTest, BatchNormClassifierGradients) {
  Compiled R = compile(readExample("batchnorm_classifier.mdg"), config(2),
                       UpToGradients);
  ASSERT_EQ(R.Error, "");
  Graph &G = *R.G;
  DeployState &S = G.deployState();
  for (const CloneInfo &CI : S.Clones) {
    std::set<std::string> Vars;
    for (const auto &[Var, Grad] : CI.Gradients)
      Vars.insert(Var->getName().str());
    EXPECT_EQ(Vars, (std::set<std::string>{
                        "BatchNormClassifier/BatchNorm/beta",
                        "BatchNormClassifier/fully_connected/weights",
                        "BatchNormClassifier/fully_connected/biases"}));
    // beta's gradient is output 1 of the BatchNormGrad of its clone.
    TensorRef Beta =
        CI.Gradients.lookup(G.lookup("BatchNormClassifier/BatchNorm/beta"));
    ASSERT_TRUE(bool(Beta));
    EXPECT_EQ(Beta.N->getOpName(), "BatchNormGrad");
    EXPECT_EQ(Beta.Index, 1u);
    EXPECT_EQ(Beta.N->getName(), CI.Scope +
                                     "gradients/BatchNormClassifier/BatchNorm/"
                                     "BatchNorm_grad/BatchNormGrad");
    EXPECT_EQ(dims(Beta), (std::vector<int64_t>{4}));
  }
  // Each clone's gradient ops: the same kinds, one set per clone.
  auto C0 = gradientOps(G, 0), C1 = gradientOps(G, 1);
  std::multiset<std::string> K0, K1;
  for (auto &[Op, N] : C0)
    K0.insert(Op);
  for (auto &[Op, N] : C1)
    K1.insert(Op);
  EXPECT_EQ(K0, K1);
  EXPECT_EQ(K0.count("BatchNormGrad"), 1u);
  EXPECT_EQ(K0.count("LogLossGrad"), 1u);
}

TEST(GradientStructureTest, RegularizationInTheFirstCloneOnly) {
  Compiled R =
      compile(readExample("fashion_mlp.mdg"), config(2), UpToGradients);
  ASSERT_EQ(R.Error, "");
  Graph &G = *R.G;
  DeployState &S = G.deployState();
  Node *W = G.lookup("mlp/fc1/weights");
  ASSERT_NE(W, nullptr);
  // Clone 0: data gradient + L2 gradient; clone 1: the data gradient.
  TensorRef G0 = S.Clones[0].Gradients.lookup(W);
  TensorRef G1 = S.Clones[1].Gradients.lookup(W);
  ASSERT_TRUE(bool(G0));
  ASSERT_TRUE(bool(G1));
  EXPECT_EQ(G0.N->getOpName(), "AddN");
  EXPECT_EQ(G0.N->getNumInputs(), 2u);
  EXPECT_EQ(G1.N->getOpName(), "MatMul");
  EXPECT_EQ(dims(G0), (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(dims(G1), (std::vector<int64_t>{784, 256}));
  for (const auto &N : G.nodes()) {
    if (N->getRole() == NodeRole::Gradient && N->getClone() == 1) {
      EXPECT_FALSE(N->getName().contains("Regularizer")) << N->getName().str();
    }
  }
}

} // namespace
