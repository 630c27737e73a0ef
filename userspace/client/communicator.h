// SPDX-License-Identifier: Apache-2.0
// libinc: the collective-communication API of an incin worker. A
// Communicator joins its job's group at the aggregation manager (JoinGroup,
// blocking until every rank joined and the tree is programmed), then runs
// collectives in the switches over raw RoCEv2 frames (AF_XDP copy mode on
// the worker's interface). See docs/operations.md "libinc and inc-perf".
//
//   inc::client::CommunicatorOptions o;
//   o.am_address = "10.0.0.254:50051"; o.job_id = "job1";
//   o.rank = r; o.world_size = n; o.iface = "eth0";
//   auto comm = inc::client::Communicator::Create(o);
//   if (!comm.ok()) ... comm.status() ...
//   Status s = (*comm)->AllReduce(in, out, count, DataType::kFloat32, ReduceOp::kSum);
//
// Collectives are blocking and must be called in the same order on every
// rank (message ids advance in lockstep). One thread per Communicator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tls.h"
#include "inc_ops.h"

namespace inc::client {

enum class DataType { kInt32 = 1, kFloat32 = 2, kInt64 = 3, kFloat16 = 4, kBFloat16 = 5, kFloat64 = 6 };
// The wire's operators (bpf/include/inc_ops.h INC_OP_TABLE) with their wire
// values: kSum, kMin, kMax, and the bitwise kBand, kBor, kBxor (int32 and
// int64 only: InvalidArgument on other types).
enum class ReduceOp {
#define INC_REDUCE_OP_ENUM(name, camel, value, text, int_only) k##camel = value,
  INC_OP_TABLE(INC_REDUCE_OP_ENUM)
#undef INC_REDUCE_OP_ENUM
};

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);                       // the table's short name: "sum", "band", ...
bool ReduceOpIntegerOnly(ReduceOp op);                       // the bitwise ops
bool ParseDataType(const std::string& text, DataType* out);  // int32 float32 int64 float16 bfloat16 float64
bool ParseReduceOp(const std::string& text, ReduceOp* out);  // sum min max band bor bxor

// What CommunicatorOptions.transport resolves to on this host: "xdp",
// "afxdp" or "verbs". "auto" picks verbs when an RDMA device has a RoCEv2 GID
// for the interface's IPv4 address, else xdp (the reason is written to *why
// when given); a Communicator falls back from xdp to afxdp when the kernel
// cannot run it.
Expected<std::string> ResolveTransport(const std::string& requested, const std::string& iface,
                                       std::string* why = nullptr);

struct CommunicatorOptions {
  std::string am_address;  // host:port of incamd
  // mTLS to the AM with this host's member certificate (OU=member, CN = the
  // host's topology name). Unset: from the environment, INCIN_TLS_CERT,
  // INCIN_TLS_KEY and INCIN_TLS_CA, or INCIN_INSECURE=1 for plaintext; neither is
  // an error.
  std::optional<TransportSecurity> security;
  std::string job_id;
  // The job's credential from its launcher (`incinctl job credential JOB`),
  // which an AM with mTLS requires at JoinGroup. Unset: INCIN_JOB_CREDENTIAL
  // from the environment, if any. One for another job is an error here,
  // before the AM is asked.
  std::optional<std::string> job_credential;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::string iface;  // the worker's interface toward its switch
  // "xdp" (raw RoCEv2 frames sent as XDP live frames and received into a
  // BPF ring buffer: no skb per frame; client/xdp_io.h), "afxdp" (raw frames
  // through an AF_XDP socket in copy mode), "verbs" (an rdma-core UC QP on
  // the RDMA device with a RoCEv2 GID for iface's address; see docs/rdma.md)
  // or "auto" (verbs when such a device exists, else xdp, else afxdp).
  std::string transport = "auto";
  std::string rdma_device;                    // verbs: force this device (default: found by GID)
  int gid_index = -1;                         // verbs: force this GID index
  uint32_t qpn = 0;                           // this member's QPN; 0 = derived from the pid
  uint32_t join_timeout_ms = 120000;          // how long JoinGroup may wait for the group
  uint32_t rpc_timeout_ms = 5000;             // other AM RPCs
  uint32_t message_timeout_us = 20000;        // first retransmission timeout of a message
  uint32_t max_message_timeout_us = 1000000;  // the timeout doubles per retry up to this
  // How long one collective waits without any result (for the slowest
  // rank: a process group's timeout). When it expires the collective fails
  // with DEADLINE_EXCEEDED and the AM fails the tree, so every other rank's
  // collectives fail too (from its next heartbeat) instead of going on alone.
  uint32_t op_timeout_ms = 300000;
  uint32_t max_retries = 0;       // also fail after this many timeouts of one message; 0: only op_timeout_ms
  uint32_t pool_size = 0;         // requested from the AM; 0 = AM default
  uint32_t elems_per_packet = 0;  // requested; 0 = AM default from the path MTU
  int poll_ms = 1;
  // Called on the calling thread while a collective waits for results with
  // nothing else to do (about once per poll_ms). A library that runs these
  // collectives inside another runtime's calls drives that runtime's
  // progress here: libincmpi lets MPI send what other ranks still wait for.
  std::function<void()> on_wait;
  bool xdp_generic = false;  // attach the redirect program in SKB mode
  bool qpn_filter = true;    // redirect only frames for our QPN to the socket
  bool heartbeats = true;
  // How Broadcast (and AllGather/Scatter/AllToAll, built on it) runs:
  // "allreduce" = an INT32 SUM AllReduce in which non-roots contribute zeros
  // (exact; every frame full size) or "native" = the switch's Broadcast
  // (non-roots send empty "ready"s). See docs/operations.md for why the
  // default is "allreduce".
  std::string broadcast_mode = "allreduce";
  // How Reduce (and ReduceScatter/Gather, built on it) runs: "allreduce" =
  // the switch's AllReduce, non-roots ignore the result, or "native" = the
  // switch's Reduce (non-roots get empty completion notices; the default:
  // half the result traffic). Native needs a switch whose data path answers a
  // retransmission before it compares counts (bpf/aggregate.h).
  std::string reduce_mode = "native";
  // How a float SUM (AllReduce, Reduce, ReduceScatter) runs when world x
  // count elements fit one packet: "gather" = one INT32 SUM gathers every
  // rank's values and each rank adds them in rank order (one round trip;
  // client/gather_sum.h) or "fixed" = block fixed point as for larger counts
  // (exponent pre-pass + data: two round trips). docs/operations.md "Numbers".
  std::string small_sum = "gather";
  // The lanes of a float32 SUM's block fixed point (client/float_sum.h
  // LaneChoice): "auto" = 32-bit lanes until a count's blocks come back
  // uncertified, then 64-bit ones; "32"; "64". "" = from INCIN_FLOAT32_LANES
  // (default auto). docs/operations.md "Numbers".
  std::string float32_lanes;
  // Before LeaveGroup (which dismantles the tree), keep the tree alive this
  // long after the last collective, so that a rank whose last result was
  // lost can still get it by retransmission from the switch.
  uint32_t leave_linger_ms = 1000;
  // Several ranks per host (docs/architecture.md "Several ranks per host"):
  // local_size ranks of this host share a shared-memory segment, local rank
  // 0 is the host's tree member. Ranks go in blocks: rank = node *
  // local_size + local_rank. 0 = from INCIN_LOCAL_SIZE (and INCIN_LOCAL_RANK,
  // which must equal rank % local_size) in the environment, else 1 (one
  // rank per host: no shared memory).
  uint32_t local_size = 0;
  std::optional<uint32_t> local_rank;
  size_t local_slot_bytes = 4u << 20;  // shared memory per local rank
};

// What the AM assigned (mirrors inc.v1.MemberAssignment), also accepted
// directly for AM-less setups and tests.
struct Assignment {
  uint32_t tree_id = 0;
  uint32_t key = 0;
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  uint32_t rank_at_switch = 0;
  uint32_t member_index = 0;
  std::string switch_name;
  std::string switch_ip;
  std::string switch_mac;
  uint32_t switch_qpn = 0;
  uint32_t heartbeat_interval_ms = 0;
  std::vector<uint32_t> member_index_of_rank;  // empty = identity
  uint32_t world_size = 0;
  // What the tree's switches compute (wire values of inc_dtype, inc_op,
  // inc_collective); empty = everything.
  std::vector<uint32_t> dtypes, ops, collectives;
};

// Parses an inc.v1.MemberAssignment in protobuf JSON (as incinctl prints
// it) for AM-less runs.
Expected<Assignment> AssignmentFromJson(const std::string& json);

struct CommunicatorStatus {
  Assignment assignment;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string iface;
  std::string member_ip;
  std::string member_mac;
  uint32_t member_qpn = 0;
  std::string transport;  // "xdp", "afxdp" or "verbs" (what "auto" chose)
  std::string rdma_device;
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  uint64_t messages = 0, retransmissions = 0, overflow_results = 0, saturated_blocks = 0;
  // Float sums: blocks added from gathered values (inf/NaN, no certificate,
  // small sums) and, of those, blocks the switch could not certify.
  uint64_t gathered_blocks = 0, uncertified_blocks = 0;
  // Float sums that ran on guessed exponents (no pre-pass) and found a block
  // that did not fit them (redone with a pre-pass).
  uint64_t exponent_guess_misses = 0;
  uint64_t operations = 0, failed_operations = 0, heartbeats_failed = 0;
  double srtt_us = 0, rto_us = 0;  // result latency estimate and current retransmission timeout
  uint64_t tx_kicks = 0, tx_busy = 0, cq_bogus = 0, rx_dropped = 0, rx_ring_full = 0, rx_fill_empty = 0;
  std::map<std::string, uint64_t> rejects;  // by reason, non-zero only
  std::string tree_state;                   // last heartbeat answer
  std::string ToJson() const;
};

class Communicator {
 public:
  // Joins through the AM (blocking until the group forms).
  static Expected<std::unique_ptr<Communicator>> Create(const CommunicatorOptions& options);
  // Uses a given assignment; no AM (heartbeats and ReportError are skipped
  // when options.am_address is empty).
  static Expected<std::unique_ptr<Communicator>> CreateWithAssignment(const CommunicatorOptions& options,
                                                                      const Assignment& assignment);
  ~Communicator();  // LeaveGroup, stop heartbeats, detach XDP
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // recv may equal send (in place). count = elements.
  Status AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // Only the root's recv is written (others may pass nullptr).
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, uint32_t root);
  Status Broadcast(void* buf, size_t count, DataType type, uint32_t root);
  Status Barrier();
  // recv holds world_size blocks of count elements; block r comes from rank r.
  Status AllGather(const void* send, void* recv, size_t count, DataType type);
  // send holds world_size blocks of count; recv gets the reduction of block `rank`.
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // send block j goes to rank j; recv block i came from rank i (count per block).
  Status AllToAll(const void* send, void* recv, size_t count, DataType type);
  // root's send holds world_size blocks; every rank's recv gets its block.
  Status Scatter(const void* send, void* recv, size_t count, DataType type, uint32_t root);
  // every rank's send block lands at block `rank` of root's recv.
  Status Gather(const void* send, void* recv, size_t count, DataType type, uint32_t root);

  // Makes the running (and every later) collective fail with ABORTED; safe
  // to call from another thread (e.g. a signal-handling thread).
  void Abort(const std::string& why);

  uint32_t rank() const;
  uint32_t world_size() const;
  CommunicatorStatus GetStatus() const;

  class Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  static Status JoinAm(Impl* impl, const std::string& credential, const std::vector<uint32_t>& host_ranks,
                       uint32_t total_ranks);
  static Expected<std::unique_ptr<Communicator>> CreateLocal(const CommunicatorOptions& options,
                                                             const std::string& credential,
                                                             uint32_t local_size,
                                                             std::optional<uint32_t> local_rank);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inc::client
