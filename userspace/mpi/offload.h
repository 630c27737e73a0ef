// SPDX-License-Identifier: Apache-2.0
// The offloaded half of each collective on MPI buffers, shared by both MPI
// front ends (libincmpi and coll/incin): MPI's datatypes, MPI_IN_PLACE and
// communicator ranks on one side, libinc's flat element arrays in world
// rank order on the other. Each runs after the decision table chose to
// offload (decision.h) and returns libinc's status; falling back, locking
// and accounting stay with the caller.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "client/communicator.h"
#include "common/status.h"
#include "mpi/decision.h"
#include "mpi/mpi_types.h"

namespace inc::mpi {

// A communicator's ranks in MPI_COMM_WORLD's INC group: `to_world` maps
// comm rank to world rank when the communicator has the world's group in
// another order; null when the ranks are the world's.
using RankMap = const std::vector<int>*;

uint32_t WorldRank(RankMap to_world, int rank);

// A collective the tree does not offer: libinc checks the tree's offer
// before sending anything (FAILED_PRECONDITION "tree N does not
// offer/compute ..."), identically on every rank, so every rank may still
// fall back to MPI.
bool IsSwitchUnsupported(const Status& s);

// What each call asks of the decision table, from its MPI arguments: both
// front ends must judge the same arguments alike, since every rank has to
// take the same path. `comm_reason`: the communicator's state; `me`,
// `size`: this rank and the communicator's size.
Request AllreduceRequest(Reason comm_reason, const void* recvbuf, int count, const TypeInfo& t, MPI_Op op);
Request ReduceRequest(Reason comm_reason, const void* sendbuf, const void* recvbuf, int count,
                      const TypeInfo& t, MPI_Op op, int root, int me, int size);
Request BcastRequest(Reason comm_reason, int count, const TypeInfo& t, int root, int size);
Request ReduceScatterBlockRequest(Reason comm_reason, const void* recvbuf, int recvcount, const TypeInfo& t,
                                  MPI_Op op, int size);
// Request::bytes is the block each rank contributes.
Request AllgatherRequest(Reason comm_reason, const void* sendbuf, int sendcount, const TypeInfo& st,
                         const void* recvbuf, int recvcount, const TypeInfo& rt);

// `bytes`: the call's data bytes (Request::bytes).
Status OffloadAllreduce(client::Communicator& inc, const Decision& d, const void* sendbuf, void* recvbuf,
                        int count, MPI_Datatype dt, const TypeInfo& t, uint64_t bytes);

// `root`: the root's world rank.
Status OffloadReduce(client::Communicator& inc, const Decision& d, const void* sendbuf, void* recvbuf,
                     int count, MPI_Datatype dt, const TypeInfo& t, uint64_t bytes, bool is_root,
                     uint32_t root);

Status OffloadBcast(client::Communicator& inc, void* buffer, int count, MPI_Datatype dt, const TypeInfo& t,
                    uint64_t bytes, bool is_root, uint32_t root);

// `size`: the communicator's; `bytes`: all its blocks.
Status OffloadReduceScatterBlock(client::Communicator& inc, const Decision& d, const void* sendbuf,
                                 void* recvbuf, int recvcount, MPI_Datatype dt, const TypeInfo& t,
                                 uint64_t bytes, int size, RankMap to_world);

// `me`, `size`: this rank and the size of the communicator; `world_rank`:
// this rank in MPI_COMM_WORLD; `block`: bytes from each rank.
Status OffloadAllgather(client::Communicator& inc, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                        const TypeInfo& st, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                        const TypeInfo& rt, uint64_t block, int me, int size, uint32_t world_rank,
                        RankMap to_world);

}  // namespace inc::mpi
