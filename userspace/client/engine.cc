// SPDX-License-Identifier: Apache-2.0
#include "client/engine.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace inc::client {

using Clock = std::chrono::steady_clock;

Engine::Engine(PacketIo* io, const EngineConfig& config)
    : io_(io), cfg_(config), next_msg_id_(config.first_msg_id) {
  if (cfg_.pool_size == 0) cfg_.pool_size = 1;
  window_.resize(cfg_.pool_size);
}

void Engine::Abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
  }
  aborted_.store(true, std::memory_order_release);
}

void Engine::SampleRtt(Clock::duration d) {
  double us = std::chrono::duration<double, std::micro>(d).count();
  if (!have_rtt_) {
    srtt_us_ = us;
    rttvar_us_ = us / 2;
    have_rtt_ = true;
  } else {  // RFC 6298 gains
    rttvar_us_ = 0.75 * rttvar_us_ + 0.25 * std::abs(srtt_us_ - us);
    srtt_us_ = 0.875 * srtt_us_ + 0.125 * us;
  }
}

std::chrono::microseconds Engine::Rto() const {
  auto rto = cfg_.timeout;
  if (have_rtt_) {
    auto adaptive = std::chrono::microseconds(static_cast<int64_t>(srtt_us_ + 4 * rttvar_us_));
    if (adaptive > rto) rto = adaptive;
  }
  return rto > cfg_.max_timeout ? cfg_.max_timeout : rto;
}

Status Engine::Send(Operation* op, uint64_t i, uint32_t msg_id, bool retransmit) {
  uint8_t* buf = io_->TxBuffer();
  if (!buf) {
    INC_RETURN_IF_ERROR(io_->Flush());
    buf = io_->TxBuffer();
    if (!buf) return ResourceExhausted("no free TX buffer");
  }
  FrameSpec spec;
  spec.src_mac = cfg_.member_mac;
  spec.dst_mac = cfg_.switch_mac;
  spec.src_ip = cfg_.member_ip;
  spec.dst_ip = cfg_.switch_ip;
  spec.tos = cfg_.tos;
  spec.ttl = cfg_.ttl;
  spec.ip_id = ip_id_++;
  spec.src_qpn = cfg_.member_qpn;
  spec.dest_qpn = cfg_.switch_qpn;
  spec.psn = psn_;
  psn_ = (psn_ + 1) & INC_PSN_MASK;
  spec.va = cfg_.va;
  spec.rkey = cfg_.rkey;
  spec.inc.tree_id = cfg_.tree_id;
  spec.inc.rank = cfg_.rank_at_switch;
  spec.inc.msg_id = msg_id;
  spec.inc.slot = SlotOf(msg_id, cfg_.pool_size);
  spec.inc.key = cfg_.key;
  const size_t max_frame = io_->MaxFrame();
  const size_t room = max_frame > FrameLength(0) ? max_frame - FrameLength(0) : 0;
  auto payload_len = op->Build(i, &spec.inc, buf + INC_OFF_PAYLOAD, room);
  if (!payload_len.ok()) return payload_len.status().WithContext("build message " + std::to_string(msg_id));
  spec.payload_len = *payload_len;
  // Build may have set flags of its own (OVERFLOW); RETRANSMIT is ours.
  spec.inc.flags =
      static_cast<uint8_t>((spec.inc.flags & ~INC_FLAG_RETRANSMIT) | (retransmit ? INC_FLAG_RETRANSMIT : 0));
  auto len = BuildFrameAroundPayload(spec, buf, max_frame);
  if (!len.ok()) return len.status().WithContext("build message " + std::to_string(msg_id));
  io_->TxCommit(*len);
  return Status::Ok();
}

Status Engine::Run(Operation* op) {
  const uint64_t n = op->NumMessages();
  const uint32_t base = next_msg_id_;
  const uint32_t pool = cfg_.pool_size;
  counters_.operations++;
  uint64_t next = 0, oldest = 0;
  uint64_t done_count = 0;    // results accepted in this operation
  uint64_t highest_done = 0;  // 1 + the highest message index with a result
  ResultFilter filter{cfg_.member_qpn, cfg_.switch_ip, cfg_.tree_id, cfg_.key, pool};
  Status failure;
  auto fail = [&](Status s) {
    counters_.failed_operations++;
    next_msg_id_ = base + static_cast<uint32_t>(n);
    return s;
  };

  FrameHandler on_frame = [&](const uint8_t* data, size_t len) {
    auto parsed = ParseFrame(data, len);
    Reject why = Reject::kMalformed;
    if (parsed.ok()) why = CheckResultFrame(*parsed, filter);
    if (why == Reject::kNone) {
      uint64_t k = static_cast<uint32_t>(parsed->inc.msg_id - base);
      if (k >= next) {
        why = Reject::kUnknownMessage;
        // A late result of an earlier operation (a retransmission answered
        // twice) shows up as a wrapped-around id.
        if (static_cast<int32_t>(parsed->inc.msg_id - base) < 0) why = Reject::kDuplicate;
      } else if (k < oldest || window_[k % pool].done) {
        why = Reject::kDuplicate;
      } else {
        why = op->Accept(k, *parsed);
        if (why == Reject::kNone) {
          InFlight& f = window_[k % pool];
          f.done = true;
          done_count++;
          if (k + 1 > highest_done) highest_done = k + 1;
          // Karn: only never-retransmitted messages give RTT samples.
          if (f.timeouts == 0) SampleRtt(Clock::now() - f.sent);
          if (parsed->inc.flags & INC_FLAG_OVERFLOW) {
            if (counters_.overflow_results++ == 0 && !op->HandlesOverflow()) {
              LOG_WARN << "tree " << cfg_.tree_id
                       << ": switch reported OVERFLOW (a sum saturated or wrapped) in message "
                       << parsed->inc.msg_id;
            }
          }
        }
      }
    }
    if (why != Reject::kNone) {
      counters_.rejects[static_cast<size_t>(why)]++;
      LOG_DEBUG << "rejected frame: " << RejectName(why);
    }
  };

  auto last_scan = Clock::now();
  auto last_progress = last_scan;  // a result arrived, or sending began
  auto last_result = last_scan;    // a result arrived, or the operation began
  uint32_t backoff = 0;            // timeout expiries since the last progress
  while (oldest < n) {
    if (aborted_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(abort_mu_);
      return fail(Aborted("operation aborted: " + abort_reason_));
    }
    // Fill the window.
    while (next < n && WindowAllows(next, oldest, pool)) {
      uint8_t* probe = io_->TxBuffer();
      if (!probe) break;
      auto now = Clock::now();
      if (oldest == next) last_progress = now;  // nothing was in flight
      window_[next % pool] = InFlight{now, 0, 0, false};
      Status s = Send(op, next, base + static_cast<uint32_t>(next), false);
      if (!s.ok()) return fail(s);
      counters_.messages++;
      next++;
    }
    Status s = io_->Flush();
    if (!s.ok()) return fail(s);
    // Wait only when nothing more can be sent.
    bool can_send = next < n && WindowAllows(next, oldest, pool);
    const uint64_t done_before = done_count;
    auto got = io_->Receive(on_frame, can_send ? 0 : cfg_.poll_ms, 256);
    if (!got.ok()) return fail(got.status());
    if (*got == 0 && !can_send && cfg_.on_wait) cfg_.on_wait();
    while (oldest < next && window_[oldest % pool].done) oldest++;
    auto now = Clock::now();
    if (done_count != done_before) {
      last_progress = now;
      last_result = now;
      backoff = 0;
    }
    if (cfg_.op_timeout.count() > 0 && oldest < next && now - last_result >= cfg_.op_timeout) {
      const uint32_t msg_id = base + static_cast<uint32_t>(oldest);
      const InFlight& f = window_[oldest % pool];
      std::string err = "no result for message " + std::to_string(msg_id) + " (slot " +
                        std::to_string(SlotOf(msg_id, pool)) + ") within the collective timeout of " +
                        std::to_string(cfg_.op_timeout.count()) +
                        " ms: a rank did not contribute in time, or the switch is unreachable";
      LOG_ERROR << "tree " << cfg_.tree_id << ": " << err;
      if (reporter_) reporter_(msg_id, f.timeouts, err);
      return fail(DeadlineExceeded(err));
    }
    // Scanning every few hundred microseconds is plenty for timeouts of
    // milliseconds; a gap is worth acting on as soon as it shows.
    const bool gap = oldest < next && oldest + kReorderWindow <= highest_done && done_count != done_before;
    if (!gap && now - last_scan < cfg_.timeout / 8 && !(*got == 0 && !can_send)) continue;
    last_scan = now;
    auto retransmit = [&](uint64_t k, InFlight& f) {
      f.sent = now;
      counters_.retransmissions++;
      return Send(op, k, base + static_cast<uint32_t>(k), true);
    };
    // Fast retransmission: results of later messages arrived, so these are
    // lost (or their results are); no need to wait for a timeout. A message
    // retransmitted this way gets another chance after one round trip.
    const auto min_resend_gap = std::chrono::microseconds(static_cast<int64_t>(srtt_us_));
    for (uint64_t k = oldest; k < next && k + kReorderWindow <= highest_done; k++) {
      InFlight& f = window_[k % pool];
      if (f.done || f.fast >= kMaxFastRetransmits || now - f.sent < min_resend_gap) continue;
      f.fast++;
      counters_.fast_retransmissions++;
      s = retransmit(k, f);
      if (!s.ok()) return fail(s);
    }
    // Timeout: no progress for a whole RTO (doubling per expiry without
    // progress): the oldest late messages go again, at most kTimeoutBurst.
    auto rto = Rto() * (uint64_t{1} << std::min<uint32_t>(backoff, 20));
    if (rto > cfg_.max_timeout) rto = cfg_.max_timeout;
    if (oldest < next && now - last_progress >= rto) {
      last_progress = now;
      backoff++;
      uint64_t sent = 0;
      for (uint64_t k = oldest; k < next && sent < kTimeoutBurst; k++) {
        InFlight& f = window_[k % pool];
        if (f.done || now - f.sent < Rto()) continue;
        uint32_t msg_id = base + static_cast<uint32_t>(k);
        if (++f.timeouts > cfg_.max_retries && cfg_.max_retries > 0) {
          std::string err = "message " + std::to_string(msg_id) + " (slot " +
                            std::to_string(SlotOf(msg_id, pool)) + ") got no result after " +
                            std::to_string(f.timeouts) + " timeouts (from " +
                            std::to_string(cfg_.timeout.count()) + " us, doubling up to " +
                            std::to_string(cfg_.max_timeout.count()) + " us)";
          LOG_ERROR << "tree " << cfg_.tree_id << ": " << err;
          if (reporter_) reporter_(msg_id, f.timeouts, err);
          return fail(DeadlineExceeded(err));
        }
        LOG_DEBUG << "retransmit message " << msg_id << " (timeout " << f.timeouts << ")";
        s = retransmit(k, f);
        if (!s.ok()) return fail(s);
        sent++;
      }
    }
    s = io_->Flush();
    if (!s.ok()) return fail(s);
  }
  next_msg_id_ = base + static_cast<uint32_t>(n);
  return Status::Ok();
}

}  // namespace inc::client
