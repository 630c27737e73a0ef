// SPDX-License-Identifier: Apache-2.0
// The routing part of the switch config: a good config becomes the route
// plan (with the switch's own addresses kept local), and each mistake is
// rejected naming the field it is in.
#include "switch/routing/arn_config.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inc::sw {
namespace {

std::vector<PortInfo> Ports() {
  std::vector<PortInfo> ports(3);
  ports[0].name = "w0";
  ports[0].ip = *Ipv4::Parse("10.0.0.1");
  ports[1].name = "l0s0";
  ports[1].ip = *Ipv4::Parse("10.2.0.1");
  ports[2].name = "l0s1";
  ports[2].ip = *Ipv4::Parse("10.2.1.1");
  return ports;
}

const char* kGood = R"({
  "switchName": "leaf0",
  "routes": [
    {"prefix": "10.0.2.0/24", "destSwitch": "leaf1", "hops": [
      {"port": "l0s0", "mac": "02:00:00:00:00:10", "cost": 10, "viaSwitch": "spine0"},
      {"port": "l0s1", "mac": "02:00:00:00:00:11", "cost": 10, "viaSwitch": "spine1"}]},
    {"prefix": "10.0.0.0/24", "hops": [{"port": "w0", "mac": "02:00:00:00:00:01"}]}
  ],
  "arn": {
    "enabled": true, "switchId": 1, "keyHex": "000102030405060708090a0b0c0d0e0f",
    "group": [
      {"switchName": "leaf1", "switchId": 2, "address": "172.31.0.12"},
      {"switchName": "spine0", "switchId": 3, "address": "172.31.0.13"},
      {"switchName": "spine1", "switchId": 4, "address": "172.31.0.14"}],
    "ports": [
      {"port": "l0s0", "capacityBps": "1000000000", "peerSwitch": "spine0"},
      {"port": "w0", "capacityBps": "1000000000"}]
  }
})";

v1::SwitchAgentConfig Parse(const std::string& json) {
  v1::SwitchAgentConfig c;
  auto st = google::protobuf::util::JsonStringToMessage(json, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

TEST(RoutingConfig, GoodConfigBecomesThePlanWithOwnAddressesLocal) {
  auto s = ParseRoutingSettings(Parse(kGood), Ports());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->arn_enabled);
  EXPECT_EQ(s->switch_id, 1u);
  EXPECT_EQ(s->peers.size(), 3u);
  ASSERT_EQ(s->plan.size(), 5u) << "2 routes + 3 own /32s";
  EXPECT_EQ(s->plan[0].dest_switch, 2u);
  EXPECT_EQ(s->plan[0].hops[1].via, 4u);
  EXPECT_EQ(s->plan[0].hops[1].hop.port, "l0s1");
  EXPECT_EQ(s->plan[1].hops[0].via, 0u) << "a host";
  EXPECT_EQ(s->plan[2].prefix.ToString(), "10.0.0.1/32");
  EXPECT_TRUE(s->plan[2].hops.empty());
  ASSERT_EQ(s->ports.size(), 2u);
  EXPECT_EQ(s->ports[0].index, 1u) << "the port's position in the switch's port list";
  EXPECT_EQ(s->ports[0].peer_id, 3u);
  EXPECT_EQ(s->NameOf(3), "spine0");
  EXPECT_EQ(s->listen_port, INC_ARN_PORT);
}

TEST(RoutingConfig, AnAcceptedKeyIsParsedBesidesTheSigningKey) {
  std::string json = kGood;
  const std::string at = R"("switchId": 1,)";
  json.replace(json.find(at), at.size(),
               R"("switchId": 1, "acceptKeyHex": "101112131415161718191a1b1c1d1e1f",)");
  auto s = ParseRoutingSettings(Parse(json), Ports());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->key[0], 0x00);
  ASSERT_TRUE(s->accept_key.has_value());
  EXPECT_EQ((*s->accept_key)[0], 0x10);
  EXPECT_FALSE(ParseRoutingSettings(Parse(kGood), Ports())->accept_key.has_value());
}

TEST(RoutingConfig, NoRoutesAndNoArnMeansNothingToDo) {
  auto s = ParseRoutingSettings(Parse(R"({"switchName": "leaf0"})"), Ports());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->plan.empty());
  EXPECT_FALSE(s->arn_enabled);
}

struct BadCase {
  const char* description;
  std::string from, to;  // replace in kGood
  std::string field;     // expected in the message
};

TEST(RoutingConfig, EachMistakeIsRejectedNamingItsField) {
  std::vector<BadCase> cases = {
      {"host bits", "10.0.2.0/24", "10.0.2.9/24", "routes[0].prefix"},
      {"prefix length", "10.0.2.0/24", "10.0.2.0/40", "routes[0].prefix"},
      {"unknown egress port", R"("port": "l0s1", "mac")", R"("port": "l9s9", "mac")",
       "routes[0].hops[1].port"},
      {"bad MAC", "02:00:00:00:00:11", "02:00:00:00:00", "routes[0].hops[1].mac"},
      {"cost too large", R"("cost": 10, "viaSwitch": "spine1")", R"("cost": 70000, "viaSwitch": "spine1")",
       "routes[0].hops[1].cost"},
      {"unknown via switch", R"("viaSwitch": "spine1")", R"("viaSwitch": "spine9")",
       "routes[0].hops[1].via_switch"},
      {"unknown destination switch", R"("destSwitch": "leaf1")", R"("destSwitch": "leaf7")",
       "routes[0].dest_switch"},
      {"duplicate prefix", R"("prefix": "10.0.0.0/24")", R"("prefix": "10.0.2.0/24")", "routes[1].prefix"},
      {"no hops", R"("hops": [{"port": "w0", "mac": "02:00:00:00:00:01"}])", R"("hops": [])",
       "routes[1].hops"},
      {"no switch id", R"("switchId": 1,)", "", "arn.switch_id"},
      {"duplicate switch id", R"("switchId": 4,)", R"("switchId": 2,)", "arn.group[2].switch_id"},
      {"bad peer address", "172.31.0.13", "172.31.0", "arn.group[1].address"},
      {"bad key", "0a0b0c0d0e0f", "0a0b0c0d0e0g", "arn.key_hex"},
      {"bad accepted key", R"("switchId": 1,)", R"("switchId": 1, "acceptKeyHex": "0a0b",)",
       "arn.accept_key_hex"},
      {"accepted key inline and from a file", R"("switchId": 1,)",
       R"("switchId": 1, "acceptKeyHex": "101112131415161718191a1b1c1d1e1f", "acceptKeyFile": "/k",)",
       "arn.accept_key_file: set both"},
      {"accepted key file missing", R"("switchId": 1,)",
       R"("switchId": 1, "acceptKeyFile": "/nonexistent/k",)", "arn.accept_key_file: /nonexistent/k"},
      {"accepted key without a key", R"("keyHex": "000102030405060708090a0b0c0d0e0f")",
       R"("acceptKeyHex": "101112131415161718191a1b1c1d1e1f")",
       "arn.accept_key_hex: set without arn.key_hex"},
      {"watched port unknown", R"({"port": "w0", "capacityBps")", R"({"port": "w5", "capacityBps")",
       "arn.ports[1].port"},
      {"no capacity", R"("capacityBps": "1000000000"})", R"("capacityBps": "0"})",
       "arn.ports[1].capacity_bps"},
      {"hold shorter than repeat", R"("enabled": true,)", R"("enabled": true, "holdMs": 100,)",
       "arn.hold_ms"},
      {"clear above raise", R"("enabled": true,)", R"("enabled": true, "clearBelow": 0.9,)", "clear_below"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    std::string json = kGood;
    auto pos = json.find(c.from);
    ASSERT_NE(pos, std::string::npos) << c.from;
    json.replace(pos, c.from.size(), c.to);
    auto s = ParseRoutingSettings(Parse(json), Ports());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.field), std::string::npos) << s.status().message();
  }
}

}  // namespace
}  // namespace inc::sw
