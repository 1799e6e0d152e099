//===- Diagnostic.cpp - Located errors and warnings -----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Support/Diagnostic.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <mutex>

using namespace llvm;
using namespace mdplan;

char LocatedError::ID = 0;

StringRef mdplan::internFileName(StringRef Name) {
  static std::mutex Lock;
  static StringSet<> Names;
  std::lock_guard<std::mutex> Guard(Lock);
  return Names.insert(Name).first->getKey();
}

void SourceLoc::print(raw_ostream &OS) const {
  if (File.empty())
    return;
  OS << File;
  if (Line) {
    OS << ':' << Line;
    if (Col)
      OS << ':' << Col;
  }
}

std::string SourceLoc::str() const {
  std::string S;
  raw_string_ostream OS(S);
  print(OS);
  return OS.str();
}

void LocatedError::log(raw_ostream &OS) const {
  if (Loc.isValid()) {
    Loc.print(OS);
    OS << ": ";
  }
  OS << "error: " << Message;
}

std::error_code LocatedError::convertToErrorCode() const {
  return inconvertibleErrorCode();
}

void DiagnosticHandler::warning(const SourceLoc &Loc,
                                const Twine &Message) const {
  if (CB)
    CB(Severity::Warning, Loc, Message.str());
}

void DiagnosticHandler::note(const SourceLoc &Loc, const Twine &Message) const {
  if (CB)
    CB(Severity::Note, Loc, Message.str());
}

DiagnosticHandler DiagnosticHandler::stderrHandler() {
  return DiagnosticHandler([](Severity S, const SourceLoc &Loc,
                              StringRef Message) {
    raw_ostream &OS = errs();
    if (Loc.isValid()) {
      Loc.print(OS);
      OS << ": ";
    }
    OS << (S == Severity::Warning ? "warning: " : "note: ") << Message << '\n';
  });
}

Error mdplan::appendToMessage(Error E, const Twine &Suffix) {
  std::string Text = Suffix.str();
  Error Result = Error::success();
  handleAllErrors(
      std::move(E),
      [&](const LocatedError &LE) {
        Result = joinErrors(std::move(Result),
                            makeError(LE.getLoc(), LE.getMessage() + Text));
      },
      [&](const ErrorInfoBase &EI) {
        Result = joinErrors(std::move(Result), makeError(EI.message() + Text));
      });
  return Result;
}

std::string mdplan::formatNumber(double V) {
  std::string Text;
  raw_string_ostream(Text) << format("%g", V);
  return Text;
}

std::string mdplan::unknownValueMessage(StringRef What, StringRef Value,
                                        ArrayRef<StringRef> Known) {
  std::string Msg = ("unknown " + What + " '" + Value + "' (use ").str();
  for (size_t I = 0, E = Known.size(); I != E; ++I)
    Msg += (I == 0 ? "'" : I + 1 == E ? " or '" : ", '") + Known[I].str() + "'";
  return Msg + ")";
}

std::string mdplan::errorMessage(Error E) {
  std::string Msg;
  handleAllErrors(
      std::move(E),
      [&](const LocatedError &LE) {
        Msg += (Msg.empty() ? "" : "; ") + LE.getMessage().str();
      },
      [&](const ErrorInfoBase &EI) {
        Msg += (Msg.empty() ? "" : "; ") + EI.message();
      });
  return Msg;
}

/// Finds the buffer of \p SM named \p File, or 0.
static unsigned findBuffer(const SourceMgr &SM, StringRef File) {
  for (unsigned I = 1, E = SM.getNumBuffers() + 1; I != E; ++I)
    if (SM.getMemoryBuffer(I)->getBufferIdentifier() == File)
      return I;
  return 0;
}

/// Source lines longer than this are echoed only around the caret, this
/// many bytes either side.
static constexpr size_t MaxEchoedLine = 200, EchoContext = 60;

void mdplan::printErrors(Error E, raw_ostream &OS, const SourceMgr *SM,
                         StringRef ToolName) {
  handleAllErrors(
      std::move(E),
      [&](const LocatedError &LE) {
        const SourceLoc &Loc = LE.getLoc();
        unsigned Buf = SM && Loc.Line ? findBuffer(*SM, Loc.File) : 0;
        if (Buf) {
          const MemoryBuffer *MB = SM->getMemoryBuffer(Buf);
          // Walk to the line; SourceMgr then prints the caret line itself.
          const char *P = MB->getBufferStart(), *End = MB->getBufferEnd();
          for (unsigned L = 1; L < Loc.Line && P != End; ++P)
            if (*P == '\n')
              ++L;
          const char *LineEnd = P;
          while (LineEnd != End && *LineEnd != '\n')
            ++LineEnd;
          // Columns count as protobuf's do: a tab advances to the next
          // multiple of 8. The caret goes to the byte there.
          unsigned Want = Loc.Col ? Loc.Col - 1 : 0, Seen = 0;
          const char *At = P;
          while (At != LineEnd && Seen < Want) {
            Seen = *At == '\t' ? (Seen / 8 + 1) * 8 : Seen + 1;
            ++At;
          }
          // (A CRLF file's '\r' ends the line, as in SourceMgr.)
          StringRef Line = StringRef(P, LineEnd - P).rtrim('\r');
          // A line with control bytes (binary data) is not echoed; a long
          // one only around the caret; one with UTF-8 (whose caret
          // SourceMgr leaves out) with the caret under its character.
          bool Binary = llvm::any_of(Line, [](char C) {
            return (static_cast<unsigned char>(C) < 0x20 && C != '\t') ||
                   C == 0x7f;
          });
          bool Ascii = llvm::all_of(Line, [](char C) {
            return static_cast<unsigned char>(C) < 0x80;
          });
          if (!Binary && Ascii && Line.size() <= MaxEchoedLine) {
            SM->PrintMessage(OS, SMLoc::getFromPointer(At), SourceMgr::DK_Error,
                             LE.getMessage(), {}, {},
                             /*ShowColors=*/false);
            return;
          }
          OS << Loc.File << ':' << Loc.Line << ':' << Loc.Col
             << ": error: " << LE.getMessage() << '\n';
          if (Binary)
            return;
          auto IsContinuation = [](char C) {
            return (static_cast<unsigned char>(C) & 0xC0) == 0x80;
          };
          size_t Caret = At - P, From = 0, To = Line.size();
          if (Line.size() > MaxEchoedLine) {
            From = Caret > EchoContext ? Caret - EchoContext : 0;
            To = std::min(Line.size(), Caret + EchoContext);
            while (From > 0 && IsContinuation(Line[From]))
              --From;
            while (To < Line.size() && IsContinuation(Line[To]))
              ++To;
          }
          std::string Shown = From ? "..." : "";
          size_t CaretCol = Shown.size();
          for (size_t I = From; I < To; ++I) {
            Shown += Line[I] == '\t' ? ' ' : Line[I];
            CaretCol += I < Caret && !IsContinuation(Line[I]);
          }
          if (To < Line.size())
            Shown += "...";
          OS << Shown << '\n' << std::string(CaretCol, ' ') << "^\n";
          return;
        }
        if (!Loc.isValid() && !ToolName.empty())
          OS << ToolName << ": ";
        LE.log(OS);
        OS << '\n';
      },
      [&](const ErrorInfoBase &EI) {
        if (!ToolName.empty())
          OS << ToolName << ": ";
        OS << "error: " << EI.message() << '\n';
      });
}
