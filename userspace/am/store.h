// SPDX-License-Identifier: Apache-2.0
// incamd's durable state in SQLite: the switches it knows, the trees that
// hold switch resources (plan, allocations, members, the configs sent to each
// switch) and the next tree id, so that a restarted or crashed AM keeps the
// running jobs instead of tearing their trees down. Every write is one
// transaction (WAL journal, synchronous=FULL: docs/operations.md "AM state").
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "am/model.h"
#include "common/status.h"

namespace inc::am {

struct StoredSwitch {
  std::string name;
  std::string agent_address;
  uint32_t slot_capacity = 0;
};

struct StoredMember {
  bool joined = false;
  MemberSpec spec;
  // Several ranks per host: the job's ranks behind a joined member, and the
  // job's total; empty and 0 when the job has one rank per member.
  std::vector<uint32_t> host_ranks;
  uint32_t total_ranks = 0;
  // The host whose member certificate joined the rank ("" in plaintext):
  // only it may heartbeat, report and leave for the rank.
  std::string owner;
};

// A job whose credentials an operator revoked: those issued up to
// revoked_ms are refused; the record is kept until every credential issued
// before then has expired (keep_until_ms).
struct RevokedJob {
  std::string job;
  uint64_t revoked_ms = 0;
  uint64_t keep_until_ms = 0;
};

// A tree with its resources: reserved by an operator or active.
struct StoredTree {
  uint32_t id = 0;
  uint32_t key = 0;
  std::string job;
  uint32_t world = 0;
  TreeState state = TreeState::kPending;
  uint32_t generation = 0;
  bool reserved = false;
  std::vector<std::string> reserved_hosts;  // by rank, when reserved
  Requirements req;
  std::vector<StoredMember> members;  // by rank
  TreePlan plan;
  TreeAlloc alloc;
  // Per switch: the serialized v1::TreeConfig last sent to it, byte for byte,
  // so that the restarted AM re-sends exactly what the switch holds (which
  // the agent treats as a no-op).
  std::map<std::string, std::string> configs;
  uint64_t created_ms = 0, activated_ms = 0;
  uint32_t moves = 0;
  uint64_t last_move_ms = 0;
  std::string last_move_reason;
};

struct StoredState {
  std::vector<StoredSwitch> switches;
  std::vector<StoredTree> trees;
  uint32_t next_tree_id = 0;  // 0: none stored
};

class Store {
 public:
  // The schema this build writes. A file of an older version is upgraded in
  // place when opened, one of a newer version is refused.
  static constexpr int kSchemaVersion = 3;

  // Opens (creating if needed) the database at path; an empty path keeps
  // the state in memory only (lost when incamd exits). The file (and so its
  // -wal and -shm, which SQLite creates with the file's mode) is created
  // 0600 whatever the umask; a file, companion or folder that group or
  // others may access is refused (FAILED_PRECONDITION naming it and its
  // mode): it holds the job secret and every tree's key.
  static Expected<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }

  Expected<StoredState> Load();

  // Each call is one transaction: all of it is on disk when it returns OK,
  // none of it after a crash before that.
  Status PutSwitch(const StoredSwitch& sw);
  Status PutTree(const StoredTree& tree, uint32_t next_tree_id);
  Status DeleteTree(uint32_t tree_id, uint32_t next_tree_id);

  // The secret job credentials derive from (64 hex digits): the stored
  // one, else make_new()'s, stored first, so that credentials issued before
  // a restart stay good after it.
  Expected<std::string> JobSecret(const std::function<Expected<std::string>()>& make_new);

  // Revocations: the stored ones still in force at now_ms (older ones are
  // deleted), and one more (replacing the job's earlier one).
  Expected<std::vector<RevokedJob>> LoadRevocations(uint64_t now_ms);
  Status PutRevocation(const RevokedJob& revoked);

  // Tests: runs inside every transaction just before COMMIT (a test kills
  // the process there to check that a crash leaves the previous state).
  void SetBeforeCommitHookForTest(std::function<void()> hook) { before_commit_ = std::move(hook); }

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const std::string& sql);
  Status Error(const std::string& what) const;
  Status Migrate();
  // Runs body between BEGIN IMMEDIATE and COMMIT; rolls back when it fails.
  Status Transaction(const std::function<Status()>& body);
  Status WriteTreeRows(const StoredTree& tree);
  Status DeleteTreeRows(uint32_t tree_id);
  Status PutNextTreeId(uint32_t next_tree_id);

  std::mutex mu_;
  sqlite3* db_;
  std::string path_;
  std::function<void()> before_commit_;
};

}  // namespace inc::am
