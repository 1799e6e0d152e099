//===- ModelReader.h - Reading graph descriptions ---------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Reads a model (one replica: nodes, variables, inputs, device scopes and
// collections) from the protobuf text or binary format described in
// docs/GraphFormat.md, and a deployment config file. Every error carries the
// file:line:col of the offending field (binary files: the file name only).
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_FRONTEND_MODELREADER_H
#define MDPLAN_FRONTEND_MODELREADER_H

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/IR/Graph.h"
#include "mdplan/Support/Diagnostic.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mdplan {

enum class InputFormat {
  /// Binary for `.pb`, `.binpb` and `.mdgb` files, text otherwise.
  Auto,
  Text,
  Binary,
};

struct ReadOptions {
  InputFormat Format = InputFormat::Auto;
  /// Where warnings go.
  DiagnosticHandler Diags;
  /// When set, receives the file's buffer so errors can show the line.
  llvm::SourceMgr *SM = nullptr;
};

/// Reads a model from \p Path ("-" is standard input).
llvm::Expected<std::unique_ptr<Graph>> readModelFile(llvm::StringRef Path,
                                                     const ReadOptions &Opts);

/// Reads a model from \p Contents, naming it \p Name in diagnostics.
///
/// The reading runs on a thread of its own with a large stack (the
/// parsers recurse once per nested message, up to 1000 levels), so the
/// caller's stack size does not matter; Opts.Diags is called from that
/// thread while the caller waits.
llvm::Expected<std::unique_ptr<Graph>> readModelBuffer(llvm::StringRef Contents,
                                                       llvm::StringRef Name,
                                                       const ReadOptions &Opts);

/// Reads a deployment config (text format) into \p Config; fields it sets
/// record their location in Config.Origins.
llvm::Error readDeploymentFile(llvm::StringRef Path, DeploymentConfig &Config,
                               llvm::SourceMgr *SM = nullptr);
llvm::Error readDeploymentBuffer(llvm::StringRef Contents, llvm::StringRef Name,
                                 DeploymentConfig &Config);

/// Which message a text file holds.
enum class TextFileKind { Model, Deployment };

/// For tests and fuzzing. The reader parses text files with a fast parser
/// of its own and leaves what that parser declines (anything unusual, and
/// every error) to protobuf's. This parses \p Contents both ways and
/// returns the first difference between the messages they build or the
/// field positions they record, or "" when they agree or the fast parser
/// declined; \p FastAccepted, when given, tells whether it read the text.
/// Runs on a thread with the reader's stack, like readModelBuffer.
std::string checkTextFastPath(llvm::StringRef Contents, TextFileKind Kind,
                              bool *FastAccepted = nullptr);

} // namespace mdplan

#endif // MDPLAN_FRONTEND_MODELREADER_H
