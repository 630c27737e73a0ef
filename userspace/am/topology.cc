// SPDX-License-Identifier: Apache-2.0
#include "am/topology.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace inc::am {

const char* SwitchKindName(SwitchKind kind) {
  return kind == SwitchKind::kSpine ? "spine" : "leaf";
}

const char* RoleName(TreeRole role) {
  switch (role) {
    case TreeRole::kSingle: return "SINGLE";
    case TreeRole::kLeaf: return "LEAF";
    case TreeRole::kRoot: return "ROOT";
  }
  return "ROLE_UNSPECIFIED";
}

const char* TreeStateName(TreeState state) {
  switch (state) {
    case TreeState::kPending: return "TREE_PENDING";
    case TreeState::kActive: return "TREE_ACTIVE";
    case TreeState::kFailed: return "TREE_FAILED";
    case TreeState::kDestroyed: return "TREE_DESTROYED";
  }
  return "TREE_STATE_UNSPECIFIED";
}

const TopoHost* Topology::HostByIp(const Ipv4& ip) const {
  for (const auto& [name, host] : hosts)
    if (host.has_ip && host.ip == ip) return &host;
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> Topology::LinksBetween(const std::string& x,
                                                                        const std::string& y) const {
  auto it = adjacency.find({x, y});
  return it == adjacency.end() ? std::vector<std::pair<std::string, std::string>>{} : it->second;
}

bool Topology::PortUsed(const std::string& sw, const std::string& port) const {
  for (const auto& l : links)
    if ((l.a == sw && l.a_port == port) || (l.b == sw && l.b_port == port)) return true;
  for (const auto& [name, h] : hosts)
    if (h.switch_name == sw && h.switch_port == port) return true;
  return false;
}

const PlanSwitch* TreePlan::Find(const std::string& name) const {
  for (const auto& s : switches)
    if (s.name == name) return &s;
  return nullptr;
}

uint32_t MaxElemsForMtu(uint32_t eth_mtu) {
  constexpr uint32_t kRoceHeaders = 80;  // rxe's RXE_MAX_HDR_LENGTH
  constexpr uint32_t kIncHeader = 24;
  if (eth_mtu < kRoceHeaders + 256) return 0;
  uint32_t ib_mtu = 256;
  while (ib_mtu < 4096 && ib_mtu * 2 <= eth_mtu - kRoceHeaders) ib_mtu *= 2;
  return (ib_mtu - kIncHeader) / 4;
}

Expected<Topology> TopologyFromProto(const v1::TopologyFile& file) {
  Topology topo;
  // (switch, port) -> what uses it, for "port used twice" errors.
  std::map<std::pair<std::string, std::string>, std::string> port_users;
  auto claim_port = [&](const std::string& sw, const std::string& port, const std::string& user) -> Status {
    auto [it, inserted] = port_users.emplace(std::make_pair(sw, port), user);
    if (!inserted)
      return InvalidArgument("switch \"" + sw + "\" port \"" + port + "\" is used by both " + it->second +
                             " and " + user);
    return Status::Ok();
  };

  for (int i = 0; i < file.switches_size(); ++i) {
    const auto& s = file.switches(i);
    const std::string where = "switches[" + std::to_string(i) + "]";
    if (s.name().empty()) return InvalidArgument(where + ": name is empty");
    TopoSwitch sw;
    sw.name = s.name();
    if (s.kind() == "leaf") {
      sw.kind = SwitchKind::kLeaf;
    } else if (s.kind() == "spine") {
      sw.kind = SwitchKind::kSpine;
    } else {
      return InvalidArgument(where + " (\"" + s.name() + "\"): kind \"" + s.kind() +
                             "\" is not \"leaf\" or \"spine\"");
    }
    if (!topo.switches.emplace(sw.name, sw).second)
      return InvalidArgument(where + ": duplicate switch name \"" + s.name() + "\"");
  }

  std::map<uint32_t, std::string> host_by_ip;
  for (int i = 0; i < file.hosts_size(); ++i) {
    const auto& h = file.hosts(i);
    const std::string where = "hosts[" + std::to_string(i) + "]";
    if (h.name().empty()) return InvalidArgument(where + ": name is empty");
    const std::string named = where + " (\"" + h.name() + "\")";
    if (topo.switches.count(h.name())) return InvalidArgument(named + ": name is already a switch name");
    if (topo.hosts.count(h.name()))
      return InvalidArgument(where + ": duplicate host name \"" + h.name() + "\"");
    TopoHost host;
    host.name = h.name();
    if (!h.ip().empty()) {
      auto ip = Ipv4::Parse(h.ip());
      if (!ip) return ip.status().WithContext(named + ": ip");
      host.ip = *ip;
      host.has_ip = true;
      auto [it, inserted] = host_by_ip.emplace(ip->host, h.name());
      if (!inserted)
        return InvalidArgument(named + ": ip " + h.ip() + " is also host \"" + it->second + "\"'s");
    }
    if (!h.mac().empty()) {
      auto mac = Mac::Parse(h.mac());
      if (!mac) return mac.status().WithContext(named + ": mac");
      host.mac = *mac;
      host.has_mac = true;
    }
    if (h.switch_name().empty())
      return InvalidArgument(named + ": switch_name is empty (every host attaches to a switch)");
    if (!topo.switches.count(h.switch_name()))
      return InvalidArgument(named + ": switch_name \"" + h.switch_name() +
                             "\" is not a switch of the topology");
    if (h.switch_port().empty())
      return InvalidArgument(named + ": switch_port is empty (the switch port toward the host)");
    host.switch_name = h.switch_name();
    host.switch_port = h.switch_port();
    INC_RETURN_IF_ERROR(claim_port(host.switch_name, host.switch_port, "host \"" + h.name() + "\""));
    topo.hosts.emplace(host.name, host);
  }

  for (int i = 0; i < file.links_size(); ++i) {
    const auto& l = file.links(i);
    const std::string where = "links[" + std::to_string(i) + "] (" + l.a() + ":" + l.a_port() + " - " +
                              l.b() + ":" + l.b_port() + ")";
    for (const std::string* end : {&l.a(), &l.b()}) {
      if (end->empty()) return InvalidArgument(where + ": a switch name is empty");
      if (!topo.switches.count(*end)) return InvalidArgument(where + ": unknown switch \"" + *end + "\"");
    }
    if (l.a() == l.b()) return InvalidArgument(where + ": links a switch to itself");
    if (l.a_port().empty() || l.b_port().empty()) return InvalidArgument(where + ": a port name is empty");
    INC_RETURN_IF_ERROR(claim_port(l.a(), l.a_port(), "links[" + std::to_string(i) + "]"));
    INC_RETURN_IF_ERROR(claim_port(l.b(), l.b_port(), "links[" + std::to_string(i) + "]"));
    topo.links.push_back(TopoLink{l.a(), l.a_port(), l.b(), l.b_port()});
    topo.adjacency[{l.a(), l.b()}].emplace_back(l.a_port(), l.b_port());
    topo.adjacency[{l.b(), l.a()}].emplace_back(l.b_port(), l.a_port());
  }
  for (auto& [pair, ports] : topo.adjacency) std::sort(ports.begin(), ports.end());
  return topo;
}

Status ParseJsonText(const std::string& text, const std::string& source, google::protobuf::Message* msg) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(text, msg, opts);
  if (!st.ok())
    return InvalidArgument(source + ": not a valid " + msg->GetTypeName() +
                           " JSON: " + std::string(st.message()));
  return Status::Ok();
}

Status ReadJsonFile(const std::string& path, google::protobuf::Message* msg) {
  std::ifstream in(path);
  if (!in) return ErrnoStatus("open " + path, errno);
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseJsonText(buf.str(), path, msg);
}

Expected<Topology> LoadTopologyFile(const std::string& path) {
  v1::TopologyFile file;
  INC_RETURN_IF_ERROR(ReadJsonFile(path, &file));
  auto topo = TopologyFromProto(file);
  if (!topo) return topo.status().WithContext(path);
  return topo;
}

}  // namespace inc::am
