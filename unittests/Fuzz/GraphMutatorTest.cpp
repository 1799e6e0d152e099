//===- GraphMutatorTest.cpp - The model fuzzer's graph mutator ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The graph mutator (fuzz/GraphMutator.cpp) runs outside libFuzzer's
// per-input timeout: a mutator that loops stalls a fuzzing run silently.
// These check that it ends and prints models that parse, on the examples
// and on scope names the reader allows but path arithmetic trips over.
//
//===----------------------------------------------------------------------===//

#include "GraphMutator.h"

#include "ModelDesc.pb.h"

#include <google/protobuf/text_format.h>

#include "gtest/gtest.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string readFile(const std::string &Path) {
  std::ifstream F(Path);
  std::stringstream S;
  S << F.rdbuf();
  return S.str();
}

/// Mutates \p Model with seeds 0 to \p N - 1; returns how many results
/// parse (every mutation that succeeds must).
unsigned mutateMany(const std::string &Model, unsigned N) {
  unsigned Mutated = 0;
  for (unsigned Seed = 0; Seed < N; ++Seed) {
    std::vector<uint8_t> Buf(Model.size() * 4 + 4096);
    std::copy(Model.begin(), Model.end(), Buf.begin());
    size_t Size = mdplan::fuzz::mutateModelGraph(Buf.data(), Model.size(),
                                                 Buf.size(), Seed);
    if (!Size)
      continue;
    ++Mutated;
    mdplan::desc::Model M;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        std::string(Buf.begin(), Buf.begin() + Size), &M))
        << "seed " << Seed;
  }
  return Mutated;
}

TEST(GraphMutatorTest, ExamplesStayModels) {
  for (const char *Name : {"fashion_mlp", "tf_tutorial_cnn"}) {
    std::string Model =
        readFile(std::string(MDPLAN_EXAMPLES_DIR) + "/" + Name + ".mdg");
    ASSERT_FALSE(Model.empty()) << Name;
    EXPECT_EQ(mutateMany(Model, 200), 200u) << Name;
  }
}

// A scope named "/" made the lookup of enclosing scopes loop forever.
TEST(GraphMutatorTest, ScopeNamesWithSlashes) {
  std::string Model =
      "scope { name: \"/\" node { name: \"a\" op: \"Const\" }\n"
      "  node { name: \"b\" op: \"Relu\" input: \"zz\" } }\n"
      "scope { name: \"p/\" scope { name: \"q\"\n"
      "  node { name: \"c\" op: \"Relu\" input: \"nope\" } } }\n";
  EXPECT_EQ(mutateMany(Model, 200), 200u);
}

TEST(GraphMutatorTest, RefusesWhatDoesNotParse) {
  std::string Text = "node { name: ";
  std::vector<uint8_t> Buf(Text.begin(), Text.end());
  Buf.resize(1024);
  EXPECT_EQ(
      mdplan::fuzz::mutateModelGraph(Buf.data(), Text.size(), Buf.size(), 1),
      0u);
}

} // namespace
