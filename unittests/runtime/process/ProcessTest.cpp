//===- ProcessTest.cpp - Process groups and cross-process collectives -----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The thread groups stand in for the processes of an MPI job: they run the
// same chunked, rank-ordered sums (the MPI group is exercised by the lit
// tests under mpirun).
//
//===----------------------------------------------------------------------===//

#include "mdrt/Process.h"
#include "ForwardingGroup.h"
#include "mdrt/Device.h"

#include "gtest/gtest.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>

using namespace mdrt;

namespace {

/// Runs \p Body(rank, group) on one thread per group and waits for all.
void onThreads(std::vector<std::unique_ptr<ProcessGroup>> &Groups,
               const std::function<void(int, ProcessGroup &)> &Body) {
  std::vector<std::thread> Threads;
  for (size_t R = 0; R < Groups.size(); ++R)
    Threads.emplace_back([&, R] { Body(int(R), *Groups[R]); });
  for (std::thread &T : Threads)
    T.join();
}

/// Values that make the order of additions visible in float rounding.
template <typename T> std::vector<T> valuesOf(int Rank, size_t Count) {
  std::mt19937_64 Gen(uint64_t(Rank) * 7919 + Count);
  std::uniform_real_distribution<double> Dist(-1e6, 1e6);
  std::vector<T> V(Count);
  for (size_t E = 0; E < Count; ++E)
    V[E] = T(Dist(Gen) * (E % 3 == 0 ? 1e-6 : 1.0));
  return V;
}

/// The left fold over ranks, the order the groups promise.
template <typename T> std::vector<T> rankOrderSum(int Ranks, size_t Count) {
  std::vector<T> Sum = valuesOf<T>(0, Count);
  for (int R = 1; R < Ranks; ++R) {
    std::vector<T> V = valuesOf<T>(R, Count);
    for (size_t E = 0; E < Count; ++E)
      Sum[E] += V[E];
  }
  return Sum;
}

TEST(ProcessTest, ChunksCoverTheRangeInOrder) {
  for (size_t Count : {0, 1, 2, 5, 7, 64, 1000, 1001})
    for (int Chunks : {1, 2, 3, 4, 7, 9}) {
      size_t Next = 0, Min = SIZE_MAX, Max = 0;
      for (int C = 0; C < Chunks; ++C) {
        auto [B, E] = chunkRange(Count, Chunks, C);
        EXPECT_EQ(B, Next) << Count << " in " << Chunks;
        ASSERT_LE(B, E);
        Min = std::min(Min, E - B);
        Max = std::max(Max, E - B);
        Next = E;
      }
      EXPECT_EQ(Next, Count);
      EXPECT_LE(Max - Min, 1u);
    }
}

TEST(ProcessTest, SumInOrderIsALeftFold) {
  // (1e8 + 1) - 1e8 is 0 in float; 1e8 + (1 - 1e8) is not.
  float A[] = {1e8f}, B[] = {1.0f}, C[] = {-1e8f}, Out[1];
  const void *Src[] = {A, B, C};
  sumInOrder(DType::Float32, Src, 3, Out, 1);
  EXPECT_EQ(Out[0], (1e8f + 1.0f) - 1e8f);
  // The destination may be the first source.
  int64_t X[] = {1, 2}, Y[] = {10, 20};
  const void *Src2[] = {X, Y};
  sumInOrder(DType::Int64, Src2, 2, X, 2);
  EXPECT_EQ(X[0], 11);
  EXPECT_EQ(X[1], 22);
}

/// In place, and (\p Apart) from one buffer into another, which leaves
/// the first as it was. One rank: the single-process group.
template <typename T> void checkAllReduce(DType Type, bool Apart) {
  for (int Ranks : {1, 2, 3, 5})
    for (size_t Count : {size_t(0), size_t(1), size_t(Ranks - 1), size_t(1000),
                         size_t(1001)}) {
      std::vector<std::unique_ptr<ProcessGroup>> Groups;
      if (Ranks == 1)
        Groups.push_back(createSingleProcessGroup());
      else
        Groups = createThreadProcessGroups(Ranks);
      std::vector<std::vector<T>> Bufs(static_cast<size_t>(Ranks));
      std::vector<std::vector<T>> Sent(static_cast<size_t>(Ranks));
      std::vector<Status> Results(static_cast<size_t>(Ranks));
      onThreads(Groups, [&](int R, ProcessGroup &G) {
        if (Apart) {
          Sent[size_t(R)] = valuesOf<T>(R, Count);
          Bufs[size_t(R)].assign(Count, T(-3));
          Results[size_t(R)] = G.allReduceSum(Type, Sent[size_t(R)].data(),
                                              Bufs[size_t(R)].data(), Count);
        } else {
          Bufs[size_t(R)] = valuesOf<T>(R, Count);
          Results[size_t(R)] =
              G.allReduceSum(Type, Bufs[size_t(R)].data(), Count);
        }
      });
      std::vector<T> Want = rankOrderSum<T>(Ranks, Count);
      for (int R = 0; R < Ranks; ++R) {
        ASSERT_TRUE(Results[size_t(R)].isOk()) << Results[size_t(R)].message();
        if (Apart) {
          EXPECT_EQ(Sent[size_t(R)], valuesOf<T>(R, Count)) << "rank " << R;
        }
        // Bit for bit: every rank gets the rank-order sum.
        EXPECT_EQ(0, Count ? std::memcmp(Bufs[size_t(R)].data(), Want.data(),
                                         Count * sizeof(T))
                           : 0)
            << "rank " << R << " of " << Ranks << ", " << Count << " elements";
      }
    }
}

TEST(ProcessTest, AllReduceSumsInRankOrderFloat32) {
  checkAllReduce<float>(DType::Float32, false);
  checkAllReduce<float>(DType::Float32, true);
}
TEST(ProcessTest, AllReduceSumsInRankOrderFloat64) {
  checkAllReduce<double>(DType::Float64, false);
  checkAllReduce<double>(DType::Float64, true);
}
TEST(ProcessTest, AllReduceSumsInRankOrderInt64) {
  checkAllReduce<int64_t>(DType::Int64, false);
  checkAllReduce<int64_t>(DType::Int64, true);
}

TEST(ProcessTest, AllReduceRejectsBool) {
  auto Single = createSingleProcessGroup();
  uint8_t B[2] = {1, 0};
  Status S = Single->allReduceSum(DType::Bool, B, 2);
  ASSERT_FALSE(S.isOk());
  EXPECT_EQ(S.message(), "cannot sum bool tensors across processes");
}

TEST(ProcessTest, BroadcastAndAllGather) {
  auto Groups = createThreadProcessGroups(4);
  std::vector<std::array<int32_t, 3>> Bcast(4);
  std::vector<std::vector<int32_t>> Gathered(4, std::vector<int32_t>(4));
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    Bcast[size_t(R)] = {R, R * 10, R * 100};
    ASSERT_TRUE(G.broadcast(Bcast[size_t(R)].data(), 12, 2).isOk());
    int32_t Mine = 7 * R;
    ASSERT_TRUE(G.allGather(&Mine, Gathered[size_t(R)].data(), 4).isOk());
  });
  for (int R = 0; R < 4; ++R) {
    EXPECT_EQ(Bcast[size_t(R)], (std::array<int32_t, 3>{2, 20, 200}));
    EXPECT_EQ(Gathered[size_t(R)], (std::vector<int32_t>{0, 7, 14, 21}));
  }
}

TEST(ProcessTest, AgreeGivesEveryRankTheLowestFailure) {
  auto Groups = createThreadProcessGroups(4);
  std::vector<Status> Ok(4), Failed(4);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    Ok[size_t(R)] = G.agree(Status::ok());
    Status Local = R == 1 || R == 3
                       ? Status::error("broke on " + std::to_string(R))
                       : Status::ok();
    Failed[size_t(R)] = G.agree(Local);
  });
  for (int R = 0; R < 4; ++R) {
    EXPECT_TRUE(Ok[size_t(R)].isOk());
    ASSERT_FALSE(Failed[size_t(R)].isOk());
    EXPECT_EQ(Failed[size_t(R)].message(), "replica 1: broke on 1");
  }
  // Alone, a process's own error comes back unchanged.
  auto Single = createSingleProcessGroup();
  EXPECT_EQ(Single->agree(Status::error("alone")).message(), "alone");
}

TEST(ProcessTest, AgreeGivesTheFailureOfTheSmallestOrder) {
  // Ranks 0, 2 and 3 fail, ordered 9, 4 and 4: rank 2's error (the lowest
  // rank of the smallest order), whatever the ok rank passes.
  auto Groups = createThreadProcessGroups(4);
  std::vector<Status> Agreed(4);
  const int64_t Orders[4] = {9, -5, 4, 4};
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    Status Local =
        R == 1 ? Status::ok() : Status::error("broke on " + std::to_string(R));
    Agreed[size_t(R)] = G.agree(Local, Orders[R]);
  });
  for (int R = 0; R < 4; ++R)
    EXPECT_EQ(Agreed[size_t(R)].message(), "replica 2: broke on 2");
}

TEST(ProcessTest, MessagesArriveInOrderPerTag) {
  auto Groups = createThreadProcessGroups(3);
  std::vector<std::vector<int32_t>> Got(3);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    if (R == 0) {
      // Two tags to rank 2, one to rank 1; none waits for its receiver.
      // Each buffer stays as it is until its send's wait().
      std::vector<std::unique_ptr<ProcessGroup::PendingSend>> Sends;
      static const int32_t Values[] = {1, 2, 3};
      for (const int32_t &V : Values) {
        auto S = G.isend(2, 7, &V, sizeof(V));
        ASSERT_TRUE(S.isOk()) << S.status().message();
        Sends.push_back(S.take());
      }
      int32_t Other = 40;
      ASSERT_TRUE(G.send(2, 9, &Other, sizeof(Other)).isOk());
      ASSERT_TRUE(G.send(1, 7, nullptr, 0).isOk());
      for (auto &S : Sends)
        EXPECT_TRUE(S->wait().isOk());
      return;
    }
    if (R == 1) {
      ASSERT_TRUE(G.recv(0, 7, nullptr, 0).isOk());
      Got[1].push_back(-1);
      return;
    }
    // The other tag first: tags are matched, not arrival order.
    int32_t V = 0;
    ASSERT_TRUE(G.recv(0, 9, &V, sizeof(V)).isOk());
    Got[2].push_back(V);
    for (int I = 0; I < 3; ++I) {
      ASSERT_TRUE(G.recv(0, 7, &V, sizeof(V)).isOk());
      Got[2].push_back(V);
    }
  });
  EXPECT_EQ(Got[1], (std::vector<int32_t>{-1}));
  EXPECT_EQ(Got[2], (std::vector<int32_t>{40, 1, 2, 3}));
}

TEST(ProcessTest, ThreadSendsAreTakenFromTheSendersBuffer) {
  // Thread groups send every message as MPI sends large ones: nothing is
  // copied until the receive, and the send is on its way until then (a
  // sender that changes its buffer before wait() sends the change, which
  // the contract forbids and this test does on purpose to show it).
  auto Groups = createThreadProcessGroups(2);
  std::vector<int32_t> Got(4);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    if (R == 0) {
      std::vector<int32_t> Data = {1, 2, 3, 4};
      auto S = G.isend(1, 3, Data.data(), Data.size() * sizeof(int32_t));
      ASSERT_TRUE(S.isOk()) << S.status().message();
      Data = {5, 6, 7, 8};
      // The receiver takes tag 4 first: this send returns once it has.
      ASSERT_TRUE(G.send(1, 4, nullptr, 0).isOk());
      EXPECT_TRUE(S.take()->wait().isOk());
      return;
    }
    ASSERT_TRUE(G.recv(0, 4, nullptr, 0).isOk());
    ASSERT_TRUE(G.recv(0, 3, Got.data(), Got.size() * sizeof(int32_t)).isOk());
  });
  EXPECT_EQ(Got, (std::vector<int32_t>{5, 6, 7, 8}));
}

TEST(ProcessTest, MessageErrors) {
  auto Groups = createThreadProcessGroups(2);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    if (R == 0) {
      int64_t V = 5;
      ASSERT_TRUE(G.send(1, 3, &V, sizeof(V)).isOk());
      return;
    }
    int32_t Small = 0;
    Status S = G.recv(0, 3, &Small, sizeof(Small));
    ASSERT_FALSE(S.isOk());
    EXPECT_EQ(S.message(), "a message of 8 bytes from process 0 (tag 3), "
                           "where 4 were expected");
    EXPECT_EQ(G.recv(1, 3, nullptr, 0).message(),
              "no process 1 to exchange messages with (process 1 of 2)");
    EXPECT_EQ(G.send(2, 3, nullptr, 0).message(),
              "no process 2 to exchange messages with (process 1 of 2)");
  });
  auto Single = createSingleProcessGroup();
  EXPECT_EQ(Single->send(0, 0, nullptr, 0).message(),
            "no process 0 to exchange messages with (process 0 of 1)");
  EXPECT_EQ(Single->recv(1, 0, nullptr, 0).message(),
            "no process 1 to exchange messages with (process 0 of 1)");
}

TEST(ProcessTest, SubgroupsAndRankNames) {
  auto Groups = createThreadProcessGroups(4);
  std::vector<std::string> Agreed(4), Names(4);
  std::vector<int> Ranks(4, -2), Sizes(4, -2);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    G.setRankName(3, "ps task 0");
    EXPECT_EQ(G.rankName(1), "replica 1");
    EXPECT_EQ(G.rankName(3), "ps task 0");
    // A range of one group: processes 1 to 3, renumbered from 0.
    auto Sub = G.subgroup(1, 3);
    ASSERT_TRUE(Sub.isOk()) << Sub.status().message();
    if (!*Sub) {
      Ranks[size_t(R)] = -1;
      return;
    }
    ProcessGroup &S = **Sub;
    Ranks[size_t(R)] = S.rank();
    Sizes[size_t(R)] = S.size();
    Names[size_t(R)] = S.rankName(2);
    // Its collectives involve its members only.
    Status Local = S.rank() == 2 ? Status::error("down") : Status::ok();
    Agreed[size_t(R)] = S.agree(Local).message();
  });
  EXPECT_EQ(Ranks, (std::vector<int>{-1, 0, 1, 2}));
  EXPECT_EQ(Sizes, (std::vector<int>{-2, 3, 3, 3}));
  for (int R = 1; R < 4; ++R) {
    EXPECT_EQ(Names[size_t(R)], "ps task 0");
    EXPECT_EQ(Agreed[size_t(R)], "ps task 0: down");
  }
  auto Single = createSingleProcessGroup();
  auto Alone = Single->subgroup(0, 1);
  ASSERT_TRUE(Alone.isOk());
  EXPECT_EQ((*Alone)->size(), 1);
  EXPECT_EQ(Single->subgroup(0, 2).status().message(),
            "processes 0 to 1 are not a part of a group of 1");
  EXPECT_EQ(Single->subgroup(-1, 1).status().message(),
            "processes -1 to -1 are not a part of a group of 1");
}

TEST(ProcessTest, MeanOverProcesses) {
  auto Groups = createThreadProcessGroups(3);
  std::vector<std::vector<double>> V(3);
  onThreads(Groups, [&](int R, ProcessGroup &G) {
    V[size_t(R)] = {double(R), 3.0 * R};
    ASSERT_TRUE(G.mean(V[size_t(R)]).isOk());
  });
  for (int R = 0; R < 3; ++R)
    EXPECT_EQ(V[size_t(R)], (std::vector<double>{1.0, 3.0}));
}

/// \p Procs processes of \p Parts CPU participants each (queued when
/// \p Queued): every output is the sum of each process's participants (in
/// participant order), then of the processes (in rank order). Small and
/// large (crossing processes from the outputs, or, one participant
/// blocking, from the inputs) tensors of both float types in one bucket.
/// A device the host collective must stage through host memory (a GPU, as
/// far as it knows), whose memory is the host's all the same.
class FakeGpu : public Device {
public:
  FakeGpu() : Device("fake-gpu", 1) {}
  DeviceKind kind() const override { return DeviceKind::GPU; }
  Status allocate(uint64_t, uint64_t) override { return Status::ok(); }
  void copyFromHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Bytes)
      std::memcpy(Dst, Src, Bytes);
  }
  void copyToHost(void *Dst, const void *Src, size_t Bytes) override {
    if (Bytes)
      std::memcpy(Dst, Src, Bytes);
  }
  void copyFrom(Device &, int, void *Dst, const void *Src,
                size_t Bytes) override {
    if (Bytes)
      std::memcpy(Dst, Src, Bytes);
  }
};

/// Processes differ in what is theirs to choose: the last one's first
/// participant is a (fake) GPU when \p StagedLast, and only the odd ranks
/// queue when \p Queued is Mixed.
enum class Queueing { None, All, Mixed };
void checkHostCollective(int Procs, int Parts, Queueing Queued,
                         bool StagedLast = false) {
  SCOPED_TRACE(std::to_string(Procs) + " processes of " +
               std::to_string(Parts) + " participants, queueing " +
               std::to_string(int(Queued)) + (StagedLast ? ", staged" : ""));
  // Small runs of one type, large tensors first, adjacent and between.
  const std::vector<TensorDesc> Types = {
      {DType::Float32, {70000}}, {DType::Float32, {37}},
      {DType::Float32, {11}},    {DType::Float32, {70001}},
      {DType::Float32, {65536}}, {DType::Float32, {5}},
      {DType::Float64, {5}},     {DType::Float64, {40000}},
      {DType::Float64, {3}},     {DType::Float64, {0}}};
  auto Groups = createThreadProcessGroups(Procs);
  std::vector<std::unique_ptr<CollectiveQueue>> Queues;
  std::vector<std::unique_ptr<Device>> Devs;
  for (int I = 0; I < Procs * Parts; ++I)
    if (StagedLast && I == (Procs - 1) * Parts)
      Devs.push_back(std::make_unique<FakeGpu>());
    else
      Devs.push_back(createCpuDevice("cpu" + std::to_string(I), 1));
  std::vector<std::unique_ptr<CollectiveGroup>> Colls;
  for (int P = 0; P < Procs; ++P) {
    bool Queue =
        Queued == Queueing::All || (Queued == Queueing::Mixed && P % 2);
    Queues.push_back(Queue ? std::make_unique<CollectiveQueue>() : nullptr);
    Colls.push_back(createHostCollective(
        unsigned(Parts), Groups[size_t(P)].get(), Queues.back().get()));
  }
  // Participant I's tensor T: values seeded by I and T, float32 or float64
  // (both kept as doubles here, converted when passed).
  auto Values = [&](int I, size_t T) {
    return valuesOf<double>(I * 16 + int(T), size_t(Types[T].numElements()));
  };
  std::vector<std::vector<std::vector<uint8_t>>> Ins(Procs * Parts),
      Outs(Procs * Parts);
  for (int I = 0; I < Procs * Parts; ++I)
    for (size_t T = 0; T < Types.size(); ++T) {
      std::vector<double> V = Values(I, T);
      size_t Bytes = Types[T].bytes();
      Ins[size_t(I)].emplace_back(Bytes);
      Outs[size_t(I)].emplace_back(Bytes, 0xee);
      for (size_t E = 0; E < V.size(); ++E)
        if (Types[T].Type == DType::Float32)
          reinterpret_cast<float *>(Ins[size_t(I)][T].data())[E] = float(V[E]);
        else
          reinterpret_cast<double *>(Ins[size_t(I)][T].data())[E] = V[E];
    }
  std::vector<std::thread> Threads;
  for (int P = 0; P < Procs; ++P)
    for (int Q = 0; Q < Parts; ++Q)
      Threads.emplace_back([&, P, Q] {
        int I = P * Parts + Q;
        std::vector<const void *> In;
        std::vector<void *> Out;
        for (size_t T = 0; T < Types.size(); ++T) {
          In.push_back(Ins[size_t(I)][T].data());
          Out.push_back(Outs[size_t(I)][T].data());
        }
        Colls[size_t(P)]->allReduce(unsigned(Q), *Devs[size_t(I)], In, Out,
                                    Types);
        Colls[size_t(P)]->finish(unsigned(Q));
      });
  for (std::thread &T : Threads)
    T.join();
  for (size_t T = 0; T < Types.size(); ++T) {
    size_t Count = size_t(Types[T].numElements());
    bool F32 = Types[T].Type == DType::Float32;
    // In the tensor's type: participants, then processes, left to right.
    std::vector<double> Want(Count);
    std::vector<float> WantF(Count);
    for (int P = 0; P < Procs; ++P) {
      std::vector<double> D(Count);
      std::vector<float> F(Count);
      for (int Q = 0; Q < Parts; ++Q) {
        std::vector<double> V = Values(P * Parts + Q, T);
        for (size_t E = 0; E < Count; ++E) {
          D[E] = Q == 0 ? V[E] : D[E] + V[E];
          F[E] = Q == 0 ? float(V[E]) : F[E] + float(V[E]);
        }
      }
      for (size_t E = 0; E < Count; ++E) {
        Want[E] = P == 0 ? D[E] : Want[E] + D[E];
        WantF[E] = P == 0 ? F[E] : WantF[E] + F[E];
      }
    }
    const void *W = F32 ? static_cast<const void *>(WantF.data())
                        : static_cast<const void *>(Want.data());
    for (int I = 0; I < Procs * Parts; ++I) {
      if (!Types[T].bytes())
        continue;
      EXPECT_EQ(0, std::memcmp(Outs[size_t(I)][T].data(), W, Types[T].bytes()))
          << "participant " << I << ", tensor " << T;
      // The inputs are as they were.
      std::vector<double> V = Values(I, T);
      for (size_t E = 0; E < Count; ++E) {
        double Got =
            F32 ? double(reinterpret_cast<const float *>(
                      Ins[size_t(I)][T].data())[E])
                : reinterpret_cast<const double *>(Ins[size_t(I)][T].data())[E];
        if (Got != (F32 ? double(float(V[E])) : V[E])) {
          ADD_FAILURE() << "participant " << I << "'s input " << T
                        << " changed at " << E;
          break;
        }
      }
    }
  }
}

TEST(ProcessTest, HostCollectiveSpansProcesses) {
  for (int Procs : {2, 3})
    for (int Parts : {1, 2})
      for (Queueing Q : {Queueing::None, Queueing::All, Queueing::Mixed})
        checkHostCollective(Procs, Parts, Q);
}

/// A process with a staged (GPU) participant keeps its large tensors in the
/// host buffer, but crosses processes in the same calls as the others.
TEST(ProcessTest, HostCollectiveStagesSomeProcesses) {
  for (int Parts : {1, 2})
    for (Queueing Q : {Queueing::None, Queueing::Mixed})
      checkHostCollective(3, Parts, Q, /*StagedLast=*/true);
}

/// Without processes to span, small and large tensors are the sums of the
/// participants.
TEST(ProcessTest, HostCollectiveWithinAProcess) {
  checkHostCollective(1, 3, Queueing::None);
}

} // namespace

namespace {

/// A process group whose sums wait until the test opens a gate, and which
/// counts them: the cross-process part of an asynchronous collective is
/// then held back for as long as the test needs.
class GatedGroup : public ForwardingGroup {
public:
  explicit GatedGroup(std::unique_ptr<ProcessGroup> Inner)
      : ForwardingGroup(std::move(Inner), "gated") {}
  using ProcessGroup::allReduceSum;
  Status allReduceSum(DType Type, const void *Send, void *Buf,
                      size_t Count) override {
    {
      std::unique_lock<std::mutex> L(M);
      ++Entered;
      CV.notify_all();
      CV.wait(L, [&] { return Open; });
    }
    return ForwardingGroup::allReduceSum(Type, Send, Buf, Count);
  }

  void open() {
    std::lock_guard<std::mutex> L(M);
    Open = true;
    CV.notify_all();
  }
  /// Waits until \p N sums have started.
  void waitEntered(int N) {
    std::unique_lock<std::mutex> L(M);
    CV.wait(L, [&] { return Entered >= N; });
  }

private:
  std::mutex M;
  std::condition_variable CV;
  bool Open = false;
  int Entered = 0;
};

} // namespace

/// With a queue, a participant returns once its inputs are read: the sum
/// across processes (held back here) and the outputs come later, and
/// finish() waits for them. Two rounds (the second with the gate open); the
/// participant's input is overwritten as soon as allReduce returns (its memory
/// is free then), which must not change the sums.
TEST(ProcessTest, QueuedHostCollectiveReturnsBeforeTheSums) {
  constexpr int Procs = 2;
  const size_t N = 19;
  auto Threads = createThreadProcessGroups(Procs);
  std::vector<std::unique_ptr<GatedGroup>> Groups;
  std::vector<std::unique_ptr<CollectiveQueue>> Queues;
  std::vector<std::unique_ptr<CollectiveGroup>> Colls;
  std::vector<std::unique_ptr<Device>> Devs;
  for (int P = 0; P < Procs; ++P) {
    Groups.push_back(
        std::make_unique<GatedGroup>(std::move(Threads[size_t(P)])));
    Queues.push_back(std::make_unique<CollectiveQueue>());
    Colls.push_back(createHostCollective(1, Groups.back().get(),
                                         Queues.back().get(), "sum"));
    Devs.push_back(createCpuDevice("cpu" + std::to_string(P), 1));
    EXPECT_TRUE(Colls.back()->asynchronous());
  }
  std::vector<TensorDesc> Types = {{DType::Float32, {int64_t(N)}}};
  for (int Round = 0; Round < 2; ++Round) {
    std::vector<std::vector<float>> Out(Procs, std::vector<float>(N, -7.0f));
    std::vector<std::future<void>> Calls;
    for (int P = 0; P < Procs; ++P)
      Calls.push_back(std::async(std::launch::async, [&, P, Round] {
        std::vector<float> In = valuesOf<float>(P + 2 * Round, N);
        Colls[size_t(P)]->allReduce(0, *Devs[size_t(P)], {In.data()},
                                    {Out[size_t(P)].data()}, Types);
        std::fill(In.begin(), In.end(), 1e9f);
      }));
    if (Round == 0) {
      // Both calls return while the sums wait at the gate. (A group that
      // waited for the sums would wait forever: after a minute, the gate
      // opens so that the test fails instead of hanging.)
      bool Returned = true;
      for (std::future<void> &C : Calls)
        Returned &=
            C.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
      EXPECT_TRUE(Returned) << "allReduce waited for the sums";
      if (Returned) {
        for (int P = 0; P < Procs; ++P)
          Groups[size_t(P)]->waitEntered(1);
        for (int P = 0; P < Procs; ++P)
          EXPECT_EQ(Out[size_t(P)], std::vector<float>(N, -7.0f));
      }
      for (auto &G : Groups)
        G->open();
    }
    for (std::future<void> &C : Calls)
      C.get();
    for (int P = 0; P < Procs; ++P)
      Colls[size_t(P)]->finish(0);
    std::vector<float> Want = valuesOf<float>(2 * Round, N);
    std::vector<float> Other = valuesOf<float>(1 + 2 * Round, N);
    for (size_t E = 0; E < N; ++E)
      Want[E] += Other[E];
    for (int P = 0; P < Procs; ++P)
      EXPECT_EQ(Out[size_t(P)], Want) << "round " << Round << ", process " << P;
  }
}

/// A collective without processes to span, or without a queue, is
/// synchronous whatever else it is given.
TEST(ProcessTest, HostCollectiveIsAsynchronousOnlyAcrossProcesses) {
  CollectiveQueue Queue;
  auto Alone = createSingleProcessGroup();
  EXPECT_FALSE(createHostCollective(2, nullptr, &Queue)->asynchronous());
  EXPECT_FALSE(createHostCollective(2, Alone.get(), &Queue)->asynchronous());
  auto Two = createThreadProcessGroups(2);
  EXPECT_FALSE(createHostCollective(2, Two[0].get())->asynchronous());
  EXPECT_TRUE(createHostCollective(2, Two[0].get(), &Queue)->asynchronous());
}
