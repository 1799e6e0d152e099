//===- plan-fuzzer.cpp - Fuzzing the plan loader, verifier and executor ---===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: a plan file (.mdp). The target loads it with the runtime's
// verifier; a plan that passes is printed as text (mdplan --emit=plan-text
// and mdrun --print-plan print it so) and run once on the CPU. Rejected
// plans are fine; a crash, a sanitizer report or a hang is not: the
// verifier's promise is that a plan it accepts is safe to run.
//
//===----------------------------------------------------------------------===//

#include "FuzzRun.h"

#include <sstream>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  auto Plan = mdrt::PlanFile::fromBytes(std::vector<uint8_t>(Data, Data + Size),
                                        "fuzz.mdp");
  if (!Plan.isOk())
    return 0;
  std::shared_ptr<const mdrt::PlanFile> P(Plan.take());
  std::ostringstream Text;
  mdrt::printPlanText(P->plan(), Text);
  mdplan::fuzz::runPlanOnce(std::move(P));
  return 0;
}
