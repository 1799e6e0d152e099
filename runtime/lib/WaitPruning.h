//===- WaitPruning.h - Waits implied by a device's order --------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime. The executor's rule for the waits of a program's
// slots (Executor.cpp, pruneImpliedWaits), as a function of plain vectors
// so that unittests/runtime/plan/WaitPruningTest.cpp tests it directly.
//
// A device of this process finishes its compute, send and receive slots in
// the order of its list: a CPU device runs them one after another on its
// thread (a receive from a GPU waits for its copy), a GPU device enqueues
// all their work on its one stream and records their events there. So a
// slot that waits for several such slots of one device needs to wait for
// the last of them only.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_WAITPRUNING_H
#define MDRT_LIB_WAITPRUNING_H

#include <cstdint>
#include <map>
#include <vector>

namespace mdrt {

/// What the rule needs to know of a slot.
struct WaitedSlot {
  /// The device whose list holds the slot, and its position there.
  uint32_t Device = 0, Position = 0;
  /// Whether its device finishes it in list order with the slots around
  /// it (a local compute, no-op, send or receive slot; not a collective,
  /// which a queue may finish later, nor a transfer between processes).
  bool InOrder = false;
};

/// \p Waits without the waits that a later in-order slot of the same
/// device among them implies; the others in their order.
inline std::vector<uint32_t>
pruneImpliedWaits(const std::vector<uint32_t> &Waits,
                  const std::vector<WaitedSlot> &Slots) {
  if (Waits.size() < 2)
    return Waits;
  std::map<uint32_t, uint32_t> Last; // device -> its last waited slot
  for (uint32_t W : Waits) {
    if (!Slots[W].InOrder)
      continue;
    auto Ins = Last.try_emplace(Slots[W].Device, W);
    if (!Ins.second && Slots[W].Position > Slots[Ins.first->second].Position)
      Ins.first->second = W;
  }
  std::vector<uint32_t> Kept;
  for (uint32_t W : Waits)
    if (!Slots[W].InOrder || Last[Slots[W].Device] == W)
      Kept.push_back(W);
  return Kept;
}

} // namespace mdrt

#endif // MDRT_LIB_WAITPRUNING_H
