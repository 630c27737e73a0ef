// SPDX-License-Identifier: Apache-2.0
// The XDP live-frame member transport ("xdp"): frames are built in an
// mmapped BPF array and put on the wire by BPF_PROG_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES (bpf/member_io.bpf.c member_tx, one XDP_TX per
// frame), and frames for this member are copied by the member's XDP program
// (member_rx) into a BPF ring buffer that the process reads in place. Unlike
// AF_XDP copy mode this builds no skb on the member's send path and none at
// the switch, whose XDP program receives the xdp_frame as sent; and there is
// no socket to wake per frame on the receive path. Needs CAP_BPF and
// CAP_NET_ADMIN (as the AF_XDP transport does) and a kernel with live-frame
// BPF_PROG_RUN (5.18+). See docs/architecture.md "Member transports".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "client/packet_io.h"
#include "client/xdp_attach.h"
#include "client/xsk_socket.h"
#include "client/yield_spin.h"
#include "common/net.h"
#include "common/status.h"
#include "inc_member_io.h"

struct member_io;  // libbpf skeleton
struct ring_buffer;

namespace inc::client {

struct XdpIoOptions {
  std::string ifname;
  uint32_t tx_frames = 512;  // frames queued between flushes (power of two)
  bool xdp_generic = false;  // attach member_rx in SKB mode instead of native
  Ipv4 filter_ip;            // 0 = every IPv4 destination
  uint32_t filter_qpn = 0;   // 0 = every DestQP
  uint32_t spin_us = 200;    // see yield_spin.h
};

class XdpIo : public PacketIo {
 public:
  static Expected<std::unique_ptr<XdpIo>> Open(const XdpIoOptions& options);
  ~XdpIo() override;
  XdpIo(const XdpIo&) = delete;
  XdpIo& operator=(const XdpIo&) = delete;

  size_t MaxFrame() const override;
  uint8_t* TxBuffer() override;
  void TxCommit(size_t len) override;
  Status Flush() override;
  Expected<size_t> Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) override;
  PacketIoStats Stats() const override;

 private:
  explicit XdpIo(const XdpIoOptions& options) : opt_(options), spin_(options.spin_us) {}
  Status Init();
  size_t Consume();    // delivers what rx_ring holds to handler_
  Status SendSmall();  // the queued frames through packet_fd_

  // Flushes of fewer frames use the packet socket (see Init).
  static constexpr uint32_t kLiveFramesMin = 8;

  XdpIoOptions opt_;
  YieldSpin spin_;
  uint32_t ifindex_ = 0;
  member_io* skel_ = nullptr;
  XdpAttachment attachment_;
  uint8_t* tx_map_ = nullptr;  // mmapped tx_frames
  size_t tx_map_len_ = 0;
  uint32_t tx_head_ = 0;           // entry of the first frame not yet sent
  uint32_t tx_pending_ = 0;        // committed, not yet sent
  inc_io_tx_template template_{};  // what each live frame starts from
  ring_buffer* rx_ = nullptr;
  std::unique_ptr<XskSocket> wake_;        // AF_XDP socket that wakes a sleeping process
  int packet_fd_ = -1;                     // AF_PACKET socket for small flushes
  const FrameHandler* handler_ = nullptr;  // during Consume
  size_t delivered_ = 0;                   // during Consume
  PacketIoStats stats_;
};

}  // namespace inc::client
