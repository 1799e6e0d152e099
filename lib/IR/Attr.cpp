//===- Attr.cpp - Node attributes -----------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Attr.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cstring>

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
    printDouble(OS, getFloat());
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

static uint64_t bitsOf(double F) {
  uint64_t B;
  std::memcpy(&B, &F, sizeof B);
  return B;
}

void Attr::wrongKind(AttrKind Want) const {
  llvm::report_fatal_error(llvm::Twine("attribute read as ") +
                           attrKindName(Want) + ", but it is " +
                           attrKindName(K));
}

bool Attr::operator==(const Attr &O) const {
  if (K != O.K)
    return false;
  switch (K) {
  case AttrKind::Int:
    return U.I == O.U.I;
  case AttrKind::Float:
    return U.F == O.U.F;
  case AttrKind::Bool:
    return U.B == O.U.B;
  case AttrKind::Type:
    return U.T == O.U.T;
  case AttrKind::FloatList:
    // Not by address: a list holding a NaN is not equal to itself.
    return getFloats() == O.getFloats();
  case AttrKind::String:
  case AttrKind::Shape:
  case AttrKind::IntList:
  case AttrKind::StringList:
    return U.P == O.U.P || U.P->V == O.U.P->V;
  }
  llvm_unreachable("bad attr kind");
}

bool Attr::isIdentical(const Attr &O) const {
  if (kind() != O.kind())
    return false;
  switch (kind()) {
  case AttrKind::Float:
    return bitsOf(getFloat()) == bitsOf(O.getFloat());
  case AttrKind::FloatList: {
    const std::vector<double> &A = getFloats(), &B = O.getFloats();
    return A.size() == B.size() &&
           std::equal(A.begin(), A.end(), B.begin(), [](double P, double Q) {
             return bitsOf(P) == bitsOf(Q);
           });
  }
  default:
    return *this == O;
  }
}

namespace {
/// A small, fast hash for the tables that share attributes (llvm::hash_combine
/// costs several times more per piece, and a dictionary has dozens).
class Mixer {
public:
  void add(uint64_t V) {
    H = (H ^ V) * 0xbf58476d1ce4e5b9ull;
    H ^= H >> 31;
  }
  void add(StringRef S) {
    add(S.size());
    size_t I = 0;
    for (; I + 8 <= S.size(); I += 8) {
      uint64_t W;
      std::memcpy(&W, S.data() + I, 8);
      add(W);
    }
    if (I < S.size()) {
      uint64_t Tail = 0;
      std::memcpy(&Tail, S.data() + I, S.size() - I);
      add(Tail);
    }
  }
  void add(const Attr &A) {
    add(uint64_t(A.kind()));
    switch (A.kind()) {
    case AttrKind::Int:
      return add(uint64_t(A.getInt()));
    case AttrKind::Float:
      return add(bitsOf(A.getFloat()));
    case AttrKind::Bool:
      return add(uint64_t(A.getBool()));
    case AttrKind::String:
      return add(StringRef(A.getString()));
    case AttrKind::Type:
      return add(uint64_t(A.getType()));
    case AttrKind::Shape:
      return addInts(A.getShape().dims());
    case AttrKind::IntList:
      return addInts(A.getInts());
    case AttrKind::FloatList:
      add(A.getFloats().size());
      for (double F : A.getFloats())
        add(bitsOf(F));
      return;
    case AttrKind::StringList:
      add(A.getStrings().size());
      for (const std::string &S : A.getStrings())
        add(StringRef(S));
      return;
    }
    llvm_unreachable("unknown attribute kind");
  }
  hash_code get() const { return hash_code(size_t(H)); }

private:
  void addInts(ArrayRef<int64_t> L) {
    add(L.size());
    for (int64_t V : L)
      add(uint64_t(V));
  }
  uint64_t H = 0x9e3779b97f4a7c15ull;
};
} // namespace

hash_code mdplan::hash_value(const Attr &A) {
  Mixer M;
  M.add(A);
  return M.get();
}

bool AttrDict::isIdentical(const AttrDict &O) const {
  if (S == O.S)
    return true;
  ArrayRef<Entry> A = entries(), B = O.entries();
  return A.size() == B.size() &&
         std::equal(
             A.begin(), A.end(), B.begin(), [](const Entry &X, const Entry &Y) {
               return X.first == Y.first && X.second.isIdentical(Y.second);
             });
}

hash_code mdplan::hash_value(const AttrDict &D) {
  Mixer M;
  M.add(D.size());
  for (const AttrDict::Entry &E : D) {
    M.add(StringRef(E.first));
    M.add(E.second);
  }
  return M.get();
}

AttrDict AttrDictUniquer::unique(AttrDict D) {
  if (D.empty())
    return D;
  // DenseMap reserves the two largest keys.
  uint64_t Key = size_t(hash_value(D));
  if (Key >= ~uint64_t(1))
    Key -= 2;
  SmallVector<AttrDict, 1> &Bucket = Seen[Key];
  for (const AttrDict &Prev : Bucket)
    if (Prev.isIdentical(D))
      return Prev;
  Bucket.push_back(D);
  return D;
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

AttrDict::AttrDict(MutableArrayRef<std::pair<StringRef, Attr>> L) {
  if (L.empty())
    return;
  // Insertion sort, stable: a handful of pairs.
  SmallVector<unsigned, 8> Order;
  for (unsigned I = 0; I < L.size(); ++I) {
    unsigned J = Order.size();
    Order.push_back(I);
    for (; J > 0 && L[I].first < L[Order[J - 1]].first; --J)
      Order[J] = Order[J - 1];
    Order[J] = I;
  }
  S = makeIntrusiveRefCnt<Storage>();
  S->Entries.reserve(L.size());
  for (unsigned I : Order) {
    auto &[Name, Value] = L[I];
    // Of equal names the last given wins (stable order keeps them in turn).
    if (!S->Entries.empty() && S->Entries.back().first == Name)
      S->Entries.back().second = std::move(Value);
    else
      S->Entries.emplace_back(Name.str(), std::move(Value));
  }
}

void AttrDict::set(StringRef Name, Attr Value) {
  ArrayRef<Entry> Cur = entries();
  size_t Pos =
      std::lower_bound(Cur.begin(), Cur.end(), Name, entryBefore) - Cur.begin();
  bool Found = Pos != Cur.size() && Cur[Pos].first == Name;
  if (S && !S->isShared()) {
    if (Found)
      S->Entries[Pos].second = std::move(Value);
    else
      S->Entries.insert(S->Entries.begin() + Pos,
                        Entry(Name.str(), std::move(Value)));
    return;
  }
  // A new storage (none yet, or shared): one allocation at the final size,
  // the entries copied around the changed one.
  auto Own = makeIntrusiveRefCnt<Storage>();
  Own->Entries.reserve(Cur.size() + !Found);
  Own->Entries.append(Cur.begin(), Cur.begin() + Pos);
  Own->Entries.emplace_back(Name.str(), std::move(Value));
  Own->Entries.append(Cur.begin() + Pos + Found, Cur.end());
  S = std::move(Own);
}

const Attr *AttrDict::get(StringRef Name) const {
  // A dictionary holds a dozen entries at most: a scan that compares sizes
  // first does about one string comparison, a binary search four.
  for (const Entry &E : entries())
    if (E.first.size() == Name.size() && StringRef(E.first) == Name)
      return &E.second;
  return nullptr;
}

bool AttrDict::erase(StringRef Name) {
  ArrayRef<Entry> Cur = entries();
  size_t Pos =
      std::lower_bound(Cur.begin(), Cur.end(), Name, entryBefore) - Cur.begin();
  if (Pos == Cur.size() || Cur[Pos].first != Name)
    return false;
  if (!S->isShared()) {
    S->Entries.erase(S->Entries.begin() + Pos);
    return true;
  }
  auto Own = makeIntrusiveRefCnt<Storage>();
  Own->Entries.reserve(Cur.size() - 1);
  Own->Entries.append(Cur.begin(), Cur.begin() + Pos);
  Own->Entries.append(Cur.begin() + Pos + 1, Cur.end());
  S = std::move(Own);
  return true;
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
