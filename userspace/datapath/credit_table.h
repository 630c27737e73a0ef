// SPDX-License-Identifier: Apache-2.0
// Credit flow control state of the XDP data path (bpf/credit.h) as
// incswitchd programs it: credit flows with their next hop, the credit the
// next hop granted, the gate's counters, and the hold-queue sockets. The
// counters live in an mmaped array shared with XDP; each field has one kind
// of writer (docs/credit.md "Data path"), so granting never clobbers what
// XDP consumed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/abi/credit.h"
#include "common/net.h"
#include "common/status.h"

namespace inc::dp {

class Datapath;

// A RoCEv2 flow: IPv4 source and destination, UDP source port, BTH DestQP.
struct CreditFlowKey {
  Ipv4 src;
  Ipv4 dst;
  uint16_t sport = 0;     // host order
  uint32_t dest_qpn = 0;  // 24 bits
  std::string ToString() const;
  bool operator<(const CreditFlowKey& o) const;
  bool operator==(const CreditFlowKey& o) const;
};

// Where the flow's frames go. An empty port means no usable next hop: frames
// wait in the hold queue (failover in progress).
// A receiver gateway's flow is count_only: its frames leave the credit
// domain here, so the gate only counts them per ingress port (the credit
// returned upstream) and lets the kernel route them.
struct CreditHop {
  std::string port;  // egress interface of this switch
  Mac mac;           // the next hop's MAC
  bool count_only = false;
};

struct CreditCounters {
  uint64_t granted = 0;   // bytes ever granted by the next hop
  uint64_t consumed = 0;  // bytes ever sent
  int64_t available = 0;  // granted - consumed (mod 2^64, as signed)
  uint64_t queued = 0;    // frames waiting in the hold queue now
  uint64_t held = 0;      // frames ever diverted to the hold queue
};

struct CreditFlowState {
  CreditFlowKey key;
  uint32_t index = 0;
  uint32_t ifindex = 0;  // 0: no next hop
  Mac dmac, smac;
  bool count_only = false;
  CreditCounters counters;
};

const char* CreditStatName(int stat);  // enum inc_credit_stat -> "forwarded"

// Borrows the maps of a loaded Datapath (must not outlive it); owns the
// mapping of the counter array.
class CreditTable {
 public:
  static Expected<CreditTable> Open(const Datapath& dp);
  CreditTable(CreditTable&& o) noexcept;
  CreditTable& operator=(CreditTable&& o) noexcept;
  CreditTable(const CreditTable&) = delete;
  CreditTable& operator=(const CreditTable&) = delete;
  ~CreditTable();

  // Adds a flow with zero credit and returns its counter index.
  // AlreadyExists, ResourceExhausted (INC_CREDIT_MAX_FLOWS), NotFound port,
  // InvalidArgument (QPN over 24 bits).
  Expected<uint32_t> AddFlow(const CreditFlowKey& key, const CreditHop& hop);
  // Failover: replaces the next hop in one map update. NotFound.
  Status SetNextHop(const CreditFlowKey& key, const CreditHop& hop);
  // Also forgets the flow's ingress counters.
  Status RemoveFlow(const CreditFlowKey& key);  // NotFound
  Expected<CreditFlowState> Lookup(const CreditFlowKey& key) const;
  Expected<std::vector<CreditFlowState>> ListFlows() const;

  // Stores the total bytes the next hop has granted so far (RSVP credit is
  // cumulative); it may wrap past 2^64. AddCredit adds to it.
  Status SetGranted(const CreditFlowKey& key, uint64_t granted_total);
  Status AddCredit(const CreditFlowKey& key, uint64_t bytes);
  Expected<CreditCounters> Read(const CreditFlowKey& key) const;
  CreditCounters ReadIndex(uint32_t index) const;  // index < INC_CREDIT_MAX_FLOWS

  // The hold queue's side of the counters (for frames it sent itself).
  // TakeCredit reserves bytes as XDP does (false: not covered, nothing
  // taken); DecrementQueued after a held frame was sent or dropped.
  bool TakeCredit(uint32_t index, uint64_t bytes);
  // Returns credit taken for a frame that could not be sent after all.
  void GiveBackCredit(uint32_t index, uint64_t bytes);
  Status DecrementQueued(uint32_t index, uint64_t frames = 1);  // FailedPrecondition below 0

  // Counts the bytes of the flow that come in on `ifindex` and leave the
  // switch by XDP (forwarded or delivered; what the hold queue sends is the
  // agent's own count). Idempotent. IngressBytes: NotFound when the pair is
  // not watched.
  Status WatchIngress(uint32_t index, uint32_t ifindex);
  Expected<uint64_t> IngressBytes(uint32_t index, uint32_t ifindex) const;

  // Puts an AF_XDP socket bound to (port, queue) behind that rx queue's
  // hold queue. ResourceExhausted past INC_CREDIT_MAX_XSKS.
  Status BindXsk(const std::string& port, uint32_t queue, int xsk_fd);
  Status UnbindXsk(const std::string& port, uint32_t queue);  // NotFound

  Expected<std::map<std::string, uint64_t>> ReadStats() const;  // summed over CPUs

 private:
  CreditTable(int flows, int counters, int ingress, int xsk_slots, int xsks, int stats,
              inc_credit_counters* mem);
  Expected<inc_credit_flow> BuildEntry(const CreditFlowKey& key, const CreditHop& hop) const;
  Expected<inc_credit_flow> Entry(const CreditFlowKey& key) const;
  void Release();

  int flows_fd_ = -1, counters_fd_ = -1, ingress_fd_ = -1, xsk_slots_fd_ = -1, xsks_fd_ = -1, stats_fd_ = -1;
  inc_credit_counters* mem_ = nullptr;  // INC_CREDIT_MAX_FLOWS entries, mmaped
  std::vector<bool> used_;              // counter indexes in use
};

}  // namespace inc::dp
