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
#include "common/xsk_stats.h"
#include "xsk_redirect.skel.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace inc::client {
namespace {

// Copy-mode TX hands at most this many descriptors to the driver per
// sendto() (the kernel's default TX budget); submitting more per kick leaves
// frames sitting in the ring.
constexpr uint32_t kTxBatch = 32;

bool IsPowerOfTwo(uint32_t v) {
  return v && !(v & (v - 1));
}

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

uint32_t LoadAcquire(const uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
void StoreRelease(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

}  // namespace

Expected<std::unique_ptr<XskSocket>> XskSocket::Open(const XskOptions& options) {
  std::unique_ptr<XskSocket> s(new XskSocket(options));
  Status st = s->Init();
  if (!st.ok()) return st.WithContext("AF_XDP socket on " + options.ifname);
  return s;
}

Status XskSocket::MapRing(Ring* ring, const char* name, uint64_t pgoff, const void* offsets, size_t desc_size,
                          uint32_t size) {
  const auto* off = static_cast<const xdp_ring_offset*>(offsets);
  ring->map_len = off->desc + size_t{size} * desc_size;
  void* m = mmap(nullptr, ring->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_,
                 static_cast<off_t>(pgoff));
  if (m == MAP_FAILED) return ErrnoStatus(std::string("mmap ") + name + " ring", errno);
  ring->map = m;
  auto* base = static_cast<uint8_t*>(m);
  ring->producer = reinterpret_cast<uint32_t*>(base + off->producer);
  ring->consumer = reinterpret_cast<uint32_t*>(base + off->consumer);
  ring->flags = reinterpret_cast<uint32_t*>(base + off->flags);
  ring->descs = base + off->desc;
  ring->size = size;
  ring->cached_prod = *ring->producer;
  ring->cached_cons = *ring->consumer;
  return Status::Ok();
}

Status XskSocket::Init() {
  if (!IsPowerOfTwo(opt_.frame_size) || opt_.frame_size < 2048)
    return InvalidArgument("frame_size must be a power of two >= 2048");
  if (!IsPowerOfTwo(opt_.rx_ring) || !IsPowerOfTwo(opt_.tx_ring))
    return InvalidArgument("ring sizes must be powers of two");
  if (opt_.tx_frames == 0 || opt_.tx_frames > opt_.tx_ring)
    return InvalidArgument("tx_frames must be in 1..tx_ring");
  ifindex_ = if_nametoindex(opt_.ifname.c_str());
  if (ifindex_ == 0) return NotFound("no interface named '" + opt_.ifname + "'");
  frame_size_ = opt_.frame_size;
  const uint32_t fill_size = 2 * opt_.rx_ring;
  rx_frames_ = fill_size;
  const uint32_t total_frames = rx_frames_ + opt_.tx_frames;
  umem_len_ = size_t{total_frames} * frame_size_;
  void* mem =
      mmap(nullptr, umem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED) return ErrnoStatus("mmap UMEM", errno);
  umem_ = static_cast<uint8_t*>(mem);
  tx_len_.assign(opt_.tx_frames, 0);

  fd_ = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus("socket(AF_XDP)", errno);
  xdp_umem_reg reg{};
  reg.addr = reinterpret_cast<uint64_t>(umem_);
  reg.len = umem_len_;
  reg.chunk_size = frame_size_;
  reg.headroom = 0;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg))) return ErrnoStatus("XDP_UMEM_REG", errno);
  uint32_t comp_size = opt_.tx_ring;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_FILL_RING, &fill_size, sizeof(fill_size)))
    return ErrnoStatus("XDP_UMEM_FILL_RING", errno);
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_COMPLETION_RING, &comp_size, sizeof(comp_size)))
    return ErrnoStatus("XDP_UMEM_COMPLETION_RING", errno);
  if (setsockopt(fd_, SOL_XDP, XDP_RX_RING, &opt_.rx_ring, sizeof(opt_.rx_ring)))
    return ErrnoStatus("XDP_RX_RING", errno);
  if (setsockopt(fd_, SOL_XDP, XDP_TX_RING, &opt_.tx_ring, sizeof(opt_.tx_ring)))
    return ErrnoStatus("XDP_TX_RING", errno);
  xdp_mmap_offsets off{};
  socklen_t optlen = sizeof(off);
  if (getsockopt(fd_, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen))
    return ErrnoStatus("XDP_MMAP_OFFSETS", errno);
  INC_RETURN_IF_ERROR(
      MapRing(&fill_, "fill", XDP_UMEM_PGOFF_FILL_RING, &off.fr, sizeof(uint64_t), fill_size));
  INC_RETURN_IF_ERROR(
      MapRing(&comp_, "completion", XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, sizeof(uint64_t), comp_size));
  INC_RETURN_IF_ERROR(MapRing(&rx_, "rx", XDP_PGOFF_RX_RING, &off.rx, sizeof(xdp_desc), opt_.rx_ring));
  INC_RETURN_IF_ERROR(MapRing(&tx_, "tx", XDP_PGOFF_TX_RING, &off.tx, sizeof(xdp_desc), opt_.tx_ring));

  // Every RX chunk goes to the fill ring before the socket is bound.
  auto* fq = static_cast<uint64_t*>(fill_.descs);
  for (uint32_t i = 0; i < rx_frames_; i++)
    fq[(fill_.cached_prod + i) & (fill_.size - 1)] = uint64_t{i} * frame_size_;
  fill_.cached_prod += rx_frames_;
  StoreRelease(fill_.producer, fill_.cached_prod);

  sockaddr_xdp sxdp{};
  sxdp.sxdp_family = AF_XDP;
  sxdp.sxdp_ifindex = ifindex_;
  sxdp.sxdp_queue_id = opt_.queue;
  sxdp.sxdp_flags = XDP_COPY | (opt_.need_wakeup ? XDP_USE_NEED_WAKEUP : 0);
  // A socket closed just before (this process or a previous one) keeps the
  // queue busy until the kernel's deferred release ran: retry for a while.
  int rc = -1;
  for (int attempt = 0; attempt < 100; attempt++) {
    rc = bind(fd_, reinterpret_cast<sockaddr*>(&sxdp), sizeof(sxdp));
    if (rc == 0 || errno != EBUSY) break;
    usleep(20000);
  }
  if (rc) return ErrnoStatus("bind AF_XDP (copy mode) to queue " + std::to_string(opt_.queue), errno);
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
  INC_RETURN_IF_ERROR(attachment_.Attach(bpf_program__fd(skel_->progs.xsk_redirect), ifindex_, opt_.ifname,
                                         opt_.xdp_generic));
  int key = static_cast<int>(opt_.queue);
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.xsks), &key, &fd_, 0))
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
  for (Ring* r : {&rx_, &tx_, &fill_, &comp_})
    if (r->map) munmap(r->map, r->map_len);
  if (fd_ >= 0) close(fd_);
  if (umem_) munmap(umem_, umem_len_);
}

void XskSocket::ReapCompletions() {
  comp_.cached_prod = LoadAcquire(comp_.producer);
  uint32_t n = comp_.cached_prod - comp_.cached_cons;
  if (!n) return;
  comp_.cached_cons += n;
  StoreRelease(comp_.consumer, comp_.cached_cons);
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
  return umem_ + (size_t{rx_frames_} + idx) * frame_size_;
}

void XskSocket::TxCommit(size_t len) {
  uint32_t idx = (tx_head_ + tx_pending_) % opt_.tx_frames;
  tx_len_[idx] = static_cast<uint32_t>(len);
  tx_pending_++;
}

Status XskSocket::Kick() {
  if (opt_.need_wakeup && !(LoadAcquire(tx_.flags) & XDP_RING_NEED_WAKEUP)) return Status::Ok();
  stats_.tx_kicks++;
  if (sendto(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return Status::Ok();
  if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR) {
    stats_.tx_busy++;
    return Status::Ok();
  }
  return ErrnoStatus("sendto (AF_XDP TX kick) on " + opt_.ifname, errno);
}

Status XskSocket::Flush() {
  auto* descs = static_cast<xdp_desc*>(tx_.descs);
  while (tx_pending_) {
    uint32_t n = tx_pending_ < kTxBatch ? tx_pending_ : kTxBatch;
    // tx_frames <= tx ring size and every unconsumed descriptor is in
    // flight, so the ring always has room for the pending frames.
    for (uint32_t i = 0; i < n; i++) {
      uint32_t idx = tx_head_ % opt_.tx_frames;
      xdp_desc& d = descs[tx_.cached_prod & (tx_.size - 1)];
      d.addr = (uint64_t{rx_frames_} + idx) * frame_size_;
      d.len = tx_len_[idx];
      d.options = 0;
      stats_.tx_bytes += d.len;
      tx_.cached_prod++;
      tx_head_++;
    }
    StoreRelease(tx_.producer, tx_.cached_prod);
    tx_pending_ -= n;
    tx_in_flight_ += n;
    stats_.tx_packets += n;
    // Kick until the kernel took this batch, so no frame waits for the next
    // call; a busy answer (completion ring full) is retried after reaping.
    for (int attempt = 0; attempt < 64; attempt++) {
      INC_RETURN_IF_ERROR(Kick());
      ReapCompletions();
      if (LoadAcquire(tx_.consumer) == tx_.cached_prod) break;
    }
  }
  return Status::Ok();
}

Expected<size_t> XskSocket::Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) {
  // Frames a busy kernel left in the TX ring go out now.
  if (LoadAcquire(tx_.consumer) != tx_.cached_prod) INC_RETURN_IF_ERROR(Kick());
  rx_.cached_prod = LoadAcquire(rx_.producer);
  uint32_t avail = rx_.cached_prod - rx_.cached_cons;
  if (!avail && timeout_ms != 0) {
    spin_.Wait([&] {
      rx_.cached_prod = LoadAcquire(rx_.producer);
      avail = rx_.cached_prod - rx_.cached_cons;
      return avail != 0;
    });
  }
  if (!avail && timeout_ms != 0) {
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll AF_XDP socket", errno);
    rx_.cached_prod = LoadAcquire(rx_.producer);
    avail = rx_.cached_prod - rx_.cached_cons;
  } else if (!avail && opt_.need_wakeup && (LoadAcquire(fill_.flags) & XDP_RING_NEED_WAKEUP)) {
    recvfrom(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  }
  if (avail > max_frames) avail = static_cast<uint32_t>(max_frames);
  if (!avail) return size_t{0};
  const auto* descs = static_cast<const xdp_desc*>(rx_.descs);
  auto* fq = static_cast<uint64_t*>(fill_.descs);
  for (uint32_t i = 0; i < avail; i++) {
    const xdp_desc& d = descs[(rx_.cached_cons + i) & (rx_.size - 1)];
    stats_.rx_packets++;
    stats_.rx_bytes += d.len;
    if (d.addr + d.len <= umem_len_) handler(umem_ + d.addr, d.len);
    // The fill ring holds every RX chunk not in the RX ring, so it has room.
    fq[(fill_.cached_prod + i) & (fill_.size - 1)] = d.addr & ~uint64_t{frame_size_ - 1};
  }
  rx_.cached_cons += avail;
  StoreRelease(rx_.consumer, rx_.cached_cons);
  fill_.cached_prod += avail;
  StoreRelease(fill_.producer, fill_.cached_prod);
  return size_t{avail};
}

PacketIoStats XskSocket::Stats() const {
  PacketIoStats s = stats_;
  s.cq_bogus = cq_bogus_;
  const XskKernelStats k = ReadXskKernelStats(fd_);
  s.rx_dropped = k.rx_dropped;
  s.rx_ring_full = k.rx_ring_full;
  s.rx_fill_empty = k.rx_fill_empty;
  s.tx_invalid = k.tx_invalid;
  return s;
}

}  // namespace inc::client
