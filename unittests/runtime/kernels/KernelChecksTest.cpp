//===- KernelChecksTest.cpp - Messages of rejected CPU kernels ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The plan verifier checks a kernel's input and output counts but not its
// element types, shapes or attributes: a hand-made or damaged plan reaches
// the kernels' own checks. Each test creates such a kernel and checks the
// whole message. (The kernels' arity checks are not tested here: a verified
// plan cannot fail them.)
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace mdrt;
using namespace mdrt::test;

namespace {

/// Creates a kernel of \p Info without buffers (for shapes too large to
/// allocate); the error message, or "" on success.
std::string createOnly(KernelInfo Info) {
  Info.Name = "test/" + Info.Op;
  auto K = KernelRegistry::get().create(DeviceKind::CPU, Info);
  return K.isOk() ? "" : K.status().message();
}

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

TEST(CpuKernelChecks, ZipInputsHaveOneElementType) {
  Rng G;
  OpRunner R("ReluGrad");
  R.input(G.tensor(DType::Float32, {3}))
      .input(G.tensor(DType::Float64, {3}))
      .output(DType::Float32, {3});
  EXPECT_EQ(R.create(), "node 'test/ReluGrad' (ReluGrad): input 1 is "
                        "float64[3], expected element type float32");
  OpRunner L("LogLossGrad");
  L.input(G.tensor(DType::Float64, {2}))
      .input(G.tensor(DType::Float64, {2}))
      .input(G.tensor(DType::Float32, {2}))
      .output(DType::Float64, {2});
  EXPECT_EQ(L.create(), "node 'test/LogLossGrad' (LogLossGrad): input 2 is "
                        "float32[2], expected element type float64");
}

TEST(CpuKernelChecks, OutputHasTheInputsElementType) {
  Rng G;
  OpRunner R("Add");
  R.input(G.tensor(DType::Float32, {3}))
      .input(G.tensor(DType::Float32, {3}))
      .output(DType::Float64, {3});
  EXPECT_EQ(R.create(), "node 'test/Add' (Add): output 0 is float64[3], "
                        "expected element type float32");
  OpRunner D("Dropout");
  D.input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {4})
      .output(DType::Int32, {4});
  EXPECT_EQ(D.create(), "node 'test/Dropout' (Dropout): output 1 is int32[4], "
                        "expected element type float32");
}

TEST(CpuKernelChecks, CopyKeepsTheElementType) {
  Rng G;
  OpRunner R("Identity");
  R.input(G.tensor(DType::Float32, {2, 3})).output(DType::Float64, {2, 3});
  EXPECT_EQ(R.create(), "node 'test/Identity' (Identity): output float64[2,3] "
                        "differs in element type from input float32[2,3]");
}

TEST(CpuKernelChecks, CastOutputHasTheDtypeAttribute) {
  Rng G;
  OpRunner R("Cast");
  R.attr("dtype", DType::Int32)
      .input(G.tensor(DType::Float32, {3}))
      .output(DType::Float64, {3});
  EXPECT_EQ(R.create(), "node 'test/Cast' (Cast): output float64[3] does not "
                        "have the 'dtype' attribute's type int32");
}

//===----------------------------------------------------------------------===//
// Shapes and attributes
//===----------------------------------------------------------------------===//

TEST(CpuKernelChecks, MatMulOperandsAreMatrices) {
  Rng G;
  OpRunner R("MatMul");
  R.input(G.tensor(DType::Float32, {2, 3, 4}))
      .input(G.tensor(DType::Float32, {4, 2}))
      .output(DType::Float32, {2, 2});
  EXPECT_EQ(R.create(), "node 'test/MatMul' (MatMul): "
                        "MatMul needs rank-2 inputs, got "
                        "float32[2,3,4] and float32[4,2]");
}

TEST(CpuKernelChecks, BatchSliceKeepsTypeAndRowShape) {
  Rng G;
  auto Slice = [&](TT X, DType T, Shape S) {
    OpRunner R("BatchSlice");
    R.attr("index", int64_t(0))
        .attr("count", int64_t(3))
        .input(X)
        .output(T, std::move(S));
    return R.create();
  };
  EXPECT_EQ(Slice(G.tensor(DType::Float32, {6, 2}), DType::Float64, {2, 2}),
            "node 'test/BatchSlice' (BatchSlice): cannot slice float32[6,2] "
            "into float64[2,2]");
  EXPECT_EQ(Slice(G.tensor(DType::Float32, {}), DType::Float32, {}),
            "node 'test/BatchSlice' (BatchSlice): cannot slice float32[] into "
            "float32[]");
  EXPECT_EQ(Slice(G.tensor(DType::Float32, {6, 2}), DType::Float32, {2}),
            "node 'test/BatchSlice' (BatchSlice): cannot slice float32[6,2] "
            "into float32[2]");
  EXPECT_EQ(Slice(G.tensor(DType::Float32, {6, 2}), DType::Float32, {2, 3}),
            "node 'test/BatchSlice' (BatchSlice): cannot slice float32[6,2] "
            "into float32[2,3]");
}

TEST(CpuKernelChecks, BroadcastOfTooManyLoopDimensions) {
  // Dimensions that alternate between A's and B's broadcast collapse into
  // nothing: rank 17 gives 17 loop dimensions.
  Shape A, B, Out;
  for (int K = 0; K < 17; ++K) {
    A.push_back(K % 2 ? 1 : 2);
    B.push_back(K % 2 ? 2 : 1);
    Out.push_back(2);
  }
  Rng G;
  OpRunner R("Add");
  R.input(G.tensor(DType::Float32, A))
      .input(G.tensor(DType::Float32, B))
      .output(DType::Float32, Out);
  EXPECT_EQ(R.create(),
            "node 'test/Add' (Add): broadcasting "
            "[2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2] and "
            "[1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1] to "
            "[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2] takes 17 loop dimensions; "
            "at most 16 are supported");
  // Rank 16 is fine.
  A.pop_back();
  B.pop_back();
  Out.pop_back();
  TT X = G.tensor(DType::Float32, A), Y = G.tensor(DType::Float32, B);
  OpRunner S("Add");
  S.input(X).input(Y).output(DType::Float32, Out).run();
  std::vector<double> Want(size_t(numElements(Out)));
  for (int64_t I = 0; I < int64_t(Want.size()); ++I) {
    Shape Idx = unflatten(I, Out);
    Want[size_t(I)] =
        roundTo(DType::Float32, X.V[size_t(broadcastIndex(Idx, A))] +
                                    Y.V[size_t(broadcastIndex(Idx, B))]);
  }
  expectEqual(S.out(0), Want, "rank-16 Add");
}

TEST(CpuKernelChecks, OutputsHaveTheShapeAttribute) {
  Rng G;
  OpRunner B("BroadcastGrad");
  B.attr("shape", Shape{2, 3})
      .attr("axes", Shape{0})
      .input(G.tensor(DType::Float32, {3}))
      .output(DType::Float32, {3, 3});
  EXPECT_EQ(B.create(),
            "node 'test/BroadcastGrad' (BroadcastGrad): output float32[3,3] "
            "does not have the 'shape' attribute's shape [2,3]");
  OpRunner S("SumToShape");
  S.attr("shape", Shape{3})
      .input(G.tensor(DType::Float32, {2, 3}))
      .output(DType::Float32, {1, 3});
  EXPECT_EQ(S.create(), "node 'test/SumToShape' (SumToShape): output "
                        "float32[1,3] does not have the 'shape' attribute's "
                        "shape [3]");
}

TEST(CpuKernelChecks, RowOpsNeedALastDimension) {
  OpRunner S("Softmax");
  S.input(TT(DType::Float32, {}, {1})).output(DType::Float32, {});
  EXPECT_EQ(S.create(),
            "node 'test/Softmax' (Softmax): Softmax needs rank >= 1, got "
            "float32[]");
  OpRunner G("SoftmaxGrad");
  G.input(TT(DType::Float64, {}, {1}))
      .input(TT(DType::Float64, {}, {1}))
      .output(DType::Float64, {});
  EXPECT_EQ(G.create(), "node 'test/SoftmaxGrad' (SoftmaxGrad): SoftmaxGrad "
                        "needs rank >= 1, got float64[]");
  OpRunner B("BiasAddGrad");
  B.input(TT(DType::Float32, {}, {1})).output(DType::Float32, {});
  EXPECT_EQ(B.create(), "node 'test/BiasAddGrad' (BiasAddGrad): "
                        "BiasAddGrad input must have rank >= 1, got "
                        "float32[]");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(CpuKernelChecks, CrossEntropyNeedsClasses) {
  OpRunner R("SparseSoftmaxCrossEntropy");
  R.input(TT(DType::Float32, {2, 0}, {}))
      .input(TT(DType::Int32, {2}, {0, 0}))
      .output(DType::Float32, {2})
      .output(DType::Float32, {2, 0});
  EXPECT_EQ(R.create(),
            "node 'test/SparseSoftmaxCrossEntropy' (SparseSoftmaxCrossEntropy):"
            " logits float32[2,0] have no classes");
}

TEST(CpuKernelChecks, AccuracyShapesAndTypes) {
  Rng G;
  const std::string Node = "node 'test/Accuracy' (Accuracy): ";
  OpRunner Scalar("Accuracy");
  Scalar.input(TT(DType::Float32, {}, {1}))
      .input(TT(DType::Float32, {}, {1}))
      .output(DType::Float32, {});
  EXPECT_EQ(Scalar.create(),
            Node + "predictions must have a batch dimension, got float32[]");
  OpRunner Out64("Accuracy");
  Out64.input(G.tensor(DType::Float32, {4, 3}))
      .input(TT(DType::Int32, {4}, {0, 1, 2, 0}))
      .output(DType::Float64, {4});
  EXPECT_EQ(Out64.create(),
            Node + "Accuracy output must be float32, got float64[4]");
  OpRunner Shapes("Accuracy");
  Shapes.input(G.tensor(DType::Float32, {4, 3}))
      .input(G.tensor(DType::Float32, {4, 2}))
      .output(DType::Float32, {4});
  EXPECT_EQ(Shapes.create(), Node + "predictions float32[4,3] and labels "
                                    "float32[4,2] must have the same shape");
  OpRunner BoolX("Accuracy");
  BoolX.input(TT(DType::Bool, {4}, {1, 0, 1, 0}))
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {4});
  EXPECT_EQ(BoolX.create(),
            Node + "predictions "
                   "must be float32, float64, int32 or int64, got bool[4]");
  OpRunner BoolL("Accuracy");
  BoolL.input(G.tensor(DType::Float32, {4}))
      .input(TT(DType::Bool, {4}, {1, 0, 1, 0}))
      .output(DType::Float32, {4});
  EXPECT_EQ(BoolL.create(),
            Node + "labels "
                   "must be float32, float64, int32 or int64, got bool[4]");
}

//===----------------------------------------------------------------------===//
// Convolutions and pooling
//===----------------------------------------------------------------------===//

TEST(CpuKernelChecks, WindowOpsTakeNhwcTensors) {
  Rng G;
  OpRunner P("MaxPool");
  P.attr("ksize", Shape{2, 2})
      .input(G.tensor(DType::Float32, {4, 4, 3}))
      .output(DType::Float32, {2, 2, 3});
  EXPECT_EQ(P.create(), "node 'test/MaxPool' (MaxPool): expected an NHWC "
                        "tensor, got [4,4,3]");
  // Conv2DBackpropInput's x is its output.
  OpRunner C("Conv2DBackpropInput");
  C.input(G.tensor(DType::Float32, {3, 3, 2, 4}))
      .input(G.tensor(DType::Float32, {1, 5, 5, 4}))
      .output(DType::Float32, {5, 5, 2});
  EXPECT_EQ(C.create(), "node 'test/Conv2DBackpropInput' "
                        "(Conv2DBackpropInput): expected an NHWC tensor, got "
                        "[5,5,2]");
}

TEST(CpuKernelChecks, ConvolutionFilterIsHwio) {
  Rng G;
  OpRunner R("Conv2D");
  R.input(G.tensor(DType::Float32, {1, 5, 5, 3}))
      .input(G.tensor(DType::Float32, {3, 3, 3}))
      .output(DType::Float32, {1, 5, 5, 3});
  EXPECT_EQ(R.create(),
            "node 'test/Conv2D' (Conv2D): filter must be HWIO, got [3,3,3]");
}

TEST(CpuKernelChecks, ConvolutionGradientsHaveTheShapeAttributes) {
  Rng G;
  OpRunner D("Conv2DBackpropInput"); // Inputs filter, dy.
  D.attr("input_shape", Shape{1, 5, 5, 3})
      .input(G.tensor(DType::Float32, {3, 3, 2, 4}))
      .input(G.tensor(DType::Float32, {1, 5, 5, 4}))
      .output(DType::Float32, {1, 5, 5, 2});
  EXPECT_EQ(D.create(),
            "node 'test/Conv2DBackpropInput' (Conv2DBackpropInput): output "
            "float32[1,5,5,2] does not have the 'input_shape' attribute's "
            "shape [1,5,5,3]");
  OpRunner F("Conv2DBackpropFilter"); // Inputs x, dy.
  F.attr("filter_shape", Shape{3, 3, 2, 4})
      .input(G.tensor(DType::Float32, {1, 5, 5, 2}))
      .input(G.tensor(DType::Float32, {1, 5, 5, 4}))
      .output(DType::Float32, {1, 1, 2, 4});
  EXPECT_EQ(F.create(),
            "node 'test/Conv2DBackpropFilter' (Conv2DBackpropFilter): output "
            "float32[1,1,2,4] does not have the 'filter_shape' attribute's "
            "shape [3,3,2,4]");
}

TEST(CpuKernelChecks, MaxPoolGradShapesMatch) {
  Rng G;
  OpRunner R("MaxPoolGrad"); // Inputs x, y, dy.
  R.attr("ksize", Shape{2, 2})
      .attr("strides", Shape{2, 2})
      .input(G.tensor(DType::Float32, {1, 4, 4, 3}))
      .input(G.tensor(DType::Float32, {1, 2, 2, 3}))
      .input(G.tensor(DType::Float32, {1, 2, 2, 3}))
      .output(DType::Float32, {1, 4, 4, 2});
  EXPECT_EQ(R.create(), "node 'test/MaxPoolGrad' (MaxPoolGrad): "
                        "MaxPoolGrad shapes do not match: input "
                        "float32[1,4,4,3], output float32[1,2,2,3], dy "
                        "float32[1,2,2,3], dx float32[1,4,4,2]");
}

TEST(CpuKernelChecks, MaxPoolGradImagesOfInt32Pixels) {
  // Pixels are indexed in int32: 65536 x 32769 is 2^31 + 2^15.
  KernelInfo I;
  I.Op = "MaxPoolGrad";
  I.Attrs.set("ksize", Shape{1, 1});
  Shape X = {1, 65536, 32769, 1};
  for (int K = 0; K < 3; ++K)
    I.Inputs.push_back(TensorDesc{DType::Float32, X});
  I.Outputs.push_back(TensorDesc{DType::Float32, X});
  EXPECT_EQ(createOnly(I), "node 'test/MaxPoolGrad' (MaxPoolGrad): "
                           "MaxPoolGrad images of 65536x32769"
                           " pixels are not supported (at most 2^31-1 pixels)");
  // Images of an empty batch whose pixel count overflows int64.
  Shape Huge = {0, int64_t(1) << 40, int64_t(1) << 40, 1};
  for (TensorDesc &D : I.Inputs)
    D.Shape = Huge;
  I.Outputs[0].Shape = Huge;
  EXPECT_EQ(createOnly(I), "node 'test/MaxPoolGrad' (MaxPoolGrad): "
                           "MaxPoolGrad images of 1099511627776x1099511627776"
                           " pixels are not supported (at most 2^31-1 pixels)");
  // The largest image that fits (the reference loops allocate nothing of
  // the image's size).
  BackendScope Reference("reference");
  Shape Fits = {1, 1, 2147483647, 1};
  for (TensorDesc &D : I.Inputs)
    D.Shape = Fits;
  I.Outputs[0].Shape = Fits;
  EXPECT_EQ(createOnly(I), "");
}

TEST(CpuKernelChecks, PoolingWindowAndOutput) {
  Rng G;
  const std::string Node = "node 'test/MaxPool' (MaxPool): ";
  OpRunner K("MaxPool");
  K.attr("ksize", Shape{2})
      .input(G.tensor(DType::Float32, {1, 4, 4, 3}))
      .output(DType::Float32, {1, 2, 2, 3});
  EXPECT_EQ(K.create(),
            Node + "'ksize' must be two positive integers, got [2]");
  OpRunner W("MaxPool");
  W.attr("ksize", Shape{0, 2})
      .input(G.tensor(DType::Float32, {1, 4, 4, 3}))
      .output(DType::Float32, {1, 2, 2, 3});
  EXPECT_EQ(W.create(), Node + "window must be positive, got [0,2]");
  OpRunner Y("MaxPool");
  Y.attr("ksize", Shape{2, 2})
      .attr("strides", Shape{2, 2})
      .input(G.tensor(DType::Float32, {1, 4, 4, 3}))
      .output(DType::Float32, {1, 4, 4, 3});
  EXPECT_EQ(Y.create(), Node + "pooling [1,4,4,3] gives [1,2,2,3], got "
                               "[1,4,4,3]");
}

//===----------------------------------------------------------------------===//
// Batch normalization, cross-entropy and reductions
//===----------------------------------------------------------------------===//

TEST(CpuKernelChecks, BatchNormNeedsChannels) {
  Rng G;
  OpRunner R("BatchNorm");
  R.input(G.tensor(DType::Float32, {4}))
      .input(G.tensor(DType::Float32, {4}))
      .output(DType::Float32, {4})
      .output(DType::Float32, {1})
      .output(DType::Float32, {1});
  EXPECT_EQ(R.create(), "node 'test/BatchNorm' (BatchNorm): BatchNorm input "
                        "must have rank >= 2, got float32[4]");
}

TEST(CpuKernelChecks, CrossEntropyShapesAndLabels) {
  Rng G;
  const std::string Node =
      "node 'test/SparseSoftmaxCrossEntropy' (SparseSoftmaxCrossEntropy): ";
  OpRunner Batch("SparseSoftmaxCrossEntropy");
  Batch.input(G.tensor(DType::Float32, {2, 3}))
      .input(TT(DType::Int32, {3}, {0, 1, 2}))
      .output(DType::Float32, {2})
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Batch.create(), Node + "logits float32[2,3] and labels int32[3] "
                                   "do not match");
  OpRunner Float("SparseSoftmaxCrossEntropy");
  Float.input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {2}))
      .output(DType::Float32, {2})
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(Float.create(),
            Node + "labels must be int32 or int64, got float32[2]");
  OpRunner Acc("Accuracy");
  Acc.input(G.tensor(DType::Float32, {2, 3}))
      .input(TT(DType::Int32, {3}, {0, 1, 2}))
      .output(DType::Float32, {2});
  EXPECT_EQ(Acc.create(), "node 'test/Accuracy' (Accuracy): predictions "
                          "float32[2,3] and labels int32[3] have different "
                          "batch sizes");
}

TEST(CpuKernelChecks, SumToShapeOfHigherRank) {
  Rng G;
  OpRunner R("SumToShape");
  R.input(G.tensor(DType::Float32, {3})).output(DType::Float32, {2, 3});
  EXPECT_EQ(
      R.create(),
      "node 'test/SumToShape' (SumToShape): cannot sum [3] down to [2,3]");
}

TEST(CpuKernelChecks, SameShapeOperands) {
  Rng G;
  OpRunner B("BiasAdd");
  B.input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {3}))
      .output(DType::Float32, {3, 2});
  EXPECT_EQ(B.create(), "node 'test/BiasAdd' (BiasAdd): output float32[3,2] "
                        "differs from float32[2,3]");
  OpRunner S("SoftmaxGrad");
  S.input(G.tensor(DType::Float32, {2, 3}))
      .input(G.tensor(DType::Float32, {3, 2}))
      .output(DType::Float32, {2, 3});
  EXPECT_EQ(S.create(), "node 'test/SoftmaxGrad' (SoftmaxGrad): input 1 "
                        "float32[3,2] differs from float32[2,3]");
}

} // namespace
