//===- Plan.h - Loading, verifying and printing plans -----------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The runtime-facing side of the plan format (schema/plan.fbs). It needs
// the FlatBuffers headers only: no LLVM, no Protobuf. mdplan links it too,
// to print the plans it writes exactly as mdrun reads them.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_PLAN_H
#define MDRT_PLAN_H

#include "mdrt/Status.h"

#include "mdplan/plan_generated.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace mdrt {

/// The plan format version this runtime reads and mdplan writes.
constexpr uint32_t kPlanVersion = 2;

namespace fb = mdplan::plan;

/// Checks \p Size bytes at \p Data: the FlatBuffers verifier (structure,
/// file identifier), then the plan's own rules: version, buffer ids, sizes
/// and offsets inside their device's memory, views inside their root,
/// variables and constants on persistent buffers, kernel signatures, waits
/// naming kernels of other devices, collectives (their devices, kernels
/// and replicas, which only a mirrored deployment of that many replicas
/// may span), inputs and outputs. Never crashes on any input.
Status verifyPlan(const uint8_t *Data, size_t Size);

/// verifyPlan without the FlatBuffers verifier, for a plan this process
/// built with a FlatBufferBuilder, whose structure is sound by
/// construction: the fields the schema requires (which the builder only
/// asserts), then the plan's own rules. mdplan checks every plan it writes
/// with it. Not for bytes from anywhere else.
Status checkBuiltPlan(const uint8_t *Data, size_t Size);

/// The graph format's name of each initializer kind, in InitKind order
/// (`zeros`, ..., `glorot_uniform`, ...): the one list the compiler's
/// Variable op, the emitter and the plan printer use.
const std::vector<std::string> &initKindNames();
/// The name of \p K, or "unknown" for a value outside the enum.
const char *initKindName(fb::InitKind K);

/// The deployment's job names, with the defaults of plans that do not
/// record them ("worker", "ps").
std::string workerJobName(const fb::Deployment &D);
std::string psJobName(const fb::Deployment &D);

/// A verified plan owning its bytes.
class PlanFile {
public:
  /// Reads and verifies \p Path.
  static StatusOr<std::unique_ptr<PlanFile>> load(const std::string &Path);
  /// Verifies \p Bytes; \p Name is used in messages.
  static StatusOr<std::unique_ptr<PlanFile>>
  fromBytes(std::vector<uint8_t> Bytes, const std::string &Name);

  const fb::Plan &plan() const { return *fb::GetPlan(Bytes.data()); }
  const std::vector<uint8_t> &bytes() const { return Bytes; }
  const std::string &name() const { return Name; }

  /// The program named \p Name, or null.
  const fb::Program *program(const std::string &Name) const;

private:
  std::vector<uint8_t> Bytes;
  std::string Name;
};

/// The integer attribute \p Name of \p K (a Send's or Recv's `channel`,
/// a OneHot's `depth`), or \p Default when it has none of that kind.
int64_t kernelIntAttr(const fb::Kernel &K, std::string_view Name,
                      int64_t Default = -1);

/// Prints \p P in the text form of `mdplan --emit=plan-text`.
void printPlanText(const fb::Plan &P, std::ostream &OS);

/// "1.5 MiB" style.
std::string formatBytes(uint64_t Bytes);

/// \p Path with every "{replica}" replaced by \p Replica: the paths of the
/// plans (and traces) of a multi-worker run, one per replica.
std::string replicaPath(std::string Path, int Replica);

/// Whether \p A and \p B name one file or directory (through links too;
/// by their absolute, normalized names where either does not exist yet).
bool sameFile(const std::string &A, const std::string &B);

/// "{Replica}" (any case but the right one) when \p Path has it: a path
/// the tools would otherwise take literally. Empty when it has none.
std::string misspelledReplica(const std::string &Path);

} // namespace mdrt

#endif // MDRT_PLAN_H
