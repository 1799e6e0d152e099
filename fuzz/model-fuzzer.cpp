//===- model-fuzzer.cpp - Fuzzing the model reader and the passes ---------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: a model in the text format (.mdg). The target reads it, compiles it
// under three deployments (one clone on the CPU; two mirrored clones on two
// GPUs; two clones on GPUs with two ps tasks) with the default pipeline and
// the evaluation program, and runs the plans it gets once on the CPU. A
// model the reader or a pass rejects is fine; a crash, a sanitizer report,
// an internal error (the emitter checks its plan with the runtime's
// verifier and reports a plan that fails it so) or a hang is not.
//
//===----------------------------------------------------------------------===//

#include "FuzzCompile.h"
#include "TextProtoMutator.h"

#include "mdplan/Frontend/ModelReader.h"

using namespace mdplan;

static DeploymentConfig deployment(int Variant) {
  DeploymentConfig C;
  switch (Variant) {
  case 0:
    C.CloneOnCPU = true;
    break;
  case 1:
    C.NumClones = 2;
    C.Strat = Strategy::Mirrored;
    break;
  default:
    C.NumClones = 2;
    C.NumPsTasks = 2;
    break;
  }
  return C;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  ReadOptions RO;
  RO.Format = InputFormat::Text;
  for (int Variant = 0; Variant < 3; ++Variant) {
    auto Model = readModelBuffer(Text, "fuzz.mdg", RO);
    if (!Model) {
      fuzz::rejected(Model.takeError());
      return 0; // The same for every deployment.
    }
    DeploymentConfig C = deployment(Variant);
    if (llvm::Error E = C.validate())
      fuzz::bug("fuzz target bug: " + llvm::toString(std::move(E)));
    fuzz::compileAndRun(std::move(*Model), C,
                        "deployment " + llvm::Twine(Variant) + ": ");
  }
  return 0;
}

/// libFuzzer's own mutation (absent without libFuzzer: weak).
extern "C" size_t LLVMFuzzerMutate(uint8_t *Data, size_t Size, size_t MaxSize)
    __attribute__((weak));

/// Three mutations in four change the parsed message (TextProtoMutator.cpp);
/// the others, and inputs that do not parse, are libFuzzer's byte mutations.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *Data, size_t Size,
                                          size_t MaxSize, unsigned Seed) {
  if (Seed % 4 != 0)
    if (size_t N = fuzz::mutateTextProto("mdplan.desc.Model", Data, Size,
                                         MaxSize, Seed, fuzz::opNames()))
      return N;
  return LLVMFuzzerMutate ? LLVMFuzzerMutate(Data, Size, MaxSize) : Size;
}
