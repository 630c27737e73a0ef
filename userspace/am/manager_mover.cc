// SPDX-License-Identifier: Apache-2.0
// Manager's tree mover (off failed/congested links): apart as only port checks and switch loss call it.
#include "am/clock.h"
#include "am/manager.h"
#include "am/tree_builder.h"
#include "common/log.h"

namespace inc::am {

bool Manager::PortCongestedLocked(const std::string& switch_name, const std::string& port) const {
  return switches_.PortCongested(switch_name, port, Tuned(&AmOptions::move_on_congestion_severity));
}

// Trees that use a port of this switch that is down move to another spine
// when the port is on a leaf-spine link (and are dismantled when no spine
// can take them, or when the port faces a member); by policy, trees also
// move off congested leaf-spine links, at most once per hold-down.
void Manager::CheckPortsLocked(const std::string& switch_name, Ops* ops) {
  const SwitchRegistry::Record& rec = *switches_.Find(switch_name);
  struct Problem {
    TreePtr tree;
    std::string why;
    bool failed = false;
    bool switch_link = false;
  };
  std::vector<Problem> problems;
  for (const auto& [id, t] : live_) {
    if (!t->plan) continue;
    const PlanSwitch* ps = t->plan->Find(switch_name);
    if (!ps) continue;
    std::vector<std::pair<std::string, bool>> used;  // (port, leads to a switch)
    for (const auto& c : ps->children) used.emplace_back(c.port, c.is_switch);
    if (!ps->parent_port.empty()) used.emplace_back(ps->parent_port, true);
    std::optional<Problem> congested;
    for (const auto& [port, to_switch] : used) {
      auto p = rec.ports.find(port);
      if (p == rec.ports.end() || !p->second.up) {
        congested.reset();
        problems.push_back({t,
                            "switch " + switch_name + " port " + port +
                                (p == rec.ports.end() ? " disappeared" : " went down"),
                            true, to_switch});
        break;
      }
      if (to_switch && !congested && PortCongestedLocked(switch_name, port))
        congested = Problem{t,
                            "switch " + switch_name + " port " + port + " is congested (ARN severity " +
                                std::to_string(rec.congested_ports.at(port)) + ")",
                            false, true};
    }
    if (congested) problems.push_back(*congested);
  }
  for (auto& pr : problems) {
    TreePtr& t = pr.tree;
    if (Dismantled(t->state)) continue;
    if (!pr.failed) {
      // Congestion: damped, and a tree that cannot move keeps running.
      if (t->state != TreeState::kActive || t->programming ||
          MsSince(t->last_move_attempt) < Tuned(&AmOptions::tree_move_holddown_ms))
        continue;
      t->last_move_attempt = Clock::now();
      std::string why_not;
      if (!MoveTreeLocked(t, pr.why, ops, &why_not))
        events_.Append(
            "tree_move_skipped",
            "tree " + std::to_string(t->id) + " (job " + t->job + ") stays: " + pr.why + "; " + why_not,
            t->id, switch_name, t->job);
      continue;
    }
    std::string why_not = "the port faces a member";
    if (pr.switch_link && MoveTreeLocked(t, pr.why, ops, &why_not)) continue;
    DismantleLocked(t, TreeState::kFailed, pr.why + (pr.switch_link ? "; cannot move: " + why_not : ""), ops);
  }
}

namespace {

// Members keep their switch, slot and index, and every leaf keeps its
// children: only the root and the leaf-root links may differ.
bool SameLeaves(const TreePlan& a, const TreePlan& b) {
  if (a.switches.size() != b.switches.size() || a.member_index_of_rank != b.member_index_of_rank ||
      a.pool_size != b.pool_size || a.elems_per_packet != b.elems_per_packet)
    return false;
  for (size_t r = 0; r < a.member_slot.size(); ++r)
    if (a.member_slot[r].switch_index != b.member_slot[r].switch_index ||
        a.member_slot[r].rank_at_switch != b.member_slot[r].rank_at_switch)
      return false;
  for (size_t i = 1; i < a.switches.size(); ++i) {
    const PlanSwitch &x = a.switches[i], &y = b.switches[i];
    if (x.name != y.name || x.role != y.role || x.rank_at_parent != y.rank_at_parent ||
        x.children.size() != y.children.size())
      return false;
    for (size_t c = 0; c < x.children.size(); ++c)
      if (x.children[c].port != y.children[c].port || x.children[c].rank != y.children[c].rank ||
          x.children[c].is_switch != y.children[c].is_switch)
        return false;
  }
  return true;
}

}  // namespace

bool Manager::MoveTreeLocked(const TreePtr& t, const std::string& why, Ops* ops, std::string* why_not) {
  if (t->state != TreeState::kActive || t->programming || !t->plan || !t->alloc) {
    *why_not = "the tree is not active";
    return false;
  }
  if (t->plan->switches.size() < 2) {
    *why_not = "a single-level tree has no other switch to use";
    return false;
  }
  const auto t0 = Clock::now();
  // The builder skips down ports; congested ones are hidden from it the same way.
  auto views = switches_.Views(pool_);
  for (auto& [name, view] : views)
    for (auto& [port, state] : view.ports)
      if (PortCongestedLocked(name, port)) state.up = false;
  Requirements req = t->req;
  req.pool_size = t->plan->pool_size;
  req.elems_per_packet = t->plan->elems_per_packet;
  req.dtype_mask = t->plan->dtype_mask;
  req.op_mask = t->plan->op_mask;
  req.coll_mask = t->plan->coll_mask;
  std::vector<MemberPlacement> placements;
  for (uint32_t r = 0; r < t->world; ++r) placements.push_back({r, t->members[r].spec.host});
  auto plan = BuildTreePlan(topo_, views, placements, req);
  if (!plan) {
    *why_not = plan.status().message();
    return false;
  }
  if (!SameLeaves(*t->plan, *plan)) {
    *why_not = "every usable tree would move members to other switches";
    return false;
  }
  const PlanSwitch old_root = t->plan->switches[0];
  const PlanSwitch& new_root = plan->switches[0];
  TreeAlloc alloc = *t->alloc;
  if (new_root.name != old_root.name) {
    TreePlan only_new;
    only_new.pool_size = plan->pool_size;
    only_new.switches = {new_root};
    auto fresh = pool_.Allocate(only_new);
    if (!fresh) {
      *why_not = fresh.status().message();
      return false;
    }
    TreePlan only_old;
    only_old.pool_size = t->plan->pool_size;
    only_old.switches = {old_root};
    TreeAlloc old_alloc;
    old_alloc.per_switch[old_root.name] = alloc.per_switch.at(old_root.name);
    pool_.Free(only_old, old_alloc);
    alloc.per_switch.erase(old_root.name);
    alloc.per_switch[new_root.name] = fresh->per_switch.at(new_root.name);
  }
  const std::string old_root_name = old_root.name, new_root_name = new_root.name;
  t->plan = std::move(*plan);
  t->alloc = std::move(alloc);
  ++t->generation;
  auto cfgs = ConfigsLocked(*t);
  if (!cfgs) {
    // The tree now holds the new resources; dismantling releases them and
    // removes it from the switches of its old configs.
    *why_not = cfgs.status().message();
    return false;
  }
  for (const auto& [sw, cfg] : *cfgs) {
    SwitchOp op;
    op.configure = true;
    op.switch_name = sw;
    op.address = switches_.AgentAddress(sw);
    op.tree_id = t->id;
    op.config = cfg;
    ops->push_back(std::move(op));
  }
  if (old_root_name != new_root_name) {
    const std::string old_address = switches_.AgentAddress(old_root_name);
    if (!old_address.empty()) {
      SwitchOp op;
      op.switch_name = old_root_name;
      op.address = old_address;
      op.tree_id = t->id;
      ops->push_back(std::move(op));
    }
  }
  t->configs = std::move(*cfgs);
  ++t->moves;
  t->last_move_ms = UnixMs();
  t->last_move_reason = why;
  t->last_move_attempt = Clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  t->build_us += us;
  if (Status saved = PersistTreeLocked(*t); !saved.ok()) {
    // The switches run the new generation already; a restart would re-send
    // the stored old one, which they take as a move back.
    LOG_ERROR << "state store: " << saved.ToString();
  }
  events_.Append("tree_moved",
                 "tree " + std::to_string(t->id) + " (job " + t->job + ") moved from root " + old_root_name +
                     " to root " + new_root_name + " (generation " + std::to_string(t->generation) +
                     ", planned in " + std::to_string(us) + " us): " + why,
                 t->id, new_root_name, t->job);
  return true;
}

}  // namespace inc::am
