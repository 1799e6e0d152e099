//===- PlanMemory.cpp - Buffers, lifetimes and arena offsets --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Per device: every node output becomes a buffer. Variables (with their
// optimizer slots and global_step) and constants are persistent, laid out
// one after the other. Everything else lives in one arena from the kernel
// that writes it to its last reader in the device's schedule; inputs from
// the start of the step, sent tensors and the step's outputs to its end.
// Reshape, Identity and BatchSlice of a transient tensor are views (no copy,
// no kernel). Offsets come from planArena().
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/MemoryPlanner.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include "llvm/ADT/DenseSet.h"

using namespace llvm;
using namespace mdplan;

namespace {

class PlanMemoryPass : public Pass {
public:
  StringRef getName() const override { return "plan-memory"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

using TensorKey = std::pair<const Node *, unsigned>;

} // namespace

/// Byte alignment of buffers on a device: 256 for accelerators (what
/// cudaMalloc guarantees), 64 (a cache line) on CPUs.
static uint64_t alignmentFor(const DeviceSpec &D) {
  return D.Type && *D.Type != "CPU" ? 256 : 64;
}

static bool isPersistent(const Node &N) {
  return N.getOp().isVariable() || N.getOp().is(OF_Constant);
}

/// When \p N's output 0 can be a view of its input 0: the byte offset of
/// the view, else -1.
static int64_t viewOffset(const Node &N) {
  if (N.getNumInputs() != 1 || isPersistent(*N.getInput(0).N))
    return -1;
  const TensorType &In = N.getInput(0).type(), &Out = N.getOutputType(0);
  switch (N.getOp().Kind) {
  case OpKind::Reshape:
  case OpKind::Identity:
    return In.byteSize() == Out.byteSize() ? 0 : -1;
  case OpKind::BatchSlice:
    return N.attrs().getInt("index") * Out.byteSize();
  default:
    return -1;
  }
}

Error PlanMemoryPass::run(Graph &G, PassContext &Ctx) {
  DeployState &S = G.deployState();
  if (!S.Scheduled)
    return makeError("plan-memory needs schedule to run first");
  if (S.MemoryPlanned)
    return makeError("plan-memory: memory is planned already");
  if (Error E = requireTypes(G, getName()))
    return E;
  for (const auto &N : G.nodes())
    for (unsigned I = 0, E = N->getNumOutputs(); I != E; ++I)
      if (N->getOutputType(I).byteSize() < 0)
        return N->error("output " + Twine(I) + " has no known size (" +
                        N->getOutputType(I).str() + ")");

  size_t NumDevices = G.getDevices().size();
  S.Memory.assign(NumDevices, {});
  const int64_t End = INT64_MAX / 4;

  // Positions in the schedule.
  DenseMap<const Node *, int64_t> Pos;
  Pos.reserve(G.size());
  for (const auto &Sched : S.Schedules)
    for (size_t I = 0; I < Sched.size(); ++I)
      Pos[Sched[I]] = int64_t(I);
  DenseSet<TensorKey> Outputs;
  for (const TensorRef &T : programOutputs(G))
    Outputs.insert({T.N, T.Index});
  UseMap Uses = computeUses(G);

  // Views: output -> (root tensor, offset). Roots are resolved through
  // chains of views.
  DenseMap<TensorKey, std::pair<TensorKey, int64_t>> ViewOf;
  for (const auto &NP : G.nodes()) {
    int64_t Off = viewOffset(*NP);
    if (Off < 0)
      continue;
    TensorKey Src{NP->getInput(0).N, NP->getInput(0).Index};
    auto It = ViewOf.find(Src);
    if (It != ViewOf.end())
      ViewOf[{NP.get(), 0}] = {It->second.first, It->second.second + Off};
    else
      ViewOf[{NP.get(), 0}] = {Src, Off};
  }

  // Live ranges of the root buffers.
  struct Root {
    int Device;
    uint64_t Bytes;
    int64_t Start, End;
  };
  MapVector<TensorKey, Root> Roots;
  Roots.reserve(G.size());
  S.Buffers.reserve(G.size());
  for (const auto &NP : G.nodes()) {
    const Node *N = NP.get();
    if (isPersistent(*N))
      continue;
    // The last reader of each output, over the node's uses once (a node
    // with many outputs, such as a bucket's all-reduce, has many uses).
    int64_t Def = N->getOp().is(OF_Input) ? -1 : Pos.lookup(N);
    SmallVector<int64_t, 4> LastOf(N->getNumOutputs(), Def);
    for (auto &[U, I] : usesOf(Uses, N)) {
      int64_t &Last = LastOf[U->getInput(I).Index];
      if (isa(*U, OpKind::Send) || U->getOp().is(OF_Summary) || !Pos.count(U))
        Last = End;
      else
        Last = std::max(Last, Pos.lookup(U));
    }
    for (unsigned O = 0, NO = N->getNumOutputs(); O != NO; ++O) {
      TensorKey K{N, O};
      TensorKey R = K;
      if (auto It = ViewOf.find(K); It != ViewOf.end())
        R = It->second.first;
      int64_t Last = LastOf[O];
      if (Outputs.count(K))
        Last = End;
      auto Ins = Roots.insert(
          {R, Root{R.first->getDevice(),
                   uint64_t(R.first->getOutputType(R.second).byteSize()), Def,
                   Last}});
      if (!Ins.second) {
        Ins.first->second.Start = std::min(Ins.first->second.Start, Def);
        Ins.first->second.End = std::max(Ins.first->second.End, Last);
      }
    }
  }

  // Offsets per device.
  std::vector<std::vector<LiveRange>> Ranges(NumDevices);
  std::vector<std::vector<TensorKey>> Keys(NumDevices);
  for (auto &[K, R] : Roots) {
    Ranges[R.Device].push_back({R.Start, R.End, R.Bytes});
    Keys[R.Device].push_back(K);
  }
  for (size_t D = 0; D < NumDevices; ++D) {
    uint64_t Align = alignmentFor(G.getDevice(int(D)));
    ArenaPlan P = planArena(Ranges[D], Align);
    DeployState::DeviceMemory &M = S.Memory[D];
    M.ArenaBytes = P.ArenaBytes;
    M.Method = P.Method;
    M.NumBuffers = Ranges[D].size();
    for (size_t I = 0; I < Keys[D].size(); ++I) {
      M.NaiveBytes += alignUp(std::max<uint64_t>(Ranges[D][I].Bytes, 1), Align);
      DeployState::Buffer &B = S.Buffers[Keys[D][I]];
      B.Device = int(D);
      B.Offset = P.Offsets[I];
      B.Bytes = Ranges[D][I].Bytes;
    }
  }
  // Views take their root's place.
  for (auto &[K, V] : ViewOf) {
    const DeployState::Buffer &R = S.Buffers[V.first];
    DeployState::Buffer &B = S.Buffers[K];
    B.Device = R.Device;
    B.Offset = R.Offset + uint64_t(V.second);
    B.Bytes = uint64_t(K.first->getOutputType(K.second).byteSize());
    B.AliasOf = TensorRef(const_cast<Node *>(V.first.first), V.first.second);
  }
  // Persistent buffers, in graph order.
  for (const auto &NP : G.nodes()) {
    if (!isPersistent(*NP))
      continue;
    int D = NP->getDevice();
    uint64_t Align = alignmentFor(G.getDevice(D));
    DeployState::DeviceMemory &M = S.Memory[D];
    DeployState::Buffer &B = S.Buffers[{NP.get(), 0}];
    B.Device = D;
    B.Persistent = true;
    B.Bytes = uint64_t(NP->getOutputType(0).byteSize());
    B.Offset = alignUp(M.PersistentBytes, Align);
    M.PersistentBytes =
        B.Offset + alignUp(std::max<uint64_t>(B.Bytes, 1), Align);
  }
  S.MemoryPlanned = true;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createPlanMemoryPass() {
  return std::make_unique<PlanMemoryPass>();
}
