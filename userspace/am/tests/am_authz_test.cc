// SPDX-License-Identifier: Apache-2.0
// The AggregationManager service over mTLS with authorization on: each role
// may make only its own calls, switches only as themselves, members only as
// their own host and only jobs they hold the credential of; denials are
// counted in GetStats; members speak only for the ranks their host joined;
// operators bound to tenants get credentials for their tenants' jobs only.
// Certificates: a CA made per run with scripts/inc-certs, bound to
// 127.0.0.1.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "am/manager.h"
#include "am/service.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "common/authz.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "common/tests/captured_stderr.h"
#include "common/tls.h"

namespace inc::am {
namespace {

// The PKI of this run: a CA and each identity the tests call as.
const std::string& Pki() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/am_authz_pki_XXXXXX";
    std::string d = mkdtemp(tmpl);
    const std::string certs = std::string("bash ") + INC_CERTS_SCRIPT;
    std::string cmd = certs + " ca " + d + " --days 2";
    for (const char* id : {"am am", "leaf0 switch", "leaf1 switch", "w0 member", "w1 member"})
      cmd += " && " + certs + " issue " + d + " " + id + " --ip 127.0.0.1 --days 2";
    cmd += " && " + certs + " issue " + d + " operator operator --days 2";
    cmd += " && " + certs + " issue " + d + " acme-op operator --tenant acme --days 2";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not make the PKI: " << cmd;
    return d;
  }();
  return dir;
}

TlsFiles Files(const std::string& name) {
  return {Pki() + "/" + name + ".pem", Pki() + "/" + name + ".key", Pki() + "/ca.pem"};
}

v1::TopologyFile TwoLeaves() {
  v1::TopologyFile f;
  for (const char* name : {"leaf0", "leaf1"}) {
    auto* s = f.add_switches();
    s->set_name(name);
    s->set_kind("leaf");
  }
  for (int i = 0; i < 2; i++) {
    auto* h = f.add_hosts();
    h->set_name("w" + std::to_string(i));
    h->set_ip("10.0." + std::to_string(i) + ".2");
    h->set_mac("02:1a:00:00:0" + std::to_string(i) + ":02");
    h->set_switch_name("leaf" + std::to_string(i));
    h->set_switch_port("p0");
  }
  return f;
}

class AmAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = TwoLeaves();
    auto topology = TopologyFromProto(topo_);
    ASSERT_TRUE(topology.ok()) << topology.status().ToString();
    AmOptions opts;
    opts.switch_heartbeat_timeout_ms = 600000;
    manager_ = std::make_unique<Manager>(opts, std::move(*topology));
    service_ = std::make_unique<AmService>(manager_.get(), &authz_, &job_credentials_);
    auto creds = MakeServerCredentials({false, Files("am")});
    ASSERT_TRUE(creds.ok()) << creds.status().ToString();
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", *creds, &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_GT(port_, 0);
    manager_->Start();
  }
  void TearDown() override {
    manager_->Stop();
    server_->Shutdown(std::chrono::system_clock::now());
  }

  std::unique_ptr<v1::AggregationManager::Stub> As(const std::string& who) {
    auto creds = MakeChannelCredentials({false, Files(who)});
    EXPECT_TRUE(creds.ok()) << creds.status().ToString();
    return v1::AggregationManager::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), *creds));
  }

  template <typename Req, typename Resp>
  grpc::Status Call(const std::string& who,
                    grpc::Status (v1::AggregationManager::Stub::*rpc)(grpc::ClientContext*, const Req&,
                                                                      Resp*),
                    const Req& req, Resp* resp = nullptr) {
    auto stub = As(who);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    Resp local;
    return ((*stub).*rpc)(&ctx, req, resp ? resp : &local);
  }

  v1::TopologyFile topo_;
  Authorizer authz_{/*enforce=*/true};
  JobCredentials job_credentials_ = *JobCredentials::FromHex(std::string(64, 'c'), "test secret");

  // One the AM would issue now, for an hour.
  std::string Credential(const std::string& job, std::vector<std::string> hosts = {},
                         int64_t from_now_ms = 0) {
    const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count());
    return *job_credentials_.Issue({job, now + from_now_ms, now + from_now_ms + 3'600'000, std::move(hosts)});
  }
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<AmService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(AmAuthzTest, EachRoleMakesOnlyItsOwnCallsAsItself) {
  using S = v1::AggregationManager::Stub;
  EXPECT_TRUE(Call("operator", &S::ListSwitches, v1::ListSwitchesRequest()).ok());
  grpc::Status st = Call("w0", &S::ListSwitches, v1::ListSwitchesRequest());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "ListSwitches needs role operator; caller w0 has role member");

  v1::DestroyTreeRequest destroy;
  destroy.set_tree_id(5);
  EXPECT_EQ(Call("w0", &S::DestroyTree, destroy).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call("leaf0", &S::DestroyTree, destroy).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call("operator", &S::DestroyTree, destroy).error_code(), grpc::StatusCode::NOT_FOUND)
      << "authorized; there is no tree 5";

  const auto leaf0 = testing::MakeRegistration(topo_, "leaf0", "127.0.0.1:1");
  st = Call("leaf1", &S::RegisterSwitch, leaf0);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "RegisterSwitch for switch 'leaf0' with the certificate of switch 'leaf1'");
  EXPECT_EQ(Call("operator", &S::RegisterSwitch, leaf0).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Call("leaf0", &S::RegisterSwitch, leaf0).ok());
  v1::SwitchHeartbeatRequest beat;
  beat.set_switch_name("leaf0");
  EXPECT_EQ(Call("leaf1", &S::SwitchHeartbeat, beat).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Call("leaf0", &S::SwitchHeartbeat, beat).ok());

  v1::JoinGroupRequest join;
  join.set_job_id("j");
  join.set_world_size(2);
  join.set_timeout_ms(100);
  join.mutable_member()->set_host("w1");
  st = Call("w0", &S::JoinGroup, join);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "member claims host 'w1' with the certificate of host 'w0'");
  join.mutable_member()->set_host("");
  join.mutable_member()->set_ip("10.0.1.2");
  EXPECT_EQ(Call("w0", &S::JoinGroup, join).error_message(),
            "member claims IP 10.0.1.2 but host 'w0' has IP 10.0.0.2 in the topology");
  EXPECT_EQ(Call("operator", &S::JoinGroup, join).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  join.mutable_member()->set_ip("10.0.0.2");
  join.set_job_credential(Credential("j"));
  EXPECT_NE(Call("w0", &S::JoinGroup, join).error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << "its own host: authorized (the group then times out waiting for rank 1)";

  v1::AmGetStatsResponse stats;
  EXPECT_TRUE(Call("operator", &S::GetStats, v1::AmGetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.authorization_denials(), 9u);
  EXPECT_EQ(authz_.denials(), 9u);
}

// Only operators get job credentials; a member joins only with one issued
// for its job and host, unexpired and unrevoked, each refusal saying why and
// counted.
TEST_F(AmAuthzTest, JoinGroupNeedsTheCredentialAnOperatorGotForTheJob) {
  using S = v1::AggregationManager::Stub;
  v1::IssueJobCredentialRequest issue;
  issue.set_job_id("train-7");
  issue.add_hosts("w0");
  issue.set_ttl_seconds(600);
  v1::IssueJobCredentialResponse issued;
  grpc::Status st = Call("w0", &S::IssueJobCredential, issue, &issued);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(Call("leaf0", &S::IssueJobCredential, issue).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Call("operator", &S::IssueJobCredential, issue, &issued).ok());
  EXPECT_EQ(issued.job_id(), "train-7");
  EXPECT_EQ(issued.hosts_size(), 1);
  auto claims = ParseJobCredential(issued.credential());
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->hosts, std::vector<std::string>{"w0"});
  EXPECT_EQ(claims->expires_ms, issued.expires_unix_ms());
  EXPECT_EQ(claims->expires_ms - claims->issued_ms, 600'000u);
  v1::IssueJobCredentialRequest empty;
  EXPECT_EQ(Call("operator", &S::IssueJobCredential, empty).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::IssueJobCredentialRequest bad = issue;
  bad.set_ttl_seconds(8 * 24 * 3600);
  EXPECT_EQ(Call("operator", &S::IssueJobCredential, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = issue;
  bad.add_hosts("w9");
  st = Call("operator", &S::IssueJobCredential, bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "hosts: 'w9' is not a host of the topology");

  v1::IssueJobCredentialRequest other;
  other.set_job_id("other");
  v1::IssueJobCredentialResponse other_issued;
  ASSERT_TRUE(Call("operator", &S::IssueJobCredential, other, &other_issued).ok());

  struct Case {
    const char* name;
    std::string credential;
    grpc::StatusCode code;
    std::string words;
  };
  const Case cases[] = {
      {"none", "", grpc::StatusCode::PERMISSION_DENIED, "needs the job's credential"},
      {"another job's", other_issued.credential(), grpc::StatusCode::PERMISSION_DENIED,
       "is for job 'other', not 'train-7'"},
      {"not one", "letmein", grpc::StatusCode::PERMISSION_DENIED, "does not start with incjob2:"},
      {"the old format", "incjob1:" + std::string(64, 'a') + ":train-7", grpc::StatusCode::PERMISSION_DENIED,
       "old format incjob1"},
      {"for another host", Credential("train-7", {"w1"}), grpc::StatusCode::PERMISSION_DENIED,
       "is for hosts w1, not for host 'w0'"},
      {"expired", Credential("train-7", {}, -7'200'000), grpc::StatusCode::PERMISSION_DENIED, "expired"},
      // Authorized: the group then waits for rank 1 until the join timeout.
      {"the job's", issued.credential(), grpc::StatusCode::DEADLINE_EXCEEDED, ""},
  };
  const uint64_t denials_before = authz_.denials();
  for (const Case& c : cases) {
    v1::JoinGroupRequest join = testing::MakeJoin("train-7", 0, 2, "w0", 100);
    join.set_job_credential(c.credential);
    st = Call("w0", &S::JoinGroup, join);
    EXPECT_EQ(st.error_code(), c.code) << c.name << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.words), std::string::npos) << c.name << ": " << st.error_message();
  }
  EXPECT_EQ(authz_.denials() - denials_before, 6u);

  // Revoked: the credentials issued so far are refused, a new one is not.
  v1::RevokeJobCredentialsRequest revoke;
  revoke.set_job_id("train-7");
  EXPECT_EQ(Call("w0", &S::RevokeJobCredentials, revoke).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Call("operator", &S::RevokeJobCredentials, revoke).ok());
  v1::JoinGroupRequest join = testing::MakeJoin("train-7", 0, 2, "w0", 100);
  join.set_job_credential(issued.credential());
  st = Call("w0", &S::JoinGroup, join);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("was revoked"), std::string::npos) << st.error_message();
  ASSERT_TRUE(Call("operator", &S::IssueJobCredential, issue, &issued).ok());
  join.set_job_credential(issued.credential());
  EXPECT_EQ(Call("w0", &S::JoinGroup, join).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// An operator certificate with OU=tenant:acme gets credentials for jobs
// "acme/..." only, and revokes only those.
TEST_F(AmAuthzTest, TenantOperatorsGetCredentialsForTheirTenantsJobsOnly) {
  using S = v1::AggregationManager::Stub;
  v1::IssueJobCredentialRequest issue;
  issue.set_job_id("acme/train-7");
  EXPECT_TRUE(Call("acme-op", &S::IssueJobCredential, issue).ok());
  EXPECT_TRUE(Call("operator", &S::IssueJobCredential, issue).ok()) << "a cluster operator: every tenant";
  for (const char* job : {"beta/train-7", "train-7", "acmex/t"}) {
    issue.set_job_id(job);
    grpc::Status st = Call("acme-op", &S::IssueJobCredential, issue);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << job;
    EXPECT_NE(st.error_message().find("operator acme-op acts for jobs 'acme/...' only"), std::string::npos)
        << st.error_message();
  }
  v1::RevokeJobCredentialsRequest revoke;
  revoke.set_job_id("beta/train-7");
  EXPECT_EQ(Call("acme-op", &S::RevokeJobCredentials, revoke).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  revoke.set_job_id("acme/train-7");
  EXPECT_TRUE(Call("acme-op", &S::RevokeJobCredentials, revoke).ok());
}

// Heartbeats, error reports and leaves for a rank another host joined are
// refused, also when they name the tree by id only and while the rank still
// waits in JoinGroup.
TEST_F(AmAuthzTest, MembersSpeakOnlyForRanksTheirHostJoined) {
  using S = v1::AggregationManager::Stub;
  auto waiting = std::async(std::launch::async, [&] {
    v1::JoinGroupRequest join = testing::MakeJoin("job-a", 0, 2, "w0", 20000);
    join.set_job_credential(Credential("job-a"));
    return Call("w0", &S::JoinGroup, join);
  });
  uint32_t tree_id = 0;
  for (int i = 0; i < 500 && !tree_id; i++) {
    auto t = manager_->GetTree({0, "job-a"});
    if (t.ok()) tree_id = t->tree_id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(tree_id, 0u);
  const uint64_t denials_before = authz_.denials();
  v1::MemberHeartbeatRequest beat;
  beat.set_tree_id(tree_id);  // no job id, as libinc sends them
  beat.set_rank(0);
  grpc::Status st = Call("w1", &S::MemberHeartbeat, beat);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(),
            "MemberHeartbeat for rank 0 of tree " + std::to_string(tree_id) +
                " (job job-a): the rank was joined from host 'w0', the certificate is host "
                "'w1's");
  v1::ReportErrorRequest report;
  report.set_tree_id(tree_id);
  report.set_rank(0);
  report.set_gave_up(true);
  EXPECT_EQ(Call("w1", &S::ReportError, report).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::LeaveGroupRequest leave;
  leave.set_job_id("job-a");
  leave.set_rank(0);
  EXPECT_EQ(Call("w1", &S::LeaveGroup, leave).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call("operator", &S::LeaveGroup, leave).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(authz_.denials() - denials_before, 4u);
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "still waiting";

  EXPECT_TRUE(Call("w0", &S::MemberHeartbeat, beat).ok());
  EXPECT_TRUE(Call("w0", &S::LeaveGroup, leave).ok());
  EXPECT_EQ(waiting.get().error_code(), grpc::StatusCode::ABORTED);
}

// A member's error text goes into the AM's text log escaped: a newline, a
// carriage return or a terminal escape in it cannot end the line and forge
// the next one ("W incamd: denied ..." that no denial wrote).
TEST_F(AmAuthzTest, AnErrorReportWithANewlineIsOneLogLine) {
  using S = v1::AggregationManager::Stub;
  const LogFormat format = GetLogFormat();
  SetLogFormat(LogFormat::kText);
  auto waiting = std::async(std::launch::async, [&] {
    v1::JoinGroupRequest join = testing::MakeJoin("job-log", 0, 2, "w0", 20000);
    join.set_job_credential(Credential("job-log"));
    return Call("w0", &S::JoinGroup, join);
  });
  uint32_t tree_id = 0;
  for (int i = 0; i < 500 && !tree_id; i++) {
    auto t = manager_->GetTree({0, "job-log"});
    if (t.ok()) tree_id = t->tree_id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(tree_id, 0u);
  const std::string forged = "2026-11-28T00:00:00.000Z W incamd: denied DestroyTree to operator forged";
  struct Case {
    const char* name;
    std::string error;
    std::string logged;  // the message as the log line carries it
  };
  const Case cases[] = {
      {"newline", "boom\n" + forged, "boom\\n" + forged},
      {"carriage return", "boom\r" + forged, "boom\\r" + forged},
      {"terminal escape", "boom\x1b[2K\x1b[1G" + forged, "boom\\x1b[2K\\x1b[1G" + forged},
      {"delete and other controls",
       std::string("a\x7f"
                   "b\x01"
                   "c\x08"),
       "a\\x7fb\\x01c\\x08"},
  };
  for (const Case& c : cases) {
    v1::ReportErrorRequest report;
    report.set_tree_id(tree_id);
    report.set_rank(0);
    report.set_error(c.error);
    std::string text;
    {
      testutil::CapturedStderr captured;
      grpc::Status st = Call("w0", &S::ReportError, report);
      ASSERT_TRUE(st.ok()) << c.name << ": " << st.error_message();
      text = captured.Text();
    }
    size_t with_report = 0;
    for (size_t from = 0; from < text.size();) {
      size_t end = text.find('\n', from);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(from, end - from);
      EXPECT_NE(line.rfind("2026-11-28T00:00:00.000Z", 0), 0u) << c.name << ": a forged line: " << line;
      if (line.find("member_error: rank 0 of job job-log") != std::string::npos) {
        ++with_report;
        EXPECT_NE(line.find(c.logged), std::string::npos) << c.name << ": " << line;
      }
      from = end + 1;
    }
    EXPECT_EQ(with_report, 1u) << c.name << ": " << text;
  }
  SetLogFormat(format);
  v1::LeaveGroupRequest leave;
  leave.set_job_id("job-log");
  leave.set_rank(0);
  EXPECT_TRUE(Call("w0", &S::LeaveGroup, leave).ok());
  EXPECT_EQ(waiting.get().error_code(), grpc::StatusCode::ABORTED);
}

}  // namespace
}  // namespace inc::am
