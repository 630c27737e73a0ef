// SPDX-License-Identifier: Apache-2.0
// What a switch believes about the other switches' links (from their ARN
// messages) and how that marks its own best-path table: a next hop through
// switch V toward a prefix behind switch D crosses the directed link V->D,
// so a congestion notice from V about its link to D marks that hop
// congested, and a failure of the link between V and D (reported by either
// end) marks it failed. Clearing notices, or an origin that stops repeating
// its notice, unmark it, and the cheaper path comes back by itself since the
// forwarder always prefers the lowest usable cost (draft section 2.3).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "arn/message.h"
#include "common/route.h"

namespace inc::arn {

struct LinkId {
  uint32_t from = 0;  // the reporting switch
  uint32_t to = 0;    // the switch at the far end
  bool operator<(const LinkId& o) const { return from != o.from ? from < o.from : to < o.to; }
  bool operator==(const LinkId& o) const { return from == o.from && to == o.to; }
};

struct LinkState {
  bool failed = false;
  uint8_t congestion = 0;  // severity 1..3, 0 = none
  uint32_t seq = 0;
  uint64_t heard_ns = 0;    // last message about it (local clock)
  uint64_t changed_ns = 0;  // when what it carries last changed (local clock)
};

class RemoteState {
 public:
  // Applies an accepted message; true if what the link carries changed.
  bool Apply(const Message& m, uint64_t now_ns);
  // Drops links not heard about for hold_ns (their origin repeats a notice
  // while the state lasts, so silence means it is over or the origin died).
  // Returns the links forgotten.
  std::vector<LinkId> Expire(uint64_t now_ns, uint64_t hold_ns);
  // INC_HOP_* marks for traffic that crosses from -> to.
  uint8_t Marks(uint32_t from, uint32_t to) const;
  const std::map<LinkId, LinkState>& links() const { return links_; }

 private:
  std::map<LinkId, LinkState> links_;
};

struct PlannedHop {
  NextHop hop;
  uint32_t via = 0;  // switch id of the next hop; 0 = a host (no remote link)
};

struct PlannedRoute {
  Prefix prefix;
  uint32_t dest_switch = 0;  // switch the prefix sits behind; 0 = this one
  std::vector<PlannedHop> hops;
};

// The routes to program, with every hop's marks from the remote state.
std::vector<Route> MarkRoutes(const std::vector<PlannedRoute>& plan, const RemoteState& remote);

}  // namespace inc::arn
