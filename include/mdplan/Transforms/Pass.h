//===- Pass.h - Passes and the pass manager ---------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A pass transforms a Graph, given the deployment. Passes are registered in
// Passes.def under a kebab-case name; a pipeline is a comma-separated list
// of names, each optionally followed by {option=value,...}.
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_TRANSFORMS_PASS_H
#define MDPLAN_TRANSFORMS_PASS_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Deploy/Placement.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <vector>

namespace mdplan {

/// What every pass may read and record.
struct PassContext {
  /// Keeps a reference to \p Config, which must outlive the context.
  explicit PassContext(const DeploymentConfig &Config) : Config(Config) {}
  PassContext(DeploymentConfig &&) = delete;

  const DeploymentConfig &Config;
  DiagnosticHandler Diags;
  /// Nodes whose placement should be explained (by name).
  llvm::StringSet<> Explain;
  /// Filled by place-devices for the nodes in Explain.
  llvm::MapVector<const Node *, PlacementRecord> Explanations;
  /// When set, prune records here the model variables it removes (name and
  /// source location) instead of warning about them: the compiler warns
  /// once it knows that the evaluation program, built from the model too,
  /// does not read them either.
  std::vector<std::pair<std::string, SourceLoc>> *PrunedVariables = nullptr;
};

class Pass {
public:
  virtual ~Pass();
  /// The registered name, e.g. "place-devices".
  virtual llvm::StringRef getName() const = 0;
  virtual llvm::Error run(Graph &G, PassContext &Ctx) = 0;
  /// Sets a pass option; the default rejects every option.
  virtual llvm::Error setOption(llvm::StringRef Key, llvm::StringRef Value);
};

/// Information about one registered pass.
struct PassInfo {
  llvm::StringRef Name;
  llvm::StringRef Summary;
  std::vector<std::pair<llvm::StringRef, llvm::StringRef>> Options;
  /// Part of the default pipeline.
  bool InDefault = true;
};

/// Every registered pass in pipeline order.
llvm::ArrayRef<PassInfo> registeredPasses();

/// Creates the pass registered as \p Name.
llvm::Expected<std::unique_ptr<Pass>> createPass(llvm::StringRef Name);

/// The default pipeline: the training step, every default pass in order.
std::string defaultPipeline();

struct PassManagerOptions {
  /// Print the graph after every pass to this stream.
  llvm::raw_ostream *PrintAfterAll = nullptr;
  /// Time the passes and print a report to this stream.
  llvm::raw_ostream *TimePasses = nullptr;
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions Opts = {});
  ~PassManager();

  void addPass(std::unique_ptr<Pass> P) { Passes.push_back(std::move(P)); }
  /// Parses `a,b{opt=1},c` and adds the passes; on an error it adds none.
  llvm::Error parsePipeline(llvm::StringRef Text);
  size_t size() const { return Passes.size(); }
  /// The passes, in the order they run.
  llvm::ArrayRef<std::unique_ptr<Pass>> passes() const { return Passes; }

  llvm::Error run(Graph &G, PassContext &Ctx);

private:
  std::vector<std::unique_ptr<Pass>> Passes;
  PassManagerOptions Opts;
};

/// The warning prune gives about model variable \p Name it removed (or the
/// compiler, for the variables PassContext::PrunedVariables collected).
void warnPrunedVariable(const DiagnosticHandler &Diags, llvm::StringRef Name,
                        const SourceLoc &Loc);

// The passes, for library users who build pipelines in code.
#define MDPLAN_PASS(ARG, CLASS, SUMMARY) std::unique_ptr<Pass> create##CLASS();
#include "mdplan/Transforms/Passes.def"

} // namespace mdplan

#endif // MDPLAN_TRANSFORMS_PASS_H
