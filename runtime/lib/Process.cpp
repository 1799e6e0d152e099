//===- Process.cpp - Process groups: one process, threads, dispatch -------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The group of a single process, the thread groups of the tests, the
// operations every group shares (agree, mean, the sum order), and the
// choice between a single process and MPI at start-up. The MPI group is in
// lib/mpi (built when MPI is found).
//
//===----------------------------------------------------------------------===//

#include "mdrt/Process.h"

#include "ProcessImpl.h"

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

using namespace mdrt;

ProcessGroup::~ProcessGroup() = default;

namespace {

template <typename T>
void sumTyped(const void *const *Src, size_t NumSrc, void *Dst, size_t Count) {
  T *D = static_cast<T *>(Dst);
  const T *S0 = static_cast<const T *>(Src[0]);
  if (D != S0)
    std::memmove(D, S0, Count * sizeof(T));
  for (size_t I = 1; I < NumSrc; ++I) {
    const T *S = static_cast<const T *>(Src[I]);
    for (size_t E = 0; E < Count; ++E)
      D[E] += S[E];
  }
}

} // namespace

void mdrt::sumInOrder(DType Type, const void *const *Src, size_t NumSrc,
                      void *Dst, size_t Count) {
  if (NumSrc == 0 || Count == 0)
    return;
  switch (Type) {
  case DType::Float32:
    return sumTyped<float>(Src, NumSrc, Dst, Count);
  case DType::Float64:
    return sumTyped<double>(Src, NumSrc, Dst, Count);
  case DType::Int32:
    return sumTyped<int32_t>(Src, NumSrc, Dst, Count);
  case DType::Int64:
    return sumTyped<int64_t>(Src, NumSrc, Dst, Count);
  default:
    assert(false && "sum of an unsupported type");
  }
}

std::pair<size_t, size_t> mdrt::chunkRange(size_t Count, int Chunks,
                                           int Chunk) {
  size_t C = size_t(Chunks), I = size_t(Chunk);
  size_t Base = Count / C, Extra = Count % C;
  size_t Begin = I * Base + std::min(I, Extra);
  return {Begin, Begin + Base + (I < Extra ? 1 : 0)};
}

Status mdrt::checkSummable(DType Type) {
  switch (Type) {
  case DType::Float32:
  case DType::Float64:
  case DType::Int32:
  case DType::Int64:
    return Status::ok();
  default:
    return Status::error(std::string("cannot sum ") + dtypeName(Type) +
                         " tensors across processes");
  }
}

Status ProcessGroup::agree(const Status &Local, int64_t Order) {
  if (Size == 1)
    return Local;
  // Each process's order, or the largest value when it did not fail.
  constexpr int64_t Ok = std::numeric_limits<int64_t>::max();
  int64_t Mine = Local.isOk() ? Ok : std::min(Order, Ok - 1);
  std::vector<int64_t> All(size_t(Size), Ok);
  MDRT_RETURN_IF_ERROR(allGather(&Mine, All.data(), sizeof(Mine)));
  auto It = std::min_element(All.begin(), All.end());
  if (*It == Ok)
    return Status::ok();
  int Root = int(It - All.begin());
  uint64_t Len = Root == Rank ? Local.message().size() : 0;
  MDRT_RETURN_IF_ERROR(broadcast(&Len, sizeof(Len), Root));
  std::string Msg = Root == Rank ? Local.message() : std::string(Len, '\0');
  MDRT_RETURN_IF_ERROR(broadcast(Msg.data(), Len, Root));
  return Status::error(rankName(Root) + ": " + Msg);
}

std::string ProcessGroup::rankName(int R) const {
  if (size_t(R) < RankNames.size() && !RankNames[size_t(R)].empty())
    return RankNames[size_t(R)];
  return "replica " + std::to_string(R);
}

void ProcessGroup::setRankName(int R, std::string Name) {
  if (R < 0 || R >= Size)
    return;
  if (RankNames.size() <= size_t(R))
    RankNames.resize(size_t(R) + 1);
  RankNames[size_t(R)] = std::move(Name);
}

void ProcessGroup::inheritRankNames(const ProcessGroup &Parent, int First) {
  for (int R = 0; R < Size; ++R)
    if (size_t(First) + size_t(R) < Parent.RankNames.size())
      setRankName(R, Parent.RankNames[size_t(First) + size_t(R)]);
}

ProcessGroup::PendingSend::~PendingSend() = default;

Status ProcessGroup::send(int Dst, uint32_t Tag, const void *Buf,
                          size_t Bytes) {
  auto P = isend(Dst, Tag, Buf, Bytes);
  if (!P.isOk())
    return P.status();
  return (*P)->wait();
}

Status mdrt::checkSubgroup(int First, int Count, int Size) {
  if (First < 0 || Count < 1 || First + Count > Size)
    return Status::error("processes " + std::to_string(First) + " to " +
                         std::to_string(First + Count - 1) +
                         " are not a part of a group of " +
                         std::to_string(Size));
  return Status::ok();
}

Status mdrt::checkPeer(int Peer, int Rank, int Size) {
  if (Peer < 0 || Peer >= Size || Peer == Rank)
    return Status::error("no process " + std::to_string(Peer) +
                         " to exchange messages with (process " +
                         std::to_string(Rank) + " of " + std::to_string(Size) +
                         ")");
  return Status::ok();
}

Status ProcessGroup::mean(std::vector<double> &Values) {
  if (Size == 1 || Values.empty())
    return Status::ok();
  MDRT_RETURN_IF_ERROR(
      allReduceSum(DType::Float64, Values.data(), Values.size()));
  for (double &V : Values)
    V /= double(Size);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// One process
//===----------------------------------------------------------------------===//

namespace {

class SingleProcessGroup : public ProcessGroup {
public:
  SingleProcessGroup() : ProcessGroup(0, 1) {}
  std::string transport() const override { return "one process"; }
  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Recv,
                      size_t Count) override {
    MDRT_RETURN_IF_ERROR(checkSummable(Type));
    if (Send != Recv && Count)
      std::memcpy(Recv, Send, Count * dtypeSize(Type));
    return Status::ok();
  }
  Status broadcast(void *, size_t, int) override { return Status::ok(); }
  Status allGather(const void *Local, void *All, size_t Bytes) override {
    if (All != Local)
      std::memmove(All, Local, Bytes);
    return Status::ok();
  }
  [[noreturn]] void abort(int Code) override { std::exit(Code); }
  StatusOr<std::unique_ptr<ProcessGroup>> subgroup(int First,
                                                   int Count) override {
    MDRT_RETURN_IF_ERROR(checkSubgroup(First, Count, 1));
    auto G = std::make_unique<SingleProcessGroup>();
    G->inheritRankNames(*this, First);
    return std::unique_ptr<ProcessGroup>(std::move(G));
  }
  StatusOr<std::unique_ptr<PendingSend>> isend(int Dst, uint32_t, const void *,
                                               size_t) override {
    return checkPeer(Dst, 0, 1);
  }
  Status recv(int Src, uint32_t, void *, size_t) override {
    return checkPeer(Src, 0, 1);
  }
  uint32_t maxTag() const override { return INT32_MAX; }
};

//===----------------------------------------------------------------------===//
// Threads of one process (tests)
//===----------------------------------------------------------------------===//

/// What the thread groups of one set share: a barrier and the buffers each
/// rank posts for the operation in progress.
struct ThreadHub {
  explicit ThreadHub(int Size)
      : Size(Size), Posted(size_t(Size)), Received(size_t(Size)) {}

  /// Waits until every rank arrived.
  void barrier() {
    std::unique_lock<std::mutex> L(M);
    uint64_t Gen = Generation;
    if (++Arrived == Size) {
      Arrived = 0;
      ++Generation;
      CV.notify_all();
      return;
    }
    CV.wait(L, [&] { return Generation != Gen; });
  }

  int Size;
  std::mutex M;
  std::condition_variable CV;
  int Arrived = 0;
  uint64_t Generation = 0;
  std::vector<void *> Posted;
  /// Where each rank's sums go (allReduceSum).
  std::vector<void *> Received;
  /// The hubs of subgroups, by the number of subgroup calls before.
  std::map<uint64_t, std::shared_ptr<ThreadHub>> Children;

  /// A message sent and not yet received: the sender's bytes, which stay
  /// in place until the receiver has copied them and set Taken.
  struct Parcel {
    const uint8_t *Data;
    size_t Bytes;
    std::shared_ptr<bool> Taken;
  };
  /// Messages sent and not yet received, by (source, destination, tag).
  /// Guarded by MailM; MailCV tells of new parcels and of parcels taken.
  std::mutex MailM;
  std::condition_variable MailCV;
  std::map<std::tuple<int, int, uint32_t>, std::deque<Parcel>> Mail;
};

/// A send between threads: done once the receiver has taken the message.
/// Every message goes so, as MPI's large messages do (and as MPI allows for
/// all): a protocol that relies on sends completing before their receive
/// is posted deadlocks in the thread groups of the tests too, instead of
/// only under MPI with large tensors.
class ThreadSend final : public ProcessGroup::PendingSend {
public:
  ThreadSend(std::shared_ptr<ThreadHub> Hub, std::shared_ptr<bool> Taken)
      : Hub(std::move(Hub)), Taken(std::move(Taken)) {}
  /// As an MPI send: dropping it waits for it.
  ~ThreadSend() override { wait().isOk(); }
  Status wait() override {
    std::unique_lock<std::mutex> L(Hub->MailM);
    Hub->MailCV.wait(L, [&] { return *Taken; });
    return Status::ok();
  }

private:
  std::shared_ptr<ThreadHub> Hub;
  std::shared_ptr<bool> Taken;
};

class ThreadProcessGroup : public ProcessGroup {
public:
  ThreadProcessGroup(int Rank, std::shared_ptr<ThreadHub> Hub)
      : ProcessGroup(Rank, Hub->Size), Hub(std::move(Hub)) {}

  std::string transport() const override { return "threads"; }
  /// The threads share the process's CPUs.
  int cpuSharers() const override { return size(); }

  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Recv,
                      size_t Count) override {
    MDRT_RETURN_IF_ERROR(checkSummable(Type));
    size_t Elt = dtypeSize(Type);
    Hub->Posted[size_t(rank())] = const_cast<void *>(Send);
    Hub->Received[size_t(rank())] = Recv;
    Hub->barrier();
    // This rank adds its chunk of every rank's buffer, in rank order...
    auto [Begin, End] = chunkRange(Count, size(), rank());
    std::vector<const void *> Src;
    for (void *P : Hub->Posted)
      Src.push_back(static_cast<uint8_t *>(P) + Begin * Elt);
    std::vector<uint8_t> Sum((End - Begin) * Elt);
    sumInOrder(Type, Src.data(), Src.size(), Sum.data(), End - Begin);
    Hub->barrier();
    // ...and, once nobody reads the inputs any more, writes it everywhere.
    for (void *P : Hub->Received)
      if (!Sum.empty())
        std::memcpy(static_cast<uint8_t *>(P) + Begin * Elt, Sum.data(),
                    Sum.size());
    Hub->barrier();
    return Status::ok();
  }

  Status broadcast(void *Buf, size_t Bytes, int Root) override {
    Hub->Posted[size_t(rank())] = Buf;
    Hub->barrier();
    if (rank() != Root && Bytes)
      std::memcpy(Buf, Hub->Posted[size_t(Root)], Bytes);
    Hub->barrier();
    return Status::ok();
  }

  Status allGather(const void *Local, void *All, size_t Bytes) override {
    Hub->Posted[size_t(rank())] = const_cast<void *>(Local);
    Hub->barrier();
    for (int R = 0; R < size(); ++R)
      if (Bytes)
        std::memcpy(static_cast<uint8_t *>(All) + size_t(R) * Bytes,
                    Hub->Posted[size_t(R)], Bytes);
    Hub->barrier();
    return Status::ok();
  }

  /// The threads share the process: ending one ends them all.
  [[noreturn]] void abort(int Code) override { std::_Exit(Code); }

  StatusOr<std::unique_ptr<ProcessGroup>> subgroup(int First,
                                                   int Count) override {
    MDRT_RETURN_IF_ERROR(checkSubgroup(First, Count, size()));
    std::shared_ptr<ThreadHub> Child;
    {
      std::lock_guard<std::mutex> L(Hub->M);
      std::shared_ptr<ThreadHub> &C = Hub->Children[Subgroups];
      if (!C)
        C = std::make_shared<ThreadHub>(Count);
      Child = C;
    }
    ++Subgroups;
    Hub->barrier();
    if (rank() < First || rank() >= First + Count)
      return std::unique_ptr<ProcessGroup>();
    auto G = std::make_unique<ThreadProcessGroup>(rank() - First, Child);
    G->inheritRankNames(*this, First);
    return std::unique_ptr<ProcessGroup>(std::move(G));
  }

  StatusOr<std::unique_ptr<PendingSend>>
  isend(int Dst, uint32_t Tag, const void *Buf, size_t Bytes) override {
    MDRT_RETURN_IF_ERROR(checkPeer(Dst, rank(), size()));
    auto Taken = std::make_shared<bool>(false);
    {
      std::lock_guard<std::mutex> L(Hub->MailM);
      Hub->Mail[{rank(), Dst, Tag}].push_back(
          {static_cast<const uint8_t *>(Buf), Bytes, Taken});
    }
    Hub->MailCV.notify_all();
    return std::unique_ptr<PendingSend>(new ThreadSend(Hub, std::move(Taken)));
  }

  Status recv(int Src, uint32_t Tag, void *Buf, size_t Bytes) override {
    MDRT_RETURN_IF_ERROR(checkPeer(Src, rank(), size()));
    ThreadHub::Parcel Msg;
    {
      std::unique_lock<std::mutex> L(Hub->MailM);
      auto &Queue = Hub->Mail[{Src, rank(), Tag}];
      Hub->MailCV.wait(L, [&] { return !Queue.empty(); });
      Msg = std::move(Queue.front());
      Queue.pop_front();
    }
    // The sender's bytes stay until Taken: copy them outside the lock.
    bool Fits = Msg.Bytes == Bytes;
    if (Fits && Bytes)
      std::memcpy(Buf, Msg.Data, Bytes);
    {
      std::lock_guard<std::mutex> L(Hub->MailM);
      *Msg.Taken = true;
    }
    Hub->MailCV.notify_all();
    if (!Fits)
      return Status::error("a message of " + std::to_string(Msg.Bytes) +
                           " bytes from process " + std::to_string(Src) +
                           " (tag " + std::to_string(Tag) + "), where " +
                           std::to_string(Bytes) + " were expected");
    return Status::ok();
  }

  uint32_t maxTag() const override { return INT32_MAX; }

private:
  std::shared_ptr<ThreadHub> Hub;
  /// subgroup() calls so far (every rank makes the same).
  uint64_t Subgroups = 0;
};

/// The number of processes an MPI launcher started: 0 when none did, -1
/// when one did but does not say how many.
int launchedProcesses() {
  for (const char *Var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *V = std::getenv(Var))
      return std::max(1, std::atoi(V));
  if (std::getenv("PMIX_RANK"))
    return -1;
  return 0;
}

} // namespace

int mdrt::launcherRank() {
  for (const char *Var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *V = std::getenv(Var))
      return std::atoi(V);
  return -1;
}

std::unique_ptr<ProcessGroup> mdrt::createSingleProcessGroup() {
  return std::make_unique<SingleProcessGroup>();
}

std::vector<std::unique_ptr<ProcessGroup>>
mdrt::createThreadProcessGroups(int Size) {
  auto Hub = std::make_shared<ThreadHub>(Size);
  std::vector<std::unique_ptr<ProcessGroup>> Groups;
  for (int R = 0; R < Size; ++R)
    Groups.push_back(std::make_unique<ThreadProcessGroup>(R, Hub));
  return Groups;
}

StatusOr<std::unique_ptr<ProcessGroup>> mdrt::createProcessGroup(int &Argc,
                                                                 char **&Argv) {
  int Launched = launchedProcesses();
  if (Launched == 0)
    return createSingleProcessGroup();
#if MDRT_HAVE_MPI
  return createMpiProcessGroup(Argc, Argv);
#else
  (void)Argc;
  (void)Argv;
  if (Launched > 1)
    return Status::error(
        "an MPI launcher started " + std::to_string(Launched) +
        " processes, but this mdrun was built without MPI (install "
        "libopenmpi-dev and rebuild)");
  return createSingleProcessGroup();
#endif
}

bool mdrt::haveMpi() { return MDRT_HAVE_MPI; }
