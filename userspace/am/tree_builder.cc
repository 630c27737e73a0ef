// SPDX-License-Identifier: Apache-2.0
// Tree planning: members grouped by attachment switch, a spine chosen as root, capabilities and packet size.
#include "am/tree_builder.h"

#include <algorithm>
#include <optional>

namespace inc::am {
namespace {

constexpr uint32_t kMaxChildren = 64;  // INC_MAX_CHILDREN: one bit each in the arrival bitmap

std::string MaskNames(uint32_t mask, const std::vector<const char*>& names) {
  std::string out;
  for (uint32_t v = 0; v < 32; ++v) {
    if (!(mask & (1u << v))) continue;
    if (!out.empty()) out += ", ";
    out += v < names.size() ? names[v] : std::to_string(v);
  }
  return out;
}

struct Rejection {
  bool capacity = false;  // RESOURCE_EXHAUSTED rather than FAILED_PRECONDITION
  std::string why;
};

std::optional<Rejection> CheckUsable(const std::string& name, const SwitchView* v, const Requirements& req,
                                     uint32_t children) {
  if (!v || !v->registered) return Rejection{false, "switch " + name + " has not registered"};
  if (!v->alive) return Rejection{false, "switch " + name + " is not alive (heartbeats lost)"};
  if (uint32_t m = req.dtype_mask & ~v->caps.dtype_mask)
    return Rejection{false, "switch " + name + " lacks data type " + DtypeMaskNames(m)};
  if (uint32_t m = req.op_mask & ~v->caps.op_mask)
    return Rejection{false, "switch " + name + " lacks operation " + OpMaskNames(m)};
  if (uint32_t m = req.coll_mask & ~v->caps.coll_mask)
    return Rejection{false, "switch " + name + " lacks collective " + CollMaskNames(m)};
  uint32_t max_children = std::min(v->caps.max_children, kMaxChildren);
  if (children > max_children)
    return Rejection{true, "switch " + name + " would need " + std::to_string(children) +
                               " children, it takes at most " + std::to_string(max_children)};
  if (v->trees >= v->caps.max_trees)
    return Rejection{
        true, "switch " + name + " already holds " + std::to_string(v->trees) + " trees (its maximum)"};
  if (v->largest_free_block < req.pool_size)
    return Rejection{true, "switch " + name + " has no " + std::to_string(req.pool_size) +
                               " contiguous free slots (" + std::to_string(v->free_slots) +
                               " free, largest block " + std::to_string(v->largest_free_block) + ")"};
  return std::nullopt;
}

// The port exists in what the switch reported and is up.
std::optional<std::string> CheckPort(const SwitchView& v, const std::string& port) {
  auto it = v.ports.find(port);
  if (it == v.ports.end()) return "switch " + v.name + " did not report port " + port;
  if (!it->second.up) return "switch " + v.name + " port " + port + " is down";
  return std::nullopt;
}

Status Reject(const Rejection& r, const std::string& prefix) {
  return r.capacity ? ResourceExhausted(prefix + r.why) : FailedPrecondition(prefix + r.why);
}

// Members by attachment switch (sorted by switch name, then rank).
using RanksBySwitch = std::map<std::string, std::vector<uint32_t>>;

const SwitchView* ViewOf(const std::map<std::string, SwitchView>& views, const std::string& name) {
  auto it = views.find(name);
  return it == views.end() ? nullptr : &it->second;
}

// Groups the members by attachment switch; two members on one switch port
// are refused.
Expected<RanksBySwitch> GroupBySwitch(const Topology& topo, const std::vector<MemberPlacement>& members) {
  RanksBySwitch by_switch;
  std::map<std::pair<std::string, std::string>, uint32_t> rank_on_port;
  for (size_t i = 0; i < members.size(); ++i) {
    const MemberPlacement& m = members[i];
    if (m.rank != i)
      return Internal("member list out of order: position " + std::to_string(i) + " holds rank " +
                      std::to_string(m.rank));
    auto h = topo.hosts.find(m.host);
    if (h == topo.hosts.end())
      return NotFound("rank " + std::to_string(m.rank) + ": host \"" + m.host + "\" is not in the topology");
    auto [it, inserted] =
        rank_on_port.emplace(std::make_pair(h->second.switch_name, h->second.switch_port), m.rank);
    if (!inserted)
      return FailedPrecondition("ranks " + std::to_string(it->second) + " and " + std::to_string(m.rank) +
                                " both attach through switch " + h->second.switch_name + " port " +
                                h->second.switch_port +
                                "; a tree has one member per switch port (join the ranks of one "
                                "host as one member)");
    by_switch[h->second.switch_name].push_back(m.rank);
  }
  return by_switch;
}

// Every attachment switch must serve its members.
Status CheckAttachments(const Topology& topo, const std::map<std::string, SwitchView>& views,
                        const std::vector<MemberPlacement>& members, const RanksBySwitch& by_switch,
                        const Requirements& req) {
  for (const auto& [sw, ranks] : by_switch) {
    const SwitchView* v = ViewOf(views, sw);
    // C++17 lambdas cannot capture a structured binding (GCC allows it, clang 14 does not).
    auto describe = [&switch_ranks = ranks](const std::string& why) {
      std::string rs;
      for (uint32_t r : switch_ranks) rs += (rs.empty() ? "" : ",") + std::to_string(r);
      return "rank" + std::string(switch_ranks.size() > 1 ? "s " : " ") + rs + " unreachable: " + why;
    };
    if (auto rej = CheckUsable(sw, v, req, static_cast<uint32_t>(ranks.size())))
      return Reject(*rej, describe(""));
    for (uint32_t r : ranks) {
      const TopoHost& h = topo.hosts.at(members[r].host);
      if (auto bad = CheckPort(*v, h.switch_port))
        return FailedPrecondition("rank " + std::to_string(r) + " (host " + h.name +
                                  ") unreachable: " + *bad);
    }
  }
  return Status::Ok();
}

// Appends the members `ranks` as children of `ps` (plan.switches[switch_index]
// once added), numbering them from *next_index on.
void AddMemberChildren(const Topology& topo, const std::vector<MemberPlacement>& members, TreePlan* plan,
                       PlanSwitch* ps, size_t switch_index, const std::vector<uint32_t>& ranks,
                       uint32_t* next_index) {
  for (uint32_t r : ranks) {
    const TopoHost& h = topo.hosts.at(members[r].host);
    PlanChild c;
    c.rank = r;
    c.peer = h.name;
    c.port = h.switch_port;
    c.member_lo = *next_index;
    c.member_hi = *next_index + 1;
    plan->member_index_of_rank[r] = *next_index;
    plan->member_slot[r] = MemberSlot{switch_index, static_cast<uint32_t>(ps->children.size())};
    ps->children.push_back(c);
    ++*next_index;
  }
}

struct RootChoice {
  std::string name;
  uint32_t free_slots;
  std::vector<std::pair<std::string, std::string>> ports;  // per leaf: (spine port, leaf port)
};

// A spine's link to `leaf` whose ports are both reported and up, else why
// there is none.
std::optional<std::pair<std::string, std::string>> LinkToLeaf(const Topology& topo,
                                                              const std::map<std::string, SwitchView>& views,
                                                              const std::string& spine, const SwitchView& v,
                                                              const std::string& leaf, std::string* problem) {
  *problem = "switch " + spine + " has no link to " + leaf;
  for (const auto& [sp_port, leaf_port] : topo.LinksBetween(spine, leaf)) {
    if (auto bad = CheckPort(v, sp_port)) {
      *problem = *bad;
      continue;
    }
    if (auto bad = CheckPort(*ViewOf(views, leaf), leaf_port)) {
      *problem = *bad;
      continue;
    }
    return std::make_pair(sp_port, leaf_port);
  }
  return std::nullopt;
}

// The root of a two-level tree: of the spines that can hold it and link to
// every leaf through up ports, the one with most free slots, then by name.
Expected<RootChoice> ChooseRoot(const Topology& topo, const std::map<std::string, SwitchView>& views,
                                const RanksBySwitch& by_switch, const std::vector<std::string>& leaves,
                                const Requirements& req) {
  std::vector<RootChoice> candidates;
  std::vector<Rejection> rejections;
  for (const auto& [name, ts] : topo.switches) {
    if (ts.kind != SwitchKind::kSpine || by_switch.count(name)) continue;
    const SwitchView* v = ViewOf(views, name);
    if (auto rej = CheckUsable(name, v, req, static_cast<uint32_t>(leaves.size()))) {
      rejections.push_back(*rej);
      continue;
    }
    RootChoice c{name, v->free_slots, {}};
    std::optional<std::string> missing;
    for (const auto& leaf : leaves) {
      std::string last_problem;
      auto chosen = LinkToLeaf(topo, views, name, *v, leaf, &last_problem);
      if (!chosen) {
        missing = last_problem;
        break;
      }
      c.ports.push_back(*chosen);
    }
    if (missing) {
      rejections.push_back(Rejection{false, *missing});
      continue;
    }
    candidates.push_back(std::move(c));
  }
  if (candidates.empty()) {
    std::string leaf_list;
    for (const auto& l : leaves) leaf_list += (leaf_list.empty() ? "" : ", ") + l;
    std::string prefix = "members attach to switches [" + leaf_list + "] and no spine can be " + "their root";
    if (rejections.empty()) return FailedPrecondition(prefix + ": the topology has no spine");
    bool all_capacity =
        std::all_of(rejections.begin(), rejections.end(), [](const Rejection& r) { return r.capacity; });
    std::string whys;
    for (const auto& r : rejections) whys += "; " + r.why;
    return all_capacity ? ResourceExhausted(prefix + whys) : FailedPrecondition(prefix + whys);
  }
  std::sort(candidates.begin(), candidates.end(), [](const RootChoice& a, const RootChoice& b) {
    if (a.free_slots != b.free_slots) return a.free_slots > b.free_slots;
    return a.name < b.name;
  });
  return std::move(candidates.front());
}

// The root, then one leaf per attachment switch with its members.
void AddTwoLevel(const Topology& topo, const std::vector<MemberPlacement>& members,
                 const RanksBySwitch& by_switch, const std::vector<std::string>& leaves,
                 const RootChoice& root, TreePlan* plan) {
  uint32_t next_index = 0;
  PlanSwitch rs;
  rs.name = root.name;
  rs.role = TreeRole::kRoot;
  plan->switches.push_back(rs);
  for (size_t li = 0; li < leaves.size(); ++li) {
    PlanSwitch ls;
    ls.name = leaves[li];
    ls.role = TreeRole::kLeaf;
    ls.parent = root.name;
    ls.parent_peer_port = root.ports[li].first;
    ls.parent_port = root.ports[li].second;
    ls.rank_at_parent = static_cast<uint32_t>(li);
    uint32_t lo = next_index;
    AddMemberChildren(topo, members, plan, &ls, li + 1, by_switch.at(leaves[li]), &next_index);
    PlanChild c;
    c.is_switch = true;
    c.peer = leaves[li];
    c.port = root.ports[li].first;
    c.peer_port = root.ports[li].second;
    c.member_lo = lo;
    c.member_hi = next_index;
    plan->switches[0].children.push_back(c);
    plan->switches.push_back(std::move(ls));
  }
}

// Capabilities of the tree: the request's, or what every switch supports;
// the packet size: the request's, or the largest every switch and port MTU
// allows.
Status SetCapabilities(const std::map<std::string, SwitchView>& views, const Requirements& req,
                       TreePlan* plan) {
  uint32_t dt = ~0u, op = ~0u, co = ~0u;
  uint32_t max_elems = ~0u;
  std::string elems_limiter;
  auto limit_elems = [&](uint32_t value, const std::string& why) {
    if (value < max_elems) {
      max_elems = value;
      elems_limiter = why;
    }
  };
  for (const PlanSwitch& ps : plan->switches) {
    const SwitchView& v = *ViewOf(views, ps.name);
    dt &= v.caps.dtype_mask;
    op &= v.caps.op_mask;
    co &= v.caps.coll_mask;
    limit_elems(v.caps.max_elems_per_packet, "switch " + ps.name + " max_elems_per_packet");
    auto port_mtu = [&](const std::string& port) {
      auto it = v.ports.find(port);
      if (it != v.ports.end() && it->second.mtu > 0)
        limit_elems(MaxElemsForMtu(it->second.mtu),
                    "switch " + ps.name + " port " + port + " MTU " + std::to_string(it->second.mtu));
    };
    for (const PlanChild& c : ps.children) port_mtu(c.port);
    if (!ps.parent_port.empty()) port_mtu(ps.parent_port);
  }
  plan->dtype_mask = req.dtype_mask ? req.dtype_mask : dt;
  plan->op_mask = req.op_mask ? req.op_mask : op;
  plan->coll_mask = req.coll_mask ? req.coll_mask : co;
  if (!plan->dtype_mask || !plan->op_mask || !plan->coll_mask)
    return FailedPrecondition("the switches of the tree share no common " +
                              std::string(!plan->dtype_mask ? "data type"
                                          : !plan->op_mask  ? "operation"
                                                            : "collective"));
  if (max_elems == 0) return FailedPrecondition("no element fits a packet: " + elems_limiter);
  if (req.elems_per_packet == 0) {
    // The largest packet the tree allows (fewer packets per byte are the
    // biggest lever on the members' and switches' per-packet cost), or the
    // AM's configured default when it is smaller.
    plan->elems_per_packet = req.default_elems ? std::min(req.default_elems, max_elems) : max_elems;
  } else if (req.elems_per_packet > max_elems) {
    return InvalidArgument("elems_per_packet " + std::to_string(req.elems_per_packet) +
                           " exceeds what the tree allows: " + std::to_string(max_elems) + " (" +
                           elems_limiter + ")");
  } else {
    plan->elems_per_packet = req.elems_per_packet;
  }
  return Status::Ok();
}

}  // namespace

std::string DtypeMaskNames(uint32_t mask) {
  return MaskNames(mask, {"?", "INT32", "FP32", "INT64", "FP16", "BF16", "FP64"});
}
std::string OpMaskNames(uint32_t mask) {
  return MaskNames(mask, {"?", "SUM", "MIN", "MAX"});
}
std::string CollMaskNames(uint32_t mask) {
  return MaskNames(mask, {"?", "ALLREDUCE", "REDUCE", "BROADCAST", "BARRIER", "REDUCE_SCATTER", "ALLGATHER"});
}

Expected<TreePlan> BuildTreePlan(const Topology& topo, const std::map<std::string, SwitchView>& views,
                                 const std::vector<MemberPlacement>& members, const Requirements& req) {
  if (members.empty()) return InvalidArgument("a tree needs at least one member");
  if (req.pool_size == 0 || req.pool_size > 0xFFFF)
    return InvalidArgument("pool_size " + std::to_string(req.pool_size) + " is not in 1..65535");
  auto by_switch = GroupBySwitch(topo, members);
  if (!by_switch) return by_switch.status();
  INC_RETURN_IF_ERROR(CheckAttachments(topo, views, members, *by_switch, req));

  TreePlan plan;
  plan.pool_size = req.pool_size;
  plan.member_index_of_rank.assign(members.size(), 0);
  plan.member_slot.assign(members.size(), MemberSlot{});
  if (by_switch->size() == 1) {
    uint32_t next_index = 0;
    PlanSwitch ps;
    ps.name = by_switch->begin()->first;
    ps.role = TreeRole::kSingle;
    AddMemberChildren(topo, members, &plan, &ps, 0, by_switch->begin()->second, &next_index);
    plan.switches.push_back(std::move(ps));
  } else {
    std::vector<std::string> leaves;
    for (const auto& [sw, ranks] : *by_switch) leaves.push_back(sw);
    auto root = ChooseRoot(topo, views, *by_switch, leaves, req);
    if (!root) return root.status();
    AddTwoLevel(topo, members, *by_switch, leaves, *root, &plan);
  }
  INC_RETURN_IF_ERROR(SetCapabilities(views, req, &plan));
  return plan;
}

}  // namespace inc::am
