//===- ModelWriter.cpp - Writing graph descriptions -----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelWriter.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace llvm;
using namespace mdplan;

namespace {
class Writer {
public:
  Writer(const Graph &G, raw_ostream &OS, const WriteOptions &Opts)
      : G(G), OS(OS), Opts(Opts) {}

  void write();

private:
  raw_ostream &indent() { return OS.indent(2 * Depth); }
  void str(StringRef S) {
    OS << '"';
    OS.write_escaped(S);
    OS << '"';
  }
  void writeAttr(StringRef Field, StringRef Name, const Attr &A);
  void writeEntry(const DeviceEntry &E);
  void writeNode(const Node &N, bool Placed);
  StringRef instanceName(const DeviceEntry &E);

  /// The regularizers the reader made from a variable's
  /// `regularizer { l2 }` (read back, written nodes would be a model's, one
  /// per clone): written as that again, by the variable, while no pass has
  /// run.
  void findRegularizers();

  const Graph &G;
  raw_ostream &OS;
  const WriteOptions &Opts;
  unsigned Depth = 0;
  /// Variables with a reader-made L2 regularizer, and its scale.
  DenseMap<const Node *, double> L2Scale;
  /// That regularizer's nodes (left out).
  DenseSet<const Node *> Sugar;
  DenseMap<const DeviceFunction *, std::string> Instances;
  StringSet<> UsedInstances;
  unsigned NextInstance = 0;
};
} // namespace

static StringRef protoTypeName(DType T) {
  switch (T) {
  case DType::Float32:
    return "FLOAT32";
  case DType::Float64:
    return "FLOAT64";
  case DType::Int32:
    return "INT32";
  case DType::Int64:
    return "INT64";
  case DType::Bool:
    return "BOOL";
  case DType::Invalid:
    return "DT_INVALID";
  }
  llvm_unreachable("bad dtype");
}

void Writer::writeAttr(StringRef Field, StringRef Name, const Attr &A) {
  indent() << Field << " { name: ";
  str(Name);
  OS << ' ';
  auto List = [&](StringRef F, auto &&Items, auto &&Print) {
    if (Items.empty()) {
      // The format has no empty list; the empty shape converts to one.
      OS << "shape {}";
      return;
    }
    OS << F << ": [";
    bool First = true;
    for (const auto &I : Items) {
      if (!First)
        OS << ", ";
      Print(I);
      First = false;
    }
    OS << ']';
  };
  switch (A.kind()) {
  case AttrKind::Int:
    OS << "i: " << A.getInt();
    break;
  case AttrKind::Float:
    OS << "f: ";
    A.print(OS);
    break;
  case AttrKind::Bool:
    OS << "b: " << (A.getBool() ? "true" : "false");
    break;
  case AttrKind::String:
    OS << "s: ";
    str(A.getString());
    break;
  case AttrKind::Type:
    OS << "type: " << protoTypeName(A.getType());
    break;
  case AttrKind::Shape: {
    auto D = A.getShape().dims();
    if (D.empty()) {
      OS << "shape {}";
      break;
    }
    OS << "shape { dim: [";
    for (unsigned I = 0; I < D.size(); ++I)
      OS << (I ? ", " : "") << D[I];
    OS << "] }";
    break;
  }
  case AttrKind::IntList:
    List("ints", A.getInts(), [&](int64_t V) { OS << V; });
    break;
  case AttrKind::FloatList:
    List("floats", A.getFloats(), [&](double V) { Attr(V).print(OS); });
    break;
  case AttrKind::StringList:
    List("strings", A.getStrings(), [&](const std::string &V) { str(V); });
    break;
  }
  OS << " }\n";
}

StringRef Writer::instanceName(const DeviceEntry &E) {
  auto It = Instances.find(E.Fn);
  if (It != Instances.end())
    return It->second;
  std::string Name = E.Instance;
  if (Name.empty() || UsedInstances.count(Name)) {
    do
      Name = "fn" + std::to_string(NextInstance++);
    while (UsedInstances.count(Name) || G.lookupFunctionInstance(Name));
  }
  UsedInstances.insert(Name);
  return Instances[E.Fn] = Name;
}

void Writer::writeEntry(const DeviceEntry &E) {
  switch (E.K) {
  case DeviceEntry::Kind::Spec:
    indent() << "device: ";
    str(E.Spec.toString());
    OS << '\n';
    return;
  case DeviceEntry::Kind::Function: {
    indent() << "function {\n";
    ++Depth;
    indent() << "name: ";
    str(E.Fn->getName());
    OS << '\n';
    for (const auto &[K, V] : E.Fn->getArgs())
      writeAttr("arg", K, V);
    indent() << "instance: ";
    str(instanceName(E));
    OS << '\n';
    --Depth;
    indent() << "}\n";
    return;
  }
  case DeviceEntry::Kind::Clear:
    indent() << "clear: true\n";
    return;
  case DeviceEntry::Kind::Role: {
    StringRef R = E.RoleKind == NodeRole::Input      ? "INPUTS"
                  : E.RoleKind == NodeRole::Variable ? "VARIABLES"
                                                     : "OPTIMIZER";
    indent() << "role: " << R << '\n';
    return;
  }
  }
}

void Writer::findRegularizers() {
  // Once the passes have run, the graph is written as it is (for reading,
  // not for compiling again: replicate-clones refuses it).
  if (G.hasDeployState())
    return;
  for (const Node *R : G.collection(Collection::RegularizationLosses)) {
    // Var/Regularizer/l2_regularizer = Mul(L2Loss(Var), scale), as
    // ModelBuilder::addRegularizer makes it.
    if (R->getOp().Kind != OpKind::Mul || R->getRole() != NodeRole::Variable ||
        R->getNumInputs() != 2)
      continue;
    const Node *L2 = R->getInput(0).N, *Scale = R->getInput(1).N;
    if (L2->getOp().Kind != OpKind::L2Loss || L2->getNumInputs() != 1 ||
        Scale->getOp().Kind != OpKind::Const)
      continue;
    const Node *Var = L2->getInput(0).N;
    std::string Prefix = (Var->getName() + "/Regularizer/l2_regularizer").str();
    const Attr *Value = Scale->attrs().get("value");
    if (!Var->getOp().isVariable() || R->getName() != Prefix ||
        L2->getName() != Prefix + "/L2Loss" ||
        Scale->getName() != Prefix + "/scale" || !Value ||
        Value->kind() != AttrKind::FloatList ||
        Value->getFloats().size() != 1 || L2Scale.count(Var))
      continue;
    bool Plain = true;
    for (const Node *N : {R, L2, Scale})
      Plain &= N->getColocateWith() == Var &&
               N->getRole() == NodeRole::Variable &&
               N->getStack() == Var->getStack() &&
               N->getRequestedDevice() == Var->getRequestedDevice();
    if (!Plain)
      continue;
    L2Scale[Var] = Value->getFloats()[0];
    for (const Node *N : {R, L2, Scale})
      Sugar.insert(N);
  }
}

void Writer::writeNode(const Node &N, bool Placed) {
  indent() << "node {\n";
  ++Depth;
  indent() << "name: ";
  str(N.getName());
  OS << '\n';
  indent() << "op: ";
  str(N.getOpName());
  OS << '\n';
  for (const TensorRef &In : N.getInputs()) {
    indent() << "input: ";
    str(In.str());
    OS << '\n';
  }
  for (const Node *C : N.getControlInputs()) {
    indent() << "input: ";
    str(("^" + C->getName()).str());
    OS << '\n';
  }
  const OpDef &Op = N.getOp();
  for (const auto &[K, V] : N.attrs()) {
    // Attributes at their default value are left out.
    const AttrDef *D = Op.findAttr(K);
    if (D && D->Default && *D->Default == V)
      continue;
    writeAttr("attr", K, V);
  }
  std::string Dev =
      Placed ? G.deviceOf(N).toString() : N.getRequestedDevice().toString();
  if (!Dev.empty()) {
    indent() << "device: ";
    str(Dev);
    OS << '\n';
  }
  if (N.getColocateWith()) {
    indent() << "colocate_with: ";
    str(N.getColocateWith()->getName());
    OS << '\n';
  }
  auto L2 = L2Scale.find(&N);
  if (L2 != L2Scale.end()) {
    indent() << "variable { regularizer { l2: ";
    Attr(L2->second).print(OS);
    OS << " } }\n";
  }
  --Depth;
  indent() << "}\n";
}

void Writer::write() {
  findRegularizers();
  if (!G.getName().empty()) {
    OS << "name: ";
    str(G.getName());
    OS << '\n';
  }
  // Scopes are opened and closed around runs of nodes with the same stack.
  SmallVector<const DeviceStack *, 8> Open;
  for (const auto &NP : G.nodes()) {
    const Node &N = *NP;
    if (Sugar.count(&N))
      continue;
    bool Placed = Opts.UseAssignedDevices && N.isPlaced();
    SmallVector<const DeviceStack *, 8> Path;
    if (!Placed)
      for (const DeviceStack *S = N.getStack(); S && !S->isRoot();
           S = S->Parent)
        Path.push_back(S);
    std::reverse(Path.begin(), Path.end());
    unsigned Common = 0;
    while (Common < Open.size() && Common < Path.size() &&
           Open[Common] == Path[Common])
      ++Common;
    while (Open.size() > Common) {
      Open.pop_back();
      --Depth;
      indent() << "}\n";
    }
    for (unsigned I = Common; I < Path.size(); ++I) {
      indent() << "scope {\n";
      ++Depth;
      writeEntry(*Path[I]->Entry);
      Open.push_back(Path[I]);
    }
    writeNode(N, Placed);
  }
  while (!Open.empty()) {
    Open.pop_back();
    --Depth;
    indent() << "}\n";
  }
  static const StringRef Fields[] = {"loss", "regularization_loss", "update_op",
                                     "summary"};
  for (unsigned C = 0; C < NumCollections; ++C)
    for (const Node *N : G.collection(Collection(C))) {
      if (Sugar.count(N))
        continue;
      OS << Fields[C] << ": ";
      str(N->getName());
      OS << '\n';
    }
  for (const auto &[Name, T] : G.outputs()) {
    OS << "output { name: ";
    str(Name);
    OS << " tensor: ";
    str(T.str());
    OS << " }\n";
  }
  if (G.getOptimizer() || G.getDefaultBatchSize()) {
    OS << "training {\n";
    if (const auto &O = G.getOptimizer()) {
      static const char *Kinds[] = {"SGD", "MOMENTUM", "ADAM", "RMSPROP",
                                    "ADAGRAD"};
      OS << "  optimizer {\n    kind: " << Kinds[unsigned(O->K)] << '\n';
      auto F = [&](StringRef Name, double V) {
        OS << "    " << Name << ": ";
        Attr(V).print(OS);
        OS << '\n';
      };
      F("learning_rate", O->LearningRate);
      // Unset, these two take the kind's default: written only when given,
      // so that the graph read back resolves as this one does.
      if (O->Momentum)
        F("momentum", *O->Momentum);
      OS << "    nesterov: " << (O->Nesterov ? "true" : "false") << '\n';
      F("beta1", O->Beta1);
      F("beta2", O->Beta2);
      if (O->Epsilon)
        F("epsilon", *O->Epsilon);
      F("rho", O->Rho);
      OS << "    centered: " << (O->Centered ? "true" : "false") << '\n';
      F("initial_accumulator_value", O->InitialAccumulator);
      F("clip_gradient_norm", O->ClipNorm);
      F("clip_global_norm", O->ClipGlobalNorm);
      OS << "    decay_steps: " << O->DecaySteps << '\n';
      F("decay_rate", O->DecayRate);
      OS << "    decay_type: "
         << (O->DecayType == OptimizerSettings::Decay::Polynomial
                 ? "POLYNOMIAL"
                 : "EXPONENTIAL")
         << '\n';
      OS << "    staircase: " << (O->Staircase ? "true" : "false") << '\n';
      F("end_learning_rate", O->EndLearningRate);
      F("power", O->Power);
      OS << "  }\n";
    }
    if (G.getDefaultBatchSize())
      OS << "  batch_size: " << G.getDefaultBatchSize() << '\n';
    OS << "}\n";
  }
}

void mdplan::writeModel(const Graph &G, raw_ostream &OS,
                        const WriteOptions &Opts) {
  Writer(G, OS, Opts).write();
}
