//===- CpuDevice.cpp - The host CPU device and in-process collectives -----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"

#include <condition_variable>
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
      size_t Size = (std::max<uint64_t>(Bytes, 64) + 63) & ~uint64_t(63);
      Out = static_cast<uint8_t *>(std::aligned_alloc(64, Size));
      if (!Out)
        return Status::error("cannot allocate " + std::to_string(Bytes) +
                             " bytes for device " + Name);
      std::memset(Out, 0, Size);
      return Status::ok();
    };
    MDRT_RETURN_IF_ERROR(Alloc(ArenaBytes, Arena));
    return Alloc(PersistentBytes, Persistent);
  }

  void copyFromHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Dst != Src)
      std::memcpy(Dst, Src, Bytes);
  }
  void copyToHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Dst != Src)
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
      std::memcpy(Dst, Src, Bytes);
      return;
    }
    // From an accelerator: it knows how to reach the host, after the
    // sender's event (its stream may be capturing later work meanwhile).
    From.copyToHostAfter(FromEvent, Dst, Src, Bytes);
  }
};

/// Participants meet at a barrier; the last one adds everything in
/// participant order and writes every output.
class HostCollective : public CollectiveGroup {
public:
  explicit HostCollective(unsigned N) : N(N), In(N), Out(N), Devs(N) {}

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
  template <typename T> void sumInto(size_t I, size_t Count) {
    std::vector<T> Acc(Count);
    for (unsigned P = 0; P < N; ++P) {
      const T *Src = static_cast<const T *>(stage(P, I, Count * sizeof(T)));
      if (P == 0)
        std::memcpy(Acc.data(), Src, Count * sizeof(T));
      else
        for (size_t E = 0; E < Count; ++E)
          Acc[E] += Src[E];
    }
    for (unsigned P = 0; P < N; ++P)
      Devs[P]->copyFromHost(Out[P][I], Acc.data(), Count * sizeof(T));
  }

  /// Participant \p P's input \p I in host memory.
  const void *stage(unsigned P, size_t I, size_t Bytes) {
    if (Devs[P]->kind() == DeviceKind::CPU)
      return In[P][I];
    Staging.resize(Bytes);
    Devs[P]->copyToHost(Staging.data(), In[P][I], Bytes);
    return Staging.data();
  }

  void reduce(const std::vector<TensorDesc> &Types) {
    for (size_t I = 0; I < Types.size(); ++I) {
      size_t Count = size_t(Types[I].numElements());
      if (Types[I].Type == DType::Float64)
        sumInto<double>(I, Count);
      else
        sumInto<float>(I, Count);
    }
  }

  unsigned N;
  std::mutex M;
  std::condition_variable CV;
  unsigned Arrived = 0;
  uint64_t Round = 0;
  std::vector<std::vector<const void *>> In;
  std::vector<std::vector<void *>> Out;
  std::vector<Device *> Devs;
  std::vector<uint8_t> Staging;
};

} // namespace

std::unique_ptr<Device> mdrt::createCpuDevice(const std::string &Name,
                                              int Threads) {
  return std::make_unique<CpuDevice>(Name, Threads);
}

std::unique_ptr<CollectiveGroup> mdrt::createHostCollective(unsigned N) {
  return std::make_unique<HostCollective>(N);
}
