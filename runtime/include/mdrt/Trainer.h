//===- Trainer.h - The training loop ----------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Runs a plan's training program step after step on a dataset: batches from
// the input pipeline, periodic loss logging, evaluation on the test split
// with the plan's eval program, a metrics file, a Chrome trace of a few
// steps, and checkpoints every N steps with exact resume.
//
// In the processes of a multi-worker run (Opts.Exec.Processes), each
// process trains and evaluates on its shard of every global batch; the
// logged losses and the evaluation are over all of them; replica 0 writes
// the log, metrics and checkpoints and hands a resumed checkpoint to the
// others; every error is agreed on, so that all processes return it. A
// ps-strategy run's workers (Opts.Exec.Cluster) do the same, their
// variables on the parameter servers, but meet only to log, checkpoint,
// evaluate and at the end (asynchronous training: each goes at its own pace
// in between, and a failure waits for the next meeting); replica 0 reads
// the checkpoints' variables from the servers and alone restores them.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_TRAINER_H
#define MDRT_TRAINER_H

#include "mdrt/Data.h"
#include "mdrt/Executor.h"

#include <atomic>
#include <map>
#include <memory>
#include <ostream>
#include <string>

namespace mdrt {

struct TrainOptions {
  /// IDX dataset directory (splits "train" and "t10k"); empty with
  /// Synthetic.
  std::string DataDir;
  /// Random data of the plan's shapes instead of a dataset.
  bool Synthetic = false;
  int64_t SyntheticExamples = 60000;
  /// Length of the run: Steps when positive, else Epochs (default 1).
  int64_t Steps = 0;
  double Epochs = 0;
  uint64_t Seed = 1;
  bool Shuffle = true;
  int Prefetch = 2;
  /// ubyte data fed to float inputs as x / 255 (images); false: unscaled
  /// (mdrun --raw-bytes).
  bool ScaleBytes = true;
  ExecutorOptions Exec;

  /// Log the loss every N steps (0: never).
  int64_t LogEvery = 100;
  /// Evaluate every N steps (0: after each epoch); and at the end.
  int64_t EvalEvery = 0;
  bool Eval = true;
  /// Print every step's total loss with full precision.
  bool PrintLosses = false;
  /// Progress bar on stderr: -1 auto (when a terminal), 0 off, 1 on.
  int Progress = -1;

  /// JSON lines, one per logged step and per evaluation.
  std::string MetricsPath;
  /// Chrome trace of TraceSteps steps after the first (warm-up) step.
  std::string TracePath;
  int TraceSteps = 3;

  std::string CheckpointDir;
  /// Write a checkpoint every N steps (0: only at the end).
  int64_t CheckpointEvery = 0;
  int KeepCheckpoints = 3;
  /// Also checkpoint the state the run starts from, before its first step:
  /// the initial variables at step 0, or InitFrom's at its step; not when
  /// it resumes from a checkpoint of its own (that is one already).
  bool CheckpointAtStart = false;
  /// Continue from the latest checkpoint in CheckpointDir.
  bool Resume = false;
  /// Start from the variables of this checkpoint, whatever plan wrote it
  /// (another deployment of the model): every variable of the plan that it
  /// holds, the global step among them, the others as initialized; the
  /// data continues where it stopped when it was written on the same data
  /// (and seed and order), else from the beginning. With Resume, only when
  /// CheckpointDir has no checkpoint yet.
  std::string InitFrom;
  /// Testing: raise SIGKILL right after this step (-1: never).
  int64_t KillAtStep = -1;
  /// Testing: raise SIGTERM as this step ends (-1: never); with mdrun's
  /// handler, the run stops after it (Stop).
  int64_t TermAtStep = -1;
  /// Polled after every step: a nonzero value (mdrun stores the number of
  /// a signal, SIGTERM or SIGINT) stops the run there, with a checkpoint
  /// when CheckpointDir is set (TrainResult::StoppedBy). The processes of
  /// a run stop at the same step: those of a ps-strategy run at the next
  /// step where they meet (a log, a checkpoint, an evaluation; with Stop
  /// set they also meet about every half second, at least every 100
  /// steps).
  const std::atomic<int> *Stop = nullptr;
};

/// What a run ended with.
struct TrainResult {
  /// The global step reached (counting the steps before a resume).
  int64_t Steps = 0;
  /// The steps this run executed (Steps minus the resumed checkpoint's).
  int64_t StepsRun = 0;
  double LastLoss = 0;
  /// Evaluation at the end: "loss" and every metric (means over examples).
  std::map<std::string, double> Eval;
  double ExamplesPerSecond = 0;
  double Seconds = 0;
  /// TrainOptions::Stop's value when it stopped the run before its last
  /// step (0: the run ended): this process's, or the one another process
  /// of the run got (StoppedHere false; SIGTERM where processes got
  /// different values). Steps is the step it stopped after, and
  /// Checkpoint the checkpoint written there ("" without CheckpointDir).
  int StoppedBy = 0;
  bool StoppedHere = false;
  std::string Checkpoint;
};

/// An evaluation value as the logs print it: a metric whose name contains
/// "accuracy" as a percentage with 2 decimals ("89.68%"), anything else
/// with 4 decimals.
std::string formatEvalValue(const std::string &Name, double Value);

class Trainer {
public:
  static StatusOr<std::unique_ptr<Trainer>>
  create(std::shared_ptr<const PlanFile> Plan, const TrainOptions &Opts,
         std::ostream &Log);
  ~Trainer();

  Status run(TrainResult &Result);

  /// The executor that runs the plan.
  Executor &executor();

  struct Impl;

private:
  explicit Trainer(std::unique_ptr<Impl> I);
  std::unique_ptr<Impl> I;
};

} // namespace mdrt

#endif // MDRT_TRAINER_H
