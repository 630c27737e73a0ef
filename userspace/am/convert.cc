// SPDX-License-Identifier: Apache-2.0
#include "am/convert.h"

#include <cstdlib>

namespace inc::am {
namespace {

Expected<uint32_t> Mask(const google::protobuf::RepeatedField<int>& values, const std::string& what,
                        int max_value) {
  uint32_t mask = 0;
  for (int v : values) {
    if (v <= 0 || v > max_value)
      return InvalidArgument(what + ": value " + std::to_string(v) + " is not in 1.." +
                             std::to_string(max_value));
    mask |= 1u << v;
  }
  return mask;
}

void FromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  for (int v = 1; v < 32; ++v)
    if (mask & (1u << v)) out->Add(v);
}

struct Masks {
  uint32_t dtype = 0, op = 0, coll = 0;
};

// The three allowed-value sets of a request, capabilities or config; the
// fields are named prefix + "dtypes", "ops", "collectives" in errors.
Expected<Masks> MasksFromProto(const google::protobuf::RepeatedField<int>& dtypes,
                               const google::protobuf::RepeatedField<int>& ops,
                               const google::protobuf::RepeatedField<int>& collectives,
                               const std::string& prefix) {
  Masks m;
  auto dt = Mask(dtypes, prefix + "dtypes", v1::DataType_MAX);
  if (!dt) return dt.status();
  auto op = Mask(ops, prefix + "ops", v1::ReduceOp_MAX);
  if (!op) return op.status();
  auto co = Mask(collectives, prefix + "collectives", v1::Collective_MAX);
  if (!co) return co.status();
  m.dtype = *dt;
  m.op = *op;
  m.coll = *co;
  return m;
}

}  // namespace

Expected<uint32_t> DtypeMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::DataType_MAX);
}
Expected<uint32_t> OpMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::ReduceOp_MAX);
}
Expected<uint32_t> CollMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::Collective_MAX);
}
void DtypesFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}
void OpsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}
void CollsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}

Expected<Caps> CapsFromProto(const v1::Capabilities& c) {
  Caps caps;
  auto masks = MasksFromProto(c.dtypes(), c.ops(), c.collectives(), "capabilities.");
  if (!masks) return masks.status();
  caps.dtype_mask = masks->dtype;
  caps.op_mask = masks->op;
  caps.coll_mask = masks->coll;
  if (c.slot_capacity() == 0) return InvalidArgument("capabilities.slot_capacity is 0");
  if (c.max_children() == 0) return InvalidArgument("capabilities.max_children is 0");
  caps.max_children = c.max_children();
  caps.slot_capacity = c.slot_capacity();
  caps.max_trees = c.max_trees() ? c.max_trees() : 1023;
  caps.max_elems_per_packet = c.max_elems_per_packet() ? c.max_elems_per_packet() : 240;
  caps.icrc_verify = c.icrc_verify();
  return caps;
}

v1::Capabilities CapsToProto(const Caps& c, uint32_t free_slots) {
  v1::Capabilities p;
  DtypesFromMask(c.dtype_mask, p.mutable_dtypes());
  OpsFromMask(c.op_mask, p.mutable_ops());
  CollsFromMask(c.coll_mask, p.mutable_collectives());
  p.set_max_children(c.max_children);
  p.set_slot_capacity(c.slot_capacity);
  p.set_free_slots(free_slots);
  p.set_max_trees(c.max_trees);
  p.set_max_elems_per_packet(c.max_elems_per_packet);
  p.set_icrc_verify(c.icrc_verify);
  return p;
}

Expected<PortState> PortFromProto(const v1::Port& p) {
  PortState s;
  if (p.name().empty()) return InvalidArgument("port with an empty name");
  s.name = p.name();
  s.ifindex = p.ifindex();
  if (!p.mac().empty()) {
    auto mac = Mac::Parse(p.mac());
    if (!mac) return mac.status().WithContext("port " + p.name() + " mac");
    s.mac = *mac;
  }
  if (!p.ip().empty()) {
    auto ip = Ipv4::Parse(p.ip());
    if (!ip) return ip.status().WithContext("port " + p.name() + " ip");
    s.ip = *ip;
  }
  s.mtu = p.mtu();
  s.up = p.up();
  s.xdp_attached = p.xdp_attached();
  s.xdp_mode = p.xdp_mode();
  return s;
}

v1::Port PortToProto(const PortState& s) {
  v1::Port p;
  p.set_name(s.name);
  p.set_ifindex(s.ifindex);
  p.set_mac(s.mac.ToString());
  p.set_ip(s.ip.ToString());
  p.set_mtu(s.mtu);
  p.set_up(s.up);
  p.set_xdp_attached(s.xdp_attached);
  p.set_xdp_mode(s.xdp_mode);
  return p;
}

Status ValidateAgentAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (address.empty()) return InvalidArgument("agent_address is empty");
  if (colon == std::string::npos || colon == 0)
    return InvalidArgument("agent_address \"" + address + "\" is not host:port");
  const std::string port = address.substr(colon + 1);
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 1 || value > 65535)
    return InvalidArgument("agent_address \"" + address + "\": port \"" + port + "\" is not in 1..65535");
  return Status::Ok();
}

v1::Role RoleToProto(TreeRole role) {
  switch (role) {
    case TreeRole::kSingle: return v1::SINGLE;
    case TreeRole::kLeaf: return v1::LEAF;
    case TreeRole::kRoot: return v1::ROOT;
  }
  return v1::ROLE_UNSPECIFIED;
}

namespace {

static_assert(static_cast<int>(TreeState::kPending) == v1::TREE_PENDING &&
                  static_cast<int>(TreeState::kActive) == v1::TREE_ACTIVE &&
                  static_cast<int>(TreeState::kFailed) == v1::TREE_FAILED &&
                  static_cast<int>(TreeState::kDestroyed) == v1::TREE_DESTROYED,
              "TreeState values are v1::TreeState's (the state store keeps them)");

Expected<std::map<std::string, PortState>> PortsFromProto(
    const google::protobuf::RepeatedPtrField<v1::Port>& ports, const std::string& switch_name, bool unique) {
  std::map<std::string, PortState> out;
  for (const auto& p : ports) {
    auto ps = PortFromProto(p);
    if (!ps) return ps.status().WithContext("switch " + switch_name);
    if (!out.emplace(ps->name, *ps).second) {
      if (unique) return InvalidArgument("switch " + switch_name + " reports port " + ps->name + " twice");
      out[ps->name] = *ps;
    }
  }
  return out;
}

TreeRole RoleFromProto(v1::Role role) {
  switch (role) {
    case v1::LEAF: return TreeRole::kLeaf;
    case v1::ROOT: return TreeRole::kRoot;
    default: return TreeRole::kSingle;
  }
}

v1::Endpoint EndpointToProto(const EndpointConfig& e) {
  v1::Endpoint p;
  p.set_port(e.port);
  p.set_switch_qpn(e.switch_qpn);
  p.set_member_lo(e.member_lo);
  p.set_member_hi(e.member_hi);
  p.set_peer_name(e.peer_name);
  p.set_peer_mac(e.peer_mac.ToString());
  p.set_peer_ip(e.peer_ip.ToString());
  p.set_peer_qpn(e.peer_qpn);
  p.set_rkey(e.rkey);
  p.set_va_base(e.va_base);
  p.set_slot_stride(e.slot_stride);
  return p;
}

Expected<EndpointConfig> EndpointFromProto(const v1::Endpoint& p) {
  EndpointConfig e;
  e.port = p.port();
  auto mac = Mac::Parse(p.peer_mac());
  if (!mac) return mac.status().WithContext("peer_mac");
  auto ip = Ipv4::Parse(p.peer_ip());
  if (!ip) return ip.status().WithContext("peer_ip");
  e.peer_mac = *mac;
  e.peer_ip = *ip;
  e.peer_qpn = p.peer_qpn();
  e.switch_qpn = p.switch_qpn();
  e.rkey = p.rkey();
  e.va_base = p.va_base();
  e.slot_stride = p.slot_stride();
  e.member_lo = p.member_lo();
  e.member_hi = p.member_hi();
  e.peer_name = p.peer_name();
  return e;
}

}  // namespace

v1::TreeState TreeStateToProto(TreeState state) {
  return static_cast<v1::TreeState>(static_cast<int>(state));
}

Expected<TreeAsk> AskFromProto(uint32_t pool_size, uint32_t elems_per_packet,
                               const google::protobuf::RepeatedField<int>& dtypes,
                               const google::protobuf::RepeatedField<int>& ops,
                               const google::protobuf::RepeatedField<int>& collectives) {
  TreeAsk ask;
  ask.pool_size = pool_size;
  ask.elems_per_packet = elems_per_packet;
  auto masks = MasksFromProto(dtypes, ops, collectives, "");
  if (!masks) return masks.status();
  ask.dtype_mask = masks->dtype;
  ask.op_mask = masks->op;
  ask.coll_mask = masks->coll;
  return ask;
}

Expected<JoinRequest> JoinFromProto(const v1::JoinGroupRequest& req) {
  JoinRequest j;
  j.job = req.job_id();
  j.world = req.world_size();
  j.rank = req.rank();
  j.timeout_ms = req.timeout_ms();
  j.host_ranks.assign(req.host_ranks().begin(), req.host_ranks().end());
  j.total_ranks = req.total_ranks();
  const v1::MemberInfo& mi = req.member();
  if (!v1::Transport_IsValid(mi.transport()))
    return InvalidArgument("member.transport " + std::to_string(mi.transport()) + " is unknown");
  auto ask =
      AskFromProto(req.pool_size(), req.elems_per_packet(), req.dtypes(), req.ops(), req.collectives());
  if (!ask) return ask.status();
  j.ask = *ask;
  if (!mi.ip().empty()) {
    auto ip = Ipv4::Parse(mi.ip());
    if (!ip) return ip.status().WithContext("member.ip");
    j.member.ip = *ip;
  }
  if (!mi.mac().empty()) {
    auto mac = Mac::Parse(mi.mac());
    if (!mac) return mac.status().WithContext("member.mac");
    j.member.mac = *mac;
  }
  j.member.host = mi.host();
  j.member.qpn = mi.qpn();
  j.member.rkey = mi.rkey();
  j.member.va_base = mi.va_base();
  j.member.slot_stride = mi.slot_stride();
  j.member.transport = mi.transport();
  return j;
}

v1::MemberAssignment AssignmentToProto(const Assignment& a) {
  v1::MemberAssignment p;
  p.set_tree_id(a.tree_id);
  p.set_key(a.key);
  p.set_pool_size(a.pool_size);
  p.set_elems_per_packet(a.elems_per_packet);
  p.set_rank_at_switch(a.rank_at_switch);
  p.set_member_index(a.member_index);
  p.set_switch_name(a.switch_name);
  p.set_switch_ip(a.switch_ip.ToString());
  p.set_switch_mac(a.switch_mac.ToString());
  p.set_switch_qpn(a.switch_qpn);
  p.set_slot_stride(a.slot_stride);
  p.set_heartbeat_interval_ms(a.heartbeat_interval_ms);
  for (uint32_t idx : a.member_index_of_rank) p.add_member_index_of_rank(idx);
  DtypesFromMask(a.dtype_mask, p.mutable_dtypes());
  OpsFromMask(a.op_mask, p.mutable_ops());
  CollsFromMask(a.coll_mask, p.mutable_collectives());
  p.set_world_size(a.world);
  return p;
}

v1::MemberHeartbeatResponse BeatReplyToProto(const MemberBeatReply& r) {
  v1::MemberHeartbeatResponse p;
  p.set_tree_state(TreeStateToProto(r.state));
  p.set_reason(r.reason);
  p.set_generation(r.generation);
  p.set_root_switch(r.root_switch);
  return p;
}

Expected<SwitchRegistration> RegistrationFromProto(const v1::RegisterSwitchRequest& req) {
  SwitchRegistration reg;
  reg.name = req.switch_name();
  if (reg.name.empty()) return InvalidArgument("switch_name is empty");
  INC_RETURN_IF_ERROR(ValidateAgentAddress(req.agent_address()).WithContext("switch " + reg.name));
  reg.agent_address = req.agent_address();
  auto caps = CapsFromProto(req.capabilities());
  if (!caps) return caps.status().WithContext("switch " + reg.name);
  reg.caps = *caps;
  auto ports = PortsFromProto(req.ports(), reg.name, true);
  if (!ports) return ports.status();
  reg.ports = std::move(*ports);
  reg.live_tree_ids.assign(req.live_tree_ids().begin(), req.live_tree_ids().end());
  return reg;
}

Expected<SwitchBeat> SwitchBeatFromProto(const v1::SwitchHeartbeatRequest& req) {
  SwitchBeat beat;
  beat.name = req.switch_name();
  if (beat.name.empty()) return InvalidArgument("switch_name is empty");
  auto ports = PortsFromProto(req.ports(), beat.name, false);
  if (!ports) return ports.status();
  beat.ports = std::move(*ports);
  for (const auto& l : req.arn_links())
    if (l.condition() == "congested" && !l.port().empty()) beat.congested_ports[l.port()] = l.severity();
  beat.live_tree_ids.assign(req.live_tree_ids().begin(), req.live_tree_ids().end());
  return beat;
}

v1::SwitchSummary SummaryToProto(const SwitchSummary& s) {
  v1::SwitchSummary p;
  p.set_name(s.name);
  if (!s.known) return p;
  p.set_agent_address(s.agent_address);
  p.set_alive(s.alive);
  *p.mutable_capabilities() = CapsToProto(s.caps, s.free_slots);
  for (const PortState& port : s.ports) *p.add_ports() = PortToProto(port);
  p.set_last_heartbeat_ms_ago(s.last_heartbeat_ms_ago);
  for (uint32_t id : s.tree_ids) p.add_tree_ids(id);
  return p;
}

v1::GetTopologyResponse TopologyToProto(const TopologyView& view) {
  v1::GetTopologyResponse p;
  for (const auto& n : view.nodes) {
    v1::TopologyNode* node = p.add_nodes();
    node->set_name(n.name);
    node->set_kind(n.kind);
    for (const PortState& port : n.ports) *node->add_ports() = PortToProto(port);
    if (n.kind == "host") {
      v1::Port* hp = node->add_ports();
      if (n.host_ip) hp->set_ip(n.host_ip->ToString());
      if (n.host_mac) hp->set_mac(n.host_mac->ToString());
    }
  }
  for (const auto& l : view.links) {
    v1::Link* link = p.add_links();
    link->set_a_node(l.a);
    link->set_a_port(l.a_port);
    link->set_b_node(l.b);
    link->set_b_port(l.b_port);
    link->set_up(l.up);
  }
  return p;
}

Expected<CreateTreeRequest> CreateTreeFromProto(const v1::CreateTreeRequest& req) {
  CreateTreeRequest c;
  c.job = req.job_id();
  c.hosts.assign(req.hosts().begin(), req.hosts().end());
  c.world = req.world_size();
  auto ask =
      AskFromProto(req.pool_size(), req.elems_per_packet(), req.dtypes(), req.ops(), req.collectives());
  if (!ask) return ask.status();
  c.ask = *ask;
  return c;
}

v1::Tree TreeToProto(const TreeInfo& t) {
  v1::Tree p;
  p.set_tree_id(t.tree_id);
  p.set_job_id(t.job);
  p.set_state(TreeStateToProto(t.state));
  p.set_world_size(t.world);
  p.set_reason(t.reason);
  p.set_created_unix_ms(t.created_unix_ms);
  p.set_activated_unix_ms(t.activated_unix_ms);
  p.set_dismantled_unix_ms(t.dismantled_unix_ms);
  p.set_build_us(t.build_us);
  p.set_program_us(t.program_us);
  p.set_error_reports(t.error_reports);
  p.set_joined(t.joined);
  p.set_generation(t.generation);
  p.set_moves(t.moves);
  p.set_last_move_unix_ms(t.last_move_unix_ms);
  p.set_last_move_reason(t.last_move_reason);
  p.set_pool_size(t.pool_size);
  p.set_elems_per_packet(t.elems_per_packet);
  if (t.planned) {
    DtypesFromMask(t.dtype_mask, p.mutable_dtypes());
    OpsFromMask(t.op_mask, p.mutable_ops());
    CollsFromMask(t.coll_mask, p.mutable_collectives());
    p.set_root_switch(t.root_switch);
  }
  for (const TreeInfo::Switch& sw : t.switches) {
    v1::TreeSwitch* s = p.add_switches();
    s->set_switch_name(sw.name);
    s->set_role(RoleToProto(sw.role));
    s->set_parent(sw.parent);
    if (sw.slot_base) s->set_slot_base(*sw.slot_base);
    s->set_num_children(sw.num_children);
  }
  for (const TreeInfo::Member& m : t.members) {
    v1::TreeMember* tm = p.add_members();
    tm->set_rank(m.rank);
    tm->set_joined(m.joined);
    for (uint32_t r : m.host_ranks) tm->add_host_ranks(r);
    v1::MemberInfo* mi = tm->mutable_info();
    mi->set_host(m.spec.host);
    if (m.joined) {
      mi->set_ip(m.spec.ip.ToString());
      mi->set_mac(m.spec.mac.ToString());
      mi->set_qpn(m.spec.qpn);
      mi->set_rkey(m.spec.rkey);
      mi->set_va_base(m.spec.va_base);
      mi->set_slot_stride(m.spec.slot_stride);
      mi->set_transport(static_cast<v1::Transport>(m.spec.transport));
    }
    if (m.member_index) {
      tm->set_member_index(*m.member_index);
      tm->set_switch_name(m.switch_name);
      tm->set_rank_at_switch(m.rank_at_switch);
      tm->set_switch_port(m.switch_port);
    }
    if (m.last_heartbeat_ms_ago) tm->set_last_heartbeat_ms_ago(*m.last_heartbeat_ms_ago);
  }
  return p;
}

v1::Event EventToProto(const Event& e) {
  v1::Event p;
  p.set_unix_ms(e.unix_ms);
  p.set_kind(e.kind);
  p.set_message(e.message);
  p.set_tree_id(e.tree_id);
  p.set_switch_name(e.switch_name);
  p.set_job_id(e.job);
  return p;
}

v1::TreeConfig TreeConfigToProto(const TreeConfig& c) {
  v1::TreeConfig p;
  p.set_tree_id(c.tree_id);
  p.set_key(c.key);
  p.set_role(RoleToProto(c.role));
  p.set_pool_size(c.pool_size);
  p.set_elems_per_packet(c.elems_per_packet);
  p.set_slot_base(c.slot_base);
  DtypesFromMask(c.dtype_mask, p.mutable_dtypes());
  OpsFromMask(c.op_mask, p.mutable_ops());
  CollsFromMask(c.coll_mask, p.mutable_collectives());
  p.set_rank_at_parent(c.rank_at_parent);
  p.set_job_id(c.job);
  p.set_generation(c.generation);
  for (const EndpointConfig& e : c.children) *p.add_children() = EndpointToProto(e);
  if (c.parent) *p.mutable_parent() = EndpointToProto(*c.parent);
  return p;
}

Expected<TreeConfig> TreeConfigFromProto(const v1::TreeConfig& p) {
  TreeConfig c;
  c.tree_id = p.tree_id();
  c.key = p.key();
  c.role = RoleFromProto(p.role());
  c.pool_size = p.pool_size();
  c.elems_per_packet = p.elems_per_packet();
  c.slot_base = p.slot_base();
  auto masks = MasksFromProto(p.dtypes(), p.ops(), p.collectives(), "");
  if (!masks) return masks.status();
  c.dtype_mask = masks->dtype;
  c.op_mask = masks->op;
  c.coll_mask = masks->coll;
  c.rank_at_parent = p.rank_at_parent();
  c.job = p.job_id();
  c.generation = p.generation();
  for (int i = 0; i < p.children_size(); ++i) {
    auto e = EndpointFromProto(p.children(i));
    if (!e) return e.status().WithContext("children[" + std::to_string(i) + "]");
    c.children.push_back(std::move(*e));
  }
  if (p.has_parent()) {
    auto e = EndpointFromProto(p.parent());
    if (!e) return e.status().WithContext("parent");
    c.parent = std::move(*e);
  }
  return c;
}

std::string EncodeTreeConfig(const TreeConfig& c) {
  return TreeConfigToProto(c).SerializeAsString();
}

Expected<TreeConfig> DecodeTreeConfig(const std::string& bytes) {
  v1::TreeConfig p;
  if (!p.ParseFromString(bytes)) return InvalidArgument("not a serialized TreeConfig");
  return TreeConfigFromProto(p);
}

}  // namespace inc::am
