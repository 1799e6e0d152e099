//===- PlanEmitter.h - Writing FlatBuffers plans ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Turns scheduled, memory-planned graphs into a plan (schema/plan.fbs): the
// training step as program "train" and, when given, the evaluation step as
// program "eval" sharing the training step's variables.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_PLAN_PLANEMITTER_H
#define MDPLAN_PLAN_PLANEMITTER_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace flatbuffers {
class DetachedBuffer;
} // namespace flatbuffers

namespace mdplan {

/// The bytes of an emitted plan, in the memory the FlatBuffers builder
/// wrote them to: a large plan is hundreds of megabytes, not worth a copy.
class PlanBytes {
public:
  PlanBytes();
  explicit PlanBytes(flatbuffers::DetachedBuffer Buf);
  PlanBytes(PlanBytes &&) noexcept;
  PlanBytes &operator=(PlanBytes &&) noexcept;
  ~PlanBytes();

  const uint8_t *data() const;
  size_t size() const;
  bool empty() const { return size() == 0; }
  llvm::ArrayRef<uint8_t> bytes() const { return {data(), size()}; }
  /// A copy, for APIs that take ownership (mdrt::PlanFile::fromBytes).
  std::vector<uint8_t> toVector() const {
    return std::vector<uint8_t>(data(), data() + size());
  }

private:
  std::unique_ptr<flatbuffers::DetachedBuffer> Buf;
};

/// The producer string written into plans: "mdplan <version>".
llvm::StringRef planProducer();

/// Emits the plan. \p Train and \p Eval (optional) must have gone through
/// plan-memory; \p Eval's variables must be placed like \p Train's.
llvm::Expected<PlanBytes> emitPlan(Graph &Train, Graph *Eval,
                                   const DeploymentConfig &Config);

} // namespace mdplan

#endif // MDPLAN_PLAN_PLANEMITTER_H
