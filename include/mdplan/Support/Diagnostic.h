//===- Diagnostic.h - Located errors and warnings ---------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// User-facing errors travel as llvm::Error. A LocatedError carries the
// file:line:col it refers to so that it prints once, at the top, in the
// usual compiler format:
//
//   model.mdg:12:3: error: unknown op 'MatMull'
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_SUPPORT_DIAGNOSTIC_H
#define MDPLAN_SUPPORT_DIAGNOSTIC_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mdplan {

/// A position in a named input. Line and column are 1-based; a zero line
/// means the position inside the input is unknown (a binary file, or a
/// command-line flag), and only the name is printed.
struct SourceLoc {
  /// Interned file (or origin) name; empty for "no location at all".
  llvm::StringRef File;
  unsigned Line = 0;
  unsigned Col = 0;

  bool isValid() const { return !File.empty(); }
  /// Prints `file:line:col`, `file` or nothing.
  void print(llvm::raw_ostream &OS) const;
  std::string str() const;
};

/// Interns \p Name for the lifetime of the process and returns it. Source
/// locations hold names interned here, so they stay small.
llvm::StringRef internFileName(llvm::StringRef Name);

/// An error with a location. Its message is lower-case and has no trailing
/// period, as LLVM's are.
class LocatedError : public llvm::ErrorInfo<LocatedError> {
public:
  static char ID;

  LocatedError(SourceLoc Loc, const llvm::Twine &Message)
      : Loc(Loc), Message(Message.str()) {}

  const SourceLoc &getLoc() const { return Loc; }
  llvm::StringRef getMessage() const { return Message; }

  /// Prints `file:line:col: error: message`.
  void log(llvm::raw_ostream &OS) const override;
  std::error_code convertToErrorCode() const override;

private:
  SourceLoc Loc;
  std::string Message;
};

/// Makes a located error.
inline llvm::Error makeError(SourceLoc Loc, const llvm::Twine &Message) {
  return llvm::make_error<LocatedError>(Loc, Message);
}

/// Makes an error without a location; prints as `error: message`.
inline llvm::Error makeError(const llvm::Twine &Message) {
  return llvm::make_error<LocatedError>(SourceLoc(), Message);
}

/// Severity of a non-fatal diagnostic.
enum class Severity { Note, Warning };

/// Receives warnings and notes. Errors are never reported through here: they
/// travel as llvm::Error to the caller.
class DiagnosticHandler {
public:
  using Callback =
      std::function<void(Severity, const SourceLoc &, llvm::StringRef)>;

  DiagnosticHandler() = default;
  explicit DiagnosticHandler(Callback CB) : CB(std::move(CB)) {}

  void warning(const SourceLoc &Loc, const llvm::Twine &Message) const;
  void note(const SourceLoc &Loc, const llvm::Twine &Message) const;

  /// A handler that prints to llvm::errs() in the usual format.
  static DiagnosticHandler stderrHandler();

private:
  Callback CB;
};

/// "unknown strategy 'allreduce' (use 'ps' or 'mirrored')": the message for
/// a value \p Value of \p What that is none of \p Known. Config files and
/// mdplan's enum flags word it alike.
std::string unknownValueMessage(llvm::StringRef What, llvm::StringRef Value,
                                llvm::ArrayRef<llvm::StringRef> Known);

/// \p V for messages, as printf's %g: "0.5", "1e+39", "nan", "-inf".
std::string formatNumber(double V);

/// Appends \p Suffix to the message of every error in \p E, keeping
/// locations.
llvm::Error appendToMessage(llvm::Error E, const llvm::Twine &Suffix);

/// The message of \p E without location or "error: " prefix (several errors
/// are joined with "; "). Consumes E.
std::string errorMessage(llvm::Error E);

/// Prints \p E to \p OS, one line per error. When \p SM holds the file a
/// LocatedError points into, the source line and a caret follow (a line
/// longer than 200 bytes only around the caret, one with control bytes
/// not at all). Consumes E.
void printErrors(llvm::Error E, llvm::raw_ostream &OS,
                 const llvm::SourceMgr *SM = nullptr,
                 llvm::StringRef ToolName = {});

} // namespace mdplan

#endif // MDPLAN_SUPPORT_DIAGNOSTIC_H
