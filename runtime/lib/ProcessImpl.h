//===- ProcessImpl.h - Process groups: internals ----------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// What lib/Process.cpp and the MPI group (lib/mpi) share.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_PROCESSIMPL_H
#define MDRT_LIB_PROCESSIMPL_H

#include "mdrt/Process.h"

#ifndef MDRT_HAVE_MPI
#define MDRT_HAVE_MPI 0
#endif

namespace mdrt {

/// An error for the types allReduceSum does not add.
Status checkSummable(DType Type);
/// An error when processes [First, First + Count) are not all in a group
/// of \p Size (subgroup).
Status checkSubgroup(int First, int Count, int Size);
/// An error when process \p Rank of a group of \p Size cannot exchange
/// messages with \p Peer: itself, or not in the group.
Status checkPeer(int Peer, int Rank, int Size);

#if MDRT_HAVE_MPI
/// Initializes MPI (unless the program did) and returns MPI_COMM_WORLD's
/// group.
StatusOr<std::unique_ptr<ProcessGroup>> createMpiProcessGroup(int &Argc,
                                                              char **&Argv);
#endif

} // namespace mdrt

#endif // MDRT_LIB_PROCESSIMPL_H
