//===- SumGradients.cpp - Combine the clones' gradients -------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// ps strategy (model_deploy's _sum_clones_gradients): per trainable
// variable, the clones' gradients are summed with AddN named
// <variable>/sum_grads on the optimizer device; a single gradient passes
// through; a variable without one gets no update.
//
// mirrored strategy: the gradients of the clones sharing a device are added
// on that device, then one AllReduce node per bucket and device sums them
// across devices. Buckets are filled in reverse order of the backward pass
// (the gradients ready first go first): the first up to first-bucket-bytes,
// the next ones up to bucket-bytes (a bucket closes once it reaches its
// size; 0 puts every variable in a bucket of its own). Every device lists
// the buckets, and the variables in them, in the same order.
//
// Multi-worker mirrored (num_replicas W > 1): the devices of every worker
// form one all-reduce group. Each AllReduce node lists this worker's devices
// in `devices` and W in `replicas`; the runtime adds the workers' sums. There
// are all-reduces even when this worker has a single device.
//
// With clip_gradient_norm or clip_global_norm (optimizer fields), the
// summed gradients are then clipped where they are (ps: on the optimizer
// device; mirrored: each device its copies'), as slim's create_train_op
// (tf.clip_by_norm: g * c / max(|g|, c)) or tf.clip_by_global_norm (every
// g * (c * (1 / max(N, c)) + (N - N)) for the global norm N, NaN when N is
// not finite) would clip the gradients deploy() returns.
//
// With summarize_gradients (model_deploy's deploy() option), each variable's
// summed gradient (mirrored: copy 0's) gets, on the optimizer device, a
// HistogramSummary tagged `<var>:gradient` and one of its norm,
// sqrt(2 L2Loss(g)) as tf.global_norm computes it, tagged
// `<var>:gradient_norm`.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include <cmath>
#include <optional>

using namespace llvm;
using namespace mdplan;

namespace {

class SumGradientsPass : public Pass {
public:
  StringRef getName() const override { return "sum-gradients"; }
  Error setOption(StringRef Key, StringRef Value) override {
    int64_t V;
    if (Key != "first-bucket-bytes" && Key != "bucket-bytes")
      return Pass::setOption(Key, Value);
    if (Value.getAsInteger(10, V) || V < 0)
      return makeError("sum-gradients: " + Key +
                       " must be a non-negative integer, got '" + Value + "'");
    (Key == "bucket-bytes" ? Bucket : FirstBucket) = V;
    return Error::success();
  }
  Error run(Graph &G, PassContext &Ctx) override;

private:
  Error runPs(Graph &G, DeployState &S);
  Error runMirrored(Graph &G, DeployState &S, int64_t First, int64_t Rest,
                    int Replicas);

  std::optional<int64_t> FirstBucket, Bucket;
};

} // namespace

Error SumGradientsPass::runPs(Graph &G, DeployState &S) {
  // Variables in the order the first clone met them, then any other.
  MapVector<Node *, SmallVector<TensorRef, 4>> ByVar;
  for (const CloneInfo &CI : S.Clones)
    for (const auto &[Var, Grad] : CI.Gradients)
      ByVar[Var].push_back(Grad);
  GraphBuilder B(G);
  B.setStack(G.pushStack(G.getRootStack(), S.OptimizerEntry));
  B.setRole(NodeRole::Optimizer);
  for (auto &[Var, Grads] : ByVar) {
    if (Grads.size() == 1) {
      S.SummedGradients[Var] = Grads[0];
      continue;
    }
    std::string Name = (Var->getName() + "/sum_grads").str();
    if (G.lookup(Name))
      return Var->error("cannot create '" + Name +
                        "': a node of that name exists");
    Node *Sum = B.createNamed(Name, OpKind::AddN, Grads);
    if (Error E = B.takeError())
      return E;
    S.SummedGradients[Var] = TensorRef(Sum, 0);
  }
  return Error::success();
}

/// \p Replicas is the number of worker processes the all-reduces span.
Error SumGradientsPass::runMirrored(Graph &G, DeployState &S, int64_t First,
                                    int64_t Rest, int Replicas) {
  // The variables (copy 0) with a gradient anywhere, and the gradient of
  // each device group, summed over the group's clones.
  struct VarGrads {
    Node *Var;                          // copy 0
    SmallVector<TensorRef, 4> PerGroup; // one per device group
    unsigned Ready = 0;                 // creation order of its gradient
  };
  MapVector<Node *, VarGrads> Vars;
  std::vector<SmallVector<const CloneInfo *, 4>> GroupClones(S.NumDeviceGroups);
  for (const CloneInfo &CI : S.Clones)
    GroupClones[CI.DeviceGroup].push_back(&CI);

  auto CopyZero = [&](Node *V) -> Node * {
    auto It = S.MirrorOf.find(V);
    return It == S.MirrorOf.end() ? V : It->second;
  };
  for (const CloneInfo &CI : S.Clones)
    for (const auto &[Var, Grad] : CI.Gradients) {
      VarGrads &VG = Vars[CopyZero(Var)];
      VG.Var = CopyZero(Var);
      VG.PerGroup.resize(S.NumDeviceGroups);
      if (CI.Index == 0)
        VG.Ready = CI.GradientReady.lookup(Var);
    }

  for (auto &[V, VG] : Vars) {
    for (int Gp = 0; Gp < S.NumDeviceGroups; ++Gp) {
      const CloneInfo &Lead = *GroupClones[Gp][0];
      Node *Copy = S.copyFor(V, Lead);
      SmallVector<TensorRef, 4> Local;
      for (const CloneInfo *CI : GroupClones[Gp]) {
        auto It = CI->Gradients.find(Copy);
        if (It != CI->Gradients.end())
          Local.push_back(It->second);
      }
      GraphBuilder B(G);
      B.setStack(Lead.Stack);
      B.setClone(Lead.Index);
      B.setRole(NodeRole::Optimizer);
      if (Local.empty()) {
        // This device's clones do not depend on the variable; it still takes
        // part in the all-reduce with zeros.
        const TensorType &T = V->getOutputType(0);
        Local.push_back(B.constant(0.0, T.Elt, T.Dims,
                                   (Copy->getName() + "/zero_grads").str()));
      }
      TensorRef Sum = Local[0];
      if (Local.size() > 1) {
        std::string Name = (Copy->getName() + "/sum_grads").str();
        if (G.lookup(Name))
          return V->error("cannot create '" + Name +
                          "': a node of that name exists");
        Sum = TensorRef(B.createNamed(Name, OpKind::AddN, Local), 0);
      }
      if (Error E = B.takeError())
        return E;
      VG.PerGroup[Gp] = Sum;
    }
  }

  // One device and one worker: nothing to reduce.
  if (S.NumDeviceGroups == 1 && Replicas == 1) {
    for (auto &[V, VG] : Vars)
      S.SummedGradients[V] = VG.PerGroup[0];
    return Error::success();
  }

  // Buckets, filled in the order gradients become ready (reverse backward).
  std::vector<VarGrads *> ByReady;
  for (auto &[V, VG] : Vars)
    ByReady.push_back(&VG);
  std::stable_sort(
      ByReady.begin(), ByReady.end(),
      [](const VarGrads *A, const VarGrads *B) { return A->Ready < B->Ready; });
  std::vector<std::vector<VarGrads *>> Buckets;
  int64_t Filled = 0;
  for (VarGrads *VG : ByReady) {
    int64_t Cap = Buckets.size() <= 1 ? First : Rest;
    if (Buckets.empty() || Cap == 0 || Filled >= Cap) {
      Buckets.emplace_back();
      Filled = 0;
    }
    Buckets.back().push_back(VG);
    Filled += VG->Var->getOutputType(0).byteSize();
  }

  assert(S.GroupDevices.size() == size_t(S.NumDeviceGroups) &&
         "replicate-clones names each device group");
  // One list, shared by every participant's attribute (Attr payloads are
  // shared on copy): a copy each would be devices^2 strings.
  const Attr Devices(S.GroupDevices);
  for (unsigned Bk = 0; Bk < Buckets.size(); ++Bk) {
    for (int Gp = 0; Gp < S.NumDeviceGroups; ++Gp) {
      const CloneInfo &Lead = *GroupClones[Gp][0];
      SmallVector<TensorRef, 8> Ins;
      for (VarGrads *VG : Buckets[Bk])
        Ins.push_back(VG->PerGroup[Gp]);
      GraphBuilder B(G);
      B.setStack(Lead.Stack);
      B.setClone(Lead.Index);
      B.setRole(NodeRole::Optimizer);
      AttrDict A;
      A.set("group", "gradients");
      A.set("bucket", int64_t(Bk));
      A.set("devices", Devices);
      A.set("replicas", int64_t(Replicas));
      std::string Name = "allreduce/bucket_" + std::to_string(Bk) +
                         "/replica_" + std::to_string(Gp);
      Node *AR = B.createNamed(G.uniqueName(Name), OpKind::AllReduce, Ins,
                               std::move(A));
      if (Error E = B.takeError())
        return E;
      for (unsigned I = 0; I < Buckets[Bk].size(); ++I)
        S.SummedGradients[S.copyFor(Buckets[Bk][I]->Var, Lead)] =
            TensorRef(AR, I);
    }
  }
  return Error::success();
}

/// Where the clipping of each summed gradient goes: the optimizer device
/// (ps), or the device of the variable copy it updates (mirrored), as an
/// index into \p Sites.
struct ClipSite {
  const DeviceStack *Stack;
  int Clone;
  std::string Prefix; // of the global norm's nodes
};

static std::vector<unsigned> clipSites(Graph &G, const DeployState &S,
                                       bool Mirrored,
                                       std::vector<ClipSite> &Sites) {
  std::vector<unsigned> SiteOf;
  if (!Mirrored) {
    Sites.push_back({G.pushStack(G.getRootStack(), S.OptimizerEntry), -1,
                     "clip_by_global_norm"});
    SiteOf.assign(S.SummedGradients.size(), 0);
    return SiteOf;
  }
  for (int Gp = 0; Gp < S.NumDeviceGroups; ++Gp)
    for (const CloneInfo &CI : S.Clones)
      if (CI.DeviceGroup == Gp) {
        std::string Prefix = "clip_by_global_norm";
        if (S.NumDeviceGroups > 1)
          Prefix += "/replica_" + std::to_string(Gp);
        Sites.push_back({CI.Stack, CI.Index, Prefix});
        break;
      }
  for (const auto &[Var, Grad] : S.SummedGradients) {
    unsigned Gp = 0;
    if (auto It = S.MirrorOf.find(Var); It != S.MirrorOf.end()) {
      const auto &Copies = S.Mirrors.find(It->second)->second;
      Gp = unsigned(llvm::find(Copies, Var) - Copies.begin());
    }
    assert(Gp < Sites.size() && "a copy outside the device groups");
    SiteOf.push_back(Gp);
  }
  return SiteOf;
}

/// Clips the summed gradients to O.ClipNorm each or to O.ClipGlobalNorm
/// together (nothing when both are 0).
static Error clipGradients(Graph &G, DeployState &S, PassContext &Ctx,
                           const OptimizerSettings &O) {
  if (O.ClipNorm == 0 && O.ClipGlobalNorm == 0)
    return Error::success();
  const DeploymentConfig &C = Ctx.Config;
  if (O.ClipNorm > 0 && O.ClipGlobalNorm > 0)
    return makeError(optimizerFieldLoc(G, C, "clip_global_norm"),
                     "give clip_gradient_norm or clip_global_norm, not both");
  // A value that is not a normal number of the gradients' type would clip
  // them to NaN or 0 (or lose its precision).
  StringRef Field = O.ClipNorm > 0 ? "clip_gradient_norm" : "clip_global_norm";
  double Clip = O.ClipNorm > 0 ? O.ClipNorm : O.ClipGlobalNorm;
  for (auto &[Var, Grad] : S.SummedGradients)
    if (Grad.type().Elt == DType::Float32 && !std::isnormal(float(Clip)))
      return makeError(optimizerFieldLoc(G, C, Field),
                       Field + " " + formatNumber(Clip) +
                           " is outside float32's range (the gradient of "
                           "variable '" +
                           Var->getName() + "' is float32)");
  std::vector<ClipSite> Sites;
  std::vector<unsigned> SiteOf =
      clipSites(G, S, C.Strat == Strategy::Mirrored, Sites);
  auto Place = [&](GraphBuilder &B, unsigned Site, StringRef Prefix) {
    B.setStack(Sites[Site].Stack);
    B.setClone(Sites[Site].Clone);
    B.setRole(NodeRole::Optimizer);
    B.setPrefix(Prefix);
  };
  // sqrt(2 L2Loss(g)), as tf.global_norm computes a norm.
  auto Norm = [](GraphBuilder &B, TensorRef HalfSquares) {
    TensorRef Two = B.constant(2.0, HalfSquares.type().Elt);
    return B.out(OpKind::Sqrt, {B.out(OpKind::Mul, {HalfSquares, Two})});
  };

  if (O.ClipNorm > 0) {
    // tf.clip_by_norm: g * c / max(|g|, c).
    unsigned I = 0;
    for (auto &[Var, Grad] : S.SummedGradients) {
      GraphBuilder B(G);
      Place(B, SiteOf[I++], (Var->getName() + "/clip_by_norm").str());
      DType T = Grad.type().Elt;
      TensorRef Clip = B.constant(O.ClipNorm, T, {}, "clip_norm");
      TensorRef Max = B.out(OpKind::Maximum,
                            {Norm(B, B.out(OpKind::L2Loss, {Grad})), Clip});
      TensorRef Clipped = B.out(
          OpKind::Div, {B.out(OpKind::Mul, {Grad, Clip}), Max}, {}, "truediv");
      if (Error E = B.takeError())
        return E;
      Grad = Clipped;
    }
    return Error::success();
  }

  // tf.clip_by_global_norm, per site: every g * scale, scale = c * (1 /
  // max(N, c)) + (N - N) for the global norm N: 1 / max(N, c) is TF's
  // min(1 / N, 1 / c) exactly, and N - N makes the scale NaN when N is
  // infinite or NaN.
  std::vector<SmallVector<TensorRef, 8>> Halves(Sites.size());
  std::vector<DType> Types(Sites.size(), DType::Invalid);
  unsigned I = 0;
  for (auto &[Var, Grad] : S.SummedGradients) {
    unsigned Site = SiteOf[I++];
    DType T = Grad.type().Elt;
    if (Types[Site] != DType::Invalid && Types[Site] != T)
      return makeError(optimizerFieldLoc(G, C, "clip_global_norm"),
                       "clip_global_norm needs gradients of one type, but "
                       "variable '" +
                           Var->getName() + "' has " + dtypeName(T) +
                           " and an earlier one " + dtypeName(Types[Site]));
    Types[Site] = T;
    GraphBuilder B(G);
    Place(B, Site, Sites[Site].Prefix);
    Halves[Site].push_back(B.out(OpKind::L2Loss, {Grad}));
    if (Error E = B.takeError())
      return E;
  }
  std::vector<TensorRef> Scales(Sites.size());
  for (unsigned Site = 0; Site < Sites.size(); ++Site) {
    if (Halves[Site].empty())
      continue;
    GraphBuilder B(G);
    Place(B, Site, Sites[Site].Prefix);
    TensorRef Sum = Halves[Site].size() == 1
                        ? Halves[Site][0]
                        : B.out(OpKind::AddN, Halves[Site]);
    TensorRef Global = Norm(B, Sum);
    TensorRef Clip = B.constant(O.ClipGlobalNorm, Types[Site], {}, "clip_norm");
    TensorRef Inverse = B.out(
        OpKind::Div,
        {B.constant(1.0, Types[Site]), B.out(OpKind::Maximum, {Global, Clip})},
        {}, "inverse");
    TensorRef Finite =
        B.out(OpKind::Mul, {Clip, Inverse}, {}, "scale_for_finite");
    Scales[Site] = B.out(
        OpKind::Add,
        {Finite, B.out(OpKind::Sub, {Global, Global}, {}, "nan_if_not_finite")},
        {}, "scale");
    if (Error E = B.takeError())
      return E;
  }
  I = 0;
  for (auto &[Var, Grad] : S.SummedGradients) {
    unsigned Site = SiteOf[I++];
    GraphBuilder B(G);
    Place(B, Site, Var->getName());
    TensorRef Clipped =
        B.out(OpKind::Mul, {Grad, Scales[Site]}, {}, "clip_by_global_norm");
    if (Error E = B.takeError())
      return E;
    Grad = Clipped;
  }
  return Error::success();
}

/// model_deploy's _add_gradients_summaries for the summed gradients.
static Error addGradientSummaries(Graph &G, DeployState &S) {
  // The tags the model's summaries have (the clones' copies share theirs).
  StringMap<Node *> Tags;
  for (Node *N : G.collection(Collection::Summaries))
    Tags.try_emplace(N->attrs().getString("tag"), N);
  const DeviceStack *Stack = G.pushStack(G.getRootStack(), S.OptimizerEntry);
  auto Summary = [&](Node *Var, StringRef What, TensorRef Value) -> Error {
    std::string Tag = (Var->getName() + ":" + What).str();
    if (Node *Taken = Tags.lookup(Tag))
      return Taken->error("has tag '" + Tag +
                          "', which summarize_gradients gives the summary of "
                          "variable '" +
                          Var->getName() + "': choose another tag");
    GraphBuilder B(G);
    B.setStack(Stack);
    B.setRole(NodeRole::Summary);
    AttrDict A;
    A.set("tag", Tag);
    Node *N = B.createNamed((Var->getName() + "/" + What + "/summary").str(),
                            OpKind::HistogramSummary, {Value}, std::move(A));
    if (Error E = B.takeError())
      return E;
    G.collection(Collection::Summaries).insert(N);
    return Error::success();
  };
  for (auto &[Var, Grad] : S.SummedGradients) {
    // Mirrored: copy 0's gradient stands for every copy's (they are equal).
    if (S.MirrorOf.count(Var))
      continue;
    std::string Norm = (Var->getName() + "/gradient_norm").str();
    for (std::string Name :
         {(Var->getName() + "/gradient/summary").str(), Norm + "/L2Loss",
          Norm + "/Const", Norm + "/Mul", Norm + "/Sqrt", Norm + "/summary"})
      if (G.lookup(Name))
        return Var->error("cannot create '" + Name +
                          "' for summarize_gradients: a node of that name "
                          "exists");
    if (Error E = Summary(Var, "gradient", Grad))
      return E;
    // sqrt(2 L2Loss(g)), as tf.global_norm.
    GraphBuilder B(G);
    B.setStack(Stack);
    B.setRole(NodeRole::Optimizer);
    B.setPrefix(Norm);
    TensorRef Half = B.out(OpKind::L2Loss, {Grad});
    TensorRef Two = B.constant(2.0, Half.type().Elt);
    TensorRef Value = B.out(OpKind::Sqrt, {B.out(OpKind::Mul, {Half, Two})});
    if (Error E = B.takeError())
      return E;
    if (Error E = Summary(Var, "gradient_norm", Value))
      return E;
  }
  return Error::success();
}

Error SumGradientsPass::run(Graph &G, PassContext &Ctx) {
  if (Error E = requireReplicated(G, getName()))
    return E;
  DeployState &S = G.deployState();
  if (!S.GradientsBuilt)
    return makeError("sum-gradients needs build-gradients to run first");
  if (S.GradientsSummed)
    return makeError("sum-gradients: the gradients are already summed");
  if (Error E = requireUnplaced(G, getName()))
    return E;
  S.GradientsSummed = true;
  const DeploymentConfig &C = Ctx.Config;
  Error E = C.Strat == Strategy::Mirrored
                ? runMirrored(G, S, FirstBucket.value_or(C.FirstBucketBytes),
                              Bucket.value_or(C.BucketBytes), C.NumReplicas)
                : runPs(G, S);
  if (E)
    return E;
  // Clipped as create_train_op clips, then summarized (its order).
  if (Error E = clipGradients(G, S, Ctx, C.resolveOptimizer(G.getOptimizer())))
    return E;
  if (C.SummarizeGradients)
    return addGradientSummaries(G, S);
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createSumGradientsPass() {
  return std::make_unique<SumGradientsPass>();
}
