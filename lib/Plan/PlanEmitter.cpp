//===- PlanEmitter.cpp - Writing FlatBuffers plans ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/MemoryPlanner.h"
#include "mdplan/Transforms/PassUtils.h"

#include "mdrt/Plan.h"
#include "mdrt/Random.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Allocator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

using namespace llvm;
using namespace mdplan;
namespace fb = mdplan::plan;

#ifndef MDPLAN_VERSION_STRING
#define MDPLAN_VERSION_STRING "0.1.0"
#endif

StringRef mdplan::planProducer() { return "mdplan " MDPLAN_VERSION_STRING; }

namespace {

using TensorKey = std::pair<const Node *, unsigned>;

struct BufInfo {
  /// The output the buffer holds (its name and shape), in a graph that
  /// outlives the emitter.
  TensorKey Key;
  uint32_t Device = 0;
  DType Elt = DType::Invalid;
  uint64_t Offset = 0, Bytes = 0;
  bool Persistent = false;
  int AliasOf = -1;
};

/// A builder whose list of vtables, which EndTable scans front to back for
/// one equal to a new table's, stays in most recently used order: a plan
/// has millions of tables of a few dozen layouts, and the kernels and
/// attributes that follow each other mostly share the last few. The list
/// holds each layout once, so its order changes where a new table finds
/// its vtable, not which one it finds: the bytes stay the same.
class PlanBuilder : public flatbuffers::FlatBufferBuilder {
public:
  explicit PlanBuilder(size_t InitialSize)
      : flatbuffers::FlatBufferBuilder(InitialSize) {}

  /// Moves the vtable of \p Table, a table just made, to the front of the
  /// list. Call it between tables only, when the list is all the builder's
  /// scratch memory holds.
  template <typename T>
  flatbuffers::Offset<T> recent(flatbuffers::Offset<T> Table) {
    using flatbuffers::uoffset_t;
    const uint8_t *At = buf_.data_at(Table.o);
    uoffset_t VTable = uoffset_t(
        int64_t(Table.o) + flatbuffers::ReadScalar<flatbuffers::soffset_t>(At));
    auto *First = reinterpret_cast<uoffset_t *>(buf_.scratch_data());
    auto *Last = reinterpret_cast<uoffset_t *>(buf_.scratch_end());
    uoffset_t *It = std::find(First, Last, VTable);
    assert(It != Last && "a table whose vtable the builder does not list");
    if (It != Last)
      std::rotate(First, It, It + 1);
    return Table;
  }
};

class Emitter {
public:
  Emitter(Graph &Train, Graph *Eval, const DeploymentConfig &C)
      : Train(Train), Eval(Eval), C(C), FB(initialBytes(Train, Eval)) {}
  Expected<PlanBytes> emit();

private:
  /// One program's graph and its buffer ids.
  struct Prog {
    Prog(Graph *G, std::string Name)
        : G(G), Name(std::move(Name)), BufIds(*G, NoBuffer) {}
    static constexpr uint32_t NoBuffer = UINT32_MAX;
    Graph *G;
    std::string Name;
    /// Output -> plan buffer id, NoBuffer until assigned.
    OutputTable<uint32_t> BufIds;
    std::vector<uint32_t> DevMap; // graph device -> plan device
    /// Node id -> the offset of its name in the plan, 0 until written.
    std::vector<flatbuffers::uoffset_t> NameOffs;

    /// The buffer of \p K, or NoBuffer (also for another graph's node).
    uint32_t findBuf(TensorKey K) const {
      const uint32_t *Id = BufIds.find(*K.first, K.second);
      return Id ? *Id : NoBuffer;
    }
    void setBuf(TensorKey K, uint32_t Id) {
      uint32_t *Slot = BufIds.find(*K.first, K.second);
      assert(Slot && "a node of another graph");
      *Slot = Id;
    }
    /// The buffer of \p K; assignBuffers gave every output one.
    uint32_t bufId(TensorKey K) const {
      uint32_t Id = findBuf(K);
      assert(Id != NoBuffer && "an output without a buffer");
      return Id;
    }
  };

  uint32_t planDevice(const DeviceSpec &D);
  Error assignBuffers(Prog &P, bool IsEval);
  flatbuffers::Offset<fb::Program> emitProgram(Prog &P);
  flatbuffers::Offset<fb::Attr> emitAttr(StringRef Name, const Attr &A);
  /// An attribute table, written once per distinct name and value: a
  /// training graph repeats the same few (data types, paddings, devices)
  /// hundreds of thousands of times.
  /// Sets \p Unshared for an integer, which it writes afresh every time.
  flatbuffers::Offset<fb::Attr> sharedAttr(const AttrDict::Entry &E,
                                           bool &Unshared);
  /// A kernel's attribute list, written once per distinct list.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Attr>>>
  sharedAttrList(ArrayRef<const AttrDict::Entry *> Entries);
  /// A buffer's shape, written once per distinct shape.
  flatbuffers::Offset<flatbuffers::Vector<int64_t>>
  sharedShape(ArrayRef<int64_t> Dims);
  /// The empty id list (most kernels wait for nothing), written once.
  flatbuffers::Offset<flatbuffers::Vector<uint32_t>>
  idList(ArrayRef<uint32_t> Ids) {
    if (!Ids.empty())
      return FB.CreateVector(Ids.data(), Ids.size());
    if (EmptyIds.IsNull())
      EmptyIds = FB.CreateVector(Ids.data(), 0);
    return EmptyIds;
  }
  flatbuffers::Offset<flatbuffers::String> str(StringRef S) {
    return FB.CreateString(S.data(), S.size());
  }
  /// Strings many kernels repeat (op and attribute names) are stored once.
  /// The builder's own pool (CreateSharedString) writes each string before
  /// looking it up; this cache does not, and gives the same offsets.
  flatbuffers::Offset<flatbuffers::String> sharedStr(StringRef S) {
    auto Ins = Shared.try_emplace(S);
    if (Ins.second)
      Ins.first->second = str(S);
    return Ins.first->second;
  }

  /// A node's name, written once: its kernel, its output 0's buffer and
  /// (a variable) its Variable entry share it.
  flatbuffers::Offset<flatbuffers::String> nodeName(const Node &N) {
    for (Prog &P : Progs)
      if (P.G == &N.getGraph()) {
        if (P.NameOffs.empty())
          P.NameOffs.resize(P.G->getIdBound());
        flatbuffers::uoffset_t &Off = P.NameOffs[N.getId()];
        if (!Off)
          Off = str(N.getName()).o;
        return Off;
      }
    llvm_unreachable("a node of neither program");
  }

  /// The op's name, written once.
  flatbuffers::Offset<flatbuffers::String> opName(const OpDef &Op) {
    auto &Off = OpNames[&Op];
    if (Off.IsNull())
      Off = sharedStr(Op.Name);
    return Off;
  }

  /// What to reserve for the plan: the builder grows by doubling and copies
  /// what it holds each time, so a large plan is best built in one block.
  /// Pages never written cost nothing.
  static size_t initialBytes(const Graph &Train, const Graph *Eval) {
    size_t Nodes = Train.size() + (Eval ? Eval->size() : 0);
    return (size_t(1) << 16) + Nodes * 512;
  }

  Graph &Train;
  Graph *Eval;
  const DeploymentConfig &C;
  std::vector<Prog> Progs; // train, then eval
  PlanBuilder FB;
  StringMap<flatbuffers::Offset<flatbuffers::String>> Shared;
  // The tables and vectors written once (a plan may share them: it is a
  // DAG), by the hash of what they hold.
  template <typename Key, typename T>
  using DedupTable =
      DenseMap<uint64_t,
               SmallVector<std::pair<Key, flatbuffers::Offset<T>>, 1>>;
  DedupTable<const AttrDict::Entry *, fb::Attr> AttrCache;
  DedupTable<std::vector<uint32_t>, // the offsets of the attributes
             flatbuffers::Vector<flatbuffers::Offset<fb::Attr>>>
      AttrListCache;
  DedupTable<ArrayRef<int64_t>, flatbuffers::Vector<int64_t>> ShapeCache;
  flatbuffers::Offset<flatbuffers::Vector<uint32_t>> EmptyIds;
  DenseMap<const OpDef *, flatbuffers::Offset<flatbuffers::String>> OpNames;

  std::vector<DeviceSpec> Devices;
  std::map<std::string, uint32_t> DeviceIds;
  std::vector<uint64_t> Arena, Persistent;
  std::vector<BufInfo> Bufs;
  std::vector<const Node *> VarNodes; // in plan order
  std::vector<std::pair<const Node *, uint32_t>> ConstNodes;
};

} // namespace

uint32_t Emitter::planDevice(const DeviceSpec &D) {
  auto Ins = DeviceIds.try_emplace(D.toString(), uint32_t(Devices.size()));
  if (Ins.second) {
    Devices.push_back(D);
    Arena.push_back(0);
    Persistent.push_back(0);
  }
  return Ins.first->second;
}

static std::string tensorName(TensorKey K) {
  std::string S = K.first->getName().str();
  if (K.second)
    S += ":" + std::to_string(K.second);
  return S;
}

Error Emitter::assignBuffers(Prog &P, bool IsEval) {
  Graph &G = *P.G;
  DeployState &S = G.deployState();
  for (const DeviceSpec &D : G.getDevices())
    P.DevMap.push_back(planDevice(D));
  for (size_t D = 0; D < S.Memory.size(); ++D) {
    uint32_t PD = P.DevMap[D];
    Arena[PD] = std::max(Arena[PD], S.Memory[D].ArenaBytes);
  }
  // Where this program's own persistent buffers start on each device.
  std::vector<uint64_t> PersistBase(Devices.size(), 0);
  for (size_t D = 0; D < Devices.size(); ++D)
    PersistBase[D] = alignUp(Persistent[D], 256);

  auto Add = [&](TensorKey K, const DeployState::Buffer &B) -> Error {
    const TensorType &T = K.first->getOutputType(K.second);
    BufInfo I;
    I.Key = K;
    I.Device = P.DevMap[B.Device];
    I.Elt = T.Elt;
    I.Bytes = B.Bytes;
    I.Persistent = B.Persistent;
    I.Offset = B.Offset;
    if (B.AliasOf) {
      uint32_t Root = P.findBuf({B.AliasOf.N, B.AliasOf.Index});
      if (Root == Prog::NoBuffer)
        return makeError("plan: the root of view '" + tensorName(K) +
                         "' has no buffer");
      I.AliasOf = int(Root);
    }
    if (B.Persistent) {
      const Node *N = K.first;
      if (IsEval && N->getOp().isVariable()) {
        // The training program's variable of that name, if it has one.
        const Node *TV = Train.lookup(N->getName());
        uint32_t TId = TV && TV->getOp().isVariable() && TV->getNumOutputs()
                           ? Progs[0].findBuf({TV, 0})
                           : Prog::NoBuffer;
        if (TId != Prog::NoBuffer) {
          const BufInfo &TB = Bufs[TId];
          if (TB.Bytes != I.Bytes || TB.Elt != I.Elt || TB.Device != I.Device)
            return N->error("differs between the training and evaluation "
                            "programs (type or device)");
          P.setBuf(K, TId);
          return Error::success();
        }
      }
      if (IsEval)
        I.Offset += PersistBase[I.Device];
      Persistent[I.Device] =
          std::max(Persistent[I.Device], I.Offset + alignUp(I.Bytes, 64));
    }
    uint32_t Id = uint32_t(Bufs.size());
    Bufs.push_back(std::move(I));
    P.setBuf(K, Id);
    if (K.first->getOp().isVariable()) {
      VarNodes.push_back(K.first);
    } else if (K.first->getOp().is(OF_Constant)) {
      ConstNodes.push_back({K.first, Id});
    }
    return Error::success();
  };
  // Roots first (graph order), then views, so a view follows its root.
  std::vector<std::pair<TensorKey, const DeployState::Buffer *>> Views;
  for (const auto &NP : G.nodes())
    for (unsigned O = 0, NO = NP->getNumOutputs(); O != NO; ++O) {
      const DeployState::Buffer *B = S.bufferOf(*NP, O);
      if (!B)
        return NP->error("output " + Twine(O) +
                         " has no buffer (run "
                         "plan-memory first)");
      if (B->AliasOf)
        Views.push_back({{NP.get(), O}, B});
      else if (Error E = Add({NP.get(), O}, *B))
        return E;
    }
  for (auto &[K, B] : Views)
    if (Error E = Add(K, *B))
      return E;
  return Error::success();
}

flatbuffers::Offset<fb::Attr> Emitter::emitAttr(StringRef Name, const Attr &A) {
  auto NameOff = sharedStr(Name);
  flatbuffers::Offset<flatbuffers::String> S;
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> Ints;
  flatbuffers::Offset<flatbuffers::Vector<double>> Floats;
  flatbuffers::Offset<
      flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
      Strings;
  fb::AttrKind K = fb::AttrKind::Int;
  int64_t I = 0;
  double F = 0;
  switch (A.kind()) {
  case AttrKind::Int:
    I = A.getInt();
    break;
  case AttrKind::Float:
    K = fb::AttrKind::Float;
    F = A.getFloat();
    break;
  case AttrKind::Bool:
    K = fb::AttrKind::Bool;
    I = A.getBool();
    break;
  case AttrKind::String:
    K = fb::AttrKind::String;
    S = FB.CreateString(A.getString());
    break;
  case AttrKind::Type:
    K = fb::AttrKind::Type;
    I = int64_t(A.getType());
    break;
  case AttrKind::Shape:
    K = fb::AttrKind::Shape;
    Ints = FB.CreateVector(std::vector<int64_t>(A.getShape().dims().begin(),
                                                A.getShape().dims().end()));
    break;
  case AttrKind::IntList:
    K = fb::AttrKind::IntList;
    Ints = FB.CreateVector(A.getInts());
    break;
  case AttrKind::FloatList:
    K = fb::AttrKind::FloatList;
    Floats = FB.CreateVector(A.getFloats());
    break;
  case AttrKind::StringList:
    K = fb::AttrKind::StringList;
    Strings = FB.CreateVectorOfStrings(A.getStrings());
    break;
  }
  return FB.recent(
      fb::CreateAttr(FB, NameOff, K, I, F, S, Ints, Floats, Strings));
}

/// A DenseMap key for \p H (which reserves the two largest values).
static uint64_t tableKey(hash_code H) {
  uint64_t K = size_t(H);
  return K >= ~uint64_t(1) ? K - 2 : K;
}

static hash_code hashEntry(const AttrDict::Entry &E) {
  return hash_combine(StringRef(E.first), E.second);
}

/// Equal as plan attributes: floats compare by their bits.
static bool sameEntry(const AttrDict::Entry &X, const AttrDict::Entry &Y) {
  return X.first == Y.first && X.second.isIdentical(Y.second);
}

flatbuffers::Offset<fb::Attr> Emitter::sharedAttr(const AttrDict::Entry &E,
                                                  bool &Unshared) {
  // Integers are cheap to write and often unique (a Send's channel): a
  // table of them would only cost lookups that miss.
  if (E.second.kind() == AttrKind::Int) {
    Unshared = true;
    return emitAttr(E.first, E.second);
  }
  auto &Bucket = AttrCache[tableKey(hashEntry(E))];
  for (auto &[Seen, Off] : Bucket)
    if (sameEntry(*Seen, E))
      return Off;
  auto Off = emitAttr(E.first, E.second);
  Bucket.push_back({&E, Off});
  return Off;
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Attr>>>
Emitter::sharedAttrList(ArrayRef<const AttrDict::Entry *> Entries) {
  SmallVector<flatbuffers::Offset<fb::Attr>, 8> Attrs;
  bool Unshared = false;
  for (const AttrDict::Entry *E : Entries)
    Attrs.push_back(sharedAttr(*E, Unshared));
  auto Create = [&] { return FB.CreateVector(Attrs.data(), Attrs.size()); };
  // A list holding an integer attribute, written afresh, is new.
  if (Unshared)
    return Create();
  // Equal attributes have equal offsets.
  SmallVector<uint32_t, 8> Key;
  for (flatbuffers::Offset<fb::Attr> A : Attrs)
    Key.push_back(A.o);
  auto &Bucket =
      AttrListCache[tableKey(hash_combine_range(Key.begin(), Key.end()))];
  for (auto &[Seen, Off] : Bucket)
    if (ArrayRef<uint32_t>(Seen) == ArrayRef<uint32_t>(Key))
      return Off;
  auto Off = Create();
  Bucket.push_back({std::vector<uint32_t>(Key.begin(), Key.end()), Off});
  return Off;
}

flatbuffers::Offset<flatbuffers::Vector<int64_t>>
Emitter::sharedShape(ArrayRef<int64_t> Dims) {
  auto &Bucket =
      ShapeCache[tableKey(hash_combine_range(Dims.begin(), Dims.end()))];
  for (auto &[Seen, Off] : Bucket)
    if (Seen == Dims)
      return Off;
  auto Off = FB.CreateVector(Dims.data(), Dims.size());
  Bucket.push_back({Dims, Off});
  return Off;
}

flatbuffers::Offset<fb::Program> Emitter::emitProgram(Prog &P) {
  Graph &G = *P.G;
  DeployState &S = G.deployState();
  // True when every output of a node is a view: the node needs no kernel.
  // By node id, found in graph order, the order of the buffers.
  std::vector<bool> ViewOnly(G.getIdBound(), false);
  for (const auto &NP : G.nodes()) {
    const Node &N = *NP;
    bool All = N.getNumOutputs() != 0;
    for (unsigned O = 0; All && O < N.getNumOutputs(); ++O)
      All = Bufs[P.bufId({&N, O})].AliasOf >= 0;
    ViewOnly[N.getId()] = All;
  }
  auto isViewOnly = [&](const Node &N) { return bool(ViewOnly[N.getId()]); };

  // Devices of the program in plan order, and kernel ids.
  std::vector<std::pair<uint32_t, int>> DevOrder; // (plan dev, graph dev)
  for (size_t D = 0; D < S.Schedules.size(); ++D)
    DevOrder.push_back({P.DevMap[D], int(D)});
  std::sort(DevOrder.begin(), DevOrder.end());
  // Tables indexed by node id.
  constexpr uint32_t NoKernel = ~uint32_t(0);
  std::vector<uint32_t> KernelId(G.getIdBound(), NoKernel);
  std::vector<const Node *> Kernels; // in kernel id order
  for (auto &[PD, GD] : DevOrder)
    for (Node *N : S.Schedules[GD])
      if (!isViewOnly(*N)) {
        KernelId[N->getId()] = uint32_t(Kernels.size());
        Kernels.push_back(N);
      }
  auto IsKernel = [&](const Node *N) {
    return KernelId[N->getId()] != NoKernel;
  };

  // The kernel a node's completion is marked by (views: their root's
  // producer); none for buffers ready before the step.
  auto Target = [&](const Node *N) -> const Node * {
    while (!IsKernel(N)) {
      if (!isViewOnly(*N))
        return nullptr;
      N = N->getInput(0).N;
    }
    return N;
  };
  // The kernels of other devices \p N waits for, sorted, each once.
  auto WaitsOf = [&](const Node *N) {
    SmallVector<uint32_t, 4> W;
    for (Node *Ctl : N->getControlInputs()) {
      const Node *T = Target(Ctl);
      if (T && P.DevMap[T->getDevice()] != P.DevMap[N->getDevice()])
        W.push_back(KernelId[T->getId()]);
    }
    llvm::sort(W);
    W.erase(std::unique(W.begin(), W.end()), W.end());
    return W;
  };
  std::vector<bool> Signals(G.getIdBound(), false);
  for (const Node *N : Kernels)
    for (uint32_t K : WaitsOf(N))
      Signals[Kernels[K]->getId()] = true;

  // Scratch vectors reused by every kernel: a plan has a million of them.
  std::vector<uint32_t> InIds, OutIds;
  std::vector<const AttrDict::Entry *> Attrs;
  std::vector<flatbuffers::Offset<fb::DeviceProgram>> DevProgs;
  for (auto &[PD, GD] : DevOrder) {
    std::vector<flatbuffers::Offset<fb::Kernel>> KernelOffs;
    for (Node *N : S.Schedules[GD]) {
      if (!IsKernel(N))
        continue;
      InIds.clear();
      OutIds.clear();
      Attrs.clear();
      for (const TensorRef &In : N->getInputs())
        InIds.push_back(P.bufId({In.N, In.Index}));
      for (unsigned O = 0; O < N->getNumOutputs(); ++O)
        OutIds.push_back(P.bufId({N, O}));
      bool Collective = N->getOp().is(OF_Collective);
      for (const AttrDict::Entry &E : N->attrs()) {
        // A collective within one process is written as in version 1 plans,
        // without `replicas` (its Collective entry carries it anyway).
        if (Collective && E.first == "replicas" &&
            E.second.kind() == AttrKind::Int && E.second.getInt() == 1)
          continue;
        Attrs.push_back(&E);
      }
      SmallVector<uint32_t, 4> W = WaitsOf(N);
      // What a table points at is written before it, one statement each:
      // the order of a call's arguments is the compiler's, and the bytes
      // of a plan must not depend on it.
      auto Name = nodeName(*N);
      auto Op = opName(N->getOp());
      auto KAttrs = sharedAttrList(Attrs);
      auto Ins = idList(InIds);
      auto Outs = idList(OutIds);
      auto Waits = idList(W);
      KernelOffs.push_back(FB.recent(fb::CreateKernel(
          FB, Name, Op, KAttrs, Ins, Outs, Waits, Signals[N->getId()])));
    }
    const DeployState::DeviceMemory &M = S.Memory[GD];
    auto Kernels = FB.CreateVector(KernelOffs);
    auto Method = FB.CreateString(M.Method);
    DevProgs.push_back(fb::CreateDeviceProgram(FB, PD, Kernels, M.ArenaBytes,
                                               M.NaiveBytes, Method));
  }

  // Collectives by bucket (numbered through the groups), devices in the
  // order the op lists them.
  std::map<std::pair<int64_t, std::string>, std::vector<const Node *>> Buckets;
  for (const Node *N : Kernels)
    if (N->getOp().is(OF_Collective))
      Buckets[{N->attrs().getInt("bucket"),
               N->attrs().getString("group").str()}]
          .push_back(N);
  std::vector<flatbuffers::Offset<fb::Collective>> Colls;
  for (auto &[Key, Nodes] : Buckets) {
    int64_t Bk = Key.first;
    std::vector<std::string> Order =
        Nodes[0]->attrs().get("devices")
            ? Nodes[0]->attrs().get("devices")->getStrings()
            : std::vector<std::string>();
    // The reduction order is the order the op lists its devices in: a
    // node's rank is the first listed device its own satisfies (unlisted
    // ones after, by plan device). Complete listed devices (the passes
    // write them so) are found by name; partial ones by a scan.
    std::vector<std::optional<DeviceSpec>> Listed; // None: unparsable.
    bool AllComplete = true;
    for (const std::string &Text : Order) {
      auto Spec = DeviceSpec::parse(Text);
      if (!Spec) {
        consumeError(Spec.takeError());
        Listed.emplace_back();
        continue;
      }
      AllComplete = AllComplete && Spec->isComplete();
      Listed.emplace_back(std::move(*Spec));
    }
    StringMap<size_t> ByName;
    if (AllComplete)
      for (size_t I = 0; I < Listed.size(); ++I)
        if (Listed[I])
          ByName.try_emplace(Listed[I]->toString(), I);
    auto Rank = [&](const Node *N) -> size_t {
      const DeviceSpec &D = G.deviceOf(*N);
      if (AllComplete) {
        // A complete device is satisfied by its equal only.
        auto It = ByName.find(D.toString());
        if (It != ByName.end())
          return It->second;
      } else {
        for (size_t I = 0; I < Listed.size(); ++I)
          if (Listed[I] && Listed[I]->isSatisfiedBy(D))
            return I;
      }
      return Order.size() + P.DevMap[N->getDevice()];
    };
    std::vector<std::pair<size_t, const Node *>> Ranked;
    for (const Node *N : Nodes)
      Ranked.push_back({Rank(N), N});
    std::stable_sort(
        Ranked.begin(), Ranked.end(),
        [](const auto &A, const auto &B) { return A.first < B.first; });
    std::vector<const Node *> Sorted;
    for (const auto &RN : Ranked)
      Sorted.push_back(RN.second);
    std::vector<uint32_t> Devs, Ks;
    for (const Node *N : Sorted) {
      Devs.push_back(P.DevMap[N->getDevice()]);
      Ks.push_back(KernelId[N->getId()]);
    }
    auto Group = FB.CreateString(Nodes[0]->attrs().getString("group").str());
    auto DevIds = FB.CreateVector(Devs);
    auto KernelIds = FB.CreateVector(Ks);
    Colls.push_back(
        fb::CreateCollective(FB, Group, uint32_t(Bk), DevIds, KernelIds,
                             int32_t(Nodes[0]->attrs().getInt("replicas", 1))));
  }

  std::vector<flatbuffers::Offset<fb::InputBinding>> Inputs;
  for (const auto &NP : G.nodes())
    if (NP->getOp().is(OF_Input)) {
      auto Name = FB.CreateString(NP->getName().str());
      auto Feature = FB.CreateString(NP->attrs().getString("feature").str());
      Inputs.push_back(
          fb::CreateInputBinding(FB, Name, Feature, P.bufId({NP.get(), 0})));
    }

  std::vector<flatbuffers::Offset<fb::Output>> Outputs;
  auto Out = [&](StringRef Name, fb::OutputKind K, TensorRef T) {
    Outputs.push_back(fb::CreateOutput(FB, FB.CreateString(Name.str()), K,
                                       P.bufId({T.N, T.Index})));
  };
  if (S.TotalLoss)
    Out(P.Name == "eval" ? "loss" : "total_loss", fb::OutputKind::Loss,
        TensorRef(S.TotalLoss));
  for (Node *N : reportedSummaries(G))
    Out(N->attrs().getString("tag"),
        isa(*N, OpKind::HistogramSummary) ? fb::OutputKind::Histogram
                                          : fb::OutputKind::Summary,
        N->getInput(0));
  for (const auto &[Name, T] : G.outputs())
    Out(Name, fb::OutputKind::Metric, T);

  int64_t Batch = G.getBatchSize() * int64_t(S.Clones.size());
  auto Name = FB.CreateString(P.Name);
  auto DevProgOffs = FB.CreateVector(DevProgs);
  auto InputOffs = FB.CreateVector(Inputs);
  auto OutputOffs = FB.CreateVector(Outputs);
  auto CollOffs = FB.CreateVector(Colls);
  return fb::CreateProgram(FB, Name, Batch, DevProgOffs, InputOffs, OutputOffs,
                           CollOffs);
}

static fb::InitKind initKind(StringRef Name) {
  const std::vector<std::string> &Names = mdrt::initKindNames();
  auto It = llvm::find(Names, Name);
  // verifyAndCompleteAttrs allows only these names.
  assert(It != Names.end() && "an initializer the Variable op does not allow");
  if (It == Names.end())
    return fb::InitKind::GlorotUniform;
  return fb::InitKind(It - Names.begin());
}

Expected<PlanBytes> Emitter::emit() {
  for (Graph *G : {&Train, Eval})
    if (G && (!G->hasDeployState() || !G->deployState().MemoryPlanned))
      return makeError("emitting a plan needs plan-memory to run first");
  Progs.emplace_back(&Train, "train");
  if (Eval)
    Progs.emplace_back(Eval, "eval");
  for (size_t I = 0; I < Progs.size(); ++I)
    if (Error E = assignBuffers(Progs[I], I == 1))
      return std::move(E);

  // Programs first: they reference buffers by id only.
  std::vector<flatbuffers::Offset<fb::Program>> ProgOffs;
  for (Prog &P : Progs)
    ProgOffs.push_back(emitProgram(P));

  std::vector<flatbuffers::Offset<fb::Device>> DevOffs;
  for (size_t I = 0; I < Devices.size(); ++I) {
    const DeviceSpec &D = Devices[I];
    auto Name = FB.CreateString(D.toString());
    auto Job = FB.CreateString(D.Job.value_or(""));
    DevOffs.push_back(fb::CreateDevice(
        FB, Name,
        D.Type == std::optional<std::string>("GPU") ? fb::DeviceKind::GPU
                                                    : fb::DeviceKind::CPU,
        Job, D.Replica.value_or(0), D.Task.value_or(0), D.Index.value_or(0),
        Arena[I], Persistent[I]));
  }
  std::vector<flatbuffers::Offset<fb::Buffer>> BufOffs;
  for (const BufInfo &B : Bufs) {
    auto [N, O] = B.Key;
    ArrayRef<int64_t> Dims = N->getOutputType(O).Dims.dims();
    auto Name = O ? FB.CreateString(tensorName(B.Key)) : nodeName(*N);
    auto Shape = sharedShape(Dims);
    BufOffs.push_back(FB.recent(
        fb::CreateBuffer(FB, Name, B.Device, fb::DType(B.Elt), Shape, B.Offset,
                         B.Bytes, B.Persistent, B.AliasOf)));
  }

  // Variables (train's, then any only the evaluation uses).
  // VarNodes holds each name once: the evaluation program's variables that
  // the training program has too were given the training program's buffer
  // and are not in it.
  DenseMap<const Node *, int> VarIndex;
  for (const Node *V : VarNodes)
    VarIndex.try_emplace(V, int(VarIndex.size()));
  // The index of the variable called \p Name, or -1.
  auto IndexOf = [&](StringRef Name) {
    for (Prog &P : Progs)
      if (const Node *V = P.G->lookup(Name)) {
        auto It = VarIndex.find(V);
        if (It != VarIndex.end())
          return It->second;
      }
    return -1;
  };
  std::vector<flatbuffers::Offset<fb::Variable>> VarOffs;
  uint64_t Fingerprint = mdrt::hashName(Train.getName().str().c_str());
  // A variable as the fingerprint sees it: the string "name type", and the
  // length of the name. The strings are copied into one block, so that
  // sorting them reads neighbouring bytes, not names spread over the
  // graph's memory, and moves no string.
  struct VarSig {
    StringRef Text;
    size_t NameSize;
  };
  std::vector<VarSig> Signature;
  Signature.reserve(VarNodes.size());
  BumpPtrAllocator SigAlloc;
  for (const Node *V : VarNodes) {
    StringRef Name = V->getName();
    const AttrDict &A = V->attrs();
    int64_t Seed = A.getInt("seed");
    uint64_t Stream =
        Seed ? uint64_t(Seed) : mdrt::hashBytes(Name.data(), Name.size());
    StringRef Mirror = A.getString("mirror_of");
    int MirrorOf = Mirror.empty() ? -1 : IndexOf(Mirror);
    uint32_t Buf = 0;
    for (Prog &P : Progs)
      if (uint32_t Id = P.findBuf({V, 0}); Id != Prog::NoBuffer)
        Buf = Id;
    // The model readers and builders complete the attributes with the
    // registry's defaults (verifyAndCompleteAttrs); a node a library caller
    // made by hand may lack them, and gets the same defaults here.
    auto Given = [&](StringRef Attr) -> const mdplan::Attr & {
      if (const mdplan::Attr *X = A.get(Attr))
        return *X;
      const AttrDef *D = V->getOp().findAttr(Attr);
      assert(D && D->Default && "a Variable attribute without a default");
      return *D->Default;
    };
    VarOffs.push_back(FB.recent(fb::CreateVariable(
        FB, nodeName(*V), Buf, initKind(Given("initializer").getString()),
        Given("init_value").getFloat(), Given("init_mean").getFloat(),
        Given("init_stddev").getFloat(), Given("init_min").getFloat(),
        Given("init_max").getFloat(), Stream, Given("trainable").getBool(),
        MirrorOf)));
    std::string Type = V->getOutputType(0).str();
    size_t Size = Name.size() + 1 + Type.size();
    char *Text = SigAlloc.Allocate<char>(Size);
    std::memcpy(Text, Name.data(), Name.size());
    Text[Name.size()] = ' ';
    std::memcpy(Text + Name.size() + 1, Type.data(), Type.size());
    Signature.push_back({StringRef(Text, Size), Name.size()});
  }
  // The variables as a set: the order of the plan's list depends on the
  // deployment (slots follow the all-reduce buckets), not what they are.
  llvm::sort(Signature,
             [](const VarSig &X, const VarSig &Y) { return X.Text < Y.Text; });
  for (const VarSig &V : Signature) {
    StringRef Name = V.Text.take_front(V.NameSize);
    StringRef Type = V.Text.drop_front(V.NameSize + 1);
    Fingerprint = mdrt::hashBytes(Name.data(), Name.size(), Fingerprint);
    Fingerprint = mdrt::hashBytes(" ", 1, Fingerprint);
    Fingerprint = mdrt::hashBytes(Type.data(), Type.size(), Fingerprint);
  }
  std::vector<flatbuffers::Offset<fb::Constant>> ConstOffs;
  for (auto &[N, Buf] : ConstNodes)
    ConstOffs.push_back(fb::CreateConstant(
        FB, Buf,
        FB.CreateVector(N->attrs().get("value")
                            ? N->attrs().get("value")->getFloats()
                            : std::vector<double>{0.0})));

  OptimizerSettings O = C.resolveOptimizer(Train.getOptimizer());
  // The batch of one step over every clone that shares the variables: this
  // replica's clones, and with the mirrored strategy every worker's.
  int64_t Global = Train.getBatchSize() * C.NumClones;
  if (C.Strat == Strategy::Mirrored)
    Global *= C.NumReplicas;
  Fingerprint = mdrt::hashName(std::to_string(Global).c_str(), Fingerprint);
  Fingerprint =
      mdrt::hashName(strategyName(C.Strat).str().c_str(), Fingerprint);
  auto Strat = FB.CreateString(strategyName(C.Strat).str());
  auto OptKind = FB.CreateString(optimizerKindName(O.K).str());
  auto WorkerJob = FB.CreateString(C.WorkerJobName);
  auto PsJob = FB.CreateString(C.PsJobName);
  auto Dep =
      fb::CreateDeployment(FB, Strat, C.NumClones, C.CloneOnCPU, C.ReplicaId,
                           C.NumReplicas, C.NumPsTasks, Train.getBatchSize(),
                           OptKind, O.LearningRate, WorkerJob, PsJob);
  auto Producer = FB.CreateString(planProducer().str());
  auto Model = FB.CreateString(Train.getName().str());
  auto DevVec = FB.CreateVector(DevOffs);
  auto BufVec = FB.CreateVector(BufOffs);
  auto VarVec = FB.CreateVector(VarOffs);
  auto ConstVec = FB.CreateVector(ConstOffs);
  auto ProgVec = FB.CreateVector(ProgOffs);
  // file_bytes is written with a placeholder (a non-default value, so that
  // the field is stored) and set once the length is known.
  auto Root =
      fb::CreatePlan(FB, mdrt::kPlanVersion, Producer, Model, Fingerprint, Dep,
                     DevVec, BufVec, VarVec, ConstVec, ProgVec, ~uint64_t(0));
  fb::FinishPlanBuffer(FB, Root);
  bool Set =
      flatbuffers::GetMutableRoot<flatbuffers::Table>(FB.GetBufferPointer())
          ->SetField<uint64_t>(fb::Plan::VT_FILE_BYTES, FB.GetSize(), 0);
  assert(Set && "the placeholder stores the field");
  (void)Set;
  PlanBytes Bytes(FB.Release());
  // What mdplan writes, mdrun must accept. The builder made the structure
  // (what the FlatBuffers verifier checks, and mdrun on loading): the
  // plan's own rules are what a bug here would break.
  mdrt::Status S = mdrt::checkBuiltPlan(Bytes.data(), Bytes.size());
  if (!S.isOk())
    return makeError("internal error: the emitted plan does not verify: " +
                     S.message());
  return std::move(Bytes);
}

PlanBytes::PlanBytes() = default;
PlanBytes::PlanBytes(flatbuffers::DetachedBuffer B)
    : Buf(std::make_unique<flatbuffers::DetachedBuffer>(std::move(B))) {}
PlanBytes::PlanBytes(PlanBytes &&) noexcept = default;
PlanBytes &PlanBytes::operator=(PlanBytes &&) noexcept = default;
PlanBytes::~PlanBytes() = default;
const uint8_t *PlanBytes::data() const { return Buf ? Buf->data() : nullptr; }
size_t PlanBytes::size() const { return Buf ? Buf->size() : 0; }

Expected<PlanBytes> mdplan::emitPlan(Graph &Train, Graph *Eval,
                                     const DeploymentConfig &Config) {
  return Emitter(Train, Eval, Config).emit();
}
