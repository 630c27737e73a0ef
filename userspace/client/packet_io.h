// SPDX-License-Identifier: Apache-2.0
// The frame-level transport under libinc's message engine: hands out TX
// buffers that the engine builds whole RoCEv2 frames into (common/frame.h),
// sends them in batches, and delivers received frames to a handler. The
// AF_XDP socket (xsk_socket.h) is the raw implementation; a verbs UC QP
// would sit behind the same interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/status.h"

namespace inc::client {

struct PacketIoStats {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_kicks = 0;
  uint64_t tx_busy = 0;     // kicks the kernel answered EAGAIN/EBUSY/ENOBUFS
  uint64_t cq_bogus = 0;    // completions beyond what was in flight (clamped)
  uint64_t rx_dropped = 0;  // kernel: XDP_STATISTICS
  uint64_t rx_ring_full = 0;
  uint64_t rx_fill_empty = 0;
  uint64_t tx_invalid = 0;
};

// Called once per received frame; the bytes are valid only during the call.
using FrameHandler = std::function<void(const uint8_t* frame, size_t len)>;

class PacketIo {
 public:
  virtual ~PacketIo() = default;
  // Largest frame a TX buffer holds.
  virtual size_t MaxFrame() const = 0;
  // A buffer for the next frame, or nullptr when every TX buffer is in
  // flight (after reaping completions). Build the frame, then TxCommit.
  virtual uint8_t* TxBuffer() = 0;
  virtual void TxCommit(size_t len) = 0;
  // Hands every committed frame to the kernel.
  virtual Status Flush() = 0;
  // Delivers up to max_frames received frames; waits up to timeout_ms
  // (0 = do not wait) when none is ready. Returns how many were delivered.
  virtual Expected<size_t> Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) = 0;
  virtual PacketIoStats Stats() const = 0;
};

}  // namespace inc::client
