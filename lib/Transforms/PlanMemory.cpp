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
  // (Ops with one input and no output, such as AssignAdd, have no type
  // to compare.)
  if (N.getNumInputs() != 1 || N.getNumOutputs() != 1 ||
      isPersistent(*N.getInput(0).N))
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
  if (Error E = requirePlaced(G, getName()))
    return E;
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

  // Positions in the schedule by node id; -1 for nodes without a kernel.
  std::vector<int64_t> Pos(G.getIdBound(), -1);
  for (const auto &Sched : S.Schedules)
    for (size_t I = 0; I < Sched.size(); ++I)
      Pos[Sched[I]->getId()] = int64_t(I);
  auto Scheduled = [&](const Node *N) { return Pos[N->getId()] >= 0; };
  DenseSet<TensorKey> Outputs;
  for (const TensorRef &T : programOutputs(G))
    Outputs.insert({T.N, T.Index});
  UseMap Uses = computeUses(G);

  // Views: output -> (root tensor, offset), in graph order. Roots are
  // resolved through chains of views.
  std::vector<std::pair<TensorKey, std::pair<TensorKey, int64_t>>> Views;
  constexpr unsigned NoIndex = ~0u;
  OutputTable<unsigned> ViewIndex(G, NoIndex);
  for (const auto &NP : G.nodes()) {
    int64_t Off = viewOffset(*NP);
    if (Off < 0)
      continue;
    TensorKey Src{NP->getInput(0).N, NP->getInput(0).Index};
    std::pair<TensorKey, int64_t> V{Src, Off};
    if (unsigned SI = *ViewIndex.find(*Src.first, Src.second); SI != NoIndex)
      V = {Views[SI].second.first, Views[SI].second.second + Off};
    *ViewIndex.find(*NP, 0) = unsigned(Views.size());
    Views.push_back({{NP.get(), 0}, V});
  }

  // Live ranges of the root buffers, in the order they are first seen.
  struct Root {
    TensorKey Key;
    int Device;
    uint64_t Bytes;
    int64_t Start, End;
  };
  std::vector<Root> Roots;
  OutputTable<unsigned> RootIndex(G, NoIndex);
  for (const auto &NP : G.nodes()) {
    const Node *N = NP.get();
    if (isPersistent(*N))
      continue;
    // The last reader of each output, over the node's uses once (a node
    // with many outputs, such as a bucket's all-reduce, has many uses).
    int64_t Def =
        N->getOp().is(OF_Input) ? -1 : std::max<int64_t>(Pos[N->getId()], 0);
    SmallVector<int64_t, 4> LastOf(N->getNumOutputs(), Def);
    for (auto &[U, I] : usesOf(Uses, N)) {
      int64_t &Last = LastOf[U->getInput(I).Index];
      if (isa(*U, OpKind::Send) || U->getOp().is(OF_Summary) || !Scheduled(U))
        Last = End;
      else
        Last = std::max(Last, Pos[U->getId()]);
    }
    for (unsigned O = 0, NO = N->getNumOutputs(); O != NO; ++O) {
      TensorKey K{N, O};
      TensorKey R = K;
      if (unsigned VI = *ViewIndex.find(*N, O); VI != NoIndex)
        R = Views[VI].second.first;
      int64_t Last = LastOf[O];
      if (Outputs.count(K))
        Last = End;
      unsigned &RI = *RootIndex.find(*R.first, R.second);
      if (RI == NoIndex) {
        RI = unsigned(Roots.size());
        Roots.push_back({R, R.first->getDevice(),
                         uint64_t(R.first->getOutputType(R.second).byteSize()),
                         Def, Last});
      } else {
        Roots[RI].Start = std::min(Roots[RI].Start, Def);
        Roots[RI].End = std::max(Roots[RI].End, Last);
      }
    }
  }

  // Offsets per device.
  S.Buffers.emplace(G, DeployState::Buffer());
  std::vector<std::vector<LiveRange>> Ranges(NumDevices);
  std::vector<std::vector<TensorKey>> Keys(NumDevices);
  for (const Root &R : Roots) {
    Ranges[R.Device].push_back({R.Start, R.End, R.Bytes});
    Keys[R.Device].push_back(R.Key);
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
      DeployState::Buffer &B =
          *S.Buffers->find(*Keys[D][I].first, Keys[D][I].second);
      B.Device = int(D);
      B.Offset = P.Offsets[I];
      B.Bytes = Ranges[D][I].Bytes;
    }
  }
  // Views take their root's place.
  for (auto &[K, V] : Views) {
    const DeployState::Buffer &R =
        *S.Buffers->find(*V.first.first, V.first.second);
    DeployState::Buffer &B = *S.Buffers->find(*K.first, K.second);
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
    DeployState::Buffer &B = *S.Buffers->find(*NP, 0);
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
