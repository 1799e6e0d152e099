//===- Types.cpp - Element types and tensor shapes ------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Types.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace llvm;
using namespace mdplan;

StringRef mdplan::dtypeName(DType T) {
  switch (T) {
  case DType::Invalid:
    return "invalid";
  case DType::Float32:
    return "float32";
  case DType::Float64:
    return "float64";
  case DType::Int32:
    return "int32";
  case DType::Int64:
    return "int64";
  case DType::Bool:
    return "bool";
  }
  llvm_unreachable("bad dtype");
}

std::optional<DType> mdplan::parseDType(StringRef Name) {
  auto T = StringSwitch<DType>(Name)
               .Case("float32", DType::Float32)
               .Case("float64", DType::Float64)
               .Case("int32", DType::Int32)
               .Case("int64", DType::Int64)
               .Case("bool", DType::Bool)
               .Default(DType::Invalid);
  if (T == DType::Invalid)
    return std::nullopt;
  return T;
}

unsigned mdplan::dtypeSize(DType T) {
  switch (T) {
  case DType::Invalid:
    return 0;
  case DType::Float32:
  case DType::Int32:
    return 4;
  case DType::Float64:
  case DType::Int64:
    return 8;
  case DType::Bool:
    return 1;
  }
  llvm_unreachable("bad dtype");
}

bool Shape::isFullyDefined() const {
  for (int64_t D : Dims)
    if (D < 0)
      return false;
  return true;
}

int64_t Shape::numElements() const {
  int64_t N = 1;
  bool Overflow = false;
  for (int64_t D : Dims) {
    if (D < 0)
      return -1;
    Overflow |= MulOverflow(N, D, N);
  }
  if (Overflow && is_contained(Dims, 0))
    return 0;
  return Overflow ? INT64_MAX : N;
}

std::string Shape::whyTooLarge() const {
  for (int64_t D : Dims)
    if (D > MaxTensorElements)
      return "dimension " + std::to_string(D) + " is above the limit of 2^40";
  int64_t N = 1;
  for (int64_t D : Dims) {
    if (D == 0)
      return "";
    if (D < 0)
      continue;
    if (N > MaxTensorElements / D)
      return "a tensor may have at most 2^40 elements";
    N *= D;
  }
  return "";
}

void Shape::print(raw_ostream &OS) const {
  OS << '[';
  for (unsigned I = 0, E = Dims.size(); I != E; ++I) {
    if (I)
      OS << ',';
    if (Dims[I] < 0)
      OS << '?';
    else
      OS << Dims[I];
  }
  OS << ']';
}

std::string Shape::str() const {
  std::string S;
  raw_string_ostream OS(S);
  print(OS);
  return OS.str();
}

std::string mdplan::writtenDims(ArrayRef<int64_t> Dims) {
  std::string S;
  raw_string_ostream OS(S);
  OS << '[';
  interleave(Dims, OS, ",");
  OS << ']';
  return OS.str();
}

int64_t TensorType::byteSize() const {
  int64_t N = Dims.numElements();
  if (N < 0)
    return -1;
  int64_t Bytes;
  return MulOverflow(N, int64_t(dtypeSize(Elt)), Bytes) ? INT64_MAX : Bytes;
}

void TensorType::print(raw_ostream &OS) const {
  OS << dtypeName(Elt);
  Dims.print(OS);
}

std::string TensorType::str() const {
  std::string S;
  raw_string_ostream OS(S);
  print(OS);
  return OS.str();
}
