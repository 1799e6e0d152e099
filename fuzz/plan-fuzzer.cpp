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
// Mutations are mostly structure-aware (PlanMutator.cpp, built where flatc
// is found), one in four a byte-level mutation of libFuzzer's.
//
//===----------------------------------------------------------------------===//

#include "FuzzRun.h"
#include "PlanMutator.h"

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

#ifdef MDPLAN_FUZZ_HAVE_MUTATOR
/// libFuzzer's own mutation (absent without libFuzzer: weak).
extern "C" size_t LLVMFuzzerMutate(uint8_t *Data, size_t Size, size_t MaxSize)
    __attribute__((weak));

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *Data, size_t Size,
                                          size_t MaxSize, unsigned Seed) {
  // Only plans the verifier accepts are unpacked: FlatBuffers' object API
  // would read a misaligned vector the verifier rejects.
  if (Seed % 4 != 0 && mdrt::verifyPlan(Data, Size).isOk())
    if (size_t N = mdplan::fuzz::mutatePlan(Data, Size, MaxSize, Seed))
      return N;
  return LLVMFuzzerMutate ? LLVMFuzzerMutate(Data, Size, MaxSize) : Size;
}
#endif
