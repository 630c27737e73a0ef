// SPDX-License-Identifier: Apache-2.0
// Selftests of two-level trees: leaf -> root -> leaf exchanges with
// retransmissions in every state, a moved tree whose new root pulls the result
// a leaf holds, and retransmissions answered from a stored result.
#include "fixture.h"

namespace inc::dp {
namespace {

// -------------------------------------------------- leaf -> root -> leaf --

TEST_F(DatapathTest, TwoLevelLeafRootLeafExchangeWithRetransmissionsInEveryState) {
  Switch leaf(UniqueName("leaf"));
  Switch root(UniqueName("root"));
  ASSERT_TRUE(leaf.dp && root.dp);
  TreeParams t;
  t.tree_id = 9;
  // Leaf: members 0, 1 on ports 0, 1; uplink port 10 to the root's port 11.
  auto members = Kids(2);
  // The root's switch QPN for the leaf is 0x777, the leaf's QPN that the
  // root's results carry 0x888.
  auto [up, down] = LinkSwitches(10, 11, 0x777, 0x888, 0, 2);
  Peer m2 = MakePeer(12, 2);  // member 2 directly on the root
  TreeParams lt = t;
  lt.role = INC_ROLE_LEAF;
  TreeSpec ls = MakeTree(lt, members);
  ls.parent = up.ToEndpoint();
  ls.rank_at_parent = 0;
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  TreeParams rt = t;
  rt.role = INC_ROLE_ROOT;
  ASSERT_TRUE(root.dp->ConfigureTree(MakeTree(rt, {down, m2})).ok());

  const uint32_t msg = 3;
  auto p0 = Payload(INC_DTYPE_INT32, 100, 1), p1 = Payload(INC_DTYPE_INT32, 100, 2),
       p2 = Payload(INC_DTYPE_INT32, 100, 3);
  IncHeader h0 = Header(t, 0, msg, 100), h1 = Header(t, 1, msg, 100);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], h0, p0), members[0].ifindex).retval, XDP_DROP);
  // Retransmission while aggregating: duplicate.
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], h0, p0), members[0].ifindex).retval, XDP_DROP);
  EXPECT_EQ(leaf.Drops("duplicate"), 1u);
  auto partial = TestRun(leaf.prog(), FromPeer(members[1], h1, p1), members[1].ifindex);
  ASSERT_EQ(partial.retval, XDP_REDIRECT) << "partial goes out of the uplink port";
  auto sum01 = Reference(INC_DTYPE_INT32, INC_OP_SUM, {p0, p1}).bytes;
  IncHeader ph = h1;
  ph.rank = 0;  // rank at parent
  EXPECT_EQ(Hex(partial.out), Hex(ToPeer(up, ph, sum01, 0))) << "partial to the root";
  // Retransmission while waiting for the parent: the partial again, flagged.
  auto again = TestRun(leaf.prog(), FromPeer(members[0], h0, p0), members[0].ifindex);
  ASSERT_EQ(again.retval, XDP_REDIRECT);
  IncHeader rph = ph;
  rph.flags = INC_FLAG_RETRANSMIT;
  EXPECT_EQ(Hex(again.out), Hex(ToPeer(up, rph, sum01, 1)));

  // Root: the leaf's partial (first copy) then member 2.
  ASSERT_EQ(TestRun(root.prog(), partial.out, down.ifindex).retval, XDP_DROP);
  IncHeader h2 = Header(t, 1, msg, 100);
  auto done = TestRun(root.prog(), FromPeer(m2, h2, p2), m2.ifindex);
  ASSERT_EQ(done.retval, XDP_REDIRECT);
  auto total = Reference(INC_DTYPE_INT32, INC_OP_SUM, {p0, p1, p2}).bytes;
  ExpectBroadcastFrame(done.out, ResultHeader(h2, 100), total);
  // The leaf's retransmitted partial makes the root resend the result to it.
  auto to_leaf = TestRun(root.prog(), again.out, down.ifindex);
  ASSERT_EQ(to_leaf.retval, XDP_TX);
  IncHeader rh = ResultHeader(h2, 100);
  EXPECT_EQ(Hex(to_leaf.out), Hex(ToPeer(down, rh, total, 0)));
  // The leaf stores the result and replicates it to its members.
  auto bcast = TestRun(leaf.prog(), to_leaf.out, up.ifindex);
  ASSERT_EQ(bcast.retval, XDP_REDIRECT);
  ExpectBroadcastFrame(bcast.out, rh, total);
  // A member that lost it retransmits and gets its own copy.
  auto mine = TestRun(leaf.prog(), FromPeer(members[1], h1, p1), members[1].ifindex);
  ASSERT_EQ(mine.retval, XDP_TX);
  EXPECT_EQ(Hex(mine.out), Hex(ToPeer(members[1], rh, total, 0)));
  EXPECT_TRUE(CheckIcrc(mine.out.data(), mine.out.size()));
  EXPECT_EQ(leaf.Stat("partials_tx"), 1u);
  EXPECT_EQ(leaf.Stat("drops"), 1u);
  EXPECT_EQ(root.Stat("drops"), 0u);
}

// The tree moved to a new root after the old root had sent message m's result
// to leaf 1 but not to leaf 2 (docs/wire-format.md, "Tree moves"). The new
// root pulls m when leaf 2 retransmits what it already counted; leaf 1
// answers with the result it holds; the root adopts it and leaf 2 gets it.
TEST_F(DatapathTest, TwoLevelMovedTreeNewRootPullsTheResultALeafStillHolds) {
  Switch leaf(UniqueName("leaf"));
  Switch root(UniqueName("newroot"));
  ASSERT_TRUE(leaf.dp && root.dp);
  TreeParams t;
  t.tree_id = 12;
  auto members = Kids(2);
  SwitchLink old_link = LinkSwitches(20, 21, 0x700, 0x800, 0, 2);
  SwitchLink new_link = LinkSwitches(22, 23, 0x701, 0x801, 0, 2);
  SwitchLink leaf2 = LinkSwitches(24, 25, 0x702, 0x802, 2, 4);  // only its root side is used
  TreeParams lt = t;
  lt.role = INC_ROLE_LEAF;
  TreeSpec ls = MakeTree(lt, members);
  ls.parent = old_link.up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());

  const uint32_t msg = 5;
  auto p0 = Payload(INC_DTYPE_INT32, 60, 11), p1 = Payload(INC_DTYPE_INT32, 60, 12),
       p23 = Payload(INC_DTYPE_INT32, 60, 13);
  IncHeader h0 = Header(t, 0, msg, 60), h1 = Header(t, 1, msg, 60);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], h0, p0), members[0].ifindex).retval, XDP_DROP);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[1], h1, p1), members[1].ifindex).retval, XDP_REDIRECT);
  // The old root's result reaches leaf 1, which replicates it.
  auto total = Reference(INC_DTYPE_INT32, INC_OP_SUM, {p0, p1, p23}).bytes;
  IncHeader rh = ResultHeader(h1, 60);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(old_link.up, rh, total), old_link.up.ifindex).retval, XDP_REDIRECT);

  // The AM moves the tree: leaf 1 gets a new parent (its slots stay), the
  // new root knows leaf 1 (rank 0) and leaf 2 (rank 1).
  ls.parent = new_link.up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  TreeParams rt = t;
  rt.role = INC_ROLE_ROOT;
  ASSERT_TRUE(root.dp->ConfigureTree(MakeTree(rt, {new_link.down, leaf2.down})).ok());

  // Leaf 2 never got m: its members retransmit, it resends its partial.
  IncHeader p2h = Header(t, 1, msg, 60, INC_COLL_ALLREDUCE);
  p2h.flags = INC_FLAG_RETRANSMIT;
  auto partial2 = FromPeer(leaf2.down, p2h, p23);
  ASSERT_EQ(TestRun(root.prog(), partial2, leaf2.down.ifindex).retval, XDP_DROP) << "counted";
  auto pull = TestRun(root.prog(), partial2, leaf2.down.ifindex);
  ASSERT_EQ(pull.retval, XDP_REDIRECT) << "a counted child retransmits: pull every child switch";
  IncHeader pull_hdr = h1;
  pull_hdr.flags = INC_FLAG_PULL;
  pull_hdr.rank = INC_RANK_RESULT;
  pull_hdr.count = 0;
  ExpectBroadcastFrame(pull.out, pull_hdr, {});
  EXPECT_EQ(root.Drops("duplicate"), 0u) << "the retransmission became a pull, not a drop";

  // Leaf 1 gets the pull (as the egress program addresses it) and answers
  // with the result it holds, flagged RESULT, as its rank at the parent.
  auto answer = TestRun(leaf.prog(), FromPeer(new_link.up, pull_hdr, {}), new_link.up.ifindex);
  ASSERT_EQ(answer.retval, XDP_TX);
  auto parsed = ParseFrame(answer.out.data(), answer.out.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->inc.flags, INC_FLAG_RESULT);
  EXPECT_EQ(parsed->inc.rank, 0);
  EXPECT_EQ(parsed->inc.msg_id, msg);
  ASSERT_EQ(parsed->payload_len, total.size());
  EXPECT_EQ(0, std::memcmp(parsed->payload, total.data(), total.size()));
  EXPECT_EQ(parsed->dest_qpn, new_link.up.peer_qpn) << "addressed to the new parent";
  EXPECT_TRUE(CheckIcrc(answer.out.data(), answer.out.size()));
  EXPECT_EQ(leaf.Stat("pull_answers"), 1u);

  // The answer arriving on another child's port is not the leaf's.
  EXPECT_EQ(TestRun(root.prog(), answer.out, leaf2.down.ifindex).retval, XDP_DROP);
  EXPECT_EQ(root.Drops("bad_port"), 1u);
  EXPECT_EQ(root.Stat("results_adopted"), 0u);
  // The root adopts it as m's result and sends it to every child.
  auto adopted = TestRun(root.prog(), answer.out, new_link.down.ifindex);
  ASSERT_EQ(adopted.retval, XDP_REDIRECT);
  ExpectBroadcastFrame(adopted.out, ResultHeader(h1, 60), total);
  EXPECT_EQ(root.Stat("results_adopted"), 1u);
  // A second answer is a duplicate; leaf 2 retransmitting again gets m.
  ASSERT_EQ(TestRun(root.prog(), answer.out, new_link.down.ifindex).retval, XDP_DROP);
  EXPECT_EQ(root.Drops("duplicate"), 1u);
  auto resend = TestRun(root.prog(), partial2, leaf2.down.ifindex);
  ASSERT_EQ(resend.retval, XDP_TX);
  auto to2 = ParseFrame(resend.out.data(), resend.out.size());
  ASSERT_TRUE(to2.ok());
  EXPECT_EQ(to2->inc.flags, INC_FLAG_RESULT);
  ASSERT_EQ(to2->payload_len, total.size());
  EXPECT_EQ(0, std::memcmp(to2->payload, total.data(), total.size()));

  // A pull for a message leaf 1 has not finished is ignored, not answered.
  IncHeader other = pull_hdr;
  other.msg_id = msg + 1;
  other.slot = static_cast<uint16_t>((msg + 1) % t.pool);
  EXPECT_EQ(TestRun(leaf.prog(), FromPeer(new_link.up, other, {}), new_link.up.ifindex).retval, XDP_DROP);
  EXPECT_EQ(leaf.Stat("pulls_ignored"), 1u);
  // Pulls and child results are only what a parent and a root take.
  EXPECT_EQ(TestRun(leaf.prog(), FromPeer(members[0], other, {}), members[0].ifindex).retval, XDP_DROP);
  IncHeader both = pull_hdr;
  both.flags = INC_FLAG_PULL | INC_FLAG_RESULT;
  EXPECT_EQ(TestRun(leaf.prog(), FromPeer(new_link.up, both, {}), new_link.up.ifindex).retval, XDP_DROP);
  IncHeader from_member = ResultHeader(h0, 60);
  from_member.rank = 0;
  EXPECT_EQ(TestRun(leaf.prog(), FromPeer(members[0], from_member, total), members[0].ifindex).retval,
            XDP_DROP);
  EXPECT_EQ(leaf.Drops("bad_result"), 3u) << "pull from a member, pull+result, result from a member";
}

// A leaf whose subtree lacks the Reduce root stores the parent's count-0
// result; a member's retransmitted full contribution must get that count-0
// result back, not be dropped as bad_count.
TEST_F(DatapathTest, TwoLevelReduceLeafAnswersRetransmissionWithStoredCountZeroResult) {
  Switch leaf(UniqueName("rleaf"));
  Switch root(UniqueName("rroot"));
  ASSERT_TRUE(leaf.dp && root.dp);
  TreeParams t;
  t.tree_id = 10;
  auto members = Kids(2);
  auto [up, down] = LinkSwitches(10, 11, 0x777, 0x888, 0, 2);
  Peer m2 = MakePeer(12, 2);  // the Reduce root, directly on the root switch
  TreeParams lt = t;
  lt.role = INC_ROLE_LEAF;
  TreeSpec ls = MakeTree(lt, members);
  ls.parent = up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  TreeParams rt = t;
  rt.role = INC_ROLE_ROOT;
  ASSERT_TRUE(root.dp->ConfigureTree(MakeTree(rt, {down, m2})).ok());

  const uint32_t msg = 5;
  auto p0 = Payload(INC_DTYPE_INT32, 64, 1), p1 = Payload(INC_DTYPE_INT32, 64, 2),
       p2 = Payload(INC_DTYPE_INT32, 64, 3);
  auto hdr = [&](uint16_t rank) {
    IncHeader h = Header(t, rank, msg, 64, INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_SUM);
    h.root_rank = 2;
    return h;
  };
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], hdr(0), p0), members[0].ifindex).retval, XDP_DROP);
  auto partial = TestRun(leaf.prog(), FromPeer(members[1], hdr(1), p1), members[1].ifindex);
  ASSERT_EQ(partial.retval, XDP_REDIRECT);
  ASSERT_EQ(TestRun(root.prog(), partial.out, down.ifindex).retval, XDP_DROP);
  auto done = TestRun(root.prog(), FromPeer(m2, hdr(1), p2), m2.ifindex);
  ASSERT_EQ(done.retval, XDP_REDIRECT);
  // The leaf's partial was "lost": its retransmission gets the root's
  // result for the leaf, which holds no root member: count 0.
  auto again = TestRun(leaf.prog(), FromPeer(members[0], hdr(0), p0), members[0].ifindex);
  ASSERT_EQ(again.retval, XDP_REDIRECT);
  auto to_leaf = TestRun(root.prog(), again.out, down.ifindex);
  ASSERT_EQ(to_leaf.retval, XDP_TX);
  IncHeader rh = ResultHeader(hdr(1), 0);
  EXPECT_EQ(Hex(to_leaf.out), Hex(ToPeer(down, rh, {}, 0)));
  ASSERT_EQ(TestRun(leaf.prog(), to_leaf.out, up.ifindex).retval, XDP_REDIRECT);
  // Both members lost that copy and retransmit their full contributions.
  for (int i = 0; i < 2; i++) {
    IncHeader h = hdr(static_cast<uint16_t>(i));
    h.flags = INC_FLAG_RETRANSMIT;
    auto r = TestRun(leaf.prog(), FromPeer(members[i], h, i ? p1 : p0), members[i].ifindex);
    ASSERT_EQ(r.retval, XDP_TX) << "member " << i;
    EXPECT_EQ(Hex(r.out), Hex(ToPeer(members[i], rh, {}, 0))) << "member " << i;
    EXPECT_TRUE(CheckIcrc(r.out.data(), r.out.size()));
  }
  EXPECT_EQ(leaf.Drops("bad_count"), 0u);
  EXPECT_EQ(leaf.Stat("drops"), 0u);
  EXPECT_EQ(root.Stat("drops"), 0u);
}

// The same on one switch: a leaf that stored a count-0 Reduce RESULT from its
// parent (frame built here) answers retransmitted contributions, and a
// retransmitted Broadcast ready (count 0) on a leaf holding the root's data
// gets the data.
TEST_F(DatapathTest, SingleLevelLeafAnswersRetransmissionsWhoseCountDiffersFromStoredResult) {
  Switch leaf(UniqueName("sleaf"));
  ASSERT_TRUE(leaf.dp);
  TreeParams t;
  t.tree_id = 11;
  t.role = INC_ROLE_LEAF;
  auto members = Kids(2);
  Peer up = MakePeer(10, 0);
  up.va = 0;
  up.rkey = 0;
  up.stride = 0;
  TreeSpec ls = MakeTree(t, members);
  ls.parent = up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  // The parent's frames: from up.peer (the parent) to up.switch (this leaf).
  auto from_parent = [&](const IncHeader& h, const std::vector<uint8_t>& payload) {
    return FromPeer(up, h, payload);
  };
  // Reduce rooted outside this leaf (root rank 5).
  const uint32_t msg = 2;
  auto p0 = Payload(INC_DTYPE_INT32, 32, 1), p1 = Payload(INC_DTYPE_INT32, 32, 2);
  auto hdr = [&](uint16_t rank, uint32_t m, uint8_t coll, uint16_t count, uint8_t root) {
    IncHeader h = Header(t, rank, m, count, coll, INC_DTYPE_INT32, INC_OP_SUM);
    h.root_rank = root;
    return h;
  };
  ASSERT_EQ(
      TestRun(leaf.prog(), FromPeer(members[0], hdr(0, msg, INC_COLL_REDUCE, 32, 5), p0), members[0].ifindex)
          .retval,
      XDP_DROP);
  ASSERT_EQ(
      TestRun(leaf.prog(), FromPeer(members[1], hdr(1, msg, INC_COLL_REDUCE, 32, 5), p1), members[1].ifindex)
          .retval,
      XDP_REDIRECT);
  IncHeader res = ResultHeader(hdr(1, msg, INC_COLL_REDUCE, 32, 5), 0);
  ASSERT_EQ(TestRun(leaf.prog(), from_parent(res, {}), up.ifindex).retval, XDP_REDIRECT);
  IncHeader rh = hdr(0, msg, INC_COLL_REDUCE, 32, 5);
  rh.flags = INC_FLAG_RETRANSMIT;
  auto r = TestRun(leaf.prog(), FromPeer(members[0], rh, p0), members[0].ifindex);
  ASSERT_EQ(r.retval, XDP_TX);
  EXPECT_EQ(Hex(r.out), Hex(ToPeer(members[0], res, {}, 0)));
  EXPECT_EQ(leaf.Drops("bad_count"), 0u);

  // Broadcast rooted outside: readies, then the parent's data result, then a
  // retransmitted ready.
  const uint32_t bmsg = 3;
  auto data = Payload(INC_DTYPE_INT32, 32, 9);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], hdr(0, bmsg, INC_COLL_BROADCAST, 0, 5), {}),
                    members[0].ifindex)
                .retval,
            XDP_DROP);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[1], hdr(1, bmsg, INC_COLL_BROADCAST, 0, 5), {}),
                    members[1].ifindex)
                .retval,
            XDP_REDIRECT);
  IncHeader bres = ResultHeader(hdr(1, bmsg, INC_COLL_BROADCAST, 0, 5), 32);
  ASSERT_EQ(TestRun(leaf.prog(), from_parent(bres, data), up.ifindex).retval, XDP_REDIRECT);
  IncHeader bh = hdr(1, bmsg, INC_COLL_BROADCAST, 0, 5);
  bh.flags = INC_FLAG_RETRANSMIT;
  auto b = TestRun(leaf.prog(), FromPeer(members[1], bh, {}), members[1].ifindex);
  ASSERT_EQ(b.retval, XDP_TX);
  EXPECT_EQ(Hex(b.out), Hex(ToPeer(members[1], bres, data, 0)));
  EXPECT_EQ(leaf.Stat("drops"), 0u);
}

}  // namespace
}  // namespace inc::dp
