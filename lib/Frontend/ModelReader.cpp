//===- ModelReader.cpp - Reading graph descriptions -----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Deploy/DeviceFunctions.h"
#include "mdplan/IR/Builder.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/IR/Verifier.h"

#include "ModelDesc.pb.h"
#include "TextParser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/thread.h"

#include <cmath>
#include <deque>
#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <tuple>

using namespace llvm;
using namespace mdplan;
namespace pb = google::protobuf;

namespace {

using ParseInfoTree = pb::TextFormat::ParseInfoTree;

/// How deeply messages (scopes, mostly) may nest, in text and binary files.
/// Without a limit, protobuf's recursive-descent text parser (and our walk
/// over scopes) overflows the stack on deep inputs; protobuf's default for
/// binary input (100) is too low for real scope nests.
constexpr int MaxNesting = 1000;

/// Collects the first syntax error of the protobuf text parser.
/// "A, B or C": the values of \p D to suggest (not DT_INVALID, which only
/// stands for "unset").
static std::string enumValueNames(const pb::EnumDescriptor *D) {
  std::vector<StringRef> Valid;
  for (int I = 0, N = D->value_count(); I < N; ++I)
    if (!StringRef(D->value(I)->name()).endswith("INVALID"))
      Valid.push_back(D->value(I)->name());
  std::string Names;
  for (size_t I = 0; I < Valid.size(); ++I)
    Names += (I == 0                  ? ""
              : I + 1 == Valid.size() ? " or "
                                      : ", ") +
             Valid[I].str();
  return Names;
}

/// The enum of field \p Field of the messages reachable from \p Root: the
/// one such enum, or the one of the message that field \p Enclosing (the
/// field the value is written in, `optimizer`) holds; null when unknown.
static const pb::EnumDescriptor *findEnumField(const pb::Descriptor *Root,
                                               StringRef Field,
                                               StringRef Enclosing) {
  std::vector<const pb::Descriptor *> Todo{Root}, Seen;
  const pb::EnumDescriptor *Only = nullptr, *InEnclosing = nullptr;
  bool Several = false;
  while (!Todo.empty()) {
    const pb::Descriptor *D = Todo.back();
    Todo.pop_back();
    if (is_contained(Seen, D))
      continue;
    Seen.push_back(D);
    for (int I = 0; I < D->field_count(); ++I) {
      const pb::FieldDescriptor *F = D->field(I);
      if (F->message_type()) {
        Todo.push_back(F->message_type());
        if (F->name() == Enclosing)
          if (const pb::FieldDescriptor *E =
                  F->message_type()->FindFieldByName(Field.str()))
            InEnclosing = E->enum_type();
      }
      if (F->name() == Field && F->enum_type()) {
        Several |= Only && Only != F->enum_type();
        Only = F->enum_type();
      }
    }
  }
  return Several ? InEnclosing : Only;
}

class SyntaxErrors : public pb::io::ErrorCollector {
public:
  SyntaxErrors(StringRef File, StringRef Text, const pb::Descriptor *Root)
      : File(File), Text(Text), Root(Root) {}

  void AddError(int Line, pb::io::ColumnNumber Col,
                const std::string &Message) override {
    if (Err)
      return;
    SourceLoc Loc{File, unsigned(Line + 1), unsigned(Col + 1)};
    if (StringRef(Message).startswith("Message is too deep")) {
      Err = makeError(Loc, "messages nested too deeply (more than " +
                               Twine(MaxNesting) + " levels)");
      return;
    }
    // `Unknown enumeration value of "RMSPROP" for field "kind".`, at the
    // token after the value: at the value instead, naming the values.
    StringRef Rest = Message;
    if (Rest.consume_front("Unknown enumeration value of \"")) {
      auto [Value, Tail] = Rest.split('"');
      StringRef Field = Tail;
      if (Field.consume_front(" for field \"")) {
        Field = Field.split('"').first;
        Err = unknownEnumValue(Value, Field, Line, Col, Loc);
        return;
      }
    }
    std::string Msg = Message;
    // Protobuf's messages are sentences; diagnostics are not.
    if (!Msg.empty() && Msg.back() == '.')
      Msg.pop_back();
    if (!Msg.empty())
      Msg[0] = toLower(Msg[0]);
    Err = makeError(Loc, "syntax error: " + Msg);
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string &) override {}

  ~SyntaxErrors() override { consumeError(std::move(Err)); }

  Error take() { return Err ? std::move(Err) : Error::success(); }

private:
  /// Which bytes of the text are outside comments (`#` to the end of the
  /// line) and quoted strings.
  std::vector<bool> codeMask() const {
    std::vector<bool> Code(Text.size(), true);
    char Quote = 0;
    bool Comment = false;
    for (size_t I = 0; I < Text.size(); ++I) {
      char Ch = Text[I];
      if (Comment || Quote)
        Code[I] = false;
      if (Ch == '\n') {
        Comment = false;
        Quote = 0;
      } else if (Comment) {
      } else if (Quote) {
        if (Ch == '\\' && I + 1 < Text.size() && Text[I + 1] != '\n')
          Code[++I] = false;
        else if (Ch == Quote)
          Quote = 0;
      } else if (Ch == '#') {
        Comment = true;
        Code[I] = false;
      } else if (Ch == '"' || Ch == '\'') {
        Quote = Ch;
        Code[I] = false;
      }
    }
    return Code;
  }

  /// The error for enum value \p Value of field \p Field, reported at
  /// (\p Line, \p Col) (0-based, tabs to multiples of 8, as protobuf
  /// counts): located at the last whole word \p Value before that point
  /// outside comments and strings.
  Error unknownEnumValue(StringRef Value, StringRef Field, int Line, int Col,
                         SourceLoc Loc) {
    size_t At = StringRef::npos;
    unsigned AtLine = 0, AtCol = 0;
    int L = 0, C = 0;
    auto IsWord = [](char Ch) { return isAlnum(Ch) || Ch == '_'; };
    const std::vector<bool> Code = codeMask();
    for (size_t I = 0; I < Text.size() && (L < Line || (L == Line && C < Col));
         ++I) {
      if (Code[I] && Text.substr(I).startswith(Value) &&
          (I == 0 || !IsWord(Text[I - 1])) &&
          (I + Value.size() == Text.size() ||
           !IsWord(Text[I + Value.size()]))) {
        At = I;
        AtLine = unsigned(L + 1);
        AtCol = unsigned(C + 1);
      }
      if (Text[I] == '\n') {
        ++L;
        C = 0;
      } else {
        C = Text[I] == '\t' ? C + 8 - C % 8 : C + 1;
      }
    }
    // The field the value is written in: the name before the innermost
    // '{' or '<' left open before it.
    StringRef Enclosing;
    if (At != StringRef::npos) {
      Loc = SourceLoc{File, AtLine, AtCol};
      int Depth = 0;
      for (size_t I = At; I-- > 0;) {
        char Ch = Text[I];
        if (!Code[I])
          continue;
        if (Ch == '}' || Ch == '>') {
          ++Depth;
        } else if ((Ch == '{' || Ch == '<') && Depth-- == 0) {
          StringRef Before = Text.substr(0, I).rtrim().rtrim(':').rtrim();
          size_t Start = Before.size();
          while (Start > 0 && IsWord(Before[Start - 1]))
            --Start;
          Enclosing = Before.substr(Start);
          break;
        }
      }
    }
    std::string Msg =
        ("unknown value '" + Value + "' for field '" + Field + "'").str();
    if (const pb::EnumDescriptor *E = findEnumField(Root, Field, Enclosing))
      Msg += " (use " + enumValueNames(E) + ")";
    return makeError(Loc, Msg);
  }

  StringRef File;
  StringRef Text;
  const pb::Descriptor *Root;
  Error Err = Error::success();
};

/// Where fields are: the fast path's positions or protobuf's ParseInfoTree
/// for text files, nothing for binary ones.
class Locator {
public:
  Locator(StringRef File, const ParseInfoTree *T)
      : File(File), T(T), Fallback{File, 0, 0} {}
  Locator(StringRef File, const TextLocations *Positions,
          TextLocations::TreeId Id)
      : File(File), Fast(Positions), Tree(Id), Fallback{File, 0, 0} {}

  /// The location of field \p Name (index -1 for singular fields).
  template <typename MsgT>
  SourceLoc at(const MsgT &M, StringRef Name, int Index = -1) const {
    return atField(field(M, Name), Index);
  }

  /// The locator of nested message field \p Name at \p Index.
  template <typename MsgT>
  Locator nested(const MsgT &M, StringRef Name, int Index = -1) const {
    return nestedField(field(M, Name), Index);
  }

  /// The same, for a field known by its descriptor.
  SourceLoc at(const pb::FieldDescriptor *F, int Index) const {
    return atField(F, Index);
  }
  Locator nested(const pb::FieldDescriptor *F, int Index) const {
    return nestedField(F, Index);
  }

  bool hasPositions() const { return T != nullptr || Fast != nullptr; }
  /// Whether the text wrote field \p Name of \p M (a proto3 scalar that
  /// reads 0 may have been written so); false for a binary file.
  template <typename MsgT> bool written(const MsgT &M, StringRef Name) const {
    SourceLoc L = at(M, Name);
    return L.Line != Fallback.Line || L.Col != Fallback.Col;
  }
  SourceLoc fallback() const { return Fallback; }

private:
  SourceLoc atField(const pb::FieldDescriptor *F, int Index) const {
    int Line = -1, Col = -1;
    if (Fast) {
      std::tie(Line, Col) = Fast->location(Tree, F, Index);
    } else if (T) {
      auto L = T->GetLocation(F, Index);
      Line = L.line;
      Col = L.column;
    }
    if (Line < 0)
      return Fallback;
    return SourceLoc{File, unsigned(Line + 1), unsigned(Col + 1)};
  }

  Locator nestedField(const pb::FieldDescriptor *F, int Index) const {
    Locator R(File, nullptr);
    R.Fallback = atField(F, Index);
    if (Fast) {
      R.Tree = Fast->nested(Tree, F, Index);
      if (R.Tree != TextLocations::NoTree)
        R.Fast = Fast;
    } else if (T) {
      R.T = T->GetTreeForNested(F, Index);
    }
    return R;
  }

  /// The fields of one message type by name.
  class FieldTable {
  public:
    explicit FieldTable(const pb::Descriptor *D) {
      for (int I = 0; I < D->field_count(); ++I)
        Fields.emplace_back(D->field(I)->name(), D->field(I));
    }
    const pb::FieldDescriptor *lookup(StringRef Name) const {
      for (const auto &[N, F] : Fields)
        if (N == Name)
          return F;
      llvm_unreachable("unknown field");
    }

  private:
    SmallVector<std::pair<StringRef, const pb::FieldDescriptor *>, 12> Fields;
  };

  /// Field \p Name of \p M's type. A model asks for the same few fields
  /// millions of times: a generated type's table is made once (a
  /// function-local static, immutable afterwards); a message known only
  /// as a Message goes through its descriptor and a per-thread cache.
  template <typename MsgT>
  static const pb::FieldDescriptor *field(const MsgT &M, StringRef Name) {
    if constexpr (std::is_same_v<MsgT, pb::Message>) {
      thread_local DenseMap<const pb::Descriptor *, std::unique_ptr<FieldTable>>
          Tables;
      const pb::Descriptor *D = M.GetDescriptor();
      std::unique_ptr<FieldTable> &Table = Tables[D];
      if (!Table)
        Table = std::make_unique<FieldTable>(D);
      return Table->lookup(Name);
    } else {
      static const FieldTable Table(MsgT::descriptor());
      return Table.lookup(Name);
    }
  }

  StringRef File;
  const ParseInfoTree *T = nullptr;
  const TextLocations *Fast = nullptr;
  TextLocations::TreeId Tree = 0;
  SourceLoc Fallback;
};

/// While alive, what protobuf logs (why a binary message is invalid: a
/// string that is not UTF-8) is kept, not printed on stderr beside the
/// error that follows. Protobuf's handler is global: one capture at a time
/// (the readers run on one thread).
class ProtobufLogCapture {
public:
  ProtobufLogCapture() : Old(pb::SetLogHandler(&handler)) { Current = this; }
  ~ProtobufLogCapture() {
    pb::SetLogHandler(Old);
    Current = nullptr;
  }
  /// The first sentence logged, lower-cased at its start.
  const std::string &first() const { return First; }

private:
  static void handler(pb::LogLevel, const char *, int, const std::string &M) {
    if (Current && Current->First.empty()) {
      // Its first sentence (the next is advice for protobuf's users).
      Current->First = StringRef(M).split(". ").first.rtrim(" .").str();
      if (!Current->First.empty())
        Current->First[0] = char(toLower(Current->First[0]));
    }
  }
  static inline ProtobufLogCapture *Current = nullptr;
  pb::LogHandler *Old;
  std::string First;
};

/// The offset of the first byte of \p S that does not start or continue a
/// valid UTF-8 sequence, or npos.
static size_t firstBadUtf8(const std::string &S) {
  const auto *B = reinterpret_cast<const UTF8 *>(S.data());
  const UTF8 *P = B, *End = B + S.size();
  while (P != End) {
    if (*P < 0x80) {
      ++P;
      continue;
    }
    unsigned Len = getNumBytesForUTF8(*P);
    if (Len > size_t(End - P) || !isLegalUTF8Sequence(P, P + Len))
      return size_t(P - B);
    P += Len;
  }
  return StringRef::npos;
}

/// The first string of \p M (in the file's order) that is not UTF-8, which
/// protobuf's text parser accepts and its binary parser refuses; none of
/// mdplan's strings may hold such bytes.
static void findBadUtf8(const pb::Message &M, const Locator &L,
                        std::optional<std::pair<SourceLoc, std::string>> &Bad) {
  const pb::Reflection *R = M.GetReflection();
  std::vector<const pb::FieldDescriptor *> Fields;
  R->ListFields(M, &Fields);
  for (const pb::FieldDescriptor *F : Fields) {
    bool Rep = F->is_repeated();
    for (int I = 0, N = Rep ? R->FieldSize(M, F) : 1; I != N; ++I) {
      int Index = Rep ? I : -1;
      if (F->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        findBadUtf8(Rep ? R->GetRepeatedMessage(M, F, I) : R->GetMessage(M, F),
                    L.nested(F, Index), Bad);
        continue;
      }
      if (F->type() != pb::FieldDescriptor::TYPE_STRING)
        continue;
      std::string Scratch;
      const std::string &S =
          Rep ? R->GetRepeatedStringReference(M, F, I, &Scratch)
              : R->GetStringReference(M, F, &Scratch);
      size_t Offset = firstBadUtf8(S);
      if (Offset == StringRef::npos)
        continue;
      SourceLoc Loc = L.at(F, Index);
      if (Bad && std::make_pair(Bad->first.Line, Bad->first.Col) <=
                     std::make_pair(Loc.Line, Loc.Col))
        continue;
      Bad.emplace(Loc, "field '" + F->name() +
                           "' holds a string that is not "
                           "valid UTF-8 (byte 0x" +
                           utohexstr(uint8_t(S[Offset]), /*LowerCase=*/true) +
                           " at offset " + std::to_string(Offset) +
                           "); strings must be UTF-8");
    }
  }
}

/// A text file's message: read by the fast path when it can, by protobuf's
/// parser otherwise (which also reports every syntax error).
class TextParse {
public:
  /// \p BinaryHint: what to say of a file that holds binary data.
  Error parse(StringRef Contents, StringRef File, pb::Message &M,
              StringRef BinaryHint = "") {
    // Protobuf's tokenizer takes ASCII outside strings: it said "syntax
    // error: interpreting non ascii codepoint 239" at 1:1.
    if (Contents.startswith("\xEF\xBB\xBF"))
      return makeError(SourceLoc{File, 1, 1},
                       "the file starts with a UTF-8 byte order mark, which "
                       "the text format does not allow; save it without one");
    if (parseTextFast(Contents, M, MaxNesting, Fast)) {
      UsedFast = true;
      return Error::success();
    }
    if (Contents.size() > size_t(INT32_MAX))
      return makeError(SourceLoc{File, 0, 0},
                       "the file is " + Twine(uint64_t(Contents.size())) +
                           " bytes, more than protobuf's text parser reads "
                           "(2 GiB); larger files must keep to the plain "
                           "form mdplan reads itself (docs/GraphFormat.md)");
    // Binary data: protobuf's first syntax error, with the bytes echoed,
    // said nothing of it.
    if (size_t Nul = Contents.find('\0'); Nul != StringRef::npos) {
      if (Contents.size() >= 8 && Contents.substr(4, 4) == "MDPL")
        return makeError(SourceLoc{File, 0, 0},
                         "the file is a plan (mdplan writes plans and mdrun "
                         "runs them), not the text format");
      return makeError(SourceLoc{File, 0, 0},
                       "the file holds binary data (a NUL byte at offset " +
                           Twine(uint64_t(Nul)) + "), not the text format" +
                           (BinaryHint.empty() ? "" : " ") + BinaryHint);
    }
    Fast = TextLocations();
    M.Clear();
    pb::TextFormat::Parser P;
    P.SetRecursionLimit(MaxNesting);
    SyntaxErrors Errs(File, Contents, M.GetDescriptor());
    P.RecordErrorsTo(&Errs);
    P.WriteLocationsTo(&Slow);
    pb::io::ArrayInputStream In(Contents.data(), int(Contents.size()));
    if (P.Parse(&In, &M)) {
      // The fast path takes ASCII strings only: its messages need no check.
      std::optional<std::pair<SourceLoc, std::string>> Bad;
      findBadUtf8(M, locator(File), Bad);
      if (Bad)
        return makeError(Bad->first, Bad->second);
      return Error::success();
    }
    if (Error E = Errs.take())
      return E;
    return makeError(SourceLoc{File, 0, 0}, "syntax error");
  }

  Locator locator(StringRef File) const {
    return UsedFast ? Locator(File, &Fast, 0) : Locator(File, &Slow);
  }

private:
  TextLocations Fast;
  ParseInfoTree Slow;
  bool UsedFast = false;
};

/// Scope name prefixes for relative lookup, innermost first.
using Prefixes = SmallVector<std::string, 4>;

/// A node waiting for its inputs to be resolved.
struct PendingNode {
  Node *N;
  const desc::Node *P;
  Locator L;
  /// Scope name prefixes for relative lookup, innermost first (owned by
  /// the builder, shared by the nodes of a scope).
  const Prefixes *Scopes;
};

class ModelBuilder {
public:
  ModelBuilder(Graph &G, StringRef File) : G(G), File(File) {}

  Error build(const desc::Model &M, const Locator &L);

private:
  /// \p Owner: the Model or the Scope holding \p Nodes and \p Scopes.
  template <typename OwnerT>
  Error addContainer(const pb::RepeatedPtrField<desc::Node> &Nodes,
                     const pb::RepeatedPtrField<desc::Scope> &Scopes,
                     const OwnerT &Owner, const Locator &L,
                     const std::string &Prefix, const Prefixes &Lookup,
                     const DeviceStack *Stack, NodeRole Role);
  Error addScope(const desc::Scope &S, const Locator &L,
                 const std::string &Prefix, const Prefixes &Scopes,
                 const DeviceStack *Stack, NodeRole Role);
  Error addNode(const desc::Node &P, const Locator &L,
                const std::string &Prefix, const Prefixes &Scopes,
                const DeviceStack *Stack, NodeRole Role);
  Error resolve(PendingNode &PN);
  Error addRegularizer(Node *Var, double Scale, SourceLoc Loc);
  Node *lookupRelative(StringRef Name, ArrayRef<std::string> Scopes) const;
  Error collection(const pb::RepeatedPtrField<std::string> &Names,
                   const desc::Model &M, StringRef Field, const Locator &L,
                   Collection C);

  Graph &G;
  StringRef File;
  std::vector<PendingNode> Pending;
  /// Every scope's prefix list, for the pending nodes (a deque: pushing
  /// keeps the others in place).
  std::deque<Prefixes> PrefixLists{Prefixes()};
  /// The variables' regularizers: variable, scale, the `regularizer`
  /// field.
  std::vector<std::tuple<Node *, double, SourceLoc>> Regularizers;
};

} // namespace

static bool isValidName(StringRef N) {
  if (N.empty() || N.front() == '/' || N.back() == '/' || N.contains("//"))
    return false;
  if (!isAlnum(N[0]) && N[0] != '.' && N[0] != '_')
    return false;
  for (char C : N)
    if (!isAlnum(C) && C != '_' && C != '.' && C != '-' && C != '/')
      return false;
  return true;
}

/// Proto3 enums are open: both parsers keep a number that no value of the
/// enum names. \p V must be one of \p D's values.
static Error checkEnum(int V, const pb::EnumDescriptor *D, SourceLoc Loc,
                       StringRef What) {
  if (D->FindValueByNumber(V))
    return Error::success();
  return makeError(Loc, "unknown " + What + " " + Twine(V) + " (use " +
                            enumValueNames(D) + ")");
}

/// Converts one attribute of the format to an Attr.
static Expected<Attr> convertAttr(const desc::Attr &A, const Locator &L,
                                  const pb::Message &Owner, StringRef Field,
                                  int Index) {
  SourceLoc Loc = L.at(Owner, Field, Index);
  int Count = A.has_i() + A.has_f() + A.has_b() + A.has_s() + A.has_type() +
              (A.ints_size() > 0) + (A.floats_size() > 0) +
              (A.strings_size() > 0) + A.has_shape();
  if (A.name().empty())
    return makeError(Loc, "attribute without a name");
  if (Count == 0)
    return makeError(Loc, "attribute '" + A.name() + "' has no value");
  if (Count > 1)
    return makeError(Loc,
                     "attribute '" + A.name() + "' has more than one value");
  if (A.has_i())
    return Attr(int64_t(A.i()));
  if (A.has_f())
    return Attr(A.f());
  if (A.has_b())
    return Attr(A.b());
  if (A.has_s())
    return Attr(A.s());
  if (A.has_type()) {
    if (Error E = checkEnum(A.type(), desc::DataType_descriptor(), Loc, "type"))
      return std::move(E);
    if (A.type() == desc::DT_INVALID)
      return makeError(Loc, "attribute '" + A.name() + "' has no valid type");
    return Attr(DType(A.type()));
  }
  if (A.ints_size())
    return Attr(std::vector<int64_t>(A.ints().begin(), A.ints().end()));
  if (A.floats_size())
    return Attr(std::vector<double>(A.floats().begin(), A.floats().end()));
  if (A.strings_size())
    return Attr(
        std::vector<std::string>(A.strings().begin(), A.strings().end()));
  return Attr(
      Shape(ArrayRef<int64_t>(A.shape().dim().data(), A.shape().dim_size())));
}

static StringRef initializerName(desc::Initializer::Kind K) {
  switch (K) {
  case desc::Initializer::GLOROT_UNIFORM:
    return "glorot_uniform";
  case desc::Initializer::ZEROS:
    return "zeros";
  case desc::Initializer::ONES:
    return "ones";
  case desc::Initializer::CONSTANT:
    return "constant";
  case desc::Initializer::NORMAL:
    return "normal";
  case desc::Initializer::TRUNCATED_NORMAL:
    return "truncated_normal";
  case desc::Initializer::UNIFORM:
    return "uniform";
  case desc::Initializer::GLOROT_NORMAL:
    return "glorot_normal";
  case desc::Initializer::HE_NORMAL:
    return "he_normal";
  default:
    return "glorot_uniform";
  }
}

/// Checks the shape of a `variable` or `data` block of node \p Name.
static Error checkDims(const pb::RepeatedField<int64_t> &Dims, SourceLoc Loc,
                       StringRef Name) {
  Shape S(ArrayRef<int64_t>(Dims.data(), Dims.size()));
  for (int64_t D : Dims)
    if (D <= 0)
      return makeError(Loc, "dimensions must be positive, got " +
                                writtenDims(S.dims()));
  std::string Why = S.whyTooLarge();
  if (!Why.empty())
    return makeError(Loc, "node '" + Name + "': shape " + S.str() +
                              " is too large: " + Why);
  return Error::success();
}

/// Sets attribute \p Name of \p N from the `variable` or `data` sugar
/// (\p Sugar). An attribute written as an `attr` keeps its value when the
/// sugar only has a default for it (\p Given false); a value given both
/// ways must be the same.
static Error setSugarAttr(Node &N, StringRef Sugar, StringRef Name, Attr Value,
                          bool Given, SourceLoc Loc) {
  const Attr *Old = N.attrs().get(Name);
  if (!Old) {
    N.attrs().set(Name, std::move(Value));
    return Error::success();
  }
  if (!Given || *Old == Value)
    return Error::success();
  std::string OldS, NewS;
  raw_string_ostream OldOS(OldS), NewOS(NewS);
  Old->print(OldOS);
  Value.print(NewOS);
  OldOS.flush();
  NewOS.flush();
  return makeError(Loc, "node '" + N.getName() +
                            "': conflicting values for "
                            "attribute '" +
                            Name + "': " + OldS + " (attr) and " + NewS +
                            " ('" + Sugar + "')");
}

Error ModelBuilder::addNode(const desc::Node &P, const Locator &L,
                            const std::string &Prefix, const Prefixes &Scopes,
                            const DeviceStack *Stack, NodeRole Role) {
  SourceLoc NameLoc = P.name().empty() ? L.fallback() : L.at(P, "name");
  if (P.name().empty())
    return makeError(NameLoc, "node without a name");
  std::string Full = Prefix + P.name();
  if (!isValidName(Full))
    return makeError(NameLoc, "invalid node name '" + Full +
                                  "': use letters, digits, '_', '.', '-' "
                                  "and '/' between scopes");
  if (Node *Old = G.lookup(Full))
    return makeError(
        NameLoc, "duplicate node name '" + Full + "'" +
                     (Old->getLoc().Line
                          ? " (first defined at " + Old->getLoc().str() + ")"
                          : std::string()));
  if (P.op().empty())
    return makeError(NameLoc, "node '" + Full + "' has no op");
  const OpDef *Op = OpRegistry::get().lookup(P.op());
  if (!Op) {
    std::string Hint;
    unsigned Best = 3;
    for (const OpDef &D : OpRegistry::get().ops()) {
      unsigned Dist = StringRef(P.op()).edit_distance(D.Name, true, Best);
      if (Dist < Best) {
        Best = Dist;
        Hint = ("; did you mean '" + D.Name + "'?").str();
      }
    }
    return makeError(L.at(P, "op"), "unknown op '" + P.op() + "'" + Hint);
  }

  Node *N = G.createNode(Full, *Op);
  N->setLoc(NameLoc);
  N->setStack(Stack);
  if (Op->isVariable())
    Role = NodeRole::Variable;
  else if (Op->is(OF_Input))
    Role = NodeRole::Input;
  else if (Op->is(OF_Summary))
    Role = NodeRole::Summary;
  N->setRole(Role);

  for (int I = 0, E = P.attr_size(); I != E; ++I) {
    const desc::Attr &A = P.attr(I);
    auto V = convertAttr(A, L, P, "attr", I);
    if (!V)
      return V.takeError();
    if (N->attrs().has(A.name()))
      return makeError(L.at(P, "attr", I),
                       "attribute '" + A.name() + "' given twice");
    N->attrs().set(A.name(), std::move(*V));
  }

  if (P.has_variable()) {
    if (!Op->isVariable())
      return makeError(L.at(P, "variable"),
                       "'variable' is only allowed on Variable nodes");
    const desc::VariableDef &V = P.variable();
    Locator VL = L.nested(P, "variable");
    if (Error E = checkEnum(V.dtype(), desc::DataType_descriptor(),
                            VL.at(V, "dtype"), "dtype"))
      return E;
    if (Error E = checkEnum(
            V.initializer().kind(), desc::Initializer_Kind_descriptor(),
            VL.nested(V, "initializer").at(V.initializer(), "kind"),
            "initializer kind"))
      return E;
    DType T = V.dtype() == desc::DT_INVALID ? DType::Float32 : DType(V.dtype());
    if (Error E = checkDims(V.shape(), VL.at(V, "shape", 0), Full))
      return E;
    const desc::Initializer &I = V.initializer();
    Locator IL = VL.nested(V, "initializer");
    // Explicit values must agree with an `attr` of the same name; defaults
    // of the sugar do not replace one.
    auto Set = [&](StringRef Name, Attr Value, bool Given, SourceLoc Loc) {
      return setSugarAttr(*N, "variable", Name, std::move(Value), Given, Loc);
    };
    if (Error E = Set(
            "shape", Shape(ArrayRef<int64_t>(V.shape().data(), V.shape_size())),
            V.shape_size() > 0, VL.at(V, "shape", 0)))
      return E;
    if (Error E =
            Set("dtype", T, V.dtype() != desc::DT_INVALID, VL.at(V, "dtype")))
      return E;
    if (Error E = Set("initializer", initializerName(I.kind()),
                      V.has_initializer(), VL.at(V, "initializer")))
      return E;
    if (I.kind() == desc::Initializer::CONSTANT)
      if (Error E = Set("init_value", I.value(), true, IL.at(I, "value")))
        return E;
    if (I.mean() != 0)
      if (Error E = Set("init_mean", I.mean(), true, IL.at(I, "mean")))
        return E;
    if (I.has_stddev())
      if (Error E = Set("init_stddev", I.stddev(), true, IL.at(I, "stddev")))
        return E;
    if (I.has_minval())
      if (Error E = Set("init_min", I.minval(), true, IL.at(I, "minval")))
        return E;
    if (I.has_maxval())
      if (Error E = Set("init_max", I.maxval(), true, IL.at(I, "maxval")))
        return E;
    if (I.seed())
      if (Error E = Set("seed", int64_t(I.seed()), true, IL.at(I, "seed")))
        return E;
    if (V.has_trainable())
      if (Error E =
              Set("trainable", V.trainable(), true, VL.at(V, "trainable")))
        return E;
    if (V.has_regularizer()) {
      double L2 = V.regularizer().l2();
      if (!std::isfinite(L2))
        return makeError(VL.at(V, "regularizer"),
                         "l2 regularization scale must be a finite number, "
                         "got " +
                             Twine(std::isnan(L2) ? "nan" : "inf"));
      if (L2 < 0)
        return makeError(VL.at(V, "regularizer"),
                         "l2 regularization scale must not be negative");
      if (V.regularizer().l2() > 0)
        Regularizers.emplace_back(N, V.regularizer().l2(),
                                  VL.at(V, "regularizer"));
    }
  }

  if (P.has_data()) {
    if (!Op->is(OF_Input))
      return makeError(L.at(P, "data"),
                       "'data' is only allowed on Input nodes");
    const desc::DataDef &D = P.data();
    Locator DL = L.nested(P, "data");
    if (Error E = checkEnum(D.dtype(), desc::DataType_descriptor(),
                            DL.at(D, "dtype"), "dtype"))
      return E;
    DType T = D.dtype() == desc::DT_INVALID ? DType::Float32 : DType(D.dtype());
    if (Error E = checkDims(D.shape(), DL.at(D, "shape", 0), Full))
      return E;
    if (Error E = setSugarAttr(
            *N, "data", "shape",
            Shape(ArrayRef<int64_t>(D.shape().data(), D.shape_size())),
            D.shape_size() > 0, DL.at(D, "shape", 0)))
      return E;
    if (Error E =
            setSugarAttr(*N, "data", "dtype", T, D.dtype() != desc::DT_INVALID,
                         DL.at(D, "dtype")))
      return E;
    if (!D.feature().empty())
      if (Error E = setSugarAttr(*N, "data", "feature", D.feature(), true,
                                 DL.at(D, "feature")))
        return E;
  }

  if (!P.device().empty()) {
    auto D = DeviceSpec::parse(P.device());
    if (!D)
      return makeError(L.at(P, "device"),
                       "invalid device: " + errorMessage(D.takeError()));
    N->setRequestedDevice(*D);
  }
  Pending.push_back(PendingNode{N, &P, L, &Scopes});
  return Error::success();
}

Node *ModelBuilder::lookupRelative(StringRef Name,
                                   ArrayRef<std::string> Scopes) const {
  SmallString<128> Full;
  for (const std::string &P : Scopes) {
    Full = P;
    Full += Name;
    if (Node *N = G.lookup(Full))
      return N;
  }
  return G.lookup(Name);
}

Error ModelBuilder::resolve(PendingNode &PN) {
  Node *N = PN.N;
  const desc::Node &P = *PN.P;
  bool SawControl = false;
  for (int I = 0, E = P.input_size(); I != E; ++I) {
    StringRef In = P.input(I);
    // Only errors need the location.
    auto Loc = [&] { return PN.L.at(P, "input", I); };
    bool Control = In.consume_front("^");
    unsigned Index = 0;
    StringRef Name = In;
    size_t Colon = In.rfind(':');
    if (!Control && Colon != StringRef::npos) {
      Name = In.substr(0, Colon);
      if (In.substr(Colon + 1).getAsInteger(10, Index))
        return makeError(Loc(), "invalid input '" + P.input(I) +
                                    "': expected 'node', 'node:N' or '^node'");
    }
    if (Name.empty())
      return makeError(Loc(), "invalid input '" + P.input(I) + "'");
    // A control input waits for a node, not for one of its outputs (it
    // looked for a node named 'x:0').
    if (Control && Colon != StringRef::npos &&
        !lookupRelative(Name, *PN.Scopes))
      return makeError(Loc(), "invalid input '" + P.input(I) +
                                  "': a control input names a node, "
                                  "'^node', not an output");
    Node *Src = lookupRelative(Name, *PN.Scopes);
    if (!Src)
      return makeError(Loc(), "node '" + N->getName() + "' reads '" + Name +
                                  "', which does not exist");
    if (Control) {
      SawControl = true;
      N->addControlInput(Src);
      continue;
    }
    if (SawControl)
      return makeError(Loc(), "data input '" + P.input(I) +
                                  "' follows a control input");
    N->addInput(TensorRef(Src, Index));
  }
  if (!P.colocate_with().empty()) {
    Node *C = lookupRelative(P.colocate_with(), *PN.Scopes);
    if (!C)
      return makeError(PN.L.at(P, "colocate_with"),
                       "node '" + N->getName() + "' is colocated with '" +
                           P.colocate_with() + "', which does not exist");
    if (C == N)
      return makeError(PN.L.at(P, "colocate_with"),
                       "node '" + N->getName() + "' is colocated with itself");
    N->setColocateWith(C);
  }
  return Error::success();
}

Error ModelBuilder::addScope(const desc::Scope &S, const Locator &L,
                             const std::string &Prefix, const Prefixes &Scopes,
                             const DeviceStack *Stack, NodeRole Role) {
  std::string NewPrefix = Prefix;
  const Prefixes *NewScopes = &Scopes;
  if (!S.name().empty()) {
    if (!isValidName(S.name()))
      return makeError(L.at(S, "name"),
                       "invalid scope name '" + S.name() + "'");
    NewPrefix += S.name() + "/";
    Prefixes &P = PrefixLists.emplace_back(Scopes);
    P.insert(P.begin(), NewPrefix);
    NewScopes = &P;
  }
  DeviceEntry E;
  E.Origin = "scope";
  bool HasEntry = true;
  switch (S.entry_case()) {
  case desc::Scope::kDevice: {
    E.Loc = L.at(S, "device");
    auto D = DeviceSpec::parse(S.device());
    if (!D)
      return makeError(E.Loc, "invalid device: " + errorMessage(D.takeError()));
    E.K = DeviceEntry::Kind::Spec;
    E.Spec = *D;
    break;
  }
  case desc::Scope::kFunction: {
    const desc::DeviceFunction &F = S.function();
    Locator FL = L.nested(S, "function");
    E.Loc = L.at(S, "function");
    E.K = DeviceEntry::Kind::Function;
    E.Instance = F.instance();
    AttrDict Args;
    for (int I = 0, N = F.arg_size(); I != N; ++I) {
      auto V = convertAttr(F.arg(I), FL, F, "arg", I);
      if (!V)
        return V.takeError();
      if (Args.has(F.arg(I).name()))
        return makeError(FL.at(F, "arg", I),
                         "argument '" + F.arg(I).name() + "' given twice");
      Args.set(F.arg(I).name(), std::move(*V));
    }
    auto Fn = createDeviceFunction(F.name(), Args);
    if (!Fn) {
      // Point at the argument at fault, or at the name of an unknown
      // function; a missing argument is the function's.
      SourceLoc Loc = is_contained(deviceFunctionNames(), StringRef(F.name()))
                          ? E.Loc
                          : FL.at(F, "name");
      std::string Message;
      Error Other =
          handleErrors(Fn.takeError(), [&](const DeviceFunctionArgError &AE) {
            for (int I = 0, N = F.arg_size(); I != N; ++I)
              if (F.arg(I).name() == AE.getArg()) {
                Loc = FL.at(F, "arg", I);
                break;
              }
            Message = AE.getMessage();
          });
      if (Other)
        Message = errorMessage(std::move(Other));
      return makeError(Loc, Message);
    }
    if (!E.Instance.empty()) {
      if (DeviceFunction *Old = G.lookupFunctionInstance(E.Instance)) {
        if (Old->getName() != (*Fn)->getName() ||
            !(Old->getArgs() == (*Fn)->getArgs()))
          return makeError(E.Loc, "device function instance '" + E.Instance +
                                      "' was defined with other arguments");
        E.Fn = Old;
        break;
      }
    }
    E.Fn = G.addFunction(std::move(*Fn));
    if (!E.Instance.empty())
      G.setFunctionInstance(E.Instance, E.Fn);
    break;
  }
  case desc::Scope::kClear:
    E.Loc = L.at(S, "clear");
    E.K = DeviceEntry::Kind::Clear;
    HasEntry = S.clear();
    break;
  case desc::Scope::kRole: {
    E.Loc = L.at(S, "role");
    E.K = DeviceEntry::Kind::Role;
    switch (S.role()) {
    case desc::INPUTS:
      E.RoleKind = NodeRole::Input;
      break;
    case desc::VARIABLES:
      E.RoleKind = NodeRole::Variable;
      break;
    case desc::OPTIMIZER:
      E.RoleKind = NodeRole::Optimizer;
      break;
    default:
      // A number no value has: the form of the format's other enums.
      if (!desc::Role_IsValid(S.role()))
        return makeError(E.Loc, "unknown role " + Twine(int(S.role())) +
                                    " (use INPUTS, VARIABLES or OPTIMIZER)");
      return makeError(E.Loc, "a role scope needs INPUTS, VARIABLES or "
                              "OPTIMIZER");
    }
    Role = E.RoleKind;
    break;
  }
  case desc::Scope::ENTRY_NOT_SET:
    HasEntry = false;
    break;
  }
  if (HasEntry)
    Stack = G.pushStack(Stack, G.createEntry(std::move(E)));
  return addContainer(S.node(), S.scope(), S, L, NewPrefix, *NewScopes, Stack,
                      Role);
}

template <typename OwnerT>
Error ModelBuilder::addContainer(
    const pb::RepeatedPtrField<desc::Node> &Nodes,
    const pb::RepeatedPtrField<desc::Scope> &Scopes, const OwnerT &Owner,
    const Locator &L, const std::string &Prefix, const Prefixes &Lookup,
    const DeviceStack *Stack, NodeRole Role) {
  // Text files: the order written. Binary files: nodes, then scopes.
  struct Item {
    unsigned Line, Col;
    bool IsScope;
    int Index;
  };
  SmallVector<Item, 16> Items;
  for (int I = 0, E = Nodes.size(); I != E; ++I) {
    SourceLoc Loc = L.at(Owner, "node", I);
    Items.push_back({Loc.Line, Loc.Col, false, I});
  }
  for (int I = 0, E = Scopes.size(); I != E; ++I) {
    SourceLoc Loc = L.at(Owner, "scope", I);
    Items.push_back({Loc.Line, Loc.Col, true, I});
  }
  // A text file has one position per occurrence of a field, and a list
  // (`node: [{...}, {...}]`) is one occurrence: its elements could be
  // neither ordered nor located.
  if (L.hasPositions())
    for (const char *Field : {"node", "scope"}) {
      int N = StringRef(Field) == "node" ? Nodes.size() : Scopes.size();
      if (N && L.at(Owner, Field, N - 1).Line == L.fallback().Line &&
          L.at(Owner, Field, N - 1).Col == L.fallback().Col)
        return makeError(L.at(Owner, Field, 0),
                         Twine("a list of ") + Field + "s ('" + Field +
                             ": [...]') is not supported: write each as '" +
                             Field +
                             " { ... }' (mdplan creates them in the "
                             "order written)");
    }
  if (L.hasPositions())
    std::stable_sort(Items.begin(), Items.end(),
                     [](const Item &A, const Item &B) {
                       return std::tie(A.Line, A.Col) < std::tie(B.Line, B.Col);
                     });
  for (const Item &It : Items) {
    if (It.IsScope) {
      if (Error E =
              addScope(Scopes[It.Index], L.nested(Owner, "scope", It.Index),
                       Prefix, Lookup, Stack, Role))
        return E;
    } else if (Error E =
                   addNode(Nodes[It.Index], L.nested(Owner, "node", It.Index),
                           Prefix, Lookup, Stack, Role)) {
      return E;
    }
  }
  return Error::success();
}

Error ModelBuilder::addRegularizer(Node *Var, double Scale, SourceLoc Loc) {
  GraphBuilder B(G);
  B.setPrefix((Var->getName() + "/Regularizer/l2_regularizer").str());
  B.setStack(Var->getStack());
  B.setRole(NodeRole::Variable);
  B.setLoc(Var->getLoc());
  if (Error E = inferNodeShapes(*Var))
    return E;
  DType T = Var->getOutputType(0).Elt;
  if (!isFloat(T))
    return makeError(Loc, "node '" + Var->getName() +
                              "': only float variables can be regularized");
  TensorRef ScaleT = B.constant(Scale, T, {}, "scale");
  TensorRef L2 = B.out(OpKind::L2Loss, {TensorRef(Var)});
  Node *Reg = B.createNamed(B.getPrefix(), OpKind::Mul, {L2, ScaleT});
  if (Error E = B.takeError())
    return E;
  for (Node *N : {ScaleT.N, L2.N, Reg})
    N->setColocateWith(Var);
  G.collection(Collection::RegularizationLosses).insert(Reg);
  return Error::success();
}

Error ModelBuilder::collection(const pb::RepeatedPtrField<std::string> &Names,
                               const desc::Model &M, StringRef Field,
                               const Locator &L, Collection C) {
  for (int I = 0, E = Names.size(); I != E; ++I) {
    Node *N = G.lookup(Names[I]);
    if (!N)
      return makeError(L.at(M, Field, I), Field + " '" + Names[I] +
                                              "' is not a node of the graph");
    if (C == Collection::Summaries && !N->getOp().is(OF_Summary))
      return makeError(L.at(M, Field, I), "summary '" + Names[I] + "' is a " +
                                              N->getOpName() +
                                              ", not a summary op");
    if ((C == Collection::Losses || C == Collection::RegularizationLosses) &&
        N->getNumOutputs() < 1)
      return makeError(L.at(M, Field, I),
                       Field + " '" + Names[I] + "' has no output");
    // The total loss adds both lists: one node in each is counted twice.
    // (A variable's `regularizer` adds its node before these lists.)
    Collection Other = C == Collection::Losses
                           ? Collection::RegularizationLosses
                           : Collection::Losses;
    if ((C == Collection::Losses || C == Collection::RegularizationLosses) &&
        G.collection(Other).count(N))
      return makeError(L.at(M, Field, I),
                       "'" + Names[I] +
                           "' is both a loss and a regularization_loss; the "
                           "total loss would count it twice");
    G.collection(C).insert(N);
  }
  return Error::success();
}

static OptimizerSettings convertOptimizer(const desc::Optimizer &O,
                                          OptimizerSettings S) {
  if (O.has_kind())
    S.K = OptimizerSettings::Kind(O.kind());
  if (O.has_learning_rate())
    S.LearningRate = O.learning_rate();
  if (O.has_momentum())
    S.Momentum = O.momentum();
  if (O.has_nesterov())
    S.Nesterov = O.nesterov();
  if (O.has_beta1())
    S.Beta1 = O.beta1();
  if (O.has_beta2())
    S.Beta2 = O.beta2();
  if (O.has_epsilon())
    S.Epsilon = O.epsilon();
  if (O.has_decay_steps())
    S.DecaySteps = O.decay_steps();
  if (O.has_decay_rate())
    S.DecayRate = O.decay_rate();
  if (O.has_rho())
    S.Rho = O.rho();
  if (O.has_initial_accumulator_value())
    S.InitialAccumulator = O.initial_accumulator_value();
  if (O.has_clip_gradient_norm())
    S.ClipNorm = O.clip_gradient_norm();
  if (O.has_clip_global_norm())
    S.ClipGlobalNorm = O.clip_global_norm();
  if (O.has_decay_type())
    S.DecayType = OptimizerSettings::Decay(O.decay_type());
  if (O.has_staircase())
    S.Staircase = O.staircase();
  if (O.has_centered())
    S.Centered = O.centered();
  if (O.has_end_learning_rate())
    S.EndLearningRate = O.end_learning_rate();
  if (O.has_power())
    S.Power = O.power();
  return S;
}

/// Calls \p F with the name of every numeric field \p O sets.
template <typename FnT>
static void forEachSetField(const desc::Optimizer &O, FnT F) {
  const pb::Reflection *R = O.GetReflection();
  for (StringRef Field : optimizerValueFields())
    if (R->HasField(O, O.GetDescriptor()->FindFieldByName(Field.str())))
      F(Field);
}

/// The optimizer kind and decay type are ones the format names.
static Error checkOptimizerKind(const desc::Optimizer &O, const Locator &L) {
  if (O.has_kind())
    if (Error E = checkEnum(O.kind(), desc::Optimizer_Kind_descriptor(),
                            L.at(O, "kind"), "optimizer kind"))
      return E;
  if (O.has_decay_type())
    return checkEnum(O.decay_type(), desc::Optimizer_DecayType_descriptor(),
                     L.at(O, "decay_type"), "decay type");
  return Error::success();
}

/// Checks the fields \p O sets (as converted into \p S), at their
/// locations.
static Error checkOptimizer(const desc::Optimizer &O,
                            const OptimizerSettings &S, const Locator &L) {
  if (Error E = checkOptimizerKind(O, L))
    return E;
  Error Err = Error::success();
  forEachSetField(O, [&](StringRef Field) {
    std::string Why = checkOptimizerField(S, Field);
    if (!Why.empty() && !Err)
      Err = makeError(L.at(O, Field), Why);
  });
  return Err;
}

Error ModelBuilder::build(const desc::Model &M, const Locator &L) {
  G.setName(M.name());
  G.setFileName(File);
  if (Error E = addContainer(M.node(), M.scope(), M, L, "", PrefixLists[0],
                             G.getRootStack(), NodeRole::Model))
    return E;
  for (PendingNode &PN : Pending)
    if (Error E = resolve(PN))
      return E;
  for (PendingNode &PN : Pending) {
    Node *N = PN.N;
    if (Error E = verifyAndCompleteAttrs(*N))
      return E;
    N->setNumOutputs(N->getOp().numOutputs(N->attrs(), N->getNumInputs()));
    // Ops that update a variable run where it lives.
    if (N->getOp().is(OF_UpdatesInput0) && !N->getColocateWith() &&
        N->getNumInputs() > 0)
      N->setColocateWith(N->getInput(0).N);
  }
  for (PendingNode &PN : Pending) {
    Node *N = PN.N;
    for (unsigned I = 0, E = N->getNumInputs(); I != E; ++I) {
      TensorRef In = N->getInput(I);
      if (In.Index >= In.N->getNumOutputs())
        return makeError(PN.L.at(*PN.P, "input", I),
                         "node '" + N->getName() + "' reads '" + In.str() +
                             "', but '" + In.N->getName() + "' (" +
                             In.N->getOpName() + ") has " +
                             Twine(In.N->getNumOutputs()) + " output" +
                             (In.N->getNumOutputs() == 1 ? "" : "s"));
    }
  }
  for (auto &[Var, Scale, Loc] : Regularizers)
    if (Error E = addRegularizer(Var, Scale, Loc))
      return E;

  if (Error E = collection(M.loss(), M, "loss", L, Collection::Losses))
    return E;
  if (Error E = collection(M.regularization_loss(), M, "regularization_loss", L,
                           Collection::RegularizationLosses))
    return E;
  if (Error E =
          collection(M.update_op(), M, "update_op", L, Collection::UpdateOps))
    return E;
  if (Error E = collection(M.summary(), M, "summary", L, Collection::Summaries))
    return E;
  for (int I = 0, E = M.output_size(); I != E; ++I) {
    const desc::NamedOutput &O = M.output(I);
    Locator OL = L.nested(M, "output", I);
    if (O.name().empty())
      return makeError(L.at(M, "output", I), "output without a name");
    StringRef T = O.tensor();
    unsigned Index = 0;
    size_t Colon = T.rfind(':');
    if (Colon != StringRef::npos) {
      if (T.substr(Colon + 1).getAsInteger(10, Index))
        return makeError(OL.at(O, "tensor"),
                         "invalid tensor '" + O.tensor() + "'");
      T = T.substr(0, Colon);
    }
    Node *N = G.lookup(T);
    if (!N)
      return makeError(OL.at(O, "tensor"), "output '" + O.name() + "' names '" +
                                               T + "', which does not exist");
    if (Index >= N->getNumOutputs())
      return makeError(OL.at(O, "tensor"),
                       "output '" + O.name() + "' names output " +
                           Twine(Index) + " of '" + T + "', which has " +
                           Twine(N->getNumOutputs()));
    if (G.outputs().count(O.name()))
      return makeError(L.at(M, "output", I),
                       "output '" + O.name() + "' given twice");
    G.outputs()[O.name()] = TensorRef(N, Index);
    G.setOutputLoc(O.name(), L.at(M, "output", I));
  }
  if (M.has_training()) {
    const desc::Training &T = M.training();
    Locator TL = L.nested(M, "training");
    if (T.has_optimizer()) {
      OptimizerSettings S =
          convertOptimizer(T.optimizer(), OptimizerSettings());
      Locator OL = TL.nested(T, "optimizer");
      if (Error E = checkOptimizer(T.optimizer(), S, OL))
        return E;
      G.setOptimizer(S);
      // For the warnings about fields the optimizer does not use.
      forEachSetField(T.optimizer(), [&](StringRef F) {
        G.setOptimizerLoc(F, OL.at(T.optimizer(), F));
      });
      const desc::Optimizer &PO = T.optimizer();
      for (auto [F, Has] :
           {std::pair<StringRef, bool>{"nesterov", PO.has_nesterov()},
            {"staircase", PO.has_staircase()},
            {"centered", PO.has_centered()},
            {"decay_type", PO.has_decay_type()}})
        if (Has)
          G.setOptimizerLoc(F, OL.at(PO, F));
    }
    if (T.batch_size() < 0 ||
        (T.batch_size() == 0 && TL.written(T, "batch_size")))
      return makeError(TL.at(T, "batch_size"),
                       "batch size must be positive, got " +
                           Twine(T.batch_size()));
    G.setDefaultBatchSize(T.batch_size());
  }
  return verifyGraph(G);
}

static bool isBinaryPath(StringRef Path) {
  StringRef Ext = sys::path::extension(Path);
  return Ext == ".pb" || Ext == ".binpb" || Ext == ".mdgb";
}

/// The stack the reader runs on. Protobuf's parsers and the builder's walk
/// over scopes recurse per nested message: MaxNesting levels take 1 to 2 MiB
/// in an optimized build and several times that under the sanitizers (GCC's
/// ASan overflowed 8 MiB), more than a caller's thread may have. Pages of
/// it that are never touched cost nothing.
constexpr unsigned ReaderStackBytes = 64u << 20;

static Expected<std::unique_ptr<Graph>>
readModelOnThisThread(StringRef Contents, StringRef Name,
                      const ReadOptions &Opts);

/// Runs \p Work on a thread with the reader's stack and waits for it.
static void onReaderStack(function_ref<void()> Work) {
  llvm::thread Reader(Optional<unsigned>(ReaderStackBytes), Work);
  Reader.join();
}

Expected<std::unique_ptr<Graph>>
mdplan::readModelBuffer(StringRef Contents, StringRef Name,
                        const ReadOptions &Opts) {
  Optional<Expected<std::unique_ptr<Graph>>> Result;
  onReaderStack(
      [&] { Result.emplace(readModelOnThisThread(Contents, Name, Opts)); });
  return std::move(*Result);
}

std::string mdplan::checkTextFastPath(StringRef Contents, TextFileKind Kind,
                                      bool *FastAccepted) {
  std::string Result;
  onReaderStack([&] {
    const pb::Message &Prototype =
        Kind == TextFileKind::Model
            ? static_cast<const pb::Message &>(desc::Model::default_instance())
            : desc::Deployment::default_instance();
    Result = compareTextParsers(Contents, Prototype, MaxNesting, FastAccepted);
  });
  return Result;
}

static Expected<std::unique_ptr<Graph>>
readModelOnThisThread(StringRef Contents, StringRef Name,
                      const ReadOptions &Opts) {
  StringRef File = internFileName(Name);
  // The message of a large model is millions of small objects: an arena
  // allocates them in large blocks and frees them at once.
  pb::ArenaOptions AO;
  AO.start_block_size = 64 << 10;
  AO.max_block_size = 4 << 20;
  pb::Arena Arena(AO);
  desc::Model &M = *pb::Arena::CreateMessage<desc::Model>(&Arena);
  bool Binary = Opts.Format == InputFormat::Binary ||
                (Opts.Format == InputFormat::Auto && isBinaryPath(Name));
  TextParse Text;
  if (Binary) {
    pb::io::CodedInputStream In(
        reinterpret_cast<const uint8_t *>(Contents.data()),
        int(std::min<size_t>(Contents.size(), INT32_MAX)));
    In.SetRecursionLimit(MaxNesting);
    ProtobufLogCapture Log;
    if (Contents.size() > size_t(INT32_MAX) || !M.ParseFromCodedStream(&In) ||
        !In.ConsumedEntireMessage())
      return makeError(
          SourceLoc{File, 0, 0},
          "cannot parse the binary model (not a serialized "
          "mdplan.desc.Model" +
              (Log.first().empty() ? std::string() : ": " + Log.first()) + ")");
  } else if (Error E = Text.parse(Contents, File, M,
                                  "(a binary model needs a .pb, .binpb or "
                                  ".mdgb name, or --input-format=binary)")) {
    return std::move(E);
  }
  auto G = std::make_unique<Graph>();
  ModelBuilder B(*G, File);
  if (Error E =
          B.build(M, Binary ? Locator(File, nullptr) : Text.locator(File)))
    return std::move(E);
  return G;
}

/// Reads \p Path into a buffer, handing it to \p SM when given.
static Expected<StringRef> loadFile(StringRef Path, SourceMgr *SM,
                                    std::unique_ptr<MemoryBuffer> &Keep) {
  auto MB = MemoryBuffer::getFileOrSTDIN(Path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!MB)
    return makeError(SourceLoc{internFileName(Path), 0, 0},
                     "cannot read file: " + MB.getError().message());
  StringRef Contents = (*MB)->getBuffer();
  if (SM) {
    // Diagnostics find the buffer by the file's name: standard input's is
    // "<stdin>", its locations say "-".
    if ((*MB)->getBufferIdentifier() != Path)
      *MB = MemoryBuffer::getMemBufferCopy(Contents, Path);
    Contents = (*MB)->getBuffer();
    SM->AddNewSourceBuffer(std::move(*MB), SMLoc());
    return Contents;
  }
  Keep = std::move(*MB);
  return Contents;
}

Expected<std::unique_ptr<Graph>>
mdplan::readModelFile(StringRef Path, const ReadOptions &Opts) {
  std::unique_ptr<MemoryBuffer> Keep;
  bool Binary = Opts.Format == InputFormat::Binary ||
                (Opts.Format == InputFormat::Auto && isBinaryPath(Path));
  auto Contents = loadFile(Path, Binary ? nullptr : Opts.SM, Keep);
  if (!Contents)
    return Contents.takeError();
  return readModelBuffer(*Contents, Path, Opts);
}

//===----------------------------------------------------------------------===//
// Deployment config files
//===----------------------------------------------------------------------===//

Error mdplan::readDeploymentBuffer(StringRef Contents, StringRef Name,
                                   DeploymentConfig &C) {
  StringRef File = internFileName(Name);
  desc::Deployment D;
  TextParse Text;
  if (Error E = Text.parse(Contents, File, D))
    return E;
  Locator L = Text.locator(File);
  auto Set = [&](StringRef Field) { C.Origins[Field] = L.at(D, Field); };
  if (D.has_num_clones()) {
    C.NumClones = D.num_clones();
    Set("num_clones");
  }
  if (D.has_clone_on_cpu()) {
    C.CloneOnCPU = D.clone_on_cpu();
    Set("clone_on_cpu");
  }
  if (D.has_replica_id()) {
    C.ReplicaId = D.replica_id();
    Set("replica_id");
  }
  if (D.has_num_replicas()) {
    C.NumReplicas = D.num_replicas();
    Set("num_replicas");
  }
  if (D.has_num_ps_tasks()) {
    C.NumPsTasks = D.num_ps_tasks();
    Set("num_ps_tasks");
  }
  if (D.has_worker_job_name()) {
    C.WorkerJobName = D.worker_job_name();
    Set("worker_job_name");
  }
  if (D.has_ps_job_name()) {
    C.PsJobName = D.ps_job_name();
    Set("ps_job_name");
  }
  if (D.has_strategy()) {
    Set("strategy");
    if (D.strategy() == "ps")
      C.Strat = Strategy::ParameterServer;
    else if (D.strategy() == "mirrored")
      C.Strat = Strategy::Mirrored;
    else
      return makeError(
          C.Origins["strategy"],
          unknownValueMessage("strategy", D.strategy(), {"ps", "mirrored"}));
  }
  if (D.has_batch_per_clone()) {
    C.BatchPerClone = D.batch_per_clone();
    Set("batch_per_clone");
    if (C.BatchPerClone <= 0)
      return makeError(C.Origins["batch_per_clone"],
                       "batch size must be positive, got " +
                           Twine(C.BatchPerClone));
  }
  if (D.has_global_batch()) {
    C.GlobalBatch = D.global_batch();
    Set("global_batch");
    if (C.GlobalBatch <= 0)
      return makeError(C.Origins["global_batch"],
                       "batch size must be positive, got " +
                           Twine(C.GlobalBatch));
  }
  if (D.has_gpus_per_worker()) {
    C.GpusPerWorker = D.gpus_per_worker();
    Set("gpus_per_worker");
    // -1 ("one per clone") is the default, not a value to write.
    if (C.GpusPerWorker < 0)
      return makeError(C.Origins["gpus_per_worker"],
                       "gpus_per_worker must not be negative, got " +
                           Twine(C.GpusPerWorker));
  }
  if (D.has_soft_placement()) {
    C.SoftPlacement = D.soft_placement();
    Set("soft_placement");
  }
  if (D.has_colocate_gradients()) {
    C.ColocateGradients = D.colocate_gradients();
    Set("colocate_gradients");
  }
  if (D.has_summarize_gradients()) {
    C.SummarizeGradients = D.summarize_gradients();
    Set("summarize_gradients");
  }
  if (D.has_first_bucket_bytes()) {
    C.FirstBucketBytes = D.first_bucket_bytes();
    Set("first_bucket_bytes");
  }
  if (D.has_bucket_bytes()) {
    C.BucketBytes = D.bucket_bytes();
    Set("bucket_bytes");
  }
  if (D.has_optimizer()) {
    // Only the fields given override the graph file's (and the flags
    // override these); each is located at its own field.
    const desc::Optimizer &O = D.optimizer();
    Locator OL = L.nested(D, "optimizer");
    if (Error E = checkOptimizerKind(O, OL))
      return E;
    C.Optimizer =
        convertOptimizer(O, C.Optimizer.value_or(OptimizerSettings()));
    auto SetField = [&](StringRef F) {
      C.OptimizerFieldsSet[F] = true;
      C.Origins[F] = OL.at(O, F);
    };
    if (O.has_kind())
      SetField("kind");
    if (O.has_nesterov())
      SetField("nesterov");
    if (O.has_staircase())
      SetField("staircase");
    if (O.has_centered())
      SetField("centered");
    if (O.has_decay_type())
      SetField("decay_type");
    forEachSetField(O, SetField);
  }
  return Error::success();
}

Error mdplan::readDeploymentFile(StringRef Path, DeploymentConfig &C,
                                 SourceMgr *SM) {
  std::unique_ptr<MemoryBuffer> Keep;
  auto Contents = loadFile(Path, SM, Keep);
  if (!Contents)
    return Contents.takeError();
  return readDeploymentBuffer(*Contents, Path, C);
}
