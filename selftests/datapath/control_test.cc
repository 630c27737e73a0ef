// SPDX-License-Identifier: Apache-2.0
// Selftests of the control side of inc::dp::Datapath (datapath.cc):
// ConfigureTree checks with precise codes, reconfiguration, a restarted agent
// re-adopting pinned state, and the per-tree and per-member counters.
#include "fixture.h"

namespace inc::dp {
namespace {

// ------------------------------------------------------ control plane --

TEST_F(DatapathTest, ConfigureTreeValidatesWithPreciseCodes) {
  Switch sw(UniqueName("cfg"), true, 64);
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(2);
  auto spec = MakeTree(t, kids);
  auto expect = [&](TreeSpec s, Code code, const std::string& what) {
    Status st = sw.dp->ConfigureTree(s);
    EXPECT_EQ(st.code(), code) << what << ": " << st.ToString();
  };
  {
    auto s = spec;
    s.tree_id = 0;
    expect(s, Code::kInvalidArgument, "tree id 0");
  }
  {
    auto s = spec;
    s.children[1].port = "nosuchport0";
    expect(s, Code::kNotFound, "unknown port");
  }
  {
    auto s = spec;
    s.children[1].port = s.children[0].port;
    expect(s, Code::kInvalidArgument, "two children on one port");
  }
  {
    auto s = spec;
    s.pool_size = 65;
    expect(s, Code::kResourceExhausted, "beyond slot capacity");
  }
  {
    auto s = spec;
    s.role = INC_ROLE_LEAF;
    expect(s, Code::kInvalidArgument, "leaf without parent");
  }
  {
    auto s = spec;
    s.coll_mask = INC_BIT(INC_COLL_ALLGATHER);
    expect(s, Code::kInvalidArgument, "host-level collective");
  }
  {
    auto s = spec;
    s.max_elems = kMaxElems32 + 1;
    expect(s, Code::kInvalidArgument, "elements per packet");
  }
  ASSERT_TRUE(sw.dp->ConfigureTree(spec).ok());
  EXPECT_TRUE(sw.dp->ConfigureTree(spec).ok()) << "idempotent";
  EXPECT_EQ(sw.dp->FreeSlots(), 64u - t.pool);
  {
    auto s = spec;
    s.tree_id = 2;
    s.slot_base = 4;
    expect(s, Code::kFailedPrecondition, "overlapping slots");
  }
  auto trees = sw.dp->ListTrees();
  ASSERT_TRUE(trees.ok());
  ASSERT_EQ(trees->size(), 1u);
  TreeSpec want = spec;
  want.dtype_mask = INC_BIT(INC_DTYPE_INT32) | INC_BIT(INC_DTYPE_FP32) | INC_BIT(INC_DTYPE_INT64) |
                    INC_BIT(INC_DTYPE_FP64);  // every computed type: FP64 sums are added by the switch
  EXPECT_EQ(sw.dp->capabilities().dtype_mask, want.dtype_mask);
  want.op_mask = INC_OPS_ALL;  // every op of the wire table
  want.coll_mask = INC_BIT(INC_COLL_ALLREDUCE) | INC_BIT(INC_COLL_REDUCE) | INC_BIT(INC_COLL_BROADCAST) |
                   INC_BIT(INC_COLL_BARRIER);
  EXPECT_TRUE((*trees)[0] == want) << "ListTrees reads back what was configured";
  EXPECT_EQ(sw.dp->RemoveTree(1).code(), Code::kOk);
  EXPECT_EQ(sw.dp->RemoveTree(1).code(), Code::kNotFound);
  EXPECT_EQ(sw.dp->FreeSlots(), 64u);
  // The port is not attached, so with the tree gone its address is no longer
  // the switch's: the frame is transit traffic (an attached port's address
  // would make it an unknown_tree drop).
  auto r = TestRun(sw.prog(), FromPeer(kids[0], Header(t, 0, 0, 4), Payload(INC_DTYPE_INT32, 4, 0)),
                   kids[0].ifindex);
  EXPECT_EQ(r.retval, XDP_PASS) << "a removed tree no longer aggregates";
  EXPECT_EQ(sw.Stat("contributions"), 0u);
}

TEST_F(DatapathTest, ReconfigureKeepsSlotsUnlessTheLayoutChanges) {
  Switch sw(UniqueName("recfg"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(2);
  auto spec = MakeTree(t, kids);
  ASSERT_TRUE(sw.dp->ConfigureTree(spec).ok());
  auto p0 = Payload(INC_DTYPE_INT32, 4, 0), p1 = Payload(INC_DTYPE_INT32, 4, 1);
  ASSERT_EQ(TestRun(sw.prog(), FromPeer(kids[0], Header(t, 0, 0, 4), p0), kids[0].ifindex).retval, XDP_DROP);
  spec.key = t.key;  // same layout, new rkey for child 1
  spec.children[1].rkey = 0x4242;
  ASSERT_TRUE(sw.dp->ConfigureTree(spec).ok());
  EXPECT_EQ(TestRun(sw.prog(), FromPeer(kids[1], Header(t, 1, 0, 4), p1), kids[1].ifindex).retval,
            XDP_REDIRECT)
      << "the contribution made before the update still counts";
  spec.pool_size = 16;
  ASSERT_TRUE(sw.dp->ConfigureTree(spec).ok());
  EXPECT_EQ(TestRun(sw.prog(), FromPeer(kids[1], Header(t, 1, 0, 4), p1), kids[1].ifindex).retval, XDP_DROP)
      << "new pool: the slot starts empty";
  EXPECT_EQ(sw.Stat("completions"), 1u);
}

TEST_F(DatapathTest, RestartedAgentReadoptsPinnedStateAndKeepsAggregating) {
  std::string name = UniqueName("adopt");
  TreeParams t;
  auto kids = Kids(2);
  auto spec = MakeTree(t, kids);
  auto p0 = Payload(INC_DTYPE_INT32, 8, 0), p1 = Payload(INC_DTYPE_INT32, 8, 1);
  Options o;
  o.switch_name = name;
  o.pin_root = kPinRoot;
  o.slot_capacity = 128;
  {
    auto d = Datapath::Open(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_FALSE((*d)->adopted());
    ASSERT_TRUE((*d)->AttachPort(PortName(30)).ok());
    ASSERT_TRUE((*d)->ConfigureTree(spec).ok());
    ASSERT_EQ(
        TestRun((*d)->ingress_prog_fd(), FromPeer(kids[0], Header(t, 0, 0, 8), p0), kids[0].ifindex).retval,
        XDP_DROP);
  }  // agent exits without Destroy
  Options other = o;
  other.slot_capacity = 256;
  auto mismatched = Datapath::Open(other);
  EXPECT_EQ(mismatched.status().code(), Code::kFailedPrecondition)
      << "pinned slots of another capacity: " << mismatched.status().ToString();
  auto d = Datapath::Open(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE((*d)->adopted());
  auto ports = (*d)->Ports();
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].name, PortName(30));
  __u32 prog_id = 0;
  ASSERT_EQ(bpf_xdp_query_id(static_cast<int>(if_nametoindex(PortName(30).c_str())), 0, &prog_id), 0);
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd((*d)->ingress_prog_fd(), &info, &len), 0);
  EXPECT_EQ(prog_id, info.id) << "the port runs the new agent's program";
  auto trees = (*d)->ListTrees();
  ASSERT_TRUE(trees.ok());
  ASSERT_EQ(trees->size(), 1u);
  EXPECT_EQ((*trees)[0].children.size(), 2u);
  auto r = TestRun((*d)->ingress_prog_fd(), FromPeer(kids[1], Header(t, 1, 0, 8), p1), kids[1].ifindex);
  EXPECT_EQ(r.retval, XDP_REDIRECT) << "the contribution made before the restart completes the slot";
  ExpectBroadcastFrame(r.out, ResultHeader(Header(t, 1, 0, 8), 8),
                       Reference(INC_DTYPE_INT32, INC_OP_SUM, {p0, p1}).bytes);
  ASSERT_TRUE((*d)->Destroy().ok());
  struct stat st;
  EXPECT_NE(stat((kPinRoot + "/" + name).c_str(), &st), 0) << "Destroy removes the pins";
  EXPECT_EQ(bpf_xdp_query_id(static_cast<int>(if_nametoindex(PortName(30).c_str())), 0, &prog_id), 0);
  EXPECT_EQ(prog_id, 0u) << "Destroy detaches";
}

// A data path with a drop reason more than the previous version's (appended
// at the end of the enum) takes over the previous agent's pinned counters
// instead of refusing to start.
TEST_F(DatapathTest, RestartedNewerDataPathCopiesSmallerPinnedDropCounters) {
  std::string name = UniqueName("grow");
  std::string dir = kPinRoot + "/" + name;
  mkdir(kPinRoot.c_str(), 0700);
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << std::strerror(errno);
  int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  int old_drops = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "drops", sizeof(uint32_t), sizeof(uint64_t),
                                 INC_DROP__MAX - 1, nullptr);
  ASSERT_GE(old_drops, 0) << std::strerror(errno);
  std::vector<uint64_t> per_cpu(ncpu, 0);
  per_cpu[0] = 5;
  per_cpu[ncpu - 1] += 2;
  uint32_t dup = INC_DROP_DUPLICATE;
  ASSERT_EQ(bpf_map_update_elem(old_drops, &dup, per_cpu.data(), BPF_ANY), 0);
  ASSERT_EQ(bpf_obj_pin(old_drops, (dir + "/drops").c_str()), 0) << std::strerror(errno);
  close(old_drops);

  Options o;
  o.switch_name = name;
  o.pin_root = kPinRoot;
  o.slot_capacity = 64;
  auto d = Datapath::Open(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto st = (*d)->ReadStats();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->drops.at("duplicate"), 7u) << "the previous agent's counts survive";
  EXPECT_EQ(st->drops.at("bad_port"), 0u);
  int pinned = bpf_obj_get((dir + "/drops").c_str());
  ASSERT_GE(pinned, 0);
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(pinned, &info, &len), 0);
  close(pinned);
  EXPECT_EQ(info.max_entries, static_cast<uint32_t>(INC_DROP__MAX)) << "the pin is the new, larger map";
  ASSERT_TRUE((*d)->Destroy().ok());
}

TEST_F(DatapathTest, StatsCountPerTreeAndPerMember) {
  Switch sw(UniqueName("stats"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(2);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  std::vector<uint32_t> psn(2, 0);
  RunMessage(sw, t, kids, 0, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
             {Payload(INC_DTYPE_INT32, 4, 0), Payload(INC_DTYPE_INT32, 4, 1)}, 0, &psn);
  TestRun(sw.prog(), FromPeer(kids[0], Header(t, 0, 1, 4), Payload(INC_DTYPE_INT32, 4, 0), 1),
          kids[0].ifindex);
  TestRun(sw.prog(), FromPeer(kids[0], Header(t, 0, 1, 4), Payload(INC_DTYPE_INT32, 4, 0), 1),
          kids[0].ifindex);  // duplicate
  auto s = sw.dp->ReadStats();
  ASSERT_TRUE(s.ok());
  const Counters& tree = s->trees.at(1);
  EXPECT_EQ(tree.rx_packets, 6u);
  EXPECT_EQ(tree.completions, 1u);
  EXPECT_EQ(tree.retransmissions, 3u);
  EXPECT_EQ(tree.drops, 1u);
  EXPECT_EQ(tree.tx_packets, 2u);
  const Counters& m0 = s->members.at({1, 0});
  EXPECT_EQ(m0.rx_packets, 4u);
  EXPECT_EQ(m0.tx_packets, 1u);
  EXPECT_EQ(m0.drops, 1u);
  EXPECT_EQ(s->global.at("rx_packets"), 6u);
  EXPECT_EQ(s->drops.at("duplicate"), 1u);
}

}  // namespace
}  // namespace inc::dp
