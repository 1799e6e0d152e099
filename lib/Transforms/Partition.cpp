//===- Partition.cpp - Explicit transfers between devices -----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Every data edge between two devices becomes a Send on the producer's
// device and a Recv on the consumer's, one pair per tensor and destination
// (so a variable read by several ops of one device is copied there once per
// step: model_deploy's caching device). The Recv depends on its Send through
// a control edge; control edges between devices stay as they are. Both
// become synchronisation points of the plan.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/Builder.h"
#include "mdplan/IR/DeployState.h"
#include "mdplan/IR/OpRegistry.h"
#include "mdplan/Transforms/Pass.h"
#include "mdplan/Transforms/PassUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"

#include <tuple>

using namespace llvm;
using namespace mdplan;

namespace {

class PartitionPass : public Pass {
public:
  StringRef getName() const override { return "partition"; }
  Error run(Graph &G, PassContext &Ctx) override;
};

} // namespace

/// `node` or `node_out<k>` for use inside generated names.
/// The name of \p T in a transfer's name: the node's, "_outN" for output N.
static void tensorNamePart(TensorRef T, SmallVectorImpl<char> &Out) {
  Out.clear();
  Out.append(T.N->getName().begin(), T.N->getName().end());
  if (T.Index)
    (Twine("_out") + Twine(T.Index)).toVector(Out);
}

Error PartitionPass::run(Graph &G, PassContext &Ctx) {
  for (const auto &N : G.nodes())
    if (!N->isPlaced())
      return makeError("partition needs place-devices to run first");
  DeployState &S = G.deployState();
  if (S.Partitioned)
    return makeError("partition: the graph is partitioned already");
  if (Error E = requireTypes(G, getName()))
    return E;

  // (tensor, destination device) -> Recv.
  DenseMap<std::tuple<Node *, unsigned, int>, Node *> Recvs;
  std::vector<Node *> Original;
  Original.reserve(G.size());
  for (const auto &N : G.nodes())
    Original.push_back(N.get());
  // Device names for the transfers' attributes, made once per device.
  // (The attribute values share their strings.)
  std::vector<Attr> DevName;
  std::vector<std::string> DevShort;
  for (const DeviceSpec &D : G.getDevices()) {
    DevName.push_back(Attr(D.toString()));
    DevShort.push_back(deviceShortName(D));
  }
  unsigned Channel = 0;
  SmallString<128> Part, Name; // reused: a plan has many transfers
  for (Node *N : Original) {
    int Dst = N->getDevice();
    for (unsigned I = 0, E = N->getNumInputs(); I != E; ++I) {
      TensorRef In = N->getInput(I);
      int Src = In.N->getDevice();
      if (Src == Dst)
        continue;
      Node *&Recv = Recvs[{In.N, In.Index, Dst}];
      if (!Recv) {
        tensorNamePart(In, Part);
        // Appended piece by piece: a Twine's toVector costs as much again.
        Name.clear();
        Name.append({StringRef("_send/"), StringRef(Part), StringRef("/to_"),
                     StringRef(DevShort[Dst])});
        Node *Send = G.createNodeUnique(Name, opDef(OpKind::Send));
        Send->setInputs({In});
        std::pair<StringRef, Attr> SendAttrs[] = {{"channel", int64_t(Channel)},
                                                  {"to", DevName[Dst]}};
        Send->attrs() = AttrDict(SendAttrs);
        Name.clear();
        Name.append({StringRef("_recv/"), StringRef(Part), StringRef("/on_"),
                     StringRef(DevShort[Dst])});
        Recv = G.createNodeUnique(Name, opDef(OpKind::Recv));
        std::pair<StringRef, Attr> RecvAttrs[] = {{"channel", int64_t(Channel)},
                                                  {"from", DevName[Src]},
                                                  {"dtype", In.type().Elt},
                                                  {"shape", In.type().Dims}};
        Recv->attrs() = AttrDict(RecvAttrs);
        Recv->addControlInput(Send);
        ++Channel;
        for (Node *X : {Send, Recv}) {
          X->setStack(G.getRootStack());
          X->setRole(NodeRole::Transfer);
          X->setLoc(N->getLoc());
          if (Error Err = inferNodeShapes(*X))
            return Err;
        }
        Send->setDevice(Src);
        Recv->setDevice(Dst);
      }
      N->setInput(I, TensorRef(Recv, 0));
    }
  }
  S.NumChannels = Channel;
  S.Partitioned = true;
  return Error::success();
}

std::unique_ptr<Pass> mdplan::createPartitionPass() {
  return std::make_unique<PartitionPass>();
}
