//===- EnvFlag.h - On/off switches from the environment ---------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime (host code; lib/cuda's .cu files include it too).
// The runtime's switches (MDRT_CUDNN_FIND, MDRT_CUDA_CONV_GEMM,
// MDRT_CUDA_PIN_HOST, MDRT_CUDA_NO_CUDNN; docs/Cuda.md) read one way.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_ENVFLAG_H
#define MDRT_LIB_ENVFLAG_H

#include <cstdlib>
#include <cstring>

namespace mdrt {

/// Whether the environment variable \p Name is set to something other than
/// "" and "0".
inline bool envFlag(const char *Name) {
  const char *V = std::getenv(Name);
  return V && *V && std::strcmp(V, "0") != 0;
}

/// A switch that is on unless the environment sets it to 0 (unset or
/// empty: \p Default).
inline bool envFlagOr(const char *Name, bool Default) {
  const char *V = std::getenv(Name);
  if (!V || !*V)
    return Default;
  return std::strcmp(V, "0") != 0;
}

} // namespace mdrt

#endif // MDRT_LIB_ENVFLAG_H
