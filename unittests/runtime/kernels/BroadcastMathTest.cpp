//===- BroadcastMathTest.cpp - The GPU's broadcasting against the CPU -----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// runtime/lib/cuda/Broadcast.h is host code as well as device code: these
// tests plan broadcasts as the GPU's binary kernels do (planBroadcast),
// take every output element's operands with its offsets
// (broadcastOffsets, 32-bit and 64-bit), and require the CPU's Add, Mul
// and BiasAdd results bit for bit, over random shapes of rank 0 to 5 with
// broadcast dimensions on either side.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "cuda/Broadcast.h"

#include "KernelTestUtil.h"

#include <cstring>

using namespace mdrt;
using namespace mdrt::test;
using mdrt::cuda::Bcast;

namespace {

/// Y = Op(A, B) through the GPU's plan and offsets, in double (the values
/// are float32 or float64 ones; one operation rounds the same in T).
template <typename Idx, typename Fn>
std::vector<double> viaOffsets(const Bcast &P, const TT &A, const TT &B,
                               Fn Op) {
  std::vector<double> Y(size_t(P.N));
  for (int64_t I = 0; I < P.N; ++I) {
    Idx OA, OB;
    cuda::broadcastOffsets(P, Idx(I), OA, OB);
    EXPECT_LT(int64_t(OA), A.size());
    EXPECT_LT(int64_t(OB), B.size());
    Y[size_t(I)] = roundTo(A.Type, Op(A.V[size_t(OA)], B.V[size_t(OB)]));
  }
  return Y;
}

void expectSameBits(const std::vector<double> &Got,
                    const std::vector<double> &Want, const std::string &What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  for (size_t K = 0; K < Got.size(); ++K)
    ASSERT_EQ(std::memcmp(&Got[K], &Want[K], sizeof(double)), 0)
        << What << " element " << K << ": gpu math " << Got[K] << ", cpu "
        << Want[K];
}

std::string str(const Shape &S) { return cpu::shapeStr(S); }

TEST(CudaBroadcastMath, MatchesTheCpuBinaryOps) {
  Rng R(31);
  int Checked = 0;
  for (int Trial = 0; Trial < 300; ++Trial) {
    DType T = Trial % 2 ? DType::Float64 : DType::Float32;
    int Rank = int(R.integer(0, 5));
    Shape Out, SA, SB;
    for (int D = 0; D < Rank; ++D)
      Out.push_back(R.integer(1, 4));
    // Each side drops leading dimensions or sets some to 1.
    int DropA = int(R.integer(0, Rank)), DropB = int(R.integer(0, Rank));
    for (int D = DropA; D < Rank; ++D)
      SA.push_back(R.integer(0, 2) == 0 ? 1 : Out[size_t(D)]);
    for (int D = DropB; D < Rank; ++D)
      SB.push_back(R.integer(0, 2) == 0 ? 1 : Out[size_t(D)]);
    // The CPU's output is the broadcast of both shapes.
    Shape Y(size_t(Rank), 1);
    for (int D = 0; D < Rank; ++D) {
      size_t K = size_t(D);
      int64_t DA = D >= DropA ? SA[size_t(D - DropA)] : 1;
      int64_t DB = D >= DropB ? SB[size_t(D - DropB)] : 1;
      Y[K] = std::max(DA, DB);
    }
    Bcast P;
    Status S = cuda::planBroadcast(Y, SA, SB, P);
    ASSERT_TRUE(S.isOk()) << S.message();
    TT A = R.tensor(T, SA), B = R.tensor(T, SB);
    for (const char *Op : {"Add", "Mul"}) {
      OpRunner Run(Op);
      Run.input(A).input(B).output(T, Y).run();
      std::string What =
          std::string(Op) + " " + dtypeName(T) + " " + str(SA) + " " + str(SB);
      auto F = [&](double X, double Z) {
        return std::string(Op) == "Add" ? X + Z : X * Z;
      };
      expectSameBits(viaOffsets<uint32_t>(P, A, B, F), Run.out(0),
                     What + " uint32");
      expectSameBits(viaOffsets<int64_t>(P, A, B, F), Run.out(0),
                     What + " int64");
    }
    ++Checked;
  }
  EXPECT_EQ(Checked, 300);
}

TEST(CudaBroadcastMath, BiasAddAndSameShapes) {
  Rng R(32);
  for (DType T : FloatTypes) {
    // BiasAdd: [N, H, W, C] + [C] collapses to two dimensions.
    TT X = R.tensor(T, {3, 4, 5, 6}), Bias = R.tensor(T, {6});
    Bcast P;
    ASSERT_TRUE(cuda::planBroadcast(X.Dims, X.Dims, Bias.Dims, P).isOk());
    EXPECT_EQ(P.R, 2);
    OpRunner Run("BiasAdd");
    Run.input(X).input(Bias).output(T, X.Dims).run();
    auto Add = [](double A, double B) { return A + B; };
    expectSameBits(viaOffsets<uint32_t>(P, X, Bias, Add), Run.out(0),
                   "BiasAdd uint32");
    expectSameBits(viaOffsets<int64_t>(P, X, Bias, Add), Run.out(0),
                   "BiasAdd int64");
    // Same shapes collapse to one dimension (no division).
    TT Z = R.tensor(T, {3, 4, 5, 6});
    ASSERT_TRUE(cuda::planBroadcast(X.Dims, X.Dims, Z.Dims, P).isOk());
    EXPECT_EQ(P.R, 1);
    OpRunner Same("Add");
    Same.input(X).input(Z).output(T, X.Dims).run();
    expectSameBits(viaOffsets<uint32_t>(P, X, Z, Add), Same.out(0),
                   "Add same shapes");
  }
}

TEST(CudaBroadcastMath, RejectsShapesThatDoNotBroadcast) {
  Bcast P;
  Status S = cuda::planBroadcast({2, 3}, {2, 3}, {4}, P);
  EXPECT_EQ(S.message(), "cannot broadcast [4] to [2,3]");
}

//===----------------------------------------------------------------------===//
// Box copies (Concat, Slice, Pad): the plans both backends walk
//===----------------------------------------------------------------------===//

KernelInfo boxInfo(const std::string &Op, std::vector<TensorDesc> In,
                   TensorDesc Out) {
  KernelInfo I;
  I.Op = Op;
  I.Name = "test/" + Op;
  I.Inputs = std::move(In);
  I.Outputs = {std::move(Out)};
  return I;
}

TEST(CopyBoxPlan, MergesContiguousDimensions) {
  // Rows 1..2 of a [4,5,6]: one contiguous run of 60.
  KernelInfo I = boxInfo("Slice", {{DType::Float32, {4, 5, 6}}},
                         {DType::Float32, {2, 5, 6}});
  I.Attrs.set("begin", std::vector<int64_t>{1, 0, 0});
  I.Attrs.set("size", std::vector<int64_t>{2, -1, -1});
  cpu::CopyBox B;
  ASSERT_TRUE(cpu::sliceBox(I, B).isOk());
  EXPECT_EQ(B.Dims, (std::vector<int64_t>{60}));
  EXPECT_EQ(B.SrcStrides, (std::vector<int64_t>{1}));
  EXPECT_EQ(B.DstStrides, (std::vector<int64_t>{1}));
  EXPECT_EQ(B.SrcOffset, 30);
  EXPECT_EQ(B.DstOffset, 0);
  // Columns 2..4 of every row: rows of 3, strided on the source.
  I.Attrs.set("begin", std::vector<int64_t>{0, 0, 2});
  I.Attrs.set("size", std::vector<int64_t>{-1, -1, 3});
  I.Outputs[0].Shape = {4, 5, 3};
  ASSERT_TRUE(cpu::sliceBox(I, B).isOk());
  EXPECT_EQ(B.Dims, (std::vector<int64_t>{20, 3}));
  EXPECT_EQ(B.SrcStrides, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(B.DstStrides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(B.SrcOffset, 2);
  // The last column: a strided run of one element.
  I.Attrs.set("begin", std::vector<int64_t>{0, 0, 5});
  I.Attrs.set("size", std::vector<int64_t>{-1, -1, 1});
  I.Outputs[0].Shape = {4, 5, 1};
  ASSERT_TRUE(cpu::sliceBox(I, B).isOk());
  EXPECT_EQ(B.Dims, (std::vector<int64_t>{20, 1}));
  EXPECT_EQ(B.SrcStrides, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(B.DstStrides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(B.SrcOffset, 5);
  EXPECT_EQ(B.elements(), 20);
}

TEST(CopyBoxPlan, ConcatAndPadPlaceTheirInputs) {
  KernelInfo C = boxInfo(
      "Concat",
      {{DType::Int64, {2, 3}}, {DType::Int64, {2, 0}}, {DType::Int64, {2, 4}}},
      {DType::Int64, {2, 7}});
  C.Attrs.set("axis", int64_t(-1));
  std::vector<cpu::CopyBox> Boxes;
  ASSERT_TRUE(cpu::concatBoxes(C, Boxes).isOk());
  ASSERT_EQ(Boxes.size(), 3u);
  EXPECT_EQ(Boxes[0].Dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Boxes[0].DstStrides, (std::vector<int64_t>{7, 1}));
  EXPECT_EQ(Boxes[0].DstOffset, 0);
  EXPECT_EQ(Boxes[1].elements(), 0);
  EXPECT_EQ(Boxes[2].Dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Boxes[2].SrcStrides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(Boxes[2].DstOffset, 3);
  KernelInfo P = boxInfo("Pad", {{DType::Bool, {2, 3}}}, {DType::Bool, {5, 3}});
  P.Attrs.set("paddings", std::vector<int64_t>{1, 2, 0, 0});
  cpu::CopyBox B;
  ASSERT_TRUE(cpu::padBox(P, B).isOk());
  // Whole rows: one run of 6 at row 1.
  EXPECT_EQ(B.Dims, (std::vector<int64_t>{6}));
  EXPECT_EQ(B.DstOffset, 3);
}

} // namespace
