//===- TextProtoMutator.cpp - Structure-aware mutations of text protos ----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Byte mutations of a model file mostly break its syntax, and those that do
// not rarely change what the passes see. This mutator parses the input as
// the message it is (through protobuf reflection: it needs no generated
// header), changes one field anywhere in it and prints it again: a number
// nudged to an edge, an enum set to another value (or to a number none has),
// a string replaced by another string of the model (so an input may name
// another node, an op another op), a repeated field grown, shrunk or
// reordered, a message cleared or added.
//
//===----------------------------------------------------------------------===//

#include "TextProtoMutator.h"
#include "RandomEdits.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace pb = google::protobuf;

namespace {

class Mutator : mdplan::fuzz::RandomEdits {
public:
  Mutator(unsigned Seed, const std::vector<std::string> &Extra)
      : RandomEdits(Seed), Pool(Extra) {}
  bool mutate(pb::Message &M);

private:
  struct Slot {
    pb::Message *M;
    const pb::FieldDescriptor *F;
  };

  void collect(pb::Message &M, int Depth);
  std::string newString(const std::string &Old);
  void setScalar(pb::Message &M, const pb::FieldDescriptor *F, int Index);
  void addElement(pb::Message &M, const pb::FieldDescriptor *F);

  std::vector<std::string> Pool;
  std::vector<Slot> Slots;
};

/// Every field of every message reachable from \p M, set or not; and the
/// strings of the message, as replacements.
void Mutator::collect(pb::Message &M, int Depth) {
  const pb::Descriptor *D = M.GetDescriptor();
  const pb::Reflection *Ref = M.GetReflection();
  for (int I = 0; I < D->field_count(); ++I) {
    const pb::FieldDescriptor *F = D->field(I);
    Slots.push_back({&M, F});
    if (F->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
      if (F->is_repeated()) {
        for (int J = 0, N = Ref->FieldSize(M, F); J < N; ++J)
          Pool.push_back(Ref->GetRepeatedString(M, F, J));
      } else if (Ref->HasField(M, F)) {
        Pool.push_back(Ref->GetString(M, F));
      }
    }
    if (F->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || Depth > 64)
      continue;
    if (F->is_repeated()) {
      for (int J = 0, N = Ref->FieldSize(M, F); J < N; ++J)
        collect(*Ref->MutableRepeatedMessage(&M, F, J), Depth + 1);
    } else if (Ref->HasField(M, F)) {
      collect(*Ref->MutableMessage(&M, F), Depth + 1);
    }
  }
}

std::string Mutator::newString(const std::string &Old) {
  switch (pick(8)) {
  case 0:
    return Old + ":1";
  case 1:
    return "^" + Old;
  case 2:
    return Old.substr(0, Old.size() / 2);
  case 3:
    return "";
  default:
    return Pool.empty() ? Old : Pool[pick(Pool.size())];
  }
}

void Mutator::setScalar(pb::Message &M, const pb::FieldDescriptor *F,
                        int Index) {
  const pb::Reflection *Ref = M.GetReflection();
  bool Rep = F->is_repeated();
  using FD = pb::FieldDescriptor;
  switch (F->cpp_type()) {
  case FD::CPPTYPE_INT32: {
    int64_t Old =
        Rep ? Ref->GetRepeatedInt32(M, F, Index) : Ref->GetInt32(M, F);
    auto V = int32_t(std::clamp<int64_t>(nearby(Old), INT32_MIN, INT32_MAX));
    Rep ? Ref->SetRepeatedInt32(&M, F, Index, V) : Ref->SetInt32(&M, F, V);
    break;
  }
  case FD::CPPTYPE_INT64: {
    int64_t Old =
        Rep ? Ref->GetRepeatedInt64(M, F, Index) : Ref->GetInt64(M, F);
    int64_t V = nearby(Old);
    Rep ? Ref->SetRepeatedInt64(&M, F, Index, V) : Ref->SetInt64(&M, F, V);
    break;
  }
  case FD::CPPTYPE_UINT32: {
    auto V = uint32_t(std::max<int64_t>(nearby(0), 0));
    Rep ? Ref->SetRepeatedUInt32(&M, F, Index, V) : Ref->SetUInt32(&M, F, V);
    break;
  }
  case FD::CPPTYPE_UINT64: {
    auto V = uint64_t(std::max<int64_t>(nearby(0), 0));
    Rep ? Ref->SetRepeatedUInt64(&M, F, Index, V) : Ref->SetUInt64(&M, F, V);
    break;
  }
  case FD::CPPTYPE_DOUBLE: {
    double Old =
        Rep ? Ref->GetRepeatedDouble(M, F, Index) : Ref->GetDouble(M, F);
    double V = nearbyReal(Old);
    Rep ? Ref->SetRepeatedDouble(&M, F, Index, V) : Ref->SetDouble(&M, F, V);
    break;
  }
  case FD::CPPTYPE_FLOAT: {
    auto V = float(nearbyReal(1));
    Rep ? Ref->SetRepeatedFloat(&M, F, Index, V) : Ref->SetFloat(&M, F, V);
    break;
  }
  case FD::CPPTYPE_BOOL: {
    bool V = Rep ? !Ref->GetRepeatedBool(M, F, Index) : !Ref->GetBool(M, F);
    Rep ? Ref->SetRepeatedBool(&M, F, Index, V) : Ref->SetBool(&M, F, V);
    break;
  }
  case FD::CPPTYPE_ENUM: {
    const pb::EnumDescriptor *E = F->enum_type();
    // Now and then a number no value has (the format's enums are open).
    int Max = 0;
    for (int I = 0; I < E->value_count(); ++I)
      Max = std::max(Max, E->value(I)->number());
    int V = pick(8) == 0
                ? Max + 1 + int(pick(100))
                : E->value(int(pick(size_t(E->value_count()))))->number();
    Rep ? Ref->SetRepeatedEnumValue(&M, F, Index, V)
        : Ref->SetEnumValue(&M, F, V);
    break;
  }
  case FD::CPPTYPE_STRING: {
    std::string Old =
        Rep ? Ref->GetRepeatedString(M, F, Index) : Ref->GetString(M, F);
    std::string V = newString(Old);
    Rep ? Ref->SetRepeatedString(&M, F, Index, V) : Ref->SetString(&M, F, V);
    break;
  }
  case FD::CPPTYPE_MESSAGE:
    break;
  }
}

/// Appends an element to repeated field \p F: a copy of one it has, or a
/// new one.
void Mutator::addElement(pb::Message &M, const pb::FieldDescriptor *F) {
  const pb::Reflection *Ref = M.GetReflection();
  int N = Ref->FieldSize(M, F);
  using FD = pb::FieldDescriptor;
  if (F->cpp_type() == FD::CPPTYPE_MESSAGE) {
    pb::Message *New = Ref->AddMessage(&M, F);
    if (N > 0 && pick(4) != 0)
      New->CopyFrom(Ref->GetRepeatedMessage(M, F, int(pick(size_t(N)))));
    return;
  }
  switch (F->cpp_type()) {
  case FD::CPPTYPE_INT32:
    Ref->AddInt32(&M, F, 1);
    break;
  case FD::CPPTYPE_INT64:
    Ref->AddInt64(&M, F, 1);
    break;
  case FD::CPPTYPE_UINT32:
    Ref->AddUInt32(&M, F, 1);
    break;
  case FD::CPPTYPE_UINT64:
    Ref->AddUInt64(&M, F, 1);
    break;
  case FD::CPPTYPE_DOUBLE:
    Ref->AddDouble(&M, F, 1);
    break;
  case FD::CPPTYPE_FLOAT:
    Ref->AddFloat(&M, F, 1);
    break;
  case FD::CPPTYPE_BOOL:
    Ref->AddBool(&M, F, true);
    break;
  case FD::CPPTYPE_ENUM:
    Ref->AddEnumValue(&M, F, F->enum_type()->value(0)->number());
    break;
  case FD::CPPTYPE_STRING:
    Ref->AddString(&M, F, "");
    break;
  case FD::CPPTYPE_MESSAGE:
    break;
  }
  setScalar(M, F, N);
}

bool Mutator::mutate(pb::Message &M) {
  Slots.clear();
  collect(M, 0);
  if (Slots.empty())
    return false;
  Slot S = Slots[pick(Slots.size())];
  const pb::Reflection *Ref = S.M->GetReflection();
  const pb::FieldDescriptor *F = S.F;
  if (F->is_repeated()) {
    int N = Ref->FieldSize(*S.M, F);
    int What = N == 0 ? 0 : int(pick(4));
    switch (What) {
    case 0:
      addElement(*S.M, F);
      break;
    case 1: // Remove one: swap it to the end, drop the last.
      Ref->SwapElements(S.M, F, int(pick(size_t(N))), N - 1);
      Ref->RemoveLast(S.M, F);
      break;
    case 2:
      Ref->SwapElements(S.M, F, int(pick(size_t(N))), int(pick(size_t(N))));
      break;
    default:
      if (F->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
        Ref->MutableRepeatedMessage(S.M, F, int(pick(size_t(N))))->Clear();
      else
        setScalar(*S.M, F, int(pick(size_t(N))));
      break;
    }
    return true;
  }
  if (F->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    if (Ref->HasField(*S.M, F) && coin())
      Ref->ClearField(S.M, F);
    else
      Ref->MutableMessage(S.M, F);
    return true;
  }
  if (Ref->HasField(*S.M, F) && pick(6) == 0) {
    Ref->ClearField(S.M, F);
    return true;
  }
  setScalar(*S.M, F, -1);
  return true;
}

/// Ignores the parser's complaints: an input that does not parse is
/// mutated as bytes instead.
class Quiet : public pb::io::ErrorCollector {
public:
  void AddError(int, pb::io::ColumnNumber, const std::string &) override {}
  void AddWarning(int, pb::io::ColumnNumber, const std::string &) override {}
};

} // namespace

size_t
mdplan::fuzz::editTextProto(pb::Message &M, uint8_t *Data, size_t Size,
                            size_t MaxSize, unsigned Seed,
                            const std::function<bool(pb::Message &)> &Edit) {
  pb::TextFormat::Parser P;
  Quiet Errors;
  P.RecordErrorsTo(&Errors);
  P.SetRecursionLimit(200);
  if (!P.ParseFromString(
          std::string(reinterpret_cast<const char *>(Data), Size), &M))
    return 0;
  // One to three edits.
  for (unsigned I = 0, N = 1 + Seed % 3; I < N; ++I)
    if (!Edit(M))
      return 0;
  std::string Text;
  if (!pb::TextFormat::PrintToString(M, &Text) || Text.size() > MaxSize)
    return 0;
  // Bytes for libFuzzer, not a C string.
  std::memcpy(Data, Text.data(), // NOLINT(bugprone-not-null-terminated-result)
              Text.size());
  return Text.size();
}

size_t mdplan::fuzz::mutateTextProto(const char *TypeName, uint8_t *Data,
                                     size_t Size, size_t MaxSize, unsigned Seed,
                                     const std::vector<std::string> &Strings) {
  const pb::Descriptor *D =
      pb::DescriptorPool::generated_pool()->FindMessageTypeByName(TypeName);
  if (!D)
    return 0;
  std::unique_ptr<pb::Message> M(
      pb::MessageFactory::generated_factory()->GetPrototype(D)->New());
  Mutator Mut(Seed, Strings);
  return editTextProto(*M, Data, Size, MaxSize, Seed,
                       [&](pb::Message &Msg) { return Mut.mutate(Msg); });
}

const std::vector<std::string> &mdplan::fuzz::opNames() {
  static const std::vector<std::string> Names = {
#define MDPLAN_OP(NAME, SUMMARY) #NAME,
#include "mdplan/IR/Ops.def"
#undef MDPLAN_OP
  };
  return Names;
}
