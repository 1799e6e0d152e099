//===- DeviceFunctions.h - Built-in device functions ------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The device functions a graph file may name in a scope, and that the
// deployment uses for the variables device:
//
//   ps-round-robin(ps_device, tasks, ps_ops)
//   replica-device-setter(ps_tasks, ps_device, worker_device, ps_ops,
//                         merge_devices)
//
//===----------------------------------------------------------------------===//

#ifndef MDPLAN_DEPLOY_DEVICEFUNCTIONS_H
#define MDPLAN_DEPLOY_DEVICEFUNCTIONS_H

#include "mdplan/IR/Graph.h"

#include <memory>
#include <string>
#include <vector>

namespace mdplan {

/// model_deploy's _PSDeviceChooser: a variable-like node without a device
/// gets `ps_device/task:k`, k = 0, 1, ..., tasks-1, 0, ... (the counter
/// advances only when it assigns). Every other node keeps its device.
class PsRoundRobin : public DeviceFunction {
public:
  PsRoundRobin(DeviceSpec PsDevice, int Tasks, std::vector<std::string> PsOps);

  llvm::StringRef getName() const override { return "ps-round-robin"; }
  const AttrDict &getArgs() const override { return Args; }
  DeviceSpec apply(const Node &N, const DeviceSpec &Current) override;
  void reset() override { Next = 0; }
  std::unique_ptr<DeviceFunction> clone() const override {
    return std::make_unique<PsRoundRobin>(PsDevice, Tasks, PsOps);
  }

private:
  DeviceSpec PsDevice;
  int Tasks;
  std::vector<std::string> PsOps;
  AttrDict Args;
  int Next = 0;
};

/// tf.train.replica_device_setter: variable-like ops go to the ps device
/// (round-robin task when the ps spec names a job and the node does not pin
/// another job), merged under the node's device; all other ops get the
/// worker device merged under theirs. With zero ps tasks it does nothing.
class ReplicaDeviceSetter : public DeviceFunction {
public:
  ReplicaDeviceSetter(int PsTasks, DeviceSpec PsDevice, DeviceSpec WorkerDevice,
                      std::vector<std::string> PsOps, bool MergeDevices);

  llvm::StringRef getName() const override { return "replica-device-setter"; }
  const AttrDict &getArgs() const override { return Args; }
  DeviceSpec apply(const Node &N, const DeviceSpec &Current) override;
  void reset() override { Next = 0; }
  std::unique_ptr<DeviceFunction> clone() const override {
    return std::make_unique<ReplicaDeviceSetter>(
        PsTasks, PsDevice, WorkerDevice, PsOps, MergeDevices);
  }

private:
  int PsTasks;
  DeviceSpec PsDevice, WorkerDevice;
  std::vector<std::string> PsOps;
  bool MergeDevices;
  AttrDict Args;
  int Next = 0;
};

/// An error about one argument a device function was given: unknown, of the
/// wrong kind or out of range. Carries the argument's name so that a reader
/// can point at where it was written.
class DeviceFunctionArgError : public llvm::ErrorInfo<DeviceFunctionArgError> {
public:
  static char ID;

  DeviceFunctionArgError(std::string Arg, std::string Message)
      : Arg(std::move(Arg)), Message(std::move(Message)) {}

  /// The argument at fault.
  const std::string &getArg() const { return Arg; }
  const std::string &getMessage() const { return Message; }

  void log(llvm::raw_ostream &OS) const override { OS << Message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string Arg, Message;
};

/// Creates the built-in function \p Name from \p Args. Errors name the
/// function and the bad argument (no location; the caller adds one); an
/// error about an argument that was given is a DeviceFunctionArgError.
llvm::Expected<std::unique_ptr<DeviceFunction>>
createDeviceFunction(llvm::StringRef Name, const AttrDict &Args);

/// The names of the built-in device functions.
llvm::ArrayRef<llvm::StringRef> deviceFunctionNames();

} // namespace mdplan

#endif // MDPLAN_DEPLOY_DEVICEFUNCTIONS_H
