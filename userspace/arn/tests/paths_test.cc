// SPDX-License-Identifier: Apache-2.0
// Remote link state from ARN messages and the marks it puts on best-path
// routes: direction of congestion, both directions of failure, clearing,
// expiry of notices that stop being repeated.
#include "arn/paths.h"

#include <gtest/gtest.h>

namespace inc::arn {
namespace {

constexpr uint32_t kLeaf0 = 10, kLeaf1 = 11, kSpine0 = 20, kSpine1 = 21;

Message Notice(Type t, uint32_t origin, uint32_t peer, uint32_t seq) {
  Message m;
  m.type = t;
  m.origin = origin;
  m.peer = peer;
  m.seq = seq;
  m.severity = t == Type::kCongestionDetected ? 2 : t == Type::kLinkFailed ? kSeverityFailure : 0;
  return m;
}

// Leaf 0's view: prefix of leaf 1's hosts reachable via spine 0 or spine 1.
std::vector<PlannedRoute> Leaf0Plan() {
  PlannedRoute r;
  r.prefix = *Prefix::Parse("10.0.2.0/24");
  r.dest_switch = kLeaf1;
  for (uint32_t spine : {kSpine0, kSpine1}) {
    PlannedHop h;
    h.hop.port = spine == kSpine0 ? "l0s0" : "l0s1";
    h.hop.cost = 10;
    h.via = spine;
    r.hops.push_back(h);
  }
  PlannedRoute local;
  local.prefix = *Prefix::Parse("10.0.0.0/24");
  PlannedHop host;
  host.hop.port = "w0";
  local.hops.push_back(host);
  return {r, local};
}

TEST(RemoteState, CongestionMarksOnlyTheReportedDirection) {
  RemoteState st;
  EXPECT_TRUE(st.Apply(Notice(Type::kCongestionDetected, kSpine0, kLeaf1, 1), 0));
  EXPECT_EQ(st.Marks(kSpine0, kLeaf1), INC_HOP_CONGESTED);
  EXPECT_EQ(st.Marks(kLeaf1, kSpine0), 0) << "the other direction is not congested";
  EXPECT_FALSE(st.Apply(Notice(Type::kCongestionDetected, kSpine0, kLeaf1, 2), 1))
      << "a repeat changes nothing";
  EXPECT_TRUE(st.Apply(Notice(Type::kCongestionEliminated, kSpine0, kLeaf1, 3), 2));
  EXPECT_EQ(st.Marks(kSpine0, kLeaf1), 0);
  EXPECT_TRUE(st.links().empty()) << "cleared links are forgotten";
}

TEST(RemoteState, FailureFromEitherEndMarksBothDirectionsUntilRestored) {
  RemoteState st;
  st.Apply(Notice(Type::kLinkFailed, kLeaf1, kSpine1, 1), 0);
  EXPECT_EQ(st.Marks(kSpine1, kLeaf1), INC_HOP_FAILED);
  EXPECT_EQ(st.Marks(kLeaf1, kSpine1), INC_HOP_FAILED);
  st.Apply(Notice(Type::kLinkRestored, kLeaf1, kSpine1, 2), 1);
  EXPECT_EQ(st.Marks(kSpine1, kLeaf1), 0);
}

TEST(RemoteState, NoticesThatStopBeingRepeatedExpire) {
  RemoteState st;
  st.Apply(Notice(Type::kCongestionDetected, kSpine0, kLeaf1, 1), 1'000);
  st.Apply(Notice(Type::kLinkFailed, kSpine1, kLeaf1, 1), 5'000);
  auto gone = st.Expire(6'500, 2'000);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], (LinkId{kSpine0, kLeaf1}));
  EXPECT_EQ(st.Marks(kSpine1, kLeaf1), INC_HOP_FAILED);
}

TEST(MarkRoutes, MarksTheHopsWhoseSecondLinkIsAffected) {
  RemoteState st;
  st.Apply(Notice(Type::kCongestionDetected, kSpine0, kLeaf1, 1), 0);
  auto routes = MarkRoutes(Leaf0Plan(), st);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].hops[0].flags, INC_HOP_CONGESTED) << "via spine 0 toward leaf 1";
  EXPECT_EQ(routes[0].hops[1].flags, 0) << "via spine 1 is clean";
  EXPECT_EQ(routes[1].hops[0].flags, 0) << "directly attached hosts are never marked";

  st.Apply(Notice(Type::kLinkFailed, kLeaf1, kSpine1, 1), 0);
  routes = MarkRoutes(Leaf0Plan(), st);
  EXPECT_EQ(routes[0].hops[1].flags, INC_HOP_FAILED);

  // A congestion report about spine 0's link toward leaf 0 does not touch
  // leaf 0's routes toward leaf 1.
  RemoteState other;
  other.Apply(Notice(Type::kCongestionDetected, kSpine0, kLeaf0, 1), 0);
  routes = MarkRoutes(Leaf0Plan(), other);
  EXPECT_EQ(routes[0].hops[0].flags, 0);
}

}  // namespace
}  // namespace inc::arn
