// SPDX-License-Identifier: Apache-2.0
#include "switch/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/log.h"

namespace inc::sw {
namespace {

constexpr char kFull[] = R"({
  "switchName": "leaf1",
  "listen": "0.0.0.0:50071",
  "amAddress": "10.0.0.100:50051",
  "ports": [{"name": "p0"}, {"name": "p1", "ip": "10.0.1.254"}],
  "pinRoot": "/sys/fs/bpf/test",
  "slotCapacity": 1024,
  "icrcVerify": false,
  "xdpMode": "generic",
  "heartbeatIntervalMs": 500,
  "keepDatapathOnExit": true,
  "logLevel": "debug"
})";

TEST(ConfigParse, ReadsEveryFieldOfAFullConfig) {
  auto c = ParseConfigJson(kFull);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->switch_name(), "leaf1");
  EXPECT_EQ(c->listen(), "0.0.0.0:50071");
  EXPECT_EQ(c->am_address(), "10.0.0.100:50051");
  ASSERT_EQ(c->ports_size(), 2);
  EXPECT_EQ(c->ports(1).name(), "p1");
  EXPECT_EQ(c->ports(1).ip(), "10.0.1.254");
  EXPECT_EQ(c->pin_root(), "/sys/fs/bpf/test");
  EXPECT_EQ(c->slot_capacity(), 1024u);
  EXPECT_FALSE(c->icrc_verify());
  EXPECT_EQ(c->xdp_mode(), "generic");
  EXPECT_EQ(c->heartbeat_interval_ms(), 500u);
  EXPECT_TRUE(c->keep_datapath_on_exit());
  EXPECT_EQ(c->log_level(), "debug");
  EXPECT_TRUE(ValidateConfig(*c).ok());
}

TEST(ConfigParse, AcceptsProtoFieldNamesAsWellAsJsonNames) {
  auto c = ParseConfigJson(R"({"switch_name": "s", "ports": [{"name": "p0"}], "slot_capacity": 8})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->switch_name(), "s");
  EXPECT_EQ(c->slot_capacity(), 8u);
}

TEST(ConfigParse, FillsDefaultsForOmittedFields) {
  auto c = ParseConfigJson(R"({"switchName": "s", "ports": [{"name": "p0"}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen(), "") << "resolved at start: the management address";
  v1::SwitchAgentConfig resolve = *c;
  EXPECT_EQ(*ResolveListen(resolve), "127.0.0.1:50061") << "standalone: loopback only";
  resolve.set_am_address("127.0.0.1:50051");
  EXPECT_EQ(*ResolveListen(resolve), "127.0.0.1:50061") << "the source address toward the AM";
  resolve.set_am_address("dns:///am");
  EXPECT_FALSE(ResolveListen(resolve).ok());
  resolve.set_listen("0.0.0.0:50062");
  EXPECT_EQ(*ResolveListen(resolve), "0.0.0.0:50062") << "a configured listen stays";
  EXPECT_EQ(c->pin_root(), kDefaultPinRoot);
  EXPECT_EQ(c->slot_capacity(), kDefaultSlotCapacity);
  EXPECT_FALSE(c->icrc_verify()) << "ICRC checking is off unless the file says true";
  EXPECT_EQ(c->xdp_mode(), "native");
  EXPECT_EQ(c->heartbeat_interval_ms(), kDefaultHeartbeatMs);
  EXPECT_EQ(c->log_level(), "info");
  EXPECT_FALSE(c->keep_datapath_on_exit());
  EXPECT_TRUE(c->am_address().empty());
}

TEST(ConfigParse, UnknownTopLevelFieldIsNamed) {
  auto c = ParseConfigJson(R"({"switchName": "s", "slotCapcity": 8})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("unknown field 'slotCapcity'"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("slotCapacity"), std::string::npos) << "lists the known fields";
}

TEST(ConfigParse, UnknownNestedFieldIsNamedWithItsPath) {
  auto c =
      ParseConfigJson(R"({"switchName": "s", "ports": [{"name": "p0"}, {"name": "p1", "adress": "x"}]})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'ports[1].adress'"), std::string::npos) << c.status().message();
}

// Found while fuzzing ParseConfigJson (fuzz/fuzz_switch_config.cc): protobuf
// reads deeply nested JSON into a Struct in time quadratic in the depth, so
// a 100 KB file of nested brackets held incswitchd's start or SIGHUP reload
// for minutes. Anything deeper than a config can be is refused at once;
// brackets inside strings do not count.
TEST(ConfigParse, DeeplyNestedJsonIsRefusedAtOnce) {
  const size_t depth = 50000;
  auto c = ParseConfigJson(R"({"switchName": )" + std::string(depth, '[') + std::string(depth, ']') + "}");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("nested 50001 levels deep"), std::string::npos) << c.status().message();

  const std::string brackets(200, '[');
  auto in_string = ParseConfigJson(R"({"switchName": "s", "logLevel": ")" + brackets + R"(\"]"})");
  ASSERT_TRUE(in_string.ok()) << in_string.status().message();
  EXPECT_EQ(in_string->log_level(), brackets + "\"]");
}

TEST(ConfigParse, MalformedJsonAndWrongTypesAreInvalidArgument) {
  auto bad_json = ParseConfigJson(R"({"switchName": "s",)");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().code(), Code::kInvalidArgument);
  auto bad_type = ParseConfigJson(R"({"switchName": "s", "slotCapacity": "many"})");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_EQ(bad_type.status().code(), Code::kInvalidArgument);
  auto not_object = ParseConfigJson("[1, 2]");
  ASSERT_FALSE(not_object.ok());
}

TEST(ConfigFile, MissingFileIsNotFoundAndNamesThePath) {
  auto c = LoadConfigFile("/nonexistent/incswitchd.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/incswitchd.json"), std::string::npos);
}

TEST(ConfigFile, ErrorsInAFileNameTheFile) {
  char path[] = "/tmp/switch_config_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << R"({"switchName": "s", "bogus": 1})";
  auto c = LoadConfigFile(path);
  std::remove(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("'bogus'"), std::string::npos) << c.status().message();
}

TEST(ConfigFile, CertificatePathsAreRelativeToTheFile) {
  char path[] = "/tmp/switch_config_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << R"({"switchName": "s", "ports": [{"name": "p0"}],
      "tls": {"cert": "certs/s.pem", "key": "/etc/incin/s.key", "ca": "ca.pem"}})";
  auto c = LoadConfigFile(path);
  std::remove(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tls().cert(), "/tmp/certs/s.pem");
  EXPECT_EQ(c->tls().key(), "/etc/incin/s.key");
  EXPECT_EQ(c->tls().ca(), "/tmp/ca.pem");
  EXPECT_TRUE(SwitchTransportSecurity(*c).ok());
  c->set_insecure(true);
  EXPECT_NE(SwitchTransportSecurity(*c).status().message().find("both TLS files and insecure"),
            std::string::npos);
  c->clear_tls();
  c->set_insecure(false);
  EXPECT_NE(SwitchTransportSecurity(*c).status().message().find("no transport security configured"),
            std::string::npos);
}

v1::SwitchAgentConfig Valid() {
  auto c = DefaultConfig();
  c.set_switch_name("s1");
  c.add_ports()->set_name("p0");
  return c;
}

void ExpectInvalid(const v1::SwitchAgentConfig& c, const std::string& words) {
  Status st = ValidateConfig(c);
  ASSERT_FALSE(st.ok()) << "expected an error mentioning " << words;
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
}

TEST(ConfigValidate, ValidMinimalConfigPasses) {
  EXPECT_TRUE(ValidateConfig(Valid()).ok());
}

TEST(ConfigValidate, MissingSwitchNameIsRejected) {
  auto c = Valid();
  c.clear_switch_name();
  ExpectInvalid(c, "switch_name is required");
}

TEST(ConfigValidate, SwitchNameThatIsNotADirectoryNameIsRejected) {
  auto c = Valid();
  c.set_switch_name("a/b");
  ExpectInvalid(c, "may only contain");
  c.set_switch_name("..");
  ExpectInvalid(c, "not a usable name");
}

TEST(ConfigValidate, NoPortsIsRejected) {
  auto c = Valid();
  c.clear_ports();
  ExpectInvalid(c, "no ports");
}

TEST(ConfigValidate, DuplicatePortIsRejected) {
  auto c = Valid();
  c.add_ports()->set_name("p0");
  ExpectInvalid(c, "ports[1]: port 'p0' is listed twice");
}

TEST(ConfigValidate, BadPortFieldsAreRejected) {
  auto c = Valid();
  c.add_ports()->set_name("");
  ExpectInvalid(c, "ports[1]: name is required");
  c = Valid();
  c.add_ports()->set_name("averyveryverylongname");
  ExpectInvalid(c, "longer than 15");
  c = Valid();
  auto* p = c.add_ports();
  p->set_name("p1");
  p->set_ip("10.0.0.300");
  ExpectInvalid(c, "bad IPv4 address '10.0.0.300'");
}

TEST(ConfigValidate, BadValuesAreRejectedNamingTheField) {
  struct Case {
    const char* name;
    void (*spoil)(v1::SwitchAgentConfig*);
    const char* words;
  };
  const Case cases[] = {
      {"xdp mode", [](v1::SwitchAgentConfig* c) { c->set_xdp_mode("offload"); }, "xdp_mode 'offload'"},
      {"log level", [](v1::SwitchAgentConfig* c) { c->set_log_level("loud"); }, "log_level \"loud\""},
      {"log format", [](v1::SwitchAgentConfig* c) { c->set_log_format("xml"); },
       "log_format \"xml\" is not text or json"},
      {"slot capacity", [](v1::SwitchAgentConfig* c) { c->set_slot_capacity(1u << 21); },
       "slot_capacity 2097152"},
      {"heartbeat interval", [](v1::SwitchAgentConfig* c) { c->set_heartbeat_interval_ms(1); },
       "heartbeat_interval_ms 1"},
      {"listen port above 65535 (gRPC would listen on 34463)",
       [](v1::SwitchAgentConfig* c) { c->set_listen(":99999"); },
       "listen: \":99999\": port 99999 is not in 0..65535"},
      {"listen without a port", [](v1::SwitchAgentConfig* c) { c->set_listen("0.0.0.0"); },
       "listen: \"0.0.0.0\" is not host:port"},
      {"metrics port above 65535", [](v1::SwitchAgentConfig* c) { c->set_metrics_listen("10.0.0.1:70000"); },
       "metrics_listen: \"10.0.0.1:70000\": port 70000 is not in 0..65535"},
      {"metrics_tls not a mode", [](v1::SwitchAgentConfig* c) { c->set_metrics_tls("yes"); },
       "metrics_tls 'yes' is not 'off', 'tls' or 'mtls'"},
      {"metrics_tls on an insecure agent",
       [](v1::SwitchAgentConfig* c) {
         c->set_insecure(true);
         c->set_metrics_tls("tls");
       },
       "metrics_tls 'tls' needs the daemon's certificate"},
      {"AM port above 65535", [](v1::SwitchAgentConfig* c) { c->set_am_address("10.0.0.1:70000"); },
       "am_address: \"10.0.0.1:70000\": port 70000 is not in 0..65535"},
      {"AM port 0", [](v1::SwitchAgentConfig* c) { c->set_am_address("10.0.0.1:0"); },
       "am_address \"10.0.0.1:0\": port 0 cannot be dialled"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto config = Valid();
    c.spoil(&config);
    ExpectInvalid(config, c.words);
  }
}

TEST(ConfigValidate, ListenAndAmAddressFormsThatWorkPass) {
  struct Case {
    const char* name;
    const char* listen;
    const char* am;
  };
  const Case cases[] = {{"ephemeral port, standalone", "127.0.0.1:0", ""},
                        {"unix socket, dns target", "unix:/run/incin/sw.sock", "dns:///am.example:50051"},
                        {"IPv6 in brackets", "[::]:50061", "[fd00::1]:50051"},
                        {"highest port", "0.0.0.0:65535", "am.example:65535"}};
  for (const Case& c : cases) {
    auto config = Valid();
    config.set_listen(c.listen);
    config.set_am_address(c.am);
    Status st = ValidateConfig(config);
    EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
  }
}

// SIGHUP's reload: only the log settings change in the running config.
TEST(ConfigReload, LogSettingsApplyOtherChangesAndBadFilesChangeNothing) {
  const LogLevel level_before = GetLogLevel();
  const LogFormat format_before = GetLogFormat();
  char path[] = "/tmp/switch_reload_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  struct Case {
    const char* name;
    std::string file;
    FlagOverrides flags;
    std::string want_level;
    std::string want_format;
    std::string want_listen;
  };
  const std::string base = R"({"switchName": "s1", "ports": [{"name": "p0"}], "listen": "0.0.0.0:50061", )";
  FlagOverrides level_flag;
  level_flag.log_level = "warn";
  const Case cases[] = {
      {"level and format",
       base + R"("logLevel": "debug", "logFormat": "json"})",
       {},
       "debug",
       "json",
       "0.0.0.0:50061"},
      {"listen needs a restart",
       base + R"("logLevel": "debug", "logFormat": "json", "listen": "0.0.0.0:50062"})",
       {},
       "debug",
       "json",
       "0.0.0.0:50061"},
      {"an invalid file changes nothing",
       base + R"("logLevel": "loud"})",
       {},
       "debug",
       "json",
       "0.0.0.0:50061"},
      {"unparsable file changes nothing", "{", {}, "debug", "json", "0.0.0.0:50061"},
      {"the command line keeps precedence", base + R"("logLevel": "error"})", level_flag, "warn", "text",
       "0.0.0.0:50061"},
  };
  auto running = ParseConfigJson(base + R"("logLevel": "info"})");
  ASSERT_TRUE(running.ok());
  for (const Case& c : cases) {
    std::ofstream(path, std::ios::trunc) << c.file;
    ReloadConfig(path, c.flags, &*running);
    EXPECT_EQ(running->log_level(), c.want_level) << c.name;
    EXPECT_EQ(running->log_format(), c.want_format) << c.name;
    EXPECT_EQ(running->listen(), c.want_listen) << c.name;
    LogLevel level;
    ASSERT_TRUE(ParseLogLevel(c.want_level, &level));
    EXPECT_EQ(GetLogLevel(), level) << c.name;
    EXPECT_EQ(LogFormatName(GetLogFormat()), c.want_format) << c.name;
  }
  std::remove(path);
  SetLogLevel(level_before);
  SetLogFormat(format_before);
}

// A key rotation's step 2 as SIGHUP plans it: the keys and ids are live
// when their agent runs (values never shown), refused when it does not.
TEST(ConfigReload, SignallingKeysAreLiveWhileTheirAgentRunsAndNeverShown) {
  const std::string base = R"({"switchName": "s1", "ports": [{"name": "p0"}], )";
  auto running = ParseConfigJson(base + R"("arn": {"keyHex": "000102030405060708090a0b0c0d0e0f"},
                "credit": {"keyHex": "000102030405060708090a0b0c0d0e0f", "keyId": 1}})");
  auto reread = ParseConfigJson(base + R"("arn": {"keyHex": "101112131415161718191a1b1c1d1e1f",
                        "acceptKeyHex": "000102030405060708090a0b0c0d0e0f"},
                "credit": {"keyHex": "101112131415161718191a1b1c1d1e1f", "keyId": 2,
                           "acceptKeys": [{"keyId": 1, "keyHex": "000102030405060708090a0b0c0d0e0f"}]}})");
  ASSERT_TRUE(running.ok() && reread.ok());
  const std::vector<std::string> changes = {"arn.key_hex changed", "arn.accept_key_hex changed",
                                            "credit.key_hex changed", "credit.key_id 1 -> 2",
                                            "credit.accept_keys changed"};
  auto texts = [](const std::vector<FieldChange>& v) {
    std::vector<std::string> out;
    for (const auto& c : v) out.push_back(c.ToString());
    return out;
  };
  struct Case {
    const char* name;
    bool arn_running, credit_running;
    size_t applied;  // the first `applied` of `changes`, the rest refused
  };
  const Case cases[] = {{"both running", true, true, 5}, {"only ARN running", true, false, 2}};
  for (const Case& c : cases) {
    ReloadPlan plan =
        PlanReload(*running, *reread, SwitchLiveFields(c.arn_running, c.credit_running), {"arn", "credit"});
    EXPECT_EQ(texts(plan.applied), std::vector<std::string>(changes.begin(), changes.begin() + c.applied))
        << c.name;
    EXPECT_EQ(texts(plan.refused), std::vector<std::string>(changes.begin() + c.applied, changes.end()))
        << c.name;
  }
}

TEST(ConfigFlags, FlagsOverrideTheFileAndUnsetFlagsKeepIt) {
  auto c = ParseConfigJson(kFull);
  ASSERT_TRUE(c.ok());
  FlagOverrides f;
  f.switch_name = "spine9";
  f.icrc_verify = true;
  f.xdp_mode = "native";
  f.slot_capacity = 77;
  ApplyFlags(f, &*c);
  EXPECT_EQ(c->switch_name(), "spine9");
  EXPECT_TRUE(c->icrc_verify());
  EXPECT_EQ(c->xdp_mode(), "native");
  EXPECT_EQ(c->slot_capacity(), 77u);
  // Untouched by flags:
  EXPECT_EQ(c->listen(), "0.0.0.0:50071");
  EXPECT_EQ(c->am_address(), "10.0.0.100:50051");
  EXPECT_EQ(c->ports_size(), 2);
  EXPECT_TRUE(c->keep_datapath_on_exit());
  EXPECT_EQ(c->log_level(), "debug");
}

TEST(ConfigFlags, PortFlagsReplaceTheFilePortsAndMayCarryAnAddress) {
  auto c = ParseConfigJson(kFull);
  ASSERT_TRUE(c.ok());
  FlagOverrides f;
  f.ports = {"eth7", "eth8=192.168.1.1"};
  f.keep_datapath_on_exit = false;
  ApplyFlags(f, &*c);
  ASSERT_EQ(c->ports_size(), 2);
  EXPECT_EQ(c->ports(0).name(), "eth7");
  EXPECT_EQ(c->ports(0).ip(), "");
  EXPECT_EQ(c->ports(1).name(), "eth8");
  EXPECT_EQ(c->ports(1).ip(), "192.168.1.1");
  EXPECT_FALSE(c->keep_datapath_on_exit());
}

TEST(ConfigPorts, MissingInterfaceIsNotFoundAndNamed) {
  auto c = Valid();
  c.mutable_ports(0)->set_name("nosuchif0");
  auto ports = ResolvePorts(c);
  ASSERT_FALSE(ports.ok());
  EXPECT_EQ(ports.status().code(), Code::kNotFound);
  EXPECT_NE(ports.status().message().find("interface 'nosuchif0' not found"), std::string::npos)
      << ports.status().message();
}

TEST(ConfigPorts, ConfiguredAddressMustBelongToTheInterface) {
  auto c = Valid();
  c.mutable_ports(0)->set_name("lo");
  c.mutable_ports(0)->set_ip("127.0.0.1");
  auto ok = ResolvePorts(c);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->at(0).ip.ToString(), "127.0.0.1");
  EXPECT_GT(ok->at(0).ifindex, 0u);
  c.mutable_ports(0)->set_ip("10.9.9.9");
  auto bad = ResolvePorts(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("10.9.9.9 is not an address of the interface"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace inc::sw
