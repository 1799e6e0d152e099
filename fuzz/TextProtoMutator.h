//===- TextProtoMutator.h - Mutations of text protos -----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The custom mutator of the model and deployment fuzz targets
/// (TextProtoMutator.cpp).
///
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_TEXTPROTOMUTATOR_H
#define MDPLAN_FUZZ_TEXTPROTOMUTATOR_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace google {
namespace protobuf {
class Message;
} // namespace protobuf
} // namespace google

namespace mdplan {
namespace fuzz {

/// Parses \p Data (\p Size bytes, room for \p MaxSize) into \p M as a
/// text-format message (the parser's complaints dropped), applies \p Edit
/// one to three times, as \p Seed says, and prints \p M back into \p Data.
/// Returns the new size, or 0 when the input does not parse, an edit
/// fails or the result does not fit. Both mutators below use it.
size_t
editTextProto(google::protobuf::Message &M, uint8_t *Data, size_t Size,
              size_t MaxSize, unsigned Seed,
              const std::function<bool(google::protobuf::Message &)> &Edit);

/// Parses \p Data (\p Size bytes, room for \p MaxSize) as a text-format
/// message of type \p TypeName ("mdplan.desc.Model"), changes one to three
/// of its fields, chosen by \p Seed (strings are replaced by others of the
/// message or of \p Strings), and prints it back into \p Data. Returns the
/// new size, or 0 when the input does not parse or the result does not fit
/// (the caller then mutates the bytes instead).
size_t mutateTextProto(const char *TypeName, uint8_t *Data, size_t Size,
                       size_t MaxSize, unsigned Seed,
                       const std::vector<std::string> &Strings);

/// The op names of the registry (include/mdplan/IR/Ops.def).
const std::vector<std::string> &opNames();

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_TEXTPROTOMUTATOR_H
