//===- TypesTest.cpp - Shapes and tensor types ----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Types.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

TEST(TypesTest, NumElements) {
  EXPECT_EQ(Shape().numElements(), 1);
  EXPECT_EQ(Shape({2, 3}).numElements(), 6);
  EXPECT_EQ(Shape({-1, 3}).numElements(), -1);
  EXPECT_EQ(Shape({0, 3}).numElements(), 0);
  // Overflow saturates instead of wrapping (2^32 * 2^32 wrapped to 0).
  EXPECT_EQ(Shape({int64_t(1) << 32, int64_t(1) << 32}).numElements(),
            INT64_MAX);
  EXPECT_EQ(Shape({int64_t(1) << 32, int64_t(1) << 32, 0}).numElements(), 0);
  TensorType T{DType::Float64, Shape({int64_t(1) << 62})};
  EXPECT_EQ(T.byteSize(), INT64_MAX);
}

TEST(TypesTest, WhyTooLarge) {
  const int64_t Max = Shape::MaxTensorElements;
  EXPECT_EQ(Shape().whyTooLarge(), "");
  EXPECT_EQ(Shape({Max}).whyTooLarge(), "");
  EXPECT_EQ(Shape({1 << 20, 1 << 20}).whyTooLarge(), "");
  EXPECT_EQ(Shape({-1, Max}).whyTooLarge(), "");
  EXPECT_EQ(Shape({Max, 2}).whyTooLarge(),
            "a tensor may have at most 2^40 elements");
  EXPECT_EQ(Shape({int64_t(1) << 32, int64_t(1) << 32}).whyTooLarge(),
            "a tensor may have at most 2^40 elements");
  EXPECT_EQ(Shape({INT64_MAX, INT64_MAX}).whyTooLarge(),
            "dimension 9223372036854775807 is above the limit of 2^40");
  EXPECT_EQ(Shape({0, Max + 1}).whyTooLarge(),
            "dimension 1099511627777 is above the limit of 2^40");
  EXPECT_EQ(Shape({0, Max, Max}).whyTooLarge(), "");
}

TEST(TypesTest, WrittenDims) {
  // As written: Shape::str() would print the negative ones as '?'.
  EXPECT_EQ(writtenDims({784, -3}), "[784,-3]");
  EXPECT_EQ(Shape({784, -3}).str(), "[784,?]");
  EXPECT_EQ(writtenDims({3, 0}), "[3,0]");
  EXPECT_EQ(writtenDims({}), "[]");
}

} // namespace
