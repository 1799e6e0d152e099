//===- mdplan.cpp - The mdplan compiler driver ----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// mdplan MODEL [deployment flags] [--emit=...] [-o FILE]
//
// Reads one replica of a model, applies the deployment and runs the pass
// pipeline, then prints what --emit asks for. The work is done by the
// libraries; this file only parses options.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeploymentConfig.h"
#include "mdplan/Frontend/ModelReader.h"
#include "mdplan/Frontend/ModelWriter.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/DotWriter.h"
#include "mdplan/Plan/Compiler.h"
#include "mdplan/Plan/PlanEmitter.h"
#include "mdplan/Transforms/Pass.h"

#include "mdrt/Plan.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace llvm;
using namespace mdplan;

//===----------------------------------------------------------------------===//
// Flag values
//===----------------------------------------------------------------------===//
//
// LLVM's parsers report a bad flag value themselves, in their own words
// ("for the --strategy option: Cannot find option named 'x'!"). mdplan's
// parsers accept every value but keep a message for each bad one, and
// runTool reports the first at <command line>, as every other flag error.

/// The messages for flag values that did not parse, in command-line order.
static std::vector<std::string> &badFlagValues() {
  static std::vector<std::string> Messages;
  return Messages;
}

namespace {
/// What the values of an enum flag are, for its error: ValueNoun{"strategy"}
/// gives "unknown strategy 'x' (use 'ps' or 'mirrored')".
struct ValueNoun {
  StringRef Noun;
  template <class Opt> void apply(Opt &O) const { O.getParser().Noun = Noun; }
};

/// An enum flag's parser: cl::parser with the error above. --help lists
/// the values as for any cl::values flag.
template <typename T> class EnumParser : public cl::parser<T> {
public:
  using cl::parser<T>::parser;
  StringRef Noun;

  bool parse(cl::Option &O, StringRef ArgName, StringRef Arg, T &V) {
    SmallVector<StringRef, 8> Known;
    for (unsigned I = 0, E = this->getNumOptions(); I != E; ++I) {
      if (this->getOption(I) == Arg) {
        V = this->Values[I].V.getValue();
        return false;
      }
      Known.push_back(this->getOption(I));
    }
    badFlagValues().push_back(unknownValueMessage(Noun, Arg, Known));
    return false;
  }
};

/// LLVM's parser for a number flag of type T. cl::parser<long> is final,
/// so int64_t flags parse as long long.
template <typename T>
using LLVMNumberParser =
    cl::parser<std::conditional_t<std::is_same_v<T, long>, long long, T>>;

/// A number flag's parser: "--num-clones must be an integer, got 'two'".
template <typename T> class NumberParser : public LLVMNumberParser<T> {
  using Data = typename LLVMNumberParser<T>::parser_data_type;

public:
  using LLVMNumberParser<T>::LLVMNumberParser;

  bool parse(cl::Option &O, StringRef ArgName, StringRef Arg, Data &V) {
    constexpr bool Float = std::is_floating_point_v<Data>;
    if constexpr (Float) {
      // to_float takes "" for 0.
      if (!Arg.empty() && to_float(Arg, V))
        return false;
    } else {
      // Decimal (a leading 0 is not octal: 010 is ten) or 0x hexadecimal,
      // either after a '-'.
      StringRef Body = Arg;
      bool Negative = Body.consume_front("-");
      unsigned Radix = Body.startswith_insensitive("0x") ? 16 : 10;
      std::string Digits = Arg.str();
      if (Radix == 16) {
        Body = Body.drop_front(2);
        // A sign goes before 0x, never after it.
        Digits = Body.empty() || Body.startswith("-") || Body.startswith("+")
                     ? ""
                     : ((Negative ? "-" : "") + Body).str();
      }
      if (!Digits.empty() && !StringRef(Digits).getAsInteger(Radix, V))
        return false;
      // Digits that do not fit (also past 64 bits) are out of range.
      StringRef Magnitude = StringRef(Digits);
      Magnitude.consume_front("-");
      bool Number = !Magnitude.empty() && llvm::all_of(Magnitude, [&](char C) {
        return Radix == 16 ? isHexDigit(C) : isDigit(C);
      });
      if (Number) {
        badFlagValues().push_back(
            ("--" + O.ArgStr + " is out of range, got " + Arg).str());
        return false;
      }
    }
    badFlagValues().push_back(("--" + O.ArgStr + " must be " +
                               (Float ? "a number" : "an integer") + ", got '" +
                               Arg + "'")
                                  .str());
    return false;
  }
};

template <typename T> using EnumOpt = cl::opt<T, false, EnumParser<T>>;
template <typename T> using NumberOpt = cl::opt<T, false, NumberParser<T>>;
} // namespace

static cl::OptionCategory MainCat("mdplan options");
static cl::OptionCategory DeployCat("Deployment options (override --config)");

static cl::opt<std::string> InputFile(cl::Positional, cl::desc("<model>"),
                                      cl::cat(MainCat));
static cl::opt<std::string> OutputFile(
    "o",
    cl::desc("Output file (also --output); with several replicas, "
             "'{replica}' in it stands "
             "for the replica id, and without --replica-id every replica's "
             "output is written"),
    cl::value_desc("file"), cl::init("-"), cl::cat(MainCat));
/// -o's long name (LLVM read --output=x as a group of one-letter options).
/// (-oFILE is not taken: as a prefix option, -o would make a file of any
/// misspelled option that starts with 'o'.)
static cl::alias OutputAlias("output", cl::desc("Alias for -o"),
                             cl::aliasopt(OutputFile), cl::cat(MainCat));

enum class EmitKind { Placement, Graph, Dot, Deployment, Plan, PlanText, None };
static EnumOpt<EmitKind> Emit(
    "emit", ValueNoun{"--emit value"},
    cl::desc("What to write (default: placement; plan when -o names a .mdp "
             "file)"),
    cl::init(EmitKind::Placement),
    cl::values(clEnumValN(EmitKind::Placement, "placement",
                          "one line per node: <name> <device>"),
               clEnumValN(EmitKind::Graph, "graph",
                          "the transformed graph in the graph format"),
               clEnumValN(EmitKind::Dot, "dot",
                          "the transformed graph as a Graphviz digraph, one "
                          "cluster per device"),
               clEnumValN(EmitKind::Deployment, "deployment",
                          "the deployment's role devices and cluster"),
               clEnumValN(EmitKind::Plan, "plan", "the binary plan (.mdp)"),
               clEnumValN(EmitKind::PlanText, "plan-text",
                          "the plan, readably (memory per device included)"),
               clEnumValN(EmitKind::None, "none", "nothing")),
    cl::cat(MainCat));
static cl::opt<std::string>
    DumpPlan("dump-plan",
             cl::desc("Read a binary plan, verify it and print it as text"),
             cl::value_desc("plan.mdp"), cl::cat(MainCat));
static NumberOpt<int64_t>
    EvalBatch("eval-batch",
              cl::desc("Examples per evaluation step (default 100)"),
              cl::init(0), cl::cat(MainCat));
static cl::opt<bool> NoEval("no-eval",
                            cl::desc("Leave the evaluation program out of the "
                                     "plan"),
                            cl::cat(MainCat));
static cl::opt<std::string>
    Passes("passes", cl::desc("Pass pipeline, e.g. 'verify,place-devices'"),
           cl::value_desc("pipeline"), cl::cat(MainCat));
static cl::opt<bool> PrintAfterAll("print-after-all",
                                   cl::desc("Print the graph after each pass "
                                            "(to stderr)"),
                                   cl::cat(MainCat));
static cl::opt<bool>
    TimePasses("time-passes",
               cl::desc("Time each pass and each phase of the compilation "
                        "(reports on stderr)"),
               cl::cat(MainCat));
static cl::list<std::string>
    ExplainPlacement("explain-placement",
                     cl::desc("Show which stack entry decided the device of "
                              "these nodes"),
                     cl::value_desc("node"), cl::CommaSeparated,
                     cl::cat(MainCat));
static cl::opt<bool> ListPasses("list-passes",
                                cl::desc("List the registered passes"),
                                cl::cat(MainCat));
static EnumOpt<InputFormat> Format(
    "input-format", cl::desc("Format of the model file"),
    ValueNoun{"input format"}, cl::init(InputFormat::Auto),
    cl::values(clEnumValN(InputFormat::Auto, "auto",
                          "binary for .pb/.binpb/.mdgb, else text"),
               clEnumValN(InputFormat::Text, "text", "protobuf text"),
               clEnumValN(InputFormat::Binary, "binary", "protobuf binary")),
    cl::cat(MainCat));

// Deployment.
static cl::opt<std::string> ConfigFile("config",
                                       cl::desc("Deployment config file"),
                                       cl::value_desc("file"),
                                       cl::cat(DeployCat));
static NumberOpt<int> NumClones("num-clones", cl::desc("Clones per replica"),
                                cl::cat(DeployCat));
static cl::opt<bool> CloneOnCPU("clone-on-cpu",
                                cl::desc("Place the clones on the CPU"),
                                cl::cat(DeployCat));
static NumberOpt<int> ReplicaId("replica-id",
                                cl::desc("Index of the replica to compile"),
                                cl::cat(DeployCat));
static NumberOpt<int> NumReplicas("num-replicas",
                                  cl::desc("Number of replicas"),
                                  cl::cat(DeployCat));
static NumberOpt<int> NumPsTasks("num-ps-tasks",
                                 cl::desc("Parameter-server tasks (0: none)"),
                                 cl::cat(DeployCat));
static cl::opt<std::string> WorkerJobName("worker-job-name",
                                          cl::desc("Name of the worker job"),
                                          cl::cat(DeployCat));
static cl::opt<std::string> PsJobName("ps-job-name",
                                      cl::desc("Name of the ps job"),
                                      cl::cat(DeployCat));
static EnumOpt<Strategy> StrategyOpt(
    "strategy", cl::desc("How gradients are combined"), ValueNoun{"strategy"},
    cl::values(clEnumValN(Strategy::ParameterServer, "ps",
                          "model_deploy: shared variables, add_n"),
               clEnumValN(Strategy::Mirrored, "mirrored",
                          "MirroredStrategy: mirrored variables, all-reduce")),
    cl::cat(DeployCat));
static NumberOpt<int64_t> BatchPerClone("batch-per-clone",
                                        cl::desc("Batch size of each clone"),
                                        cl::cat(DeployCat));
static NumberOpt<int64_t>
    GlobalBatch("global-batch",
                cl::desc("Batch size of one step over all clones (mirrored: "
                         "the clones of every worker)"),
                cl::cat(DeployCat));
static NumberOpt<int>
    GpusPerWorker("gpus-per-worker",
                  cl::desc("GPUs on each worker (default: one "
                           "per clone, none with "
                           "--clone-on-cpu)"),
                  cl::cat(DeployCat));
static cl::opt<bool> SoftPlacement("soft-placement",
                                   cl::desc("Move nodes whose device does not "
                                            "exist to the host CPU"),
                                   cl::cat(DeployCat));
static cl::opt<bool>
    ColocateGradients("colocate-gradients",
                      cl::desc("Place each gradient op with its forward op"),
                      cl::cat(DeployCat));
static cl::opt<bool> SummarizeGradients(
    "summarize-gradients",
    cl::desc("Report a histogram of each variable's gradient and of its norm "
             "(<var>:gradient, <var>:gradient_norm)"),
    cl::cat(DeployCat));
static NumberOpt<int64_t>
    FirstBucketBytes("first-bucket-bytes",
                     cl::desc("Mirrored: bytes of the first all-reduce bucket "
                              "(default 1 MiB)"),
                     cl::cat(DeployCat));
static NumberOpt<int64_t>
    BucketBytes("bucket-bytes",
                cl::desc("Mirrored: bytes of the later buckets, 0 = one "
                         "all-reduce per variable (default 25 MiB)"),
                cl::cat(DeployCat));

static cl::OptionCategory OptCat("Optimizer options (override the graph "
                                 "file's training { optimizer })");
static EnumOpt<OptimizerSettings::Kind> OptimizerKind(
    "optimizer", cl::desc("The optimizer"), ValueNoun{"optimizer"},
    cl::values(
        clEnumValN(OptimizerSettings::Kind::SGD, "sgd", "gradient descent"),
        clEnumValN(OptimizerSettings::Kind::Momentum, "momentum", "momentum"),
        clEnumValN(OptimizerSettings::Kind::Adam, "adam", "Adam"),
        clEnumValN(OptimizerSettings::Kind::RMSProp, "rmsprop", "RMSProp"),
        clEnumValN(OptimizerSettings::Kind::Adagrad, "adagrad", "Adagrad")),
    cl::cat(OptCat));
static NumberOpt<double> LearningRate("learning-rate", cl::cat(OptCat),
                                      cl::desc("Learning rate"));
static NumberOpt<double>
    MomentumOpt("momentum", cl::cat(OptCat),
                cl::desc("Momentum (default 0.9; rmsprop: 0)"));
static cl::opt<bool> Nesterov("nesterov", cl::cat(OptCat),
                              cl::desc("Nesterov momentum"));
static NumberOpt<double> Beta1("beta1", cl::cat(OptCat),
                               cl::desc("Adam beta1 (default 0.9)"));
static NumberOpt<double> Beta2("beta2", cl::cat(OptCat),
                               cl::desc("Adam beta2 (default 0.999)"));
static NumberOpt<double> Epsilon(
    "epsilon", cl::cat(OptCat),
    cl::desc("Adam and RMSProp epsilon (default 1e-8; rmsprop: 1e-10)"));
static NumberOpt<double>
    Rho("rho", cl::cat(OptCat),
        cl::desc("RMSProp decay of the mean square (default 0.9)"));
static cl::opt<bool>
    Centered("centered", cl::cat(OptCat),
             cl::desc("RMSProp: normalize by the gradients' variance "
                      "(TF's centered=True)"));
static NumberOpt<double> InitialAccumulator(
    "initial-accumulator-value", cl::cat(OptCat),
    cl::desc("Adagrad accumulators' initial value (default 0.1)"));
static NumberOpt<double> ClipNorm(
    "clip-gradient-norm", cl::cat(OptCat),
    cl::desc("Clip each variable's summed gradient to this L2 norm (0: no "
             "clipping)"));
static NumberOpt<double> ClipGlobalNorm(
    "clip-global-norm", cl::cat(OptCat),
    cl::desc("Clip the summed gradients together to this global L2 norm (0: "
             "no clipping)"));
static NumberOpt<int64_t>
    DecaySteps("lr-decay-steps", cl::cat(OptCat),
               cl::desc("Decay the learning rate over N steps (exponential: "
                        "by --lr-decay-rate every N steps)"));
static NumberOpt<double> DecayRate("lr-decay-rate", cl::cat(OptCat),
                                   cl::desc("Learning-rate decay factor"));
static EnumOpt<OptimizerSettings::Decay> DecayType(
    "lr-decay-type", cl::desc("How the learning rate decays"),
    ValueNoun{"decay type"},
    cl::values(clEnumValN(OptimizerSettings::Decay::Exponential, "exponential",
                          "times --lr-decay-rate every --lr-decay-steps "
                          "(default)"),
               clEnumValN(OptimizerSettings::Decay::Polynomial, "polynomial",
                          "to --end-learning-rate over --lr-decay-steps")),
    cl::cat(OptCat));
static cl::opt<bool>
    Staircase("lr-staircase", cl::cat(OptCat),
              cl::desc("Exponential decay in whole periods (default true; "
                       "--lr-staircase=false decays every step)"));
static NumberOpt<double>
    EndLearningRate("end-learning-rate", cl::cat(OptCat),
                    cl::desc("Polynomial decay: the learning rate after "
                             "--lr-decay-steps (default 0.0001)"));
static NumberOpt<double>
    Power("lr-power", cl::cat(OptCat),
          cl::desc("Polynomial decay: the power (default 1, linear)"));

static NumberOpt<int> CloneIndex("clone-index",
                                 cl::desc("With --emit=deployment: report this "
                                          "clone only"),
                                 cl::init(-1), cl::cat(DeployCat));

template <typename OptT, typename FieldT>
static void setIfGiven(DeploymentConfig &C, StringRef Name, OptT &Opt,
                       FieldT &Field) {
  if (Opt.getNumOccurrences()) {
    Field = Opt;
    C.Origins[Name] = SourceLoc{internFileName("<command line>"), 0, 0};
  }
}

/// The deployment from --config and the flags (flags win).
static Error buildConfig(DeploymentConfig &C, SourceMgr &SM) {
  C.DefaultOrigin = SourceLoc{internFileName("<command line>"), 0, 0};
  if (!ConfigFile.empty())
    if (Error E = readDeploymentFile(ConfigFile, C, &SM))
      return E;
  setIfGiven(C, "num_clones", NumClones, C.NumClones);
  setIfGiven(C, "clone_on_cpu", CloneOnCPU, C.CloneOnCPU);
  setIfGiven(C, "replica_id", ReplicaId, C.ReplicaId);
  setIfGiven(C, "num_replicas", NumReplicas, C.NumReplicas);
  setIfGiven(C, "num_ps_tasks", NumPsTasks, C.NumPsTasks);
  setIfGiven(C, "worker_job_name", WorkerJobName, C.WorkerJobName);
  setIfGiven(C, "ps_job_name", PsJobName, C.PsJobName);
  setIfGiven(C, "strategy", StrategyOpt, C.Strat);
  setIfGiven(C, "batch_per_clone", BatchPerClone, C.BatchPerClone);
  setIfGiven(C, "global_batch", GlobalBatch, C.GlobalBatch);
  setIfGiven(C, "gpus_per_worker", GpusPerWorker, C.GpusPerWorker);
  setIfGiven(C, "soft_placement", SoftPlacement, C.SoftPlacement);
  setIfGiven(C, "colocate_gradients", ColocateGradients, C.ColocateGradients);
  setIfGiven(C, "summarize_gradients", SummarizeGradients,
             C.SummarizeGradients);
  setIfGiven(C, "first_bucket_bytes", FirstBucketBytes, C.FirstBucketBytes);
  setIfGiven(C, "bucket_bytes", BucketBytes, C.BucketBytes);
  // Optimizer fields: each flag given sets one field on top of the config
  // file's and the graph file's.
  auto Opt = [&](auto &Flag, StringRef Field, auto Set) {
    if (!Flag.getNumOccurrences())
      return;
    if (!C.Optimizer)
      C.Optimizer = OptimizerSettings();
    Set(*C.Optimizer);
    C.OptimizerFieldsSet[Field] = true;
    C.Origins[Field] = C.DefaultOrigin;
  };
  Opt(OptimizerKind, "kind", [](OptimizerSettings &O) { O.K = OptimizerKind; });
  Opt(LearningRate, "learning_rate",
      [](OptimizerSettings &O) { O.LearningRate = LearningRate; });
  Opt(MomentumOpt, "momentum",
      [](OptimizerSettings &O) { O.Momentum = MomentumOpt; });
  Opt(Nesterov, "nesterov",
      [](OptimizerSettings &O) { O.Nesterov = Nesterov; });
  Opt(Beta1, "beta1", [](OptimizerSettings &O) { O.Beta1 = Beta1; });
  Opt(Beta2, "beta2", [](OptimizerSettings &O) { O.Beta2 = Beta2; });
  Opt(Epsilon, "epsilon", [](OptimizerSettings &O) { O.Epsilon = Epsilon; });
  Opt(Rho, "rho", [](OptimizerSettings &O) { O.Rho = Rho; });
  Opt(Centered, "centered",
      [](OptimizerSettings &O) { O.Centered = Centered; });
  Opt(ClipNorm, "clip_gradient_norm",
      [](OptimizerSettings &O) { O.ClipNorm = ClipNorm; });
  Opt(ClipGlobalNorm, "clip_global_norm",
      [](OptimizerSettings &O) { O.ClipGlobalNorm = ClipGlobalNorm; });
  Opt(InitialAccumulator, "initial_accumulator_value",
      [](OptimizerSettings &O) { O.InitialAccumulator = InitialAccumulator; });
  Opt(DecaySteps, "decay_steps",
      [](OptimizerSettings &O) { O.DecaySteps = DecaySteps; });
  Opt(DecayRate, "decay_rate",
      [](OptimizerSettings &O) { O.DecayRate = DecayRate; });
  Opt(DecayType, "decay_type",
      [](OptimizerSettings &O) { O.DecayType = DecayType; });
  Opt(Staircase, "staircase",
      [](OptimizerSettings &O) { O.Staircase = Staircase; });
  Opt(EndLearningRate, "end_learning_rate",
      [](OptimizerSettings &O) { O.EndLearningRate = EndLearningRate; });
  Opt(Power, "power", [](OptimizerSettings &O) { O.Power = Power; });
  if (EvalBatch.getNumOccurrences() && EvalBatch <= 0)
    return makeError(C.DefaultOrigin, "--eval-batch must be positive");
  if (BatchPerClone.getNumOccurrences() && BatchPerClone <= 0)
    return makeError(C.originOf("batch_per_clone"),
                     "--batch-per-clone must be positive");
  if (GlobalBatch.getNumOccurrences() && GlobalBatch <= 0)
    return makeError(C.originOf("global_batch"),
                     "--global-batch must be positive");
  if (BatchPerClone.getNumOccurrences() && !GlobalBatch.getNumOccurrences())
    C.GlobalBatch = 0;
  if (GlobalBatch.getNumOccurrences() && !BatchPerClone.getNumOccurrences())
    C.BatchPerClone = 0;
  if (CloneIndex.getNumOccurrences())
    C.Origins["clone_index"] = C.DefaultOrigin;
  // -1 is these flags' "not given" value; written explicitly it is an error
  // like any other negative count.
  if (GpusPerWorker.getNumOccurrences() && GpusPerWorker < 0)
    return makeError(C.DefaultOrigin,
                     "--gpus-per-worker must not be negative, got " +
                         Twine(GpusPerWorker));
  if (CloneIndex.getNumOccurrences() && CloneIndex < 0)
    return makeError(C.DefaultOrigin, "--clone-index must not be negative, "
                                      "got " +
                                          Twine(CloneIndex));
  return C.validate();
}

static void printDeployment(const DeploymentConfig &C, raw_ostream &OS) {
  auto Show = [](const std::string &S) { return S.empty() ? "\"\"" : S; };
  OS << "strategy " << strategyName(C.Strat) << '\n';
  OS << "num_clones " << C.NumClones << '\n';
  for (int I = 0; I < C.NumClones; ++I) {
    if (CloneIndex >= 0 && I != CloneIndex)
      continue;
    OS << "clone_device(" << I << ") " << C.cloneDevice(I)->toString() << '\n';
    OS << "clone_scope(" << I << ") " << Show(*C.cloneScope(I)) << '\n';
  }
  OS << "optimizer_device " << C.optimizerDevice() << '\n';
  OS << "inputs_device " << C.inputsDevice() << '\n';
  if (C.NumPsTasks)
    OS << "variables_device ps-round-robin(" << C.variablesDeviceSpec()
       << ", tasks=" << C.NumPsTasks << ")\n";
  else
    OS << "variables_device " << C.variablesDeviceSpec() << '\n';
  OS << "caching_device "
     << (C.hasCachingDevice() ? "the reading op's device" : "none") << '\n';
  Cluster Cl = C.cluster();
  OS << "cluster " << Cl.WorkerJob << " x" << Cl.NumWorkers << " (CPU:0";
  if (Cl.GpusPerWorker == 1)
    OS << ", GPU:0";
  else if (Cl.GpusPerWorker)
    OS << ", GPU:0-" << Cl.GpusPerWorker - 1;
  OS << ")";
  if (Cl.NumPs)
    OS << ", " << Cl.PsJob << " x" << Cl.NumPs << " (CPU:0)";
  OS << '\n';
}

/// --time-passes: the phases of a run, besides the pass report. Printed
/// once, after the output is written; a failed run prints none.
namespace {
struct PhaseTimers {
  llvm::TimerGroup Group{"mdplan-phases", "Compilation phase timing report"};
  llvm::Timer Read{"read", "read model", Group};
  llvm::Timer Write{"write", "write output", Group};
  llvm::Timer EvalCopy{"eval-copy", "copy model for evaluation", Group};
  llvm::Timer Training{"training", "training pipeline", Group};
  llvm::Timer Eval{"eval", "evaluation program", Group};
  llvm::Timer Emit{"emit", "emit and verify plan", Group};

  CompileTimers compileTimers() { return {&EvalCopy, &Training, &Eval, &Emit}; }
  /// Drops what was measured, so that destroying the group prints nothing.
  void discard() {
    for (llvm::Timer *T : {&Read, &Write, &EvalCopy, &Training, &Eval, &Emit})
      T->clear();
  }
};
} // namespace

static std::unique_ptr<PhaseTimers> Phases;

static llvm::Timer *phase(llvm::Timer PhaseTimers::*T) {
  return Phases ? &(Phases.get()->*T) : nullptr;
}

/// After opening \p Out on \p Path: ToolOutputFile removes its file when
/// mdplan fails before keeping it; never a symbolic link or a device path
/// (-o /dev/stdout), which are kept from the start.
static void keepUnlessRegular(ToolOutputFile &Out, StringRef Path) {
  sys::fs::file_status St;
  if (Path != "-" && (sys::fs::status(Path, St, /*Follow=*/false) ||
                      St.type() != sys::fs::file_type::regular_file))
    Out.keep();
}

/// Opens \p Path ('-': standard output) for writing, as a file removed
/// unless kept (keepUnlessRegular, keepOutput).
static Expected<std::unique_ptr<ToolOutputFile>>
openOutput(StringRef Path, sys::fs::OpenFlags Flags = sys::fs::OF_Text) {
  std::error_code EC;
  auto Out = std::make_unique<ToolOutputFile>(Path, EC, Flags);
  if (EC)
    return makeError("cannot open '" + Path + "': " + EC.message());
  keepUnlessRegular(*Out, Path);
  return std::move(Out);
}

/// Keeps \p Out once all of it is written: an error writing it (a full
/// disk, /dev/full) is mdplan's error, and the file is removed, rather than
/// LLVM's fatal "IO failure on output stream" when the stream closes.
static Error keepOutput(ToolOutputFile &Out, StringRef Path) {
  raw_fd_ostream &OS = Out.os();
  OS.flush();
  if (Path != "-" && !OS.has_error())
    OS.close();
  if (!OS.has_error()) {
    Out.keep();
    return Error::success();
  }
  std::error_code EC = OS.error();
  OS.clear_error();
  // ToolOutputFile removes what it could not write (a regular file only:
  // keepUnlessRegular).
  return makeError(
      "cannot write " +
      (Path == "-" ? std::string("standard output") : "'" + Path.str() + "'") +
      ": " + EC.message());
}

/// An error when output \p Path is a file mdplan reads (the model, the
/// --config file, the --dump-plan plan): writing it would destroy what the
/// output was made from.
static Error checkNotAnInput(StringRef Path) {
  if (Path == "-")
    return Error::success();
  const std::pair<const char *, const std::string *> Inputs[] = {
      {"the model file", &InputFile},
      {"the --config file", &ConfigFile},
      {"the --dump-plan plan", &DumpPlan}};
  for (const auto &[What, In] : Inputs)
    if (!In->empty() && sys::fs::equivalent(Path, *In))
      return makeError("-o '" + Path + "' is " + What +
                       " mdplan reads; writing it would overwrite it (give "
                       "the output another path)");
  return Error::success();
}

/// The real stderr while a StderrCapture redirects it, or -1.
static int SavedStderr = -1;

/// An error writing what mdplan printed on standard output itself (--help,
/// --version, --list-passes), reported at exit as mdplan's error rather
/// than as LLVM's fatal "IO failure on output stream"; so is an error
/// writing stderr (with nowhere to report it). --help and --version exit
/// inside the command-line parser, while stderr is captured: it is given
/// back first.
static void checkStandardOutputAtExit() {
  if (SavedStderr >= 0) {
    ::dup2(SavedStderr, 2);
    ::close(SavedStderr);
    SavedStderr = -1;
  }
  if (errs().has_error()) {
    errs().clear_error();
    std::_Exit(1);
  }
  raw_fd_ostream &OS = outs();
  OS.flush();
  if (!OS.has_error())
    return;
  std::error_code EC = OS.error();
  OS.clear_error();
  errs() << "mdplan: error: cannot write standard output: " << EC.message()
         << '\n';
  std::_Exit(1);
}

/// --dump-plan: read a binary plan back, verify it and print it.
static Error dumpPlan() {
  if (Error E = checkNotAnInput(OutputFile))
    return E;
  auto Plan = mdrt::PlanFile::load(DumpPlan);
  if (!Plan.isOk())
    return makeError(Plan.status().message());
  auto Out = openOutput(OutputFile);
  if (!Out)
    return Out.takeError();
  std::ostringstream SS;
  mdrt::printPlanText((*Plan)->plan(), SS);
  (*Out)->os() << SS.str();
  return keepOutput(**Out, OutputFile);
}

/// Compiles \p Model for deployment \p C and writes what --emit asks for to
/// \p Path.
/// Prints warnings and notes on stderr, each once: the replicas of one
/// run compile the same model, whose warnings are the same.
static const DiagnosticHandler &toolDiagnostics() {
  static const DiagnosticHandler Once = [] {
    auto Seen =
        std::make_shared<std::set<std::tuple<int, std::string, std::string>>>();
    DiagnosticHandler Next = DiagnosticHandler::stderrHandler();
    return DiagnosticHandler(
        [Seen, Next](Severity Sev, const SourceLoc &Loc, StringRef Msg) {
          if (!Seen->emplace(int(Sev), Loc.str(), Msg.str()).second)
            return;
          if (Sev == Severity::Warning)
            Next.warning(Loc, Msg);
          else
            Next.note(Loc, Msg);
        });
  }();
  return Once;
}

static Error compileAndWrite(std::unique_ptr<Graph> Model,
                             const DeploymentConfig &C, StringRef Path) {
  if (Error E = C.validate())
    return E;
  EmitKind What = Emit;
  if (!Emit.getNumOccurrences()) {
    if (!ExplainPlacement.empty())
      What = EmitKind::None;
    else if (Path.endswith(".mdp"))
      What = EmitKind::Plan;
  }
  bool WantPlan = What == EmitKind::Plan || What == EmitKind::PlanText;

  CompileOptions CO;
  if (Passes.getNumOccurrences()) {
    CO.Pipeline = Passes;
    if (CO.Pipeline.empty())
      CO.Pipeline = " "; // An empty pipeline runs no pass.
  }
  CO.EmitPlan = WantPlan;
  CO.BuildEval = !NoEval;
  CO.EvalBatch = EvalBatch;
  if (PrintAfterAll)
    CO.PM.PrintAfterAll = &errs();
  if (TimePasses)
    CO.PM.TimePasses = &errs();
  if (Phases)
    CO.Timers = Phases->compileTimers();
  PassContext Ctx(C);
  Ctx.Diags = toolDiagnostics();
  for (const std::string &N : ExplainPlacement)
    Ctx.Explain.insert(N);
  auto Comp = compileModel(std::move(Model), Ctx, CO);
  if (!Comp)
    return Comp.takeError();
  // The process ends after this: freeing a large graph node by node only
  // costs time (as clang's -disable-free).
  auto Bury = make_scope_exit([&] {
    BuryPointer(std::move(Comp->Train));
    BuryPointer(std::move(Comp->Eval));
  });
  Graph &Result = *Comp->Train;
  if (WantPlan && Comp->Plan.empty()) {
    if (!Emit.getNumOccurrences())
      return makeError("-o " + Path +
                       " writes a plan, which needs a pipeline that ends "
                       "with plan-memory (--emit=graph writes the graph the "
                       "passes made)");
    return makeError(
        "--emit=" + StringRef(What == EmitKind::Plan ? "plan" : "plan-text") +
        " needs a pipeline that ends with plan-memory");
  }
  if (!ExplainPlacement.empty() && Ctx.Explanations.empty())
    return makeError("--explain-placement needs the place-devices pass");

  // Nothing to write: -o's file is left as it is, not emptied.
  if (What == EmitKind::None && Ctx.Explanations.empty())
    return Error::success();
  TimeRegion WriteTime(phase(&PhaseTimers::Write));
  auto OutOr = openOutput(Path, What == EmitKind::Plan ? sys::fs::OF_None
                                                       : sys::fs::OF_Text);
  if (!OutOr)
    return OutOr.takeError();
  ToolOutputFile &Out = **OutOr;
  raw_ostream &OS = Out.os();
  for (const auto &[N, R] : Ctx.Explanations)
    printPlacementRecord(OS, *N, R);

  switch (What) {
  case EmitKind::Placement:
    for (const auto &N : Result.nodes()) {
      if (!N->isPlaced())
        return makeError("--emit=placement needs the place-devices pass");
      OS << N->getName() << ' ' << Result.deviceOf(*N).toString() << '\n';
    }
    break;
  case EmitKind::Graph:
    writeModel(Result, OS);
    break;
  case EmitKind::Dot:
    writeDot(Result, OS);
    break;
  case EmitKind::Plan:
    OS.write(reinterpret_cast<const char *>(Comp->Plan.data()),
             Comp->Plan.size());
    break;
  case EmitKind::PlanText: {
    std::ostringstream SS;
    mdrt::printPlanText(*mdplan::plan::GetPlan(Comp->Plan.data()), SS);
    OS << SS.str();
    break;
  }
  case EmitKind::Deployment:
  case EmitKind::None:
    break;
  }
  return keepOutput(Out, Path);
}

/// While alive, what is written to stderr (file descriptor 2) goes to a
/// temporary file instead; take() returns it.
class StderrCapture {
public:
  StderrCapture() {
    errs().flush();
    File = std::tmpfile();
    if (File) {
      Saved = ::dup(2);
      if (Saved < 0 || ::dup2(::fileno(File), 2) < 0) {
        std::fclose(File);
        File = nullptr;
      } else {
        SavedStderr = Saved;
      }
    }
  }
  ~StderrCapture() { restore(); }
  std::string take() {
    restore();
    std::string Text;
    if (!File)
      return Text;
    std::rewind(File);
    char Buf[4096];
    for (size_t N; (N = std::fread(Buf, 1, sizeof(Buf), File)) > 0;)
      Text.append(Buf, N);
    std::fclose(File);
    File = nullptr;
    return Text;
  }

private:
  void restore() {
    errs().flush();
    if (Saved >= 0) {
      ::dup2(Saved, 2);
      ::close(Saved);
      Saved = -1;
      SavedStderr = -1;
    }
  }
  std::FILE *File = nullptr;
  int Saved = -1;
};

/// Whether \p Near, an option's name, is a guess worth offering for the
/// unknown name \p Given: a few edits away (at most 2, and at most half of
/// \p Given, so that `--lr` is not taken for `-o`), or its beginning.
static bool nearOption(StringRef Given, StringRef Near) {
  if (Given.size() >= 3 && Near.startswith(Given))
    return true;
  unsigned Most = std::min<unsigned>(2, Given.size() / 2);
  return !Given.empty() && Given.edit_distance(Near, true, Most + 1) <= Most;
}

/// "unknown option 'ARG'", with \p Guess (an option, dashes included)
/// when there is one.
static std::string unknownOptionMessage(StringRef Arg, StringRef Guess) {
  std::string Msg = ("unknown option '" + Arg + "'").str();
  if (!Guess.empty())
    Msg += ("; did you mean '" + Guess + "'?").str();
  return Msg + " (mdplan --help lists the options)";
}

/// LLVM's command-line errors (`mdplan: for the --x option: ... !`, several
/// lines, capitalised) as one message of mdplan's kind, for <command line>.
static std::string rewriteOptionError(StringRef Text) {
  SmallVector<StringRef, 4> Lines;
  Text.split(Lines, '\n', -1, false);
  if (Lines.empty())
    return "invalid command line";
  StringRef First = Lines[0];
  First.consume_front("mdplan: ");
  First = First.rtrim();
  // An option's value or count.
  if (First.consume_front("for the ")) {
    auto [Flag, Why] = First.split(" option: ");
    Why = Why.rtrim("!").rtrim();
    if (Why.consume_back(" is invalid value for boolean argument! Try 0 or "
                         "1") ||
        Why.consume_back(" is invalid value for boolean argument"))
      return (Flag + " must be true or false (or 1 or 0), got " + Why).str();
    if (Why == "may only occur zero or one times")
      return (Flag + " is given more than once").str();
    if (Why == "requires a value")
      return (Flag + " needs a value (" + Flag + "=...)").str();
    if (Why.consume_front("does not allow a value! "))
      return (Flag + " takes no value, got " + Why.rsplit(' ').first).str();
    std::string Msg = Why.str();
    if (!Msg.empty())
      Msg[0] = char(toLower(Msg[0]));
    return (Flag + ": " + Msg).str();
  }
  // An unknown option, with LLVM's guess on the next line.
  if (First.consume_front("Unknown command line argument '")) {
    StringRef Guess;
    if (Lines.size() > 1) {
      Guess = Lines[1];
      Guess.consume_front("mdplan: ");
      Guess = Guess.consume_front("Did you mean '")
                  ? Guess.rtrim("?").rtrim("'")
                  : StringRef();
    }
    StringRef Arg = First.split("'.").first;
    // LLVM names the nearest option however far it is (--batch-size=16
    // was "--optimizer=16"): kept only when near.
    auto NameOf = [](StringRef A) { return A.ltrim('-').split('=').first; };
    if (!nearOption(NameOf(Arg), NameOf(Guess)))
      Guess = {};
    return unknownOptionMessage(Arg, Guess);
  }
  if (First.startswith("Too many positional arguments"))
    return "more than one model file given (mdplan MODEL [options])";
  std::string Msg = First.rtrim("!").str();
  if (!Msg.empty())
    Msg[0] = char(toLower(Msg[0]));
  return Msg;
}

/// LLVM reads an unknown argument that starts with the letter of a
/// one-letter option (-o) as a group of one-letter options, and says only
/// "-o: may not occur within a group". This finds that argument and says
/// what LLVM says of other unknown options; -oFILE gets the ways to name
/// the output. Empty when every option argument is known.
static std::string unknownGroupedArgument(int argc, char **argv) {
  StringMap<cl::Option *> &Opts = cl::getRegisteredOptions();
  for (int I = 1; I < argc; ++I) {
    StringRef A = argv[I];
    if (A == "--")
      break;
    if (A.size() < 2 || A[0] != '-')
      continue;
    auto [Name, Value] = A.ltrim('-').split('=');
    auto It = Opts.find(Name);
    if (It != Opts.end()) {
      // Its value in the next argument.
      if (!A.contains('=') &&
          It->second->getValueExpectedFlag() == cl::ValueRequired)
        ++I;
      continue;
    }
    if (A.startswith("-o") && !A.startswith("--"))
      return "unknown option '" + A.str() +
             "': write the output as -o FILE, -o=FILE or --output=FILE";
    StringRef Best;
    unsigned BestDistance = ~0u;
    for (const auto &Entry : Opts) {
      if (Entry.second->getOptionHiddenFlag() != cl::NotHidden ||
          !nearOption(Name, Entry.getKey()))
        continue;
      unsigned D = Name.edit_distance(Entry.getKey(), true);
      if (D < BestDistance) {
        Best = Entry.getKey();
        BestDistance = D;
      }
    }
    return unknownOptionMessage(
        A.split('=').first,
        Best.empty() ? "" : (Best.size() == 1 ? "-" : "--") + Best.str());
  }
  return "";
}

static Error runTool(SourceMgr &SM) {
  if (!badFlagValues().empty())
    return makeError(SourceLoc{internFileName("<command line>"), 0, 0},
                     badFlagValues().front());
  if (ListPasses) {
    for (const PassInfo &P : registeredPasses()) {
      outs() << P.Name << ": " << P.Summary << '\n';
      for (const auto &[Opt, Doc] : P.Options)
        outs() << "    " << Opt << ": " << Doc << '\n';
    }
    return Error::success();
  }
  if (!DumpPlan.empty())
    return dumpPlan();
  DeploymentConfig Config;
  if (Error E = buildConfig(Config, SM))
    return E;
  if (CloneIndex.getNumOccurrences()) {
    if (auto D = Config.cloneDevice(CloneIndex); !D)
      return D.takeError();
  }
  if (Emit == EmitKind::Deployment) {
    if (Error E = checkNotAnInput(OutputFile))
      return E;
    auto Out = openOutput(OutputFile);
    if (!Out)
      return Out.takeError();
    printDeployment(Config, (*Out)->os());
    return keepOutput(**Out, OutputFile);
  }
  if (InputFile.empty())
    return makeError("no model file given (mdplan MODEL [options])");

  if (std::string Typo = mdrt::misspelledReplica(OutputFile); !Typo.empty())
    return makeError("-o '" + OutputFile + "' has '" + Typo +
                     "': the placeholder of the replica is '{replica}'");
  // With {replica} in the output path and no --replica-id, every replica's
  // output, one path each; else this replica's.
  std::vector<int> Replicas = {Config.ReplicaId};
  bool PerReplica = mdrt::replicaPath(OutputFile, 0) != OutputFile;
  if (PerReplica && !ReplicaId.getNumOccurrences()) {
    Replicas.clear();
    for (int R = 0; R < Config.NumReplicas; ++R)
      Replicas.push_back(R);
  }
  // Before the model is read and compiled, which can take a while.
  for (int R : Replicas)
    if (Error E = checkNotAnInput(mdrt::replicaPath(OutputFile, R)))
      return E;

  ReadOptions RO;
  RO.Format = Format;
  RO.SM = &SM;
  RO.Diags = DiagnosticHandler::stderrHandler();
  if (TimePasses)
    Phases = std::make_unique<PhaseTimers>();
  auto G = [&] {
    TimeRegion T(phase(&PhaseTimers::Read));
    return readModelFile(InputFile, RO);
  }();
  if (!G)
    return G.takeError();

  for (size_t I = 0; I < Replicas.size(); ++I) {
    DeploymentConfig C = Config;
    C.ReplicaId = Replicas[I];
    std::string Path = mdrt::replicaPath(OutputFile, C.ReplicaId);
    // The last replica takes the graph as read; the others a copy.
    std::unique_ptr<Graph> Model =
        I + 1 == Replicas.size() ? std::move(*G) : (*G)->clone();
    if (Error E = compileAndWrite(std::move(Model), C, Path))
      return E;
  }
  if (Phases)
    Phases->Group.print(errs(), /*ResetAfterPrint=*/true);
  return Error::success();
}

/// A plan of a large graph makes millions of small allocations and a few
/// large ones that grow by doubling. glibc's defaults serve each large one
/// with a fresh mmap and give freed memory back to the kernel at once, so
/// the same pages fault in again and again; keeping freed memory in the heap
/// makes large plans about a quarter faster (docs/Performance.md).
static void tuneMalloc() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20); // the largest glibc accepts
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int main(int argc, char **argv) {
  tuneMalloc();
  InitLLVM X(argc, argv);
  // The streams first, so that the check runs before their destructors.
  outs();
  errs();
  std::atexit(checkStandardOutputAtExit);
  // mdplan's own version (CMake's project version), not LLVM's.
  cl::SetVersionPrinter([](raw_ostream &OS) { OS << planProducer() << '\n'; });
  cl::HideUnrelatedOptions({&MainCat, &DeployCat, &OptCat});
  // LLVM prints an option's errors on stderr itself (Option::error), the
  // others on the stream it is given: both are kept, and one line of
  // mdplan's kind printed instead.
  std::string OptionErrors;
  bool Parsed;
  {
    raw_string_ostream OptionErrorStream(OptionErrors);
    // (--help and --version exit inside the parser: the exit handler gives
    // stderr back.)
    StderrCapture Capture;
    Parsed = cl::ParseCommandLineOptions(
        argc, argv,
        "mdplan: compile one replica of a model and a deployment into a "
        "placed training step\n",
        &OptionErrorStream);
    OptionErrors = Capture.take() + OptionErrorStream.str();
  }
  if (!Parsed) {
    std::string Message = rewriteOptionError(OptionErrors);
    if (StringRef(OptionErrors).contains("may not occur within a group"))
      if (std::string Unknown = unknownGroupedArgument(argc, argv);
          !Unknown.empty())
        Message = Unknown;
    printErrors(
        makeError(SourceLoc{internFileName("<command line>"), 0, 0}, Message),
        errs(), nullptr, "mdplan");
    return 1;
  }
  errs() << OptionErrors;
  SourceMgr SM;
  Error E = runTool(SM);
  // Before InitLLVM shuts LLVM down: the timers need its locks.
  if (E && Phases)
    Phases->discard();
  Phases.reset();
  if (E) {
    printErrors(std::move(E), errs(), &SM, "mdplan");
    return 1;
  }
  return 0;
}
