// SPDX-License-Identifier: Apache-2.0
// Selftests of bpf/replicate.h and csum.h: result and retransmission copies
// byte-exact with valid ICRCs, ICRC verification, and the live devmap
// broadcast into veths (each child addressed, ports without one skipped).
#include "fixture.h"

namespace inc::dp {
namespace {

TEST_F(DatapathTest, AllReduceInt32SumTwoChildrenResultAndRetransmitCopiesAreByteExact) {
  Switch sw(UniqueName("ar"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(2);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  std::vector<uint32_t> psn(kids.size(), 0);
  RunMessage(sw, t, kids, 0, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
             {Payload(INC_DTYPE_INT32, 240, 1), Payload(INC_DTYPE_INT32, 240, 2)}, 0, &psn);
  EXPECT_EQ(sw.Stat("completions"), 1u);
  EXPECT_EQ(sw.Stat("contributions"), 2u);
  EXPECT_EQ(sw.Stat("resends"), 2u);
  EXPECT_EQ(sw.Stat("drops"), 0u);
}

// ------------------------------------------------------------- ICRC --

TEST_F(DatapathTest, IcrcVerificationOnDropsBadIcrcAndOffAcceptsIt) {
  TreeParams t;
  for (bool verify : {true, false}) {
    Switch sw(UniqueName("icrc"), verify);
    ASSERT_TRUE(sw.dp);
    auto kids = Kids(2);
    ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
    auto f = FromPeer(kids[0], Header(t, 0, 0, 4), Payload(INC_DTYPE_INT32, 4, 3));
    f[f.size() - 1] ^= 0x5A;
    auto r = TestRun(sw.prog(), f, kids[0].ifindex);
    EXPECT_EQ(r.retval, XDP_DROP);
    EXPECT_EQ(sw.Drops("bad_icrc"), verify ? 1u : 0u) << "verify=" << verify;
    EXPECT_EQ(sw.Stat("contributions"), verify ? 0u : 1u) << "verify=" << verify;
  }
}

// ----------------------------------------------- live broadcast on veths --

struct Capture {
  int fd = -1;
  explicit Capture(const std::string& ifname) {
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
      close(fd);
      fd = -1;
    }
  }
  ~Capture() {
    if (fd >= 0) close(fd);
  }
  // Next RoCEv2 frame (UDP 4791), waiting up to 5 s; empty if none.
  std::vector<uint8_t> NextRoce() {
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) return {};
      std::vector<uint8_t> b(4096);
      ssize_t n = recv(fd, b.data(), b.size(), 0);
      if (n <= 0) return {};
      b.resize(static_cast<size_t>(n));
      if (b.size() > INC_OFF_BTH && b[12] == 0x08 && b[13] == 0x00 && b[INC_OFF_IP + 9] == 17 &&
          b[INC_OFF_UDP + 2] == 0x12 && b[INC_OFF_UDP + 3] == 0xB7)
        return b;
    }
  }
};

TEST_F(DatapathTest, LiveBroadcastAddressesEveryChildCopyByteExactAndSkipsPortsWithoutChild) {
  Switch sw(UniqueName("live"));
  ASSERT_TRUE(sw.dp);
  // Children on ports 20 (member 0), 21 (member 1, the Reduce root), 22; port 23 attached, no child.
  std::vector<Peer> kids = {MakePeer(20, 0), MakePeer(21, 1), MakePeer(22, 2)};
  for (int i = 20; i <= 23; i++) {
    Status st = sw.dp->AttachPort(PortName(i));
    if (!st.ok()) GTEST_SKIP() << "cannot attach XDP to a veth: " << st.ToString();
    // A veth peer takes redirected XDP frames only with GRO (or XDP) on.
    Sh("ethtool -K " + PeerName(i) + " gro on");
  }
  TreeParams t;
  std::vector<std::unique_ptr<Capture>> caps;
  for (int i = 20; i <= 23; i++) {
    caps.push_back(std::make_unique<Capture>(PeerName(i)));
    ASSERT_GE(caps.back()->fd, 0) << "AF_PACKET socket";
  }
  struct LiveCase {
    const char* name;
    uint8_t coll;
    uint16_t count;
  };
  const LiveCase cases[] = {
      {"allreduce", INC_COLL_ALLREDUCE, 240},
      {"reduce", INC_COLL_REDUCE, 240},
      {"allreduce, largest payload", INC_COLL_ALLREDUCE, kMaxElems32},
  };
  t.max_elems = kMaxElems32;
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  for (uint32_t msg = 0; msg < std::size(cases); msg++) {
    const LiveCase& c = cases[msg];
    const uint8_t coll = c.coll;
    SCOPED_TRACE(c.name);
    std::vector<std::vector<uint8_t>> in;
    for (int r = 0; r < 3; r++) in.push_back(Payload(INC_DTYPE_INT32, c.count, msg * 10 + r));
    IncHeader last;
    for (int r = 0; r < 3; r++) {
      IncHeader h = Header(t, static_cast<uint16_t>(r), msg, c.count, coll);
      h.root_rank = 1;
      auto f = FromPeer(kids[r], h, in[r]);
      if (r < 2) {
        ASSERT_EQ(TestRun(sw.prog(), f, kids[r].ifindex).retval, XDP_DROP);
        continue;
      }
      last = h;
      xdp_md ctx{};
      ctx.data_end = static_cast<uint32_t>(f.size());
      ctx.ingress_ifindex = kids[r].ifindex;
      LIBBPF_OPTS(bpf_test_run_opts, opts);
      opts.data_in = f.data();
      opts.data_size_in = static_cast<uint32_t>(f.size());
      opts.ctx_in = &ctx;
      opts.ctx_size_in = sizeof(ctx);
      opts.repeat = 1;
      opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
      int err = bpf_prog_test_run_opts(sw.prog(), &opts);
      if (err) GTEST_SKIP() << "BPF_F_TEST_XDP_LIVE_FRAMES unavailable: " << std::strerror(errno);
    }
    auto sum = Reference(INC_DTYPE_INT32, INC_OP_SUM, in).bytes;
    for (int r = 0; r < 3; r++) {
      auto got = caps[r]->NextRoce();
      ASSERT_FALSE(got.empty()) << "no copy reached child " << r;
      bool data = coll == INC_COLL_ALLREDUCE || r == 1;
      auto want = ToPeer(kids[r], ResultHeader(last, data ? c.count : 0), data ? sum : std::vector<uint8_t>{},
                         msg);  // one copy per message to each child: PSN = message
      EXPECT_EQ(Hex(got), Hex(want)) << "copy to child " << r;
      EXPECT_TRUE(CheckIcrc(got.data(), got.size())) << "ICRC of the copy to child " << r;
    }
  }
  EXPECT_EQ(sw.Stat("results_tx"), 3 * std::size(cases))
      << "3 copies per message, none for the port without a child";
  pollfd p{caps[3]->fd, POLLIN, 0};
  // Drain anything non-RoCE; a RoCE frame on port 23 would be a bug.
  while (poll(&p, 1, 0) > 0) {
    std::vector<uint8_t> b(4096);
    ssize_t n = recv(caps[3]->fd, b.data(), b.size(), 0);
    ASSERT_GT(n, 0);
    EXPECT_FALSE(n > INC_OFF_BTH && b[INC_OFF_UDP + 2] == 0x12 && b[INC_OFF_UDP + 3] == 0xB7)
        << "port without a child got a result copy";
  }
}

}  // namespace
}  // namespace inc::dp
