//===- ApplyOptimizer.cpp - Variable updates and the train op -------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// model_deploy's deploy() after the gradients: global_step on the variables
// device, one optimizer update per variable with a summed gradient (slots
// colocated with their variable, the update running where the variable
// lives; with the mirrored strategy every device updates its own copy), the
// update ops of the FIRST clone only (mirrored: applied to every copy with
// the first clone's values, so the copies stay identical; over several
// workers, with replica 0's first clone's values, which one all-reduce of
// group "updates" brings to every worker), global_step incremented once
// after all of them, and train_op = total_loss after every update.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include <cmath>

using namespace llvm;
using namespace mdplan;

namespace {

class ApplyOptimizerPass : public Pass {
public:
  StringRef getName() const override { return "apply-optimizer"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

} // namespace

/// The attributes of \p Var's optimizer slots: its own, with \p Initializer
/// (\p InitValue for "constant"), not trainable, no mirror.
static AttrDict slotAttrs(const Node &Var, StringRef Initializer,
                          double InitValue) {
  AttrDict A = Var.attrs();
  A.set("initializer", Initializer);
  if (Initializer == "constant")
    A.set("init_value", InitValue);
  A.set("trainable", false);
  A.erase("mirror_of");
  return A;
}

/// Creates the slot \p Suffix of \p Var, colocated with it, with the
/// attributes \p Attrs (of slotAttrs; the slots of a variable share them).
/// Null if the name is taken.
static Node *createSlot(Graph &G, Node *Var, StringRef Suffix,
                        const AttrDict &Attrs) {
  std::string Name = (Var->getName() + "/" + Suffix).str();
  if (G.lookup(Name))
    return nullptr;
  Node *Slot = G.createNode(Name, opDef(OpKind::Variable));
  const TensorType &T = Var->getOutputType(0);
  Slot->attrs() = Attrs;
  Slot->setStack(Var->getStack());
  Slot->setColocateWith(Var);
  Slot->setRole(NodeRole::Variable);
  Slot->setLoc(Var->getLoc());
  Slot->setNumOutputs(1);
  Slot->setOutputType(0, T);
  return Slot;
}

/// Multi-worker mirrored: makes the value inputs of the first clone's update
/// ops replica 0's on every worker, so that every worker's copies of the
/// updated variables stay identical, as one worker's copies all take its
/// first clone's values. One AllReduce (group "updates", after the
/// gradients' buckets) on the first clone's device adds replica 0's values
/// and the other workers' zeros.
static Error shareReplicaZeroValues(Graph &G, const DeploymentConfig &C,
                                    DeployState &S, ArrayRef<Node *> Updates) {
  SmallVector<std::pair<Node *, unsigned>, 8> Uses;
  SmallVector<TensorRef, 8> Values;
  for (Node *U : Updates) {
    SmallVector<unsigned, 3> Written = writtenInputs(*U);
    for (unsigned I = 0; I < U->getNumInputs(); ++I) {
      TensorRef In = U->getInput(I);
      // Variables agree across the workers already.
      if (is_contained(Written, I) || In.N->getOp().isVariable() ||
          !isFloat(In.type().Elt))
        continue;
      Uses.push_back({U, I});
      Values.push_back(In);
    }
  }
  if (Values.empty())
    return Error::success();
  int64_t Bucket = 0;
  for (const auto &N : G.nodes())
    if (N->getOp().is(OF_Collective))
      Bucket = std::max(Bucket, N->attrs().getInt("bucket") + 1);
  const CloneInfo &Lead = S.Clones[0];
  GraphBuilder B(G);
  B.setStack(Lead.Stack);
  B.setClone(Lead.Index);
  B.setRole(NodeRole::Optimizer);
  if (C.ReplicaId != 0)
    for (unsigned I = 0; I < Values.size(); ++I) {
      const TensorType &T = Values[I].type();
      Values[I] = B.constant(0.0, T.Elt, T.Dims,
                             "update_values/zeros_" + std::to_string(I));
    }
  AttrDict A;
  A.set("group", "updates");
  A.set("bucket", Bucket);
  A.set("devices", std::vector<std::string>{Lead.Device.toString()});
  A.set("replicas", int64_t(C.NumReplicas));
  Node *AR = B.createNamed(G.uniqueName("allreduce/update_values"),
                           OpKind::AllReduce, Values, std::move(A));
  if (Error E = B.takeError())
    return E;
  for (unsigned I = 0; I < Uses.size(); ++I)
    Uses[I].first->setInput(Uses[I].second, TensorRef(AR, I));
  return Error::success();
}

/// Warns about optimizer fields the optimizer does not read (`momentum` for
/// SGD, `beta1` for momentum), given or with a value other than their
/// default, or that a decay without its other half leaves without effect:
/// TF would have refused such arguments, and here they would change
/// nothing.
static void warnUnusedOptimizerFields(const Graph &G, PassContext &Ctx,
                                      const OptimizerSettings &O) {
  const DeploymentConfig &C = Ctx.Config;
  const OptimizerSettings Default;
  using K = OptimizerSettings::Kind;
  auto Where = [&](StringRef Field) { return optimizerFieldLoc(G, C, Field); };
  StringRef Kind = optimizerKindName(O.K);
  auto Unused = [&](StringRef Field, bool Differs, StringRef UsedBy) {
    if (Differs)
      Ctx.Diags.warning(Where(Field),
                        Field + " is not used by optimizer " + Kind +
                            " (only " + UsedBy +
                            (UsedBy.contains(' ') ? " use" : " uses") +
                            " it): it has no effect");
  };
  if (O.K != K::Momentum && O.K != K::RMSProp)
    Unused("momentum", O.Momentum.has_value(), "momentum and rmsprop");
  if (O.K != K::Momentum)
    Unused("nesterov", O.Nesterov != Default.Nesterov, "momentum");
  if (O.K != K::Adam) {
    Unused("beta1", O.Beta1 != Default.Beta1, "adam");
    Unused("beta2", O.Beta2 != Default.Beta2, "adam");
  }
  if (O.K != K::Adam && O.K != K::RMSProp)
    Unused("epsilon", O.Epsilon.has_value(), "adam and rmsprop");
  if (O.K != K::RMSProp) {
    Unused("rho", O.Rho != Default.Rho, "rmsprop");
    Unused("centered", O.Centered != Default.Centered, "rmsprop");
  }
  if (O.K != K::Adagrad)
    Unused("initial_accumulator_value",
           O.InitialAccumulator != Default.InitialAccumulator, "adagrad");
  // The decay's fields, for the decay type that does not read them.
  using D = OptimizerSettings::Decay;
  auto UnusedByDecay = [&](StringRef Field, bool Differs) {
    if (Differs)
      Ctx.Diags.warning(Where(Field), Field + " is not used by decay_type " +
                                          decayTypeName(O.DecayType) +
                                          ": it has no effect");
  };
  if (O.DecayType == D::Polynomial) {
    UnusedByDecay("decay_rate", O.DecayRate != Default.DecayRate);
    UnusedByDecay("staircase", O.Staircase != Default.Staircase);
    if (O.DecaySteps == 0)
      Ctx.Diags.warning(Where("decay_type"),
                        "decay_type polynomial has no effect without "
                        "decay_steps: the learning rate stays constant");
    return;
  }
  UnusedByDecay("end_learning_rate",
                O.EndLearningRate != Default.EndLearningRate);
  UnusedByDecay("power", O.Power != Default.Power);
  for (auto [Field, Differs] :
       {std::pair<StringRef, bool>{"decay_rate",
                                   O.DecayRate != Default.DecayRate},
        {"staircase", O.Staircase != Default.Staircase}})
    if (O.DecaySteps == 0 && Differs)
      Ctx.Diags.warning(Where(Field), Field +
                                          " has no effect without decay_steps: "
                                          "the learning rate stays constant");
  if (O.DecaySteps > 0 && O.DecayRate == 1)
    Ctx.Diags.warning(Where("decay_steps"),
                      "decay_steps has no effect with decay_rate 1 (its "
                      "default): the learning rate stays constant");
}

Error ApplyOptimizerPass::run(Graph &G, PassContext &Ctx) {
  if (Error E = requireReplicated(G, getName()))
    return E;
  DeployState &S = G.deployState();
  if (!S.GradientsSummed)
    return makeError("apply-optimizer needs sum-gradients to run first");
  if (S.TrainOp)
    return makeError("apply-optimizer: the train op exists already");
  if (Error E = requireUnplaced(G, getName()))
    return E;
  const DeploymentConfig &C = Ctx.Config;
  OptimizerSettings O = C.resolveOptimizer(G.getOptimizer());
  // The reader and the deployment check the values they set; this is for
  // graphs built otherwise.
  std::string Why = checkOptimizerField(O, "learning_rate");
  if (!Why.empty())
    return makeError(C.originOf("learning_rate"), Why);
  warnUnusedOptimizerFields(G, Ctx, O);

  for (StringRef Name : {"global_step", "train_op", "global_step/AssignAdd"})
    if (Node *Taken = G.lookup(Name))
      return Taken->error("apply-optimizer gives a node of its own this name; "
                          "rename this node");

  // global_step lives on the variables device (a chooser of its own, as
  // model_deploy calls variables_device() again for it).
  const DeviceStack *OptStack = G.pushStack(G.getRootStack(), S.OptimizerEntry);
  GraphBuilder B(G);
  B.setStack(
      G.pushStack(OptStack, createVariablesEntry(G, C, "variables_device")));
  B.setRole(NodeRole::Variable);
  AttrDict GA;
  GA.set("dtype", DType::Int64);
  GA.set("initializer", "zeros");
  GA.set("trainable", false);
  Node *GlobalStep =
      B.createNamed("global_step", OpKind::Variable, {}, std::move(GA));
  if (Error E = B.takeError())
    return E;
  S.GlobalStep = GlobalStep;

  std::vector<Node *> Updates;
  B.setStack(OptStack);
  B.setRole(NodeRole::Optimizer);
  // The update ops' attributes and slots, the same for every variable (the
  // ops share one dictionary).
  AttrDict UpdateAttrs;
  UpdateAttrs.set("learning_rate", O.LearningRate);
  UpdateAttrs.set("decay_steps", O.DecaySteps);
  UpdateAttrs.set("decay_rate", O.DecayRate);
  UpdateAttrs.set("decay_type", decayTypeName(O.DecayType));
  UpdateAttrs.set("staircase", O.Staircase);
  UpdateAttrs.set("end_learning_rate", O.EndLearningRate);
  UpdateAttrs.set("power", O.Power);
  OpKind K = OpKind::ApplyGradientDescent;
  // The slots, named as TF's optimizers name them, and their initializers.
  struct SlotKind {
    StringRef Suffix, Initializer;
    /// The value of a "constant" initializer.
    double InitValue = 0;
  };
  SmallVector<SlotKind, 2> Slots;
  switch (O.K) {
  case OptimizerSettings::Kind::SGD:
    break;
  case OptimizerSettings::Kind::Momentum:
    K = OpKind::ApplyMomentum;
    Slots = {{"Momentum", "zeros"}};
    UpdateAttrs.set("momentum", O.momentum());
    UpdateAttrs.set("nesterov", O.Nesterov);
    break;
  case OptimizerSettings::Kind::Adam:
    K = OpKind::ApplyAdam;
    Slots = {{"Adam", "zeros"}, {"Adam_1", "zeros"}};
    UpdateAttrs.set("beta1", O.Beta1);
    UpdateAttrs.set("beta2", O.Beta2);
    UpdateAttrs.set("epsilon", O.epsilon());
    break;
  case OptimizerSettings::Kind::RMSProp:
    // The mean square starts at one (TF's RMSPropOptimizer), the momentum
    // at zero.
    K = OpKind::ApplyRMSProp;
    Slots = {{"RMSProp", "ones"}, {"RMSProp_1", "zeros"}};
    if (O.Centered) {
      // TF's slots in the order it makes them: the mean square, the mean
      // gradient, the momentum.
      K = OpKind::ApplyCenteredRMSProp;
      Slots = {
          {"RMSProp", "ones"}, {"RMSProp_1", "zeros"}, {"RMSProp_2", "zeros"}};
    }
    UpdateAttrs.set("rho", O.Rho);
    UpdateAttrs.set("momentum", O.momentum());
    UpdateAttrs.set("epsilon", O.epsilon());
    break;
  case OptimizerSettings::Kind::Adagrad:
    // The accumulator starts at initial_accumulator_value (TF's
    // AdagradOptimizer), so that the first step divides by more than zero.
    K = OpKind::ApplyAdagrad;
    Slots = {{"Adagrad", "constant", O.InitialAccumulator}};
    break;
  }
  // The copies of a variable in the clones differ only in mirror_of, which
  // their slots drop: their slots share one dictionary per initializer.
  AttrDictUniquer SlotUniquer;
  for (auto &[Var, Grad] : S.SummedGradients) {
    // Adagrad's initial accumulator must be a normal number of the
    // variable's type: 0 (or a denormal, which the updates flush to zero)
    // would divide by zero, infinity freeze the variable.
    if (O.K == OptimizerSettings::Kind::Adagrad &&
        Var->getOutputType(0).Elt == DType::Float32 &&
        !std::isnormal(float(O.InitialAccumulator)))
      return makeError(optimizerFieldLoc(G, C, "initial_accumulator_value"),
                       "initial_accumulator_value " +
                           formatNumber(O.InitialAccumulator) +
                           " is outside float32's range (variable '" +
                           Var->getName() + "' is float32)");
    SmallVector<TensorRef, 5> Ins = {TensorRef(Var)};
    AttrDict SlotAttrs;
    for (unsigned I = 0; I < Slots.size(); ++I) {
      StringRef Suffix = Slots[I].Suffix;
      if (I == 0 || Slots[I].Initializer != Slots[I - 1].Initializer)
        SlotAttrs = SlotUniquer.unique(
            slotAttrs(*Var, Slots[I].Initializer, Slots[I].InitValue));
      Node *Slot = createSlot(G, Var, Suffix, SlotAttrs);
      if (!Slot)
        return Var->error("cannot create its optimizer slot '" +
                          Var->getName() + "/" + Suffix +
                          "': a node of that name exists");
      Ins.push_back(TensorRef(Slot));
    }
    Ins.push_back(Grad);
    Ins.push_back(TensorRef(GlobalStep));
    std::string Name = ("update_" + Var->getName() + "/" + opDef(K).Name).str();
    Node *U = B.createNamed(G.uniqueName(Name), K, Ins, UpdateAttrs);
    if (Error E = B.takeError())
      return E;
    U->setColocateWith(Var);
    Updates.push_back(U);
  }

  // The update ops of the first clone (and of shared nodes).
  std::vector<Node *> FirstUpdates;
  for (Node *U : G.collection(Collection::UpdateOps))
    if (U->getClone() <= 0)
      FirstUpdates.push_back(U);
  if (C.Strat == Strategy::Mirrored && C.NumReplicas > 1)
    if (Error E = shareReplicaZeroValues(G, C, S, FirstUpdates))
      return E;
  for (Node *U : FirstUpdates) {
    Updates.push_back(U);
    if (C.Strat != Strategy::Mirrored || U->getNumInputs() == 0)
      continue;
    // Mirrored: every other copy of the variable gets the first clone's
    // update too.
    Node *Var = U->getInput(0).N;
    auto It = S.Mirrors.find(Var);
    if (It == S.Mirrors.end())
      continue;
    for (unsigned Gp = 1; Gp < It->second.size(); ++Gp) {
      Node *Copy = It->second[Gp];
      std::string Name = (U->getName() + "/replica_" + Twine(Gp)).str();
      if (G.lookup(Name))
        return U->error("cannot create its mirrored copy '" + Name +
                        "': a node of that name exists");
      Node *UC = G.createNode(Name, U->getOp());
      UC->attrs() = U->attrs();
      SmallVector<TensorRef, 2> Ins(U->getInputs().begin(),
                                    U->getInputs().end());
      Ins[0] = TensorRef(Copy, U->getInput(0).Index);
      UC->setInputs(Ins);
      UC->setControlInputs(U->getControlInputs());
      UC->setColocateWith(Copy);
      UC->setStack(U->getStack());
      UC->setRole(U->getRole());
      UC->setClone(U->getClone());
      UC->setLoc(U->getLoc());
      if (Error E = inferNodeShapes(*UC))
        return E;
      Updates.push_back(UC);
    }
  }

  // global_step += 1 once every update ran; then train_op.
  AttrDict IA;
  IA.set("amount", int64_t(1));
  Node *Inc = B.createNamed("global_step/AssignAdd", OpKind::AssignAdd,
                            {TensorRef(GlobalStep)}, std::move(IA));
  if (Error E = B.takeError())
    return E;
  Inc->setColocateWith(GlobalStep);
  Inc->addControlInputs(Updates);
  B.setRole(NodeRole::Loss);
  Node *Train = S.TotalLoss ? B.createNamed("train_op", OpKind::Identity,
                                            {TensorRef(S.TotalLoss)})
                            : B.createNamed("train_op", OpKind::NoOp, {});
  if (Error E = B.takeError())
    return E;
  Train->addControlInputs(Updates);
  Train->addControlInput(Inc);
  S.TrainOp = Train;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createApplyOptimizerPass() {
  return std::make_unique<ApplyOptimizerPass>();
}
