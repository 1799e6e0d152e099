//===- Random.h - The counter-based random numbers --------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Every random draw of the runtime (variable initializers, dropout masks,
// data shuffling) is a pure function of (seed, stream, step, element), so
// the same plan draws the same numbers on CPU and GPU, in any thread order,
// and after a resume.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_RANDOM_H
#define MDRT_RANDOM_H

#include "mdrt/HostDevice.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mdrt {

/// splitmix64's finalizer.
MDRT_HOST_DEVICE inline uint64_t mixBits(uint64_t Z) {
  Z += 0x9e3779b97f4a7c15ull;
  Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ull;
  Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebull;
  return Z ^ (Z >> 31);
}

/// 64 random bits for element \p Element of draw (\p Seed, \p Stream, \p Step).
MDRT_HOST_DEVICE inline uint64_t randomBits(uint64_t Seed, uint64_t Stream,
                                            uint64_t Step, uint64_t Element) {
  return mixBits(Seed ^ mixBits(Stream ^ mixBits(Step ^ mixBits(Element))));
}

/// A uniform double in [0, 1).
MDRT_HOST_DEVICE inline double uniformRandom(uint64_t Seed, uint64_t Stream,
                                             uint64_t Step, uint64_t Element) {
  return double(randomBits(Seed, Stream, Step, Element) >> 11) *
         (1.0 / 9007199254740992.0);
}

/// A uniform float in [0, 1) (24 random bits, exact in float).
MDRT_HOST_DEVICE inline float uniformRandomFloat(uint64_t Seed, uint64_t Stream,
                                                 uint64_t Step,
                                                 uint64_t Element) {
  return float(randomBits(Seed, Stream, Step, Element) >> 40) *
         (1.0f / 16777216.0f);
}

/// The FNV-1a hash of \p Size bytes, continuing from \p H: hashing two
/// pieces one after the other hashes their concatenation.
inline uint64_t hashBytes(const char *Data, size_t Size,
                          uint64_t H = 0xcbf29ce484222325ull) {
  for (size_t I = 0; I < Size; ++I)
    H = (H ^ uint64_t(uint8_t(Data[I]))) * 0x100000001b3ull;
  return H;
}

/// A 64-bit digest of \p Size bytes, continuing from \p H, a word at a
/// time: for comparing large buffers (plans, datasets) between processes,
/// not for streams.
inline uint64_t digestBytes(const uint8_t *Data, size_t Size,
                            uint64_t H = 0x9e3779b97f4a7c15ull) {
  H ^= Size;
  size_t I = 0;
  for (; I + 8 <= Size; I += 8) {
    uint64_t W;
    std::memcpy(&W, Data + I, 8);
    H = (H ^ W) * 0xff51afd7ed558ccdull;
    H ^= H >> 32;
  }
  for (; I < Size; ++I)
    H = (H ^ Data[I]) * 0x100000001b3ull;
  return H;
}

/// A 64-bit hash of a string (FNV-1a), for streams derived from names.
inline uint64_t hashName(const char *S, uint64_t H = 0xcbf29ce484222325ull) {
  for (; *S; ++S)
    H = (H ^ uint64_t(uint8_t(*S))) * 0x100000001b3ull;
  return H;
}

} // namespace mdrt

#endif // MDRT_RANDOM_H
