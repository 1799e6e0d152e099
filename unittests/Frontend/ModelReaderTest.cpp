//===- ModelReaderTest.cpp - Reading graph descriptions -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

TEST(ModelReaderTest, ReadsNodes) {
  auto G = readModelBuffer(R"(node { name: "a" op: "Const" })", "m.mdg", {});
  ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
  EXPECT_NE((*G)->lookup("a"), nullptr);
}

} // namespace
