// SPDX-License-Identifier: Apache-2.0
// AF_XDP socket in copy mode on one queue of one interface, on the kernel's
// own API (linux/if_xdp.h: UMEM registration, four mmapped rings, bind with
// XDP_COPY), plus the worker-side XDP program (bpf/xsk_redirect.bpf.c) that
// steers this worker's RoCEv2 frames into it. Lessons from the client-io
// probe: copy-mode TX takes at most 32 descriptors per kick, the completion
// ring may report more frames than were submitted (we clamp to what is in
// flight and free TX buffers in FIFO order), the fill ring is twice the RX
// ring, and a veth has one queue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/packet_io.h"
#include "client/xdp_attach.h"
#include "client/yield_spin.h"
#include "common/net.h"
#include "common/status.h"
#include "common/xsk.h"

struct xsk_redirect;  // libbpf skeleton

namespace inc::client {

struct XskOptions {
  std::string ifname;
  uint32_t queue = 0;
  uint32_t frame_size = 4096;  // UMEM chunk; the largest INC frame (3174 bytes) fits one
  uint32_t rx_ring = 1024;     // fill ring = 2 x rx ring
  uint32_t tx_ring = 1024;     // completion ring = tx ring
  uint32_t tx_frames = 1024;
  bool need_wakeup = true;
  bool attach_xdp = true;    // load and attach bpf/xsk_redirect on ifname
  bool xdp_generic = false;  // SKB mode instead of native
  Ipv4 filter_ip;            // 0 = every IPv4 destination
  uint32_t filter_qpn = 0;   // 0 = every DestQP
  // Receive() with a timeout first polls the RX ring this long, yielding the
  // CPU between looks, before it sleeps in poll(): a result that comes back
  // within it costs no wake-up (8-byte allreduce 57-70 -> 23-28 us on the
  // 2-vCPU lab). The setting INCIN_XSK_SPIN_US overrides it.
  uint32_t spin_us = 200;
};

class XskSocket : public PacketIo {
 public:
  static Expected<std::unique_ptr<XskSocket>> Open(const XskOptions& options);
  ~XskSocket() override;
  XskSocket(const XskSocket&) = delete;
  XskSocket& operator=(const XskSocket&) = delete;

  size_t MaxFrame() const override { return frame_size_; }
  uint8_t* TxBuffer() override;
  void TxCommit(size_t len) override;
  Status Flush() override;
  Expected<size_t> Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) override;
  PacketIoStats Stats() const override;

  int fd() const { return xsk_.fd(); }

 private:
  explicit XskSocket(const XskOptions& options) : opt_(options), spin_(options.spin_us) {}
  Status Init();
  Status AttachProgram();
  void ReapCompletions();
  Status Kick();

  XskOptions opt_;
  uint32_t ifindex_ = 0;
  uint32_t frame_size_ = 0;
  // UMEM: rx_frames_ RX chunks (all in the fill or RX ring), then
  // tx_frames TX chunks.
  xsk::Socket xsk_;
  uint32_t rx_frames_ = 0;
  // TX buffers are used round-robin and freed oldest first: copy mode
  // completes in submission order, and counting (clamped) is robust against
  // the completion ring reporting frames never submitted.
  uint32_t tx_head_ = 0;          // next TX buffer to hand out
  uint32_t tx_in_flight_ = 0;     // submitted to the kernel, not completed
  uint32_t tx_pending_ = 0;       // committed by the caller, not yet submitted
  std::vector<uint32_t> tx_len_;  // length of the frame in each TX buffer
  PacketIoStats stats_;
  uint64_t cq_bogus_ = 0;
  YieldSpin spin_;  // waits before poll()

  xsk_redirect* skel_ = nullptr;
  XdpAttachment attachment_;
};

}  // namespace inc::client
