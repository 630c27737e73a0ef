// SPDX-License-Identifier: Apache-2.0
// The route model shared by adaptive routing (userspace/arn: which next hops
// a prefix has and which of them ARN marked), the switch's configuration and
// the XDP forwarder's table (datapath/forwarding.h, which writes it into the
// best-path map). Pure values: no BPF here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/status.h"

namespace inc {

struct Prefix {
  Ipv4 addr;
  uint8_t length = 32;
  static Expected<Prefix> Parse(const std::string& text);  // "10.0.2.0/24" or "10.0.2.7"
  static uint32_t MaskOf(uint8_t length) { return length == 0 ? 0 : ~uint32_t{0} << (32 - length); }
  std::string ToString() const;
  bool Contains(Ipv4 ip) const;
  bool operator<(const Prefix& o) const {
    return addr.host != o.addr.host ? addr.host < o.addr.host : length < o.length;
  }
  bool operator==(const Prefix& o) const { return addr == o.addr && length == o.length; }
};

struct NextHop {
  std::string port;   // egress interface of this switch
  Mac mac;            // the next hop's MAC
  uint16_t cost = 0;  // lower is preferred
  uint8_t flags = 0;  // INC_HOP_CONGESTED / INC_HOP_FAILED (from ARN; bpf/include/inc_forward.h)
  bool operator==(const NextHop& o) const {
    return port == o.port && mac == o.mac && cost == o.cost && flags == o.flags;
  }
};

// No hops: the prefix is one of the switch's own addresses and goes to the
// kernel (so a covering prefix never forwards traffic meant for the switch).
struct Route {
  Prefix prefix;
  std::vector<NextHop> hops;
  bool operator==(const Route& o) const { return prefix == o.prefix && hops == o.hops; }
};

}  // namespace inc
