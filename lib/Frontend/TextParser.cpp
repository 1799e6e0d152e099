//===- TextParser.cpp - A fast path for protobuf's text format ------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// What the fast path reads (everything else, and every error, it declines):
//
// - Whitespace (space, \t, \n, \r, \v, \f) and `#` comments (without NUL
//   bytes) between tokens.
// - Fields named exactly as in the schema, each singular field and each
//   oneof at most once per message, then an optional `;` or `,`.
// - Message values in `{...}` or `<...>` after an optional `:`; scalar
//   values after a `:`; repeated fields also as lists `[a, b]` (`[]`
//   included), of messages too.
// - Strings: adjacent literals in `"` or `'` with printable ASCII and no
//   backslash. Integers: decimal, `-` right before the digits of signed
//   types, in range. Doubles: a decimal integer of at most 18 digits or a
//   decimal float (`1.5`, `.5`, `1.`, `2e-3`), no suffix. Bools: `true`,
//   `True`, `t`, `false`, `False`, `f`, `0`, `1`. Enums: value names.
//   A number must not run into a letter, digit, `_` or `.`.
//
// Values are set through reflection, as protobuf's parser sets them, and
// decimal floats convert with std::from_chars (correctly rounded, as
// protobuf's strtod), integers given to a double field through uint64_t.
//
//===----------------------------------------------------------------------===//

#include "TextParser.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <functional>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <limits>
#include <memory>

using namespace llvm;
using namespace mdplan;
namespace pb = google::protobuf;

//===----------------------------------------------------------------------===//
// Positions
//===----------------------------------------------------------------------===//

namespace {
/// Orders records by field, then kind; each group stays in parse order
/// (the sorts below are stable).
struct RecordLess {
  template <typename R> bool operator()(const R &X, const R &Y) const {
    if (X.F != Y.F)
      return std::less<const void *>()(X.F, Y.F);
    return X.K < Y.K;
  }
};
} // namespace

std::pair<const TextLocations::Record *, const TextLocations::Record *>
TextLocations::find(TreeId T, const pb::FieldDescriptor *F, Kind K) const {
  if (T >= Trees.size())
    return {nullptr, nullptr};
  const Record *First = Records.data() + Trees[T].first;
  const Record *Last = Records.data() + Trees[T].second;
  Record Key{F, K, 0, 0};
  return std::equal_range(First, Last, Key, RecordLess());
}

std::pair<int, int> TextLocations::location(TreeId T,
                                            const pb::FieldDescriptor *F,
                                            int Index) const {
  auto [Lo, Hi] = find(T, F, Position);
  size_t I = Index < 0 ? 0 : size_t(Index);
  if (I >= size_t(Hi - Lo))
    return {-1, -1};
  return {Lo[I].A, Lo[I].B};
}

TextLocations::TreeId
TextLocations::nested(TreeId T, const pb::FieldDescriptor *F, int Index) const {
  auto [Lo, Hi] = find(T, F, Nested);
  size_t I = Index < 0 ? 0 : size_t(Index);
  if (I >= size_t(Hi - Lo))
    return NoTree;
  return TreeId(Lo[I].A);
}

//===----------------------------------------------------------------------===//
// The parser
//===----------------------------------------------------------------------===//

namespace mdplan {
class FastTextParser {
public:
  FastTextParser(StringRef Text, int MaxNesting, TextLocations &Locs)
      : P(Text.begin()), End(Text.end()), ColAt(P), MaxNesting(MaxNesting),
        Locs(Locs) {}

  bool parse(pb::Message &M) {
    Locs.Records.clear();
    Locs.Trees.clear();
    MessageInfo &I = info(M.GetDescriptor(), M.GetReflection());
    return parseBody(M, I, /*Close=*/0, /*Depth=*/0, newTree());
  }

private:
  using Record = TextLocations::Record;
  using TreeId = TextLocations::TreeId;
  struct MessageInfo;

  struct FieldInfo {
    const pb::FieldDescriptor *F;
    pb::FieldDescriptor::CppType Type;
    bool Repeated;
    /// Index among the message's fields and its oneofs' (-1: none).
    int Index, Oneof;
    /// Message fields: the nested type, once one was made.
    MessageInfo *Child = nullptr;
    /// Enum fields: value numbers by name.
    const DenseMap<StringRef, int> *Enum = nullptr;
  };

  struct MessageInfo {
    const pb::Reflection *R;
    unsigned NumFields, NumOneofs;
    DenseMap<StringRef, FieldInfo> Fields;
  };

  /// What one open message has seen so far.
  struct Frame {
    SmallVector<Record, 8> Records;
    BitVector Seen, OneofSeen;
  };

  MessageInfo &info(const pb::Descriptor *D, const pb::Reflection *R) {
    std::unique_ptr<MessageInfo> &Slot = Infos[D];
    if (Slot)
      return *Slot;
    Slot = std::make_unique<MessageInfo>();
    Slot->R = R;
    Slot->NumFields = unsigned(D->field_count());
    Slot->NumOneofs = unsigned(D->oneof_decl_count());
    for (int I = 0; I < D->field_count(); ++I) {
      const pb::FieldDescriptor *F = D->field(I);
      FieldInfo FI{F, F->cpp_type(), F->is_repeated(), I, -1};
      // A proto3 `optional` field sits in a synthetic oneof of its own;
      // the singular-field check covers it.
      if (const pb::OneofDescriptor *O = F->real_containing_oneof())
        FI.Oneof = O->index();
      if (FI.Type == pb::FieldDescriptor::CPPTYPE_ENUM)
        FI.Enum = &enumValues(F->enum_type());
      // Names live in the descriptor pool, as long as the process.
      Slot->Fields.try_emplace(StringRef(F->name()), FI);
    }
    return *Slot;
  }

  const DenseMap<StringRef, int> &enumValues(const pb::EnumDescriptor *E) {
    std::unique_ptr<DenseMap<StringRef, int>> &Slot = Enums[E];
    if (!Slot) {
      Slot = std::make_unique<DenseMap<StringRef, int>>();
      for (int I = 0; I < E->value_count(); ++I)
        Slot->try_emplace(StringRef(E->value(I)->name()),
                          E->value(I)->number());
    }
    return *Slot;
  }

  TreeId newTree() {
    Locs.Trees.emplace_back(0, 0);
    return TreeId(Locs.Trees.size() - 1);
  }

  // Characters.
  bool at(char C) const { return P != End && *P == C; }
  static bool isIdentStart(char C) { return isAlpha(C) || C == '_'; }
  static bool isIdentChar(char C) { return isAlnum(C) || C == '_'; }

  void skipSpace() {
    while (P != End) {
      char C = *P;
      if (C == '\n') {
        ++P;
        ++Line;
        ColAt = P;
        Col = 0;
      } else if (C == ' ' || C == '\t' || C == '\r' || C == '\v' || C == '\f') {
        ++P;
      } else if (C == '#') {
        // Protobuf's tokenizer ends a comment at a NUL byte too, and then
        // rejects the byte: stop there, which declines the text.
        while (P != End && *P != '\n' && *P != '\0')
          ++P;
        if (P != End && *P == '\0')
          return;
      } else {
        return;
      }
    }
  }

  /// The column of P, as protobuf's tokenizer counts it. Advances from
  /// where the last call left off, so a long line costs its length once.
  int64_t column() {
    for (; ColAt != P; ++ColAt)
      Col = *ColAt == '\t' ? Col + 8 - Col % 8 : Col + 1;
    return Col;
  }

  static int32_t saturate(int64_t V) {
    return int32_t(std::min<int64_t>(V, std::numeric_limits<int32_t>::max()));
  }

  StringRef identifier() {
    if (P == End || !isIdentStart(*P))
      return {};
    const char *B = P++;
    while (P != End && isIdentChar(*P))
      ++P;
    return StringRef(B, P - B);
  }

  /// After a number: nothing that would run into it.
  bool numberEnds() const {
    return P == End || !(isIdentChar(*P) || *P == '.');
  }

  /// Decimal digits at most \p Limit, no leading zero.
  bool unsignedDigits(uint64_t Limit, uint64_t &V) {
    if (P == End || !isDigit(*P))
      return false;
    if (*P == '0' && P + 1 != End && isAlnum(P[1]))
      return false; // Octal, hexadecimal or junk.
    V = 0;
    for (; P != End && isDigit(*P); ++P) {
      uint64_t D = uint64_t(*P - '0');
      if (D > Limit || V > (Limit - D) / 10)
        return false;
      V = V * 10 + D;
    }
    return numberEnds();
  }

  bool signedValue(int64_t Min, int64_t Max, int64_t &V) {
    bool Neg = at('-');
    if (Neg)
      ++P;
    uint64_t U;
    if (!unsignedDigits(Neg ? uint64_t(0) - uint64_t(Min) : uint64_t(Max), U))
      return false;
    V = Neg ? int64_t(uint64_t(0) - U) : int64_t(U);
    return true;
  }

  bool doubleValue(double &V) {
    bool Neg = at('-');
    if (Neg)
      ++P;
    const char *B = P;
    if (at('.')) {
      if (P + 1 == End || !isDigit(P[1]))
        return false;
    } else if (P == End || !isDigit(*P)) {
      return false;
    } else if (*P == '0' && P + 1 != End &&
               (isDigit(P[1]) || P[1] == 'x' || P[1] == 'X')) {
      return false;
    }
    bool Float = false;
    while (P != End && isDigit(*P))
      ++P;
    if (at('.')) {
      Float = true;
      for (++P; P != End && isDigit(*P); ++P)
        ;
    }
    if (at('e') || at('E')) {
      Float = true;
      ++P;
      if (at('+') || at('-'))
        ++P;
      if (P == End || !isDigit(*P))
        return false;
      while (P != End && isDigit(*P))
        ++P;
    }
    if (!numberEnds())
      return false; // A suffix (`1.5f`) or junk.
    if (!Float) {
      // Protobuf reads an integer token as uint64_t, then converts it.
      if (P - B > 18)
        return false;
      uint64_t U = 0;
      for (const char *C = B; C != P; ++C)
        U = U * 10 + uint64_t(*C - '0');
      V = double(U);
    } else {
      auto R = std::from_chars(B, P, V);
      if (R.ec != std::errc() || R.ptr != P)
        return false;
    }
    if (Neg)
      V = -V;
    return true;
  }

  bool stringValue(std::string &S) {
    if (!at('"') && !at('\''))
      return false;
    do {
      char Quote = *P++;
      const char *B = P;
      for (; P != End && *P != Quote; ++P) {
        unsigned char C = static_cast<unsigned char>(*P);
        if (C == '\\' || C < 0x20 || C >= 0x7f)
          return false; // Escapes, line ends, control bytes, non-ASCII.
      }
      if (P == End)
        return false;
      S.append(B, P);
      ++P;
      skipSpace();
    } while (at('"') || at('\''));
    return true;
  }

  bool boolValue(bool &V) {
    if (P != End && isDigit(*P)) {
      uint64_t U;
      if (!unsignedDigits(1, U))
        return false;
      V = U != 0;
      return true;
    }
    StringRef Id = identifier();
    if (Id == "true" || Id == "True" || Id == "t")
      V = true;
    else if (Id == "false" || Id == "False" || Id == "f")
      V = false;
    else
      return false;
    return true;
  }

  bool parseValue(pb::Message &M, MessageInfo &I, FieldInfo &FI, Frame &Fr,
                  unsigned Depth) {
    const pb::Reflection *R = I.R;
    const pb::FieldDescriptor *F = FI.F;
    bool Rep = FI.Repeated;
    switch (FI.Type) {
    case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
      char Close = at('{') ? '}' : at('<') ? '>' : 0;
      if (!Close || int(Depth) + 1 >= MaxNesting)
        return false;
      ++P;
      pb::Message *Child =
          Rep ? R->AddMessage(&M, F) : R->MutableMessage(&M, F);
      if (!FI.Child)
        FI.Child = &info(F->message_type(), Child->GetReflection());
      TreeId Id = newTree();
      Fr.Records.push_back({F, TextLocations::Nested, int32_t(Id), 0});
      return parseBody(*Child, *FI.Child, Close, Depth + 1, Id);
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string S;
      if (!stringValue(S))
        return false;
      Rep ? R->AddString(&M, F, std::move(S))
          : R->SetString(&M, F, std::move(S));
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int64_t V;
      if (!signedValue(std::numeric_limits<int32_t>::min(),
                       std::numeric_limits<int32_t>::max(), V))
        return false;
      Rep ? R->AddInt32(&M, F, int32_t(V)) : R->SetInt32(&M, F, int32_t(V));
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t V;
      if (!signedValue(std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), V))
        return false;
      Rep ? R->AddInt64(&M, F, V) : R->SetInt64(&M, F, V);
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint64_t V;
      if (!unsignedDigits(std::numeric_limits<uint32_t>::max(), V))
        return false;
      Rep ? R->AddUInt32(&M, F, uint32_t(V)) : R->SetUInt32(&M, F, uint32_t(V));
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t V;
      if (!unsignedDigits(std::numeric_limits<uint64_t>::max(), V))
        return false;
      Rep ? R->AddUInt64(&M, F, V) : R->SetUInt64(&M, F, V);
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      double V;
      if (!doubleValue(V))
        return false;
      Rep ? R->AddDouble(&M, F, V) : R->SetDouble(&M, F, V);
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool V;
      if (!boolValue(V))
        return false;
      Rep ? R->AddBool(&M, F, V) : R->SetBool(&M, F, V);
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      auto It = FI.Enum->find(identifier());
      if (It == FI.Enum->end())
        return false;
      Rep ? R->AddEnumValue(&M, F, It->second)
          : R->SetEnumValue(&M, F, It->second);
      return true;
    }
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return false; // float conversion: left to protobuf.
    }
    return false;
  }

  bool parseField(pb::Message &M, MessageInfo &I, Frame &Fr, unsigned Depth) {
    // Positions past INT32_MAX (files over 2 GiB) saturate.
    int32_t Line0 = saturate(Line), Col0 = saturate(column());
    auto It = I.Fields.find(identifier());
    if (It == I.Fields.end())
      return false;
    FieldInfo &FI = It->second;
    if (!FI.Repeated) {
      if (Fr.Seen.test(unsigned(FI.Index)))
        return false;
      Fr.Seen.set(unsigned(FI.Index));
      if (FI.Oneof >= 0) {
        if (Fr.OneofSeen.test(unsigned(FI.Oneof)))
          return false;
        Fr.OneofSeen.set(unsigned(FI.Oneof));
      }
    }
    skipSpace();
    if (FI.Type == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (at(':')) {
        ++P;
        skipSpace();
      }
    } else {
      if (!at(':'))
        return false;
      ++P;
      skipSpace();
    }
    if (FI.Repeated && at('[')) {
      ++P;
      skipSpace();
      if (at(']')) {
        ++P;
      } else {
        for (;;) {
          if (!parseValue(M, I, FI, Fr, Depth))
            return false;
          skipSpace();
          if (at(']')) {
            ++P;
            break;
          }
          if (!at(','))
            return false;
          ++P;
          skipSpace();
        }
      }
    } else if (!parseValue(M, I, FI, Fr, Depth)) {
      return false;
    }
    Fr.Records.push_back({FI.F, TextLocations::Position, Line0, Col0});
    skipSpace();
    if (at(';') || at(','))
      ++P;
    return true;
  }

  /// The fields of \p M up to \p Close (0: the end of the text).
  bool parseBody(pb::Message &M, MessageInfo &I, char Close, unsigned Depth,
                 TreeId Id) {
    if (Frames.size() <= Depth)
      Frames.resize(Depth + 1);
    Frame &Fr = Frames[Depth]; // A deque: deeper frames leave it in place.
    Fr.Records.clear();
    Fr.Seen.clear();
    Fr.Seen.resize(I.NumFields);
    Fr.OneofSeen.clear();
    Fr.OneofSeen.resize(I.NumOneofs);
    for (;;) {
      skipSpace();
      if (P == End) {
        if (Close)
          return false;
        break;
      }
      if (Close && *P == Close) {
        ++P;
        break;
      }
      if (!parseField(M, I, Fr, Depth))
        return false;
    }
    // Most messages have a handful of fields: an insertion sort.
    auto &Rs = Fr.Records;
    if (Rs.size() <= 16) {
      for (size_t J = 1; J < Rs.size(); ++J)
        for (size_t K = J; K > 0 && RecordLess()(Rs[K], Rs[K - 1]); --K)
          std::swap(Rs[K], Rs[K - 1]);
    } else {
      std::stable_sort(Rs.begin(), Rs.end(), RecordLess());
    }
    uint32_t Begin = uint32_t(Locs.Records.size());
    Locs.Records.insert(Locs.Records.end(), Rs.begin(), Rs.end());
    Locs.Trees[Id] = {Begin, uint32_t(Locs.Records.size())};
    return true;
  }

  const char *P, *End;
  /// The line of P; where on it column() stopped, and the column there.
  int64_t Line = 0;
  const char *ColAt;
  int64_t Col = 0;
  int MaxNesting;
  TextLocations &Locs;
  std::deque<Frame> Frames;
  DenseMap<const pb::Descriptor *, std::unique_ptr<MessageInfo>> Infos;
  DenseMap<const pb::EnumDescriptor *,
           std::unique_ptr<DenseMap<StringRef, int>>>
      Enums;
};
} // namespace mdplan

bool mdplan::parseTextFast(StringRef Text, pb::Message &M, int MaxNesting,
                           TextLocations &Locs) {
  return FastTextParser(Text, MaxNesting, Locs).parse(M);
}

//===----------------------------------------------------------------------===//
// The comparison with protobuf's parser
//===----------------------------------------------------------------------===//

namespace {
class Silent : public pb::io::ErrorCollector {
public:
  void AddError(int, pb::io::ColumnNumber, const std::string &) override {}
};

using ParseInfoTree = pb::TextFormat::ParseInfoTree;

/// Compares the positions under one message of the two parses.
class PositionCompare {
public:
  explicit PositionCompare(const TextLocations &Fast) : Fast(Fast) {}

  std::string compare(const pb::Message &M, const ParseInfoTree *Slow,
                      TextLocations::TreeId T, const std::string &Path) {
    const pb::Descriptor *D = M.GetDescriptor();
    const pb::Reflection *R = M.GetReflection();
    for (int FI = 0; FI < D->field_count(); ++FI) {
      const pb::FieldDescriptor *F = D->field(FI);
      std::string Here = Path + F->name();
      if (!F->is_repeated()) {
        if (std::string E = comparePosition(Slow, T, F, -1, Here); !E.empty())
          return E;
        if (F->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
          if (std::string E = compareNested(
                  Slow, T, F, -1,
                  Here, [&]() -> auto & { return R->GetMessage(M, F); });
              !E.empty())
            return E;
        continue;
      }
      // A list (`f: []` too) is one position: there may be more positions
      // than elements; ask one past the most either parse could have.
      int Size = R->FieldSize(M, F);
      int Asked = std::max(Size, count(T, F)) + 1;
      for (int I = 0; I <= Asked; ++I) {
        std::string At = Here + "[" + std::to_string(I) + "]";
        if (std::string E = comparePosition(Slow, T, F, I, At); !E.empty())
          return E;
        if (F->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
          continue;
        if (I >= Size) {
          if (Fast.nested(T, F, I) != TextLocations::NoTree ||
              (Slow && Slow->GetTreeForNested(F, I)))
            return At + ": a nested position tree without a message";
          continue;
        }
        if (std::string E = compareNested(
                Slow, T, F, I,
                At, [&]() -> auto & { return R->GetRepeatedMessage(M, F, I); });
            !E.empty())
          return E;
      }
    }
    return "";
  }

private:
  int count(TextLocations::TreeId T, const pb::FieldDescriptor *F) const {
    int N = 0;
    while (Fast.location(T, F, N).first >= 0)
      ++N;
    return N;
  }

  std::string comparePosition(const ParseInfoTree *Slow,
                              TextLocations::TreeId T,
                              const pb::FieldDescriptor *F, int Index,
                              const std::string &Path) {
    pb::TextFormat::ParseLocation S;
    if (Slow)
      S = Slow->GetLocation(F, Index);
    auto [Line, Col] = Fast.location(T, F, Index);
    if (S.line == Line && S.column == Col)
      return "";
    return (Twine(Path) + ": protobuf's parser has " + Twine(S.line) + ":" +
            Twine(S.column) + ", the fast path " + Twine(Line) + ":" +
            Twine(Col) + " (0-based)")
        .str();
  }

  template <typename GetMessage>
  std::string compareNested(const ParseInfoTree *Slow, TextLocations::TreeId T,
                            const pb::FieldDescriptor *F, int Index,
                            const std::string &Path, GetMessage Get) {
    const ParseInfoTree *SlowChild =
        Slow ? Slow->GetTreeForNested(F, Index) : nullptr;
    TextLocations::TreeId FastChild = Fast.nested(T, F, Index);
    if (!SlowChild != (FastChild == TextLocations::NoTree))
      return Path + ": a nested position tree in one parse only";
    if (!SlowChild)
      return "";
    return compare(Get(), SlowChild, FastChild, Path + ".");
  }

  const TextLocations &Fast;
};
} // namespace

std::string mdplan::compareTextParsers(StringRef Text,
                                       const pb::Message &Prototype,
                                       int MaxNesting, bool *FastAccepted) {
  std::unique_ptr<pb::Message> Fast(Prototype.New());
  std::unique_ptr<pb::Message> Slow(Prototype.New());
  TextLocations Locs;
  bool Accepted = parseTextFast(Text, *Fast, MaxNesting, Locs);
  if (FastAccepted)
    *FastAccepted = Accepted;
  if (!Accepted)
    return "";
  pb::TextFormat::Parser P;
  P.SetRecursionLimit(MaxNesting);
  Silent Errors;
  P.RecordErrorsTo(&Errors);
  ParseInfoTree Tree;
  P.WriteLocationsTo(&Tree);
  if (Text.size() > size_t(std::numeric_limits<int>::max()))
    return "";
  pb::io::ArrayInputStream In(Text.data(), int(Text.size()));
  if (!P.Parse(&In, Slow.get()))
    return "the fast path read text that protobuf's parser rejects";
  std::string Differences;
  pb::util::MessageDifferencer Differ;
  Differ.ReportDifferencesToString(&Differences);
  if (!Differ.Compare(*Slow, *Fast))
    return "the messages differ: " + Differences;
  return PositionCompare(Locs).compare(*Slow, &Tree, 0, "");
}
