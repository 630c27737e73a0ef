// SPDX-License-Identifier: Apache-2.0
// The AM's state store: what is written comes back after a reopen, a crash
// before COMMIT leaves the previous state, files of another schema version
// are refused; and a Manager restarted on a store keeps its active trees (and
// dismantles those whose members are gone).
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
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
    m.owner = hosts[r];
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
    EXPECT_EQ(a.members[r].host_ranks, b.members[r].host_ranks);
    EXPECT_EQ(a.members[r].total_ranks, b.members[r].total_ranks);
    EXPECT_EQ(a.members[r].owner, b.members[r].owner);
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

// The state file holds the job secret and every tree's key: it and its log
// are 0600 whatever the umask (SQLite's own would be 0644 less the umask),
// and a file of an older incamd that others may read is refused, not used
// (StateOthersMayReadIsRefusedNamingPathAndMode).
TEST(StoreTest, FilesAreOwnerOnlyWhateverTheUmask) {
  for (const mode_t mask : {mode_t{022}, mode_t{0}, mode_t{002}, mode_t{077}}) {
    SCOPED_TRACE("umask " + std::to_string(mask));
    TempDir dir;
    const std::string path = dir.File("state.db");
    const mode_t old = ::umask(mask);
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->PutTree(SampleTree(3, "job-a"), 4).ok());
    ASSERT_TRUE((*store)->JobSecret([] { return Expected<std::string>(std::string(64, 'a')); }).ok());
    ::umask(old);
    for (const char* suffix : {"", "-wal", "-shm"}) {
      struct stat st {};
      if (::stat((path + suffix).c_str(), &st) != 0) continue;  // -shm: exclusive locking keeps it in memory
      EXPECT_EQ(st.st_mode & 0777, 0600u) << path << suffix;
    }
    struct stat wal {};
    EXPECT_EQ(::stat((path + "-wal").c_str(), &wal), 0) << "the log exists while the store is open";
    store->reset();
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);  // a file of an older incamd
    auto reopened = Store::Open(path);
    ASSERT_FALSE(reopened.ok()) << "a file others may read is refused, not silently used";
    EXPECT_NE(reopened.status().message().find("has mode 0644"), std::string::npos)
        << reopened.status().message();
  }
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
  chmod(path.c_str(), 0600);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("state store " + path +
                                          ": schema version 99, this incamd reads version " +
                                          std::to_string(Store::kSchemaVersion)),
            std::string::npos)
      << store.status().message();

  const std::string other = dir.File("other.db");
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x(a)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  chmod(other.c_str(), 0600);
  store = Store::Open(other);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not an incamd state file"), std::string::npos)
      << store.status().message();

  const std::string text = dir.File("text.db");
  FILE* f = fopen(text.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("this is not a database, just a long enough line of text to look like a header", f);
  fclose(f);
  chmod(text.c_str(), 0600);
  store = Store::Open(text);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition) << store.status().ToString();
}

// Several ranks per host: the job's ranks behind each member.
StoredTree SampleTreeWithHostRanks(uint32_t id, const std::string& job) {
  StoredTree t = SampleTree(id, job);
  for (uint32_t r = 0; r < t.world; ++r) {
    t.members[r].host_ranks = {2 * r + 1, 2 * r};  // kept in the member's order
    t.members[r].total_ranks = 2 * t.world;
  }
  return t;
}

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "") << ": " << sql;
  sqlite3_free(err);
  sqlite3_close(db);
  // A file made by hand as the store makes its own: the owner's alone.
  chmod(path.c_str(), 0600);
}

int64_t UserVersion(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

TEST(StoreTest, HostRanksComeBackAfterReopening) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  StoredTree tree = SampleTreeWithHostRanks(7, "job-a");
  tree.members[1].host_ranks = {2, 3, 4294967294u};  // the widest numbers a member can store
  tree.members[1].total_ranks = 4294967295u;
  tree.members[2].host_ranks = {4};
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Status s = (*store)->PutTree(tree, 8);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE((*store)->PutTree(SampleTree(9, "job-b"), 10).ok());  // one rank per member
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->trees.size(), 2u);
  ExpectSameTree(tree, state->trees[0]);
  EXPECT_EQ(state->trees[0].members[0].host_ranks, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(state->trees[0].members[0].total_ranks, 6u);
  ExpectSameTree(SampleTree(9, "job-b"), state->trees[1]);
  for (const StoredMember& m : state->trees[1].members) {
    EXPECT_TRUE(m.host_ranks.empty());
    EXPECT_EQ(m.total_ranks, 0u);
  }
}

// A file written by the incamd before ranks per host (schema version 1: its
// tables as that incamd created them) opens, its trees load with no ranks
// behind their members, and it is upgraded in place.
TEST(StoreTest, FileOfSchemaVersionOneIsUpgraded) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  const std::string active = std::to_string(static_cast<int>(TreeState::kActive));
  const std::string leaf = std::to_string(static_cast<int>(TreeRole::kSingle));
  Sql(path, R"sql(
CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE switches(name TEXT PRIMARY KEY, agent_address TEXT NOT NULL, slot_capacity INTEGER NOT NULL);
CREATE TABLE trees(
  id INTEGER PRIMARY KEY, job TEXT NOT NULL UNIQUE, key INTEGER NOT NULL, world INTEGER NOT NULL,
  state INTEGER NOT NULL, generation INTEGER NOT NULL, reserved INTEGER NOT NULL,
  req_pool_size INTEGER NOT NULL, req_elems_per_packet INTEGER NOT NULL, req_default_elems INTEGER NOT NULL,
  req_dtype_mask INTEGER NOT NULL, req_op_mask INTEGER NOT NULL, req_coll_mask INTEGER NOT NULL,
  pool_size INTEGER NOT NULL, elems_per_packet INTEGER NOT NULL,
  dtype_mask INTEGER NOT NULL, op_mask INTEGER NOT NULL, coll_mask INTEGER NOT NULL,
  created_ms INTEGER NOT NULL, activated_ms INTEGER NOT NULL, moves INTEGER NOT NULL,
  last_move_ms INTEGER NOT NULL, last_move_reason TEXT NOT NULL);
CREATE TABLE tree_members(
  tree_id INTEGER NOT NULL, rank INTEGER NOT NULL, joined INTEGER NOT NULL, reserved_host TEXT NOT NULL,
  host TEXT NOT NULL, ip TEXT NOT NULL, mac TEXT NOT NULL, qpn INTEGER NOT NULL, rkey INTEGER NOT NULL,
  va_base INTEGER NOT NULL, slot_stride INTEGER NOT NULL, transport INTEGER NOT NULL,
  member_index INTEGER NOT NULL, switch_index INTEGER NOT NULL, rank_at_switch INTEGER NOT NULL,
  PRIMARY KEY(tree_id, rank));
CREATE TABLE tree_switches(
  tree_id INTEGER NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, role INTEGER NOT NULL,
  parent TEXT NOT NULL, parent_port TEXT NOT NULL, parent_peer_port TEXT NOT NULL,
  rank_at_parent INTEGER NOT NULL, slot_base INTEGER NOT NULL, parent_qpn INTEGER NOT NULL, config BLOB,
  PRIMARY KEY(tree_id, position));
CREATE TABLE tree_children(
  tree_id INTEGER NOT NULL, position INTEGER NOT NULL, child_index INTEGER NOT NULL,
  is_switch INTEGER NOT NULL, rank INTEGER NOT NULL, peer TEXT NOT NULL, port TEXT NOT NULL,
  peer_port TEXT NOT NULL, member_lo INTEGER NOT NULL, member_hi INTEGER NOT NULL, switch_qpn INTEGER NOT NULL,
  PRIMARY KEY(tree_id, position, child_index));
PRAGMA user_version=1;
)sql");
  Sql(path,
      "INSERT INTO meta VALUES('next_tree_id', 6);"
      "INSERT INTO switches VALUES('leaf00', '10.1.0.1:50061', 4096);"
      "INSERT INTO trees VALUES(5, 'old-job', 1234, 2, " +
          active +
          ", 1, 0, 64, 0, 0, 6, 0, 0, 64, 768, 6, "
          "3, 15, 1000, 2000, 0, 0, '');"
          "INSERT INTO tree_members VALUES(5, 0, 1, '', 'h00_0', '10.0.0.1', '02:00:00:00:00:01', 4096, 77, "
          "0, "
          "4096, 1, 0, 0, 0);"
          "INSERT INTO tree_members VALUES(5, 1, 1, '', 'h00_1', '10.0.0.2', '02:00:00:00:00:02', 4097, 77, "
          "0, "
          "4096, 1, 1, 0, 1);"
          "INSERT INTO tree_switches VALUES(5, 0, 'leaf00', " +
          leaf +
          ", '', '', '', 0, 0, 0, NULL);"
          "INSERT INTO tree_children VALUES(5, 0, 0, 0, 0, 'h00_0', 'h0', '', 0, 1, 256);"
          "INSERT INTO tree_children VALUES(5, 0, 1, 0, 1, 'h00_1', 'h1', '', 1, 2, 257);");
  StoredTree loaded;
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto state = (*store)->Load();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(state->next_tree_id, 6u);
    ASSERT_EQ(state->switches.size(), 1u);
    ASSERT_EQ(state->trees.size(), 1u);
    loaded = state->trees[0];
    EXPECT_EQ(loaded.job, "old-job");
    EXPECT_EQ(loaded.state, TreeState::kActive);
    ASSERT_EQ(loaded.members.size(), 2u);
    EXPECT_EQ(loaded.members[1].spec.host, "h00_1");
    EXPECT_EQ(loaded.members[1].spec.qpn, 4097u);
    EXPECT_EQ(loaded.plan.member_slot[1].rank_at_switch, 1u);
    for (const StoredMember& m : loaded.members) {
      EXPECT_TRUE(m.joined);
      EXPECT_TRUE(m.host_ranks.empty());
      EXPECT_EQ(m.total_ranks, 0u);
    }
    ASSERT_EQ(loaded.plan.switches.size(), 1u);
    EXPECT_EQ(loaded.alloc.per_switch.at("leaf00").child_qpns, (std::vector<uint32_t>{256, 257}));

    // The upgraded tables take ranks per host.
    loaded.members[0].host_ranks = {0, 1};
    loaded.members[1].host_ranks = {2, 3};
    loaded.members[0].total_ranks = loaded.members[1].total_ranks = 4;
    Status s = (*store)->PutTree(loaded, 6);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(UserVersion(path), Store::kSchemaVersion);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->trees.size(), 1u);
  ExpectSameTree(loaded, state->trees[0]);
}

// A stored host_ranks that this incamd would not have written is refused by
// name instead of restoring a tree whose members cover other ranks.
TEST(StoreTest, MalformedHostRanksAreRefused) {
  struct Case {
    std::string host_ranks;
    int64_t total_ranks;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"0,x", 6, "host_ranks \"0,x\" is not a list of ranks (decimal, comma-separated)"},
      {"2,,3", 6, "host_ranks \"2,,3\" is not a list of ranks"},
      {"2,3,", 6, "host_ranks \"2,3,\" is not a list of ranks"},
      {"-2", 6, "host_ranks \"-2\" is not a list of ranks"},
      {" 2", 6, "host_ranks \" 2\" is not a list of ranks"},
      {"4294967296", 6, "host_ranks \"4294967296\" is not a list of ranks"},
      {"2,6", 6, "host_ranks has rank 6, not below total_ranks 6"},
      {"", 6, "host_ranks \"\" with total_ranks 6 (both are given, or neither)"},
      {"2,3", 0, "host_ranks \"2,3\" with total_ranks 0 (both are given, or neither)"},
      {"2,3", -6, "total_ranks -6 is out of range"},
      {"2,3", 4294967296, "total_ranks 4294967296 is out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.host_ranks);
    TempDir dir;
    const std::string path = dir.File("am.db");
    {
      auto store = Store::Open(path);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      ASSERT_TRUE((*store)->PutTree(SampleTreeWithHostRanks(7, "job-a"), 8).ok());
    }
    Sql(path, "UPDATE tree_members SET host_ranks = '" + c.host_ranks +
                  "', total_ranks = " + std::to_string(c.total_ranks) + " WHERE tree_id = 7 AND rank = 1");
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto state = (*store)->Load();
    ASSERT_FALSE(state.ok());
    EXPECT_EQ(state.status().code(), Code::kFailedPrecondition) << state.status().ToString();
    EXPECT_NE(state.status().message().find("tree_members: tree 7 rank 1: " + c.error), std::string::npos)
        << state.status().message();
  }
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777;
}

// A state file, companion or folder that others may read is refused, naming
// the path, its mode and the fix; nothing is opened.
TEST(StoreTest, StateOthersMayReadIsRefusedNamingPathAndMode) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutTree(SampleTree(3, "job-a"), 4).ok());
  }
  struct Case {
    std::string chmod_path;
    mode_t mode;
    std::string words;
  };
  const std::string folder = path.substr(0, path.rfind('/'));
  const Case cases[] = {
      {path, 0644, "file " + path + " has mode 0644: group or others may read the AM's state"},
      {path, 0640, "chmod 600 " + path},
      {folder, 0755, "folder " + folder + " has mode 0755: group or others may access the AM's state"},
      {folder, 0710, "chmod 700 " + folder},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.chmod_path);
    const mode_t before = ModeOf(c.chmod_path);
    ASSERT_EQ(chmod(c.chmod_path.c_str(), c.mode), 0);
    auto store = Store::Open(path);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(store.status().message().find(c.words), std::string::npos) << store.status().message();
    ASSERT_EQ(chmod(c.chmod_path.c_str(), before), 0);
  }
  ASSERT_TRUE(Store::Open(path).ok());
}

// A file of schema version 2 (before rank owners and revocations) opens, its
// members are owned by the hosts they joined from, and it is upgraded.
TEST(StoreTest, FileOfSchemaVersionTwoIsUpgradedWithOwnersFromTheHosts) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  StoredTree tree = SampleTree(5, "job-v2");
  tree.members[2].joined = false;
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutTree(tree, 6).ok());
  }
  Sql(path, "ALTER TABLE tree_members DROP COLUMN owner; DROP TABLE revoked_jobs; PRAGMA user_version=2");
  ASSERT_EQ(UserVersion(path), 2);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->trees.size(), 1u);
  EXPECT_EQ(state->trees[0].members[0].owner, "h00_0");
  EXPECT_EQ(state->trees[0].members[1].owner, "h00_1");
  EXPECT_EQ(state->trees[0].members[2].owner, "");  // never joined: nobody owns it
  auto revoked = (*store)->LoadRevocations(1000);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_TRUE(revoked->empty());
  store->reset();  // the file is locked while open
  EXPECT_EQ(UserVersion(path), Store::kSchemaVersion);
}

TEST(StoreTest, RevocationsComeBackUntilEveryCredentialTheyStopHasExpired) {
  TempDir dir;
  const std::string path = dir.File("am.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutRevocation({"acme/a", 100, 5000}).ok());
    ASSERT_TRUE((*store)->PutRevocation({"acme/b", 200, 9000}).ok());
    ASSERT_TRUE((*store)->PutRevocation({"acme/a", 300, 7000}).ok());  // a later one replaces it
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  auto r = (*store)->LoadRevocations(1000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].job, "acme/a");
  EXPECT_EQ((*r)[0].revoked_ms, 300u);
  r = (*store)->LoadRevocations(8000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].job, "acme/b");
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

  // Joins ranks on h00_0, h00_1, h01_0, h01_1: a two-level tree. With
  // ranks_per_host, member r joins with ranks r * L .. r * L + L - 1 behind it.
  // With owners, each rank joins as the member certificate of its host would.
  std::vector<Assignment> RunJob(Manager* m, const std::string& job, uint32_t ranks_per_host = 0,
                                 bool owners = false) {
    const std::vector<std::string> hosts = {"h00_0", "h00_1", "h01_0", "h01_1"};
    const uint32_t world = static_cast<uint32_t>(hosts.size());
    std::vector<std::future<Expected<Assignment>>> joins;
    for (uint32_t r = 0; r < world; ++r)
      joins.push_back(std::async(std::launch::async, [=] {
        auto req = testing::MakeJoin(job, r, world, hosts[r]);
        for (uint32_t i = 0; i < ranks_per_host; ++i) req.add_host_ranks(r * ranks_per_host + i);
        if (ranks_per_host) req.set_total_ranks(world * ranks_per_host);
        auto join = JoinFromProto(req);
        if (owners) join->owner = hosts[r];
        return m->JoinGroup(*join, nullptr);
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
  auto beat = m->MemberHeartbeat({{tree_id, "job-1"}, 2, std::nullopt});
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

// Only the host that joined a rank speaks for it, after a restart too (the
// owners are in the store), and revoked jobs stay revoked.
TEST_F(ManagerRestartTest, RankOwnersAndRevocationsAreKeptAcrossARestart) {
  AmOptions opts;
  opts.member_heartbeat_timeout_ms = 60000;
  uint32_t tree_id = 0;
  const uint64_t far = 4'000'000'000'000;
  {
    auto m = StartManager(opts);
    Register(m.get(), {});
    auto assignments = RunJob(m.get(), "job-1", 0, /*owners=*/true);
    ASSERT_EQ(assignments.size(), 4u);
    tree_id = assignments[0].tree_id;
    ASSERT_TRUE(m->RevokeJobCredentials("acme/x", 1234, far).ok());
    ASSERT_TRUE(m->RevokeJobCredentials("acme/old", 1000, 2000).ok());  // nothing left to stop
  }
  auto m = StartManager(opts);
  EXPECT_EQ(m->JobRevokedAt("acme/x"), 1234u);
  EXPECT_EQ(m->JobRevokedAt("acme/old"), 0u);
  EXPECT_EQ(m->JobRevokedAt("job-1"), 0u);

  // By tree id alone, as libinc sends heartbeats.
  auto beat = m->MemberHeartbeat({{tree_id, ""}, 2, std::string("h01_0")});
  ASSERT_TRUE(beat.ok()) << beat.status().ToString();
  beat = m->MemberHeartbeat({{tree_id, ""}, 2, std::string("h00_0")});
  ASSERT_FALSE(beat.ok());
  EXPECT_EQ(beat.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(beat.status().message(),
            "MemberHeartbeat for rank 2 of tree " + std::to_string(tree_id) +
                " (job job-1): the rank was joined from host 'h01_0', the certificate "
                "is host 'h00_0's");
  ErrorReport report;
  report.tree = {tree_id, ""};
  report.rank = 3;
  report.error = "forged";
  report.gave_up = true;
  report.as_host = "h00_0";
  EXPECT_EQ(m->ReportError(report).code(), Code::kPermissionDenied);
  EXPECT_EQ(m->LeaveGroup("job-1", 1, std::string("h01_1")).code(), Code::kPermissionDenied);
  auto tree = m->GetTree({tree_id, ""});
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->state, TreeState::kActive) << "no forged call changed the tree";
  EXPECT_EQ(tree->error_reports, 0u);
  EXPECT_TRUE(m->LeaveGroup("job-1", 1, std::string("h00_1")).ok());
}

// A rank still waiting in JoinGroup is its host's: another host's LeaveGroup
// (which would abort the wait) and heartbeats are refused; its own are not.
TEST_F(ManagerRestartTest, WaitingRanksAreTheirHostsToo) {
  AmOptions opts;
  opts.join_timeout_ms = 60000;
  auto m = StartManager(opts);
  Register(m.get(), {});
  auto waiting = std::async(std::launch::async, [&] {
    auto join = JoinFromProto(testing::MakeJoin("job-w", 0, 2, "h00_0"));
    join->owner = "h00_0";
    return m->JoinGroup(*join, nullptr);
  });
  ASSERT_TRUE(Eventually([&] { return m->GetTree({0, "job-w"}).ok(); }));
  const uint32_t tree_id = m->GetTree({0, "job-w"})->tree_id;
  EXPECT_EQ(m->LeaveGroup("job-w", 0, std::string("h01_0")).code(), Code::kPermissionDenied);
  EXPECT_EQ(m->MemberHeartbeat({{tree_id, ""}, 0, std::string("h01_0")}).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(m->MemberHeartbeat({{tree_id, ""}, 1, std::string("h01_0")}).status().code(),
            Code::kPermissionDenied)
      << "nobody joined rank 1: nobody speaks for it";
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << "still waiting";
  EXPECT_TRUE(m->MemberHeartbeat({{tree_id, ""}, 0, std::string("h00_0")}).ok());
  EXPECT_TRUE(m->LeaveGroup("job-w", 0, std::string("h00_0")).ok());
  EXPECT_EQ(waiting.get().status().code(), Code::kAborted);
}

// incinctl tree show lists the ranks behind each member after a restart too.
TEST_F(ManagerRestartTest, RanksBehindMembersAreKeptAcrossARestart) {
  AmOptions opts;
  opts.member_heartbeat_timeout_ms = 60000;
  uint32_t tree_id = 0;
  {
    auto m = StartManager(opts);
    Register(m.get(), {});
    auto assignments = RunJob(m.get(), "job-1", 2);
    ASSERT_EQ(assignments.size(), 4u);
    tree_id = assignments[0].tree_id;
  }
  auto m = StartManager(opts);
  auto tree = m->GetTree({tree_id, ""});
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->state, TreeState::kActive);
  ASSERT_EQ(tree->members.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(tree->members[r].rank, r);
    EXPECT_EQ(tree->members[r].host_ranks, (std::vector<uint32_t>{2 * r, 2 * r + 1})) << "member " << r;
  }
  // The file holds them with the job's total.
  m.reset();
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->trees.size(), 1u);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(state->trees[0].members[r].host_ranks, (std::vector<uint32_t>{2 * r, 2 * r + 1}));
    EXPECT_EQ(state->trees[0].members[r].total_ranks, 8u);
  }
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
