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

#include "FuzzRun.h"

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Plan/Compiler.h"
#include "mdplan/Support/Diagnostic.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

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
      std::string Msg = llvm::toString(Model.takeError());
      if (fuzz::verbose())
        llvm::errs() << Msg << '\n';
      return 0; // The same for every deployment.
    }
    DeploymentConfig C = deployment(Variant);
    if (llvm::Error E = C.validate()) {
      llvm::errs() << "fuzz target bug: " << llvm::toString(std::move(E))
                   << '\n';
      std::abort();
    }
    PassContext Ctx(C);
    CompileOptions CO;
    auto Comp = compileModel(std::move(*Model), Ctx, CO);
    if (!Comp) {
      std::string Msg = llvm::toString(Comp.takeError());
      // The emitter checks its plan with the runtime's verifier; a model
      // that passed every pass must give a plan the runtime accepts.
      if (llvm::StringRef(Msg).contains("internal error")) {
        llvm::errs() << Msg << '\n';
        std::abort();
      }
      if (fuzz::verbose())
        llvm::errs() << "deployment " << Variant << ": " << Msg << '\n';
      continue;
    }
    if (Comp->Plan.empty())
      continue;
    auto Plan = mdrt::PlanFile::fromBytes(Comp->Plan.toVector(), "fuzz.mdp");
    if (!Plan.isOk()) {
      llvm::errs() << "mdplan wrote a plan the runtime rejects: "
                   << Plan.status().message() << '\n';
      std::abort();
    }
    fuzz::runPlanOnce(std::shared_ptr<const mdrt::PlanFile>(Plan.take()));
  }
  return 0;
}
