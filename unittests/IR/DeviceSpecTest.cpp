//===- DeviceSpecTest.cpp - Device spec parsing, printing, merging --------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// semantics.md section 1: every form a device spec parses from, the
// canonical form, merging field by field, and the parse errors.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeviceSpec.h"
#include "mdplan/Support/Diagnostic.h"

#include "gtest/gtest.h"

using namespace mdplan;

namespace {

/// The canonical form of \p S, or "<error: message>".
std::string canon(llvm::StringRef S) {
  auto D = DeviceSpec::parse(S);
  if (!D)
    return "<error: " + errorMessage(D.takeError()) + ">";
  return D->toString();
}

/// The parse error of \p S, or "<no error>".
std::string parseError(llvm::StringRef S) {
  auto D = DeviceSpec::parse(S);
  if (D)
    return "<no error>";
  return errorMessage(D.takeError());
}

DeviceSpec spec(llvm::StringRef S) {
  auto D = DeviceSpec::parse(S);
  if (!D) {
    ADD_FAILURE() << "cannot parse '" << S.str()
                  << "': " << errorMessage(D.takeError());
    return DeviceSpec();
  }
  return *D;
}

//===----------------------------------------------------------------------===//
// Canonical form
//===----------------------------------------------------------------------===//

TEST(DeviceSpecTest, SemanticsExamples) {
  // Every example line of semantics.md section 1.
  EXPECT_EQ(canon("/cpu:0"), "/device:CPU:0");
  EXPECT_EQ(canon("/replica:0/job:foo"), "/job:foo/replica:0");
  EXPECT_EQ(canon("/job:ps/device:CPU:0/task:0"),
            "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(canon("gpu"), "/device:GPU:*");
}

TEST(DeviceSpecTest, EmptySpecPrintsEmpty) {
  EXPECT_EQ(canon(""), "");
  EXPECT_EQ(canon("/"), "");
  EXPECT_EQ(canon("///"), "");
  EXPECT_TRUE(spec("").empty());
  EXPECT_EQ(DeviceSpec().toString(), "");
}

TEST(DeviceSpecTest, FullSpecCanonicalOrder) {
  EXPECT_EQ(canon("/job:worker/replica:1/task:2/device:GPU:3"),
            "/job:worker/replica:1/task:2/device:GPU:3");
  // Every permutation prints in the one canonical order.
  EXPECT_EQ(canon("/device:GPU:3/task:2/replica:1/job:worker"),
            "/job:worker/replica:1/task:2/device:GPU:3");
  EXPECT_EQ(canon("/task:2/job:worker/device:GPU:3/replica:1"),
            "/job:worker/replica:1/task:2/device:GPU:3");
  EXPECT_EQ(canon("/replica:1/device:GPU:3/job:worker/task:2"),
            "/job:worker/replica:1/task:2/device:GPU:3");
}

TEST(DeviceSpecTest, MissingFieldsLeftOut) {
  EXPECT_EQ(canon("/job:ps"), "/job:ps");
  EXPECT_EQ(canon("/task:3"), "/task:3");
  EXPECT_EQ(canon("/replica:0"), "/replica:0");
  EXPECT_EQ(canon("/job:ps/task:1"), "/job:ps/task:1");
  EXPECT_EQ(canon("/task:1/device:CPU:0"), "/task:1/device:CPU:0");
}

TEST(DeviceSpecTest, TypeWithoutIndexPrintsStar) {
  EXPECT_EQ(canon("/device:GPU"), "/device:GPU:*");
  EXPECT_EQ(canon("/device:GPU:*"), "/device:GPU:*");
  EXPECT_EQ(canon("/job:w/device:CPU"), "/job:w/device:CPU:*");
  DeviceSpec D = spec("/device:GPU:*");
  EXPECT_EQ(D.Type, std::optional<std::string>("GPU"));
  EXPECT_FALSE(D.Index.has_value());
}

TEST(DeviceSpecTest, CanonicalFormReparsesToItself) {
  for (const char *S :
       {"/cpu:0", "gpu", "/job:a/replica:0/task:7/device:GPU:5",
        "/device:TPU:*", "/job:ps/task:0", "CPU:0", "/gpu:*/job:x"}) {
    std::string C = canon(S);
    EXPECT_EQ(canon(C), C) << S;
    EXPECT_EQ(spec(C), spec(S)) << S;
  }
}

//===----------------------------------------------------------------------===//
// Parsing: every form
//===----------------------------------------------------------------------===//

TEST(DeviceSpecTest, LegacyShortForms) {
  EXPECT_EQ(canon("/cpu:0"), "/device:CPU:0");
  EXPECT_EQ(canon("/gpu:1"), "/device:GPU:1");
  EXPECT_EQ(canon("gpu:1"), "/device:GPU:1");
  EXPECT_EQ(canon("/CPU:0"), "/device:CPU:0");
  EXPECT_EQ(canon("/GPU:2"), "/device:GPU:2");
  EXPECT_EQ(canon("/gpu"), "/device:GPU:*");
  EXPECT_EQ(canon("gpu"), "/device:GPU:*");
  EXPECT_EQ(canon("/gpu:*"), "/device:GPU:*");
  EXPECT_EQ(canon("gpu:*"), "/device:GPU:*");
  EXPECT_EQ(canon("/Cpu:0"), "/device:CPU:0");
}

TEST(DeviceSpecTest, BareFormWithoutSlash) {
  EXPECT_EQ(canon("CPU:0"), "/device:CPU:0");
  EXPECT_EQ(canon("cpu:0"), "/device:CPU:0");
  EXPECT_EQ(canon("job:ps/task:1"), "/job:ps/task:1");
  EXPECT_EQ(canon("device:GPU:0"), "/device:GPU:0");
}

TEST(DeviceSpecTest, DeviceTypeIsUpperCased) {
  EXPECT_EQ(canon("/device:gpu:0"), "/device:GPU:0");
  EXPECT_EQ(canon("/device:cpu"), "/device:CPU:*");
  DeviceSpec D = spec("/gpu:1");
  EXPECT_EQ(D.Type, std::optional<std::string>("GPU"));
  EXPECT_EQ(D.Index, std::optional<int>(1));
}

TEST(DeviceSpecTest, OtherUpperCaseTypes) {
  EXPECT_EQ(canon("/device:TPU:1"), "/device:TPU:1");
  EXPECT_EQ(canon("/TPU:1"), "/device:TPU:1");
  EXPECT_EQ(canon("/XLA_GPU:0"), "/device:XLA_GPU:0");
}

TEST(DeviceSpecTest, LegacyFormsInAnyOrderWithOtherFields) {
  EXPECT_EQ(canon("/gpu:1/job:worker/task:2"),
            "/job:worker/task:2/device:GPU:1");
  EXPECT_EQ(canon("/task:0/cpu:0/job:ps"), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(canon("/job:ps/CPU:0"), "/job:ps/device:CPU:0");
}

TEST(DeviceSpecTest, EmptyPiecesIgnored) {
  EXPECT_EQ(canon("//job:ps//task:1/"), "/job:ps/task:1");
  EXPECT_EQ(canon("/cpu:0/"), "/device:CPU:0");
}

TEST(DeviceSpecTest, FieldsSet) {
  DeviceSpec D = spec("/job:worker/replica:1/task:2/device:GPU:3");
  EXPECT_EQ(D.Job, std::optional<std::string>("worker"));
  EXPECT_EQ(D.Replica, std::optional<int>(1));
  EXPECT_EQ(D.Task, std::optional<int>(2));
  EXPECT_EQ(D.Type, std::optional<std::string>("GPU"));
  EXPECT_EQ(D.Index, std::optional<int>(3));
  EXPECT_TRUE(D.isComplete());
  EXPECT_FALSE(D.empty());
  EXPECT_FALSE(spec("/job:w/task:0/device:GPU:*").isComplete());
  EXPECT_FALSE(spec("/job:w/replica:0/task:0/device:GPU:0").empty());
}

TEST(DeviceSpecTest, IsSatisfiedBy) {
  DeviceSpec Full = spec("/job:worker/replica:0/task:1/device:GPU:2");
  EXPECT_TRUE(DeviceSpec().isSatisfiedBy(Full));
  EXPECT_TRUE(spec("/gpu:2").isSatisfiedBy(Full));
  EXPECT_TRUE(spec("/gpu").isSatisfiedBy(Full));
  EXPECT_TRUE(spec("/job:worker/task:1").isSatisfiedBy(Full));
  EXPECT_FALSE(spec("/gpu:1").isSatisfiedBy(Full));
  EXPECT_FALSE(spec("/cpu:0").isSatisfiedBy(Full));
  EXPECT_FALSE(spec("/job:ps").isSatisfiedBy(Full));
  EXPECT_FALSE(spec("/task:0").isSatisfiedBy(Full));
}

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

TEST(DeviceSpecTest, MergeTypeAndIndexAreSeparate) {
  // semantics.md: outer /device:CPU:1 + inner /gpu = /device:GPU:1.
  EXPECT_EQ(DeviceSpec::merge(spec("/device:CPU:1"), spec("/gpu")).toString(),
            "/device:GPU:1");
  // And the other way round: an inner index without a type.
  EXPECT_EQ(DeviceSpec::merge(spec("/gpu"), spec("/cpu:0")).toString(),
            "/device:CPU:0");
}

TEST(DeviceSpecTest, MergeInnerWinsFieldByField) {
  DeviceSpec Outer = spec("/job:worker/replica:0/task:1/device:GPU:0");
  EXPECT_EQ(DeviceSpec::merge(Outer, spec("/job:ps")).toString(),
            "/job:ps/replica:0/task:1/device:GPU:0");
  EXPECT_EQ(DeviceSpec::merge(Outer, spec("/task:3")).toString(),
            "/job:worker/replica:0/task:3/device:GPU:0");
  EXPECT_EQ(DeviceSpec::merge(Outer, spec("/replica:2")).toString(),
            "/job:worker/replica:2/task:1/device:GPU:0");
  EXPECT_EQ(DeviceSpec::merge(Outer, spec("/cpu:0")).toString(),
            "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(DeviceSpec::merge(Outer, spec("/gpu:3")).toString(),
            "/job:worker/replica:0/task:1/device:GPU:3");
}

TEST(DeviceSpecTest, MergeOuterFillsMissing) {
  EXPECT_EQ(
      DeviceSpec::merge(spec("/job:worker/task:0"), spec("/gpu:1")).toString(),
      "/job:worker/task:0/device:GPU:1");
  EXPECT_EQ(DeviceSpec::merge(spec("/job:ps/device:CPU:0"), spec("/task:1"))
                .toString(),
            "/job:ps/task:1/device:CPU:0");
}

TEST(DeviceSpecTest, MergeWithEmpty) {
  DeviceSpec D = spec("/job:ps/task:1/device:CPU:0");
  EXPECT_EQ(DeviceSpec::merge(D, DeviceSpec()), D);
  EXPECT_EQ(DeviceSpec::merge(DeviceSpec(), D), D);
  EXPECT_TRUE(DeviceSpec::merge(DeviceSpec(), DeviceSpec()).empty());
}

TEST(DeviceSpecTest, MergeIndexOnlyStarKeepsOuterIndex) {
  // `gpu:*` leaves the index unset, so the outer index stays.
  EXPECT_EQ(DeviceSpec::merge(spec("/gpu:2"), spec("/gpu:*")).toString(),
            "/device:GPU:2");
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(DeviceSpecTest, ErrorTwoDeviceTypes) {
  EXPECT_EQ(parseError("/cpu:0/device:GPU:2"),
            "two device types ('CPU' and 'GPU') in device "
            "'/cpu:0/device:GPU:2'");
  EXPECT_EQ(parseError("/gpu:0/cpu:0"),
            "two device types ('GPU' and 'CPU') in device '/gpu:0/cpu:0'");
}

TEST(DeviceSpecTest, ErrorUnknownKey) {
  EXPECT_EQ(parseError("/foo:1"), "unknown field 'foo' in device '/foo:1'");
  EXPECT_EQ(parseError("/job:ps/machine:1"),
            "unknown field 'machine' in device '/job:ps/machine:1'");
}

TEST(DeviceSpecTest, ErrorBadInteger) {
  EXPECT_EQ(parseError("/task:x"),
            "'task' must be a non-negative integer, got 'x' in device "
            "'/task:x'");
  EXPECT_EQ(parseError("/replica:1.5"),
            "'replica' must be a non-negative integer, got '1.5' in device "
            "'/replica:1.5'");
  EXPECT_EQ(parseError("/task:-1"),
            "'task' must be a non-negative integer, got '-1' in device "
            "'/task:-1'");
  EXPECT_EQ(parseError("/task:"),
            "'task' must be a non-negative integer, got '' in device "
            "'/task:'");
  EXPECT_EQ(parseError("/device:GPU:a"),
            "'device index' must be a non-negative integer, got 'a' in "
            "device '/device:GPU:a'");
  EXPECT_EQ(parseError("/gpu:one"),
            "'device index' must be a non-negative integer, got 'one' in "
            "device '/gpu:one'");
  // Too large to be an index.
  EXPECT_EQ(parseError("/task:99999999999999999999"),
            "'task' 99999999999999999999 is out of range (at most "
            "1073741824) in device '/task:99999999999999999999'");
  EXPECT_EQ(parseError("/gpu:1073741825"),
            "'device index' 1073741825 is out of range (at most 1073741824) "
            "in device '/gpu:1073741825'");
  EXPECT_EQ(parseError("/gpu:1073741824"), "<no error>");
}

TEST(DeviceSpecTest, ErrorFieldGivenTwice) {
  EXPECT_EQ(parseError("/job:a/job:b"), "'job' given twice in device "
                                        "'/job:a/job:b'");
  EXPECT_EQ(parseError("/task:0/task:1"),
            "'task' given twice in device '/task:0/task:1'");
  EXPECT_EQ(parseError("/replica:0/replica:0"),
            "'replica' given twice in device '/replica:0/replica:0'");
  EXPECT_EQ(parseError("/gpu:0/device:GPU:1"),
            "device type given twice in device '/gpu:0/device:GPU:1'");
}

TEST(DeviceSpecTest, ErrorMalformedPieces) {
  EXPECT_EQ(parseError("/job:a:b"), "malformed field 'job:a:b' in device "
                                    "'/job:a:b'");
  EXPECT_EQ(parseError("/job:"), "empty job name in device '/job:'");
  EXPECT_EQ(parseError("/device:GPU:0:1"),
            "malformed field 'device:GPU:0:1' in device '/device:GPU:0:1'");
  EXPECT_EQ(parseError("/device:"), "empty device type in device '/device:'");
  EXPECT_EQ(parseError("/device:*:0"),
            "device type may not be '*' in device '/device:*:0'");
  EXPECT_EQ(parseError("/gpu:0:1"),
            "malformed field 'gpu:0:1' in device '/gpu:0:1'");
}

TEST(DeviceSpecTest, ErrorsHaveNoLocation) {
  auto D = DeviceSpec::parse("/foo:1");
  ASSERT_FALSE(bool(D));
  std::string Printed;
  llvm::raw_string_ostream OS(Printed);
  printErrors(D.takeError(), OS);
  EXPECT_EQ(OS.str(), "error: unknown field 'foo' in device '/foo:1'\n");
}

} // namespace
