// SPDX-License-Identifier: Apache-2.0
// The message engine: runs one collective operation as a sequence of
// messages (one packet each) over a PacketIo, keeping at most pool_size
// messages in flight (the slot pool is the credit window), retransmitting
// lost messages (flag RETRANSMIT) and failing after max_retries timeouts of
// one message. Results are validated (protocol.h) and handed to the
// operation, which places them in the user's buffer.
//
// Loss detection works like TCP's (RFC 6298 5.3 and fast retransmit), not
// with one timer per message: a switch completes a tree's messages in the
// order members send them, so
// - a message still unfinished while the result of a message sent
//   kReorderWindow later arrived is lost (a contribution or its result):
//   retransmitted at once, without waiting for a timeout;
// - the retransmission timeout runs from the last progress (a result
//   arriving), not from each message's send time, and sends at most
//   kTimeoutBurst of the oldest late messages per expiry (the timeout then
//   doubles until progress resumes, up to max_timeout).
// An operation fails only when no result arrived for op_timeout (a rank late
// by less than that is waited for), or after max_retries timeouts of one
// message when that is set.
// A pipeline that is slow but moving (a loaded VM, a peer descheduled for a
// while) therefore triggers no retransmission storm of the whole window.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "client/packet_io.h"
#include "client/protocol.h"
#include "common/frame.h"
#include "common/status.h"

namespace inc::client {

// Addresses and tree parameters the engine stamps on every frame.
struct EngineConfig {
  Mac member_mac;
  Ipv4 member_ip;
  uint32_t member_qpn = 0;
  Mac switch_mac;
  Ipv4 switch_ip;
  uint32_t switch_qpn = 0;
  uint64_t va = 0;  // RETH VA/R_Key toward the switch (ignored there)
  uint32_t rkey = 0;
  uint8_t tos = INC_IP_TOS_DEFAULT;
  uint8_t ttl = INC_IP_TTL_DEFAULT;
  uint16_t tree_id = 0;
  uint32_t key = 0;
  uint32_t pool_size = 1;
  uint32_t elems_per_packet = INC_DEFAULT_ELEMS_PER_PACKET;  // four-byte elements
  uint16_t rank_at_switch = 0;
  uint32_t first_msg_id = 0;
  std::chrono::microseconds timeout{std::chrono::milliseconds(50)};
  std::chrono::microseconds max_timeout{std::chrono::seconds(1)};  // backoff cap
  // How long an operation may go without any result (the slowest rank's
  // lateness it waits for); then it fails with DEADLINE_EXCEEDED and the
  // reporter is called. 0: no limit.
  std::chrono::milliseconds op_timeout{std::chrono::minutes(5)};
  // Timeouts of one message before failing as above; 0: no limit (only
  // op_timeout bounds the wait).
  uint32_t max_retries = 0;
  int poll_ms = 1;  // longest sleep in poll() while waiting for results
  // Called on Run's thread whenever a wait for results found nothing to do
  // (so at most about once per poll_ms); may be empty.
  std::function<void()> on_wait;
};

// One collective call cut into messages.
class Operation {
 public:
  virtual ~Operation() = default;
  virtual uint64_t NumMessages() const = 0;
  // Fills collective/dtype/op/count/exponent/root of message i and writes
  // its payload straight into the frame: payload is the frame's payload area
  // (any alignment), with room for capacity bytes. Returns the payload bytes,
  // or an error when they do not fit.
  virtual Expected<size_t> Build(uint64_t i, IncHeader* header, uint8_t* payload, size_t capacity) = 0;
  // Uses the (already validated) result of message i; result.payload points
  // into the received frame (any alignment). Returns kNone, or kMismatch
  // when it does not answer the request (then it is not consumed).
  virtual Reject Accept(uint64_t i, const ParsedFrame& result) = 0;
  // True when the operation reads OVERFLOW itself (the engine then counts
  // but does not warn).
  virtual bool HandlesOverflow() const { return false; }
};

struct EngineCounters {
  uint64_t messages = 0;
  uint64_t retransmissions = 0;       // all of them, fast included
  uint64_t fast_retransmissions = 0;  // after a gap, before any timeout
  uint64_t overflow_results = 0;      // results with the OVERFLOW flag
  uint64_t operations = 0;
  uint64_t failed_operations = 0;
  double srtt_us = 0;  // smoothed result latency of first transmissions
  double rto_us = 0;
  std::array<uint64_t, static_cast<size_t>(Reject::kCount)> rejects{};
};

// Called when an operation gives up (op_timeout or max_retries): (msg id of
// the oldest unfinished message, its timeouts, error).
using TimeoutReporter = std::function<void(uint32_t, uint32_t, const std::string&)>;

class Engine {
 public:
  Engine(PacketIo* io, const EngineConfig& config);

  Status Run(Operation* op);
  void SetTimeoutReporter(TimeoutReporter r) { reporter_ = std::move(r); }
  // Makes Run fail fast (the AM said the tree is gone).
  void Abort(const std::string& why);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  const EngineConfig& config() const { return cfg_; }
  EngineCounters counters() const {
    EngineCounters c = counters_;
    c.srtt_us = srtt_us_;
    c.rto_us = static_cast<double>(Rto().count());
    return c;
  }
  uint32_t next_msg_id() const { return next_msg_id_; }

 private:
  struct InFlight {
    std::chrono::steady_clock::time_point sent;  // last (re)transmission
    uint32_t timeouts = 0;                       // retransmissions after a timeout
    uint32_t fast = 0;                           // retransmissions after a gap
    bool done = false;
  };
  // Results of messages sent this much later prove a message lost.
  static constexpr uint64_t kReorderWindow = 8;
  // Gap retransmissions of one message before only timeouts retry it.
  static constexpr uint32_t kMaxFastRetransmits = 4;
  // Oldest late messages retransmitted per timeout expiry.
  static constexpr uint64_t kTimeoutBurst = 32;
  Status Send(Operation* op, uint64_t i, uint32_t msg_id, bool retransmit);
  void SampleRtt(std::chrono::steady_clock::duration d);
  // Retransmission timeout: max(configured timeout, srtt + 4 rttvar), so a
  // busy host that merely answers late is not flooded with retransmissions.
  std::chrono::microseconds Rto() const;

  PacketIo* io_;
  EngineConfig cfg_;
  uint32_t next_msg_id_;
  uint32_t psn_ = 0;
  uint16_t ip_id_ = 0;
  std::vector<InFlight> window_;
  bool have_rtt_ = false;
  double srtt_us_ = 0, rttvar_us_ = 0;
  EngineCounters counters_;
  TimeoutReporter reporter_;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mu_;
  std::string abort_reason_;
};

}  // namespace inc::client
