// SPDX-License-Identifier: Apache-2.0
// selftest.icrc_xdp_outputs: frames the XDP data path emits carry an ICRC
// that the independent Python reference (selftests/icrc_ref.py) accepts.
//  - Frames the ingress program addresses itself (a leaf's partial to its
//    parent, a resent partial, a result resent to one child): taken from
//    BPF_PROG_TEST_RUN's data_out.
//  - Broadcast result copies, which only the devmap egress program finishes:
//    BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES really redirects the
//    completing frame, and the copies are captured on the veth peers.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <random>

#include "common/icrc.h"
#include "dp_harness.h"
#include "icrc_test_util.h"

namespace inc::bench {
namespace {

using selftest::PythonIcrcOfPcap;
using selftest::TempDir;
using selftest::WritePcap;

class XdpIcrc : public ::testing::Test {
 protected:
  void SetUp() override {
    Status ns = EnterPrivateNetns();
    if (!ns.ok()) GTEST_SKIP() << "no private network namespace: " << ns.ToString();
    dp::Options opts;
    opts.switch_name = "a2icrc" + std::to_string(getpid());
    opts.slot_capacity = 256;
    opts.verify_icrc = true;
    auto d = dp::Datapath::Open(opts);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dp_ = std::move(*d);
    for (int i = 0; i < 4; i++) {
      std::string port = "a2x" + std::to_string(i);
      ASSERT_TRUE(AddVethPair(port).ok());
      // Redirected frames reach a veth peer only with GRO (or XDP) on it.
      ASSERT_EQ(std::system(("ethtool -K " + port + "p gro on >/dev/null 2>&1").c_str()), 0);
      Status attached = dp_->AttachPort(port);
      ASSERT_TRUE(attached.ok()) << attached.ToString();
    }
    auto fd = IngressProgFd(*dp_, "a2x0");
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    fd_ = *fd;
  }
  void TearDown() override {
    if (dp_) (void)dp_->Destroy();
  }

  std::vector<uint8_t> Lanes(size_t count) {
    std::vector<uint8_t> p(count * 4);
    for (auto& b : p) b = static_cast<uint8_t>(rng_());
    return p;
  }

  // Sends a contribution (non-live) and returns the run.
  RunResult Send(const TreeParams& tree, int rank, uint32_t msg, const std::vector<uint8_t>& lanes,
                 uint8_t flags = 0) {
    Contribution c;
    c.rank = rank;
    c.msg = msg;
    c.flags = flags;
    c.payload = lanes.data();
    c.payload_len = lanes.size();
    c.count = lanes.size() / 4;
    auto frame = ContributionFrame(tree, c);
    EXPECT_TRUE(frame.ok());
    auto r = TestRun(fd_, frame->data(), frame->size(), 1, 4096, false, IngressOf(tree, rank));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RunResult{};
  }

  std::unique_ptr<dp::Datapath> dp_;
  int fd_ = -1;
  std::mt19937 rng_{12345};
};

bool Emitted(uint32_t verdict) {
  return verdict == XDP_TX || verdict == XDP_REDIRECT;
}

TEST_F(XdpIcrc, IngressAddressedFramesPassThePythonReference) {
  TreeParams leaf;
  leaf.tree_id = 21;
  leaf.role = INC_ROLE_LEAF;
  leaf.children = 2;
  leaf.pool_size = 16;
  leaf.ports = {"a2x0", "a2x1"};
  leaf.parent_port = "a2x2";
  Status configured = dp_->ConfigureTree(MakeTree(leaf));
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  TreeParams single;
  single.tree_id = 22;
  single.children = 2;
  single.pool_size = 16;
  single.ports = {"a2x2", "a2x3"};
  dp::TreeSpec single_spec = MakeTree(single);
  single_spec.slot_base = 16;
  configured = dp_->ConfigureTree(single_spec);
  ASSERT_TRUE(configured.ok()) << configured.ToString();

  std::vector<std::vector<uint8_t>> outputs;
  std::vector<std::string> what;
  for (uint32_t m = 0; m < 12; m++) {
    size_t count = std::uniform_int_distribution<size_t>(0, INC_MAX_PAYLOAD_BYTES / 4)(rng_);
    auto a = Lanes(count), b = Lanes(count);
    // Leaf: the second contribution sends the partial upward.
    ASSERT_EQ(Send(leaf, 0, m, a).retval, XDP_DROP);
    RunResult partial = Send(leaf, 1, m, b);
    ASSERT_TRUE(Emitted(partial.retval)) << XdpActionName(partial.retval);
    outputs.push_back(partial.out);
    what.push_back("leaf partial, message " + std::to_string(m) + ", " + std::to_string(count) + " elements");
    // A retransmission while waiting for the parent resends the partial.
    RunResult resent = Send(leaf, 0, m, a, INC_FLAG_RETRANSMIT);
    ASSERT_TRUE(Emitted(resent.retval)) << XdpActionName(resent.retval);
    outputs.push_back(resent.out);
    what.push_back("resent leaf partial, message " + std::to_string(m));
    // Single-level tree: completion, then a retransmission gets the result.
    ASSERT_EQ(Send(single, 0, m, a).retval, XDP_DROP);
    ASSERT_EQ(Send(single, 1, m, b).retval, XDP_REDIRECT);
    RunResult result = Send(single, 1, m, b, INC_FLAG_RETRANSMIT);
    ASSERT_TRUE(Emitted(result.retval)) << XdpActionName(result.retval);
    outputs.push_back(result.out);
    what.push_back("result resent to rank 1, message " + std::to_string(m));
  }
  TempDir dir;
  WritePcap(dir.File("xdp_out.pcap"), outputs);
  auto python = PythonIcrcOfPcap(dir.File("xdp_out.pcap"));
  ASSERT_EQ(python.size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); i++) {
    EXPECT_TRUE(python[i].roce) << what[i];
    EXPECT_TRUE(python[i].ok) << what[i] << ": Python computes " << std::hex << python[i].computed
                              << ", frame has " << python[i].wire;
    EXPECT_TRUE(CheckIcrc(outputs[i].data(), outputs[i].size())) << what[i];
  }
  std::cout << "[ proof    ] " << outputs.size()
            << " ingress-addressed XDP outputs (partials, resent partials, resent results; 0.."
            << INC_MAX_PAYLOAD_BYTES / 4 << " elements): ICRC verified by icrc_ref.py\n";
}

// Every payload length the data path takes (0..INC_MAX_PAYLOAD_BYTES in
// 4-byte steps), so every split of the CRC's folded words and table tail:
// a contribution with a correct ICRC is taken, the same frame with one
// payload bit flipped is dropped as bad_icrc, and the result resent to a
// child carries the ICRC ComputeIcrc gives.
TEST_F(XdpIcrc, EveryPayloadLengthIsVerifiedAndResultIcrcIsExact) {
  TreeParams single;
  single.tree_id = 23;
  single.children = 2;
  single.pool_size = 16;
  single.ports = {"a2x0", "a2x1"};
  Status configured = dp_->ConfigureTree(MakeTree(single));
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  uint64_t flipped = 0;
  for (uint32_t count = 0; count <= INC_MAX_PAYLOAD_BYTES / 4; count++) {
    SCOPED_TRACE(std::to_string(count) + " elements");
    uint32_t m = count;
    auto a = Lanes(count), b = Lanes(count);
    if (count > 0) {
      Contribution c;
      c.msg = m;
      c.payload = a.data();
      c.payload_len = a.size();
      c.count = count;
      auto frame = ContributionFrame(single, c);
      ASSERT_TRUE(frame.ok());
      size_t bit = (size_t{m} * 37) % (a.size() * 8);
      (*frame)[INC_OFF_PAYLOAD + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      auto r = TestRun(fd_, frame->data(), frame->size(), 1, 4096, false, IngressOf(single, c.rank));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->retval, XDP_DROP);
      flipped++;
    }
    ASSERT_EQ(Send(single, 0, m, a).retval, XDP_DROP);
    ASSERT_EQ(Send(single, 1, m, b).retval, XDP_REDIRECT) << "the correct frames complete the message";
    RunResult result = Send(single, 1, m, b, INC_FLAG_RETRANSMIT);
    ASSERT_TRUE(Emitted(result.retval)) << XdpActionName(result.retval);
    ASSERT_EQ(result.out.size(), INC_FRAME_OVERHEAD + size_t{count} * 4);
    ASSERT_TRUE(CheckIcrc(result.out.data(), result.out.size()));
  }
  auto stats = dp_->ReadStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->drops.at("bad_icrc"), flipped) << "every frame with a flipped bit, nothing else";
}

// A raw socket on a veth peer, collecting what the switch port sends.
class Capture {
 public:
  explicit Capture(const std::string& ifname) {
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    sockaddr_ll addr{};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = htons(ETH_P_ALL);
    addr.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Capture() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // RoCEv2 frames received within `ms` (a delivery wait, not a timing check).
  std::vector<std::vector<uint8_t>> Drain(int ms, size_t want) {
    std::vector<std::vector<uint8_t>> frames;
    uint8_t buf[4096];
    for (int waited = 0; waited < ms && frames.size() < want; waited += 10) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, 10);
      ssize_t n;
      while ((n = recv(fd_, buf, sizeof(buf), 0)) > 0) {
        if (n > INC_OFF_BTH && buf[12] == 0x08 && buf[13] == 0x00 && buf[INC_OFF_UDP + 2] == 0x12 &&
            buf[INC_OFF_UDP + 3] == 0xb7)
          frames.emplace_back(buf, buf + n);
      }
    }
    return frames;
  }

 private:
  int fd_ = -1;
};

TEST_F(XdpIcrc, BroadcastCopiesFromTheEgressProgramPassThePythonReference) {
  // One child per port: the egress program addresses each copy by port.
  dp::TreeSpec spec;
  TreeParams four;
  four.tree_id = 23;
  four.children = 4;
  four.pool_size = 16;
  four.ports = {"a2x0", "a2x1", "a2x2", "a2x3"};
  spec = MakeTree(four);
  spec.slot_base = 64;
  Status configured = dp_->ConfigureTree(spec);
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  std::vector<std::unique_ptr<Capture>> caps;
  for (int i = 0; i < 4; i++) {
    caps.push_back(std::make_unique<Capture>("a2x" + std::to_string(i) + "p"));
    ASSERT_TRUE(caps.back()->ok()) << "AF_PACKET socket on a2x" << i << "p";
  }
  std::vector<std::vector<uint8_t>> copies;
  std::vector<std::string> what;
  for (uint32_t m = 0; m < 6; m++) {
    size_t count = std::uniform_int_distribution<size_t>(1, 240)(rng_);
    std::vector<std::vector<uint8_t>> lanes;
    for (int r = 0; r < 4; r++) lanes.push_back(Lanes(count));
    for (int r = 0; r < 3; r++) ASSERT_EQ(Send(four, r, m, lanes[r]).retval, XDP_DROP);
    Contribution c;
    c.rank = 3;
    c.msg = m;
    c.payload = lanes[3].data();
    c.payload_len = lanes[3].size();
    c.count = count;
    auto frame = ContributionFrame(four, c);
    ASSERT_TRUE(frame.ok());
    xdp_md ctx{};
    ctx.data_end = static_cast<uint32_t>(frame->size());
    ctx.ingress_ifindex = IngressOf(four, c.rank);
    LIBBPF_OPTS(bpf_test_run_opts, opts);
    opts.data_in = frame->data();
    opts.data_size_in = static_cast<uint32_t>(frame->size());
    opts.ctx_in = &ctx;
    opts.ctx_size_in = sizeof(ctx);
    opts.repeat = 1;
    opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
    if (bpf_prog_test_run_opts(fd_, &opts) != 0) {
      if (errno == EINVAL || errno == EOPNOTSUPP) GTEST_SKIP() << "BPF_F_TEST_XDP_LIVE_FRAMES not supported";
      FAIL() << "live test_run: " << strerror(errno);
    }
    for (int port = 0; port < 4; port++) {
      auto got = caps[port]->Drain(2000, 1);
      ASSERT_EQ(got.size(), 1u) << "message " << m << ": copies on a2x" << port << "p";
      auto p = ParseFrame(got[0].data(), got[0].size());
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      EXPECT_EQ(p->dest_qpn, 0x1000u + port) << "copy addressed to child " << port;
      EXPECT_EQ(p->dst_ip, ChildIp(port));
      EXPECT_EQ(p->inc.count, count);
      for (size_t i = 0; i < count; i++) {
        uint32_t want = 0, got_lane;
        for (int r = 0; r < 4; r++) {
          uint32_t v;
          std::memcpy(&v, &lanes[r][4 * i], 4);
          want += v;
        }
        std::memcpy(&got_lane, p->payload + 4 * i, 4);
        ASSERT_EQ(got_lane, want) << "message " << m << " lane " << i;
      }
      copies.push_back(got[0]);
      what.push_back("message " + std::to_string(m) + " copy to child " + std::to_string(port));
    }
  }
  TempDir dir;
  WritePcap(dir.File("copies.pcap"), copies);
  auto python = PythonIcrcOfPcap(dir.File("copies.pcap"));
  ASSERT_EQ(python.size(), copies.size());
  for (size_t i = 0; i < copies.size(); i++) {
    EXPECT_TRUE(python[i].ok) << what[i] << ": Python computes " << std::hex << python[i].computed
                              << ", frame has " << python[i].wire;
    EXPECT_TRUE(CheckIcrc(copies[i].data(), copies[i].size())) << what[i];
  }
  std::cout << "[ proof    ] " << copies.size()
            << " broadcast copies written by the devmap egress program (captured on 4 veth peers): "
               "sums exact, ICRC verified by icrc_ref.py\n";
}

}  // namespace
}  // namespace inc::bench
