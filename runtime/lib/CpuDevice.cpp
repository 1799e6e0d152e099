//===- CpuDevice.cpp - The host CPU device --------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace mdrt;

Device::~Device() = default;

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
      Out = Size >= Bytes ? static_cast<uint8_t *>(std::aligned_alloc(64, Size))
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

} // namespace

std::unique_ptr<Device> mdrt::createCpuDevice(const std::string &Name,
                                              int Threads) {
  return std::make_unique<CpuDevice>(Name, Threads);
}
