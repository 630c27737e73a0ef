// SPDX-License-Identifier: Apache-2.0
// Selftests of the credit gate (bpf/credit.h) inside the switch's ingress
// program, through inc::dp::CreditTable: crafted RoCEv2 frames run with
// BPF_PROG_TEST_RUN from a real ingress port and rx queue; per case the
// verdict, the output frame (compared with one built independently here),
// the flow's counters (read through a mapping of credit_counters of this
// test's own) and the gate's counters are checked. Runs in a private network
// namespace with veth ports, and binds a real AF_XDP socket as the hold
// queue where a case needs one. HoldQueueTest runs the hold queue itself on
// live frames through the attached program.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/xsk.h"
#include "datapath/credit_table.h"
#include "datapath/datapath.h"
#include "datapath/hold_queue.h"
#include "transit_frames.h"
#include "veth_netns.h"

namespace inc::dp {
namespace {

constexpr int kPorts = 3;  // cd0 (ingress), cd1 (primary next hop), cd2 (backup)
std::string g_skip;
const std::string kPinRoot = "/sys/fs/bpf/incin-cdt" + std::to_string(getpid());

std::string PortName(int i) {
  return "cd" + std::to_string(i);
}

std::string SetupNetns() {
  return selftest::SetupVethNetns("cd", kPorts, "cd");
}

using selftest::BuildTransitFrame;
using selftest::HopMac;
using selftest::Routed;
using selftest::RunResult;
using selftest::TransitFrame;
Mac PortMac(int i) {
  return *Mac::Parse("02:00:00:00:cd:0" + std::to_string(i));
}

struct FrameSpec {
  std::string src = "10.8.0.2";
  std::string dst = "10.8.9.7";
  uint16_t sport = 0xC000 | 0x11;
  uint16_t dport = 4791;
  uint32_t qpn = 0x1234;
  uint8_t proto = IPPROTO_UDP;
  size_t payload = 200;  // bytes after the BTH
  size_t truncate = 0;   // cut the frame to this many bytes (0: keep)
};

const CreditFlowKey kFlow{*Ipv4::Parse("10.8.0.2"), *Ipv4::Parse("10.8.9.7"), 0xC000 | 0x11, 0x1234};

// Ethernet + IPv4 + UDP + BTH (RDMA WRITE ONLY) + payload.
std::vector<uint8_t> Frame(const FrameSpec& s) {
  TransitFrame t;
  t.dst_mac = PortMac(0);
  t.src = s.src;
  t.dst = s.dst;
  t.tos = 0x6A;
  t.proto = s.proto;
  t.sport = s.sport;
  t.dport = s.dport;
  t.bth = true;
  t.dest_qpn = s.qpn;
  t.payload = s.payload;
  t.payload_step = 7;
  t.truncate = s.truncate;
  return BuildTransitFrame(t);
}

// What a router makes of `in` when it sends it to hop i out of port p.
std::vector<uint8_t> Forwarded(std::vector<uint8_t> f, int hop, int port) {
  return Routed(std::move(f), HopMac(hop), PortMac(port));
}

// The switch program on `in` as if it arrived on port 0, queue 0.
RunResult TestRun(int prog_fd, const std::vector<uint8_t>& in) {
  return selftest::TestRun(prog_fd, in, if_nametoindex(PortName(0).c_str()));
}

// A bound copy-mode AF_XDP socket on (port, queue 0): enough for the XSKMAP
// (the test runs only check the verdict, nothing is received).
class TestXsk {
 public:
  explicit TestXsk(const std::string& port) {
    xsk::Layout layout;
    layout.chunks = 64;
    layout.chunk_size = 4096;
    layout.fill = layout.completion = layout.rx = 64;
    layout.what = "test socket on " + port;
    Status st = xsk_.Open(layout);
    if (st.ok()) st = xsk_.Bind(if_nametoindex(port.c_str()), 0, 0, 0);
    ok_ = st.ok();
    error_ = st.ToString();
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int fd() const { return xsk_.fd(); }

 private:
  xsk::Socket xsk_;
  bool ok_ = false;
  std::string error_;
};

class CreditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
    Options o;
    o.switch_name = "cdsw";
    o.pin_root = kPinRoot;
    o.slot_capacity = 64;
    auto d = Datapath::Open(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dp_ = std::move(*d);
    auto t = CreditTable::Open(*dp_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    table_ = std::make_unique<CreditTable>(std::move(*t));
    // The test's own view of the counters, independent of CreditTable.
    size_t len = (sizeof(inc_credit_counters) * INC_CREDIT_MAX_FLOWS + 4095) / 4096 * 4096;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED,
                   dp_->map_fd(Datapath::MapId::kCreditCounters), 0);
    ASSERT_NE(m, MAP_FAILED) << std::strerror(errno);
    raw_ = static_cast<inc_credit_counters*>(m);
    raw_len_ = len;
  }
  void TearDown() override {
    if (raw_) munmap(raw_, raw_len_);
    table_.reset();
    if (dp_) (void)dp_->Destroy();
  }
  std::map<std::string, uint64_t> Counters() {
    auto st = table_->ReadStats();
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return st.ok() ? *st : std::map<std::string, uint64_t>{};
  }
  CreditHop Hop(int hop, int port) { return CreditHop{PortName(port), HopMac(hop)}; }

  std::unique_ptr<Datapath> dp_;
  std::unique_ptr<CreditTable> table_;
  inc_credit_counters* raw_ = nullptr;
  size_t raw_len_ = 0;
};

constexpr uint64_t kFrameLen = 14 + 20 + 8 + 12 + 200;  // Frame({}) bytes

struct Case {
  const char* description;
  FrameSpec frame{};
  bool flow = true;       // kFlow configured (next hop 1 on cd1)
  bool hop_valid = true;  // false: flow without a next hop
  bool xsk = true;        // a hold-queue socket bound on cd0 queue 0
  uint64_t granted = 0;   // counters before the run
  uint64_t consumed = 0;
  uint64_t queued = 0;
  uint32_t verdict = XDP_PASS;
  bool forwarded = false;  // output = Forwarded(in, 1, 1), else unchanged
  uint64_t consumed_after = 0;
  uint64_t queued_after = 0;
  std::map<std::string, uint64_t> counters{};  // expected increments
  const char* parser_drop = nullptr;           // drop reason the INC parser counts first
};

FrameSpec Spec(void (*edit)(FrameSpec&)) {
  FrameSpec s;
  edit(s);
  return s;
}

const std::vector<Case>& Cases() {
  static const uint64_t kNearWrap = ~uint64_t{0} - 100;  // 2^64 - 101
  static const std::vector<Case> cases = {
      {.description = "enough credit: to the next hop, MACs rewritten, TTL-1, consumed += frame length",
       .granted = 10000,
       .verdict = XDP_REDIRECT,
       .forwarded = true,
       .consumed_after = kFrameLen,
       .counters = {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {.description = "credit exactly the frame length: forwarded, nothing left",
       .granted = 5000 + kFrameLen,
       .consumed = 5000,
       .verdict = XDP_REDIRECT,
       .forwarded = true,
       .consumed_after = 5000 + kFrameLen,
       .counters = {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {.description = "credit one byte short: to the hold queue, consumed unchanged, queued + 1",
       .granted = 5000 + kFrameLen - 1,
       .consumed = 5000,
       .verdict = XDP_REDIRECT,
       .consumed_after = 5000,
       .queued_after = 1,
       .counters = {{"queued_no_credit", 1}}},
      {.description = "earlier frames queued: a covered frame waits behind them (order)",
       .granted = 100000,
       .queued = 2,
       .verdict = XDP_REDIRECT,
       .queued_after = 3,
       .counters = {{"queued_behind", 1}}},
      {.description = "no next hop (failover in progress): to the hold queue",
       .hop_valid = false,
       .granted = 100000,
       .verdict = XDP_REDIRECT,
       .queued_after = 1,
       .counters = {{"queued_no_hop", 1}}},
      {.description = "must wait but no hold-queue socket: dropped and counted",
       .xsk = false,
       .verdict = XDP_DROP,
       .counters = {{"drop_no_queue", 1}}},
      {.description = "consumed over granted (overspent): waits",
       .granted = 1000,
       .consumed = 2000,
       .verdict = XDP_REDIRECT,
       .consumed_after = 2000,
       .queued_after = 1,
       .counters = {{"queued_no_credit", 1}}},
      {.description = "counters about to wrap 2^64, credit covers: forwarded, consumed wraps",
       .granted = kNearWrap + 1000,
       .consumed = kNearWrap,
       .verdict = XDP_REDIRECT,
       .forwarded = true,
       .consumed_after = kNearWrap + kFrameLen,
       .counters = {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {.description = "granted wrapped past 2^64, consumed not yet: available is still positive",
       .granted = 200,
       .consumed = kNearWrap,
       .verdict = XDP_REDIRECT,
       .forwarded = true,
       .consumed_after = kNearWrap + kFrameLen,
       .counters = {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {.description = "counters about to wrap, credit short: waits",
       .granted = kNearWrap + 10,
       .consumed = kNearWrap,
       .verdict = XDP_REDIRECT,
       .consumed_after = kNearWrap,
       .queued_after = 1,
       .counters = {{"queued_no_credit", 1}}},
      {.description = "unknown flow (other DestQP): not touched, to the forwarder",
       .frame = Spec([](FrameSpec& s) { s.qpn = 0x4321; }),
       .counters = {{"unknown_flow", 1}}},
      {.description = "unknown flow (other UDP source port): to the forwarder",
       .frame = Spec([](FrameSpec& s) { s.sport = 0xC012; }),
       .counters = {{"unknown_flow", 1}}},
      {.description = "no flow configured at all: to the forwarder",
       .flow = false,
       .counters = {{"unknown_flow", 1}}},
      {.description = "not RoCEv2 (UDP 4792): not touched",
       .frame = Spec([](FrameSpec& s) { s.dport = 4792; })},
      {.description = "not UDP (TCP): not touched",
       .frame = Spec([](FrameSpec& s) { s.proto = IPPROTO_TCP; })},
      {.description = "RoCEv2 frame cut inside the BTH: dropped and counted (by the parser, before the gate)",
       .frame = Spec([](FrameSpec& s) { s.truncate = 14 + 20 + 8 + 6; }),
       .granted = 100000,
       .verdict = XDP_DROP,
       .parser_drop = "truncated_bth"}};
  return cases;
}

TEST_F(CreditTest, TableOfCases) {
  TestXsk xsk(PortName(0));
  if (!xsk.ok()) GTEST_SKIP() << "AF_XDP socket on " << PortName(0) << ": " << xsk.error();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.description);
    uint32_t index = 0;
    if (c.flow) {
      auto idx = table_->AddFlow(kFlow, c.hop_valid ? Hop(1, 1) : CreditHop{});
      ASSERT_TRUE(idx.ok()) << idx.status().ToString();
      index = *idx;
      ASSERT_TRUE(table_->SetGranted(kFlow, c.granted).ok());
      raw_[index].consumed = c.consumed;
      raw_[index].queued = c.queued;
    }
    if (c.xsk) {
      ASSERT_TRUE(table_->BindXsk(PortName(0), 0, xsk.fd()).ok());
    }
    auto before = Counters();
    auto dp_before = dp_->ReadStats();
    ASSERT_TRUE(dp_before.ok());
    auto in = Frame(c.frame);
    RunResult r = TestRun(dp_->ingress_prog_fd(), in);
    ASSERT_EQ(r.err, 0) << std::strerror(r.err);
    EXPECT_EQ(r.retval, c.verdict);
    if (c.forwarded)
      EXPECT_EQ(r.out, Forwarded(in, 1, 1));
    else
      EXPECT_EQ(r.out, in) << "frame changed although it was not forwarded by the gate";
    if (c.flow) {
      EXPECT_EQ(raw_[index].granted, c.granted) << "XDP wrote granted";
      EXPECT_EQ(raw_[index].consumed, c.consumed_after);
      EXPECT_EQ(raw_[index].queued, c.queued_after);
      auto rc = table_->Read(kFlow);
      ASSERT_TRUE(rc.ok());
      EXPECT_EQ(rc->available, static_cast<int64_t>(c.granted - c.consumed_after));
      ASSERT_TRUE(table_->RemoveFlow(kFlow).ok());
    }
    auto after = Counters();
    for (const auto& [name, v] : after) {
      uint64_t want = c.counters.count(name) ? c.counters.at(name) : 0;
      EXPECT_EQ(v - before[name], want) << "counter " << name;
    }
    if (c.parser_drop) {
      auto dp_after = dp_->ReadStats();
      ASSERT_TRUE(dp_after.ok());
      EXPECT_EQ(dp_after->drops[c.parser_drop] - dp_before->drops[c.parser_drop], 1u);
    }
    if (c.xsk) {
      ASSERT_TRUE(table_->UnbindXsk(PortName(0), 0).ok());
    }
  }
}

// Credit short -> frames wait; credit granted later does not let a new frame
// overtake them; once the hold queue sent them (queued back to 0) frames go
// straight to the next hop again.
TEST_F(CreditTest, LateCreditNeverLetsANewFrameOvertakeWaitingOnes) {
  TestXsk xsk(PortName(0));
  if (!xsk.ok()) GTEST_SKIP() << "AF_XDP socket: " << xsk.error();
  ASSERT_TRUE(table_->BindXsk(PortName(0), 0, xsk.fd()).ok());
  auto idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  ASSERT_TRUE(table_->SetGranted(kFlow, 2 * kFrameLen).ok());
  auto in = Frame({});
  int prog = dp_->ingress_prog_fd();
  EXPECT_EQ(TestRun(prog, in).retval, static_cast<uint32_t>(XDP_REDIRECT));
  EXPECT_EQ(TestRun(prog, in).out, Forwarded(in, 1, 1));
  RunResult third = TestRun(prog, in);
  EXPECT_EQ(third.out, in) << "third frame forwarded without credit";
  EXPECT_EQ(table_->Read(kFlow)->queued, 1u);
  ASSERT_TRUE(table_->AddCredit(kFlow, 10 * kFrameLen).ok());
  EXPECT_EQ(TestRun(prog, in).out, in) << "a new frame overtook the waiting one";
  EXPECT_EQ(table_->Read(kFlow)->queued, 2u);
  // The hold queue sends its two frames.
  for (int i = 0; i < 2; i++) {
    ASSERT_TRUE(table_->TakeCredit(*idx, kFrameLen));
    ASSERT_TRUE(table_->DecrementQueued(*idx).ok());
  }
  EXPECT_EQ(TestRun(prog, in).out, Forwarded(in, 1, 1));
  auto c = table_->Read(kFlow);
  EXPECT_EQ(c->consumed, 5 * kFrameLen);
  EXPECT_EQ(c->granted, 12 * kFrameLen);
  EXPECT_EQ(c->available, static_cast<int64_t>(7 * kFrameLen));
  EXPECT_EQ(c->queued, 0u);
  EXPECT_EQ(c->held, 2u);
  EXPECT_EQ(table_->DecrementQueued(*idx).code(), Code::kFailedPrecondition);
}

TEST_F(CreditTest, FailoverMovesTheFlowToTheBackupHopAtOnce) {
  ASSERT_TRUE(table_->AddFlow(kFlow, Hop(1, 1)).ok());
  ASSERT_TRUE(table_->SetGranted(kFlow, 100 * kFrameLen).ok());
  auto in = Frame({});
  EXPECT_EQ(TestRun(dp_->ingress_prog_fd(), in).out, Forwarded(in, 1, 1));
  ASSERT_TRUE(table_->SetNextHop(kFlow, Hop(2, 2)).ok());
  EXPECT_EQ(TestRun(dp_->ingress_prog_fd(), in).out, Forwarded(in, 2, 2));
  auto s = table_->Lookup(kFlow);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ifindex, if_nametoindex(PortName(2).c_str()));
  EXPECT_EQ(s->counters.consumed, 2 * kFrameLen) << "failover must keep the flow's counters";
}

// The receiver gateway's flow: the gate counts the frame's bytes against the
// port it came in on (the credit returned to the upstream behind that port)
// and leaves routing to the next stage; a forwarded frame counts the same.
TEST_F(CreditTest, BytesLeavingTheSwitchAreCountedPerIngressPort) {
  const uint32_t in_port = if_nametoindex(PortName(0).c_str()), other = if_nametoindex(PortName(1).c_str());
  CreditHop deliver;
  deliver.count_only = true;
  auto idx = table_->AddFlow(kFlow, deliver);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_TRUE(table_->Lookup(kFlow)->count_only);
  ASSERT_TRUE(table_->WatchIngress(*idx, in_port).ok());
  ASSERT_TRUE(table_->WatchIngress(*idx, in_port).ok()) << "watching twice must be harmless";
  auto before = Counters();
  auto in = Frame({});
  RunResult r = TestRun(dp_->ingress_prog_fd(), in);
  EXPECT_EQ(r.retval, static_cast<uint32_t>(XDP_PASS)) << "no route: the kernel delivers it";
  EXPECT_EQ(r.out, in);
  EXPECT_EQ(*table_->IngressBytes(*idx, in_port), kFrameLen);
  EXPECT_EQ(table_->IngressBytes(*idx, other).status().code(), Code::kNotFound);
  EXPECT_EQ(Counters()["delivered"] - before["delivered"], 1u);
  EXPECT_EQ(table_->Read(kFlow)->consumed, 0u) << "a delivered frame takes no credit";
  ASSERT_TRUE(table_->RemoveFlow(kFlow).ok());
  EXPECT_EQ(table_->IngressBytes(*idx, in_port).status().code(), Code::kNotFound)
      << "removing the flow must forget its ingress counters";

  idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  ASSERT_TRUE(table_->SetGranted(kFlow, 10 * kFrameLen).ok());
  ASSERT_TRUE(table_->WatchIngress(*idx, in_port).ok());
  EXPECT_EQ(TestRun(dp_->ingress_prog_fd(), in).out, Forwarded(in, 1, 1));
  EXPECT_EQ(TestRun(dp_->ingress_prog_fd(), in).out, Forwarded(in, 1, 1));
  EXPECT_EQ(*table_->IngressBytes(*idx, in_port), 2 * kFrameLen);
}

TEST_F(CreditTest, TableRejectsBadInputWithSpecificCodes) {
  EXPECT_EQ(table_->AddFlow(kFlow, CreditHop{"nosuchport", HopMac(1)}).status().code(), Code::kNotFound);
  CreditFlowKey wide = kFlow;
  wide.dest_qpn = 0x1000000;
  EXPECT_EQ(table_->AddFlow(wide, Hop(1, 1)).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(table_->AddFlow(kFlow, Hop(1, 1)).ok());
  EXPECT_EQ(table_->AddFlow(kFlow, Hop(2, 2)).status().code(), Code::kAlreadyExists);
  CreditFlowKey other = kFlow;
  other.sport++;
  EXPECT_EQ(table_->RemoveFlow(other).code(), Code::kNotFound);
  EXPECT_EQ(table_->SetNextHop(other, Hop(1, 1)).code(), Code::kNotFound);
  EXPECT_EQ(table_->SetGranted(other, 1).code(), Code::kNotFound);
  EXPECT_EQ(table_->Read(other).status().code(), Code::kNotFound);
  EXPECT_EQ(table_->UnbindXsk(PortName(0), 0).code(), Code::kNotFound);
  EXPECT_EQ(table_->BindXsk("nosuchport", 0, 0).code(), Code::kNotFound);
}

TEST_F(CreditTest, IndexesAreReusedAndTheTableFillsWithResourceExhausted) {
  std::vector<CreditFlowKey> keys;
  for (uint32_t i = 0; i < INC_CREDIT_MAX_FLOWS; i++) {
    CreditFlowKey k = kFlow;
    k.dest_qpn = i + 1;
    auto idx = table_->AddFlow(k, Hop(1, 1));
    ASSERT_TRUE(idx.ok()) << i << ": " << idx.status().ToString();
    EXPECT_EQ(*idx, i);
    keys.push_back(k);
  }
  CreditFlowKey extra = kFlow;
  extra.dest_qpn = 0xffffff;
  EXPECT_EQ(table_->AddFlow(extra, Hop(1, 1)).status().code(), Code::kResourceExhausted);
  // A removed flow's index goes to the next flow, with fresh counters.
  raw_[7].consumed = 99;
  ASSERT_TRUE(table_->RemoveFlow(keys[7]).ok());
  auto idx = table_->AddFlow(extra, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(*idx, 7u);
  EXPECT_EQ(table_->Read(extra)->consumed, 0u);
  // A table opened again (agent restart) knows which indexes are taken.
  auto again = CreditTable::Open(*dp_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->AddFlow(kFlow, Hop(1, 1)).status().code(), Code::kResourceExhausted);
  auto all = again->ListFlows();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(INC_CREDIT_MAX_FLOWS));
}

// ---------------------------------------------------------------- hold queue
//
// The hold queue (userspace/datapath/hold_queue.h) on live frames: crafted
// frames are sent into cd0's peer, pass the switch program attached to cd0,
// wait in HoldQueue behind its AF_XDP intake, and are captured where they
// leave (cd1's or cd2's peer).

// Receives the RoCEv2 frames that arrive at a port (other traffic, e.g. IPv6
// neighbour discovery, is ignored).
class Capture {
 public:
  explicit Capture(const std::string& port) {
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(port.c_str()));
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Capture() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Frames until `want` arrived or `timeout_ms` passed.
  std::vector<std::vector<uint8_t>> Read(size_t want, int timeout_ms) {
    std::vector<std::vector<uint8_t>> got;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (got.size() < want && std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      std::vector<uint8_t> f(4096);
      sockaddr_ll from{};
      socklen_t len = sizeof(from);
      ssize_t n = recvfrom(fd_, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      f.resize(static_cast<size_t>(n));
      if (f.size() >= 42 && f[12] == 0x08 && f[13] == 0x00 && f[23] == IPPROTO_UDP && f[36] == (4791 >> 8) &&
          f[37] == (4791 & 0xff))
        got.push_back(std::move(f));
    }
    return got;
  }

 private:
  int fd_ = -1;
};

constexpr uint64_t kLimitUnbounded = 1 << 20;

class HoldQueueTest : public CreditTest {
 protected:
  void SetUp() override {
    CreditTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // A frame XDP redirects into a veth is delivered only if the peer runs
    // XDP or GRO (docs/operations.md "The veth caveat").
    for (int i = 1; i < kPorts; i++)
      if (selftest::Sh("ethtool -K " + PortName(i) + "p gro on") != 0)
        GTEST_SKIP() << "ethtool -K " << PortName(i) << "p gro on failed (is ethtool installed?)";
    Status attached = dp_->AttachPort(PortName(0));
    ASSERT_TRUE(attached.ok()) << attached.ToString();
    send_fd_ = socket(AF_PACKET, SOCK_RAW, 0);
    ASSERT_GE(send_fd_, 0) << std::strerror(errno);
    for (int i = 1; i < kPorts; i++) {
      out_.push_back(std::make_unique<Capture>(PortName(i) + "p"));
      ASSERT_TRUE(out_.back()->ok()) << std::strerror(errno);
    }
    ingress_ = if_nametoindex(PortName(0).c_str());
  }
  void TearDown() override {
    hold_.reset();  // unbinds its sockets from the table
    out_.clear();
    if (send_fd_ >= 0) close(send_fd_);
    CreditTest::TearDown();
  }
  void OpenHoldQueue(uint64_t limit_bytes = kLimitUnbounded) {
    auto q = HoldQueue::Open(table_.get(), {PortName(0)}, limit_bytes, 256);
    if (!q.ok() && q.status().code() == Code::kUnavailable) GTEST_SKIP() << q.status().ToString();
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    hold_ = std::move(*q);
  }
  // Frame({}) with a sequence number in its payload, so order is visible.
  static std::vector<uint8_t> Numbered(uint32_t seq) {
    auto f = Frame({});
    std::memcpy(&f[14 + 20 + 8 + 12], &seq, sizeof(seq));
    return f;
  }
  // Sends frames first..first+n-1 into cd0 (through its peer); returns them.
  std::vector<std::vector<uint8_t>> Send(uint32_t first, uint32_t n) {
    std::vector<std::vector<uint8_t>> sent;
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = static_cast<int>(if_nametoindex((PortName(0) + "p").c_str()));
    to.sll_halen = ETH_ALEN;
    for (uint32_t i = 0; i < n; i++) {
      sent.push_back(Numbered(first + i));
      EXPECT_EQ(sendto(send_fd_, sent.back().data(), sent.back().size(), 0, reinterpret_cast<sockaddr*>(&to),
                       sizeof(to)),
                static_cast<ssize_t>(sent.back().size()))
          << std::strerror(errno);
    }
    return sent;
  }
  // Takes diverted frames into the hold queue until it holds `frames` of
  // kFlow (or a second passed); returns what it holds.
  uint64_t IntakeUntil(uint64_t frames) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    uint64_t held = 0;
    do {
      hold_->Intake();
      auto h = hold_->Held();
      held = h.count(kFlow) ? h[kFlow].frames : 0;
      if (held >= frames) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } while (std::chrono::steady_clock::now() < end);
    return held;
  }
  static std::vector<std::vector<uint8_t>> Routed(const std::vector<std::vector<uint8_t>>& in, int hop,
                                                  int port) {
    std::vector<std::vector<uint8_t>> out;
    for (const auto& f : in) out.push_back(Forwarded(f, hop, port));
    return out;
  }
  Capture& Out(int port) { return *out_[port - 1]; }

  std::unique_ptr<HoldQueue> hold_;
  std::vector<std::unique_ptr<Capture>> out_;
  int send_fd_ = -1;
  uint32_t ingress_ = 0;
};

TEST_F(HoldQueueTest, HeldFramesLeaveInArrivalOrderAsCreditReturns) {
  auto idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  OpenHoldQueue();
  if (IsSkipped()) return;
  auto sent = Send(0, 12);
  ASSERT_EQ(IntakeUntil(12), 12u) << "the gate must divert frames without credit into the hold queue";
  EXPECT_EQ(raw_[*idx].queued, 12u);
  EXPECT_EQ(hold_->Drain(1), 0u) << "no credit, nothing may leave";
  EXPECT_TRUE(Out(1).Read(1, 50).empty());

  ASSERT_TRUE(table_->AddCredit(kFlow, 5 * kFrameLen + kFrameLen - 1).ok());
  EXPECT_EQ(hold_->Drain(2), 5u) << "credit for 5 frames and a byte short of the 6th";
  auto first = Out(1).Read(5, 1000);
  EXPECT_EQ(first, Routed({sent.begin(), sent.begin() + 5}, 1, 1)) << "in order, rewritten for hop 1 on cd1";
  EXPECT_EQ(raw_[*idx].queued, 7u);

  ASSERT_TRUE(table_->AddCredit(kFlow, 7 * kFrameLen).ok());
  EXPECT_EQ(hold_->Drain(3), 7u);
  EXPECT_EQ(Out(1).Read(7, 1000), Routed({sent.begin() + 5, sent.end()}, 1, 1));
  auto c = table_->Read(kFlow);
  EXPECT_EQ(c->queued, 0u);
  EXPECT_EQ(c->consumed, 12 * kFrameLen);
  EXPECT_EQ(c->available, static_cast<int64_t>(kFrameLen - 1));
  EXPECT_EQ(hold_->SentBytes(*idx, ingress_), 12 * kFrameLen) << "bytes freed toward cd0's upstream";
  EXPECT_EQ(hold_->stats().sent, 12u);
  EXPECT_EQ(hold_->stats().sent_bytes, 12 * kFrameLen);

  // With the queue empty and credit at hand a frame goes by XDP directly.
  auto before = Counters();
  ASSERT_TRUE(table_->AddCredit(kFlow, kFrameLen).ok());
  auto last = Send(12, 1);
  EXPECT_EQ(Out(1).Read(1, 1000), Routed(last, 1, 1));
  EXPECT_EQ(Counters()["forwarded"] - before["forwarded"], 1u);
  hold_->Intake();
  EXPECT_EQ(hold_->stats().received, 12u) << "the forwarded frame must not reach the hold queue";
}

TEST_F(HoldQueueTest, NewFramesWaitBehindHeldOnesEvenWhenCreditArrives) {
  auto idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  OpenHoldQueue();
  if (IsSkipped()) return;
  auto sent = Send(0, 4);
  ASSERT_EQ(IntakeUntil(4), 4u);
  ASSERT_TRUE(table_->AddCredit(kFlow, 8 * kFrameLen).ok());
  auto before = Counters();
  auto more = Send(4, 4);
  sent.insert(sent.end(), more.begin(), more.end());
  ASSERT_EQ(IntakeUntil(8), 8u) << "frames behind waiting ones must wait too, credit or not";
  EXPECT_EQ(Counters()["queued_behind"] - before["queued_behind"], 4u);
  EXPECT_EQ(Counters()["forwarded"] - before["forwarded"], 0u);
  EXPECT_EQ(hold_->Drain(1), 8u);
  EXPECT_EQ(Out(1).Read(8, 1000), Routed(sent, 1, 1));
}

TEST_F(HoldQueueTest, FailoverSendsWaitingFramesToTheNewNextHop) {
  ASSERT_TRUE(table_->AddFlow(kFlow, Hop(1, 1)).ok());
  OpenHoldQueue();
  if (IsSkipped()) return;
  auto sent = Send(0, 3);
  ASSERT_EQ(IntakeUntil(3), 3u);
  ASSERT_TRUE(table_->SetNextHop(kFlow, Hop(2, 2)).ok());
  ASSERT_TRUE(table_->AddCredit(kFlow, 3 * kFrameLen).ok());
  EXPECT_EQ(hold_->Drain(1), 3u);
  EXPECT_EQ(Out(2).Read(3, 1000), Routed(sent, 2, 2)) << "rewritten for the hop current when they leave";
  EXPECT_TRUE(Out(1).Read(1, 50).empty()) << "nothing may go to the old next hop";
}

TEST_F(HoldQueueTest, AFlowWithoutNextHopKeepsItsFramesUntilItEnds) {
  ASSERT_TRUE(table_->AddFlow(kFlow, CreditHop{}).ok());
  OpenHoldQueue();
  if (IsSkipped()) return;
  auto before = Counters();
  Send(0, 3);
  ASSERT_EQ(IntakeUntil(3), 3u);
  EXPECT_EQ(Counters()["queued_no_hop"] - before["queued_no_hop"], 3u);
  ASSERT_TRUE(table_->AddCredit(kFlow, 100 * kFrameLen).ok());
  EXPECT_EQ(hold_->Drain(1), 0u) << "credit without a next hop sends nothing";
  EXPECT_EQ(hold_->Held()[kFlow].frames, 3u);
  ASSERT_TRUE(table_->RemoveFlow(kFlow).ok());
  hold_->Forget(kFlow);
  EXPECT_TRUE(hold_->Held().empty());
  EXPECT_EQ(hold_->stats().dropped_no_flow, 3u) << "frames of an ended flow are counted, not lost silently";
}

TEST_F(HoldQueueTest, TheByteLimitDropsCountsAndKeepsQueuedTrue) {
  auto idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  OpenHoldQueue(2 * kFrameLen + 10);
  if (IsSkipped()) return;
  auto sent = Send(0, 4);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (hold_->stats().received < 4 && std::chrono::steady_clock::now() < end) hold_->Intake();
  EXPECT_EQ(hold_->Held()[kFlow].frames, 2u);
  EXPECT_EQ(hold_->stats().dropped_overflow, 2u);
  EXPECT_EQ(raw_[*idx].queued, 2u) << "a frame dropped for the limit must leave 'queued'";
  ASSERT_TRUE(table_->AddCredit(kFlow, 2 * kFrameLen).ok());
  EXPECT_EQ(hold_->Drain(1), 2u);
  EXPECT_EQ(Out(1).Read(2, 1000), Routed({sent.begin(), sent.begin() + 2}, 1, 1));
  EXPECT_EQ(raw_[*idx].queued, 0u);
}

// XDP counts a frame in 'queued' before it redirects it; a frame the kernel
// then drops (intake ring full) must not block its flow for ever.
TEST_F(HoldQueueTest, QueuedFramesTheKernelDroppedAreReconciled) {
  auto idx = table_->AddFlow(kFlow, Hop(1, 1));
  ASSERT_TRUE(idx.ok());
  OpenHoldQueue();
  if (IsSkipped()) return;
  raw_[*idx].queued = 2;  // as if two diverted frames never reached the socket
  const uint64_t t0 = 1'000'000'000;
  hold_->Drain(t0);
  hold_->Drain(t0 + 6'000'000);
  EXPECT_EQ(raw_[*idx].queued, 2u) << "6 ms is too soon: frames may still be on their way";
  hold_->Drain(t0 + 12'000'000);
  hold_->Drain(t0 + 18'000'000);
  EXPECT_EQ(raw_[*idx].queued, 0u);
  EXPECT_EQ(hold_->stats().reconciled, 2u);
  ASSERT_TRUE(table_->AddCredit(kFlow, kFrameLen).ok());
  auto next = Send(0, 1);
  EXPECT_EQ(Out(1).Read(1, 1000), Routed(next, 1, 1))
      << "the flow must not wait behind frames that never come";
}

}  // namespace
}  // namespace inc::dp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  inc::SetLogLevel(inc::LogLevel::kWarn);
  inc::dp::g_skip = inc::dp::SetupNetns();
  int rc = RUN_ALL_TESTS();
  rmdir(inc::dp::kPinRoot.c_str());
  if (rc == 0 && !inc::dp::g_skip.empty()) return 77;
  return rc;
}
