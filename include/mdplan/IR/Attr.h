//===- Attr.h - Node attributes ---------------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_ATTR_H
#define MDPLAN_IR_ATTR_H

#include "mdplan/IR/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/IntrusiveRefCntPtr.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <atomic>
#include <string>
#include <variant>
#include <vector>

namespace mdplan {

/// The kind of an attribute value, as op definitions declare it.
enum class AttrKind : uint8_t {
  Int,
  Float,
  Bool,
  String,
  Type,
  Shape,
  IntList,
  FloatList,
  StringList,
};

llvm::StringRef attrKindName(AttrKind K);

/// One attribute value. Sixteen bytes: scalars inline, strings, shapes and
/// lists in an immutable heap payload that copies share (a training graph
/// copies attributes into every clone, slot and transfer).
class Attr {
public:
  Attr() { U.I = 0; }
  Attr(int64_t I) { U.I = I; }
  Attr(int I) { U.I = I; }
  Attr(double F) : K(AttrKind::Float) { U.F = F; }
  Attr(bool B) : K(AttrKind::Bool) { U.B = B; }
  Attr(std::string S) : Attr(AttrKind::String, std::move(S)) {}
  Attr(const char *S) : Attr(std::string(S)) {}
  Attr(llvm::StringRef S) : Attr(S.str()) {}
  Attr(DType T) : K(AttrKind::Type) { U.T = T; }
  Attr(mdplan::Shape S) : Attr(AttrKind::Shape, std::move(S)) {}
  Attr(std::vector<int64_t> L) : Attr(AttrKind::IntList, std::move(L)) {}
  Attr(std::vector<double> L) : Attr(AttrKind::FloatList, std::move(L)) {}
  Attr(std::vector<std::string> L) : Attr(AttrKind::StringList, std::move(L)) {}

  Attr(const Attr &O) : K(O.K), U(O.U) {
    if (hasPayload())
      U.P->Refs.fetch_add(1, std::memory_order_relaxed);
  }
  Attr(Attr &&O) noexcept : K(O.K), U(O.U) {
    O.K = AttrKind::Int;
    O.U.I = 0;
  }
  Attr &operator=(const Attr &O) {
    Attr Copy(O);
    return *this = std::move(Copy);
  }
  Attr &operator=(Attr &&O) noexcept {
    if (this != &O) {
      release();
      K = O.K;
      U = O.U;
      O.K = AttrKind::Int;
      O.U.I = 0;
    }
    return *this;
  }
  ~Attr() { release(); }

  AttrKind kind() const { return K; }

  int64_t getInt() const {
    check(AttrKind::Int);
    return U.I;
  }
  /// Float value; an Int converts.
  double getFloat() const {
    if (K == AttrKind::Int)
      return double(U.I);
    check(AttrKind::Float);
    return U.F;
  }
  bool getBool() const {
    check(AttrKind::Bool);
    return U.B;
  }
  const std::string &getString() const {
    return payload<std::string>(AttrKind::String);
  }
  DType getType() const {
    check(AttrKind::Type);
    return U.T;
  }
  const mdplan::Shape &getShape() const {
    return payload<mdplan::Shape>(AttrKind::Shape);
  }
  const std::vector<int64_t> &getInts() const {
    return payload<std::vector<int64_t>>(AttrKind::IntList);
  }
  const std::vector<double> &getFloats() const {
    return payload<std::vector<double>>(AttrKind::FloatList);
  }
  const std::vector<std::string> &getStrings() const {
    return payload<std::vector<std::string>>(AttrKind::StringList);
  }

  /// Equal values of one kind (0.0 == -0.0; a NaN equals nothing).
  bool operator==(const Attr &O) const;
  bool operator!=(const Attr &O) const { return !(*this == O); }
  /// The same value, floats compared by their bits: unlike ==, 0.0 and -0.0
  /// differ and a NaN is identical to itself. What may stand for the other
  /// in a plan or a shared dictionary.
  bool isIdentical(const Attr &O) const;

  /// Prints the value as it appears in diagnostics and plan text:
  /// `3`, `0.5`, `true`, `"SAME"`, `float32`, `[2,3]`, `[1,1]`.
  void print(llvm::raw_ostream &OS) const;

private:
  /// A string, shape or list, shared by the copies of an attribute.
  struct Payload {
    template <typename T> explicit Payload(T &&X) : V(std::forward<T>(X)) {}
    mutable std::atomic<unsigned> Refs{1};
    const std::variant<std::string, mdplan::Shape, std::vector<int64_t>,
                       std::vector<double>, std::vector<std::string>>
        V;
  };

  template <typename T> Attr(AttrKind Kind, T &&X) : K(Kind) {
    U.P = new Payload(std::forward<T>(X));
  }
  bool hasPayload() const {
    return K == AttrKind::String || K == AttrKind::Shape ||
           K == AttrKind::IntList || K == AttrKind::FloatList ||
           K == AttrKind::StringList;
  }
  void release() {
    if (hasPayload() && U.P->Refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete U.P;
  }
  /// Reading an attribute as another kind than its own is a bug.
  void check(AttrKind Want) const {
    if (K != Want)
      wrongKind(Want);
  }
  [[noreturn]] void wrongKind(AttrKind Want) const;
  template <typename T> const T &payload(AttrKind Want) const {
    check(Want);
    return std::get<T>(U.P->V);
  }

  AttrKind K = AttrKind::Int;
  union {
    int64_t I;
    double F;
    bool B;
    DType T;
    const Payload *P;
  } U;
};

/// A hash consistent with Attr::isIdentical.
llvm::hash_code hash_value(const Attr &A);

/// A node's attributes, sorted by name so iteration is deterministic.
///
/// A value type with copy-on-write storage: copying a dictionary (a clone
/// of a model node, the evaluation program's copy of the graph, an
/// optimizer slot made from its variable) shares the entries, and the first
/// change to a shared dictionary copies them. Entries returned by get() and
/// iteration stay valid until the dictionary they came from changes.
class AttrDict {
public:
  using Entry = std::pair<std::string, Attr>;

  AttrDict() = default;
  /// The dictionary of the (name, value) pairs \p L, values moved out of
  /// it, in one allocation: what successive set() calls would make (a
  /// later pair replaces an earlier one of the same name), without moving
  /// entries aside for each.
  explicit AttrDict(llvm::MutableArrayRef<std::pair<llvm::StringRef, Attr>> L);

  /// Sets \p Name, replacing an existing value.
  void set(llvm::StringRef Name, Attr Value);
  /// The value of \p Name or null.
  const Attr *get(llvm::StringRef Name) const;
  bool has(llvm::StringRef Name) const { return get(Name) != nullptr; }
  bool erase(llvm::StringRef Name);
  /// Makes room for \p N attributes: a dictionary that outgrows its
  /// storage is then allocated once at its final size.
  void reserve(size_t N) { mutableEntries().reserve(N); }

  int64_t getInt(llvm::StringRef Name, int64_t Default = 0) const;
  double getFloat(llvm::StringRef Name, double Default = 0) const;
  bool getBool(llvm::StringRef Name, bool Default = false) const;
  llvm::StringRef getString(llvm::StringRef Name,
                            llvm::StringRef Default = {}) const;
  DType getType(llvm::StringRef Name, DType Default = DType::Invalid) const;
  /// A Shape attribute, or an IntList read as a shape.
  Shape getShape(llvm::StringRef Name) const;
  std::vector<int64_t> getInts(llvm::StringRef Name) const;

  llvm::ArrayRef<Entry> entries() const {
    return S ? llvm::ArrayRef<Entry>(S->Entries) : llvm::ArrayRef<Entry>();
  }
  auto begin() const { return entries().begin(); }
  auto end() const { return entries().end(); }
  size_t size() const { return entries().size(); }
  bool empty() const { return entries().empty(); }
  bool operator==(const AttrDict &O) const {
    return S == O.S || entries() == O.entries();
  }
  /// True when both share one storage (a copy neither side changed).
  bool sharesStorageWith(const AttrDict &O) const { return S && S == O.S; }
  /// The same names with identical values (Attr::isIdentical).
  bool isIdentical(const AttrDict &O) const;

private:
  /// The entries, shared by the copies of a dictionary. No inline room: a
  /// third of a training graph's nodes have no attribute (null storage),
  /// and the others mostly two, four or (variables) ten, which
  /// verifyAndCompleteAttrs allocates once at their final count.
  struct Storage {
    llvm::SmallVector<Entry, 0> Entries;
    /// Copies of a graph may live on other threads.
    mutable std::atomic<unsigned> Refs{0};
    void Retain() const { Refs.fetch_add(1, std::memory_order_relaxed); }
    void Release() const {
      if (Refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
        delete this;
    }
    bool isShared() const { return Refs.load(std::memory_order_acquire) != 1; }
  };
  /// The entries for a change: this dictionary's own copy.
  llvm::SmallVector<Entry, 0> &mutableEntries();

  llvm::IntrusiveRefCntPtr<Storage> S;
};

/// A hash consistent with AttrDict::isIdentical.
llvm::hash_code hash_value(const AttrDict &D);

/// Gives identical dictionaries one storage. A pass that makes many nodes
/// with the same large dictionary (the optimizer slots of every clone's
/// copy of a variable) passes each through one uniquer, so that they cost
/// one allocation between them. Sharing is invisible to users of the
/// dictionaries (copy-on-write). Hashing costs about as much as the
/// allocation of a small dictionary: not worth it for those.
class AttrDictUniquer {
public:
  /// \p D, or the identical dictionary seen first.
  AttrDict unique(AttrDict D);

private:
  llvm::DenseMap<uint64_t, llvm::SmallVector<AttrDict, 1>> Seen;
};

} // namespace mdplan

#endif // MDPLAN_IR_ATTR_H
