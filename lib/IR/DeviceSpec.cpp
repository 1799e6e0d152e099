//===- DeviceSpec.cpp - Partial device names ------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeviceSpec.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;
using namespace mdplan;

namespace {
/// Parses one device spec, remembering the text for messages.
class SpecParser {
public:
  explicit SpecParser(StringRef Text) : Text(Text) {}

  Error parse(DeviceSpec &D);

private:
  Error fail(const Twine &Msg) {
    return makeError(Msg + " in device '" + Text + "'");
  }
  Error parseIndex(StringRef Field, StringRef Value, std::optional<int> &Out);
  Error setType(DeviceSpec &D, StringRef Type, StringRef Index);

  StringRef Text;
  bool SawType = false;
};
} // namespace

Error SpecParser::parseIndex(StringRef Field, StringRef Value,
                             std::optional<int> &Out) {
  constexpr unsigned Max = 1u << 30;
  unsigned N;
  if (!Value.empty() && llvm::all_of(Value, llvm::isDigit) &&
      (Value.getAsInteger(10, N) || N > Max))
    return fail("'" + Field + "' " + Value + " is out of range (at most " +
                Twine(Max) + ")");
  if (Value.empty() || Value.getAsInteger(10, N))
    return fail("'" + Field + "' must be a non-negative integer, got '" +
                Value + "'");
  if (Out)
    return fail("'" + Field + "' given twice");
  Out = int(N);
  return Error::success();
}

Error SpecParser::setType(DeviceSpec &D, StringRef Type, StringRef Index) {
  if (Type.empty())
    return fail("empty device type");
  if (Type == "*")
    return fail("device type may not be '*'");
  std::string Upper = Type.upper();
  for (char C : Upper)
    if (!isAlnum(C) && C != '_')
      return fail("invalid device type '" + Type + "'");
  if (SawType) {
    if (D.Type && *D.Type != Upper)
      return fail("two device types ('" + *D.Type + "' and '" + Upper + "')");
    return fail("device type given twice");
  }
  SawType = true;
  D.Type = Upper;
  if (Index.empty() || Index == "*")
    return Error::success();
  return parseIndex("device index", Index, D.Index);
}

Error SpecParser::parse(DeviceSpec &D) {
  SmallVector<StringRef, 8> Pieces;
  Text.split(Pieces, '/', -1, /*KeepEmpty=*/false);
  for (StringRef Piece : Pieces) {
    SmallVector<StringRef, 4> Parts;
    Piece.split(Parts, ':');
    StringRef Key = Parts[0];
    if (Key == "job") {
      if (Parts.size() != 2)
        return fail("malformed field '" + Piece + "'");
      if (Parts[1].empty())
        return fail("empty job name");
      if (D.Job)
        return fail("'job' given twice");
      D.Job = Parts[1].str();
      continue;
    }
    if (Key == "replica" || Key == "task") {
      if (Parts.size() != 2)
        return fail("malformed field '" + Piece + "'");
      if (Error E =
              parseIndex(Key, Parts[1], Key == "task" ? D.Task : D.Replica))
        return E;
      continue;
    }
    if (Key == "device") {
      if (Parts.size() < 2 || Parts.size() > 3)
        return fail("malformed field '" + Piece + "'");
      if (Error E = setType(D, Parts[1], Parts.size() == 3 ? Parts[2] : ""))
        return E;
      continue;
    }
    // Legacy short forms: cpu:0, GPU:1, gpu, gpu:*, and any upper-case type.
    bool Legacy = Key.equals_insensitive("cpu") ||
                  Key.equals_insensitive("gpu") ||
                  (!Key.empty() && Key.upper() == Key && isAlpha(Key[0]));
    if (!Legacy)
      return fail("unknown field '" + Key + "'");
    if (Parts.size() > 2)
      return fail("malformed field '" + Piece + "'");
    if (Error E = setType(D, Key, Parts.size() == 2 ? Parts[1] : ""))
      return E;
  }
  return Error::success();
}

Expected<DeviceSpec> DeviceSpec::parse(StringRef Text) {
  DeviceSpec D;
  SpecParser P(Text);
  if (Error E = P.parse(D))
    return E;
  return D;
}

DeviceSpec DeviceSpec::merge(const DeviceSpec &Outer, const DeviceSpec &Inner) {
  DeviceSpec R = Outer;
  if (Inner.Job)
    R.Job = Inner.Job;
  if (Inner.Replica)
    R.Replica = Inner.Replica;
  if (Inner.Task)
    R.Task = Inner.Task;
  if (Inner.Type)
    R.Type = Inner.Type;
  if (Inner.Index)
    R.Index = Inner.Index;
  return R;
}

std::string DeviceSpec::toString() const {
  std::string S;
  if (Job)
    S += "/job:" + *Job;
  if (Replica)
    S += "/replica:" + std::to_string(*Replica);
  if (Task)
    S += "/task:" + std::to_string(*Task);
  if (Type) {
    S += "/device:" + *Type + ":";
    S += Index ? std::to_string(*Index) : std::string("*");
  }
  return S;
}

bool DeviceSpec::isSatisfiedBy(const DeviceSpec &O) const {
  return (!Job || Job == O.Job) && (!Replica || Replica == O.Replica) &&
         (!Task || Task == O.Task) && (!Type || Type == O.Type) &&
         (!Index || Index == O.Index);
}
