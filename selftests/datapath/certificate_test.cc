// SPDX-License-Identifier: Apache-2.0
// Selftests of the accuracy certificate of FP32/FP64 sums (inc_wire.h
// INC_AUX_*): a single switch flags a message iff some element's abs sum is
// below the threshold, every copy of a result carries the same aux, a leaf's
// partial carries its trailer, a root ORs its children's trailers, and a code
// that differs within a message is dropped. Expectations come from the host
// reference in fixture.h (exact abs sums in 128 bits), not from the data
// path's arithmetic.
#include <optional>

#include "fixture.h"

namespace inc::dp {
namespace {

// Threshold codes: T = mant << shift.
constexpr uint16_t Code(uint16_t mant, uint16_t shift) {
  return static_cast<uint16_t>(shift << 8 | mant);
}

std::vector<uint8_t> LanesOf(uint8_t dtype, const std::vector<int64_t>& v) {
  if (ElemSize(dtype) == 8) return Bytes(v);
  return Bytes(std::vector<int32_t>(v.begin(), v.end()));
}

// Contributions of `ranks` members, conforming to the members' headroom: every
// lane's values alternate in sign with magnitude `big` (plus a little), except
// lane `lane` (if < count), whose values +a, -b, +c, 0... have abs sum
// `target` (their sum is a - b + c, not the abs sum).
std::vector<std::vector<uint8_t>> Contributions(uint8_t dtype, uint16_t count, int ranks, int64_t big,
                                                size_t lane, int64_t target) {
  std::vector<std::vector<int64_t>> v(ranks, std::vector<int64_t>(count));
  for (int r = 0; r < ranks; r++)
    for (size_t i = 0; i < count; i++) {
      int64_t m = big + static_cast<int64_t>((i * 7 + r) % 5);
      v[r][i] = (i + r) % 2 ? -m : m;
    }
  if (lane < count) {
    int64_t a = target / 3, b = target / 3, c = target - a - b;
    for (int r = 0; r < ranks; r++) v[r][lane] = 0;
    v[0][lane] = a;
    v[1 % ranks][lane] -= b;
    v[2 % ranks][lane] += c;
  }
  std::vector<std::vector<uint8_t>> out;
  for (const auto& x : v) out.push_back(LanesOf(dtype, x));
  return out;
}

template <typename Case>
class CertTableTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  }
};

template <typename Case>
std::string CaseName(const ::testing::TestParamInfo<Case>& i) {
  return i.param.name;
}

// ---------------------------------------------------------- single switch --

struct SingleCase {
  const char* name;
  uint8_t coll, dtype, op;
  uint16_t count;
  uint16_t code;
  size_t lane;     // the lane with the small abs sum (>= count: none)
  int64_t target;  // its abs sum
  bool flagged;    // what the case is about (checked against the reference too)
};

constexpr uint16_t kCode32 = Code(200, 12);  // T = 819200: |q| stays below 2^28 (3 ranks)
constexpr int64_t kT32 = 200 << 12;
constexpr uint16_t kCode64 = Code(255, 40);  // T = 255 * 2^40
constexpr int64_t kT64 = int64_t{255} << 40;

using CertificateSingleTest = CertTableTest<SingleCase>;

// Three members on a single switch with a pool of 1: before the case's
// message, two messages of the largest count whose lanes all certify with
// another code leave stale abs sums in both slot copies, so lanes past the
// count and the previous message's sums must not leak into the judgement.
TEST_P(CertificateSingleTest, FlagIsSetExactlyWhenSomeAbsSumIsBelowTheThreshold) {
  const SingleCase& c = GetParam();
  Switch sw(UniqueName("cert"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  t.pool = 1;
  t.max_elems = kMaxElems32;
  auto kids = Kids(3);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  std::vector<uint32_t> psn(kids.size(), 0);
  const bool wide = ElemSize(c.dtype) == 8;
  const uint16_t max = wide ? kMaxElems64 : kMaxElems32;
  const int64_t big = wide ? kT64 : kT32;
  const uint8_t dirty = wide ? INC_DTYPE_FP64 : INC_DTYPE_FP32;
  for (uint32_t msg = 0; msg < 2; msg++) {
    auto in = Contributions(dirty, max, 3, big, max, 0);
    ASSERT_EQ(ResultAux(INC_COLL_ALLREDUCE, dirty, INC_OP_SUM, Code(1, 4), in), Code(1, 4));
    RunMessage(sw, t, kids, msg, INC_COLL_ALLREDUCE, dirty, INC_OP_SUM, in, 0, &psn, msg == 0, Code(1, 4));
    if (HasFatalFailure()) return;
  }
  auto in = Contributions(c.dtype, c.count, 3, big, c.lane, c.target);
  uint16_t want = ResultAux(c.coll, c.dtype, c.op, c.code, in);
  ASSERT_EQ((want & INC_AUX_UNCERTIFIED) != 0, c.flagged) << "the case disagrees with the reference";
  // Root rank 1 for Reduce: children 0 and 2 get element-less notices,
  // which carry the aux as well (RunMessage checks every copy).
  RunMessage(sw, t, kids, 2, c.coll, c.dtype, c.op, in, 1, &psn, true, c.code);
  EXPECT_EQ(sw.Stat("drops"), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Datapath, CertificateSingleTest,
    ::testing::Values(SingleCase{"Fp32BelowThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 240,
                                 kCode32, 0, kT32 - 1, true},
                      SingleCase{"Fp32AtThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 240,
                                 kCode32, 0, kT32, false},
                      SingleCase{"Fp32AboveThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 240,
                                 kCode32, 0, kT32 + 1, false},
                      SingleCase{"Fp32LastLaneOfLargestPayloadBelow", INC_COLL_ALLREDUCE, INC_DTYPE_FP32,
                                 INC_OP_SUM, kMaxElems32, kCode32, kMaxElems32 - 1, kT32 - 1, true},
                      SingleCase{"Fp32LastLaneOfLargestPayloadAt", INC_COLL_ALLREDUCE, INC_DTYPE_FP32,
                                 INC_OP_SUM, kMaxElems32, kCode32, kMaxElems32 - 1, kT32, false},
                      SingleCase{"Fp32OddCountLastLaneBelow", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM,
                                 13, kCode32, 12, kT32 - 1, true},
                      SingleCase{"Fp32OddCountLastLaneAt", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 13,
                                 kCode32, 12, kT32, false},
                      // Every lane 0: an exact zero sum (a member that rounded a
                      // nonzero value to 0 flags its contribution instead).
                      SingleCase{"Fp32AllZeroLaneIsAnExactZeroSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP32,
                                 INC_OP_SUM, 64, kCode32, 33, 0, false},
                      SingleCase{"Fp32AbsSumOneIsBelow", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 64,
                                 kCode32, 33, 1, true},
                      SingleCase{"Fp32ThresholdZeroNeverFlags", INC_COLL_ALLREDUCE, INC_DTYPE_FP32,
                                 INC_OP_SUM, 64, Code(0, 9), 33, 0, false},
                      SingleCase{"Fp32CodeZeroNeverFlags", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 64,
                                 0, 33, 0, false},
                      SingleCase{"Fp32ThresholdAboveEveryConformingSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP32,
                                 INC_OP_SUM, 64, Code(1, 31), 64, 0, true},
                      SingleCase{"Fp32ThresholdBeyond64Bits", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM,
                                 64, Code(255, 63), 64, 0, true},
                      SingleCase{"Fp32ReduceBelow", INC_COLL_REDUCE, INC_DTYPE_FP32, INC_OP_SUM, 100, kCode32,
                                 50, kT32 - 1, true},
                      SingleCase{"Fp32ReduceAt", INC_COLL_REDUCE, INC_DTYPE_FP32, INC_OP_SUM, 100, kCode32,
                                 50, kT32, false},
                      SingleCase{"Fp64BelowThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 120,
                                 kCode64, 5, kT64 - 1, true},
                      SingleCase{"Fp64AtThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 120,
                                 kCode64, 5, kT64, false},
                      SingleCase{"Fp64AboveThreshold", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 120,
                                 kCode64, 5, kT64 + 1, false},
                      SingleCase{"Fp64LastLaneOfLargestPayloadBelow", INC_COLL_ALLREDUCE, INC_DTYPE_FP64,
                                 INC_OP_SUM, kMaxElems64, kCode64, kMaxElems64 - 1, kT64 - 1, true},
                      SingleCase{"Fp64OddCountLastLaneAt", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 7,
                                 kCode64, 6, kT64, false},
                      SingleCase{"Fp64ThresholdAboveEveryConformingSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP64,
                                 INC_OP_SUM, 16, Code(1, 63), 16, 0, true},
                      SingleCase{"Fp64CodeZeroNeverFlags", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 16,
                                 0, 3, 0, false},
                      SingleCase{"Fp64AllZeroLaneIsAnExactZeroSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP64,
                                 INC_OP_SUM, 16, kCode64, 3, 0, false},
                      SingleCase{"Fp64AbsSumOneIsBelow", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 16,
                                 kCode64, 3, 1, true},
                      SingleCase{"Fp64ReduceBelow", INC_COLL_REDUCE, INC_DTYPE_FP64, INC_OP_SUM, 60, kCode64,
                                 59, kT64 - 1, true},
                      // Messages that are not float sums ignore the code: aux 0.
                      SingleCase{"Int32SumIgnoresTheCode", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
                                 64, kCode32, 3, 0, false},
                      SingleCase{"Fp32MaxIgnoresTheCode", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MAX, 64,
                                 kCode32, 3, 0, false}),
    CaseName<SingleCase>);

// A member that rounded a nonzero value to lane 0 flags its contribution
// (INC_AUX_UNCERTIFIED): the switch cannot tell that 0 from an exact one, so
// the result is flagged though every abs sum passes, on every copy.
TEST_F(DatapathTest, CertificateMemberFlagMakesTheResultUncertified) {
  Switch sw(UniqueName("certf"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  t.max_elems = kMaxElems32;
  auto kids = Kids(3);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  std::vector<uint32_t> psn(kids.size(), 0);
  for (uint8_t dtype : {INC_DTYPE_FP32, INC_DTYPE_FP64}) {
    const bool wide = dtype == INC_DTYPE_FP64;
    const uint16_t code = wide ? kCode64 : kCode32;
    auto in = Contributions(dtype, 40, 3, wide ? kT64 : kT32, 40, 0);
    ASSERT_EQ(ResultAux(INC_COLL_ALLREDUCE, dtype, INC_OP_SUM, code, in), code)
        << "certified without the flag";
    ASSERT_EQ(ResultAux(INC_COLL_ALLREDUCE, dtype, INC_OP_SUM, code, in, true), code | INC_AUX_UNCERTIFIED);
    RunMessage(sw, t, kids, wide ? 1 : 0, INC_COLL_ALLREDUCE, dtype, INC_OP_SUM, in, 0, &psn, true, code,
               /*flagging_members=*/0b010);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(sw.Stat("drops"), 0u);
}

// ------------------------------------------------------ aux drop reasons --

TEST_F(DatapathTest, CertificateCodeOrTrailerThatCannotBeTheMessagesIsBadAux) {
  Switch sw(UniqueName("certaux"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(3);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  auto in = Contributions(INC_DTYPE_FP32, 16, 3, kT32, 16, 0);
  auto hdr = [&](uint16_t rank, uint32_t msg, uint16_t aux, uint8_t dtype = INC_DTYPE_FP32) {
    IncHeader h = Header(t, rank, msg, 16, INC_COLL_ALLREDUCE, dtype);
    h.aux = aux;
    return h;
  };
  auto run = [&](uint16_t rank, const IncHeader& h, const std::vector<uint8_t>& payload) {
    return TestRun(sw.prog(), FromPeer(kids[rank], h, payload), kids[rank].ifindex).retval;
  };
  std::vector<uint8_t> trailer(INC_CERT_TRAILER_BYTES, 0xFF);
  auto with_trailer = [&](std::vector<uint8_t> p) {
    p.insert(p.end(), trailer.begin(), trailer.end());
    return p;
  };
  ASSERT_EQ(run(0, hdr(0, 0, kCode32), in[0]), XDP_DROP);
  EXPECT_EQ(run(1, hdr(1, 0, kCode32 + 1), in[1]), XDP_DROP) << "another code in the same message";
  EXPECT_EQ(run(1, hdr(1, 0, 0), in[1]), XDP_DROP) << "no code in a message that has one";
  EXPECT_EQ(sw.Drops("bad_aux"), 2u);
  // The UNCERTIFIED bit of a contribution is no bad aux: the member flags a
  // value it rounded to lane 0, and the result is flagged.
  ASSERT_EQ(run(1, hdr(1, 0, kCode32 | INC_AUX_UNCERTIFIED), in[1]), XDP_DROP);
  auto done = TestRun(sw.prog(), FromPeer(kids[2], hdr(2, 0, kCode32), in[2]), kids[2].ifindex);
  ASSERT_EQ(done.retval, XDP_REDIRECT);
  IncHeader rh = ResultHeader(hdr(2, 0, kCode32), 16);
  rh.aux = ResultAux(INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, kCode32, in, /*member_flag=*/true);
  ExpectBroadcastFrame(done.out, rh, Reference(INC_DTYPE_FP32, INC_OP_SUM, in).bytes);

  // A trailer only on a contribution of a float sum with a code.
  EXPECT_EQ(run(0, hdr(0, 1, INC_AUX_TRAILER), with_trailer(in[0])), XDP_DROP) << "trailer without a code";
  auto ints = Payload(INC_DTYPE_INT32, 16, 1);
  EXPECT_EQ(run(0, hdr(0, 1, kCode32 | INC_AUX_TRAILER, INC_DTYPE_INT32), with_trailer(ints)), XDP_DROP)
      << "trailer on an integer sum";
  EXPECT_EQ(sw.Drops("bad_aux"), 4u);
  // The TRAILER bit without the 96 bytes: the frame is too short.
  EXPECT_EQ(run(0, hdr(0, 1, kCode32 | INC_AUX_TRAILER), in[0]), XDP_DROP);
  EXPECT_EQ(sw.Drops("bad_count"), 1u);
  EXPECT_EQ(sw.Stat("contributions"), 3u);
}

// --------------------------------------------------------- leaf trailer --

struct LeafCase {
  const char* name;
  uint8_t dtype;
  uint16_t count;
  std::vector<size_t> small;  // lanes whose abs sum over the leaf's members is T - 1
};

using CertificateLeafTest = CertTableTest<LeafCase>;

// A leaf with two members: its partial carries the elements and the trailer
// (bit i iff A_i >= T over the two members), aux = C | TRAILER, a valid ICRC,
// the same again on a retransmission while it waits; the parent's RESULT
// with UNCERTIFIED is forwarded as it is and every resend from the stored
// result carries the same aux.
TEST_P(CertificateLeafTest, PartialCarriesTrailerBitsAndResultsKeepTheParentsAux) {
  const LeafCase& c = GetParam();
  Switch leaf(UniqueName("certleaf"));
  ASSERT_TRUE(leaf.dp);
  TreeParams t;
  t.tree_id = 21;
  t.role = INC_ROLE_LEAF;
  t.max_elems = kMaxElems32;
  auto members = Kids(2);
  auto [up, down] = LinkSwitches(10, 11, 0x777, 0x888, 0, 2);
  TreeSpec ls = MakeTree(t, members);
  ls.parent = up.ToEndpoint();
  ls.rank_at_parent = 3;
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  const bool wide = ElemSize(c.dtype) == 8;
  const int64_t tt = wide ? kT64 : kT32;
  const uint16_t code = wide ? kCode64 : kCode32;
  auto in = Contributions(c.dtype, c.count, 2, tt, c.count, 0);
  // The small lanes: +a and -b of abs sum T - 1 (2 members).
  for (size_t lane : c.small) {
    auto other = Contributions(c.dtype, c.count, 2, tt, lane, tt - 1);
    size_t e = ElemSize(c.dtype);
    for (int r = 0; r < 2; r++) std::memcpy(&in[r][lane * e], &other[r][lane * e], e);
  }
  auto ok = Certified(c.dtype, code, in);
  for (size_t lane : c.small) ASSERT_FALSE(ok[lane]);
  ASSERT_EQ(std::count(ok.begin(), ok.end(), false), static_cast<long>(c.small.size()));

  const uint32_t msg = 6;
  auto hdr = [&](uint16_t rank) {
    IncHeader h = Header(t, rank, msg, c.count, INC_COLL_ALLREDUCE, c.dtype);
    h.aux = code;
    return h;
  };
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], hdr(0), in[0]), members[0].ifindex).retval, XDP_DROP);
  auto partial = TestRun(leaf.prog(), FromPeer(members[1], hdr(1), in[1]), members[1].ifindex);
  ASSERT_EQ(partial.retval, XDP_REDIRECT);
  auto sum = Reference(c.dtype, INC_OP_SUM, in).bytes;
  auto with_trailer = sum;
  auto tr = Trailer(ok);
  with_trailer.insert(with_trailer.end(), tr.begin(), tr.end());
  IncHeader ph = hdr(1);
  ph.rank = 3;
  ph.aux = code | INC_AUX_TRAILER;
  EXPECT_EQ(Hex(partial.out), Hex(ToPeer(up, ph, with_trailer, 0))) << "partial with its trailer";
  EXPECT_TRUE(CheckIcrc(partial.out.data(), partial.out.size())) << "the ICRC covers the trailer";
  // Retransmission while waiting: the same partial, flagged RETRANSMIT.
  auto again = TestRun(leaf.prog(), FromPeer(members[0], hdr(0), in[0]), members[0].ifindex);
  ASSERT_EQ(again.retval, XDP_REDIRECT);
  ph.flags = INC_FLAG_RETRANSMIT;
  EXPECT_EQ(Hex(again.out), Hex(ToPeer(up, ph, with_trailer, 1)));
  EXPECT_TRUE(CheckIcrc(again.out.data(), again.out.size()));

  // The parent's result (the total flagged by the root) is forwarded as it
  // is; a member that lost it gets a copy with the same aux from the slot.
  IncHeader rh = ResultHeader(hdr(1), c.count);
  rh.aux = code | INC_AUX_UNCERTIFIED;
  auto fwd = TestRun(leaf.prog(), FromPeer(up, rh, sum), up.ifindex);
  ASSERT_EQ(fwd.retval, XDP_REDIRECT);
  ExpectBroadcastFrame(fwd.out, rh, sum);
  IncHeader rt = hdr(1);
  rt.flags = INC_FLAG_RETRANSMIT;
  auto mine = TestRun(leaf.prog(), FromPeer(members[1], rt, in[1]), members[1].ifindex);
  ASSERT_EQ(mine.retval, XDP_TX);
  EXPECT_EQ(Hex(mine.out), Hex(ToPeer(members[1], rh, sum, 0)));
  EXPECT_TRUE(CheckIcrc(mine.out.data(), mine.out.size()));
  EXPECT_EQ(leaf.Stat("drops"), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Datapath, CertificateLeafTest,
    ::testing::Values(LeafCase{"Fp32", INC_DTYPE_FP32, 100, {3, 63, 64, 99}},
                      LeafCase{"Fp32LargestPayload", INC_DTYPE_FP32, kMaxElems32, {0, 511, 766, 767}},
                      LeafCase{"Fp32AllCertified", INC_DTYPE_FP32, 130, {}},
                      LeafCase{"Fp64", INC_DTYPE_FP64, 70, {0, 64, 69}},
                      LeafCase{"Fp64LargestPayload", INC_DTYPE_FP64, kMaxElems64, {1, 383}}),
    CaseName<LeafCase>);

// A parent port whose MTU cannot take the partial with its trailer: the
// partial goes without it (aux = C only), so the root counts this leaf as
// certifying nothing, instead of a frame the link would drop.
TEST_F(DatapathTest, CertificateLeafSendsNoTrailerThatWouldExceedTheUplinkMtu) {
  Switch leaf(UniqueName("certmtu"));
  ASSERT_TRUE(leaf.dp);
  TreeParams t;
  t.tree_id = 22;
  t.role = INC_ROLE_LEAF;
  t.max_elems = kMaxElems32;
  auto members = Kids(2);
  auto [up, down] = LinkSwitches(14, 15, 0x777, 0x888, 0, 2);
  TreeSpec ls = MakeTree(t, members);
  ls.parent = up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  // 350 elements: 88 + 1400 bytes of IP packet fit 1500, with 96 more not.
  struct MtuGuard {
    ~MtuGuard() { Sh("ip link set dev " + PortName(14) + " mtu " + std::to_string(kPortMtu)); }
  } guard;
  ASSERT_EQ(Sh("ip link set dev " + PortName(14) + " mtu 1500"), 0);
  auto in = Contributions(INC_DTYPE_FP32, 350, 2, kT32, 350, 0);
  for (uint32_t msg = 0; msg < 2; msg++) {
    auto hdr = [&](uint16_t rank) {
      IncHeader h = Header(t, rank, msg, 350, INC_COLL_ALLREDUCE, INC_DTYPE_FP32);
      h.aux = kCode32;
      return h;
    };
    ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], hdr(0), in[0]), members[0].ifindex).retval, XDP_DROP);
    auto partial = TestRun(leaf.prog(), FromPeer(members[1], hdr(1), in[1]), members[1].ifindex);
    ASSERT_EQ(partial.retval, XDP_REDIRECT);
    IncHeader ph = hdr(1);
    ph.rank = 0;
    std::vector<uint8_t> payload = Reference(INC_DTYPE_FP32, INC_OP_SUM, in).bytes;
    if (msg == 1) {
      ph.aux |= INC_AUX_TRAILER;
      auto tr = Trailer(Certified(INC_DTYPE_FP32, kCode32, in));
      payload.insert(payload.end(), tr.begin(), tr.end());
    }
    EXPECT_EQ(Hex(partial.out), Hex(ToPeer(up, ph, payload, msg))) << "message " << msg;
    EXPECT_TRUE(CheckIcrc(partial.out.data(), partial.out.size()));
    // Message 1 runs with the uplink's MTU back: the trailer fits again.
    ASSERT_EQ(Sh("ip link set dev " + PortName(14) + " mtu " + std::to_string(kPortMtu)), 0);
  }
}

// ------------------------------------------------------------ root OR --

// A root with two leaf switches: element i is certified iff either leaf's
// trailer has bit i (i < count); a partial without a trailer (no tailroom at
// its leaf) certifies nothing.
TEST_F(DatapathTest, CertificateRootOrsTheTrailersOfItsChildSwitches) {
  Switch root(UniqueName("certroot"));
  ASSERT_TRUE(root.dp);
  TreeParams t;
  t.tree_id = 23;
  t.role = INC_ROLE_ROOT;
  t.max_elems = kMaxElems32;
  SwitchLink a = LinkSwitches(30, 31, 0x701, 0x801, 0, 2);
  SwitchLink b = LinkSwitches(32, 33, 0x702, 0x802, 2, 4);
  ASSERT_TRUE(root.dp->ConfigureTree(MakeTree(t, {a.down, b.down})).ok());
  const uint16_t count = 130;  // two full trailer words and 2 bits of a third
  using Bits = std::vector<bool>;
  auto all = [&](std::vector<size_t> except) {
    Bits v(count, true);
    for (size_t i : except) v[i] = false;
    return v;
  };
  auto only = [&](std::vector<size_t> set) {
    Bits v(count, false);
    for (size_t i : set) v[i] = true;
    return v;
  };
  struct RootCase {
    const char* what;
    uint16_t code;
    std::optional<Bits> a, b;  // nullopt: partial without trailer
    bool garbage_past_count;   // leaf a sets the trailer bits past the count
  };
  const RootCase cases[] = {
      {"each element certified by one leaf", kCode32, all({5, 64, 129}), only({5, 64, 129}), false},
      {"element 5 certified by none", kCode32, all({5}), all({5, 77}), false},
      {"the last element certified by none", kCode32, all({129}), all({129}), false},
      {"one leaf without trailer, the other certifies all", kCode32, all({}), std::nullopt, false},
      {"one leaf without trailer, the other misses one", kCode32, all({64}), std::nullopt, false},
      {"no trailer at all", kCode32, std::nullopt, std::nullopt, false},
      {"bits past the count are not elements", kCode32, all({0}), only({0}), true},
      {"bits past the count do not certify", kCode32, all({129}), all({129}), true},
      {"no code: never flagged", 0, std::nullopt, std::nullopt, false},
  };
  std::vector<uint32_t> psn_to(2, 0);
  for (uint32_t msg = 0; msg < std::size(cases); msg++) {
    const RootCase& rc = cases[msg];
    SCOPED_TRACE(rc.what);
    auto in = Contributions(INC_DTYPE_FP32, count, 2, kT32, count, 0);  // the two leaves' partial sums
    auto partial = [&](int leaf, const std::optional<Bits>& bits, uint8_t flags) {
      IncHeader h = Header(t, static_cast<uint16_t>(leaf), msg, count, INC_COLL_ALLREDUCE, INC_DTYPE_FP32);
      h.flags = flags;
      h.aux = rc.code;
      std::vector<uint8_t> p = in[leaf];
      if (bits) {
        h.aux |= INC_AUX_TRAILER;
        auto tr = Trailer(*bits);
        if (leaf == 0 && rc.garbage_past_count) {
          for (size_t i = count; i < INC_CERT_TRAILER_WORDS * 64; i++) tr[i / 8] |= uint8_t(1u << (i % 8));
        }
        p.insert(p.end(), tr.begin(), tr.end());
      }
      return FromPeer(leaf ? b.down : a.down, h, p);
    };
    bool uncertified = false;
    if (rc.code) {
      for (size_t i = 0; i < count; i++)
        if (!((rc.a && (*rc.a)[i]) || (rc.b && (*rc.b)[i]))) uncertified = true;
    }
    ASSERT_EQ(TestRun(root.prog(), partial(0, rc.a, 0), a.down.ifindex).retval, XDP_DROP);
    auto done = TestRun(root.prog(), partial(1, rc.b, 0), b.down.ifindex);
    ASSERT_EQ(done.retval, XDP_REDIRECT);
    IncHeader rh = ResultHeader(Header(t, 1, msg, count, INC_COLL_ALLREDUCE, INC_DTYPE_FP32), count);
    rh.aux = static_cast<uint16_t>(rc.code ? rc.code | (uncertified ? INC_AUX_UNCERTIFIED : 0) : 0);
    auto sum = Reference(INC_DTYPE_FP32, INC_OP_SUM, in).bytes;
    ExpectBroadcastFrame(done.out, rh, sum);
    // A leaf that lost it resends its partial and gets the same result.
    auto resent = TestRun(root.prog(), partial(0, rc.a, INC_FLAG_RETRANSMIT), a.down.ifindex);
    ASSERT_EQ(resent.retval, XDP_TX);
    EXPECT_EQ(Hex(resent.out), Hex(ToPeer(a.down, rh, sum, psn_to[0]++)));
    EXPECT_TRUE(CheckIcrc(resent.out.data(), resent.out.size()));
  }
  EXPECT_EQ(root.Stat("drops"), 0u);
}

// ---------------------------------------------- tree moves: pull, adopt --

// The moved-tree exchange of two_level_test with a flagged message: the
// leaf's pull answer, the new root's adopted result and its resend all carry
// the old root's aux. A leaf holding an element-less Reduce notice answers a
// member's retransmission with the notice's aux.
TEST_F(DatapathTest, CertificatePullAnswerAdoptedResultAndReduceNoticeKeepTheAux) {
  Switch leaf(UniqueName("certpl"));
  Switch root(UniqueName("certpr"));
  ASSERT_TRUE(leaf.dp && root.dp);
  TreeParams t;
  t.tree_id = 24;
  t.max_elems = kMaxElems32;
  auto members = Kids(2);
  SwitchLink old_link = LinkSwitches(40, 41, 0x700, 0x800, 0, 2);
  SwitchLink new_link = LinkSwitches(42, 43, 0x701, 0x801, 0, 2);
  SwitchLink leaf2 = LinkSwitches(44, 45, 0x702, 0x802, 2, 4);
  TreeParams lt = t;
  lt.role = INC_ROLE_LEAF;
  TreeSpec ls = MakeTree(lt, members);
  ls.parent = old_link.up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());

  const uint32_t msg = 5;
  const uint16_t flagged = kCode64 | INC_AUX_UNCERTIFIED;
  auto in = Contributions(INC_DTYPE_FP64, 60, 3, kT64, 7, 1);
  auto hdr = [&](uint16_t rank, uint32_t m, uint8_t coll, uint8_t root_rank) {
    IncHeader h = Header(t, rank, m, 60, coll, INC_DTYPE_FP64);
    h.aux = kCode64;
    h.root_rank = root_rank;
    return h;
  };
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[0], hdr(0, msg, INC_COLL_ALLREDUCE, 0), in[0]),
                    members[0].ifindex)
                .retval,
            XDP_DROP);
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(members[1], hdr(1, msg, INC_COLL_ALLREDUCE, 0), in[1]),
                    members[1].ifindex)
                .retval,
            XDP_REDIRECT);
  auto total = Reference(INC_DTYPE_FP64, INC_OP_SUM, in).bytes;
  ASSERT_EQ(ResultAux(INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, kCode64, in), flagged);
  IncHeader rh = ResultHeader(hdr(1, msg, INC_COLL_ALLREDUCE, 0), 60);
  rh.aux = flagged;
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(old_link.up, rh, total), old_link.up.ifindex).retval, XDP_REDIRECT);

  ls.parent = new_link.up.ToEndpoint();
  ASSERT_TRUE(leaf.dp->ConfigureTree(ls).ok());
  TreeParams rt = t;
  rt.role = INC_ROLE_ROOT;
  ASSERT_TRUE(root.dp->ConfigureTree(MakeTree(rt, {new_link.down, leaf2.down})).ok());
  // Leaf 2 resends its partial (with a trailer); counted, then a pull.
  IncHeader p2h = hdr(1, msg, INC_COLL_ALLREDUCE, 0);
  p2h.flags = INC_FLAG_RETRANSMIT;
  p2h.aux = kCode64 | INC_AUX_TRAILER;
  auto p2 = in[2];
  auto tr = Trailer(std::vector<bool>(60, true));
  p2.insert(p2.end(), tr.begin(), tr.end());
  auto partial2 = FromPeer(leaf2.down, p2h, p2);
  ASSERT_EQ(TestRun(root.prog(), partial2, leaf2.down.ifindex).retval, XDP_DROP);
  auto pull = TestRun(root.prog(), partial2, leaf2.down.ifindex);
  ASSERT_EQ(pull.retval, XDP_REDIRECT);
  IncHeader pull_hdr = hdr(1, msg, INC_COLL_ALLREDUCE, 0);
  pull_hdr.flags = INC_FLAG_PULL;
  pull_hdr.rank = INC_RANK_RESULT;
  pull_hdr.count = 0;
  pull_hdr.aux = 0;  // a pull carries no trailer and no certificate
  ExpectBroadcastFrame(pull.out, pull_hdr, {});
  auto answer = TestRun(leaf.prog(), FromPeer(new_link.up, pull_hdr, {}), new_link.up.ifindex);
  ASSERT_EQ(answer.retval, XDP_TX);
  IncHeader ah = rh;
  ah.rank = 0;  // rank at the parent
  auto parsed = ParseFrame(answer.out.data(), answer.out.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  // (its PSN follows the partial this leaf sent the old parent)
  EXPECT_EQ(Hex(answer.out), Hex(ToPeer(new_link.up, ah, total, parsed->psn))) << "pull answer";
  EXPECT_TRUE(CheckIcrc(answer.out.data(), answer.out.size()));
  auto adopted = TestRun(root.prog(), answer.out, new_link.down.ifindex);
  ASSERT_EQ(adopted.retval, XDP_REDIRECT);
  ExpectBroadcastFrame(adopted.out, rh, total);
  auto resend = TestRun(root.prog(), partial2, leaf2.down.ifindex);
  ASSERT_EQ(resend.retval, XDP_TX);
  EXPECT_EQ(Hex(resend.out), Hex(ToPeer(leaf2.down, rh, total, 0)));

  // Reduce rooted outside the leaf: the parent's element-less notice is
  // stored with its aux and answers retransmissions with it.
  const uint32_t rmsg = 6;
  ASSERT_EQ(
      TestRun(leaf.prog(), FromPeer(members[0], hdr(0, rmsg, INC_COLL_REDUCE, 3), in[0]), members[0].ifindex)
          .retval,
      XDP_DROP);
  ASSERT_EQ(
      TestRun(leaf.prog(), FromPeer(members[1], hdr(1, rmsg, INC_COLL_REDUCE, 3), in[1]), members[1].ifindex)
          .retval,
      XDP_REDIRECT);
  IncHeader notice = ResultHeader(hdr(1, rmsg, INC_COLL_REDUCE, 3), 0);
  notice.aux = flagged;
  ASSERT_EQ(TestRun(leaf.prog(), FromPeer(new_link.up, notice, {}), new_link.up.ifindex).retval,
            XDP_REDIRECT);
  IncHeader rr = hdr(0, rmsg, INC_COLL_REDUCE, 3);
  rr.flags = INC_FLAG_RETRANSMIT;
  auto again = TestRun(leaf.prog(), FromPeer(members[0], rr, in[0]), members[0].ifindex);
  ASSERT_EQ(again.retval, XDP_TX);
  EXPECT_EQ(Hex(again.out), Hex(ToPeer(members[0], notice, {}, 0)));
  EXPECT_EQ(leaf.Stat("drops"), 0u);
  EXPECT_EQ(root.Stat("drops"), 0u);
}

}  // namespace
}  // namespace inc::dp
