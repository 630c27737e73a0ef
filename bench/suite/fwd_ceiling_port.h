// SPDX-License-Identifier: Apache-2.0
// The per-port state of the packet-forwarding ceiling (bpf/bench/fwd_ceiling.bpf.c):
// a worker-facing port, its member's and its own address and QPN, and the
// ICRC deltas the program XORs into a reflected frame.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/fwd_ceiling.h"
#include "common/net.h"
#include "common/status.h"

static_assert(sizeof(fwd_port) == 8 + 4 * FWD_MAX_UDP_LEN,
              "fwd_port layout (map value of bpf/bench/fwd_ceiling.bpf.c)");

namespace inc::bench {

struct PortSpec {
  std::string iface;
  unsigned ifindex = 0;
  Ipv4 member_ip, switch_ip;
  uint32_t member_qpn = 0, switch_qpn = 0;
};

// "IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN"; the interface must exist.
Expected<PortSpec> ParsePort(const std::string& text);

// The map value for a port: its member QPN and, per UDP length, the XOR of
// the ICRC of a contribution (member -> switch IP, DestQP = switch QPN) and
// that of the result the program makes of it (addresses swapped, DestQP =
// member QPN, RESULT flag). The ICRC is affine over GF(2), so the delta
// depends only on the changed bits and the length.
Status FillPort(const PortSpec& p, fwd_port* out);

}  // namespace inc::bench
