//===- Cuda.h - What the executor needs from the CUDA backend ---*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Hooks of the CUDA backend (lib/cuda) beyond the Device interface: making a
// GPU current on a host thread, the per-step counter that device kernels
// (Dropout) read, pinned host memory for inputs, and the capture and replay
// of CUDA graphs. In a build without CUDA (CudaStubs.cpp) every function is
// a no-op or an error, and no Device is a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_CUDA_H
#define MDRT_CUDA_H

#include "mdrt/Device.h"
#include "mdrt/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mdrt {
namespace cuda {

/// Makes \p D's GPU current on the calling thread, and \p D the device
/// that kernels created on this thread belong to (their handles, streams
/// and scratch). Does nothing for a CPU device.
Status activate(Device &D);

/// Sets the step that \p D's kernels see (Dropout's random stream): an
/// asynchronous copy on \p D's stream, so that it also works for CUDA
/// graphs replayed after it. Does nothing for a CPU device.
Status setStep(Device &D, uint64_t Step);

/// Once a step's work on \p D has finished (synchronize): the first of its
/// kernels' reports of input values they could not compute with (a label
/// outside the logits' classes, which a GPU kernel turns into NaN), each
/// kernel's report cleared; ok for a CPU device, or when none reported.
Status takeInputReports(Device &D);

/// Page-locked host memory (for inputs copied to a GPU every step); null
/// when it cannot be had (the caller uses ordinary memory then).
void *allocPinned(size_t Bytes);
void freePinned(void *P);

/// Page-locks \p Bytes of existing host memory at \p P (cudaHostRegister),
/// so that copies between it and GPUs run asynchronously at full speed;
/// false when it cannot (the memory stays as it was). unpinHostMemory()
/// before the memory is freed.
bool pinHostMemory(void *P, size_t Bytes);
void unpinHostMemory(void *P);

/// Copies host memory to \p D asynchronously on its stream (\p Src should
/// be pinned, and unchanged until \p D is synchronized).
void copyFromHostAsync(Device &D, void *Dst, const void *Src, size_t Bytes);

/// A captured piece of one device's work, replayed on its stream.
class Graph {
public:
  virtual ~Graph();
  virtual Status launch() = 0;
};

/// Starts capturing everything the calling thread submits to \p D's
/// stream (nothing submitted runs until the graph is launched).
Status beginCapture(Device &D);
/// Ends the capture started by beginCapture and instantiates the graph.
StatusOr<std::unique_ptr<Graph>> endCapture(Device &D);

} // namespace cuda
} // namespace mdrt

#endif // MDRT_CUDA_H
