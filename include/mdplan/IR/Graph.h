//===- Graph.h - The mdplan graph IR ----------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A Graph owns Nodes in creation order. Each node has an op (from the
// OpRegistry), data inputs that name an output of another node, control
// inputs, attributes, a requested device, the device-function stack it was
// created under, an optional colocation target, and, once passes ran, output
// types and an assigned device.
//
// Device stacks are interned chains of DeviceEntry (outermost first) so that
// millions of nodes share a handful of stacks.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_GRAPH_H
#define MDPLAN_IR_GRAPH_H

#include "mdplan/IR/Attr.h"
#include "mdplan/IR/DeviceSpec.h"
#include "mdplan/IR/Types.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/StringSaver.h"

#include <cassert>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace mdplan {

class Graph;
class Node;
struct OpDef;
struct DeployState;

/// One output of a node: the node and the output index.
struct TensorRef {
  Node *N = nullptr;
  unsigned Index = 0;

  TensorRef() = default;
  TensorRef(Node *N, unsigned Index = 0) : N(N), Index(Index) {}
  explicit operator bool() const { return N != nullptr; }
  bool operator==(const TensorRef &O) const {
    return N == O.N && Index == O.Index;
  }
  bool operator!=(const TensorRef &O) const { return !(*this == O); }
  /// `name` for output 0, `name:i` otherwise.
  std::string str() const;
  const TensorType &type() const;
};

/// What part of a deployed training step a node belongs to. Placement output
/// and explanations use it; passes use it to find the nodes they work on.
enum class NodeRole : uint8_t {
  /// Part of the model (replicated per clone).
  Model,
  /// Built once on the inputs device.
  Input,
  /// A variable or its regularizer (created once, shared).
  Variable,
  /// Loss gathering (clone_loss, total_loss, ...).
  Loss,
  /// Gradient computation.
  Gradient,
  /// Gradient summation and optimizer updates.
  Optimizer,
  /// Summaries (host CPU).
  Summary,
  /// Transfers and other plumbing added by partitioning.
  Transfer,
};

llvm::StringRef nodeRoleName(NodeRole R);

/// A rule in a device stack that looks at a node and the device chosen so
/// far, and returns the new device. Functions may keep state (a round-robin
/// counter); reset() restores the initial state before a placement run.
class DeviceFunction {
public:
  virtual ~DeviceFunction();
  /// Registered name, e.g. "ps-round-robin".
  virtual llvm::StringRef getName() const = 0;
  /// The arguments the function was created with, for printing.
  virtual const AttrDict &getArgs() const = 0;
  virtual DeviceSpec apply(const Node &N, const DeviceSpec &Current) = 0;
  virtual void reset() {}
  /// A fresh copy (state reset).
  virtual std::unique_ptr<DeviceFunction> clone() const = 0;
  /// `ps-round-robin(ps_device="/job:ps/device:CPU:0", tasks=2)`.
  std::string describe() const;
};

/// One entry of a device stack.
struct DeviceEntry {
  enum class Kind : uint8_t {
    /// A device spec merged under the device so far (possibly empty).
    Spec,
    /// A device function.
    Function,
    /// tf.device(None): nothing outside this entry applies.
    Clear,
    /// A deployment role (inputs, variables, optimizer device) that
    /// replicate-clones replaces with the deployment's entry; skipped by
    /// placement while unresolved.
    Role,
  };
  Kind K = Kind::Spec;
  DeviceSpec Spec;
  DeviceFunction *Fn = nullptr;
  /// Kind::Role: NodeRole::Input, Variable or Optimizer.
  NodeRole RoleKind = NodeRole::Model;
  /// Function entries with the same non-empty instance name share one
  /// function object (and its state).
  std::string Instance;
  /// Where the entry comes from, for --explain-placement: a deployment role
  /// such as "clone_device(1)", or "scope" for a scope in the graph file.
  std::string Origin;
  SourceLoc Loc;

  /// `/device:GPU:0`, `ps-round-robin(...)` or `<clear>`.
  std::string describe() const;
};

/// An interned chain of device entries: a trie node. The root (no entry) is
/// the empty stack.
struct DeviceStack {
  const DeviceStack *Parent = nullptr;
  const DeviceEntry *Entry = nullptr;
  unsigned Depth = 0;

  bool isRoot() const { return Entry == nullptr; }
  /// The entries, outermost first.
  llvm::SmallVector<const DeviceEntry *, 8> entries() const;
};

/// A node of the graph.
class Node {
public:
  llvm::StringRef getName() const { return Name; }
  const OpDef &getOp() const { return *Op; }
  llvm::StringRef getOpName() const;
  unsigned getId() const { return Id; }

  // Data inputs.
  llvm::ArrayRef<TensorRef> getInputs() const { return Inputs; }
  unsigned getNumInputs() const { return Inputs.size(); }
  TensorRef getInput(unsigned I) const { return Inputs[I]; }
  void setInput(unsigned I, TensorRef T) { Inputs[I] = T; }
  void addInput(TensorRef T) { Inputs.push_back(T); }
  void setInputs(llvm::ArrayRef<TensorRef> Ins) {
    Inputs.assign(Ins.begin(), Ins.end());
  }

  // Control inputs: run before this node, no data.
  llvm::ArrayRef<Node *> getControlInputs() const { return ControlInputs; }
  void addControlInput(Node *N);
  /// Adds each of \p Ns not there already, in order; linear in the number
  /// of control inputs, where adding them one by one is quadratic.
  void addControlInputs(llvm::ArrayRef<Node *> Ns);
  void setControlInputs(llvm::ArrayRef<Node *> Ns) {
    ControlInputs.assign(Ns.begin(), Ns.end());
  }

  AttrDict &attrs() { return Attrs; }
  const AttrDict &attrs() const { return Attrs; }

  /// The device the node itself asks for (innermost stack entry).
  const DeviceSpec &getRequestedDevice() const;
  /// Sets the requested device; the graph keeps one copy of each distinct
  /// spec, as most nodes ask for none and the rest for a handful.
  void setRequestedDevice(const DeviceSpec &D);

  const DeviceStack *getStack() const { return Stack; }
  void setStack(const DeviceStack *S) { Stack = S; }

  Node *getColocateWith() const { return ColocateWith; }
  void setColocateWith(Node *N) { ColocateWith = N; }

  // Output types (valid after shape inference).
  unsigned getNumOutputs() const { return Outputs.size(); }
  const TensorType &getOutputType(unsigned I) const { return Outputs[I]; }
  void setOutputType(unsigned I, TensorType T) { Outputs[I] = std::move(T); }
  void setNumOutputs(unsigned N) { Outputs.resize(N); }

  /// Assigned device: an index into Graph::getDevices(), or -1.
  int getDevice() const { return Device; }
  void setDevice(int D) { Device = D; }
  bool isPlaced() const { return Device >= 0; }

  const SourceLoc &getLoc() const { return Loc; }
  void setLoc(SourceLoc L) { Loc = L; }

  NodeRole getRole() const { return Role; }
  void setRole(NodeRole R) { Role = R; }
  /// The clone this node belongs to, or -1 for shared nodes.
  int getClone() const { return Clone; }
  void setClone(int C) { Clone = C; }

  Graph &getGraph() const { return *Parent; }

  /// Makes an error located at this node: `file:l:c: error: node 'n': msg`.
  llvm::Error error(const llvm::Twine &Message) const;

private:
  friend class Graph;
  Node(Graph &G, unsigned Id, llvm::StringRef Name, const OpDef &Op)
      : Parent(&G), Op(&Op), Name(Name), Id(Id) {}

  Graph *Parent;
  const OpDef *Op;
  llvm::StringRef Name;
  unsigned Id;
  int Device = -1;
  int Clone = -1;
  NodeRole Role = NodeRole::Model;
  llvm::SmallVector<TensorRef, 2> Inputs;
  llvm::SmallVector<Node *, 0> ControlInputs;
  AttrDict Attrs;
  /// Interned by the graph; null for the empty spec.
  const DeviceSpec *Requested = nullptr;
  const DeviceStack *Stack = nullptr;
  Node *ColocateWith = nullptr;
  llvm::SmallVector<TensorType, 1> Outputs;
  SourceLoc Loc;
};

/// A node name as a graph's name table keys it: its bytes, its length and
/// its hash, so that growing the table rehashes no string and a probe reads
/// the bytes of a name only when the hashes and lengths agree.
struct NodeNameKey {
  const char *Data = nullptr;
  uint32_t Size = 0;
  uint32_t Hash = 0;

  NodeNameKey() = default;
  /// The key of \p S (shorter than 4 GiB), its hash computed once.
  explicit NodeNameKey(llvm::StringRef S)
      : Data(S.data()), Size(uint32_t(S.size())),
        Hash(uint32_t(llvm::hash_value(S))) {
    assert(S.size() <= UINT32_MAX && "a node name of 4 GiB or more");
  }
  llvm::StringRef str() const { return llvm::StringRef(Data, Size); }
};

} // namespace mdplan

namespace llvm {
template <> struct DenseMapInfo<mdplan::NodeNameKey> {
  static mdplan::NodeNameKey getEmptyKey() {
    mdplan::NodeNameKey K;
    K.Data = reinterpret_cast<const char *>(~uintptr_t(0));
    return K;
  }
  static mdplan::NodeNameKey getTombstoneKey() {
    mdplan::NodeNameKey K;
    K.Data = reinterpret_cast<const char *>(~uintptr_t(1));
    return K;
  }
  static unsigned getHashValue(const mdplan::NodeNameKey &K) { return K.Hash; }
  static bool isEqual(const mdplan::NodeNameKey &L,
                      const mdplan::NodeNameKey &R) {
    if (R.Data == getEmptyKey().Data || R.Data == getTombstoneKey().Data ||
        L.Data == getEmptyKey().Data || L.Data == getTombstoneKey().Data)
      return L.Data == R.Data;
    return L.Hash == R.Hash && L.str() == R.str();
  }
};
} // namespace llvm

namespace mdplan {

/// Names of the graph collections, as in TF's GraphKeys.
enum class Collection : uint8_t {
  Losses,
  RegularizationLosses,
  UpdateOps,
  Summaries,
};
constexpr unsigned NumCollections = 4;
llvm::StringRef collectionName(Collection C);

/// Optimizer and learning-rate settings a graph file may carry as defaults.
struct OptimizerSettings {
  enum class Kind : uint8_t { SGD, Momentum, Adam, RMSProp, Adagrad };
  Kind K = Kind::SGD;
  double LearningRate = 0.01;
  /// Momentum and RMSProp; unset: the kind's default (momentum()).
  std::optional<double> Momentum;
  bool Nesterov = false;
  double Beta1 = 0.9;
  double Beta2 = 0.999;
  /// Adam and RMSProp; unset: the kind's default (epsilon()).
  std::optional<double> Epsilon;
  /// RMSProp's decay of the mean square (TF's `decay`, Keras's `rho`).
  double Rho = 0.9;
  /// Centered RMSProp: divide by the gradients' estimated variance (the
  /// mean square less the squared mean) instead of their mean square.
  bool Centered = false;
  /// Adagrad's accumulators start at this value (TF's
  /// initial_accumulator_value).
  double InitialAccumulator = 0.1;
  /// Gradient clipping after the gradients are summed (0: none): each
  /// variable's gradient to this L2 norm (slim's create_train_op
  /// clip_gradient_norm, tf.clip_by_norm), or all of them together to this
  /// global norm (tf.clip_by_global_norm). At most one of the two.
  double ClipNorm = 0;
  double ClipGlobalNorm = 0;
  /// The learning rate's decay over DecaySteps steps (0 = constant):
  /// exponential, lr * DecayRate ^ (step / DecaySteps), the exponent
  /// floored with Staircase (tf.train.exponential_decay); polynomial,
  /// (lr - EndLearningRate) (1 - min(step, DecaySteps) / DecaySteps) ^
  /// Power + EndLearningRate (tf.train.polynomial_decay).
  enum class Decay : uint8_t { Exponential, Polynomial };
  Decay DecayType = Decay::Exponential;
  int64_t DecaySteps = 0;
  double DecayRate = 1.0;
  bool Staircase = true;
  double EndLearningRate = 1e-4;
  double Power = 1.0;

  /// The momentum the update uses: the one given, else the kind's default
  /// (0.9 for momentum, where TF's MomentumOptimizer requires a value; 0
  /// for RMSProp, TF's default).
  double momentum() const {
    return Momentum.value_or(K == Kind::RMSProp ? 0.0 : 0.9);
  }
  /// The epsilon the update uses: the one given, else the kind's default
  /// (TF's: 1e-8 for Adam, 1e-10 for RMSProp).
  double epsilon() const {
    return Epsilon.value_or(K == Kind::RMSProp ? 1e-10 : 1e-8);
  }
};
llvm::StringRef optimizerKindName(OptimizerSettings::Kind K);
/// "exponential" or "polynomial".
llvm::StringRef decayTypeName(OptimizerSettings::Decay D);
/// The numeric fields of OptimizerSettings, by their graph-format names:
/// learning_rate, momentum, beta1, beta2, epsilon, rho,
/// initial_accumulator_value, decay_steps, decay_rate, end_learning_rate,
/// power, clip_gradient_norm, clip_global_norm.
llvm::ArrayRef<llvm::StringRef> optimizerValueFields();
/// What is wrong with field \p Field (one of optimizerValueFields()) of
/// \p O, e.g. "learning rate must be positive"; "" when it is valid.
std::string checkOptimizerField(const OptimizerSettings &O,
                                llvm::StringRef Field);

/// Named outputs in insertion order.
using NamedOutputs =
    llvm::MapVector<std::string, TensorRef, std::map<std::string, unsigned>>;

/// Destroys a node without freeing it: nodes live in their graph's
/// allocator, which frees them all at once.
struct NodeDestroyer {
  void operator()(Node *N) const;
};
/// The owner of a node in Graph::nodes().
using NodePtr = std::unique_ptr<Node, NodeDestroyer>;

/// The graph: nodes in creation order plus collections and named outputs.
class Graph {
public:
  Graph();
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  /// A deep copy of the nodes, stacks, collections, outputs and metadata
  /// (not of the deployment state nor of placement).
  std::unique_ptr<Graph> clone() const;

  /// Creates a node. The name must be unused (see lookup()). Its role is
  /// the one its op implies (Input, Variable, Summary; Model otherwise),
  /// its stack the root's, its attributes none: a node made here gets its
  /// attributes' defaults from verifyAndCompleteAttrs (OpRegistry.h), or
  /// use GraphBuilder (Builder.h), which does both and infers its types.
  Node *createNode(llvm::StringRef Name, const OpDef &Op);
  /// Creates a node named \p Base, or `Base_1`, `Base_2`, ... when taken.
  Node *createNodeUnique(llvm::StringRef Base, const OpDef &Op);
  /// Returns a name derived from \p Base that no node has.
  std::string uniqueName(llvm::StringRef Base);

  Node *lookup(llvm::StringRef Name) const {
    return Names.lookup(NodeNameKey(Name));
  }
  /// Renames \p N; the new name must be unused.
  void rename(Node *N, llvm::StringRef NewName);

  /// Removes the nodes for which \p Pred is true. The caller guarantees that
  /// no remaining node refers to them (inputs, control inputs, colocation,
  /// collections).
  void eraseIf(llvm::function_ref<bool(const Node &)> Pred);

  /// Nodes in creation order.
  llvm::ArrayRef<NodePtr> nodes() const { return NodeList; }
  size_t size() const { return NodeList.size(); }
  /// Every node id is below this bound (ids are never reused), so a table
  /// indexed by node id can replace a map keyed by node.
  unsigned getIdBound() const { return NextId; }
  /// Reorders the node list; \p Order must be a permutation of nodes().
  void setOrder(llvm::ArrayRef<Node *> Order);

  // Collections.
  llvm::SetVector<Node *> &collection(Collection C) {
    return Collections[unsigned(C)];
  }
  const llvm::SetVector<Node *> &collection(Collection C) const {
    return Collections[unsigned(C)];
  }

  /// Named outputs (for evaluation): name -> tensor.
  NamedOutputs &outputs() { return Outputs; }
  const NamedOutputs &outputs() const { return Outputs; }
  /// Where the named output \p Name was given (the reader's `output`
  /// entry); the graph's file without a position when it is not known.
  SourceLoc getOutputLoc(llvm::StringRef Name) const;
  void setOutputLoc(llvm::StringRef Name, SourceLoc Loc) {
    OutputLocs[Name] = Loc;
  }

  // Device stacks.
  const DeviceStack *getRootStack() const { return &Root; }
  /// The stack \p Parent with \p E pushed inside it (interned).
  const DeviceStack *pushStack(const DeviceStack *Parent, const DeviceEntry *E);
  /// Creates an entry owned by the graph.
  DeviceEntry *createEntry(DeviceEntry E);
  /// Takes ownership of a device function.
  DeviceFunction *addFunction(std::unique_ptr<DeviceFunction> F);
  /// The function registered under \p Instance, or null.
  DeviceFunction *lookupFunctionInstance(llvm::StringRef Instance) const {
    return Instances.lookup(Instance);
  }
  void setFunctionInstance(llvm::StringRef Instance, DeviceFunction *F) {
    Instances[Instance] = F;
  }
  llvm::ArrayRef<std::unique_ptr<DeviceFunction>> functions() const {
    return Functions;
  }

  // Devices assigned by placement.
  llvm::ArrayRef<DeviceSpec> getDevices() const { return Devices; }
  /// Index of \p D in the device table, adding it when new.
  int getOrAddDevice(const DeviceSpec &D);
  const DeviceSpec &getDevice(int I) const { return Devices[I]; }
  /// The assigned device of \p N, or the empty spec when unplaced.
  const DeviceSpec &deviceOf(const Node &N) const;

  // Metadata.
  llvm::StringRef getName() const { return Name; }
  void setName(llvm::StringRef N) { Name = N.str(); }
  llvm::StringRef getFileName() const { return FileName; }
  void setFileName(llvm::StringRef F) { FileName = internFileName(F); }
  /// Per-clone batch size once the deployment fixed it; 0 before.
  int64_t getBatchSize() const { return BatchSize; }
  void setBatchSize(int64_t B) { BatchSize = B; }
  /// Optimizer defaults from the graph file, when it names them.
  const std::optional<OptimizerSettings> &getOptimizer() const {
    return Optimizer;
  }
  void setOptimizer(OptimizerSettings S) { Optimizer = S; }
  /// Where the graph file set optimizer field \p Field (`momentum`); the
  /// file without a position when it did not.
  SourceLoc getOptimizerLoc(llvm::StringRef Field) const {
    auto It = OptimizerLocs.find(Field);
    return It == OptimizerLocs.end() ? SourceLoc{FileName, 0, 0} : It->second;
  }
  void setOptimizerLoc(llvm::StringRef Field, SourceLoc Loc) {
    OptimizerLocs[Field] = Loc;
  }
  /// Per-clone batch size the graph file suggests, 0 when none.
  int64_t getDefaultBatchSize() const { return DefaultBatch; }
  void setDefaultBatchSize(int64_t B) { DefaultBatch = B; }

  /// What the deployment passes recorded (created on first use).
  DeployState &deployState();
  bool hasDeployState() const { return State != nullptr; }

  /// Interns a string for the graph's lifetime.
  llvm::StringRef save(llvm::StringRef S) { return Saver.save(S); }

private:
  /// Nodes and interned strings. Declared first, so destroyed last.
  llvm::BumpPtrAllocator Alloc;
  llvm::UniqueStringSaver Saver{Alloc};
  std::vector<NodePtr> NodeList;
  /// Node names, their bytes in Alloc. (StringMap's hash in LLVM 14 reads
  /// a byte at a time; the names of a training graph are long.)
  llvm::DenseMap<NodeNameKey, Node *> Names;
  llvm::StringMap<unsigned> NextSuffix;
  unsigned NextId = 0;
  llvm::SetVector<Node *> Collections[NumCollections];
  NamedOutputs Outputs;
  llvm::StringMap<SourceLoc> OutputLocs;
  llvm::StringMap<SourceLoc> OptimizerLocs;

  DeviceStack Root;
  std::deque<DeviceStack> Stacks;
  llvm::DenseMap<std::pair<const DeviceStack *, const DeviceEntry *>,
                 const DeviceStack *>
      StackIndex;
  std::deque<DeviceEntry> Entries;
  std::vector<std::unique_ptr<DeviceFunction>> Functions;
  llvm::StringMap<DeviceFunction *> Instances;

  std::vector<DeviceSpec> Devices;
  std::map<std::string, int> DeviceIndex;

  friend class Node;
  /// Creates the node of a new entry of Names, \p Key (the caller's
  /// string, replaced by the graph's copy) and \p Slot.
  Node *createNewNode(NodeNameKey &Key, Node *&Slot, const OpDef &Op);
  /// A copy of \p S in Alloc, NUL-terminated.
  llvm::StringRef copyName(llvm::StringRef S);
  /// The graph's copy of \p D (see Node::setRequestedDevice).
  const DeviceSpec *internRequested(const DeviceSpec &D);
  std::deque<DeviceSpec> RequestedSpecs;
  std::map<std::string, const DeviceSpec *> RequestedIndex;

  std::string Name;
  llvm::StringRef FileName;
  int64_t BatchSize = 0;
  int64_t DefaultBatch = 0;
  std::optional<OptimizerSettings> Optimizer;
  std::unique_ptr<DeployState> State;
};

/// The consumers of every node through data and control edges, in graph
/// order (a node that reads another twice is listed twice), in one table
/// indexed by node id. A snapshot: nodes and edges added afterwards are not
/// in it.
class ConsumerTable {
public:
  explicit ConsumerTable(const Graph &G);
  llvm::ArrayRef<Node *> of(const Node &N) const {
    unsigned Id = N.getId();
    if (Id + 1 >= Begin.size())
      return {};
    return llvm::ArrayRef<Node *>(All).slice(Begin[Id],
                                             Begin[Id + 1] - Begin[Id]);
  }
  /// The ids of of(N), in the same order: a walk over ids reads no
  /// consumer node.
  llvm::ArrayRef<unsigned> idsOf(const Node &N) const {
    return idsOf(N.getId());
  }
  /// The ids of the consumers of the node with id \p Id.
  llvm::ArrayRef<unsigned> idsOf(unsigned Id) const {
    if (Id + 1 >= Begin.size())
      return {};
    return llvm::ArrayRef<unsigned>(AllIds).slice(Begin[Id],
                                                  Begin[Id + 1] - Begin[Id]);
  }

private:
  /// Node id -> index of its first consumer in All; one more than ids.
  std::vector<unsigned> Begin;
  std::vector<Node *> All;
  std::vector<unsigned> AllIds;
};

/// A value for every output of every node of one graph, in one array
/// indexed by node id and output index, where a map keyed by (node, output)
/// would hash. A snapshot: the nodes and output counts of when it was made.
template <typename T> class OutputTable {
public:
  OutputTable(const Graph &G, const T &Init) : G(&G) {
    Begin.assign(G.getIdBound() + 1, 0);
    for (const auto &N : G.nodes())
      Begin[N->getId() + 1] = N->getNumOutputs();
    for (size_t I = 1; I < Begin.size(); ++I)
      Begin[I] += Begin[I - 1];
    Values.assign(Begin.back(), Init);
  }

  /// The value of output \p Index of \p N, or null when \p N is not a node
  /// of the graph (another graph's included) or has no such output.
  T *find(const Node &N, unsigned Index) {
    unsigned Id = N.getId();
    if (&N.getGraph() != G || Id + 1 >= Begin.size() ||
        Index >= Begin[Id + 1] - Begin[Id])
      return nullptr;
    return &Values[Begin[Id] + Index];
  }
  const T *find(const Node &N, unsigned Index) const {
    return const_cast<OutputTable *>(this)->find(N, Index);
  }

private:
  const Graph *G;
  /// Node id -> index of its output 0 in Values; one more than ids.
  std::vector<unsigned> Begin;
  std::vector<T> Values;
};

/// The number of data and control inputs of \p N: the edges into it.
inline unsigned numInEdges(const Node &N) {
  return N.getNumInputs() + unsigned(N.getControlInputs().size());
}

} // namespace mdplan

#endif // MDPLAN_IR_GRAPH_H
