//===- main.cpp - Using mdplan as a library -------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// consumer MODEL: reads a model, compiles it for two CPU clones with the
// library's passes, prints where each variable went and the size of the
// plan, then loads the plan into the runtime and runs one step.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Plan/Compiler.h"

#include "mdrt/Executor.h"

#include "llvm/Support/raw_ostream.h"

using namespace mdplan;

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: consumer MODEL\n";
    return 2;
  }
  auto G = readModelFile(argv[1], {});
  if (!G) {
    printErrors(G.takeError(), llvm::errs());
    return 1;
  }
  DeploymentConfig Config;
  Config.NumClones = 2;
  Config.CloneOnCPU = true;
  PassContext Ctx(Config);
  auto C = compileModel(std::move(*G), Ctx, CompileOptions());
  if (!C) {
    printErrors(C.takeError(), llvm::errs());
    return 1;
  }
  for (const auto &N : C->Train->nodes())
    if (N->getOp().isVariable())
      llvm::outs() << "variable " << N->getName() << " on "
                   << C->Train->deviceOf(*N).toString() << '\n';
  llvm::outs() << "plan bytes " << C->Plan.size() << '\n';

  auto Plan = mdrt::PlanFile::fromBytes(C->Plan.toVector(), argv[1]);
  if (!Plan.isOk()) {
    llvm::errs() << Plan.status().message() << '\n';
    return 1;
  }
  auto Exec = mdrt::Executor::create(
      std::shared_ptr<const mdrt::PlanFile>(Plan.take()), {});
  if (!Exec.isOk() || !(*Exec)->initialize().isOk()) {
    llvm::errs() << "cannot run the plan\n";
    return 1;
  }
  int Train = (*Exec)->programIndex("train");
  if (!(*Exec)->run(Train, 0).isOk())
    return 1;
  std::vector<mdrt::OutputValue> Out;
  if (!(*Exec)->readOutputs(Train, Out).isOk())
    return 1;
  for (const auto &O : Out)
    if (O.Name == "total_loss" && O.Kind == mdrt::fb::OutputKind::Loss)
      llvm::outs() << "ran one step, total_loss is finite: "
                   << (O.Values[0] == O.Values[0] ? "yes" : "no") << '\n';
  return 0;
}
