//===- ClusterProtocol.h - Workers and parameter servers: messages -*- C++
//-*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// What a worker and a parameter-server process of a ps-strategy run say to
// each other (lib/Executor.cpp is the worker's side, lib/ParameterServer.cpp
// the server's). The worker sends requests on tag 0 and the server answers
// each on tag 0 with a Reply; the devices' tensors and synchronisation
// signals travel on tags of their own, which also tell apart the workers on
// whose behalf two servers exchange messages. The requests of one worker
// are served one after the other, so a program's messages never mix with
// another program's.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_CLUSTERPROTOCOL_H
#define MDRT_LIB_CLUSTERPROTOCOL_H

#include "mdrt/Process.h"

#include <cstdint>
#include <string>

namespace mdrt {
namespace cluster {

/// The tag of requests and replies.
constexpr uint32_t RequestTag = 0;

enum class RequestKind : uint32_t {
  /// Run program Program for step Step; the reply comes when the server's
  /// part of it is done.
  Run = 1,
  /// Variable Index's value: the reply, then (when ok) a message of its
  /// bytes.
  ReadVariable = 2,
  /// A message of variable Index's bytes follows; the reply comes once it
  /// is written.
  WriteVariable = 3,
  /// The worker will send nothing more; no reply. Step holds how the
  /// worker's run ended: its exit status (0, 1 for an error, 128 + a signal
  /// for a stop).
  Disconnect = 4,
};

struct Request {
  uint32_t Kind = 0;
  uint32_t Program = 0;
  uint64_t Step = 0;
  uint64_t Index = 0;
};

/// The tag of transfer \p Index (Signal false) or of the signals to
/// waiting kernel \p Index (Signal true) of a program of worker \p Worker's
/// plan, out of \p Workers. The executor numbers a program's transfers
/// between processes, and its kernels that wait for signals, from 0.
inline uint64_t messageTag(bool Signal, uint64_t Index, int Worker,
                           int Workers) {
  return 1 + (Index * 2 + (Signal ? 1 : 0)) * uint64_t(Workers) +
         uint64_t(Worker);
}

/// Sends \p S to \p Dst as a reply. An ok reply carries \p Stop, the
/// signal the server was asked to stop by (0: none), for the workers to
/// stop the run as if they had got it.
inline Status sendReply(ProcessGroup &G, int Dst, const Status &S,
                        int Stop = 0) {
  uint64_t Header[2] = {S.isOk() ? 1u : 0u, S.isOk()
                                                ? uint64_t(uint32_t(Stop))
                                                : uint64_t(S.message().size())};
  MDRT_RETURN_IF_ERROR(G.send(Dst, RequestTag, Header, sizeof(Header)));
  if (S.isOk())
    return Status::ok();
  return G.send(Dst, RequestTag, S.message().data(), S.message().size());
}

/// Receives a reply from \p Src into \p Remote (and the server's stop
/// signal into \p Stop, when given); the error is that of the exchange
/// itself.
inline Status recvReply(ProcessGroup &G, int Src, Status &Remote,
                        int *Stop = nullptr) {
  uint64_t Header[2] = {0, 0};
  MDRT_RETURN_IF_ERROR(G.recv(Src, RequestTag, Header, sizeof(Header)));
  if (Header[0]) {
    Remote = Status::ok();
    if (Stop)
      *Stop = int(uint32_t(Header[1]));
    return Status::ok();
  }
  if (Header[1] > (uint64_t(1) << 20))
    return Status::error("a reply from process " + std::to_string(Src) +
                         " announces a message of " +
                         std::to_string(Header[1]) + " bytes");
  std::string Msg(size_t(Header[1]), '\0');
  MDRT_RETURN_IF_ERROR(G.recv(Src, RequestTag, Msg.data(), Msg.size()));
  Remote = Status::error(Msg);
  return Status::ok();
}

} // namespace cluster
} // namespace mdrt

#endif // MDRT_LIB_CLUSTERPROTOCOL_H
