// SPDX-License-Identifier: Apache-2.0
#include "switch/tree/translate.h"

#include <gtest/gtest.h>

namespace inc::sw {
namespace {

v1::Endpoint Ep(const std::string& port, const std::string& ip, uint32_t switch_qpn) {
  v1::Endpoint e;
  e.set_port(port);
  e.set_peer_mac("02:00:00:00:00:0a");
  e.set_peer_ip(ip);
  e.set_peer_qpn(0x100 + switch_qpn);
  e.set_switch_qpn(switch_qpn);
  e.set_rkey(0xabcd);
  e.set_va_base(0x7f0000001000ull);
  e.set_slot_stride(1024);
  e.set_member_lo(0);
  e.set_member_hi(1);
  return e;
}

v1::TreeConfig Single() {
  v1::TreeConfig t;
  t.set_tree_id(7);
  t.set_key(0xdeadbeef);
  t.set_role(v1::SINGLE);
  t.set_pool_size(64);
  t.set_elems_per_packet(240);
  t.set_slot_base(128);
  t.add_dtypes(v1::INT32);
  t.add_dtypes(v1::FP32);
  t.add_ops(v1::SUM);
  t.add_collectives(v1::ALLREDUCE);
  *t.add_children() = Ep("p0", "10.0.0.1", 0x10);
  *t.add_children() = Ep("p1", "10.0.1.1", 0x11);
  return t;
}

PortTable Ports() {
  return {{"p0", {true, true}}, {"p1", {true, true}}, {"p2", {true, true}}};
}

dp::Capabilities Caps() {
  dp::Capabilities c;
  c.slot_capacity = 1024;
  c.dtype_mask = INC_BIT(INC_DTYPE_INT32) | INC_BIT(INC_DTYPE_FP32) | INC_BIT(INC_DTYPE_INT64);
  c.op_mask = INC_BIT(INC_OP_SUM) | INC_BIT(INC_OP_MIN) | INC_BIT(INC_OP_MAX);
  c.coll_mask = INC_BIT(INC_COLL_ALLREDUCE) | INC_BIT(INC_COLL_BARRIER);
  return c;
}

void ExpectError(const v1::TreeConfig& t, Code code, const std::string& words, PortTable ports = Ports()) {
  auto spec = TreeConfigToSpec(t, ports, Caps());
  ASSERT_FALSE(spec.ok()) << "expected " << CodeName(code) << " mentioning " << words;
  EXPECT_EQ(spec.status().code(), code) << spec.status().ToString();
  EXPECT_NE(spec.status().message().find(words), std::string::npos) << spec.status().message();
}

TEST(Translate, SingleTreeMapsEveryField) {
  auto spec = TreeConfigToSpec(Single(), Ports(), Caps());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->tree_id, 7);
  EXPECT_EQ(spec->key, 0xdeadbeefu);
  EXPECT_EQ(spec->role, INC_ROLE_SINGLE);
  EXPECT_EQ(spec->pool_size, 64);
  EXPECT_EQ(spec->max_elems, 240);
  EXPECT_EQ(spec->slot_base, 128u);
  EXPECT_EQ(spec->dtype_mask, INC_BIT(INC_DTYPE_INT32) | INC_BIT(INC_DTYPE_FP32));
  EXPECT_EQ(spec->op_mask, INC_BIT(INC_OP_SUM));
  EXPECT_EQ(spec->coll_mask, INC_BIT(INC_COLL_ALLREDUCE));
  ASSERT_EQ(spec->children.size(), 2u);
  const auto& c1 = spec->children[1];
  EXPECT_EQ(c1.port, "p1");
  EXPECT_EQ(c1.peer_mac.ToString(), "02:00:00:00:00:0a");
  EXPECT_EQ(c1.peer_ip.ToString(), "10.0.1.1");
  EXPECT_EQ(c1.peer_qpn, 0x111u);
  EXPECT_EQ(c1.switch_qpn, 0x11u);
  EXPECT_EQ(c1.rkey, 0xabcdu);
  EXPECT_EQ(c1.va_base, 0x7f0000001000ull);
  EXPECT_EQ(c1.slot_stride, 1024u);
  EXPECT_EQ(c1.member_hi, 1);
  EXPECT_FALSE(spec->parent.has_value());
}

TEST(Translate, LeafCarriesItsParentAndRank) {
  auto t = Single();
  t.set_role(v1::LEAF);
  *t.mutable_parent() = Ep("p2", "10.0.2.1", 0x20);
  t.set_rank_at_parent(3);
  auto spec = TreeConfigToSpec(t, Ports(), Caps());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->role, INC_ROLE_LEAF);
  ASSERT_TRUE(spec->parent.has_value());
  EXPECT_EQ(spec->parent->port, "p2");
  EXPECT_EQ(spec->parent->switch_qpn, 0x20u);
  EXPECT_EQ(spec->rank_at_parent, 3);
}

TEST(Translate, ZeroElemsPerPacketMeansTheWireDefault) {
  auto t = Single();
  t.set_elems_per_packet(0);
  auto spec = TreeConfigToSpec(t, Ports(), Caps());
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->max_elems, INC_DEFAULT_ELEMS_PER_PACKET);
}

TEST(Translate, EmptyEnumListsMeanEverySupported) {
  auto t = Single();
  t.clear_dtypes();
  t.clear_ops();
  t.clear_collectives();
  auto spec = TreeConfigToSpec(t, Ports(), Caps());
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->dtype_mask, 0);
  EXPECT_EQ(spec->op_mask, 0);
  EXPECT_EQ(spec->coll_mask, 0);
}

TEST(Translate, TreeIdOutOfRangeIsInvalid) {
  auto t = Single();
  t.set_tree_id(0);
  ExpectError(t, Code::kInvalidArgument, "tree_id 0 is out of range 1..1023");
  t.set_tree_id(1024);
  ExpectError(t, Code::kInvalidArgument, "tree_id 1024 is out of range");
}

TEST(Translate, RolesOtherThanSingleLeafOrRootAreInvalidAndNamed) {
  struct Case {
    const char* name;
    int role;
    const char* error;
  };
  const Case cases[] = {
      {"unspecified", v1::ROLE_UNSPECIFIED, "tree 7: role ROLE_UNSPECIFIED is not SINGLE, LEAF or ROOT"},
      {"a number the enum does not have", 9, "tree 7: role 9 (no such role) is not SINGLE, LEAF or ROOT"},
      {"negative", -1, "tree 7: role -1 (no such role) is not SINGLE, LEAF or ROOT"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto t = Single();
    t.set_tree_id(7);
    t.set_role(static_cast<v1::Role>(c.role));
    ExpectError(t, Code::kInvalidArgument, c.error);
  }
}

TEST(Translate, PoolSizeMustBePositiveAndFit16Bits) {
  auto t = Single();
  t.set_pool_size(0);
  ExpectError(t, Code::kInvalidArgument, "pool_size must be > 0");
  t.set_pool_size(70000);
  ExpectError(t, Code::kInvalidArgument, "pool_size 70000 exceeds 65535");
}

TEST(Translate, TooManyElementsPerPacketIsInvalid) {
  auto t = Single();
  t.set_elems_per_packet(Caps().max_elems_per_packet + 1);
  ExpectError(t, Code::kInvalidArgument, "exceeds this switch's maximum");
}

TEST(Translate, UnsupportedOrUnknownEnumValuesAreInvalid) {
  auto t = Single();
  t.add_dtypes(v1::FP16);
  ExpectError(t, Code::kInvalidArgument, "dtype FP16 is not supported");
  t = Single();
  t.add_ops(v1::REDUCE_OP_UNSPECIFIED);
  ExpectError(t, Code::kInvalidArgument, "op value 0 is not valid");
  t = Single();
  t.add_collectives(v1::BROADCAST);
  ExpectError(t, Code::kInvalidArgument, "collective BROADCAST is not supported");
}

TEST(Translate, NoChildrenIsInvalidAndMoreThan64IsExhausted) {
  auto t = Single();
  t.clear_children();
  ExpectError(t, Code::kInvalidArgument, "no children");
  t = Single();
  t.clear_children();
  PortTable many;
  for (int i = 0; i < 65; i++) {
    std::string port = "q" + std::to_string(i);
    many[port] = {true, true};
    *t.add_children() = Ep(port, "10.1.0." + std::to_string(i + 1), 0x100 + i);
  }
  ExpectError(t, Code::kResourceExhausted, "65 children exceed this switch's maximum 64", many);
}

TEST(Translate, UnknownPortIsNotFound) {
  auto t = Single();
  t.mutable_children(1)->set_port("eth9");
  ExpectError(t, Code::kNotFound,
              "children[1]: port 'eth9' is not a port of this switch (ports: p0, p1, p2)");
}

TEST(Translate, DetachedOrDownPortFailsPrecondition) {
  auto ports = Ports();
  ports["p1"].attached = false;
  ExpectError(Single(), Code::kFailedPrecondition, "port 'p1' has no XDP program attached", ports);
  ports = Ports();
  ports["p0"].up = false;
  ExpectError(Single(), Code::kFailedPrecondition, "children[0]: port 'p0' is down", ports);
}

TEST(Translate, TwoChildrenOnOnePortAreInvalid) {
  auto t = Single();
  t.mutable_children(1)->set_port("p0");
  ExpectError(t, Code::kInvalidArgument, "at most one child per switch port");
}

TEST(Translate, DuplicateSwitchQpnIsInvalid) {
  auto t = Single();
  t.mutable_children(1)->set_switch_qpn(0x10);
  ExpectError(t, Code::kInvalidArgument, "switch_qpn 16 is already children[0]'s");
}

TEST(Translate, BadEndpointAddressesAndQpnsAreInvalid) {
  auto t = Single();
  t.mutable_children(0)->set_peer_mac("02:00:00:00:00");
  ExpectError(t, Code::kInvalidArgument, "children[0].peer_mac");
  t = Single();
  t.mutable_children(0)->set_peer_ip("10.0.0");
  ExpectError(t, Code::kInvalidArgument, "children[0].peer_ip");
  t = Single();
  t.mutable_children(0)->set_switch_qpn(1u << 24);
  ExpectError(t, Code::kInvalidArgument, "switch_qpn 16777216 is out of range");
  t = Single();
  t.mutable_children(0)->set_peer_qpn(0);
  ExpectError(t, Code::kInvalidArgument, "peer_qpn 0 is out of range");
  t = Single();
  t.mutable_children(0)->set_member_lo(5);
  ExpectError(t, Code::kInvalidArgument, "member range [5, 1) is not valid");
}

TEST(Translate, LeafWithoutParentIsInvalid) {
  auto t = Single();
  t.set_role(v1::LEAF);
  ExpectError(t, Code::kInvalidArgument, "role LEAF needs a parent");
}

TEST(Translate, ParentOnANonLeafIsInvalid) {
  auto t = Single();
  t.set_role(v1::ROOT);
  *t.mutable_parent() = Ep("p2", "10.0.2.1", 0x20);
  ExpectError(t, Code::kInvalidArgument, "role ROOT must not have a parent");
  t = Single();
  t.set_rank_at_parent(2);
  ExpectError(t, Code::kInvalidArgument, "rank_at_parent is only meaningful for role LEAF");
}

TEST(Translate, LeafParentOnUnknownPortIsNotFound) {
  auto t = Single();
  t.set_role(v1::LEAF);
  *t.mutable_parent() = Ep("up9", "10.0.2.1", 0x20);
  ExpectError(t, Code::kNotFound, "parent: port 'up9'");
}

dp::TreeSpec Spec(uint16_t id, uint32_t base, uint16_t pool) {
  dp::TreeSpec s;
  s.tree_id = id;
  s.slot_base = base;
  s.pool_size = pool;
  return s;
}

TEST(Placement, FitsBesideOtherTrees) {
  std::map<uint16_t, dp::TreeSpec> live{{1, Spec(1, 0, 128)}, {2, Spec(2, 256, 128)}};
  EXPECT_TRUE(CheckPlacement(Spec(3, 128, 128), live, Caps()).ok());
  EXPECT_TRUE(CheckPlacement(Spec(3, 896, 128), live, Caps()).ok()) << "ends exactly at the capacity";
}

TEST(Placement, BeyondSlotCapacityIsExhausted) {
  Status st = CheckPlacement(Spec(3, 1000, 64), {}, Caps());
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("slots [1000, 1064) exceed this switch's slot capacity 1024"),
            std::string::npos)
      << st.message();
}

TEST(Placement, OverlapWithAnotherTreeIsAlreadyExists) {
  std::map<uint16_t, dp::TreeSpec> live{{1, Spec(1, 0, 128)}};
  Status st = CheckPlacement(Spec(3, 127, 2), live, Caps());
  EXPECT_EQ(st.code(), Code::kAlreadyExists);
  EXPECT_NE(st.message().find("overlap tree 1's [0, 128)"), std::string::npos) << st.message();
}

TEST(Placement, ReconfiguringATreeMayReuseItsOwnSlots) {
  std::map<uint16_t, dp::TreeSpec> live{{1, Spec(1, 0, 128)}};
  EXPECT_TRUE(CheckPlacement(Spec(1, 64, 128), live, Caps()).ok());
}

TEST(Placement, FullTreeTableIsExhausted) {
  auto caps = Caps();
  caps.max_trees = 2;
  std::map<uint16_t, dp::TreeSpec> live{{1, Spec(1, 0, 8)}, {2, Spec(2, 8, 8)}};
  Status st = CheckPlacement(Spec(3, 16, 8), live, caps);
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("maximum of 2 trees"), std::string::npos);
  EXPECT_TRUE(CheckPlacement(Spec(2, 8, 8), live, caps).ok()) << "an existing tree may be reconfigured";
}

TEST(Stats, CapabilitiesListTheMaskBits) {
  v1::Capabilities out;
  FillCapabilities(Caps(), 900, &out);
  ASSERT_EQ(out.dtypes_size(), 3);
  EXPECT_EQ(out.dtypes(2), v1::INT64);
  EXPECT_EQ(out.ops_size(), 3);
  ASSERT_EQ(out.collectives_size(), 2);
  EXPECT_EQ(out.collectives(1), v1::BARRIER);
  EXPECT_EQ(out.free_slots(), 900u);
  EXPECT_EQ(out.slot_capacity(), 1024u);
  EXPECT_EQ(out.max_children(), 64u);
}

TEST(Stats, FilterByTreeAndNameMembersBySwitchQpn) {
  dp::Stats s;
  s.global["rx_packets"] = 10;
  s.drops["bad_key"] = 2;
  s.trees[7].rx_packets = 4;
  s.trees[8].rx_packets = 6;
  s.members[{7, 1}].rx_packets = 2;
  s.members[{8, 0}].rx_packets = 3;
  auto spec = TreeConfigToSpec(Single(), Ports(), Caps());
  ASSERT_TRUE(spec.ok());
  std::map<uint16_t, dp::TreeSpec> live{{7, *spec}};
  v1::SwitchStats out;
  FillStats(s, 7, live, &out);
  EXPECT_EQ(out.global().at("rx_packets"), 10u);
  ASSERT_EQ(out.drops_size(), 1);
  EXPECT_EQ(out.drops(0).reason(), "bad_key");
  ASSERT_EQ(out.trees_size(), 1);
  EXPECT_EQ(out.trees(0).counters().rx_packets(), 4u);
  ASSERT_EQ(out.members_size(), 1);
  EXPECT_EQ(out.members(0).rank(), 1u);
  EXPECT_EQ(out.members(0).switch_qpn(), 0x11u);
  v1::SwitchStats all;
  FillStats(s, 0, live, &all);
  EXPECT_EQ(all.trees_size(), 2);
  EXPECT_EQ(all.members_size(), 2);
}

}  // namespace
}  // namespace inc::sw
