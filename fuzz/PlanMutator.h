//===- PlanMutator.h - Structure-aware mutations of plans -------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The plan fuzz target's custom mutator (PlanMutator.cpp).
///
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_PLANMUTATOR_H
#define MDPLAN_FUZZ_PLANMUTATOR_H

#include <cstddef>
#include <cstdint>

namespace mdplan {
namespace fuzz {

/// Rewrites the plan in \p Data (\p Size bytes, room for \p MaxSize), which
/// must have passed mdrt::verifyPlan (its vectors are aligned), with
/// one to three changes to its objects, chosen by \p Seed. Returns the new
/// size, or 0 when \p Data is not a well-formed FlatBuffers plan or the
/// result would not fit (the caller then mutates the bytes instead).
size_t mutatePlan(uint8_t *Data, size_t Size, size_t MaxSize, unsigned Seed);

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_PLANMUTATOR_H
