//===- ReplicateClones.cpp - One copy of the model per clone --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// model_deploy's create_clones: the model part of the graph is copied once
// per clone under clone_scope(i) with clone_device(i) as the outermost stack
// entry. Nodes built once stay shared: inputs (on the inputs device, each
// clone reading its own slice of the batch), variables (created with the
// first clone, under the variables device; with the mirrored strategy one
// copy per clone device named <var>/replica_i), and nodes in role scopes.
// Each clone's losses, update ops and summaries go into the collections
// under the clone's scope.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/IR/Verifier.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include "llvm/ADT/DenseSet.h"

#include <map>
#include <tuple>

using namespace llvm;
using namespace mdplan;

namespace {

class ReplicateClonesPass : public Pass {
public:
  StringRef getName() const override { return "replicate-clones"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

/// Builds the new stacks: deployment entries around (and inside) the user's
/// scopes, with role entries replaced by the deployment's.
class StackRebaser {
public:
  StackRebaser(Graph &G, const DeploymentConfig &C) : G(G), C(C) {}

  const DeviceStack *rebase(const DeviceStack *Stack, const DeviceEntry *Outer,
                            const DeviceEntry *Inner) {
    auto Key = std::make_tuple(Stack, Outer, Inner);
    auto It = Memo.find(Key);
    if (It != Memo.end())
      return It->second;
    const DeviceStack *R = G.getRootStack();
    if (Outer)
      R = G.pushStack(R, Outer);
    for (const DeviceEntry *E : Stack->entries())
      R = G.pushStack(R, E->K == DeviceEntry::Kind::Role ? roleEntry(E) : E);
    if (Inner)
      R = G.pushStack(R, Inner);
    return Memo[Key] = R;
  }

private:
  /// The deployment's entry for a role scope of the graph file. Every
  /// VARIABLES scope gets its own variables device (with ps tasks: its own
  /// chooser, as each call of model_deploy's variables_device()).
  const DeviceEntry *roleEntry(const DeviceEntry *E) {
    auto &Slot = Roles[E];
    if (Slot)
      return Slot;
    DeviceEntry *R;
    switch (E->RoleKind) {
    case NodeRole::Input:
      R = createSpecEntry(G, C.inputsDevice(), "inputs_device");
      break;
    case NodeRole::Optimizer:
      R = createSpecEntry(G, C.optimizerDevice(), "optimizer_device");
      break;
    default:
      R = createVariablesEntry(G, C, "variables_device");
      break;
    }
    R->Loc = E->Loc;
    return Slot = R;
  }

  Graph &G;
  const DeploymentConfig &C;
  std::map<
      std::tuple<const DeviceStack *, const DeviceEntry *, const DeviceEntry *>,
      const DeviceStack *>
      Memo;
  DenseMap<const DeviceEntry *, const DeviceEntry *> Roles;
};

} // namespace

/// True when the node sits in a role scope of the graph file.
static bool inRoleScope(const Node &N) {
  for (const DeviceStack *S = N.getStack(); S && !S->isRoot(); S = S->Parent)
    if (S->Entry->K == DeviceEntry::Kind::Role)
      return true;
  return false;
}

/// Built once and shared by the clones (not copied).
static bool isShared(const Node &N) {
  return inRoleScope(N) || N.getRole() == NodeRole::Input ||
         N.getRole() == NodeRole::Variable;
}

Error ReplicateClonesPass::run(Graph &G, PassContext &Ctx) {
  const DeploymentConfig &C = Ctx.Config;
  DeployState &S = G.deployState();
  if (S.Replicated)
    return makeError("replicate-clones: the graph is already replicated");
  if (Error E = requireUnplaced(G, getName()))
    return E;
  // A graph read back from --emit=graph after the training passes: it
  // holds the clones' batch slices or the optimizer's updates, and running
  // the passes again would replicate the clones again and apply every
  // update twice. (Transfers and all-reduces a model may hold by hand.)
  for (const auto &N : G.nodes()) {
    OpKind K = N->getOp().Kind;
    if (K == OpKind::BatchSlice || K == OpKind::ApplyGradientDescent ||
        K == OpKind::ApplyMomentum || K == OpKind::ApplyAdam ||
        K == OpKind::ApplyRMSProp || K == OpKind::ApplyCenteredRMSProp ||
        K == OpKind::ApplyAdagrad)
      return makeError(N->getLoc(),
                       "node '" + N->getName() + "' has op " + N->getOp().Name +
                           ", which mdplan's passes make: the graph has been "
                           "through them already (the output of "
                           "--emit=graph?); compile the model it came from, "
                           "or name the passes it still needs with --passes=");
    // The copies this pass makes of a mirrored variable name their first:
    // set by hand, it would start a variable from another's value.
    if (N->getOp().isVariable() && !N->attrs().getString("mirror_of").empty())
      return makeError(N->getLoc(),
                       "node '" + N->getName() +
                           "' has attribute 'mirror_of', which "
                           "replicate-clones sets on the copies of a "
                           "mirrored variable it makes; a model may not set "
                           "it");
  }
  if (Error E = C.validate())
    return E;
  // No batch size anywhere: the graph file lacks it (the flags are the
  // other way to give one).
  if (!C.BatchPerClone && !C.GlobalBatch && G.getDefaultBatchSize() <= 0 &&
      !G.getFileName().empty())
    return makeError(SourceLoc{G.getFileName(), 0, 0},
                     "no batch size: the graph file has no training { "
                     "batch_size }; give it one, or --batch-per-clone or "
                     "--global-batch (or a --config file's)");
  auto Batch = C.perCloneBatch(G.getDefaultBatchSize());
  if (!Batch)
    return Batch.takeError();
  const bool Mirrored = C.Strat == Strategy::Mirrored;
  const int NumClones = C.NumClones;

  // The role entries and the clones.
  S.InputsEntry = createSpecEntry(G, C.inputsDevice(), "inputs_device");
  S.OptimizerEntry =
      createSpecEntry(G, C.optimizerDevice(), "optimizer_device");
  const DeviceEntry *VarsEntry = createVariablesEntry(G, C, "variables_device");
  std::map<std::string, int> Groups;
  std::vector<const DeviceEntry *> MirrorEntries;
  // Soft placement moves a clone whose device the cluster lacks to its
  // task's CPU. Mirrored clones that end up on one device so share its
  // variable copies and add their gradients there, as clones on one device
  // always do (an all-reduce needs one participant per device).
  Cluster Cl = C.cluster();
  auto GroupDevice = [&](const DeviceSpec &D) {
    DeviceSpec Full = Cl.complete(D);
    if (C.SoftPlacement && !Cl.contains(Full) && Cl.contains(Cl.hostOf(Full)))
      return Cl.hostOf(Full).toString();
    return D.toString();
  };
  for (int I = 0; I < NumClones; ++I) {
    CloneInfo CI;
    CI.Index = I;
    auto Dev = C.cloneDevice(I);
    auto Scope = C.cloneScope(I);
    if (!Dev)
      return Dev.takeError();
    if (!Scope)
      return Scope.takeError();
    CI.Device = *Dev;
    CI.Scope = Scope->empty() ? std::string() : *Scope + "/";
    CI.Entry = createSpecEntry(G, CI.Device,
                               "clone_device(" + std::to_string(I) + ")");
    CI.Stack =
        G.pushStack(G.pushStack(G.getRootStack(), S.OptimizerEntry), CI.Entry);
    std::string GroupDev = GroupDevice(CI.Device);
    auto Ins = Groups.try_emplace(GroupDev, int(Groups.size()));
    CI.DeviceGroup = Ins.first->second;
    if (Ins.second) {
      S.GroupDevices.push_back(GroupDev);
      // MirroredStrategy creates copy g inside ops.device(d), d its
      // device complete (job, replica, task, type, index).
      MirrorEntries.push_back(
          createSpecEntry(G, Cl.complete(CI.Device),
                          "mirrored copy " + std::to_string(CI.DeviceGroup)));
    }
    S.Clones.push_back(std::move(CI));
  }
  S.NumDeviceGroups = Mirrored ? int(Groups.size()) : 1;

  auto TopoOrErr = topologicalOrder(G);
  if (!TopoOrErr)
    return TopoOrErr.takeError();
  std::vector<Node *> Orig;
  for (const auto &N : G.nodes())
    Orig.push_back(N.get());

  // Tables indexed by the ids of the nodes there are now; nodes created
  // below are in none of them.
  const unsigned Bound = G.getIdBound();
  auto ById = [Bound](const std::vector<char> &T, const Node *N) {
    return N->getId() < Bound && T[N->getId()];
  };

  // Shared nodes must not depend on the replicated model.
  std::vector<char> SharedIds(Bound, 0);
  for (Node *N : Orig)
    SharedIds[N->getId()] = isShared(*N);
  auto Shared = [&](const Node *N) { return ById(SharedIds, N); };
  for (Node *N : Orig) {
    if (!Shared(N))
      continue;
    for (const TensorRef &In : N->getInputs())
      if (!Shared(In.N))
        return N->error("is built once, outside the clones, but reads '" +
                        In.N->getName() +
                        "', which is part of the replicated model");
    for (Node *Ctl : N->getControlInputs())
      if (!Shared(Ctl))
        return N->error("is built once, outside the clones, but depends on '" +
                        Ctl->getName() +
                        "', which is part of the replicated model");
    if (N->getColocateWith() && !Shared(N->getColocateWith()))
      return N->error("is built once, outside the clones, but is colocated "
                      "with '" +
                      N->getColocateWith()->getName() +
                      "', which is part of the replicated model");
  }

  // Shared tensors that carry the batch in dimension 0 (batch-major): each
  // clone reads its own slice. The shared nodes' types are inferred here
  // with the batch unknown, so a tensor computed from an input carries the
  // batch where its dimension is unknown; statistics over the batch (a
  // scalar mean, a per-feature mean) have no unknown dimension and every
  // clone reads them whole.
  for (Node *N : Orig)
    if (N->getOp().is(OF_Input))
      N->attrs().set("batch_size", int64_t(-1));
  DenseSet<std::pair<const Node *, unsigned>> BatchMajor;
  for (Node *N : *TopoOrErr) {
    if (!Shared(N))
      continue;
    if (Error E = inferNodeShapes(*N))
      return E;
    for (unsigned K = 0, E = N->getNumOutputs(); K != E; ++K) {
      const Shape &Dims = N->getOutputType(K).Dims;
      if (Dims.rank() && Dims[0] == Shape::Unknown)
        BatchMajor.insert({N, K});
    }
  }

  // Variables the clones read directly get mirrored copies. A clone may not
  // read a shared tensor that carries the batch in another dimension: it
  // cannot be given its slice.
  std::vector<char> ReadByClones(Bound, 0);
  for (Node *N : Orig) {
    if (Shared(N))
      continue;
    for (const TensorRef &In : N->getInputs()) {
      if (In.N->getOp().isVariable())
        ReadByClones[In.N->getId()] = 1;
      if (NumClones == 1 || !Shared(In.N) || BatchMajor.count({In.N, In.Index}))
        continue;
      const TensorType &T = In.N->getOutputType(In.Index);
      if (is_contained(T.Dims.dims(), Shape::Unknown))
        return In.N->error(
            "is built once, outside the clones, and carries the batch in "
            "another dimension than the first (" +
            T.str() +
            "); the clones can only be given slices of tensors "
            "whose first dimension is the batch");
    }
  }

  StackRebaser Rebaser(G, C);
  const DeviceEntry *Clone0 = S.Clones[0].Entry;
  // A mirrored copy's stack: its complete device, and nothing outside it.
  // The device d of MirroredStrategy's ops.device(d) is innermost and
  // complete, so neither the variable's own device nor its scopes (nor
  // their device functions, which keep a device of another job) change it.
  const DeviceStack *MirrorBase = nullptr;
  if (Mirrored) {
    DeviceEntry Clear;
    Clear.K = DeviceEntry::Kind::Clear;
    Clear.Origin = "mirrored variable: its own device and scopes do not apply";
    MirrorBase = G.pushStack(G.getRootStack(), G.createEntry(std::move(Clear)));
  }
  std::vector<Node *> NewOrder;
  NewOrder.reserve(Orig.size() * NumClones);

  // 1. Shared nodes, with mirrored copies after their variable.
  for (Node *N : Orig) {
    if (!Shared(N))
      continue;
    bool RoleScope = inRoleScope(*N);
    bool IsVar = N->getOp().isVariable();
    bool MirrorIt = Mirrored && IsVar && ById(ReadByClones, N);
    if (MirrorIt) {
      N->setRequestedDevice(DeviceSpec());
      N->setStack(G.pushStack(MirrorBase, MirrorEntries[0]));
    } else if (RoleScope)
      N->setStack(Rebaser.rebase(N->getStack(), nullptr, nullptr));
    else if (N->getOp().is(OF_Input))
      N->setStack(Rebaser.rebase(N->getStack(), S.InputsEntry, nullptr));
    else
      N->setStack(Rebaser.rebase(N->getStack(), Clone0,
                                 MirrorIt ? MirrorEntries[0] : VarsEntry));
    if (N->getOp().is(OF_Input))
      N->attrs().set("batch_size", *Batch * NumClones);
    NewOrder.push_back(N);
    if (!MirrorIt)
      continue;
    auto &Copies = S.Mirrors[N];
    Copies.push_back(N);
    for (int Gp = 1; Gp < S.NumDeviceGroups; ++Gp) {
      std::string Name = (N->getName() + "/replica_" + Twine(Gp)).str();
      if (G.lookup(Name))
        return N->error("cannot create its mirrored copy '" + Name +
                        "': a node of that name exists");
      Node *Copy = G.createNode(Name, N->getOp());
      Copy->attrs() = N->attrs();
      Copy->attrs().set("mirror_of", N->getName());
      Copy->setLoc(N->getLoc());
      Copy->setRole(NodeRole::Variable);
      Copy->setNumOutputs(N->getNumOutputs());
      Copy->setStack(G.pushStack(MirrorBase, MirrorEntries[Gp]));
      Copies.push_back(Copy);
      S.MirrorOf[Copy] = N;
      NewOrder.push_back(Copy);
    }
  }

  // 2. The clones.
  std::vector<std::string> OrigNames;
  std::vector<Node *> Model;
  for (Node *N : Orig)
    if (!Shared(N)) {
      Model.push_back(N);
      OrigNames.push_back(N->getName().str());
    }
  // Check the clone names are free before renaming anything. A model node
  // holding one is renamed itself ('clone_0/x' to 'clone_0/clone_0/x', as
  // TensorFlow's name scopes do), so only the others are in the way.
  auto Renamed = [&](const Node *N) {
    return N->getId() < Bound && !Shared(N);
  };
  for (const CloneInfo &CI : S.Clones) {
    if (CI.Scope.empty())
      break;
    for (unsigned I = 0; I < Model.size(); ++I) {
      std::string Name = CI.Scope + OrigNames[I];
      if (Node *Old = G.lookup(Name))
        if (Old != Model[I] && !Renamed(Old))
          return Model[I]->error("cannot be replicated as '" + Name +
                                 "': a node of that name exists");
    }
  }
  // Clone 0's renames, longest name first: a node holding a name another
  // is renamed to has a longer one, and so has been renamed already.
  if (!S.Clones[0].Scope.empty()) {
    std::vector<unsigned> ByLength(Model.size());
    for (unsigned I = 0; I < Model.size(); ++I)
      ByLength[I] = I;
    llvm::stable_sort(ByLength, [&](unsigned A, unsigned B) {
      return OrigNames[A].size() > OrigNames[B].size();
    });
    for (unsigned I : ByLength)
      G.rename(Model[I], S.Clones[0].Scope + OrigNames[I]);
  }

  // Clone 0 is rewritten in place: remember what the others copy.
  struct Snapshot {
    const DeviceStack *Stack;
    SmallVector<TensorRef, 2> Inputs;
    SmallVector<Node *, 2> Control;
    Node *Colocate;
  };
  std::vector<Snapshot> Snap;
  Snap.reserve(Model.size());
  for (Node *M : Model)
    Snap.push_back(
        {M->getStack(),
         {M->getInputs().begin(), M->getInputs().end()},
         {M->getControlInputs().begin(), M->getControlInputs().end()},
         M->getColocateWith()});

  // Each clone's copy of a model node, by the model node's id.
  std::vector<std::vector<Node *>> CloneMaps(NumClones);
  auto CopyOf = [Bound](const std::vector<Node *> &Map, const Node *N) {
    return N->getId() < Bound ? Map[N->getId()] : nullptr;
  };
  for (const CloneInfo &CI : S.Clones) {
    std::vector<Node *> &Map = CloneMaps[CI.Index];
    Map.assign(Bound, nullptr);
    std::vector<Node *> Copies;
    for (unsigned I = 0; I < Model.size(); ++I) {
      Node *M = Model[I];
      Node *Copy;
      if (CI.Index == 0) {
        Copy = M; // Renamed above.
      } else {
        Copy = G.createNode(CI.Scope + OrigNames[I], M->getOp());
        Copy->attrs() = M->attrs();
        Copy->setRequestedDevice(M->getRequestedDevice());
        Copy->setLoc(M->getLoc());
        Copy->setRole(M->getRole());
        Copy->setNumOutputs(M->getNumOutputs());
      }
      Copy->setInputs(Snap[I].Inputs);
      Copy->setControlInputs(Snap[I].Control);
      Copy->setColocateWith(Snap[I].Colocate);
      Copy->setClone(CI.Index);
      Copy->setStack(Rebaser.rebase(Snap[I].Stack, CI.Entry, nullptr));
      Map[M->getId()] = Copy;
      Copies.push_back(Copy);
    }

    // Rewire the clone's edges: clone nodes, batch slices, mirrored copies.
    DenseMap<std::pair<Node *, unsigned>, Node *> Slices;
    std::vector<Node *> SliceNodes;
    auto MapTensor = [&](TensorRef T) -> TensorRef {
      if (Node *R = CopyOf(Map, T.N))
        return TensorRef(R, T.Index);
      if (NumClones > 1 && BatchMajor.count({T.N, T.Index})) {
        Node *&Slice = Slices[{T.N, T.Index}];
        if (!Slice) {
          std::string Name = CI.Scope + T.N->getName().str();
          if (T.Index)
            Name += "_" + std::to_string(T.Index);
          Slice = G.createNodeUnique(Name, opDef(OpKind::BatchSlice));
          Slice->setInputs({T});
          Slice->attrs().set("index", int64_t(CI.Index));
          Slice->attrs().set("count", int64_t(NumClones));
          // Built where the sliced node was asked to be.
          Slice->setRequestedDevice(T.N->getRequestedDevice());
          Slice->setStack(T.N->getStack());
          Slice->setLoc(T.N->getLoc());
          Slice->setRole(NodeRole::Input);
          Slice->setClone(CI.Index);
          Slice->setNumOutputs(1);
          SliceNodes.push_back(Slice);
        }
        return TensorRef(Slice, 0);
      }
      if (T.N->getOp().isVariable())
        return TensorRef(S.copyFor(T.N, CI), T.Index);
      return T;
    };
    auto MapNode = [&](Node *N) -> Node * {
      if (Node *R = CopyOf(Map, N))
        return R;
      if (N->getOp().isVariable())
        return S.copyFor(N, CI);
      return N;
    };
    for (Node *Copy : Copies) {
      for (unsigned I = 0, E = Copy->getNumInputs(); I != E; ++I)
        Copy->setInput(I, MapTensor(Copy->getInput(I)));
      SmallVector<Node *, 4> Ctl;
      for (Node *N : Copy->getControlInputs())
        Ctl.push_back(MapNode(N));
      Copy->setControlInputs(Ctl);
      if (Copy->getColocateWith())
        Copy->setColocateWith(MapNode(Copy->getColocateWith()));
    }
    NewOrder.insert(NewOrder.end(), SliceNodes.begin(), SliceNodes.end());
    NewOrder.insert(NewOrder.end(), Copies.begin(), Copies.end());
  }

  // Collections: each clone's losses, update ops and summaries, and its
  // copies of the regularization losses the model computes (model_deploy
  // reads REGULARIZATION_LOSSES unscoped: every clone's entries).
  for (Collection Coll :
       {Collection::Losses, Collection::UpdateOps, Collection::Summaries,
        Collection::RegularizationLosses}) {
    SetVector<Node *> Old = G.collection(Coll);
    SetVector<Node *> &New = G.collection(Coll);
    New.clear();
    for (Node *N : Old) {
      if (Shared(N)) {
        New.insert(N);
        continue;
      }
      for (const std::vector<Node *> &Map : CloneMaps)
        New.insert(CopyOf(Map, N));
    }
  }

  // What is colocated with a mirrored copy runs on the copy's device: its
  // own device, like the variable's, no longer applies (a node that asked
  // for the variable's device would be refused as a conflict).
  if (Mirrored)
    for (Node *N : NewOrder) {
      Node *Root = N;
      for (unsigned Hops = 0; Root->getColocateWith() && Hops < 64; ++Hops)
        Root = Root->getColocateWith();
      if (Root != N && !N->getRequestedDevice().empty() &&
          (S.Mirrors.count(Root) || S.MirrorOf.count(Root)))
        N->setRequestedDevice(DeviceSpec());
    }

  G.setBatchSize(*Batch);
  G.setOrder(NewOrder);
  S.Replicated = true;

  // Shapes now that the batch is known.
  auto Topo = topologicalOrder(G);
  if (!Topo)
    return Topo.takeError();
  for (Node *N : *Topo)
    if (Error E = inferNodeShapes(*N))
      return E;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createReplicateClonesPass() {
  return std::make_unique<ReplicateClonesPass>();
}
