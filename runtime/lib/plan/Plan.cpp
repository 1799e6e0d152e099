//===- Plan.cpp - Loading and verifying plans -----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Plan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include <sys/stat.h>

using namespace mdrt;

namespace {

/// Number of inputs and outputs an op's kernel takes. -1 = any.
struct Signature {
  int MinIn, MaxIn, MinOut, MaxOut;
};

const std::map<std::string, Signature, std::less<>> &signatures() {
  static const std::map<std::string, Signature, std::less<>> Sigs = {
      {"Identity", {1, 1, 1, 1}},
      {"NoOp", {0, 0, 0, 0}},
      {"BatchSlice", {1, 1, 1, 1}},
      {"Reshape", {1, 1, 1, 1}},
      {"Cast", {1, 1, 1, 1}},
      {"Concat", {1, -1, 1, 1}},
      {"Slice", {1, 1, 1, 1}},
      {"Pad", {1, 1, 1, 1}},
      {"MatMul", {2, 2, 1, 1}},
      {"BiasAdd", {2, 2, 1, 1}},
      {"Add", {2, 2, 1, 1}},
      {"Sub", {2, 2, 1, 1}},
      {"Mul", {2, 2, 1, 1}},
      {"Div", {2, 2, 1, 1}},
      {"Maximum", {2, 2, 1, 1}},
      {"Minimum", {2, 2, 1, 1}},
      {"AddN", {1, -1, 1, 1}},
      {"Neg", {1, 1, 1, 1}},
      {"Square", {1, 1, 1, 1}},
      {"Sqrt", {1, 1, 1, 1}},
      {"Exp", {1, 1, 1, 1}},
      {"Log", {1, 1, 1, 1}},
      {"Relu", {1, 1, 1, 1}},
      {"Sigmoid", {1, 1, 1, 1}},
      {"Tanh", {1, 1, 1, 1}},
      {"Softmax", {1, 1, 1, 1}},
      {"SparseSoftmaxCrossEntropy", {2, 2, 2, 2}},
      {"SoftmaxCrossEntropy", {2, 2, 2, 2}},
      {"OneHot", {1, 1, 1, 1}},
      {"LogLoss", {2, 2, 1, 1}},
      {"L2Loss", {1, 1, 1, 1}},
      {"Mean", {1, 1, 1, 1}},
      {"Sum", {1, 1, 1, 1}},
      {"Accuracy", {2, 2, 1, 1}},
      {"Conv2D", {2, 2, 1, 1}},
      {"MaxPool", {1, 1, 1, 1}},
      {"BatchNorm", {2, 3, 3, 3}},
      {"BatchNormInference", {4, 5, 1, 1}},
      {"Dropout", {1, 1, 2, 2}},
      {"ReluGrad", {2, 2, 1, 1}},
      {"GreaterEqualMask", {2, 2, 1, 1}},
      {"SigmoidGrad", {2, 2, 1, 1}},
      {"TanhGrad", {2, 2, 1, 1}},
      {"SoftmaxGrad", {2, 2, 1, 1}},
      {"BiasAddGrad", {1, 1, 1, 1}},
      {"SumToShape", {1, 1, 1, 1}},
      {"BroadcastGrad", {1, 1, 1, 1}},
      {"LogLossGrad", {3, 3, 1, 1}},
      {"Conv2DBackpropInput", {2, 2, 1, 1}},
      {"Conv2DBackpropFilter", {2, 2, 1, 1}},
      {"MaxPoolGrad", {3, 3, 1, 1}},
      {"BatchNormGrad", {4, 5, 3, 3}},
      {"AssignMovingAverage", {2, 2, 0, 0}},
      {"AssignAdd", {1, 1, 0, 0}},
      {"ApplyGradientDescent", {3, 3, 0, 0}},
      {"ApplyMomentum", {4, 4, 0, 0}},
      {"ApplyAdam", {5, 5, 0, 0}},
      {"ApplyRMSProp", {5, 5, 0, 0}},
      {"ApplyCenteredRMSProp", {6, 6, 0, 0}},
      {"ApplyAdagrad", {4, 4, 0, 0}},
      {"Send", {1, 1, 0, 0}},
      {"Recv", {0, 0, 1, 1}},
      {"AllReduce", {1, -1, 1, -1}},
  };
  return Sigs;
}

/// Collects the first problem found.
class Checker {
public:
  explicit Checker(const fb::Plan &P) : P(P) {}
  Status run();

private:
  Status fail(const std::string &Msg) { return Status::error(Msg); }
  Status checkDevices();
  Status checkBuffers();
  Status checkVariables();
  Status checkProgram(const fb::Program &Prog, unsigned Index);
  Status checkReplicas(const fb::Collective &C, const std::string &PName);
  Status checkProgress(const fb::Program &Prog, const std::string &PName,
                       const std::vector<uint32_t> &KernelDevice);
  Status bufferId(uint32_t Id, const std::string &What) {
    if (Id >= NumBuffers)
      return fail(What + " names buffer " + std::to_string(Id) +
                  ", but the plan has " + std::to_string(NumBuffers));
    return Status::ok();
  }
  /// FlatBuffers' verifier checks the alignment of a vector's length but
  /// not of its elements: a vector of 8-byte values may start 4 bytes off,
  /// and reading it would be undefined behaviour. (The builder does not
  /// align empty vectors, which have nothing to read.)
  template <typename T>
  static bool misaligned(const flatbuffers::Vector<T> *V) {
    return V && V->size() &&
           reinterpret_cast<uintptr_t>(V->Data()) % alignof(T) != 0;
  }
  std::string bufName(uint32_t Id) const {
    const fb::Buffer *B = P.buffers()->Get(Id);
    return "buffer " + std::to_string(Id) + " ('" + B->name()->str() + "')";
  }

  /// The signature of the op named \p Op (the kernel's string), or null.
  /// A writer may store each op name once, so its kernels' strings are
  /// looked up once by address.
  const Signature *signatureOf(const flatbuffers::String &Op) {
    auto [It, New] = SigByName.try_emplace(&Op, nullptr);
    if (New) {
      auto Sig = signatures().find(Op.string_view());
      It->second = Sig == signatures().end() ? nullptr : &Sig->second;
    }
    return It->second;
  }

  const fb::Plan &P;
  uint32_t NumDevices = 0;
  uint32_t NumBuffers = 0;
  std::unordered_map<const flatbuffers::String *, const Signature *> SigByName;
};

} // namespace

static uint64_t elementSize(fb::DType T) {
  switch (T) {
  case fb::DType::Float32:
  case fb::DType::Int32:
    return 4;
  case fb::DType::Float64:
  case fb::DType::Int64:
    return 8;
  case fb::DType::Bool:
    return 1;
  default:
    return 0;
  }
}

Status Checker::checkDevices() {
  if (!P.devices() || P.devices()->size() == 0)
    return fail("the plan has no devices");
  NumDevices = P.devices()->size();
  std::set<std::string> Names;
  for (uint32_t I = 0; I < NumDevices; ++I) {
    const fb::Device *D = P.devices()->Get(I);
    if (!D->name() || !Names.insert(D->name()->str()).second)
      return fail("device " + std::to_string(I) +
                  " has no name or repeats another's");
    if (D->kind() != fb::DeviceKind::CPU && D->kind() != fb::DeviceKind::GPU)
      return fail("device '" + D->name()->str() + "' has an unknown kind");
    if (D->index() < 0)
      return fail("device '" + D->name()->str() + "' has a negative index");
    // 2^50 bytes (1 PiB): beyond any device, and far from overflowing the
    // sums of offsets and sizes.
    const uint64_t MaxRegion = uint64_t(1) << 50;
    if (D->arena_bytes() > MaxRegion || D->persistent_bytes() > MaxRegion)
      return fail(
          "device '" + D->name()->str() + "' asks for " +
          std::to_string(std::max(D->arena_bytes(), D->persistent_bytes())) +
          " bytes of memory, more than 2^50");
  }
  return Status::ok();
}

Status Checker::checkBuffers() {
  if (!P.buffers())
    return Status::ok();
  NumBuffers = P.buffers()->size();
  for (uint32_t I = 0; I < NumBuffers; ++I) {
    const fb::Buffer *B = P.buffers()->Get(I);
    auto Name = [&] { return "buffer " + std::to_string(I); };
    if (B->device() >= NumDevices)
      return fail(Name() + " is on device " + std::to_string(B->device()) +
                  ", but the plan has " + std::to_string(NumDevices));
    uint64_t Elt = elementSize(B->dtype());
    if (!Elt)
      return fail(Name() + " has an invalid element type");
    if (misaligned(B->shape()))
      return fail(Name() + " has a misaligned shape");
    uint64_t N = 1;
    if (B->shape())
      for (int64_t D : *B->shape()) {
        if (D < 0 || D > (int64_t(1) << 40))
          return fail(Name() + " has an invalid dimension " +
                      std::to_string(D));
        N *= uint64_t(D);
        if (N > (uint64_t(1) << 40))
          return fail(Name() + " is too large");
      }
    if (N * Elt != B->bytes())
      return fail(Name() + " holds " + std::to_string(B->bytes()) +
                  " bytes, but its type needs " + std::to_string(N * Elt));
    if (B->offset() % Elt)
      return fail(Name() + " is misaligned: offset " +
                  std::to_string(B->offset()) + " for " + std::to_string(Elt) +
                  "-byte elements");
    const fb::Device *D = P.devices()->Get(B->device());
    uint64_t Limit = B->persistent() ? D->persistent_bytes() : D->arena_bytes();
    if (B->offset() > Limit || B->bytes() > Limit - B->offset())
      return fail(Name() + " (" + std::to_string(B->offset()) + " + " +
                  std::to_string(B->bytes()) + " bytes) does not fit the " +
                  (B->persistent() ? "persistent region" : "arena") + " of " +
                  D->name()->str() + " (" + std::to_string(Limit) + " bytes)");
    if (B->alias_of() >= 0) {
      if (uint32_t(B->alias_of()) >= I)
        return fail(Name() + " is a view of a later buffer");
      const fb::Buffer *R = P.buffers()->Get(B->alias_of());
      if (R->device() != B->device() || R->persistent() != B->persistent() ||
          B->offset() < R->offset() ||
          B->offset() + B->bytes() > R->offset() + R->bytes())
        return fail(Name() + " is a view outside its root buffer");
    }
  }
  return Status::ok();
}

Status Checker::checkVariables() {
  if (P.variables())
    for (uint32_t I = 0; I < P.variables()->size(); ++I) {
      const fb::Variable *V = P.variables()->Get(I);
      auto Name = [&] { return "variable '" + V->name()->str() + "'"; };
      if (V->buffer() >= NumBuffers)
        return bufferId(V->buffer(), Name());
      const fb::Buffer *B = P.buffers()->Get(V->buffer());
      if (!B->persistent())
        return fail(Name() + " is not in persistent memory");
      if (V->init() > fb::InitKind::MAX)
        return fail(Name() + " has an unknown initializer");
    }
  // Mirrors once every variable's buffer is known to exist (a variable may
  // mirror a later one).
  if (P.variables())
    for (const fb::Variable *V : *P.variables()) {
      if (V->mirror_of() < 0)
        continue;
      std::string Name = "variable '" + V->name()->str() + "'";
      if (uint32_t(V->mirror_of()) >= P.variables()->size())
        return fail(Name + " mirrors a variable that does not exist");
      const fb::Buffer *B = P.buffers()->Get(V->buffer());
      const fb::Buffer *M =
          P.buffers()->Get(P.variables()->Get(V->mirror_of())->buffer());
      if (M->bytes() != B->bytes() || M->dtype() != B->dtype())
        return fail(Name + " mirrors a variable of another type");
    }
  if (P.constants())
    for (uint32_t I = 0; I < P.constants()->size(); ++I) {
      const fb::Constant *C = P.constants()->Get(I);
      auto Name = [&] { return "constant " + std::to_string(I); };
      if (C->buffer() >= NumBuffers)
        return bufferId(C->buffer(), Name());
      const fb::Buffer *B = P.buffers()->Get(C->buffer());
      if (!B->persistent())
        return fail(Name() + " is not in persistent memory");
      if (misaligned(C->values()))
        return fail(Name() + " has misaligned values");
      uint64_t N = B->bytes() / elementSize(B->dtype());
      size_t NV = C->values() ? C->values()->size() : 0;
      if (NV != 1 && NV != N)
        return fail(Name() + " has " + std::to_string(NV) + " values for " +
                    std::to_string(N) + " elements");
      // Converting a double an integer type cannot hold is undefined.
      double Lo = 0, Hi = 0;
      if (B->dtype() == fb::DType::Int32) {
        Lo = -2147483648.0;
        Hi = 2147483647.0;
      } else if (B->dtype() == fb::DType::Int64) {
        Lo = -9223372036854775808.0;
        Hi = 9223372036854774784.0; // The largest double below 2^63.
      }
      if (Lo < Hi && C->values())
        for (double V : *C->values())
          if (!(V >= Lo && V <= Hi)) {
            char Buf[32];
            std::snprintf(Buf, sizeof(Buf), "%g", V);
            return fail(Name() + " holds " + Buf + ", which " +
                        fb::EnumNameDType(B->dtype()) + " cannot represent");
          }
    }
  return Status::ok();
}

Status Checker::checkProgram(const fb::Program &Prog, unsigned Index) {
  std::string PName = Prog.name()->str();
  // Kernel ids and their devices.
  std::vector<uint32_t> KernelDevice;
  if (Prog.devices())
    for (const fb::DeviceProgram *DP : *Prog.devices()) {
      if (DP->device() >= NumDevices)
        return fail("program '" + PName +
                    "' runs on a device that does not "
                    "exist");
      if (DP->kernels())
        for (size_t K = 0; K < DP->kernels()->size(); ++K)
          KernelDevice.push_back(DP->device());
    }
  std::vector<bool> Waited(KernelDevice.size());
  uint32_t Id = 0;
  if (Prog.devices())
    for (const fb::DeviceProgram *DP : *Prog.devices()) {
      const fb::Device *Dev = P.devices()->Get(DP->device());
      if (!DP->kernels())
        continue;
      for (const fb::Kernel *K : *DP->kernels()) {
        // Built only for a message: a plan has a million kernels.
        auto KName = [&] {
          return "kernel '" + K->name()->str() + "' (" + K->op()->str() +
                 ") of program '" + PName + "'";
        };
        std::string_view Op = K->op()->string_view();
        const Signature *Sig = signatureOf(*K->op());
        if (!Sig)
          return fail(KName() + ": unknown op");
        if (K->attrs())
          for (const fb::Attr *A : *K->attrs())
            if (misaligned(A->ints()) || misaligned(A->floats()))
              return fail(KName() + ": attribute '" + A->name()->str() +
                          "' has misaligned values");
        int NI = K->inputs() ? int(K->inputs()->size()) : 0;
        int NO = K->outputs() ? int(K->outputs()->size()) : 0;
        const Signature &S = *Sig;
        if (NI < S.MinIn || (S.MaxIn >= 0 && NI > S.MaxIn) || NO < S.MinOut ||
            (S.MaxOut >= 0 && NO > S.MaxOut) || (Op == "AllReduce" && NI != NO))
          return fail(KName() + " has " + std::to_string(NI) + " inputs and " +
                      std::to_string(NO) +
                      " outputs, which its op does not "
                      "take");
        for (int Pass = 0; Pass < 2; ++Pass) {
          auto *List = Pass ? K->outputs() : K->inputs();
          if (!List)
            continue;
          for (uint32_t B : *List) {
            if (B >= NumBuffers)
              return bufferId(B, KName());
            const fb::Buffer *Buf = P.buffers()->Get(B);
            if (Buf->device() != DP->device())
              return fail(KName() + " on " + Dev->name()->str() + " uses " +
                          bufName(B) + " of another device");
            if (Pass && Buf->persistent())
              return fail(KName() + " writes persistent " + bufName(B));
          }
        }
        if (K->waits())
          for (uint32_t W : *K->waits()) {
            if (W >= KernelDevice.size())
              return fail(KName() + " waits for kernel " + std::to_string(W) +
                          ", which does not exist");
            if (KernelDevice[W] == DP->device())
              return fail(KName() + " waits for a kernel of its own device");
            Waited[W] = true;
          }
        ++Id;
      }
    }
  // Every waited kernel signals.
  Id = 0;
  if (Prog.devices())
    for (const fb::DeviceProgram *DP : *Prog.devices())
      if (DP->kernels())
        for (const fb::Kernel *K : *DP->kernels()) {
          if (Waited[Id] && !K->signals())
            return fail("kernel '" + K->name()->str() +
                        "' is waited for but does not signal");
          ++Id;
        }
  if (Prog.inputs())
    for (const fb::InputBinding *In : *Prog.inputs()) {
      MDRT_RETURN_IF_ERROR(
          bufferId(In->buffer(), "input '" + In->name()->str() + "'"));
      if (P.buffers()->Get(In->buffer())->persistent())
        return fail("input '" + In->name()->str() + "' is persistent");
    }
  if (Prog.outputs())
    for (const fb::Output *O : *Prog.outputs())
      MDRT_RETURN_IF_ERROR(
          bufferId(O->buffer(), "output '" + O->name()->str() + "'"));
  if (Prog.collectives())
    for (const fb::Collective *C : *Prog.collectives()) {
      size_t ND = C->devices() ? C->devices()->size() : 0;
      size_t NK = C->kernels() ? C->kernels()->size() : 0;
      if (ND == 0 || ND != NK)
        return fail("a collective of program '" + PName +
                    "' lists no devices or not one kernel per device");
      for (size_t I = 0; I < ND; ++I) {
        uint32_t K = C->kernels()->Get(I);
        if (K >= KernelDevice.size() || C->devices()->Get(I) >= NumDevices ||
            KernelDevice[K] != C->devices()->Get(I))
          return fail("a collective of program '" + PName +
                      "' names a kernel that is not on its device");
      }
      MDRT_RETURN_IF_ERROR(checkReplicas(*C, PName));
    }
  MDRT_RETURN_IF_ERROR(checkProgress(Prog, PName, KernelDevice));
  if (Prog.batch_size() <= 0)
    return fail("program '" + PName + "' has no batch size");
  (void)Index;
  return Status::ok();
}

/// The kernel with program-wide id \p Id (ids are valid here).
static const fb::Kernel *kernelAt(const fb::Program &Prog, uint32_t Id) {
  for (const fb::DeviceProgram *DP : *Prog.devices()) {
    uint32_t N = DP->kernels() ? DP->kernels()->size() : 0;
    if (Id < N)
      return DP->kernels()->Get(Id);
    Id -= N;
  }
  return nullptr;
}

int64_t mdrt::kernelIntAttr(const fb::Kernel &K, std::string_view Name,
                            int64_t Default) {
  if (K.attrs())
    for (const fb::Attr *A : *K.attrs())
      if (A->name()->string_view() == Name && A->kind() == fb::AttrKind::Int)
        return A->i();
  return Default;
}

/// A Send's or Recv's channel, as the executor reads it (-1 if none).
static int64_t channelOf(const fb::Kernel &K) {
  return kernelIntAttr(K, "channel");
}

/// The step can finish: each device runs its kernels in order, a kernel
/// starts after the kernels it waits for (a Recv also after its Send), and the
/// kernels of one collective complete together, once every participant has
/// reached its own. So the graph of kernels (a collective's kernels merged into
/// one node) with an edge from each kernel to the next on its device and from
/// each waited kernel to its waiter must have no cycle; in particular, every
/// device meets the collectives it shares with another in the same order, as
/// NCCL requires of operations on one communicator. Also: a kernel belongs to
/// one collective at most, and a collective has one kernel per device.
Status Checker::checkProgress(const fb::Program &Prog, const std::string &PName,
                              const std::vector<uint32_t> &KernelDevice) {
  if (!Prog.devices())
    return Status::ok();
  const uint32_t NumKernels = uint32_t(KernelDevice.size());
  const uint32_t NumColl =
      Prog.collectives() ? uint32_t(Prog.collectives()->size()) : 0;
  auto KernelName = [&](uint32_t Id) {
    const fb::Kernel *K = kernelAt(Prog, Id);
    return "kernel '" + K->name()->str() + "' (" + K->op()->str() + ") on " +
           P.devices()->Get(KernelDevice[Id])->name()->str();
  };
  // Node of each kernel: itself, or NumKernels + its collective.
  std::vector<uint32_t> Node(NumKernels);
  for (uint32_t K = 0; K < NumKernels; ++K)
    Node[K] = K;
  for (uint32_t C = 0; C < NumColl; ++C) {
    const fb::Collective *Coll = Prog.collectives()->Get(C);
    std::set<uint32_t> Devices;
    for (uint32_t K : *Coll->kernels()) {
      if (kernelAt(Prog, K)->op()->string_view() != "AllReduce")
        return fail(KernelName(K) + " of program '" + PName +
                    "' takes part in a collective, but only AllReduce "
                    "kernels do");
      if (Node[K] != K)
        return fail(KernelName(K) + " of program '" + PName +
                    "' takes part in two collectives (or twice in one)");
      if (!Devices.insert(KernelDevice[K]).second)
        return fail("a collective of program '" + PName + "' has two " +
                    "kernels on " +
                    P.devices()->Get(KernelDevice[K])->name()->str() +
                    ", whose thread would wait for itself");
      Node[K] = NumKernels + C;
    }
  }
  // Edges, as (from, to) in compressed rows.
  const uint32_t NumNodes = NumKernels + NumColl;
  std::vector<std::pair<uint32_t, uint32_t>> Edges;
  Edges.reserve(NumKernels);
  {
    // The executor runs a device's kernels in id order, also when the
    // program lists the device more than once, and a Recv waits for the
    // last Send of its channel (wherever it is; a Recv without one is
    // refused when the program is created).
    std::vector<int64_t> Last(NumDevices, -1);
    std::map<int64_t, uint32_t> SendOf;
    std::vector<std::pair<int64_t, uint32_t>> Recvs;
    uint32_t Id = 0;
    for (const fb::DeviceProgram *DP : *Prog.devices()) {
      if (!DP->kernels())
        continue;
      for (const fb::Kernel *K : *DP->kernels()) {
        int64_t &Prev = Last[DP->device()];
        if (Prev >= 0 && Node[uint32_t(Prev)] != Node[Id])
          Edges.emplace_back(Node[uint32_t(Prev)], Node[Id]);
        Prev = Id;
        if (K->waits())
          for (uint32_t W : *K->waits())
            if (Node[W] != Node[Id])
              Edges.emplace_back(Node[W], Node[Id]);
        std::string_view Op = K->op()->string_view();
        if (Op == "Send")
          SendOf[channelOf(*K)] = Id;
        else if (Op == "Recv")
          Recvs.emplace_back(channelOf(*K), Id);
        ++Id;
      }
    }
    for (const auto &[Channel, Recv] : Recvs) {
      auto It = SendOf.find(Channel);
      if (It != SendOf.end() && Node[It->second] != Node[Recv])
        Edges.emplace_back(Node[It->second], Node[Recv]);
    }
  }
  std::vector<uint32_t> Begin(NumNodes + 1, 0), Succ(Edges.size()),
      InDegree(NumNodes, 0);
  for (const auto &E : Edges) {
    ++Begin[E.first + 1];
    ++InDegree[E.second];
  }
  for (uint32_t N = 0; N < NumNodes; ++N)
    Begin[N + 1] += Begin[N];
  {
    std::vector<uint32_t> Fill(Begin.begin(), Begin.end() - 1);
    for (const auto &E : Edges)
      Succ[Fill[E.first]++] = E.second;
  }
  // Kahn's algorithm: what never becomes ready lies on or after a cycle.
  std::vector<uint32_t> Ready;
  for (uint32_t N = 0; N < NumNodes; ++N)
    if (!InDegree[N])
      Ready.push_back(N);
  uint32_t Done = 0;
  while (!Ready.empty()) {
    uint32_t N = Ready.back();
    Ready.pop_back();
    ++Done;
    for (uint32_t I = Begin[N]; I < Begin[N + 1]; ++I)
      if (--InDegree[Succ[I]] == 0)
        Ready.push_back(Succ[I]);
  }
  if (Done == NumNodes)
    return Status::ok();
  // Every node left has a predecessor left: walking back from one reaches
  // a node twice, which lies on a cycle.
  std::vector<int64_t> Pred(NumNodes, -1);
  for (const auto &E : Edges)
    if (InDegree[E.first] && InDegree[E.second])
      Pred[E.second] = E.first;
  uint32_t N = 0;
  while (!InDegree[N])
    ++N;
  std::vector<bool> Seen(NumNodes, false);
  while (!Seen[N]) {
    Seen[N] = true;
    N = uint32_t(Pred[N]);
  }
  uint32_t Kernel = N;
  if (N >= NumKernels)
    Kernel = Prog.collectives()->Get(N - NumKernels)->kernels()->Get(0);
  return fail("program '" + PName +
              "' can never finish a step: " + KernelName(Kernel) +
              " waits for itself through its devices' kernel order, "
              "its waits and its all-reduces (a cycle)");
}

/// A collective spans `replicas` worker processes: at least 1, and more only
/// in a plan for one worker of a mirrored deployment over that many.
Status Checker::checkReplicas(const fb::Collective &C,
                              const std::string &PName) {
  std::string What = "a collective of program '" + PName + "'";
  int32_t R = C.replicas();
  if (R < 1)
    return fail(What + " has replicas " + std::to_string(R) +
                "; it must be at least 1");
  if (R == 1)
    return Status::ok();
  What += " spans " + std::to_string(R) + " replicas, but the plan";
  const fb::Deployment *D = P.deployment();
  if (!D)
    return fail(What + " has no deployment");
  std::string Strategy = D->strategy() ? D->strategy()->str() : "";
  if (Strategy != "mirrored")
    return fail(What + "'s deployment has strategy '" + Strategy +
                "' (only the mirrored strategy reduces across replicas)");
  if (D->num_replicas() != R)
    return fail(What + "'s deployment has num_replicas " +
                std::to_string(D->num_replicas()));
  return Status::ok();
}

Status Checker::run() {
  if (P.version() != kPlanVersion)
    return fail("the plan has format version " + std::to_string(P.version()) +
                "; this runtime reads version " + std::to_string(kPlanVersion) +
                " (recompile it with mdplan)");
  MDRT_RETURN_IF_ERROR(checkDevices());
  MDRT_RETURN_IF_ERROR(checkBuffers());
  MDRT_RETURN_IF_ERROR(checkVariables());
  if (!P.programs() || P.programs()->size() == 0)
    return fail("the plan has no programs");
  std::set<std::string> Names;
  for (uint32_t I = 0; I < P.programs()->size(); ++I) {
    const fb::Program *Prog = P.programs()->Get(I);
    if (!Names.insert(Prog->name()->str()).second)
      return fail("two programs are named '" + Prog->name()->str() + "'");
    MDRT_RETURN_IF_ERROR(checkProgram(*Prog, I));
  }
  return Status::ok();
}

const std::vector<std::string> &mdrt::initKindNames() {
  static const std::vector<std::string> Names = {"zeros",
                                                 "ones",
                                                 "constant",
                                                 "normal",
                                                 "truncated_normal",
                                                 "uniform",
                                                 "glorot_uniform",
                                                 "glorot_normal",
                                                 "he_normal"};
  static_assert(unsigned(fb::InitKind::MAX) == 8, "one name per InitKind");
  return Names;
}

const char *mdrt::initKindName(fb::InitKind K) {
  const std::vector<std::string> &Names = initKindNames();
  unsigned I = unsigned(K);
  return I < Names.size() ? Names[I].c_str() : "unknown";
}

/// The size and the file identifier.
static Status checkHeader(const uint8_t *Data, size_t Size) {
  if (Size < 8)
    return Status::error("not a plan: the file is " + std::to_string(Size) +
                         " bytes long");
  if (!flatbuffers::BufferHasIdentifier(Data, fb::PlanIdentifier()))
    return Status::error("not a plan: wrong file identifier (expected '" +
                         std::string(fb::PlanIdentifier()) +
                         "'); a plan is what mdplan writes (mdplan MODEL "
                         "-o PLAN.mdp)");
  return Status();
}

/// The plan's own rules, on a buffer whose structure is sound.
static Status checkContents(const uint8_t *Data, size_t Size) {
  // Losing only the padding after the last object, or gaining bytes after
  // the plan, leaves a buffer the FlatBuffers verifier accepts.
  if (uint64_t Want = fb::GetPlan(Data)->file_bytes(); Want && Want != Size)
    return Status::error(
        Size < Want
            ? "the plan is truncated: the file has " + std::to_string(Size) +
                  " of its " + std::to_string(Want) + " bytes"
            : "the file has " + std::to_string(Size - Want) +
                  " bytes after the plan's " + std::to_string(Want) +
                  " (damaged or not one plan)");
  return Checker(*fb::GetPlan(Data)).run();
}

Status mdrt::verifyPlan(const uint8_t *Data, size_t Size) {
  if (Status S = checkHeader(Data, Size))
    return S;
  flatbuffers::Verifier V(Data, Size, /*max_depth=*/64,
                          /*max_tables=*/100000000);
  if (!fb::VerifyPlanBuffer(V))
    return Status::error("the plan is corrupted or truncated (FlatBuffers "
                         "verification failed)");
  return checkContents(Data, Size);
}

/// The fields the schema marks required, which the FlatBuffers verifier
/// checks and the builder only asserts: the checks after it read them.
static Status checkRequired(const fb::Plan &P) {
  auto Missing = [](const std::string &What) {
    return Status::error(What + " has no name");
  };
  auto Index = [](const char *What, size_t I) {
    return std::string(What) + " " + std::to_string(I);
  };
  if (const auto *Ds = P.devices())
    for (size_t I = 0; I < Ds->size(); ++I)
      if (!Ds->Get(I)->name())
        return Missing(Index("device", I));
  if (const auto *Bs = P.buffers())
    for (size_t I = 0; I < Bs->size(); ++I)
      if (!Bs->Get(I)->name())
        return Missing(Index("buffer", I));
  if (const auto *Vs = P.variables())
    for (size_t I = 0; I < Vs->size(); ++I)
      if (!Vs->Get(I)->name())
        return Missing(Index("variable", I));
  if (!P.programs())
    return Status();
  for (size_t I = 0; I < P.programs()->size(); ++I) {
    const fb::Program &Prog = *P.programs()->Get(I);
    if (!Prog.name())
      return Missing(Index("program", I));
    // Messages are made only for a field that is missing.
    auto In = [&] { return " of program '" + Prog.name()->str() + "'"; };
    if (Prog.devices())
      for (const fb::DeviceProgram *DP : *Prog.devices())
        if (DP->kernels())
          for (size_t K = 0; K < DP->kernels()->size(); ++K) {
            const fb::Kernel &Kn = *DP->kernels()->Get(K);
            auto Where = [&] {
              return Index("kernel", K) + " of device " +
                     std::to_string(DP->device()) + In();
            };
            if (!Kn.name())
              return Missing(Where());
            if (!Kn.op())
              return Status::error(Where() + " has no op");
            if (Kn.attrs())
              for (size_t A = 0; A < Kn.attrs()->size(); ++A)
                if (!Kn.attrs()->Get(A)->name())
                  return Missing(Index("attribute", A) + " of " + Where());
          }
    if (Prog.inputs())
      for (size_t J = 0; J < Prog.inputs()->size(); ++J)
        if (!Prog.inputs()->Get(J)->name())
          return Missing(Index("input", J) + In());
    if (Prog.outputs())
      for (size_t J = 0; J < Prog.outputs()->size(); ++J)
        if (!Prog.outputs()->Get(J)->name())
          return Missing(Index("output", J) + In());
  }
  return Status();
}

Status mdrt::checkBuiltPlan(const uint8_t *Data, size_t Size) {
  if (Status S = checkHeader(Data, Size))
    return S;
  if (Status S = checkRequired(*fb::GetPlan(Data)))
    return S;
  return checkContents(Data, Size);
}

StatusOr<std::unique_ptr<PlanFile>>
PlanFile::fromBytes(std::vector<uint8_t> Bytes, const std::string &Name) {
  Status S = verifyPlan(Bytes.data(), Bytes.size());
  if (!S.isOk())
    return S.withContext("plan '" + Name + "'");
  auto F = std::unique_ptr<PlanFile>(new PlanFile());
  F->Bytes = std::move(Bytes);
  F->Name = Name;
  return F;
}

StatusOr<std::unique_ptr<PlanFile>> PlanFile::load(const std::string &Path) {
  // Plain C I/O: a std::filebuf throws std::ios_base::failure when reading
  // fails (a directory, say), whatever the stream's exception mask.
  auto CannotRead = [&](const std::string &Why) {
    return Status::error("cannot read plan '" + Path + "': " + Why);
  };
  struct stat St;
  if (::stat(Path.c_str(), &St) != 0)
    return CannotRead(std::strerror(errno));
  if (S_ISDIR(St.st_mode))
    return CannotRead("it is a directory");
  if (!S_ISREG(St.st_mode))
    return CannotRead("not a regular file");
  std::FILE *F = std::fopen(Path.c_str(), "rb");
  if (!F)
    return CannotRead(std::strerror(errno));
  std::vector<uint8_t> Bytes;
  try {
    Bytes.reserve(size_t(St.st_size));
    uint8_t Buf[1 << 16];
    size_t N;
    while ((N = std::fread(Buf, 1, sizeof(Buf), F)) > 0)
      Bytes.insert(Bytes.end(), Buf, Buf + N);
  } catch (const std::exception &E) {
    std::fclose(F);
    return CannotRead(E.what());
  }
  bool Failed = std::ferror(F);
  int Err = errno;
  std::fclose(F);
  if (Failed)
    return CannotRead(std::strerror(Err));
  return fromBytes(std::move(Bytes), Path);
}

const fb::Program *PlanFile::program(const std::string &Name) const {
  if (!plan().programs())
    return nullptr;
  for (const fb::Program *P : *plan().programs())
    if (P->name()->str() == Name)
      return P;
  return nullptr;
}

std::string mdrt::workerJobName(const fb::Deployment &D) {
  return D.worker_job() ? D.worker_job()->str() : "worker";
}

std::string mdrt::psJobName(const fb::Deployment &D) {
  return D.ps_job() ? D.ps_job()->str() : "ps";
}

std::string mdrt::replicaPath(std::string Path, int Replica) {
  const std::string Key = "{replica}";
  std::string Id = std::to_string(Replica);
  for (size_t At = Path.find(Key); At != std::string::npos;
       At = Path.find(Key, At + Id.size()))
    Path.replace(At, Key.size(), Id);
  return Path;
}

std::string mdrt::misspelledReplica(const std::string &Path) {
  const std::string Key = "{replica}";
  for (size_t At = 0; At + Key.size() <= Path.size(); ++At) {
    std::string Piece = Path.substr(At, Key.size());
    if (Piece == Key)
      continue;
    if (std::equal(Piece.begin(), Piece.end(), Key.begin(), [](char A, char B) {
          return std::tolower(static_cast<unsigned char>(A)) == B;
        }))
      return Piece;
  }
  return "";
}

bool mdrt::sameFile(const std::string &A, const std::string &B) {
  struct stat SA, SB;
  if (::stat(A.c_str(), &SA) == 0 && ::stat(B.c_str(), &SB) == 0)
    return SA.st_dev == SB.st_dev && SA.st_ino == SB.st_ino;
  std::error_code EA, EB;
  auto PA = std::filesystem::absolute(A, EA).lexically_normal();
  auto PB = std::filesystem::absolute(B, EB).lexically_normal();
  return !EA && !EB && PA == PB;
}
