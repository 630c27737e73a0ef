// SPDX-License-Identifier: Apache-2.0
#include "arn/paths.h"

namespace inc::arn {

bool RemoteState::Apply(const Message& m, uint64_t now_ns) {
  LinkId id{m.origin, m.peer};
  LinkState before = links_.count(id) ? links_[id] : LinkState{};
  LinkState& s = links_[id];
  s.seq = m.seq;
  s.heard_ns = now_ns;
  switch (m.type) {
    case Type::kCongestionDetected: s.congestion = m.severity; break;
    case Type::kCongestionEliminated: s.congestion = 0; break;
    case Type::kLinkFailed: s.failed = true; break;
    case Type::kLinkRestored:
      s.failed = false;
      s.congestion = 0;
      break;
  }
  bool changed = before.failed != s.failed || before.congestion != s.congestion;
  if (changed) s.changed_ns = now_ns;
  if (!s.failed && s.congestion == 0) links_.erase(id);  // nothing left to remember
  return changed;
}

std::vector<LinkId> RemoteState::Expire(uint64_t now_ns, uint64_t hold_ns) {
  std::vector<LinkId> gone;
  for (auto it = links_.begin(); it != links_.end();) {
    if (now_ns - it->second.heard_ns > hold_ns) {
      gone.push_back(it->first);
      it = links_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

uint8_t RemoteState::Marks(uint32_t from, uint32_t to) const {
  uint8_t marks = 0;
  auto fwd = links_.find({from, to});
  if (fwd != links_.end()) {
    if (fwd->second.failed) marks |= INC_HOP_FAILED;
    if (fwd->second.congestion) marks |= INC_HOP_CONGESTED;
  }
  // A failed link fails both directions, whichever end reported it.
  auto rev = links_.find({to, from});
  if (rev != links_.end() && rev->second.failed) marks |= INC_HOP_FAILED;
  return marks;
}

std::vector<Route> MarkRoutes(const std::vector<PlannedRoute>& plan, const RemoteState& remote) {
  std::vector<Route> out;
  out.reserve(plan.size());
  for (const auto& p : plan) {
    Route r;
    r.prefix = p.prefix;
    for (const auto& h : p.hops) {
      NextHop hop = h.hop;
      hop.flags = 0;
      if (h.via != 0 && p.dest_switch != 0 && h.via != p.dest_switch)
        hop.flags = remote.Marks(h.via, p.dest_switch);
      r.hops.push_back(hop);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace inc::arn
