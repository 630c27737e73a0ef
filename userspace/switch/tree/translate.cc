// SPDX-License-Identifier: Apache-2.0
#include "switch/tree/translate.h"

#include <functional>
#include <set>

namespace inc::sw {
namespace {

std::string Num(uint64_t v) {
  return std::to_string(v);
}

// The role's name, or its number for a value the enum does not have (a
// proto3 enum field carries any number; Role_Name then gives "").
std::string RoleName(int role) {
  const std::string& name = v1::Role_Name(static_cast<v1::Role>(role));
  return name.empty() ? std::to_string(role) + " (no such role)" : name;
}

Status CollectMask(const google::protobuf::RepeatedField<int>& values, const char* what, int max_value,
                   uint32_t supported, const std::function<std::string(int)>& name, uint32_t* mask) {
  *mask = 0;
  for (int v : values) {
    if (v < 1 || v > max_value) {
      return InvalidArgument(std::string(what) + " value " + Num(v) + " is not valid (1.." + Num(max_value) +
                             ")");
    }
    if (supported != 0 && !(supported & INC_BIT(v))) {
      return InvalidArgument(std::string(what) + " " + name(v) + " is not supported by this switch");
    }
    *mask |= INC_BIT(v);
  }
  return Status::Ok();
}

Expected<dp::Endpoint> EndpointToDp(const v1::Endpoint& e, const std::string& where, const PortTable& ports) {
  if (e.port().empty()) return InvalidArgument(where + ": port is required");
  auto it = ports.find(e.port());
  if (it == ports.end()) {
    std::string known;
    for (const auto& [name, facts] : ports) known += (known.empty() ? "" : ", ") + name;
    return NotFound(where + ": port '" + e.port() + "' is not a port of this switch (ports: " + known + ")");
  }
  if (!it->second.attached) {
    return FailedPrecondition(where + ": port '" + e.port() + "' has no XDP program attached");
  }
  if (!it->second.up) return FailedPrecondition(where + ": port '" + e.port() + "' is down");

  dp::Endpoint out;
  out.port = e.port();
  auto mac = Mac::Parse(e.peer_mac());
  if (!mac.ok()) return mac.status().WithContext(where + ".peer_mac");
  out.peer_mac = *mac;
  auto ip = Ipv4::Parse(e.peer_ip());
  if (!ip.ok()) return ip.status().WithContext(where + ".peer_ip");
  if (ip->host == 0) return InvalidArgument(where + ".peer_ip: 0.0.0.0 is not a peer address");
  out.peer_ip = *ip;
  if (e.peer_qpn() == 0 || e.peer_qpn() > INC_QPN_MASK) {
    return InvalidArgument(where + ".peer_qpn " + Num(e.peer_qpn()) + " is out of range 1..16777215");
  }
  if (e.switch_qpn() == 0 || e.switch_qpn() > INC_QPN_MASK) {
    return InvalidArgument(where + ".switch_qpn " + Num(e.switch_qpn()) + " is out of range 1..16777215");
  }
  out.peer_qpn = e.peer_qpn();
  out.switch_qpn = e.switch_qpn();
  out.rkey = e.rkey();
  out.va_base = e.va_base();
  out.slot_stride = e.slot_stride();
  if (e.member_hi() > 0xFFFF || e.member_lo() > e.member_hi()) {
    return InvalidArgument(where + ": member range [" + Num(e.member_lo()) + ", " + Num(e.member_hi()) +
                           ") is not valid");
  }
  out.member_lo = static_cast<uint16_t>(e.member_lo());
  out.member_hi = static_cast<uint16_t>(e.member_hi());
  return out;
}

}  // namespace

Expected<dp::TreeSpec> TreeConfigToSpec(const v1::TreeConfig& c, const PortTable& ports,
                                        const dp::Capabilities& caps) {
  const std::string tree = "tree " + Num(c.tree_id());
  if (c.tree_id() == 0 || c.tree_id() >= INC_MAX_TREES) {
    return InvalidArgument("tree_id " + Num(c.tree_id()) + " is out of range 1.." + Num(INC_MAX_TREES - 1));
  }
  dp::TreeSpec spec;
  spec.tree_id = static_cast<uint16_t>(c.tree_id());
  spec.key = c.key();
  switch (c.role()) {
    case v1::SINGLE: spec.role = INC_ROLE_SINGLE; break;
    case v1::LEAF: spec.role = INC_ROLE_LEAF; break;
    case v1::ROOT: spec.role = INC_ROLE_ROOT; break;
    default: return InvalidArgument(tree + ": role " + RoleName(c.role()) + " is not SINGLE, LEAF or ROOT");
  }
  if (c.pool_size() == 0) return InvalidArgument(tree + ": pool_size must be > 0");
  if (c.pool_size() > 0xFFFF) {
    return InvalidArgument(tree + ": pool_size " + Num(c.pool_size()) + " exceeds 65535");
  }
  spec.pool_size = static_cast<uint16_t>(c.pool_size());
  // 0 asks for the wire format's default (240 four-byte elements, IB MTU 1024).
  uint32_t elems = c.elems_per_packet() ? c.elems_per_packet() : INC_DEFAULT_ELEMS_PER_PACKET;
  if (elems > caps.max_elems_per_packet) {
    return InvalidArgument(tree + ": elems_per_packet " + Num(elems) + " exceeds this switch's maximum " +
                           Num(caps.max_elems_per_packet));
  }
  spec.max_elems = static_cast<uint16_t>(elems);
  spec.slot_base = c.slot_base();

  uint32_t mask = 0;
  INC_RETURN_IF_ERROR(CollectMask(
                          c.dtypes(), "dtype", v1::DataType_MAX, caps.dtype_mask,
                          [](int v) { return v1::DataType_Name(static_cast<v1::DataType>(v)); }, &mask)
                          .WithContext(tree));
  spec.dtype_mask = static_cast<uint16_t>(mask);
  INC_RETURN_IF_ERROR(CollectMask(
                          c.ops(), "op", v1::ReduceOp_MAX, caps.op_mask,
                          [](int v) { return v1::ReduceOp_Name(static_cast<v1::ReduceOp>(v)); }, &mask)
                          .WithContext(tree));
  spec.op_mask = static_cast<uint8_t>(mask);
  INC_RETURN_IF_ERROR(CollectMask(
                          c.collectives(), "collective", v1::Collective_MAX, caps.coll_mask,
                          [](int v) { return v1::Collective_Name(static_cast<v1::Collective>(v)); }, &mask)
                          .WithContext(tree));
  spec.coll_mask = static_cast<uint8_t>(mask);

  if (c.children().empty()) return InvalidArgument(tree + ": no children");
  if (static_cast<uint32_t>(c.children_size()) > caps.max_children) {
    return ResourceExhausted(tree + ": " + Num(c.children_size()) +
                             " children exceed this switch's maximum " + Num(caps.max_children));
  }
  std::map<std::string, int> port_of_child;
  std::map<uint32_t, int> qpn_of_child;
  for (int i = 0; i < c.children_size(); i++) {
    const std::string where = tree + ": children[" + Num(i) + "]";
    auto ep = EndpointToDp(c.children(i), where, ports);
    if (!ep.ok()) return ep.status();
    // The egress program finds a destination by port, so one child per port.
    auto [pit, pnew] = port_of_child.emplace(ep->port, i);
    if (!pnew) {
      return InvalidArgument(where + ": port '" + ep->port + "' already reaches children[" +
                             Num(pit->second) + "] (a tree has at most one child per switch port)");
    }
    // A RoCEv2 packet carries no source QPN: the child is told by its DestQP.
    auto [qit, qnew] = qpn_of_child.emplace(ep->switch_qpn, i);
    if (!qnew) {
      return InvalidArgument(where + ": switch_qpn " + Num(ep->switch_qpn) + " is already children[" +
                             Num(qit->second) + "]'s");
    }
    spec.children.push_back(*ep);
  }

  if (spec.role == INC_ROLE_LEAF) {
    if (!c.has_parent()) return InvalidArgument(tree + ": role LEAF needs a parent");
    auto ep = EndpointToDp(c.parent(), tree + ": parent", ports);
    if (!ep.ok()) return ep.status();
    if (qpn_of_child.count(ep->switch_qpn)) {
      return InvalidArgument(tree + ": parent.switch_qpn " + Num(ep->switch_qpn) + " is also a child's");
    }
    spec.parent = *ep;
    if (c.rank_at_parent() >= INC_MAX_CHILDREN) {
      return InvalidArgument(tree + ": rank_at_parent " + Num(c.rank_at_parent()) + " is out of range 0.." +
                             Num(INC_MAX_CHILDREN - 1));
    }
    spec.rank_at_parent = static_cast<uint8_t>(c.rank_at_parent());
  } else {
    if (c.has_parent()) {
      return InvalidArgument(tree + ": role " + RoleName(c.role()) + " must not have a parent");
    }
    if (c.rank_at_parent() != 0) {
      return InvalidArgument(tree + ": rank_at_parent is only meaningful for role LEAF");
    }
  }
  return spec;
}

Status CheckPlacement(const dp::TreeSpec& spec, const std::map<uint16_t, dp::TreeSpec>& live,
                      const dp::Capabilities& caps) {
  const uint64_t lo = spec.slot_base, hi = lo + spec.pool_size;
  if (hi > caps.slot_capacity) {
    return ResourceExhausted("tree " + Num(spec.tree_id) + ": slots [" + Num(lo) + ", " + Num(hi) +
                             ") exceed this switch's slot capacity " + Num(caps.slot_capacity));
  }
  size_t others = 0;
  for (const auto& [id, other] : live) {
    if (id == spec.tree_id) continue;
    others++;
    const uint64_t olo = other.slot_base, ohi = olo + other.pool_size;
    if (lo < ohi && olo < hi) {
      return AlreadyExists("tree " + Num(spec.tree_id) + ": slots [" + Num(lo) + ", " + Num(hi) +
                           ") overlap tree " + Num(id) + "'s [" + Num(olo) + ", " + Num(ohi) + ")");
    }
  }
  if (!live.count(spec.tree_id) && others >= caps.max_trees) {
    return ResourceExhausted("tree " + Num(spec.tree_id) + ": this switch already holds its maximum of " +
                             Num(caps.max_trees) + " trees");
  }
  return Status::Ok();
}

void FillCapabilities(const dp::Capabilities& caps, uint32_t free_slots, v1::Capabilities* out) {
  out->Clear();
  for (int v = 1; v <= v1::DataType_MAX; v++) {
    if (caps.dtype_mask & INC_BIT(v)) out->add_dtypes(static_cast<v1::DataType>(v));
  }
  for (int v = 1; v <= v1::ReduceOp_MAX; v++) {
    if (caps.op_mask & INC_BIT(v)) out->add_ops(static_cast<v1::ReduceOp>(v));
  }
  for (int v = 1; v <= v1::Collective_MAX; v++) {
    if (caps.coll_mask & INC_BIT(v)) out->add_collectives(static_cast<v1::Collective>(v));
  }
  out->set_max_children(caps.max_children);
  out->set_slot_capacity(caps.slot_capacity);
  out->set_free_slots(free_slots);
  out->set_max_trees(caps.max_trees);
  out->set_max_elems_per_packet(caps.max_elems_per_packet);
  out->set_icrc_verify(caps.verify_icrc);
}

namespace {
void FillCounters(const dp::Counters& c, v1::Counters* out) {
  out->set_rx_packets(c.rx_packets);
  out->set_rx_bytes(c.rx_bytes);
  out->set_tx_packets(c.tx_packets);
  out->set_tx_bytes(c.tx_bytes);
  out->set_completions(c.completions);
  out->set_retransmissions(c.retransmissions);
  out->set_drops(c.drops);
}
}  // namespace

void FillStats(const dp::Stats& stats, uint16_t tree_id, const std::map<uint16_t, dp::TreeSpec>& live,
               v1::SwitchStats* out) {
  for (const auto& [name, value] : stats.global) (*out->mutable_global())[name] = value;
  for (const auto& [reason, packets] : stats.drops) {
    auto* d = out->add_drops();
    d->set_reason(reason);
    d->set_packets(packets);
  }
  for (const auto& [id, counters] : stats.trees) {
    if (tree_id != 0 && id != tree_id) continue;
    auto* t = out->add_trees();
    t->set_tree_id(id);
    FillCounters(counters, t->mutable_counters());
  }
  for (const auto& [key, counters] : stats.members) {
    const auto [id, rank] = key;
    if (tree_id != 0 && id != tree_id) continue;
    auto* m = out->add_members();
    m->set_tree_id(id);
    m->set_rank(rank);
    auto it = live.find(id);
    if (it != live.end() && rank < it->second.children.size()) {
      m->set_switch_qpn(it->second.children[rank].switch_qpn);
    }
    FillCounters(counters, m->mutable_counters());
  }
}

}  // namespace inc::sw
