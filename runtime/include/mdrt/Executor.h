//===- Executor.h - Running the programs of a plan --------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The executor creates the plan's devices, allocates their memory as the
// plan lays it out, creates every kernel once, initialises the variables,
// and then runs a program step after step: each device runs its kernel list
// in plan order on its own host thread (inline when there is one device),
// the plan's waits and transfers synchronise the devices, collectives sum
// across them, and the step ends when every device is done.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_EXECUTOR_H
#define MDRT_EXECUTOR_H

#include "mdrt/Device.h"
#include "mdrt/Plan.h"
#include "mdrt/Process.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace mdrt {

/// Whether all-reduces across processes overlap the computation.
enum class OverlapMode {
  /// When the process has a core to spare for the sums: the CPUs it may run
  /// on (its affinity mask, which MPI launchers narrow when they bind
  /// processes to cores) outnumber the intra-op threads of its CPU devices.
  /// Without one, the sums' copies and additions would take the cores from
  /// the computation rather than run beside it.
  Auto,
  /// Always (e.g. runs across machines, where the sums mostly wait for the
  /// network).
  On,
  /// Each all-reduce blocks its device until the sums are back.
  Off,
};

/// A process of a ps-strategy run over several processes: W workers, the
/// processes 0 to W-1, each run their replica's plan, and ps task T's
/// devices (the variables, their updates) run in process W + T
/// (mdrt/ParameterServer.h). A worker's executor runs the plan's devices of
/// its own replica and asks the servers to run theirs; a server's runs the
/// devices of its task for one worker, with the variables in memory its
/// task's executors for the other workers share. The devices of different
/// processes exchange tensors and synchronisation signals as messages.
struct ClusterOptions {
  /// Every process of the run, workers first (null: not such a run).
  ProcessGroup *Group = nullptr;
  /// -1 in a worker; in a server, its ps task.
  int ServeTask = -1;
  /// A server: each of its task's devices' persistent memory (variables,
  /// optimizer slots), by device name, shared with its executors for the
  /// other workers.
  std::map<std::string, uint8_t *> SharedPersistent;
  /// A server: held around every kernel and every copy of persistent
  /// memory, so that the workers' updates of a variable do not interleave.
  std::mutex *KernelLock = nullptr;
};

struct ExecutorOptions {
  /// Intra-op threads per device (0: the CPUs the process may run on, or
  /// its share of the machine's when several processes of the run share
  /// it unbound).
  int Threads = 0;
  /// The run seed: variable initial values and dropout masks derive from it.
  uint64_t Seed = 0;
  /// Run the plan's GPU devices on the host CPU when the machine lacks them.
  bool SoftPlacement = false;
  /// Capture each program's GPU work as CUDA graphs on its second run and
  /// replay them afterwards. Work that cannot be captured (host transfers,
  /// waits on other devices, collectives) still runs eagerly between the
  /// graphs; notes() says how much was captured.
  bool CudaGraph = false;
  /// The GPU that plan GPU index I runs on is GpuMap[I] (empty: GPU I).
  /// Several plan GPUs may share one GPU, e.g. {0, 0} runs two clones
  /// compiled for GPU:0 and GPU:1 on the first GPU.
  std::vector<int> GpuMap;
  /// The processes of the run (null: this process alone). A plan whose
  /// collectives span R replicas (mirrored, --num-replicas=R) needs a group
  /// of R processes, of which this one is the plan's replica.
  ProcessGroup *Processes = nullptr;
  /// Sum across processes on a thread of the executor's own, so that a
  /// bucket's gradients travel while the device computes the next
  /// bucket's; the device waits for the sums only before the first kernel
  /// that touches their memory (OverlapMode). Programs whose all-reduces
  /// across processes involve a GPU device block regardless. The results
  /// are the same either way; notes() says which was chosen.
  OverlapMode Overlap = OverlapMode::Auto;
  /// A process of a ps-strategy run over several processes (Processes is
  /// then the group of the workers only).
  ClusterOptions Cluster;
};

/// Where the data pipeline writes one input of a program.
struct InputSlot {
  std::string Name;
  std::string Feature;
  /// The whole batch: [batch, ...].
  TensorDesc Type;
  /// Host memory to fill before run(); the executor moves it to the device.
  void *Host = nullptr;
};

/// One output of a program after a step, copied to the host.
struct OutputValue {
  std::string Name;
  fb::OutputKind Kind = fb::OutputKind::Loss;
  TensorDesc Type;
  std::vector<double> Values;
};

/// A variable of the plan (for checkpoints).
struct VariableInfo {
  std::string Name;
  TensorDesc Type;
  bool Trainable = false;
  /// Kept by a parameter server in another process (readVariable and
  /// writeVariable ask it).
  bool Remote = false;
};

class Executor {
public:
  static StatusOr<std::unique_ptr<Executor>>
  create(std::shared_ptr<const PlanFile> Plan, const ExecutorOptions &Opts);
  ~Executor();

  const PlanFile &plan() const { return *Plan; }
  /// Notes about how the plan was mapped (soft placement, ...).
  const std::vector<std::string> &notes() const { return Notes; }

  /// Sets every variable and constant to its initial value.
  Status initialize();

  /// The index of program \p Name, or -1.
  int programIndex(const std::string &Name) const;
  const std::vector<InputSlot> &inputs(int Program) const;
  int64_t batchSize(int Program) const;

  /// Runs program \p Program once; \p Step numbers the random draws
  /// (dropout) and should count the steps of the program.
  Status run(int Program, uint64_t Step);

  /// The program's outputs from its last run. Without \p Histograms, the
  /// histogram outputs are listed without values: reading one copies and
  /// converts its whole tensor (a gradient, with summarize_gradients), which
  /// a step that reports nothing need not pay for.
  Status readOutputs(int Program, std::vector<OutputValue> &Out,
                     bool Histograms = true);

  // Variables, for checkpoints.
  const std::vector<VariableInfo> &variables() const { return Variables; }
  Status readVariable(size_t Index, void *Host);
  Status writeVariable(size_t Index, const void *Host);

  /// A worker of a ps-strategy run over several processes: tells every
  /// parameter server that this worker is done (a server stops once all
  /// its workers are). Call it once the processes have started together
  /// (every one created its executor or server), on every path after; the
  /// executor sends nothing afterwards. Does nothing in other processes.
  /// \p Outcome, how the run ended (its exit status), reaches the servers
  /// (ParameterServer::workersOutcome).
  Status disconnect(int Outcome = 0);

  /// A ps-strategy worker: the stop signal a parameter server was sent
  /// (ServerOptions::Stop), as its latest reply to a step said; 0 if none.
  int serverStop() const;

  // Tracing: while on, every kernel's start and end are recorded.
  void setTracing(bool On);
  /// Writes the recorded kernels as a Chrome trace (one track per device),
  /// which Perfetto and chrome://tracing open.
  void writeTrace(std::ostream &OS) const;

  struct Impl;

private:
  Executor() = default;
  std::shared_ptr<const PlanFile> Plan;
  std::unique_ptr<Impl> I;
  std::vector<std::string> Notes;
  std::vector<VariableInfo> Variables;
};

/// Fills \p Host (of \p Type) with the initial value of variable \p V of
/// the plan for run seed \p Seed (the CPU reference every device uses).
Status initialValue(const fb::Variable &V, const TensorDesc &Type,
                    uint64_t Seed, void *Host);

} // namespace mdrt

#endif // MDRT_EXECUTOR_H
