//===- FuzzCompile.h - Compiling a model, for the fuzz targets --*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// What the model and deployment fuzz targets do with a model and a
/// deployment: compile them with the default pipeline, check that the plan
/// loads in the runtime, and run it once (FuzzRun.h).
///
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_FUZZCOMPILE_H
#define MDPLAN_FUZZ_FUZZCOMPILE_H

#include "FuzzRun.h"

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Plan/Compiler.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <memory>

namespace mdplan {
namespace fuzz {

/// Stops the fuzzer: \p Why is a bug, not a rejected input.
[[noreturn]] inline void bug(const llvm::Twine &Why) {
  llvm::errs() << Why << '\n';
  std::abort();
}

/// Consumes \p E, an input rejected with a clean error (printed with
/// MDPLAN_FUZZ_VERBOSE). An internal error is a bug.
inline void rejected(llvm::Error E, const llvm::Twine &Context = "") {
  std::string Msg = llvm::toString(std::move(E));
  // compileModel verifies the plan it emits with the runtime's verifier and
  // reports a failure as an internal error, as do passes that catch their
  // own inconsistencies ("schedule: internal error: ..."). Only a message
  // that starts so counts: an input's own text may say "internal error".
  llvm::StringRef M(Msg);
  M.consume_front("error: "); // Errors without a location.
  size_t At = M.find("internal error:");
  if (At != llvm::StringRef::npos) {
    llvm::StringRef Before = M.take_front(At);
    if (Before.empty() ||
        (Before.endswith(": ") &&
         Before.drop_back(2).find_first_not_of("abcdefghijklmnopqrstuvwxyz-") ==
             llvm::StringRef::npos))
      bug(Context + Msg);
  }
  if (verbose())
    llvm::errs() << Context << Msg << '\n';
}

/// Compiles \p Model for \p C, loads the plan with the runtime's verifier
/// and runs it once.
inline void compileAndRun(std::unique_ptr<Graph> Model,
                          const DeploymentConfig &C,
                          const llvm::Twine &Context = "") {
  PassContext Ctx(C);
  auto Comp = compileModel(std::move(Model), Ctx, CompileOptions());
  if (!Comp)
    return rejected(Comp.takeError(), Context);
  if (Comp->Plan.empty())
    return;
  auto Plan = mdrt::PlanFile::fromBytes(Comp->Plan.toVector(), "fuzz.mdp");
  if (!Plan.isOk())
    bug("mdplan wrote a plan the runtime rejects: " + Plan.status().message());
  runPlanOnce(std::shared_ptr<const mdrt::PlanFile>(Plan.take()));
}

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_FUZZCOMPILE_H
