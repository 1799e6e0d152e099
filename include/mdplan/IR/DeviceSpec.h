//===- DeviceSpec.h - Partial device names ----------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A device spec names a device, possibly partially:
//
//   /job:worker/replica:0/task:1/device:GPU:3
//
// Every field is optional. Specs parse from every form TensorFlow accepts
// (legacy `/cpu:0`, `gpu`, any field order), print in one canonical order,
// and merge field by field.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_IR_DEVICESPEC_H
#define MDPLAN_IR_DEVICESPEC_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mdplan {

class DeviceSpec {
public:
  DeviceSpec() = default;

  /// Parses \p Text. Pieces are separated by '/', empty pieces are ignored,
  /// each piece is `job:NAME`, `replica:N`, `task:N`, `device:TYPE[:N|:*]`,
  /// or a legacy `TYPE[:N|:*]` (`cpu:0`, `gpu`). Device types are upper-cased.
  /// Errors (as plain llvm::Error messages without a location): an unknown
  /// field, a bad or negative integer, an empty name, a field given twice,
  /// two device types.
  static llvm::Expected<DeviceSpec> parse(llvm::StringRef Text);

  /// Merges \p Inner into \p Outer: every field set in Inner wins. Type and
  /// index are separate fields.
  static DeviceSpec merge(const DeviceSpec &Outer, const DeviceSpec &Inner);

  /// The canonical form `/job:J/replica:R/task:T/device:TYPE:IDX`, missing
  /// fields left out, `:*` for a type without an index; "" when empty.
  std::string toString() const;
  void print(llvm::raw_ostream &OS) const { OS << toString(); }

  bool empty() const { return !Job && !Replica && !Task && !Type && !Index; }
  /// True when job, replica, task, type and index are all known.
  bool isComplete() const { return Job && Replica && Task && Type && Index; }

  /// True when every field set in this spec has the same value in \p Other
  /// (this spec is satisfied by Other).
  bool isSatisfiedBy(const DeviceSpec &Other) const;

  bool operator==(const DeviceSpec &O) const {
    return Job == O.Job && Replica == O.Replica && Task == O.Task &&
           Type == O.Type && Index == O.Index;
  }
  bool operator!=(const DeviceSpec &O) const { return !(*this == O); }

  std::optional<std::string> Job;
  std::optional<int> Replica;
  std::optional<int> Task;
  /// Upper-case device type: "CPU", "GPU", ...
  std::optional<std::string> Type;
  /// Device index; unset means any (`*`).
  std::optional<int> Index;
};

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &OS,
                                     const DeviceSpec &D) {
  D.print(OS);
  return OS;
}

} // namespace mdplan

#endif // MDPLAN_IR_DEVICESPEC_H
