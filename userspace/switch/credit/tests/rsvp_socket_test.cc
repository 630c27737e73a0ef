// SPDX-License-Identifier: Apache-2.0
// lab.switch_rsvp_socket: the credit agent's RSVP transport over a real veth
// between two network namespaces (the test process's own, unshared, and one
// named for the peer). Needs root; exits 77 (SKIP) without it.
#include "switch/credit/rsvp_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/net.h"

namespace inc::sw {
namespace {

const std::string kPeerNs = "rsvpt" + std::to_string(getpid());
std::string g_skip;

int Sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

// This process gets a private namespace with veth r0 (10.78.0.1/24); its
// peer r1 (10.78.0.2/24) lives in namespace kPeerNs.
std::string Setup() {
  if (geteuid() != 0) return "needs root";
  if (unshare(CLONE_NEWNET) != 0) return "unshare(CLONE_NEWNET) failed";
  if (Sh("ip netns add " + kPeerNs) != 0) return "ip netns add failed";
  if (Sh("ip link set lo up && ip link add r0 type veth peer name r1 && ip link set r1 netns " + kPeerNs +
         " && ip addr add 10.78.0.1/24 dev r0 && ip link set r0 up && ip -n " + kPeerNs +
         " addr add 10.78.0.2/24 dev r1 && ip -n " + kPeerNs + " link set r1 up && ip -n " + kPeerNs +
         " link set lo up") != 0)
    return "creating the veth pair failed";
  return "";
}

// Runs fn with the calling thread in the peer namespace.
template <typename F>
auto InPeer(F fn) {
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int peer = open(("/run/netns/" + kPeerNs).c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(self, 0);
  EXPECT_GE(peer, 0);
  EXPECT_EQ(setns(peer, CLONE_NEWNET), 0);
  auto r = fn();
  EXPECT_EQ(setns(self, CLONE_NEWNET), 0);
  close(self);
  close(peer);
  return r;
}

Expected<RsvpDatagram> ReceiveWithin(RsvpSocket& s, int ms) {
  pollfd p{s.fd(), POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return NotFound("nothing within " + std::to_string(ms) + " ms");
  return s.Receive();
}

class RsvpSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  }
};

TEST_F(RsvpSocketTest, MessageCrossesTheVethWithSourceInterfaceAndTtl) {
  auto near = RsvpSocket::Open();
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  auto far = InPeer([] { return RsvpSocket::Open(); });
  ASSERT_TRUE(far.ok()) << far.status().ToString();
  auto r0 = GetInterfaceInfo("r0");
  ASSERT_TRUE(r0.ok());
  const std::vector<uint8_t> message = {0x10, 28, 0, 0, 1, 0, 0, 8};  // any bytes: the codec is elsewhere
  ASSERT_TRUE(near->Send(message, *Ipv4::Parse("10.78.0.2"), r0->ifindex, 1).ok());
  auto got = ReceiveWithin(*far, 2000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->message, message);
  EXPECT_EQ(got->source.ToString(), "10.78.0.1");
  EXPECT_EQ(got->destination.ToString(), "10.78.0.2");
  EXPECT_EQ(got->ttl, 1) << "Send_TTL 1 reaches exactly the next hop";
  auto r1 = InPeer([] { return GetInterfaceInfo("r1"); });
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(got->ifindex, r1->ifindex);
}

TEST_F(RsvpSocketTest, ReplyWithoutInterfaceFollowsTheRoutingTable) {
  auto near = RsvpSocket::Open();
  auto far = InPeer([] { return RsvpSocket::Open(); });
  ASSERT_TRUE(near.ok() && far.ok());
  const std::vector<uint8_t> message(1200, 0xA5);
  ASSERT_TRUE(far->Send(message, *Ipv4::Parse("10.78.0.1"), 0).ok());
  auto got = ReceiveWithin(*near, 2000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->message.size(), message.size());
  EXPECT_EQ(got->source.ToString(), "10.78.0.2");
}

TEST_F(RsvpSocketTest, ReceiveWithNothingWaitingIsNotFound) {
  auto s = RsvpSocket::Open();
  ASSERT_TRUE(s.ok());
  auto got = s->Receive();
  EXPECT_EQ(got.status().code(), Code::kNotFound);
}

TEST_F(RsvpSocketTest, SendToAnUnreachableAddressFailsWithTheAddress) {
  auto s = RsvpSocket::Open();
  ASSERT_TRUE(s.ok());
  Status st = s->Send({1, 2, 3, 4}, *Ipv4::Parse("192.0.2.9"), 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("192.0.2.9"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace inc::sw

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  inc::sw::g_skip = inc::sw::Setup();
  int rc = RUN_ALL_TESTS();
  inc::sw::Sh("ip netns del " + inc::sw::kPeerNs);
  if (!inc::sw::g_skip.empty()) return 77;
  return rc;
}
