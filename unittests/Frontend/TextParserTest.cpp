//===- TextParserTest.cpp - The reader's own text parser ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The reader parses text with a fast parser of its own and leaves what it
// declines to protobuf's (lib/Frontend/TextParser.h). Where it reads, it
// must build the same message and record the same field positions as
// protobuf's parser: checked on every example and test model, on each part
// of the format it reads, on what it must leave to protobuf, and on
// thousands of random texts mixing the two.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Frontend/ModelWriter.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <random>

using namespace mdplan;

namespace {

struct Outcome {
  bool Accepted = false;
  std::string Difference;
};

Outcome check(llvm::StringRef Text, TextFileKind Kind = TextFileKind::Model) {
  Outcome O;
  O.Difference = checkTextFastPath(Text, Kind, &O.Accepted);
  return O;
}

/// Every file under \p Dir with extension \p Ext.
std::vector<std::string> filesUnder(llvm::StringRef Dir, llvm::StringRef Ext) {
  std::vector<std::string> Files;
  std::error_code EC;
  for (llvm::sys::fs::recursive_directory_iterator I(Dir, EC), E; I != E && !EC;
       I.increment(EC))
    if (llvm::sys::path::extension(I->path()) == Ext)
      Files.push_back(I->path());
  std::sort(Files.begin(), Files.end());
  return Files;
}

std::string contents(const std::string &Path) {
  auto MB = llvm::MemoryBuffer::getFile(Path);
  if (!MB) {
    ADD_FAILURE() << "cannot read " << Path;
    return "";
  }
  return (*MB)->getBuffer().str();
}

TEST(TextParserTest, ReadsEveryExampleAndTestModel) {
  std::vector<std::string> Files = filesUnder(MDPLAN_EXAMPLES_DIR, ".mdg");
  ASSERT_GE(Files.size(), 4u);
  for (const std::string &F : filesUnder(MDPLAN_TEST_DIR, ".mdg"))
    Files.push_back(F);
  unsigned Accepted = 0;
  for (const std::string &F : Files) {
    Outcome O = check(contents(F));
    EXPECT_EQ(O.Difference, "") << F;
    Accepted += O.Accepted;
    // The examples are what mdplan users write: the fast path reads them.
    if (llvm::StringRef(F).startswith(MDPLAN_EXAMPLES_DIR)) {
      EXPECT_TRUE(O.Accepted) << F;
    }
  }
  // Some test models are malformed on purpose; most are not.
  EXPECT_GT(Accepted, Files.size() / 2);
}

/// What mdplan writes (`--emit=graph`) is in the part the fast path reads,
/// also after the training passes (gradients, optimizer, transfers).
TEST(TextParserTest, ReadsWhatTheWriterWrites) {
  for (const std::string &F : filesUnder(MDPLAN_EXAMPLES_DIR, ".mdg")) {
    auto G = readModelFile(F, {});
    ASSERT_TRUE(bool(G)) << errorMessage(G.takeError());
    for (bool Trained : {false, true}) {
      if (Trained) {
        DeploymentConfig C;
        C.CloneOnCPU = true;
        PassContext Ctx(C);
        PassManager PM;
        ASSERT_FALSE(bool(PM.parsePipeline(defaultPipeline())));
        llvm::Error E = PM.run(**G, Ctx);
        ASSERT_FALSE(bool(E)) << errorMessage(std::move(E));
      }
      std::string Text;
      llvm::raw_string_ostream OS(Text);
      writeModel(**G, OS);
      OS.flush();
      Outcome O = check(Text);
      EXPECT_TRUE(O.Accepted) << F << (Trained ? " (trained)" : "");
      EXPECT_EQ(O.Difference, "") << F;
    }
  }
}

TEST(TextParserTest, ReadsDeploymentConfigs) {
  std::vector<std::string> Files =
      filesUnder(MDPLAN_TEST_DIR "/Fuzz/Inputs/deploy", ".cfg");
  ASSERT_FALSE(Files.empty());
  unsigned Accepted = 0;
  for (const std::string &F : Files) {
    Outcome O = check(contents(F), TextFileKind::Deployment);
    EXPECT_EQ(O.Difference, "") << F;
    Accepted += O.Accepted;
  }
  // One gives an enum as a number, which protobuf's parser reads.
  EXPECT_GE(Accepted, Files.size() - 1);
  Outcome O = check("num_clones: 2\tstrategy: 'mirrored'\n"
                    "optimizer < kind: ADAM learning_rate: 1e-3 >\n"
                    "soft_placement: t; clone_on_cpu: False,\n",
                    TextFileKind::Deployment);
  EXPECT_TRUE(O.Accepted);
  EXPECT_EQ(O.Difference, "");
}

/// Texts in the part of the format the fast path reads.
TEST(TextParserTest, ReadsEachConstruct) {
  const char *Texts[] = {
      // Whitespace, comments, tabs before fields (columns advance to the
      // next multiple of 8), CR LF line ends, separators.
      "# a comment\nname: \"m\" # after\n\tnode { name: 'a' op: \"Input\" }\n",
      "name:\"m\";node{name:\"a\"\top:\"Relu\",input:\"x\";}\r\nloss:\"a\"",
      " \t \tnode {\n\t name: \"a\"\n  \t\top: \"Add\" }",
      "\v\fname: \"m\"",
      // Message delimiters, an optional colon, empty messages.
      "node: < name: \"a\" > node: {} node <>",
      "training { }",
      // Lists: of strings, numbers, messages, empty.
      "node { input: [\"a\", 'b' , \"c\"] input: [] input: \"d\" }",
      "node { variable { shape: [1, 2,3] } }",
      "node: [ { name: \"a\" }, < name: \"b\" > ] node []",
      "node { attr { ints: [-1, 0, 9223372036854775807] floats: [1, .5, 2.] "
      "strings: [] } }",
      // Adjacent string literals.
      "name: \"a\" 'b' \"\"  # three literals\n",
      "name: \"x\"\n  \"y\"",
      // Integers and doubles at their edges.
      "training { batch_size: -9223372036854775808 }",
      "training { batch_size: 0 optimizer { decay_steps: -0 } }",
      "training { optimizer { learning_rate: 0.1 momentum: -0.0 beta1: 1e-3 "
      "beta2: 2.5E+10 epsilon: 123456789012345678 decay_rate: .25 } }",
      "training { optimizer { learning_rate: 1. beta1: 4.9e-324 "
      "beta2: 1.7976931348623157e308 epsilon: 0.30000000000000004 } }",
      "node { attr { f: 3.14159265358979323846264338 i: -42 } }",
      // Bools and enums.
      "node { attr { b: true } attr { b: True } attr { b: t } attr { b: 0 } "
      "attr { b: 1 } attr { b: false } attr { b: False } attr { b: f } }",
      "node { variable { dtype: INT64 initializer { kind: ZEROS } } }",
      "training { optimizer { kind: MOMENTUM nesterov: true } }",
      // A oneof member; proto3 optional fields set to their defaults.
      "scope { name: \"s\" role: VARIABLES scope { clear: false } }",
      "node { attr { i: 0 f: 0 s: \"\" } variable { trainable: false } }",
      // Nothing at all.
      "",
      "  # only a comment",
  };
  for (const char *T : Texts) {
    Outcome O = check(T);
    EXPECT_TRUE(O.Accepted) << T;
    EXPECT_EQ(O.Difference, "") << T;
  }
}

/// Texts the fast path leaves to protobuf's parser: some valid for it,
/// some errors (which only protobuf's parser reports).
TEST(TextParserTest, DeclinesTheRest) {
  const char *Texts[] = {
      // Valid for protobuf's parser.
      "name: \"esc\\n\"",
      "name: \"\\x41\"",
      "name: \"caf\xc3\xa9\"",
      "name: \"tab\there\"",
      "training { batch_size: 0x10 }",
      "training { batch_size: 010 }",
      "training { batch_size: - 5 }",
      "training { optimizer { learning_rate: inf } }",
      "training { optimizer { learning_rate: -nan } }",
      "training { optimizer { learning_rate: 1.5f } }",
      "training { optimizer { learning_rate: 1e999 } }",
      "training { optimizer { learning_rate: 1234567890123456789 } }",
      "node { variable { dtype: 3 } }",
      "node { attr { b: 0x1 } }",
      "Node { name: \"a\" }",
      "training { batch_size: 1 batch_size: 2 }",
      // Errors.
      "nme: \"x\"",
      "name \"x\"",
      "name: x",
      "name: \"x",
      "node {",
      "node { name: \"a\" ]",
      "training { batch_size: 1.5 }",
      "training { batch_size: 9223372036854775808 }",
      "node { attr { type: NOT_A_TYPE } }",
      "node { attr { b: yes } }",
      "scope { device: \"/cpu:0\" clear: true }",
      "node { input: [\"a\" \"b\"",
      "[ext.field]: 1",
      "name: \"a\" ,, node {}",
      "training { batch_size: 5x }",
      "training { optimizer { learning_rate: 1e } }",
      "training { optimizer { learning_rate: 1.2.3 } }",
      "\xef\xbb\xbfname: \"m\"",
      "name: \"a\"\n\"b\"\nc",
      "node { attr { b: 2 } }",
  };
  for (const char *T : Texts) {
    Outcome O = check(T);
    EXPECT_FALSE(O.Accepted) << T;
    EXPECT_EQ(O.Difference, "") << T;
  }
}

/// Nesting: the fast path reads deep scope nests, below the limit.
TEST(TextParserTest, DeepNesting) {
  std::string Deep;
  for (int I = 0; I < 900; ++I)
    Deep += "scope { name: \"s\" ";
  Deep += "node { name: \"a\" op: \"Input\" }";
  for (int I = 0; I < 900; ++I)
    Deep += "}";
  Outcome O = check(Deep);
  EXPECT_TRUE(O.Accepted);
  EXPECT_EQ(O.Difference, "");

  std::string TooDeep;
  for (int I = 0; I < 1001; ++I)
    TooDeep += "scope {";
  TooDeep += std::string(1001, '}');
  O = check(TooDeep);
  EXPECT_FALSE(O.Accepted);
}

/// A random text over the model's schema: mostly well formed, with the
/// whitespace, number, string and structure variants of the format, valid
/// and not, mixed in.
class RandomText {
public:
  explicit RandomText(unsigned Seed) : Rng(Seed) {}

  std::string model() {
    Out.clear();
    Depth = 0;
    unsigned N = pick(6);
    for (unsigned I = 0; I < N; ++I)
      modelField();
    space();
    return Out;
  }

private:
  unsigned pick(unsigned N) {
    return std::uniform_int_distribution<>(0, N - 1)(Rng);
  }
  bool chance(unsigned Percent) { return pick(100) < Percent; }
  template <size_t N> const char *oneOf(const char *const (&A)[N]) {
    return A[pick(N)];
  }

  void space() {
    static const char *const Spaces[] = {
        " ",    " ",         " ", "\n",    "\t", "  \t ", "\t\t",
        "\r\n", " # note\n", "",  "\n\t ", "\v", "\f",    "#\x01\n"};
    if (chance(1)) { // NUL bytes: in a comment, or alone.
      Out += chance(50) ? std::string("# a\0b\n", 6) : std::string(1, '\0');
      return;
    }
    Out += oneOf(Spaces);
  }
  void name(const char *Field) {
    space();
    Out += chance(2) ? "nmae" : Field;
  }
  void colon(bool Message) {
    space();
    if (Message ? chance(50) : !chance(2))
      Out += ":";
    space();
  }
  void separator() {
    static const char *const Seps[] = {"", "", "", ";", ",", ";;"};
    Out += oneOf(Seps);
  }

  void string() {
    static const char *const Strings[] = {
        "\"a\"",          "'b'",       "\"l0/w\"",
        "\"\"",           "\"x\" 'y'", "\"sp ace\"",
        "\"esc\\n\"",     "\"\\x41\"", "\"caf\xc3\xa9\"",
        "\"unterminated", "'mixed\"",  "\"a\"\n\"b\"",
        "\"tab\tin\"",    "bare"};
    Out += oneOf(Strings);
  }
  void integer() {
    static const char *const Ints[] = {"0",
                                       "7",
                                       "-12",
                                       "-0",
                                       "2147483647",
                                       "2147483648",
                                       "-2147483648",
                                       "9223372036854775807",
                                       "-9223372036854775808",
                                       "9223372036854775808",
                                       "010",
                                       "0x1F",
                                       "1.5",
                                       "1e3",
                                       "- 5",
                                       "5x",
                                       "00",
                                       "08",
                                       "-"};
    Out += oneOf(Ints);
  }
  void floating() {
    static const char *const Doubles[] = {"0",
                                          "1",
                                          "-1",
                                          ".5",
                                          "1.",
                                          "1e-3",
                                          "2.5E+10",
                                          "0.1",
                                          "-0.0",
                                          "3.14159265358979323846",
                                          "123456789012345678",
                                          "1234567890123456789",
                                          "99999999999999999999",
                                          "1e400",
                                          "1e-400",
                                          "4.9e-324",
                                          "2.2250738585072011e-308",
                                          "inf",
                                          "-nan",
                                          "1.5f",
                                          "00.5",
                                          "1e",
                                          "1.2.3",
                                          "0x10",
                                          "07",
                                          ".",
                                          "-.5",
                                          "5e+",
                                          "1_0"};
    Out += oneOf(Doubles);
  }
  void boolean() {
    static const char *const Bools[] = {"true",  "True", "t",    "false",
                                        "False", "f",    "0",    "1",
                                        "2",     "yes",  "TRUE", "0x1"};
    Out += oneOf(Bools);
  }
  void enumValue(const char *const *Values, unsigned N) {
    if (chance(85))
      Out += Values[pick(N)];
    else
      Out += chance(50) ? "3" : "NOPE";
  }

  template <typename F> void scalar(const char *Field, bool Repeated, F Value) {
    name(Field);
    colon(false);
    if (Repeated && chance(30)) {
      Out += "[";
      unsigned N = pick(4);
      for (unsigned I = 0; I < N; ++I) {
        if (I)
          Out += chance(95) ? "," : "";
        space();
        Value();
      }
      space();
      Out += chance(97) ? "]" : "";
    } else {
      Value();
    }
    separator();
  }

  template <typename F> void message(const char *Field, bool Repeated, F Body) {
    name(Field);
    colon(true);
    if (Depth > 6) {
      Out += "{}";
      return;
    }
    ++Depth;
    auto One = [&] {
      bool Angle = chance(15);
      Out += Angle ? "<" : "{";
      Body();
      space();
      if (chance(98))
        Out += Angle ? ">" : "}";
    };
    if (Repeated && chance(15)) {
      Out += "[";
      unsigned N = pick(3);
      for (unsigned I = 0; I < N; ++I) {
        if (I)
          Out += ",";
        space();
        One();
      }
      Out += "]";
    } else {
      One();
    }
    --Depth;
    separator();
  }

  void attr() {
    static const char *const Types[] = {"FLOAT32", "FLOAT64", "INT32", "INT64",
                                        "BOOL"};
    unsigned N = 1 + pick(3);
    for (unsigned I = 0; I < N; ++I) {
      switch (pick(9)) {
      case 0:
        scalar("name", false, [&] { string(); });
        break;
      case 1:
        scalar("i", false, [&] { integer(); });
        break;
      case 2:
        scalar("f", false, [&] { floating(); });
        break;
      case 3:
        scalar("b", false, [&] { boolean(); });
        break;
      case 4:
        scalar("s", false, [&] { string(); });
        break;
      case 5:
        scalar("type", false, [&] { enumValue(Types, 5); });
        break;
      case 6:
        scalar("ints", true, [&] { integer(); });
        break;
      case 7:
        scalar("floats", true, [&] { floating(); });
        break;
      default:
        message("shape", false,
                [&] { scalar("dim", true, [&] { integer(); }); });
      }
    }
  }

  void node() {
    static const char *const Kinds[] = {"GLOROT_UNIFORM", "ZEROS", "ONES",
                                        "CONSTANT", "NORMAL"};
    static const char *const Types[] = {"FLOAT32", "INT32", "INT64"};
    unsigned N = 1 + pick(4);
    for (unsigned I = 0; I < N; ++I) {
      switch (pick(7)) {
      case 0:
        scalar("name", false, [&] { string(); });
        break;
      case 1:
        scalar("op", false, [&] { string(); });
        break;
      case 2:
        scalar("input", true, [&] { string(); });
        break;
      case 3:
        message("attr", true, [&] { attr(); });
        break;
      case 4:
        scalar("device", false, [&] { string(); });
        break;
      case 5:
        message("variable", false, [&] {
          scalar("shape", true, [&] { integer(); });
          if (chance(50))
            scalar("dtype", false, [&] { enumValue(Types, 3); });
          if (chance(50))
            message("initializer", false, [&] {
              scalar("kind", false, [&] { enumValue(Kinds, 5); });
              if (chance(50))
                scalar("stddev", false, [&] { floating(); });
            });
          if (chance(30))
            scalar("trainable", false, [&] { boolean(); });
        });
        break;
      default:
        message("data", false, [&] {
          scalar("feature", false, [&] { string(); });
          scalar("shape", true, [&] { integer(); });
        });
      }
    }
  }

  void scope() {
    static const char *const Roles[] = {"INPUTS", "VARIABLES", "OPTIMIZER"};
    scalar("name", false, [&] { string(); });
    switch (pick(5)) {
    case 0:
      scalar("device", false, [&] { string(); });
      break;
    case 1:
      scalar("clear", false, [&] { boolean(); });
      break;
    case 2:
      scalar("role", false, [&] { enumValue(Roles, 3); });
      break;
    default:
      break;
    }
    if (chance(10)) // A second member of the oneof.
      scalar("clear", false, [&] { boolean(); });
    unsigned N = pick(3);
    for (unsigned I = 0; I < N; ++I) {
      if (chance(70))
        message("node", true, [&] { node(); });
      else
        message("scope", true, [&] { scope(); });
    }
  }

  void modelField() {
    static const char *const Opts[] = {"SGD", "MOMENTUM", "ADAM"};
    switch (pick(7)) {
    case 0:
      scalar("name", false, [&] { string(); });
      break;
    case 1:
    case 2:
      message("node", true, [&] { node(); });
      break;
    case 3:
      message("scope", true, [&] { scope(); });
      break;
    case 4:
      scalar("loss", true, [&] { string(); });
      break;
    case 5:
      message("output", true, [&] {
        scalar("name", false, [&] { string(); });
        scalar("tensor", false, [&] { string(); });
      });
      break;
    default:
      message("training", false, [&] {
        if (chance(60))
          scalar("batch_size", false, [&] { integer(); });
        message("optimizer", false, [&] {
          scalar("kind", false, [&] { enumValue(Opts, 3); });
          scalar("learning_rate", false, [&] { floating(); });
          if (chance(40))
            scalar("decay_steps", false, [&] { integer(); });
        });
      });
    }
  }

  std::mt19937 Rng;
  std::string Out;
  unsigned Depth = 0;
};

TEST(TextParserTest, AgreesOnRandomTexts) {
  RandomText Gen(20261127);
  unsigned Accepted = 0, Total = 3000;
  for (unsigned I = 0; I < Total; ++I) {
    std::string T = Gen.model();
    Outcome O = check(T);
    ASSERT_EQ(O.Difference, "") << "text " << I << ":\n" << T;
    Accepted += O.Accepted;
  }
  // Both outcomes are exercised.
  EXPECT_GT(Accepted, Total / 10);
  EXPECT_LT(Accepted, Total * 9 / 10);
}

} // namespace
