//===- CpuDevice.cpp - The host CPU device and in-process collectives -----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"
#include "mdrt/Process.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace mdrt;

Device::~Device() = default;
CollectiveGroup::~CollectiveGroup() = default;

namespace {

class CpuDevice : public Device {
public:
  CpuDevice(std::string Name, int Threads) : Device(std::move(Name), Threads) {}
  ~CpuDevice() override {
    std::free(Arena);
    std::free(Persistent);
  }

  DeviceKind kind() const override { return DeviceKind::CPU; }

  Status allocate(uint64_t ArenaBytes, uint64_t PersistentBytes) override {
    auto Alloc = [&](uint64_t Bytes, uint8_t *&Out) -> Status {
      // 64-byte aligned; at least one cache line so the pointer is valid.
      // (The verifier bounds Bytes, so the rounding cannot wrap.)
      size_t Size = (std::max<uint64_t>(Bytes, 64) + 63) & ~uint64_t(63);
      Out = Size >= Bytes
                ? static_cast<uint8_t *>(std::aligned_alloc(64, Size))
                : nullptr;
      if (!Out)
        return Status::error("cannot allocate " + std::to_string(Bytes) +
                             " bytes for device " + Name);
      std::memset(Out, 0, Size);
      return Status::ok();
    };
    MDRT_RETURN_IF_ERROR(Alloc(ArenaBytes, Arena));
    return Alloc(PersistentBytes, Persistent);
  }

  // An empty tensor's host copy may be a null pointer, which memcpy must
  // not be given even for no bytes.
  void copyFromHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Dst != Src && Bytes)
      std::memcpy(Dst, Src, Bytes);
  }
  void copyToHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Dst != Src && Bytes)
      std::memcpy(Dst, Src, Bytes);
  }
  /// The CPU runs what it was given at once, so waiting for an
  /// asynchronous device means waiting for its work itself.
  void waitEvent(Device &Other, int Id) override {
    if (Other.kind() != DeviceKind::CPU)
      Other.synchronizeEvent(Id);
  }
  void copyFrom(Device &From, int FromEvent, void *Dst, const void *Src,
                size_t Bytes) override {
    if (From.kind() == DeviceKind::CPU) {
      if (Bytes)
        std::memcpy(Dst, Src, Bytes);
      return;
    }
    // From an accelerator: it knows how to reach the host, after the
    // sender's event (its stream may be capturing later work meanwhile).
    From.copyToHostAfter(FromEvent, Dst, Src, Bytes);
  }
};

/// Participants meet at a barrier; the last one adds everything in
/// participant order and writes every output. With a process group of
/// several processes, it adds this process's sums to the other processes'
/// (ProcessGroup::allReduceSum, in rank order) before writing the outputs.
class HostCollective : public CollectiveGroup {
public:
  HostCollective(unsigned N, ProcessGroup *Processes)
      : N(N), In(N), Out(N), Devs(N),
        Processes(Processes && Processes->size() > 1 ? Processes : nullptr) {}

  void allReduce(unsigned P, Device &Dev, const std::vector<const void *> &Ins,
                 const std::vector<void *> &Outs,
                 const std::vector<TensorDesc> &Types) override {
    std::unique_lock<std::mutex> L(M);
    uint64_t MyRound = Round;
    In[P] = Ins;
    Out[P] = Outs;
    Devs[P] = &Dev;
    if (++Arrived < N) {
      CV.wait(L, [&] { return Round != MyRound; });
      return;
    }
    reduce(Types);
    Arrived = 0;
    ++Round;
    CV.notify_all();
  }

private:
  /// The type a tensor is added in: the compiler all-reduces float32 and
  /// float64 only.
  static DType sumType(const TensorDesc &T) {
    return T.Type == DType::Float64 ? DType::Float64 : DType::Float32;
  }

  /// Participant \p P's input \p I in host memory.
  const void *stage(unsigned P, size_t I, size_t Bytes) {
    if (Devs[P]->kind() == DeviceKind::CPU)
      return In[P][I];
    Staging.resize(Bytes);
    Devs[P]->copyToHost(Staging.data(), In[P][I], Bytes);
    return Staging.data();
  }

  template <typename T> void sumInto(size_t I, size_t Count, void *Dst) {
    T *Acc = static_cast<T *>(Dst);
    for (unsigned P = 0; P < N; ++P) {
      const T *Src = static_cast<const T *>(stage(P, I, Count * sizeof(T)));
      if (P == 0)
        std::memcpy(Acc, Src, Count * sizeof(T));
      else
        for (size_t E = 0; E < Count; ++E)
          Acc[E] += Src[E];
    }
  }

  void reduce(const std::vector<TensorDesc> &Types) {
    // This process's sums, one tensor after the other in Host; tensors of
    // one type are contiguous, so a run of them crosses processes at once.
    Offsets.resize(Types.size() + 1);
    size_t Total = 0;
    for (size_t I = 0; I < Types.size(); ++I) {
      if (I > 0 && sumType(Types[I]) != sumType(Types[I - 1]))
        Total = (Total + 7) & ~size_t(7);
      Offsets[I] = Total;
      Total += size_t(Types[I].numElements()) * dtypeSize(sumType(Types[I]));
    }
    Offsets[Types.size()] = Total;
    Host.resize(Total);
    for (size_t I = 0; I < Types.size(); ++I) {
      size_t Count = size_t(Types[I].numElements());
      if (sumType(Types[I]) == DType::Float64)
        sumInto<double>(I, Count, Host.data() + Offsets[I]);
      else
        sumInto<float>(I, Count, Host.data() + Offsets[I]);
    }
    if (Processes)
      for (size_t I = 0; I < Types.size();) {
        size_t J = I + 1;
        while (J < Types.size() && sumType(Types[J]) == sumType(Types[I]))
          ++J;
        DType T = sumType(Types[I]);
        size_t End =
            Offsets[J - 1] + size_t(Types[J - 1].numElements()) * dtypeSize(T);
        Status S = Processes->allReduceSum(T, Host.data() + Offsets[I],
                                           (End - Offsets[I]) / dtypeSize(T));
        if (!S.isOk()) {
          // The other processes wait in this all-reduce: stop them all.
          std::fprintf(stderr,
                       "error: replica %d: the all-reduce across processes "
                       "failed: %s\n",
                       Processes->rank(), S.message().c_str());
          Processes->abort(1);
        }
        I = J;
      }
    for (unsigned P = 0; P < N; ++P)
      for (size_t I = 0; I < Types.size(); ++I)
        Devs[P]->copyFromHost(Out[P][I], Host.data() + Offsets[I],
                              size_t(Types[I].numElements()) *
                                  dtypeSize(sumType(Types[I])));
  }

  unsigned N;
  std::mutex M;
  std::condition_variable CV;
  unsigned Arrived = 0;
  uint64_t Round = 0;
  std::vector<std::vector<const void *>> In;
  std::vector<std::vector<void *>> Out;
  std::vector<Device *> Devs;
  ProcessGroup *Processes;
  std::vector<uint8_t> Staging;
  /// The sums of one round, and where each tensor's begins.
  std::vector<uint8_t> Host;
  std::vector<size_t> Offsets;
};

} // namespace

std::unique_ptr<Device> mdrt::createCpuDevice(const std::string &Name,
                                              int Threads) {
  return std::make_unique<CpuDevice>(Name, Threads);
}

std::unique_ptr<CollectiveGroup>
mdrt::createHostCollective(unsigned N, ProcessGroup *Processes) {
  return std::make_unique<HostCollective>(N, Processes);
}
