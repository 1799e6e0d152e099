//===- TextParser.h - A fast path for protobuf's text format ----*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Protobuf's TextFormat parser is general (extensions, Any, every number
// syntax, its own error messages) and slow: it spends most of the time of
// reading a large model and keeps the field positions in a tree of maps
// that takes as long again to query and to free. The reader parses the text
// with the parser below first. It reads the common part of the format (the
// part mdplan itself writes and every example uses) into the same message
// protobuf's parser would build, records the same field positions, and
// declines everything else: anything it does not know, and every error.
// Declined text goes to protobuf's parser, which then accepts it or reports
// the error, so what is accepted and every message stay protobuf's.
// compareTextParsers() checks the two agree (unit tests and the fuzzers).
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_LIB_FRONTEND_TEXTPARSER_H
#define MDPLAN_LIB_FRONTEND_TEXTPARSER_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace google {
namespace protobuf {
class FieldDescriptor;
class Message;
} // namespace protobuf
} // namespace google

namespace mdplan {

/// The field positions of a parse, as protobuf's ParseInfoTree gives them:
/// for every message of the parse (a tree; 0 is the top-level message), the
/// position of the name of each occurrence of a field (a list `f: [1, 2]`
/// is one occurrence) and the tree of each nested message.
class TextLocations {
public:
  using TreeId = uint32_t;
  static constexpr TreeId NoTree = ~TreeId(0);

  /// The 0-based line and column (tabs advance to the next multiple of 8)
  /// of occurrence \p Index of \p F in tree \p T (-1, for singular fields,
  /// means the first), or {-1, -1} when there is none.
  std::pair<int, int> location(TreeId T,
                               const google::protobuf::FieldDescriptor *F,
                               int Index) const;
  /// The tree of nested message \p Index of \p F in \p T (-1: the first),
  /// or NoTree.
  TreeId nested(TreeId T, const google::protobuf::FieldDescriptor *F,
                int Index) const;

private:
  friend class FastTextParser;
  enum Kind : uint32_t { Position, Nested };
  struct Record {
    const google::protobuf::FieldDescriptor *F;
    Kind K;
    /// Position: line and column; Nested: the tree and 0.
    int32_t A, B;
  };
  /// The records of \p T with field \p F and kind \p K, in parse order.
  std::pair<const Record *, const Record *>
  find(TreeId T, const google::protobuf::FieldDescriptor *F, Kind K) const;

  /// Every tree's records, sorted by field and kind, each field's in parse
  /// order.
  std::vector<Record> Records;
  /// Per tree, its range in Records.
  std::vector<std::pair<uint32_t, uint32_t>> Trees;
};

/// Parses \p Text into \p M, which must be empty, recording the positions
/// in \p Locs. Returns false when the text leaves the part of the format
/// this parser reads, errors included: \p M and \p Locs are then in an
/// unspecified state, and the text is for protobuf's parser. Messages may
/// nest fewer than \p MaxNesting levels deep.
bool parseTextFast(llvm::StringRef Text, google::protobuf::Message &M,
                   int MaxNesting, TextLocations &Locs);

/// For tests and fuzzing: parses \p Text into two fresh copies of
/// \p Prototype's type, with parseTextFast and with protobuf's parser (the
/// same nesting limit), and compares the messages and every position
/// either parse records. \p FastAccepted tells whether the fast path read
/// the text. Returns the first difference, or "" when they agree (or the
/// fast path declined).
std::string compareTextParsers(llvm::StringRef Text,
                               const google::protobuf::Message &Prototype,
                               int MaxNesting, bool *FastAccepted = nullptr);

} // namespace mdplan

#endif // MDPLAN_LIB_FRONTEND_TEXTPARSER_H
