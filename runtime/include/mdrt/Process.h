//===- Process.h - The processes of a multi-process run ---------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A plan compiled for W replicas of the mirrored strategy (mdplan
// --strategy=mirrored --num-replicas=W --replica-id=R) runs as W processes,
// one per replica, started by an MPI launcher: process R runs replica R's
// plan, reads its shard of every global batch, and its all-reduces add its
// devices' gradients to those of the other processes. A ProcessGroup is
// what the runtime knows of those processes: its rank and size, and the few
// collective operations the executor and the training loop need. Every
// other run is a group of one process.
//
// Sums across processes are deterministic: every element is added in rank
// order (rank 0's value, plus rank 1's, ...) by exactly one process and
// copied to the others, so every process gets bit-identical results that do
// not depend on timing, message sizes or the MPI library's algorithms.
//
// A plan of the ps strategy over W replicas and P parameter-server tasks
// (mdplan --num-replicas=W --num-ps-tasks=P) runs as W + P processes:
// processes 0 to W-1 are the workers, W + T serves ps task T
// (mdrt/ParameterServer.h). Its devices exchange tensors with point-to-point
// messages (isend, recv); the workers' own collectives (agreement, means)
// go through a subgroup of the first W.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_PROCESS_H
#define MDRT_PROCESS_H

#include "mdrt/Status.h"
#include "mdrt/Tensor.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mdrt {

/// The processes of one run. The collective operations (allReduceSum,
/// broadcast, allGather, agree) must be called by every process of the
/// group, in the same order, like MPI's collectives; calls from several
/// threads of one process are serialized.
class ProcessGroup {
public:
  virtual ~ProcessGroup();

  int rank() const { return Rank; }
  int size() const { return Size; }
  /// What carries the messages, for notes: "one process", "MPI (...)".
  virtual std::string transport() const = 0;
  /// How many of the group's processes may run on some of the CPUs this
  /// one may run on (this one included): the processes of its machine
  /// whose affinity masks meet its own.
  virtual int cpuSharers() const { return 1; }

  /// Replaces the \p Count elements of \p Type at \p Buf with their sums
  /// over the processes, added in rank order (see the file comment).
  /// Float32, Float64, Int32 and Int64.
  Status allReduceSum(DType Type, void *Buf, size_t Count) {
    return allReduceSum(Type, Buf, Buf, Count);
  }
  /// The same, from \p Send into \p Recv (\p Count elements each; the
  /// same memory, or memory that does not overlap): a tensor that crosses
  /// processes from where it is to where it goes, without copies.
  virtual Status allReduceSum(DType Type, const void *Send, void *Recv,
                              size_t Count) = 0;
  /// Copies the \p Bytes at \p Buf of process \p Root to \p Buf of every
  /// other process.
  virtual Status broadcast(void *Buf, size_t Bytes, int Root) = 0;
  /// Gathers the \p Bytes at \p Local of every process into \p All
  /// (size() * Bytes bytes, in rank order) on every process.
  virtual Status allGather(const void *Local, void *All, size_t Bytes) = 0;
  /// Ends every process of the run at once with exit code \p Code: for an
  /// error on one process that the others, waiting in a collective, cannot
  /// learn of.
  [[noreturn]] virtual void abort(int Code) = 0;

  /// After work that may fail on some processes only: ok on every process
  /// when \p Local is ok on all of them; else, on every process, the error
  /// with the smallest \p Order (of the lowest rank among equals: by
  /// default the lowest failing rank's), prefixed with "replica R: " when
  /// the group has more than one process. A collective operation.
  Status agree(const Status &Local, int64_t Order = 0);

  /// Sums \p Values over the processes (in rank order) and divides by
  /// size(): the mean of a per-process quantity.
  Status mean(std::vector<double> &Values);

  /// The processes [First, First + Count) of this group as a group of
  /// their own, in which rank First + R of this one is rank R; null in the
  /// processes outside the range. A collective operation. The new group
  /// names its ranks as this one does.
  virtual StatusOr<std::unique_ptr<ProcessGroup>> subgroup(int First,
                                                           int Count) = 0;

  // Point-to-point messages. Unlike the collectives, they may be called
  // from several threads of a process at once, and a process may wait for
  // one while another thread of it sends or receives others.

  /// A message on its way (isend).
  class PendingSend {
  public:
    virtual ~PendingSend();
    /// Returns once the message's buffer may be reused.
    virtual Status wait() = 0;
  };
  /// Starts sending the \p Bytes at \p Buf to process \p Dst, where
  /// recv(this process, \p Tag) receives them: the buffer must stay as it
  /// is until the send's wait() returns. Messages of one tag from one
  /// process to another arrive in the order they were sent. Tags are 0 to
  /// maxTag().
  virtual StatusOr<std::unique_ptr<PendingSend>>
  isend(int Dst, uint32_t Tag, const void *Buf, size_t Bytes) = 0;
  /// isend, then wait.
  Status send(int Dst, uint32_t Tag, const void *Buf, size_t Bytes);
  /// Receives the next message of \p Tag from process \p Src into \p Buf,
  /// which must be its size: a message of another size is an error.
  virtual Status recv(int Src, uint32_t Tag, void *Buf, size_t Bytes) = 0;
  /// The largest tag a message may have.
  virtual uint32_t maxTag() const = 0;

  /// How messages name process \p Rank: "replica R" (the process that runs
  /// replica R's plan), or the name setRankName gave it ("ps task T").
  std::string rankName(int Rank) const;
  void setRankName(int Rank, std::string Name);

protected:
  ProcessGroup(int Rank, int Size) : Rank(Rank), Size(Size) {}
  /// A subgroup's names: those of ranks [First, First + size()) of
  /// \p Parent.
  void inheritRankNames(const ProcessGroup &Parent, int First);

private:
  int Rank, Size;
  /// Names of the ranks that are not "replica R" (empty: none).
  std::vector<std::string> RankNames;
};

/// The group of a process that runs alone.
std::unique_ptr<ProcessGroup> createSingleProcessGroup();

/// The group of this process: MPI's world when an MPI launcher started it
/// (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment) and
/// the runtime was built with MPI, which it then initializes (and finalizes
/// when the group is destroyed); else a single process. An error when a
/// launcher started several processes but the runtime has no MPI, and when
/// MPI does not initialize.
StatusOr<std::unique_ptr<ProcessGroup>> createProcessGroup(int &Argc,
                                                           char **&Argv);

/// \p Size groups that connect threads of this process (for tests): group
/// I is rank I and must be used by a thread of its own. Messages go as MPI
/// may send any message and does send large ones: the receive copies from
/// the sender's buffer, and the send completes then. So a protocol that
/// needs a send to complete before its receive is posted deadlocks here
/// as under MPI, and a sender that reuses its buffer too early is caught.
std::vector<std::unique_ptr<ProcessGroup>> createThreadProcessGroups(int Size);

/// True when the runtime was built with MPI.
bool haveMpi();

/// The rank an MPI launcher gave this process (from its environment, before
/// MPI starts), or -1 when no launcher started it.
int launcherRank();

/// `Dst[E] = Src[0][E] + Src[1][E] + ...`, added left to right, for
/// \p Count elements of \p Type: the order every cross-process sum uses.
void sumInOrder(DType Type, const void *const *Src, size_t NumSrc, void *Dst,
                size_t Count);

/// Elements [begin, end) of chunk \p Chunk when \p Count elements are split
/// into \p Chunks nearly equal chunks (the first Count % Chunks one larger).
std::pair<size_t, size_t> chunkRange(size_t Count, int Chunks, int Chunk);

} // namespace mdrt

#endif // MDRT_PROCESS_H
