//===- MpiProcessGroup.cpp - The processes of an MPI job ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// MPI_COMM_WORLD as a ProcessGroup. The group works on its own duplicate of
// the world communicator, with MPI_ERRORS_RETURN so that failures become
// messages, and serializes its calls (MPI_THREAD_SERIALIZED is enough). A
// collective that fails stops every process (MPI_Abort) after printing why:
// the others may be waiting in it.
//
// allReduceSum is a reduce-scatter and an all-gather: the buffer is cut into
// one chunk per rank; MPI_Alltoallv gives rank r every rank's chunk r,
// which it adds in rank order; MPI_Allgatherv copies the summed chunks to
// every rank. It moves as many bytes as a ring all-reduce, and unlike
// MPI_Allreduce its result does not depend on the library's choice of
// algorithm: every element is added in rank order by exactly one rank.
// With two processes, where every element is a single addition that gives
// the same result in either order, it is MPI_Allreduce itself.
//
// Point-to-point messages (a parameter-server run's transfers) may be sent
// and received by several threads at once, and each waits without holding
// the other threads up: they start nonblocking calls and poll for their
// completion (MPI_Testall), taking the process's MPI lock for each call
// only, so that MPI_THREAD_SERIALIZED is still all the library must offer.
// Every group of the process (the world's duplicate, its subgroups) shares
// that one lock.
//
//===----------------------------------------------------------------------===//

#include "../ProcessImpl.h"

#include <mpi.h>

#ifdef __linux__
#include <sched.h>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

using namespace mdrt;

namespace {

/// The largest piece one MPI call moves: counts are ints.
constexpr size_t MaxPieceBytes = size_t(1) << 30;

std::string mpiMessage(int Code) {
  char Buf[MPI_MAX_ERROR_STRING];
  int Len = 0;
  if (MPI_Error_string(Code, Buf, &Len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(Code);
  std::string S(Buf, size_t(Len));
  // MPI's messages start with a capital: ours are lower-case.
  if (!S.empty() && S[0] >= 'A' && S[0] <= 'Z' &&
      (S.size() < 2 || !(S[1] >= 'A' && S[1] <= 'Z')))
    S[0] = char(S[0] - 'A' + 'a');
  return S;
}

Status check(int Code, const char *What) {
  if (Code == MPI_SUCCESS)
    return Status::ok();
  return Status::error(std::string(What) + " failed: " + mpiMessage(Code));
}

/// The lock every MPI call of the process takes (MPI_THREAD_SERIALIZED).
std::mutex &mpiLock() {
  static std::mutex M;
  return M;
}

/// Between two tests of a poll that started at \p Start: spins first (a
/// message of a busy exchange is usually microseconds away), then yields
/// the CPU for a few milliseconds (a training step's wait for its
/// parameters or gradients), then sleeps, 20 to 200 microseconds at a time
/// (a server waiting for its worker's next request).
void pollPause(unsigned Round, std::chrono::steady_clock::time_point Start) {
  if (Round < 64)
    return;
  auto Waited = std::chrono::steady_clock::now() - Start;
  if (Waited < std::chrono::milliseconds(5)) {
    std::this_thread::yield();
    return;
  }
  auto Micros = std::chrono::duration_cast<std::chrono::microseconds>(Waited);
  std::this_thread::sleep_for(std::chrono::microseconds(
      std::clamp<int64_t>(Micros.count() / 100, 20, 200)));
}

class MpiProcessGroup : public ProcessGroup {
public:
  MpiProcessGroup(int Rank, int Size, MPI_Comm Comm, bool Finalize, int Sharers)
      : ProcessGroup(Rank, Size), Comm(Comm), Finalize(Finalize),
        Sharers(Sharers) {
    int *Ub = nullptr, Flag = 0;
    std::lock_guard<std::mutex> L(mpiLock());
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &Ub, &Flag) ==
            MPI_SUCCESS &&
        Flag && Ub && *Ub > 0)
      TagUb = uint32_t(*Ub);
  }

  int cpuSharers() const override { return Sharers; }

  ~MpiProcessGroup() override {
    MPI_Comm_free(&Comm);
    if (Finalize)
      MPI_Finalize();
  }

  StatusOr<std::unique_ptr<ProcessGroup>> subgroup(int First,
                                                   int Count) override {
    MDRT_RETURN_IF_ERROR(checkSubgroup(First, Count, size()));
    bool In = rank() >= First && rank() < First + Count;
    MPI_Comm Sub = MPI_COMM_NULL;
    {
      std::lock_guard<std::mutex> L(mpiLock());
      MDRT_RETURN_IF_ERROR(
          comm(MPI_Comm_split(Comm, In ? 0 : MPI_UNDEFINED, rank(), &Sub),
               "MPI_Comm_split"));
      if (In)
        MPI_Comm_set_errhandler(Sub, MPI_ERRORS_RETURN);
    }
    if (!In)
      return std::unique_ptr<ProcessGroup>();
    auto G = std::make_unique<MpiProcessGroup>(rank() - First, Count, Sub,
                                               /*Finalize=*/false, Sharers);
    G->inheritRankNames(*this, First);
    return std::unique_ptr<ProcessGroup>(std::move(G));
  }

  /// The pieces of a message: MPI counts are ints.
  static size_t pieces(size_t Bytes) {
    return std::max<size_t>(1, (Bytes + MaxPieceBytes - 1) / MaxPieceBytes);
  }

  class Pending final : public PendingSend {
  public:
    Pending(MpiProcessGroup &G, std::vector<MPI_Request> Reqs)
        : G(G), Reqs(std::move(Reqs)) {}
    ~Pending() override {
      if (!Done)
        wait().isOk();
    }
    Status wait() override {
      Done = true;
      return G.complete(Reqs, "MPI_Isend", nullptr);
    }

  private:
    MpiProcessGroup &G;
    std::vector<MPI_Request> Reqs;
    bool Done = false;
  };

  StatusOr<std::unique_ptr<PendingSend>>
  isend(int Dst, uint32_t Tag, const void *Buf, size_t Bytes) override {
    MDRT_RETURN_IF_ERROR(checkPeer(Dst, rank(), size()));
    MDRT_RETURN_IF_ERROR(checkTag(Tag));
    const uint8_t *P = static_cast<const uint8_t *>(Buf);
    std::vector<MPI_Request> Reqs(pieces(Bytes), MPI_REQUEST_NULL);
    std::lock_guard<std::mutex> L(mpiLock());
    for (size_t I = 0; I < Reqs.size(); ++I) {
      size_t Off = I * MaxPieceBytes;
      int N = int(std::min(MaxPieceBytes, Bytes - std::min(Bytes, Off)));
      MDRT_RETURN_IF_ERROR(
          comm(MPI_Isend(P + Off, N, MPI_BYTE, Dst, int(Tag), Comm, &Reqs[I]),
               "MPI_Isend"));
    }
    return std::unique_ptr<PendingSend>(new Pending(*this, std::move(Reqs)));
  }

  Status recv(int Src, uint32_t Tag, void *Buf, size_t Bytes) override {
    MDRT_RETURN_IF_ERROR(checkPeer(Src, rank(), size()));
    MDRT_RETURN_IF_ERROR(checkTag(Tag));
    uint8_t *P = static_cast<uint8_t *>(Buf);
    std::vector<MPI_Request> Reqs(pieces(Bytes), MPI_REQUEST_NULL);
    std::vector<int> Want(Reqs.size());
    {
      std::lock_guard<std::mutex> L(mpiLock());
      for (size_t I = 0; I < Reqs.size(); ++I) {
        size_t Off = I * MaxPieceBytes;
        Want[I] = int(std::min(MaxPieceBytes, Bytes - std::min(Bytes, Off)));
        MDRT_RETURN_IF_ERROR(comm(MPI_Irecv(P + Off, Want[I], MPI_BYTE, Src,
                                            int(Tag), Comm, &Reqs[I]),
                                  "MPI_Irecv"));
      }
    }
    std::vector<int> Counts;
    MDRT_RETURN_IF_ERROR(complete(Reqs, "MPI_Irecv", &Counts));
    size_t Got = 0;
    bool Short = false;
    for (size_t I = 0; I < Counts.size(); ++I) {
      Got += size_t(Counts[I]);
      Short |= Counts[I] != Want[I];
    }
    if (Short)
      return Status::error("a message of " + std::to_string(Got) +
                           " bytes from process " + std::to_string(Src) +
                           " (tag " + std::to_string(Tag) + "), where " +
                           std::to_string(Bytes) + " were expected");
    return Status::ok();
  }

  uint32_t maxTag() const override { return TagUb; }

  std::string transport() const override {
    char Buf[MPI_MAX_LIBRARY_VERSION_STRING];
    int Len = 0;
    std::string V = "MPI";
    if (MPI_Get_library_version(Buf, &Len) == MPI_SUCCESS) {
      std::string Lib(Buf, size_t(Len));
      Lib = Lib.substr(0, Lib.find_first_of(",\n"));
      V += " (" + Lib + ")";
    }
    return V;
  }

  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Recv,
                      size_t Count) override {
    MDRT_RETURN_IF_ERROR(checkSummable(Type));
    std::lock_guard<std::mutex> L(mpiLock());
    size_t Elt = dtypeSize(Type);
    size_t PieceElts = MaxPieceBytes / Elt;
    const uint8_t *S = static_cast<const uint8_t *>(Send);
    uint8_t *R = static_cast<uint8_t *>(Recv);
    // Every rank cuts the buffer into the same pieces, so the calls match.
    for (size_t Off = 0; Off < Count; Off += PieceElts) {
      size_t N = std::min(PieceElts, Count - Off);
      // Two processes: each element is one addition, the same whichever
      // rank does it, so MPI's own all-reduce (which may copy less) gives
      // the rank-order sum on both.
      MDRT_RETURN_IF_ERROR(
          size() == 2 ? reduceTwo(Type, S + Off * Elt, R + Off * Elt, N)
                      : reducePiece(Type, S + Off * Elt, R + Off * Elt, N));
    }
    return Status::ok();
  }

  Status broadcast(void *Buf, size_t Bytes, int Root) override {
    std::lock_guard<std::mutex> L(mpiLock());
    uint8_t *P = static_cast<uint8_t *>(Buf);
    for (size_t Off = 0; Off < Bytes; Off += MaxPieceBytes)
      MDRT_RETURN_IF_ERROR(
          comm(MPI_Bcast(P + Off, int(std::min(MaxPieceBytes, Bytes - Off)),
                         MPI_BYTE, Root, Comm),
               "MPI_Bcast"));
    return Status::ok();
  }

  Status allGather(const void *Local, void *All, size_t Bytes) override {
    if (Bytes > size_t(INT_MAX))
      return Status::error("all-gather of " + std::to_string(Bytes) +
                           " bytes per process is too large");
    std::lock_guard<std::mutex> L(mpiLock());
    return comm(MPI_Allgather(Local, int(Bytes), MPI_BYTE, All, int(Bytes),
                              MPI_BYTE, Comm),
                "MPI_Allgather");
  }

  [[noreturn]] void abort(int Code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, Code);
    std::_Exit(Code);
  }

private:
  Status checkTag(uint32_t Tag) const {
    if (Tag > TagUb)
      return Status::error("message tag " + std::to_string(Tag) +
                           " is above MPI's largest, " + std::to_string(TagUb));
    return Status::ok();
  }

  /// Polls \p Reqs until all are done, taking the lock for each test only;
  /// with \p Counts, the bytes each received. A message larger than its
  /// receive is an error for the caller (the processes exchange what their
  /// plans say; a bigger message means their plans differ); any other
  /// failure stops every process.
  Status complete(std::vector<MPI_Request> &Reqs, const char *What,
                  std::vector<int> *Counts) {
    std::vector<MPI_Status> St(Reqs.size());
    auto Start = std::chrono::steady_clock::now();
    for (unsigned Round = 0;; ++Round) {
      int Done = 0;
      // What went wrong, found under the lock (MPI calls all take it).
      Status Failed = Status::ok();
      bool Truncated = false;
      {
        std::lock_guard<std::mutex> L(mpiLock());
        int Code = MPI_Testall(int(Reqs.size()), Reqs.data(), &Done, St.data());
        if (Code == MPI_ERR_IN_STATUS) {
          for (size_t I = 0; I < Reqs.size() && Failed.isOk(); ++I) {
            int E = St[I].MPI_ERROR, Class = 0;
            if (E == MPI_SUCCESS || E == MPI_ERR_PENDING)
              continue;
            MPI_Error_class(E, &Class);
            Truncated = Class == MPI_ERR_TRUNCATE;
            Failed =
                Truncated
                    ? Status::error("a message from process " +
                                    std::to_string(St[I].MPI_SOURCE) +
                                    " (tag " + std::to_string(St[I].MPI_TAG) +
                                    ") is larger than the bytes expected")
                    : check(E, What);
          }
        } else {
          Failed = check(Code, What);
        }
        if (Failed.isOk() && Done && Counts) {
          Counts->assign(Reqs.size(), 0);
          for (size_t I = 0; I < Reqs.size(); ++I)
            MPI_Get_count(&St[I], MPI_BYTE, &(*Counts)[I]);
        }
      }
      if (Truncated)
        return Failed;
      if (!Failed.isOk())
        stopAll(Failed);
      if (Done)
        return Status::ok();
      pollPause(Round, Start);
    }
  }

  /// Prints \p S and stops every process of the run.
  [[noreturn]] void stopAll(const Status &S) {
    std::fprintf(stderr, "error: %s: %s; stopping every process\n",
                 rankName(rank()).c_str(), S.message().c_str());
    abort(1);
  }

  /// A failed collective leaves the processes out of step, some of them
  /// waiting for the others: every process of the run stops, with the
  /// error of this one.
  Status comm(int Code, const char *What) {
    Status S = check(Code, What);
    if (S.isOk())
      return S;
    stopAll(S);
  }

  /// MPI_Allreduce of at most MaxPieceBytes, for two processes.
  Status reduceTwo(DType Type, const uint8_t *Send, uint8_t *Buf,
                   size_t Count) {
    MPI_Datatype T = Type == DType::Float32   ? MPI_FLOAT
                     : Type == DType::Float64 ? MPI_DOUBLE
                     : Type == DType::Int32   ? MPI_INT32_T
                                              : MPI_INT64_T;
    // MPI_IN_PLACE must be given by every process or by none, and whether
    // another process sums from a buffer of its own is its own business:
    // always in place.
    if (Send != Buf && Count)
      std::memcpy(Buf, Send, Count * dtypeSize(Type));
    return comm(MPI_Allreduce(MPI_IN_PLACE, Buf, int(Count), T, MPI_SUM, Comm),
                "MPI_Allreduce");
  }

  /// One reduce-scatter (from \p Send) and all-gather (into \p Buf) of
  /// at most MaxPieceBytes.
  Status reducePiece(DType Type, const uint8_t *Send, uint8_t *Buf,
                     size_t Count) {
    size_t Elt = dtypeSize(Type);
    int W = size();
    Counts.resize(size_t(W));
    Displs.resize(size_t(W));
    for (int R = 0; R < W; ++R) {
      auto [B, E] = chunkRange(Count, W, R);
      Counts[size_t(R)] = int((E - B) * Elt);
      Displs[size_t(R)] = int(B * Elt);
    }
    auto [Begin, End] = chunkRange(Count, W, rank());
    size_t Mine = (End - Begin) * Elt;
    Scratch.resize(Mine * size_t(W));
    MineCounts.assign(size_t(W), int(Mine));
    MineDispls.resize(size_t(W));
    for (int R = 0; R < W; ++R)
      MineDispls[size_t(R)] = int(size_t(R) * Mine);
    MDRT_RETURN_IF_ERROR(
        comm(MPI_Alltoallv(Send, Counts.data(), Displs.data(), MPI_BYTE,
                           Scratch.data(), MineCounts.data(), MineDispls.data(),
                           MPI_BYTE, Comm),
             "MPI_Alltoallv"));
    std::vector<const void *> Src;
    for (int R = 0; R < W; ++R)
      Src.push_back(Scratch.data() + size_t(R) * Mine);
    sumInOrder(Type, Src.data(), Src.size(), Buf + Begin * Elt, End - Begin);
    return comm(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, Buf,
                               Counts.data(), Displs.data(), MPI_BYTE, Comm),
                "MPI_Allgatherv");
  }

  MPI_Comm Comm;
  bool Finalize;
  int Sharers;
  uint32_t TagUb = 32767;
  std::vector<int> Counts, Displs, MineCounts, MineDispls;
  std::vector<uint8_t> Scratch;
};

} // namespace

StatusOr<std::unique_ptr<ProcessGroup>>
mdrt::createMpiProcessGroup(int &Argc, char **&Argv) {
  int Initialized = 0, Provided = 0;
  MPI_Initialized(&Initialized);
  bool Finalize = false;
  if (!Initialized) {
    if (MPI_Init_thread(&Argc, &Argv, MPI_THREAD_SERIALIZED, &Provided) !=
        MPI_SUCCESS)
      return Status::error("MPI did not initialize");
    Finalize = true;
  } else {
    MPI_Query_thread(&Provided);
  }
  if (Provided < MPI_THREAD_SERIALIZED) {
    if (Finalize)
      MPI_Finalize();
    return Status::error("the MPI library offers no MPI_THREAD_SERIALIZED "
                         "support, which mdrun needs");
  }
  MPI_Comm Comm;
  if (Status S = check(MPI_Comm_dup(MPI_COMM_WORLD, &Comm), "MPI_Comm_dup");
      !S.isOk())
    return S;
  MPI_Comm_set_errhandler(Comm, MPI_ERRORS_RETURN);
  int Rank = 0, Size = 1;
  MPI_Comm_rank(Comm, &Rank);
  MPI_Comm_size(Comm, &Size);
  // The processes of this machine (they share its memory) that may run on
  // some of this one's CPUs: their affinity masks meet this one's.
  int Sharers = 1;
  MPI_Comm Local;
  if (MPI_Comm_split_type(Comm, MPI_COMM_TYPE_SHARED, Rank, MPI_INFO_NULL,
                          &Local) == MPI_SUCCESS) {
    int LocalSize = 1;
    MPI_Comm_size(Local, &LocalSize);
    Sharers = LocalSize;
#ifdef __linux__
    cpu_set_t Mine;
    CPU_ZERO(&Mine);
    std::vector<cpu_set_t> All(static_cast<size_t>(LocalSize));
    if (sched_getaffinity(0, sizeof(Mine), &Mine) == 0 &&
        MPI_Allgather(&Mine, int(sizeof(Mine)), MPI_BYTE, All.data(),
                      int(sizeof(Mine)), MPI_BYTE, Local) == MPI_SUCCESS) {
      Sharers = 0;
      for (cpu_set_t &Other : All) {
        cpu_set_t Both;
        CPU_AND(&Both, &Mine, &Other);
        Sharers += CPU_COUNT(&Both) > 0;
      }
    }
#endif
    MPI_Comm_free(&Local);
  }
  return std::unique_ptr<ProcessGroup>(
      new MpiProcessGroup(Rank, Size, Comm, Finalize, std::max(1, Sharers)));
}
