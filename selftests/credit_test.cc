// Selftests of the credit gate (bpf/credit.h) inside the switch's ingress
// program, through inc::dp::CreditTable: crafted RoCEv2 frames run with
// BPF_PROG_TEST_RUN from a real ingress port and rx queue; per case the
// verdict, the output frame (compared with one built independently here),
// the flow's counters (read through a mapping of credit_counters of this
// test's own) and the gate's counters are checked. Runs in a private network
// namespace with veth ports, and binds a real AF_XDP socket as the hold
// queue where a case needs one.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/log.h"
#include "datapath/credit_table.h"
#include "datapath/datapath.h"
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

using selftest::HopMac;
using selftest::IpChecksum;
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
  size_t ip_len = 20 + 8 + 12 + s.payload;
  std::vector<uint8_t> f(14 + ip_len, 0);
  Mac dst = PortMac(0), src = *Mac::Parse("02:00:00:00:bb:01");
  std::memcpy(&f[0], dst.bytes.data(), 6);
  std::memcpy(&f[6], src.bytes.data(), 6);
  f[12] = 0x08;
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  ip[1] = 0x6A;
  ip[2] = ip_len >> 8;
  ip[3] = ip_len & 0xff;
  ip[6] = 0x40;
  ip[8] = 64;
  ip[9] = s.proto;
  uint32_t sa = Ipv4::Parse(s.src)->be(), da = Ipv4::Parse(s.dst)->be();
  std::memcpy(ip + 12, &sa, 4);
  std::memcpy(ip + 16, &da, 4);
  uint16_t c = IpChecksum(ip, 20);
  ip[10] = c >> 8;
  ip[11] = c & 0xff;
  uint8_t* udp = ip + 20;
  udp[0] = s.sport >> 8;
  udp[1] = s.sport & 0xff;
  udp[2] = s.dport >> 8;
  udp[3] = s.dport & 0xff;
  udp[4] = (ip_len - 20) >> 8;
  udp[5] = (ip_len - 20) & 0xff;
  uint8_t* bth = udp + 8;
  bth[0] = 0x0A;  // RC RDMA WRITE ONLY
  bth[2] = bth[3] = 0xff;
  bth[5] = (s.qpn >> 16) & 0xff;
  bth[6] = (s.qpn >> 8) & 0xff;
  bth[7] = s.qpn & 0xff;
  for (size_t i = 0; i < s.payload; i++) bth[12 + i] = static_cast<uint8_t>(i * 7);
  if (s.truncate) f.resize(s.truncate);
  return f;
}

// What a router makes of `in` when it sends it to hop i out of port p.
std::vector<uint8_t> Forwarded(std::vector<uint8_t> f, int hop, int port) {
  std::memcpy(&f[0], HopMac(hop).bytes.data(), 6);
  std::memcpy(&f[6], PortMac(port).bytes.data(), 6);
  uint8_t* ip = &f[14];
  ip[8]--;
  ip[10] = ip[11] = 0;
  uint16_t c = IpChecksum(ip, 20);
  ip[10] = c >> 8;
  ip[11] = c & 0xff;
  return f;
}

struct RunResult {
  int err = 0;
  uint32_t retval = 0;
  std::vector<uint8_t> out;
};

// Runs the ingress program as if the frame arrived on cd0, rx queue 0.
RunResult TestRun(int prog_fd, const std::vector<uint8_t>& in) {
  RunResult r;
  r.out.resize(4096);
  xdp_md ctx{};
  ctx.ingress_ifindex = if_nametoindex(PortName(0).c_str());
  ctx.rx_queue_index = 0;
  ctx.data_end = static_cast<uint32_t>(in.size());  // no metadata before the frame
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  opts.data_in = in.data();
  opts.data_size_in = static_cast<uint32_t>(in.size());
  opts.data_out = r.out.data();
  opts.data_size_out = static_cast<uint32_t>(r.out.size());
  opts.ctx_in = &ctx;
  opts.ctx_size_in = sizeof(ctx);
  opts.repeat = 1;
  r.err = bpf_prog_test_run_opts(prog_fd, &opts);
  if (r.err) r.err = errno;
  r.retval = opts.retval;
  r.out.resize(opts.data_size_out);
  return r;
}

// A bound copy-mode AF_XDP socket on (port, queue 0): enough for the XSKMAP
// (the test runs only check the verdict, nothing is received).
class TestXsk {
 public:
  explicit TestXsk(const std::string& port) {
    fd_ = socket(AF_XDP, SOCK_RAW, 0);
    if (fd_ < 0) return;
    umem_ = mmap(nullptr, kUmem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (umem_ == MAP_FAILED) return;
    xdp_umem_reg reg{};
    reg.addr = reinterpret_cast<uint64_t>(umem_);
    reg.len = kUmem;
    reg.chunk_size = 4096;
    int n = 64;
    sockaddr_xdp sa{};
    sa.sxdp_family = AF_XDP;
    sa.sxdp_flags = XDP_COPY;
    sa.sxdp_ifindex = if_nametoindex(port.c_str());
    sa.sxdp_queue_id = 0;
    ok_ = setsockopt(fd_, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) == 0 &&
          setsockopt(fd_, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) == 0 &&
          setsockopt(fd_, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)) == 0 &&
          setsockopt(fd_, SOL_XDP, XDP_RX_RING, &n, sizeof(n)) == 0 &&
          bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    if (!ok_) error_ = std::strerror(errno);
  }
  ~TestXsk() {
    if (fd_ >= 0) close(fd_);
    if (umem_ && umem_ != MAP_FAILED) munmap(umem_, kUmem);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int fd() const { return fd_; }

 private:
  static constexpr size_t kUmem = 64 * 4096;
  int fd_ = -1;
  void* umem_ = nullptr;
  bool ok_ = false;
  std::string error_ = "socket(AF_XDP) failed";
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
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, dp_->map_fd("credit_counters"), 0);
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
  FrameSpec frame;
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
  std::map<std::string, uint64_t> counters;  // expected increments
  const char* parser_drop = nullptr;         // drop reason the INC parser counts first
};

FrameSpec Spec(void (*edit)(FrameSpec&)) {
  FrameSpec s;
  edit(s);
  return s;
}

const std::vector<Case>& Cases() {
  static const uint64_t kNearWrap = ~uint64_t{0} - 100;  // 2^64 - 101
  static const std::vector<Case> cases = {
      {"enough credit: to the next hop, MACs rewritten, TTL-1, consumed += frame length",
       {},
       true,
       true,
       true,
       10000,
       0,
       0,
       XDP_REDIRECT,
       true,
       kFrameLen,
       0,
       {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {"credit exactly the frame length: forwarded, nothing left",
       {},
       true,
       true,
       true,
       5000 + kFrameLen,
       5000,
       0,
       XDP_REDIRECT,
       true,
       5000 + kFrameLen,
       0,
       {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {"credit one byte short: to the hold queue, consumed unchanged, queued + 1",
       {},
       true,
       true,
       true,
       5000 + kFrameLen - 1,
       5000,
       0,
       XDP_REDIRECT,
       false,
       5000,
       1,
       {{"queued_no_credit", 1}}},
      {"earlier frames queued: a covered frame waits behind them (order)",
       {},
       true,
       true,
       true,
       100000,
       0,
       2,
       XDP_REDIRECT,
       false,
       0,
       3,
       {{"queued_behind", 1}}},
      {"no next hop (failover in progress): to the hold queue",
       {},
       true,
       false,
       true,
       100000,
       0,
       0,
       XDP_REDIRECT,
       false,
       0,
       1,
       {{"queued_no_hop", 1}}},
      {"must wait but no hold-queue socket: dropped and counted",
       {},
       true,
       true,
       false,
       0,
       0,
       0,
       XDP_DROP,
       false,
       0,
       0,
       {{"drop_no_queue", 1}}},
      {"consumed over granted (overspent): waits",
       {},
       true,
       true,
       true,
       1000,
       2000,
       0,
       XDP_REDIRECT,
       false,
       2000,
       1,
       {{"queued_no_credit", 1}}},
      {"counters about to wrap 2^64, credit covers: forwarded, consumed wraps",
       {},
       true,
       true,
       true,
       kNearWrap + 1000,
       kNearWrap,
       0,
       XDP_REDIRECT,
       true,
       kNearWrap + kFrameLen,
       0,
       {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {"granted wrapped past 2^64, consumed not yet: available is still positive",
       {},
       true,
       true,
       true,
       200,
       kNearWrap,
       0,
       XDP_REDIRECT,
       true,
       kNearWrap + kFrameLen,
       0,
       {{"forwarded", 1}, {"forwarded_bytes", kFrameLen}}},
      {"counters about to wrap, credit short: waits",
       {},
       true,
       true,
       true,
       kNearWrap + 10,
       kNearWrap,
       0,
       XDP_REDIRECT,
       false,
       kNearWrap,
       1,
       {{"queued_no_credit", 1}}},
      {"unknown flow (other DestQP): not touched, to the forwarder",
       Spec([](FrameSpec& s) { s.qpn = 0x4321; }),
       true,
       true,
       true,
       0,
       0,
       0,
       XDP_PASS,
       false,
       0,
       0,
       {{"unknown_flow", 1}}},
      {"unknown flow (other UDP source port): to the forwarder",
       Spec([](FrameSpec& s) { s.sport = 0xC012; }),
       true,
       true,
       true,
       0,
       0,
       0,
       XDP_PASS,
       false,
       0,
       0,
       {{"unknown_flow", 1}}},
      {"no flow configured at all: to the forwarder",
       {},
       false,
       true,
       true,
       0,
       0,
       0,
       XDP_PASS,
       false,
       0,
       0,
       {{"unknown_flow", 1}}},
      {"not RoCEv2 (UDP 4792): not touched",
       Spec([](FrameSpec& s) { s.dport = 4792; }),
       true,
       true,
       true,
       0,
       0,
       0,
       XDP_PASS,
       false,
       0,
       0,
       {}},
      {"not UDP (TCP): not touched",
       Spec([](FrameSpec& s) { s.proto = IPPROTO_TCP; }),
       true,
       true,
       true,
       0,
       0,
       0,
       XDP_PASS,
       false,
       0,
       0,
       {}},
      {"RoCEv2 frame cut inside the BTH: dropped and counted (by the parser, before the gate)",
       Spec([](FrameSpec& s) { s.truncate = 14 + 20 + 8 + 6; }),
       true,
       true,
       true,
       100000,
       0,
       0,
       XDP_DROP,
       false,
       0,
       0,
       {},
       "truncated_bth"},
  };
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
