//===- Types.h - Element types and tensor shapes ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_TYPES_H
#define MDPLAN_IR_TYPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mdplan {

/// Element type of a tensor. The numbering matches the graph format's enum
/// and the plan schema's.
enum class DType : uint8_t {
  Invalid = 0,
  Float32 = 1,
  Float64 = 2,
  Int32 = 3,
  Int64 = 4,
  Bool = 5,
};

/// Lower-case name as printed in diagnostics and plans ("float32").
llvm::StringRef dtypeName(DType T);
/// Parses a lower-case dtype name; nullopt for an unknown one.
std::optional<DType> parseDType(llvm::StringRef Name);
/// Size of one element in bytes.
unsigned dtypeSize(DType T);
inline bool isFloat(DType T) {
  return T == DType::Float32 || T == DType::Float64;
}
inline bool isInteger(DType T) {
  return T == DType::Int32 || T == DType::Int64;
}

/// A tensor shape. A dimension of -1 is unknown (the batch dimension before
/// the deployment fixes the batch size).
class Shape {
public:
  static constexpr int64_t Unknown = -1;

  Shape() = default;
  Shape(std::initializer_list<int64_t> Dims) : Dims(Dims) {}
  explicit Shape(llvm::ArrayRef<int64_t> Dims)
      : Dims(Dims.begin(), Dims.end()) {}

  unsigned rank() const { return Dims.size(); }
  bool isScalar() const { return Dims.empty(); }
  int64_t operator[](unsigned I) const { return Dims[I]; }
  int64_t &operator[](unsigned I) { return Dims[I]; }
  llvm::ArrayRef<int64_t> dims() const { return Dims; }
  llvm::SmallVectorImpl<int64_t> &dims() { return Dims; }
  /// True when every dimension is known.
  bool isFullyDefined() const;
  /// Number of elements; -1 when some dimension is unknown. Saturates at
  /// INT64_MAX when the count overflows (the reader and infer-shapes reject
  /// such shapes, see isTooLarge).
  int64_t numElements() const;
  /// Why a tensor of this shape is too large ("" when it is not): a
  /// dimension or the element count above MaxTensorElements (unknown
  /// dimensions count as 1). For messages: "shape [..] is too large: ...".
  std::string whyTooLarge() const;

  /// The most elements (and the largest dimension) a tensor may have: the
  /// runtime's plan verifier's limit. Byte sizes and sums of them stay far
  /// from overflowing int64.
  static constexpr int64_t MaxTensorElements = int64_t(1) << 40;

  bool operator==(const Shape &O) const { return Dims == O.Dims; }
  bool operator!=(const Shape &O) const { return !(*this == O); }

  /// Prints `[2,3]`, `[?,784]`, `[]`.
  void print(llvm::raw_ostream &OS) const;
  std::string str() const;

private:
  llvm::SmallVector<int64_t, 4> Dims;
};

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS, const Shape &S) {
  S.print(OS);
  return OS;
}

/// The dimensions as written, "[2,-1]", for messages about dimensions a
/// user wrote: Shape::str() prints every negative one as "?", which hides
/// the value a message complains about.
std::string writtenDims(llvm::ArrayRef<int64_t> Dims);

/// The type of one node output.
struct TensorType {
  DType Elt = DType::Invalid;
  Shape Dims;

  bool operator==(const TensorType &O) const {
    return Elt == O.Elt && Dims == O.Dims;
  }
  /// Size in bytes; -1 when the shape is not fully defined.
  int64_t byteSize() const;
  /// Prints `float32[?,784]`.
  void print(llvm::raw_ostream &OS) const;
  std::string str() const;
};

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS,
                                     const TensorType &T) {
  T.print(OS);
  return OS;
}

} // namespace mdplan

#endif // MDPLAN_IR_TYPES_H
