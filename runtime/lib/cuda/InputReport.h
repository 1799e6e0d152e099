//===- InputReport.h - Inputs GPU kernels cannot compute with ---*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Host and device code. A GPU kernel that finds an input it cannot compute
// with (SparseSoftmaxCrossEntropy's label outside the logits' classes)
// writes NaN, as before, and reports the first such row in one 64-bit word
// of device memory with atomicMin; an 8-byte copy to page-locked memory
// after the kernel (ReportWord, CudaCommon.h), also in a replayed CUDA
// graph, lets the host read it after the step, and the step then fails as
// the CPU kernel's does, naming the label and the example.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CUDA_INPUTREPORT_H
#define MDRT_LIB_CUDA_INPUTREPORT_H

#include "mdrt/HostDevice.h"

#include <cstdint>

namespace mdrt {
namespace cuda {

/// The word's value while nothing is reported.
constexpr uint64_t NoReport = ~uint64_t(0);

/// The largest row a report can name (rows are the high 32 bits).
constexpr int64_t MaxReportRow = int64_t(UINT32_MAX) - 1;

/// Row \p Row's label \p Label as a report: the row in the high 32 bits,
/// so the smallest report is the first row's (as the CPU kernel reports
/// the first example); the label, clamped to int32, in the low ones.
MDRT_HOST_DEVICE inline uint64_t packLabelReport(int64_t Row, int64_t Label) {
  int64_t L = Label < INT32_MIN   ? INT32_MIN
              : Label > INT32_MAX ? INT32_MAX
                                  : Label;
  return (uint64_t(Row) << 32) | uint64_t(uint32_t(int32_t(L)));
}

/// A report read back.
struct LabelReport {
  int64_t Row = 0;
  int64_t Label = 0;
  /// The label was at least INT32_MAX (or at most INT32_MIN, with a
  /// negative Label): the report holds the bound.
  bool Clamped = false;
};

inline LabelReport unpackLabelReport(uint64_t V) {
  LabelReport R;
  R.Row = int64_t(V >> 32);
  R.Label = int32_t(uint32_t(V & 0xffffffffu));
  R.Clamped = R.Label == INT32_MAX || R.Label == INT32_MIN;
  return R;
}

} // namespace cuda
} // namespace mdrt

#endif // MDRT_LIB_CUDA_INPUTREPORT_H
