//===- Schedule.cpp - One ordered kernel list per device ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Orders the kernels of every device. First the ordering constraints the
// data edges do not express are added as control edges:
//  - write after read: an op that updates a variable in place runs after
//    every other reader of the variable on its device and after the Recv of
//    every copy sent elsewhere (reads see the value from before the step's
//    updates);
//  - collectives: a device's all-reduces run in bucket order, the same order
//    on every device.
// Then one topological order of the whole graph is taken by simulating the
// step: each device has a clock, a kernel takes one unit of time on its
// device (a send none), and the next node is the one that can start
// first; among a device's nodes that can start, sends and collectives come
// first, then the nodes they read (so communication starts as early as
// possible), ties broken by graph order.
// Each device's list is that order restricted to the device. If the devices
// running their lists would deadlock at a collective (a participant taken
// early, while another participant's device still needs something from its
// device), the order is taken again with each collective's participants
// becoming ready together, when the last of them is. Control
// edges between devices are the plan's synchronisation points.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/IR/Verifier.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include <functional>
#include <map>
#include <queue>

using namespace llvm;
using namespace mdplan;

namespace {

class SchedulePass : public Pass {
public:
  StringRef getName() const override { return "schedule"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

} // namespace

/// Nodes that become kernels. Variables, constants and inputs are buffers
/// ready before the step; summaries are read after it.
static bool hasKernel(const Node &N) {
  const OpDef &Op = N.getOp();
  return !Op.isVariable() && !Op.is(OF_Constant) && !Op.is(OF_Input) &&
         !Op.is(OF_Summary);
}

/// True when \p R writes input \p Var in place.
static bool writesVariable(const Node &R, const Node *Var) {
  for (unsigned I : writtenInputs(R))
    if (R.getInput(I).N == Var)
      return true;
  return false;
}

Error SchedulePass::run(Graph &G, PassContext &Ctx) {
  DeployState &S = G.deployState();
  if (!S.Partitioned)
    return makeError("schedule needs partition to run first");
  if (S.Scheduled)
    return makeError("schedule: the graph is scheduled already");
  if (Error E = requirePlaced(G, getName()))
    return E;

  UseMap Uses = computeUses(G);
  DenseMap<Node *, SmallVector<Node *, 2>> RecvsOf;
  for (const auto &N : G.nodes())
    if (isa(*N, OpKind::Recv))
      for (Node *C : N->getControlInputs())
        if (isa(*C, OpKind::Send))
          RecvsOf[C].push_back(N.get());

  // Write after read.
  for (const auto &WP : G.nodes()) {
    Node *W = WP.get();
    for (unsigned Idx : writtenInputs(*W)) {
      Node *Var = W->getInput(Idx).N;
      if (!Var->getOp().isVariable())
        return W->error("writes input " + Twine(Idx) + " in place, but '" +
                        Var->getName() + "' is not a variable");
      SmallVector<Node *, 8> Before;
      for (auto &[R, J] : usesOf(Uses, Var)) {
        if (R == W)
          continue;
        if (writesVariable(*R, Var)) {
          // Two writers: graph order decides.
          if (R->getId() < W->getId())
            Before.push_back(R);
          continue;
        }
        Before.push_back(R);
        if (auto It = RecvsOf.find(R); It != RecvsOf.end())
          llvm::append_range(Before, It->second);
      }
      W->addControlInputs(Before);
    }
  }

  // Collectives in bucket order on every device.
  std::map<int, std::vector<Node *>> Collectives;
  for (const auto &N : G.nodes())
    if (N->getOp().is(OF_Collective))
      Collectives[N->getDevice()].push_back(N.get());
  for (auto &[Dev, List] : Collectives) {
    std::stable_sort(List.begin(), List.end(), [](Node *A, Node *B) {
      return A->attrs().getInt("bucket") < B->attrs().getInt("bucket");
    });
    for (unsigned I = 1; I < List.size(); ++I)
      List[I]->addControlInput(List[I - 1]);
  }

  // One global order; communication first among ready nodes. Tables are
  // indexed by node id.
  unsigned Bound = G.getIdBound();
  ConsumerTable Users(G);
  // Among the ready nodes: communication first, then the nodes whose
  // output is communicated (a gradient's final AddN, which adds the
  // regularizer's gradient after the backward pass has gone on, feeds an
  // all-reduce bucket or a Send), then graph order. So a bucket starts as
  // soon as its last gradient is computed, not after the whole backward
  // pass.
  auto IsComm = [](const Node &N) {
    return isa(N, OpKind::Send) || N.getOp().is(OF_Collective);
  };
  std::vector<uint8_t> Rank(Bound, 2);
  for (const auto &NP : G.nodes())
    if (IsComm(*NP)) {
      for (const TensorRef &In : NP->getInputs())
        if (!IsComm(*In.N))
          Rank[In.N->getId()] = 1;
      Rank[NP->getId()] = 0;
    }
  // By id: the node, and the device of its kernel (-1: none), so that
  // taking a node from the ready set reads no node either.
  // And the time its kernel takes in the simulated step (below).
  std::vector<Node *> ById(Bound, nullptr);
  std::vector<int> KernelDevice(Bound, -1);
  std::vector<uint8_t> Cost(Bound, 0);
  std::vector<unsigned> InEdges(Bound, 0);
  for (const auto &NP : G.nodes()) {
    unsigned Id = NP->getId();
    ById[Id] = NP.get();
    InEdges[Id] = numInEdges(*NP);
    if (hasKernel(*NP)) {
      KernelDevice[Id] = NP->getDevice();
      Cost[Id] = isa(*NP, OpKind::Send) ? 0 : 1;
    }
  }
  // The participants of each collective (group and bucket).
  constexpr unsigned NoGroup = ~0u;
  std::vector<unsigned> GroupOf(Bound, NoGroup);
  std::vector<SmallVector<unsigned, 4>> Groups;
  {
    std::map<std::pair<int64_t, std::string>, unsigned> GroupIds;
    for (const auto &NP : G.nodes())
      if (NP->getOp().is(OF_Collective)) {
        auto Ins = GroupIds.try_emplace({NP->attrs().getInt("bucket"),
                                         NP->attrs().getString("group").str()},
                                        unsigned(Groups.size()));
        if (Ins.second)
          Groups.emplace_back();
        // One participant per device (NCCL's and the host's collectives
        // take one rank per device).
        for (unsigned P : Groups[Ins.first->second])
          if (ById[P]->getDevice() == NP->getDevice())
            return NP->error("collective '" + NP->attrs().getString("group") +
                             "' bucket " + Twine(NP->attrs().getInt("bucket")) +
                             " has two participants on " +
                             G.getDevices()[NP->getDevice()].toString() +
                             ": '" + ById[P]->getName() + "' and '" +
                             NP->getName() +
                             "' (a collective takes one per device)");
        GroupOf[NP->getId()] = Ins.first->second;
        Groups[Ins.first->second].push_back(NP->getId());
      }
  }

  // A collective some of whose participants never became ready while
  // others did (one needs another's result), found by Order(true).
  size_t WaitingGroup = Groups.size();
  size_t NumDevices = G.getDevices().size();
  // Takes the order (S.Schedules); returns the number of nodes ordered.
  // With \p Together, the participants of a collective become ready
  // together, when the last of them is.
  //
  // The order simulates the step: every device has a clock, a kernel takes
  // one unit of its device's time (a Send none: it only signals) and starts
  // once its device is free and what it reads is there. The next node
  // taken is the one that can start first; among a device's nodes that
  // can start then, the lowest rank, then graph order. So a device's list
  // follows when its inputs arrive, not the ids of other devices' nodes:
  // a CPU parameter server receives a gradient and applies it while the
  // GPU computes the next one. (A device with nothing else to start takes
  // a Recv whose data is there even if its reader waits for more, which
  // can hold that buffer a little longer than graph order did.)
  auto Order = [&](bool Together) {
    std::vector<unsigned> Pending = InEdges;
    // When each node's inputs are there.
    std::vector<uint32_t> ReadyAt(Bound, 0);
    std::vector<uint32_t> Clock(NumDevices, 0);
    // Per device: the nodes that can start by its clock, as (rank, id)
    // packed in one integer, so ordering them reads no node; and those
    // whose inputs come later, as (time, (rank, id)).
    using Packed = uint64_t;
    using Timed = std::pair<uint32_t, Packed>;
    std::vector<
        std::priority_queue<Packed, std::vector<Packed>, std::greater<Packed>>>
        Now(NumDevices);
    std::vector<
        std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>>>
        Later(NumDevices);
    // When device D can start its next kernel: at its clock if a node's
    // inputs are there by then, else when the first arrive; none without
    // nodes.
    constexpr uint32_t Idle = UINT32_MAX;
    auto StartOf = [&](size_t D) -> uint32_t {
      if (!Now[D].empty())
        return Clock[D];
      if (!Later[D].empty())
        return std::max(Clock[D], Later[D].top().first);
      return Idle;
    };
    // The devices by (start, index), pushed again whenever a device's
    // start may have changed; an entry that no longer gives its device's
    // start is dropped when it comes up. Finding the device that starts
    // first thus costs a logarithm, not a scan of every device (plans of
    // thousands of devices).
    using DevKey = std::pair<uint32_t, uint32_t>;
    std::priority_queue<DevKey, std::vector<DevKey>, std::greater<DevKey>>
        Starts;
    auto Touch = [&](size_t D) {
      if (uint32_t At = StartOf(D); At != Idle)
        Starts.push({At, uint32_t(D)});
    };
    // Ready nodes without a kernel (taken at once, in no list).
    std::vector<unsigned> Free;
    auto Key = [&](unsigned Id) { return (uint64_t(Rank[Id]) << 32) | Id; };
    std::vector<unsigned> GroupReady(Groups.size(), 0);
    auto MakeReady = [&](unsigned Id) {
      if (KernelDevice[Id] < 0) {
        Free.push_back(Id);
        return;
      }
      uint32_t At = ReadyAt[Id];
      unsigned Grp = GroupOf[Id];
      if (Together && Grp != NoGroup) {
        // The group enters the ready set through its first participant,
        // and leaves it all at once (below): nothing comes between its
        // participants in the order.
        if (++GroupReady[Grp] != Groups[Grp].size())
          return;
        Id = Groups[Grp].front();
        for (unsigned P : Groups[Grp])
          At = std::max(At, ReadyAt[P]);
      }
      int Dev = KernelDevice[Id];
      if (At <= Clock[Dev])
        Now[Dev].push(Key(Id));
      else
        Later[Dev].push({At, Key(Id)});
      Touch(size_t(Dev));
    };
    for (const auto &NP : G.nodes())
      if (Pending[NP->getId()] == 0)
        MakeReady(NP->getId());
    S.Schedules.assign(NumDevices, {});
    size_t Done = 0;
    // Takes node Id, a kernel starting at \p Start or a node without one.
    auto Take = [&](unsigned Id, uint32_t Start) {
      ++Done;
      uint32_t End = ReadyAt[Id];
      if (int Dev = KernelDevice[Id]; Dev >= 0) {
        S.Schedules[Dev].push_back(ById[Id]);
        End = Start + Cost[Id];
        Clock[Dev] = End;
        Touch(size_t(Dev));
      }
      for (unsigned U : Users.idsOf(Id)) {
        ReadyAt[U] = std::max(ReadyAt[U], End);
        if (--Pending[U] == 0)
          MakeReady(U);
      }
    };
    // Moves device D's nodes whose inputs are there by its clock to Now.
    auto Arrived = [&](size_t D) {
      while (!Later[D].empty() && Later[D].top().first <= Clock[D]) {
        Now[D].push(Later[D].top().second);
        Later[D].pop();
      }
    };
    for (;;) {
      while (!Free.empty()) {
        unsigned Id = Free.back();
        Free.pop_back();
        Take(Id, 0);
      }
      // The device that can start a kernel first (the lowest index of a
      // tie).
      int Best = -1;
      uint32_t BestStart = 0;
      while (!Starts.empty()) {
        auto [At, D] = Starts.top();
        Starts.pop();
        if (StartOf(D) == At) {
          Best = int(D);
          BestStart = At;
          break;
        }
      }
      if (Best < 0)
        break;
      Arrived(size_t(Best));
      if (Now[Best].empty()) {
        Clock[Best] = BestStart;
        Arrived(Best);
      }
      unsigned Id = uint32_t(Now[Best].top());
      Now[Best].pop();
      if (!Together || GroupOf[Id] == NoGroup) {
        Take(Id, Clock[Best]);
        continue;
      }
      // A collective starts when its last participant can.
      uint32_t Start = 0;
      for (unsigned P : Groups[GroupOf[Id]])
        Start = std::max({Start, Clock[KernelDevice[P]], ReadyAt[P]});
      for (unsigned P : Groups[GroupOf[Id]])
        Take(P, Start);
    }
    if (Together)
      for (size_t Grp = 0; Grp < Groups.size(); ++Grp)
        if (GroupReady[Grp] != 0 && GroupReady[Grp] < Groups[Grp].size())
          WaitingGroup = Grp;
    return Done;
  };

  // Whether the devices, each running its list, finish the step: a kernel
  // runs once what it reads and waits for has run, a collective once every
  // participant has come to it. The order above can fail this: a
  // participant taken early (its inputs ready, another's not yet) lets its
  // device run into the collective before what another participant needs
  // from that device.
  auto Finishes = [&] {
    std::vector<bool> Ran(Bound, false);
    for (const auto &NP : G.nodes())
      Ran[NP->getId()] = KernelDevice[NP->getId()] < 0;
    std::vector<size_t> Next(S.Schedules.size(), 0);
    auto CanRun = [&](const Node &N) {
      for (const TensorRef &In : N.getInputs())
        if (!Ran[In.N->getId()])
          return false;
      for (const Node *C : N.getControlInputs())
        if (!Ran[C->getId()])
          return false;
      return true;
    };
    // Per collective, how many participants wait at the head of their
    // device's list, ready to run.
    std::vector<unsigned> Arrived(Groups.size(), 0);
    std::vector<bool> Waiting(Bound, false);
    for (bool Progress = true; Progress;) {
      Progress = false;
      for (size_t D = 0; D < S.Schedules.size(); ++D)
        while (Next[D] < S.Schedules[D].size()) {
          Node &N = *S.Schedules[D][Next[D]];
          if (!CanRun(N))
            break;
          unsigned Grp = GroupOf[N.getId()];
          if (Grp == NoGroup) {
            Ran[N.getId()] = true;
            ++Next[D];
            Progress = true;
            continue;
          }
          // The device waits at its collective until every participant
          // does (counted once per participant: one stays at its head
          // until the group runs, and what it read stays run).
          if (!Waiting[N.getId()]) {
            Waiting[N.getId()] = true;
            ++Arrived[Grp];
          }
          if (Arrived[Grp] != Groups[Grp].size())
            break;
          for (unsigned P : Groups[Grp]) {
            Ran[P] = true;
            ++Next[KernelDevice[P]];
          }
          Progress = true;
        }
    }
    for (size_t D = 0; D < S.Schedules.size(); ++D)
      if (Next[D] != S.Schedules[D].size())
        return false;
    return true;
  };

  size_t Done = Order(/*Together=*/false);
  if (Done == G.size() && !Groups.empty() && !Finishes()) {
    Done = Order(/*Together=*/true);
    if (Done != G.size() && WaitingGroup < Groups.size()) {
      const Node &First = *ById[Groups[WaitingGroup].front()];
      std::string Names;
      for (unsigned P : Groups[WaitingGroup])
        Names += (Names.empty() ? "'" : ", '") + ById[P]->getName().str() + "'";
      return First.error("the participants of collective '" +
                         First.attrs().getString("group") + "' bucket " +
                         Twine(First.attrs().getInt("bucket")) + " (" + Names +
                         ") cannot meet: one of them needs what another "
                         "computes");
    }
    if (Done == G.size() && !Finishes())
      return makeError("schedule: internal error: the devices' orders "
                       "deadlock at a collective");
  }
  if (Done != G.size()) {
    // A variable read after its update in the same step, typically.
    auto Topo = topologicalOrder(G);
    if (!Topo)
      return appendToMessage(
          Topo.takeError(),
          " (reads of a variable see its value from before the step's "
          "updates, so no read may depend on an update of the same "
          "variable)");
    return makeError("schedule: internal error: not every node was ordered");
  }
  S.Scheduled = true;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createSchedulePass() {
  return std::make_unique<SchedulePass>();
}
