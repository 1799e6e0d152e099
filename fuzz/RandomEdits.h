//===- RandomEdits.h - Random choices of the mutators -----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// What the structure-aware mutators (PlanMutator.cpp, TextProtoMutator.cpp)
/// share: a seeded generator and the replacement values they try, the edges
/// where code goes wrong (0, -1, off by one, doubled, NaN, infinity).
///
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_RANDOMEDITS_H
#define MDPLAN_FUZZ_RANDOMEDITS_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace mdplan {
namespace fuzz {

class RandomEdits {
protected:
  explicit RandomEdits(unsigned Seed) : R(Seed) {}

  /// A number in [0, N); N > 0.
  size_t pick(size_t N) {
    return std::uniform_int_distribution<size_t>(0, N - 1)(R);
  }
  bool coin() { return pick(2) == 0; }
  template <typename T> T &any(std::vector<T> &V) { return V[pick(V.size())]; }

  /// An interesting replacement for integer \p X.
  int64_t nearby(int64_t X) {
    switch (pick(9)) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return -1;
    case 3:
      return int64_t(uint64_t(X) + 1); // Wraps: no signed overflow.
    case 4:
      return int64_t(uint64_t(X) - 1);
    case 5:
      return int64_t(uint64_t(X) * 2);
    case 6:
      return X / 2;
    case 7:
      return std::numeric_limits<int32_t>::max();
    default:
      return int64_t(pick(64));
    }
  }

  /// An interesting replacement for real \p X.
  double nearbyReal(double X) {
    switch (pick(8)) {
    case 0:
      return 0;
    case 1:
      return -X;
    case 2:
      return X * 1e6;
    case 3:
      return std::numeric_limits<double>::quiet_NaN();
    case 4:
      return std::numeric_limits<double>::infinity();
    case 5:
      return 1;
    case 6:
      return 1e-300;
    default:
      return X + 0.5;
    }
  }

private:
  std::minstd_rand R;
};

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_RANDOMEDITS_H
