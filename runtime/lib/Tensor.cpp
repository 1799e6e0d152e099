//===- Tensor.cpp - Element types and tensor descriptions -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Tensor.h"

using namespace mdrt;

const char *mdrt::dtypeName(DType T) {
  switch (T) {
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
  default:
    return "invalid";
  }
}

std::string TensorDesc::str() const {
  std::string S = dtypeName(Type);
  S += '[';
  for (size_t I = 0; I < Shape.size(); ++I) {
    if (I)
      S += ',';
    S += std::to_string(Shape[I]);
  }
  S += ']';
  return S;
}
