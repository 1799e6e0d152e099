//===- Attr.h - Node attributes ---------------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_ATTR_H
#define MDPLAN_IR_ATTR_H

#include "mdplan/IR/Types.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

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

/// One attribute value.
class Attr {
public:
  using Storage = std::variant<int64_t, double, bool, std::string, DType, Shape,
                               std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>>;

  Attr() : V(int64_t(0)) {}
  Attr(int64_t I) : V(I) {}
  Attr(int I) : V(int64_t(I)) {}
  Attr(double F) : V(F) {}
  Attr(bool B) : V(B) {}
  Attr(std::string S) : V(std::move(S)) {}
  Attr(const char *S) : V(std::string(S)) {}
  Attr(llvm::StringRef S) : V(S.str()) {}
  Attr(DType T) : V(T) {}
  Attr(mdplan::Shape S) : V(std::move(S)) {}
  Attr(std::vector<int64_t> L) : V(std::move(L)) {}
  Attr(std::vector<double> L) : V(std::move(L)) {}
  Attr(std::vector<std::string> L) : V(std::move(L)) {}

  AttrKind kind() const { return static_cast<AttrKind>(V.index()); }

  int64_t getInt() const { return std::get<int64_t>(V); }
  /// Float value; an Int converts.
  double getFloat() const {
    return kind() == AttrKind::Int ? double(getInt()) : std::get<double>(V);
  }
  bool getBool() const { return std::get<bool>(V); }
  const std::string &getString() const { return std::get<std::string>(V); }
  DType getType() const { return std::get<DType>(V); }
  const mdplan::Shape &getShape() const { return std::get<mdplan::Shape>(V); }
  const std::vector<int64_t> &getInts() const {
    return std::get<std::vector<int64_t>>(V);
  }
  const std::vector<double> &getFloats() const {
    return std::get<std::vector<double>>(V);
  }
  const std::vector<std::string> &getStrings() const {
    return std::get<std::vector<std::string>>(V);
  }

  bool operator==(const Attr &O) const { return V == O.V; }
  bool operator!=(const Attr &O) const { return !(V == O.V); }

  /// Prints the value as it appears in diagnostics and plan text:
  /// `3`, `0.5`, `true`, `"SAME"`, `float32`, `[2,3]`, `[1,1]`.
  void print(llvm::raw_ostream &OS) const;

private:
  Storage V;
};

/// A node's attributes, sorted by name so iteration is deterministic.
class AttrDict {
public:
  using Entry = std::pair<std::string, Attr>;

  /// Sets \p Name, replacing an existing value.
  void set(llvm::StringRef Name, Attr Value);
  /// The value of \p Name or null.
  const Attr *get(llvm::StringRef Name) const;
  bool has(llvm::StringRef Name) const { return get(Name) != nullptr; }
  bool erase(llvm::StringRef Name);
  /// Makes room for \p N attributes: a dictionary that outgrows its inline
  /// room is then allocated once at its final size.
  void reserve(size_t N) { Entries.reserve(N); }

  int64_t getInt(llvm::StringRef Name, int64_t Default = 0) const;
  double getFloat(llvm::StringRef Name, double Default = 0) const;
  bool getBool(llvm::StringRef Name, bool Default = false) const;
  llvm::StringRef getString(llvm::StringRef Name,
                            llvm::StringRef Default = {}) const;
  DType getType(llvm::StringRef Name, DType Default = DType::Invalid) const;
  /// A Shape attribute, or an IntList read as a shape.
  Shape getShape(llvm::StringRef Name) const;
  std::vector<int64_t> getInts(llvm::StringRef Name) const;

  auto begin() const { return Entries.begin(); }
  auto end() const { return Entries.end(); }
  size_t size() const { return Entries.size(); }
  bool empty() const { return Entries.empty(); }
  bool operator==(const AttrDict &O) const { return Entries == O.Entries; }

private:
  /// No inline room: a third of a training graph's nodes have no
  /// attribute, and the others mostly two, four or (variables) ten, which
  /// verifyAndCompleteAttrs allocates once at their final count. Inline
  /// room would cost every node its size (88 bytes an entry).
  llvm::SmallVector<Entry, 0> Entries;
};

} // namespace mdplan

#endif // MDPLAN_IR_ATTR_H
