//===- PlanMutator.cpp - Structure-aware mutations of plans ---------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Byte flips rarely get a plan past the FlatBuffers verifier, let alone the
// plan verifier, so the plan fuzz target mutates plans as objects: it unpacks
// the plan (FlatBuffers' object API, generated for this file only), changes
// one thing a compiler bug or a hand edit could change (a shape, a dtype, a
// kernel's buffer, op or attribute, the order of a device's kernels, a wait,
// a collective, a batch size, an initializer) and packs it again. Most
// mutations keep the plan's memory consistent (bytes follow the shape, the
// device's region grows to hold it), so the result often passes the
// verifier and reaches the executor and the kernels, where a plan that
// verifies must never crash.
//
//===----------------------------------------------------------------------===//

#include "PlanMutator.h"
#include "RandomEdits.h"

// The object-API variant of the plan schema (fuzz/CMakeLists.txt): this file
// must not include the runtime's headers, which use the plain one.
#include "mdplan/plan_generated.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace fb = mdplan::plan;

namespace {

class Mutator : mdplan::fuzz::RandomEdits {
public:
  Mutator(fb::PlanT &P, unsigned Seed) : RandomEdits(Seed), P(P) {}
  bool mutate();

private:
  static uint64_t eltSize(fb::DType T) {
    switch (T) {
    case fb::DType::Float64:
    case fb::DType::Int64:
      return 8;
    case fb::DType::Bool:
      return 1;
    default:
      return 4;
    }
  }
  /// Makes \p B's byte count follow its shape and dtype, aligns its offset
  /// and grows its device's region to hold it (unless it is a view).
  void fixMemory(fb::BufferT &B) {
    uint64_t Elt = eltSize(B.dtype), N = 1;
    for (int64_t D : B.shape)
      N *= uint64_t(std::max<int64_t>(D, 0));
    if (N > (uint64_t(1) << 24))
      return; // Keep what the executor allocates small.
    B.bytes = N * Elt;
    B.offset = (B.offset + Elt - 1) / Elt * Elt;
    if (B.alias_of >= 0 || B.device >= P.devices.size())
      return;
    fb::DeviceT &D = *P.devices[B.device];
    uint64_t &Limit = B.persistent ? D.persistent_bytes : D.arena_bytes;
    Limit = std::max(Limit, B.offset + B.bytes);
  }

  std::vector<fb::KernelT *> kernels() {
    std::vector<fb::KernelT *> Ks;
    for (auto &Prog : P.programs)
      for (auto &DP : Prog->devices)
        for (auto &K : DP->kernels)
          Ks.push_back(K.get());
    return Ks;
  }

  bool reshapeBuffer();
  bool retypeBuffer();
  bool rewireKernel();
  bool changeOp();
  bool mutateAttr();
  bool reorderKernels();
  bool mutateWaits();
  bool mutateCollective();
  bool mutateProgram();
  bool mutateVariable();
  bool mutateDevice();

  fb::PlanT &P;
};

bool Mutator::reshapeBuffer() {
  if (P.buffers.empty())
    return false;
  fb::BufferT &B = *any(P.buffers);
  switch (pick(3)) {
  case 0:
    if (B.shape.empty())
      return false;
    any(B.shape) = std::clamp<int64_t>(nearby(any(B.shape)), -1, 4096);
    break;
  case 1:
    B.shape.insert(B.shape.begin() + pick(B.shape.size() + 1),
                   int64_t(1 + pick(4)));
    break;
  default:
    if (B.shape.empty())
      return false;
    B.shape.erase(B.shape.begin() + pick(B.shape.size()));
    break;
  }
  if (pick(8))
    fixMemory(B);
  return true;
}

bool Mutator::retypeBuffer() {
  if (P.buffers.empty())
    return false;
  fb::BufferT &B = *any(P.buffers);
  B.dtype = fb::DType(1 + pick(5));
  if (pick(8))
    fixMemory(B);
  return true;
}

bool Mutator::rewireKernel() {
  std::vector<fb::KernelT *> Ks = kernels();
  if (Ks.empty() || P.buffers.empty())
    return false;
  fb::KernelT &K = *any(Ks);
  std::vector<uint32_t> &List = coin() ? K.inputs : K.outputs;
  switch (pick(4)) {
  case 0:
    List.push_back(uint32_t(pick(P.buffers.size())));
    return true;
  case 1:
    if (List.empty())
      return false;
    List.erase(List.begin() + pick(List.size()));
    return true;
  default:
    if (List.empty())
      return false;
    any(List) = uint32_t(pick(P.buffers.size()));
    return true;
  }
}

bool Mutator::changeOp() {
  std::vector<fb::KernelT *> Ks = kernels();
  if (Ks.size() < 2)
    return false;
  // Another kernel's op: one the runtime knows.
  const std::string &Op = any(Ks)->op;
  any(Ks)->op = Op;
  return true;
}

bool Mutator::mutateAttr() {
  std::vector<fb::KernelT *> Ks = kernels();
  std::vector<fb::KernelT *> WithAttrs;
  for (fb::KernelT *K : Ks)
    if (!K->attrs.empty())
      WithAttrs.push_back(K);
  if (WithAttrs.empty())
    return false;
  fb::KernelT &K = *any(WithAttrs);
  if (pick(6) == 0) {
    K.attrs.erase(K.attrs.begin() + pick(K.attrs.size()));
    return true;
  }
  fb::AttrT &A = *any(K.attrs);
  switch (pick(5)) {
  case 0:
    A.i = nearby(A.i);
    break;
  case 1:
    A.f = nearbyReal(A.f);
    break;
  case 2:
    if (A.ints.empty() || coin())
      A.ints.push_back(nearby(0));
    else
      any(A.ints) = nearby(any(A.ints));
    break;
  case 3:
    if (!A.floats.empty())
      any(A.floats) = nearbyReal(any(A.floats));
    else
      A.floats.push_back(nearbyReal(1));
    break;
  default:
    A.kind = fb::AttrKind(pick(9));
    break;
  }
  return true;
}

bool Mutator::reorderKernels() {
  if (P.programs.empty())
    return false;
  fb::ProgramT &Prog = *any(P.programs);
  if (Prog.devices.empty())
    return false;
  fb::DeviceProgramT &DP = *any(Prog.devices);
  if (DP.kernels.size() < 2)
    return false;
  std::swap(any(DP.kernels), any(DP.kernels));
  return true;
}

bool Mutator::mutateWaits() {
  std::vector<fb::KernelT *> Ks = kernels();
  if (Ks.empty())
    return false;
  fb::KernelT &K = *any(Ks);
  if (!K.waits.empty() && coin()) {
    K.waits.erase(K.waits.begin() + pick(K.waits.size()));
    return true;
  }
  K.waits.push_back(uint32_t(pick(Ks.size())));
  any(Ks)->signals = true;
  return true;
}

bool Mutator::mutateCollective() {
  std::vector<fb::CollectiveT *> Cs;
  for (auto &Prog : P.programs)
    for (auto &C : Prog->collectives)
      Cs.push_back(C.get());
  if (Cs.empty())
    return false;
  fb::CollectiveT &C = *any(Cs);
  switch (pick(3)) {
  case 0:
    C.replicas = int32_t(nearby(C.replicas));
    return true;
  case 1:
    if (C.kernels.empty())
      return false;
    any(C.kernels) = uint32_t(nearby(any(C.kernels)));
    return true;
  default:
    if (C.kernels.size() < 2)
      return false;
    std::swap(any(C.kernels), any(C.kernels));
    return true;
  }
}

bool Mutator::mutateProgram() {
  if (P.programs.empty())
    return false;
  fb::ProgramT &Prog = *any(P.programs);
  switch (pick(3)) {
  case 0:
    Prog.batch_size = nearby(Prog.batch_size);
    return true;
  case 1:
    if (Prog.inputs.empty() || P.buffers.empty())
      return false;
    any(Prog.inputs)->buffer = uint32_t(pick(P.buffers.size()));
    return true;
  default:
    if (Prog.outputs.empty() || P.buffers.empty())
      return false;
    any(Prog.outputs)->buffer = uint32_t(pick(P.buffers.size()));
    return true;
  }
}

bool Mutator::mutateVariable() {
  if (P.variables.empty())
    return false;
  fb::VariableT &V = *any(P.variables);
  switch (pick(4)) {
  case 0:
    V.init = fb::InitKind(pick(9));
    return true;
  case 1:
    V.stddev = nearbyReal(V.stddev);
    return true;
  case 2:
    V.mirror_of = int32_t(nearby(V.mirror_of));
    return true;
  default:
    if (P.constants.empty())
      return false;
    any(P.constants)->values.push_back(nearbyReal(1));
    return true;
  }
}

bool Mutator::mutateDevice() {
  if (P.devices.empty())
    return false;
  fb::DeviceT &D = *any(P.devices);
  switch (pick(3)) {
  case 0:
    D.kind = D.kind == fb::DeviceKind::CPU ? fb::DeviceKind::GPU
                                           : fb::DeviceKind::CPU;
    return true;
  case 1:
    D.index = int32_t(nearby(D.index));
    return true;
  default:
    D.arena_bytes =
        uint64_t(std::max<int64_t>(nearby(int64_t(D.arena_bytes)), 0));
    return true;
  }
}

bool Mutator::mutate() {
  for (int Try = 0; Try < 16; ++Try) {
    bool Done = false;
    switch (pick(11)) {
    case 0:
      Done = reshapeBuffer();
      break;
    case 1:
      Done = retypeBuffer();
      break;
    case 2:
      Done = rewireKernel();
      break;
    case 3:
      Done = changeOp();
      break;
    case 4:
      Done = mutateAttr();
      break;
    case 5:
      Done = reorderKernels();
      break;
    case 6:
      Done = mutateWaits();
      break;
    case 7:
      Done = mutateCollective();
      break;
    case 8:
      Done = mutateProgram();
      break;
    case 9:
      Done = mutateVariable();
      break;
    default:
      Done = mutateDevice();
      break;
    }
    if (Done)
      return true;
  }
  return false;
}

} // namespace

size_t mdplan::fuzz::mutatePlan(uint8_t *Data, size_t Size, size_t MaxSize,
                                unsigned Seed) {
  flatbuffers::Verifier V(Data, Size, /*max_depth=*/64,
                          /*max_tables=*/100000000);
  if (Size < 8 || !fb::VerifyPlanBuffer(V))
    return 0;
  std::unique_ptr<fb::PlanT> P(fb::GetPlan(Data)->UnPack());
  Mutator M(*P, Seed);
  // One to three changes.
  unsigned N = 1 + Seed % 3;
  bool Any = false;
  for (unsigned I = 0; I < N; ++I)
    Any |= M.mutate();
  if (!Any)
    return 0;
  // The objects move: the length the seed recorded no longer holds, and
  // a plan that records none skips that check and reaches the others.
  P->file_bytes = 0;
  flatbuffers::FlatBufferBuilder FB;
  fb::FinishPlanBuffer(FB, fb::Plan::Pack(FB, P.get()));
  if (FB.GetSize() > MaxSize)
    return 0;
  std::memcpy(Data, FB.GetBufferPointer(), FB.GetSize());
  return FB.GetSize();
}
