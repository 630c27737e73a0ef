// SPDX-License-Identifier: Apache-2.0
// Lab test of libinc's raw-frame transports (label lab): two network
// namespaces joined by a veth pair, prepared by afxdp_loopback.sh, which
// passes their names in CLI_NS_A/CLI_NS_B, the interfaces in
// CLI_IF_A/CLI_IF_B, and the member transport under test in CLI_TRANSPORT
// ("afxdp" or "xdp"; the stand-in switches always use AF_XDP sockets).
// - raw RoCEv2 frames built with common/frame.h go from an AF_XDP socket in A
//   to one in B byte for byte, with a valid ICRC, while ARP/ICMP still reach
//   the kernel (the worker XDP program passes them);
// - a full Communicator in A runs collectives against a one-member
//   "reflector" in B that answers each contribution with a RESULT frame and
//   ignores the first transmission of some messages, so the window,
//   retransmission and validation paths run over real sockets.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "client/communicator.h"
#include "client/numerics.h"
#include "client/xsk_socket.h"
#include "common/frame.h"
#include "common/net.h"

namespace inc::client {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The member transport the Communicator tests run on (CLI_TRANSPORT).
std::string MemberTransport() {
  std::string t = Env("CLI_TRANSPORT");
  return t.empty() ? "afxdp" : t;
}

// Runs fn inside the named network namespace, then returns to the original.
template <typename Fn>
auto InNetns(const std::string& ns, Fn fn) {
  int orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int target = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(target, 0) << ns;
  EXPECT_EQ(setns(target, CLONE_NEWNET), 0);
  auto result = fn();
  EXPECT_EQ(setns(orig, CLONE_NEWNET), 0);
  close(target);
  close(orig);
  return result;
}

class AfXdpLab : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_a_ = Env("CLI_NS_A");
    ns_b_ = Env("CLI_NS_B");
    if_a_ = Env("CLI_IF_A");
    if_b_ = Env("CLI_IF_B");
    if (ns_a_.empty() || ns_b_.empty())
      GTEST_SKIP() << "run through afxdp_loopback.sh (needs CLI_NS_A/CLI_NS_B)";
    info_a_ = InNetns(ns_a_, [&] { return GetInterfaceInfo(if_a_); }).value();
    info_b_ = InNetns(ns_b_, [&] { return GetInterfaceInfo(if_b_); }).value();
  }

  std::unique_ptr<XskSocket> OpenIn(const std::string& ns, const XskOptions& o) {
    auto s = InNetns(ns, [&] { return XskSocket::Open(o); });
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      return nullptr;
    }
    return std::move(*s);
  }

  std::string ns_a_, ns_b_, if_a_, if_b_;
  InterfaceInfo info_a_, info_b_;
};

TEST_F(AfXdpLab, RawRoceFramesCrossTheVethByteForByteWithValidIcrc) {
  XskOptions oa;
  oa.ifname = if_a_;
  oa.filter_ip = info_a_.ip;
  XskOptions ob;
  ob.ifname = if_b_;
  ob.filter_ip = info_b_.ip;
  ob.filter_qpn = 0x800042;
  auto a = OpenIn(ns_a_, oa);
  auto b = OpenIn(ns_b_, ob);
  ASSERT_TRUE(a && b);

  std::vector<std::vector<uint8_t>> sent;
  const int kFrames = 300;  // more than one TX kick batch of 32, odd sizes
  for (int i = 0; i < kFrames; i++) {
    std::vector<int32_t> payload(1 + (i * 37) % 240);
    std::iota(payload.begin(), payload.end(), i);
    FrameSpec s;
    s.src_mac = info_a_.mac;
    s.dst_mac = info_b_.mac;
    s.src_ip = info_a_.ip;
    s.dst_ip = info_b_.ip;
    s.src_qpn = 0x800041;
    s.dest_qpn = 0x800042;
    s.psn = static_cast<uint32_t>(i);
    s.inc.msg_id = static_cast<uint32_t>(i);
    s.inc.slot = static_cast<uint16_t>(i % 256);
    s.inc.count = static_cast<uint16_t>(payload.size());
    s.payload = reinterpret_cast<const uint8_t*>(payload.data());
    s.payload_len = payload.size() * 4;
    auto f = BuildFrame(s);
    ASSERT_TRUE(f.ok());
    sent.push_back(*f);
  }
  // A frame for another QPN must not reach B's socket.
  {
    FrameSpec s;
    s.src_mac = info_a_.mac;
    s.dst_mac = info_b_.mac;
    s.src_ip = info_a_.ip;
    s.dst_ip = info_b_.ip;
    s.dest_qpn = 0x800099;
    sent.push_back(*BuildFrame(s));
  }
  for (const auto& f : sent) {
    uint8_t* buf = a->TxBuffer();
    ASSERT_NE(buf, nullptr);
    std::memcpy(buf, f.data(), f.size());
    a->TxCommit(f.size());
  }
  ASSERT_TRUE(a->Flush().ok());

  std::vector<std::vector<uint8_t>> got;
  int idle = 0;
  while (got.size() < static_cast<size_t>(kFrames) && idle < 200) {
    auto n = b->Receive([&](const uint8_t* d, size_t len) { got.emplace_back(d, d + len); }, 10, 64);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    idle = *n ? 0 : idle + 1;
  }
  ASSERT_EQ(got.size(), static_cast<size_t>(kFrames)) << "frames lost between the AF_XDP sockets";
  for (int i = 0; i < kFrames; i++) {
    EXPECT_EQ(got[i], sent[i]) << "frame " << i;
    auto p = ParseFrame(got[i].data(), got[i].size());
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->icrc_ok) << "frame " << i;
  }
  // Nothing else (in particular not the other-QPN frame) arrives.
  auto extra = b->Receive([&](const uint8_t*, size_t) { ADD_FAILURE() << "unexpected frame"; }, 50, 64);
  EXPECT_TRUE(extra.ok());
  PacketIoStats st = a->Stats();
  EXPECT_EQ(st.tx_packets, sent.size());
  EXPECT_EQ(st.tx_invalid, 0u);

  // The XDP programs pass everything else: ARP and a TCP connection from A
  // to B still work while both sockets are attached.
  int listener = InNetns(ns_b_, [] { return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(47910);
  addr.sin_addr.s_addr = htonl(info_b_.ip.host);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  ASSERT_EQ(listen(listener, 1), 0);
  int client = InNetns(ns_a_, [] { return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
  ASSERT_GE(client, 0);
  timeval tv{5, 0};
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "TCP through the XDP programs: " << strerror(errno);
  close(client);
  close(listener);
}

// A one-member switch stand-in: answers every contribution with a RESULT
// carrying the contribution's payload (the sum over one member). It ignores
// the first transmission of every 37th message to force retransmissions.
class Reflector {
 public:
  Reflector(XskSocket* io, InterfaceInfo self, uint32_t switch_qpn, uint32_t member_qpn,
            uint32_t drop_every = 37)
      : io_(io), self_(self), switch_qpn_(switch_qpn), member_qpn_(member_qpn), drop_every_(drop_every) {}
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t dropped() const { return dropped_; }
  uint64_t retransmits_seen() const { return retransmits_; }
  uint64_t bad() const { return bad_; }

 private:
  void Loop() {
    while (!stop_) {
      auto n = io_->Receive([&](const uint8_t* d, size_t len) { Handle(d, len); }, 5, 64);
      if (!n.ok()) break;
      io_->Flush().ok();
    }
  }
  void Handle(const uint8_t* d, size_t len) {
    auto p = ParseFrame(d, len);
    if (!p.ok() || !p->icrc_ok || p->dest_qpn != switch_qpn_ || (p->inc.flags & INC_FLAG_RESULT)) {
      bad_++;
      return;
    }
    if (p->inc.flags & INC_FLAG_RETRANSMIT) retransmits_++;
    if (drop_every_ && p->inc.msg_id % drop_every_ == 5 && !(p->inc.flags & INC_FLAG_RETRANSMIT)) {
      dropped_++;
      return;
    }
    FrameSpec s;
    s.src_mac = self_.mac;
    s.dst_mac = p->src_mac;
    s.src_ip = self_.ip;
    s.dst_ip = p->src_ip;
    s.src_qpn = switch_qpn_;
    s.dest_qpn = member_qpn_;
    s.psn = psn_++;
    s.inc = p->inc;
    s.inc.flags = INC_FLAG_RESULT;
    s.inc.rank = INC_RANK_RESULT;
    s.payload = p->payload;
    s.payload_len = p->payload_len;
    uint8_t* out = io_->TxBuffer();
    if (!out) return;
    auto built = BuildFrame(s, out, io_->MaxFrame());
    if (built.ok()) io_->TxCommit(*built);
  }

  XskSocket* io_;
  InterfaceInfo self_;
  uint32_t switch_qpn_, member_qpn_, drop_every_;
  uint32_t psn_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0}, retransmits_{0}, bad_{0};
};

TEST_F(AfXdpLab, CommunicatorCollectivesOverAfXdpWithRetransmissions) {
  const uint32_t kSwitchQpn = 0x000200, kMemberQpn = 0x800777;
  XskOptions ob;
  ob.ifname = if_b_;
  ob.filter_ip = info_b_.ip;
  auto b = OpenIn(ns_b_, ob);
  ASSERT_TRUE(b);
  Reflector reflector(b.get(), info_b_, kSwitchQpn, kMemberQpn);
  reflector.Start();

  CommunicatorOptions o;
  o.transport = MemberTransport();
  o.iface = if_a_;
  o.qpn = kMemberQpn;
  o.message_timeout_us = 5000;
  Assignment asg;
  asg.tree_id = 9;
  asg.key = 0x5EC2E7;
  asg.pool_size = 64;
  asg.elems_per_packet = 240;
  asg.switch_name = "reflector";
  asg.switch_ip = info_b_.ip.ToString();
  asg.switch_mac = info_b_.mac.ToString();
  asg.switch_qpn = kSwitchQpn;
  auto comm_or = InNetns(ns_a_, [&] { return Communicator::CreateWithAssignment(o, asg); });
  ASSERT_TRUE(comm_or.ok()) << comm_or.status().ToString();
  auto comm = std::move(*comm_or);

  // float32 SUM: block fixed point with the exponent pre-pass (world 1:
  // the result equals the input after quantisation with 30 bits).
  const size_t n = 100003;  // 417 packets, window of 64, odd tail
  std::vector<float> in(n), out(n, -1.0f);
  for (size_t i = 0; i < n; i++) in[i] = static_cast<float>((static_cast<int>(i % 29) - 14)) * 0.125f;
  ASSERT_TRUE(comm->AllReduce(in.data(), out.data(), n, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(out, in);

  std::vector<int64_t> i64(777), o64(777);
  std::iota(i64.begin(), i64.end(), -300);
  ASSERT_TRUE(comm->AllReduce(i64.data(), o64.data(), i64.size(), DataType::kInt64, ReduceOp::kMax).ok());
  EXPECT_EQ(o64, i64);

  std::vector<double> d = {1.5, -2.25, 1e-3, 12345.5}, dout(4);
  ASSERT_TRUE(comm->AllReduce(d.data(), dout.data(), d.size(), DataType::kFloat64, ReduceOp::kMin).ok());
  EXPECT_EQ(dout, d);

  std::vector<uint16_t> h = {0x3C00, 0xC000, 0x3555}, hout(3);  // 1, -2, ~0.333 in fp16
  ASSERT_TRUE(comm->AllReduce(h.data(), hout.data(), h.size(), DataType::kFloat16, ReduceOp::kSum).ok());
  EXPECT_EQ(hout, h);

  std::vector<uint8_t> bytes(1001);  // not a multiple of 4: padded lanes
  std::iota(bytes.begin(), bytes.end(), 0);
  std::vector<uint8_t> copy = bytes;
  ASSERT_TRUE(comm->Broadcast(bytes.data(), 500, DataType::kFloat16, 0).ok());
  EXPECT_EQ(bytes, copy);
  ASSERT_TRUE(comm->Barrier().ok());

  // Block collectives with one rank degenerate to one block each, which
  // still checks their placement and padding paths.
  std::vector<int32_t> blk(33), blk_out(33);
  std::iota(blk.begin(), blk.end(), 7);
  ASSERT_TRUE(comm->AllGather(blk.data(), blk_out.data(), 33, DataType::kInt32).ok());
  EXPECT_EQ(blk_out, blk);
  std::fill(blk_out.begin(), blk_out.end(), 0);
  ASSERT_TRUE(comm->ReduceScatter(blk.data(), blk_out.data(), 33, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_EQ(blk_out, blk);
  std::vector<uint16_t> odd = {1, 2, 3}, odd_out(3);  // 6 bytes: padded lanes
  ASSERT_TRUE(comm->AllToAll(odd.data(), odd_out.data(), 3, DataType::kBFloat16).ok());
  EXPECT_EQ(odd_out, odd);
  std::fill(odd_out.begin(), odd_out.end(), 0);
  ASSERT_TRUE(comm->Scatter(odd.data(), odd_out.data(), 3, DataType::kFloat16, 0).ok());
  EXPECT_EQ(odd_out, odd);
  std::fill(odd_out.begin(), odd_out.end(), 0);
  ASSERT_TRUE(comm->Gather(odd.data(), odd_out.data(), 3, DataType::kFloat16, 0).ok());
  EXPECT_EQ(odd_out, odd);
  EXPECT_EQ(comm->Reduce(blk.data(), blk_out.data(), 33, DataType::kInt32, ReduceOp::kSum, 1).code(),
            Code::kInvalidArgument);  // root out of range

  CommunicatorStatus st = comm->GetStatus();
  reflector.Stop();
  EXPECT_GT(reflector.dropped(), 0u);
  // Every drop is retransmitted once. A loaded CI machine can also delay a
  // reply past the RTO: that retransmission is spurious, and its second
  // reply must be rejected as a duplicate, so the two counts balance.
  const uint64_t spurious = st.rejects.count("duplicate") ? st.rejects.at("duplicate") : 0;
  EXPECT_EQ(st.retransmissions, reflector.dropped() + spurious) << st.ToJson();
  EXPECT_EQ(reflector.retransmits_seen(), st.retransmissions);
  EXPECT_EQ(reflector.bad(), 0u);
  EXPECT_EQ(st.failed_operations, 0u);
  EXPECT_EQ(st.assignment.tree_id, 9u);
}

// Prints the rate of the whole client stack (build, AF_XDP TX, reflector,
// AF_XDP RX, validation, placement) on this VM; checks only correctness.
TEST_F(AfXdpLab, ThroughputAgainstTheReflectorIsPrinted) {
  const uint32_t kSwitchQpn = 0x000201, kMemberQpn = 0x800779;
  XskOptions ob;
  ob.ifname = if_b_;
  ob.filter_ip = info_b_.ip;
  auto b = OpenIn(ns_b_, ob);
  ASSERT_TRUE(b);
  Reflector reflector(b.get(), info_b_, kSwitchQpn, kMemberQpn, 0);
  reflector.Start();
  CommunicatorOptions o;
  o.transport = MemberTransport();
  o.iface = if_a_;
  o.qpn = kMemberQpn;
  o.message_timeout_us = 50000;
  Assignment asg;
  asg.tree_id = 11;
  asg.pool_size = 256;
  asg.elems_per_packet = 240;
  asg.switch_ip = info_b_.ip.ToString();
  asg.switch_mac = info_b_.mac.ToString();
  asg.switch_qpn = kSwitchQpn;
  auto comm = InNetns(ns_a_, [&] { return Communicator::CreateWithAssignment(o, asg); });
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  for (DataType t : {DataType::kInt32, DataType::kFloat32}) {
    const size_t n = 1 << 20;  // 4 MiB
    std::vector<int32_t> in(n), out(n);
    for (size_t i = 0; i < n; i++) in[i] = static_cast<int32_t>(i % 1000) - 500;
    if (t == DataType::kFloat32)
      for (size_t i = 0; i < n; i++) {
        float f = static_cast<float>(in[i]) * 0.25f;
        std::memcpy(&in[i], &f, 4);
      }
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE((*comm)->AllReduce(in.data(), out.data(), n, t, ReduceOp::kSum).ok());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(out, in);
    double pkts = static_cast<double>((n + 239) / 240);
    std::printf(
        "[ reflector ] %s sum 4 MiB: %.1f ms, %.3f GB/s, %.0f kpps (one AF_XDP client, one reflector)\n",
        DataTypeName(t), s * 1e3, 4.0 * n / s / 1e9, pkts / s / 1e3);
  }
  std::printf("[ reflector ] client status %s\n", (*comm)->GetStatus().ToJson().c_str());
  reflector.Stop();
}

// A software stand-in for a single-level switch with N member ports (one
// AF_XDP socket each): aggregates contributions per message id (int32/FP32
// lanes added as int32 for SUM, FP32 MIN/MAX on the values, INT64 and FP64
// SUM lanes as int64; no accuracy certificate), answers
// Reduce non-roots with empty notices, Broadcast with the root's data, and a
// retransmission of a finished message with the stored result. It lets the
// client's multi-rank logic (exponent agreement, roots, readies) run over
// real sockets independently of the XDP data path.
class SoftSwitch {
 public:
  struct Port {
    std::unique_ptr<XskSocket> io;
    InterfaceInfo self;
    Mac member_mac;
    Ipv4 member_ip;
    uint32_t member_qpn = 0;
    uint32_t switch_qpn = 0;
    uint32_t psn = 0;
  };
  explicit SoftSwitch(std::vector<Port> ports) : ports_(std::move(ports)) {}
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t bad() const { return bad_; }

 private:
  struct Msg {
    uint64_t bitmap = 0;
    IncHeader h;
    std::vector<uint8_t> acc;
    bool done = false;
  };
  void Loop() {
    while (!stop_) {
      size_t got = 0;
      for (size_t i = 0; i < ports_.size(); i++) {
        auto n = ports_[i].io->Receive([&](const uint8_t* d, size_t len) { Handle(i, d, len); }, 0, 64);
        if (n.ok()) got += *n;
      }
      for (auto& p : ports_) p.io->Flush().ok();
      if (!got) usleep(50);
    }
  }
  void Send(size_t i, const IncHeader& h, const uint8_t* payload, size_t len) {
    Port& p = ports_[i];
    FrameSpec s;
    s.src_mac = p.self.mac;
    s.dst_mac = p.member_mac;
    s.src_ip = p.self.ip;
    s.dst_ip = p.member_ip;
    s.src_qpn = p.switch_qpn;
    s.dest_qpn = p.member_qpn;
    s.psn = p.psn++;
    s.inc = h;
    s.inc.flags |= INC_FLAG_RESULT;
    s.inc.rank = INC_RANK_RESULT;
    s.inc.count = static_cast<uint16_t>(len / inc_dtype_size(h.dtype));
    s.payload = payload;
    s.payload_len = len;
    uint8_t* out = p.io->TxBuffer();
    if (!out) return;
    auto built = BuildFrame(s, out, p.io->MaxFrame());
    if (built.ok()) p.io->TxCommit(*built);
  }
  void Reply(size_t i, const Msg& m) {
    bool data = true;
    if (m.h.collective == INC_COLL_REDUCE && m.h.root_rank != i) data = false;
    Send(i, m.h, m.acc.data(), data ? m.acc.size() : 0);
  }
  template <typename T>
  static void Combine(uint8_t* acc, const uint8_t* in, size_t n, uint8_t op) {
    for (size_t k = 0; k < n; k++) {
      T a, b;
      std::memcpy(&a, acc + k * sizeof(T), sizeof(T));
      std::memcpy(&b, in + k * sizeof(T), sizeof(T));
      T r = op == INC_OP_MIN ? std::min(a, b) : op == INC_OP_MAX ? std::max(a, b) : a;
      if constexpr (std::is_integral_v<T>) {
        if (op == INC_OP_SUM)
          r = static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                             static_cast<std::make_unsigned_t<T>>(b));
        if (inc_op_bitwise(op)) r = op == INC_OP_BAND ? a & b : op == INC_OP_BOR ? a | b : a ^ b;
      }
      std::memcpy(acc + k * sizeof(T), &r, sizeof(T));
    }
  }
  void Handle(size_t i, const uint8_t* d, size_t len) {
    auto p = ParseFrame(d, len);
    if (!p.ok() || !p->icrc_ok || p->dest_qpn != ports_[i].switch_qpn || p->inc.rank != i) {
      bad_++;
      return;
    }
    Msg& m = msgs_[p->inc.msg_id];
    if (m.done) {
      Reply(i, m);  // a retransmission: resend the stored result
      return;
    }
    if (m.bitmap & (uint64_t{1} << i)) return;
    if (!m.bitmap) {
      m.h = p->inc;
      m.h.flags = 0;
      m.acc.clear();
    } else if (p->inc.collective != m.h.collective || p->inc.exponent != m.h.exponent) {
      bad_++;
      return;
    }
    m.bitmap |= uint64_t{1} << i;
    const uint8_t coll = p->inc.collective;
    if (coll == INC_COLL_BROADCAST) {
      if (p->payload_len) m.acc.assign(p->payload, p->payload + p->payload_len);
    } else if (coll != INC_COLL_BARRIER) {
      if (m.acc.empty()) {
        m.acc.assign(p->payload, p->payload + p->payload_len);
      } else if (p->inc.dtype == INC_DTYPE_INT64 || p->inc.dtype == INC_DTYPE_FP64) {
        // FP64 SUM travels as int64 block fixed point lanes.
        Combine<int64_t>(m.acc.data(), p->payload, p->payload_len / 8, p->inc.op);
      } else if (p->inc.dtype == INC_DTYPE_FP32 && p->inc.op != INC_OP_SUM) {
        Combine<float>(m.acc.data(), p->payload, p->payload_len / 4, p->inc.op);
      } else {
        Combine<int32_t>(m.acc.data(), p->payload, p->payload_len / 4, p->inc.op);
      }
    }
    if (m.bitmap == (uint64_t{1} << ports_.size()) - 1) {
      m.done = true;
      for (size_t k = 0; k < ports_.size(); k++) Reply(k, m);
    }
  }

  std::vector<Port> ports_;
  std::map<uint32_t, Msg> msgs_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bad_{0};
};

// Three member namespaces (A, M1, M2) behind a SoftSwitch in B; fills the
// assignment of each rank. Null (with a skip or failure recorded) if the
// lab lacks the extra members.
std::unique_ptr<SoftSwitch> ThreeRankSwitch(AfXdpLab* lab, const std::string& ns_b, const std::string& if_b,
                                            std::vector<std::string>* member_ns,
                                            std::vector<Assignment>* asg) {
  const std::string ns_m1 = Env("CLI_NS_M1"), ns_m2 = Env("CLI_NS_M2");
  if (ns_m1.empty() || ns_m2.empty()) return nullptr;
  (void)lab;
  member_ns->insert(member_ns->end(), {ns_m1, ns_m2});
  const std::vector<std::string> switch_if = {if_b, "ethc1", "ethc2"};
  const uint32_t kWorld = 3;
  std::vector<SoftSwitch::Port> ports;
  asg->assign(kWorld, Assignment{});
  for (uint32_t r = 0; r < kWorld; r++) {
    InterfaceInfo member = InNetns((*member_ns)[r], [&] { return GetInterfaceInfo("ethc"); }).value();
    SoftSwitch::Port p;
    p.self = InNetns(ns_b, [&] { return GetInterfaceInfo(switch_if[r]); }).value();
    XskOptions xo;
    xo.ifname = switch_if[r];
    xo.filter_ip = p.self.ip;
    auto io = InNetns(ns_b, [&] { return XskSocket::Open(xo); });
    if (!io.ok()) {
      ADD_FAILURE() << io.status().ToString();
      return nullptr;
    }
    p.io = std::move(*io);
    p.member_mac = member.mac;
    p.member_ip = member.ip;
    p.member_qpn = 0x810000 + r;
    p.switch_qpn = 0x400 + r;
    Assignment& a = (*asg)[r];
    a.tree_id = 21;
    a.key = 0xABCD;
    a.pool_size = 16;
    a.elems_per_packet = 60;  // many packets from small buffers
    a.rank_at_switch = r;
    a.member_index = r;
    a.switch_ip = p.self.ip.ToString();
    a.switch_mac = p.self.mac.ToString();
    a.switch_qpn = p.switch_qpn;
    a.world_size = kWorld;
    ports.push_back(std::move(p));
  }
  auto sw = std::make_unique<SoftSwitch>(std::move(ports));
  sw->Start();
  return sw;
}

TEST_F(AfXdpLab, ThreeRanksThroughASoftwareSwitchGetIdenticalExactResults) {
  std::vector<std::string> member_ns = {ns_a_};
  std::vector<Assignment> asg;
  auto swp = ThreeRankSwitch(this, ns_b_, if_b_, &member_ns, &asg);
  if (!swp) GTEST_SKIP() << "needs CLI_NS_M1/CLI_NS_M2";
  SoftSwitch& sw = *swp;
  const uint32_t kWorld = 3;
  std::vector<std::unique_ptr<Communicator>> comms(kWorld);
  for (uint32_t r = 0; r < kWorld; r++) {
    CommunicatorOptions o;
    o.transport = MemberTransport();
    o.iface = "ethc";
    o.rank = r;
    o.world_size = kWorld;
    o.qpn = 0x810000 + r;
    o.message_timeout_us = 20000;
    o.broadcast_mode = "native";  // the switch's Broadcast with readies (inc-perf runs cover "allreduce")
    o.reduce_mode = "native";     // the switch's Reduce with completion notices
    auto c = InNetns(member_ns[r], [&] { return Communicator::CreateWithAssignment(o, asg[r]); });
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    comms[r] = std::move(*c);
  }

  // Rank r's float32 data spans many magnitudes (per-block exponents differ
  // between ranks, so the MAX pre-pass matters).
  const size_t n = 1001;
  auto fval = [](uint32_t r, size_t i) {
    return std::ldexp(static_cast<float>(static_cast<int>((i * 7 + r * 3) % 23) - 11),
                      static_cast<int>((i / 60 + r) % 9) - 4);
  };
  std::vector<std::vector<float>> f_out(kWorld, std::vector<float>(n));
  std::vector<std::vector<int32_t>> i_out(kWorld, std::vector<int32_t>(n));
  std::vector<std::vector<double>> d_out(kWorld, std::vector<double>(n));
  std::vector<std::vector<int32_t>> red_out(kWorld, std::vector<int32_t>(n, -1)), bc(kWorld);
  std::vector<std::vector<int32_t>> xor_out(kWorld, std::vector<int32_t>(n));
  std::vector<std::vector<int32_t>> ag(kWorld, std::vector<int32_t>(kWorld * 5)),
      rs(kWorld, std::vector<int32_t>(5));
  std::vector<std::vector<int32_t>> a2a(kWorld, std::vector<int32_t>(kWorld * 5)),
      gat(kWorld, std::vector<int32_t>(kWorld * 5));
  // Small float sums (world x count fit one packet): one INT32 SUM gathers
  // the values and every rank adds them in rank order (gather_sum.h), so
  // rank order decides cancellations and IEEE special values pass through.
  const float tiny = std::ldexp(1.0f, -149);
  const std::vector<std::vector<float>> small_f = {{-0.0f, 1e30f, 1.0f, tiny, 1.0f},
                                                   {-0.0f, -1e30f, std::ldexp(1.0f, -24), tiny, NAN},
                                                   {-0.0f, 1.0f, std::ldexp(1.0f, -24), tiny, 2.0f}};
  const std::vector<std::vector<double>> small_d = {
      {-0.0, 1e300, 0.1}, {-0.0, 1.0, 0.2}, {-0.0, -1e300, 0.3}};
  std::vector<std::vector<float>> sf_out(kWorld, std::vector<float>(5));
  std::vector<std::vector<double>> sd_out(kWorld, std::vector<double>(3));
  std::vector<std::vector<uint16_t>> sh_out(kWorld, std::vector<uint16_t>(7, 0xFFFF));
  std::vector<uint64_t> small_msgs(kWorld);
  std::vector<Status> failures(kWorld);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kWorld; r++) {
    threads.emplace_back([&, r] {
      Communicator& c = *comms[r];
      auto run = [&](Status s) {
        if (!s.ok() && failures[r].ok()) failures[r] = s;
      };
      const uint64_t before = c.GetStatus().messages;
      run(c.AllReduce(small_f[r].data(), sf_out[r].data(), 5, DataType::kFloat32, ReduceOp::kSum));
      run(c.AllReduce(small_d[r].data(), sd_out[r].data(), 3, DataType::kFloat64, ReduceOp::kSum));
      std::vector<uint16_t> h(7);
      for (size_t i = 0; i < h.size(); i++)
        h[i] = F32ToF16(static_cast<float>(i) + 0.5f * static_cast<float>(r));
      run(c.Reduce(h.data(), sh_out[r].data(), h.size(), DataType::kFloat16, ReduceOp::kSum, 1));
      small_msgs[r] = c.GetStatus().messages - before;
      std::vector<float> f(n);
      std::vector<int32_t> iv(n);
      std::vector<double> dv(n);
      for (size_t i = 0; i < n; i++) {
        f[i] = fval(r, i);
        iv[i] = static_cast<int32_t>((i * 13 + r * 101) % 1000) - 500;
        dv[i] = static_cast<double>(f[i]) / 3.0;
      }
      run(c.AllReduce(f.data(), f_out[r].data(), n, DataType::kFloat32, ReduceOp::kSum));
      run(c.AllReduce(iv.data(), i_out[r].data(), n, DataType::kInt32, ReduceOp::kMin));
      run(c.AllReduce(dv.data(), d_out[r].data(), n, DataType::kFloat64, ReduceOp::kSum));
      run(c.Reduce(iv.data(), red_out[r].data(), n, DataType::kInt32, ReduceOp::kMax, 1));
      run(c.AllReduce(iv.data(), xor_out[r].data(), n, DataType::kInt32, ReduceOp::kBxor));
      bc[r].assign(77, r == 2 ? 4242 : 0);
      run(c.Broadcast(bc[r].data(), 77, DataType::kInt32, 2));
      run(c.Barrier());
      std::vector<int32_t> blk(5, static_cast<int32_t>(r * 10)), blocks(kWorld * 5);
      for (size_t k = 0; k < blocks.size(); k++) blocks[k] = static_cast<int32_t>(r * 100 + k);
      run(c.AllGather(blk.data(), ag[r].data(), 5, DataType::kInt32));
      run(c.ReduceScatter(blocks.data(), rs[r].data(), 5, DataType::kInt32, ReduceOp::kSum));
      run(c.AllToAll(blocks.data(), a2a[r].data(), 5, DataType::kInt32));
      run(c.Gather(blk.data(), gat[r].data(), 5, DataType::kInt32, 0));
    });
  }
  for (auto& t : threads) t.join();
  sw.Stop();
  for (uint32_t r = 0; r < kWorld; r++)
    ASSERT_TRUE(failures[r].ok()) << "rank " << r << ": " << failures[r].ToString();
  EXPECT_EQ(sw.bad(), 0u);
  for (size_t i = 0; i < n; i++) {
    double exact = 0;
    int32_t mn = INT32_MAX, mx = INT32_MIN, x = 0;
    for (uint32_t r = 0; r < kWorld; r++) {
      exact += fval(r, i);
      int32_t v = static_cast<int32_t>((i * 13 + r * 101) % 1000) - 500;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      x ^= v;
    }
    EXPECT_EQ(xor_out[0][i], x) << i;
    // The values are dyadic with few bits: block fixed point is exact here.
    EXPECT_EQ(f_out[0][i], static_cast<float>(exact)) << i;
    EXPECT_EQ(i_out[0][i], mn) << i;
    EXPECT_EQ(red_out[1][i], mx) << i;
    EXPECT_NEAR(d_out[0][i], exact / 3.0, 1e-12) << i;
  }
  for (uint32_t r = 0; r < kWorld; r++) {
    EXPECT_EQ(small_msgs[r], 3u) << "rank " << r << ": small float sums take one message each";
    const std::vector<float>& f = sf_out[r];
    EXPECT_TRUE(f[0] == 0.0f && std::signbit(f[0])) << f[0];  // -0 + -0 + -0
    EXPECT_EQ(f[1], 1.0f);                                    // (1e30 - 1e30) + 1
    EXPECT_EQ(f[2], 1.0f + std::ldexp(1.0f, -23));            // 1 + 2^-24 + 2^-24, one rounding
    EXPECT_EQ(f[3], 3 * tiny);                                // subnormals
    EXPECT_TRUE(std::isnan(f[4])) << f[4];                    // NaN propagates
    EXPECT_EQ(0, std::memcmp(f.data(), sf_out[0].data(), 5 * 4)) << "rank " << r;
    EXPECT_TRUE(sd_out[r][0] == 0.0 && std::signbit(sd_out[r][0]));
    // The exact sum rounded once, not the rank-order sum: (1e300 + 1) - 1e300
    // is exactly 1, and 0.1 + 0.2 + 0.3 rounds once to 0.6 where the
    // left-to-right sum gives 0.6000000000000001.
    EXPECT_EQ(sd_out[r][1], 1.0);
    EXPECT_EQ(sd_out[r][2], 0.6);
    EXPECT_NE(0.6, (0.1 + 0.2) + 0.3);
  }
  for (size_t i = 0; i < 7; i++) EXPECT_EQ(F16ToF32(sh_out[1][i]), 3.0f * static_cast<float>(i) + 1.5f) << i;
  EXPECT_EQ(sh_out[0], std::vector<uint16_t>(7, 0xFFFF));  // Reduce: non-roots untouched
  for (uint32_t r = 1; r < kWorld; r++) {
    EXPECT_EQ(0, std::memcmp(f_out[r].data(), f_out[0].data(), n * 4)) << "float32 sum differs on rank " << r;
    EXPECT_EQ(0, std::memcmp(d_out[r].data(), d_out[0].data(), n * 8)) << "float64 sum differs on rank " << r;
    EXPECT_EQ(i_out[r], i_out[0]);
  }
  EXPECT_EQ(red_out[0], std::vector<int32_t>(n, -1));  // non-roots untouched
  for (uint32_t r = 0; r < kWorld; r++) {
    EXPECT_EQ(bc[r], std::vector<int32_t>(77, 4242)) << r;
    for (uint32_t b = 0; b < kWorld; b++)
      for (size_t k = 0; k < 5; k++) {
        EXPECT_EQ(ag[r][b * 5 + k], static_cast<int32_t>(b * 10));
        EXPECT_EQ(a2a[r][b * 5 + k], static_cast<int32_t>(b * 100 + r * 5 + k));
      }
    for (size_t k = 0; k < 5; k++) {
      int32_t want = 0;
      for (uint32_t q = 0; q < kWorld; q++) want += static_cast<int32_t>(q * 100 + r * 5 + k);
      EXPECT_EQ(rs[r][k], want) << r;
    }
  }
  for (uint32_t b = 0; b < kWorld; b++)
    for (size_t k = 0; k < 5; k++) EXPECT_EQ(gat[0][b * 5 + k], static_cast<int32_t>(b * 10));
}

// inc-perf itself (the tool the lab tests and demo run): three processes,
// one per member namespace, AM-less via --assignment, against the software
// switch; exit codes and rank 0's JSON are checked.
TEST_F(AfXdpLab, IncPerfRanksReportZeroWrongAndExitZero) {
  const std::string perf = Env("CLI_INC_PERF");
  if (perf.empty()) GTEST_SKIP() << "CLI_INC_PERF (path of inc-perf) not set";
  const std::vector<std::string> runs = {
      "allreduce -d float32 -o sum -b 4 -e 64K -f 8 -n 2 -w 1",
      "allreduce -d bfloat16 -o max -b 2 -e 6000 -f 50 -n 2 -w 0",
      "reduce -d int64 -o sum -r 1 -b 8 -e 4K -f 8 -n 2 -w 0",
      "broadcast -d float16 -r 2 -b 2 -e 3000 -f 40 -n 2 -w 0",
      "barrier -n 5 -w 1",
      "allgather -d int32 -b 12 -e 3K -f 16 -n 1 -w 0",
      "reduce_scatter -d float32 -o sum -b 12 -e 3K -f 16 -n 1 -w 0",
      "alltoall -d int32 -b 12 -e 1200 -f 10 -n 1 -w 0",
      "scatter -d int64 -r 1 -b 24 -e 2400 -f 10 -n 1 -w 0",
      "gather -d float64 -r 2 -b 24 -e 2400 -f 10 -n 1 -w 0",
  };
  for (const std::string& args : runs) {
    std::vector<std::string> member_ns = {ns_a_};
    std::vector<Assignment> asg;
    auto sw = ThreeRankSwitch(this, ns_b_, if_b_, &member_ns, &asg);
    if (!sw) GTEST_SKIP() << "needs CLI_NS_M1/CLI_NS_M2";
    std::string dir = "/tmp/cli-perf-" + std::to_string(getpid());
    ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
    std::string script = "set -u; pids=''; ";
    for (uint32_t r = 0; r < 3; r++) {
      // The JSON form incinctl prints: lower camel case field names.
      std::string json =
          "{\"treeId\":21,\"key\":43981,\"poolSize\":16,\"elemsPerPacket\":60,\"rankAtSwitch\":" +
          std::to_string(r) + ",\"memberIndex\":" + std::to_string(r) + ",\"switchIp\":\"" +
          asg[r].switch_ip + "\",\"switchMac\":\"" + asg[r].switch_mac +
          "\",\"switchQpn\":" + std::to_string(asg[r].switch_qpn) + ",\"worldSize\":3}";
      std::string file = dir + "/asg" + std::to_string(r) + ".json";
      FILE* f = std::fopen(file.c_str(), "w");
      ASSERT_NE(f, nullptr);
      std::fputs(json.c_str(), f);
      std::fclose(f);
      script += "ip netns exec " + member_ns[r] + " " + perf + " " + args + " --transport " +
                MemberTransport() + " --json --rank " + std::to_string(r) + " --world 3 --iface ethc --qpn " +
                std::to_string(0x810000 + r) + " --assignment " + file + " > " + dir + "/out" +
                std::to_string(r) + " 2>&1 & pids=\"$pids $!\"; ";
    }
    script += "rc=0; for p in $pids; do wait $p || rc=$?; done; exit $rc";
    int rc = std::system(("bash -c '" + script + "'").c_str());
    sw->Stop();
    std::string out0;
    {
      std::ifstream in(dir + "/out0");
      std::stringstream ss;
      ss << in.rdbuf();
      out0 = ss.str();
    }
    EXPECT_EQ(rc, 0) << args << "\n" << out0;
    EXPECT_NE(out0.find("\"results\":[{"), std::string::npos) << args << "\n" << out0;
    EXPECT_NE(out0.find("\"exit_code\":0"), std::string::npos) << args << "\n" << out0;
    EXPECT_EQ(out0.find("\"wrong\":"), out0.find("\"wrong\":0")) << args;
    size_t pos = 0;
    while ((pos = out0.find("\"wrong\":", pos)) != std::string::npos) {
      EXPECT_EQ(out0.compare(pos, 9, "\"wrong\":0"), 0) << args << "\n" << out0;
      pos += 8;
    }
    EXPECT_EQ(sw->bad(), 0u) << args;
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_F(AfXdpLab, CollectivesTheTreeDoesNotOfferFailFastWithFailedPrecondition) {
  CommunicatorOptions o;
  o.transport = MemberTransport();
  o.iface = if_a_;
  o.qpn = 0x80077A;
  Assignment asg;
  asg.tree_id = 12;
  asg.pool_size = 8;
  asg.switch_ip = info_b_.ip.ToString();
  asg.switch_mac = info_b_.mac.ToString();
  asg.switch_qpn = 0x301;
  asg.dtypes = {INC_DTYPE_FP32};
  asg.ops = {INC_OP_SUM};
  asg.collectives = {INC_COLL_ALLREDUCE};
  auto comm = InNetns(ns_a_, [&] { return Communicator::CreateWithAssignment(o, asg); });
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  float f = 1, g = 0;
  // float32 SUM needs the INT32 MAX exponent pre-pass.
  EXPECT_EQ((*comm)->AllReduce(&f, &g, 1, DataType::kFloat32, ReduceOp::kSum).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ((*comm)->Barrier().code(), Code::kFailedPrecondition);
  int32_t i = 1, j = 0;
  EXPECT_EQ((*comm)->AllReduce(&i, &j, 1, DataType::kInt32, ReduceOp::kSum).code(),
            Code::kFailedPrecondition);
  // Bitwise ops on a float type: the caller's error, before the tree's.
  Status bitwise = (*comm)->AllReduce(&f, &g, 1, DataType::kFloat32, ReduceOp::kBand);
  EXPECT_EQ(bitwise.code(), Code::kInvalidArgument);
  EXPECT_NE(bitwise.message().find("integer type"), std::string::npos) << bitwise.message();
  EXPECT_EQ((*comm)->GetStatus().tx_packets, 0u);
}

TEST_F(AfXdpLab, MissingResultsFailWithDeadlineExceededAfterRetries) {
  CommunicatorOptions o;
  o.transport = MemberTransport();
  o.iface = if_a_;
  o.qpn = 0x800778;
  o.message_timeout_us = 2000;
  o.max_retries = 3;
  Assignment asg;
  asg.tree_id = 10;
  asg.pool_size = 8;
  asg.elems_per_packet = 240;
  asg.switch_ip = info_b_.ip.ToString();  // nobody answers in B
  asg.switch_mac = info_b_.mac.ToString();
  asg.switch_qpn = 0x300;
  auto comm_or = InNetns(ns_a_, [&] { return Communicator::CreateWithAssignment(o, asg); });
  ASSERT_TRUE(comm_or.ok()) << comm_or.status().ToString();
  int32_t x = 1, y = 0;
  Status s = (*comm_or)->AllReduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  CommunicatorStatus st = (*comm_or)->GetStatus();
  EXPECT_EQ(st.retransmissions, 3u);
  EXPECT_EQ(st.failed_operations, 1u);
}

}  // namespace
}  // namespace inc::client

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
