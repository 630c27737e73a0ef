// SPDX-License-Identifier: Apache-2.0
// Credit arithmetic for one flow on one link: the upstream's account
// of what its next hop has granted, the next hop's batching of credit returns,
// and the upstream's liveness check on the next hop. Pure logic, clock
// injected as nanoseconds.
#pragma once

#include <cstdint>

namespace inc::credit {

// Serial-number comparison of two cumulative counters mod 2^64 (RFC 1982
// style): true when a is ahead of b by less than 2^63.
inline bool SerialAhead(uint64_t a, uint64_t b) {
  return a != b && static_cast<int64_t>(a - b) > 0;
}

// The upstream's account of a next hop: granted_total = buffer + freed_total
// (everything the next hop ever let us send), consumed_total = everything we
// sent. Both are cumulative mod 2^64; available = granted - consumed, read as
// a serial distance, so wrapping counters stay correct as long as the two are
// within 2^63 of each other (a buffer is far smaller).
class CreditAccount {
 public:
  // A RESV's CREDIT: the next hop's buffer and its cumulative freed bytes.
  // A freed_total behind the one we hold (an old, reordered RESV) is ignored;
  // the buffer always takes the newest value (a hop may shrink it).
  // Returns true when the freed total advanced.
  bool Grant(uint64_t buffer_bytes, uint64_t freed_total);
  // Takes `bytes` of credit; false (nothing taken) if fewer are available.
  bool Consume(uint64_t bytes);

  uint64_t granted_total() const { return buffer_ + freed_total_; }
  uint64_t consumed_total() const { return consumed_total_; }
  uint64_t freed_total() const { return freed_total_; }
  uint64_t buffer() const { return buffer_; }
  // Never negative: a shrunk buffer below what is in flight reads as 0.
  uint64_t Available() const;
  // Bytes sent that the next hop has not yet reported freed.
  uint64_t Outstanding() const;
  bool granted() const { return granted_; }

 private:
  uint64_t buffer_ = 0;
  uint64_t freed_total_ = 0;
  uint64_t consumed_total_ = 0;
  bool granted_ = false;
};

// The next hop's side: freed bytes accumulate until a quantum is reached or
// the flush interval passed with something pending; a keepalive RESV goes
// out anyway after keepalive_ns so a hop that holds data but cannot drain
// (back-pressure from further down) is not mistaken for a dead one.
class ReturnBatcher {
 public:
  ReturnBatcher(uint64_t quantum_bytes, uint64_t flush_ns, uint64_t keepalive_ns)
      : quantum_(quantum_bytes), flush_ns_(flush_ns), keepalive_ns_(keepalive_ns) {}

  // A new batch size and flush interval from now on (what is pending stays).
  void Rebatch(uint64_t quantum_bytes, uint64_t flush_ns) {
    quantum_ = quantum_bytes;
    flush_ns_ = flush_ns;
  }
  // `bytes` of the flow left this hop's buffer (forwarded on).
  void Freed(uint64_t bytes, uint64_t now_ns);
  // A RESV is due when a quantum is pending; when a partial batch is pending
  // and the flow has been quiet for the flush interval, or the last RESV is
  // a keepalive period old; and, with nothing pending, every keepalive
  // period while this hop holds data of the flow it cannot forward
  // (back_pressured), so the upstream does not declare it failed. An idle
  // hop that holds nothing sends nothing: the upstream's liveness check
  // needs returns only while it has bytes outstanding.
  bool ShouldSend(uint64_t now_ns, bool back_pressured = false) const;
  // A RESV carrying freed_total() left, `wire_bytes` long (IP payload).
  void Sent(uint64_t now_ns, uint64_t wire_bytes);

  uint64_t freed_total() const { return freed_total_; }  // mod 2^64, on the wire
  uint64_t pending() const { return pending_; }
  uint64_t messages() const { return messages_; }
  uint64_t credit_wire_bytes() const { return credit_wire_bytes_; }
  uint64_t data_bytes() const { return data_bytes_; }
  // Credit bytes on the wire per data byte freed (0 before any data).
  double OverheadRatio() const;

 private:
  uint64_t quantum_, flush_ns_, keepalive_ns_;
  uint64_t freed_total_ = 0;
  uint64_t pending_ = 0;
  uint64_t last_sent_ns_ = 0;
  uint64_t last_freed_ns_ = 0;
  bool sent_once_ = false;
  uint64_t messages_ = 0;
  uint64_t credit_wire_bytes_ = 0;
  uint64_t data_bytes_ = 0;
};

// The upstream's view of a next hop's health: with credit outstanding, a
// RESV must arrive within the heartbeat interval of the later of the last
// RESV and the moment the outstanding bytes began; else the hop has failed.
// An idle hop (nothing outstanding) never fails for silence.
class LivenessMonitor {
 public:
  explicit LivenessMonitor(uint64_t heartbeat_ns) : heartbeat_ns_(heartbeat_ns) {}
  void Consumed(uint64_t now_ns, uint64_t outstanding_before);
  void Returned(uint64_t now_ns) { last_progress_ns_ = now_ns; }
  bool Expired(uint64_t now_ns, uint64_t outstanding) const {
    return outstanding > 0 && now_ns - last_progress_ns_ >= heartbeat_ns_;
  }
  uint64_t last_progress_ns() const { return last_progress_ns_; }

 private:
  uint64_t heartbeat_ns_;
  uint64_t last_progress_ns_ = 0;
};

}  // namespace inc::credit
