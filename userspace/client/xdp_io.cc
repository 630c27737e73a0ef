// SPDX-License-Identifier: Apache-2.0
#include "client/xdp_io.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "common/abi/wire.h"
#include "common/log.h"
#include "inc_member_io.h"
#include "member_io.skel.h"

namespace inc::client {

static_assert(sizeof(inc_io_frame) == 8 + INC_IO_FRAME_BYTES, "inc_io_frame layout (mmapped)");
static_assert(INC_IO_FRAME_BYTES % 8 == 0, "tx_frames entries stay 8-byte aligned");
static_assert(INC_FRAME_OVERHEAD + INC_MAX_PAYLOAD_BYTES <= INC_IO_FRAME_BYTES,
              "the largest INC frame fits a member_io frame");

namespace {

static_assert(sizeof(inc_io_tx_template) == 8 + INC_IO_TX_TEMPLATE_BYTES, "inc_io_tx_template layout");

// The receive queue of the wake-up socket (every interface has a queue 0).
constexpr uint32_t kWakeQueue = 0;

bool IsPowerOfTwo(uint32_t v) {
  return v && !(v & (v - 1));
}

}  // namespace

Expected<std::unique_ptr<XdpIo>> XdpIo::Open(const XdpIoOptions& options) {
  std::unique_ptr<XdpIo> io(new XdpIo(options));
  Status st = io->Init();
  if (!st.ok()) return st.WithContext("XDP live-frame transport on " + options.ifname);
  return io;
}

Status XdpIo::Init() {
  if (!IsPowerOfTwo(opt_.tx_frames) || opt_.tx_frames > 65536)
    return InvalidArgument("tx_frames must be a power of two <= 65536");
  ifindex_ = if_nametoindex(opt_.ifname.c_str());
  if (ifindex_ == 0) return NotFound("no interface named '" + opt_.ifname + "'");
  skel_ = member_io__open();
  if (!skel_) return ErrnoStatus("open member_io BPF object", errno);
  skel_->rodata->member_ip_be = opt_.filter_ip.host ? opt_.filter_ip.be() : 0;
  skel_->rodata->member_qpn = opt_.filter_qpn;
  skel_->rodata->tx_mask = opt_.tx_frames - 1;
  // Results on the other queues of a multi-queue NIC reach the ring and wake
  // the process through it: member_io redirects only this queue's frames to
  // the wake-up socket (a socket takes nothing from another queue).
  skel_->rodata->wake_queue = kWakeQueue;
  if (int err = bpf_map__set_max_entries(skel_->maps.tx_frames, opt_.tx_frames))
    return ErrnoStatus("size tx_frames", -err);
  if (int err = member_io__load(skel_)) return ErrnoStatus("load member_io BPF programs", -err);

  tx_map_len_ = size_t{opt_.tx_frames} * sizeof(inc_io_frame);
  void* m =
      mmap(nullptr, tx_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(skel_->maps.tx_frames), 0);
  if (m == MAP_FAILED) return ErrnoStatus("mmap tx_frames", errno);
  tx_map_ = static_cast<uint8_t*>(m);

  rx_ = ring_buffer__new(
      bpf_map__fd(skel_->maps.rx_ring),
      [](void* ctx, void* data, size_t size) -> int {
        auto* self = static_cast<XdpIo*>(ctx);
        const auto* rec = static_cast<const inc_io_frame*>(data);
        if (size < sizeof(uint64_t) || rec->len == 0) return 0;  // a wake-up record
        if (rec->len > INC_IO_FRAME_BYTES || size < 8 + rec->len) return 0;
        self->stats_.rx_packets++;
        self->stats_.rx_bytes += rec->len;
        self->delivered_++;
        (*self->handler_)(rec->data, rec->len);
        return 0;
      },
      this, nullptr);
  if (!rx_) return ErrnoStatus("ring buffer on rx_ring", errno);
  // Small flushes go through a packet socket: BPF_PROG_RUN's per-call set-up
  // (a page pool, ~10 us) costs more than sending a few frames as skbs.
  packet_fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // protocol 0: sends only
  if (packet_fd_ < 0) return ErrnoStatus("socket(AF_PACKET)", errno);
  int one = 1;
  if (setsockopt(packet_fd_, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)))
    return ErrnoStatus("PACKET_QDISC_BYPASS", errno);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = static_cast<int>(ifindex_);
  if (bind(packet_fd_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)))
    return ErrnoStatus("bind AF_PACKET to " + opt_.ifname, errno);
  // The wake-up socket: a sleeping process gets its next frame here, and the
  // socket's readiness wakes it without an interrupt of its own.
  XskOptions wo;
  wo.ifname = opt_.ifname;
  wo.rx_ring = 64;
  wo.tx_ring = 64;
  wo.tx_frames = 1;
  wo.attach_xdp = false;  // member_io redirects into it
  wo.spin_us = 0;
  wo.queue = kWakeQueue;
  auto wake = XskSocket::Open(wo);
  if (!wake.ok()) return wake.status().WithContext("wake-up socket");
  wake_ = std::move(*wake);
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.tx_port), &zero, &ifindex_, 0))
    return ErrnoStatus("put " + opt_.ifname + " into tx_port", errno);
  int wfd = wake_->fd();
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.wake_xsks), &zero, &wfd, 0))
    return ErrnoStatus("insert the wake-up socket into wake_xsks", errno);
  // Exclusive: member_io is also the program Flush runs with BPF_PROG_RUN,
  // which is cheap only while that very program is attached (see
  // bpf/member_io.bpf.c); a dispatcher extension copy would not count.
  XdpChainSource chain;
  chain.exclusive_reason =
      "the xdp transport's program cannot run in libxdp's dispatcher (its send path runs the attached "
      "program "
      "itself); the afxdp transport (--transport afxdp) can";
  INC_RETURN_IF_ERROR(attachment_.Attach(bpf_program__fd(skel_->progs.member_io), ifindex_, opt_.ifname,
                                         opt_.xdp_generic, chain));
  // The cookie that marks our live frames (member_io sends only for those).
  std::random_device rd;
  uint64_t cookie = 0;
  while (cookie == 0) cookie = (uint64_t{rd()} << 32) | rd();
  skel_->bss->tx_cookie = cookie;
  template_.cookie = cookie;
  LOG_DEBUG << "XDP live-frame transport on " << opt_.ifname << ": " << opt_.tx_frames << " TX frames of "
            << INC_IO_FRAME_BYTES << " bytes";
  return Status::Ok();
}

XdpIo::~XdpIo() {
  attachment_.Detach();
  if (skel_ && wake_) {
    uint32_t zero = 0;
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.wake_xsks), &zero);
  }
  wake_.reset();
  if (packet_fd_ >= 0) close(packet_fd_);
  if (rx_) ring_buffer__free(rx_);
  if (tx_map_) munmap(tx_map_, tx_map_len_);
  if (skel_) member_io__destroy(skel_);
}

size_t XdpIo::MaxFrame() const {
  return INC_IO_FRAME_BYTES;
}

uint8_t* XdpIo::TxBuffer() {
  if (tx_pending_ >= opt_.tx_frames) return nullptr;
  uint32_t idx = (tx_head_ + tx_pending_) & (opt_.tx_frames - 1);
  return reinterpret_cast<inc_io_frame*>(tx_map_)[idx].data;
}

void XdpIo::TxCommit(size_t len) {
  uint32_t idx = (tx_head_ + tx_pending_) & (opt_.tx_frames - 1);
  reinterpret_cast<inc_io_frame*>(tx_map_)[idx].len = static_cast<uint32_t>(len);
  stats_.tx_bytes += len;
  tx_pending_++;
}

Status XdpIo::SendSmall() {
  std::array<mmsghdr, kLiveFramesMin> msgs{};
  std::array<iovec, kLiveFramesMin> iov{};
  auto* frames = reinterpret_cast<inc_io_frame*>(tx_map_);
  for (uint32_t i = 0; i < tx_pending_; i++) {
    inc_io_frame& f = frames[(tx_head_ + i) & (opt_.tx_frames - 1)];
    iov[i] = {f.data, f.len};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  stats_.tx_kicks++;
  int sent = sendmmsg(packet_fd_, msgs.data(), tx_pending_, MSG_DONTWAIT);
  if (sent < 0) {
    if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) {
      stats_.tx_busy++;
      return Status::Ok();  // frames stay queued for the next flush
    }
    return ErrnoStatus("sendmmsg (AF_PACKET) on " + opt_.ifname, errno);
  }
  stats_.tx_packets += static_cast<uint32_t>(sent);
  tx_head_ = (tx_head_ + static_cast<uint32_t>(sent)) & (opt_.tx_frames - 1);
  tx_pending_ -= static_cast<uint32_t>(sent);
  return Status::Ok();
}

Status XdpIo::Flush() {
  if (tx_pending_ == 0) return Status::Ok();
  if (tx_pending_ < kLiveFramesMin) return SendSmall();
  // One BPF_PROG_RUN sends every queued frame: member_tx takes entry
  // tx_next, tx_next + 1, ... and redirects each out of the interface.
  skel_->bss->tx_next = tx_head_;
  xdp_md ctx{};
  ctx.data = sizeof(template_.cookie);  // metadata before the frame
  ctx.data_end = sizeof(template_);     // ingress: the caller's loopback; member_tx redirects
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = &template_, .data_size_in = sizeof(template_),
              .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = static_cast<int>(tx_pending_),
              .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
  stats_.tx_kicks++;
  int err = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.member_io), &run);
  if (err) {
    if (errno == EINTR || errno == EAGAIN) {
      stats_.tx_busy++;
      return Status::Ok();  // frames stay queued for the next flush
    }
    return ErrnoStatus("BPF_PROG_RUN (live frames) of member_io on " + opt_.ifname, errno);
  }
  stats_.tx_packets += tx_pending_;
  tx_head_ = (tx_head_ + tx_pending_) & (opt_.tx_frames - 1);
  tx_pending_ = 0;
  return Status::Ok();
}

size_t XdpIo::Consume() {
  // Frames in the wake-up socket came before those in the ring (member_io
  // sends the first frame after a sleep there, the rest to the ring).
  delivered_ = 0;
  auto woke = wake_->Receive(*handler_, 0, 64);
  size_t from_socket = woke.ok() ? *woke : 0;
  ring_buffer__consume(rx_);
  return from_socket + delivered_;
}

Expected<size_t> XdpIo::Receive(const FrameHandler& handler, int timeout_ms, size_t /*max_frames*/) {
  handler_ = &handler;
  size_t got = Consume();
  if (got || timeout_ms == 0) return got;
  if (spin_.Wait([&] { return (got = Consume()) != 0; })) return got;
  // Sleep: member_rx sends the next frame to the wake-up socket once it sees
  // rx_sleeping (and clears it); look once more after raising the flag.
  __atomic_store_n(&skel_->bss->rx_sleeping, 1u, __ATOMIC_SEQ_CST);
  got = Consume();
  if (!got) {
    pollfd fds[2] = {{wake_->fd(), POLLIN, 0}, {ring_buffer__epoll_fd(rx_), POLLIN, 0}};
    int r = poll(fds, 2, timeout_ms);
    if (r < 0 && errno != EINTR) {
      __atomic_store_n(&skel_->bss->rx_sleeping, 0u, __ATOMIC_SEQ_CST);
      return ErrnoStatus("poll for frames on " + opt_.ifname, errno);
    }
  }
  __atomic_store_n(&skel_->bss->rx_sleeping, 0u, __ATOMIC_SEQ_CST);
  return got + Consume();
}

PacketIoStats XdpIo::Stats() const {
  PacketIoStats s = stats_;
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(ncpu > 0 ? ncpu : 1);
  auto read = [&](uint32_t key) {
    uint64_t sum = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.io_stats), &key, per_cpu.data()) == 0)
      for (uint64_t v : per_cpu) sum += v;
    return sum;
  };
  const PacketIoStats w = wake_->Stats();
  s.rx_ring_full = read(INC_IO_STAT_RX_RING_FULL) + w.rx_ring_full;
  s.rx_dropped = read(INC_IO_STAT_RX_RING_FULL) + read(INC_IO_STAT_RX_BAD_LEN) + w.rx_dropped;
  s.rx_fill_empty = w.rx_fill_empty;
  s.tx_invalid = read(INC_IO_STAT_TX_BAD_LEN) + read(INC_IO_STAT_TX_ERROR);
  return s;
}

}  // namespace inc::client
