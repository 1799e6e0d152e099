//===- mdrun.cpp - Run an mdplan plan -------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// mdrun PLAN --data=DIR [--steps=N | --epochs=E] [options]
//
// Trains with the plan's training program and evaluates with its eval
// program. The runtime library does the work; this file parses options
// (mdrun links neither LLVM nor Protobuf, so it has its own small parser).
//
//===----------------------------------------------------------------------===//

#include "mdrt/Checkpoint.h"
#include "mdrt/Device.h"
#include "mdrt/ParameterServer.h"
#include "mdrt/Plan.h"
#include "mdrt/Process.h"
#include "mdrt/Trainer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using namespace mdrt;

namespace {

/// Standard error, one write per line. Under an MPI launcher, whose own
/// messages interleave with the processes' output, a line written in pieces
/// (std::cerr writes each <<) can be split by them.
class LineWriter : public std::streambuf {
public:
  ~LineWriter() override { flushLine(); }

protected:
  int overflow(int C) override {
    if (C == traits_type::eof())
      return traits_type::not_eof(C);
    Line.push_back(char(C));
    if (C == '\n')
      flushLine();
    return C;
  }
  std::streamsize xsputn(const char *S, std::streamsize N) override {
    for (std::streamsize I = 0; I < N; ++I)
      overflow(traits_type::to_int_type(S[I]));
    return N;
  }
  int sync() override {
    flushLine();
    return 0;
  }

private:
  void flushLine() {
    if (Line.empty())
      return;
    // One fwrite to the unbuffered stderr is one write(2).
    std::fwrite(Line.data(), 1, Line.size(), stderr);
    Line.clear();
  }
  std::string Line;
};

/// Where mdrun's errors go: standard error, a line at a time.
std::ostream &errorStream() {
  static LineWriter W;
  static std::ostream OS(&W);
  return OS;
}

/// One command-line option: --name=value, or --name for flags.
struct Option {
  const char *Name;
  const char *Value; // null for flags
  const char *Help;
  std::function<bool(const std::string &)> Set;
  /// The values Set accepts, for its error (options with a value).
  const char *Valid = nullptr;
};

/// The edit distance between \p A and \p B (insertions, deletions and
/// substitutions of one character each).
size_t editDistance(const std::string &A, const std::string &B) {
  std::vector<size_t> Row(B.size() + 1);
  for (size_t J = 0; J <= B.size(); ++J)
    Row[J] = J;
  for (size_t I = 1; I <= A.size(); ++I) {
    size_t Diagonal = Row[0];
    Row[0] = I;
    for (size_t J = 1; J <= B.size(); ++J) {
      size_t Above = Row[J];
      Row[J] = std::min({Row[J] + 1, Row[J - 1] + 1,
                         Diagonal + (A[I - 1] == B[J - 1] ? 0 : 1)});
      Diagonal = Above;
    }
  }
  return Row[B.size()];
}

/// The option \p Name most likely meant (at most 2 edits away), or null.
const Option *closestOption(const std::string &Name,
                            const std::vector<Option> &Opts) {
  const Option *Best = nullptr;
  size_t BestDistance = 3;
  for (const Option &O : Opts)
    if (size_t D = editDistance(Name, O.Name); D < BestDistance) {
      Best = &O;
      BestDistance = D;
    }
  return Best;
}

/// An integer in [Min, Max]; an option held in an int passes INT_MAX as
/// \p Max, so that a larger value is refused rather than wrapped.
bool parseInt(const std::string &S, int64_t &Out, int64_t Min,
              int64_t Max = INT64_MAX) {
  char *End = nullptr;
  errno = 0;
  long long V = std::strtoll(S.c_str(), &End, 10);
  if (S.empty() || *End || errno || V < Min || V > Max)
    return false;
  Out = V;
  return true;
}

/// A finite number above 0.
bool parseDouble(const std::string &S, double &Out) {
  char *End = nullptr;
  double V = std::strtod(S.c_str(), &End);
  if (S.empty() || *End || !(V > 0) || !std::isfinite(V))
    return false;
  Out = V;
  return true;
}

void usage(const std::vector<Option> &Opts, std::ostream &OS) {
  OS << "usage: mdrun PLAN (--data=DIR | --synthetic) [options]\n\n"
        "Trains a model with a plan compiled by mdplan, and evaluates it.\n"
        "Started by an MPI launcher (mpirun -n W mdrun ...), each process "
        "runs\n"
        "one replica of a plan compiled with --strategy=mirrored\n"
        "--num-replicas=W; '{replica}' in PLAN and --trace stands for the\n"
        "process's replica (its rank). A ps-strategy plan of W replicas and\n"
        "P ps tasks runs as W + P processes (mpirun -n W+P): the workers,\n"
        "then one parameter server per ps task.\n\n"
        "Each option once, as --name=value or --name value; -h is --help,\n"
        "and after -- every argument is the plan.\n\n"
        "options:\n";
  for (const Option &O : Opts) {
    std::string Left = std::string("  --") + O.Name;
    if (O.Value)
      Left += std::string("=") + O.Value;
    OS << Left;
    OS << std::string(Left.size() < 30 ? 30 - Left.size() : 1, ' ') << O.Help
       << '\n';
  }
}

/// Prints the state of checkpoint \p C, read from \p Path.
void printCheckpointState(const std::string &Path, const Checkpoint &C) {
  char Hex[32];
  snprintf(Hex, sizeof(Hex), "0x%016llx",
           (unsigned long long)C.State.PlanFingerprint);
  std::cout << "checkpoint " << Path << "\nformat version " << C.Version
            << "\nfingerprint " << Hex << "\nstep " << C.State.Step << "\ndata "
            << C.State.Data.str() << "\nseed " << C.State.Seed << '\n';
  if (C.State.DataExamples >= 0)
    std::cout << "training data " << C.State.DataExamples << " examples"
              << (C.State.Synthetic ? " (synthetic)" : "") << ", "
              << (C.State.Shuffled ? "shuffled" : "in order")
              << (C.State.RawBytes ? ", bytes unscaled" : "") << '\n';
}

/// Prints a checkpoint: its state, then each tensor with its values, or
/// with \p Summary a line of statistics per tensor. A checkpoint directory
/// stands for its latest checkpoint.
int printCheckpoint(std::string Path, bool Summary) {
  std::error_code Ec;
  const bool Directory = std::filesystem::is_directory(Path, Ec);
  const std::string Dir = Path;
  if (Directory) {
    auto Latest = latestCheckpoint(Path);
    if (Latest.isOk() && Latest->empty())
      Latest = Status::error("directory '" + Path + "' holds no checkpoint");
    if (!Latest.isOk()) {
      errorStream() << "mdrun: error: " << Latest.status().message() << '\n';
      return 1;
    }
    Path = *Latest;
  }
  bool Damaged = false;
  auto C = readCheckpoint(Path, &Damaged);
  if (!C.isOk()) {
    // A directory's damaged latest: name the one before, as --resume does.
    std::string Before;
    if (Directory && Damaged)
      if (auto All = listCheckpoints(Dir); All.isOk() && All->size() >= 2)
        Before = " (the checkpoint before it: '" +
                 (*All)[All->size() - 2].second + "')";
    errorStream() << "mdrun: error: " << C.status().message() << Before << '\n';
    return 1;
  }
  printCheckpointState(Path, *C);
  if (Summary) {
    for (const CheckpointTensor &T : C->Tensors) {
      TensorSummary S = summarizeTensor(T);
      // An integer tensor's range as integers (exact up to 2^53), a float
      // tensor's with 6 digits like the rest.
      bool Integer =
          T.Desc.Type != DType::Float32 && T.Desc.Type != DType::Float64;
      char Buf[200];
      snprintf(Buf, sizeof(Buf),
               Integer ? "min %.0f max %.0f mean %.6g rms %.6g"
                       : "min %.6g max %.6g mean %.6g rms %.6g",
               S.Min, S.Max, S.Mean, S.Rms);
      std::cout << "tensor " << T.Name << ' ' << T.Desc.str() << ": " << Buf
                << " zeros " << S.Zeros;
      if (S.NaNs)
        std::cout << " nan " << S.NaNs;
      if (S.Infinities)
        std::cout << " inf " << S.Infinities;
      std::cout << '\n';
    }
    return 0;
  }
  for (const CheckpointTensor &T : C->Tensors) {
    std::cout << "tensor " << T.Name << ' ' << T.Desc.str() << " =";
    size_t N = size_t(T.Desc.numElements());
    // Each value exactly: floats with the digits that read back to them
    // (9 for float32, 17 for float64), integers as integers.
    const uint8_t *P = T.Data.data();
    for (size_t I = 0; I < N; ++I) {
      char Buf[40];
      switch (T.Desc.Type) {
      case DType::Float32:
        snprintf(Buf, sizeof(Buf), " %.9g",
                 double(reinterpret_cast<const float *>(P)[I]));
        break;
      case DType::Float64:
        snprintf(Buf, sizeof(Buf), " %.17g",
                 reinterpret_cast<const double *>(P)[I]);
        break;
      case DType::Int32:
        snprintf(Buf, sizeof(Buf), " %" PRId32,
                 reinterpret_cast<const int32_t *>(P)[I]);
        break;
      case DType::Int64:
        snprintf(Buf, sizeof(Buf), " %" PRId64,
                 reinterpret_cast<const int64_t *>(P)[I]);
        break;
      default:
        snprintf(Buf, sizeof(Buf), " %u", unsigned(P[I]));
        break;
      }
      std::cout << Buf;
    }
    std::cout << '\n';
  }
  return 0;
}

/// "1 step", "2 steps".
std::string steps(int64_t N) {
  return std::to_string(N) + (N == 1 ? " step" : " steps");
}

/// Why output \p Path of option \p Flag would overwrite what the run
/// reads or keeps: the plan \p Plan, a dataset file of the --data
/// directory, a checkpoint of the --checkpoint-dir; empty when it would
/// not.
std::string overwritesInput(const std::string &Flag, const std::string &Path,
                            const std::string &Plan, const TrainOptions &T) {
  namespace fs = std::filesystem;
  std::string Head = Flag + " '" + Path + "' is ";
  const std::string Tail =
      "; writing it would overwrite it (give it a file of its own)";
  if (sameFile(Path, Plan))
    return Head + "the plan mdrun runs" + Tail;
  if (!T.InitFrom.empty() && sameFile(Path, T.InitFrom))
    return Head + "the checkpoint of --init-from" + Tail;
  fs::path Parent = fs::path(Path).parent_path();
  if (Parent.empty())
    Parent = ".";
  auto EndsWith = [](const std::string &S, const std::string &End) {
    return S.size() >= End.size() &&
           S.compare(S.size() - End.size(), End.size(), End) == 0;
  };
  std::string Name = fs::path(Path).filename().string();
  if (!T.DataDir.empty() && sameFile(Parent.string(), T.DataDir) &&
      (EndsWith(Name, "-ubyte") || EndsWith(Name, "-ubyte.gz")))
    return Head + "a dataset file of --data '" + T.DataDir + "'" + Tail;
  // ckpt-*.mdck and ckpt-*.mdck.tmp.*: what the directory's listing and
  // cleanup take for checkpoints.
  if (!T.CheckpointDir.empty() && sameFile(Parent.string(), T.CheckpointDir) &&
      Name.rfind("ckpt-", 0) == 0 && Name.find(".mdck") != std::string::npos)
    return Head + "a checkpoint's name in --checkpoint-dir '" +
           T.CheckpointDir + "'" + Tail;
  return "";
}

/// The signal that asked the run to stop (SIGTERM, SIGINT), polled by the
/// trainer after each step. The first stops the run at the end of its step
/// with a checkpoint; the handler then resets, so a second one ends the
/// process at once.
std::atomic<int> StopSignal{0};

void onStopSignal(int Sig) {
  int None = 0;
  StopSignal.compare_exchange_strong(None, Sig, std::memory_order_relaxed);
  // The next one, of either kind, ends the process.
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}

void catchStopSignals() {
  struct sigaction A = {};
  A.sa_handler = onStopSignal;
  sigemptyset(&A.sa_mask);
  A.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &A, nullptr);
  sigaction(SIGINT, &A, nullptr);
}

} // namespace

static int runReplica(const std::string &PlanPath, TrainOptions &T, bool Quiet,
                      ProcessGroup &Procs);
static int serveTask(const std::string &PlanPath, const TrainOptions &T,
                     ProcessGroup &Procs, const ClusterLayout &Layout);

/// How long a process with a command-line error waits for the others to
/// take it (UsageError in mdrunMain).
constexpr int UsageMeetingSeconds = 30;

/// What a process of a launch does once it has read its command line.
enum class LaunchRole {
  Run,      ///< runs its plan
  NoRun,    ///< --help, --version, --print-checkpoint, --checkpoint-summary,
            ///< --dump-plan
  BadUsage, ///< a command-line error
};

/// Under a launcher of several processes, each with its own command line,
/// the processes meet once they have read theirs, so that they all end
/// alike rather than some waiting for others that left: returns -1 when
/// every process runs its plan; 0 when none does (NoRun: --help and the
/// like everywhere); else 2, the first process printing the lowest
/// process's command-line error, or else the first NoRun process's
/// message when others run a plan. \p Message says what is wrong here
/// (BadUsage, NoRun). Processes are named by their place in the launch: no plan
/// has said yet which is a worker and which a parameter server.
static int meetLaunch(ProcessGroup &Procs, LaunchRole Role,
                      const std::string &Message) {
  if (Procs.size() == 1)
    return Role == LaunchRole::Run ? -1 : Role == LaunchRole::NoRun ? 0 : 2;
  for (int R = 0; R < Procs.size(); ++R)
    Procs.setRankName(R, "process " + std::to_string(R));
  // Command-line errors before --help and --version.
  Status Local =
      Role == LaunchRole::Run ? Status::ok() : Status::error(Message);
  Status S = Procs.agree(Local, Role == LaunchRole::BadUsage ? 0 : 1);
  for (int R = 0; R < Procs.size(); ++R)
    Procs.setRankName(R, "");
  int64_t Counts[2] = {Role == LaunchRole::Run, Role == LaunchRole::BadUsage};
  Status Summed = Procs.allReduceSum(DType::Int64, Counts, 2);
  if (!Summed.isOk())
    S = Summed;
  if (S.isOk())
    return -1;
  if (Summed.isOk() && Counts[0] == 0 && Counts[1] == 0)
    return 0;
  if (Procs.rank() == 0)
    errorStream() << "mdrun: error: " << S.message() << '\n';
  return 2;
}

static int mdrunMain(int argc, char **argv) {
  // Before any thread (MPI's, the data prefetcher, the devices') can read
  // the environment.
  mdrt::prepareNcclEnvironment();
  // A command-line error: exit status 2. Under a launcher the processes
  // may have other command lines (mpirun -n 1 mdrun A : -n 1 mdrun B), so
  // they meet (the healthy ones once they have parsed theirs) and agree on
  // the error of the lowest rank, which the first process prints.
  auto UsageError = [&](const std::string &Message) {
    // Alone, or the first process of a launch (its error is the lowest
    // rank's): printed, and exit; the launcher ends the others.
    if (launcherRank() <= 0) {
      errorStream() << "mdrun: error: " << Message << '\n';
      return 2;
    }
    // Another process meets the others, so that the first prints its
    // error; should the first never come (it left at once: --help there),
    // a watchdog prints it here and ends this process.
    std::thread([Message, Rank = launcherRank()] {
      std::this_thread::sleep_for(std::chrono::seconds(UsageMeetingSeconds));
      errorStream() << "mdrun: error: process " << Rank << ": " << Message
                    << '\n';
      std::_Exit(2);
    }).detach();
    auto Group = createProcessGroup(argc, argv);
    if (Group.isOk())
      (void)meetLaunch(**Group, LaunchRole::BadUsage, Message);
    return 2;
  };
  TrainOptions T;
  std::string PlanPath, PrintCheckpoint, SummarizeCheckpoint;
  bool DumpPlan = false, Help = false, Version = false, Quiet = false,
       KeepGiven = false, SyntheticExamplesGiven = false;
  int64_t I64 = 0;
  std::vector<Option> Opts = {
      {"data", "DIR", "IDX dataset directory (train and t10k splits)",
       [&](const std::string &V) { return !(T.DataDir = V).empty(); },
       "a directory"},
      {"synthetic", nullptr, "random data of the plan's shapes",
       [&](const std::string &) { return T.Synthetic = true; }},
      {"synthetic-examples", "N",
       "examples of synthetic data (60000; at most 4294967295)",
       [&](const std::string &V) {
         SyntheticExamplesGiven = true;
         // An IDX dimension: at most 2^32 - 1.
         return parseInt(V, T.SyntheticExamples, 1, int64_t(UINT32_MAX));
       },
       "an integer from 1 to 4294967295"},
      {"steps", "N", "training steps",
       [&](const std::string &V) { return parseInt(V, T.Steps, 1); },
       "an integer, at least 1"},
      {"epochs", "E", "training epochs (default 1)",
       [&](const std::string &V) { return parseDouble(V, T.Epochs); },
       "a finite number above 0"},
      {"seed", "S", "run seed: initial values, shuffling, dropout (1)",
       [&](const std::string &V) {
         bool Ok = parseInt(V, I64, 0);
         T.Seed = uint64_t(I64);
         return Ok;
       },
       "an integer, at least 0"},
      {"threads", "N", "threads per device (the process's CPUs)",
       [&](const std::string &V) {
         bool Ok = parseInt(V, I64, 1, INT_MAX);
         T.Exec.Threads = int(I64);
         return Ok;
       },
       "an integer from 1 to 2147483647"},
      {"no-shuffle", nullptr, "keep the dataset's order",
       [&](const std::string &) { return !(T.Shuffle = false); }},
      {"raw-bytes", nullptr,
       "feed ubyte data to float inputs unscaled (default x / 255, as for "
       "images)",
       [&](const std::string &) { return !(T.ScaleBytes = false); }},
      {"log-every", "N", "log the loss every N steps (100; 0 never)",
       [&](const std::string &V) { return parseInt(V, T.LogEvery, 0); },
       "an integer, at least 0"},
      {"eval-every", "N", "evaluate every N steps (each epoch)",
       [&](const std::string &V) { return parseInt(V, T.EvalEvery, 1); },
       "an integer, at least 1"},
      {"no-eval", nullptr, "do not evaluate",
       [&](const std::string &) { return !(T.Eval = false); }},
      {"print-losses", nullptr,
       "print every step's loss (9 significant digits; 17 for float64)",
       [&](const std::string &) { return T.PrintLosses = true; }},
      {"progress", nullptr, "progress bar on stderr (default: on a terminal)",
       [&](const std::string &) { return (T.Progress = 1) == 1; }},
      {"no-progress", nullptr, "no progress bar",
       [&](const std::string &) { return (T.Progress = 0) == 0; }},
      {"metrics", "FILE", "write metrics as JSON lines",
       [&](const std::string &V) { return !(T.MetricsPath = V).empty(); },
       "a file"},
      {"trace", "FILE", "write a Chrome trace (Perfetto) of a few steps",
       [&](const std::string &V) { return !(T.TracePath = V).empty(); },
       "a file"},
      {"trace-steps", "N", "steps in the trace (3)",
       [&](const std::string &V) {
         bool Ok = parseInt(V, I64, 1, INT_MAX);
         T.TraceSteps = int(I64);
         return Ok;
       },
       "an integer from 1 to 2147483647"},
      {"checkpoint-dir", "DIR", "where checkpoints go",
       [&](const std::string &V) { return !(T.CheckpointDir = V).empty(); },
       "a directory"},
      {"checkpoint-every", "N", "checkpoint every N steps (and at the end)",
       [&](const std::string &V) { return parseInt(V, T.CheckpointEvery, 1); },
       "an integer, at least 1"},
      {"checkpoint-at-start", nullptr,
       "also checkpoint the state the run starts from (step 0: the "
       "initial variables)",
       [&](const std::string &) { return T.CheckpointAtStart = true; }},
      {"keep-checkpoints", "N", "checkpoints to keep (3; 0 all)",
       [&](const std::string &V) {
         bool Ok = parseInt(V, I64, 0, INT_MAX);
         T.KeepCheckpoints = int(I64);
         KeepGiven = true;
         return Ok;
       },
       "an integer from 0 to 2147483647"},
      {"resume", nullptr, "continue from the latest checkpoint",
       [&](const std::string &) { return T.Resume = true; }},
      {"init-from", "FILE",
       "start from a checkpoint's variables, by name (one of another "
       "deployment of the model too)",
       [&](const std::string &V) { return !(T.InitFrom = V).empty(); },
       "a checkpoint file"},
      {"soft-placement", nullptr,
       "run GPU devices the machine lacks on the CPU",
       [&](const std::string &) { return T.Exec.SoftPlacement = true; }},
      {"cuda-graph", nullptr,
       "replay each program's GPU work as CUDA graphs after its first step",
       [&](const std::string &) { return T.Exec.CudaGraph = true; }},
      {"gpu-map", "LIST",
       "GPU of each plan GPU index, e.g. 0,0: two plan GPUs share GPU 0",
       [&](const std::string &V) {
         T.Exec.GpuMap.clear();
         for (size_t B = 0; B <= V.size();) {
           size_t E = std::min(V.find(',', B), V.size());
           if (!parseInt(V.substr(B, E - B), I64, 0, INT_MAX))
             return false;
           T.Exec.GpuMap.push_back(int(I64));
           B = E + 1;
         }
         return true;
       },
       "GPU indices separated by commas, e.g. 0,0,1"},
      {"overlap", "auto|on|off",
       "all-reduces across processes beside the computation (auto: when "
       "a core is spare)",
       [&](const std::string &V) {
         if (V == "auto")
           T.Exec.Overlap = OverlapMode::Auto;
         else if (V == "on")
           T.Exec.Overlap = OverlapMode::On;
         else if (V == "off")
           T.Exec.Overlap = OverlapMode::Off;
         else
           return false;
         return true;
       },
       "auto, on or off"},
      {"prefetch", "N", "batches prepared ahead (2)",
       [&](const std::string &V) {
         bool Ok = parseInt(V, I64, 0, INT_MAX);
         T.Prefetch = int(I64);
         return Ok;
       },
       "an integer from 0 to 2147483647"},
      {"print-checkpoint", "FILE",
       "print a checkpoint's state and tensors (a directory: its latest)",
       [&](const std::string &V) { return !(PrintCheckpoint = V).empty(); },
       "a checkpoint file or directory"},
      {"checkpoint-summary", "FILE",
       "print a checkpoint's state and per tensor its range, mean and RMS "
       "(a directory: its latest)",
       [&](const std::string &V) { return !(SummarizeCheckpoint = V).empty(); },
       "a checkpoint file or directory"},
      {"dump-plan", nullptr, "print the plan as text and exit",
       [&](const std::string &) { return DumpPlan = true; }},
      {"quiet", nullptr, "print only the final result",
       [&](const std::string &) { return Quiet = true; }},
      {"kill-at-step", "N", "testing: SIGKILL itself after step N",
       [&](const std::string &V) { return parseInt(V, T.KillAtStep, 1); },
       "an integer, at least 1"},
      {"term-at-step", "N", "testing: SIGTERM itself at the end of step N",
       [&](const std::string &V) { return parseInt(V, T.TermAtStep, 1); },
       "an integer, at least 1"},
      {"help", nullptr, "this text",
       [&](const std::string &) { return Help = true; }},
      {"version", nullptr, "print mdrun's version and exit",
       [&](const std::string &) { return Version = true; }},
  };

  // The options given, each once; "--" ends them (a plan named "-x").
  std::vector<std::string> Given;
  bool OptionsEnd = false;
  for (int A = 1; A < argc; ++A) {
    std::string Arg = argv[A];
    if (Arg == "--" && !OptionsEnd) {
      OptionsEnd = true;
      continue;
    }
    if (OptionsEnd || Arg.size() < 2 || Arg[0] != '-') {
      if (!PlanPath.empty()) {
        return UsageError("more than one plan given ('" + PlanPath + "' and '" +
                          Arg + "')");
      }
      PlanPath = Arg;
      continue;
    }
    // One dash: -h is --help; -steps=2 meant --steps=2.
    if (Arg[1] != '-') {
      if (Arg == "-h") {
        Arg = "--help";
      } else {
        std::string Long = "-" + Arg;
        std::string Name = Arg.substr(1, Arg.find('=') - 1);
        for (const Option &O : Opts)
          if (Name == O.Name)
            return UsageError("unknown option '" + Arg +
                              "': mdrun's options start with two dashes ('" +
                              Long + "')");
        return UsageError("unknown option '" + Arg +
                          "' (see --help; a plan whose name starts with a "
                          "dash goes after '--')");
      }
    }
    std::string Name = Arg.substr(2), Value;
    size_t Eq = Name.find('=');
    bool HasValue = Eq != std::string::npos;
    if (HasValue) {
      Value = Name.substr(Eq + 1);
      Name = Name.substr(0, Eq);
    }
    const Option *Found = nullptr;
    for (const Option &O : Opts)
      if (Name == O.Name)
        Found = &O;
    if (!Found) {
      const Option *Guess = Name.empty() ? nullptr : closestOption(Name, Opts);
      return UsageError(
          "unknown option '" + (Name.empty() ? Arg : "--" + Name) + "'" +
          (Guess ? std::string("; did you mean '--") + Guess->Name + "'?"
                 : std::string()) +
          " (see --help)");
    }
    // (--help and --version twice ask for the same thing.)
    if (std::find(Given.begin(), Given.end(), Name) != Given.end() &&
        Name != "help" && Name != "version")
      return UsageError("--" + Name + " is given more than once");
    Given.push_back(Name);
    if (Found->Value && !HasValue) {
      if (A + 1 >= argc) {
        return UsageError("--" + Name + " needs a value (" + Found->Value +
                          ")");
      }
      Value = argv[++A];
    } else if (!Found->Value && HasValue) {
      return UsageError("--" + Name + " takes no value");
    }
    if (!Found->Set(Value)) {
      return UsageError("invalid value '" + Value + "' for --" + Name +
                        (Found->Valid
                             ? std::string(" (expected ") + Found->Valid + ")"
                             : std::string()));
    }
  }
  // What runs nothing takes nothing a run would use: an option ignored
  // without a word would look taken.
  auto Besides = [&](const char *Flag) -> std::string {
    for (const std::string &G : Given)
      if (G != Flag && G != "help" && G != "version")
        return "--" + G;
    return "";
  };
  for (auto [Flag, Path] : {std::pair<const char *, const std::string &>{
                                "print-checkpoint", PrintCheckpoint},
                            {"checkpoint-summary", SummarizeCheckpoint}}) {
    if (Help || Version || Path.empty())
      continue;
    std::string Other =
        !PlanPath.empty() ? "'" + PlanPath + "'" : Besides(Flag);
    if (!Other.empty())
      return UsageError(std::string("--") + Flag +
                        " prints a checkpoint and runs nothing: give it "
                        "alone (not with " +
                        Other + ")");
  }
  if (!Help && !Version && DumpPlan && !Besides("dump-plan").empty())
    return UsageError("--dump-plan prints the plan and runs nothing: give "
                      "it only a plan (not " +
                      Besides("dump-plan") + ")");
  for (const std::string &Path : {PlanPath, T.TracePath})
    if (std::string Typo = misspelledReplica(Path); !Typo.empty())
      return UsageError("'" + Path + "' has '" + Typo +
                        "': the placeholder of the replica is '{replica}'");
  // A process that runs no plan (--help, --version, --print-checkpoint,
  // --checkpoint-summary, --dump-plan) meets the others under a launcher,
  // so that one given a plan does not wait for it (meetLaunch). \p Code is
  // its own status.
  auto EndWithoutRun = [&](int Code, const char *Flag) {
    std::cout.flush();
    if (launcherRank() < 0)
      return Code;
    auto Group = createProcessGroup(argc, argv);
    if (!Group.isOk())
      return Code;
    int Met = meetLaunch(**Group, LaunchRole::NoRun,
                         std::string(Flag) +
                             " runs no plan, but other processes were given "
                             "one: give it to every process or to none");
    return Met == 0 ? Code : Met;
  };
  // Under a launcher, once (the first process).
  if (Help) {
    if (launcherRank() <= 0)
      usage(Opts, std::cout);
    return EndWithoutRun(0, "--help");
  }
  if (Version) {
    if (launcherRank() <= 0)
      std::cout << "mdrun " MDPLAN_VERSION_STRING "\n";
    return EndWithoutRun(0, "--version");
  }
  if (!PrintCheckpoint.empty())
    return EndWithoutRun(printCheckpoint(PrintCheckpoint, /*Summary=*/false),
                         "--print-checkpoint");
  if (!SummarizeCheckpoint.empty())
    return EndWithoutRun(printCheckpoint(SummarizeCheckpoint, /*Summary=*/true),
                         "--checkpoint-summary");
  if (PlanPath.empty()) {
    return UsageError("no plan given (mdrun PLAN --data=DIR)");
  }
  // Options that cannot go together, or need another.
  const char *Misuse = nullptr;
  if (T.Steps > 0 && T.Epochs > 0)
    Misuse = "give --steps or --epochs, not both";
  else if (T.Synthetic && !T.DataDir.empty())
    Misuse = "give --data or --synthetic, not both";
  else if (T.DataDir.empty() && !T.Synthetic && PrintCheckpoint.empty())
    Misuse = "no data: give --data=DIR or --synthetic";
  else if (!T.Eval && T.EvalEvery > 0)
    Misuse = "give --eval-every or --no-eval, not both";
  else if (SyntheticExamplesGiven && !T.Synthetic)
    Misuse = "--synthetic-examples needs --synthetic";
  else if (T.CheckpointDir.empty() && T.CheckpointEvery > 0)
    Misuse = "--checkpoint-every needs --checkpoint-dir";
  else if (T.CheckpointDir.empty() && T.CheckpointAtStart)
    Misuse = "--checkpoint-at-start needs --checkpoint-dir";
  else if (T.CheckpointDir.empty() && KeepGiven)
    Misuse = "--keep-checkpoints needs --checkpoint-dir";
  else if (T.CheckpointDir.empty() && T.Resume)
    Misuse = "--resume needs --checkpoint-dir";
  if (Misuse && !DumpPlan) {
    return UsageError(Misuse);
  }
  // This process's outputs against what it reads (a mistyped path costs the
  // plan, the data or the checkpoint to resume from).
  if (!DumpPlan) {
    int Rank = std::max(launcherRank(), 0);
    std::string Plan = replicaPath(PlanPath, Rank);
    for (const auto &[Flag, Path] :
         {std::pair<std::string, std::string>{"--metrics", T.MetricsPath},
          {"--trace", replicaPath(T.TracePath, Rank)}})
      if (!Path.empty())
        if (std::string Why = overwritesInput(Flag, Path, Plan, T);
            !Why.empty())
          return UsageError(Why);
  }

  if (DumpPlan) {
    auto Plan = PlanFile::load(replicaPath(PlanPath, 0));
    if (!Plan.isOk()) {
      errorStream() << "mdrun: error: " << Plan.status().message() << '\n';
      return EndWithoutRun(1, "--dump-plan");
    }
    printPlanText((*Plan)->plan(), std::cout);
    return EndWithoutRun(0, "--dump-plan");
  }

  auto Group = createProcessGroup(argc, argv);
  if (!Group.isOk()) {
    errorStream() << "mdrun: error: " << Group.status().message() << '\n';
    return 1;
  }
  std::unique_ptr<ProcessGroup> Procs = Group.take();
  // The other processes' command-line errors (UsageError), --help and
  // --version.
  if (launcherRank() >= 0) {
    int Code = meetLaunch(*Procs, LaunchRole::Run, "");
    if (Code >= 0)
      return Code;
  }
  if (Procs->size() == 1)
    return runReplica(PlanPath, T, Quiet, *Procs);
  // Anything thrown in one of several processes would leave the others
  // waiting for it in a collective: stop them all.
  try {
    return runReplica(PlanPath, T, Quiet, *Procs);
  } catch (const std::exception &E) {
    errorStream() << "mdrun: error: replica " << Procs->rank()
                  << ": internal error: " << E.what() << '\n';
  } catch (...) {
    errorStream() << "mdrun: error: replica " << Procs->rank()
                  << ": internal error: unknown exception\n";
  }
  Procs->abort(1);
  return 1;
}

/// This process's part of a run: under an MPI launcher, one replica of a
/// multi-worker plan, or of a ps-strategy plan one of its workers or
/// parameter-server tasks. The processes agree on every error, which
/// process 0 prints.
static int runReplica(const std::string &PlanPath, TrainOptions &T, bool Quiet,
                      ProcessGroup &Procs) {
  int Rank = Procs.rank();
  auto Fail = [&](const Status &S) {
    if (Rank == 0)
      errorStream() << "mdrun: error: " << S.message() << '\n';
    return 1;
  };
  // Replica 0's plan says how the processes share the work.
  std::shared_ptr<const PlanFile> P;
  ClusterLayout Layout;
  Layout.Workers = Procs.size();
  Status Read = Status::ok();
  if (Rank == 0) {
    auto Plan = PlanFile::load(replicaPath(PlanPath, 0));
    if (Plan.isOk()) {
      P = Plan.take();
      auto L = clusterLayout(P->plan(), Procs.size());
      if (L.isOk())
        Layout = *L;
      else
        Read = L.status();
    } else {
      Read = Plan.status();
    }
  }
  if (Status S = Procs.agree(Read); S)
    return Fail(S);
  int32_t Shape[2] = {Layout.Workers, Layout.PsTasks};
  if (Status S = Procs.broadcast(Shape, sizeof(Shape), 0); S)
    return Fail(S);
  Layout.Workers = Shape[0];
  Layout.PsTasks = Shape[1];
  // A ps-strategy run: the workers' collectives go through a group of
  // their own; the other processes are the parameter servers.
  ProcessGroup *Workers = &Procs;
  std::unique_ptr<ProcessGroup> WorkersOnly;
  if (Layout.PsTasks > 0) {
    for (int Task = 0; Task < Layout.PsTasks; ++Task)
      Procs.setRankName(Layout.Workers + Task,
                        "ps task " + std::to_string(Task));
    auto Sub = Procs.subgroup(0, Layout.Workers);
    if (!Sub.isOk())
      return Fail(Sub.status());
    WorkersOnly = Sub.take();
    Workers = WorkersOnly.get();
    T.Exec.Cluster.Group = &Procs;
  }
  if (Layout.isServer(Rank))
    return serveTask(PlanPath, T, Procs, Layout);

  T.Exec.Processes = Workers;
  T.Stop = &StopSignal;
  if (!T.TracePath.empty()) {
    // One trace per process with {replica} in the path, else replica 0's.
    std::string Traced = replicaPath(T.TracePath, Rank);
    T.TracePath = Rank == 0 || Traced != T.TracePath ? Traced : "";
  }
  Status Loaded = Status::ok();
  if (Rank != 0) {
    auto Plan = PlanFile::load(replicaPath(PlanPath, Rank));
    if (Plan.isOk())
      P = Plan.take();
    else
      Loaded = Plan.status();
  }
  if (Status S = Procs.agree(Loaded); S)
    return Fail(S);
  if (Layout.PsTasks > 0)
    if (Status S = agreeOnPlans(Procs, Layout, {P.get()}, T.Seed); S)
      return Fail(S);
  std::ostream Null(nullptr);
  std::ostream &Log = Quiet || Rank != 0 ? Null : std::cout;
  if ((Quiet || Rank != 0) && T.Progress < 0)
    T.Progress = 0;
  if (Rank != 0)
    T.Progress = 0;
  auto Trainer = Trainer::create(P, T, Log);
  if (Status S = Procs.agree(Trainer.isOk() ? Status::ok() : Trainer.status());
      S)
    return Fail(S);
  TrainResult R;
  catchStopSignals();
  Status Trained = (*Trainer)->run(R);
  // Every process of a stopped run exits with the signal's status, so that
  // the launcher's status is it too.
  int Stopped = R.StoppedBy ? 128 + R.StoppedBy : 0;
  // The servers stop once every worker is done, whatever happened, and
  // exit as the workers do.
  (*Trainer)->executor().disconnect(Trained ? 1 : Stopped).isOk();
  if (Trained)
    return Fail(Trained);
  if (Rank != 0)
    return Stopped;
  if (R.StoppedBy) {
    std::cout << "stopped after step " << R.Steps << " by "
              << (R.StoppedBy == SIGINT ? "SIGINT" : "SIGTERM");
    if (!R.StoppedHere)
      std::cout << " to another process of the run";
    std::cout << " (" << steps(R.StepsRun) << " in " << std::setprecision(3)
              << R.Seconds << std::setprecision(6) << " s)";
    if (R.Checkpoint.empty())
      std::cout << "; no --checkpoint-dir, so nothing was saved\n";
    else
      std::cout << "; its checkpoint " << R.Checkpoint
                << ": continue with --resume\n";
    return Stopped;
  }
  // After a resume, the steps this run executed (which the time and rate
  // are about), then the global step reached.
  if (R.StepsRun > 0)
    std::cout << "done: " << steps(R.StepsRun) << " in " << std::setprecision(3)
              << R.Seconds << std::setprecision(6) << " s ("
              << int64_t(R.ExamplesPerSecond) << " examples/s)";
  else // A run that starts at its last step: no time or rate to speak of.
    std::cout << "done: no step to run";
  if (R.StepsRun != R.Steps)
    std::cout << ", global step " << R.Steps;
  if (R.StepsRun > 0)
    std::cout << ", last loss " << R.LastLoss;
  for (const auto &[K, V] : R.Eval)
    std::cout << ", test " << K << ' ' << formatEvalValue(K, V);
  std::cout << '\n';
  return 0;
}

/// A parameter-server process: loads every worker's plan, takes part in
/// the workers' start (the same agreements, in the same order) and serves
/// its task until every worker is done. It prints nothing: its errors
/// reach the workers, and process 0 prints them.
static int serveTask(const std::string &PlanPath, const TrainOptions &T,
                     ProcessGroup &Procs, const ClusterLayout &Layout) {
  auto Plans = loadWorkerPlans(PlanPath, Layout.Workers);
  if (Status S = Procs.agree(Plans.isOk() ? Status::ok() : Plans.status()); S)
    return 1;
  std::vector<const PlanFile *> Mine;
  for (const auto &Plan : *Plans)
    Mine.push_back(Plan.get());
  if (Status S = agreeOnPlans(Procs, Layout, Mine, T.Seed); S)
    return 1;
  // A stop signal sent to every process of the run (as a launcher or a
  // scheduler does) must not end a server before the workers have
  // written their checkpoint: a server ends when every worker is done. A
  // signal only the server gets goes to the workers with its replies, and
  // they stop the run.
  catchStopSignals();
  ServerOptions SO;
  SO.Threads = T.Exec.Threads;
  SO.Seed = T.Seed;
  SO.Stop = &StopSignal;
  SO.TermAtStep = T.TermAtStep;
  auto Server = ParameterServer::create(Plans.take(), Procs,
                                        Procs.rank() - Layout.Workers, SO);
  if (Status S = Procs.agree(Server.isOk() ? Status::ok() : Server.status()); S)
    return 1;
  if (!(*Server)->serve().isOk())
    return 1;
  // The workers' exit status: a failed or stopped run is one for every
  // process, as a launcher reports it.
  return (*Server)->workersOutcome();
}

namespace {
/// std::cout's buffer: stdio's stdout, remembering why a write first
/// failed. The log's lines end with a flush, so the write that fails is
/// usually an early one, and the last flush finds the reason gone.
class StdoutBuffer : public std::streambuf {
public:
  /// errno of the first failed write or flush; 0 when none failed.
  int FirstError = 0;

protected:
  int_type overflow(int_type C) override {
    if (traits_type::eq_int_type(C, traits_type::eof()))
      return traits_type::not_eof(C);
    char Ch = traits_type::to_char_type(C);
    return xsputn(&Ch, 1) == 1 ? C : traits_type::eof();
  }
  std::streamsize xsputn(const char *S, std::streamsize N) override {
    errno = 0;
    size_t Written = std::fwrite(S, 1, size_t(N), stdout);
    note(Written == size_t(N));
    return std::streamsize(Written);
  }
  int sync() override {
    errno = 0;
    return note(std::fflush(stdout) == 0) ? 0 : -1;
  }

private:
  bool note(bool Ok) {
    if (!Ok && !FirstError)
      FirstError = errno ? errno : EIO;
    return Ok;
  }
};
} // namespace

/// The buffer std::cout writes through: made once and never destroyed, as
/// std::cout is flushed after main's statics are gone.
static StdoutBuffer &stdoutBuffer() {
  static StdoutBuffer *Buffer = new StdoutBuffer;
  return *Buffer;
}

/// \p Code, or 1 when what mdrun printed on standard output could not all
/// be written (a full disk, /dev/full), with a message that says why.
static int checkStandardOutput(int Code) {
  errno = 0;
  bool Failed = std::fflush(stdout) != 0;
  int Err = stdoutBuffer().FirstError;
  if (!Err && Failed)
    Err = errno;
  if (!Failed && !std::ferror(stdout) && !Err)
    return Code;
  errorStream() << "mdrun: error: cannot write standard output"
                << (Err ? std::string(": ") + std::strerror(Err) : "") << '\n';
  return Code ? Code : 1;
}

int main(int argc, char **argv) {
  // The runtime reports errors as Status; anything thrown is a bug, but
  // still ends with a message and exit code 1, not an abort.
  std::cout.rdbuf(&stdoutBuffer());
  try {
    return checkStandardOutput(mdrunMain(argc, argv));
  } catch (const std::exception &E) {
    errorStream() << "mdrun: error: internal error: " << E.what() << '\n';
  } catch (...) {
    errorStream() << "mdrun: error: internal error: unknown exception\n";
  }
  return 1;
}
