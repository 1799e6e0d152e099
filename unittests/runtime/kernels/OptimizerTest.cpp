//===- OptimizerTest.cpp - State updates over two steps -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Hand-computed values: each test runs the update twice (the second time
// with the next step number and, where it matters, another gradient) and
// checks the variable and slots written in place.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

TT step(int64_t S) { return TT(DType::Int64, {}, {double(S)}); }

double tol(DType T) { return T == DType::Float32 ? 1e-6 : 1e-14; }

void expectValues(const std::vector<double> &Got,
                  const std::vector<double> &Want, DType T,
                  const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size());
  for (size_t K = 0; K < Got.size(); ++K)
    EXPECT_NEAR(Got[K], Want[K], tol(T) * std::max(1.0, std::fabs(Want[K])))
        << What << " element " << K << " " << dtypeName(T);
}

TEST(CpuKernels, AssignMovingAverage) {
  for (DType T : FloatTypes) {
    OpRunner R("AssignMovingAverage");
    R.attr("decay", 0.9)
        .input(TT(T, {2}, {2, 4}))
        .input(TT(T, {2}, {1, 0}))
        .run();
    expectValues(R.in(0), {1.9, 3.6}, T, "step 1");
    R.run();
    expectValues(R.in(0), {1.81, 3.24}, T, "step 2");
    expectValues(R.in(1), {1, 0}, T, "value untouched");
  }
}

TEST(CpuKernels, AssignAddOnIntsAndFloats) {
  for (DType T : {DType::Int32, DType::Int64}) {
    OpRunner R("AssignAdd");
    R.attr("amount", int64_t(3)).input(TT(T, {}, {5})).run();
    expectEqual(R.in(0), {8});
    R.run();
    expectEqual(R.in(0), {11});
  }
  for (DType T : FloatTypes) {
    OpRunner R("AssignAdd"); // amount defaults to 1.
    R.input(TT(T, {}, {0.5})).run().run();
    expectEqual(R.in(0), {2.5});
  }
}

TEST(CpuKernels, ApplyGradientDescentWithDecay) {
  for (DType T : FloatTypes) {
    // lr_t = 0.1 * 0.5^floor(step / 2).
    OpRunner R("ApplyGradientDescent");
    R.attr("learning_rate", 0.1)
        .attr("decay_steps", int64_t(2))
        .attr("decay_rate", 0.5)
        .input(TT(T, {2}, {1, -2}))
        .input(TT(T, {2}, {0.5, 0.25}))
        .input(step(1));
    R.run();
    expectValues(R.in(0), {0.95, -2.025}, T, "step 1 (lr 0.1)");
    R.setInput(2, step(2));
    R.setInput(1, TT(T, {2}, {-1, 2}));
    R.run();
    expectValues(R.in(0), {1.0, -2.125}, T, "step 2 (lr 0.05)");
  }
  // Without decay_steps the rate is constant.
  OpRunner C("ApplyGradientDescent");
  C.attr("learning_rate", 0.5)
      .attr("decay_rate", 0.1)
      .input(TT(DType::Float64, {1}, {1}))
      .input(TT(DType::Float64, {1}, {1}))
      .input(step(1000));
  C.run();
  expectValues(C.in(0), {0.5}, DType::Float64, "no decay");
}

/// One gradient descent step from var 1 with gradient 1 at \p Step: the
/// learning rate itself, in float64.
double rateAt(OpRunner &R, int64_t Step) {
  R.setInput(0, TT(DType::Float64, {1}, {1}));
  R.setInput(2, step(Step));
  R.run();
  return 1 - R.in(0)[0];
}

TEST(CpuKernels, ApplyGradientDescentPolynomialDecay) {
  // tf.train.polynomial_decay: (0.1 - 0.01) (1 - min(step, 4) / 4)^p + 0.01.
  for (double Power : {1.0, 2.0, 0.5}) {
    OpRunner R("ApplyGradientDescent");
    R.attr("learning_rate", 0.1)
        .attr("decay_steps", int64_t(4))
        .attr("decay_type", std::string("polynomial"))
        .attr("end_learning_rate", 0.01)
        .attr("power", Power)
        .input(TT(DType::Float64, {1}, {1}))
        .input(TT(DType::Float64, {1}, {1}))
        .input(step(0));
    for (int64_t Step : {0, 1, 3, 4, 9}) {
      double Left = 1 - double(std::min<int64_t>(Step, 4)) / 4;
      EXPECT_NEAR(rateAt(R, Step), 0.09 * std::pow(Left, Power) + 0.01, 1e-15)
          << "power " << Power << " step " << Step;
    }
  }
}

TEST(CpuKernels, ApplyGradientDescentSmoothExponentialDecay) {
  // staircase false: 0.1 * 0.5^(step / 4), every step; true (the
  // default): whole periods.
  for (bool Staircase : {false, true}) {
    OpRunner R("ApplyGradientDescent");
    R.attr("learning_rate", 0.1)
        .attr("decay_steps", int64_t(4))
        .attr("decay_rate", 0.5)
        .attr("staircase", Staircase)
        .input(TT(DType::Float64, {1}, {1}))
        .input(TT(DType::Float64, {1}, {1}))
        .input(step(0));
    for (int64_t Step : {0, 1, 4, 6}) {
      double Periods = Staircase ? double(Step / 4) : double(Step) / 4;
      EXPECT_NEAR(rateAt(R, Step), 0.1 * std::pow(0.5, Periods), 1e-15)
          << "staircase " << Staircase << " step " << Step;
    }
  }
}

TEST(CpuKernels, ApplyRejectsAnUnknownDecayType) {
  OpRunner R("ApplyGradientDescent");
  R.attr("learning_rate", 0.1)
      .attr("decay_type", std::string("cosine"))
      .input(TT(DType::Float32, {1}, {1}))
      .input(TT(DType::Float32, {1}, {1}))
      .input(step(0));
  EXPECT_EQ(R.create(),
            "node 'test/ApplyGradientDescent' (ApplyGradientDescent): unknown "
            "decay_type 'cosine' (use exponential or polynomial)");
}

TEST(CpuKernels, ApplyMomentum) {
  for (DType T : FloatTypes)
    for (bool Nesterov : {false, true}) {
      OpRunner R("ApplyMomentum");
      R.attr("learning_rate", 0.1)
          .attr("momentum", 0.9)
          .attr("nesterov", Nesterov)
          .input(TT(T, {2}, {1, 2}))
          .input(TT(T, {2}, {0, 1}))
          .input(TT(T, {2}, {0.5, -1}))
          .input(step(0));
      R.run();
      // a = 0.9 a + g.
      expectValues(R.in(1), {0.5, -0.1}, T, "accumulator 1");
      if (Nesterov) // var -= 0.1 (g + 0.9 a).
        expectValues(R.in(0), {0.905, 2.109}, T, "var 1 nesterov");
      else // var -= 0.1 a.
        expectValues(R.in(0), {0.95, 2.01}, T, "var 1");
      R.setInput(3, step(1));
      R.run();
      expectValues(R.in(1), {0.95, -1.09}, T, "accumulator 2");
      if (Nesterov)
        expectValues(R.in(0), {0.7695, 2.30710}, T, "var 2 nesterov");
      else
        expectValues(R.in(0), {0.855, 2.119}, T, "var 2");
    }
}

TEST(CpuKernels, ApplyAdam) {
  for (DType T : FloatTypes) {
    OpRunner R("ApplyAdam");
    R.attr("learning_rate", 0.01)
        .attr("beta1", 0.9)
        .attr("beta2", 0.999)
        .attr("epsilon", 1e-8)
        .input(TT(T, {2}, {1, -1}))
        .input(TT(T, {2}, {0, 0}))
        .input(TT(T, {2}, {0, 0}))
        .input(TT(T, {2}, {0.1, -0.5}))
        .input(step(0));
    R.run();
    // t = 1: m = 0.1 g, v = 0.001 g^2,
    // var -= 0.01 sqrt(0.001) / 0.1 * m / (sqrt(v) + 1e-8).
    expectValues(R.in(1), {0.01, -0.05}, T, "m 1");
    expectValues(R.in(2), {1e-5, 2.5e-4}, T, "v 1");
    double A1 = 0.01 * std::sqrt(0.001) / 0.1;
    double V0 = 1 - A1 * 0.01 / (std::sqrt(1e-5) + 1e-8);
    double V1 = -1 + A1 * 0.05 / (std::sqrt(2.5e-4) + 1e-8);
    expectValues(R.in(0), {V0, V1}, T, "var 1");
    // Nearly lr * sign(g) on the first step.
    EXPECT_NEAR(R.in(0)[0], 0.99, 1e-6);
    EXPECT_NEAR(R.in(0)[1], -0.99, 1e-6);

    R.setInput(3, TT(T, {2}, {-0.2, 0.3}));
    R.setInput(4, step(1));
    R.run();
    // t = 2: m = 0.9 m + 0.1 g; v = 0.999 v + 0.001 g^2;
    // var -= 0.01 sqrt(1 - 0.999^2) / (1 - 0.9^2) m / (sqrt(v) + 1e-8).
    double M0 = 0.009 - 0.02, M1 = -0.045 + 0.03;
    double S0 = 0.999e-5 + 0.001 * 0.04, S1 = 0.999 * 2.5e-4 + 0.001 * 0.09;
    expectValues(R.in(1), {M0, M1}, T, "m 2");
    expectValues(R.in(2), {S0, S1}, T, "v 2");
    double A2 = 0.01 * std::sqrt(1 - 0.998001) / (1 - 0.81);
    expectValues(R.in(0),
                 {V0 - A2 * M0 / (std::sqrt(S0) + 1e-8),
                  V1 - A2 * M1 / (std::sqrt(S1) + 1e-8)},
                 T, "var 2");
  }
}

/// TF's ApplyRMSProp in double, one step: ms += (g^2 - ms) (1 - rho);
/// mom = momentum mom + lr g / sqrt(ms + eps); var -= mom.
void rmspropReference(std::vector<double> &Var, std::vector<double> &Ms,
                      std::vector<double> &Mom, const std::vector<double> &G,
                      double Lr, double Rho, double Momentum, double Eps) {
  for (size_t K = 0; K < Var.size(); ++K) {
    Ms[K] += (G[K] * G[K] - Ms[K]) * (1 - Rho);
    Mom[K] = Momentum * Mom[K] + Lr * G[K] / std::sqrt(Ms[K] + Eps);
    Var[K] -= Mom[K];
  }
}

TEST(CpuKernels, ApplyRMSPropWithDecayAndMomentum) {
  const std::vector<std::vector<double>> Grads = {
      {0.5, -0.25, 2, 0}, {-1, 0.75, 1.5, 0.125}, {0.25, 0.5, -3, -0.5}};
  for (DType T : FloatTypes) {
    // lr_t = 0.01 * 0.5^floor(step / 2): 0.01, then 0.005 at steps 2 and 3.
    std::vector<double> Var = {1, -2, 0.5, 3}, Ms = {0.25, 0, 1, 0.5},
                        Mom = {0.1, -0.2, 0, 0.05};
    OpRunner R("ApplyRMSProp");
    R.attr("learning_rate", 0.01)
        .attr("decay_steps", int64_t(2))
        .attr("decay_rate", 0.5)
        .attr("rho", 0.8)
        .attr("momentum", 0.5)
        .attr("epsilon", 1e-6)
        .input(TT(T, {4}, Var))
        .input(TT(T, {4}, Ms))
        .input(TT(T, {4}, Mom))
        .input(TT(T, {4}, Grads[0]))
        .input(step(1));
    for (int64_t S = 1; S <= 3; ++S) {
      R.setInput(3, TT(T, {4}, Grads[S - 1]));
      R.setInput(4, step(S));
      R.run();
      rmspropReference(Var, Ms, Mom, Grads[S - 1], S < 2 ? 0.01 : 0.005, 0.8,
                       0.5, 1e-6);
      const std::string At = " step " + std::to_string(S);
      expectValues(R.in(0), Var, T, "var" + At);
      expectValues(R.in(1), Ms, T, "ms" + At);
      expectValues(R.in(2), Mom, T, "mom" + At);
    }
    expectValues(R.in(3), Grads[2], T, "gradient untouched");
  }
}

TEST(CpuKernels, ApplyRMSPropDefaults) {
  // rho 0.9, momentum 0 (the old mom is dropped), epsilon 1e-10 (which
  // matters beside g^2 = 1e-10), no decay.
  const std::vector<std::vector<double>> Grads = {{1e-5, -0.5, 0, 2},
                                                  {-2e-5, 0.25, 1, 2}};
  for (DType T : FloatTypes) {
    std::vector<double> Var = {1, 2, -1, 0}, Ms = {0, 0, 0, 0},
                        Mom = {0.5, -0.5, 1, 0};
    OpRunner R("ApplyRMSProp");
    R.attr("learning_rate", 0.1)
        .input(TT(T, {4}, Var))
        .input(TT(T, {4}, Ms))
        .input(TT(T, {4}, Mom))
        .input(TT(T, {4}, Grads[0]))
        .input(step(0));
    for (int64_t S = 0; S < 2; ++S) {
      R.setInput(3, TT(T, {4}, Grads[S]));
      R.setInput(4, step(S));
      R.run();
      rmspropReference(Var, Ms, Mom, Grads[S], 0.1, 0.9, 0.0, 1e-10);
      const std::string At = " step " + std::to_string(S);
      expectValues(R.in(0), Var, T, "var" + At);
      expectValues(R.in(1), Ms, T, "ms" + At);
      expectValues(R.in(2), Mom, T, "mom" + At);
      if (S == 0) {
        // By hand: ms = 0.1 g^2 = 1e-11; mom = 0.1 g / sqrt(1e-11 + 1e-10)
        // (0.0095 with epsilon 1e-8); a zero gradient leaves mom 0.
        EXPECT_NEAR(R.in(1)[0], 1e-11, 1e-17) << dtypeName(T);
        EXPECT_NEAR(R.in(2)[0], 1e-6 / std::sqrt(1.1e-10), 1e-7)
            << dtypeName(T);
        EXPECT_EQ(R.in(2)[2], 0.0) << dtypeName(T);
      }
    }
  }
}

TEST(CpuKernels, ApplyRMSPropOnLargeTensorsUsesThreads) {
  Rng G;
  // Above the size where updates split across threads: each thread's
  // range of the variable, both slots and the gradient.
  const Shape S = {2200, 1000};
  TT Var = G.tensor(DType::Float64, S), Ms = G.tensor(DType::Float64, S, 0, 1),
     Mom = G.tensor(DType::Float64, S), Grad = G.tensor(DType::Float64, S);
  OpRunner R("ApplyRMSProp");
  R.attr("learning_rate", 0.001)
      .attr("momentum", 0.9)
      .input(Var)
      .input(Ms)
      .input(Mom)
      .input(Grad)
      .input(step(0))
      .threads(2)
      .run();
  std::vector<double> GotVar = R.in(0), GotMs = R.in(1), GotMom = R.in(2);
  for (size_t K = 0; K < GotVar.size(); K += 997) {
    std::vector<double> V = {Var.V[K]}, M = {Ms.V[K]}, O = {Mom.V[K]};
    rmspropReference(V, M, O, {Grad.V[K]}, 0.001, 0.9, 0.9, 1e-10);
    EXPECT_NEAR(GotVar[K], V[0], 1e-12) << K;
    EXPECT_NEAR(GotMs[K], M[0], 1e-12) << K;
    EXPECT_NEAR(GotMom[K], O[0], 1e-12) << K;
  }
}

TEST(CpuKernels, ApplyRMSPropRejectsBadInputs) {
  auto Make = [](DType Var, DType Ms, DType Mom, DType Grad, int64_t MomSize,
                 bool WithStep) {
    OpRunner R("ApplyRMSProp");
    R.attr("learning_rate", 0.1)
        .input(TT(Var, {2}, {1, 2}))
        .input(TT(Ms, {2}, {0, 0}))
        .input(TT(Mom, {MomSize}, std::vector<double>(MomSize, 0.0)))
        .input(TT(Grad, {2}, {1, 2}));
    if (WithStep)
      R.input(step(0));
    return R.create();
  };
  const DType F32 = DType::Float32, F64 = DType::Float64;
  EXPECT_EQ(Make(F32, F32, F32, F32, 2, true), "");
  EXPECT_EQ(Make(F32, F32, F32, F32, 2, false),
            "node 'test/ApplyRMSProp' (ApplyRMSProp): "
            "ApplyRMSProp takes 5 inputs, got 4");
  EXPECT_EQ(Make(F32, F32, F64, F32, 2, true),
            "node 'test/ApplyRMSProp' (ApplyRMSProp): "
            "input 2 is float64[2], expected element type float32");
  EXPECT_EQ(Make(F64, F64, F64, F32, 2, true),
            "node 'test/ApplyRMSProp' (ApplyRMSProp): "
            "input 3 is float32[2], expected element type float64");
  EXPECT_EQ(Make(F32, F32, F32, F32, 3, true),
            "node 'test/ApplyRMSProp' (ApplyRMSProp): "
            "input float32[3] should have 2 elements");
  EXPECT_EQ(
      Make(DType::Int32, DType::Int32, DType::Int32, DType::Int32, 2, true),
      "node 'test/ApplyRMSProp' (ApplyRMSProp): "
      "no CPU kernel for ApplyRMSProp on element type int32");

  OpRunner B("ApplyRMSProp");
  B.attr("learning_rate", 0.1);
  for (int K = 0; K < 4; ++K)
    B.input(TT(DType::Float32, {2}, {1, 2}));
  B.input(TT(DType::Int64, {2}, {0, 1}));
  EXPECT_EQ(B.create(), "node 'test/ApplyRMSProp' (ApplyRMSProp): "
                        "the step input must be an int64 scalar, got int64[2]");
}

/// TF's ApplyCenteredRMSProp in double, one step: ms += (g^2 - ms) (1 -
/// rho); mg += (g - mg) (1 - rho); mom = momentum mom + lr g / sqrt((ms -
/// mg^2) + eps); var -= mom.
void centeredRmspropReference(std::vector<double> &Var, std::vector<double> &Ms,
                              std::vector<double> &Mg, std::vector<double> &Mom,
                              const std::vector<double> &G, double Lr,
                              double Rho, double Momentum, double Eps) {
  for (size_t K = 0; K < Var.size(); ++K) {
    Ms[K] += (G[K] * G[K] - Ms[K]) * (1 - Rho);
    Mg[K] += (G[K] - Mg[K]) * (1 - Rho);
    Mom[K] = Momentum * Mom[K] +
             Lr * G[K] / std::sqrt((Ms[K] - Mg[K] * Mg[K]) + Eps);
    Var[K] -= Mom[K];
  }
}

TEST(CpuKernels, ApplyCenteredRMSPropWithDecayAndMomentum) {
  const std::vector<std::vector<double>> Grads = {
      {0.5, -0.25, 2, 0}, {-1, 0.75, 1.5, 0.125}, {0.25, 0.5, -3, -0.5}};
  for (DType T : FloatTypes) {
    // lr_t = 0.01 * 0.5^floor(step / 2): 0.01, then 0.005 at steps 2 and 3.
    // The mean squares start above the mean gradients' squares (and, as
    // convex combinations, stay there), so ms - mg^2 does not cancel.
    std::vector<double> Var = {1, -2, 0.5, 3}, Ms = {0.25, 1, 1, 0.5},
                        Mg = {0.1, -0.2, 0, 0.3}, Mom = {0.1, -0.2, 0, 0.05};
    OpRunner R("ApplyCenteredRMSProp");
    R.attr("learning_rate", 0.01)
        .attr("decay_steps", int64_t(2))
        .attr("decay_rate", 0.5)
        .attr("rho", 0.8)
        .attr("momentum", 0.5)
        .attr("epsilon", 1e-6)
        .input(TT(T, {4}, Var))
        .input(TT(T, {4}, Ms))
        .input(TT(T, {4}, Mg))
        .input(TT(T, {4}, Mom))
        .input(TT(T, {4}, Grads[0]))
        .input(step(1));
    for (int64_t S = 1; S <= 3; ++S) {
      R.setInput(4, TT(T, {4}, Grads[S - 1]));
      R.setInput(5, step(S));
      R.run();
      centeredRmspropReference(Var, Ms, Mg, Mom, Grads[S - 1],
                               S < 2 ? 0.01 : 0.005, 0.8, 0.5, 1e-6);
      const std::string At = " step " + std::to_string(S);
      expectValues(R.in(0), Var, T, "var" + At);
      expectValues(R.in(1), Ms, T, "ms" + At);
      expectValues(R.in(2), Mg, T, "mg" + At);
      expectValues(R.in(3), Mom, T, "mom" + At);
      if (S == 1) {
        // By hand, element 2: ms = 1 + (4 - 1) 0.2 = 1.6; mg = 2 * 0.2 =
        // 0.4; mom = 0.01 * 2 / sqrt(1.6 - 0.16 + 1e-6) (not centered:
        // sqrt(1.6 + 1e-6)); var = 0.5 - mom.
        const double Mom2 = 0.02 / std::sqrt(1.44 + 1e-6);
        EXPECT_NEAR(R.in(1)[2], 1.6, 1e-6) << dtypeName(T);
        EXPECT_NEAR(R.in(2)[2], 0.4, 1e-7) << dtypeName(T);
        EXPECT_NEAR(R.in(3)[2], Mom2, 1e-8) << dtypeName(T);
        EXPECT_NEAR(R.in(0)[2], 0.5 - Mom2, 1e-7) << dtypeName(T);
      }
    }
    expectValues(R.in(4), Grads[2], T, "gradient untouched");
  }
}

TEST(CpuKernels, ApplyCenteredRMSPropDefaults) {
  // rho 0.9, momentum 0 (the old mom is dropped), epsilon 1e-10 (which
  // matters beside ms - mg^2 = 9e-12), no decay.
  const std::vector<std::vector<double>> Grads = {{1e-5, -0.5, 0, 2},
                                                  {-2e-5, 0.25, 1, 2}};
  for (DType T : FloatTypes) {
    std::vector<double> Var = {1, 2, -1, 0}, Ms = {0, 0, 0, 0},
                        Mg = {0, 0, 0, 0}, Mom = {0.5, -0.5, 1, 0};
    OpRunner R("ApplyCenteredRMSProp");
    R.attr("learning_rate", 0.1)
        .input(TT(T, {4}, Var))
        .input(TT(T, {4}, Ms))
        .input(TT(T, {4}, Mg))
        .input(TT(T, {4}, Mom))
        .input(TT(T, {4}, Grads[0]))
        .input(step(0));
    for (int64_t S = 0; S < 2; ++S) {
      R.setInput(4, TT(T, {4}, Grads[S]));
      R.setInput(5, step(S));
      R.run();
      centeredRmspropReference(Var, Ms, Mg, Mom, Grads[S], 0.1, 0.9, 0.0,
                               1e-10);
      const std::string At = " step " + std::to_string(S);
      expectValues(R.in(0), Var, T, "var" + At);
      expectValues(R.in(1), Ms, T, "ms" + At);
      expectValues(R.in(2), Mg, T, "mg" + At);
      expectValues(R.in(3), Mom, T, "mom" + At);
      if (S == 0) {
        // By hand: ms = 0.1 g^2 = 1e-11, mg = 0.1 g = 1e-6; mom = 0.1 g /
        // sqrt(1e-11 - 1e-12 + 1e-10); g = 2: ms 0.4, mg 0.2, mom = 0.2 /
        // sqrt(0.36) = 1/3; a zero gradient leaves mom 0.
        EXPECT_NEAR(R.in(1)[0], 1e-11, 1e-17) << dtypeName(T);
        EXPECT_NEAR(R.in(2)[0], 1e-6, 1e-12) << dtypeName(T);
        EXPECT_NEAR(R.in(3)[0], 1e-6 / std::sqrt(1.09e-10), 1e-7)
            << dtypeName(T);
        EXPECT_NEAR(R.in(3)[3], 1.0 / 3, 1e-7) << dtypeName(T);
        EXPECT_EQ(R.in(3)[2], 0.0) << dtypeName(T);
      }
    }
  }
}

TEST(CpuKernels, ApplyCenteredRMSPropNegativeVarianceGivesNaN) {
  // Nothing keeps ms - mg^2 + eps positive (TF checks nothing either): ms
  // 0.1 and mg 1 give NaN in mom and var; the slots are still written.
  for (DType T : FloatTypes) {
    OpRunner R("ApplyCenteredRMSProp");
    R.attr("learning_rate", 0.5)
        .input(TT(T, {2}, {1, 1}))
        .input(TT(T, {2}, {0, 1}))
        .input(TT(T, {2}, {1, 0}))
        .input(TT(T, {2}, {0, 0}))
        .input(TT(T, {2}, {1, 1}))
        .input(step(0))
        .run();
    EXPECT_TRUE(std::isnan(R.in(0)[0])) << dtypeName(T);
    EXPECT_TRUE(std::isnan(R.in(3)[0])) << dtypeName(T);
    EXPECT_NEAR(R.in(1)[0], 0.1, 1e-7) << dtypeName(T);
    EXPECT_EQ(R.in(2)[0], 1.0) << dtypeName(T);
    // ms 1, mg 0.1: mom = 0.5 / sqrt(1 - 0.01 + 1e-10).
    EXPECT_NEAR(R.in(3)[1], 0.5 / std::sqrt(0.99 + 1e-10), 1e-7)
        << dtypeName(T);
  }
}

TEST(CpuKernels, ApplyCenteredRMSPropOnLargeTensorsUsesThreads) {
  Rng G;
  // Above the size where updates split across threads: each thread's
  // range of the variable, the three slots and the gradient. ms >= 0.25 >=
  // mg^2.
  const Shape S = {2200, 1000};
  TT Var = G.tensor(DType::Float64, S),
     Ms = G.tensor(DType::Float64, S, 0.25, 1),
     Mg = G.tensor(DType::Float64, S, -0.5, 0.5),
     Mom = G.tensor(DType::Float64, S), Grad = G.tensor(DType::Float64, S);
  OpRunner R("ApplyCenteredRMSProp");
  R.attr("learning_rate", 0.001)
      .attr("momentum", 0.9)
      .input(Var)
      .input(Ms)
      .input(Mg)
      .input(Mom)
      .input(Grad)
      .input(step(0))
      .threads(2)
      .run();
  std::vector<double> GotVar = R.in(0), GotMs = R.in(1), GotMg = R.in(2),
                      GotMom = R.in(3);
  for (size_t K = 0; K < GotVar.size(); K += 997) {
    std::vector<double> V = {Var.V[K]}, M = {Ms.V[K]}, A = {Mg.V[K]},
                        O = {Mom.V[K]};
    centeredRmspropReference(V, M, A, O, {Grad.V[K]}, 0.001, 0.9, 0.9, 1e-10);
    EXPECT_NEAR(GotVar[K], V[0], 1e-12) << K;
    EXPECT_NEAR(GotMs[K], M[0], 1e-12) << K;
    EXPECT_NEAR(GotMg[K], A[0], 1e-12) << K;
    EXPECT_NEAR(GotMom[K], O[0], 1e-12) << K;
  }
}

TEST(CpuKernels, ApplyCenteredRMSPropRejectsBadInputs) {
  auto Make = [](DType Var, DType Ms, DType Mg, DType Mom, DType Grad,
                 int64_t MgSize, bool WithStep) {
    OpRunner R("ApplyCenteredRMSProp");
    R.attr("learning_rate", 0.1)
        .input(TT(Var, {2}, {1, 2}))
        .input(TT(Ms, {2}, {1, 1}))
        .input(TT(Mg, {MgSize}, std::vector<double>(MgSize, 0.0)))
        .input(TT(Mom, {2}, {0, 0}))
        .input(TT(Grad, {2}, {1, 2}));
    if (WithStep)
      R.input(step(0));
    return R.create();
  };
  const DType F32 = DType::Float32, F64 = DType::Float64, I32 = DType::Int32;
  EXPECT_EQ(Make(F32, F32, F32, F32, F32, 2, true), "");
  EXPECT_EQ(Make(F32, F32, F32, F32, F32, 2, false),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "ApplyCenteredRMSProp takes 6 inputs, got 5");
  EXPECT_EQ(Make(F32, F32, F64, F32, F32, 2, true),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "input 2 is float64[2], expected element type float32");
  EXPECT_EQ(Make(F32, F32, F32, F64, F32, 2, true),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "input 3 is float64[2], expected element type float32");
  EXPECT_EQ(Make(F64, F64, F64, F64, F32, 2, true),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "input 4 is float32[2], expected element type float64");
  EXPECT_EQ(Make(F32, F32, F32, F32, F32, 3, true),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "input float32[3] should have 2 elements");
  EXPECT_EQ(Make(I32, I32, I32, I32, I32, 2, true),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "no CPU kernel for ApplyCenteredRMSProp on element type int32");

  OpRunner B("ApplyCenteredRMSProp");
  B.attr("learning_rate", 0.1);
  for (int K = 0; K < 5; ++K)
    B.input(TT(DType::Float32, {2}, {1, 2}));
  B.input(TT(DType::Int64, {2}, {0, 1}));
  EXPECT_EQ(B.create(),
            "node 'test/ApplyCenteredRMSProp' (ApplyCenteredRMSProp): "
            "the step input must be an int64 scalar, got int64[2]");
}

/// TF's ApplyAdagrad in double, one step: acc += g^2; var -= lr g /
/// sqrt(acc).
void adagradReference(std::vector<double> &Var, std::vector<double> &Acc,
                      const std::vector<double> &G, double Lr) {
  for (size_t K = 0; K < Var.size(); ++K) {
    Acc[K] += G[K] * G[K];
    Var[K] -= Lr * G[K] / std::sqrt(Acc[K]);
  }
}

TEST(CpuKernels, ApplyAdagradWithDecay) {
  const std::vector<std::vector<double>> Grads = {
      {0.5, -0.25, 2, 0}, {-1, 0.75, 1.5, 0.125}, {0.25, 0.5, -3, -0.5}};
  for (DType T : FloatTypes) {
    // lr_t = 0.1 * 0.5^floor(step / 2): 0.1, then 0.05 at steps 2 and 3.
    std::vector<double> Var = {1, -2, 0.5, 3}, Acc = {0.1, 0.1, 0.5, 2};
    OpRunner R("ApplyAdagrad");
    R.attr("learning_rate", 0.1)
        .attr("decay_steps", int64_t(2))
        .attr("decay_rate", 0.5)
        .input(TT(T, {4}, Var))
        .input(TT(T, {4}, Acc))
        .input(TT(T, {4}, Grads[0]))
        .input(step(1));
    for (int64_t S = 1; S <= 3; ++S) {
      R.setInput(2, TT(T, {4}, Grads[S - 1]));
      R.setInput(3, step(S));
      R.run();
      adagradReference(Var, Acc, Grads[S - 1], S < 2 ? 0.1 : 0.05);
      const std::string At = " step " + std::to_string(S);
      expectValues(R.in(0), Var, T, "var" + At);
      expectValues(R.in(1), Acc, T, "accumulator" + At);
      if (S == 1) {
        // By hand: acc = 0.1 + 0.25; var = 1 - 0.1 * 0.5 / sqrt(0.35); a
        // zero gradient leaves both as they were.
        EXPECT_NEAR(R.in(1)[0], 0.35, 1e-7) << dtypeName(T);
        EXPECT_NEAR(R.in(0)[0], 1 - 0.05 / std::sqrt(0.35), 1e-6)
            << dtypeName(T);
        EXPECT_EQ(R.in(0)[3], 3.0) << dtypeName(T);
        EXPECT_EQ(R.in(1)[3], 2.0) << dtypeName(T);
      }
    }
    expectValues(R.in(2), Grads[2], T, "gradient untouched");
  }
}

TEST(CpuKernels, ApplyAdagradZeroAccumulatorAndGradientGiveNaN) {
  // No epsilon, as TF's: 0 / sqrt(0) is NaN. A zero accumulator with a
  // gradient moves the variable by lr sign(g).
  for (DType T : FloatTypes) {
    OpRunner R("ApplyAdagrad");
    R.attr("learning_rate", 0.5)
        .input(TT(T, {2}, {1, 1}))
        .input(TT(T, {2}, {0, 0}))
        .input(TT(T, {2}, {0, -4}))
        .input(step(0))
        .run();
    EXPECT_TRUE(std::isnan(R.in(0)[0])) << dtypeName(T);
    EXPECT_EQ(R.in(1)[0], 0.0) << dtypeName(T);
    EXPECT_EQ(R.in(0)[1], 1.5) << dtypeName(T);
    EXPECT_EQ(R.in(1)[1], 16.0) << dtypeName(T);
  }
}

TEST(CpuKernels, ApplyAdagradOnLargeTensorsUsesThreads) {
  Rng G;
  // Above the size where updates split across threads: each thread's
  // range of the variable, the accumulator and the gradient.
  const Shape S = {2200, 1000};
  TT Var = G.tensor(DType::Float64, S),
     Acc = G.tensor(DType::Float64, S, 0.1, 1),
     Grad = G.tensor(DType::Float64, S);
  OpRunner R("ApplyAdagrad");
  R.attr("learning_rate", 0.001)
      .input(Var)
      .input(Acc)
      .input(Grad)
      .input(step(0))
      .threads(2)
      .run();
  std::vector<double> GotVar = R.in(0), GotAcc = R.in(1);
  for (size_t K = 0; K < GotVar.size(); K += 997) {
    std::vector<double> V = {Var.V[K]}, A = {Acc.V[K]};
    adagradReference(V, A, {Grad.V[K]}, 0.001);
    EXPECT_NEAR(GotVar[K], V[0], 1e-12) << K;
    EXPECT_NEAR(GotAcc[K], A[0], 1e-12) << K;
  }
}

TEST(CpuKernels, ApplyAdagradRejectsBadInputs) {
  auto Make = [](DType Var, DType Acc, DType Grad, int64_t GradSize,
                 bool WithStep) {
    OpRunner R("ApplyAdagrad");
    R.attr("learning_rate", 0.1)
        .input(TT(Var, {2}, {1, 2}))
        .input(TT(Acc, {2}, {0.1, 0.1}))
        .input(TT(Grad, {GradSize}, std::vector<double>(GradSize, 1.0)));
    if (WithStep)
      R.input(step(0));
    return R.create();
  };
  const DType F32 = DType::Float32, F64 = DType::Float64;
  EXPECT_EQ(Make(F32, F32, F32, 2, true), "");
  EXPECT_EQ(Make(F32, F32, F32, 2, false),
            "node 'test/ApplyAdagrad' (ApplyAdagrad): "
            "ApplyAdagrad takes 4 inputs, got 3");
  EXPECT_EQ(Make(F32, F64, F32, 2, true),
            "node 'test/ApplyAdagrad' (ApplyAdagrad): "
            "input 1 is float64[2], expected element type float32");
  EXPECT_EQ(Make(F64, F64, F32, 2, true),
            "node 'test/ApplyAdagrad' (ApplyAdagrad): "
            "input 2 is float32[2], expected element type float64");
  EXPECT_EQ(Make(F32, F32, F32, 3, true),
            "node 'test/ApplyAdagrad' (ApplyAdagrad): "
            "input float32[3] should have 2 elements");
  EXPECT_EQ(Make(DType::Int32, DType::Int32, DType::Int32, 2, true),
            "node 'test/ApplyAdagrad' (ApplyAdagrad): "
            "no CPU kernel for ApplyAdagrad on element type int32");

  OpRunner B("ApplyAdagrad");
  B.attr("learning_rate", 0.1);
  for (int K = 0; K < 3; ++K)
    B.input(TT(DType::Float32, {2}, {1, 2}));
  B.input(TT(DType::Int64, {2}, {0, 1}));
  EXPECT_EQ(B.create(), "node 'test/ApplyAdagrad' (ApplyAdagrad): "
                        "the step input must be an int64 scalar, got int64[2]");
}

TEST(CpuKernels, ApplyOnLargeTensorsUsesThreads) {
  Rng G;
  // Above the size where updates split across threads.
  const Shape S = {2200, 1000};
  TT Var = G.tensor(DType::Float32, S), Grad = G.tensor(DType::Float32, S);
  const std::vector<double> Zeros(2200000, 0.0);
  OpRunner R("ApplyAdam");
  R.attr("learning_rate", 0.001)
      .input(Var)
      .input(TT(DType::Float32, S, Zeros))
      .input(TT(DType::Float32, S, Zeros))
      .input(Grad)
      .input(step(0))
      .threads(2)
      .run();
  std::vector<double> Got = R.in(0);
  double A = 0.001 * std::sqrt(1 - 0.999) / (1 - 0.9);
  for (size_t K = 0; K < Got.size(); K += 997) {
    double M = 0.1 * Grad.V[K], V = 0.001 * Grad.V[K] * Grad.V[K];
    double Want = Var.V[K] - A * M / (std::sqrt(V) + 1e-8);
    EXPECT_NEAR(Got[K], Want, 1e-6) << K;
  }
}

TEST(CpuKernels, ApplyRejectsABadStep) {
  OpRunner R("ApplyGradientDescent");
  R.attr("learning_rate", 0.1)
      .input(TT(DType::Float32, {2}, {1, 2}))
      .input(TT(DType::Float32, {2}, {1, 2}))
      .input(TT(DType::Int32, {}, {0}));
  EXPECT_EQ(R.create(),
            "node 'test/ApplyGradientDescent' (ApplyGradientDescent): "
            "the step input must be an int64 scalar, got int32[]");
}

} // namespace
