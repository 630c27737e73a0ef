// SPDX-License-Identifier: Apache-2.0
// Selftests of the member-side XDP transport program (bpf/member_io.bpf.c)
// with BPF_PROG_TEST_RUN on crafted frames: which frames go to the ring
// buffer (byte for byte), which pass to the kernel and which are dropped,
// each counted by reason; a live-frame template carrying the process's
// cookie as XDP metadata sends the queued frame, and nothing else ever does.
// Needs root (BPF); otherwise exits 77 (skipped).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/xsk_socket.h"
#include "common/abi/wire.h"
#include "common/frame.h"
#include "inc_member_io.h"
#include "member_io.skel.h"

namespace inc {
namespace {

constexpr uint32_t kMemberQpn = 0x1234;
constexpr uint32_t kTxEntries = 8;
constexpr uint64_t kCookie = 0x5eed'c0de'1234'5678ull;
const char* kMemberIp = "10.7.0.2";

// A RESULT frame from the switch to a member, as the data path sends it.
std::vector<uint8_t> ResultFrame(const std::string& dst_ip, uint32_t dest_qpn, uint16_t count) {
  FrameSpec s;
  s.src_mac = *Mac::Parse("02:00:00:00:07:01");
  s.dst_mac = *Mac::Parse("02:00:00:00:07:02");
  s.src_ip = *Ipv4::Parse("10.7.0.1");
  s.dst_ip = *Ipv4::Parse(dst_ip);
  s.src_qpn = 0x100;
  s.dest_qpn = dest_qpn;
  s.inc.flags = INC_FLAG_RESULT;
  s.inc.tree_id = 3;
  s.inc.count = count;
  s.inc.msg_id = 77;
  std::vector<uint8_t> payload(size_t{count} * 4);
  for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  s.payload = payload.data();
  s.payload_len = payload.size();
  return *BuildFrame(s);
}

class MemberIo : public ::testing::Test {
 protected:
  void SetUp() override {
    skel_ = member_io__open();
    ASSERT_NE(skel_, nullptr);
    skel_->rodata->member_ip_be = Ipv4::Parse(kMemberIp)->be();
    skel_->rodata->member_qpn = kMemberQpn;
    skel_->rodata->tx_mask = kTxEntries - 1;
    ASSERT_EQ(bpf_map__set_max_entries(skel_->maps.tx_frames, kTxEntries), 0);
    ASSERT_EQ(member_io__load(skel_), 0);
    // Sends go to tx_port (a test run reports the verdict, nothing leaves).
    uint32_t zero = 0, lo = 1;
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.tx_port), &zero, &lo, 0), 0) << strerror(errno);
    ring_ = ring_buffer__new(
        bpf_map__fd(skel_->maps.rx_ring),
        [](void* ctx, void* data, size_t size) -> int {
          auto* self = static_cast<MemberIo*>(ctx);
          const auto* rec = static_cast<const inc_io_frame*>(data);
          if (size >= 8 && rec->len == 0) {
            self->wakeups_++;
          } else if (size >= 8 + rec->len) {
            self->records_.emplace_back(rec->data, rec->data + rec->len);
          }
          return 0;
        },
        this, nullptr);
    ASSERT_NE(ring_, nullptr);
  }
  void TearDown() override {
    if (ring_) ring_buffer__free(ring_);
    if (skel_) member_io__destroy(skel_);
  }

  // Runs member_io once on frame (with metadata in front when given).
  // Returns the verdict; *out gets the frame as the program left it.
  // ifindex/rx_queue: the receive queue the frame arrives on (0: no device).
  int Run(const std::vector<uint8_t>& frame, const std::vector<uint8_t>& meta = {},
          std::vector<uint8_t>* out = nullptr, uint32_t ifindex = 0, uint32_t rx_queue = 0) {
    std::vector<uint8_t> in(meta);
    in.insert(in.end(), frame.begin(), frame.end());
    std::vector<uint8_t> buf(4096);
    xdp_md ctx{};
    ctx.data = static_cast<uint32_t>(meta.size());
    ctx.data_end = static_cast<uint32_t>(in.size());
    ctx.ingress_ifindex = ifindex;
    ctx.rx_queue_index = rx_queue;
    LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = in.data(), .data_out = buf.data(),
                .data_size_in = static_cast<uint32_t>(in.size()),
                .data_size_out = static_cast<uint32_t>(buf.size()), .ctx_in = &ctx,
                .ctx_size_in = sizeof(ctx), .repeat = 1);
    int err = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.member_io), &run);
    EXPECT_EQ(err, 0) << strerror(errno);
    if (out) out->assign(buf.begin() + meta.size(), buf.begin() + run.data_size_out);
    ring_buffer__consume(ring_);
    return static_cast<int>(run.retval);
  }

  uint64_t Stat(inc_io_stat stat) {
    int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> v(ncpu);
    uint32_t key = stat;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.io_stats), &key, v.data())) return ~0ull;
    uint64_t sum = 0;
    for (uint64_t x : v) sum += x;
    return sum;
  }

  // The live-frame template: the cookie as metadata, then zeros.
  static std::vector<uint8_t> CookieMeta(uint64_t cookie) {
    std::vector<uint8_t> m(8);
    std::memcpy(m.data(), &cookie, 8);
    return m;
  }
  static std::vector<uint8_t> Template() { return std::vector<uint8_t>(INC_IO_TX_TEMPLATE_BYTES, 0); }

  void Queue(uint32_t entry, const std::vector<uint8_t>& frame, uint32_t len) {
    inc_io_frame f{};
    f.len = len;
    std::memcpy(f.data, frame.data(), std::min<size_t>(frame.size(), sizeof(f.data)));
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.tx_frames), &entry, &f, 0), 0);
  }

  member_io* skel_ = nullptr;
  ring_buffer* ring_ = nullptr;
  std::vector<std::vector<uint8_t>> records_;
  int wakeups_ = 0;
};

struct RxCase {
  const char* name;
  std::vector<uint8_t> frame;
  int verdict;
  bool in_ring;
  inc_io_stat counted;
};

TEST_F(MemberIo, ReceivedFramesGoToTheRingPassOrDropByWhatTheyAre) {
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  std::vector<uint8_t> other_port = ResultFrame(kMemberIp, kMemberQpn, 4);
  other_port[INC_OFF_UDP + 2] = 0x13;  // UDP destination port 0x13b7, not 4791 (0x12b7)
  std::vector<uint8_t> short_roce = ResultFrame(kMemberIp, kMemberQpn, 4);
  short_roce.resize(INC_OFF_PAYLOAD - 2);
  const RxCase cases[] = {
      {.name = "a result for this member, 768 elements",
       .frame = ResultFrame(kMemberIp, kMemberQpn, 768),
       .verdict = XDP_DROP,
       .in_ring = true,
       .counted = INC_IO_STAT_RX},
      {.name = "a header-only result for this member",
       .frame = ResultFrame(kMemberIp, kMemberQpn, 0),
       .verdict = XDP_DROP,
       .in_ring = true,
       .counted = INC_IO_STAT_RX},
      {.name = "RoCEv2 for another address",
       .frame = ResultFrame("10.7.0.9", kMemberQpn, 4),
       .verdict = XDP_PASS,
       .in_ring = false,
       .counted = INC_IO_STAT_PASS_FILTERED},
      {.name = "RoCEv2 for another QP",
       .frame = ResultFrame(kMemberIp, kMemberQpn + 1, 4),
       .verdict = XDP_PASS,
       .in_ring = false,
       .counted = INC_IO_STAT_PASS_FILTERED},
      {.name = "ARP", .frame = arp, .verdict = XDP_PASS, .in_ring = false, .counted = INC_IO_STAT_PASS_OTHER},
      {.name = "UDP to another port",
       .frame = other_port,
       .verdict = XDP_PASS,
       .in_ring = false,
       .counted = INC_IO_STAT_PASS_OTHER},
      {.name = "RoCEv2 for us, shorter than the INC headers",
       .frame = short_roce,
       .verdict = XDP_DROP,
       .in_ring = false,
       .counted = INC_IO_STAT_RX_BAD_LEN},
      {.name = "a template-sized frame from the wire (no metadata)",
       .frame = Template(),
       .verdict = XDP_PASS,
       .in_ring = false,
       .counted = INC_IO_STAT_PASS_OTHER},
  };
  for (const RxCase& c : cases) {
    SCOPED_TRACE(c.name);
    records_.clear();
    const uint64_t before = Stat(c.counted), tx_before = Stat(INC_IO_STAT_TX);
    EXPECT_EQ(Run(c.frame), c.verdict);
    EXPECT_EQ(Stat(c.counted), before + 1);
    EXPECT_EQ(Stat(INC_IO_STAT_TX), tx_before) << "nothing received may send";
    if (c.in_ring) {
      ASSERT_EQ(records_.size(), 1u);
      EXPECT_EQ(records_[0], c.frame) << "the ring holds the frame byte for byte";
    } else {
      EXPECT_TRUE(records_.empty());
    }
  }
  EXPECT_EQ(wakeups_, 0) << "no wake-up records while the process is not asleep";
}

TEST_F(MemberIo, ATemplateWithTheCookieSendsTheQueuedFrameAndNothingElseDoes) {
  const std::vector<uint8_t> frame = ResultFrame("10.7.0.1", 0x100, 600);
  Queue(3, frame, static_cast<uint32_t>(frame.size()));
  skel_->bss->tx_cookie = kCookie;

  // Not the cookie, or no cookie yet: the receive path, never a send.
  skel_->bss->tx_next = 3;
  EXPECT_EQ(Run(Template(), CookieMeta(kCookie + 1)), XDP_PASS);
  skel_->bss->tx_cookie = 0;
  EXPECT_EQ(Run(Template(), CookieMeta(0)), XDP_PASS);
  EXPECT_EQ(Stat(INC_IO_STAT_TX), 0u);
  EXPECT_EQ(skel_->bss->tx_next, 3u);

  skel_->bss->tx_cookie = kCookie;
  std::vector<uint8_t> out;
  EXPECT_EQ(Run(Template(), CookieMeta(kCookie), &out), XDP_REDIRECT);
  EXPECT_EQ(out, frame) << "the live frame became the queued one";
  EXPECT_EQ(skel_->bss->tx_next, 4u);
  EXPECT_EQ(Stat(INC_IO_STAT_TX), 1u);

  // Entry 11 is entry 3 again (the ring of kTxEntries wraps).
  skel_->bss->tx_next = 11;
  EXPECT_EQ(Run(Template(), CookieMeta(kCookie), &out), XDP_REDIRECT);
  EXPECT_EQ(out, frame);

  // The process's own frame coming back carries the metadata but is longer
  // than the template: received, not sent.
  EXPECT_EQ(Run(frame, CookieMeta(kCookie)), XDP_PASS);
  EXPECT_EQ(Stat(INC_IO_STAT_TX), 2u);
}

TEST_F(MemberIo, AQueuedFrameWithAnImpossibleLengthIsDroppedAndCounted) {
  skel_->bss->tx_cookie = kCookie;
  const std::vector<uint8_t> frame = ResultFrame("10.7.0.1", 0x100, 4);
  const uint32_t bad[] = {0, INC_OFF_PAYLOAD - 1, INC_IO_FRAME_BYTES + 1};
  for (uint32_t len : bad) {
    SCOPED_TRACE(len);
    Queue(0, frame, len);
    skel_->bss->tx_next = 0;
    EXPECT_EQ(Run(Template(), CookieMeta(kCookie)), XDP_DROP);
  }
  EXPECT_EQ(Stat(INC_IO_STAT_TX_BAD_LEN), 3u);
  EXPECT_EQ(Stat(INC_IO_STAT_TX), 0u);
}

TEST_F(MemberIo, ASleepingProcessIsWokenOnceWhenItHasNoWakeUpSocket) {
  // Without a socket in wake_xsks the frame still reaches the ring, and a
  // wake-up record follows it; the flag comes down so later frames add none.
  skel_->bss->rx_sleeping = 1;
  const std::vector<uint8_t> frame = ResultFrame(kMemberIp, kMemberQpn, 8);
  EXPECT_EQ(Run(frame), XDP_DROP);
  EXPECT_EQ(Run(frame), XDP_DROP);
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_EQ(records_[0], frame);
  EXPECT_EQ(wakeups_, 1);
  EXPECT_EQ(skel_->bss->rx_sleeping, 0u);
  EXPECT_EQ(Stat(INC_IO_STAT_RX_WAKEUPS), 1u);
}

// A multi-queue NIC spreads results over its queues, and the wake-up socket
// is bound to one of them: a frame of another queue must wake the process
// through the ring (a redirect to the socket would be dropped by the kernel
// and the result lost until a retransmission). A two-queue veth in a private
// network namespace with a real AF_XDP socket on queue 0 stands in for the
// NIC; last in this file because it leaves the process in that namespace.
TEST_F(MemberIo, ASleepingProcessIsWokenThroughTheRingByAFrameOfAnotherQueue) {
  if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << strerror(errno);
  ASSERT_EQ(std::system("ip link add mq0 numtxqueues 2 numrxqueues 2 type veth peer name mq0p "
                        "numtxqueues 2 numrxqueues 2 && ip link set mq0 up && ip link set mq0p up"),
            0);
  const uint32_t ifindex = if_nametoindex("mq0");
  ASSERT_NE(ifindex, 0u);
  client::XskOptions wo;
  wo.ifname = "mq0";
  wo.queue = 0;
  wo.rx_ring = 64;
  wo.tx_ring = 64;
  wo.tx_frames = 1;
  wo.attach_xdp = false;
  auto wake = client::XskSocket::Open(wo);
  if (!wake.ok()) GTEST_SKIP() << "AF_XDP socket on a veth: " << wake.status().ToString();
  uint32_t zero = 0;
  int wfd = (*wake)->fd();
  ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.wake_xsks), &zero, &wfd, 0), 0) << strerror(errno);
  const std::vector<uint8_t> frame = ResultFrame(kMemberIp, kMemberQpn, 8);

  struct Case {
    const char* name;
    uint32_t rx_queue;
    int verdict;       // XDP_REDIRECT: to the wake-up socket
    size_t in_ring;    // frame records added to the ring
    int ring_wakeups;  // wake-up records added to the ring
  };
  const Case cases[] = {
      {.name = "queue 0: to the wake-up socket",
       .rx_queue = 0,
       .verdict = XDP_REDIRECT,
       .in_ring = 0,
       .ring_wakeups = 0},
      {.name = "queue 1: the ring and a wake-up record",
       .rx_queue = 1,
       .verdict = XDP_DROP,
       .in_ring = 1,
       .ring_wakeups = 1},
  };
  for (const Case& c : cases) {
    records_.clear();
    wakeups_ = 0;
    skel_->bss->rx_sleeping = 1;
    EXPECT_EQ(Run(frame, {}, nullptr, ifindex, c.rx_queue), c.verdict) << c.name;
    EXPECT_EQ(records_.size(), c.in_ring) << c.name;
    EXPECT_EQ(wakeups_, c.ring_wakeups) << c.name;
    EXPECT_EQ(skel_->bss->rx_sleeping, 0u) << c.name << ": the process is woken once";
  }
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_EQ(records_[0], frame);
}

}  // namespace
}  // namespace inc

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (geteuid() != 0) {
    std::fprintf(stderr, "member_io_test: needs root (BPF); skipped\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
