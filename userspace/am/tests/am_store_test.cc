// The AM's state store: what is written comes back after a reopen, a crash
// before COMMIT leaves the previous state, files of another schema version
// are refused; and a Manager restarted on a store keeps its active trees (and
// dismantles those whose members are gone).
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "am/convert.h"
#include "am/manager.h"
#include "am/store.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"

namespace inc::am {
namespace {

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/am_store_XXXXXX";
    path_ = mkdtemp(dir);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A two-level tree: leaf00 (two members) and leaf01 (one) under spine0.
StoredTree SampleTree(uint32_t id, const std::string& job) {
  StoredTree t;
  t.id = id;
  t.key = 0xC0FFEE00 + id;
  t.job = job;
  t.world = 3;
  t.state = TreeState::kActive;
  t.generation = 2;
  t.req.pool_size = 64;
  t.req.dtype_mask = 0x6;
  t.plan.pool_size = 64;
  t.plan.elems_per_packet = 768;
  t.plan.dtype_mask = 0x6;
  t.plan.op_mask = 0x3;
  t.plan.coll_mask = 0xF;
  const char* hosts[] = {"h00_0", "h00_1", "h01_0"};
  for (uint32_t r = 0; r < 3; ++r) {
    StoredMember m;
    m.joined = true;
    m.spec.host = hosts[r];
    m.spec.ip = *Ipv4::Parse("10.0.0." + std::to_string(r + 1));
    m.spec.mac = *Mac::Parse("02:00:00:00:00:0" + std::to_string(r + 1));
    m.spec.qpn = 0x1000 + r;
    m.spec.rkey = 77;
    m.spec.va_base = 0x7f0000000000ull + r;
    m.spec.slot_stride = 4096;
    m.spec.transport = 1;
    t.members.push_back(m);
  }
  t.plan.member_index_of_rank = {0, 1, 2};
  t.plan.member_slot = {{1, 0}, {1, 1}, {2, 0}};
  PlanSwitch root{"spine0", TreeRole::kRoot, "", "", "", 0, {}};
  root.children = {{true, 0, "leaf00", "dn00", "up0", 0, 2}, {true, 0, "leaf01", "dn01", "up0", 2, 3}};
  PlanSwitch l0{"leaf00", TreeRole::kLeaf, "spine0", "up0", "dn00", 0, {}};
  l0.children = {{false, 0, "h00_0", "h0", "", 0, 1}, {false, 1, "h00_1", "h1", "", 1, 2}};
  PlanSwitch l1{"leaf01", TreeRole::kLeaf, "spine0", "up0", "dn01", 1, {}};
  l1.children = {{false, 2, "h01_0", "h0", "", 2, 3}};
  t.plan.switches = {root, l0, l1};
  t.alloc.per_switch["spine0"] = {128, {0x100, 0x101}, 0};
  t.alloc.per_switch["leaf00"] = {0, {0x100, 0x101}, 0x102};
  t.alloc.per_switch["leaf01"] = {64, {0x100}, 0x101};
  t.configs["leaf00"] = std::string("\x08\x07\x10\x00", 4);  // bytes, NULs included
  t.created_ms = 1000;
  t.activated_ms = 2000;
  return t;
}

void ExpectSameTree(const StoredTree& a, const StoredTree& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.world, b.world);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_EQ(a.req.pool_size, b.req.pool_size);
  EXPECT_EQ(a.req.dtype_mask, b.req.dtype_mask);
  EXPECT_EQ(a.plan.elems_per_packet, b.plan.elems_per_packet);
  EXPECT_EQ(a.plan.coll_mask, b.plan.coll_mask);
  ASSERT_EQ(a.members.size(), b.members.size());
  for (size_t r = 0; r < a.members.size(); ++r) {
    EXPECT_EQ(a.members[r].joined, b.members[r].joined);
    EXPECT_EQ(a.members[r].spec.host, b.members[r].spec.host);
    EXPECT_EQ(a.members[r].spec.ip.ToString(), b.members[r].spec.ip.ToString());
    EXPECT_EQ(a.members[r].spec.mac.ToString(), b.members[r].spec.mac.ToString());
    EXPECT_EQ(a.members[r].spec.qpn, b.members[r].spec.qpn);
    EXPECT_EQ(a.members[r].spec.va_base, b.members[r].spec.va_base);
    EXPECT_EQ(a.members[r].spec.transport, b.members[r].spec.transport);
    EXPECT_EQ(a.plan.member_slot[r].switch_index, b.plan.member_slot[r].switch_index);
    EXPECT_EQ(a.plan.member_slot[r].rank_at_switch, b.plan.member_slot[r].rank_at_switch);
  }
  EXPECT_EQ(a.plan.member_index_of_rank, b.plan.member_index_of_rank);
  ASSERT_EQ(a.plan.switches.size(), b.plan.switches.size());
  for (size_t i = 0; i < a.plan.switches.size(); ++i) {
    const PlanSwitch &x = a.plan.switches[i], &y = b.plan.switches[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.parent, y.parent);
    EXPECT_EQ(x.parent_port, y.parent_port);
    EXPECT_EQ(x.parent_peer_port, y.parent_peer_port);
    EXPECT_EQ(x.rank_at_parent, y.rank_at_parent);
    ASSERT_EQ(x.children.size(), y.children.size());
    for (size_t c = 0; c < x.children.size(); ++c) {
      EXPECT_EQ(x.children[c].is_switch, y.children[c].is_switch);
      EXPECT_EQ(x.children[c].rank, y.children[c].rank);
      EXPECT_EQ(x.children[c].peer, y.children[c].peer);
      EXPECT_EQ(x.children[c].port, y.children[c].port);
      EXPECT_EQ(x.children[c].peer_port, y.children[c].peer_port);
      EXPECT_EQ(x.children[c].member_lo, y.children[c].member_lo);
      EXPECT_EQ(x.children[c].member_hi, y.children[c].member_hi);
    }
    const SwitchAlloc &p = a.alloc.per_switch.at(x.name), &q = b.alloc.per_switch.at(x.name);
    EXPECT_EQ(p.slot_base, q.slot_base);
    EXPECT_EQ(p.child_qpns, q.child_qpns);
    EXPECT_EQ(p.parent_qpn, q.parent_qpn);
  }
  EXPECT_EQ(a.configs, b.configs);
  EXPECT_EQ(a.activated_ms, b.activated_ms);
}

TEST(StoreTest, WhatIsWrittenComesBackAfterReopening) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  const StoredTree tree = SampleTree(7, "job-a");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->PutSwitch({"leaf00", "10.1.0.1:50061", 4096}).ok());
    ASSERT_TRUE((*store)->PutSwitch({"spine0", "10.1.0.9:50061", 8192}).ok());
    ASSERT_TRUE((*store)->PutSwitch({"leaf00", "10.1.0.2:50061", 4096}).ok());  // moved agent
    Status s = (*store)->PutTree(tree, 8);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->switches.size(), 2u);
  EXPECT_EQ(state->switches[0].name, "leaf00");
  EXPECT_EQ(state->switches[0].agent_address, "10.1.0.2:50061");
  EXPECT_EQ(state->switches[1].slot_capacity, 8192u);
  EXPECT_EQ(state->next_tree_id, 8u);
  ASSERT_EQ(state->trees.size(), 1u);
  ExpectSameTree(tree, state->trees[0]);

  // A tree written again replaces its rows; a deleted one is gone.
  StoredTree moved = tree;
  moved.generation = 3;
  moved.plan.switches[0].children.pop_back();
  moved.plan.switches.pop_back();
  moved.alloc.per_switch.erase("leaf01");
  moved.alloc.per_switch["spine0"].child_qpns.pop_back();
  ASSERT_TRUE((*store)->PutTree(moved, 8).ok());
  ASSERT_TRUE((*store)->PutTree(SampleTree(9, "job-b"), 10).ok());
  ASSERT_TRUE((*store)->DeleteTree(9, 10).ok());
  state = (*store)->Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->trees.size(), 1u);
  ExpectSameTree(moved, state->trees[0]);
  EXPECT_EQ(state->next_tree_id, 10u);
}

// The job secret is made once and read back after a reopen, so that job
// credentials issued before an AM restart stay good after it.
TEST(StoreTest, JobSecretIsMadeOnceAndKeptAcrossReopening) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  int made = 0;
  auto make = [&]() -> Expected<std::string> { return std::string(64, static_cast<char>('a' + made++)); };
  std::string first;
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto secret = (*store)->JobSecret(make);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    first = *secret;
    auto again = (*store)->JobSecret(make);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, first);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  auto reopened = (*store)->JobSecret(make);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(*reopened, first);
  EXPECT_EQ(made, 1);
  auto fails = []() -> Expected<std::string> { return Internal("no randomness"); };
  auto fresh = Store::Open("");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->JobSecret(fails).status().code(), Code::kInternal);
}

TEST(StoreTest, InMemoryStoreStartsEmpty) {
  auto store = Store::Open("");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->PutTree(SampleTree(1, "j"), 2).ok());
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->trees.size(), 1u);
}

// A process that dies inside a transaction (after its writes, before
// COMMIT) leaves exactly the state of the last commit.
TEST(StoreTest, CrashBeforeCommitLeavesThePreviousState) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutTree(SampleTree(3, "kept"), 4).ok());
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = Store::Open(path);
    if (!store.ok()) _exit(2);
    (*store)->SetBeforeCommitHookForTest([] { _exit(0); });
    StoredTree changed = SampleTree(3, "kept");
    changed.generation = 99;
    (void)(*store)->PutTree(changed, 50);
    _exit(3);  // not reached: the hook exits first
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child did not reach the commit";
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->trees.size(), 1u);
  EXPECT_EQ(state->trees[0].generation, 2u);
  EXPECT_EQ(state->next_tree_id, 4u);
  ExpectSameTree(SampleTree(3, "kept"), state->trees[0]);
}

// A failure inside the transaction rolls all of it back.
TEST(StoreTest, FailedWriteChangesNothing) {
  TempDir dir;
  auto store = Store::Open(dir.File("am.db"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutTree(SampleTree(3, "a"), 4).ok());
  StoredTree broken = SampleTree(5, "b");
  broken.alloc.per_switch.erase("leaf01");  // written after the tree and member rows
  Status s = (*store)->PutTree(broken, 6);
  EXPECT_EQ(s.code(), Code::kInternal);
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->trees.size(), 1u);
  EXPECT_EQ(state->trees[0].id, 3u);
  EXPECT_EQ(state->next_tree_id, 4u);
}

TEST(StoreTest, OtherSchemaVersionsAndForeignFilesAreRefused) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x(a); PRAGMA user_version=99", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("state store " + path +
                                          ": schema version 99, this incamd reads version 1"),
            std::string::npos)
      << store.status().message();

  const std::string other = dir.File("other.db");
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x(a)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  store = Store::Open(other);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not an incamd state file"), std::string::npos)
      << store.status().message();

  const std::string text = dir.File("text.db");
  FILE* f = fopen(text.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("this is not a database, just a long enough line of text to look like a header", f);
  fclose(f);
  store = Store::Open(text);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition) << store.status().ToString();
}

TEST(StoreTest, SecondOpenerOfAFileIsRefused) {
  TempDir dir;
  auto first = Store::Open(dir.File("am.db"));
  ASSERT_TRUE(first.ok());
  auto second = Store::Open(dir.File("am.db"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_NE(second.status().message().find("in use by another process"), std::string::npos)
      << second.status().message();
}

// ------------------------------------------------------- Manager restarts

class ManagerRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = testing::MakeFabric(2, 1, 2);  // leaf00, leaf01, spine0; hosts hLL_i
    for (const auto& sw : file_.switches()) {
      auto a = std::make_unique<testing::RecordingAgent>(sw.name());
      a->Start();
      agents_[sw.name()] = std::move(a);
    }
    path_ = dir_.File("am.db");
  }

  std::unique_ptr<Manager> StartManager(AmOptions opts) {
    auto store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    auto m = std::make_unique<Manager>(opts, *TopologyFromProto(file_), std::move(*store));
    Status s = m->Restore();
    EXPECT_TRUE(s.ok()) << s.ToString();
    m->Start();
    return m;
  }

  void Register(Manager* m, const std::vector<uint32_t>& live_trees) {
    for (auto& [name, agent] : agents_) {
      auto reg = testing::MakeRegistration(file_, name, agent->address());
      for (uint32_t id : live_trees) reg.add_live_tree_ids(id);
      auto r = m->RegisterSwitch(*RegistrationFromProto(reg));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  // Joins ranks on h00_0, h00_1, h01_0, h01_1: a two-level tree.
  std::vector<Assignment> RunJob(Manager* m, const std::string& job) {
    const std::vector<std::string> hosts = {"h00_0", "h00_1", "h01_0", "h01_1"};
    std::vector<std::future<Expected<Assignment>>> joins;
    for (uint32_t r = 0; r < hosts.size(); ++r)
      joins.push_back(std::async(std::launch::async, [=] {
        return m->JoinGroup(
            *JoinFromProto(testing::MakeJoin(job, r, static_cast<uint32_t>(hosts.size()), hosts[r])),
            nullptr);
      }));
    std::vector<Assignment> out;
    for (auto& j : joins) {
      auto a = j.get();
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      if (a.ok()) out.push_back(*a);
    }
    return out;
  }

  // Waits until cond() or 5 s.
  template <typename F>
  bool Eventually(F cond) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return cond();
  }

  v1::TopologyFile file_;
  std::map<std::string, std::unique_ptr<testing::RecordingAgent>> agents_;
  TempDir dir_;
  std::string path_;
};

TEST_F(ManagerRestartTest, ActiveTreeIsKeptAcrossARestart) {
  AmOptions opts;
  opts.member_heartbeat_timeout_ms = 60000;
  uint32_t tree_id = 0;
  std::map<std::string, v1::TreeConfig> programmed;
  Manager::Usage before;
  {
    auto m = StartManager(opts);
    Register(m.get(), {});
    auto assignments = RunJob(m.get(), "job-1");
    ASSERT_EQ(assignments.size(), 4u);
    tree_id = assignments[0].tree_id;
    for (auto& [name, agent] : agents_) programmed[name] = agent->trees().at(tree_id);
    before = m->ResourceUsage();
  }  // the AM's memory is gone; only the store remains

  auto m = StartManager(opts);
  Manager::Usage after = m->ResourceUsage();
  EXPECT_EQ(after.live_trees, 1u);
  EXPECT_EQ(after.tree_ids, 1u);
  // Switches not registered yet count no free slots; their QPNs are held.
  EXPECT_EQ(after.qpns, before.qpns);
  auto tree = m->GetTree({tree_id, ""});
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->state, TreeState::kActive);
  EXPECT_EQ(tree->job, "job-1");

  // Members heartbeat against the restarted AM.
  auto beat = m->MemberHeartbeat({{tree_id, "job-1"}, 2});
  ASSERT_TRUE(beat.ok()) << beat.status().ToString();
  EXPECT_EQ(beat->state, TreeState::kActive);

  std::map<std::string, size_t> configures_before;
  for (auto& [name, agent] : agents_) configures_before[name] = agent->configures().size();
  Register(m.get(), {tree_id});
  for (auto& [name, agent] : agents_) {
    ASSERT_TRUE(Eventually([&] { return agent->configures().size() > configures_before[name]; })) << name;
    // Re-sent byte for byte, which the agent takes as "nothing to do".
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(agent->configures().back(), programmed[name]))
        << name << ": " << agent->configures().back().ShortDebugString();
    for (uint32_t id : agent->removes()) EXPECT_NE(id, tree_id) << name;
  }
  after = m->ResourceUsage();
  EXPECT_EQ(after.qpns, before.qpns);
  EXPECT_EQ(after.free_slots, before.free_slots);

  // A new job gets another id and other slots.
  auto second = RunJob(m.get(), "job-2");
  ASSERT_EQ(second.size(), 4u);
  EXPECT_NE(second[0].tree_id, tree_id);
  int active = 0;
  for (const TreeInfo& t : m->ListTrees()) active += t.state == TreeState::kActive;
  EXPECT_EQ(active, 2);
}

TEST_F(ManagerRestartTest, TreeWhoseMembersAreGoneIsDismantledAndForgotten) {
  AmOptions opts;
  opts.member_heartbeat_timeout_ms = 300;
  opts.member_heartbeat_interval_ms = 100;
  uint32_t tree_id = 0;
  {
    AmOptions patient = opts;
    patient.member_heartbeat_timeout_ms = 60000;
    auto m = StartManager(patient);
    Register(m.get(), {});
    auto assignments = RunJob(m.get(), "job-gone");
    ASSERT_EQ(assignments.size(), 4u);
    tree_id = assignments[0].tree_id;
  }
  auto m = StartManager(opts);
  Register(m.get(), {tree_id});
  const TreeRef req{tree_id, ""};
  ASSERT_TRUE(Eventually([&] {
    auto t = m->GetTree(req);
    return t.ok() && t->state == TreeState::kFailed;
  }));
  auto t = m->GetTree(req);
  EXPECT_NE(t->reason.find("of the AM's restart"), std::string::npos) << t->reason;
  for (auto& [name, agent] : agents_) {
    EXPECT_TRUE(Eventually([&] {
      auto removes = agent->removes();
      return std::find(removes.begin(), removes.end(), tree_id) != removes.end();
    })) << name;
  }
  EXPECT_EQ(m->ResourceUsage().live_trees, 0u);
  EXPECT_EQ(m->ResourceUsage().qpns, 0u);
  m.reset();
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->trees.empty());
  EXPECT_EQ(state->switches.size(), 3u);
}

}  // namespace
}  // namespace inc::am
