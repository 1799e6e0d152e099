//===- ReferenceMathTest.cpp - The GPU's reference kernels against the CPU ===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/ReferenceMath.h is host code as well as device code:
// these tests compute every element of matrix products, convolutions and
// their gradients, reductions, batch normalization and its gradient, and
// softmax rows with the functions the GPU's
// reference kernels (MDRT_CUDA_KERNELS=reference) call, from the geometry
// and reduction steps the GPU kernels take from lib/cpu, and require the
// bits of the CPU's reference loops, over shapes, transposes, strides,
// padding (TensorFlow's asymmetric SAME too) and thread counts. The
// reductions and batch normalization also give the same bits on 1, 2 and 3
// threads.
//
//===----------------------------------------------------------------------===//

#include "cuda/ReferenceMath.h"
#include "cuda/BatchNormMath.h"

#include "KernelTestUtil.h"

#include <cstring>
#include <limits>

using namespace mdrt;
using namespace mdrt::test;
using mdrt::cuda::Geometry;

namespace {

/// Element-wise bit equality of \p Got (in T) with the kernel's values.
template <typename T>
void expectSameBits(const std::vector<T> &Got, const std::vector<double> &Want,
                    const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  int Bad = 0;
  for (size_t K = 0; K < Got.size(); ++K) {
    T W = T(Want[K]);
    if (std::memcmp(&Got[K], &W, sizeof(T)) && ++Bad <= 5)
      ADD_FAILURE() << What << " element " << K << ": gpu math "
                    << double(Got[K]) << ", cpu " << Want[K];
  }
}

template <typename T> std::vector<T> asT(const std::vector<double> &V) {
  return std::vector<T>(V.begin(), V.end());
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

template <typename T>
void checkMatMul(Rng &G, DType Ty, int64_t M, int64_t N, int64_t K, bool TA,
                 bool TB) {
  TT A = G.tensor(Ty, TA ? Shape{K, M} : Shape{M, K});
  TT B = G.tensor(Ty, TB ? Shape{N, K} : Shape{K, N});
  OpRunner R("MatMul");
  R.attr("transpose_a", TA).attr("transpose_b", TB).input(A).input(B);
  R.output(Ty, {M, N}).threads(2).run();
  cpu::MatMulDims D;
  ASSERT_TRUE(cpu::matMulDims(R.Info, D).isOk());
  const std::vector<T> AT = asT<T>(A.V), BT = asT<T>(B.V);
  std::vector<T> Y(size_t(M * N));
  for (int64_t I = 0; I < M * N; ++I)
    Y[size_t(I)] =
        cuda::refMatMulAt(AT.data(), BT.data(), D.M, D.N, D.K, D.TA, D.TB, I);
  expectSameBits(Y, R.out(0),
                 std::string("MatMul ") + dtypeName(Ty) + " " +
                     std::to_string(M) + "x" + std::to_string(N) + "x" +
                     std::to_string(K) + (TA ? " ta" : "") + (TB ? " tb" : ""));
}

TEST(CudaReferenceMath, MatMulMatchesTheCpuReferenceLoops) {
  BackendScope Scope("reference");
  Rng G(5);
  const int64_t Shapes[][3] = {{1, 1, 1},   {3, 5, 7},    {16, 10, 300},
                               {7, 129, 1}, {33, 2, 257}, {100, 10, 1024}};
  for (const auto &S : Shapes)
    for (int Tr = 0; Tr < 4; ++Tr) {
      checkMatMul<float>(G, DType::Float32, S[0], S[1], S[2], Tr & 1, Tr & 2);
      checkMatMul<double>(G, DType::Float64, S[0], S[1], S[2], Tr & 1, Tr & 2);
    }
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

struct ConvCase {
  int64_t N, H, W, Ci, KH, KW, Co, SH, SW;
  bool Same;
};

const ConvCase ConvCases[] = {{2, 5, 5, 3, 3, 3, 2, 1, 1, true},
                              {2, 7, 6, 3, 3, 3, 4, 2, 2, true},
                              {2, 7, 6, 3, 3, 3, 4, 2, 2, false},
                              {1, 6, 9, 1, 2, 3, 2, 2, 1, true},
                              {1, 6, 9, 2, 2, 3, 2, 1, 2, false},
                              {2, 8, 8, 4, 1, 1, 3, 2, 2, true},
                              {3, 9, 7, 2, 5, 5, 3, 1, 1, true},
                              {2, 4, 4, 3, 5, 5, 2, 2, 2, true},
                              {1, 3, 3, 2, 5, 5, 2, 1, 1, false},
                              {2, 28, 28, 1, 5, 5, 32, 1, 1, true},
                              {2, 14, 14, 32, 5, 5, 64, 1, 1, true},
                              {2, 11, 13, 16, 3, 3, 16, 2, 2, true},
                              {1, 10, 10, 3, 4, 4, 2, 3, 3, true}};

/// The geometry the GPU's kernel takes from \p R's KernelInfo.
Geometry geometryOf(const OpRunner &R, cpu::ConvMode Mode) {
  cpu::ConvGeometry CG;
  Status S = cpu::convGeometry(R.Info, Mode, CG);
  EXPECT_TRUE(S.isOk()) << S.message();
  Geometry G;
  cuda::fromWindow(CG.Win, G);
  G.Co = CG.Co;
  return G;
}

template <typename T>
void checkConv(const ConvCase &C, DType Ty, Rng &Gen, bool Relu) {
  Shape XS = {C.N, C.H, C.W, C.Ci}, FS = {C.KH, C.KW, C.Ci, C.Co};
  int64_t OH = C.Same ? (C.H + C.SH - 1) / C.SH
                      : (C.H < C.KH ? 0 : (C.H - C.KH) / C.SH + 1);
  int64_t OW = C.Same ? (C.W + C.SW - 1) / C.SW
                      : (C.W < C.KW ? 0 : (C.W - C.KW) / C.SW + 1);
  Shape YS = {C.N, OH, OW, C.Co};
  TT X = Gen.tensor(Ty, XS), F = Gen.tensor(Ty, FS), Dy = Gen.tensor(Ty, YS);
  if (Relu) // Many zeros (and signed zeros' sums), as after ReLU.
    for (double &V : X.V)
      V = V < 0 ? 0 : V;
  std::vector<int64_t> Strides = {C.SH, C.SW};
  std::string Pad = C.Same ? "SAME" : "VALID";
  std::string What = std::string(dtypeName(Ty)) + " " + std::to_string(C.H) +
                     "x" + std::to_string(C.W) + "x" + std::to_string(C.Ci) +
                     " k" + std::to_string(C.KH) + "x" + std::to_string(C.KW) +
                     "x" + std::to_string(C.Co) + " s" + std::to_string(C.SH) +
                     "," + std::to_string(C.SW) + " " + Pad;
  const std::vector<T> XT = asT<T>(X.V), FT = asT<T>(F.V), DyT = asT<T>(Dy.V);

  OpRunner Fwd("Conv2D");
  Fwd.attr("strides", Strides).attr("padding", Pad).input(X).input(F);
  Fwd.output(Ty, YS).threads(2).run();
  Geometry G = geometryOf(Fwd, cpu::ConvMode::Forward);
  std::vector<T> Y(size_t(numElements(YS)));
  for (size_t I = 0; I < Y.size(); ++I)
    Y[I] = cuda::refConvForwardAt(G, XT.data(), FT.data(), int64_t(I));
  expectSameBits(Y, Fwd.out(0), "Conv2D " + What);

  OpRunner BI("Conv2DBackpropInput"); // Inputs filter, dy.
  BI.attr("input_shape", XS).attr("strides", Strides).attr("padding", Pad);
  BI.input(F).input(Dy).output(Ty, XS).threads(2).run();
  G = geometryOf(BI, cpu::ConvMode::BackwardData);
  std::vector<T> DX(X.V.size());
  for (size_t I = 0; I < DX.size(); ++I)
    DX[I] = cuda::refConvBackwardDataAt(G, FT.data(), DyT.data(), int64_t(I));
  expectSameBits(DX, BI.out(0), "Conv2DBackpropInput " + What);

  OpRunner BF("Conv2DBackpropFilter"); // Inputs input, dy.
  BF.attr("filter_shape", FS).attr("strides", Strides).attr("padding", Pad);
  BF.input(X).input(Dy).output(Ty, FS).threads(2).run();
  G = geometryOf(BF, cpu::ConvMode::BackwardFilter);
  std::vector<T> DF(F.V.size());
  for (size_t I = 0; I < DF.size(); ++I)
    DF[I] = cuda::refConvBackwardFilterAt(G, XT.data(), DyT.data(), int64_t(I));
  expectSameBits(DF, BF.out(0), "Conv2DBackpropFilter " + What);
}

TEST(CudaReferenceMath, ConvolutionsMatchTheCpuReferenceLoops) {
  BackendScope Scope("reference");
  Rng G(9);
  for (const ConvCase &C : ConvCases)
    for (bool Relu : {false, true}) {
      checkConv<float>(C, DType::Float32, G, Relu);
      checkConv<double>(C, DType::Float64, G, Relu);
    }
}

TEST(CudaReferenceMath, WindowsCoveringAPosition) {
  // Every output position whose window of 3 at stride 2 covers padded
  // position p, for outputs [0, 4): windows start at 2o.
  for (int64_t P = 0; P < 12; ++P) {
    int64_t First, End;
    cuda::refWindowsCovering(P, 3, 2, 4, First, End);
    std::vector<int64_t> Got, Want;
    for (int64_t O = First; O < End; ++O)
      Got.push_back(O);
    for (int64_t O = 0; O < 4; ++O)
      if (2 * O <= P && P < 2 * O + 3)
        Want.push_back(O);
    EXPECT_EQ(Got, Want) << "position " << P;
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// What the GPU's reference reduction computes, on the host: each step's
/// (pieces') sums, the pieces added, the result finished.
template <typename T>
std::vector<T> refReduce(const std::vector<T> &X, const Shape &S,
                         const std::vector<bool> &Reduced, bool Mean) {
  std::vector<cpu::ReduceStep> Steps = cpu::planReduction(S, Reduced);
  int64_t Out = 1, Count = 1;
  for (size_t K = 0; K < S.size(); ++K)
    (Reduced[K] ? Count : Out) *= S[K];
  std::vector<double> Prev, Sums;
  for (size_t I = 0; I < Steps.size(); ++I) {
    const cpu::ReduceStep &St = Steps[I];
    std::vector<double> Part(size_t(St.Pieces * St.A * St.K));
    for (int64_t E = 0; E < int64_t(Part.size()); ++E) {
      const int64_t Kk = E % St.K, It = E / St.K;
      int64_t R0, R1;
      cuda::refPieceRows(St, It / St.A, R0, R1);
      Part[size_t(E)] =
          I == 0
              ? cuda::refRowSum<double>(St, X.data(), It % St.A, R0, R1, Kk)
              : cuda::refRowSum<double>(St, Prev.data(), It % St.A, R0, R1, Kk);
    }
    Sums.assign(size_t(St.A * St.K), 0.0);
    for (int64_t J = 0; J < St.A * St.K; ++J)
      Sums[size_t(J)] = cuda::refAddPieces(St, Part.data(), J);
    Prev = Sums;
  }
  EXPECT_FALSE(Steps.empty());
  std::vector<T> Y(static_cast<size_t>(Out));
  for (int64_t J = 0; J < Out; ++J)
    Y[size_t(J)] =
        cuda::refFinishSum<T>(Prev[size_t(J)], 1.0, Mean ? Count : 0);
  return Y;
}

struct ReduceCase {
  Shape S;
  std::vector<int64_t> Axes;
};

const ReduceCase ReduceCases[] = {
    {{100, 28, 28, 32}, {0, 1, 2}}, // conv1's BiasAddGrad
    {{100, 1024}, {0}},             // dense's
    {{100}, {}},                    // the loss's mean
    {{300000}, {}},                 // pieces of one lane sum
    {{3, 70000}, {1}},              // pieces of several lane sums
    {{40, 5000, 3}, {1}},           // pieces of column sums
    {{6, 7, 8, 9}, {0, 2}},         // two steps
    {{64, 1, 33, 2000}, {0, 3}},    // two steps with pieces
    {{2000, 600}, {1}},             // many outputs: no pieces
    {{5, 1, 1}, {1, 2}},            // only size-1 dimensions reduced
};

template <typename T> void checkReduce(Rng &G, DType Ty) {
  for (const ReduceCase &C : ReduceCases)
    for (bool Mean : {false, true}) {
      std::vector<bool> Reduced;
      ASSERT_TRUE(cpu::reductionAxes(C.Axes, C.S.size(), Reduced).isOk());
      Shape OutS;
      for (size_t K = 0; K < C.S.size(); ++K)
        if (!Reduced[K])
          OutS.push_back(C.S[K]);
      TT X = G.tensor(Ty, C.S);
      std::string What = std::string(Mean ? "Mean " : "Sum ") + dtypeName(Ty) +
                         " " + cpu::shapeStr(C.S) + " axes " +
                         cpu::shapeStr(C.Axes);
      std::vector<double> First;
      for (int Threads : {1, 2, 3}) {
        OpRunner R(Mean ? "Mean" : "Sum");
        R.attr("axes", C.Axes).input(X).output(Ty, OutS).threads(Threads);
        R.run();
        if (Threads == 1)
          First = R.out(0);
        else // The same bits whatever the thread count.
          expectEqual(R.out(0), First,
                      What + " threads " + std::to_string(Threads));
      }
      if (cpu::planReduction(C.S, Reduced).empty())
        continue; // A copy: the GPU's default kernels run it.
      expectSameBits(refReduce(asT<T>(X.V), C.S, Reduced, Mean), First, What);
    }
}

TEST(CudaReferenceMath, ReductionsMatchTheCpuOnAnyThreadCount) {
  Rng G(13);
  checkReduce<float>(G, DType::Float32);
  checkReduce<double>(G, DType::Float64);
}

TEST(CudaReferenceMath, BiasAddGradMatchesTheCpu) {
  Rng G(17);
  Shape S = {50, 14, 14, 64};
  TT X = G.tensor(DType::Float32, S);
  OpRunner R("BiasAddGrad");
  R.input(X).output(DType::Float32, {64}).threads(2).run();
  std::vector<bool> Reduced = {true, true, true, false};
  expectSameBits(refReduce(asT<float>(X.V), S, Reduced, false), R.out(0),
                 "BiasAddGrad");
}

TEST(CudaReferenceMath, PiecesDependOnTheShapeOnly) {
  // Few outputs of many rows: pieces of about 2^15 elements, at most 64.
  auto Steps = cpu::planReduction({100, 784, 32}, {true, true, false});
  ASSERT_EQ(Steps.size(), 1u);
  EXPECT_EQ(Steps[0].A, 1);
  EXPECT_EQ(Steps[0].R, 78400);
  EXPECT_EQ(Steps[0].K, 32);
  EXPECT_EQ(Steps[0].Pieces, 64);
  Steps = cpu::planReduction({4, 1000}, {false, true});
  ASSERT_EQ(Steps.size(), 1u);
  EXPECT_EQ(Steps[0].Pieces, 1); // 4000 elements: one piece.
  Steps = cpu::planReduction({2000, 600}, {false, true});
  ASSERT_EQ(Steps.size(), 1u);
  EXPECT_EQ(Steps[0].Pieces, 1); // 2000 outputs: parallel over them.
  EXPECT_TRUE(cpu::planReduction({3, 0, 2}, {true, true, true}).empty());
  EXPECT_TRUE(cpu::planReduction({3, 1}, {false, true}).empty());
}

TEST(CudaReferenceMath, L2LossMatchesTheCpuOnAnyThreadCount) {
  Rng G(19);
  for (int64_t N : {int64_t(0), int64_t(13), int64_t(700000)}) {
    TT X = G.tensor(DType::Float32, {N});
    std::vector<double> First;
    for (int Threads : {1, 2, 3}) {
      OpRunner R("L2Loss");
      R.input(X).output(DType::Float32, {}).threads(Threads).run();
      if (Threads == 1)
        First = R.out(0);
      else
        expectEqual(R.out(0), First, "threads " + std::to_string(Threads));
    }
    // The GPU's reference L2Loss: the pieces' sums of squares, in order.
    const std::vector<float> XT = asT<float>(X.V);
    const int64_t Pieces = N ? cpu::reductionPieces(N, N) : 1;
    double Sum = 0;
    for (int64_t P = 0; P < Pieces; ++P) {
      double Part =
          cuda::refSumSquares(XT.data(), N * P / Pieces, N * (P + 1) / Pieces);
      Sum = P ? Sum + Part : Part;
    }
    expectSameBits(std::vector<float>{float(Sum / 2)}, First,
                   "L2Loss of " + std::to_string(N));
  }
}

TEST(CudaReferenceMath, IntegerPowerIsProductsOfSquares) {
  EXPECT_EQ(integerPower(0.5, 0), 1.0);
  EXPECT_EQ(integerPower(0.5, 10), 1.0 / 1024);
  EXPECT_EQ(integerPower(-2.0, 3), -8.0);
  // b^5 = b * (b^2)^2, rounded after each product.
  const double B = 0.999, B2 = B * B, B4 = B2 * B2;
  EXPECT_EQ(integerPower(B, 5), 1.0 * B * B4);
}

//===----------------------------------------------------------------------===//
// Softmax rows
//===----------------------------------------------------------------------===//

template <typename T> void checkRows(Rng &G, DType Ty, int64_t N, int64_t C) {
  TT X = G.tensor(Ty, {N, C}, -20, 20);
  TT Lab(DType::Int32, {N}, {});
  for (int64_t I = 0; I < N; ++I)
    Lab.V.push_back(double(G.integer(0, C - 1)));
  const std::vector<T> XT = asT<T>(X.V);
  std::string What = std::string(dtypeName(Ty)) + " " + std::to_string(N) +
                     "x" + std::to_string(C);

  OpRunner Sm("Softmax");
  Sm.input(X).output(Ty, {N, C}).run();
  std::vector<T> Y(XT.size());
  for (int64_t R = 0; R < N; ++R)
    cuda::refSoftmaxRow(XT.data() + R * C, Y.data() + R * C, C);
  expectSameBits(Y, Sm.out(0), "Softmax " + What);

  OpRunner L("SparseSoftmaxCrossEntropy");
  L.input(X).input(Lab).output(Ty, {N}).output(Ty, {N, C}).run();
  std::vector<T> Loss(static_cast<size_t>(N)), Back(XT.size());
  for (int64_t R = 0; R < N; ++R)
    Loss[size_t(R)] = cuda::refSsceRow(XT.data() + R * C, int64_t(Lab.V[R]),
                                       Back.data() + R * C, C);
  expectSameBits(Loss, L.out(0), "SparseSoftmaxCrossEntropy loss " + What);
  expectSameBits(Back, L.out(1), "SparseSoftmaxCrossEntropy backprop " + What);

  // Dense labels: rows of a distribution.
  TT Dist = G.tensor(Ty, {N, C}, 0, 1);
  const std::vector<T> DistT = asT<T>(Dist.V);
  OpRunner D("SoftmaxCrossEntropy");
  D.input(X).input(Dist).output(Ty, {N}).output(Ty, {N, C}).run();
  for (int64_t R = 0; R < N; ++R)
    Loss[size_t(R)] = cuda::refSceRow(XT.data() + R * C, DistT.data() + R * C,
                                      Back.data() + R * C, C);
  expectSameBits(Loss, D.out(0), "SoftmaxCrossEntropy loss " + What);
  expectSameBits(Back, D.out(1), "SoftmaxCrossEntropy backprop " + What);

  TT Dy = G.tensor(Ty, {N, C});
  const std::vector<T> DyT = asT<T>(Dy.V);
  OpRunner Sg("SoftmaxGrad"); // y, dy.
  Sg.input(TT(Ty, {N, C}, Sm.out(0))).input(Dy).output(Ty, {N, C}).run();
  std::vector<T> DX(XT.size());
  for (int64_t R = 0; R < N; ++R)
    cuda::refSoftmaxGradRow(Y.data() + R * C, DyT.data() + R * C,
                            DX.data() + R * C, C);
  expectSameBits(DX, Sg.out(0), "SoftmaxGrad " + What);
}

TEST(CudaReferenceMath, SoftmaxRowsMatchTheCpu) {
  Rng G(23);
  for (auto NC : {std::pair<int64_t, int64_t>{100, 10}, {7, 1}, {3, 1000}}) {
    checkRows<float>(G, DType::Float32, NC.first, NC.second);
    checkRows<double>(G, DType::Float64, NC.first, NC.second);
  }
}

//===----------------------------------------------------------------------===//
// Batch normalization
//===----------------------------------------------------------------------===//

/// The GPU's reference column sums on the host: each piece's sums
/// (refColumnPiece), then each column's from its pieces' (refColumnAddPieces).
template <int K, typename LoadFn, typename DoneFn>
void refColumnSums(int64_t Rows, int64_t Cols, int64_t Pieces, LoadFn Load,
                   DoneFn Done) {
  std::vector<double> Partial(size_t(Pieces * K * Cols));
  for (int64_t P = 0; P < Pieces; ++P)
    for (int64_t C = 0; C < Cols; ++C) {
      double S[K];
      cuda::refColumnPiece<K>(Load, Rows, Pieces, P, C, S);
      for (int J = 0; J < K; ++J)
        Partial[size_t((P * K + J) * Cols + C)] = S[J];
    }
  for (int64_t C = 0; C < Cols; ++C) {
    double S[K];
    cuda::refColumnAddPieces<K>(Partial.data(), Pieces, Cols, C, S);
    Done(C, S);
  }
}

/// BatchNorm and BatchNormGrad on 1, 2 and 3 threads: the same bits each
/// time, and those of the GPU's reference kernels' arithmetic.
template <typename T>
void checkBatchNorm(Rng &G, DType Ty, const Shape &S, bool Scale) {
  const int64_t C = S.back(), M = numElements(S) / C;
  const int64_t Pieces = cpu::reductionPieces(M * C, M);
  const double Eps = 0.001;
  TT X = G.tensor(Ty, S, -2, 3), Beta = G.tensor(Ty, {C}),
     Gamma = G.tensor(Ty, {C}, 0.5, 2), Dy = G.tensor(Ty, S);
  std::string What = std::string(dtypeName(Ty)) + (Scale ? " scale " : " ") +
                     cpu::shapeStr(S) + " in " + std::to_string(Pieces) +
                     " pieces";
  std::vector<std::vector<double>> Fwd, Bwd;
  for (int Threads : {1, 2, 3}) {
    OpRunner F("BatchNorm");
    F.attr("epsilon", Eps).attr("scale", Scale).input(X).input(Beta);
    if (Scale)
      F.input(Gamma);
    F.output(Ty, S).output(Ty, {C}).output(Ty, {C}).threads(Threads).run();
    OpRunner B("BatchNormGrad"); // dy, x, mean, variance, gamma.
    B.attr("epsilon", Eps).attr("scale", Scale).input(Dy).input(X);
    B.input(TT(Ty, {C}, F.out(1))).input(TT(Ty, {C}, F.out(2)));
    if (Scale)
      B.input(Gamma);
    B.output(Ty, S).output(Ty, {C}).output(Ty, {C}).threads(Threads).run();
    std::string On = What + " threads " + std::to_string(Threads);
    for (unsigned K = 0; K < 3; ++K) {
      if (Threads == 1) {
        Fwd.push_back(F.out(K));
        Bwd.push_back(B.out(K));
        continue;
      }
      expectEqual(F.out(K), Fwd[K],
                  "BatchNorm output " + std::to_string(K) + " " + On);
      expectEqual(B.out(K), Bwd[K],
                  "BatchNormGrad output " + std::to_string(K) + " " + On);
    }
  }

  // The GPU's reference BatchNorm: the statistics' two passes, then y.
  const std::vector<T> XT = asT<T>(X.V), BT = asT<T>(Beta.V),
                       GT = asT<T>(Gamma.V), DyT = asT<T>(Dy.V);
  const T *Gm = Scale ? GT.data() : nullptr;
  const size_t CS = size_t(C);
  std::vector<double> MeanD(CS);
  std::vector<T> Mean(CS), Var(CS), Factor(CS), MeanT(CS), Y(XT.size());
  refColumnSums<1>(M, C, Pieces, cuda::LoadElement<T>{XT.data(), C},
                   cuda::StoreMean{MeanD.data(), M});
  refColumnSums<1>(
      M, C, Pieces, cuda::LoadSquaredDeviation<T>{XT.data(), MeanD.data(), C},
      cuda::StoreBatchStats<T>{MeanD.data(), Gm, Mean.data(), Var.data(),
                               Factor.data(), MeanT.data(), M, Eps});
  for (int64_t I = 0; I < M * C; ++I)
    Y[size_t(I)] =
        cuda::bnNormalizeAt<T>(XT.data(), MeanT.data(), Factor.data(),
                               BT.data(), nullptr, nullptr, Eps, I, I % C);
  expectSameBits(Y, Fwd[0], "BatchNorm y " + What);
  expectSameBits(Mean, Fwd[1], "BatchNorm mean " + What);
  expectSameBits(Var, Fwd[2], "BatchNorm variance " + What);

  // And its gradient, from the statistics the CPU gave.
  const std::vector<T> MT = asT<T>(Fwd[1]), VT = asT<T>(Fwd[2]);
  std::vector<double> Inv(CS);
  for (size_t J = 0; J < CS; ++J)
    Inv[J] = cuda::bnInvStd(VT[J], Eps);
  std::vector<T> DBeta(CS), DGamma(CS), FA(CS), FB(CS), FC(CS), DX(XT.size());
  refColumnSums<2>(
      M, C, Pieces,
      cuda::LoadBatchGrad<T>{DyT.data(), XT.data(), MT.data(), Inv.data(), C},
      cuda::StoreBatchGrad<T>{Inv.data(), Gm, DBeta.data(), DGamma.data(),
                              FA.data(), FB.data(), FC.data(), M});
  for (int64_t I = 0; I < M * C; ++I)
    DX[size_t(I)] =
        cuda::bnGradAt<T>(DyT.data(), XT.data(), MT.data(), FA.data(),
                          FB.data(), FC.data(), I, I % C);
  expectSameBits(DX, Bwd[0], "BatchNormGrad dx " + What);
  expectSameBits(DBeta, Bwd[1], "BatchNormGrad dbeta " + What);
  expectSameBits(DGamma, Bwd[2], "BatchNormGrad dgamma " + What);
}

TEST(CudaReferenceMath, BatchNormMatchesTheCpuOnAnyThreadCount) {
  Rng G(29);
  // One piece; 3 pieces; 12 and 24 pieces (the CPU splits them over its
  // threads); 4 pieces of wide rows.
  for (Shape S :
       {Shape{2, 3, 4, 5}, Shape{8, 28, 28, 16}, Shape{64, 14, 14, 32},
        Shape{128, 28, 28, 8}, Shape{64, 2048}})
    for (bool Scale : {false, true}) {
      checkBatchNorm<float>(G, DType::Float32, S, Scale);
      checkBatchNorm<double>(G, DType::Float64, S, Scale);
    }
  EXPECT_EQ(cpu::reductionPieces(64 * 14 * 14 * 32, 64 * 14 * 14), 12);
}

} // namespace
