//===- Plumbing.cpp - Identity, Reshape, BatchSlice, Cast -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Copies (any element type) and conversions. A copy onto itself (the
// executor may alias a Reshape's output with its input) does nothing.
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
  R.add(DeviceKind::CPU, "Cast", createCast);
}
