//===- GraphMutator.h - Graph-level mutations of a model --------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_GRAPHMUTATOR_H
#define MDPLAN_FUZZ_GRAPHMUTATOR_H

#include <cstddef>
#include <cstdint>

namespace mdplan {
namespace fuzz {

/// Parses \p Data (\p Size bytes, room for \p MaxSize) as a model in the
/// text format, edits its graph one to three times, chosen by \p Seed (an
/// op spliced in, two tensors combined, an input rerouted, a loss or a
/// control edge added, a node colocated, placed or removed), and prints it
/// back into \p Data. Returns the new size, or 0 when the input does not
/// parse, has no node or the result does not fit.
size_t mutateModelGraph(uint8_t *Data, size_t Size, size_t MaxSize,
                        unsigned Seed);

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_GRAPHMUTATOR_H
