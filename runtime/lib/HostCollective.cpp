//===- HostCollective.cpp - All-reduces through host memory ---------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The collective of CPU clones and of staged GPU clones: the participants
// of one process meet at a barrier and the last to arrive adds their
// tensors in host memory. Across processes, that sum is then added to the
// other processes' (ProcessGroup::allReduceSum) before the outputs are
// written: a large tensor in a call of its own, in place in its first
// participant's output (or from its input to its output), small ones
// packed in a host buffer. That second part can leave the device threads: a
// CollectiveQueue runs it on a thread of its own, in the order the
// collectives were reached, so that a bucket's gradients travel while the
// backward pass goes on computing the next bucket's.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Device.h"
#include "mdrt/Process.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

using namespace mdrt;

CollectiveGroup::~CollectiveGroup() = default;

//===----------------------------------------------------------------------===//
// CollectiveQueue
//===----------------------------------------------------------------------===//

struct CollectiveQueue::Impl {
  std::mutex M;
  std::condition_variable CV;
  std::deque<std::pair<std::string, std::function<void()>>> Items;
  bool Stop = false;
  bool Tracing = false;
  mutable std::mutex EventsM;
  std::vector<Event> Events;
  std::thread Thread;

  static uint64_t nowNs() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
  }

  void run() {
    std::unique_lock<std::mutex> L(M);
    for (;;) {
      CV.wait(L, [&] { return Stop || !Items.empty(); });
      if (Items.empty())
        return; // Stopping, and nothing left.
      auto Item = std::move(Items.front());
      Items.pop_front();
      bool Trace = Tracing;
      L.unlock();
      uint64_t Start = Trace ? nowNs() : 0;
      Item.second();
      if (Trace) {
        std::lock_guard<std::mutex> EL(EventsM);
        Events.push_back({std::move(Item.first), Start, nowNs()});
      }
      L.lock();
    }
  }
};

CollectiveQueue::CollectiveQueue() : I(std::make_unique<Impl>()) {
  I->Thread = std::thread([this] { I->run(); });
}

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard<std::mutex> L(I->M);
    I->Stop = true;
  }
  I->CV.notify_all();
  I->Thread.join();
}

void CollectiveQueue::push(std::string Label, std::function<void()> Work) {
  {
    std::lock_guard<std::mutex> L(I->M);
    I->Items.emplace_back(std::move(Label), std::move(Work));
  }
  I->CV.notify_all();
}

void CollectiveQueue::setTracing(bool On) {
  std::lock_guard<std::mutex> L(I->M);
  I->Tracing = On;
}

std::vector<CollectiveQueue::Event> CollectiveQueue::events() const {
  std::lock_guard<std::mutex> L(I->EventsM);
  return I->Events;
}

//===----------------------------------------------------------------------===//
// HostCollective
//===----------------------------------------------------------------------===//

namespace {

/// Participants meet at a barrier; the last one adds everything in
/// participant order into one host buffer. With a process group of several
/// processes, that buffer is added to the other processes' (in rank order)
/// before the outputs are written: at once, or on the queue's thread.
class HostCollective : public CollectiveGroup {
public:
  HostCollective(unsigned N, ProcessGroup *Processes, CollectiveQueue *Queue,
                 std::string Name)
      : N(N), In(N), Out(N), Devs(N), Joined(N, 0),
        Processes(Processes && Processes->size() > 1 ? Processes : nullptr),
        Queue(this->Processes ? Queue : nullptr), Name(std::move(Name)) {}

  bool asynchronous() const override { return Queue != nullptr; }

  void allReduce(unsigned P, Device &Dev, const std::vector<const void *> &Ins,
                 const std::vector<void *> &Outs,
                 const std::vector<TensorDesc> &Types) override {
    std::unique_lock<std::mutex> L(M);
    // The previous round's outputs must be out of the shared buffer before
    // this round overwrites it (the executor finishes every round before
    // the next step, so this does not wait there).
    DoneCV.wait(L, [&] { return Completed == Round; });
    uint64_t MyRound = Round;
    Joined[P] = MyRound;
    In[P] = Ins;
    Out[P] = Outs;
    Devs[P] = &Dev;
    if (++Arrived < N) {
      CV.wait(L, [&] { return Round != MyRound; });
      return;
    }
    addParticipants(Types);
    Arrived = 0;
    ++Round;
    CV.notify_all();
    if (!Queue) {
      acrossProcesses(Types);
      writeOutputs(Types);
      Completed = Round;
      return;
    }
    // The participants' inputs are read; the rest needs only the host
    // buffer and the outputs, which nothing touches before finish(). It is
    // queued before the lock is released: a participant that goes on to
    // the next collective must not queue that one first.
    Pending = Types;
    Queue->push(Name, [this] {
      acrossProcesses(Pending);
      writeOutputs(Pending);
      // Notified under the lock: a participant that finish() releases may
      // destroy the group as soon as it has the lock.
      std::lock_guard<std::mutex> G(M);
      ++Completed;
      DoneCV.notify_all();
    });
  }

  void finish(unsigned P) override {
    if (!Queue)
      return;
    std::unique_lock<std::mutex> L(M);
    DoneCV.wait(L, [&] { return Completed > Joined[P]; });
  }

private:
  /// The type a tensor is added in: the compiler all-reduces float32 and
  /// float64 only.
  static DType sumType(const TensorDesc &T) {
    return T.Type == DType::Float64 ? DType::Float64 : DType::Float32;
  }

  /// Participant \p P's input \p I in host memory.
  const void *stage(unsigned P, size_t I, size_t Bytes) {
    if (Devs[P]->kind() == DeviceKind::CPU)
      return In[P][I];
    Staging.resize(Bytes);
    Devs[P]->copyToHost(Staging.data(), In[P][I], Bytes);
    return Staging.data();
  }

  template <typename T> void sumInto(size_t I, size_t Count, void *Dst) {
    if (Count == 0)
      return; // Dst may be null: an empty host buffer.
    T *Acc = static_cast<T *>(Dst);
    for (unsigned P = 0; P < N; ++P) {
      const T *Src = static_cast<const T *>(stage(P, I, Count * sizeof(T)));
      if (P == 0)
        std::memcpy(Acc, Src, Count * sizeof(T));
      else
        for (size_t E = 0; E < Count; ++E)
          Acc[E] += Src[E];
    }
  }

  /// Bytes of a tensor that crosses processes in a call of its own, from
  /// and into its first participant's output (no copies through the host
  /// buffer). Smaller tensors share a call, packed in the host buffer. The
  /// choice depends only on the tensors, so every process makes the same
  /// calls.
  static constexpr size_t DirectBytes = size_t(256) << 10;

  static size_t bytesOf(const TensorDesc &T) {
    return size_t(T.numElements()) * dtypeSize(sumType(T));
  }
  bool direct(const TensorDesc &T) const { return bytesOf(T) >= DirectBytes; }

  /// Where tensor \p I is summed: its first participant's output when the
  /// tensor is direct and every participant's memory is the host's, else
  /// its place in the host buffer.
  uint8_t *accumulator(size_t I) const {
    return Offsets[I] == NoOffset
               ? static_cast<uint8_t *>(Out[0][I])
               : const_cast<uint8_t *>(Host.data()) + Offsets[I];
  }

  /// This process's sums: the host buffer holds the tensors that are not
  /// summed in place, one after the other in tensor order; a run of small
  /// tensors of one type is contiguous there, so it crosses processes at
  /// once.
  void addParticipants(const std::vector<TensorDesc> &Types) {
    bool AllHost = true;
    for (unsigned P = 0; P < N; ++P)
      AllHost &= Devs[P]->kind() == DeviceKind::CPU;
    Offsets.assign(Types.size(), NoOffset);
    size_t Total = 0;
    for (size_t I = 0; I < Types.size(); ++I) {
      if (AllHost && direct(Types[I]))
        continue;
      // A new type or a tensor of a call of its own starts aligned.
      if (I > 0 && (sumType(Types[I]) != sumType(Types[I - 1]) ||
                    direct(Types[I]) || direct(Types[I - 1])))
        Total = (Total + 63) & ~size_t(63);
      Offsets[I] = Total;
      Total += bytesOf(Types[I]);
    }
    Host.resize(Total);
    // One participant, and the sums cross processes at once: the tensors
    // summed in place go from their input to their output in that call.
    SendInputs = AllHost && N == 1 && Processes && !Queue;
    for (size_t I = 0; I < Types.size(); ++I) {
      if (SendInputs && Offsets[I] == NoOffset)
        continue;
      size_t Count = size_t(Types[I].numElements());
      if (sumType(Types[I]) == DType::Float64)
        sumInto<double>(I, Count, accumulator(I));
      else
        sumInto<float>(I, Count, accumulator(I));
    }
  }

  void acrossProcesses(const std::vector<TensorDesc> &Types) {
    if (!Processes)
      return;
    for (size_t I = 0; I < Types.size();) {
      DType T = sumType(Types[I]);
      size_t J = I + 1;
      if (!direct(Types[I]))
        while (J < Types.size() && sumType(Types[J]) == T && !direct(Types[J]))
          ++J;
      // Tensors I to J-1: one direct tensor, or a run of small ones.
      size_t Count = 0;
      for (size_t K = I; K < J; ++K)
        Count += size_t(Types[K].numElements());
      const void *Send = accumulator(I);
      if (SendInputs && Offsets[I] == NoOffset)
        Send = In[0][I];
      Status S = Processes->allReduceSum(T, Send, accumulator(I), Count);
      if (!S.isOk()) {
        // The other processes wait in this all-reduce: stop them all.
        std::fprintf(stderr,
                     "error: replica %d: the all-reduce across processes "
                     "failed: %s\n",
                     Processes->rank(), S.message().c_str());
        Processes->abort(1);
      }
      I = J;
    }
  }

  void writeOutputs(const std::vector<TensorDesc> &Types) {
    for (unsigned P = 0; P < N; ++P)
      for (size_t I = 0; I < Types.size(); ++I)
        Devs[P]->copyFromHost(Out[P][I], accumulator(I), bytesOf(Types[I]));
  }

  unsigned N;
  std::mutex M;
  /// Arrivals (CV) and completed rounds (DoneCV).
  std::condition_variable CV, DoneCV;
  unsigned Arrived = 0;
  /// Rounds whose inputs were added, and rounds whose outputs are written.
  uint64_t Round = 0, Completed = 0;
  std::vector<std::vector<const void *>> In;
  std::vector<std::vector<void *>> Out;
  std::vector<Device *> Devs;
  /// The round each participant joined last.
  std::vector<uint64_t> Joined;
  ProcessGroup *Processes;
  CollectiveQueue *Queue;
  std::string Name;
  std::vector<uint8_t> Staging;
  /// The types of the round on the queue.
  std::vector<TensorDesc> Pending;
  /// The sums of one round that are not summed in place, and where each
  /// tensor's begins (NoOffset: in its first participant's output).
  static constexpr size_t NoOffset = ~size_t(0);
  std::vector<uint8_t> Host;
  std::vector<size_t> Offsets;
  /// The round's direct tensors cross from the inputs (see addParticipants).
  bool SendInputs = false;
};

} // namespace

std::unique_ptr<CollectiveGroup>
mdrt::createHostCollective(unsigned N, ProcessGroup *Processes,
                           CollectiveQueue *Queue, const std::string &Name) {
  return std::make_unique<HostCollective>(N, Processes, Queue, Name);
}
