// SPDX-License-Identifier: Apache-2.0
// selftest.fwd_ceiling_*: runs bpf/bench/fwd_ceiling.bpf.c with BPF_PROG_TEST_RUN
// on contributions built by common/frame.h and checks that the frame it
// sends back (XDP_TX) is a result libinc accepts: addresses swapped, DestQP
// = the member's QPN, RESULT set, everything else untouched, and a valid
// ICRC at every payload size; non-RoCE traffic passes, unknown ports drop.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "common/frame.h"
#include "common/icrc.h"
#include "fwd_ceiling.skel.h"
#include "fwd_ceiling_port.h"

namespace inc::bench {
namespace {

constexpr unsigned kLoopback = 1;  // BPF_PROG_TEST_RUN needs a real ingress device

struct SkelDeleter {
  void operator()(fwd_ceiling* s) const { fwd_ceiling__destroy(s); }
};

class FwdCeilingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
    skel_.reset(fwd_ceiling__open_and_load());
    ASSERT_TRUE(skel_) << "load fwd_ceiling.bpf.o: " << std::strerror(errno);
    port_.iface = "lo";
    port_.ifindex = kLoopback;
    port_.member_ip = *Ipv4::Parse("10.0.2.2");
    port_.switch_ip = *Ipv4::Parse("10.0.2.1");
    port_.member_qpn = 0x123456;
    port_.switch_qpn = 0x000402;
    auto value = std::make_unique<fwd_port>();
    ASSERT_TRUE(FillPort(port_, value.get()).ok());
    uint32_t key = kLoopback;
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.fwd_ports), &key, value.get(), BPF_ANY), 0);
  }

  FrameSpec Contribution(uint16_t count, uint8_t flags) {
    payload_.resize(size_t{count} * 4);
    for (size_t i = 0; i < payload_.size(); i++) payload_[i] = static_cast<uint8_t>(i * 7 + count);
    FrameSpec s;
    s.src_mac = *Mac::Parse("02:1a:00:00:02:02");
    s.dst_mac = *Mac::Parse("02:1a:00:00:02:01");
    s.src_ip = port_.member_ip;
    s.dst_ip = port_.switch_ip;
    s.src_qpn = port_.member_qpn;
    s.dest_qpn = port_.switch_qpn;
    s.psn = 77;
    s.va = 0x1000;
    s.rkey = 9;
    s.inc.flags = flags;
    s.inc.tree_id = 3;
    s.inc.rank = 1;
    s.inc.msg_id = 1000 + count;
    s.inc.slot = static_cast<uint16_t>((1000 + count) % 256);
    s.inc.count = count;
    s.inc.key = 0xabcdef;
    s.payload = payload_.data();
    s.payload_len = payload_.size();
    return s;
  }

  // Runs the program on one frame from ingress ifindex; returns the action.
  int Run(std::vector<uint8_t>* frame, unsigned ifindex = kLoopback) {
    std::vector<uint8_t> out(frame->size() + 256);
    xdp_md ctx{};
    ctx.data_end = static_cast<uint32_t>(frame->size());
    ctx.ingress_ifindex = ifindex;
    LIBBPF_OPTS(bpf_test_run_opts, opts);
    opts.data_in = frame->data();
    opts.data_out = out.data();
    opts.data_size_in = static_cast<uint32_t>(frame->size());
    opts.data_size_out = static_cast<uint32_t>(out.size());
    opts.ctx_in = &ctx;
    opts.ctx_size_in = sizeof(ctx);
    opts.repeat = 1;
    int err = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.fwd_ceiling), &opts);
    EXPECT_EQ(err, 0) << std::strerror(errno);
    out.resize(opts.data_size_out);
    *frame = out;
    return static_cast<int>(opts.retval);
  }

  std::unique_ptr<fwd_ceiling, SkelDeleter> skel_;
  PortSpec port_;
  std::vector<uint8_t> payload_;
};

TEST_F(FwdCeilingTest, ContributionComesBackAsValidResultAtEveryPayloadSize) {
  // Up to ~2.9 KB frames: single-buffer XDP (bigger frames arrive as fragments, which the program drops).
  for (uint16_t count : {0, 1, 2, 59, 240, 241, 504, 700}) {
    for (uint8_t flags : {uint8_t{0}, uint8_t{INC_FLAG_RETRANSMIT}}) {
      FrameSpec spec = Contribution(count, flags);
      auto frame = BuildFrame(spec);
      ASSERT_TRUE(frame.ok());
      ASSERT_TRUE(CheckIcrc(frame->data(), frame->size()));
      std::vector<uint8_t> f = *frame;
      ASSERT_EQ(Run(&f), XDP_TX) << "count " << count;
      ASSERT_EQ(f.size(), frame->size());
      auto r = ParseFrame(f.data(), f.size());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(r->icrc_ok) << "count " << count << " flags " << int{flags};
      EXPECT_EQ(r->src_mac, spec.dst_mac);
      EXPECT_EQ(r->dst_mac, spec.src_mac);
      EXPECT_EQ(r->src_ip, port_.switch_ip);
      EXPECT_EQ(r->dst_ip, port_.member_ip);
      EXPECT_EQ(r->dest_qpn, port_.member_qpn);
      EXPECT_EQ(r->inc.flags, flags | INC_FLAG_RESULT);
      EXPECT_EQ(r->inc.msg_id, spec.inc.msg_id);
      EXPECT_EQ(r->inc.count, count);
      EXPECT_EQ(r->psn, spec.psn);
      ASSERT_EQ(r->payload_len, payload_.size());
      EXPECT_EQ(std::memcmp(r->payload, payload_.data(), payload_.size()), 0);
    }
  }
}

TEST_F(FwdCeilingTest, NonRoceFramePassesToTheKernel) {
  auto frame = BuildFrame(Contribution(16, 0));
  ASSERT_TRUE(frame.ok());
  std::vector<uint8_t> f = *frame;
  f[INC_OFF_UDP + 2] = 0;  // UDP destination port 53 instead of 4791
  f[INC_OFF_UDP + 3] = 53;
  EXPECT_EQ(Run(&f), XDP_PASS);
}

TEST_F(FwdCeilingTest, RoceOnPortWithoutEntryIsDropped) {
  uint32_t key = kLoopback;
  ASSERT_EQ(bpf_map_delete_elem(bpf_map__fd(skel_->maps.fwd_ports), &key), 0);
  auto frame = BuildFrame(Contribution(16, 0));
  ASSERT_TRUE(frame.ok());
  std::vector<uint8_t> f = *frame;
  EXPECT_EQ(Run(&f), XDP_DROP);
}

TEST_F(FwdCeilingTest, TruncatedUdpLengthIsDropped) {
  auto frame = BuildFrame(Contribution(16, 0));
  ASSERT_TRUE(frame.ok());
  std::vector<uint8_t> f = *frame;
  f.resize(f.size() - 8);  // UDP length now claims more than the frame holds
  EXPECT_EQ(Run(&f), XDP_DROP);
}

TEST(FwdCeilingPort, ParsePortRejectsMalformedSpecs) {
  EXPECT_EQ(ParsePort("lo,10.0.0.2,10.0.0.1,300").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParsePort("lo,10.0.0.x,10.0.0.1,300,400").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParsePort("lo,10.0.0.2,10.0.0.1,300,0x1000000").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParsePort("nosuchif0,10.0.0.2,10.0.0.1,300,400").status().code(), Code::kNotFound);
  auto ok = ParsePort("lo,10.0.0.2,10.0.0.1,300,0x190");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->switch_qpn, 400u);
  EXPECT_EQ(ok->ifindex, 1u);
}

}  // namespace
}  // namespace inc::bench
