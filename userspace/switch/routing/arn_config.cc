// SPDX-License-Identifier: Apache-2.0
#include "switch/routing/arn_config.h"

#include <set>

#include "common/secret_file.h"

namespace inc::sw {

std::string RoutingSettings::NameOf(uint32_t id) const {
  auto it = names.find(id);
  return it == names.end() ? (id ? "switch#" + std::to_string(id) : "") : it->second;
}

Expected<RoutingSettings> ParseRoutingSettings(const v1::SwitchAgentConfig& config,
                                               const std::vector<PortInfo>& ports) {
  RoutingSettings s;
  const v1::ArnConfig& a = config.arn();
  std::map<std::string, uint32_t> ids;  // switch name -> id
  std::map<std::string, size_t> port_index;
  for (size_t i = 0; i < ports.size(); i++) port_index[ports[i].name] = i;

  s.arn_enabled = a.enabled();
  s.switch_id = a.switch_id();
  if (s.arn_enabled && s.switch_id == 0)
    return InvalidArgument("arn.switch_id: required (non-zero) when arn.enabled");
  if (s.switch_id) {
    ids[config.switch_name()] = s.switch_id;
    s.names[s.switch_id] = config.switch_name();
  }
  for (int i = 0; i < a.group_size(); i++) {
    const auto& p = a.group(i);
    std::string f = "arn.group[" + std::to_string(i) + "]";
    if (p.switch_name().empty()) return InvalidArgument(f + ".switch_name: required");
    if (p.switch_id() == 0) return InvalidArgument(f + ".switch_id: required (non-zero)");
    if (s.names.count(p.switch_id()))
      return InvalidArgument(f + ".switch_id: " + std::to_string(p.switch_id()) + " is already " +
                             s.names[p.switch_id()]);
    if (ids.count(p.switch_name()))
      return InvalidArgument(f + ".switch_name: " + p.switch_name() + " listed twice");
    auto ip = Ipv4::Parse(p.address());
    if (!ip.ok()) return InvalidArgument(f + ".address: " + ip.status().message());
    ids[p.switch_name()] = p.switch_id();
    s.names[p.switch_id()] = p.switch_name();
    s.peers[p.switch_id()] = *ip;
  }
  auto switch_id = [&](const std::string& name, const std::string& field) -> Expected<uint32_t> {
    if (name.empty()) return uint32_t{0};
    auto it = ids.find(name);
    if (it == ids.end())
      return InvalidArgument(field + ": switch " + name +
                             " is not in arn.group (nor this switch with arn.switch_id)");
    return it->second;
  };

  auto key = ReadKeySetting(a.key_hex(), a.key_file(), "arn.key_hex", "arn.key_file");
  if (!key.ok()) return key.status();
  if (*key) s.key = **key;
  auto accept =
      ReadKeySetting(a.accept_key_hex(), a.accept_key_file(), "arn.accept_key_hex", "arn.accept_key_file");
  if (!accept.ok()) return accept.status();
  if (*accept && !*key)
    return InvalidArgument(
        std::string(a.accept_key_hex().empty() ? "arn.accept_key_file" : "arn.accept_key_hex") +
        ": set without arn.key_hex or arn.key_file (an accepted key is for a rotation "
        "between two keys)");
  s.accept_key = *accept;
  if (a.listen_port() > 65535) return InvalidArgument("arn.listen_port: above 65535");
  if (a.listen_port()) s.listen_port = static_cast<uint16_t>(a.listen_port());
  if (!a.listen_address().empty()) {
    auto ip = Ipv4::Parse(a.listen_address());
    if (!ip.ok()) return InvalidArgument("arn.listen_address: " + ip.status().message());
    s.listen_address = *ip;
  }
  if (a.sample_interval_ms()) s.sample_interval_ms = a.sample_interval_ms();
  if (a.repeat_interval_ms()) s.repeat_interval_ms = a.repeat_interval_ms();
  if (a.hold_ms()) s.hold_ms = a.hold_ms();
  if (s.sample_interval_ms < 10) return InvalidArgument("arn.sample_interval_ms: at least 10");
  if (s.hold_ms <= s.repeat_interval_ms)
    return InvalidArgument("arn.hold_ms: must exceed repeat_interval_ms, or notices expire between repeats");
  if (a.congested_above() != 0) s.detector.congested_above = a.congested_above();
  if (a.clear_below() != 0) s.detector.clear_below = a.clear_below();
  if (a.raise_samples()) s.detector.raise_samples = a.raise_samples();
  if (a.clear_samples()) s.detector.clear_samples = a.clear_samples();
  s.detector.severity_levels[0] = s.detector.congested_above;
  if (s.detector.severity_levels[1] <= s.detector.congested_above) s.detector.severity_levels.resize(1);
  if (auto st = arn::Validate(s.detector); !st.ok()) return InvalidArgument("arn: " + st.message());

  std::set<std::string> watched;
  for (int i = 0; i < a.ports_size(); i++) {
    const auto& p = a.ports(i);
    std::string f = "arn.ports[" + std::to_string(i) + "]";
    auto it = port_index.find(p.port());
    if (it == port_index.end())
      return InvalidArgument(f + ".port: " + p.port() + " is not one of the switch's ports");
    if (!watched.insert(p.port()).second) return InvalidArgument(f + ".port: " + p.port() + " listed twice");
    if (p.capacity_bps() == 0) return InvalidArgument(f + ".capacity_bps: required");
    auto peer = switch_id(p.peer_switch(), f + ".peer_switch");
    if (!peer.ok()) return peer.status();
    s.ports.push_back({p.port(), static_cast<uint32_t>(it->second), p.capacity_bps(), *peer});
  }

  std::set<Prefix> seen;
  for (int i = 0; i < config.routes_size(); i++) {
    const auto& r = config.routes(i);
    std::string f = "routes[" + std::to_string(i) + "]";
    arn::PlannedRoute pr;
    auto prefix = Prefix::Parse(r.prefix());
    if (!prefix.ok()) return InvalidArgument(f + ".prefix: " + prefix.status().message());
    pr.prefix = *prefix;
    if (!seen.insert(pr.prefix).second) return InvalidArgument(f + ".prefix: " + r.prefix() + " given twice");
    auto dest = switch_id(r.dest_switch(), f + ".dest_switch");
    if (!dest.ok()) return dest.status();
    pr.dest_switch = *dest;
    if (r.hops_size() == 0) return InvalidArgument(f + ".hops: at least one next hop");
    if (r.hops_size() > INC_BPT_MAX_HOPS)
      return InvalidArgument(f + ".hops: at most " + std::to_string(INC_BPT_MAX_HOPS));
    for (int j = 0; j < r.hops_size(); j++) {
      const auto& h = r.hops(j);
      std::string hf = f + ".hops[" + std::to_string(j) + "]";
      if (!port_index.count(h.port()))
        return InvalidArgument(hf + ".port: " + h.port() + " is not one of the switch's ports");
      auto mac = Mac::Parse(h.mac());
      if (!mac.ok()) return InvalidArgument(hf + ".mac: " + mac.status().message());
      if (h.cost() > 0xffff) return InvalidArgument(hf + ".cost: at most 65535");
      auto via = switch_id(h.via_switch(), hf + ".via_switch");
      if (!via.ok()) return via.status();
      arn::PlannedHop ph;
      ph.hop.port = h.port();
      ph.hop.mac = *mac;
      ph.hop.cost = static_cast<uint16_t>(h.cost());
      ph.via = *via;
      pr.hops.push_back(ph);
    }
    s.plan.push_back(std::move(pr));
  }
  // The switch's own addresses stay with the kernel even inside a route.
  if (!s.plan.empty()) {
    for (const auto& p : ports) {
      Prefix own{p.ip, 32};
      if (p.ip.host == 0 || !seen.insert(own).second) continue;
      arn::PlannedRoute local;
      local.prefix = own;
      s.plan.push_back(local);
    }
  }
  return s;
}

}  // namespace inc::sw
