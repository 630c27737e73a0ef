// SPDX-License-Identifier: Apache-2.0
// Several ranks per host (docs/architecture.md "Several ranks per host"):
// the ranks of one host share a job-scoped POSIX shared-memory segment
// (/dev/shm/incin-<job>-<node>), reduce among themselves there, and one
// leader per host (local rank 0) is the tree member that contributes the
// host's partial; the result comes back through the segment.
//
// Ranks are laid out in blocks: global rank r runs on node r / L as local
// rank r % L (L = ranks per host, the same on every host).
//
// Numbers stay exact and order-free: every local rank turns its elements
// into the wire lanes the one-rank-per-host path would send (block fixed
// point with the exponent agreed over ALL ranks and headroom for the total
// number of ranks, ordered integers for float MIN/MAX, gathered bytes for
// small float sums), the leader combines the lanes with the switch's integer
// arithmetic and sends that. A float SUM therefore gives the same bits for
// any number of ranks per host as with one rank per host.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/communicator.h"
#include "common/status.h"

namespace inc::client {

struct HostStageOptions {
  std::string name;  // shm_open name, "/incin-<job>-<node>"
  uint32_t local_rank = 0;
  uint32_t local_size = 1;
  size_t slot_bytes = 4u << 20;  // per local rank (and for the result)
  uint32_t attach_timeout_ms = 120000;
  // How long a local barrier may wait (the leader may be retrying a
  // message to the switch meanwhile); 0 = forever.
  uint32_t barrier_timeout_ms = 0;
  // Called while a local barrier waits (CommunicatorOptions::on_wait): an
  // MPI rank must keep its MPI progressing while it waits on its leader.
  std::function<void()> on_wait;
};

// The segment name for a job and node: characters other than [A-Za-z0-9._-]
// in the job id become '_'.
std::string HostStageName(const std::string& job_id, uint32_t node);

// What the leader tells the other local ranks after JoinGroup.
struct HostInfo {
  uint32_t elems4 = 0;      // elems_per_packet of the tree
  bool gather_sum = false;  // small float sums take the gather path
  uint32_t tree_id = 0;     // for status and logs of the other local ranks
};

class HostStage {
 public:
  // Local rank 0 creates the segment (replacing a stale one), the others
  // attach to it; Open returns when this rank is attached. The leader's
  // WaitAttached then waits for everyone and removes the name.
  static Expected<std::unique_ptr<HostStage>> Open(const HostStageOptions& o);
  ~HostStage();
  HostStage(const HostStage&) = delete;
  HostStage& operator=(const HostStage&) = delete;

  Status WaitAttached();
  // Leader: the outcome of JoinGroup (and the tree's parameters) for the
  // others; the others wait for it.
  void PublishJoin(const Status& st, const HostInfo& info);
  Expected<HostInfo> WaitJoin();

  uint32_t local_rank() const { return o_.local_rank; }
  uint32_t local_size() const { return o_.local_size; }
  bool leader() const { return o_.local_rank == 0; }
  size_t slot_bytes() const { return o_.slot_bytes; }
  uint8_t* slot(uint32_t local_rank) const;
  uint8_t* result() const;

  // All local ranks arrive before any leaves. Fails (for every later call
  // too) after Abort, when the leader process is gone, or on timeout.
  Status Barrier();
  // Leader, before the barrier that ends a step: the step's outcome.
  void Publish(const Status& st);
  Status Published() const;
  void Abort(const std::string& why);

  struct Header;

 private:
  HostStage(const HostStageOptions& o, int fd, void* base, size_t bytes);
  Status CheckAlive() const;
  HostStageOptions o_;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  Header* h_ = nullptr;
  bool unlinked_ = false;
};

// A float SUM's block fixed-point data pass (float_sum.h): only these
// blocks of the lanes travel (block k = lanes [k*per, k*per + per) for the
// wire type's per), each contribution with the certificate code aux; which
// results came back uncertified goes to *uncertified (per listed block).
struct HostNetSum {
  const uint32_t* blocks = nullptr;  // null: an ordinary reduction of every lane
  uint64_t num_blocks = 0;
  uint16_t aux = 0;
  std::vector<uint8_t>* uncertified = nullptr;
};

// The tree member's side of a host's collectives (the leader only).
class HostNet {
 public:
  virtual ~HostNet() = default;
  // A reduction of count wire lanes in place (ALLREDUCE, or REDUCE to the
  // host root_node; recv false: this host gets no data).
  virtual Status Reduce(uint8_t collective, uint8_t wire_dtype, uint8_t op, void* lanes, uint64_t count,
                        uint32_t root_node, bool recv, const HostNetSum& sum) = 0;
  // bytes from host root_node (send valid there) into recv on every host.
  virtual Status Broadcast(const void* send, void* recv, size_t bytes, uint32_t root_node) = 0;
  virtual Status Barrier() = 0;
};

// The hierarchical collectives of one local rank.
class HostCollectives {
 public:
  // net: the leader's tree member (null on the other local ranks).
  HostCollectives(HostStage* stage, HostNet* net, uint32_t rank, uint32_t world, const HostInfo& info);
  // collective INC_COLL_ALLREDUCE or INC_COLL_REDUCE (root = global rank;
  // want = this rank gets the result).
  Status Reduce(uint8_t collective, const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                uint32_t root, bool want);
  // bytes from global rank root (send valid there) into every rank's recv.
  Status Broadcast(const void* send, void* recv, size_t bytes, uint32_t root);
  Status Barrier();
  // Float-sum blocks this rank added from gathered values, and of those the
  // ones the switch did not certify (CommunicatorStatus counters).
  uint64_t gathered_blocks() const { return gathered_blocks_; }
  uint64_t uncertified_blocks() const { return uncertified_blocks_; }

 private:
  Status Step(const std::function<Status()>& leader_work);
  Status FloatSum(uint8_t collective, const void* send, void* recv, size_t count, DataType t,
                  uint32_t root_node, bool host_recv, bool want);
  Status GatherBlocks(uint8_t collective, const std::vector<uint32_t>& blocks, const void* send, void* recv,
                      uint64_t count, DataType t, uint32_t per, uint32_t root_node, bool host_recv,
                      bool want);
  HostStage* st_;
  HostNet* net_;
  uint32_t rank_, world_, local_size_, node_;
  HostInfo info_;
  uint64_t gathered_blocks_ = 0, uncertified_blocks_ = 0;
};

}  // namespace inc::client
