// SPDX-License-Identifier: Apache-2.0
#include "client/xsk_socket.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "xsk_redirect.skel.h"

namespace inc::client {
namespace {

// Copy-mode TX hands at most this many descriptors to the driver per
// sendto() (the kernel's default TX budget); submitting more per kick leaves
// frames sitting in the ring.
constexpr uint32_t kTxBatch = 32;

// Receive queues of ifname (rx-only plus combined channels), 0 if the
// driver does not say.
uint32_t RxQueueCount(const std::string& ifname) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ethtool_channels ch{};
  ch.cmd = ETHTOOL_GCHANNELS;
  ifreq ifr{};
  ifname.copy(ifr.ifr_name, IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&ch);
  int rc = ioctl(fd, SIOCETHTOOL, &ifr);
  close(fd);
  return rc == 0 ? ch.rx_count + ch.combined_count : 0;
}

}  // namespace

Expected<std::unique_ptr<XskSocket>> XskSocket::Open(const XskOptions& options) {
  std::unique_ptr<XskSocket> s(new XskSocket(options));
  Status st = s->Init();
  if (!st.ok()) return st.WithContext("AF_XDP socket on " + options.ifname);
  return s;
}

Status XskSocket::Init() {
  // Frame and ring sizes are checked by xsk::Socket::Open.
  if (opt_.tx_frames == 0 || opt_.tx_frames > opt_.tx_ring)
    return InvalidArgument("tx_frames must be in 1..tx_ring");
  ifindex_ = if_nametoindex(opt_.ifname.c_str());
  if (ifindex_ == 0) return NotFound("no interface named '" + opt_.ifname + "'");
  frame_size_ = opt_.frame_size;
  const uint32_t fill_size = 2 * opt_.rx_ring;
  rx_frames_ = fill_size;
  xsk::Layout layout;
  layout.chunks = rx_frames_ + opt_.tx_frames;
  layout.chunk_size = frame_size_;
  layout.fill = fill_size;
  layout.completion = opt_.tx_ring;
  layout.rx = opt_.rx_ring;
  layout.tx = opt_.tx_ring;
  layout.what = opt_.ifname;
  INC_RETURN_IF_ERROR(xsk_.Open(layout));
  tx_len_.assign(opt_.tx_frames, 0);
  // Every RX chunk goes to the fill ring before the socket is bound.
  xsk_.StockFill(0, rx_frames_);
  INC_RETURN_IF_ERROR(xsk_.Bind(ifindex_, opt_.queue, opt_.need_wakeup ? XDP_USE_NEED_WAKEUP : 0, 2000));
  if (opt_.attach_xdp) {
    INC_RETURN_IF_ERROR(AttachProgram());
    // One socket serves one queue: on a multi-queue NIC the results hashed
    // to another queue would pass to the kernel and be lost (then resent
    // after a timeout, and again lost). Say so once, with the remedies.
    const uint32_t queues = RxQueueCount(opt_.ifname);
    if (queues > 1) {
      LOG_WARN << opt_.ifname << " has " << queues << " receive queues and this AF_XDP socket serves queue "
               << opt_.queue << " only: steer RoCEv2 there (ethtool -N " << opt_.ifname
               << " flow-type udp4 dst-port 4791 action " << opt_.queue << ", or ethtool -L " << opt_.ifname
               << " combined 1) or use the xdp transport, which serves every queue";
    }
  }
  LOG_DEBUG << "AF_XDP copy mode on " << opt_.ifname << " queue " << opt_.queue << ": " << rx_frames_
            << " RX + " << opt_.tx_frames << " TX buffers of " << frame_size_ << " bytes";
  return Status::Ok();
}

Status XskSocket::AttachProgram() {
  skel_ = xsk_redirect__open();
  if (!skel_) return ErrnoStatus("open xsk_redirect BPF object", errno);
  skel_->rodata->worker_ip_be = opt_.filter_ip.host ? opt_.filter_ip.be() : 0;
  skel_->rodata->member_qpn = opt_.filter_qpn;
  int err = xsk_redirect__load(skel_);
  if (err) return ErrnoStatus("load xsk_redirect BPF program", -err);
  // xsk_redirect passes everything but this member's RoCEv2 frames, so it
  // can join the chain of libxdp's dispatcher (xdp_attach.h).
  XdpChainSource chain;
  chain.elf = xsk_redirect__elf_bytes(&chain.elf_size);
  chain.loaded = skel_->obj;
  chain.prog_name = "xsk_redirect";
  INC_RETURN_IF_ERROR(attachment_.Attach(bpf_program__fd(skel_->progs.xsk_redirect), ifindex_, opt_.ifname,
                                         opt_.xdp_generic, chain));
  int key = static_cast<int>(opt_.queue);
  const int xsk_fd = xsk_.fd();
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.xsks), &key, &xsk_fd, 0))
    return ErrnoStatus("insert AF_XDP socket into XSKMAP", errno);
  return Status::Ok();
}

XskSocket::~XskSocket() {
  if (skel_ && attachment_.attached()) {
    // Drop the map's reference to the socket now, not when the map is freed.
    int key = static_cast<int>(opt_.queue);
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.xsks), &key);
  }
  attachment_.Detach();
  if (skel_) xsk_redirect__destroy(skel_);
}

void XskSocket::ReapCompletions() {
  xsk_.completion.cached_prod = xsk::LoadAcquire(xsk_.completion.producer);
  uint32_t n = xsk_.completion.cached_prod - xsk_.completion.cached_cons;
  if (!n) return;
  xsk_.completion.cached_cons += n;
  xsk::StoreRelease(xsk_.completion.consumer, xsk_.completion.cached_cons);
  if (n > tx_in_flight_) {
    cq_bogus_ += n - tx_in_flight_;
    n = tx_in_flight_;
  }
  tx_in_flight_ -= n;
}

uint8_t* XskSocket::TxBuffer() {
  if (tx_in_flight_ + tx_pending_ >= opt_.tx_frames) ReapCompletions();
  if (tx_in_flight_ + tx_pending_ >= opt_.tx_frames) return nullptr;
  uint32_t idx = (tx_head_ + tx_pending_) % opt_.tx_frames;
  return xsk_.umem() + (size_t{rx_frames_} + idx) * frame_size_;
}

void XskSocket::TxCommit(size_t len) {
  uint32_t idx = (tx_head_ + tx_pending_) % opt_.tx_frames;
  tx_len_[idx] = static_cast<uint32_t>(len);
  tx_pending_++;
}

Status XskSocket::Kick() {
  if (opt_.need_wakeup && !(xsk::LoadAcquire(xsk_.tx.flags) & XDP_RING_NEED_WAKEUP)) return Status::Ok();
  stats_.tx_kicks++;
  if (sendto(xsk_.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return Status::Ok();
  if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR) {
    stats_.tx_busy++;
    return Status::Ok();
  }
  return ErrnoStatus("sendto (AF_XDP TX kick) on " + opt_.ifname, errno);
}

Status XskSocket::Flush() {
  auto* descs = static_cast<xdp_desc*>(xsk_.tx.descs);
  while (tx_pending_) {
    uint32_t n = tx_pending_ < kTxBatch ? tx_pending_ : kTxBatch;
    // tx_frames <= tx ring size and every unconsumed descriptor is in
    // flight, so the ring always has room for the pending frames.
    for (uint32_t i = 0; i < n; i++) {
      uint32_t idx = tx_head_ % opt_.tx_frames;
      xdp_desc& d = descs[xsk_.tx.cached_prod & (xsk_.tx.size - 1)];
      d.addr = (uint64_t{rx_frames_} + idx) * frame_size_;
      d.len = tx_len_[idx];
      d.options = 0;
      stats_.tx_bytes += d.len;
      xsk_.tx.cached_prod++;
      tx_head_++;
    }
    xsk::StoreRelease(xsk_.tx.producer, xsk_.tx.cached_prod);
    tx_pending_ -= n;
    tx_in_flight_ += n;
    stats_.tx_packets += n;
    // Kick until the kernel took this batch, so no frame waits for the next
    // call; a busy answer (completion ring full) is retried after reaping.
    for (int attempt = 0; attempt < 64; attempt++) {
      INC_RETURN_IF_ERROR(Kick());
      ReapCompletions();
      if (xsk::LoadAcquire(xsk_.tx.consumer) == xsk_.tx.cached_prod) break;
    }
  }
  return Status::Ok();
}

Expected<size_t> XskSocket::Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) {
  // Frames a busy kernel left in the TX ring go out now.
  if (xsk::LoadAcquire(xsk_.tx.consumer) != xsk_.tx.cached_prod) INC_RETURN_IF_ERROR(Kick());
  xsk_.rx.cached_prod = xsk::LoadAcquire(xsk_.rx.producer);
  uint32_t avail = xsk_.rx.cached_prod - xsk_.rx.cached_cons;
  if (!avail && timeout_ms != 0) {
    spin_.Wait([&] {
      xsk_.rx.cached_prod = xsk::LoadAcquire(xsk_.rx.producer);
      avail = xsk_.rx.cached_prod - xsk_.rx.cached_cons;
      return avail != 0;
    });
  }
  if (!avail && timeout_ms != 0) {
    pollfd pfd{xsk_.fd(), POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll AF_XDP socket", errno);
    xsk_.rx.cached_prod = xsk::LoadAcquire(xsk_.rx.producer);
    avail = xsk_.rx.cached_prod - xsk_.rx.cached_cons;
  } else if (!avail && opt_.need_wakeup && (xsk::LoadAcquire(xsk_.fill.flags) & XDP_RING_NEED_WAKEUP)) {
    recvfrom(xsk_.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  }
  if (avail > max_frames) avail = static_cast<uint32_t>(max_frames);
  if (!avail) return size_t{0};
  const auto* descs = static_cast<const xdp_desc*>(xsk_.rx.descs);
  auto* fq = static_cast<uint64_t*>(xsk_.fill.descs);
  for (uint32_t i = 0; i < avail; i++) {
    const xdp_desc& d = descs[(xsk_.rx.cached_cons + i) & (xsk_.rx.size - 1)];
    stats_.rx_packets++;
    stats_.rx_bytes += d.len;
    if (d.addr + d.len <= xsk_.umem_len()) handler(xsk_.umem() + d.addr, d.len);
    // The fill ring holds every RX chunk not in the RX ring, so it has room.
    fq[(xsk_.fill.cached_prod + i) & (xsk_.fill.size - 1)] = d.addr & ~uint64_t{frame_size_ - 1};
  }
  xsk_.rx.cached_cons += avail;
  xsk::StoreRelease(xsk_.rx.consumer, xsk_.rx.cached_cons);
  xsk_.fill.cached_prod += avail;
  xsk::StoreRelease(xsk_.fill.producer, xsk_.fill.cached_prod);
  return size_t{avail};
}

PacketIoStats XskSocket::Stats() const {
  PacketIoStats s = stats_;
  s.cq_bogus = cq_bogus_;
  const xsk::KernelStats k = xsk::ReadKernelStats(xsk_.fd());
  s.rx_dropped = k.rx_dropped;
  s.rx_ring_full = k.rx_ring_full;
  s.rx_fill_empty = k.rx_fill_empty;
  s.tx_invalid = k.tx_invalid;
  return s;
}

}  // namespace inc::client
