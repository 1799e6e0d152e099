//===- Trainer.cpp - The training loop ------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Trainer.h"
#include "mdrt/Checkpoint.h"
#include "mdrt/Random.h"

#include "StopSignal.h"

#include <cassert>
#include <cerrno>
#include <cfloat>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mdrt;

namespace {

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Asynchronous ps workers with a stop handler meet about every
/// StopCheckSeconds, so that a signal one of them gets stops them all
/// soon: after StopCheckFirstSteps steps, then as many steps as take that
/// long at the workers' mean step time, between 1 and StopCheckMaxSteps.
constexpr double StopCheckSeconds = 0.5;
constexpr int64_t StopCheckFirstSteps = 10, StopCheckMaxSteps = 100;

int64_t nextStopCheck(double SecondsPerStep) {
  if (!(SecondsPerStep > 0))
    return StopCheckMaxSteps;
  double Steps = StopCheckSeconds / SecondsPerStep;
  return Steps >= double(StopCheckMaxSteps)
             ? StopCheckMaxSteps
             : std::max<int64_t>(1, int64_t(Steps));
}

std::string fixed(double V, int Digits) {
  if (!std::isfinite(V))
    return std::isnan(V) ? "nan" : V > 0 ? "inf" : "-inf";
  char Buf[512]; // %f of 1e308 has 309 digits.
  snprintf(Buf, sizeof(Buf), "%.*f", Digits, V);
  return Buf;
}

/// Every digit of \p V (%.17g), for fingerprints.
std::string exactDouble(double V) {
  char Buf[32];
  snprintf(Buf, sizeof(Buf), "%.17g", V);
  return Buf;
}

/// \p S as a JSON string: quoted, with quotes, backslashes and control
/// characters escaped (summary tags and output names may hold any).
std::string jsonString(const std::string &S) {
  std::string R = "\"";
  for (char C : S) {
    if (C == '"' || C == '\\') {
      R += '\\';
      R += C;
    } else if (uint8_t(C) < 0x20) {
      char Buf[8];
      snprintf(Buf, sizeof(Buf), "\\u%04x", unsigned(uint8_t(C)));
      R += Buf;
    } else {
      R += C;
    }
  }
  return R + '"';
}

/// \p V as a JSON number with the fewest digits that read back to it at the
/// precision of \p Precision (at most 9 significant digits for Float32,
/// which rounds \p V to a float first, and 17 for Float64); null when not
/// finite (JSON has no NaN or infinity).
std::string jsonNumber(double V, DType Precision) {
  if (!std::isfinite(V))
    return "null";
  char Buf[64];
  std::to_chars_result R;
  if (Precision == DType::Float32 && std::fabs(V) <= FLT_MAX)
    R = std::to_chars(Buf, Buf + sizeof(Buf), float(V));
  else
    R = std::to_chars(Buf, Buf + sizeof(Buf), V);
  assert(R.ec == std::errc() && "64 bytes hold any double");
  return std::string(Buf, R.ptr);
}

std::string duration(double S) {
  if (!(S >= 0) || S > 1e7)
    return "?";
  int T = int(std::lround(S));
  char Buf[32];
  if (T >= 3600)
    snprintf(Buf, sizeof(Buf), "%d:%02d:%02d", T / 3600, T / 60 % 60, T % 60);
  else
    snprintf(Buf, sizeof(Buf), "%d:%02d", T / 60, T % 60);
  return Buf;
}

/// Number of classes a label input must stay below: the width of the
/// logits of the SparseSoftmaxCrossEntropy kernels that read it (through
/// views), or the depth of the OneHot kernels that do; 0 when no such
/// kernel reads it.
int64_t classesOf(const fb::Plan &P, const fb::Program &Prog, uint32_t Buf) {
  if (!Prog.devices())
    return 0;
  // Where a buffer's value comes from: through views and transfers.
  std::map<int64_t, uint32_t> SendInput;
  std::map<uint32_t, int64_t> RecvChannel;
  auto Channel = [](const fb::Kernel *K) {
    return kernelIntAttr(*K, "channel");
  };
  for (const fb::DeviceProgram *DP : *Prog.devices())
    if (DP->kernels())
      for (const fb::Kernel *K : *DP->kernels()) {
        if (K->op()->str() == "Send" && K->inputs() && K->inputs()->size())
          SendInput[Channel(K)] = K->inputs()->Get(0);
        if (K->op()->str() == "Recv" && K->outputs() && K->outputs()->size())
          RecvChannel[K->outputs()->Get(0)] = Channel(K);
      }
  auto Root = [&](uint32_t B) {
    for (int Guard = 0; Guard < 64; ++Guard) {
      if (P.buffers()->Get(B)->alias_of() >= 0) {
        B = uint32_t(P.buffers()->Get(B)->alias_of());
        continue;
      }
      auto R = RecvChannel.find(B);
      if (R == RecvChannel.end() || !SendInput.count(R->second))
        break;
      B = SendInput[R->second];
    }
    return B;
  };
  int64_t Classes = 0;
  for (const fb::DeviceProgram *DP : *Prog.devices()) {
    if (!DP->kernels())
      continue;
    for (const fb::Kernel *K : *DP->kernels()) {
      if (K->op()->str() == "SparseSoftmaxCrossEntropy" && K->inputs() &&
          K->inputs()->size() == 2 && Root(K->inputs()->Get(1)) == Buf) {
        const fb::Buffer *L = P.buffers()->Get(K->inputs()->Get(0));
        if (L->shape() && L->shape()->size() == 2)
          Classes = L->shape()->Get(1);
      }
      if (K->op()->str() == "OneHot" && K->inputs() &&
          K->inputs()->size() == 1 && Root(K->inputs()->Get(0)) == Buf &&
          kernelIntAttr(*K, "depth") > 0)
        Classes = kernelIntAttr(*K, "depth");
    }
  }
  return Classes;
}

} // namespace

std::string mdrt::formatEvalValue(const std::string &Name, double Value) {
  return Name.find("accuracy") != std::string::npos
             ? fixed(100 * Value, 2) + "%"
             : fixed(Value, 4);
}

/// "cannot write <What> '<Path>'", with errno's reason when a failed
/// stream operation left one (set errno to 0 before it).
static Status writeError(const std::string &What, const std::string &Path) {
  return Status::error(
      "cannot write " + What + " '" + Path + "'" +
      (errno ? std::string(": ") + std::strerror(errno) : std::string()));
}

struct Trainer::Impl {
  std::shared_ptr<const PlanFile> Plan;
  TrainOptions Opts;
  std::ostream &Log;
  std::unique_ptr<Executor> Exec;
  int TrainProg = -1, EvalProg = -1;
  std::shared_ptr<const Dataset> TrainData, EvalData;
  std::unique_ptr<BatchIterator> TrainIt;
  std::vector<void *> TrainInputs, EvalInputs;
  std::ofstream Metrics;
  /// --trace's file, opened (and so checked) before the run.
  std::ofstream TraceOut;
  bool ProgressBar = false;
  uint64_t EvalRuns = 0;
  /// The run's processes (Opts.Exec.Processes, or a group of this process
  /// alone); replica 0 writes the logs, metrics and checkpoints.
  ProcessGroup *Procs = nullptr;
  std::unique_ptr<ProcessGroup> OwnProcs;
  bool isLead() const { return Procs->rank() == 0; }
  /// Some variables live on parameter servers in other processes.
  bool RemoteVariables = false;

  Impl(std::shared_ptr<const PlanFile> Plan, const TrainOptions &Opts,
       std::ostream &Log)
      : Plan(std::move(Plan)), Opts(Opts), Log(Log) {}

  std::vector<FeatureRequest> requests(int Prog, std::vector<void *> &Ptrs);
  Status loadData();
  Status evaluate(int64_t Step, std::map<std::string, double> &Out);
  Status checkpoint(int64_t Step);
  Status prepareCheckpointDir();
  Status resume(int64_t &Step, bool &Resumed);
  Status loadLatest(int64_t &Step, DataPosition &Position, bool &Found,
                    std::vector<std::vector<uint8_t>> &Values);
  Status loadInitial(int64_t &Step, DataPosition &Position,
                     std::vector<std::vector<uint8_t>> &Values,
                     std::vector<uint8_t> &Present);
  Status restore(bool &Lead, int64_t &Step, DataPosition Position,
                 std::vector<std::vector<uint8_t>> &Values,
                 std::vector<uint8_t> Present);
  Status initFrom(int64_t &Step);
  Status checkAgreement(int64_t Total);
  uint64_t dataDigest(const Dataset *D) const;
  /// \p FailedAt orders the processes' failures (asynchronous workers
  /// fail at different steps): the first is reported, not what it caused
  /// on the others. \p Histograms: read (and average) the histogram
  /// outputs too, which every process must agree on.
  Status readTrainOutputs(const Status &StepStatus,
                          std::vector<OutputValue> &Outs,
                          std::vector<double> *Extra = nullptr,
                          int64_t FailedAt = 0, bool Histograms = true);
  /// Writes a line of the metrics file; the first failure is kept in
  /// MetricsStatus (the run goes on, and fails with it at its end) and
  /// ends the writing.
  void metricsLine(const std::string &JSON) {
    if (!Metrics.is_open())
      return;
    errno = 0;
    Metrics << JSON << '\n';
    Metrics.flush();
    if (Metrics)
      return;
    MetricsStatus = writeError("metrics file", Opts.MetricsPath);
    Metrics.close();
  }
  Status MetricsStatus = Status::ok();
};

std::vector<FeatureRequest> Trainer::Impl::requests(int Prog,
                                                    std::vector<void *> &Ptrs) {
  std::vector<FeatureRequest> R;
  const fb::Program &FP = *Plan->plan().programs()->Get(Prog);
  size_t I = 0;
  for (const InputSlot &S : Exec->inputs(Prog)) {
    FeatureRequest Q;
    Q.Feature = S.Feature.empty() ? S.Name : S.Feature;
    Q.Type = S.Type.Type;
    Q.ScaleBytes = Opts.ScaleBytes;
    Q.Shape.assign(S.Type.Shape.begin() + 1, S.Type.Shape.end());
    if (Q.Type == DType::Int32 || Q.Type == DType::Int64)
      Q.NumClasses =
          classesOf(Plan->plan(), FP, FP.inputs()->Get(uint32_t(I))->buffer());
    R.push_back(Q);
    Ptrs.push_back(S.Host);
    ++I;
  }
  return R;
}

Status Trainer::Impl::loadData() {
  std::vector<FeatureRequest> TrainReq = requests(TrainProg, TrainInputs);
  std::vector<FeatureRequest> EvalReq;
  if (EvalProg >= 0)
    EvalReq = requests(EvalProg, EvalInputs);
  if (Opts.Synthetic) {
    auto D = Dataset::synthetic(TrainReq, Opts.SyntheticExamples, Opts.Seed);
    if (!D.isOk())
      return D.status();
    TrainData = std::make_shared<Dataset>(D.take());
    if (EvalProg >= 0) {
      auto E = Dataset::synthetic(
          EvalReq, std::max<int64_t>(Opts.SyntheticExamples / 6, 1),
          Opts.Seed + 1);
      if (!E.isOk())
        return E.status();
      EvalData = std::make_shared<Dataset>(E.take());
    }
  } else {
    // Each feature once: two inputs may read one (an autoencoder's input
    // and target), which load took for a feature given twice.
    auto FeaturesOf = [](const std::vector<FeatureRequest> &Req) {
      std::vector<std::string> R;
      for (const FeatureRequest &Q : Req)
        if (std::find(R.begin(), R.end(), Q.Feature) == R.end())
          R.push_back(Q.Feature);
      return R;
    };
    std::vector<std::string> Features = FeaturesOf(TrainReq);
    // A split of no examples, named by its files (the batches said "an
    // empty dataset", the test split's only after training).
    auto NoExamples = [](const Dataset &D, const char *Split) {
      std::string Files;
      for (const Feature &F : D.features())
        Files += (Files.empty() ? "" : ", ") + F.Source;
      return Status::error("the '" + std::string(Split) +
                           "' split has no examples (" + Files + ")");
    };
    auto D = Dataset::load(Opts.DataDir, "train", Features);
    if (!D.isOk())
      return D.status().withContext("training data");
    if (D->size() == 0 && !D->features().empty())
      return NoExamples(*D, "train").withContext("training data");
    TrainData = std::make_shared<Dataset>(D.take());
    if (EvalProg >= 0 && Opts.Eval) {
      std::vector<std::string> EvalFeatures = FeaturesOf(EvalReq);
      // A directory without a test split trains without evaluating; a
      // split that is there but damaged or incomplete is an error.
      auto Present = hasSplitFiles(Opts.DataDir, "t10k");
      if (!Present.isOk())
        return Present.status().withContext("evaluation data");
      if (!*Present) {
        // Say which file the first feature would come from.
        std::string Why = "no 't10k' split in '" + Opts.DataDir + "'";
        if (!EvalFeatures.empty())
          if (auto P = findFeatureFile(Opts.DataDir, "t10k", EvalFeatures[0]);
              !P.isOk())
            Why = P.status().message();
        Log << "note: no evaluation: " << Why << '\n';
      } else {
        auto E = Dataset::load(Opts.DataDir, "t10k", EvalFeatures);
        if (!E.isOk())
          return E.status().withContext("evaluation data");
        if (E->size() == 0 && !E->features().empty())
          return NoExamples(*E, "t10k").withContext("evaluation data");
        EvalData = std::make_shared<Dataset>(E.take());
      }
    }
  }
  // ubyte data of only 0 and 1 (labels, masks) scaled for a float input
  // reads as 0 and 1/255: most likely not what was meant.
  if (!Opts.Synthetic && Opts.ScaleBytes && isLead())
    for (const FeatureRequest &Q : TrainReq) {
      const Feature *F = TrainData->find(Q.Feature);
      if (!F || F->Array.Type != IdxType::UInt8 ||
          (Q.Type != DType::Float32 && Q.Type != DType::Float64))
        continue;
      const std::vector<uint8_t> &V = F->Array.Data;
      if (!V.empty() &&
          std::all_of(V.begin(), V.end(), [](uint8_t B) { return B <= 1; }))
        Log << "note: feature '" << Q.Feature
            << "' holds only 0 and 1 as bytes, which a float input reads "
               "as 0 and 1/255 (images' x / 255); --raw-bytes reads them "
               "unscaled\n";
    }
  BatchOptions BO;
  BO.BatchSize = Exec->batchSize(TrainProg) * Procs->size();
  BO.NumShards = Procs->size();
  BO.ShardIndex = Procs->rank();
  BO.Shuffle = Opts.Shuffle;
  BO.Seed = Opts.Seed;
  BO.Prefetch = Opts.Prefetch;
  auto It = BatchIterator::create(TrainData, TrainReq, BO);
  if (!It.isOk())
    return It.status().withContext("training data");
  TrainIt = It.take();
  if (EvalData) {
    // Check the evaluation inputs now rather than at the first evaluation,
    // and its prefetched batches' memory (each evaluation allocates them).
    for (const FeatureRequest &Q : EvalReq)
      MDRT_RETURN_IF_ERROR(
          EvalData->checkRequest(Q).withContext("evaluation data"));
    MDRT_RETURN_IF_ERROR(BatchIterator::checkPrefetch(
                             EvalReq, Exec->batchSize(EvalProg), Opts.Prefetch)
                             .withContext("evaluation data"));
  }
  return Status::ok();
}

Status Trainer::Impl::evaluate(int64_t Step,
                               std::map<std::string, double> &Out) {
  Out.clear();
  if (EvalProg < 0 || !EvalData)
    return Status::ok();
  std::vector<FeatureRequest> Req;
  std::vector<void *> Ptrs;
  Req = requests(EvalProg, Ptrs);
  BatchOptions BO;
  BO.BatchSize = Exec->batchSize(EvalProg) * Procs->size();
  BO.NumShards = Procs->size();
  BO.ShardIndex = Procs->rank();
  BO.Shuffle = false;
  BO.Last = LastBatch::Pad;
  BO.Prefetch = Opts.Prefetch;
  auto It = BatchIterator::create(EvalData, Req, BO);
  MDRT_RETURN_IF_ERROR(Procs->agree(
      It.isOk() ? Status::ok() : It.status().withContext("evaluation data")));
  int64_t Total = 0;
  std::map<std::string, double> Sums;
  // Each output's type: the metrics file writes its digits.
  std::map<std::string, DType> Types;
  std::vector<OutputValue> Outs;
  // Every process evaluates its shard of each batch; the eval program has
  // no collectives, so a process that fails stops early and the others
  // learn of it at the agreement below.
  Status Failed;
  const double Rows = double((*It)->rows());
  std::vector<OutputValue> PadOuts;
  const std::string Context = "evaluation after step " + std::to_string(Step);
  for (;;) {
    BatchInfo B = (*It)->next(Ptrs);
    Failed = Exec->run(EvalProg, EvalRuns++).withContext(Context);
    if (Failed.isOk())
      Failed = Exec->readOutputs(EvalProg, Outs);
    // A loss is the plan's mean over all the rows (plus terms that do not
    // depend on them, such as regularizers). With padding rows that all
    // repeat one example p, Rows * L - (Rows - Valid) * L(batch of p only)
    // is exactly the sum over the real rows plus Valid times those terms.
    bool Padded = B.PaddingExample >= 0 && B.Valid > 0;
    if (Failed.isOk() && Padded) {
      (*It)->fillPadding(B, Ptrs.data());
      Failed = Exec->run(EvalProg, EvalRuns++).withContext(Context);
      if (Failed.isOk())
        Failed = Exec->readOutputs(EvalProg, PadOuts);
    }
    if (!Failed.isOk())
      break;
    // The sum over the real rows of a scalar output that is a mean over
    // the batch.
    auto SumOfMean = [&](size_t OI) {
      const OutputValue &O = Outs[OI];
      double L = O.Values.empty() ? 0 : O.Values[0];
      if (B.Valid == 0)
        return 0.0;
      if (!Padded)
        return L * double(B.Valid);
      const OutputValue &P = PadOuts[OI];
      double LP = P.Values.empty() ? 0 : P.Values[0];
      return Rows * L - (Rows - double(B.Valid)) * LP;
    };
    for (size_t OI = 0; OI < Outs.size(); ++OI) {
      const OutputValue &O = Outs[OI];
      if (O.Kind != fb::OutputKind::Loss && O.Kind != fb::OutputKind::Metric)
        continue;
      // Every process has every key, also one whose batches were all
      // padding: the sums below are summed over the processes key by key.
      double &Sum = Sums[O.Name];
      Types[O.Name] = O.Type.Type;
      if (O.Kind == fb::OutputKind::Metric &&
          (O.Values.size() > 1 || Rows == 1)) {
        // Per-example values: the padding rows do not count.
        size_t N = std::min<size_t>(O.Values.size(), size_t(B.Valid));
        for (size_t I = 0; I < N; ++I)
          Sum += O.Values[I];
      } else {
        Sum += SumOfMean(OI);
      }
    }
    Total += B.Valid;
    if (B.EndOfEpoch)
      break;
  }
  MDRT_RETURN_IF_ERROR(Procs->agree(Failed));
  if (Procs->size() > 1) {
    // The same outputs on every process, so the same keys in the same order.
    std::vector<double> All{double(Total)};
    for (auto &[K, V] : Sums)
      All.push_back(V);
    MDRT_RETURN_IF_ERROR(
        Procs->allReduceSum(DType::Float64, All.data(), All.size()));
    Total = int64_t(All[0]);
    size_t I = 1;
    for (auto &[K, V] : Sums)
      V = All[I++];
  }
  for (auto &[K, V] : Sums)
    Out[K] = Total ? V / double(Total) : 0;
  std::string Line = "eval step " + std::to_string(Step) + ":";
  std::string JSON = "{\"step\":" + std::to_string(Step) +
                     ",\"eval_examples\":" + std::to_string(Total);
  for (auto &[K, V] : Out) {
    Line += " " + K + " " + formatEvalValue(K, V);
    auto Type = Types.find(K);
    JSON += "," + jsonString("eval_" + K) + ":" +
            jsonNumber(V, Type == Types.end() ? DType::Float32 : Type->second);
  }
  Log << Line << " (" << Total << " examples)" << std::endl;
  metricsLine(JSON + "}");
  // As a training loss that is not finite, after the line that shows it
  // (one training step could make the weights infinite, and the run ended
  // well with a test loss of -nan).
  if (auto L = Out.find("loss"); L != Out.end() && !std::isfinite(L->second))
    return Status::error(
        "the evaluation loss is " +
        std::string(std::isnan(L->second) ? "NaN" : "infinite") +
        " after step " + std::to_string(Step) + " (lower the learning rate?)");
  return Status::ok();
}

/// Opens \p Path for writing into \p Out (truncating it); \p What names
/// the file in the error.
static Status openForWriting(std::ofstream &Out, const std::string &Path,
                             const std::string &What,
                             std::ios::openmode Mode = std::ios::trunc) {
  errno = 0;
  Out.open(Path, std::ios::out | Mode);
  if (Out)
    return Status::ok();
  return writeError(What, Path);
}

/// Checks that \p Path can be written without emptying it: a run refused
/// later (a checkpoint that does not fit) leaves the earlier run's file.
/// Only a regular file (or a missing one) is probed by opening it: opening
/// a FIFO waits for its reader, and the run opens it once, later.
static Status checkWritable(const std::string &Path, const std::string &What) {
  struct stat St;
  // A regular file that is also this process's stdout or stderr (--metrics
  // =/dev/stdout with the output redirected to a file): opened once more,
  // it would be emptied, and the log and the lines would overwrite each
  // other. (A pipe or a terminal takes both.)
  for (int Fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat Std;
    if (::stat(Path.c_str(), &St) == 0 && S_ISREG(St.st_mode) &&
        ::fstat(Fd, &Std) == 0 && St.st_dev == Std.st_dev &&
        St.st_ino == Std.st_ino)
      return Status::error(
          "cannot write " + What + " '" + Path + "': it is the file mdrun's " +
          (Fd == STDOUT_FILENO ? "standard output" : "standard error") +
          " goes to; give it a file of its own");
  }
  if (::stat(Path.c_str(), &St) == 0 && !S_ISREG(St.st_mode)) {
    if (S_ISDIR(St.st_mode))
      return Status::error("cannot write " + What + " '" + Path +
                           "': Is a directory");
    return Status::ok();
  }
  std::ofstream Out;
  return openForWriting(Out, Path, What, std::ios::app);
}

/// The metrics file of a run that resumed at step \p Step: the earlier
/// runs' lines of the steps up to it (what the checkpoint holds) are kept,
/// those after it dropped (the resumed run writes them again), and so is a
/// line cut short (a run killed while writing it). \p FinalEval: the run
/// evaluates at \p Step again (it resumed at or past its last step, where
/// the final evaluation follows the checkpoint), so that step's evaluation
/// line is dropped too.
static Status openResumedMetrics(std::ofstream &Out, const std::string &Path,
                                 int64_t Step, bool FinalEval) {
  std::vector<std::string> Kept;
  struct stat St;
  if (Step > 0 && ::stat(Path.c_str(), &St) == 0 && S_ISREG(St.st_mode)) {
    std::ifstream In(Path, std::ios::binary);
    std::string Text((std::istreambuf_iterator<char>(In)),
                     std::istreambuf_iterator<char>());
    // A last line without its newline was cut short.
    Text.erase(Text.rfind('\n') == std::string::npos ? 0
                                                     : Text.rfind('\n') + 1);
    std::istringstream Lines(Text);
    const std::string Prefix = "{\"step\":", Eval = ",\"eval_examples\":";
    for (std::string Line; std::getline(Lines, Line);) {
      if (Line.compare(0, Prefix.size(), Prefix) != 0)
        continue;
      char *End = nullptr;
      long long S = std::strtoll(Line.c_str() + Prefix.size(), &End, 10);
      if (End == Line.c_str() + Prefix.size() || S > Step)
        continue;
      if (FinalEval && S == Step &&
          std::strncmp(End, Eval.c_str(), Eval.size()) == 0)
        continue;
      Kept.push_back(std::move(Line));
    }
  }
  MDRT_RETURN_IF_ERROR(openForWriting(Out, Path, "metrics file"));
  for (const std::string &Line : Kept)
    Out << Line << '\n';
  Out.flush();
  if (!Out)
    return Status::error("cannot write metrics file '" + Path + "'");
  return Status::ok();
}

/// Creates checkpoint directory \p Dir (and its parents) when missing.
static Status createCheckpointDir(const std::string &Dir) {
  std::error_code EC;
  std::filesystem::create_directories(Dir, EC);
  if (EC)
    return Status::error("cannot create checkpoint directory '" + Dir +
                         "': " + EC.message());
  return Status::ok();
}

/// Replica 0's checks of the checkpoint directory before the first step,
/// so that a run does not train for nothing: it can be created and written,
/// and a run that does not resume finds no checkpoints of an earlier run
/// there (it would take them for its own: they count against
/// --keep-checkpoints, and --resume picks the one of highest step).
Status Trainer::Impl::prepareCheckpointDir() {
  if (Opts.CheckpointDir.empty() || !isLead())
    return Status::ok();
  const std::string &Dir = Opts.CheckpointDir;
  MDRT_RETURN_IF_ERROR(createCheckpointDir(Dir));
  // A writer killed in the middle of a checkpoint left its temporary file.
  auto Removed = removeStaleTemporaries(Dir);
  if (!Removed.isOk())
    return Removed.status();
  if (*Removed)
    Log << "note: removed " << *Removed << " unfinished checkpoint file"
        << (*Removed == 1 ? "" : "s") << " of a killed run from " << Dir
        << '\n';
  if (!Opts.Resume) {
    auto Found = listCheckpoints(Dir);
    if (!Found.isOk())
      return Found.status();
    if (!Found->empty())
      return Status::error(
          "checkpoint directory '" + Dir + "' holds " +
          std::to_string(Found->size()) + " checkpoint" +
          (Found->size() == 1 ? "" : "s") +
          " of an earlier run (the latest: '" +
          std::filesystem::path(Found->back().second).filename().string() +
          "'): continue that run with --resume, or give another directory");
  }
  std::string Probe = Dir + "/.mdrun-write-test." + std::to_string(getpid());
  errno = 0;
  std::FILE *F = std::fopen(Probe.c_str(), "wb");
  if (!F)
    return Status::error("cannot write to checkpoint directory '" + Dir +
                         "': " + std::strerror(errno));
  std::fclose(F);
  std::remove(Probe.c_str());
  return Status::ok();
}

Status Trainer::Impl::checkpoint(int64_t Step) {
  if (Opts.CheckpointDir.empty())
    return Status::ok();
  // Variables on parameter servers hold every worker's updates of the step
  // once every worker has finished it.
  if (RemoteVariables)
    MDRT_RETURN_IF_ERROR(Procs->agree(Status::ok()));
  // The replicas' variables are identical: replica 0 writes them.
  if (!isLead())
    return Status::ok();
  CheckpointState S;
  S.PlanFingerprint = Plan->plan().fingerprint();
  S.Step = Step;
  S.Data = TrainIt->position();
  S.Seed = Opts.Seed;
  S.DataExamples = TrainData->size();
  S.Shuffled = Opts.Shuffle;
  S.Synthetic = Opts.Synthetic;
  S.RawBytes = !Opts.ScaleBytes && !Opts.Synthetic;
  std::vector<std::vector<uint8_t>> Bufs(Exec->variables().size());
  std::vector<CheckpointTensorRef> Refs;
  for (size_t I = 0; I < Bufs.size(); ++I) {
    const VariableInfo &V = Exec->variables()[I];
    Bufs[I].resize(V.Type.bytes());
    MDRT_RETURN_IF_ERROR(Exec->readVariable(I, Bufs[I].data()));
    Refs.push_back({V.Name, V.Type, Bufs[I].data()});
  }
  // Made before the first step; again in case it was removed since.
  MDRT_RETURN_IF_ERROR(createCheckpointDir(Opts.CheckpointDir));
  std::string Path = Opts.CheckpointDir + "/" + checkpointFileName(Step);
  MDRT_RETURN_IF_ERROR(writeCheckpoint(Path, S, Refs));
  if (Opts.KeepCheckpoints > 0)
    MDRT_RETURN_IF_ERROR(
        pruneCheckpoints(Opts.CheckpointDir, Opts.KeepCheckpoints));
  return Status::ok();
}

/// Replica 0's part of a resume: the latest checkpoint's step, data
/// position and variable values (\p Found false when there is none).
Status Trainer::Impl::loadLatest(int64_t &Step, DataPosition &Position,
                                 bool &Found,
                                 std::vector<std::vector<uint8_t>> &Values) {
  auto Latest = latestCheckpoint(Opts.CheckpointDir);
  if (!Latest.isOk())
    return Latest.status();
  Found = !Latest->empty();
  if (!Found) {
    Log << "note: no checkpoint in " << Opts.CheckpointDir
        << "; starting from the beginning\n";
    return Status::ok();
  }
  std::vector<ExpectedTensor> Expected;
  for (const VariableInfo &V : Exec->variables())
    Expected.push_back({V.Name, V.Type});
  bool Damaged = false;
  auto C = readCheckpoint(*Latest, &Damaged);
  if (!C.isOk()) {
    // A damaged latest file is not skipped (it may be the only sign of a
    // problem), but the way back to the one before is named.
    if (!Damaged)
      return C.status();
    auto Found = listCheckpoints(Opts.CheckpointDir);
    if (!Found.isOk() || Found->size() < 2)
      return C.status();
    return Status::error(
        C.status().message() + " (remove it to resume from '" +
        std::filesystem::path((*Found)[Found->size() - 2].second)
            .filename()
            .string() +
        "', the checkpoint before)");
  }
  MDRT_RETURN_IF_ERROR(
      checkCheckpoint(*C, *Latest, Plan->plan().fingerprint(), Expected));
  if (C->State.Seed != Opts.Seed)
    return Status::error("checkpoint '" + *Latest +
                         "' was written by a run "
                         "with seed " +
                         std::to_string(C->State.Seed) + ", not " +
                         std::to_string(Opts.Seed) +
                         " (resume with the same --seed)");
  // The data position counts in the training data of the run that wrote
  // it (a version 1 checkpoint does not say which).
  if (C->State.DataExamples >= 0 && C->State.Synthetic != Opts.Synthetic)
    return Status::error("checkpoint '" + *Latest +
                         "' was written by a run on " +
                         (C->State.Synthetic ? "synthetic data (resume with "
                                               "--synthetic)"
                                             : "a dataset (resume with its "
                                               "--data)"));
  if (C->State.DataExamples >= 0 && C->State.DataExamples != TrainData->size())
    return Status::error(
        "checkpoint '" + *Latest + "' was written by a run on " +
        std::to_string(C->State.DataExamples) + " training examples, not " +
        std::to_string(TrainData->size()) +
        " (resume with the same data: --data, --synthetic-examples)");
  bool RawBytes = !Opts.ScaleBytes && !Opts.Synthetic;
  // Known from version 3, and where a version 2 file has the bit set.
  if ((C->Version >= 3 || C->State.RawBytes) && C->State.RawBytes != RawBytes)
    return Status::error("checkpoint '" + *Latest +
                         "' was written by a run that reads bytes " +
                         (C->State.RawBytes ? "unscaled (resume with "
                                              "--raw-bytes)"
                                            : "scaled to [0, 1] (resume "
                                              "without --raw-bytes)"));
  if (C->State.DataExamples >= 0 && C->State.Shuffled != Opts.Shuffle)
    return Status::error(
        "checkpoint '" + *Latest + "' was written by a run that " +
        (C->State.Shuffled ? "shuffles" : "does not shuffle") +
        " its data (resume " + (C->State.Shuffled ? "without" : "with") +
        " --no-shuffle)");
  for (size_t I = 0; I < Exec->variables().size(); ++I)
    Values[I] = C->find(Exec->variables()[I].Name)->Data;
  Step = C->State.Step;
  Position = C->State.Data;
  Log << "resumed from " << *Latest << " at step " << Step << '\n';
  return Status::ok();
}

/// \p Resumed: whether replica 0 found a checkpoint (on every process).
Status Trainer::Impl::resume(int64_t &Step, bool &Resumed) {
  // Replica 0 reads the checkpoint and hands it to the other processes,
  // which need not see the same file system.
  std::vector<std::vector<uint8_t>> Values(Exec->variables().size());
  DataPosition Position;
  bool Found = false;
  Status Loaded = Status::ok();
  if (isLead())
    Loaded = loadLatest(Step, Position, Found, Values);
  MDRT_RETURN_IF_ERROR(Procs->agree(Loaded));
  MDRT_RETURN_IF_ERROR(restore(Found, Step, Position, Values,
                               std::vector<uint8_t>(Values.size(), 1)));
  Resumed = Found;
  return Status::ok();
}

/// Replica 0's part of --init-from: the checkpoint's step, the variables it
/// holds (\p Present) and, where it was written on this run's data in
/// this run's order, its data position.
Status Trainer::Impl::loadInitial(int64_t &Step, DataPosition &Position,
                                  std::vector<std::vector<uint8_t>> &Values,
                                  std::vector<uint8_t> &Present) {
  const std::string &Path = Opts.InitFrom;
  // A checkpoint directory, where its file was meant: name that file.
  std::error_code Ec;
  if (std::filesystem::is_directory(Path, Ec)) {
    auto Latest = latestCheckpoint(Path);
    return Status::error("--init-from '" + Path +
                         "' is a directory; give a checkpoint file" +
                         (Latest.isOk() && !Latest->empty()
                              ? " (its latest is '" + *Latest + "')"
                              : std::string(" (it holds no checkpoint)")));
  }
  auto C = readCheckpoint(Path);
  if (!C.isOk())
    return C.status();
  std::vector<std::string> Missing;
  size_t Restored = 0, RestoredTrainable = 0;
  for (size_t I = 0; I < Exec->variables().size(); ++I) {
    const VariableInfo &V = Exec->variables()[I];
    const CheckpointTensor *T = C->find(V.Name);
    if (!T) {
      Missing.push_back(V.Name);
      continue;
    }
    if (T->Desc.Type != V.Type.Type || T->Desc.Shape != V.Type.Shape)
      return Status::error(
          "--init-from: checkpoint '" + Path + "' holds variable '" + V.Name +
          "' as " + T->Desc.str() + ", but the plan has " + V.Type.str());
    Values[I] = T->Data;
    Present[I] = 1;
    ++Restored;
    RestoredTrainable += V.Trainable;
  }
  // (Every model's checkpoint has a global_step.)
  if (!RestoredTrainable)
    return Status::error("--init-from: checkpoint '" + Path +
                         "' holds none of the plan's trainable variables "
                         "(is it another model's?)");
  // (A checkpoint names each tensor once.)
  size_t Unused = C->Tensors.size() - Restored;
  Step = C->State.Step;
  // The data continues only where the order is the one the checkpoint's
  // run had: the same examples, seed, shuffling and scaling.
  bool RawBytes = !Opts.ScaleBytes && !Opts.Synthetic;
  bool SameData =
      C->State.DataExamples == TrainData->size() &&
      C->State.Synthetic == Opts.Synthetic && C->State.Seed == Opts.Seed &&
      C->State.Shuffled == Opts.Shuffle && C->State.RawBytes == RawBytes;
  Position = SameData ? C->State.Data : DataPosition();
  Log << "initialized from " << Path << " at step " << Step << ": " << Restored
      << " of " << Exec->variables().size() << " variables";
  if (!Missing.empty()) {
    Log << "; not in it, so as initialized: '" << Missing[0] << "'";
    if (Missing.size() > 1)
      Log << " and " << Missing.size() - 1 << " more";
  }
  if (Unused)
    Log << "; " << Unused << (Unused == 1 ? " tensor" : " tensors")
        << " of it not in the plan";
  Log << (SameData ? "; the data continues where it stopped"
                   : "; the data from the beginning (the checkpoint was "
                     "written on other data, seed or order)")
      << '\n';
  return Status::ok();
}

Status Trainer::Impl::initFrom(int64_t &Step) {
  std::vector<std::vector<uint8_t>> Values(Exec->variables().size());
  std::vector<uint8_t> Present(Values.size(), 0);
  DataPosition Position;
  Status Loaded = Status::ok();
  if (isLead())
    Loaded = loadInitial(Step, Position, Values, Present);
  MDRT_RETURN_IF_ERROR(Procs->agree(Loaded));
  MDRT_RETURN_IF_ERROR(Procs->broadcast(Present.data(), Present.size(), 0));
  bool Lead = true;
  return restore(Lead, Step, Position, Values, std::move(Present));
}

/// Every process's part of a resume or an --init-from: replica 0's step,
/// data position and variables (those \p Present), when \p Lead says
/// replica 0 found some (replica 0's \p Lead on return, on every process),
/// written into this process's devices.
Status Trainer::Impl::restore(bool &Lead, int64_t &Step, DataPosition Position,
                              std::vector<std::vector<uint8_t>> &Values,
                              std::vector<uint8_t> Present) {
  int64_t Header[4] = {Lead, Step, Position.Epoch, Position.Index};
  MDRT_RETURN_IF_ERROR(Procs->broadcast(Header, sizeof(Header), 0));
  Lead = Header[0] != 0;
  if (!Header[0])
    return Status::ok();
  Step = Header[1];
  Position.Epoch = Header[2];
  Position.Index = Header[3];
  Status Restored = Status::ok();
  for (size_t I = 0; I < Values.size(); ++I) {
    if (!Present[I])
      continue;
    // A parameter server's variable: replica 0 restores it for all.
    if (Exec->variables()[I].Remote) {
      if (isLead() && Restored.isOk())
        Restored = Exec->writeVariable(I, Values[I].data());
      continue;
    }
    Values[I].resize(Exec->variables()[I].Type.bytes());
    MDRT_RETURN_IF_ERROR(
        Procs->broadcast(Values[I].data(), Values[I].size(), 0));
    if (Restored.isOk())
      Restored = Exec->writeVariable(I, Values[I].data());
  }
  if (Restored.isOk())
    Restored = TrainIt->seek(Position);
  return Procs->agree(Restored);
}

/// The data set \p D (training or test), for comparing processes: every
/// feature's name, shape and bytes (data sets that differ only in some
/// labels differ), and whether it is synthetic.
uint64_t Trainer::Impl::dataDigest(const Dataset *D) const {
  uint64_t H = hashName(Opts.Synthetic ? "synthetic" : "dataset");
  H = hashName(D ? std::to_string(D->size()).c_str() : "none", H);
  if (D)
    for (const Feature &F : D->features()) {
      H = hashName(F.Name.c_str(), H);
      H = hashName(F.Array.str().c_str(), H);
      H = digestBytes(F.Array.Data.data(), F.Array.Data.size(), H);
    }
  return H;
}

/// Every process must run the same steps of the same model with the same
/// collectives, or the processes would wait for each other forever: each
/// process's plan and options, compared with replica 0's.
Status Trainer::Impl::checkAgreement(int64_t Total) {
  if (Procs->size() == 1)
    return Status::ok();
  const fb::Plan &P = Plan->plan();
  uint64_t PlanHash = hashName("mdrun.plan", P.fingerprint());
  auto Mix = [&](const std::string &S) {
    PlanHash = hashName(S.c_str(), PlanHash);
  };
  auto ShapeOf = [&](uint32_t Buffer) {
    const fb::Buffer *Buf = P.buffers()->Get(Buffer);
    std::string T = std::to_string(int(Buf->dtype()));
    if (Buf->shape())
      for (int64_t D : *Buf->shape())
        T += "," + std::to_string(D);
    return T;
  };
  if (const fb::Deployment *D = P.deployment())
    Mix(std::to_string(D->num_clones()) + "/" +
        std::to_string(D->batch_per_clone()) + "/" +
        std::to_string(D->num_replicas()) + "/" +
        (D->optimizer() ? D->optimizer()->str() : "") + "/" +
        std::to_string(D->learning_rate()));
  // The plan's evaluation program whether or not this process evaluates
  // (--no-eval on one process is an evaluation setting, compared below).
  for (int Prog : {TrainProg, Exec->programIndex("eval")}) {
    if (Prog < 0)
      continue;
    const fb::Program &FP = *P.programs()->Get(uint32_t(Prog));
    Mix(std::to_string(FP.batch_size()));
    // What every kernel computes: its op and attributes, but for the
    // attributes that name this replica's devices (a transfer's peer).
    if (FP.devices())
      for (const fb::DeviceProgram *DP : *FP.devices())
        if (DP->kernels())
          for (const fb::Kernel *K : *DP->kernels()) {
            std::string Sig = K->op()->str();
            if (K->attrs())
              for (const fb::Attr *A : *K->attrs()) {
                if (A->s() && A->s()->str().find("/job:") != std::string::npos)
                  continue;
                // Every digit of a float (an epsilon of 1e-8 against 1e-7).
                Sig += " " + A->name()->str() + "=" + std::to_string(A->i()) +
                       "," + exactDouble(A->f());
                if (A->s())
                  Sig += "," + A->s()->str();
                if (A->ints())
                  for (int64_t V : *A->ints())
                    Sig += "," + std::to_string(V);
                if (A->floats())
                  for (double V : *A->floats())
                    Sig += "," + exactDouble(V);
              }
            Mix(Sig);
          }
    // The outputs, which the processes average.
    if (FP.outputs())
      for (const fb::Output *O : *FP.outputs())
        Mix(O->name()->str() + "/" + std::to_string(int(O->kind())) + "/" +
            ShapeOf(O->buffer()));
    if (!FP.collectives())
      continue;
    for (const fb::Collective *C : *FP.collectives()) {
      Mix(std::to_string(C->bucket()) + "/" + std::to_string(C->replicas()));
      const fb::Kernel *K = nullptr;
      uint32_t Id = C->kernels()->Get(0);
      for (const fb::DeviceProgram *DP : *FP.devices()) {
        uint32_t N = DP->kernels() ? DP->kernels()->size() : 0;
        if (Id < N) {
          K = DP->kernels()->Get(Id);
          break;
        }
        Id -= N;
      }
      if (K && K->inputs())
        for (uint32_t B : *K->inputs())
          Mix(ShapeOf(B));
    }
  }
  struct Field {
    const char *What;
    uint64_t Value;
  };
  const Field Fields[] = {
      {"plan (compiled from another model or deployment?)", PlanHash},
      {"run length (--steps, --epochs)", uint64_t(Total)},
      {"--seed", Opts.Seed},
      {"data (--data, --synthetic, --synthetic-examples)",
       dataDigest(TrainData.get())},
      {"shuffling (--no-shuffle)", Opts.Shuffle},
      {"byte scaling (--raw-bytes)", Opts.ScaleBytes},
      {"evaluation (--no-eval, --eval-every, a test split)",
       uint64_t(Opts.Eval) | uint64_t(EvalData != nullptr) << 1 |
           uint64_t(Opts.EvalEvery) << 2},
      // After the evaluation setting: a process that does not evaluate
      // loads no test data.
      {"test data (--data, --synthetic, --synthetic-examples)",
       dataDigest(EvalData.get())},
      {"checkpoints (--checkpoint-dir, --checkpoint-every, --resume, "
       "--checkpoint-at-start)",
       uint64_t(!Opts.CheckpointDir.empty()) | uint64_t(Opts.Resume) << 1 |
           uint64_t(Opts.CheckpointAtStart) << 2 |
           uint64_t(Opts.CheckpointEvery) << 3},
      // The workers of a ps-strategy run meet where they log.
      {"--log-every (the workers of a ps-strategy run meet to log)",
       RemoteVariables ? uint64_t(Opts.LogEvery) : 0},
  };
  constexpr size_t NF = sizeof(Fields) / sizeof(Fields[0]);
  uint64_t Mine[NF];
  for (size_t F = 0; F < NF; ++F)
    Mine[F] = Fields[F].Value;
  std::vector<uint64_t> All(NF * size_t(Procs->size()));
  MDRT_RETURN_IF_ERROR(Procs->allGather(Mine, All.data(), sizeof(Mine)));
  for (int R = 1; R < Procs->size(); ++R)
    for (size_t F = 0; F < NF; ++F)
      if (All[size_t(R) * NF + F] != All[F])
        return Status::error("replica " + std::to_string(R) +
                             " differs from replica 0 in its " +
                             Fields[F].What +
                             "; every process must run the same plan "
                             "(but for --replica-id) with the same options");
  return Status::ok();
}

/// A training step's outputs: with several processes, means over them
/// (every process's outputs describe its equal share of the global batch),
/// and the step's failure on any process is every process's error.
/// \p Extra, the same number of values on every process, is averaged too.
Status Trainer::Impl::readTrainOutputs(const Status &StepStatus,
                                       std::vector<OutputValue> &Outs,
                                       std::vector<double> *Extra,
                                       int64_t FailedAt, bool Histograms) {
  Status S = StepStatus;
  if (S.isOk())
    S = Exec->readOutputs(TrainProg, Outs, Histograms);
  if (Procs->size() == 1)
    return S;
  // The outputs' sizes come from the plan, so they agree even when a
  // process failed; a failed process sends zeros and a flag.
  const fb::Program &FP = *Plan->plan().programs()->Get(uint32_t(TrainProg));
  std::vector<double> All{S.isOk() ? 0.0 : 1.0};
  if (Extra)
    All.insert(All.end(), Extra->begin(), Extra->end());
  // A histogram is the first clone's (of replica 0), as in one process, not
  // a mean over the processes (a mean of ranges is no range): the other
  // processes send zeros, and its mean is scaled back. Scalar summaries
  // (total_loss: the whole step's) stay means.
  auto IsSummary = [](const fb::Output *O) {
    return O->kind() == fb::OutputKind::Histogram;
  };
  bool Lead = Procs->rank() == 0;
  size_t I = 0;
  if (FP.outputs())
    for (const fb::Output *O : *FP.outputs()) {
      const fb::Buffer *B = Plan->plan().buffers()->Get(O->buffer());
      size_t N = 1;
      if (!Histograms && IsSummary(O))
        N = 0;
      else if (B->shape())
        for (int64_t D : *B->shape())
          N *= size_t(D);
      bool Send = S.isOk() && (Lead || !IsSummary(O));
      for (size_t E = 0; E < N; ++E)
        All.push_back(Send && I < Outs.size() && E < Outs[I].Values.size()
                          ? Outs[I].Values[E]
                          : 0.0);
      ++I;
    }
  MDRT_RETURN_IF_ERROR(Procs->mean(All));
  if (All[0] != 0)
    return Procs->agree(S, FailedAt);
  size_t At = 1;
  if (Extra)
    for (double &V : *Extra)
      V = All[At++];
  I = 0;
  for (OutputValue &O : Outs) {
    double Scale = FP.outputs() && I < FP.outputs()->size() &&
                           IsSummary(FP.outputs()->Get(uint32_t(I)))
                       ? double(Procs->size())
                       : 1.0;
    for (double &V : O.Values)
      V = All[At++] * Scale;
    ++I;
  }
  return Status::ok();
}

Trainer::Trainer(std::unique_ptr<Impl> I) : I(std::move(I)) {}
Trainer::~Trainer() = default;

Executor &Trainer::executor() { return *I->Exec; }

StatusOr<std::unique_ptr<Trainer>>
Trainer::create(std::shared_ptr<const PlanFile> Plan, const TrainOptions &Opts,
                std::ostream &Log) {
  auto Impl = std::make_unique<Trainer::Impl>(std::move(Plan), Opts, Log);
  Impl->Procs = Opts.Exec.Processes;
  if (!Impl->Procs) {
    Impl->OwnProcs = createSingleProcessGroup();
    Impl->Procs = Impl->OwnProcs.get();
  }
  if (Opts.DataDir.empty() && !Opts.Synthetic)
    return Status::error("no data: give --data=DIR or --synthetic");
  // Paths that must be directories, checked before any work is done.
  auto NotADirectory = [](const std::string &Flag,
                          const std::string &Path) -> Status {
    std::error_code EC;
    auto St = std::filesystem::status(Path, EC);
    if (std::filesystem::exists(St) && !std::filesystem::is_directory(St))
      return Status::error(Flag + ": '" + Path + "' is not a directory");
    return Status::ok();
  };
  if (!Opts.Synthetic && !Opts.DataDir.empty())
    MDRT_RETURN_IF_ERROR(NotADirectory("--data", Opts.DataDir));
  if (!Opts.CheckpointDir.empty())
    MDRT_RETURN_IF_ERROR(NotADirectory("--checkpoint-dir", Opts.CheckpointDir));
  if (Opts.CheckpointEvery > 0 && Opts.CheckpointDir.empty())
    return Status::error("--checkpoint-every needs --checkpoint-dir");
  ExecutorOptions EO = Opts.Exec;
  EO.Seed = Opts.Seed;
  auto Exec = Executor::create(Impl->Plan, EO);
  if (!Exec.isOk())
    return Exec.status();
  Impl->Exec = Exec.take();
  for (const VariableInfo &V : Impl->Exec->variables())
    Impl->RemoteVariables |= V.Remote;
  for (const std::string &N : Impl->Exec->notes())
    Log << "note: " << N << '\n';
  Impl->TrainProg = Impl->Exec->programIndex("train");
  if (Impl->TrainProg < 0)
    return Status::error("plan '" + Impl->Plan->name() +
                         "' has no training program");
  if (Opts.Eval) {
    Impl->EvalProg = Impl->Exec->programIndex("eval");
    if (Impl->EvalProg < 0 && Opts.EvalEvery > 0)
      Log << "note: the plan has no evaluation program (compiled with "
             "--no-eval): no evaluation, --eval-every notwithstanding\n";
  }
  // The processes evaluate their shards independently (a process that
  // fails stops early): an eval program with collectives would not do.
  if (Impl->EvalProg >= 0) {
    const fb::Program &FP =
        *Impl->Plan->plan().programs()->Get(uint32_t(Impl->EvalProg));
    if (FP.collectives() && FP.collectives()->size())
      return Status::error("plan '" + Impl->Plan->name() +
                           "': its eval program has collectives, which "
                           "mdrun's evaluation does not run (train with "
                           "--no-eval)");
  }
  {
    // Without a loss a step would train nothing and report no loss.
    const fb::Program &FP =
        *Impl->Plan->plan().programs()->Get(uint32_t(Impl->TrainProg));
    bool HasLoss = false;
    if (FP.outputs())
      for (const fb::Output *O : *FP.outputs())
        HasLoss |= O->kind() == fb::OutputKind::Loss;
    if (!HasLoss)
      return Status::error("plan '" + Impl->Plan->name() +
                           "': its training program has no loss (the model "
                           "names none with 'loss:'), so there is nothing "
                           "to train");
  }
  if (Impl->Exec->inputs(Impl->TrainProg).empty())
    return Status::error("plan '" + Impl->Plan->name() +
                         "': its training program reads no input (the model "
                         "has no Input node), and mdrun trains on data");
  MDRT_RETURN_IF_ERROR(Impl->Exec->initialize());
  MDRT_RETURN_IF_ERROR(Impl->loadData());
  MDRT_RETURN_IF_ERROR(Impl->prepareCheckpointDir());
  // Checked now, emptied once the run has resumed: a refused run leaves
  // the earlier run's files.
  if (!Opts.MetricsPath.empty() && Impl->isLead())
    MDRT_RETURN_IF_ERROR(checkWritable(Opts.MetricsPath, "metrics file"));
  if (!Opts.TracePath.empty())
    MDRT_RETURN_IF_ERROR(checkWritable(Opts.TracePath, "trace"));
  if (!Opts.MetricsPath.empty() && !Opts.TracePath.empty() &&
      sameFile(Opts.MetricsPath, Opts.TracePath))
    return Status::error("--metrics and --trace name the same file ('" +
                         Opts.MetricsPath + "', '" + Opts.TracePath +
                         "'): give each a file of its own");
  Impl->ProgressBar =
      Impl->isLead() &&
      (Opts.Progress > 0 || (Opts.Progress < 0 && isatty(STDERR_FILENO)));
  return std::unique_ptr<Trainer>(new Trainer(std::move(Impl)));
}

Status Trainer::run(TrainResult &R) {
  Impl &T = *I;
  const TrainOptions &O = T.Opts;
  int64_t PerEpoch = T.TrainIt->batchesPerEpoch();
  // The examples of one step over every process.
  int64_t Batch = T.Exec->batchSize(T.TrainProg) * T.Procs->size();
  Status Usable = Status::ok();
  if (PerEpoch <= 0)
    Usable = Status::error("the training data has fewer examples (" +
                           std::to_string(T.TrainData->size()) +
                           ") than one batch (" + std::to_string(Batch) + ")");
  else if (O.Resume && O.CheckpointDir.empty())
    Usable = Status::error("--resume needs --checkpoint-dir");
  MDRT_RETURN_IF_ERROR(T.Procs->agree(Usable));
  // The run length; every process agrees on whether it can be counted
  // (steps and examples in 64 bits) before they compare lengths.
  int64_t Total = O.Steps;
  Status Countable = Status::ok();
  if (Total <= 0) {
    double Epochs = O.Epochs > 0 ? O.Epochs : 1;
    double Steps = std::ceil(Epochs * double(PerEpoch));
    if (Steps * double(Batch) < 0x1p62) {
      Total = int64_t(Steps);
    } else {
      char Buf[96];
      std::snprintf(Buf, sizeof(Buf), "--epochs=%g is %g steps of %lld", Epochs,
                    Steps, (long long)Batch);
      Countable = Status::error(std::string(Buf) +
                                " examples, more than a run can count");
    }
  }
  MDRT_RETURN_IF_ERROR(T.Procs->agree(Countable));
  MDRT_RETURN_IF_ERROR(T.checkAgreement(Total));
  int64_t Step = 0;
  // Whether the run continues from a checkpoint of its own.
  bool FromOwn = false;
  if (O.Resume)
    MDRT_RETURN_IF_ERROR(T.resume(Step, FromOwn));
  // --init-from starts a run: with --resume, only one that has no
  // checkpoint yet (a restarted run continues from its own, also one of
  // step 0 that --checkpoint-at-start wrote).
  const int64_t Resumed = Step;
  if (!O.InitFrom.empty() && !FromOwn)
    MDRT_RETURN_IF_ERROR(T.initFrom(Step));
  {
    // The metrics of the run resumed (none of an --init-from's source).
    Status Opened = Status::ok();
    if (!O.MetricsPath.empty() && T.isLead())
      Opened = openResumedMetrics(T.Metrics, O.MetricsPath, Resumed,
                                  O.Eval && Resumed > 0 && Step >= Total);
    if (Opened.isOk() && !O.TracePath.empty())
      Opened = openForWriting(T.TraceOut, O.TracePath, "trace");
    MDRT_RETURN_IF_ERROR(T.Procs->agree(Opened));
  }
  if (Step >= Total && Step > 0)
    T.Log << "note: the run " << (Resumed ? "resumed" : "starts") << " at step "
          << Step << ", which is not before its last (" << Total
          << "): no step to run\n";
  const int64_t FirstStep = Step;
  int64_t TraceFrom = O.TracePath.empty() ? -1 : Step + 1;
  int64_t TraceTo = TraceFrom + O.TraceSteps;
  T.Log << "training " << T.Plan->plan().model()->str() << ": " << Total
        << (Total == 1 ? " step of " : " steps of ") << Batch << " examples ("
        << PerEpoch
        << (PerEpoch == 1 ? " step per epoch)" : " steps per epoch)")
        << std::endl;

  // The state the run starts from, unless it is the checkpoint resumed from
  // (or the run has no step, and the one at its end is the same).
  if (O.CheckpointAtStart && !FromOwn && Step < Total)
    MDRT_RETURN_IF_ERROR(T.Procs->agree(T.checkpoint(Step)));

  std::vector<OutputValue> Outs;
  // The log window's start (its rate), and the bar's last redraw (it
  // redrew the window's start, so a log line's rate was over the time
  // since the last redraw).
  double Start = seconds(), LastLog = Start, LastBar = Start;
  // Seconds of the log window spent evaluating and checkpointing.
  double Paused = 0;
  int64_t LastLogStep = Step, Examples = 0;
  double LossSum = 0;
  int64_t LossCount = 0;
  // A stop asked for by TrainOptions::Stop (a signal): this process's, and
  // whether every process stops after this step.
  // A parameter server's stop reaches its workers with its replies.
  auto LocalStop = [&] {
    int Own = O.Stop ? O.Stop->load(std::memory_order_relaxed) : 0;
    return Own ? Own : T.Exec->serverStop();
  };
  bool StopNow = false;
  // The stop value every process reports: this process's, or the one
  // agreed from every process's votes (StopSignal.h).
  int AgreedStop = 0;
  // The trace of the steps traced up to \p Last, the run's last step.
  // A run that fails still writes the trace it recorded (the file was
  // left empty, not JSON).
  bool Written = false;
  struct OnExit {
    std::function<void()> F;
    ~OnExit() { F(); }
  } TraceOnFailure{[&] {
    if (Written || O.TracePath.empty() || !T.TraceOut.is_open())
      return;
    T.Exec->setTracing(false);
    T.Exec->writeTrace(T.TraceOut);
    T.TraceOut.close();
  }};
  auto WriteTrace = [&](int64_t Last) {
    if (O.TracePath.empty())
      return Status::ok();
    T.Exec->setTracing(false);
    std::ofstream &Trace = T.TraceOut;
    errno = 0;
    T.Exec->writeTrace(Trace);
    Trace.close();
    if (!Trace)
      return writeError("trace", O.TracePath);
    Written = true;
    if (TraceFrom >= Last)
      // Not "steps 2 to 1": the run ended before the traced steps.
      T.Log << "note: the trace written to " << O.TracePath
            << " holds no step: tracing starts with the second step of a "
               "run, and this run had "
            << R.StepsRun << " step" << (R.StepsRun == 1 ? "" : "s") << '\n';
    else
      T.Log << "trace of steps " << TraceFrom + 1 << " to "
            << std::min(TraceTo, Last) << " written to " << O.TracePath << '\n';
    return Status::ok();
  };
  // The workers of a ps-strategy run meet only where they must (to log,
  // checkpoint, evaluate and at the end), so that each goes at its own
  // pace in between: a worker's failure waits for the next meeting, where
  // every worker learns of it, and it runs no more steps until then.
  const bool Async = T.Procs->size() > 1 && T.RemoteVariables;
  Status Pending = Status::ok();
  int64_t PendingOrder = 0;
  // Asynchronous workers' meetings for a stop signal: the step of the
  // next, and the time and step of the last.
  int64_t StopCheckAt = Step + StopCheckFirstSteps, MetAtStep = Step;
  double MetAt = seconds();
  // The loss's type: --print-losses prints the digits that read back to its
  // value (9 for float32, 17 for float64), the metrics file the fewest.
  DType LossType = DType::Float32;
  auto LossOf = [&LossType](const std::vector<OutputValue> &Outs) {
    for (const OutputValue &V : Outs)
      if (V.Kind == fb::OutputKind::Loss && !V.Values.empty()) {
        LossType = V.Type.Type;
        return V.Values[0];
      }
    return double(NAN);
  };
  while (Step < Total) {
    BatchInfo B = T.TrainIt->next(T.TrainInputs);
    if (Step == TraceFrom)
      T.Exec->setTracing(true);
    Status Ran = Pending.isOk()
                     ? T.Exec->run(T.TrainProg, uint64_t(Step))
                           .withContext("step " + std::to_string(Step + 1))
                     : Pending;
    if (Step + 1 == TraceTo)
      T.Exec->setTracing(false);
    ++Step;
    Examples += Batch;
    if (Step == O.TermAtStep)
      std::raise(SIGTERM);
    bool LogNow = O.LogEvery > 0 && (Step % O.LogEvery == 0 || Step == Total);
    bool CheckpointNow =
        O.CheckpointEvery > 0 && Step % O.CheckpointEvery == 0 && Step < Total;
    bool EvalNow = O.Eval && Step < Total &&
                   (O.EvalEvery > 0 ? Step % O.EvalEvery == 0 : B.EndOfEpoch);
    // A step's loss: printed, checked, added to the window's.
    auto Count = [&](double Loss) {
      if (O.PrintLosses) {
        char Buf[64];
        snprintf(Buf, sizeof(Buf), "%.*g", LossType == DType::Float64 ? 17 : 9,
                 Loss);
        T.Log << "step " << Step << " loss " << Buf << std::endl;
      }
      if (!std::isfinite(Loss))
        return Status::error(
            "the loss is " +
            std::string(std::isnan(Loss) ? "NaN" : "infinite") + " at step " +
            std::to_string(Step) + " (lower the learning rate?)");
      LossSum += Loss;
      ++LossCount;
      return Status::ok();
    };
    double Loss = NAN;
    if (!Async) {
      // The processes stop after the same step: a stop rides on the step's
      // means.
      const int Own = LocalStop();
      auto Votes = stopVotes(Own);
      std::vector<double> Stopping(Votes.begin(), Votes.end());
      // The histograms only when they are reported.
      MDRT_RETURN_IF_ERROR(T.readTrainOutputs(Ran, Outs, &Stopping,
                                              /*FailedAt=*/0, LogNow));
      AgreedStop =
          T.Procs->size() > 1 ? agreedStopSignal(Stopping.data()) : Own;
      StopNow = AgreedStop != 0;
      Loss = LossOf(Outs);
      MDRT_RETURN_IF_ERROR(Count(Loss));
    } else {
      // This worker's own step; its printed losses are its own.
      // The order of a failure among the workers': a step's failure (a
      // kernel's) before any NaN loss, which may be its consequence on
      // another worker through the shared variables (at any step of
      // that worker's: they go at their own pace); then by step.
      if (Pending.isOk()) {
        Pending = Ran;
        if (Pending.isOk())
          Pending = T.Exec->readOutputs(T.TrainProg, Outs, LogNow);
        if (!Pending.isOk()) {
          PendingOrder = Step;
        } else {
          Pending = Count(Loss = LossOf(Outs));
          PendingOrder = (int64_t(1) << 62) + Step;
        }
      }
      // With a stop handler they also meet about every StopCheckSeconds
      // (at least every StopCheckMaxSteps steps), so that a stop signal
      // one of them gets reaches them all soon (TrainOptions::Stop).
      if (LogNow || CheckpointNow || EvalNow || Step == Total ||
          (O.Stop && Step >= StopCheckAt)) {
        // The meeting: this step's outputs, means over the workers, the
        // mean loss of the window (the ratio of the means is that of the
        // sums), and the mean seconds per step since the last meeting.
        double Now = seconds();
        const int Own = LocalStop();
        auto Votes = stopVotes(Own);
        std::vector<double> Window{
            LossSum,
            double(LossCount),
            (Now - MetAt) / double(std::max<int64_t>(1, Step - MetAtStep)),
            Votes[0],
            Votes[1],
            Votes[2]};
        // The first failure is reported, not its consequences.
        MDRT_RETURN_IF_ERROR(
            T.readTrainOutputs(Pending, Outs, &Window, PendingOrder, LogNow));
        AgreedStop = T.Procs->size() > 1 ? agreedStopSignal(&Window[3]) : Own;
        StopNow = AgreedStop != 0;
        // Every worker has the same means, so the same next meeting.
        StopCheckAt = Step + nextStopCheck(Window[2]);
        MetAt = Now;
        MetAtStep = Step;
        Loss = LossOf(Outs);
        if (LogNow && Window[1] > 0) {
          LossSum = Window[0] / Window[1];
          LossCount = 1;
        }
      }
    }
    double Now = seconds();
    std::string SummaryJSON;
    for (const OutputValue &V : Outs) {
      if (!LogNow || V.Values.empty())
        continue;
      if (V.Kind == fb::OutputKind::Summary) {
        SummaryJSON += "," + jsonString(V.Name) + ":" +
                       jsonNumber(V.Values[0], V.Type.Type);
      } else if (V.Kind == fb::OutputKind::Histogram) {
        // The values' range and mean (Ops.md, HistogramSummary).
        auto [Min, Max] = std::minmax_element(V.Values.begin(), V.Values.end());
        double Sum = 0;
        for (double X : V.Values)
          Sum += X;
        SummaryJSON +=
            "," + jsonString(V.Name) +
            ":{\"min\":" + jsonNumber(*Min, V.Type.Type) +
            ",\"max\":" + jsonNumber(*Max, V.Type.Type) + ",\"mean\":" +
            jsonNumber(Sum / double(V.Values.size()), V.Type.Type) + "}";
      }
    }
    R.LastLoss = Loss;
    if (T.ProgressBar && (Now - LastBar > 0.25 || Step == Total)) {
      double Rate = double(Examples) / std::max(Now - Start, 1e-9);
      double Eta = double(Total - Step) * double(Batch) / std::max(Rate, 1e-9);
      int Width = 24, Filled = int(Width * double(Step) / double(Total));
      std::fprintf(stderr,
                   "\r[%s%s] step %" PRId64 "/%" PRId64
                   " loss %.4f %.0f ex/s ETA %s   ",
                   std::string(Filled, '=').c_str(),
                   std::string(Width - Filled, ' ').c_str(), Step, Total,
                   LossSum / double(LossCount), Rate, duration(Eta).c_str());
      std::fflush(stderr);
      LastBar = Now;
    }
    if (LogNow) {
      double Rate = double(Batch) * double(Step - LastLogStep) /
                    std::max(Now - LastLog - Paused, 1e-9);
      if (T.ProgressBar)
        std::fprintf(stderr, "\r%*s\r", 90, "");
      T.Log << "step " << Step << "/" << Total << " epoch "
            << fixed(double(Step) / double(PerEpoch), 2) << " loss "
            << fixed(LossSum / double(LossCount), 4) << " (" << fixed(Rate, 0)
            << " examples/s)" << std::endl;
      T.metricsLine(
          "{\"step\":" + std::to_string(Step) +
          ",\"loss\":" + jsonNumber(LossSum / double(LossCount), LossType) +
          ",\"examples_per_sec\":" + jsonNumber(Rate, DType::Float32) +
          SummaryJSON + "}");
      LastLog = Now;
      LastLogStep = Step;
      Paused = 0;
      LossSum = 0;
      LossCount = 0;
    }
    // The evaluation before the checkpoint: a run stopped in between
    // resumes from the checkpoint before, and evaluates again.
    // Their time is not the training's: the log window's rate leaves it
    // out.
    const double PausedFrom = EvalNow || CheckpointNow ? seconds() : 0;
    if (EvalNow) {
      if (T.ProgressBar)
        std::fprintf(stderr, "\r%*s\r", 90, "");
      MDRT_RETURN_IF_ERROR(T.evaluate(Step, R.Eval));
    }
    if (CheckpointNow)
      MDRT_RETURN_IF_ERROR(T.Procs->agree(T.checkpoint(Step)));
    if (EvalNow || CheckpointNow)
      Paused += seconds() - PausedFrom;
    if (Step == O.KillAtStep) {
      T.Log.flush();
      std::raise(SIGKILL);
    }
    if (StopNow && Step < Total) {
      // Stopped: the state of this step saved (unless it just was), no
      // final evaluation.
      if (!CheckpointNow)
        MDRT_RETURN_IF_ERROR(T.Procs->agree(T.checkpoint(Step)));
      if (T.ProgressBar)
        std::fprintf(stderr, "\r%*s\r", 90, "");
      R.Steps = Step;
      R.StepsRun = Step - FirstStep;
      R.Seconds = seconds() - Start;
      R.ExamplesPerSecond = double(Examples) / std::max(R.Seconds, 1e-9);
      const int Own = LocalStop();
      R.StoppedBy = Own ? Own : AgreedStop;
      R.StoppedHere = O.Stop && O.Stop->load(std::memory_order_relaxed);
      if (!O.CheckpointDir.empty())
        R.Checkpoint = O.CheckpointDir + "/" + checkpointFileName(Step);
      // A metrics file or trace that could not be written does not hide
      // the stop (its exit status, its checkpoint): said, not failed.
      for (const Status &Lost : {WriteTrace(Step), T.MetricsStatus})
        if (!Lost.isOk())
          T.Log << "note: " << Lost.message() << " (the run stopped all the "
                << "same)\n";
      return Status::ok();
    }
  }
  if (T.ProgressBar)
    std::fprintf(stderr, "\r%*s\r", 90, "");
  double Elapsed = seconds() - Start;
  R.Steps = Step;
  R.StepsRun = Step - FirstStep;
  R.Seconds = Elapsed;
  R.ExamplesPerSecond = double(Examples) / std::max(Elapsed, 1e-9);
  MDRT_RETURN_IF_ERROR(T.Procs->agree(T.checkpoint(Step)));
  if (O.Eval)
    MDRT_RETURN_IF_ERROR(T.evaluate(Step, R.Eval));
  Status Done = WriteTrace(Total);
  return T.Procs->agree(Done.isOk() ? T.MetricsStatus : Done);
}
