//===- PoolingMathTest.cpp - The GPU's pooling arithmetic against the CPU -===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/Pooling.h is host code as well as device code: these
// tests compute max pooling and its gradient with the functions the GPU's
// kernels call, with 32-bit and 64-bit indices, from the geometry the GPU
// kernel takes from lib/cpu, and require the CPU's reference loops' bits
// (the same tie rule and order of additions), over window sizes, strides,
// SAME and VALID padding, and inputs with many ties.
//
//===----------------------------------------------------------------------===//

#include "cuda/Pooling.h"

#include "KernelTestUtil.h"

#include <cstring>
#include <limits>

using namespace mdrt;
using namespace mdrt::test;
using mdrt::cuda::Geometry;
using mdrt::cuda::WindowAs;

namespace {

Geometry geometryOf(const PoolCase &C, std::string &Error) {
  KernelInfo I;
  I.Op = "MaxPool";
  I.Name = "test/MaxPool";
  I.Attrs.set("strides", AttrValue(std::vector<int64_t>{C.SH, C.SW}));
  I.Attrs.set("padding", AttrValue(std::string(C.Same ? "SAME" : "VALID")));
  cpu::Window2D Win;
  Status S =
      cpu::windowGeometry(I, {C.N, C.H, C.W, C.C}, C.KH, C.KW, "VALID", Win);
  Error = S.isOk() ? "" : S.message();
  Geometry G;
  cuda::fromWindow(Win, G);
  return G;
}

template <typename T> std::vector<T> asT(const std::vector<double> &V) {
  return std::vector<T>(V.begin(), V.end());
}

template <typename T>
void expectSameBits(const std::vector<T> &Got, const std::vector<double> &Want,
                    const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  for (size_t K = 0; K < Got.size(); ++K) {
    T W = T(Want[K]);
    EXPECT_EQ(std::memcmp(&Got[K], &W, sizeof(T)), 0)
        << What << " element " << K << ": gpu math " << double(Got[K])
        << ", cpu " << Want[K];
  }
}

template <typename T, typename Idx>
void checkCase(const PoolCase &C, const Geometry &G, const TT &X, const TT &Dy,
               const std::vector<double> &Y, const std::vector<double> &DX,
               const std::string &What) {
  const WindowAs<Idx> W(G);
  const std::vector<T> XT = asT<T>(X.V), DyT = asT<T>(Dy.V);
  std::vector<T> YT(Y.size()), DXT(DX.size());
  for (size_t I = 0; I < YT.size(); ++I)
    YT[I] = cuda::maxPoolAt<T, Idx>(W, XT.data(), Idx(I));
  expectSameBits(YT, Y, "MaxPool " + What);
  for (size_t I = 0; I < DXT.size(); ++I)
    DXT[I] = cuda::maxPoolGradAt<T, Idx>(W, XT.data(), DyT.data(), Idx(I));
  expectSameBits(DXT, DX, "MaxPoolGrad " + What);
  if (cuda::poolingTiles(G)) {
    std::vector<T> Tiled(DX.size(), T(-7)); // Every element is written.
    for (size_t I = 0; I < YT.size(); ++I)
      cuda::maxPoolGradTiledAt<T, Idx>(W, XT.data(), DyT.data(), Tiled.data(),
                                       Idx(I));
    expectSameBits(Tiled, DX, "MaxPoolGrad (tiled) " + What);
  }
  (void)C;
}

void checkPooling(bool Ties, bool NaNs = false) {
  BackendScope Scope("reference"); // The CPU's order of additions.
  Rng R(21);
  for (DType T : FloatTypes)
    for (const PoolCase &C : PoolCases) {
      std::string Error;
      Geometry G = geometryOf(C, Error);
      ASSERT_EQ(Error, "");
      ASSERT_TRUE(cuda::poolingFitsInt32(G));
      Shape XS = {C.N, C.H, C.W, C.C}, YS = {C.N, G.OH, G.OW, C.C};
      TT X = R.tensor(T, XS, -1, 1);
      if (Ties) // Like ReLU outputs: many zeros, and repeated values.
        for (double &V : X.V)
          V = V < 0 ? 0 : std::round(V * 3);
      if (NaNs) // Never a window's maximum, as in the forward.
        for (double &V : X.V)
          V = V < -0.6 ? std::numeric_limits<double>::quiet_NaN() : V;
      TT Dy = R.tensor(T, YS, -1, 1);
      std::vector<int64_t> K = {C.KH, C.KW}, S = {C.SH, C.SW};
      std::string Pad = C.Same ? "SAME" : "VALID";
      OpRunner P("MaxPool");
      P.attr("ksize", K).attr("strides", S).attr("padding", Pad).input(X);
      P.output(T, YS).run();
      OpRunner PG("MaxPoolGrad"); // Inputs input, output, dy.
      PG.attr("ksize", K)
          .attr("strides", S)
          .attr("padding", Pad)
          .input(X)
          .input(TT(T, YS, P.out(0)))
          .input(Dy)
          .output(T, XS)
          .run();
      std::string What = std::string(dtypeName(T)) +
                         (Ties   ? " ties "
                          : NaNs ? " nans "
                                 : " ") +
                         std::to_string(C.H) + "x" + std::to_string(C.W) +
                         " k" + std::to_string(C.KH) + "x" +
                         std::to_string(C.KW) + " s" + std::to_string(C.SH) +
                         "," + std::to_string(C.SW) + " " + Pad;
      if (T == DType::Float32) {
        checkCase<float, int32_t>(C, G, X, Dy, P.out(0), PG.out(0),
                                  What + " int32");
        checkCase<float, int64_t>(C, G, X, Dy, P.out(0), PG.out(0),
                                  What + " int64");
      } else {
        checkCase<double, int32_t>(C, G, X, Dy, P.out(0), PG.out(0),
                                   What + " int32");
        checkCase<double, int64_t>(C, G, X, Dy, P.out(0), PG.out(0),
                                   What + " int64");
      }
    }
}

TEST(CudaPoolingMath, MatchesTheCpuReferenceLoops) { checkPooling(false); }

TEST(CudaPoolingMath, MatchesTheCpuReferenceLoopsWithTies) {
  checkPooling(true);
}

TEST(CudaPoolingMath, MatchesTheCpuReferenceLoopsWithNaNs) {
  checkPooling(false, true);
}

TEST(CudaPoolingMath, Int32OnlyForSmallGeometries) {
  std::string Error;
  Geometry G = geometryOf({2, 5, 5, 3, 2, 2, 2, 2, false}, Error);
  EXPECT_TRUE(cuda::poolingFitsInt32(G));
  Geometry Big = G;
  Big.SH = int64_t(1) << 29;
  EXPECT_FALSE(cuda::poolingFitsInt32(Big));
  Big = G;
  Big.N = int64_t(1) << 30;
  EXPECT_FALSE(cuda::poolingFitsInt32(Big));
  // 2x2 windows tile a 4x4 image, not a 5x5 one (a remainder, or SAME's
  // padding).
  EXPECT_TRUE(
      cuda::poolingTiles(geometryOf({2, 4, 4, 3, 2, 2, 2, 2, false}, Error)));
  EXPECT_FALSE(cuda::poolingTiles(G));
  EXPECT_FALSE(
      cuda::poolingTiles(geometryOf({2, 5, 5, 3, 2, 2, 2, 2, true}, Error)));
}

} // namespace
