// SPDX-License-Identifier: Apache-2.0
// The credit part of the switch config: a good config becomes the settings
// the credit agent runs with, and each mistake is rejected naming its field.
#include "switch/credit/credit_config.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace inc::sw {
namespace {

std::vector<PortInfo> GatewayPorts() {
  std::vector<PortInfo> ports(3);
  ports[0].name = "w0";
  ports[0].ifindex = 2;
  ports[1].name = "wan0";
  ports[1].ifindex = 3;
  ports[2].name = "wan1";
  ports[2].ifindex = 4;
  return ports;
}

const char* kGood = R"({
  "enabled": true, "reserveBytes": 131072, "returnQuantumBytes": 8192, "heartbeatMs": 50,
  "keyHex": "000102030405060708090a0b0c0d0e0f", "keyId": 7,
  "ports": [
    {"port": "wan0", "neighborIp": "10.3.1.2", "nextHopMac": "02:1a:00:03:00:02", "cost": 10},
    {"port": "wan1", "neighborIp": "10.3.3.2", "nextHopMac": "02:1a:00:03:02:02", "cost": 20}],
  "flows": [
    {"flow": {"srcIp": "10.0.0.2", "dstIp": "10.0.3.2", "udpSport": 49152, "destQpn": 4096}},
    {"flow": {"srcIp": "10.0.1.2", "dstIp": "10.0.3.2", "udpSport": 49152, "destQpn": 4096}, "ports": ["wan1"]}],
  "localPrefixes": ["10.0.0.0/23"]
})";

Expected<CreditSettings> Parse(const std::string& json) {
  v1::CreditConfig c;
  auto st = google::protobuf::util::JsonStringToMessage(json, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return ParseCreditSettings(c, GatewayPorts());
}

// The good config with one JSON fragment replaced.
std::string With(const std::string& from, const std::string& to) {
  std::string s = kGood;
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

TEST(CreditConfig, GoodConfigBecomesPortsFlowsAndLimits) {
  auto s = Parse(kGood);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->enabled);
  EXPECT_EQ(s->reserve_bytes, 131072u);
  EXPECT_EQ(s->return_quantum_bytes, 8192u);
  EXPECT_EQ(s->heartbeat_ms, 50u);
  EXPECT_EQ(s->return_flush_ms, 5u) << "default";
  EXPECT_TRUE(s->authenticate);
  EXPECT_EQ(s->key[15], 0x0f);
  EXPECT_EQ(s->key_id, 7u);
  ASSERT_EQ(s->ports.size(), 2u);
  EXPECT_EQ(s->ports[1].name, "wan1");
  EXPECT_EQ(s->ports[1].ifindex, 4u);
  EXPECT_EQ(s->ports[1].neighbor.ToString(), "10.3.3.2");
  EXPECT_EQ(s->ports[1].next_hop_mac.ToString(), "02:1a:00:03:02:02");
  ASSERT_EQ(s->flows.size(), 2u);
  EXPECT_EQ(s->flows[0].id.ToString(), "10.0.0.2:49152>10.0.3.2 qp 4096");
  EXPECT_EQ(s->flows[0].ports, (std::vector<size_t>{0, 1})) << "no ports: every credit port";
  EXPECT_EQ(s->flows[1].ports, (std::vector<size_t>{1}));
  ASSERT_EQ(s->local_prefixes.size(), 1u);
  EXPECT_EQ(s->local_prefixes[0].ToString(), "10.0.0.0/23");
}

TEST(CreditConfig, DisabledNeedsNothingElse) {
  auto s = Parse(R"({"enabled": false, "reserveBytes": 1})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->enabled);
}

TEST(CreditConfig, EachMistakeNamesItsField) {
  struct Case {
    std::string json, field;
  } cases[] = {
      {With("\"reserveBytes\": 131072", "\"reserveBytes\": 100"), "credit.reserve_bytes"},
      {With("\"returnQuantumBytes\": 8192", "\"returnQuantumBytes\": 100000"), "credit.return_quantum_bytes"},
      {With("\"heartbeatMs\": 50", "\"heartbeatMs\": 5"), "credit.heartbeat_ms"},
      {With("0f\"", "0g\""), "credit.key_hex"},
      {With("\"port\": \"wan1\"", "\"port\": \"eth9\""), "credit.ports[1].port"},
      {With("\"port\": \"wan1\"", "\"port\": \"wan0\""), "credit.ports[1].port"},
      {With("\"neighborIp\": \"10.3.1.2\"", "\"neighborIp\": \"10.3.1\""), "credit.ports[0].neighbor_ip"},
      {With("\"nextHopMac\": \"02:1a:00:03:00:02\"", "\"nextHopMac\": \"02:1a\""),
       "credit.ports[0].next_hop_mac"},
      {With("\"srcIp\": \"10.0.0.2\"", "\"srcIp\": \"x\""), "credit.flows[0].flow.src_ip"},
      {With("\"udpSport\": 49152, \"destQpn\": 4096}}", "\"udpSport\": 0, \"destQpn\": 4096}}"),
       "credit.flows[0].flow.udp_sport"},
      {With("\"destQpn\": 4096}, \"ports\"", "\"destQpn\": 16777216}, \"ports\""),
       "credit.flows[1].flow.dest_qpn"},
      {With("\"ports\": [\"wan1\"]", "\"ports\": [\"wan7\"]"), "credit.flows[1].ports[0]"},
      {With("\"srcIp\": \"10.0.1.2\"", "\"srcIp\": \"10.0.0.2\""), "credit.flows[1].flow"},
      {With("\"10.0.0.0/23\"", "\"10.0.0.0/33\""), "credit.local_prefixes[0]"},
  };
  for (const auto& c : cases) {
    auto s = Parse(c.json);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << c.field;
    EXPECT_EQ(s.status().message().rfind(c.field + ":", 0), 0u) << s.status().message();
  }
}

// A key file written with a mode; removed with the object.
class KeyFile {
 public:
  KeyFile(const std::string& content, mode_t mode) {
    path_ = "/tmp/inc-credit-key-" + std::to_string(getpid()) + "-" + std::to_string(next_++);
    std::ofstream(path_) << content;
    chmod(path_.c_str(), mode);
  }
  ~KeyFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int next_ = 0;
  std::string path_;
};

TEST(CreditConfig, KeyFromAPrivateFileAndEachProblemWithIt) {
  KeyFile good("000102030405060708090a0b0c0d0e0f\n", 0600);
  auto s =
      Parse(With("\"keyHex\": \"000102030405060708090a0b0c0d0e0f\"", "\"keyFile\": \"" + good.path() + "\""));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->authenticate);
  EXPECT_EQ(s->key[15], 0x0f);

  KeyFile open_to_all("000102030405060708090a0b0c0d0e0f", 0644);
  KeyFile not_hex("secret-not-hex-secret-not-hex-00", 0600);
  struct Case {
    const char* name;
    std::string key_json;
    Code code;
    std::string message_part;
  } cases[] = {
      {.name = "readable by others",
       .key_json = "\"keyFile\": \"" + open_to_all.path() + "\"",
       .code = Code::kFailedPrecondition,
       .message_part = "has mode 0644: group or others may access it; chmod 600"},
      {.name = "missing",
       .key_json = "\"keyFile\": \"/nonexistent/inc-key\"",
       .code = Code::kInvalidArgument,
       .message_part = "credit.key_file: /nonexistent/inc-key: cannot open"},
      {.name = "relative path",
       .key_json = "\"keyFile\": \"key.hex\"",
       .code = Code::kInvalidArgument,
       .message_part = "is not an absolute path"},
      {.name = "not a key, and the content not echoed",
       .key_json = "\"keyFile\": \"" + not_hex.path() + "\"",
       .code = Code::kInvalidArgument,
       .message_part = "does not hold 32 hex digits"},
      {.name = "both key_hex and key_file",
       .key_json = "\"keyHex\": \"000102030405060708090a0b0c0d0e0f\", \"keyFile\": \"" + good.path() + "\"",
       .code = Code::kInvalidArgument,
       .message_part = "credit.key_file: set both credit.key_hex and credit.key_file"},
  };
  for (const Case& c : cases) {
    auto r = Parse(With("\"keyHex\": \"000102030405060708090a0b0c0d0e0f\"", c.key_json));
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_EQ(r.status().message().find("secret"), std::string::npos) << c.name << ": the key's text leaked";
  }
}

TEST(CreditConfig, AcceptedKeysByIdFromHexOrFile) {
  KeyFile file_key("202122232425262728292a2b2c2d2e2f\n", 0600);
  auto s = Parse(With("\"keyId\": 7",
                      "\"keyId\": 7, \"acceptKeys\": [{\"keyId\": 8, \"keyHex\": "
                      "\"101112131415161718191a1b1c1d1e1f\"}, {\"keyId\": 6, \"keyFile\": \"" +
                          file_key.path() + "\"}]"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->key_id, 7u);
  ASSERT_EQ(s->accept_keys.size(), 2u);
  EXPECT_EQ(s->accept_keys.at(8)[0], 0x10);
  EXPECT_EQ(s->accept_keys.at(6)[15], 0x2f);
}

TEST(CreditConfig, EachAcceptedKeyMistakeIsRejectedNamingItsField) {
  KeyFile good("202122232425262728292a2b2c2d2e2f", 0600);
  KeyFile open_to_all("202122232425262728292a2b2c2d2e2f", 0644);
  const std::string hex8 = "{\"keyId\": 8, \"keyHex\": \"101112131415161718191a1b1c1d1e1f\"}";
  struct Case {
    const char* name;
    std::string accept_json;  // the acceptKeys list
    bool drop_signing_key;
    std::string message_start;
  } cases[] = {
      {"no signing key", "[" + hex8 + "]", true, "credit.accept_keys[0]: set without credit.key_hex"},
      {"the signing key's id", "[{\"keyId\": 7, \"keyHex\": \"101112131415161718191a1b1c1d1e1f\"}]", false,
       "credit.accept_keys[0].key_id: 7 is the signing key's"},
      {"an id twice", "[" + hex8 + ", " + hex8 + "]", false, "credit.accept_keys[1].key_id: 8 listed twice"},
      {"no key", "[{\"keyId\": 8}]", false, "credit.accept_keys[0].key_hex: required"},
      {"not hex", "[{\"keyId\": 8, \"keyHex\": \"10111213\"}]", false, "credit.accept_keys[0].key_hex:"},
      {"hex and file",
       "[{\"keyId\": 8, \"keyHex\": \"101112131415161718191a1b1c1d1e1f\", \"keyFile\": \"" + good.path() +
           "\"}]",
       false, "credit.accept_keys[0].key_file: set both"},
      {"file readable by others",
       "[" + hex8 + ", {\"keyId\": 9, \"keyFile\": \"" + open_to_all.path() + "\"}]", false,
       "credit.accept_keys[1].key_file:"},
  };
  for (const Case& c : cases) {
    std::string json = With("\"keyId\": 7", "\"keyId\": 7, \"acceptKeys\": " + c.accept_json);
    if (c.drop_signing_key) {
      json.replace(json.find("\"keyHex\": \"000102030405060708090a0b0c0d0e0f\", \"keyId\": 7,"),
                   std::string("\"keyHex\": \"000102030405060708090a0b0c0d0e0f\", \"keyId\": 7,").size(), "");
    }
    auto r = Parse(json);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().message().rfind(c.message_start, 0), 0u) << c.name << ": " << r.status().message();
  }
}

TEST(CreditConfig, MegabyteUnitNeedsWholeMegabytes) {
  auto bad = Parse(With("\"enabled\": true,", "\"enabled\": true, \"megabyteUnit\": true,"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("whole number of MB"), std::string::npos);
  auto good = Parse(With("\"reserveBytes\": 131072", "\"megabyteUnit\": true, \"reserveBytes\": 2097152"));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(good->megabyte_unit);
}

}  // namespace
}  // namespace inc::sw
