//===- MatMulTest.cpp - Matrix products on every backend ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

/// op(A) x op(B) and the same product of absolute values.
void refMatMul(const TT &A, const TT &B, bool TA, bool TB, int64_t M, int64_t N,
               int64_t K, std::vector<double> &C, std::vector<double> &Mag) {
  C.assign(size_t(M * N), 0.0);
  Mag.assign(size_t(M * N), 0.0);
  for (int64_t I = 0; I < M; ++I)
    for (int64_t J = 0; J < N; ++J)
      for (int64_t P = 0; P < K; ++P) {
        double AV = TA ? A.V[size_t(P * M + I)] : A.V[size_t(I * K + P)];
        double BV = TB ? B.V[size_t(J * K + P)] : B.V[size_t(P * N + J)];
        C[size_t(I * N + J)] += AV * BV;
        Mag[size_t(I * N + J)] += std::fabs(AV * BV);
      }
}

struct MMCase {
  int64_t M, N, K;
};

const MMCase MMCases[] = {{1, 1, 1},      {3, 5, 7},    {7, 3, 1},
                          {64, 10, 100},  {17, 33, 65}, {64, 256, 784},
                          {96, 400, 450}, {5, 0, 3},    {4, 3, 0}};

void checkMatMul(const char *Backend) {
  BackendScope Scope(Backend);
  Rng G;
  for (DType T : FloatTypes)
    for (const MMCase &C : MMCases)
      for (bool TA : {false, true})
        for (bool TB : {false, true}) {
          TT A = G.tensor(T, TA ? Shape{C.K, C.M} : Shape{C.M, C.K});
          TT B = G.tensor(T, TB ? Shape{C.N, C.K} : Shape{C.K, C.N});
          OpRunner R("MatMul");
          R.attr("transpose_a", TA)
              .attr("transpose_b", TB)
              .input(A)
              .input(B)
              .output(T, {C.M, C.N})
              .threads(2)
              .run();
          std::vector<double> Want, Mag;
          refMatMul(A, B, TA, TB, C.M, C.N, C.K, Want, Mag);
          std::string What = std::string(Backend ? Backend : "auto") + " " +
                             dtypeName(T) + " " + std::to_string(C.M) + "x" +
                             std::to_string(C.N) + "x" + std::to_string(C.K) +
                             (TA ? " ta" : "") + (TB ? " tb" : "");
          expectClose(R.out(0), Want, T, Mag, What);
        }
}

TEST(CpuKernels, MatMulDefaultBackend) { checkMatMul(nullptr); }

TEST(CpuKernels, MatMulOpenBlas) { checkMatMul("openblas"); }

TEST(CpuKernels, MatMulReferenceLoops) { checkMatMul("reference"); }

TEST(CpuKernels, MatMulRejectsMismatchedShapes) {
  Rng G;
  OpRunner R("MatMul");
  R.input(G.tensor(DType::Float32, {3, 4}))
      .input(G.tensor(DType::Float32, {5, 6}))
      .output(DType::Float32, {3, 6});
  EXPECT_EQ(R.create(), "node 'test/MatMul' (MatMul): inner dimensions do not "
                        "match: float32[3,4] x float32[5,6]");
  OpRunner T("MatMul");
  T.attr("transpose_b", true)
      .input(G.tensor(DType::Float32, {3, 4}))
      .input(G.tensor(DType::Float32, {6, 4}))
      .output(DType::Float32, {3, 6});
  EXPECT_EQ(T.create(), "");
  OpRunner I("MatMul");
  I.input(G.tensor(DType::Int32, {3, 4}))
      .input(G.tensor(DType::Int32, {4, 2}))
      .output(DType::Int32, {3, 2});
  EXPECT_EQ(I.create(), "node 'test/MatMul' (MatMul): no CPU kernel for MatMul "
                        "on element type int32");
}

} // namespace
