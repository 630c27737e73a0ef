// SPDX-License-Identifier: Apache-2.0
#include "mpi/offload.h"

#include <cstring>
#include <string>

namespace inc::mpi {
namespace {

// Broadcast of any byte count: libinc's types are at least two bytes wide,
// so an odd count goes through a padded copy.
Status BroadcastBytes(client::Communicator& inc, void* buf, uint64_t bytes, uint32_t root, bool is_root) {
  if (bytes % 2 == 0) return inc.Broadcast(buf, bytes / 2, client::DataType::kFloat16, root);
  std::vector<uint8_t> tmp(bytes + 1, 0);
  if (is_root) std::memcpy(tmp.data(), buf, bytes);
  INC_RETURN_IF_ERROR(inc.Broadcast(tmp.data(), tmp.size() / 2, client::DataType::kFloat16, root));
  std::memcpy(buf, tmp.data(), bytes);
  return Status::Ok();
}

// MPI_Allgather of equal blocks of `block` bytes from `send` into `out`,
// block w from world rank w.
Status AllGatherBytes(client::Communicator& inc, uint32_t rank, const void* send, uint8_t* out,
                      uint64_t block) {
  if (block % 2 == 0) return inc.AllGather(send, out, block / 2, client::DataType::kFloat16);
  const uint32_t n = inc.world_size();
  for (uint32_t w = 0; w < n; w++) {
    uint8_t* dst = out + w * block;
    if (w == rank) std::memcpy(dst, send, block);
    INC_RETURN_IF_ERROR(BroadcastBytes(inc, dst, block, w, w == rank));
  }
  return Status::Ok();
}

}  // namespace

uint32_t WorldRank(RankMap to_world, int rank) {
  return to_world ? static_cast<uint32_t>((*to_world)[static_cast<size_t>(rank)])
                  : static_cast<uint32_t>(rank);
}

bool IsSwitchUnsupported(const Status& s) {
  return s.code() == Code::kFailedPrecondition && s.message().find(" does not ") != std::string::npos;
}

namespace {

Request MakeRequest(Call call, Reason comm_reason) {
  Request q;
  q.call = call;
  q.comm_reason = comm_reason;
  return q;
}

uint64_t Bytes(int count, const TypeInfo& t) {
  return count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
}

// A buffer a correct program may pass with `t`: MPI_BOTTOM (null) only
// with absolute addresses. Never the buffer's value alone: a rank that
// passes MPI_BOTTOM with a struct of addresses and one that passes an
// array with MPI_INT make the same call, and must decide alike.
bool Addressable(const void* buf, const TypeInfo& t) {
  return buf != nullptr || t.bottom_ok;
}

}  // namespace

Request AllreduceRequest(Reason comm_reason, const void* recvbuf, int count, const TypeInfo& t, MPI_Op op) {
  Request q = MakeRequest(Call::kAllreduce, comm_reason);
  q.valid = t.valid && count >= 0 && (count == 0 || Addressable(recvbuf, t));
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = Bytes(count, t);
  return q;
}

Request ReduceRequest(Reason comm_reason, const void* sendbuf, const void* recvbuf, int count,
                      const TypeInfo& t, MPI_Op op, int root, int me, int size) {
  Request q = MakeRequest(Call::kReduce, comm_reason);
  const bool is_root = me == root;
  q.valid = t.valid && count >= 0 && root >= 0 && root < size &&
            (count == 0 || ((!is_root || Addressable(recvbuf, t)) && Addressable(sendbuf, t))) &&
            (is_root || sendbuf != MPI_IN_PLACE);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = Bytes(count, t);
  return q;
}

Request BcastRequest(Reason comm_reason, int count, const TypeInfo& t, int root, int size) {
  Request q = MakeRequest(Call::kBcast, comm_reason);
  q.valid = t.valid && count >= 0 && root >= 0 && root < size;
  q.elem = Elem::kBytes;
  q.bytes = Bytes(count, t);
  return q;
}

Request ReduceScatterBlockRequest(Reason comm_reason, const void* recvbuf, int recvcount, const TypeInfo& t,
                                  MPI_Op op, int size) {
  Request q = MakeRequest(Call::kReduceScatterBlock, comm_reason);
  q.valid = t.valid && recvcount >= 0 && (recvcount == 0 || Addressable(recvbuf, t));
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = Bytes(recvcount, t) * static_cast<uint64_t>(size);
  return q;
}

Request AllgatherRequest(Reason comm_reason, const void* sendbuf, int sendcount, const TypeInfo& st,
                         const void* recvbuf, int recvcount, const TypeInfo& rt) {
  Request q = MakeRequest(Call::kAllgather, comm_reason);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const uint64_t block = Bytes(recvcount, rt);
  const uint64_t sblock = in_place ? block : Bytes(sendcount, st);
  q.valid = rt.valid && st.valid && recvcount >= 0 && (in_place || sendcount >= 0) && block == sblock &&
            (block == 0 || (Addressable(recvbuf, rt) && (in_place || Addressable(sendbuf, st))));
  q.elem = Elem::kBytes;
  q.bytes = block;
  return q;
}

Status OffloadAllreduce(client::Communicator& inc, const Decision& d, const void* sendbuf, void* recvbuf,
                        int count, MPI_Datatype dt, const TypeInfo& t, uint64_t bytes) {
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  if (t.contiguous) return inc.AllReduce(send, recvbuf, Elements(t, bytes), d.dtype, d.op);
  Staged in;
  INC_RETURN_IF_ERROR(in.Load(send, count, dt, t));
  INC_RETURN_IF_ERROR(inc.AllReduce(in.copy(), in.copy(), Elements(t, bytes), d.dtype, d.op));
  return Unpack(in.copy(), recvbuf, count, dt, t);
}

Status OffloadReduce(client::Communicator& inc, const Decision& d, const void* sendbuf, void* recvbuf,
                     int count, MPI_Datatype dt, const TypeInfo& t, uint64_t bytes, bool is_root,
                     uint32_t root) {
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const uint64_t n = Elements(t, bytes);
  if (t.contiguous) return inc.Reduce(send, is_root ? recvbuf : nullptr, n, d.dtype, d.op, root);
  Staged in;
  INC_RETURN_IF_ERROR(in.Load(send, count, dt, t));
  INC_RETURN_IF_ERROR(inc.Reduce(in.copy(), is_root ? in.copy() : nullptr, n, d.dtype, d.op, root));
  return is_root ? Unpack(in.copy(), recvbuf, count, dt, t) : Status::Ok();
}

Status OffloadBcast(client::Communicator& inc, void* buffer, int count, MPI_Datatype dt, const TypeInfo& t,
                    uint64_t bytes, bool is_root, uint32_t root) {
  if (t.contiguous) return BroadcastBytes(inc, buffer, bytes, root, is_root);
  std::vector<uint8_t> run(bytes);
  if (is_root) INC_RETURN_IF_ERROR(Pack(buffer, count, dt, t, run.data()));
  INC_RETURN_IF_ERROR(BroadcastBytes(inc, run.data(), bytes, root, is_root));
  return is_root ? Status::Ok() : Unpack(run.data(), buffer, count, dt, t);
}

Status OffloadReduceScatterBlock(client::Communicator& inc, const Decision& d, const void* sendbuf,
                                 void* recvbuf, int recvcount, MPI_Datatype dt, const TypeInfo& t,
                                 uint64_t bytes, int size, RankMap to_world) {
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const uint64_t blk = bytes / static_cast<uint64_t>(size);
  const uint64_t n = Elements(t, blk);
  // libinc reads blocks in world rank order and writes block `rank` while
  // reading: the input must be a copy when it is in recvbuf or its blocks
  // are in another order.
  Staged in;
  INC_RETURN_IF_ERROR(in.Load(src, static_cast<int64_t>(recvcount) * size, dt, t));
  std::vector<uint8_t> copy;
  const uint8_t* input = in.data();
  if (to_world) {
    // comm block c goes where its owner's world rank is.
    copy.resize(bytes);
    for (int c = 0; c < size; c++)
      std::memcpy(copy.data() + static_cast<uint64_t>(WorldRank(to_world, c)) * blk,
                  input + static_cast<uint64_t>(c) * blk, blk);
    input = copy.data();
  } else if (t.contiguous && sendbuf == MPI_IN_PLACE) {
    copy.assign(input, input + bytes);
    input = copy.data();
  }
  if (t.contiguous) return inc.ReduceScatter(input, recvbuf, n, d.dtype, d.op);
  std::vector<uint8_t> out(blk);
  INC_RETURN_IF_ERROR(inc.ReduceScatter(input, out.data(), n, d.dtype, d.op));
  return Unpack(out.data(), recvbuf, recvcount, dt, t);
}

Status OffloadAllgather(client::Communicator& inc, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                        const TypeInfo& st, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                        const TypeInfo& rt, uint64_t block, int me, int size, uint32_t world_rank,
                        RankMap to_world) {
  auto* recv = static_cast<uint8_t*>(recvbuf);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  // In place, this rank's block is already in recvbuf; it is read before
  // anything is written there.
  Staged send;
  std::vector<uint8_t> own;
  if (!in_place) {
    INC_RETURN_IF_ERROR(send.Load(sendbuf, sendcount, sendtype, st));
  } else if (rt.contiguous) {
    own.assign(recv + static_cast<uint64_t>(me) * block, recv + static_cast<uint64_t>(me + 1) * block);
  } else {
    own.resize(block);
    INC_RETURN_IF_ERROR(
        Pack(recv + static_cast<int64_t>(me) * recvcount * rt.extent, recvcount, recvtype, rt, own.data()));
  }
  const void* mine = in_place ? own.data() : send.data();
  // libinc's blocks are in world rank order: a permuted communicator
  // gathers into a copy and reorders; a non-contiguous receive type
  // gathers into a copy and unpacks.
  const bool permuted = to_world != nullptr;
  const uint64_t total = block * static_cast<uint64_t>(size);
  std::vector<uint8_t> gathered(permuted || !rt.contiguous ? total : 0);
  INC_RETURN_IF_ERROR(
      AllGatherBytes(inc, world_rank, mine, gathered.empty() ? recv : gathered.data(), block));
  std::vector<uint8_t> ordered(permuted && !rt.contiguous ? total : 0);
  const uint8_t* run = gathered.data();
  if (permuted) {
    uint8_t* to = rt.contiguous ? recv : ordered.data();
    for (int c = 0; c < size; c++)
      std::memcpy(to + static_cast<uint64_t>(c) * block,
                  gathered.data() + static_cast<uint64_t>(WorldRank(to_world, c)) * block, block);
    run = to;
  }
  if (rt.contiguous) return Status::Ok();
  return Unpack(run, recvbuf, static_cast<int64_t>(recvcount) * size, recvtype, rt);
}

}  // namespace inc::mpi
