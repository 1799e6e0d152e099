//===- Attr.cpp - Node attributes -----------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Attr.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace llvm;
using namespace mdplan;

StringRef mdplan::attrKindName(AttrKind K) {
  switch (K) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::String:
    return "string";
  case AttrKind::Type:
    return "type";
  case AttrKind::Shape:
    return "shape";
  case AttrKind::IntList:
    return "int list";
  case AttrKind::FloatList:
    return "float list";
  case AttrKind::StringList:
    return "string list";
  }
  llvm_unreachable("bad attr kind");
}

/// Prints a double so that it reads back to the same value.
static void printDouble(raw_ostream &OS, double D) {
  char Buf[32];
  snprintf(Buf, sizeof(Buf), "%.17g", D);
  // Prefer the shortest representation that round-trips.
  for (int Prec = 1; Prec < 17; ++Prec) {
    char Short[32];
    snprintf(Short, sizeof(Short), "%.*g", Prec, D);
    if (strtod(Short, nullptr) == D) {
      OS << Short;
      return;
    }
  }
  OS << Buf;
}

void Attr::print(raw_ostream &OS) const {
  switch (kind()) {
  case AttrKind::Int:
    OS << getInt();
    return;
  case AttrKind::Float:
    printDouble(OS, std::get<double>(V));
    return;
  case AttrKind::Bool:
    OS << (getBool() ? "true" : "false");
    return;
  case AttrKind::String:
    OS << '"';
    OS.write_escaped(getString());
    OS << '"';
    return;
  case AttrKind::Type:
    OS << dtypeName(getType());
    return;
  case AttrKind::Shape:
    getShape().print(OS);
    return;
  case AttrKind::IntList: {
    OS << '[';
    bool First = true;
    for (int64_t I : getInts()) {
      OS << (First ? "" : ",") << I;
      First = false;
    }
    OS << ']';
    return;
  }
  case AttrKind::FloatList: {
    OS << '[';
    bool First = true;
    for (double D : getFloats()) {
      OS << (First ? "" : ",");
      printDouble(OS, D);
      First = false;
    }
    OS << ']';
    return;
  }
  case AttrKind::StringList: {
    OS << '[';
    bool First = true;
    for (const std::string &S : getStrings()) {
      OS << (First ? "\"" : ",\"");
      OS.write_escaped(S);
      OS << '"';
      First = false;
    }
    OS << ']';
    return;
  }
  }
}

SmallVector<AttrDict::Entry, 0> &AttrDict::mutableEntries() {
  if (!S)
    S = makeIntrusiveRefCnt<Storage>();
  else if (S->isShared()) {
    auto Own = makeIntrusiveRefCnt<Storage>();
    Own->Entries.reserve(S->Entries.size());
    Own->Entries.append(S->Entries.begin(), S->Entries.end());
    S = std::move(Own);
  }
  return S->Entries;
}

static bool entryBefore(const AttrDict::Entry &E, StringRef N) {
  return StringRef(E.first) < N;
}

void AttrDict::set(StringRef Name, Attr Value) {
  SmallVector<Entry, 0> &Entries = mutableEntries();
  auto It = std::lower_bound(Entries.begin(), Entries.end(), Name, entryBefore);
  if (It != Entries.end() && It->first == Name) {
    It->second = std::move(Value);
    return;
  }
  Entries.insert(It, Entry(Name.str(), std::move(Value)));
}

const Attr *AttrDict::get(StringRef Name) const {
  ArrayRef<Entry> Entries = entries();
  auto It = std::lower_bound(Entries.begin(), Entries.end(), Name, entryBefore);
  if (It != Entries.end() && It->first == Name)
    return &It->second;
  return nullptr;
}

bool AttrDict::erase(StringRef Name) {
  if (!has(Name))
    return false;
  SmallVector<Entry, 0> &Entries = mutableEntries();
  for (auto It = Entries.begin(); It != Entries.end(); ++It)
    if (It->first == Name) {
      Entries.erase(It);
      return true;
    }
  llvm_unreachable("has() found the attribute");
}

int64_t AttrDict::getInt(StringRef Name, int64_t Default) const {
  const Attr *A = get(Name);
  return A && A->kind() == AttrKind::Int ? A->getInt() : Default;
}

double AttrDict::getFloat(StringRef Name, double Default) const {
  const Attr *A = get(Name);
  if (!A || (A->kind() != AttrKind::Float && A->kind() != AttrKind::Int))
    return Default;
  return A->getFloat();
}

bool AttrDict::getBool(StringRef Name, bool Default) const {
  const Attr *A = get(Name);
  return A && A->kind() == AttrKind::Bool ? A->getBool() : Default;
}

StringRef AttrDict::getString(StringRef Name, StringRef Default) const {
  const Attr *A = get(Name);
  return A && A->kind() == AttrKind::String ? StringRef(A->getString())
                                            : Default;
}

DType AttrDict::getType(StringRef Name, DType Default) const {
  const Attr *A = get(Name);
  return A && A->kind() == AttrKind::Type ? A->getType() : Default;
}

Shape AttrDict::getShape(StringRef Name) const {
  const Attr *A = get(Name);
  if (!A)
    return Shape();
  if (A->kind() == AttrKind::Shape)
    return A->getShape();
  if (A->kind() == AttrKind::IntList)
    return Shape(ArrayRef<int64_t>(A->getInts()));
  return Shape();
}

std::vector<int64_t> AttrDict::getInts(StringRef Name) const {
  const Attr *A = get(Name);
  if (!A)
    return {};
  if (A->kind() == AttrKind::IntList)
    return A->getInts();
  if (A->kind() == AttrKind::Shape) {
    auto D = A->getShape().dims();
    return std::vector<int64_t>(D.begin(), D.end());
  }
  return {};
}
