// SPDX-License-Identifier: Apache-2.0
// Unit tests of libinc's verbs transport that need no RDMA device: the
// mapping between engine frames and RDMA WRITE WITH IMMEDIATE work requests,
// the rebuilding of result frames from receive completions, MTU arithmetic,
// transport selection and option errors. Tests that need a device skip
// (GTEST_SKIP) when none has a RoCEv2 GID here; the device path itself is
// proven in the rxe guest lab (netns-tests/rxe, ctest -L rxe).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>
#include <vector>

#include "client/communicator.h"
#include "client/protocol.h"
#include "client/verbs_transport.h"
#include "common/frame.h"

namespace inc::client {
namespace {

FrameSpec Contribution(uint32_t msg_id, size_t payload_len, std::vector<uint8_t>* payload) {
  payload->resize(payload_len);
  for (size_t i = 0; i < payload_len; i++) (*payload)[i] = static_cast<uint8_t>(i * 7 + 1);
  FrameSpec s;
  s.src_mac = *Mac::Parse("02:1a:00:00:00:02");
  s.dst_mac = *Mac::Parse("02:1a:00:00:00:01");
  s.src_ip = *Ipv4::Parse("10.0.0.2");
  s.dst_ip = *Ipv4::Parse("10.0.0.1");
  s.src_qpn = 0x11;
  s.dest_qpn = 0x1234;
  s.psn = 77;
  s.va = 0x1122334455667788ull;
  s.rkey = 0xCAFE;
  s.inc.tree_id = 3;
  s.inc.rank = 2;
  s.inc.msg_id = msg_id;
  s.inc.slot = static_cast<uint16_t>(msg_id % 256);
  s.inc.count = static_cast<uint16_t>(payload_len / 4);
  s.inc.key = 0xABCD0123;
  s.payload = payload->data();
  s.payload_len = payload_len;
  return s;
}

TEST(VerbsWriteFromFrame, MapsRethImmediateAndIncBytes) {
  std::vector<uint8_t> payload;
  FrameSpec s = Contribution(1000, 960, &payload);
  auto frame = BuildFrame(s);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  auto w = WriteFromFrame(frame->data(), frame->size());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->dest_qpn, 0x1234u);
  EXPECT_EQ(w->remote_va, 0x1122334455667788ull);
  EXPECT_EQ(w->rkey, 0xCAFEu);
  EXPECT_EQ(w->imm, 1000u);
  EXPECT_EQ(w->offset, size_t{INC_OFF_INC});
  EXPECT_EQ(w->length, sizeof(inc_hdr) + 960);
  // The write carries the INC header then the payload, nothing of the ICRC.
  IncHeader h = DecodeIncHeader(frame->data() + w->offset);
  EXPECT_EQ(h.msg_id, 1000u);
  EXPECT_EQ(h.key, 0xABCD0123u);
  EXPECT_EQ(h.tree_id, 3u);
  EXPECT_EQ(h.rank, 2u);
  EXPECT_EQ(0, std::memcmp(frame->data() + w->offset + sizeof(inc_hdr), payload.data(), payload.size()));
}

TEST(VerbsWriteFromFrame, EmptyContributionIsAHeaderOnlyWrite) {
  std::vector<uint8_t> payload;
  FrameSpec s = Contribution(5, 0, &payload);
  auto frame = BuildFrame(s);
  ASSERT_TRUE(frame.ok());
  auto w = WriteFromFrame(frame->data(), frame->size());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->length, sizeof(inc_hdr));
}

TEST(VerbsWriteFromFrame, RejectsShortWrongOpcodeAndBadDmaLength) {
  std::vector<uint8_t> payload;
  auto frame = BuildFrame(Contribution(1, 64, &payload));
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(WriteFromFrame(frame->data(), 50).status().code(), Code::kInvalidArgument);

  std::vector<uint8_t> f = *frame;
  f[INC_OFF_BTH] = 0x0A;  // UC RDMA WRITE ONLY, no immediate
  auto w = WriteFromFrame(f.data(), f.size());
  EXPECT_EQ(w.status().code(), Code::kInvalidArgument);
  EXPECT_NE(w.status().message().find("opcode"), std::string::npos);

  f = *frame;
  f[INC_OFF_RETH + 15] ^= 4;  // DMA length no longer the bytes after IMMDT
  w = WriteFromFrame(f.data(), f.size());
  EXPECT_EQ(w.status().code(), Code::kInvalidArgument);
  EXPECT_NE(w.status().message().find("DMA length"), std::string::npos);

  f = *frame;
  f[INC_OFF_UDP + 3] ^= 1;  // not UDP 4791
  EXPECT_FALSE(WriteFromFrame(f.data(), f.size()).ok());
}

ResultAddressing Addressing() {
  ResultAddressing a;
  a.switch_mac = *Mac::Parse("02:1a:00:00:00:01");
  a.switch_ip = *Ipv4::Parse("10.0.0.1");
  a.switch_qpn = 0x1234;
  a.member_mac = *Mac::Parse("02:1a:00:00:00:02");
  a.member_ip = *Ipv4::Parse("10.0.0.2");
  a.member_qpn = 0x11;
  a.va_base = 0x7f0000000000ull;
  a.rkey = 0x55;
  a.slot_stride = 2048;
  return a;
}

// What the switch writes into a member's result slot: INC header + payload.
std::vector<uint8_t> SwitchWrite(uint32_t msg_id, uint32_t pool, size_t payload_len) {
  std::vector<uint8_t> payload;
  FrameSpec s = Contribution(msg_id, payload_len, &payload);
  s.inc.flags = INC_FLAG_RESULT;
  s.inc.rank = INC_RANK_RESULT;
  s.inc.slot = SlotOf(msg_id, pool);
  auto frame = BuildFrame(s);
  return std::vector<uint8_t>(frame->begin() + INC_OFF_INC, frame->end() - INC_ICRC_LEN);
}

TEST(VerbsCompletion, RebuiltFramePassesTheEnginesResultChecks) {
  const uint32_t pool = 256, msg = 700;
  std::vector<uint8_t> write = SwitchWrite(msg, pool, 960);
  ResultAddressing a = Addressing();
  std::vector<uint8_t> out(4096);
  auto len = FrameFromCompletion(a, msg, write.data(), write.size(), out.data(), out.size());
  ASSERT_TRUE(len.ok()) << len.status().ToString();
  auto parsed = ParseFrame(out.data(), *len);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->icrc_ok);
  EXPECT_EQ(parsed->src_ip, a.switch_ip);
  EXPECT_EQ(parsed->dest_qpn, a.member_qpn);
  EXPECT_EQ(parsed->imm, msg);
  EXPECT_EQ(parsed->rkey, a.rkey);
  EXPECT_EQ(parsed->va, a.va_base + uint64_t{SlotOf(msg, pool)} * a.slot_stride);
  EXPECT_EQ(parsed->payload_len, 960u);
  EXPECT_EQ(0, std::memcmp(parsed->payload, write.data() + sizeof(inc_hdr), 960));
  ResultFilter filter{a.member_qpn, a.switch_ip, 3, 0xABCD0123, pool};
  EXPECT_EQ(CheckResultFrame(*parsed, filter), Reject::kNone);
}

TEST(VerbsCompletion, SlotOverwrittenByAnotherMessageIsRejected) {
  std::vector<uint8_t> write = SwitchWrite(700 + 256, 256, 64);  // the slot's next user
  std::vector<uint8_t> out(4096);
  auto len = FrameFromCompletion(Addressing(), 700, write.data(), write.size(), out.data(), out.size());
  EXPECT_EQ(len.status().code(), Code::kInvalidArgument);
  EXPECT_NE(len.status().message().find("immediate"), std::string::npos);
}

TEST(VerbsCompletion, WriteShorterThanAnIncHeaderIsRejected) {
  std::vector<uint8_t> write = SwitchWrite(1, 256, 0);
  std::vector<uint8_t> out(4096);
  EXPECT_FALSE(FrameFromCompletion(Addressing(), 1, write.data(), 10, out.data(), out.size()).ok());
  // A header-only write (a Reduce non-root's completion notice) is fine.
  auto len = FrameFromCompletion(Addressing(), 1, write.data(), write.size(), out.data(), out.size());
  ASSERT_TRUE(len.ok()) << len.status().ToString();
  EXPECT_EQ(*len, FrameLength(0));
}

TEST(VerbsCompletion, ResultOffsetIsTheSlotOfTheImmediate) {
  EXPECT_EQ(ResultOffset(0, 256, 2048), 0u);
  EXPECT_EQ(ResultOffset(255, 256, 2048), 255u * 2048);
  EXPECT_EQ(ResultOffset(256, 256, 2048), 0u);
  EXPECT_EQ(ResultOffset(0xFFFFFFFFu, 256, 2048), 255u * 2048);
}

TEST(VerbsMtu, EthernetMtuToIbPathMtu) {
  EXPECT_EQ(IbMtuForEthernetMtu(1500), 1024u);  // the default 240 elements: 24 + 960 bytes
  EXPECT_EQ(IbMtuForEthernetMtu(2200), 2048u);
  EXPECT_EQ(IbMtuForEthernetMtu(9000), 4096u);
  EXPECT_EQ(IbMtuForEthernetMtu(1024 + 63), 512u);  // one byte short of 1024
  EXPECT_EQ(IbMtuForEthernetMtu(1024 + 64), 1024u);
  EXPECT_EQ(IbMtuForEthernetMtu(40), 0u);
}

TEST(TransportSelection, ExplicitChoicesAreKeptAndUnknownOnesRejected) {
  EXPECT_EQ(*ResolveTransport("afxdp", "lo"), "afxdp");
  EXPECT_EQ(*ResolveTransport("verbs", "lo"), "verbs");
  auto bad = ResolveTransport("rdma", "lo");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'rdma'"), std::string::npos);
}

TEST(TransportSelection, AutoPicksXdpWithoutARoceV2GidAndSaysWhy) {
  // 127.0.0.1 never has a RoCEv2 GID (rxe does not bind to loopback).
  std::string why;
  auto t = ResolveTransport("auto", "lo", &why);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "xdp");
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(ResolveTransport("auto", "no-such-if0").ok());
}

TEST(TransportSelection, NoRoceV2GidIsAClearError) {
  auto g = FindRoceV2Gid(*Ipv4::Parse("127.0.0.1"));
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(g.status().code() == Code::kNotFound || g.status().code() == Code::kUnavailable)
      << g.status().ToString();
  EXPECT_NE(g.status().message().find("RDMA device"), std::string::npos) << g.status().ToString();
}

Assignment TestAssignment() {
  Assignment a;
  a.tree_id = 1;
  a.key = 2;
  a.pool_size = 16;
  a.elems_per_packet = 240;
  a.switch_ip = "127.0.0.2";
  a.switch_mac = "02:00:00:00:00:01";
  a.switch_qpn = 100;
  return a;
}

TEST(VerbsCommunicator, OptionErrors) {
  CommunicatorOptions o;
  o.iface = "lo";
  o.transport = "verbs";
  o.qpn = 0x1234;  // the device chooses QPNs
  auto c = Communicator::CreateWithAssignment(o, TestAssignment());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("qpn"), std::string::npos);

  o.qpn = 0;
  o.transport = "ib";
  c = Communicator::CreateWithAssignment(o, TestAssignment());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
}

TEST(VerbsCommunicator, VerbsWithoutADeviceFailsWithTheReason) {
  CommunicatorOptions o;
  o.iface = "lo";
  o.transport = "verbs";
  auto c = Communicator::CreateWithAssignment(o, TestAssignment());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("lo"), std::string::npos) << c.status().ToString();
  EXPECT_NE(c.status().message().find("RDMA device"), std::string::npos) << c.status().ToString();
}

// The device path: only where an RDMA device has a RoCEv2 GID for one of
// this namespace's IPv4 addresses (the rxe guest, a host with a RoCE NIC).
// Checks what goes into JoinGroup and the pool-size guard.
TEST(VerbsDevice, OpenGivesQpnRkeyAndResultBuffer) {
  ifaddrs* ifs = nullptr;
  ASSERT_EQ(getifaddrs(&ifs), 0);
  Expected<Ipv4> addr = NotFound("none");
  std::string seen;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    Ipv4 ip{ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr)};
    auto g = FindRoceV2Gid(ip);
    if (g.ok()) {
      addr = ip;
      break;
    }
    seen = g.status().ToString();
  }
  freeifaddrs(ifs);
  if (!addr.ok()) GTEST_SKIP() << "no RDMA device with a RoCEv2 GID for an address here: " << seen;
  VerbsOptions vo;
  vo.member_ip = *addr;
  auto t = VerbsTransport::Open(vo);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GT((*t)->qpn(), 1u);
  EXPECT_NE((*t)->result_va(), 0u);
  EXPECT_EQ((*t)->slot_stride(), sizeof(inc_hdr) + INC_MAX_PAYLOAD_BYTES);
  // A pool larger than the registered buffer is refused before connecting.
  auto st = (*t)->Connect(*Mac::Parse("02:00:00:00:00:01"), *addr, 100, vo.result_slots + 1, 240);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace inc::client
