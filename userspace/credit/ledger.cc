// SPDX-License-Identifier: Apache-2.0
#include "credit/ledger.h"

namespace inc::credit {

bool CreditAccount::Grant(uint64_t buffer_bytes, uint64_t freed_total) {
  buffer_ = buffer_bytes;
  if (!granted_) {
    // The first RESV sets the baseline: nothing of ours is in flight yet,
    // whatever the next hop's counter reads.
    freed_total_ = consumed_total_ = freed_total;
    granted_ = true;
    return false;
  }
  bool advanced = SerialAhead(freed_total, freed_total_);
  if (advanced) freed_total_ = freed_total;
  return advanced;
}

uint64_t CreditAccount::Available() const {
  uint64_t granted = granted_total();
  if (!SerialAhead(granted, consumed_total_)) return 0;
  return granted - consumed_total_;
}

uint64_t CreditAccount::Outstanding() const {
  if (!SerialAhead(consumed_total_, freed_total_)) return 0;
  return consumed_total_ - freed_total_;
}

bool CreditAccount::Consume(uint64_t bytes) {
  if (bytes > Available()) return false;
  consumed_total_ += bytes;  // wraps mod 2^64 by design
  return true;
}

void ReturnBatcher::Freed(uint64_t bytes, uint64_t now_ns) {
  freed_total_ += bytes;  // mod 2^64, the receiver compares serially
  pending_ += bytes;
  data_bytes_ += bytes;
  last_freed_ns_ = now_ns;
}

bool ReturnBatcher::ShouldSend(uint64_t now_ns, bool back_pressured) const {
  if (pending_ >= quantum_ && pending_ > 0) return true;
  uint64_t since = sent_once_ ? now_ns - last_sent_ns_ : UINT64_MAX;
  if (pending_ > 0) return now_ns - last_freed_ns_ >= flush_ns_ || since >= keepalive_ns_;
  return back_pressured && sent_once_ && since >= keepalive_ns_;
}

void ReturnBatcher::Sent(uint64_t now_ns, uint64_t wire_bytes) {
  pending_ = 0;
  last_sent_ns_ = now_ns;
  sent_once_ = true;
  messages_++;
  credit_wire_bytes_ += wire_bytes;
}

double ReturnBatcher::OverheadRatio() const {
  return data_bytes_ ? static_cast<double>(credit_wire_bytes_) / static_cast<double>(data_bytes_) : 0.0;
}

void LivenessMonitor::Consumed(uint64_t now_ns, uint64_t outstanding_before) {
  if (outstanding_before == 0) last_progress_ns_ = now_ns;
}

}  // namespace inc::credit
