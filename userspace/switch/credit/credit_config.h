// SPDX-License-Identifier: Apache-2.0
// The credit part of a switch's config (SwitchAgentConfig.credit) translated
// to domain types at the edge; every error names its field. See
// docs/credit.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/route.h"
#include "common/siphash.h"
#include "common/status.h"
#include "inc/v1/inc.pb.h"
#include "switch/config.h"

namespace inc::sw {

// A RoCEv2 flow as the credit gate and the RSVP SESSION object match it.
struct CreditFlowId {
  Ipv4 src, dst;
  uint16_t udp_sport = 0;
  uint32_t dest_qpn = 0;  // 24 bits
  bool operator==(const CreditFlowId& o) const {
    return src == o.src && dst == o.dst && udp_sport == o.udp_sport && dest_qpn == o.dest_qpn;
  }
  bool operator<(const CreditFlowId& o) const;
  std::string ToString() const;  // "10.0.0.2:49152>10.0.3.2 qp 4096"
};

struct CreditPort {
  std::string name;
  uint32_t ifindex = 0;
  Ipv4 neighbor;     // the credit-aware device the port's path reaches
  Mac next_hop_mac;  // the attached next hop
  uint32_t cost = 0;
};

struct CreditOriginFlow {
  CreditFlowId id;
  std::vector<size_t> ports;  // indexes into CreditSettings::ports
};

struct CreditSettings {
  bool enabled = false;
  uint64_t reserve_bytes = 65536;
  bool megabyte_unit = false;
  uint64_t return_quantum_bytes = 16384;
  uint32_t return_flush_ms = 5;
  uint32_t heartbeat_ms = 100;
  uint32_t refresh_ms = 1000;
  bool authenticate = false;
  SipKey key{};
  uint32_t key_id = 0;
  // Keys believed besides the signing key, by key id (rotation).
  std::map<uint32_t, SipKey> accept_keys;
  std::vector<CreditPort> ports;
  std::vector<CreditOriginFlow> flows;
  std::vector<Prefix> local_prefixes;
};

Expected<CreditFlowId> ParseCreditFlowId(const v1::CreditFlowKey& key, const std::string& field);
// `ports` are the switch's data ports (credit ports must be among them).
Expected<CreditSettings> ParseCreditSettings(const v1::CreditConfig& config,
                                             const std::vector<PortInfo>& ports);

}  // namespace inc::sw
