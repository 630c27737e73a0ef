// SPDX-License-Identifier: Apache-2.0
// AF_XDP on the kernel's own API (linux/if_xdp.h), shared by libinc's
// transport (client/xsk_socket.h) and the switch's credit hold queue
// (datapath/hold_queue.h): a socket with its UMEM registered and its rings
// sized and mapped, the ring indices with the memory order the kernel
// expects, and the kernel's drop counters. Copy mode only: veth and the
// lab's NICs have no zero-copy driver.
#pragma once

#include <linux/if_xdp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace inc::xsk {

// The kernel writes a ring's producer (RX, completion) or consumer (TX,
// fill) concurrently: read with acquire, publish with release.
inline uint32_t LoadAcquire(const uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline void StoreRelease(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

// One mapped ring; `cached_*` are the user's private copies of the indices.
struct Ring {
  uint32_t* producer = nullptr;
  uint32_t* consumer = nullptr;
  uint32_t* flags = nullptr;
  void* descs = nullptr;
  uint32_t size = 0;  // entries, a power of two
  uint32_t cached_prod = 0;
  uint32_t cached_cons = 0;
  void* map = nullptr;
  size_t map_len = 0;

  uint64_t* addrs() const { return static_cast<uint64_t*>(descs); }   // fill, completion
  xdp_desc* frames() const { return static_cast<xdp_desc*>(descs); }  // rx, tx
};

struct Layout {
  uint32_t chunks = 0;      // UMEM chunks
  uint32_t chunk_size = 0;  // bytes, a power of two >= 2048
  // Ring sizes (powers of two); 0 = no such ring. The kernel wants a fill
  // and a completion ring on every socket that binds a UMEM.
  uint32_t fill = 0, completion = 0, rx = 0, tx = 0;
  bool populate = true;  // fault the UMEM in now (MAP_POPULATE)
  std::string what;      // for error messages: "hold queue of eth1"
};

// An AF_XDP socket with its UMEM and rings; everything is released by the
// destructor. Open() leaves it unbound, so that the fill ring can be
// stocked first.
class Socket {
 public:
  Socket() = default;
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  Status Open(const Layout& layout);
  // Puts chunks [first, first + n) into the fill ring.
  void StockFill(uint32_t first, uint32_t n);
  // Binds in copy mode (XDP_COPY | extra_flags). A socket on the same queue
  // that was just closed keeps it busy until the kernel's deferred release
  // ran, so EBUSY is retried for up to `busy_wait_ms`.
  Status Bind(uint32_t ifindex, uint32_t queue, uint16_t extra_flags, int busy_wait_ms);

  int fd() const { return fd_; }
  uint8_t* umem() const { return umem_; }
  size_t umem_len() const { return umem_len_; }
  uint32_t chunk_size() const { return chunk_size_; }
  // Start of the chunk holding UMEM offset `addr`.
  uint64_t ChunkOf(uint64_t addr) const { return addr & ~uint64_t{chunk_size_ - 1}; }

  Ring fill, completion, rx, tx;

 private:
  Status MapRing(Ring* ring, const char* name, uint64_t pgoff, const xdp_ring_offset& off, size_t desc_size,
                 uint32_t size);

  int fd_ = -1;
  uint8_t* umem_ = nullptr;
  size_t umem_len_ = 0;
  uint32_t chunk_size_ = 0;
  std::string what_;
};

struct KernelStats {
  uint64_t rx_dropped = 0;     // frames the socket dropped (no room, invalid)
  uint64_t rx_ring_full = 0;   // frames dropped because the RX ring was full
  uint64_t rx_fill_empty = 0;  // times the fill ring had no buffer
  uint64_t tx_invalid = 0;     // TX descriptors the kernel refused
};

// All zero when the kernel does not answer (an old kernel or a closed fd):
// the counters are diagnostics, never a reason to fail.
KernelStats ReadKernelStats(int fd);

}  // namespace inc::xsk
