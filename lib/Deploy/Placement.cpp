//===- Placement.cpp - Resolving every node to a device -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

using namespace llvm;
using namespace mdplan;

DeviceSpec mdplan::walkDeviceStack(const Node &N, PlacementRecord *Rec) {
  DeviceSpec Dev = N.getRequestedDevice();
  if (Rec)
    Rec->Requested = Dev;
  for (const DeviceStack *S = N.getStack(); S && !S->isRoot(); S = S->Parent) {
    const DeviceEntry &E = *S->Entry;
    DeviceSpec Before = Dev;
    switch (E.K) {
    case DeviceEntry::Kind::Role:
      continue; // Unresolved until replicate-clones runs.
    case DeviceEntry::Kind::Spec:
      if (E.Spec.empty())
        continue; // The empty spec is skipped.
      Dev = DeviceSpec::merge(E.Spec, Dev);
      break;
    case DeviceEntry::Kind::Function:
      Dev = E.Fn->apply(N, Dev);
      break;
    case DeviceEntry::Kind::Clear:
      if (Rec) {
        Rec->Steps.push_back({&E, Before, Dev});
        Rec->StoppedAtClear = true;
      }
      return Dev;
    }
    if (Rec)
      Rec->Steps.push_back({&E, Before, Dev});
  }
  return Dev;
}

/// True when no entry of \p S (up to a clear marker) is a function, so the
/// walk of a node without a requested device depends on the stack only.
static bool isPureStack(const DeviceStack *S) {
  for (; S && !S->isRoot(); S = S->Parent) {
    if (S->Entry->K == DeviceEntry::Kind::Function)
      return false;
    if (S->Entry->K == DeviceEntry::Kind::Clear)
      return true;
  }
  return true;
}

/// Follows colocation links to the node that decides the device.
static Expected<const Node *> colocationRoot(const Node &N) {
  SmallPtrSet<const Node *, 8> Seen;
  const Node *Cur = &N;
  while (Cur->getColocateWith()) {
    if (!Seen.insert(Cur).second) {
      std::string Chain;
      const Node *C = &N;
      for (unsigned I = 0; I <= Seen.size(); ++I) {
        Chain += (I ? " -> " : "") + C->getName().str();
        C = C->getColocateWith();
      }
      return N.error("colocation cycle: " + Chain);
    }
    Cur = Cur->getColocateWith();
  }
  return Cur;
}

Error mdplan::placeDevices(Graph &G, const PlacementOptions &Opts,
                           const DiagnosticHandler &Diags,
                           MapVector<const Node *, PlacementRecord> *Records) {
  for (const auto &F : G.functions())
    F->reset();

  const Cluster &C = Opts.TheCluster;
  // The device each node's stack gives it, as an index into Specs: the
  // nodes of one pure stack share an entry.
  std::vector<DeviceSpec> Specs;
  std::vector<unsigned> SpecOf(G.getIdBound(), ~0u);
  DenseMap<const DeviceStack *, unsigned> PureCache;
  DenseMap<const DeviceStack *, bool> IsPure;

  auto Wants = [&](const Node &N) {
    return Records && Opts.ShouldRecord && Opts.ShouldRecord(N);
  };

  // 1. The stack walk, in graph order (functions with state advance in
  //    creation order). Colocated nodes skip their stack.
  for (const auto &NP : G.nodes()) {
    const Node &N = *NP;
    if (N.getColocateWith())
      continue;
    PlacementRecord *Rec = Wants(N) ? &(*Records)[&N] : nullptr;
    const DeviceStack *S = N.getStack();
    if (!Rec && N.getRequestedDevice().empty()) {
      auto PureIt = IsPure.try_emplace(S, false);
      if (PureIt.second)
        PureIt.first->second = isPureStack(S);
      if (PureIt.first->second) {
        auto It = PureCache.find(S);
        if (It == PureCache.end()) {
          Specs.push_back(walkDeviceStack(N));
          It = PureCache.try_emplace(S, Specs.size() - 1).first;
        }
        SpecOf[N.getId()] = It->second;
        continue;
      }
    }
    Specs.push_back(walkDeviceStack(N, Rec));
    SpecOf[N.getId()] = Specs.size() - 1;
  }

  // 2. Colocation, summaries, completion and the cluster check. What a
  //    spec completes to, once it has been placed without a diagnostic,
  //    is remembered for the other nodes that share it.
  struct Completed {
    DeviceSpec Final;
    int Id = -1;
  };
  std::vector<Completed> Done(Specs.size());
  std::map<std::string, int> DeviceIds;
  // Soft placement's moves, one warning per missing device (a node each
  // would be hundreds of lines for a few clones): how many nodes, the
  // first of them, in graph order.
  struct SoftMove {
    std::string Host, Why;
    const Node *First = nullptr;
    size_t Count = 0;
  };
  MapVector<std::string, SoftMove, std::map<std::string, unsigned>> Moves;
  // Said also when a later node fails: the moves made until then.
  auto Warn = make_scope_exit([&] {
    for (const auto &[Missing, M] : Moves)
      Diags.warning(M.First->getLoc(),
                    "'" + Missing + "' does not exist (" + M.Why + "): " +
                        (M.Count == 1
                             ? "its node '" + M.First->getName() + "' is"
                             : "its " + Twine(M.Count) + " nodes (the first '" +
                                   M.First->getName() + "') are") +
                        " placed on '" + M.Host + "' instead (soft placement)");
  });
  for (const auto &NP : G.nodes()) {
    Node &N = *NP;
    PlacementRecord *Rec = Wants(N) ? &(*Records)[&N] : nullptr;
    const Node *Root = &N;
    if (N.getColocateWith()) {
      auto R = colocationRoot(N);
      if (!R)
        return R.takeError();
      Root = *R;
      if (Rec) {
        Rec->Requested = N.getRequestedDevice();
        Rec->ColocatedWith = N.getColocateWith();
      }
    }
    unsigned SI = SpecOf[Root->getId()];
    assert(SI < Specs.size() && "a node without a stack device");
    bool Summary = N.getOp().is(OF_Summary);
    if (!Rec && !Summary && Done[SI].Id >= 0 &&
        (Root == &N || N.getRequestedDevice().isSatisfiedBy(Done[SI].Final))) {
      N.setDevice(Done[SI].Id);
      continue;
    }
    DeviceSpec Dev = Specs[SI];
    if (Summary) {
      // Summaries run on the host CPU of their task, never an accelerator.
      if (Dev.Type != std::optional<std::string>("CPU") ||
          Dev.Index != std::optional<int>(0)) {
        Dev.Type = "CPU";
        Dev.Index = 0;
        if (Rec)
          Rec->MovedToHost = true;
      }
    }
    if (Rec)
      Rec->AfterStack = Dev;

    DeviceSpec Final = C.complete(Dev);
    if (Root != &N && !N.getRequestedDevice().isSatisfiedBy(Final))
      return N.error("is colocated with '" + N.getColocateWith()->getName() +
                     "' on '" + Final.toString() + "' but asks for device '" +
                     N.getRequestedDevice().toString() + "'");
    std::string Why = C.whyMissing(Final);
    if (!Why.empty()) {
      DeviceSpec Host = C.hostOf(Final);
      if (!Opts.SoftPlacement || !C.contains(Host))
        return N.error("placed on '" + Final.toString() +
                       "', which the cluster does not have: " + Why +
                       (Opts.SoftPlacement || !C.contains(Host)
                            ? ""
                            : " (--soft-placement moves such nodes to the "
                              "host CPU)"));
      SoftMove &M = Moves[Final.toString()];
      if (!M.Count++) {
        M.Host = Host.toString();
        M.Why = Why;
        M.First = &N;
      }
      if (Rec)
        Rec->SoftFrom = Final;
      Final = Host;
    }
    if (Rec)
      Rec->Final = Final;
    auto Ins = DeviceIds.try_emplace(Final.toString(), -1);
    if (Ins.second)
      Ins.first->second = G.getOrAddDevice(Final);
    N.setDevice(Ins.first->second);
    if (!Summary && Why.empty() && Done[SI].Id < 0)
      Done[SI] = {std::move(Final), Ins.first->second};
  }
  return Error::success();
}

void mdplan::printPlacementRecord(raw_ostream &OS, const Node &N,
                                  const PlacementRecord &R) {
  auto Dev = [](const DeviceSpec &D) {
    std::string S = D.toString();
    return S.empty() ? std::string("<none>") : S;
  };
  OS << "placement of '" << N.getName() << "' (" << N.getOpName() << ", "
     << nodeRoleName(N.getRole()) << ")\n";
  OS << "  requested: " << Dev(R.Requested);
  if (N.getLoc().isValid())
    OS << " (" << N.getLoc().str() << ")";
  OS << '\n';
  if (R.ColocatedWith) {
    OS << "  colocated with '" << R.ColocatedWith->getName()
       << "': takes its device, skipping its own stack\n";
  } else {
    const PlacementStep *Decider = nullptr;
    for (const PlacementStep &S : R.Steps) {
      OS << "  " << S.Entry->describe();
      if (!S.Entry->Origin.empty())
        OS << " [" << S.Entry->Origin << "]";
      if (S.Entry->Loc.isValid())
        OS << " (" << S.Entry->Loc.str() << ")";
      if (S.Entry->K == DeviceEntry::Kind::Clear)
        OS << ": stops the walk\n";
      else if (S.Before == S.After)
        OS << ": no change\n";
      else {
        OS << ": " << Dev(S.Before) << " -> " << Dev(S.After) << '\n';
        Decider = &S;
      }
    }
    if (R.Steps.empty())
      OS << "  (no stack entries)\n";
    if (Decider)
      OS << "  decided by: " << Decider->Entry->describe()
         << (Decider->Entry->Origin.empty()
                 ? std::string()
                 : " [" + Decider->Entry->Origin + "]")
         << '\n';
    else
      OS << "  decided by: "
         << (R.Requested.empty() ? "nothing (defaults)" : "the node itself")
         << '\n';
  }
  if (R.MovedToHost)
    OS << "  summary: moved to the host CPU\n";
  OS << "  after stack: " << Dev(R.AfterStack) << '\n';
  if (R.SoftFrom)
    OS << "  soft placement: '" << R.SoftFrom->toString()
       << "' does not exist\n";
  OS << "  final: " << R.Final.toString() << '\n';
}
