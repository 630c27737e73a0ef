// SPDX-License-Identifier: Apache-2.0
#include "common/xsk.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace inc::xsk {
namespace {

bool IsPowerOfTwo(uint32_t v) {
  return v && !(v & (v - 1));
}

}  // namespace

Socket::~Socket() {
  for (Ring* r : {&rx, &tx, &fill, &completion})
    if (r->map) munmap(r->map, r->map_len);
  if (fd_ >= 0) close(fd_);
  if (umem_) munmap(umem_, umem_len_);
}

Status Socket::MapRing(Ring* ring, const char* name, uint64_t pgoff, const xdp_ring_offset& off,
                       size_t desc_size, uint32_t size) {
  const size_t len = off.desc + size_t{size} * desc_size;
  void* m =
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, static_cast<off_t>(pgoff));
  if (m == MAP_FAILED) return ErrnoStatus(std::string("mmap AF_XDP ") + name + " ring of " + what_, errno);
  ring->map = m;
  ring->map_len = len;
  auto* base = static_cast<uint8_t*>(m);
  ring->producer = reinterpret_cast<uint32_t*>(base + off.producer);
  ring->consumer = reinterpret_cast<uint32_t*>(base + off.consumer);
  ring->flags = reinterpret_cast<uint32_t*>(base + off.flags);
  ring->descs = base + off.desc;
  ring->size = size;
  ring->cached_prod = *ring->producer;
  ring->cached_cons = *ring->consumer;
  return Status::Ok();
}

Status Socket::Open(const Layout& layout) {
  what_ = layout.what;
  if (!IsPowerOfTwo(layout.chunk_size) || layout.chunk_size < 2048)
    return InvalidArgument("AF_XDP chunk size must be a power of two >= 2048, not " +
                           std::to_string(layout.chunk_size));
  for (uint32_t size : {layout.fill, layout.completion, layout.rx, layout.tx})
    if (size && !IsPowerOfTwo(size))
      return InvalidArgument("AF_XDP ring sizes must be powers of two, not " + std::to_string(size));
  if (!layout.chunks || !layout.fill || !layout.completion || (!layout.rx && !layout.tx))
    return InvalidArgument(
        "an AF_XDP socket needs UMEM chunks, fill and completion rings and an RX or TX ring");
  chunk_size_ = layout.chunk_size;
  umem_len_ = size_t{layout.chunks} * chunk_size_;
  void* mem = mmap(nullptr, umem_len_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (layout.populate ? MAP_POPULATE : 0), -1, 0);
  if (mem == MAP_FAILED) {
    umem_len_ = 0;
    return ErrnoStatus("allocate the AF_XDP UMEM of " + what_, errno);
  }
  umem_ = static_cast<uint8_t*>(mem);

  fd_ = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus("socket(AF_XDP)", errno);
  xdp_umem_reg reg{};
  reg.addr = reinterpret_cast<uint64_t>(umem_);
  reg.len = umem_len_;
  reg.chunk_size = chunk_size_;
  reg.headroom = 0;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)))
    return ErrnoStatus("XDP_UMEM_REG (" + what_ + ")", errno);
  struct {
    int option;
    uint32_t size;
    const char* name;
  } const sizes[] = {{XDP_UMEM_FILL_RING, layout.fill, "XDP_UMEM_FILL_RING"},
                     {XDP_UMEM_COMPLETION_RING, layout.completion, "XDP_UMEM_COMPLETION_RING"},
                     {XDP_RX_RING, layout.rx, "XDP_RX_RING"},
                     {XDP_TX_RING, layout.tx, "XDP_TX_RING"}};
  for (const auto& s : sizes)
    if (s.size && setsockopt(fd_, SOL_XDP, s.option, &s.size, sizeof(s.size)))
      return ErrnoStatus(std::string(s.name) + " (" + what_ + ")", errno);
  xdp_mmap_offsets off{};
  socklen_t optlen = sizeof(off);
  if (getsockopt(fd_, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen))
    return ErrnoStatus("XDP_MMAP_OFFSETS", errno);
  INC_RETURN_IF_ERROR(
      MapRing(&fill, "fill", XDP_UMEM_PGOFF_FILL_RING, off.fr, sizeof(uint64_t), layout.fill));
  INC_RETURN_IF_ERROR(MapRing(&completion, "completion", XDP_UMEM_PGOFF_COMPLETION_RING, off.cr,
                              sizeof(uint64_t), layout.completion));
  if (layout.rx)
    INC_RETURN_IF_ERROR(MapRing(&rx, "rx", XDP_PGOFF_RX_RING, off.rx, sizeof(xdp_desc), layout.rx));
  if (layout.tx)
    INC_RETURN_IF_ERROR(MapRing(&tx, "tx", XDP_PGOFF_TX_RING, off.tx, sizeof(xdp_desc), layout.tx));
  return Status::Ok();
}

void Socket::StockFill(uint32_t first, uint32_t n) {
  uint64_t* fq = fill.addrs();
  for (uint32_t i = 0; i < n; i++)
    fq[(fill.cached_prod + i) & (fill.size - 1)] = uint64_t{first + i} * chunk_size_;
  fill.cached_prod += n;
  StoreRelease(fill.producer, fill.cached_prod);
}

Status Socket::Bind(uint32_t ifindex, uint32_t queue, uint16_t extra_flags, int busy_wait_ms) {
  sockaddr_xdp sxdp{};
  sxdp.sxdp_family = AF_XDP;
  sxdp.sxdp_ifindex = ifindex;
  sxdp.sxdp_queue_id = queue;
  sxdp.sxdp_flags = static_cast<uint16_t>(XDP_COPY | extra_flags);
  constexpr int kRetryMs = 20;
  int rc = -1;
  for (int waited = 0;; waited += kRetryMs) {
    rc = bind(fd_, reinterpret_cast<sockaddr*>(&sxdp), sizeof(sxdp));
    if (rc == 0 || errno != EBUSY || waited >= busy_wait_ms) break;
    usleep(kRetryMs * 1000);
  }
  if (rc)
    return ErrnoStatus("bind AF_XDP socket (copy mode) of " + what_ + " to queue " + std::to_string(queue),
                       errno);
  return Status::Ok();
}

KernelStats ReadKernelStats(int fd) {
  KernelStats s;
  xdp_statistics ks{};
  socklen_t len = sizeof(ks);
  if (fd >= 0 && getsockopt(fd, SOL_XDP, XDP_STATISTICS, &ks, &len) == 0) {
    s.rx_dropped = ks.rx_dropped;
    s.rx_ring_full = ks.rx_ring_full;
    s.rx_fill_empty = ks.rx_fill_ring_empty_descs;
    s.tx_invalid = ks.tx_invalid_descs;
  }
  return s;
}

}  // namespace inc::xsk
