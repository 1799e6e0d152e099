//===- ConvLoweringTest.cpp - The GPU's im2col index arithmetic -----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/Lowering.h is host code as well as device code: these
// tests build the column matrices of every convolution mode on the CPU with
// the functions the GPU's im2col kernel calls (lowerRow, lowerColumn,
// turnedFilterSource), multiply them, and compare with float64 loops
// written from the definition of a convolution, over strides, kernel sizes
// and explicit, asymmetric (TensorFlow's SAME) and oversized paddings. They
// run everywhere, GPU or not.
//
//===----------------------------------------------------------------------===//

#include "cuda/Lowering.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace mdrt;
using namespace mdrt::cuda;

namespace {

using Vec = std::vector<double>;

Geometry geometry(int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH,
                  int64_t KW, int64_t Co, int64_t SH, int64_t SW, int64_t PT,
                  int64_t PB, int64_t PL, int64_t PR) {
  Geometry G;
  G.N = N, G.H = H, G.W = W, G.C = C, G.KH = KH, G.KW = KW, G.Co = Co;
  G.SH = SH, G.SW = SW, G.PT = PT, G.PB = PB, G.PL = PL, G.PR = PR;
  G.OH = (H + PT + PB - KH) / SH + 1;
  G.OW = (W + PL + PR - KW) / SW + 1;
  return G;
}

std::string str(const Geometry &G) {
  auto S = [](int64_t V) { return std::to_string(V); };
  return S(G.N) + "x" + S(G.H) + "x" + S(G.W) + "x" + S(G.C) + " k" + S(G.KH) +
         "x" + S(G.KW) + "x" + S(G.Co) + " s" + S(G.SH) + "," + S(G.SW) +
         " pad " + S(G.PT) + "," + S(G.PB) + "," + S(G.PL) + "," + S(G.PR);
}

/// y, dx and df from the definition: y[n,oh,ow,co] = sum over kh, kw, ci of
/// x[n, oh*SH - PT + kh, ow*SW - PL + kw, ci] f[kh,kw,ci,co] (0 outside x).
struct Reference {
  Vec Y, DX, DF;
  Reference(const Geometry &G, const Vec &X, const Vec &F, const Vec &DY)
      : Y(size_t(G.N * G.OH * G.OW * G.Co)), DX(X.size()), DF(F.size()) {
    for (int64_t N = 0; N < G.N; ++N)
      for (int64_t Oh = 0; Oh < G.OH; ++Oh)
        for (int64_t Ow = 0; Ow < G.OW; ++Ow)
          for (int64_t Kh = 0; Kh < G.KH; ++Kh)
            for (int64_t Kw = 0; Kw < G.KW; ++Kw) {
              int64_t Ih = Oh * G.SH - G.PT + Kh, Iw = Ow * G.SW - G.PL + Kw;
              if (Ih < 0 || Ih >= G.H || Iw < 0 || Iw >= G.W)
                continue;
              for (int64_t Ci = 0; Ci < G.C; ++Ci)
                for (int64_t Co = 0; Co < G.Co; ++Co) {
                  size_t XI = size_t(((N * G.H + Ih) * G.W + Iw) * G.C + Ci);
                  size_t FI = size_t(((Kh * G.KW + Kw) * G.C + Ci) * G.Co + Co);
                  size_t YI = size_t(((N * G.OH + Oh) * G.OW + Ow) * G.Co + Co);
                  Y[YI] += X[XI] * F[FI];
                  DX[XI] += DY[YI] * F[FI];
                  DF[FI] += DY[YI] * X[XI];
                }
            }
  }
};

/// The column matrix of \p Mode, made as the GPU's im2col kernel makes it.
Vec columns(const Geometry &G, cpu::ConvMode Mode, const Vec &Src) {
  const Lowering L = lowerConvolution(G, Mode);
  const int64_t Kc = L.columns();
  Vec Col(size_t(L.rows() * Kc));
  for (int64_t P = 0; P < L.rows(); ++P) {
    const LoweredRow Row = lowerRow(L, P);
    for (int Kh = 0; Kh < L.KH; ++Kh)
      for (int Kw = 0; Kw < L.KW; ++Kw)
        for (int C = 0; C < L.SrcC; ++C) {
          int64_t Off = L.dilated() ? lowerColumn<true>(L, Row, Kh, Kw, C)
                                    : lowerColumn<false>(L, Row, Kh, Kw, C);
          int64_t K = (Kh * L.KW + Kw) * L.SrcC + C;
          Col[size_t(P * Kc + K)] =
              Off < 0 ? 0.0 : Src[size_t(Row.Image + Off)];
        }
  }
  return Col;
}

/// Row-major [M,K] x [K,N] (A transposed: [K,M]).
Vec product(const Vec &A, const Vec &B, int64_t M, int64_t N, int64_t K,
            bool TransA = false) {
  Vec Y(size_t(M * N));
  for (int64_t I = 0; I < M; ++I)
    for (int64_t J = 0; J < N; ++J) {
      double S = 0;
      for (int64_t P = 0; P < K; ++P)
        S += (TransA ? A[size_t(P * M + I)] : A[size_t(I * K + P)]) *
             B[size_t(P * N + J)];
      Y[size_t(I * N + J)] = S;
    }
  return Y;
}

void expectNear(const Vec &Got, const Vec &Want, const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  for (size_t I = 0; I < Got.size(); ++I)
    ASSERT_NEAR(Got[I], Want[I], 1e-9 * (1 + std::fabs(Want[I])))
        << What << " element " << I;
}

void checkLowering(const Geometry &G, std::mt19937_64 &Rng) {
  ASSERT_GT(G.OH, 0);
  ASSERT_GT(G.OW, 0);
  std::uniform_real_distribution<double> U(-1, 1);
  auto Fill = [&](int64_t N) {
    Vec V(static_cast<size_t>(N));
    for (double &E : V)
      E = U(Rng);
    return V;
  };
  Vec X = Fill(G.N * G.H * G.W * G.C), F = Fill(G.KH * G.KW * G.C * G.Co),
      DY = Fill(G.N * G.OH * G.OW * G.Co);
  Reference Ref(G, X, F, DY);
  const int64_t Kc = G.KH * G.KW * G.C;

  Vec ColX = columns(G, cpu::ConvMode::Forward, X);
  expectNear(product(ColX, F, G.N * G.OH * G.OW, G.Co, Kc), Ref.Y,
             "forward " + str(G));
  expectNear(product(ColX, DY, Kc, G.Co, G.N * G.OH * G.OW, true), Ref.DF,
             "filter gradient " + str(G));

  Vec Turned(F.size());
  for (int64_t I = 0; I < int64_t(F.size()); ++I)
    Turned[size_t(I)] = F[size_t(turnedFilterSource(I, G.KH, G.KW, G.C, G.Co))];
  Vec ColDY = columns(G, cpu::ConvMode::BackwardData, DY);
  expectNear(product(ColDY, Turned, G.N * G.H * G.W, G.C, G.KH * G.KW * G.Co),
             Ref.DX, "input gradient " + str(G));
}

TEST(CudaLowering, TheCnnAndResNetConvolutions) {
  std::mt19937_64 Rng(7);
  // The CNN's two 5x5 SAME convolutions; the ResNet's 3x3 stride-1 SAME,
  // stride-2 SAME (TensorFlow pads 0 before and 1 after on even sizes) and
  // 1x1 stride-2 shortcut.
  checkLowering(geometry(2, 28, 28, 1, 5, 5, 4, 1, 1, 2, 2, 2, 2), Rng);
  checkLowering(geometry(2, 14, 14, 3, 5, 5, 4, 1, 1, 2, 2, 2, 2), Rng);
  checkLowering(geometry(2, 8, 8, 3, 3, 3, 4, 1, 1, 1, 1, 1, 1), Rng);
  checkLowering(geometry(2, 8, 8, 3, 3, 3, 4, 2, 2, 0, 1, 0, 1), Rng);
  checkLowering(geometry(2, 8, 8, 3, 1, 1, 4, 2, 2, 0, 0, 0, 0), Rng);
}

TEST(CudaLowering, RandomGeometries) {
  std::mt19937_64 Rng(11);
  auto Int = [&](int64_t Lo, int64_t Hi) {
    return std::uniform_int_distribution<int64_t>(Lo, Hi)(Rng);
  };
  int Checked = 0;
  while (Checked < 200) {
    int64_t KH = Int(1, 4), KW = Int(1, 4);
    // Paddings up to K + 1: larger than the window too (the input
    // gradient's offset K - 1 - padding is then positive).
    Geometry G = geometry(Int(1, 2), Int(1, 7), Int(1, 7), Int(1, 3), KH, KW,
                          Int(1, 3), Int(1, 3), Int(1, 3), Int(0, KH + 1),
                          Int(0, KH + 1), Int(0, KW + 1), Int(0, KW + 1));
    if (G.H + G.PT + G.PB < G.KH || G.W + G.PL + G.PR < G.KW)
      continue;
    checkLowering(G, Rng);
    if (HasFatalFailure())
      return;
    ++Checked;
  }
}

TEST(CudaLowering, DilationOnlyForStridedInputGradients) {
  Geometry G = geometry(1, 8, 8, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1);
  EXPECT_FALSE(lowerConvolution(G, cpu::ConvMode::Forward).dilated());
  EXPECT_FALSE(lowerConvolution(G, cpu::ConvMode::BackwardFilter).dilated());
  Lowering D = lowerConvolution(G, cpu::ConvMode::BackwardData);
  EXPECT_TRUE(D.dilated());
  // The input gradient's grid is the input's; its source is dy.
  EXPECT_EQ(D.rows(), G.N * G.H * G.W);
  EXPECT_EQ(D.columns(), G.KH * G.KW * G.Co);
  EXPECT_EQ(D.SrcH, G.OH);
}

} // namespace
