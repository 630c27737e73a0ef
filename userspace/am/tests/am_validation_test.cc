// SPDX-License-Identifier: Apache-2.0
// Request and file validation: each bad input gets its specific code and a
// message that names the problem.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "am/config.h"
#include "am/convert.h"
#include "am/manager.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"

namespace inc::am {
namespace {

// ------------------------------------------------------------ topology file

v1::TopologyFile Small() {
  return testing::MakeFabric(2, 1, 2);
}

void ExpectTopologyError(const v1::TopologyFile& f, const std::string& needle) {
  auto t = TopologyFromProto(f);
  ASSERT_FALSE(t.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
}

TEST(TopologyValidationTest, GeneratedFabricIsValid) {
  EXPECT_TRUE(TopologyFromProto(Small()).ok());
}

TEST(TopologyValidationTest, LinkToUnknownSwitchIsRejected) {
  auto f = Small();
  f.mutable_links(0)->set_b("spine9");
  ExpectTopologyError(f, "unknown switch \"spine9\"");
}

TEST(TopologyValidationTest, DuplicateNamesAreRejected) {
  auto f = Small();
  f.add_switches()->CopyFrom(f.switches(0));
  ExpectTopologyError(f, "duplicate switch name \"leaf00\"");
  f = Small();
  f.add_hosts()->CopyFrom(f.hosts(0));
  ExpectTopologyError(f, "duplicate host name \"h00_0\"");
  f = Small();
  f.mutable_hosts(0)->set_name("spine0");
  ExpectTopologyError(f, "already a switch name");
}

TEST(TopologyValidationTest, HostWithoutSwitchIsRejected) {
  auto f = Small();
  f.mutable_hosts(1)->clear_switch_name();
  ExpectTopologyError(f, "hosts[1] (\"h00_1\"): switch_name is empty");
  f = Small();
  f.mutable_hosts(1)->set_switch_name("leaf77");
  ExpectTopologyError(f, "switch_name \"leaf77\" is not a switch");
  f = Small();
  f.mutable_hosts(1)->clear_switch_port();
  ExpectTopologyError(f, "switch_port is empty");
}

TEST(TopologyValidationTest, BadKindsAddressesAndPortReuseAreRejected) {
  auto f = Small();
  f.mutable_switches(0)->set_kind("core");
  ExpectTopologyError(f, "kind \"core\" is not \"leaf\" or \"spine\"");
  f = Small();
  f.mutable_hosts(0)->set_ip("10.0.0.300");
  ExpectTopologyError(f, "hosts[0] (\"h00_0\"): ip");
  f = Small();
  f.mutable_hosts(0)->set_mac("02:00:00");
  ExpectTopologyError(f, "mac");
  f = Small();
  f.mutable_hosts(1)->set_ip(f.hosts(0).ip());
  ExpectTopologyError(f, "is also host \"h00_0\"'s");
  f = Small();
  f.mutable_hosts(1)->set_switch_port("h0");
  ExpectTopologyError(f, "port \"h0\" is used by both host \"h00_0\" and host \"h00_1\"");
  f = Small();
  f.mutable_links(0)->set_a_port("h0");
  ExpectTopologyError(f, "port \"h0\" is used by both");
  f = Small();
  f.mutable_links(0)->set_b("leaf00");
  ExpectTopologyError(f, "links a switch to itself");
}

TEST(TopologyValidationTest, FileErrorsNameTheFile) {
  auto missing = LoadTopologyFile("/nonexistent/topo.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.json"), std::string::npos);
  char path[] = "/tmp/am_topo_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string bad = "{\"switches\": [{\"name\": \"a\", \"kind\": \"leaf\", \"colour\": 1}]}";
  ASSERT_EQ(write(fd, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
  close(fd);
  auto t = LoadTopologyFile(path);
  unlink(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find("not a valid inc.v1.TopologyFile JSON"), std::string::npos)
      << t.status().message();
}

TEST(TopologyValidationTest, DocumentedExampleFilesAreValid) {
  auto topo = LoadTopologyFile(INC_AM_EXAMPLES "/topology.json");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->switches.size(), 3u);
  EXPECT_EQ(topo->hosts.size(), 4u);
  EXPECT_EQ(topo->LinksBetween("spine1", "leaf2"),
            (std::vector<std::pair<std::string, std::string>>{{"d2", "up1"}}));
  v1::AmConfig config;
  Status s = ReadJsonFile(INC_AM_EXAMPLES "/am.json", &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  AmOptions o;
  ApplyConfig(config, &o);
  EXPECT_EQ(o.member_heartbeat_timeout_ms, 5000u);
  EXPECT_EQ(o.listen, "127.0.0.1:50051");
}

// ------------------------------------------------------------- config file

TEST(AmConfigValidationTest, ValuesThatCannotWorkAreRejectedNamingTheFields) {
  struct Case {
    const char* name;
    void (*set)(v1::AmConfig*);
    std::string error;  // empty: valid
  };
  const Case cases[] = {
      {"defaults", [](v1::AmConfig*) {}, ""},
      {"the documented example's values",
       [](v1::AmConfig* c) {
         c->set_member_heartbeat_timeout_ms(5000);
         c->set_member_heartbeat_interval_ms(1000);
         c->set_default_pool_size(256);
       },
       ""},
      {"timeout exactly two intervals", [](v1::AmConfig* c) { c->set_member_heartbeat_timeout_ms(2000); },
       ""},
      {"listen port above 65535 (gRPC would listen on 4464)",
       [](v1::AmConfig* c) { c->set_listen(":70000"); }, "listen: \":70000\": port 70000 is not in 0..65535"},
      {"listen not host:port", [](v1::AmConfig* c) { c->set_listen("localhost"); },
       "listen: \"localhost\" is not host:port"},
      {"metrics_listen not host:port", [](v1::AmConfig* c) { c->set_metrics_listen("localhost"); },
       "metrics_listen: \"localhost\" is not host:port"},
      {"metrics_tls not a mode", [](v1::AmConfig* c) { c->set_metrics_tls("https"); },
       "metrics_tls 'https' is not 'off', 'tls' or 'mtls'"},
      {"metrics_tls without a certificate",
       [](v1::AmConfig* c) {
         c->set_insecure(true);
         c->set_metrics_tls("mtls");
       },
       "metrics_tls 'mtls' needs the daemon's certificate"},
      {"metrics_tls off", [](v1::AmConfig* c) { c->set_metrics_tls("off"); }, ""},
      {"pool 2^32-1", [](v1::AmConfig* c) { c->set_default_pool_size(4294967295u); },
       "default_pool_size 4294967295 is not in 1..65535 (a switch's slots per tree)"},
      {"pool one above a switch's largest", [](v1::AmConfig* c) { c->set_default_pool_size(65536); },
       "default_pool_size 65536 is not in 1..65535"},
      {"member timeout shorter than the interval",
       [](v1::AmConfig* c) {
         c->set_member_heartbeat_timeout_ms(500);
         c->set_member_heartbeat_interval_ms(1000);
       },
       "member_heartbeat_timeout_ms 500 is shorter than two heartbeats (member_heartbeat_interval_ms 1000): "
       "one late heartbeat would fail a tree"},
      {"member timeout against the default interval",
       [](v1::AmConfig* c) { c->set_member_heartbeat_timeout_ms(1500); },
       "member_heartbeat_timeout_ms 1500 is shorter than two heartbeats (member_heartbeat_interval_ms 1000 "
       "(the default))"},
      {"member interval against the default timeout",
       [](v1::AmConfig* c) { c->set_member_heartbeat_interval_ms(4000); },
       "member_heartbeat_timeout_ms 5000 (the default) is shorter than two heartbeats "
       "(member_heartbeat_interval_ms 4000)"},
      {"switch timeout shorter than the interval",
       [](v1::AmConfig* c) {
         c->set_switch_heartbeat_timeout_ms(900);
         c->set_switch_heartbeat_interval_ms(1000);
       },
       "switch_heartbeat_timeout_ms 900 is shorter than two heartbeats (switch_heartbeat_interval_ms 1000): "
       "one late heartbeat would declare a switch dead"},
      {"member interval below 10 ms",
       [](v1::AmConfig* c) {
         c->set_member_heartbeat_interval_ms(5);
         c->set_member_heartbeat_timeout_ms(100);
       },
       "member_heartbeat_interval_ms 5 is below 10 ms"},
      {"timeouts near 2^32 do not wrap",
       [](v1::AmConfig* c) {
         c->set_switch_heartbeat_interval_ms(2147483649u);
         c->set_switch_heartbeat_timeout_ms(4294967295u);
       },
       "switch_heartbeat_timeout_ms 4294967295 is shorter than two heartbeats"},
      {"congestion severity", [](v1::AmConfig* c) { c->set_move_on_congestion_severity(4); },
       "move_on_congestion_severity 4 is not in 0..3"},
      {"log level", [](v1::AmConfig* c) { c->set_log_level("verbose"); },
       "log_level \"verbose\" is not debug, info, warn or error"},
      {"log format", [](v1::AmConfig* c) { c->set_log_format("yaml"); },
       "log_format \"yaml\" is not text or json"},
      {"no topology", [](v1::AmConfig* c) { c->clear_topology_file(); }, "no topology"},
      {"in-memory state", [](v1::AmConfig* c) { c->set_state_path(""); }, ""},
      {"state file in an existing folder", [](v1::AmConfig* c) { c->set_state_path("/tmp/incamd-x.db"); },
       ""},
      {"state file in a missing folder", [](v1::AmConfig* c) { c->set_state_path("/nonexistent/am/x.db"); },
       "state_path /nonexistent/am/x.db: folder /nonexistent/am does not exist (create it, or set state_path "
       "\"\""},
      {"state path that is a folder", [](v1::AmConfig* c) { c->set_state_path("/tmp"); },
       "state_path /tmp is not a regular file (give the database file, not its folder)"},
  };
  for (const Case& c : cases) {
    v1::AmConfig config;
    config.set_topology_file("/etc/incin/topology.json");
    c.set(&config);
    Status st = ValidateAmConfig(config);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
      continue;
    }
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.name;
    EXPECT_NE(st.message().find(c.error), std::string::npos) << c.name << ": " << st.message();
  }
}

TEST(AmConfigValidationTest, FlagsOverrideTheFileAndRelativeTopologyIsBesideIt) {
  auto config = LoadAmConfig(INC_AM_EXAMPLES "/am.json", AmFlags());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->topology_file(), INC_AM_EXAMPLES "/topology.json");
  EXPECT_EQ(config->listen(), "127.0.0.1:50051");
  EXPECT_TRUE(ValidateAmConfig(*config).ok());
  AmFlags flags;
  flags.listen = "127.0.0.1:0";
  flags.log_level = "debug";
  flags.log_format = "json";
  flags.topology_file = "/elsewhere/topology.json";
  config = LoadAmConfig(INC_AM_EXAMPLES "/am.json", flags);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->listen(), "127.0.0.1:0");
  EXPECT_EQ(config->log_level(), "debug");
  EXPECT_EQ(config->log_format(), "json");
  EXPECT_EQ(config->topology_file(), "/elsewhere/topology.json");
  EXPECT_FALSE(config->has_state_path());
  EXPECT_EQ(StatePath(*config), "/var/lib/incin/incamd.db");
  flags.state_path = "";
  config = LoadAmConfig(INC_AM_EXAMPLES "/am.json", flags);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(StatePath(*config), "") << "--state-path '' keeps the state in memory";
  auto missing = LoadAmConfig("/nonexistent/am.json", AmFlags());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/am.json"), std::string::npos);
}

// ------------------------------------------------------------------ requests

class RequestValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = testing::MakeFabric(2, 1, 4);
    AmOptions opts;
    m_ = std::make_unique<Manager>(opts, *TopologyFromProto(file_));
    for (const auto& s : file_.switches())
      ASSERT_TRUE(Register(testing::MakeRegistration(file_, s.name(), "127.0.0.1:9", 1024)).ok());
  }
  // Requests as a client sends them: the service's translation (convert.h)
  // in front of the manager, as in a gRPC call.
  Expected<Assignment> JoinUntil(const v1::JoinGroupRequest& r, const Manager::Cancelled& cancelled) {
    auto join = JoinFromProto(r);
    if (!join) return join.status();
    return m_->JoinGroup(*join, cancelled);
  }
  Status Join(const v1::JoinGroupRequest& r) {
    return JoinUntil(r, [] { return true; }).status();  // caller "gone": never blocks
  }
  // A member that waits in the group until `stop` is set.
  std::future<Status> JoinInBackground(const v1::JoinGroupRequest& r) {
    return std::async(std::launch::async,
                      [this, r] { return JoinUntil(r, [this] { return stop_.load(); }).status(); });
  }
  Expected<uint32_t> Register(const v1::RegisterSwitchRequest& r) {
    INC_RETURN_IF_ERROR(m_->CheckSwitchName(r.switch_name()));
    auto reg = RegistrationFromProto(r);
    if (!reg) return reg.status();
    return m_->RegisterSwitch(*reg);
  }
  Expected<Manager::SwitchBeatReply> Beat(const v1::SwitchHeartbeatRequest& r) {
    auto beat = SwitchBeatFromProto(r);
    if (!beat) return beat.status();
    return m_->SwitchHeartbeat(*beat);
  }
  Expected<TreeInfo> Create(const v1::CreateTreeRequest& r) {
    auto c = CreateTreeFromProto(r);
    if (!c) return c.status();
    return m_->CreateTree(*c);
  }
  void WaitJoined(const std::string& job, uint32_t n) {
    for (int i = 0; i < 2000; ++i) {
      auto t = m_->GetTree({0, job});
      if (t.ok() && t->joined >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "members did not join";
  }
  v1::TopologyFile file_;
  std::unique_ptr<Manager> m_;
  std::atomic<bool> stop_{false};
};

TEST_F(RequestValidationTest, MalformedJoinRequestsAreInvalidArguments) {
  auto base = testing::MakeJoin("j", 0, 2, "h00_0");
  auto r = base;
  r.clear_job_id();
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.set_world_size(0);
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.set_rank(2);
  Status s = Join(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 2 is not below world_size 2"), std::string::npos);
  r = base;
  r.mutable_member()->set_qpn(0);
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.mutable_member()->set_qpn(0x1000000);
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.mutable_member()->set_ip("10.1.0.256");
  s = Join(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("member.ip"), std::string::npos);
  r = base;
  r.mutable_member()->set_mac("zz:00:00:00:00:01");
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.add_dtypes(static_cast<v1::DataType>(42));
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.set_pool_size(70000);
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);
  r = base;
  r.mutable_member()->clear_host();
  EXPECT_EQ(Join(r).code(), Code::kInvalidArgument);  // neither host nor ip
}

TEST_F(RequestValidationTest, UnknownHostsAreNotFound) {
  auto r = testing::MakeJoin("j", 0, 2, "nohost");
  Status s = Join(r);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("\"nohost\" is not in the topology"), std::string::npos);
  r.mutable_member()->clear_host();
  r.mutable_member()->set_ip("192.168.7.7");
  s = Join(r);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("no topology host has ip 192.168.7.7"), std::string::npos);
}

TEST_F(RequestValidationTest, HostIsFoundByIp) {
  auto r = testing::MakeJoin("j", 0, 2, "");
  r.mutable_member()->set_ip(file_.hosts(1).ip());
  auto waiting = JoinInBackground(r);
  WaitJoined("j", 1);
  auto t = m_->GetTree({0, "j"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->members[0].spec.host, "h00_1");
  EXPECT_EQ(t->members[0].spec.mac.ToString(), file_.hosts(1).mac());
  stop_ = true;
  EXPECT_EQ(waiting.get().code(), Code::kCancelled);
}

TEST_F(RequestValidationTest, ConflictsWithAPendingGroupHaveSpecificCodes) {
  auto first = JoinInBackground(testing::MakeJoin("j", 0, 3, "h00_0"));
  WaitJoined("j", 1);
  Status dup = Join(testing::MakeJoin("j", 0, 3, "h00_1"));
  EXPECT_EQ(dup.code(), Code::kAlreadyExists);
  EXPECT_NE(dup.message().find("rank 0 of job j already joined"), std::string::npos);
  Status world = Join(testing::MakeJoin("j", 1, 4, "h00_1"));
  EXPECT_EQ(world.code(), Code::kFailedPrecondition);
  EXPECT_NE(world.message().find("job j has world_size 3"), std::string::npos) << world.message();
  Status same_host = Join(testing::MakeJoin("j", 1, 3, "h00_0"));
  EXPECT_EQ(same_host.code(), Code::kFailedPrecondition);
  auto pool = testing::MakeJoin("j", 1, 3, "h00_1");
  pool.set_pool_size(64);
  EXPECT_EQ(Join(pool).code(), Code::kFailedPrecondition);
  stop_ = true;
  EXPECT_EQ(first.get().code(), Code::kCancelled);
  // The abandoned group is gone: the job can start again.
  EXPECT_EQ(m_->GetTree({0, "j"}).status().code(), Code::kNotFound);
}

// Several ranks per host: the leader of each host joins with the job's
// ranks behind it (docs/architecture.md "Several ranks per host").
TEST_F(RequestValidationTest, HostRanksAreChecked) {
  auto with = [](uint32_t rank, uint32_t world, const std::string& host, std::vector<uint32_t> ranks,
                 uint32_t total) {
    auto r = testing::MakeJoin("j", rank, world, host);
    for (uint32_t x : ranks) r.add_host_ranks(x);
    r.set_total_ranks(total);
    return r;
  };
  auto expect = [&](const v1::JoinGroupRequest& r, const std::string& needle) {
    Status s = Join(r);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  expect(with(0, 2, "h00_0", {0, 1}, 1), "total_ranks 1 is not in world_size 2");
  expect(with(0, 2, "h00_0", {0, 0}, 4), "host_ranks has rank 0 twice");
  expect(with(0, 2, "h00_0", {0, 4}, 4), "rank 4, not below total_ranks 4");
  expect(with(0, 2, "h00_0", {0, 1, 2, 3}, 4), "leave fewer than one");
  expect(with(0, 1, "h00_0", {0}, 2), "the only member gives 1 host_ranks, total_ranks is 2");
  expect(with(0, 2, "h00_0", {}, 4), "total_ranks 4 without host_ranks");
  auto first = JoinInBackground(with(0, 3, "h00_0", {0, 1}, 6));
  WaitJoined("j", 1);
  expect(with(1, 3, "h00_1", {1, 2}, 6), "gives rank 1, already behind member 0 (host h00_0)");
  expect(with(1, 3, "h00_1", {2, 3}, 7), "says total_ranks 7, member 0 said 6");
  expect(with(1, 3, "h00_1", {2, 3, 4, 5}, 6), "members give 6 ranks with 1 members still to join");
  Status plain = Join(testing::MakeJoin("j", 1, 3, "h00_1"));
  EXPECT_EQ(plain.code(), Code::kInvalidArgument);
  EXPECT_NE(plain.message().find("has no host_ranks"), std::string::npos) << plain.message();
  auto second = JoinInBackground(with(1, 3, "h00_1", {2, 3}, 6));
  WaitJoined("j", 2);
  auto t = m_->GetTree({0, "j"});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->members.size(), 2u);
  EXPECT_EQ(t->members[0].host_ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(t->members[1].host_ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(JoinFromProto(with(2, 3, "h00_2", {4, 5}, 6))->host_ranks, (std::vector<uint32_t>{4, 5}));
  stop_ = true;
  EXPECT_EQ(first.get().code(), Code::kCancelled);
  EXPECT_EQ(second.get().code(), Code::kCancelled);
}

TEST_F(RequestValidationTest, LastJoinThatLeavesARankBehindNoMemberIsRefused) {
  auto with = [](uint32_t rank, const std::string& host, std::vector<uint32_t> ranks) {
    auto r = testing::MakeJoin("j", rank, 3, host);
    for (uint32_t x : ranks) r.add_host_ranks(x);
    r.set_total_ranks(7);
    return r;
  };
  auto first = JoinInBackground(with(0, "h00_0", {0, 1}));
  WaitJoined("j", 1);
  auto second = JoinInBackground(with(1, "h00_1", {2, 3}));
  WaitJoined("j", 2);
  Status two = Join(with(2, "h00_2", {5}));
  EXPECT_EQ(two.code(), Code::kInvalidArgument) << two.ToString();
  EXPECT_NE(
      two.message().find("member 2 is the last of 3 members to join, and ranks 4,6 of total_ranks 7 are "
                         "behind no member (the members give 5 ranks)"),
      std::string::npos)
      << two.message();
  Status one = Join(with(2, "h00_2", {4, 6}));
  EXPECT_EQ(one.code(), Code::kInvalidArgument) << one.ToString();
  EXPECT_NE(one.message().find("rank 5 of total_ranks 7 is behind no member"), std::string::npos)
      << one.message();
  // The group is not complete: the refused member is not in it.
  auto t = m_->GetTree({0, "j"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state, TreeState::kPending);
  EXPECT_EQ(t->joined, 2u);
  ASSERT_EQ(t->members.size(), 2u);
  EXPECT_EQ(t->members[0].rank, 0u);
  EXPECT_EQ(t->members[1].rank, 1u);
  stop_ = true;
  EXPECT_EQ(first.get().code(), Code::kCancelled);
  EXPECT_EQ(second.get().code(), Code::kCancelled);
}

TEST_F(RequestValidationTest, IncompleteGroupTimesOutWithDeadlineExceeded) {
  auto r = testing::MakeJoin("j", 1, 3, "h00_1", /*timeout_ms=*/100);
  auto a = JoinUntil(r, nullptr);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(a.status().message().find("1 of 3 ranks joined"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("missing ranks 0,2"), std::string::npos);
}

TEST_F(RequestValidationTest, SwitchRegistrationErrors) {
  auto good = testing::MakeRegistration(file_, "leaf00", "127.0.0.1:9");
  auto r = good;
  r.clear_switch_name();
  EXPECT_EQ(Register(r).status().code(), Code::kInvalidArgument);
  r = good;
  r.set_switch_name("leaf99");
  EXPECT_EQ(Register(r).status().code(), Code::kFailedPrecondition);
  for (const char* bad : {"", "nohostport", ":50051", "h:0", "h:99999", "h:12x"}) {
    r = good;
    r.set_agent_address(bad);
    EXPECT_EQ(Register(r).status().code(), Code::kInvalidArgument) << bad;
  }
  r = good;
  r.mutable_capabilities()->set_slot_capacity(0);
  EXPECT_EQ(Register(r).status().code(), Code::kInvalidArgument);
  r = good;
  r.mutable_ports(0)->set_mac("02:00");
  EXPECT_EQ(Register(r).status().code(), Code::kInvalidArgument);
  r = good;
  r.add_ports()->CopyFrom(r.ports(0));
  auto dup = Register(r);
  EXPECT_EQ(dup.status().code(), Code::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("twice"), std::string::npos);
  r = good;
  r.mutable_capabilities()->add_collectives(static_cast<v1::Collective>(17));
  EXPECT_EQ(Register(r).status().code(), Code::kInvalidArgument);

  v1::SwitchHeartbeatRequest hb;
  hb.set_switch_name("spine0");
  EXPECT_FALSE(Beat(hb)->reregister);
  hb.set_switch_name("stranger");
  EXPECT_TRUE(Beat(hb)->reregister);
}

// The agent reports each port's XDP program; operators see it in GetSwitch
// (incinctl switch show), as registered and as heartbeats update it.
TEST_F(RequestValidationTest, GetSwitchShowsEachPortsXdpStateAsTheAgentReportsIt) {
  struct Case {
    const char* name;
    bool attached;
    const char* mode;
  };
  const Case cases[] = {{"native", true, "native"}, {"generic", true, "generic"}, {"detached", false, ""}};
  auto reg = testing::MakeRegistration(file_, "leaf00", "127.0.0.1:9");
  ASSERT_GE(reg.ports_size(), 3);
  for (int i = 0; i < 3; ++i) {
    reg.mutable_ports(i)->set_xdp_attached(cases[i].attached);
    reg.mutable_ports(i)->set_xdp_mode(cases[i].mode);
  }
  ASSERT_TRUE(Register(reg).ok());
  auto port_of = [&](const std::string& port) {
    auto sw = m_->GetSwitch("leaf00");
    EXPECT_TRUE(sw.ok());
    for (const PortState& p : sw->ports)
      if (p.name == port) return p;
    ADD_FAILURE() << "no port " << port;
    return PortState();
  };
  for (int i = 0; i < 3; ++i) {
    PortState p = port_of(reg.ports(i).name());
    EXPECT_EQ(p.xdp_attached, cases[i].attached) << cases[i].name;
    EXPECT_EQ(p.xdp_mode, cases[i].mode) << cases[i].name;
  }
  // A heartbeat: the detached port got its program back.
  v1::SwitchHeartbeatRequest hb;
  hb.set_switch_name("leaf00");
  *hb.mutable_ports() = reg.ports();
  hb.mutable_ports(2)->set_xdp_attached(true);
  hb.mutable_ports(2)->set_xdp_mode("native");
  ASSERT_TRUE(Beat(hb).ok());
  PortState p = port_of(reg.ports(2).name());
  EXPECT_TRUE(p.xdp_attached);
  EXPECT_EQ(p.xdp_mode, "native");
}

TEST_F(RequestValidationTest, UnknownIdsAreNotFound) {
  EXPECT_EQ(m_->MemberHeartbeat({{5, "nojob"}, 0, std::nullopt}).status().code(), Code::kNotFound);
  EXPECT_EQ(m_->GetTree({}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(m_->GetTree({44, ""}).status().code(), Code::kNotFound);
  EXPECT_EQ(m_->DestroyTree(0, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(m_->DestroyTree(44, "").code(), Code::kNotFound);
  EXPECT_EQ(m_->GetSwitch("leaf42").status().code(), Code::kNotFound);
  EXPECT_EQ(m_->LeaveGroup("nojob", 0).code(), Code::kNotFound);
  EXPECT_EQ(m_->StatsTargets(44).status().code(), Code::kNotFound);
  ErrorReport re;
  re.tree.tree_id = 44;
  EXPECT_EQ(m_->ReportError(re).code(), Code::kNotFound);
}

TEST_F(RequestValidationTest, CreateTreeChecks) {
  v1::CreateTreeRequest c;
  c.set_job_id("c");
  EXPECT_EQ(Create(c).status().code(), Code::kInvalidArgument);  // no hosts
  c.add_hosts("h00_0");
  c.add_hosts("h01_0");
  c.set_world_size(3);
  EXPECT_EQ(Create(c).status().code(), Code::kInvalidArgument);
  c.set_world_size(2);
  c.set_hosts(1, "ghost");
  EXPECT_EQ(Create(c).status().code(), Code::kNotFound);
  c.set_hosts(1, "h01_0");
  c.set_pool_size(2000);  // switches have 1024 slots
  auto over = Create(c);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  c.set_pool_size(512);
  auto t = Create(c);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state, TreeState::kPending);
  EXPECT_EQ(t->root_switch, "spine0");
  EXPECT_EQ(Create(c).status().code(), Code::kAlreadyExists);
  // The reservation holds 512 of spine0's 1024 slots: a second job cannot have 768.
  c.set_job_id("d");
  c.set_pool_size(768);
  EXPECT_EQ(Create(c).status().code(), Code::kResourceExhausted);
  // A member on the wrong host is refused.
  Status wrong = Join(testing::MakeJoin("c", 0, 2, "h00_1"));
  EXPECT_EQ(wrong.code(), Code::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("reserved on host h00_0"), std::string::npos);
  ASSERT_TRUE(m_->DestroyTree(t->tree_id, "").ok());
  Status again = m_->DestroyTree(t->tree_id, "");
  EXPECT_EQ(again.code(), Code::kFailedPrecondition);
  EXPECT_NE(again.message().find("already TREE_DESTROYED"), std::string::npos) << again.message();
}

}  // namespace
}  // namespace inc::am
