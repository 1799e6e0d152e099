//===- Plumbing.cpp - Copies, boxes and casts -----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Copies (any element type): Identity, Reshape, BatchSlice, and the box
// copies of Concat, Slice and Pad; and Cast's conversions. A copy onto
// itself (the executor may alias a Reshape's output with its input) does
// nothing.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <cstring>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

/// Copies Bytes bytes from input 0 at Offset to output 0.
class CopyKernel : public Kernel {
public:
  CopyKernel(size_t Offset, size_t Bytes, int Threads)
      : Offset(Offset), Bytes(Bytes), Threads(Threads) {}

  void run(const ExecContext &C) override {
    const char *Src = static_cast<const char *>(C.In[0]) + Offset;
    char *Dst = static_cast<char *>(C.Out[0]);
    if (Src == Dst || !Bytes)
      return;
    // Large copies go faster on several cores.
    parallelFor(int64_t(Bytes), int64_t(1) << 20, Threads,
                [&](int64_t B, int64_t E) {
                  std::memcpy(Dst + B, Src + B, size_t(E - B));
                });
  }

private:
  size_t Offset, Bytes;
  int Threads;
};

KernelOr createCopy(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  if (I.Inputs[0].Type != I.Outputs[0].Type)
    return Status::error("output " + I.Outputs[0].str() +
                         " differs in element type from input " +
                         I.Inputs[0].str());
  MDRT_RETURN_IF_ERROR(
      checkElements(I, I.Outputs[0], I.Inputs[0].numElements(), "output"));
  return wrap(
      std::make_unique<CopyKernel>(0, I.Outputs[0].bytes(), I.NumThreads));
}

KernelOr createBatchSlice(const KernelInfo &I) {
  size_t Offset = 0;
  MDRT_RETURN_IF_ERROR(batchSliceOffset(I, Offset));
  return wrap(
      std::make_unique<CopyKernel>(Offset, I.Outputs[0].bytes(), I.NumThreads));
}

//===----------------------------------------------------------------------===//
// Concat, Slice, Pad
//===----------------------------------------------------------------------===//

/// Copies box K of elements of ElemSize bytes from input K to the output
/// (Concat: a box per input; Slice and Pad: one); with \p Zero, the output
/// is zeroed first (Pad).
class BoxCopyKernel : public Kernel {
public:
  BoxCopyKernel(std::vector<CopyBox> Boxes, size_t ElemSize, size_t OutBytes,
                bool Zero, int Threads)
      : Boxes(std::move(Boxes)), ElemSize(ElemSize), OutBytes(OutBytes),
        Zero(Zero), Threads(Threads) {}

  void run(const ExecContext &C) override {
    char *Dst = static_cast<char *>(C.Out[0]);
    if (Zero)
      std::memset(Dst, 0, OutBytes);
    for (size_t K = 0; K < Boxes.size(); ++K) {
      const CopyBox &B = Boxes[K];
      const char *Src = static_cast<const char *>(C.In[K]);
      size_t R = B.Dims.size();
      int64_t Run = B.Dims[R - 1];
      int64_t Rows = Run ? B.elements() / Run : 0;
      size_t RunBytes = size_t(Run) * ElemSize;
      if (Rows == 1) {
        // One contiguous run (Concat along the first axis, a Slice of
        // whole rows): split its bytes, as a plain copy does.
        char *D = Dst + size_t(B.DstOffset) * ElemSize;
        const char *S = Src + size_t(B.SrcOffset) * ElemSize;
        parallelFor(int64_t(RunBytes), int64_t(1) << 20, Threads,
                    [&](int64_t Begin, int64_t End) {
                      std::memcpy(D + Begin, S + Begin, size_t(End - Begin));
                    });
        continue;
      }
      // Rows are independent: split them over the threads when there are
      // enough bytes.
      int64_t Grain = std::max<int64_t>(1, (int64_t(1) << 16) /
                                               std::max<int64_t>(1, RunBytes));
      parallelFor(Rows, Grain, Threads, [&](int64_t Begin, int64_t End) {
        for (int64_t Row = Begin; Row < End; ++Row) {
          // The row's offsets: its index over the outer dimensions.
          int64_t S = B.SrcOffset, D = B.DstOffset, Rest = Row;
          for (size_t J = R - 1; J-- > 0;) {
            int64_t Idx = Rest % B.Dims[J];
            Rest /= B.Dims[J];
            S += Idx * B.SrcStrides[J];
            D += Idx * B.DstStrides[J];
          }
          std::memcpy(Dst + size_t(D) * ElemSize, Src + size_t(S) * ElemSize,
                      RunBytes);
        }
      });
    }
  }

private:
  std::vector<CopyBox> Boxes;
  size_t ElemSize, OutBytes;
  bool Zero;
  int Threads;
};

KernelOr makeBoxCopy(const KernelInfo &I, std::vector<CopyBox> Boxes,
                     bool Zero) {
  return wrap(std::make_unique<BoxCopyKernel>(
      std::move(Boxes), dtypeSize(I.Outputs[0].Type), I.Outputs[0].bytes(),
      Zero, I.NumThreads));
}

KernelOr createConcat(const KernelInfo &I) {
  std::vector<CopyBox> Boxes;
  MDRT_RETURN_IF_ERROR(concatBoxes(I, Boxes));
  return makeBoxCopy(I, std::move(Boxes), /*Zero=*/false);
}

KernelOr createSlice(const KernelInfo &I) {
  CopyBox Box;
  MDRT_RETURN_IF_ERROR(sliceBox(I, Box));
  return makeBoxCopy(I, {Box}, /*Zero=*/false);
}

KernelOr createPad(const KernelInfo &I) {
  CopyBox Box;
  MDRT_RETURN_IF_ERROR(padBox(I, Box));
  return makeBoxCopy(I, {Box}, /*Zero=*/true);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename From, typename To> class CastKernel : public Kernel {
public:
  CastKernel(int64_t N, int Threads) : N(N), Threads(Threads) {}
  void run(const ExecContext &C) override {
    const From *X = static_cast<const From *>(C.In[0]);
    To *Y = static_cast<To *>(C.Out[0]);
    parallelFor(N, GrainCheap, Threads, [=](int64_t B, int64_t E) {
      for (int64_t K = B; K < E; ++K)
        Y[K] = castValue<To>(X[K]);
    });
  }

private:
  int64_t N;
  int Threads;
};

template <typename From>
KernelOr makeCast(const KernelInfo &I, DType To, int64_t N) {
  int T = I.NumThreads;
  switch (To) {
  case DType::Float32:
    return wrap(std::make_unique<CastKernel<From, float>>(N, T));
  case DType::Float64:
    return wrap(std::make_unique<CastKernel<From, double>>(N, T));
  case DType::Int32:
    return wrap(std::make_unique<CastKernel<From, int32_t>>(N, T));
  case DType::Int64:
    return wrap(std::make_unique<CastKernel<From, int64_t>>(N, T));
  case DType::Bool:
    return wrap(std::make_unique<CastKernel<From, bool>>(N, T));
  default:
    return typeError(I, To);
  }
}

KernelOr createCast(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  DType From = I.Inputs[0].Type, To = I.Outputs[0].Type;
  int64_t N = I.Inputs[0].numElements();
  MDRT_RETURN_IF_ERROR(checkElements(I, I.Outputs[0], N, "output"));
  if (I.Attrs.has("dtype") && I.Attrs.getType("dtype") != To)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'dtype' attribute's type " +
                         dtypeName(I.Attrs.getType("dtype")));
  if (From == To && To != DType::Invalid)
    return wrap(
        std::make_unique<CopyKernel>(0, I.Outputs[0].bytes(), I.NumThreads));
  switch (From) {
  case DType::Float32:
    return makeCast<float>(I, To, N);
  case DType::Float64:
    return makeCast<double>(I, To, N);
  case DType::Int32:
    return makeCast<int32_t>(I, To, N);
  case DType::Int64:
    return makeCast<int64_t>(I, To, N);
  case DType::Bool:
    return makeCast<bool>(I, To, N);
  default:
    return typeError(I, From);
  }
}

} // namespace

void cpu::registerPlumbingKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "Identity", createCopy);
  R.add(DeviceKind::CPU, "Reshape", createCopy);
  R.add(DeviceKind::CPU, "BatchSlice", createBatchSlice);
  R.add(DeviceKind::CPU, "Concat", createConcat);
  R.add(DeviceKind::CPU, "Slice", createSlice);
  R.add(DeviceKind::CPU, "Pad", createPad);
  R.add(DeviceKind::CPU, "Cast", createCast);
}
