//===- Tensor.h - Element types and tensor descriptions ---------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_TENSOR_H
#define MDRT_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mdrt {

/// Element types; the numbering is the plan schema's.
enum class DType : uint8_t {
  Invalid = 0,
  Float32 = 1,
  Float64 = 2,
  Int32 = 3,
  Int64 = 4,
  Bool = 5,
};

inline size_t dtypeSize(DType T) {
  switch (T) {
  case DType::Float32:
  case DType::Int32:
    return 4;
  case DType::Float64:
  case DType::Int64:
    return 8;
  case DType::Bool:
    return 1;
  default:
    return 0;
  }
}

const char *dtypeName(DType T);

/// The static type of a buffer: element type and shape (all known).
struct TensorDesc {
  DType Type = DType::Invalid;
  std::vector<int64_t> Shape;

  int64_t numElements() const {
    int64_t N = 1;
    for (int64_t D : Shape)
      N *= D;
    return N;
  }
  size_t bytes() const { return size_t(numElements()) * dtypeSize(Type); }
  unsigned rank() const { return unsigned(Shape.size()); }
  /// `float32[64,784]`.
  std::string str() const;
};

} // namespace mdrt

#endif // MDRT_TENSOR_H
