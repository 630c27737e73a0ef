#pragma once
// The kernel's drop counters of an AF_XDP socket (XDP_STATISTICS), shared by
// libinc's transport and the switch's credit hold queue.

#include <linux/if_xdp.h>
#include <sys/socket.h>

#include <cstdint>

namespace inc {

struct XskKernelStats {
  uint64_t rx_dropped = 0;     // frames the socket dropped (no room, invalid)
  uint64_t rx_ring_full = 0;   // frames dropped because the RX ring was full
  uint64_t rx_fill_empty = 0;  // times the fill ring had no buffer
  uint64_t tx_invalid = 0;     // TX descriptors the kernel refused
};

// All zero when the kernel does not answer (an old kernel or a closed fd):
// the counters are diagnostics, never a reason to fail.
inline XskKernelStats ReadXskKernelStats(int fd) {
  XskKernelStats s;
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

}  // namespace inc
