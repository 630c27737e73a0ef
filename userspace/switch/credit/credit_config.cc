// SPDX-License-Identifier: Apache-2.0
#include "switch/credit/credit_config.h"

#include <map>
#include <set>
#include <tuple>

#include "common/secret_file.h"
#include "common/siphash.h"

namespace inc::sw {

bool CreditFlowId::operator<(const CreditFlowId& o) const {
  return std::tie(src.host, dst.host, udp_sport, dest_qpn) <
         std::tie(o.src.host, o.dst.host, o.udp_sport, o.dest_qpn);
}

std::string CreditFlowId::ToString() const {
  return src.ToString() + ":" + std::to_string(udp_sport) + ">" + dst.ToString() + " qp " +
         std::to_string(dest_qpn);
}

Expected<CreditFlowId> ParseCreditFlowId(const v1::CreditFlowKey& key, const std::string& field) {
  CreditFlowId id;
  auto src = Ipv4::Parse(key.src_ip());
  if (!src.ok()) return InvalidArgument(field + ".src_ip: " + src.status().message());
  auto dst = Ipv4::Parse(key.dst_ip());
  if (!dst.ok()) return InvalidArgument(field + ".dst_ip: " + dst.status().message());
  if (key.udp_sport() == 0 || key.udp_sport() > 65535)
    return InvalidArgument(field + ".udp_sport: " + std::to_string(key.udp_sport()) + " is not in 1..65535");
  if (key.dest_qpn() == 0 || key.dest_qpn() > 0xFFFFFF)
    return InvalidArgument(field + ".dest_qpn: " + std::to_string(key.dest_qpn()) + " is not in 1..0xFFFFFF");
  id.src = *src;
  id.dst = *dst;
  id.udp_sport = static_cast<uint16_t>(key.udp_sport());
  id.dest_qpn = key.dest_qpn();
  return id;
}

Expected<CreditSettings> ParseCreditSettings(const v1::CreditConfig& c, const std::vector<PortInfo>& ports) {
  CreditSettings s;
  s.enabled = c.enabled();
  if (!s.enabled) return s;
  if (c.reserve_bytes()) s.reserve_bytes = c.reserve_bytes();
  if (s.reserve_bytes < 4096 || s.reserve_bytes > (uint64_t{1} << 40))
    return InvalidArgument("credit.reserve_bytes: " + std::to_string(s.reserve_bytes) +
                           " is not in 4096..2^40 (it must hold a full frame)");
  s.megabyte_unit = c.megabyte_unit();
  if (s.megabyte_unit && s.reserve_bytes % (1 << 20))
    return InvalidArgument("credit.reserve_bytes: " + std::to_string(s.reserve_bytes) +
                           " is not a whole number of MB, which megabyte_unit needs");
  if (c.return_quantum_bytes()) s.return_quantum_bytes = c.return_quantum_bytes();
  if (s.return_quantum_bytes == 0 || s.return_quantum_bytes > s.reserve_bytes / 2)
    return InvalidArgument("credit.return_quantum_bytes: " + std::to_string(s.return_quantum_bytes) +
                           " must be at most half of reserve_bytes (" + std::to_string(s.reserve_bytes) +
                           "), or the sender stalls waiting for a return");
  if (c.return_flush_ms()) s.return_flush_ms = c.return_flush_ms();
  if (c.heartbeat_ms()) s.heartbeat_ms = c.heartbeat_ms();
  if (c.refresh_ms()) s.refresh_ms = c.refresh_ms();
  if (s.heartbeat_ms <= s.return_flush_ms)
    return InvalidArgument("credit.heartbeat_ms: " + std::to_string(s.heartbeat_ms) +
                           " must exceed return_flush_ms (" + std::to_string(s.return_flush_ms) +
                           "), or healthy hops are declared failed");
  auto key = ReadKeySetting(c.key_hex(), c.key_file(), "credit.key_hex", "credit.key_file");
  if (!key.ok()) return key.status();
  if (*key) {
    s.key = **key;
    s.authenticate = true;
    s.key_id = c.key_id();
  } else if (c.key_id()) {
    return InvalidArgument("credit.key_id: set without credit.key_hex or credit.key_file");
  }
  for (int i = 0; i < c.accept_keys_size(); i++) {
    const auto& a = c.accept_keys(i);
    const std::string f = "credit.accept_keys[" + std::to_string(i) + "]";
    if (!s.authenticate)
      return InvalidArgument(f +
                             ": set without credit.key_hex or credit.key_file (accepted keys are for a "
                             "rotation between keys)");
    // One id names one key: a second key under the signing key's id, or
    // twice the same id, would make a receiver's choice ambiguous.
    if (a.key_id() == s.key_id)
      return InvalidArgument(f + ".key_id: " + std::to_string(a.key_id()) +
                             " is the signing key's (credit.key_id); a new key needs a new id");
    if (s.accept_keys.count(a.key_id()))
      return InvalidArgument(f + ".key_id: " + std::to_string(a.key_id()) + " listed twice");
    auto k = ReadKeySetting(a.key_hex(), a.key_file(), f + ".key_hex", f + ".key_file");
    if (!k.ok()) return k.status();
    if (!*k) return InvalidArgument(f + ".key_hex: required (or " + f + ".key_file)");
    s.accept_keys[a.key_id()] = **k;
  }

  std::map<std::string, const PortInfo*> by_name;
  for (const auto& p : ports) by_name[p.name] = &p;
  std::map<std::string, size_t> index;
  for (int i = 0; i < c.ports_size(); i++) {
    const auto& p = c.ports(i);
    const std::string f = "credit.ports[" + std::to_string(i) + "]";
    auto it = by_name.find(p.port());
    if (it == by_name.end())
      return InvalidArgument(f + ".port: \"" + p.port() + "\" is not one of the switch's ports");
    if (index.count(p.port())) return InvalidArgument(f + ".port: " + p.port() + " listed twice");
    CreditPort cp;
    cp.name = p.port();
    cp.ifindex = it->second->ifindex;
    auto ip = Ipv4::Parse(p.neighbor_ip());
    if (!ip.ok()) return InvalidArgument(f + ".neighbor_ip: " + ip.status().message());
    cp.neighbor = *ip;
    auto mac = Mac::Parse(p.next_hop_mac());
    if (!mac.ok()) return InvalidArgument(f + ".next_hop_mac: " + mac.status().message());
    cp.next_hop_mac = *mac;
    cp.cost = p.cost();
    index[cp.name] = s.ports.size();
    s.ports.push_back(cp);
  }
  if (s.ports.empty()) return InvalidArgument("credit.ports: at least one port must run credit signalling");

  std::set<CreditFlowId> seen;
  for (int i = 0; i < c.flows_size(); i++) {
    const std::string f = "credit.flows[" + std::to_string(i) + "]";
    auto id = ParseCreditFlowId(c.flows(i).flow(), f + ".flow");
    if (!id.ok()) return id.status();
    if (!seen.insert(*id).second) return InvalidArgument(f + ".flow: " + id->ToString() + " listed twice");
    CreditOriginFlow flow;
    flow.id = *id;
    for (int j = 0; j < c.flows(i).ports_size(); j++) {
      auto it = index.find(c.flows(i).ports(j));
      if (it == index.end())
        return InvalidArgument(f + ".ports[" + std::to_string(j) + "]: \"" + c.flows(i).ports(j) +
                               "\" is not in credit.ports");
      flow.ports.push_back(it->second);
    }
    if (flow.ports.empty())
      for (size_t k = 0; k < s.ports.size(); k++) flow.ports.push_back(k);
    s.flows.push_back(std::move(flow));
  }
  for (int i = 0; i < c.local_prefixes_size(); i++) {
    auto p = Prefix::Parse(c.local_prefixes(i));
    if (!p.ok())
      return InvalidArgument("credit.local_prefixes[" + std::to_string(i) + "]: " + p.status().message());
    s.local_prefixes.push_back(*p);
  }
  if (s.flows.empty() && s.local_prefixes.empty() && s.ports.size() < 2)
    return InvalidArgument(
        "credit: no flows, no local_prefixes and one port: this switch would neither start, end nor carry a "
        "credit flow");
  return s;
}

}  // namespace inc::sw
