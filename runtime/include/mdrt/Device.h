//===- Device.h - Devices and collectives of the runtime --------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A Device owns the memory the plan lays out for it (an arena for transient
// buffers and a persistent region for variables and constants) and runs
// kernels. The executor drives one host thread per device; cross-device
// dependencies are host-side step counters plus, for asynchronous devices,
// device events (recordEvent / waitEvent).
//
// A CollectiveGroup sums tensors across the devices of one collective.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_DEVICE_H
#define MDRT_DEVICE_H

#include "mdrt/Kernel.h"
#include "mdrt/Status.h"
#include "mdrt/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mdrt {

class Device {
public:
  virtual ~Device();

  virtual DeviceKind kind() const = 0;
  const std::string &name() const { return Name; }

  /// Allocates the arena and the persistent region.
  virtual Status allocate(uint64_t ArenaBytes, uint64_t PersistentBytes) = 0;
  uint8_t *arena() const { return Arena; }
  uint8_t *persistent() const { return Persistent; }

  /// Synchronous copies between this device's memory and the host.
  virtual void copyFromHost(void *Dst, const void *Src, size_t Bytes) = 0;
  virtual void copyToHost(void *Dst, const void *Src, size_t Bytes) = 0;
  /// Copies \p Bytes from \p Src (memory of device \p From) to \p Dst (this
  /// device's memory), ordered after the work \p From recorded in event
  /// \p FromEvent, as part of this device's stream.
  virtual void copyFrom(Device &From, int FromEvent, void *Dst, const void *Src,
                        size_t Bytes) = 0;

  /// Copies \p Bytes from \p Src (this device's memory) to the host once
  /// the work recorded in event \p Event is done, without waiting for what
  /// was submitted after it (all submitted work when \p Event is negative).
  /// Another device's thread calls it, for a transfer to the host.
  virtual void copyToHostAfter(int Event, void *Dst, const void *Src,
                               size_t Bytes) {
    (void)Event;
    // An error surfaces at the step's synchronize.
    synchronizeInStep().isOk();
    copyToHost(Dst, Src, Bytes);
  }

  /// Asynchronous devices: marks the current point of the stream as event
  /// \p Id; waitEvent makes this device's stream wait for \p Other's event.
  /// The executor relies on a device finishing its kernels and transfers
  /// in the order they were issued: all of an asynchronous device's work
  /// goes on the stream these events mark, and a synchronous device's
  /// calls return when their work is done (a copy from a GPU included), so
  /// an event covers everything issued before it (runtime/lib/
  /// WaitPruning.h).
  virtual void recordEvent(int Id) {}
  virtual void waitEvent(Device &Other, int Id) {}
  /// Blocks the calling thread until the work recorded in event \p Id is
  /// done (nothing to wait for on synchronous devices).
  virtual void synchronizeEvent(int Id) {}
  /// Creates \p Count events (ids 0..Count-1).
  virtual Status createEvents(int Count) { return Status::ok(); }

  /// The stream kernels of this device are given (null on CPU).
  virtual void *stream() const { return nullptr; }
  /// Waits until everything submitted to the device finished. Between
  /// steps: no other device's thread is running a step.
  virtual Status synchronize() { return Status::ok(); }
  /// As synchronize, called during a step (by the device's own thread, or
  /// by another device's), while other devices' threads may be capturing
  /// CUDA graphs: a GPU then leaves the streams of the other devices alone
  /// (querying a stream that is being captured breaks its capture).
  virtual Status synchronizeInStep() { return synchronize(); }

  /// Intra-op threads for this device's kernels.
  int threads() const { return Threads; }

protected:
  Device(std::string Name, int Threads)
      : Name(std::move(Name)), Threads(Threads) {}

  std::string Name;
  int Threads;
  uint8_t *Arena = nullptr;
  uint8_t *Persistent = nullptr;
};

/// The host CPU: memory from aligned allocations, kernels run inline.
std::unique_ptr<Device> createCpuDevice(const std::string &Name, int Threads);

/// A CUDA GPU; an error when the runtime was built without CUDA or the GPU
/// does not exist.
StatusOr<std::unique_ptr<Device>> createCudaDevice(const std::string &Name,
                                                   int Ordinal);

/// Number of CUDA GPUs visible to the process (0 without CUDA).
int cudaDeviceCount();

/// Sums tensors across the devices of one collective. Every participant
/// calls allReduce for the same step with tensors of the same types; each
/// gets the sums, added in participant order (so the result does not depend
/// on timing).
class CollectiveGroup {
public:
  virtual ~CollectiveGroup();
  /// Participant \p Participant's part of the group's next round. Returns
  /// once its inputs \p In have been read; its outputs \p Out hold the
  /// sums by then too, unless the group is asynchronous, when they hold
  /// them (and anything before that, e.g. partial sums) only once finish()
  /// returns.
  virtual void allReduce(unsigned Participant, Device &Dev,
                         const std::vector<const void *> &In,
                         const std::vector<void *> &Out,
                         const std::vector<TensorDesc> &Types) = 0;
  /// True when allReduce may return before the outputs are written.
  virtual bool asynchronous() const { return false; }
  /// Blocks until the outputs of \p Participant's last round are written.
  /// Every round of an asynchronous group must be finished by each of its
  /// participants before the participant's next round, and before anything
  /// reads or reuses the outputs' memory.
  virtual void finish(unsigned Participant) { (void)Participant; }
};

class ProcessGroup;

/// Runs work one item after the other, in the order it was pushed, on a
/// thread of its own: the sums of a process's all-reduces cross to the
/// other processes there while its devices go on computing. The order is
/// what keeps the processes in step: every process pushes its collectives
/// in the plan's order.
class CollectiveQueue {
public:
  CollectiveQueue();
  /// Runs what is still queued, then stops the thread.
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue &) = delete;
  CollectiveQueue &operator=(const CollectiveQueue &) = delete;

  /// Queues \p Work, labelled \p Label in traces.
  void push(std::string Label, std::function<void()> Work);

  /// Timings of the work items while tracing is on (for Chrome traces).
  struct Event {
    std::string Label;
    uint64_t StartNs, EndNs;
  };
  void setTracing(bool On);
  std::vector<Event> events() const;

private:
  struct Impl;
  std::unique_ptr<Impl> I;
};

/// The in-process implementation: participants meet, the last to arrive
/// adds every participant's tensors in order and writes every output.
/// Works for any device kind whose memory the host can address; for other
/// kinds it stages through the host. With \p Processes of several
/// processes, the collective spans them: each process's sum is added to
/// the others' (ProcessGroup::allReduceSum) before the outputs are written,
/// and every process must run the group's collectives in the same order.
/// Tensors of 256 KiB or more cross in a call each, summed in the first
/// participant's output when every participant is a CPU; smaller ones are
/// packed in a host buffer.
///
/// With \p Queue too (CPU participants only), the group is asynchronous:
/// the last participant to arrive adds this process's tensors into a host
/// buffer and queues the rest (the sum across processes and writing the
/// outputs), so every participant returns as soon as the inputs are read.
/// \p Name labels the queued work in traces.
std::unique_ptr<CollectiveGroup>
createHostCollective(unsigned Participants, ProcessGroup *Processes = nullptr,
                     CollectiveQueue *Queue = nullptr,
                     const std::string &Name = "all-reduce");

/// NCCL over the group's GPUs (CUDA builds), or, when they are all one GPU,
/// a sum on that GPU into scratch memory allocated here for tensors of up
/// to \p MaxTensorBytes (not during a step: cudaMalloc there could wait
/// for NCCL's kernels on the GPU); null when unavailable.
std::unique_ptr<CollectiveGroup>
createNcclCollective(const std::vector<Device *> &Devices,
                     size_t MaxTensorBytes);

/// Sets NCCL_RUNTIME_CONNECT=0 unless the environment sets it (NCCL would
/// otherwise connect lazily inside the first group that uses an algorithm,
/// blocking the host thread until every rank arrives). createNcclCollective
/// calls it, but setenv races with any thread reading the environment: a
/// program that starts threads before its first NCCL collective should call
/// it first. Only the first call changes anything; a no-op without CUDA
/// (a CUDA build without NCCL still sets the variable, harmlessly).
void prepareNcclEnvironment();

} // namespace mdrt

#endif // MDRT_DEVICE_H
