//===- DeviceFunctions.cpp - Built-in device functions --------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Deploy/DeviceFunctions.h"
#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;
using namespace mdplan;

static bool isPsOp(const Node &N, ArrayRef<std::string> PsOps) {
  return is_contained(PsOps, N.getOpName().str());
}

static Attr stringList(const std::vector<std::string> &L) { return Attr(L); }

PsRoundRobin::PsRoundRobin(DeviceSpec PsDevice, int Tasks,
                           std::vector<std::string> PsOps)
    : PsDevice(std::move(PsDevice)), Tasks(Tasks), PsOps(std::move(PsOps)) {
  Args.set("ps_device", this->PsDevice.toString());
  Args.set("tasks", int64_t(Tasks));
  Args.set("ps_ops", stringList(this->PsOps));
}

DeviceSpec PsRoundRobin::apply(const Node &N, const DeviceSpec &Current) {
  // A node that already has a device keeps it; so does every non-variable.
  if (!Current.empty() || !isPsOp(N, PsOps))
    return Current;
  DeviceSpec D = PsDevice;
  D.Task = Next;
  Next = (Next + 1) % Tasks;
  return D;
}

ReplicaDeviceSetter::ReplicaDeviceSetter(int PsTasks, DeviceSpec PsDevice,
                                         DeviceSpec WorkerDevice,
                                         std::vector<std::string> PsOps,
                                         bool MergeDevices)
    : PsTasks(PsTasks), PsDevice(std::move(PsDevice)),
      WorkerDevice(std::move(WorkerDevice)), PsOps(std::move(PsOps)),
      MergeDevices(MergeDevices) {
  Args.set("ps_tasks", int64_t(PsTasks));
  Args.set("ps_device", this->PsDevice.toString());
  Args.set("worker_device", this->WorkerDevice.toString());
  Args.set("ps_ops", stringList(this->PsOps));
  Args.set("merge_devices", MergeDevices);
}

DeviceSpec ReplicaDeviceSetter::apply(const Node &N,
                                      const DeviceSpec &Current) {
  if (PsTasks == 0)
    return Current;
  if (!MergeDevices && !Current.empty())
    return Current;
  if (!PsDevice.empty() && isPsOp(N, PsOps)) {
    DeviceSpec Ps = PsDevice;
    if (Ps.Job && (!Current.Job || Current.Job == Ps.Job)) {
      Ps.Task = Next;
      Next = (Next + 1) % PsTasks;
    }
    return DeviceSpec::merge(Ps, Current);
  }
  return DeviceSpec::merge(WorkerDevice, Current);
}

char DeviceFunctionArgError::ID = 0;

ArrayRef<StringRef> mdplan::deviceFunctionNames() {
  static const StringRef Names[] = {"ps-round-robin", "replica-device-setter"};
  return Names;
}

namespace {
/// Reads the arguments of one function, rejecting unknown ones.
class ArgReader {
public:
  ArgReader(StringRef Fn, const AttrDict &Args) : Fn(Fn), Args(Args) {}

  Error check(ArrayRef<StringRef> Known) {
    for (const auto &[K, V] : Args)
      if (!is_contained(Known, StringRef(K)))
        return argError(K, "unknown argument '" + K + "' for device function " +
                               Fn + " (it takes " + join(Known, ", ") + ")");
    return Error::success();
  }

  Expected<int> getInt(StringRef Name, std::optional<int> Default, int Min) {
    const Attr *A = Args.get(Name);
    if (!A) {
      if (Default)
        return *Default;
      return makeError("device function " + Fn + " needs argument '" + Name +
                       "'");
    }
    if (A->kind() != AttrKind::Int)
      return argError(Name, "argument '" + Name + "' of " + Fn +
                                " must be an integer");
    if (A->getInt() < Min)
      return argError(Name, "argument '" + Name + "' of " + Fn +
                                " must be at least " + Twine(Min) + ", got " +
                                Twine(A->getInt()));
    return int(A->getInt());
  }

  Expected<DeviceSpec> getDevice(StringRef Name, StringRef Default) {
    const Attr *A = Args.get(Name);
    std::string Text = Default.str();
    if (A) {
      if (A->kind() != AttrKind::String)
        return argError(Name, "argument '" + Name + "' of " + Fn +
                                  " must be a device string");
      Text = A->getString();
    }
    auto D = DeviceSpec::parse(Text);
    if (!D)
      return argError(Name, "argument '" + Name + "' of " + Fn + ": " +
                                errorMessage(D.takeError()));
    return *D;
  }

  Expected<std::vector<std::string>> getOps(StringRef Name) {
    const Attr *A = Args.get(Name);
    if (!A)
      return std::vector<std::string>{"Variable"};
    std::vector<std::string> Ops;
    if (A->kind() == AttrKind::String)
      Ops = {A->getString()};
    else if (A->kind() == AttrKind::StringList)
      Ops = A->getStrings();
    else
      return argError(Name, "argument '" + Name + "' of " + Fn +
                                " must be a list of op names");
    for (const std::string &Op : Ops)
      if (!OpRegistry::get().lookup(Op))
        return argError(Name, "argument '" + Name + "' of " + Fn +
                                  " names unknown op '" + Op + "'");
    return Ops;
  }

  Expected<bool> getBool(StringRef Name, bool Default) {
    const Attr *A = Args.get(Name);
    if (!A)
      return Default;
    if (A->kind() != AttrKind::Bool)
      return argError(Name, "argument '" + Name + "' of " + Fn +
                                " must be true or false");
    return A->getBool();
  }

private:
  static Error argError(StringRef Arg, const Twine &Message) {
    return make_error<DeviceFunctionArgError>(Arg.str(), Message.str());
  }

  StringRef Fn;
  const AttrDict &Args;
};
} // namespace

Expected<std::unique_ptr<DeviceFunction>>
mdplan::createDeviceFunction(StringRef Name, const AttrDict &Args) {
  ArgReader R(Name, Args);
  if (Name == "ps-round-robin") {
    if (Error E = R.check({"ps_device", "tasks", "ps_ops"}))
      return E;
    auto Dev = R.getDevice("ps_device", "/job:ps/device:CPU:0");
    if (!Dev)
      return Dev.takeError();
    auto Tasks = R.getInt("tasks", std::nullopt, 1);
    if (!Tasks)
      return Tasks.takeError();
    auto Ops = R.getOps("ps_ops");
    if (!Ops)
      return Ops.takeError();
    return std::make_unique<PsRoundRobin>(*Dev, *Tasks, *Ops);
  }
  if (Name == "replica-device-setter") {
    if (Error E = R.check({"ps_tasks", "ps_device", "worker_device", "ps_ops",
                           "merge_devices"}))
      return E;
    auto Tasks = R.getInt("ps_tasks", std::nullopt, 0);
    if (!Tasks)
      return Tasks.takeError();
    auto Ps = R.getDevice("ps_device", "/job:ps");
    if (!Ps)
      return Ps.takeError();
    auto Worker = R.getDevice("worker_device", "/job:worker");
    if (!Worker)
      return Worker.takeError();
    auto Ops = R.getOps("ps_ops");
    if (!Ops)
      return Ops.takeError();
    auto Merge = R.getBool("merge_devices", true);
    if (!Merge)
      return Merge.takeError();
    return std::make_unique<ReplicaDeviceSetter>(*Tasks, *Ps, *Worker, *Ops,
                                                 *Merge);
  }
  return makeError("unknown device function '" + Name +
                   "' (known: " + join(deviceFunctionNames(), ", ") + ")");
}
