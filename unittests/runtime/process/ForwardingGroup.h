//===- ForwardingGroup.h - A process group that wraps another --*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The process tests wrap a thread group to change how its sums behave (hold
// them back, slow them down); everything else goes to the wrapped group.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_UNITTESTS_RUNTIME_PROCESS_FORWARDINGGROUP_H
#define MDPLAN_UNITTESTS_RUNTIME_PROCESS_FORWARDINGGROUP_H

#include "mdrt/Process.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace mdrt {

/// Forwards every operation to \p Inner; subclasses override allReduceSum.
class ForwardingGroup : public ProcessGroup {
public:
  ForwardingGroup(std::unique_ptr<ProcessGroup> Inner, std::string Transport)
      : ProcessGroup(Inner->rank(), Inner->size()), Inner(std::move(Inner)),
        Transport(std::move(Transport)) {}
  std::string transport() const override { return Transport; }
  int cpuSharers() const override { return Inner->cpuSharers(); }
  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Buf,
                      size_t Count) override {
    return Inner->allReduceSum(Type, Send, Buf, Count);
  }
  Status broadcast(void *Buf, size_t Bytes, int Root) override {
    return Inner->broadcast(Buf, Bytes, Root);
  }
  Status allGather(const void *Local, void *All, size_t Bytes) override {
    return Inner->allGather(Local, All, Bytes);
  }
  [[noreturn]] void abort(int Code) override {
    Inner->abort(Code);
    std::abort();
  }
  StatusOr<std::unique_ptr<ProcessGroup>> subgroup(int First,
                                                   int Count) override {
    return Inner->subgroup(First, Count);
  }
  StatusOr<std::unique_ptr<PendingSend>>
  isend(int Dst, uint32_t Tag, const void *Buf, size_t Bytes) override {
    return Inner->isend(Dst, Tag, Buf, Bytes);
  }
  Status recv(int Src, uint32_t Tag, void *Buf, size_t Bytes) override {
    return Inner->recv(Src, Tag, Buf, Bytes);
  }
  uint32_t maxTag() const override { return Inner->maxTag(); }

private:
  std::unique_ptr<ProcessGroup> Inner;
  std::string Transport;
};

} // namespace mdrt

#endif // MDPLAN_UNITTESTS_RUNTIME_PROCESS_FORWARDINGGROUP_H
