// SPDX-License-Identifier: Apache-2.0
// The AM over real gRPC on loopback: members are gRPC clients in threads, the
// switch side is an in-process SwitchAgent server per switch that records
// ConfigureTree/RemoveTree (a test double of incswitchd).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "am/manager.h"
#include "am/service.h"
#include "am/store.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "common/version.h"
// After inc.pb.h: <sys/socket.h> defines an AF_XDP macro that would rename
// the proto enum value Transport.AF_XDP.
// clang-format off
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
// clang-format on

namespace inc::am {
namespace {

using testing::MakeJoin;
using testing::RecordingAgent;

struct JoinResult {
  grpc::Status status;
  v1::MemberAssignment assignment;
};

// Repeats a call every 20 ms on its own thread until destroyed.
class Repeater {
 public:
  explicit Repeater(std::function<void()> fn)
      : thread_([this, fn] {
          while (!stop_) {
            fn();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~Repeater() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class AmDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = testing::MakeFabric(2, 2, 4);
    for (const auto& s : file_.switches()) {
      auto a = std::make_unique<RecordingAgent>(s.name());
      a->Start();
      agents_[s.name()] = std::move(a);
    }
  }

  void Boot(AmOptions opts = {}) {
    opts.listen = "127.0.0.1:0";
    if (opts.member_heartbeat_timeout_ms == AmOptions{}.member_heartbeat_timeout_ms)
      opts.member_heartbeat_timeout_ms = 600000;
    if (opts.switch_heartbeat_timeout_ms == AmOptions{}.switch_heartbeat_timeout_ms)
      opts.switch_heartbeat_timeout_ms = 600000;
    manager_ = std::make_unique<Manager>(opts, *TopologyFromProto(file_));
    service_ = std::make_unique<AmService>(manager_.get());
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_GT(port, 0);
    manager_->Start();
    stub_ = v1::AggregationManager::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    for (const auto& [name, agent] : agents_) Register(name);
  }

  void TearDown() override {
    if (manager_) manager_->Stop();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    for (auto& [n, a] : agents_) a->Shutdown();
  }

  grpc::Status Register(const std::string& name, std::vector<uint32_t> live = {}) {
    auto r = testing::MakeRegistration(file_, name, agents_.at(name)->address());
    for (uint32_t id : live) r.add_live_tree_ids(id);
    grpc::ClientContext ctx;
    v1::RegisterSwitchResponse resp;
    return stub_->RegisterSwitch(&ctx, r, &resp);
  }

  std::vector<JoinResult> JoinAll(const std::vector<v1::JoinGroupRequest>& reqs) {
    std::vector<JoinResult> out(reqs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < reqs.size(); ++i)
      threads.emplace_back([&, i] {
        grpc::ClientContext ctx;
        v1::JoinGroupResponse resp;
        out[i].status = stub_->JoinGroup(&ctx, reqs[i], &resp);
        out[i].assignment = resp.assignment();
      });
    for (auto& t : threads) t.join();
    return out;
  }

  std::vector<JoinResult> JoinHosts(const std::string& job, const std::vector<std::string>& hosts) {
    std::vector<v1::JoinGroupRequest> reqs;
    for (uint32_t r = 0; r < hosts.size(); ++r)
      reqs.push_back(MakeJoin(job, r, static_cast<uint32_t>(hosts.size()), hosts[r]));
    return JoinAll(reqs);
  }

  v1::Tree GetTree(uint32_t id) {
    grpc::ClientContext ctx;
    v1::GetTreeRequest req;
    req.set_tree_id(id);
    v1::GetTreeResponse resp;
    grpc::Status s = stub_->GetTree(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.tree();
  }

  // Waits for a condition that the AM reaches on its own (heartbeat timeouts,
  // asynchronous reconciliation). Only the outcome is asserted, never the time.
  static bool Eventually(const std::function<bool()>& cond) {
    for (int i = 0; i < 3000; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return cond();
  }

  const v1::Port& PortOf(const std::string& sw, const std::string& port) {
    static v1::RegisterSwitchRequest reg;
    reg = testing::MakeRegistration(file_, sw, "x:1");
    for (const auto& p : reg.ports())
      if (p.name() == port) return p;
    ADD_FAILURE() << "no port " << port << " on " << sw;
    return reg.ports(0);
  }

  static std::string HostIp(const v1::TopologyFile& f, const std::string& host) {
    for (const auto& h : f.hosts())
      if (h.name() == host) return h.ip();
    return "";
  }

  v1::TopologyFile file_;
  std::map<std::string, std::unique_ptr<RecordingAgent>> agents_;
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<AmService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AggregationManager::Stub> stub_;
};

TEST_F(AmDaemonTest, MembersUnderOneLeafGetASingleTreeProgrammedOnThatLeaf) {
  Boot();
  const std::vector<std::string> hosts = {"h00_1", "h00_3", "h00_0"};
  auto results = JoinHosts("job", hosts);
  std::set<uint32_t> qpns, ranks_at_switch;
  for (uint32_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].status.ok()) << results[r].status.error_message();
    const auto& a = results[r].assignment;
    EXPECT_EQ(a.tree_id(), results[0].assignment.tree_id());
    EXPECT_EQ(a.key(), results[0].assignment.key());
    EXPECT_NE(a.key(), 0u);
    EXPECT_EQ(a.switch_name(), "leaf00");
    const std::string port = "h" + hosts[r].substr(4);
    EXPECT_EQ(a.switch_ip(), PortOf("leaf00", port).ip());
    EXPECT_EQ(a.switch_mac(), PortOf("leaf00", port).mac());
    EXPECT_GE(a.switch_qpn(), 0x100u);
    EXPECT_EQ(a.member_index(), r);
    EXPECT_EQ(a.pool_size(), 256u);
    EXPECT_EQ(a.elems_per_packet(), 250u);  // the largest MTU 1500 allows
    EXPECT_EQ(a.world_size(), 3u);
    EXPECT_EQ(a.member_index_of_rank_size(), 3);
    qpns.insert(a.switch_qpn());
    ranks_at_switch.insert(a.rank_at_switch());
  }
  EXPECT_EQ(qpns.size(), 3u);
  EXPECT_EQ(ranks_at_switch.size(), 3u);

  auto configs = agents_["leaf00"]->configures();
  ASSERT_EQ(configs.size(), 1u);
  const v1::TreeConfig& c = configs[0];
  EXPECT_EQ(c.role(), v1::SINGLE);
  EXPECT_EQ(c.tree_id(), results[0].assignment.tree_id());
  EXPECT_EQ(c.key(), results[0].assignment.key());
  ASSERT_EQ(c.children_size(), 3);
  for (uint32_t r = 0; r < 3; ++r) {
    const auto& a = results[r].assignment;
    const v1::Endpoint& e = c.children(a.rank_at_switch());
    EXPECT_EQ(e.peer_ip(), HostIp(file_, hosts[r]));
    EXPECT_EQ(e.peer_qpn(), 0x1000 + r);
    EXPECT_EQ(e.rkey(), 0xabc0 + r);
    EXPECT_EQ(e.switch_qpn(), a.switch_qpn());
    EXPECT_EQ(e.port(), "h" + hosts[r].substr(4));
    EXPECT_EQ(e.member_lo(), a.member_index());
    EXPECT_EQ(e.member_hi(), a.member_index() + 1);
  }
  for (const char* other : {"leaf01", "spine0", "spine1"}) EXPECT_TRUE(agents_[other]->configures().empty());
  EXPECT_EQ(GetTree(c.tree_id()).state(), v1::TREE_ACTIVE);
}

TEST_F(AmDaemonTest, MembersOnTwoLeavesGetASpineRootWithLinkedEndpoints) {
  Boot();
  auto results = JoinHosts("job2", {"h01_0", "h00_0", "h01_2", "h00_3"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  ASSERT_EQ(agents_["spine0"]->configures().size(), 1u);
  EXPECT_TRUE(agents_["spine1"]->configures().empty());
  const v1::TreeConfig root = agents_["spine0"]->configures()[0];
  const v1::TreeConfig l0 = agents_["leaf00"]->configures().at(0);
  const v1::TreeConfig l1 = agents_["leaf01"]->configures().at(0);
  EXPECT_EQ(root.role(), v1::ROOT);
  EXPECT_EQ(l0.role(), v1::LEAF);
  EXPECT_EQ(l1.role(), v1::LEAF);
  ASSERT_EQ(root.children_size(), 2);
  // Spine child i <-> leaf i's parent endpoint, addressed as each side sees the other.
  for (int i = 0; i < 2; ++i) {
    const v1::TreeConfig& leaf = i == 0 ? l0 : l1;
    const std::string leaf_name = i == 0 ? "leaf00" : "leaf01";
    const v1::Endpoint& down = root.children(i);
    const v1::Endpoint& up = leaf.parent();
    EXPECT_EQ(leaf.rank_at_parent(), static_cast<uint32_t>(i));
    EXPECT_EQ(down.port(), i == 0 ? "dn00" : "dn01");
    EXPECT_EQ(down.peer_ip(), PortOf(leaf_name, "up0").ip());
    EXPECT_EQ(down.peer_mac(), PortOf(leaf_name, "up0").mac());
    EXPECT_EQ(up.port(), "up0");
    EXPECT_EQ(up.peer_ip(), PortOf("spine0", down.port()).ip());
    EXPECT_EQ(down.peer_qpn(), up.switch_qpn());
    EXPECT_EQ(up.peer_qpn(), down.switch_qpn());
    EXPECT_EQ(down.member_lo(), 2u * i);
    EXPECT_EQ(down.member_hi(), 2u * i + 2);
    EXPECT_EQ(leaf.tree_id(), id);
    EXPECT_EQ(leaf.key(), root.key());
  }
  // leaf00's members are indices 0,1 (ranks 1,3), leaf01's 2,3 (ranks 0,2).
  std::vector<uint32_t> expected = {2, 0, 3, 1};
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(results[r].assignment.member_index(), expected[r]);
    EXPECT_EQ(results[r].assignment.member_index_of_rank(static_cast<int>(r)), expected[r]);
  }
  // Switch-side QPNs are unique per switch.
  std::set<uint32_t> leaf0_qpns = {l0.parent().switch_qpn()};
  for (const auto& e : l0.children()) leaf0_qpns.insert(e.switch_qpn());
  EXPECT_EQ(leaf0_qpns.size(), 3u);
  v1::Tree t = GetTree(id);
  EXPECT_EQ(t.root_switch(), "spine0");
  EXPECT_EQ(t.switches_size(), 3);
}

TEST_F(AmDaemonTest, LeaveGroupKeepsTheTreeUntilTheLastRankLeftThenFreesResources) {
  Boot();
  const auto before = manager_->ResourceUsage();
  auto results = JoinHosts("j", {"h00_0", "h01_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  auto leave = [&](uint32_t rank) {
    grpc::ClientContext ctx;
    v1::LeaveGroupRequest req;
    req.set_job_id("j");
    req.set_rank(rank);
    v1::LeaveGroupResponse lr;
    return stub_->LeaveGroup(&ctx, req, &lr);
  };
  auto beat = [&](uint32_t rank) {
    grpc::ClientContext hctx;
    v1::MemberHeartbeatRequest hb;
    hb.set_job_id("j");
    hb.set_rank(rank);
    hb.set_tree_id(id);
    v1::MemberHeartbeatResponse hr;
    EXPECT_TRUE(stub_->MemberHeartbeat(&hctx, hb, &hr).ok());
    return hr.tree_state();
  };
  ASSERT_TRUE(leave(1).ok());
  // Rank 0 may still linger for a lost last result: the tree stays.
  for (const char* sw : {"spine0", "leaf00", "leaf01"}) EXPECT_TRUE(agents_[sw]->removes().empty()) << sw;
  EXPECT_EQ(GetTree(id).state(), v1::TREE_ACTIVE);
  EXPECT_EQ(beat(0), v1::TREE_ACTIVE);
  ASSERT_TRUE(leave(1).ok());  // twice is fine
  ASSERT_TRUE(leave(0).ok());
  for (const char* sw : {"spine0", "leaf00", "leaf01"})
    EXPECT_EQ(agents_[sw]->removes(), std::vector<uint32_t>{id}) << sw;
  v1::Tree t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_DESTROYED);
  EXPECT_NE(t.reason().find("every rank left the group (the last: rank 0 of job j, host h00_0)"),
            std::string::npos)
      << t.reason();
  const auto after = manager_->ResourceUsage();
  EXPECT_EQ(after.tree_ids, before.tree_ids);
  EXPECT_EQ(after.qpns, before.qpns);
  EXPECT_EQ(after.free_slots, before.free_slots);
  // The job can form a new tree afterwards.
  auto again = JoinHosts("j", {"h00_0", "h01_1"});
  for (const auto& r : again) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_NE(again[0].assignment.tree_id(), id);
}

TEST_F(AmDaemonTest, ARankThatLeftStartsTheJobsNextGroupWhileAnotherStillLingers) {
  Boot();
  auto results = JoinHosts("j", {"h00_0", "h01_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  auto leave = [&](uint32_t rank) {
    grpc::ClientContext ctx;
    v1::LeaveGroupRequest req;
    req.set_job_id("j");
    req.set_rank(rank);
    v1::LeaveGroupResponse lr;
    return stub_->LeaveGroup(&ctx, req, &lr);
  };
  ASSERT_TRUE(leave(1).ok());
  // Rank 1 joins the job again while rank 0 still lingers in the old group:
  // the old tree is destroyed, and rank 0's LeaveGroup of it still succeeds.
  std::vector<JoinResult> rejoined;
  std::thread rank1([&] { rejoined = JoinAll({MakeJoin("j", 1, 2, "h01_1")}); });
  ASSERT_TRUE(Eventually([&] { return GetTree(id).state() == v1::TREE_DESTROYED; }));
  EXPECT_NE(GetTree(id).reason().find("rank 1 of job j started a new group of the job"), std::string::npos)
      << GetTree(id).reason();
  EXPECT_TRUE(leave(0).ok());
  auto rank0 = JoinAll({MakeJoin("j", 0, 2, "h00_0")});
  rank1.join();
  ASSERT_EQ(rejoined.size(), 1u);
  ASSERT_TRUE(rejoined[0].status.ok()) << rejoined[0].status.error_message();
  ASSERT_TRUE(rank0[0].status.ok()) << rank0[0].status.error_message();
  EXPECT_EQ(rank0[0].assignment.tree_id(), rejoined[0].assignment.tree_id());
  EXPECT_NE(rank0[0].assignment.tree_id(), id);
}

TEST_F(AmDaemonTest, AMemberThatGaveUpFailsTheTreeForEveryRankBeforeTheReply) {
  Boot();
  auto results = JoinHosts("g", {"h00_0", "h01_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  struct Case {
    std::string name;
    bool gave_up;
    v1::TreeState after;
  };
  for (const Case& c : {Case{"a report without giving up is only recorded", false, v1::TREE_ACTIVE},
                        Case{"a member that gave up fails the tree", true, v1::TREE_FAILED}}) {
    SCOPED_TRACE(c.name);
    grpc::ClientContext ctx;
    v1::ReportErrorRequest req;
    req.set_job_id("g");
    req.set_rank(1);
    req.set_tree_id(id);
    req.set_msg_id(77);
    req.set_timeouts(3);
    req.set_error("no result for message 77 within the collective timeout");
    req.set_gave_up(c.gave_up);
    v1::ReportErrorResponse resp;
    ASSERT_TRUE(stub_->ReportError(&ctx, req, &resp).ok());
    v1::Tree t = GetTree(id);
    EXPECT_EQ(t.state(), c.after);
    if (c.gave_up) {
      EXPECT_NE(t.reason().find("rank 1 gave up: no result for message 77"), std::string::npos) << t.reason();
      // Removed from every switch before ReportError answered.
      for (const char* sw : {"spine0", "leaf00", "leaf01"})
        EXPECT_EQ(agents_[sw]->removes(), std::vector<uint32_t>{id}) << sw;
    }
  }
}

TEST_F(AmDaemonTest, MemberHeartbeatLossFailsTheTree) {
  AmOptions o;
  o.member_heartbeat_timeout_ms = 300;
  Boot(o);
  auto results = JoinHosts("hb", {"h00_0", "h00_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  std::atomic<int> state{v1::TREE_ACTIVE};
  {
    // Rank 0 keeps beating; rank 1 is silent.
    auto stub = stub_.get();
    Repeater beat([&, stub] {
      grpc::ClientContext ctx;
      v1::MemberHeartbeatRequest hb;
      hb.set_job_id("hb");
      hb.set_rank(0);
      hb.set_tree_id(id);
      v1::MemberHeartbeatResponse hr;
      if (stub->MemberHeartbeat(&ctx, hb, &hr).ok()) state = hr.tree_state();
    });
    ASSERT_TRUE(Eventually([&] { return GetTree(id).state() == v1::TREE_FAILED; }));
    ASSERT_TRUE(Eventually([&] { return state.load() == v1::TREE_FAILED; }));
  }
  v1::Tree t = GetTree(id);
  EXPECT_NE(t.reason().find("rank 1 (host h00_1) missed heartbeats"), std::string::npos) << t.reason();
  // The monitor sends RemoveTree right after marking the tree FAILED.
  EXPECT_TRUE(Eventually([&] { return agents_["leaf00"]->removes() == std::vector<uint32_t>{id}; }));
  EXPECT_TRUE(agents_["leaf00"]->trees().empty());
}

TEST_F(AmDaemonTest, SwitchHeartbeatLossFailsTheTreeAndReregistrationRemovesIt) {
  AmOptions o;
  o.switch_heartbeat_timeout_ms = 300;
  Boot(o);
  std::atomic<bool> leaf01_silent{false};
  auto stub = stub_.get();
  Repeater beats([&, stub] {
    for (const char* sw : {"leaf00", "leaf01", "spine0", "spine1"}) {
      if (leaf01_silent && std::string(sw) == "leaf01") continue;
      grpc::ClientContext ctx;
      v1::SwitchHeartbeatRequest hb;
      hb.set_switch_name(sw);
      v1::SwitchHeartbeatResponse hr;
      stub->SwitchHeartbeat(&ctx, hb, &hr);
    }
  });
  auto results = JoinHosts("sw", {"h00_0", "h01_0"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  leaf01_silent = true;
  ASSERT_TRUE(Eventually([&] { return GetTree(id).state() == v1::TREE_FAILED; }));
  EXPECT_NE(GetTree(id).reason().find("switch leaf01 missed heartbeats"), std::string::npos)
      << GetTree(id).reason();
  // The AM now treats leaf01 as unknown: its next heartbeat is told to register.
  {
    grpc::ClientContext ctx;
    v1::SwitchHeartbeatRequest hb;
    hb.set_switch_name("leaf01");
    v1::SwitchHeartbeatResponse hr;
    ASSERT_TRUE(stub_->SwitchHeartbeat(&ctx, hb, &hr).ok());
    EXPECT_TRUE(hr.reregister());
  }
  // It registers with the tree it still holds; the AM removes it there.
  const size_t removes_before = agents_["leaf01"]->removes().size();
  ASSERT_TRUE(Register("leaf01", {id}).ok());
  ASSERT_TRUE(Eventually([&] { return agents_["leaf01"]->removes().size() > removes_before; }));
  EXPECT_EQ(agents_["leaf01"]->removes().back(), id);
  leaf01_silent = false;
}

TEST_F(AmDaemonTest, PortDownOnTheTreeFailsIt) {
  Boot();
  auto results = JoinHosts("port", {"h00_0", "h01_2"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  // A port that no tree uses going down changes nothing.
  auto reg = testing::MakeRegistration(file_, "leaf01", "x:1");
  v1::SwitchHeartbeatRequest hb;
  hb.set_switch_name("leaf01");
  for (const auto& p : reg.ports()) *hb.add_ports() = p;
  for (auto& p : *hb.mutable_ports())
    if (p.name() == "h3") p.set_up(false);
  {
    grpc::ClientContext ctx;
    v1::SwitchHeartbeatResponse hr;
    ASSERT_TRUE(stub_->SwitchHeartbeat(&ctx, hb, &hr).ok());
  }
  EXPECT_EQ(GetTree(id).state(), v1::TREE_ACTIVE);
  for (auto& p : *hb.mutable_ports())
    if (p.name() == "h2") p.set_up(false);
  {
    grpc::ClientContext ctx;
    v1::SwitchHeartbeatResponse hr;
    ASSERT_TRUE(stub_->SwitchHeartbeat(&ctx, hb, &hr).ok());
  }
  v1::Tree t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_FAILED);
  EXPECT_NE(t.reason().find("switch leaf01 port h2 went down"), std::string::npos) << t.reason();
  // Heartbeat-triggered removals run on the AM's background worker.
  EXPECT_TRUE(Eventually([&] { return agents_["spine0"]->removes() == std::vector<uint32_t>{id}; }));
  EXPECT_TRUE(Eventually([&] { return agents_["leaf00"]->trees().empty(); }));
}

// A heartbeat from `sw` reporting all its ports, `down` ones down, and ARN
// congestion on `congested` (port -> severity).
grpc::Status Beat(v1::AggregationManager::Stub* stub, const v1::TopologyFile& file, const std::string& sw,
                  const std::set<std::string>& down, const std::map<std::string, uint32_t>& congested = {}) {
  auto reg = testing::MakeRegistration(file, sw, "x:1");
  v1::SwitchHeartbeatRequest hb;
  hb.set_switch_name(sw);
  for (auto p : reg.ports()) {
    p.set_up(!down.count(p.name()));
    *hb.add_ports() = p;
  }
  for (const auto& [port, severity] : congested) {
    v1::ArnLinkState* l = hb.add_arn_links();
    l->set_origin(sw);
    l->set_port(port);
    l->set_condition("congested");
    l->set_severity(severity);
  }
  grpc::ClientContext ctx;
  v1::SwitchHeartbeatResponse hr;
  return stub->SwitchHeartbeat(&ctx, hb, &hr);
}

TEST_F(AmDaemonTest, LeafSpineLinkDownMovesTheTreeToTheOtherSpineWithoutTouchingMembers) {
  Boot();
  auto results = JoinHosts("move", {"h00_0", "h01_2"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  ASSERT_EQ(GetTree(id).root_switch(), "spine0");
  const v1::TreeConfig leaf0_before = agents_["leaf00"]->trees().at(id);
  const v1::TreeConfig leaf1_before = agents_["leaf01"]->trees().at(id);

  ASSERT_TRUE(Beat(stub_.get(), file_, "leaf01", {"up0"}).ok());
  v1::Tree t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_ACTIVE) << t.reason();
  EXPECT_EQ(t.root_switch(), "spine1");
  EXPECT_EQ(t.moves(), 1u);
  EXPECT_EQ(t.generation(), 2u);
  EXPECT_NE(t.last_move_reason().find("switch leaf01 port up0 went down"), std::string::npos)
      << t.last_move_reason();
  // The new root is programmed, both leaves point at it, the old root lets go.
  ASSERT_TRUE(Eventually([&] { return agents_["spine1"]->trees().count(id) == 1; }));
  ASSERT_TRUE(Eventually([&] { return agents_["spine0"]->trees().count(id) == 0; }));
  ASSERT_TRUE(Eventually([&] { return agents_["leaf01"]->trees().at(id).parent().port() == "up1"; }));
  ASSERT_TRUE(Eventually([&] { return agents_["leaf00"]->trees().at(id).parent().port() == "up1"; }));
  const v1::TreeConfig root = agents_["spine1"]->trees().at(id);
  EXPECT_EQ(root.role(), v1::ROOT);
  ASSERT_EQ(root.children_size(), 2);
  for (const auto& [name, before] : std::vector<std::pair<std::string, v1::TreeConfig>>{
           {"leaf00", leaf0_before}, {"leaf01", leaf1_before}}) {
    const v1::TreeConfig now = agents_[name]->trees().at(id);
    // Members keep talking to the same leaf QPNs, and the leaf keeps its slots.
    EXPECT_EQ(now.slot_base(), before.slot_base()) << name;
    EXPECT_EQ(now.role(), v1::LEAF);
    ASSERT_EQ(now.children_size(), before.children_size());
    for (int c = 0; c < now.children_size(); ++c)
      EXPECT_EQ(now.children(c).SerializeAsString(), before.children(c).SerializeAsString()) << name;
    EXPECT_EQ(now.parent().peer_qpn(), root.children(static_cast<int>(now.rank_at_parent())).switch_qpn());
    EXPECT_EQ(now.parent().switch_qpn(), root.children(static_cast<int>(now.rank_at_parent())).peer_qpn());
  }
  // Members learn it from their heartbeat answer; nothing else changes for them.
  grpc::ClientContext ctx;
  v1::MemberHeartbeatRequest hb;
  hb.set_job_id("move");
  hb.set_rank(1);
  hb.set_tree_id(id);
  v1::MemberHeartbeatResponse hr;
  ASSERT_TRUE(stub_->MemberHeartbeat(&ctx, hb, &hr).ok());
  EXPECT_EQ(hr.tree_state(), v1::TREE_ACTIVE);
  EXPECT_EQ(hr.root_switch(), "spine1");
  EXPECT_EQ(hr.generation(), 2u);
  // The resources of the old root are free again.
  EXPECT_EQ(manager_->ResourceUsage().live_trees, 1u);

  // Now leaf01 loses its other uplink too: no spine reaches both leaves.
  ASSERT_TRUE(Beat(stub_.get(), file_, "leaf01", {"up0", "up1"}).ok());
  t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_FAILED);
  EXPECT_NE(t.reason().find("cannot move"), std::string::npos) << t.reason();
  EXPECT_TRUE(Eventually([&] { return agents_["spine1"]->trees().empty(); }));
  EXPECT_EQ(manager_->ResourceUsage().qpns, 0u);
}

TEST_F(AmDaemonTest, CongestedLinkMovesTheTreeByPolicyOnlyAtTheSeverityAndOncePerHoldDown) {
  AmOptions o;
  o.move_on_congestion_severity = 2;
  o.tree_move_holddown_ms = 600000;
  Boot(o);
  auto results = JoinHosts("hot", {"h00_0", "h01_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  ASSERT_EQ(GetTree(id).root_switch(), "spine0");
  ASSERT_TRUE(Beat(stub_.get(), file_, "leaf00", {}, {{"up0", 1}}).ok());
  EXPECT_EQ(GetTree(id).root_switch(), "spine0") << "severity 1 is below the policy";
  ASSERT_TRUE(Beat(stub_.get(), file_, "leaf00", {}, {{"up0", 2}}).ok());
  v1::Tree t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_ACTIVE);
  EXPECT_EQ(t.root_switch(), "spine1");
  EXPECT_NE(t.last_move_reason().find("congested"), std::string::npos) << t.last_move_reason();
  // The new path gets congested too: held down, the tree stays and runs.
  ASSERT_TRUE(Beat(stub_.get(), file_, "leaf00", {}, {{"up0", 2}, {"up1", 3}}).ok());
  t = GetTree(id);
  EXPECT_EQ(t.state(), v1::TREE_ACTIVE);
  EXPECT_EQ(t.root_switch(), "spine1");
  EXPECT_EQ(t.moves(), 1u);
}

TEST_F(AmDaemonTest, LostRootSwitchIsReplacedByAnotherSpine) {
  AmOptions o;
  o.switch_heartbeat_timeout_ms = 300;
  Boot(o);
  std::atomic<bool> spine0_silent{false};
  auto stub = stub_.get();
  Repeater beats([&, stub] {
    for (const char* sw : {"leaf00", "leaf01", "spine0", "spine1"}) {
      if (spine0_silent && std::string(sw) == "spine0") continue;
      grpc::ClientContext ctx;
      v1::SwitchHeartbeatRequest hb;
      hb.set_switch_name(sw);
      v1::SwitchHeartbeatResponse hr;
      stub->SwitchHeartbeat(&ctx, hb, &hr);
    }
  });
  auto results = JoinHosts("lost", {"h00_0", "h01_0"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  ASSERT_EQ(GetTree(id).root_switch(), "spine0");
  spine0_silent = true;
  ASSERT_TRUE(Eventually([&] { return GetTree(id).root_switch() == "spine1"; }));
  EXPECT_EQ(GetTree(id).state(), v1::TREE_ACTIVE);
  EXPECT_TRUE(Eventually([&] { return agents_["spine1"]->trees().count(id) == 1; }));
  spine0_silent = false;
}

TEST_F(AmDaemonTest, ConfigureFailureRollsBackAndFailsEveryMemberWithTheCause) {
  Boot();
  const auto before = manager_->ResourceUsage();
  agents_["leaf01"]->FailConfigure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "maps are full"));
  auto results = JoinHosts("bad", {"h00_0", "h01_0", "h00_1"});
  for (const auto& r : results) {
    ASSERT_FALSE(r.status.ok());
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(r.status.error_message().find("on switch leaf01 failed"), std::string::npos)
        << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("maps are full"), std::string::npos);
  }
  // The switches that took the tree dropped it again.
  ASSERT_EQ(agents_["spine0"]->configures().size(), 1u);
  const uint32_t id = agents_["spine0"]->configures()[0].tree_id();
  EXPECT_TRUE(agents_["spine0"]->trees().empty());
  EXPECT_TRUE(agents_["leaf00"]->trees().empty());
  EXPECT_EQ(agents_["leaf00"]->removes(), std::vector<uint32_t>{id});
  EXPECT_EQ(GetTree(id).state(), v1::TREE_FAILED);
  const auto after = manager_->ResourceUsage();
  EXPECT_EQ(after.qpns, before.qpns);
  EXPECT_EQ(after.free_slots, before.free_slots);
  EXPECT_EQ(after.tree_ids, before.tree_ids);
}

TEST_F(AmDaemonTest, AgentRestartReconcilesWantedAndUnwantedTrees) {
  Boot();
  auto results = JoinHosts("re", {"h00_0", "h00_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  ASSERT_EQ(agents_["leaf00"]->configures().size(), 1u);
  ASSERT_TRUE(Register("leaf00", {id, 999}).ok());
  ASSERT_TRUE(Eventually(
      [&] { return agents_["leaf00"]->configures().size() == 2 && !agents_["leaf00"]->removes().empty(); }));
  const auto configs = agents_["leaf00"]->configures();
  EXPECT_EQ(configs[1].SerializeAsString(), configs[0].SerializeAsString());
  EXPECT_EQ(agents_["leaf00"]->removes(), std::vector<uint32_t>{999});
  EXPECT_EQ(GetTree(id).state(), v1::TREE_ACTIVE);
}

TEST_F(AmDaemonTest, OperatorReservesATreeMembersJoinItAndOperatorDestroysIt) {
  Boot();
  v1::CreateTreeRequest c;
  c.set_job_id("op");
  c.add_hosts("h00_2");
  c.add_hosts("h01_3");
  c.set_pool_size(64);
  v1::CreateTreeResponse cr;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateTree(&ctx, c, &cr).ok());
  }
  EXPECT_EQ(cr.tree().state(), v1::TREE_PENDING);
  EXPECT_EQ(cr.tree().members_size(), 2);
  EXPECT_FALSE(cr.tree().members(0).joined());
  auto results = JoinHosts("op", {"h00_2", "h01_3"});
  for (const auto& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.assignment.tree_id(), cr.tree().tree_id());
    EXPECT_EQ(r.assignment.pool_size(), 64u);
  }
  v1::Tree t = GetTree(cr.tree().tree_id());
  EXPECT_EQ(t.state(), v1::TREE_ACTIVE);
  EXPECT_EQ(t.joined(), 2u);
  EXPECT_TRUE(t.members(1).joined());
  EXPECT_EQ(t.members(1).switch_port(), "h3");

  // Statistics fan out to the tree's switches.
  {
    grpc::ClientContext ctx;
    v1::AmGetStatsRequest sr;
    sr.set_tree_id(t.tree_id());
    v1::AmGetStatsResponse resp;
    ASSERT_TRUE(stub_->GetStats(&ctx, sr, &resp).ok());
    ASSERT_EQ(resp.switches_size(), 3);
    EXPECT_EQ(resp.errors_size(), 0);
    std::set<std::string> names;
    for (const auto& s : resp.switches()) {
      names.insert(s.switch_name());
      ASSERT_EQ(s.trees_size(), 1);
      EXPECT_EQ(s.trees(0).tree_id(), t.tree_id());
    }
    EXPECT_EQ(names, (std::set<std::string>{"spine0", "leaf00", "leaf01"}));
  }
  {
    grpc::ClientContext ctx;
    v1::DestroyTreeRequest d;
    d.set_tree_id(t.tree_id());
    d.set_reason("maintenance");
    v1::DestroyTreeResponse dr;
    ASSERT_TRUE(stub_->DestroyTree(&ctx, d, &dr).ok());
  }
  t = GetTree(t.tree_id());
  EXPECT_EQ(t.state(), v1::TREE_DESTROYED);
  EXPECT_EQ(t.reason(), "destroyed by operator: maintenance");
  EXPECT_EQ(agents_["spine0"]->removes(), std::vector<uint32_t>{t.tree_id()});
  grpc::ClientContext ctx;
  v1::DestroyTreeRequest d;
  d.set_tree_id(t.tree_id());
  v1::DestroyTreeResponse dr;
  EXPECT_EQ(stub_->DestroyTree(&ctx, d, &dr).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(AmDaemonTest, IncompleteGroupTimesOutOverGrpc) {
  Boot();
  auto results = JoinAll({MakeJoin("late", 0, 2, "h00_0", /*timeout_ms=*/200)});
  EXPECT_EQ(results[0].status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(results[0].status.error_message().find("missing ranks 1"), std::string::npos);
}

TEST_F(AmDaemonTest, NoPossibleTreeFailsEveryMemberWithTheReason) {
  Boot();
  for (const char* spine : {"spine0", "spine1"}) {
    auto r = testing::MakeRegistration(file_, spine, agents_[spine]->address());
    r.mutable_capabilities()->clear_collectives();
    r.mutable_capabilities()->add_collectives(v1::ALLREDUCE);
    grpc::ClientContext ctx;
    v1::RegisterSwitchResponse resp;
    ASSERT_TRUE(stub_->RegisterSwitch(&ctx, r, &resp).ok());
  }
  std::vector<v1::JoinGroupRequest> reqs = {MakeJoin("nb", 0, 2, "h00_0"), MakeJoin("nb", 1, 2, "h01_0")};
  for (auto& r : reqs) r.add_collectives(v1::BROADCAST);
  auto results = JoinAll(reqs);
  for (const auto& r : results) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(r.status.error_message().find("no spine can be their root"), std::string::npos)
        << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("lacks collective BROADCAST"), std::string::npos);
  }
}

TEST_F(AmDaemonTest, OperatorViewsAndEventReplay) {
  Boot();
  auto results = JoinHosts("ev", {"h00_0", "h00_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok());
  {
    grpc::ClientContext ctx;
    v1::ListSwitchesResponse resp;
    ASSERT_TRUE(stub_->ListSwitches(&ctx, v1::ListSwitchesRequest(), &resp).ok());
    ASSERT_EQ(resp.switches_size(), 4);
    for (const auto& s : resp.switches()) {
      EXPECT_TRUE(s.alive());
      EXPECT_EQ(s.agent_address(), agents_[s.name()]->address());
      if (s.name() == "leaf00") {
        EXPECT_EQ(s.tree_ids_size(), 1);
        EXPECT_EQ(s.capabilities().free_slots(), 4096u - 256u);
      }
    }
  }
  {
    grpc::ClientContext ctx;
    v1::GetTopologyResponse resp;
    ASSERT_TRUE(stub_->GetTopology(&ctx, v1::GetTopologyRequest(), &resp).ok());
    EXPECT_EQ(resp.nodes_size(), 4 + 8);
    EXPECT_EQ(resp.links_size(), 8 + 4);
    for (const auto& l : resp.links()) EXPECT_TRUE(l.up()) << l.a_node() << "-" << l.b_node();
  }
  {
    grpc::ClientContext ctx;
    v1::WatchEventsRequest w;
    w.set_replay(true);
    w.set_stop_after_replay(true);
    auto reader = stub_->WatchEvents(&ctx, w);
    v1::Event e;
    std::vector<std::string> kinds;
    while (reader->Read(&e)) kinds.push_back(e.kind());
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "switch_registered"), 4);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "tree_active"), 1);
  }
  {
    // A live watcher sees a new event.
    grpc::ClientContext ctx;
    v1::WatchEventsRequest w;
    auto reader = stub_->WatchEvents(&ctx, w);
    v1::DestroyTreeRequest d;
    d.set_tree_id(results[0].assignment.tree_id());
    std::thread destroyer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      grpc::ClientContext dctx;
      v1::DestroyTreeResponse dr;
      stub_->DestroyTree(&dctx, d, &dr);
    });
    v1::Event e;
    bool seen = false;
    while (!seen && reader->Read(&e)) seen = e.kind() == "tree_destroyed";
    destroyer.join();
    EXPECT_TRUE(seen);
    ctx.TryCancel();
  }
}

TEST_F(AmDaemonTest, SwitchHeartbeatReportingAnUnwantedTreeGetsItRemoved) {
  Boot();
  auto results = JoinHosts("keep", {"h00_0", "h00_1"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const uint32_t id = results[0].assignment.tree_id();
  grpc::ClientContext ctx;
  v1::SwitchHeartbeatRequest hb;
  hb.set_switch_name("leaf00");
  hb.add_live_tree_ids(id);   // wanted: stays
  hb.add_live_tree_ids(777);  // stale: removed
  v1::SwitchHeartbeatResponse hr;
  ASSERT_TRUE(stub_->SwitchHeartbeat(&ctx, hb, &hr).ok());
  EXPECT_FALSE(hr.reregister());
  ASSERT_TRUE(Eventually([&] { return !agents_["leaf00"]->removes().empty(); }));
  EXPECT_EQ(agents_["leaf00"]->removes(), std::vector<uint32_t>{777});
  EXPECT_EQ(GetTree(id).state(), v1::TREE_ACTIVE);
}

TEST_F(AmDaemonTest, MemberLeavingAPendingGroupEndsOnlyItsOwnWait) {
  Boot();
  std::vector<JoinResult> waiting;
  std::thread t([&] { waiting = JoinAll({MakeJoin("pend", 0, 3, "h00_0")}); });
  ASSERT_TRUE(Eventually([&] {
    grpc::ClientContext ctx;
    v1::GetTreeRequest g;
    g.set_job_id("pend");
    v1::GetTreeResponse resp;
    return stub_->GetTree(&ctx, g, &resp).ok() && resp.tree().joined() == 1;
  }));
  grpc::ClientContext ctx;
  v1::LeaveGroupRequest leave;
  leave.set_job_id("pend");
  leave.set_rank(0);
  v1::LeaveGroupResponse lr;
  ASSERT_TRUE(stub_->LeaveGroup(&ctx, leave, &lr).ok());
  t.join();
  EXPECT_EQ(waiting[0].status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(waiting[0].status.error_message().find("left the group before the tree was built"),
            std::string::npos);
  for (const auto& [name, agent] : agents_) EXPECT_TRUE(agent->configures().empty());
}

TEST_F(AmDaemonTest, GetStatsListsSwitchesThatDoNotAnswer) {
  AmOptions o;
  o.switch_rpc_timeout_ms = 500;
  Boot(o);
  auto results = JoinHosts("st", {"h00_0", "h01_0"});
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  agents_["leaf01"]->Shutdown();
  grpc::ClientContext ctx;
  v1::AmGetStatsRequest sr;
  sr.set_tree_id(results[0].assignment.tree_id());
  v1::AmGetStatsResponse resp;
  ASSERT_TRUE(stub_->GetStats(&ctx, sr, &resp).ok());
  EXPECT_EQ(resp.switches_size(), 2);
  ASSERT_EQ(resp.errors_size(), 1);
  EXPECT_EQ(resp.errors(0).rfind("switch leaf01: ", 0), 0u) << resp.errors(0);
}

// 127.0.0.1 with a port that was free a moment ago.
std::string FreeLoopbackAddress() {
  int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  close(sock);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// incamd as a child process whose stdout and stderr go to a file.
class Incamd {
 public:
  explicit Incamd(const std::vector<std::string>& args) {
    char dir[] = "/tmp/incamd_test_XXXXXX";
    dir_ = mkdtemp(dir);
    output_ = dir_ + "/output";
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      // Plaintext: these tests are about the command line, config and signals.
      std::vector<char*> argv{const_cast<char*>("incamd"), const_cast<char*>("--insecure")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(INC_INCAMD_PATH, argv.data());
      _exit(127);
    }
  }
  ~Incamd() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::remove(output_.c_str());
    rmdir(dir_.c_str());
  }
  // The exit code (-1 if it died of a signal).
  int Wait() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void Signal(int sig) { kill(pid_, sig); }
  int Stop(int sig) {
    Signal(sig);
    return Wait();
  }
  bool Running() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  std::string Output() const { return ReadWholeFile(output_); }
  // Waits up to 10 s for text in the output.
  bool WaitFor(const std::string& text) const {
    for (int i = 0; i < 1000; ++i) {
      if (Output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  std::string dir_, output_;
  pid_t pid_ = -1;
};

std::string WriteTempFile(const std::string& content) {
  char path[] = "/tmp/incamd_config_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

TEST(IncamdBinaryTest, VersionFlagPrintsTheProjectVersionAndExitsZero) {
  Incamd am({"--version"});
  EXPECT_EQ(am.Wait(), 0);
  EXPECT_EQ(am.Output(), std::string("incamd ") + kVersion + "\n");
}

TEST(IncamdBinaryTest, BadCommandLinesAndConfigsExitTwoNamingTheProblem) {
  const std::string topology = "\"topologyFile\": \"" INC_AM_EXAMPLES "/topology.json\"";
  struct Case {
    const char* name;
    std::string config;  // AmConfig JSON, empty: no --config
    std::vector<std::string> args;
    std::string words;  // in the output
  };
  const Case cases[] = {
      {"listen port above 65535",
       "",
       {"--listen", ":70000", "--topology", INC_AM_EXAMPLES "/topology.json"},
       "listen: \":70000\": port 70000 is not in 0..65535"},
      {"listen port above 65535 in the file",
       "{" + topology + ", \"listen\": \"0.0.0.0:99999\"}",
       {},
       "port 99999 is not in 0..65535"},
      {"pool 2^32-1",
       "{" + topology + ", \"defaultPoolSize\": 4294967295}",
       {},
       "default_pool_size 4294967295 is not in 1..65535"},
      {"member timeout shorter than its interval",
       "{" + topology + ", \"memberHeartbeatTimeoutMs\": 500, \"memberHeartbeatIntervalMs\": 1000}",
       {},
       "member_heartbeat_timeout_ms 500 is shorter than two heartbeats"},
      {"unknown flag", "", {"--bogus"}, "--bogus"},
      {"log format", "", {"--log-format", "xml"}, "--log-format"},
      {"unknown config field", "{" + topology + ", \"poolSize\": 4}", {}, "poolSize"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    std::string path;
    if (!c.config.empty()) {
      path = WriteTempFile(c.config);
      args.insert(args.begin(), {"--config", path});
    }
    Incamd am(args);
    EXPECT_EQ(am.Wait(), 2) << c.name << "\n" << am.Output();
    EXPECT_NE(am.Output().find(c.words), std::string::npos) << c.name << ": " << am.Output();
    if (!path.empty()) std::remove(path.c_str());
  }
}

// SIGHUP during service: the log settings change, everything else is
// refused with a line, an invalid file changes nothing, the AM keeps
// serving; then SIGTERM ends a waiting JoinGroup with UNAVAILABLE (an
// answer, not a cut connection) and exits 0.
TEST(IncamdBinaryTest, SighupReloadsLogSettingsRefusesTheRestAndSigtermAnswersWaitingCalls) {
  const std::string listen = FreeLoopbackAddress();
  const std::string head =
      "{\"topologyFile\": \"" INC_AM_EXAMPLES "/topology.json\", \"listen\": \"" + listen + "\"";
  const std::string path = WriteTempFile(head + "}");
  Incamd am({"--config", path});
  auto stub =
      v1::AggregationManager::NewStub(grpc::CreateChannel(listen, grpc::InsecureChannelCredentials()));
  auto serves = [&] {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetTopologyResponse topo;
    return stub->GetTopology(&ctx, v1::GetTopologyRequest(), &topo).ok() && topo.nodes_size() == 7;
  };
  ASSERT_TRUE(serves()) << am.Output();

  struct Step {
    const char* name;
    std::string config;
    std::string logged;
  };
  const Step steps[] = {
      {"nothing changed", head + "}", "I incamd: SIGHUP: config " + path + " reread, nothing changed"},
      {"log level", head + ", \"logLevel\": \"debug\"}", "SIGHUP: log_level \"\" -> \"debug\": applied"},
      {"a timeout applies", head + ", \"logLevel\": \"debug\", \"memberHeartbeatTimeoutMs\": 9000}",
       "I incamd: SIGHUP: member_heartbeat_timeout_ms 0 -> 9000: applied"},
      {"an interval needs a restart",
       head + ", \"logLevel\": \"debug\", \"memberHeartbeatTimeoutMs\": 9000, \"memberHeartbeatIntervalMs\": "
              "2000}",
       "W incamd: SIGHUP: member_heartbeat_interval_ms 0 -> 2000: not applied, needs a restart of incamd"},
      // Valid as a file (300 >= 2 x 100), but the interval stays 1000 until
      // a restart, and a 300 ms timeout would fail every member.
      {"a timeout too short for the running interval changes nothing",
       head + ", \"logLevel\": \"debug\", \"memberHeartbeatTimeoutMs\": 300, \"memberHeartbeatIntervalMs\": "
              "100}",
       "E incamd: SIGHUP: nothing applied, the running settings stay: member_heartbeat_timeout_ms"},
      {"an invalid file changes nothing", head + ", \"logLevel\": \"loud\"}",
       "E incamd: SIGHUP: config " + path + " not reloaded, the running one stays: log_level \"loud\""},
      {"json lines", head + ", \"logLevel\": \"debug\", \"logFormat\": \"json\"}",
       "I incamd: SIGHUP: log_format \"\" -> \"json\": applied"},
  };
  for (const Step& s : steps) {
    std::ofstream(path, std::ios::trunc) << s.config;
    am.Signal(SIGHUP);
    EXPECT_TRUE(am.WaitFor(s.logged)) << s.name << ": no \"" << s.logged << "\" in\n" << am.Output();
    EXPECT_TRUE(am.Running()) << s.name;
    EXPECT_TRUE(serves()) << s.name;
  }

  // A member waiting for the rest of its group when SIGTERM comes.
  grpc::Status join_status;
  std::thread member([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::JoinGroupResponse response;
    join_status = stub->JoinGroup(&ctx, testing::MakeJoin("j", 0, 2, "w1", 60000), &response);
  });
  ASSERT_TRUE(am.WaitFor("group_started")) << am.Output();
  EXPECT_EQ(am.Stop(SIGTERM), 0) << am.Output();
  member.join();
  EXPECT_EQ(join_status.error_code(), grpc::StatusCode::UNAVAILABLE) << join_status.error_message();
  EXPECT_NE(join_status.error_message().find("shutting down"), std::string::npos)
      << join_status.error_message();
  EXPECT_NE(am.Output().find(R"("message":"SIGTERM: shutting down; calls in flight get up to )"),
            std::string::npos)
      << am.Output();
  std::remove(path.c_str());
}

// The real incamd binary: serves the topology over gRPC, exits 0 on SIGTERM.
TEST(IncamdBinaryTest, ServesAndExitsCleanlyOnSigterm) {
  const std::string listen = FreeLoopbackAddress();

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(INC_INCAMD_PATH, "incamd", "--insecure", "--config", INC_AM_EXAMPLES "/am.json", "--listen",
          listen.c_str(), "--log-level", "warn", "--state-path", "", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto stub =
      v1::AggregationManager::NewStub(grpc::CreateChannel(listen, grpc::InsecureChannelCredentials()));
  v1::GetTopologyResponse topo;
  grpc::Status s;
  {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // until incamd listens
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    s = stub->GetTopology(&ctx, v1::GetTopologyRequest(), &topo);
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(topo.nodes_size(), 3 + 4);
  // An unknown switch cannot register.
  {
    grpc::ClientContext ctx;
    v1::RegisterSwitchRequest r;
    r.set_switch_name("intruder");
    r.set_agent_address("127.0.0.1:1");
    v1::RegisterSwitchResponse resp;
    EXPECT_EQ(stub->RegisterSwitch(&ctx, r, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::printf("incamd exited %.0f ms after SIGTERM\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

// A state file or folder that group or others may access holds the job
// secret and every tree's key where they can read it: incamd refuses to
// start (exit 2, like every configuration error), naming the path, its mode
// and the fix; a private one of the same content starts.
TEST(IncamdBinaryTest, StateFileOrFolderOthersMayReadIsRefusedWithExitTwo) {
  struct Case {
    const char* name;
    mode_t folder_mode;
    mode_t file_mode;  // 0: no file yet
    bool starts;
    std::string words;  // with FOLDER and FILE replaced
  };
  const Case cases[] = {
      {"private folder, no file yet", 0700, 0, true, "state: FILE"},
      {"private folder and file", 0700, 0600, true, "state: FILE"},
      {"file others may read", 0700, 0644, false, "file FILE has mode 0644: group or others may read"},
      {"file the group may read", 0700, 0640, false, "chmod 600 FILE"},
      {"folder others may list", 0755, 0600, false,
       "folder FOLDER has mode 0755: group or others may access"},
      {"folder the group may enter", 0710, 0, false, "chmod 700 FOLDER"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    char tmpl[] = "/tmp/incamd_state_XXXXXX";
    const std::string folder = mkdtemp(tmpl);
    const std::string file = folder + "/incamd.db";
    if (c.file_mode) {
      // An empty file is taken as new (made 0600); a real state file is not.
      auto store = Store::Open(file);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      store->reset();
      ASSERT_EQ(chmod(file.c_str(), c.file_mode), 0);
    }
    ASSERT_EQ(chmod(folder.c_str(), c.folder_mode), 0);
    std::string words = c.words;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"FOLDER", folder}, {"FILE", file}})
      for (size_t at; (at = words.find(from)) != std::string::npos;) words.replace(at, from.size(), to);
    Incamd am(
        {"--topology", INC_AM_EXAMPLES "/topology.json", "--listen", "127.0.0.1:0", "--state-path", file});
    if (c.starts) {
      EXPECT_TRUE(am.WaitFor(words)) << am.Output();
      EXPECT_EQ(am.Stop(SIGTERM), 0) << am.Output();
      struct stat st {};
      ASSERT_EQ(stat(file.c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 0777, 0600u);
    } else {
      EXPECT_EQ(am.Wait(), 2) << am.Output();
      EXPECT_NE(am.Output().find(words), std::string::npos) << am.Output();
    }
    std::filesystem::remove_all(folder);
  }
}

TEST(IncamdBinaryTest, RejectsABadTopologyFileWithExitCode2) {
  char path[] = "/tmp/am_badtopo_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string bad =
      R"({"switches":[{"name":"l","kind":"leaf"}],"links":[{"a":"l","aPort":"x","b":"ghost","bPort":"y"}]})";
  ASSERT_EQ(write(fd, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
  close(fd);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(INC_INCAMD_PATH, "incamd", "--insecure", "--topology", path, "--listen", "127.0.0.1:0",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  unlink(path);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace inc::am
