// SPDX-License-Identifier: Apache-2.0
// The hold queue of credit flow control (docs/credit.md "Hold
// queue"): frames of credit flows that the XDP gate could not forward (no
// credit, earlier frames waiting, no next hop) arrive on an AF_XDP socket of
// their ingress rx queue, wait here per flow in arrival order, and leave out
// of the flow's current next-hop port as credit returns. Nothing is dropped
// silently: every frame that cannot be kept is counted by reason.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/xsk.h"
#include "datapath/credit_table.h"

namespace inc::dp {

// RX-only copy-mode AF_XDP socket on one rx queue of a port: the hold
// queue's intake. Received chunks go back to the fill ring at once (the
// frame is copied out), so the UMEM only has to absorb one burst.
class XskIntake {
 public:
  struct Stats {
    uint64_t received = 0;
    uint64_t rx_dropped = 0;    // kernel: frame dropped (e.g. too large)
    uint64_t rx_ring_full = 0;  // kernel: RX ring full
    uint64_t fill_empty = 0;    // kernel: no free chunk in the fill ring
  };
  // `chunks` UMEM chunks of 2 KiB; the RX ring holds half of them.
  static Expected<std::unique_ptr<XskIntake>> Open(const std::string& port, uint32_t queue, uint32_t chunks);
  ~XskIntake();
  XskIntake(const XskIntake&) = delete;
  XskIntake& operator=(const XskIntake&) = delete;

  int fd() const { return xsk_.fd(); }
  uint32_t ifindex() const { return ifindex_; }
  uint32_t queue() const { return queue_; }
  const std::string& port() const { return port_; }
  // Hands every waiting frame (at most `max`) to `fn`; returns how many.
  size_t Receive(const std::function<void(const uint8_t*, size_t)>& fn, size_t max);
  Stats stats() const;

 private:
  XskIntake() = default;
  Status Init(uint32_t chunks);

  std::string port_;
  uint32_t ifindex_ = 0, queue_ = 0;
  xsk::Socket xsk_;
  uint64_t received_ = 0;
};

struct HoldQueueStats {
  uint64_t received = 0;  // frames taken from the intake sockets
  uint64_t sent = 0;      // frames sent on after credit came
  uint64_t sent_bytes = 0;
  uint64_t dropped_no_flow = 0;    // flow unknown or removed while its frames waited
  uint64_t dropped_overflow = 0;   // the hold queue's byte limit was reached
  uint64_t dropped_malformed = 0;  // not a RoCEv2 frame of the gate's shape
  uint64_t send_errors = 0;        // the egress port refused the frame
  uint64_t reconciled = 0;         // 'queued' frames the kernel dropped before the intake saw them
  uint64_t kernel_drops = 0;       // intake sockets: rx_dropped + rx_ring_full + fill_empty
};

struct HeldFlow {
  uint64_t frames = 0, bytes = 0;
};

class HoldQueue {
 public:
  // Binds an intake socket on every rx queue of every port in `ports` behind
  // the gate (CreditTable::BindXsk). `limit_bytes` bounds what all flows may
  // hold together.
  static Expected<std::unique_ptr<HoldQueue>> Open(CreditTable* table, const std::vector<std::string>& ports,
                                                   uint64_t limit_bytes, uint32_t chunks_per_queue = 4096);
  ~HoldQueue();  // unbinds the sockets
  HoldQueue(const HoldQueue&) = delete;
  HoldQueue& operator=(const HoldQueue&) = delete;

  std::vector<int> fds() const;
  // Takes what the gate diverted into the per-flow queues; returns frames.
  size_t Intake();
  // Sends the waiting frames of every flow, oldest first, while its credit
  // covers them, rewritten for its current next hop; returns frames sent.
  // `now_ns` drives the reconciliation of 'queued' with kernel drops.
  size_t Drain(uint64_t now_ns);
  // Drops the frames of a flow that ended (counted dropped_no_flow).
  void Forget(const CreditFlowKey& key);

  // Bytes of a flow that came in on `ifindex` and this queue sent on: with
  // CreditTable::IngressBytes, the credit this switch freed for the upstream.
  uint64_t SentBytes(uint32_t index, uint32_t ifindex) const;
  // Resets SentBytes of a counter index the table freed (it may be reused).
  void ForgetIndex(uint32_t index);
  std::map<CreditFlowKey, HeldFlow> Held() const;
  HoldQueueStats stats() const;

 private:
  struct Frame {
    std::vector<uint8_t> bytes;
    uint32_t ingress = 0;
  };
  struct FlowQueue {
    std::deque<Frame> frames;
    uint64_t bytes = 0;
  };
  struct Stale {  // 'queued' above what is held here, since when
    uint64_t excess = 0;
    uint64_t held = 0;  // the gate's 'held' counter then
    uint64_t since_ns = 0;
  };
  explicit HoldQueue(CreditTable* table, uint64_t limit) : table_(table), limit_bytes_(limit) {}
  void Take(const uint8_t* data, size_t len, uint32_t ingress);
  Status Send(const CreditFlowState& s, Frame& f);
  void Reconcile(uint64_t now_ns);

  CreditTable* table_;
  uint64_t limit_bytes_;
  uint64_t held_bytes_ = 0;
  int packet_fd_ = -1;  // AF_PACKET: sends whole frames out of a port
  std::vector<std::unique_ptr<XskIntake>> intakes_;
  std::map<CreditFlowKey, FlowQueue> flows_;
  std::map<CreditFlowKey, Stale> stale_;
  uint64_t last_reconcile_ns_ = 0;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> sent_bytes_;  // (index, ingress)
  HoldQueueStats stats_;
};

}  // namespace inc::dp
