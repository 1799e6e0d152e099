//===- GradientCheckTest.cpp - Gradient rules vs central differences ------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// For every differentiable op: a float64 model L = sum(op(vars) * R) with a
// fixed random R is compiled by the full pipeline (one CPU clone, SGD with
// learning rate 1) and run by the runtime. The analytic gradient of each
// variable is what one training step subtracts from it; the numerical one is
// (L(v + h) - L(v - h)) / 2h from the step's total_loss. They must agree.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Plan/Compiler.h"

#include "mdrt/Executor.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <sstream>

using namespace mdplan;

namespace {

struct VarSpec {
  std::string Name;
  std::vector<int64_t> Shape;
  double Min = -1, Max = 1;
};

struct ConstSpec {
  std::string Name;
  std::vector<int64_t> Shape;
  std::string Type; // FLOAT64, INT32
  std::vector<double> Values;
};

std::string dims(const std::vector<int64_t> &S) {
  std::string R = "[";
  for (size_t I = 0; I < S.size(); ++I)
    R += (I ? ", " : "") + std::to_string(S[I]);
  return R + "]";
}

int64_t count(const std::vector<int64_t> &S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

/// Deterministic values in [-1, 1).
std::vector<double> pseudoRandom(int64_t N, uint64_t Seed) {
  std::vector<double> V;
  uint64_t X = Seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t I = 0; I < N; ++I) {
    X = X * 6364136223846793005ull + 1442695040888963407ull;
    V.push_back(double(X >> 11) / double(1ull << 53) * 2 - 1);
  }
  return V;
}

/// A model: variables, constants, the op's nodes (text), and the tensor
/// (with its shape) the loss contracts with random weights.
struct Case {
  std::string Name;
  std::vector<VarSpec> Vars;
  std::vector<ConstSpec> Consts;
  std::string Nodes;
  std::string Output;
  std::vector<int64_t> OutputShape;
};

std::string modelText(const Case &C) {
  std::ostringstream OS;
  OS << "name: \"" << C.Name << "\"\ntraining { batch_size: 1 }\n";
  for (const VarSpec &V : C.Vars)
    OS << "node { name: \"" << V.Name << "\" op: \"Variable\" variable { "
       << "shape: " << dims(V.Shape) << " dtype: FLOAT64 initializer { kind: "
       << "UNIFORM minval: " << V.Min << " maxval: " << V.Max << " } } }\n";
  auto Values = [](const std::vector<double> &V) {
    std::ostringstream S;
    S.precision(17);
    for (double D : V)
      S << " floats: " << D;
    return S.str();
  };
  for (const ConstSpec &K : C.Consts)
    OS << "node { name: \"" << K.Name << "\" op: \"Const\" attr { name: "
       << "\"dtype\" type: " << K.Type << " } attr { name: \"shape\" shape "
       << "{ dim: " << dims(K.Shape) << " } } attr { name: \"value\""
       << Values(K.Values) << " } }\n";
  OS << C.Nodes << "\n";
  OS << "node { name: \"R\" op: \"Const\" attr { name: \"dtype\" type: "
        "FLOAT64 } attr { name: \"shape\" shape { dim: "
     << dims(C.OutputShape) << " } } attr { name: \"value\""
     << Values(pseudoRandom(count(C.OutputShape), 99)) << " } }\n";
  OS << "node { name: \"weighted\" op: \"Mul\" input: \"" << C.Output
     << "\" input: \"R\" }\n"
     << "node { name: \"loss\" op: \"Sum\" input: \"weighted\" }\n"
     << "loss: \"loss\"\n";
  return OS.str();
}

/// Reads \p Text, compiles it for \p Config without the evaluation program
/// and loads the plan into \p E, initialized (one thread, seed 7); \p E
/// stays null after a failure.
void loadPlan(const std::string &Text, const std::string &Name,
              const DeploymentConfig &Config,
              std::unique_ptr<mdrt::Executor> &E) {
  auto G = readModelBuffer(Text, Name + ".mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError()) << "\n" << Text;
  PassContext Ctx(Config);
  CompileOptions CO;
  CO.BuildEval = false;
  auto Comp = compileModel(std::move(*G), Ctx, CO);
  ASSERT_TRUE(bool(Comp)) << errorMessage(Comp.takeError());
  auto Plan = mdrt::PlanFile::fromBytes(Comp->Plan.toVector(), Name);
  ASSERT_TRUE(Plan.isOk()) << Plan.status().message();
  mdrt::ExecutorOptions EO;
  EO.Threads = 1;
  EO.Seed = 7;
  auto Exec = mdrt::Executor::create(
      std::shared_ptr<const mdrt::PlanFile>(Plan.take()), EO);
  ASSERT_TRUE(Exec.isOk()) << Exec.status().message();
  std::unique_ptr<mdrt::Executor> Made = Exec.take();
  ASSERT_TRUE(Made->initialize().isOk());
  E = std::move(Made);
}

/// Compiles and checks one case; failures are reported with the case name.
void checkGradients(const Case &C) {
  SCOPED_TRACE(C.Name);
  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  OptimizerSettings O;
  O.K = OptimizerSettings::Kind::SGD;
  O.LearningRate = 1.0;
  Config.Optimizer = O;
  Config.OptimizerFieldsSet["kind"] = true;
  Config.OptimizerFieldsSet["learning_rate"] = true;
  std::unique_ptr<mdrt::Executor> Loaded;
  loadPlan(modelText(C), C.Name, Config, Loaded);
  if (!Loaded)
    return;
  mdrt::Executor &E = *Loaded;
  int Train = E.programIndex("train");

  // Every variable's value, to restore before each evaluation.
  size_t NV = E.variables().size();
  std::vector<std::vector<double>> Base(NV);
  for (size_t I = 0; I < NV; ++I) {
    const mdrt::VariableInfo &V = E.variables()[I];
    if (V.Type.Type != mdrt::DType::Float64)
      continue;
    Base[I].resize(size_t(V.Type.numElements()));
    ASSERT_TRUE(E.readVariable(I, Base[I].data()).isOk());
  }
  auto Restore = [&] {
    for (size_t I = 0; I < NV; ++I) {
      if (!Base[I].empty()) {
        ASSERT_TRUE(E.writeVariable(I, Base[I].data()).isOk());
      }
    }
  };
  std::vector<mdrt::OutputValue> Outs;
  auto Loss = [&]() -> double {
    // Step 0 every time: the same dropout mask.
    EXPECT_TRUE(E.run(Train, 0).isOk());
    EXPECT_TRUE(E.readOutputs(Train, Outs).isOk());
    for (const mdrt::OutputValue &V : Outs)
      if (V.Name == "total_loss")
        return V.Values.at(0);
    ADD_FAILURE() << "no total_loss output";
    return 0;
  };

  const double H = 1e-6;
  int Checked = 0;
  for (size_t I = 0; I < NV; ++I) {
    const mdrt::VariableInfo &V = E.variables()[I];
    if (!V.Trainable || Base[I].empty())
      continue;
    // Analytic: one SGD step with learning rate 1 subtracts the gradient.
    Restore();
    Loss();
    std::vector<double> After(Base[I].size());
    ASSERT_TRUE(E.readVariable(I, After.data()).isOk());
    size_t Stride = std::max<size_t>(1, Base[I].size() / 24);
    for (size_t K = 0; K < Base[I].size(); K += Stride) {
      double Analytic = Base[I][K] - After[K];
      std::vector<double> P = Base[I];
      Restore();
      P[K] = Base[I][K] + H;
      ASSERT_TRUE(E.writeVariable(I, P.data()).isOk());
      double Plus = Loss();
      Restore();
      P[K] = Base[I][K] - H;
      ASSERT_TRUE(E.writeVariable(I, P.data()).isOk());
      double Minus = Loss();
      double Numeric = (Plus - Minus) / (2 * H);
      double Tol =
          1e-5 * std::max({1.0, std::fabs(Analytic), std::fabs(Numeric)});
      EXPECT_NEAR(Analytic, Numeric, Tol)
          << "variable " << V.Name << " element " << K;
      ++Checked;
    }
  }
  EXPECT_GT(Checked, 0) << "no trainable float64 variable was checked";
  if (getenv("MDPLAN_GRADCHECK_VERBOSE"))
    fprintf(stderr, "%s: %d elements checked\n", C.Name.c_str(), Checked);
}

Case unary(const std::string &Op, double Min = -1, double Max = 1) {
  return {Op,  {{"x", {3, 4}, Min, Max}},
          {},  "node { name: \"y\" op: \"" + Op + "\" input: \"x\" }",
          "y", {3, 4}};
}

Case binary(const std::string &Op, std::vector<int64_t> A,
            std::vector<int64_t> B, std::vector<int64_t> Out, double BMin = -1,
            double BMax = 1) {
  return {Op + dims(A) + dims(B),
          {{"a", A}, {"b", B, BMin, BMax}},
          {},
          "node { name: \"y\" op: \"" + Op + "\" input: \"a\" input: \"b\" }",
          "y",
          Out};
}

TEST(GradientCheck, Elementwise) {
  for (const char *Op :
       {"Identity", "Neg", "Square", "Relu", "Sigmoid", "Tanh", "Softmax"})
    checkGradients(unary(Op));
  checkGradients(unary("Sqrt", 0.5, 2));
  checkGradients(unary("Exp", -2, 2));
  checkGradients(unary("Log", 0.5, 2));
}

TEST(GradientCheck, Broadcasting) {
  for (const char *Op : {"Add", "Sub", "Mul"}) {
    checkGradients(binary(Op, {3, 4}, {3, 4}, {3, 4}));
    checkGradients(binary(Op, {3, 4}, {4}, {3, 4}));
    checkGradients(binary(Op, {3, 1}, {1, 4}, {3, 4}));
  }
  checkGradients(binary("Div", {3, 4}, {3, 4}, {3, 4}, 0.5, 1.5));
  checkGradients(binary("Div", {3, 4}, {4}, {3, 4}, 0.5, 1.5));
  checkGradients(binary("Div", {3, 1}, {1, 4}, {3, 4}, 0.5, 1.5));
  // Maximum and Minimum: each element's gradient goes to the chosen input
  // (ties, where the function has no derivative, have probability zero
  // here).
  for (const char *Op : {"Maximum", "Minimum"}) {
    checkGradients(binary(Op, {3, 4}, {3, 4}, {3, 4}));
    checkGradients(binary(Op, {3, 4}, {4}, {3, 4}));
    checkGradients(binary(Op, {3, 1}, {1, 4}, {3, 4}));
  }
}

/// Compiles \p C for one SGD step with learning rate 1 on the CPU, sets its
/// variables a and b to \p AV and \p BV, runs the step and reads their new
/// values into \p AN and \p BN (call it in ASSERT_NO_FATAL_FAILURE).
void stepAB(const Case &C, const std::vector<double> &AV,
            const std::vector<double> &BV, std::vector<double> &AN,
            std::vector<double> &BN) {
  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  OptimizerSettings O;
  O.LearningRate = 1.0;
  Config.Optimizer = O;
  Config.OptimizerFieldsSet["learning_rate"] = true;
  std::unique_ptr<mdrt::Executor> E;
  loadPlan(modelText(C), C.Name, Config, E);
  ASSERT_TRUE(E);
  auto Index = [&](const std::string &Name) {
    for (size_t I = 0; I < E->variables().size(); ++I)
      if (E->variables()[I].Name == Name)
        return I;
    ADD_FAILURE() << "no variable " << Name;
    return size_t(0);
  };
  size_t A = Index("a"), B = Index("b");
  ASSERT_TRUE(E->writeVariable(A, AV.data()).isOk());
  ASSERT_TRUE(E->writeVariable(B, BV.data()).isOk());
  ASSERT_TRUE(E->run(E->programIndex("train"), 0).isOk());
  AN.assign(AV.size(), 0);
  BN.assign(BV.size(), 0);
  ASSERT_TRUE(E->readVariable(A, AN.data()).isOk());
  ASSERT_TRUE(E->readVariable(B, BN.data()).isOk());
}

// Where the inputs of Maximum or Minimum are equal, the derivative is
// undefined and TF gives the gradient to the first input: one SGD step
// (learning rate 1) of sum(op(a, b) * R) subtracts R from a there, and
// from the chosen input elsewhere.
TEST(GradientCheck, MaximumAndMinimumTiesGoToTheFirstInput) {
  const std::vector<double> AV = {0.5, 0.25, -1, 2}, BV = {0.5, 0.75, -1, 1};
  const std::vector<double> R = pseudoRandom(4, 99);
  std::vector<double> AN, BN;
  // Elements 0 and 2 tie, 1 has b larger, 3 has a larger.
  ASSERT_NO_FATAL_FAILURE(
      stepAB(binary("Maximum", {4}, {4}, {4}), AV, BV, AN, BN));
  EXPECT_EQ(AN, (std::vector<double>{0.5 - R[0], 0.25, -1 - R[2], 2 - R[3]}));
  EXPECT_EQ(BN, (std::vector<double>{0.5, 0.75 - R[1], -1, 1}));
  ASSERT_NO_FATAL_FAILURE(
      stepAB(binary("Minimum", {4}, {4}, {4}), AV, BV, AN, BN));
  EXPECT_EQ(AN, (std::vector<double>{0.5 - R[0], 0.25 - R[1], -1 - R[2], 2}));
  EXPECT_EQ(BN, (std::vector<double>{0.5, 0.75, -1, 1 - R[3]}));
}

// TF's gradient of Maximum and Minimum for values that are not finite: a
// NaN input sends the gradient to y (the comparison is false), and an
// infinite gradient reaches the chosen input only (TF selects with
// `where`; a gradient built by subtraction gives the other input
// inf - inf = NaN).
TEST(GradientCheck, MaximumAndMinimumGradientsOfNonFiniteValues) {
  const double Inf = std::numeric_limits<double>::infinity();
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> R = pseudoRandom(4, 99);
  ASSERT_NE(R[0], 0);
  const double MinusInfR0 = R[0] > 0 ? -Inf : Inf;
  for (const char *Op : {"Maximum", "Minimum"}) {
    SCOPED_TRACE(Op);
    Case C = binary(Op, {4}, {4}, {4});
    // dy = R * K: infinite at element 0.
    C.Consts.push_back({"K", {4}, "FLOAT64", {Inf, 1, 1, 1}});
    C.Nodes += "\nnode { name: \"scaled\" op: \"Mul\" input: \"y\" "
               "input: \"K\" }";
    C.Output = "scaled";
    bool Max = std::string(Op) == "Maximum";
    // 0: b chosen, infinite gradient; 1: a is NaN; 2: b is NaN; 3: a
    // chosen.
    const std::vector<double> AV = {Max ? 0.25 : 0.75, NaN, 1, Max ? 2 : 0.5},
                              BV = {Max ? 0.75 : 0.25, 0.5, NaN, 1};
    std::vector<double> AN, BN;
    ASSERT_NO_FATAL_FAILURE(stepAB(C, AV, BV, AN, BN));
    // (The NaN inputs stay NaN whatever their gradient: what counts is
    // that the other input's is none.)
    EXPECT_EQ(AN[0], AV[0]);
    EXPECT_EQ(BN[0], MinusInfR0);
    EXPECT_EQ(BN[1], 0.5 - R[1]);
    EXPECT_EQ(AN[2], 1);
    EXPECT_EQ(AN[3], AV[3] - R[3]);
    EXPECT_EQ(BN[3], 1);
  }
}

TEST(GradientCheck, ConcatSlicePad) {
  // Concat along each axis (negative too), of three inputs, one of them a
  // constant that needs no gradient.
  for (int Axis : {0, 1, -1}) {
    std::vector<int64_t> A = {3, 4};
    std::vector<int64_t> B =
        Axis == 0 ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{3, 2};
    Case C{"Concat" + std::to_string(Axis),
           {{"a", A}, {"b", B}},
           {{"k", A, "FLOAT64", pseudoRandom(12, 5)}},
           "node { name: \"y\" op: \"Concat\" input: \"a\" input: \"k\" "
           "input: \"b\" attr { name: \"axis\" i: " +
               std::to_string(Axis) + " } }",
           "y",
           Axis == 0 ? std::vector<int64_t>{8, 4}
                     : std::vector<int64_t>{3, 10}};
    checkGradients(C);
  }
  // A box of a 3-D tensor, and the rest of each dimension (-1).
  checkGradients({"Slice",
                  {{"x", {4, 5, 6}}},
                  {},
                  "node { name: \"y\" op: \"Slice\" input: \"x\" attr { "
                  "name: \"begin\" ints: [1, 0, 2] } attr { name: \"size\" "
                  "ints: [2, -1, 3] } }",
                  "y",
                  {2, 5, 3}});
  // Copies that change nothing pass dy on.
  checkGradients({"TrivialBoxes",
                  {{"x", {2, 3}}},
                  {},
                  "node { name: \"c\" op: \"Concat\" input: \"x\" attr { "
                  "name: \"axis\" i: 1 } } node { name: \"p\" op: \"Pad\" "
                  "input: \"c\" attr { name: \"paddings\" ints: [0, 0, 0, 0] "
                  "} } node { name: \"y\" op: \"Slice\" input: \"p\" attr "
                  "{ name: \"begin\" ints: [0, 0] } attr { name: \"size\" "
                  "ints: [2, 3] } }",
                  "y",
                  {2, 3}});
  checkGradients({"Pad",
                  {{"x", {2, 3}}},
                  {},
                  "node { name: \"y\" op: \"Pad\" input: \"x\" attr { "
                  "name: \"paddings\" ints: [1, 2, 0, 3] } }",
                  "y",
                  {5, 6}});
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  // Labels: smoothed one-hot rows, a constant (they get no gradient).
  std::vector<double> Labels(12, 0.025);
  for (int I = 0; I < 4; ++I)
    Labels[size_t(I * 3 + I % 3)] = 0.95;
  checkGradients({"SoftmaxCrossEntropy",
                  {{"x", {4, 3}, -2, 2}},
                  {{"labels", {4, 3}, "FLOAT64", Labels}},
                  "node { name: \"xent\" op: \"SoftmaxCrossEntropy\" input: "
                  "\"x\" input: \"labels\" }",
                  "xent",
                  {4}});
}

TEST(GradientCheck, MatMul) {
  for (int TA = 0; TA < 2; ++TA)
    for (int TB = 0; TB < 2; ++TB) {
      std::vector<int64_t> A =
          TA ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
      std::vector<int64_t> B =
          TB ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5};
      Case C{"MatMul" + std::to_string(TA) + std::to_string(TB),
             {{"a", A}, {"b", B}},
             {},
             std::string("node { name: \"y\" op: \"MatMul\" input: \"a\" "
                         "input: \"b\" attr { name: \"transpose_a\" b: ") +
                 (TA ? "true" : "false") +
                 " } attr { name: \"transpose_b\" b: " +
                 (TB ? "true" : "false") + " } }",
             "y",
             {3, 5}};
      checkGradients(C);
    }
}

TEST(GradientCheck, LayersAndReductions) {
  checkGradients({"BiasAdd",
                  {{"x", {2, 3, 4}}, {"b", {4}}},
                  {},
                  "node { name: \"y\" op: \"BiasAdd\" input: \"x\" input: "
                  "\"b\" }",
                  "y",
                  {2, 3, 4}});
  checkGradients({"AddN",
                  {{"a", {3, 2}}, {"b", {3, 2}}, {"c", {3, 2}}},
                  {},
                  "node { name: \"y\" op: \"AddN\" input: \"a\" input: \"b\" "
                  "input: \"c\" input: \"a\" }",
                  "y",
                  {3, 2}});
  checkGradients({"Reshape",
                  {{"x", {2, 6}}},
                  {},
                  "node { name: \"y\" op: \"Reshape\" input: \"x\" attr { "
                  "name: \"shape\" ints: [3, -1] } }",
                  "y",
                  {3, 4}});
  checkGradients({"L2Loss",
                  {{"x", {3, 4}}},
                  {},
                  "node { name: \"y\" op: \"L2Loss\" input: \"x\" }",
                  "y",
                  {}});
  for (const char *Op : {"Mean", "Sum"}) {
    checkGradients(
        {std::string(Op) + "All",
         {{"x", {2, 3, 4}}},
         {},
         std::string("node { name: \"y\" op: \"") + Op + "\" input: \"x\" }",
         "y",
         {}});
    checkGradients({std::string(Op) + "Axes",
                    {{"x", {2, 3, 4}}},
                    {},
                    std::string("node { name: \"y\" op: \"") + Op +
                        "\" input: \"x\" attr { name: \"axes\" ints: [0, -1] "
                        "} }",
                    "y",
                    {3}});
    checkGradients({std::string(Op) + "KeepDims",
                    {{"x", {2, 3, 4}}},
                    {},
                    std::string("node { name: \"y\" op: \"") + Op +
                        "\" input: \"x\" attr { name: \"axes\" ints: [1] } "
                        "attr { name: \"keep_dims\" b: true } }",
                    "y",
                    {2, 1, 4}});
  }
}

TEST(GradientCheck, Losses) {
  checkGradients({"SparseSoftmaxCrossEntropy",
                  {{"logits", {4, 5}}},
                  {{"labels", {4}, "INT32", {0, 3, 4, 1}}},
                  "node { name: \"y\" op: \"SparseSoftmaxCrossEntropy\" "
                  "input: \"logits\" input: \"labels\" }",
                  "y",
                  {4}});
  checkGradients(
      {"LogLoss",
       {{"p", {4, 3}, 0.1, 0.9}},
       {{"labels", {4, 3}, "FLOAT64", {0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0}}},
       "node { name: \"y\" op: \"LogLoss\" input: \"p\" input: "
       "\"labels\" }",
       "y",
       {4, 3}});
  // Labels that are variables too (soft targets): TensorFlow
  // differentiates them (mdplan dropped their gradient).
  checkGradients({"LogLossOfVariableLabels",
                  {{"p", {4, 3}, 0.1, 0.9}, {"labels", {4, 3}, 0, 1}},
                  {},
                  "node { name: \"y\" op: \"LogLoss\" input: \"p\" "
                  "input: \"labels\" }",
                  "y",
                  {4, 3}});
  // Only the labels are trained.
  checkGradients({"LogLossOfVariableLabelsOnly",
                  {{"labels", {4, 3}, 0, 1}},
                  {{"p", {4, 3}, "FLOAT64", pseudoRandom(12, 5)}},
                  "node { name: \"q\" op: \"Sigmoid\" input: \"p\" } "
                  "node { name: \"y\" op: \"LogLoss\" input: \"q\" "
                  "input: \"labels\" }",
                  "y",
                  {4, 3}});
}

TEST(GradientCheck, Convolution) {
  for (const char *Pad : {"SAME", "VALID"})
    for (int S : {1, 2}) {
      int64_t O =
          std::string(Pad) == "SAME" ? (6 + S - 1) / S : (6 - 3) / S + 1;
      checkGradients({std::string("Conv2D") + Pad + std::to_string(S),
                      {{"x", {2, 6, 6, 2}}, {"f", {3, 3, 2, 3}}},
                      {},
                      std::string("node { name: \"y\" op: \"Conv2D\" input: "
                                  "\"x\" input: \"f\" attr { name: "
                                  "\"padding\" s: \"") +
                          Pad + "\" } attr { name: \"strides\" ints: [" +
                          std::to_string(S) + ", " + std::to_string(S) +
                          "] } }",
                      "y",
                      {2, O, O, 3}});
    }
  checkGradients({"MaxPool2x2",
                  {{"x", {2, 4, 4, 3}}},
                  {},
                  "node { name: \"y\" op: \"MaxPool\" input: \"x\" attr { "
                  "name: \"ksize\" ints: [2, 2] } attr { name: \"strides\" "
                  "ints: [2, 2] } }",
                  "y",
                  {2, 2, 2, 3}});
  checkGradients({"MaxPoolOverlapSame",
                  {{"x", {1, 5, 5, 2}}},
                  {},
                  "node { name: \"y\" op: \"MaxPool\" input: \"x\" attr { "
                  "name: \"ksize\" ints: [3, 3] } attr { name: \"strides\" "
                  "ints: [2, 2] } attr { name: \"padding\" s: \"SAME\" } }",
                  "y",
                  {1, 3, 3, 2}});
}

TEST(GradientCheck, BatchNormAndDropout) {
  checkGradients({"BatchNorm",
                  {{"x", {6, 3}}, {"beta", {3}}},
                  {},
                  "node { name: \"y\" op: \"BatchNorm\" input: \"x\" input: "
                  "\"beta\" }",
                  "y",
                  {6, 3}});
  checkGradients(
      {"BatchNormScale4D",
       {{"x", {2, 3, 3, 2}}, {"beta", {2}}, {"gamma", {2}, 0.5, 1.5}},
       {},
       "node { name: \"y\" op: \"BatchNorm\" input: \"x\" input: "
       "\"beta\" input: \"gamma\" attr { name: \"scale\" b: true } }",
       "y",
       {2, 3, 3, 2}});
  checkGradients({"Dropout",
                  {{"x", {4, 5}}},
                  {},
                  "node { name: \"y\" op: \"Dropout\" input: \"x\" attr { "
                  "name: \"rate\" f: 0.3 } }",
                  "y",
                  {4, 5}});
}

TEST(GradientCheck, ResidualBlock) {
  // examples/fashion_resnet.mdg's downsampling block: x feeds a 3x3
  // stride-2 convolution and a 1x1 stride-2 projection (its gradient is the
  // sum of both paths), batch norms with scale, ReLU, the residual Add and
  // the global average pooling (Mean over axes 1 and 2).
  auto ConvBN = [](const std::string &Name, const std::string &In, int Stride) {
    std::string S = std::to_string(Stride);
    return "node { name: \"" + Name + "/conv\" op: \"Conv2D\" input: \"" + In +
           "\" input: \"" + Name +
           "/f\" attr { name: \"padding\" s: \"SAME\" } attr { name: "
           "\"strides\" ints: [" +
           S + ", " + S + "] } }\nnode { name: \"" + Name +
           "/bn\" op: \"BatchNorm\" input: \"" + Name + "/conv\" input: \"" +
           Name + "/beta\" input: \"" + Name +
           "/gamma\" attr { name: \"scale\" b: true } }\n";
  };
  std::vector<VarSpec> Vars = {{"x", {2, 6, 6, 2}}};
  for (auto [Name, Shape] :
       {std::pair<std::string, std::vector<int64_t>>{"c1", {3, 3, 2, 3}},
        {"c2", {3, 3, 3, 3}},
        {"sc", {1, 1, 2, 3}}}) {
    Vars.push_back({Name + "/f", Shape});
    Vars.push_back({Name + "/beta", {3}});
    Vars.push_back({Name + "/gamma", {3}, 0.5, 1.5});
  }
  std::string Nodes =
      ConvBN("c1", "x", 2) +
      "node { name: \"c1/relu\" op: \"Relu\" input: \"c1/bn\" }\n" +
      ConvBN("c2", "c1/relu", 1) + ConvBN("sc", "x", 2) +
      "node { name: \"add\" op: \"Add\" input: \"c2/bn\" input: "
      "\"sc/bn\" }\n"
      "node { name: \"relu\" op: \"Relu\" input: \"add\" }\n"
      "node { name: \"pool\" op: \"Mean\" input: \"relu\" attr { name: "
      "\"axes\" ints: [1, 2] } }";
  checkGradients({"ResidualBlock", Vars, {}, Nodes, "pool", {2, 3}});
}

} // namespace

namespace {

TEST(ReadOutputs, HistogramsOnlyWhenAsked) {
  // A step reads its histogram outputs (with summarize_gradients, whole
  // gradients) only when it reports them: without, they are listed with
  // no values, and every other output is read as before.
  const char *Text = R"(
name: "H"
training { batch_size: 2 optimizer { kind: SGD learning_rate: 0.1 } }
node { name: "x" op: "Input" data { feature: "x" shape: [3] } }
node { name: "w" op: "Variable" variable { shape: [3, 4] } }
node { name: "m" op: "MatMul" input: "x" input: "w" }
node { name: "l" op: "Mean" input: "m" }
loss: "l"
)";
  DeploymentConfig Config;
  Config.CloneOnCPU = true;
  Config.SummarizeGradients = true;
  std::unique_ptr<mdrt::Executor> Loaded;
  loadPlan(Text, "h", Config, Loaded);
  if (!Loaded)
    return;
  mdrt::Executor &E = *Loaded;
  int Train = E.programIndex("train");
  ASSERT_TRUE(E.run(Train, 0).isOk());
  std::vector<mdrt::OutputValue> All, Some;
  ASSERT_TRUE(E.readOutputs(Train, All).isOk());
  ASSERT_TRUE(E.readOutputs(Train, Some, /*Histograms=*/false).isOk());
  ASSERT_EQ(All.size(), Some.size());
  int Histograms = 0;
  for (size_t I = 0; I < All.size(); ++I) {
    SCOPED_TRACE(All[I].Name);
    EXPECT_EQ(All[I].Name, Some[I].Name);
    EXPECT_EQ(All[I].Kind, Some[I].Kind);
    if (All[I].Kind == mdrt::fb::OutputKind::Histogram) {
      ++Histograms;
      EXPECT_EQ(All[I].Values.size(), All[I].Name == "w:gradient" ? 12u : 1u);
      EXPECT_TRUE(Some[I].Values.empty());
    } else {
      EXPECT_EQ(All[I].Values, Some[I].Values);
    }
  }
  EXPECT_EQ(Histograms, 2); // w:gradient, w:gradient_norm
}

} // namespace
