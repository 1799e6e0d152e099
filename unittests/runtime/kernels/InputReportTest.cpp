//===- InputReportTest.cpp - GPU kernels' reports of bad inputs -----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The packing of runtime/lib/cuda/InputReport.h, host and device code: the
// smallest report is the first row's, and the label reads back as written
// (clamped to int32, which the message says).
//
//===----------------------------------------------------------------------===//

#include "cuda/InputReport.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace mdrt::cuda;

namespace {

TEST(InputReport, RoundTrips) {
  for (int64_t Row : {int64_t(0), int64_t(1), int64_t(4095), MaxReportRow})
    for (int64_t Label : {int64_t(-1), int64_t(0), int64_t(3), int64_t(10),
                          int64_t(INT32_MAX) - 1, int64_t(INT32_MIN) + 1}) {
      LabelReport R = unpackLabelReport(packLabelReport(Row, Label));
      EXPECT_EQ(R.Row, Row);
      EXPECT_EQ(R.Label, Label);
      EXPECT_FALSE(R.Clamped) << Row << " " << Label;
    }
  EXPECT_NE(packLabelReport(MaxReportRow, -1), NoReport);
}

TEST(InputReport, ClampsLabelsBeyondInt32) {
  LabelReport Big = unpackLabelReport(packLabelReport(7, int64_t(1) << 40));
  EXPECT_EQ(Big.Row, 7);
  EXPECT_EQ(Big.Label, INT32_MAX);
  EXPECT_TRUE(Big.Clamped);
  LabelReport Small =
      unpackLabelReport(packLabelReport(7, -(int64_t(1) << 40)));
  EXPECT_EQ(Small.Label, INT32_MIN);
  EXPECT_TRUE(Small.Clamped);
}

TEST(InputReport, SmallestIsTheFirstRow) {
  // What atomicMin keeps of several rows' reports, whatever their labels.
  std::vector<uint64_t> Reports = {
      packLabelReport(9, -5), packLabelReport(3, 1000), packLabelReport(3, -7),
      packLabelReport(12, 0), packLabelReport(4, INT32_MIN)};
  uint64_t Min = NoReport;
  for (uint64_t V : Reports)
    Min = std::min(Min, V);
  EXPECT_EQ(unpackLabelReport(Min).Row, 3);
}

} // namespace
