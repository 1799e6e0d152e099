//===- FuzzRun.h - Running a plan once, for the fuzz targets ----*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// What the fuzz targets do with a plan that loaded: build an executor (GPU
/// devices mapped onto the CPU), initialize the variables and run every
/// program once on zero inputs. Errors are expected and ignored; crashes,
/// sanitizer reports and hangs are what the fuzzer looks for.
///
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FUZZ_FUZZRUN_H
#define MDPLAN_FUZZ_FUZZRUN_H

#include "mdrt/Executor.h"
#include "mdrt/Plan.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

namespace mdplan {
namespace fuzz {

/// MDPLAN_FUZZ_VERBOSE=1 in the environment: print why inputs were
/// rejected (to see what a corpus exercises).
inline bool verbose() {
  static const bool On = [] {
    const char *V = std::getenv("MDPLAN_FUZZ_VERBOSE");
    return V && *V && *V != '0';
  }();
  return On;
}

/// Plans whose devices need more memory than this are only loaded, not run:
/// the fuzzer would spend its time allocating.
constexpr uint64_t MaxRunBytes = uint64_t(64) << 20;

/// The memory \p P's devices ask for.
inline uint64_t planBytes(const mdrt::fb::Plan &P) {
  uint64_t Sum = 0;
  if (P.devices())
    for (const auto *D : *P.devices()) {
      // Each term is checked before it is added: no sum can wrap.
      for (uint64_t B : {D->arena_bytes(), D->persistent_bytes()}) {
        if (B > MaxRunBytes - Sum)
          return UINT64_MAX;
        Sum += B;
      }
    }
  return Sum;
}

/// Runs every program of \p Plan once (see the file comment).
inline void runPlanOnce(std::shared_ptr<const mdrt::PlanFile> Plan) {
  if (planBytes(Plan->plan()) > MaxRunBytes) {
    if (verbose())
      std::cerr << "not run: the plan needs more than " << (MaxRunBytes >> 20)
                << " MiB\n";
    return;
  }
  mdrt::ExecutorOptions EO;
  EO.Threads = 1;
  EO.Seed = 1;
  EO.SoftPlacement = true;
  auto Report = [](const char *What, const mdrt::Status &S) {
    if (verbose())
      std::cerr << What << ": " << S.message() << '\n';
  };
  auto Exec = mdrt::Executor::create(std::move(Plan), EO);
  if (!Exec.isOk())
    return Report("executor", Exec.status());
  mdrt::Executor &E = **Exec;
  if (mdrt::Status S = E.initialize(); !S.isOk())
    return Report("initialize", S);
  const auto *Programs = E.plan().plan().programs();
  if (!Programs)
    return;
  std::vector<mdrt::OutputValue> Outs;
  for (int P = 0, N = int(Programs->size()); P < N; ++P) {
    for (const mdrt::InputSlot &S : E.inputs(P))
      if (S.Host)
        std::memset(S.Host, 0, S.Type.bytes());
    if (mdrt::Status S = E.run(P, 0); !S.isOk())
      return Report("run", S);
    (void)E.readOutputs(P, Outs);
  }
}

} // namespace fuzz
} // namespace mdplan

#endif // MDPLAN_FUZZ_FUZZRUN_H
