//===- CpuDevice.cpp - The host CPU device --------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"

#include "mdrt/Plan.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <sys/resource.h>
#include <unistd.h>

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
    auto Alloc = [&](uint64_t Bytes, uint8_t *&Out,
                     const char *What) -> Status {
      // 64-byte aligned; at least one cache line so the pointer is valid.
      // (The verifier bounds Bytes, so the rounding cannot wrap.)
      size_t Size = (std::max<uint64_t>(Bytes, 64) + 63) & ~uint64_t(63);
      errno = 0;
      Out = Size >= Bytes ? static_cast<uint8_t *>(std::aligned_alloc(64, Size))
                          : nullptr;
      if (!Out) {
        int Err = errno ? errno : ENOMEM;
        std::string Msg = "cannot allocate " + formatBytes(Bytes) + " (" +
                          std::to_string(Bytes) + " bytes) for the " + What +
                          " of device " + Name + ": " + std::strerror(Err);
        // What limits this process: its address space when limited
        // (ulimit -v), else the machine's memory.
        struct rlimit Limit;
        long Pages = ::sysconf(_SC_PHYS_PAGES), Page = ::sysconf(_SC_PAGESIZE);
        std::string Room;
        if (::getrlimit(RLIMIT_AS, &Limit) == 0 &&
            Limit.rlim_cur != RLIM_INFINITY)
          Room = "this process may use " +
                 formatBytes(uint64_t(Limit.rlim_cur)) +
                 " of address space, ulimit -v; ";
        else if (Pages > 0 && Page > 0)
          Room = "this machine has " +
                 formatBytes(uint64_t(Pages) * uint64_t(Page)) + " of memory; ";
        Msg += " (" + Room +
               "mdrun PLAN --dump-plan shows what each device needs, and a "
               "smaller batch needs less)";
        return Status::error(Msg);
      }
      std::memset(Out, 0, Size);
      return Status::ok();
    };
    MDRT_RETURN_IF_ERROR(Alloc(ArenaBytes, Arena, "arena"));
    return Alloc(PersistentBytes, Persistent, "persistent buffers");
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
