// SPDX-License-Identifier: Apache-2.0
// A PacketIo without a kernel, for tests and the codec micro-benchmark: one
// TX buffer, and every committed frame answered as a switch answers a world
// of one (the contribution comes back as the result, to the member's QP).
// A result is built the first time its message id is sent and replayed
// after, so repeated runs from the same first message id time only the
// member's side.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "client/packet_io.h"
#include "common/frame.h"

namespace inc::client {

class LoopbackIo : public PacketIo {
 public:
  LoopbackIo(uint32_t first_msg_id, uint32_t member_qpn) : first_(first_msg_id), member_qpn_(member_qpn) {}
  size_t MaxFrame() const override { return tx_.size(); }
  uint8_t* TxBuffer() override { return tx_.data(); }
  void TxCommit(size_t len) override {
    const size_t k = LoadBe32(tx_.data() + INC_OFF_INC + 8) - first_;  // the INC header's message id
    if (k >= results_.size()) results_.resize(k + 1);
    if (results_[k].empty()) results_[k] = ResultOf(tx_.data(), len);
    sent_++;
    pending_.push_back(k);
  }
  Status Flush() override { return Status::Ok(); }
  Expected<size_t> Receive(const FrameHandler& handler, int, size_t max_frames) override {
    size_t n = 0;
    for (; n < max_frames && !pending_.empty(); n++) {
      const std::vector<uint8_t>& f = results_[pending_.front()];
      pending_.pop_front();
      handler(f.data(), f.size());
    }
    return n;
  }
  PacketIoStats Stats() const override { return {}; }
  uint64_t sent() const { return sent_; }
  // Frames sent with a bad ICRC or framing (answered with nothing).
  uint64_t malformed() const { return malformed_; }

 private:
  std::vector<uint8_t> ResultOf(const uint8_t* frame, size_t len) {
    auto p = ParseFrame(frame, len);
    if (!p.ok() || !p->icrc_ok) {
      malformed_++;
      return {};
    }
    FrameSpec s;
    s.src_mac = p->dst_mac;
    s.dst_mac = p->src_mac;
    s.src_ip = p->dst_ip;
    s.dst_ip = p->src_ip;
    s.dest_qpn = member_qpn_;
    s.inc = p->inc;
    s.inc.flags = INC_FLAG_RESULT;
    s.inc.rank = INC_RANK_RESULT;
    s.payload = p->payload;
    s.payload_len = p->payload_len;
    return *BuildFrame(s);
  }

  uint32_t first_;
  uint32_t member_qpn_;
  std::vector<uint8_t> tx_ = std::vector<uint8_t>(4096);
  std::vector<std::vector<uint8_t>> results_;
  std::deque<size_t> pending_;
  uint64_t sent_ = 0, malformed_ = 0;
};

}  // namespace inc::client
