// SPDX-License-Identifier: Apache-2.0
// Tree building on plain structs: single-level and two-level trees, spine
// choice, switches left out for capability or capacity, unreachable members.
#include <gtest/gtest.h>

#include "am/convert.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "am/tree_builder.h"

namespace inc::am {
namespace {

constexpr uint32_t kBit(int v) {
  return 1u << v;
}

class TreeBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = testing::MakeFabric(/*leaves=*/2, /*spines=*/2, /*hosts_per_leaf=*/4);
    auto topo = TopologyFromProto(file_);
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    topo_ = *topo;
    for (const auto& s : file_.switches()) {
      auto reg = testing::MakeRegistration(file_, s.name(), "127.0.0.1:1", 4096);
      SwitchView v;
      v.name = s.name();
      v.registered = v.alive = true;
      auto caps = CapsFromProto(reg.capabilities());
      ASSERT_TRUE(caps.ok());
      v.caps = *caps;
      for (const auto& p : reg.ports()) {
        auto ps = PortFromProto(p);
        ASSERT_TRUE(ps.ok());
        v.ports[ps->name] = *ps;
      }
      v.free_slots = v.largest_free_block = 4096;
      views_[v.name] = v;
    }
  }

  static std::vector<MemberPlacement> Members(std::vector<std::string> hosts) {
    std::vector<MemberPlacement> m;
    for (uint32_t r = 0; r < hosts.size(); ++r) m.push_back({r, hosts[r]});
    return m;
  }

  Expected<TreePlan> Build(const std::vector<std::string>& hosts) {
    return BuildTreePlan(topo_, views_, Members(hosts), req_);
  }

  v1::TopologyFile file_;
  Topology topo_;
  std::map<std::string, SwitchView> views_;
  Requirements req_;
};

TEST_F(TreeBuilderTest, MembersUnderOneLeafGetASingleLevelTreeOnThatLeaf) {
  auto plan = Build({"h00_2", "h00_0", "h00_3"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->switches.size(), 1u);
  const PlanSwitch& s = plan->switches[0];
  EXPECT_EQ(s.name, "leaf00");
  EXPECT_EQ(s.role, TreeRole::kSingle);
  ASSERT_EQ(s.children.size(), 3u);
  // Children in rank order; each on its host's port with a one-member range.
  EXPECT_EQ(s.children[0].port, "h2");
  EXPECT_EQ(s.children[1].port, "h0");
  EXPECT_EQ(s.children[2].port, "h3");
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(plan->member_index_of_rank[r], r);
    EXPECT_EQ(plan->member_slot[r].rank_at_switch, r);
    EXPECT_EQ(s.children[r].member_lo, r);
    EXPECT_EQ(s.children[r].member_hi, r + 1);
  }
  // No request and no AM default: the largest packet the ports' MTU 1500
  // allows (IB MTU 1024).
  EXPECT_EQ(plan->elems_per_packet, 250u);
  EXPECT_EQ(plan->pool_size, 256u);
}

TEST_F(TreeBuilderTest, MembersOnTwoLeavesGetASpineRootReachingBothLeaves) {
  // Ranks interleaved across leaves: member indices are numbered leaf by leaf.
  auto plan = Build({"h01_0", "h00_1", "h00_2", "h01_3"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->switches.size(), 3u);
  const PlanSwitch& root = plan->switches[0];
  EXPECT_EQ(root.name, "spine0");  // equal free slots: by name
  EXPECT_EQ(root.role, TreeRole::kRoot);
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_TRUE(root.children[0].is_switch);
  EXPECT_EQ(root.children[0].peer, "leaf00");
  EXPECT_EQ(root.children[0].port, "dn00");
  EXPECT_EQ(root.children[0].peer_port, "up0");
  EXPECT_EQ(root.children[0].member_lo, 0u);
  EXPECT_EQ(root.children[0].member_hi, 2u);
  EXPECT_EQ(root.children[1].peer, "leaf01");
  EXPECT_EQ(root.children[1].member_lo, 2u);
  EXPECT_EQ(root.children[1].member_hi, 4u);

  const PlanSwitch& l0 = plan->switches[1];
  EXPECT_EQ(l0.name, "leaf00");
  EXPECT_EQ(l0.role, TreeRole::kLeaf);
  EXPECT_EQ(l0.parent, "spine0");
  EXPECT_EQ(l0.parent_port, "up0");
  EXPECT_EQ(l0.parent_peer_port, "dn00");
  EXPECT_EQ(l0.rank_at_parent, 0u);
  EXPECT_EQ(plan->switches[2].rank_at_parent, 1u);

  EXPECT_EQ(plan->member_index_of_rank, (std::vector<uint32_t>{2, 0, 1, 3}));
  EXPECT_EQ(plan->member_slot[0].switch_index, 2u);
  EXPECT_EQ(plan->member_slot[0].rank_at_switch, 0u);
  EXPECT_EQ(plan->member_slot[3].rank_at_switch, 1u);
}

TEST_F(TreeBuilderTest, SpineWithMoreFreeSlotsIsChosen) {
  views_["spine0"].free_slots = 1000;
  views_["spine0"].largest_free_block = 1000;
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->switches[0].name, "spine1");
}

TEST_F(TreeBuilderTest, SpineWithoutSlotCapacityIsLeftOut) {
  views_["spine0"].free_slots = 300;
  views_["spine0"].largest_free_block = 100;  // fragmented: no 256 in a row
  views_["spine1"].free_slots = 200;
  views_["spine1"].largest_free_block = 200;
  req_.pool_size = 150;
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->switches[0].name, "spine1");

  req_.pool_size = 256;
  auto none = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kResourceExhausted);
  EXPECT_NE(none.status().message().find("spine0 has no 256 contiguous free slots"), std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("spine1"), std::string::npos);
}

TEST_F(TreeBuilderTest, SpineWithoutChildrenCapacityIsLeftOut) {
  views_["spine0"].caps.max_children = 1;
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->switches[0].name, "spine1");
}

TEST_F(TreeBuilderTest, SpineLackingARequiredCollectiveIsLeftOut) {
  req_.coll_mask = kBit(v1::REDUCE);
  views_["spine0"].caps.coll_mask &= ~kBit(v1::REDUCE);
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->switches[0].name, "spine1");
  EXPECT_EQ(plan->coll_mask, kBit(v1::REDUCE));

  views_["spine1"].caps.coll_mask &= ~kBit(v1::REDUCE);
  auto none = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("switch spine0 lacks collective REDUCE"), std::string::npos)
      << none.status().message();
}

TEST_F(TreeBuilderTest, LeafLackingARequiredDtypeMakesItsMembersUnreachable) {
  req_.dtype_mask = kBit(v1::FP32);
  views_["leaf01"].caps.dtype_mask &= ~kBit(v1::FP32);
  auto plan = Build({"h00_0", "h01_0", "h01_1"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("ranks 1,2 unreachable: switch leaf01 lacks data type FP32"),
            std::string::npos)
      << plan.status().message();
}

TEST_F(TreeBuilderTest, MemberBehindAnUnregisteredOrDeadLeafIsUnreachable) {
  views_.erase("leaf01");
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("rank 1 unreachable: switch leaf01 has not registered"),
            std::string::npos)
      << plan.status().message();

  SetUp();
  views_["leaf00"].alive = false;
  auto dead = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(dead.ok());
  EXPECT_NE(dead.status().message().find("leaf00 is not alive"), std::string::npos);
}

TEST_F(TreeBuilderTest, MemberWhosePortIsDownIsUnreachable) {
  views_["leaf00"].ports["h1"].up = false;
  auto plan = Build({"h00_1"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("rank 0 (host h00_1) unreachable: switch leaf00 port h1 is down"),
            std::string::npos)
      << plan.status().message();
}

TEST_F(TreeBuilderTest, SpineWithTheLeafLinkDownIsLeftOut) {
  views_["spine0"].ports["dn01"].up = false;
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->switches[0].name, "spine1");
  views_["leaf01"].ports["up1"].up = false;
  auto none = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("spine0 port dn01 is down"), std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("leaf01 port up1 is down"), std::string::npos);
}

TEST_F(TreeBuilderTest, LeavesWithoutAnySpineCannotBeJoined) {
  file_ = testing::MakeFabric(2, 0, 2);
  topo_ = *TopologyFromProto(file_);
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("the topology has no spine"), std::string::npos);
}

TEST_F(TreeBuilderTest, UnknownHostIsNotFound) {
  auto plan = Build({"h00_0", "nosuchhost"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kNotFound);
  EXPECT_NE(plan.status().message().find("nosuchhost"), std::string::npos);
}

TEST_F(TreeBuilderTest, TwoMembersOnOneSwitchPortAreRejected) {
  auto plan = Build({"h00_0", "h00_0"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("ranks 0 and 1 both attach through switch leaf00 port h0"),
            std::string::npos);
}

TEST_F(TreeBuilderTest, TooManyMembersUnderOneLeafExhaustItsChildren) {
  views_["leaf00"].caps.max_children = 2;
  auto plan = Build({"h00_0", "h00_1", "h00_2"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("would need 3 children"), std::string::npos);
}

TEST_F(TreeBuilderTest, ElementsPerPacketFollowSwitchLimitsAndPortMtus) {
  EXPECT_EQ(MaxElemsForMtu(1500), 250u);   // IB MTU 1024
  EXPECT_EQ(MaxElemsForMtu(2200), 506u);   // IB MTU 2048
  EXPECT_EQ(MaxElemsForMtu(9000), 1018u);  // IB MTU 4096
  req_.elems_per_packet = 250;
  auto ok = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->elems_per_packet, 250u);

  req_.elems_per_packet = 251;
  auto too_big = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("MTU 1500"), std::string::npos) << too_big.status().message();

  // With jumbo ports the switch maximum (504) is the limit.
  for (auto& [name, v] : views_)
    for (auto& [pname, p] : v.ports) p.mtu = 9000;
  req_.elems_per_packet = 505;
  auto over_switch = Build({"h00_0", "h01_0"});
  ASSERT_FALSE(over_switch.ok());
  EXPECT_NE(over_switch.status().message().find("max_elems_per_packet"), std::string::npos);
  req_.elems_per_packet = 0;
  req_.default_elems = 0;
  EXPECT_EQ(Build({"h00_0"})->elems_per_packet, 504u);  // the largest allowed
  req_.default_elems = 240;
  EXPECT_EQ(Build({"h00_0"})->elems_per_packet, 240u);  // an AM default below it
  req_.default_elems = 4000;
  EXPECT_EQ(Build({"h00_0"})->elems_per_packet, 504u);  // an AM default above it is capped
}

TEST_F(TreeBuilderTest, WithoutRequirementsTheTreeAllowsWhatEverySwitchSupports) {
  views_["spine0"].caps.dtype_mask &= ~kBit(v1::FP64);
  views_["spine1"].caps.dtype_mask &= ~kBit(v1::FP64);
  auto plan = Build({"h00_0", "h01_0"});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->dtype_mask & kBit(v1::FP64));
  EXPECT_TRUE(plan->dtype_mask & kBit(v1::FP32));
}

}  // namespace
}  // namespace inc::am
