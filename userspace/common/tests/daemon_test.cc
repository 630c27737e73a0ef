// SPDX-License-Identifier: Apache-2.0
// What the daemons share: signals taken synchronously (a SIGHUP no longer
// kills), log settings from config spellings, and the reload plan that
// splits a re-read config into what applies at run time and what needs a
// restart.
#include "common/daemon.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/service_manager.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc {
namespace {

std::vector<std::string> Texts(const std::vector<FieldChange>& changes) {
  std::vector<std::string> out;
  for (const FieldChange& c : changes) out.push_back(c.ToString());
  return out;
}

TEST(DaemonSignals, BlockedSignalsAreWaitedForInsteadOfKillingTheProcess) {
  BlockDaemonSignals();
  struct Case {
    const char* name;
    int sig;
  };
  const Case cases[] = {{"SIGHUP", SIGHUP}, {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGUSR2", SIGUSR2}};
  for (const Case& c : cases) {
    ASSERT_EQ(raise(c.sig), 0) << c.name;
    EXPECT_EQ(WaitForDaemonSignal(), c.sig) << c.name;  // still alive to see it
    EXPECT_EQ(SignalName(c.sig), c.name);
  }
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGRTMIN + 2), "SIGRTMIN+2");
  EXPECT_EQ(SignalName(SIGRTMIN), "SIGRTMIN");
  EXPECT_EQ(SignalName(SIGRTMAX), "SIGRTMAX");
  EXPECT_EQ(SignalName(SIGSEGV), "signal " + std::to_string(SIGSEGV));
}

// Every signal whose default action terminates the process and that the
// daemons do not use is taken and passed over: the process lives on and the
// next signal it uses still arrives.
TEST(DaemonSignals, UnusedTerminatingSignalsAreIgnored) {
  BlockDaemonSignals();
  const std::vector<int> ignored = IgnoredDaemonSignals();
  for (int sig : {SIGUSR1, SIGPIPE, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT, SIGTSTP, SIGTTIN,
                  SIGTTOU, SIGXFSZ, SIGRTMIN, SIGRTMAX})
    EXPECT_NE(std::find(ignored.begin(), ignored.end(), sig), ignored.end()) << SignalName(sig);
  for (int sig : ignored) ASSERT_EQ(raise(sig), 0) << SignalName(sig);
  ASSERT_EQ(raise(SIGHUP), 0);
  EXPECT_EQ(WaitForDaemonSignal(), SIGHUP);  // alive, past every ignored one
}

// A stand-in for systemd's notification socket: a unix datagram socket whose
// path NOTIFY_SOCKET names while the object lives.
class NotifySocket {
 public:
  NotifySocket() {
    path_ = "/tmp/inc-notify-test-" + std::to_string(getpid());
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  std::string Next() {  // the next message, or "" after 2 s
    timeval tv{2, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(ServiceManager, ReadyReloadingAndStoppingReachTheNotifySocket) {
  NotifySocket manager;
  ASSERT_TRUE(manager.bound());
  NotifyReady("listening on 10.0.0.1:50051\nsecond line");
  EXPECT_EQ(manager.Next(), "READY=1\nSTATUS=listening on 10.0.0.1:50051 second line");
  NotifyReloading();
  EXPECT_EQ(manager.Next(), "RELOADING=1\nSTATUS=reloading the configuration");
  NotifyStopping("stopping; detaching XDP");
  EXPECT_EQ(manager.Next(), "STOPPING=1\nSTATUS=stopping; detaching XDP");
}

TEST(ServiceManager, WithoutAManagerTheCallsDoNothing) {
  unsetenv("NOTIFY_SOCKET");
  NotifyReady("no manager");  // no socket to write to: no error, no crash
  NotifyStopping("no manager");
}

// An AM whose GetTopology takes `delay`, to have a call in flight.
class SlowAm final : public v1::AggregationManager::Service {
 public:
  explicit SlowAm(std::chrono::milliseconds delay) : delay_(delay) {}
  grpc::Status GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest*,
                           v1::GetTopologyResponse*) override {
    std::this_thread::sleep_for(delay_);
    return grpc::Status::OK;
  }

 private:
  std::chrono::milliseconds delay_;
};

TEST(DaemonCallCounter, CallsInFlightAreWaitedForIdleConnectionsAreNot) {
  CallCounter counter;
  SlowAm service(std::chrono::milliseconds(300));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(counter.Factory());
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server && port != 0);
  auto stub = v1::AggregationManager::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto call = [&] {
    grpc::ClientContext ctx;
    v1::GetTopologyResponse resp;
    return stub->GetTopology(&ctx, v1::GetTopologyRequest(), &resp);
  };
  EXPECT_TRUE(call().ok());  // the connection stays open, idle
  // The server ends its side of a call (and the counter's interceptor) a
  // moment after the client has the answer.
  EXPECT_TRUE(counter.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  EXPECT_EQ(counter.InFlight(), 0);

  grpc::Status in_flight;
  std::thread t([&] { in_flight = call(); });
  for (int i = 0; i < 200 && counter.InFlight() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(counter.InFlight(), 1);
  EXPECT_FALSE(counter.WaitIdle(std::chrono::steady_clock::now() + std::chrono::milliseconds(20)))
      << "the call takes 300 ms";
  EXPECT_TRUE(counter.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  t.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(counter.InFlight(), 0);

  // With nothing in flight, stopping does not wait for the idle client.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(counter.WaitIdle(t0 + std::chrono::seconds(5)));
  server->Shutdown(std::chrono::system_clock::now());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(DaemonLogSettings, ConfigSpellingsApplyAndBadOnesNameTheField) {
  const LogLevel level_before = GetLogLevel();
  const LogFormat format_before = GetLogFormat();
  struct Case {
    const char* name;
    std::string level;
    std::string format;
    std::string error;  // empty: accepted
    LogLevel want_level;
    LogFormat want_format;
  };
  const Case cases[] = {
      {"debug text", "debug", "text", "", LogLevel::kDebug, LogFormat::kText},
      {"warn json", "warn", "json", "", LogLevel::kWarn, LogFormat::kJson},
      {"bad level", "loud", "text", "log_level \"loud\" is not debug, info, warn or error", LogLevel::kWarn,
       LogFormat::kJson},
      {"bad format", "info", "xml", "log_format \"xml\" is not text or json", LogLevel::kWarn,
       LogFormat::kJson},
      {"empty format", "info", "", "log_format \"\" is not text or json", LogLevel::kWarn, LogFormat::kJson},
  };
  for (const Case& c : cases) {
    Status st = ApplyLogSettings(c.level, c.format);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.name;
      EXPECT_EQ(st.message(), c.error) << c.name;
    }
    // A refused setting leaves the previous one in force.
    EXPECT_EQ(GetLogLevel(), c.want_level) << c.name;
    EXPECT_EQ(GetLogFormat(), c.want_format) << c.name;
  }
  SetLogLevel(level_before);
  SetLogFormat(format_before);
}

TEST(DaemonReload, ChangedFieldsAreNamedWithOldAndNewValues) {
  v1::SwitchAgentConfig a;
  a.set_switch_name("leaf0");
  a.set_listen("0.0.0.0:50061");
  a.set_log_level("info");
  a.add_ports()->set_name("p0");
  struct Case {
    const char* name;
    void (*change)(v1::SwitchAgentConfig*);
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"nothing", [](v1::SwitchAgentConfig*) {}, {}},
      {"log level",
       [](v1::SwitchAgentConfig* c) { c->set_log_level("debug"); },
       {"log_level \"info\" -> \"debug\""}},
      {"a number and a flag",
       [](v1::SwitchAgentConfig* c) {
         c->set_slot_capacity(8192);
         c->set_icrc_verify(true);
       },
       {"slot_capacity 0 -> 8192", "icrc_verify false -> true"}},
      {"a list", [](v1::SwitchAgentConfig* c) { c->add_ports()->set_name("p1"); }, {"ports changed"}},
      {"a nested message",
       [](v1::SwitchAgentConfig* c) { c->mutable_credit()->set_enabled(true); },
       {"credit changed"}},
      {"in field-number order",
       [](v1::SwitchAgentConfig* c) {
         c->set_log_format("json");
         c->set_listen("0.0.0.0:50062");
       },
       {"listen \"0.0.0.0:50061\" -> \"0.0.0.0:50062\"", "log_format \"\" -> \"json\""}},
  };
  for (const Case& c : cases) {
    v1::SwitchAgentConfig b = a;
    c.change(&b);
    EXPECT_EQ(Texts(ChangedFields(a, b)), c.want) << c.name;
  }
}

TEST(DaemonReload, OnlyLiveFieldsApplyTheRestIsRefused) {
  v1::AmConfig running;
  running.set_listen("0.0.0.0:50051");
  running.set_log_level("info");
  running.set_member_heartbeat_timeout_ms(5000);
  const std::set<std::string> live = {"log_level", "log_format"};
  struct Case {
    const char* name;
    void (*change)(v1::AmConfig*);
    std::vector<std::string> applied;
    std::vector<std::string> refused;
  };
  const Case cases[] = {
      {"unchanged", [](v1::AmConfig*) {}, {}, {}},
      {"level and format",
       [](v1::AmConfig* c) {
         c->set_log_level("debug");
         c->set_log_format("json");
       },
       {"log_level \"info\" -> \"debug\"", "log_format \"\" -> \"json\""},
       {}},
      {"listen and timeout need a restart",
       [](v1::AmConfig* c) {
         c->set_listen("0.0.0.0:50052");
         c->set_member_heartbeat_timeout_ms(9000);
       },
       {},
       {"listen \"0.0.0.0:50051\" -> \"0.0.0.0:50052\"", "member_heartbeat_timeout_ms 5000 -> 9000"}},
      {"both kinds",
       [](v1::AmConfig* c) {
         c->set_log_level("warn");
         c->set_topology_file("/etc/incin/other.json");
       },
       {"log_level \"info\" -> \"warn\""},
       {"topology_file \"\" -> \"/etc/incin/other.json\""}},
  };
  for (const Case& c : cases) {
    v1::AmConfig reread = running;
    c.change(&reread);
    ReloadPlan plan = PlanReload(running, reread, live);
    EXPECT_EQ(Texts(plan.applied), c.applied) << c.name;
    EXPECT_EQ(Texts(plan.refused), c.refused) << c.name;
  }
}

// A message field named nested is compared field by field, so that a
// daemon can take some of its fields at run time and refuse the others.
TEST(DaemonReload, NestedFieldsArePlannedOneByOne) {
  v1::SwitchAgentConfig running;
  running.mutable_arn()->set_enabled(true);
  running.mutable_arn()->set_hold_ms(2000);
  const std::set<std::string> live = {"arn.hold_ms", "arn.clear_below"};
  struct Case {
    const char* name;
    std::set<std::string> nested;
    void (*change)(v1::SwitchAgentConfig*);
    std::vector<std::string> applied;
    std::vector<std::string> refused;
  };
  const Case cases[] = {
      {"a live inner field",
       {"arn"},
       [](v1::SwitchAgentConfig* c) { c->mutable_arn()->set_hold_ms(3000); },
       {"arn.hold_ms 2000 -> 3000"},
       {}},
      {"a live and a restart inner field",
       {"arn"},
       [](v1::SwitchAgentConfig* c) {
         c->mutable_arn()->set_hold_ms(3000);
         c->mutable_arn()->set_listen_port(50000);
       },
       {"arn.hold_ms 2000 -> 3000"},
       {"arn.listen_port 0 -> 50000"}},
      {"not nested: the message as a whole needs a restart",
       {},
       [](v1::SwitchAgentConfig* c) { c->mutable_arn()->set_hold_ms(3000); },
       {},
       {"arn changed"}},
      {"a key is named, never shown",
       {"arn"},
       [](v1::SwitchAgentConfig* c) { c->mutable_arn()->set_key_hex("00112233445566778899aabbccddeeff"); },
       {},
       {"arn.key_hex changed"}},
      {"a list inside",
       {"arn"},
       [](v1::SwitchAgentConfig* c) { c->mutable_arn()->add_ports()->set_port("s0"); },
       {},
       {"arn.ports changed"}},
  };
  for (const Case& c : cases) {
    v1::SwitchAgentConfig reread = running;
    c.change(&reread);
    ReloadPlan plan = PlanReload(running, reread, live, c.nested);
    EXPECT_EQ(Texts(plan.applied), c.applied) << c.name;
    EXPECT_EQ(Texts(plan.refused), c.refused) << c.name;
  }
}

TEST(DaemonReload, CopyFieldPathCopiesOneFieldAtAnyDepth) {
  v1::SwitchAgentConfig from;
  from.set_slot_capacity(8192);
  from.mutable_arn()->set_hold_ms(3000);
  from.mutable_arn()->set_sample_interval_ms(50);
  from.mutable_credit()->add_local_prefixes("10.0.0.0/24");
  v1::SwitchAgentConfig to;
  to.set_switch_name("leaf0");
  to.mutable_arn()->set_hold_ms(2000);
  to.mutable_credit()->add_local_prefixes("10.9.0.0/16");
  EXPECT_TRUE(CopyFieldPath(from, "slot_capacity", &to));
  EXPECT_TRUE(CopyFieldPath(from, "arn.hold_ms", &to));
  EXPECT_TRUE(CopyFieldPath(from, "credit.local_prefixes", &to));
  EXPECT_FALSE(CopyFieldPath(from, "arn.no_such_field", &to));
  EXPECT_FALSE(CopyFieldPath(from, "slot_capacity.inner", &to));
  EXPECT_EQ(to.switch_name(), "leaf0");             // untouched
  EXPECT_EQ(to.slot_capacity(), 8192u);             // copied
  EXPECT_EQ(to.arn().hold_ms(), 3000u);             // copied
  EXPECT_EQ(to.arn().sample_interval_ms(), 0u);     // not asked for
  ASSERT_EQ(to.credit().local_prefixes_size(), 1);  // replaced, not appended
  EXPECT_EQ(to.credit().local_prefixes(0), "10.0.0.0/24");
}

// ApplyReload with live fields: the check sees the running config with the
// live changes (not the re-read file), a failed check or apply changes
// nothing, and fields that need a restart never reach apply.
TEST(DaemonReload, LiveFieldsAreCheckedAsTheyWouldRunThenApplied) {
  v1::AmConfig running;
  running.set_member_heartbeat_interval_ms(1000);
  running.set_member_heartbeat_timeout_ms(5000);
  struct Case {
    const char* name;
    void (*change)(v1::AmConfig*);
    bool check_passes;
    bool apply_passes;
    uint32_t timeout_after;   // member_heartbeat_timeout_ms in force afterwards
    uint32_t interval_after;  // member_heartbeat_interval_ms in force afterwards
    int applies;              // calls of apply
  };
  const Case cases[] = {
      {"a live field", [](v1::AmConfig* c) { c->set_member_heartbeat_timeout_ms(9000); }, true, true, 9000,
       1000, 1},
      {"a restart field only", [](v1::AmConfig* c) { c->set_member_heartbeat_interval_ms(2000); }, true, true,
       5000, 1000, 0},
      {"the check fails", [](v1::AmConfig* c) { c->set_member_heartbeat_timeout_ms(300); }, false, true, 5000,
       1000, 0},
      {"apply fails", [](v1::AmConfig* c) { c->set_member_heartbeat_timeout_ms(9000); }, true, false, 5000,
       1000, 1},
  };
  for (const Case& c : cases) {
    v1::AmConfig in_force = running;
    v1::AmConfig reread = running;
    c.change(&reread);
    int applies = 0;
    std::vector<uint32_t> checked_intervals;
    LiveFields live;
    live.fields = {"member_heartbeat_timeout_ms"};
    live.check = [&](const google::protobuf::Message& m) {
      const auto& next = static_cast<const v1::AmConfig&>(m);
      checked_intervals.push_back(next.member_heartbeat_interval_ms());
      return c.check_passes ? Status::Ok() : InvalidArgument("too short");
    };
    live.apply = [&](const google::protobuf::Message&) {
      ++applies;
      return c.apply_passes ? Status::Ok() : Internal("cannot");
    };
    ApplyReload(reread, "incamd", &in_force, live);
    EXPECT_EQ(in_force.member_heartbeat_timeout_ms(), c.timeout_after) << c.name;
    EXPECT_EQ(in_force.member_heartbeat_interval_ms(), c.interval_after) << c.name;
    EXPECT_EQ(applies, c.applies) << c.name;
    for (uint32_t interval : checked_intervals) EXPECT_EQ(interval, 1000u) << c.name << ": checked the file";
  }
}

}  // namespace
}  // namespace inc
