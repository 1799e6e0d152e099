//===- model-fuzzer.cpp - Fuzzing the model reader and the passes ---------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: a model in the text format (.mdg). The target first checks that the
// reader's own text parser, where it reads the text, agrees with protobuf's
// (the same message and field positions). Then it reads it, compiles it
// under five deployments (one clone on the CPU; two mirrored clones on two
// GPUs; two clones on GPUs with two ps tasks; the second of two mirrored
// workers; the second of two workers with a ps task) with the default
// pipeline and the evaluation program, and runs the plans it gets once on
// the CPU (a mirrored worker's plan only loads: it needs its processes). A
// model the reader or a pass rejects is fine; a crash, a sanitizer report,
// an internal error (the emitter checks its plan with the runtime's rules
// and reports a plan that fails them so), the parsers disagreeing, a plan
// the runtime's loader rejects, or a hang is not.
//
//===----------------------------------------------------------------------===//

#include "FuzzCompile.h"
#include "GraphMutator.h"
#include "TextProtoMutator.h"

#include "mdplan/Frontend/ModelReader.h"

using namespace mdplan;

constexpr int NumDeployments = 5;

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
  case 2:
    C.NumClones = 2;
    C.NumPsTasks = 2;
    break;
  case 3: // The second worker of two, mirrored: cross-process all-reduces.
    C.CloneOnCPU = true;
    C.Strat = Strategy::Mirrored;
    C.NumReplicas = 2;
    C.ReplicaId = 1;
    break;
  default: // The second worker of two, with a ps task.
    C.NumClones = 2;
    C.NumReplicas = 2;
    C.ReplicaId = 1;
    C.NumPsTasks = 1;
    break;
  }
  return C;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  // The reader's own text parser agrees with protobuf's where it reads.
  std::string Difference = checkTextFastPath(Text, TextFileKind::Model);
  if (!Difference.empty())
    fuzz::bug("the text parsers disagree: " + Difference);
  ReadOptions RO;
  RO.Format = InputFormat::Text;
  for (int Variant = 0; Variant < NumDeployments; ++Variant) {
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

/// Of four mutations, two edit the graph (GraphMutator.cpp), one a field of
/// the parsed message (TextProtoMutator.cpp); the fourth, and inputs that do
/// not parse, are libFuzzer's byte mutations.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *Data, size_t Size,
                                          size_t MaxSize, unsigned Seed) {
  switch (Seed % 4) {
  case 1:
  case 2:
    if (size_t N = fuzz::mutateModelGraph(Data, Size, MaxSize, Seed / 4))
      return N;
    break;
  case 3:
    if (size_t N = fuzz::mutateTextProto("mdplan.desc.Model", Data, Size,
                                         MaxSize, Seed, fuzz::opNames()))
      return N;
    break;
  default:
    break;
  }
  return LLVMFuzzerMutate ? LLVMFuzzerMutate(Data, Size, MaxSize) : Size;
}
