//===- ConvTest.cpp - Conv2D and its gradients, MaxPool and its gradient --===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Every case runs on the default backend (oneDNN for float32 when built
// with it) and on the reference loops, against naive float64 loops written
// from docs/Ops.md's padding rule.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <limits>

using namespace mdrt;
using namespace mdrt::test;

namespace {

/// One dimension: output size and padding before, TensorFlow style.
struct Dim {
  int64_t Out, Pad;
};

Dim window(int64_t In, int64_t K, int64_t S, bool Same) {
  if (Same) {
    int64_t Out = (In + S - 1) / S;
    int64_t Total = std::max<int64_t>((Out - 1) * S + K - In, 0);
    return {Out, Total / 2};
  }
  return {In < K ? 0 : (In - K) / S + 1, 0};
}

struct ConvCase {
  int64_t N, H, W, Ci, KH, KW, Co, SH, SW;
  bool Same;

  std::string str() const {
    return std::to_string(N) + "x" + std::to_string(H) + "x" +
           std::to_string(W) + "x" + std::to_string(Ci) + " k" +
           std::to_string(KH) + "x" + std::to_string(KW) + "x" +
           std::to_string(Co) + " s" + std::to_string(SH) + "," +
           std::to_string(SW) + (Same ? " SAME" : " VALID");
  }
};

const ConvCase ConvCases[] = {{2, 5, 5, 3, 3, 3, 2, 1, 1, true},
                              {2, 5, 5, 3, 3, 3, 2, 1, 1, false},
                              {2, 7, 6, 3, 3, 3, 4, 2, 2, true},
                              {2, 7, 6, 3, 3, 3, 4, 2, 2, false},
                              {1, 6, 9, 1, 2, 3, 2, 2, 1, true},
                              {1, 6, 9, 2, 2, 3, 2, 1, 2, false},
                              {2, 8, 8, 4, 1, 1, 3, 2, 2, true},
                              {2, 6, 6, 1, 1, 1, 2, 2, 2, false},
                              {3, 9, 7, 2, 5, 5, 3, 1, 1, true},
                              {2, 4, 4, 3, 5, 5, 2, 2, 2, true},
                              {1, 3, 3, 2, 5, 5, 2, 1, 1, false},
                              {2, 28, 28, 1, 5, 5, 32, 1, 1, true},
                              {2, 14, 14, 32, 5, 5, 64, 1, 1, true},
                              {2, 11, 13, 16, 3, 3, 16, 2, 2, true}};

struct ConvRef {
  ConvCase C;
  Dim OH, OW;
  explicit ConvRef(const ConvCase &C)
      : C(C), OH(window(C.H, C.KH, C.SH, C.Same)),
        OW(window(C.W, C.KW, C.SW, C.Same)) {}
  Shape x() const { return {C.N, C.H, C.W, C.Ci}; }
  Shape f() const { return {C.KH, C.KW, C.Ci, C.Co}; }
  Shape y() const { return {C.N, OH.Out, OW.Out, C.Co}; }

  /// Calls Fn(xIndex, fIndex, yIndex) for every product of the convolution.
  template <typename F> void forEach(F &&Fn) const {
    for (int64_t N = 0; N < C.N; ++N)
      for (int64_t Oh = 0; Oh < OH.Out; ++Oh)
        for (int64_t Ow = 0; Ow < OW.Out; ++Ow)
          for (int64_t Kh = 0; Kh < C.KH; ++Kh)
            for (int64_t Kw = 0; Kw < C.KW; ++Kw) {
              int64_t Ih = Oh * C.SH - OH.Pad + Kh,
                      Iw = Ow * C.SW - OW.Pad + Kw;
              if (Ih < 0 || Ih >= C.H || Iw < 0 || Iw >= C.W)
                continue;
              for (int64_t I = 0; I < C.Ci; ++I)
                for (int64_t O = 0; O < C.Co; ++O)
                  Fn(((N * C.H + Ih) * C.W + Iw) * C.Ci + I,
                     ((Kh * C.KW + Kw) * C.Ci + I) * C.Co + O,
                     ((N * OH.Out + Oh) * OW.Out + Ow) * C.Co + O);
            }
  }
};

void checkConv(const char *Backend) {
  BackendScope Scope(Backend);
  Rng G;
  for (DType T : FloatTypes)
    for (const ConvCase &C : ConvCases) {
      ConvRef Ref(C);
      TT X = G.tensor(T, Ref.x()), F = G.tensor(T, Ref.f()),
         Dy = G.tensor(T, Ref.y());
      std::vector<double> Y(size_t(numElements(Ref.y())), 0.0), YM = Y;
      std::vector<double> DX(X.V.size(), 0.0), DXM = DX;
      std::vector<double> DF(F.V.size(), 0.0), DFM = DF;
      Ref.forEach([&](int64_t XI, int64_t FI, int64_t YI) {
        double XV = X.V[size_t(XI)], FV = F.V[size_t(FI)],
               GV = Dy.V[size_t(YI)];
        Y[size_t(YI)] += XV * FV;
        YM[size_t(YI)] += std::fabs(XV * FV);
        DX[size_t(XI)] += GV * FV;
        DXM[size_t(XI)] += std::fabs(GV * FV);
        DF[size_t(FI)] += GV * XV;
        DFM[size_t(FI)] += std::fabs(GV * XV);
      });
      std::string Pad = C.Same ? "SAME" : "VALID";
      std::vector<int64_t> Strides = {C.SH, C.SW};
      std::string What = std::string(Backend ? Backend : "auto") + " " +
                         dtypeName(T) + " " + C.str();

      OpRunner Fwd("Conv2D");
      Fwd.attr("strides", Strides)
          .attr("padding", Pad)
          .input(X)
          .input(F)
          .output(T, Ref.y())
          .threads(2)
          .run();
      expectClose(Fwd.out(0), Y, T, YM, "Conv2D " + What);

      OpRunner BI("Conv2DBackpropInput"); // Inputs filter, dy.
      BI.attr("input_shape", Ref.x())
          .attr("strides", Strides)
          .attr("padding", Pad)
          .input(F)
          .input(Dy)
          .output(T, Ref.x())
          .threads(2)
          .run();
      expectClose(BI.out(0), DX, T, DXM, "Conv2DBackpropInput " + What);

      OpRunner BF("Conv2DBackpropFilter"); // Inputs input, dy.
      BF.attr("filter_shape", Ref.f())
          .attr("strides", Strides)
          .attr("padding", Pad)
          .input(X)
          .input(Dy)
          .output(T, Ref.f())
          .threads(2)
          .run();
      expectClose(BF.out(0), DF, T, DFM, "Conv2DBackpropFilter " + What);
    }
}

TEST(CpuKernels, ConvolutionsDefaultBackend) { checkConv(nullptr); }

TEST(CpuKernels, ConvolutionsReferenceLoops) { checkConv("reference"); }

TEST(CpuKernels, ConvolutionRejectsBadShapes) {
  Rng G;
  OpRunner R("Conv2D");
  R.attr("padding", std::string("SAME"))
      .input(G.tensor(DType::Float32, {1, 5, 5, 3}))
      .input(G.tensor(DType::Float32, {3, 3, 2, 4}))
      .output(DType::Float32, {1, 5, 5, 4});
  EXPECT_EQ(R.create(), "node 'test/Conv2D' (Conv2D): input [1,5,5,3] "
                        "does not match the filter [3,3,2,4]");
  OpRunner O("Conv2D");
  O.attr("padding", std::string("VALID"))
      .input(G.tensor(DType::Float32, {1, 5, 5, 3}))
      .input(G.tensor(DType::Float32, {3, 3, 3, 4}))
      .output(DType::Float32, {1, 5, 5, 4});
  EXPECT_EQ(O.create(),
            "node 'test/Conv2D' (Conv2D): output of the convolution of "
            "[1,5,5,3] by [3,3,3,4] should be [1,3,3,4], got [1,5,5,4]");
  OpRunner P("Conv2D");
  P.attr("padding", std::string("FULL"))
      .input(G.tensor(DType::Float32, {1, 5, 5, 3}))
      .input(G.tensor(DType::Float32, {3, 3, 3, 4}))
      .output(DType::Float32, {1, 5, 5, 4});
  EXPECT_EQ(
      P.create(),
      "node 'test/Conv2D' (Conv2D): padding must be SAME or VALID, got 'FULL'");
}

//===----------------------------------------------------------------------===//
// MaxPool
//===----------------------------------------------------------------------===//

/// The inputs of checkPool: random, with ties like ReLU outputs, or with
/// NaNs (which never win a window, as padding never does) or -infinity.
enum class PoolInputs { Random, Ties, NaNs, NegativeInfinities };

void checkPool(const char *Backend, PoolInputs Kind) {
  const bool Ties = Kind == PoolInputs::Ties;
  BackendScope Scope(Backend);
  Rng G;
  size_t Empty = 0; // Windows of NaNs or -infinity only, over every case.
  for (DType T : FloatTypes)
    for (const PoolCase &C : PoolCases) {
      Dim OH = window(C.H, C.KH, C.SH, C.Same),
          OW = window(C.W, C.KW, C.SW, C.Same);
      Shape XS = {C.N, C.H, C.W, C.C}, YS = {C.N, OH.Out, OW.Out, C.C};
      TT X = G.tensor(T, XS, -1, 1);
      if (Ties) // Like ReLU outputs: many zeros, and repeated values.
        for (double &V : X.V)
          V = V < 0 ? 0 : std::round(V * 3);
      if (Kind == PoolInputs::NaNs)
        for (double &V : X.V)
          V = V < -0.6 ? std::numeric_limits<double>::quiet_NaN() : V;
      if (Kind == PoolInputs::NegativeInfinities)
        for (double &V : X.V)
          V = V < -0.6 ? -std::numeric_limits<double>::infinity() : V;
      TT Dy = G.tensor(T, YS, -1, 1);
      std::vector<double> Y(size_t(numElements(YS))), DX(X.V.size(), 0.0);
      // Windows of NaNs (or -infinity) only.
      std::vector<size_t> NoNumber;
      for (int64_t N = 0; N < C.N; ++N)
        for (int64_t Oh = 0; Oh < OH.Out; ++Oh)
          for (int64_t Ow = 0; Ow < OW.Out; ++Ow)
            for (int64_t Ch = 0; Ch < C.C; ++Ch) {
              double Best = -std::numeric_limits<double>::infinity();
              int64_t Arg = -1;
              for (int64_t Kh = 0; Kh < C.KH; ++Kh)
                for (int64_t Kw = 0; Kw < C.KW; ++Kw) {
                  int64_t Ih = Oh * C.SH - OH.Pad + Kh,
                          Iw = Ow * C.SW - OW.Pad + Kw;
                  if (Ih < 0 || Ih >= C.H || Iw < 0 || Iw >= C.W)
                    continue;
                  int64_t XI = ((N * C.H + Ih) * C.W + Iw) * C.C + Ch;
                  if (Arg < 0)
                    Arg = XI;
                  if (X.V[size_t(XI)] > Best) {
                    Best = X.V[size_t(XI)];
                    Arg = XI;
                  }
                }
              int64_t YI = ((N * OH.Out + Oh) * OW.Out + Ow) * C.C + Ch;
              Y[size_t(YI)] = Best;
              if (Best == -std::numeric_limits<double>::infinity())
                NoNumber.push_back(size_t(YI));
              DX[size_t(Arg)] += Dy.V[size_t(YI)];
            }
      std::vector<int64_t> K = {C.KH, C.KW}, S = {C.SH, C.SW};
      std::string Pad = C.Same ? "SAME" : "VALID";
      std::string What =
          std::string(Backend ? Backend : "auto") + " " + dtypeName(T) +
          (Ties                                     ? " ties "
           : Kind == PoolInputs::NaNs               ? " nans "
           : Kind == PoolInputs::NegativeInfinities ? " -infs "
                                                    : " ") +
          std::to_string(C.H) + "x" + std::to_string(C.W) + " k" +
          std::to_string(C.KH) + "x" + std::to_string(C.KW) + " s" +
          std::to_string(C.SH) + "," + std::to_string(C.SW) + " " + Pad;
      OpRunner P("MaxPool");
      P.attr("ksize", K)
          .attr("strides", S)
          .attr("padding", Pad)
          .input(X)
          .output(T, YS)
          .threads(2)
          .run();
      // A window of NaNs or -infinity only is the lowest finite number, in
      // the loops as in oneDNN (the loops once gave -infinity).
      for (size_t YI : NoNumber)
        Y[YI] = T == DType::Float32 ? std::numeric_limits<float>::lowest()
                                    : std::numeric_limits<double>::lowest();
      std::vector<double> Got = P.out(0);
      expectEqual(Got, Y, "MaxPool " + What);
      TT YT(T, YS, Y);
      OpRunner PG("MaxPoolGrad"); // Inputs input, output, dy.
      PG.attr("ksize", K)
          .attr("strides", S)
          .attr("padding", Pad)
          .input(X)
          .input(YT)
          .input(Dy)
          .output(T, XS)
          .threads(2)
          .run();
      // Overlapping windows accumulate in a different order.
      expectClose(PG.out(0), DX, T, {}, "MaxPoolGrad " + What, 4);
      Empty += NoNumber.size();
    }
  if (Kind == PoolInputs::NaNs || Kind == PoolInputs::NegativeInfinities) {
    EXPECT_GT(Empty, 0u) << "no window without a number was tested";
  }
}

TEST(CpuKernels, MaxPoolDefaultBackend) {
  checkPool(nullptr, PoolInputs::Random);
  checkPool(nullptr, PoolInputs::Ties);
  checkPool(nullptr, PoolInputs::NaNs);
  checkPool(nullptr, PoolInputs::NegativeInfinities);
}

TEST(CpuKernels, MaxPoolReferenceLoops) {
  // The loops sent dy to a window's first pixel when it was NaN, while
  // the forward (and oneDNN) took the largest number.
  checkPool("reference", PoolInputs::Random);
  checkPool("reference", PoolInputs::Ties);
  checkPool("reference", PoolInputs::NaNs);
  checkPool("reference", PoolInputs::NegativeInfinities);
}

TEST(CpuKernels, MaxPoolGradRoutesToTheFirstMaximum) {
  // One 2x2 window of equal values: all of dy goes to the top-left.
  TT X(DType::Float32, {1, 2, 2, 1}, {0, 0, 0, 0});
  TT Y(DType::Float32, {1, 1, 1, 1}, {0});
  TT Dy(DType::Float32, {1, 1, 1, 1}, {2.5});
  OpRunner PG("MaxPoolGrad");
  PG.attr("ksize", std::vector<int64_t>{2, 2})
      .attr("strides", std::vector<int64_t>{2, 2})
      .input(X)
      .input(Y)
      .input(Dy)
      .output(DType::Float32, {1, 2, 2, 1})
      .run();
  expectEqual(PG.out(0), {2.5, 0, 0, 0});
}

TEST(CpuKernels, MaxPoolGradOfWindowsWithoutANumber) {
  // 3x3 windows, SAME, over a 3x3 image of NaNs or -infinity: each
  // window's dy goes to its first pixel in the image (Ops.md), also for
  // the windows that start in the padding.
  for (const char *Backend : {"reference", static_cast<const char *>(nullptr)})
    for (double V : {std::numeric_limits<double>::quiet_NaN(),
                     -std::numeric_limits<double>::infinity()}) {
      BackendScope Scope(Backend);
      TT X(DType::Float32, {1, 3, 3, 1}, std::vector<double>(9, V));
      TT Y(DType::Float32, {1, 3, 3, 1},
           std::vector<double>(9, std::numeric_limits<float>::lowest()));
      std::vector<double> Ones(9, 1.0);
      TT Dy(DType::Float32, {1, 3, 3, 1}, Ones);
      OpRunner PG("MaxPoolGrad");
      PG.attr("ksize", std::vector<int64_t>{3, 3})
          .attr("strides", std::vector<int64_t>{1, 1})
          .attr("padding", std::string("SAME"))
          .input(X)
          .input(Y)
          .input(Dy)
          .output(DType::Float32, {1, 3, 3, 1})
          .run();
      // Window (oh, ow) starts at image pixel (max(oh - 1, 0), max(ow - 1,
      // 0)): rows 0 and 1 of the output both start in row 0, and so on.
      expectEqual(PG.out(0), {4, 2, 0, 2, 1, 0, 0, 0, 0},
                  std::string(Backend ? Backend : "auto") +
                      (std::isnan(V) ? " nans" : " -infs"));
    }
}

} // namespace
