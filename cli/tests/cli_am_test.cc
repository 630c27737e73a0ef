// SPDX-License-Identifier: Apache-2.0
// incinctl in-process against the real aggregation manager (inc_am's Manager
// and AmService on 127.0.0.1, ephemeral port) loaded from a topology file
// written here. The switch side is the AM tests' RecordingAgent (a SwitchAgent
// gRPC server that records what it is told), registered over the AM's own
// RegisterSwitch RPC; members join over JoinGroup like libinc does.

// clang-format off
// First: <sys/socket.h> (via grpc/test helpers) defines an AF_XDP macro that
// would clobber the generated enum value inc::v1::AF_XDP.
#include "cli/commands.h"
#include "cli/tests/cli_test_util.h"
// clang-format on

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "am/manager.h"
#include "am/service.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "common/job_credential.h"

namespace inc::cli {
namespace {

// Two leaves under one spine, two hosts per leaf.
constexpr const char* kTopologyJson = R"({
  "switches": [
    {"name": "leaf1", "kind": "leaf"},
    {"name": "leaf2", "kind": "leaf"},
    {"name": "spine1", "kind": "spine"}
  ],
  "hosts": [
    {"name": "h1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "switch_name": "leaf1", "switch_port": "p1"},
    {"name": "h2", "ip": "10.0.1.2", "mac": "02:00:00:00:01:02", "switch_name": "leaf1", "switch_port": "p2"},
    {"name": "h3", "ip": "10.0.2.1", "mac": "02:00:00:00:02:01", "switch_name": "leaf2", "switch_port": "p1"},
    {"name": "h4", "ip": "10.0.2.2", "mac": "02:00:00:00:02:02", "switch_name": "leaf2", "switch_port": "p2"}
  ],
  "links": [
    {"a": "leaf1", "a_port": "up1", "b": "spine1", "b_port": "d1"},
    {"a": "leaf2", "a_port": "up1", "b": "spine1", "b_port": "d2"}
  ]
})";

struct Result {
  int code;
  std::string out;
  std::string err;
};

using test_util::Contains;
using test_util::Field;
using test_util::ParseJson;

// Runs of spaces become one, so checks do not depend on column widths.
std::string Squeeze(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  return out;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class CliAgainstAm : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/incinctl-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    topology_path_ = dir_ + "/topology.json";
    std::ofstream(topology_path_) << kTopologyJson;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(kTopologyJson, &topology_).ok());

    auto topo = am::LoadTopologyFile(topology_path_);
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    am::AmOptions options;
    options.listen = "127.0.0.1:0";
    // Nothing here sends heartbeats; the monitor must not expire anyone.
    options.switch_heartbeat_timeout_ms = 3'600'000;
    options.member_heartbeat_timeout_ms = 3'600'000;
    manager_ = std::make_unique<am::Manager>(options, std::move(*topo));
    service_ = std::make_unique<am::AmService>(manager_.get(), nullptr, &job_credentials_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ && port != 0);
    manager_->Start();
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ =
        v1::AggregationManager::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (manager_) manager_->Stop();  // ends WatchEvents streams
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    for (auto& [name, agent] : agents_) agent->Shutdown();
    if (!topology_path_.empty()) unlink(topology_path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  Result Cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--am", address_});
    std::ostringstream out, err;
    int code = inc::cli::Run(args, out, err);
    return {code, out.str(), err.str()};
  }

  // Every switch of the topology registers with a RecordingAgent behind it.
  void RegisterSwitches() {
    for (const auto& sw : topology_.switches()) {
      auto agent = std::make_unique<am::testing::RecordingAgent>(sw.name());
      agent->Start();
      grpc::ClientContext ctx;
      v1::RegisterSwitchResponse resp;
      grpc::Status s = stub_->RegisterSwitch(
          &ctx, am::testing::MakeRegistration(topology_, sw.name(), agent->address()), &resp);
      ASSERT_TRUE(s.ok()) << sw.name() << ": " << s.error_message();
      agents_[sw.name()] = std::move(agent);
    }
  }

  // Joins every rank of `job` (rank i on hosts[i]) as libinc would; returns
  // when the AM has answered all of them.
  void JoinAll(const std::string& job, const std::vector<std::string>& hosts) {
    std::vector<std::thread> threads;
    std::vector<grpc::Status> results(hosts.size());
    for (size_t r = 0; r < hosts.size(); ++r) {
      threads.emplace_back([&, r] {
        grpc::ClientContext ctx;
        v1::JoinGroupResponse resp;
        results[r] = stub_->JoinGroup(&ctx,
                                      am::testing::MakeJoin(job, static_cast<uint32_t>(r),
                                                            static_cast<uint32_t>(hosts.size()), hosts[r]),
                                      &resp);
      });
    }
    for (auto& t : threads) t.join();
    for (size_t r = 0; r < hosts.size(); ++r)
      ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].error_message();
  }

  // Creates a tree with the CLI and returns its id from the JSON answer.
  uint32_t CreateTree(const std::string& job, const std::string& hosts, const std::string& world) {
    Result r = Cli({"tree", "create", "--job", job, "--world", world, "--host", hosts, "-o", "json"});
    EXPECT_EQ(r.code, kExitOk) << r.err;
    if (r.code != kExitOk) return 0;
    auto json = ParseJson(r.out);
    return static_cast<uint32_t>(
        json.fields().at("tree").struct_value().fields().at("tree_id").number_value());
  }

  std::string dir_, topology_path_, address_;
  v1::TopologyFile topology_;
  std::map<std::string, std::unique_ptr<am::testing::RecordingAgent>> agents_;
  JobCredentials job_credentials_ = *JobCredentials::FromHex(std::string(64, '7'), "test secret");
  std::unique_ptr<am::Manager> manager_;
  std::unique_ptr<am::AmService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AggregationManager::Stub> stub_;
};

TEST_F(CliAgainstAm, FreshAmListsTopologySwitchesAsNeverRegisteredAndNoTrees) {
  Result sw = Cli({"switch", "list"});
  EXPECT_EQ(sw.code, kExitOk) << sw.err;
  EXPECT_EQ(sw.out,
            "NAME    AGENT  ALIVE  LAST HEARTBEAT  FREE SLOTS  PORTS  TREES\n"
            "leaf1   -      no     never                  0/0      0  -\n"
            "leaf2   -      no     never                  0/0      0  -\n"
            "spine1  -      no     never                  0/0      0  -\n");
  Result sw_json = Cli({"switch", "list", "-o", "json"});
  EXPECT_EQ(sw_json.code, kExitOk) << sw_json.err;
  auto switches = ParseJson(sw_json.out).fields().at("switches").list_value();
  ASSERT_EQ(switches.values_size(), 3) << sw_json.out;
  for (const auto& s : switches.values()) {
    EXPECT_FALSE(s.struct_value().fields().at("alive").bool_value()) << sw_json.out;
    EXPECT_EQ(s.struct_value().fields().at("agent_address").string_value(), "") << sw_json.out;
  }

  Result trees = Cli({"tree", "list"});
  EXPECT_EQ(trees.code, kExitOk) << trees.err;
  EXPECT_EQ(trees.out, "no trees\n");
  Result show_all = Cli({"tree", "show"});
  EXPECT_EQ(show_all.code, kExitOk) << show_all.err;
  EXPECT_EQ(show_all.out, "no trees\n");
  Result trees_json = Cli({"tree", "list", "-o", "json"});
  EXPECT_EQ(trees_json.code, kExitOk);
  EXPECT_EQ(ParseJson(trees_json.out).fields().at("trees").list_value().values_size(), 0);
}

TEST_F(CliAgainstAm, TopologyShowHasEveryNodeAndLinkFromTheFile) {
  Result r = Cli({"topology", "show"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (const char* name : {"leaf1", "leaf2", "spine1", "h1", "h2", "h3", "h4"})
    EXPECT_TRUE(Contains(r.out, std::string("\n  ") + name + " ")) << name << " missing:\n" << r.out;
  EXPECT_TRUE(Contains(r.out, "leaf1  up1     spine1  d1")) << r.out;
  EXPECT_TRUE(Contains(r.out, "leaf2  up1     spine1  d2")) << r.out;

  Result j = Cli({"topology", "show", "-o", "json"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  auto json = ParseJson(j.out);
  std::map<std::string, std::string> kinds;
  for (const auto& n : json.fields().at("nodes").list_value().values())
    kinds[n.struct_value().fields().at("name").string_value()] =
        n.struct_value().fields().at("kind").string_value();
  EXPECT_EQ(kinds, (std::map<std::string, std::string>{{"leaf1", "leaf"},
                                                       {"leaf2", "leaf"},
                                                       {"spine1", "spine"},
                                                       {"h1", "host"},
                                                       {"h2", "host"},
                                                       {"h3", "host"},
                                                       {"h4", "host"}}));
  // Two switch links plus one per host.
  EXPECT_EQ(json.fields().at("links").list_value().values_size(), 6) << j.out;
}

TEST_F(CliAgainstAm, UnknownIdsExitFourWithTheAmsMessage) {
  Result show = Cli({"tree", "show", "42"});
  EXPECT_EQ(show.code, kExitNotFound) << show.err;
  EXPECT_EQ(show.err.rfind("incinctl: NOT_FOUND: ", 0), 0u) << show.err;
  EXPECT_TRUE(Contains(show.err, "42")) << show.err;
  EXPECT_TRUE(show.out.empty()) << show.out;

  Result by_job = Cli({"tree", "show", "--job", "no-such-job", "-o", "json"});
  EXPECT_EQ(by_job.code, kExitNotFound) << by_job.err;
  EXPECT_TRUE(Contains(by_job.err, "no-such-job")) << by_job.err;
  EXPECT_TRUE(by_job.out.empty()) << "no JSON document on failure: " << by_job.out;

  Result del = Cli({"tree", "delete", "42", "--reason", "test"});
  EXPECT_EQ(del.code, kExitNotFound) << del.err;
  EXPECT_EQ(del.err.rfind("incinctl: NOT_FOUND: ", 0), 0u) << del.err;
  EXPECT_TRUE(Contains(del.err, "42")) << del.err;

  Result sw = Cli({"switch", "show", "nosuch"});
  EXPECT_EQ(sw.code, kExitNotFound) << sw.err;
  EXPECT_TRUE(Contains(sw.err, "nosuch")) << sw.err;
}

// A launcher's call: the credential alone on a line (for $(...)), as an
// export line, or as JSON; each one the AM's for that job, for the hosts and
// time asked for; `job revoke` makes the AM refuse them.
TEST_F(CliAgainstAm, JobCredentialPrintsOneTheAmIssuedForTheJob) {
  const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
  Result plain = Cli({"job", "credential", "train-7", "--hosts", "h1,h2", "--ttl", "60"});
  ASSERT_EQ(plain.code, kExitOk) << plain.err;
  ASSERT_FALSE(plain.out.empty());
  EXPECT_EQ(plain.out.back(), '\n');
  const std::string credential = plain.out.substr(0, plain.out.size() - 1);
  EXPECT_TRUE(job_credentials_.Verify("train-7", "h2", credential, now + 1000, 0).ok()) << credential;
  EXPECT_FALSE(job_credentials_.Verify("train-7", "h3", credential, now + 1000, 0).ok()) << credential;
  EXPECT_FALSE(job_credentials_.Verify("train-7", "h2", credential, now + 70'000, 0).ok()) << credential;

  Result exported = Cli({"job", "credential", "train-7", "--export"});
  ASSERT_EQ(exported.code, kExitOk) << exported.err;
  EXPECT_EQ(exported.out.rfind("export INCIN_JOB_CREDENTIAL='incjob2:", 0), 0u) << exported.out;
  EXPECT_EQ(exported.out.substr(exported.out.size() - 12), ":*:train-7'\n") << exported.out;

  Result json = Cli({"job", "credential", "train-7", "-o", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_TRUE(Contains(json.out, "\"credential\": \"incjob2:")) << json.out;
  EXPECT_TRUE(Contains(json.out, "\"job_id\": \"train-7\"")) << json.out;
  EXPECT_TRUE(Contains(json.out, "\"expires_unix_ms\"")) << json.out;

  Result missing = Cli({"job", "credential"});
  EXPECT_EQ(missing.code, kExitUsage) << missing.err;
  Result unknown_host = Cli({"job", "credential", "train-7", "--hosts", "nosuch"});
  EXPECT_EQ(unknown_host.code, kExitAmError) << unknown_host.err;
  EXPECT_TRUE(Contains(unknown_host.err, "'nosuch' is not a host of the topology")) << unknown_host.err;

  Result revoke = Cli({"job", "revoke", "train-7"});
  ASSERT_EQ(revoke.code, kExitOk) << revoke.err;
  EXPECT_EQ(revoke.out, "job train-7: every credential issued until now is refused at JoinGroup\n");
}

TEST_F(CliAgainstAm, RejectedCreateExitsWithTheCodeOfTheAmsAnswer) {
  RegisterSwitches();
  // World size and host count disagree: INVALID_ARGUMENT -> 2.
  Result mismatch = Cli({"tree", "create", "--job", "j", "--world", "3", "--host", "h1,h2"});
  EXPECT_EQ(mismatch.code, kExitAmError) << mismatch.err;
  EXPECT_EQ(mismatch.err.rfind("incinctl: INVALID_ARGUMENT: ", 0), 0u) << mismatch.err;
  // A host the topology does not have: NOT_FOUND -> 4.
  Result unknown = Cli({"tree", "create", "--job", "j", "--world", "2", "--host", "h1,h9"});
  EXPECT_EQ(unknown.code, kExitNotFound) << unknown.err;
  EXPECT_TRUE(Contains(unknown.err, "h9")) << unknown.err;
  // A second tree for the same job: ALREADY_EXISTS -> 2.
  ASSERT_NE(CreateTree("j", "h1,h2", "2"), 0u);
  Result again = Cli({"tree", "create", "--job", "j", "--world", "2", "--host", "h3,h4"});
  EXPECT_EQ(again.code, kExitAmError) << again.err;
  EXPECT_EQ(again.err.rfind("incinctl: ALREADY_EXISTS: ", 0), 0u) << again.err;
}

TEST_F(CliAgainstAm, RegisteredSwitchesListAndShow) {
  RegisterSwitches();
  Result list = Cli({"switch", "list"});
  ASSERT_EQ(list.code, kExitOk) << list.err;
  std::vector<std::string> lines = Lines(list.out);
  ASSERT_EQ(lines.size(), 4u) << list.out;
  EXPECT_EQ(lines[0].rfind("NAME", 0), 0u) << list.out;
  for (const char* name : {"leaf1", "leaf2", "spine1"}) {
    bool found = false;
    for (const auto& line : lines)
      if (line.rfind(name, 0) == 0) {
        found = true;
        EXPECT_TRUE(Contains(line, agents_[name]->address())) << line;
        EXPECT_TRUE(Contains(line, " yes ")) << "alive: " << line;
        EXPECT_TRUE(Contains(line, "4096/4096")) << line;
      }
    EXPECT_TRUE(found) << name << " not listed:\n" << list.out;
  }

  Result show = Cli({"switch", "show", "leaf1"});
  ASSERT_EQ(show.code, kExitOk) << show.err;
  EXPECT_TRUE(Contains(show.out, "switch leaf1\n")) << show.out;
  EXPECT_EQ(Field(show.out, "slots"), "4096 free of 4096") << show.out;
  EXPECT_EQ(Field(show.out, "dtypes"), "int32,fp32,int64,fp16,bf16,fp64") << show.out;
  for (const char* port : {"  p1 ", "  p2 ", "  up1 "})
    EXPECT_TRUE(Contains(show.out, port)) << port << show.out;
  // The agents registered every port with XDP attached in native mode; the
  // port table's XDP column says so (it said "-" when the AM dropped it).
  std::istringstream port_lines(show.out);
  int native_rows = 0;
  for (std::string line; std::getline(port_lines, line);) {
    if (line.size() > 7 && line.compare(line.size() - 7, 7, " native") == 0) ++native_rows;
  }
  EXPECT_EQ(native_rows, 3) << show.out;

  Result json = Cli({"switch", "show", "spine1", "-o", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  auto summary = ParseJson(json.out).fields().at("switch_summary").struct_value().fields();
  EXPECT_EQ(summary.at("name").string_value(), "spine1");
  EXPECT_TRUE(summary.at("alive").bool_value());
  EXPECT_EQ(summary.at("agent_address").string_value(), agents_["spine1"]->address());
  EXPECT_EQ(summary.at("ports").list_value().values_size(), 2);
}

TEST_F(CliAgainstAm, TreeLifecycleCreateJoinShowStatsDelete) {
  RegisterSwitches();
  // Ranks on both leaves: a two-level tree rooted at the spine.
  uint32_t id = CreateTree("train-7", "h1,h3", "2");
  ASSERT_NE(id, 0u);
  const std::string ids = std::to_string(id);

  Result pending = Cli({"tree", "show", ids});
  ASSERT_EQ(pending.code, kExitOk) << pending.err;
  EXPECT_TRUE(Contains(pending.out, "tree " + ids + "\n")) << pending.out;
  EXPECT_EQ(Field(pending.out, "state"), "pending") << pending.out;
  EXPECT_EQ(Field(pending.out, "root switch"), "spine1") << pending.out;

  JoinAll("train-7", {"h1", "h3"});

  Result show = Cli({"tree", "show", "--job", "train-7"});
  ASSERT_EQ(show.code, kExitOk) << show.err;
  const std::string& s = show.out;
  EXPECT_EQ(Field(s, "job"), "train-7") << s;
  EXPECT_EQ(Field(s, "state"), "active") << s;
  EXPECT_EQ(Field(s, "world size"), "2") << s;
  // Switch rows: spine1 root, both leaves leaves under it, one child each.
  bool spine_row = false;
  int leaves = 0;
  for (const auto& line : Lines(s)) {
    if (line.rfind("  spine1  root", 0) == 0) spine_row = true;
    if ((line.rfind("  leaf1", 0) == 0 || line.rfind("  leaf2", 0) == 0) && Contains(line, " leaf  spine1 "))
      ++leaves;
  }
  EXPECT_TRUE(spine_row) << s;
  EXPECT_EQ(leaves, 2) << s;
  // Member rows: rank -> host, QPN (0x1000 + rank), attachment switch and port.
  EXPECT_TRUE(Contains(Squeeze(s), "\n 0 h1 10.0.1.1 4096 af_xdp leaf1 p1 0 ")) << s;
  EXPECT_TRUE(Contains(Squeeze(s), "\n 1 h3 10.0.2.1 4097 af_xdp leaf2 p1 0 ")) << s;

  // JSON of the same tree: the stable proto field names.
  Result json = Cli({"tree", "show", ids, "-o", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  auto tree = ParseJson(json.out).fields().at("tree").struct_value().fields();
  EXPECT_EQ(tree.at("tree_id").number_value(), id);
  EXPECT_EQ(tree.at("state").string_value(), "TREE_ACTIVE");
  EXPECT_EQ(tree.at("root_switch").string_value(), "spine1");
  EXPECT_EQ(tree.at("members").list_value().values_size(), 2);
  EXPECT_EQ(tree.at("switches").list_value().values_size(), 3);

  Result list = Cli({"tree", "list"});
  ASSERT_EQ(list.code, kExitOk) << list.err;
  ASSERT_EQ(Lines(list.out).size(), 2u) << list.out;
  EXPECT_TRUE(Contains(Lines(list.out)[1], " train-7  active ")) << list.out;

  // Stats come from the switches (the recording agents report one tree
  // counter each: rx_packets = children configured).
  Result stats = Cli({"stats", "--tree", ids});
  ASSERT_EQ(stats.code, kExitOk) << stats.err;
  for (const char* sw : {"switch leaf1\n", "switch leaf2\n", "switch spine1\n"})
    EXPECT_TRUE(Contains(stats.out, sw)) << sw << stats.out;
  Result stats_json = Cli({"stats", "--tree", ids, "-o", "json"});
  ASSERT_EQ(stats_json.code, kExitOk) << stats_json.err;
  auto switches = ParseJson(stats_json.out).fields().at("switches").list_value();
  ASSERT_EQ(switches.values_size(), 3) << stats_json.out;
  for (const auto& sw : switches.values()) {
    const auto& trees = sw.struct_value().fields().at("trees").list_value();
    ASSERT_EQ(trees.values_size(), 1) << stats_json.out;
    EXPECT_EQ(trees.values(0).struct_value().fields().at("tree_id").number_value(), id);
  }

  Result del = Cli({"tree", "delete", ids, "--reason", "job cancelled"});
  ASSERT_EQ(del.code, kExitOk) << del.err;
  EXPECT_EQ(del.out, "tree " + ids + " deleted\n");
  Result after = Cli({"tree", "show", ids});
  if (after.code == kExitOk) {  // the AM keeps dismantled trees for a while
    EXPECT_EQ(Field(after.out, "state"), "destroyed") << after.out;
    EXPECT_TRUE(Contains(after.out, "job cancelled")) << after.out;
  } else {
    EXPECT_EQ(after.code, kExitNotFound) << after.err;
  }
  Result again = Cli({"tree", "delete", ids});
  EXPECT_NE(again.code, kExitOk) << "deleting twice must not succeed silently: " << again.out;
}

TEST_F(CliAgainstAm, CreateWithRequirementsSendsThemToTheAm) {
  RegisterSwitches();
  Result r = Cli({"tree", "create", "--job", "req", "--world", "2", "--host", "h1,h2", "--dtype",
                  "FP32,int32", "--op", "sum", "--collective", "allreduce,barrier"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("created tree ", 0), 0u) << r.out;
  EXPECT_EQ(Field(r.out, "dtypes"), "int32,fp32") << r.out;
  EXPECT_EQ(Field(r.out, "ops"), "sum") << r.out;
  EXPECT_EQ(Field(r.out, "collectives"), "allreduce,barrier") << r.out;
  // Both ranks under leaf1: a single-level tree there.
  EXPECT_EQ(Field(r.out, "root switch"), "leaf1") << r.out;
  EXPECT_TRUE(Contains(Squeeze(r.out), "\n leaf1 single - ")) << r.out;
}

TEST_F(CliAgainstAm, EventsReplayPrintsHistoryAndExits) {
  RegisterSwitches();
  ASSERT_NE(CreateTree("ev-job", "h1,h2", "2"), 0u);

  Result table = Cli({"events"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  std::vector<std::string> lines = Lines(table.out);
  ASSERT_GE(lines.size(), 4u) << table.out;  // three registrations and the reservation
  EXPECT_TRUE(Contains(table.out, "switch_registered  switch=leaf1")) << table.out;
  EXPECT_TRUE(Contains(table.out, "switch_registered  switch=spine1")) << table.out;
  EXPECT_TRUE(Contains(lines.back(), "tree_reserved")) << table.out;
  EXPECT_TRUE(Contains(lines.back(), "job=ev-job")) << table.out;

  // --replay without --follow is the same one-shot read; JSON is one object per line.
  Result json = Cli({"events", "--replay", "-o", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  std::vector<std::string> json_lines = Lines(json.out);
  ASSERT_EQ(json_lines.size(), lines.size()) << json.out;
  for (const auto& line : json_lines) {
    auto event = ParseJson(line);
    EXPECT_FALSE(event.fields().at("kind").string_value().empty()) << line;
    EXPECT_FALSE(event.fields().at("unix_ms").string_value().empty()) << line;
  }
  EXPECT_EQ(ParseJson(json_lines.back()).fields().at("kind").string_value(), "tree_reserved");

  Result filtered = Cli({"events", "--kind", "tree_reserved"});
  ASSERT_EQ(filtered.code, kExitOk) << filtered.err;
  EXPECT_EQ(Lines(filtered.out).size(), 1u) << filtered.out;

  // --follow --replay with a limit exits once it has printed enough.
  Result first = Cli({"events", "--follow", "--replay", "--limit", "2"});
  ASSERT_EQ(first.code, kExitOk) << first.err;
  EXPECT_EQ(Lines(first.out), std::vector<std::string>(lines.begin(), lines.begin() + 2));
}

TEST_F(CliAgainstAm, EventsFollowPrintsNewEvents) {
  RegisterSwitches();
  // Follow without replay: only events after the watch starts. The watcher
  // is a thread; trees are created until it has seen one (the watch may
  // start after the first creations, which it must not print).
  std::atomic<bool> done{false};
  Result follow;
  std::thread watcher([&] {
    follow = Cli({"events", "--follow", "--kind", "tree_reserved", "--limit", "1", "-o", "json"});
    done = true;
  });
  int created = 0;
  for (; !done && created < 200; ++created) {
    uint32_t id = CreateTree("follow-" + std::to_string(created), "h1,h2", "2");
    ASSERT_NE(id, 0u);
    ASSERT_EQ(Cli({"tree", "delete", std::to_string(id)}).code, kExitOk);  // keep the pool from filling
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!done) manager_->Stop();  // unblock the watcher so the test fails instead of hanging
  watcher.join();
  ASSERT_EQ(follow.code, kExitOk) << follow.err;
  std::vector<std::string> lines = Lines(follow.out);
  ASSERT_EQ(lines.size(), 1u) << follow.out;
  auto event = ParseJson(lines[0]).fields();
  EXPECT_EQ(event.at("kind").string_value(), "tree_reserved");
  EXPECT_EQ(event.at("job_id").string_value().rfind("follow-", 0), 0u) << lines[0];
}

TEST_F(CliAgainstAm, EventsFollowExitsThreeWhenTheAmStops) {
  std::thread stopper([&] {
    // Whether the watch starts before or after this, the follower must end
    // with "unreachable", never with success.
    manager_->Stop();
  });
  Result r = Cli({"events", "--follow", "--kind", "tree_active", "--limit", "1"});
  stopper.join();
  EXPECT_EQ(r.code, kExitUnreachable) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("incinctl: UNAVAILABLE: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace inc::cli
