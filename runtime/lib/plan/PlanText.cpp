//===- PlanText.cpp - The text form of a plan -----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// One line per item, sections in file order:
//
//   plan "FashionMLP" version 2 producer "mdplan 0.1.0" fingerprint 0x...
//   deployment strategy=ps num_clones=2 ...
//   device d0 /job:worker/replica:0/task:0/device:CPU:0 cpu arena=... ...
//   buffer b0 images:0 float32[64,784] d0 arena+0 200704
//   variable v0 mlp/fc1/weights b3 glorot_uniform trainable
//   constant b7 [2]
//   program train batch=64
//     input images feature=image b0
//     device d0 kernels=35 arena=... naive=... planner=...
//       k0 MatMul mlp/fc1/MatMul (b0, b3) -> (b9)
//       k1 Recv ... waits k7
//     collective gradients bucket=0 d1:k12 d2:k30
//     transfers d0->d1 tensors=4 bytes=1024 (1.0 KiB)
//     all-reduce gradients buckets=1 devices=2 tensors=2 bytes=... per device
//     output total_loss loss b20
//
// The transfers and all-reduce lines sum what a step moves: every Recv
// (with the Send of its channel) by source and destination device, and
// the inputs of each collective group's first participant; `replicas=W`
// when the group's all-reduces also sum across W worker processes.
//
// A collective that spans several worker processes (mirrored, num_replicas
// W > 1) ends with their number, W; within one process it has none:
//
//     collective gradients bucket=0 d1:k12 d2:k30 replicas=2
//
//===----------------------------------------------------------------------===//

#include "mdrt/Plan.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

using namespace mdrt;

std::string mdrt::formatBytes(uint64_t Bytes) {
  char Buf[64];
  if (Bytes < 1024)
    snprintf(Buf, sizeof(Buf), "%" PRIu64 " B", Bytes);
  else if (Bytes < 1024 * 1024)
    snprintf(Buf, sizeof(Buf), "%.1f KiB", Bytes / 1024.0);
  else if (Bytes < (uint64_t(1) << 30))
    snprintf(Buf, sizeof(Buf), "%.1f MiB", Bytes / (1024.0 * 1024.0));
  else if (Bytes < (uint64_t(1) << 40))
    snprintf(Buf, sizeof(Buf), "%.2f GiB", Bytes / (1024.0 * 1024.0 * 1024.0));
  else if (Bytes < (uint64_t(1) << 50))
    snprintf(Buf, sizeof(Buf), "%.2f TiB", double(Bytes) / double(1ull << 40));
  else if (Bytes < (uint64_t(1) << 60))
    snprintf(Buf, sizeof(Buf), "%.2f PiB", double(Bytes) / double(1ull << 50));
  else
    snprintf(Buf, sizeof(Buf), "%.2f EiB", double(Bytes) / double(1ull << 60));
  return Buf;
}

static const char *dtypeText(fb::DType T) {
  switch (T) {
  case fb::DType::Float32:
    return "float32";
  case fb::DType::Float64:
    return "float64";
  case fb::DType::Int32:
    return "int32";
  case fb::DType::Int64:
    return "int64";
  case fb::DType::Bool:
    return "bool";
  default:
    return "invalid";
  }
}

static std::string doubleText(double D) {
  char Buf[32];
  for (int Prec = 1; Prec <= 17; ++Prec) {
    snprintf(Buf, sizeof(Buf), "%.*g", Prec, D);
    if (strtod(Buf, nullptr) == D)
      break;
  }
  return Buf;
}

template <typename T> static std::string listText(const T *L) {
  std::string S = "[";
  if (L)
    for (size_t I = 0; I < L->size(); ++I) {
      if (I)
        S += ",";
      S += std::to_string(L->Get(I));
    }
  return S + "]";
}

static std::string attrText(const fb::Attr &A) {
  std::string S = A.name()->str() + "=";
  switch (A.kind()) {
  case fb::AttrKind::Int:
    return S + std::to_string(A.i());
  case fb::AttrKind::Float:
    return S + doubleText(A.f());
  case fb::AttrKind::Bool:
    return S + (A.i() ? "true" : "false");
  case fb::AttrKind::String:
    return S + "\"" + (A.s() ? A.s()->str() : "") + "\"";
  case fb::AttrKind::Type:
    return S + dtypeText(fb::DType(A.i()));
  case fb::AttrKind::Shape:
  case fb::AttrKind::IntList:
    return S + listText(A.ints());
  case fb::AttrKind::FloatList: {
    S += "[";
    if (A.floats())
      for (size_t I = 0; I < A.floats()->size(); ++I)
        S += (I ? "," : "") + doubleText(A.floats()->Get(I));
    return S + "]";
  }
  case fb::AttrKind::StringList: {
    S += "[";
    if (A.strings())
      for (size_t I = 0; I < A.strings()->size(); ++I)
        S += (I ? ",\"" : "\"") + A.strings()->Get(I)->str() + "\"";
    return S + "]";
  }
  }
  return S + "?";
}

static std::string bufList(const flatbuffers::Vector<uint32_t> *L) {
  std::string S = "(";
  if (L)
    for (size_t I = 0; I < L->size(); ++I)
      S += (I ? ", b" : "b") + std::to_string(L->Get(I));
  return S + ")";
}

/// What one step of \p Prog moves: the bytes of every transfer (a Recv and
/// the Send of its channel) by source and destination device, and of every
/// collective group's all-reduces, per participating device.
static void printTraffic(const fb::Plan &P, const fb::Program &Prog,
                         std::ostream &OS) {
  if (!Prog.devices() || !P.buffers())
    return;
  auto BytesOf = [&](uint32_t B) -> uint64_t {
    return B < P.buffers()->size() ? P.buffers()->Get(B)->bytes() : 0;
  };
  // Kernels by program-wide id, with their device.
  std::vector<std::pair<const fb::Kernel *, uint32_t>> Kernels;
  std::map<int64_t, uint32_t> SendDevice;
  for (const fb::DeviceProgram *DP : *Prog.devices())
    if (DP->kernels())
      for (const fb::Kernel *K : *DP->kernels()) {
        Kernels.emplace_back(K, DP->device());
        if (K->op()->string_view() == "Send")
          SendDevice[kernelIntAttr(*K, "channel")] = DP->device();
      }
  struct Sum {
    uint64_t Tensors = 0, Bytes = 0, Buckets = 0, Devices = 0;
    int Replicas = 1;
  };
  std::map<std::pair<uint32_t, uint32_t>, Sum> Transfers;
  for (const auto &[K, Dev] : Kernels) {
    if (K->op()->string_view() != "Recv" || !K->outputs() ||
        K->outputs()->size() != 1)
      continue;
    auto It = SendDevice.find(kernelIntAttr(*K, "channel"));
    if (It == SendDevice.end())
      continue;
    Sum &S = Transfers[{It->second, Dev}];
    ++S.Tensors;
    S.Bytes += BytesOf(K->outputs()->Get(0));
  }
  for (const auto &[FromTo, S] : Transfers)
    OS << "  transfers d" << FromTo.first << "->d" << FromTo.second
       << " tensors=" << S.Tensors << " bytes=" << S.Bytes << " ("
       << formatBytes(S.Bytes) << ")\n";
  if (!Prog.collectives())
    return;
  std::map<std::string, Sum> Groups;
  for (const fb::Collective *C : *Prog.collectives()) {
    Sum &S = Groups[C->group() ? C->group()->str() : ""];
    ++S.Buckets;
    S.Replicas = std::max(S.Replicas, C->replicas());
    if (!C->kernels() || !C->kernels()->size())
      continue;
    S.Devices = std::max<uint64_t>(S.Devices, C->kernels()->size());
    uint32_t First = C->kernels()->Get(0);
    if (First >= Kernels.size() || !Kernels[First].first->inputs())
      continue;
    for (uint32_t B : *Kernels[First].first->inputs()) {
      ++S.Tensors;
      S.Bytes += BytesOf(B);
    }
  }
  for (const auto &[Group, S] : Groups) {
    OS << "  all-reduce " << Group << " buckets=" << S.Buckets
       << " devices=" << S.Devices;
    if (S.Replicas != 1)
      OS << " replicas=" << S.Replicas;
    OS << " tensors=" << S.Tensors << " bytes=" << S.Bytes << " ("
       << formatBytes(S.Bytes) << ") per device\n";
  }
}

void mdrt::printPlanText(const fb::Plan &P, std::ostream &OS) {
  char Hex[32];
  snprintf(Hex, sizeof(Hex), "0x%016" PRIx64, P.fingerprint());
  OS << "plan \"" << (P.model() ? P.model()->str() : "") << "\" version "
     << P.version() << " producer \""
     << (P.producer() ? P.producer()->str() : "") << "\" fingerprint " << Hex
     << '\n';
  if (const fb::Deployment *D = P.deployment()) {
    OS << "deployment strategy=" << (D->strategy() ? D->strategy()->str() : "")
       << " num_clones=" << D->num_clones()
       << " clone_on_cpu=" << (D->clone_on_cpu() ? "true" : "false")
       << " replica_id=" << D->replica_id()
       << " num_replicas=" << D->num_replicas()
       << " num_ps_tasks=" << D->num_ps_tasks()
       << " batch_per_clone=" << D->batch_per_clone()
       << " optimizer=" << (D->optimizer() ? D->optimizer()->str() : "")
       << " learning_rate=" << doubleText(D->learning_rate());
    // The job names matter to the processes of a ps deployment only.
    if (D->num_ps_tasks() > 0)
      OS << " worker_job=" << workerJobName(*D) << " ps_job=" << psJobName(*D);
    OS << '\n';
  }
  if (P.devices())
    for (size_t I = 0; I < P.devices()->size(); ++I) {
      const fb::Device *D = P.devices()->Get(I);
      OS << "device d" << I << ' ' << D->name()->str() << ' '
         << (D->kind() == fb::DeviceKind::GPU ? "gpu" : "cpu")
         << " arena=" << D->arena_bytes() << " ("
         << formatBytes(D->arena_bytes())
         << ") persistent=" << D->persistent_bytes() << " ("
         << formatBytes(D->persistent_bytes()) << ")\n";
    }
  if (P.buffers())
    for (size_t I = 0; I < P.buffers()->size(); ++I) {
      const fb::Buffer *B = P.buffers()->Get(I);
      OS << "buffer b" << I << ' ' << B->name()->str() << ' '
         << dtypeText(B->dtype()) << listText(B->shape()) << " d" << B->device()
         << (B->persistent() ? " persistent+" : " arena+") << B->offset() << ' '
         << B->bytes();
      if (B->alias_of() >= 0)
        OS << " view-of b" << B->alias_of();
      OS << '\n';
    }
  if (P.variables())
    for (size_t I = 0; I < P.variables()->size(); ++I) {
      const fb::Variable *V = P.variables()->Get(I);
      OS << "variable v" << I << ' ' << V->name()->str() << " b" << V->buffer()
         << ' ' << mdrt::initKindName(V->init());
      switch (V->init()) {
      case fb::InitKind::Constant:
        OS << " value=" << doubleText(V->value());
        break;
      case fb::InitKind::Normal:
      case fb::InitKind::TruncatedNormal:
        OS << " mean=" << doubleText(V->mean())
           << " stddev=" << doubleText(V->stddev());
        break;
      case fb::InitKind::Uniform:
        OS << " min=" << doubleText(V->minval())
           << " max=" << doubleText(V->maxval());
        break;
      default:
        break;
      }
      snprintf(Hex, sizeof(Hex), "0x%016" PRIx64, V->stream());
      OS << " stream=" << Hex << (V->trainable() ? " trainable" : "");
      if (V->mirror_of() >= 0)
        OS << " mirror-of v" << V->mirror_of();
      OS << '\n';
    }
  if (P.constants())
    for (const fb::Constant *C : *P.constants()) {
      OS << "constant b" << C->buffer() << " [";
      if (C->values()) {
        size_t N = C->values()->size();
        for (size_t I = 0; I < N && I < 8; ++I)
          OS << (I ? "," : "") << doubleText(C->values()->Get(I));
        if (N > 8)
          OS << ",... (" << N << " values)";
      }
      OS << "]\n";
    }
  if (!P.programs())
    return;
  for (const fb::Program *Prog : *P.programs()) {
    OS << "program " << Prog->name()->str() << " batch=" << Prog->batch_size()
       << '\n';
    if (Prog->inputs())
      for (const fb::InputBinding *In : *Prog->inputs())
        OS << "  input " << In->name()->str()
           << " feature=" << (In->feature() ? In->feature()->str() : "") << " b"
           << In->buffer() << '\n';
    uint32_t Id = 0;
    if (Prog->devices())
      for (const fb::DeviceProgram *DP : *Prog->devices()) {
        size_t NK = DP->kernels() ? DP->kernels()->size() : 0;
        OS << "  device d" << DP->device() << " kernels=" << NK
           << " peak=" << DP->arena_bytes() << " ("
           << formatBytes(DP->arena_bytes()) << ") naive=" << DP->naive_bytes()
           << " (" << formatBytes(DP->naive_bytes())
           << ") planner=" << (DP->planner() ? DP->planner()->str() : "")
           << '\n';
        if (!DP->kernels())
          continue;
        for (const fb::Kernel *K : *DP->kernels()) {
          OS << "    k" << Id++ << ' ' << K->op()->str() << ' '
             << K->name()->str() << ' ' << bufList(K->inputs()) << " -> "
             << bufList(K->outputs());
          if (K->attrs() && K->attrs()->size()) {
            OS << " {";
            for (size_t I = 0; I < K->attrs()->size(); ++I)
              OS << (I ? ", " : "") << attrText(*K->attrs()->Get(I));
            OS << '}';
          }
          if (K->waits() && K->waits()->size()) {
            OS << " waits";
            for (uint32_t W : *K->waits())
              OS << " k" << W;
          }
          if (K->signals())
            OS << " signals";
          OS << '\n';
        }
      }
    if (Prog->collectives())
      for (const fb::Collective *C : *Prog->collectives()) {
        OS << "  collective " << (C->group() ? C->group()->str() : "")
           << " bucket=" << C->bucket();
        if (C->devices() && C->kernels())
          for (size_t I = 0; I < C->devices()->size(); ++I)
            OS << " d" << C->devices()->Get(I) << ":k" << C->kernels()->Get(I);
        if (C->replicas() != 1)
          OS << " replicas=" << C->replicas();
        OS << '\n';
      }
    printTraffic(P, *Prog, OS);
    static const char *Kinds[] = {"loss", "summary", "histogram", "metric"};
    if (Prog->outputs())
      for (const fb::Output *O : *Prog->outputs())
        OS << "  output " << O->name()->str() << ' '
           << (unsigned(O->kind()) < 4 ? Kinds[unsigned(O->kind())] : "?")
           << " b" << O->buffer() << '\n';
  }
}
