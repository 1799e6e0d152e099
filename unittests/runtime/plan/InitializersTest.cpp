//===- InitializersTest.cpp - Variables' initial values ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// initialValue on integer and bool variables: a plan may give one any
// initializer (the plan fuzzer did), and converting an out-of-range double
// to an integer is undefined, so integers saturate and NaN becomes 0.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Executor.h"
#include "mdrt/Plan.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace mdrt;

namespace {

/// initialValue for a variable of \p Type with initializer \p Init and
/// value \p Value (Constant) or stddev \p Value (Normal).
template <typename T>
std::vector<T> init(DType Type, std::vector<int64_t> Shape, fb::InitKind Init,
                    double Value) {
  flatbuffers::FlatBufferBuilder FB;
  auto Name = FB.CreateString("v");
  FB.Finish(fb::CreateVariable(FB, Name, /*buffer=*/0, Init, Value,
                               /*mean=*/0, /*stddev=*/Value));
  const auto *V = flatbuffers::GetRoot<fb::Variable>(FB.GetBufferPointer());
  TensorDesc Desc{Type, Shape};
  std::vector<T> Out(size_t(Desc.numElements()));
  Status S = initialValue(*V, Desc, /*Seed=*/1, Out.data());
  EXPECT_TRUE(S.isOk()) << S.message();
  return Out;
}

TEST(InitializersTest, IntegersSaturate) {
  EXPECT_EQ(init<int32_t>(DType::Int32, {1}, fb::InitKind::Constant, 3e9)[0],
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(init<int32_t>(DType::Int32, {1}, fb::InitKind::Constant, -3e9)[0],
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(init<int64_t>(DType::Int64, {1}, fb::InitKind::Constant, 1e300)[0],
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(
      init<int32_t>(DType::Int32, {1}, fb::InitKind::Constant, std::nan(""))[0],
      0);
  EXPECT_EQ(init<int32_t>(DType::Int32, {1}, fb::InitKind::Constant, -7.9)[0],
            -7);
}

TEST(InitializersTest, RandomIntegersAndBools) {
  // Normal draws with a huge stddev: every element saturates or fits.
  for (int32_t X :
       init<int32_t>(DType::Int32, {64}, fb::InitKind::Normal, 1e12))
    EXPECT_TRUE(X == std::numeric_limits<int32_t>::max() ||
                X == std::numeric_limits<int32_t>::min() ||
                std::abs(int64_t(X)) < (int64_t(1) << 31));
  // Bools are 0 or 1: x != 0.
  std::vector<uint8_t> B =
      init<uint8_t>(DType::Bool, {64}, fb::InitKind::Normal, 1.0);
  for (uint8_t X : B)
    EXPECT_EQ(X, 1);
  for (uint8_t X : init<uint8_t>(DType::Bool, {4}, fb::InitKind::Zeros, 0))
    EXPECT_EQ(X, 0);
}

TEST(InitializersTest, EmptyVariable) {
  // No elements: nothing is written (the host copy of an empty tensor may
  // be a null pointer).
  flatbuffers::FlatBufferBuilder FB;
  auto Name = FB.CreateString("v");
  FB.Finish(fb::CreateVariable(FB, Name, 0, fb::InitKind::Ones));
  const auto *V = flatbuffers::GetRoot<fb::Variable>(FB.GetBufferPointer());
  EXPECT_TRUE(
      initialValue(*V, TensorDesc{DType::Float32, {0, 3}}, 1, nullptr).isOk());
}

TEST(InitializersTest, Errors) {
  // The verifier refuses both in a plan; initialValue, also given other
  // variables, reports them.
  flatbuffers::FlatBufferBuilder FB;
  auto Name = FB.CreateString("v");
  FB.Finish(fb::CreateVariable(FB, Name, 0, fb::InitKind(99)));
  const auto *V = flatbuffers::GetRoot<fb::Variable>(FB.GetBufferPointer());
  float Out[2];
  Status S = initialValue(*V, TensorDesc{DType::Float32, {2}}, 1, Out);
  EXPECT_EQ(S.isOk() ? "<ok>" : S.message(),
            "variable 'v' has an unknown initializer");

  flatbuffers::FlatBufferBuilder FB2;
  auto Name2 = FB2.CreateString("w");
  FB2.Finish(fb::CreateVariable(FB2, Name2, 0, fb::InitKind::Ones));
  V = flatbuffers::GetRoot<fb::Variable>(FB2.GetBufferPointer());
  S = initialValue(*V, TensorDesc{DType::Invalid, {2}}, 1, Out);
  EXPECT_EQ(S.isOk() ? "<ok>" : S.message(),
            "variable 'w' has an invalid type");
}

} // namespace
