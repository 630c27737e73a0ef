// SPDX-License-Identifier: Apache-2.0
// incamd's state store over SQLite: schema and its upgrades, the file's mode checks, rows in and out.
#include "am/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>

namespace inc::am {
namespace {

// Tables in the order a tree's rows are deleted; trees last.
constexpr const char* kSchema = R"sql(
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
  host_ranks TEXT NOT NULL DEFAULT '', total_ranks INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '',
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
CREATE TABLE revoked_jobs(job TEXT PRIMARY KEY, revoked_ms INTEGER NOT NULL, keep_until_ms INTEGER NOT NULL);
)sql";

// The statements that turn a file of schema version `to - 1` into one of
// version `to`, in order. Columns are only ever appended, so that a migrated
// table has the column order of kSchema (rows are written and read by
// position).
struct Upgrade {
  int to;
  const char* sql;
};
constexpr Upgrade kUpgrades[] = {
    // The ranks behind each member (several ranks per host).
    {2, "ALTER TABLE tree_members ADD COLUMN host_ranks TEXT NOT NULL DEFAULT ''"},
    {2, "ALTER TABLE tree_members ADD COLUMN total_ranks INTEGER NOT NULL DEFAULT 0"},
    // Who joined each rank (the member certificate's host), so that only it
    // speaks for the rank after a restart too. Members stored before were
    // joined by their own host: the join check made the two the same.
    {3, "ALTER TABLE tree_members ADD COLUMN owner TEXT NOT NULL DEFAULT ''"},
    {3, "UPDATE tree_members SET owner = host WHERE joined != 0"},
    // Jobs whose credentials an operator revoked.
    {3,
     "CREATE TABLE revoked_jobs(job TEXT PRIMARY KEY, revoked_ms INTEGER NOT NULL, keep_until_ms INTEGER NOT "
     "NULL)"},
};
static_assert(std::size(kUpgrades) > 0 && kUpgrades[std::size(kUpgrades) - 1].to == Store::kSchemaVersion,
              "the last upgrade leads to the schema this build writes");

// host_ranks as stored: decimal ranks joined by commas, "" for none.
std::string JoinRanks(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (uint32_t r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::optional<std::vector<uint32_t>> SplitRanks(const std::string& text) {
  std::vector<uint32_t> out;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p != end) {
    uint32_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);  // digits only: no sign, no space, no overflow
    if (ec != std::errc() || (next != end && *next != ',') || next + 1 == end) return std::nullopt;
    out.push_back(v);
    p = next == end ? end : next + 1;
  }
  return out;
}

constexpr const char* kTreeTables[] = {"tree_children", "tree_switches", "tree_members", "trees"};

struct Blob {
  const std::string& bytes;
};

// One prepared statement; parameters bind in order.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool prepared() const { return rc_ == SQLITE_OK; }

  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Stmt& Bind(T v) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(stmt_, ++param_, static_cast<sqlite3_int64>(v));
    return *this;
  }
  Stmt& Bind(const std::string& v) {
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_text(stmt_, ++param_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(Blob v) {
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_blob(stmt_, ++param_, v.bytes.data(), static_cast<int>(v.bytes.size()),
                              SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindNull() {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_null(stmt_, ++param_);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return rc_ == SQLITE_OK ? sqlite3_step(stmt_) : rc_; }
  // Runs a statement that returns no rows.
  bool Run() { return Step() == SQLITE_DONE; }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  uint32_t U32(int col) const { return static_cast<uint32_t>(sqlite3_column_int64(stmt_, col)); }
  std::string Text(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : std::string();
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
  int param_ = 0;
};

Code CodeForSqlite(int rc) {
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Code::kUnavailable;
    case SQLITE_FULL: return Code::kResourceExhausted;
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: return Code::kFailedPrecondition;
    default: return Code::kInternal;
  }
}

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The state file holds the job secret and every tree's key: its folder,
// itself and its companions are its owner's alone. Creates the file 0600
// (whatever the umask) when it is not there yet.
Status CheckPrivate(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return FailedPrecondition("folder " + dir + ": " + std::strerror(errno));
  if (st.st_mode & 077)
    return FailedPrecondition("folder " + dir + " has mode " + Octal(st.st_mode) +
                              ": group or others may access the AM's state (it holds the job secret and the "
                              "trees' keys); chmod 700 " +
                              dir);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return FailedPrecondition("cannot open: " + std::string(std::strerror(errno)));
  Status result;
  if (fstat(fd, &st) != 0) {
    result = FailedPrecondition(std::string("fstat: ") + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    result = FailedPrecondition("not a regular file");
  } else if (st.st_size == 0 && (st.st_mode & 077)) {
    // Made just now under a loose umask, or left empty: nothing was in it yet.
    if (fchmod(fd, 0600) != 0) result = FailedPrecondition(std::string("chmod 600: ") + std::strerror(errno));
  } else if (st.st_mode & 077) {
    result = FailedPrecondition("file " + path + " has mode " + Octal(st.st_mode) +
                                ": group or others may read the AM's state (the job secret, the trees' "
                                "keys); chmod 600 " +
                                path);
  }
  close(fd);
  INC_RETURN_IF_ERROR(result);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string companion = path + suffix;
    if (lstat(companion.c_str(), &st) == 0 && (st.st_mode & 077))
      return FailedPrecondition("file " + companion + " has mode " + Octal(st.st_mode) +
                                ": group or others may read the AM's state; chmod 600 " + companion);
  }
  return Status::Ok();
}

// One row of `trees`; its members, switches and children come from the
// other tables.
StoredTree TreeFromRow(const Stmt& st) {
  StoredTree t;
  int c = 0;
  t.id = st.U32(c++);
  t.job = st.Text(c++);
  t.key = st.U32(c++);
  t.world = st.U32(c++);
  t.state = static_cast<TreeState>(st.Int(c++));
  t.generation = st.U32(c++);
  t.reserved = st.Int(c++) != 0;
  t.req.pool_size = st.U32(c++);
  t.req.elems_per_packet = st.U32(c++);
  t.req.default_elems = st.U32(c++);
  t.req.dtype_mask = st.U32(c++);
  t.req.op_mask = st.U32(c++);
  t.req.coll_mask = st.U32(c++);
  t.plan.pool_size = st.U32(c++);
  t.plan.elems_per_packet = st.U32(c++);
  t.plan.dtype_mask = st.U32(c++);
  t.plan.op_mask = st.U32(c++);
  t.plan.coll_mask = st.U32(c++);
  t.created_ms = static_cast<uint64_t>(st.Int(c++));
  t.activated_ms = static_cast<uint64_t>(st.Int(c++));
  t.moves = st.U32(c++);
  t.last_move_ms = static_cast<uint64_t>(st.Int(c++));
  t.last_move_reason = st.Text(c++);
  t.members.resize(t.world);
  t.plan.member_slot.resize(t.world);
  t.plan.member_index_of_rank.resize(t.world);
  if (t.reserved) t.reserved_hosts.resize(t.world);
  return t;
}

// One row of `tree_members` into its tree.
Status MemberFromRow(const Stmt& st, StoredTree* t) {
  const uint32_t r = st.U32(1);
  if (r >= t->world) return FailedPrecondition("tree_members: rank " + std::to_string(r) + " out of range");
  StoredMember& m = t->members[r];
  m.joined = st.Int(2) != 0;
  if (t->reserved) t->reserved_hosts[r] = st.Text(3);
  m.spec.host = st.Text(4);
  auto ip = Ipv4::Parse(st.Text(5));
  auto mac = Mac::Parse(st.Text(6));
  if (!ip || !mac) return FailedPrecondition("tree_members: bad ip or mac of tree " + std::to_string(t->id));
  m.spec.ip = *ip;
  m.spec.mac = *mac;
  m.spec.qpn = st.U32(7);
  m.spec.rkey = st.U32(8);
  m.spec.va_base = static_cast<uint64_t>(st.Int(9));
  m.spec.slot_stride = st.U32(10);
  m.spec.transport = static_cast<int>(st.Int(11));
  t->plan.member_index_of_rank[r] = st.U32(12);
  t->plan.member_slot[r] = MemberSlot{static_cast<size_t>(st.Int(13)), st.U32(14)};
  const std::string member =
      "tree_members: tree " + std::to_string(t->id) + " rank " + std::to_string(r) + ": ";
  const std::string ranks_text = st.Text(15);
  auto ranks = SplitRanks(ranks_text);
  if (!ranks)
    return FailedPrecondition(member + "host_ranks \"" + ranks_text +
                              "\" is not a list of ranks (decimal, comma-separated)");
  const int64_t total = st.Int(16);
  if (total < 0 || total > std::numeric_limits<uint32_t>::max())
    return FailedPrecondition(member + "total_ranks " + std::to_string(total) + " is out of range");
  if (ranks->empty() != (total == 0))
    return FailedPrecondition(member + "host_ranks \"" + ranks_text + "\" with total_ranks " +
                              std::to_string(total) + " (both are given, or neither)");
  for (uint32_t x : *ranks)
    if (x >= total)
      return FailedPrecondition(member + "host_ranks has rank " + std::to_string(x) +
                                ", not below total_ranks " + std::to_string(total));
  m.host_ranks = std::move(*ranks);
  m.total_ranks = static_cast<uint32_t>(total);
  m.owner = st.Text(17);
  return Status::Ok();
}

// One row of `tree_switches` into its tree: the plan's switch, its
// allocation but for the child QPNs, the config last sent to it.
void SwitchFromRow(const Stmt& st, StoredTree* t) {
  PlanSwitch ps;
  ps.name = st.Text(2);
  ps.role = static_cast<TreeRole>(st.Int(3));
  ps.parent = st.Text(4);
  ps.parent_port = st.Text(5);
  ps.parent_peer_port = st.Text(6);
  ps.rank_at_parent = st.U32(7);
  SwitchAlloc& sa = t->alloc.per_switch[ps.name];
  sa.slot_base = st.U32(8);
  sa.parent_qpn = st.U32(9);
  if (!st.IsNull(10)) t->configs[ps.name] = st.Text(10);
  t->plan.switches.push_back(std::move(ps));
}

// One row of `tree_children` into its tree's switch and that switch's
// child QPNs (the switch rows are read first).
Status ChildFromRow(const Stmt& st, StoredTree* t) {
  const uint32_t pos = st.U32(1);
  if (pos >= t->plan.switches.size())
    return FailedPrecondition("tree_children: switch position " + std::to_string(pos) + " of tree " +
                              std::to_string(t->id) + " has no switch");
  PlanSwitch& ps = t->plan.switches[pos];
  PlanChild ch;
  ch.is_switch = st.Int(3) != 0;
  ch.rank = st.U32(4);
  ch.peer = st.Text(5);
  ch.port = st.Text(6);
  ch.peer_port = st.Text(7);
  ch.member_lo = st.U32(8);
  ch.member_hi = st.U32(9);
  ps.children.push_back(std::move(ch));
  t->alloc.per_switch[ps.name].child_qpns.push_back(st.U32(10));
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  const std::string file = path.empty() ? ":memory:" : path;
  const std::string where = path.empty() ? "in-memory state store" : "state store " + path;
  if (!path.empty()) INC_RETURN_IF_ERROR(CheckPrivate(path).WithContext(where));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(file.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s(CodeForSqlite(rc), where + ": cannot open: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Store> store(new Store(db, path));
  // SQLite gives the -wal and -shm files it creates the database's mode,
  // which CheckPrivate made 0600 (SQLite's own default is 0644 less the
  // umask): the log the pragmas below create is the owner's alone too.
  // One incamd per file: a second one would hand out the same resources.
  // WAL: a commit appends to the log instead of rewriting pages, and a torn
  // write is detected by the log's checksums. synchronous=FULL: the log is
  // fsynced at every commit, so a commit that returned survives power loss
  // too (a tree the switches run must not be forgotten); commits happen per
  // tree change, never per heartbeat, so the fsync is affordable.
  for (const char* pragma :
       {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
    Status s = store->Exec(pragma);
    if (!s.ok()) {
      if (s.code() == Code::kUnavailable)
        return Unavailable(where + ": in use by another process (another incamd with the same state_path?)");
      return s.WithContext(where);
    }
  }
  INC_RETURN_IF_ERROR(store->Migrate().WithContext(where));
  return store;
}

Store::~Store() {
  sqlite3_close(db_);
}

Status Store::Error(const std::string& what) const {
  return Status(CodeForSqlite(sqlite3_extended_errcode(db_)), what + ": " + sqlite3_errmsg(db_));
}

Status Store::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  Status s(CodeForSqlite(rc), sql.substr(0, sql.find('\n')) + ": " + (err ? err : sqlite3_errstr(rc)));
  sqlite3_free(err);
  return s;
}

Status Store::Migrate() {
  int64_t version = 0, tables = 0;
  {  // finalized before the schema changes
    Stmt v(db_, "PRAGMA user_version");
    if (v.Step() != SQLITE_ROW) return Error("reading the schema version");
    version = v.Int(0);
    Stmt t(db_, "SELECT count(*) FROM sqlite_master");
    if (t.Step() != SQLITE_ROW) return Error("reading the schema");
    tables = t.Int(0);
  }
  if (version == kSchemaVersion) return Status::Ok();
  if (version > 0 && version < kSchemaVersion)
    return Transaction([&] {
      for (const Upgrade& u : kUpgrades)
        if (u.to > version)
          INC_RETURN_IF_ERROR(
              Exec(u.sql).WithContext("upgrading the schema from version " + std::to_string(u.to - 1)));
      return Exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
    });
  if (version != 0)
    return FailedPrecondition("schema version " + std::to_string(version) + ", this incamd reads version " +
                              std::to_string(kSchemaVersion) +
                              ": run the incamd that wrote it, or move the file away (the AM then forgets "
                              "every tree it holds, docs/operations.md \"AM state\")");
  if (tables != 0)
    return FailedPrecondition("the file has tables but no schema version: not an incamd state file");
  return Transaction([&] {
    INC_RETURN_IF_ERROR(Exec(kSchema));
    return Exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
  });
}

Status Store::Transaction(const std::function<Status()>& body) {
  std::lock_guard<std::mutex> lk(mu_);
  INC_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status s = body();
  if (s.ok()) {
    if (before_commit_) before_commit_();
    s = Exec("COMMIT");
  }
  if (!s.ok()) (void)Exec("ROLLBACK");
  return s;
}

Status Store::PutNextTreeId(uint32_t next_tree_id) {
  Stmt st(db_, "INSERT OR REPLACE INTO meta(name, value) VALUES('next_tree_id', ?)");
  if (!st.Bind(next_tree_id).Run()) return Error("writing next_tree_id");
  return Status::Ok();
}

Expected<std::string> Store::JobSecret(const std::function<Expected<std::string>()>& make_new) {
  std::string secret;
  Status st = Transaction([&] {
    Stmt read(db_, "SELECT value FROM meta WHERE name = 'job_secret'");
    int rc = read.Step();
    if (rc == SQLITE_ROW) {
      secret = read.Text(0);
      return Status::Ok();
    }
    if (rc != SQLITE_DONE) return Error("reading job_secret");
    auto made = make_new();
    if (!made) return made.status();
    secret = *made;
    Stmt write(db_, "INSERT INTO meta(name, value) VALUES('job_secret', ?)");
    if (!write.Bind(secret).Run()) return Error("writing job_secret");
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return secret;
}

Expected<std::vector<RevokedJob>> Store::LoadRevocations(uint64_t now_ms) {
  std::vector<RevokedJob> out;
  Status st = Transaction([&] {
    Stmt del(db_, "DELETE FROM revoked_jobs WHERE keep_until_ms <= ?");
    if (!del.Bind(now_ms).Run()) return Error("deleting expired revocations");
    Stmt read(db_, "SELECT job, revoked_ms, keep_until_ms FROM revoked_jobs ORDER BY job");
    int rc;
    while ((rc = read.Step()) == SQLITE_ROW)
      out.push_back({read.Text(0), static_cast<uint64_t>(read.Int(1)), static_cast<uint64_t>(read.Int(2))});
    if (rc != SQLITE_DONE) return Error("reading revoked_jobs");
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Store::PutRevocation(const RevokedJob& revoked) {
  return Transaction([&] {
    Stmt st(db_, "INSERT OR REPLACE INTO revoked_jobs(job, revoked_ms, keep_until_ms) VALUES(?, ?, ?)");
    if (!st.Bind(revoked.job).Bind(revoked.revoked_ms).Bind(revoked.keep_until_ms).Run())
      return Error("writing revoked_jobs");
    return Status::Ok();
  });
}

Status Store::PutSwitch(const StoredSwitch& sw) {
  return Transaction([&] {
    Stmt st(db_, "INSERT OR REPLACE INTO switches(name, agent_address, slot_capacity) VALUES(?, ?, ?)");
    if (!st.Bind(sw.name).Bind(sw.agent_address).Bind(sw.slot_capacity).Run())
      return Error("writing switch " + sw.name);
    return Status::Ok();
  });
}

Status Store::DeleteTreeRows(uint32_t tree_id) {
  for (const char* table : kTreeTables) {
    const std::string key = std::string(table) == "trees" ? "id" : "tree_id";
    Stmt st(db_, ("DELETE FROM " + std::string(table) + " WHERE " + key + " = ?").c_str());
    if (!st.Bind(tree_id).Run()) return Error("deleting tree " + std::to_string(tree_id) + " from " + table);
  }
  return Status::Ok();
}

Status Store::WriteTreeRows(const StoredTree& t) {
  const std::string what = "writing tree " + std::to_string(t.id);
  INC_RETURN_IF_ERROR(DeleteTreeRows(t.id));
  {
    Stmt st(db_,
            "INSERT INTO trees VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.Bind(t.id)
        .Bind(t.job)
        .Bind(t.key)
        .Bind(t.world)
        .Bind(static_cast<int>(t.state))
        .Bind(t.generation)
        .Bind(t.reserved);
    st.Bind(t.req.pool_size).Bind(t.req.elems_per_packet).Bind(t.req.default_elems);
    st.Bind(t.req.dtype_mask).Bind(t.req.op_mask).Bind(t.req.coll_mask);
    st.Bind(t.plan.pool_size).Bind(t.plan.elems_per_packet);
    st.Bind(t.plan.dtype_mask).Bind(t.plan.op_mask).Bind(t.plan.coll_mask);
    st.Bind(t.created_ms).Bind(t.activated_ms).Bind(t.moves).Bind(t.last_move_ms).Bind(t.last_move_reason);
    if (!st.Run()) return Error(what);
  }
  for (uint32_t r = 0; r < t.members.size(); ++r) {
    const StoredMember& m = t.members[r];
    const MemberSlot slot = r < t.plan.member_slot.size() ? t.plan.member_slot[r] : MemberSlot{};
    const uint32_t index = r < t.plan.member_index_of_rank.size() ? t.plan.member_index_of_rank[r] : 0;
    Stmt st(db_, "INSERT INTO tree_members VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.Bind(t.id).Bind(r).Bind(m.joined).Bind(r < t.reserved_hosts.size() ? t.reserved_hosts[r] : "");
    st.Bind(m.spec.host).Bind(m.spec.ip.ToString()).Bind(m.spec.mac.ToString());
    st.Bind(m.spec.qpn)
        .Bind(m.spec.rkey)
        .Bind(m.spec.va_base)
        .Bind(m.spec.slot_stride)
        .Bind(m.spec.transport);
    st.Bind(index).Bind(slot.switch_index).Bind(slot.rank_at_switch);
    st.Bind(JoinRanks(m.host_ranks)).Bind(m.total_ranks).Bind(m.owner);
    if (!st.Run()) return Error(what + " member " + std::to_string(r));
  }
  for (uint32_t pos = 0; pos < t.plan.switches.size(); ++pos) {
    const PlanSwitch& ps = t.plan.switches[pos];
    auto a = t.alloc.per_switch.find(ps.name);
    if (a == t.alloc.per_switch.end() || a->second.child_qpns.size() != ps.children.size())
      return Internal(what + ": switch " + ps.name + " has no allocation for every child");
    Stmt st(db_, "INSERT INTO tree_switches VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.Bind(t.id).Bind(pos).Bind(ps.name).Bind(static_cast<int>(ps.role)).Bind(ps.parent);
    st.Bind(ps.parent_port).Bind(ps.parent_peer_port).Bind(ps.rank_at_parent);
    st.Bind(a->second.slot_base).Bind(a->second.parent_qpn);
    auto c = t.configs.find(ps.name);
    if (c != t.configs.end())
      st.Bind(Blob{c->second});
    else
      st.BindNull();
    if (!st.Run()) return Error(what + " switch " + ps.name);
    for (uint32_t i = 0; i < ps.children.size(); ++i) {
      const PlanChild& ch = ps.children[i];
      Stmt cs(db_, "INSERT INTO tree_children VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      cs.Bind(t.id).Bind(pos).Bind(i).Bind(ch.is_switch).Bind(ch.rank).Bind(ch.peer).Bind(ch.port);
      cs.Bind(ch.peer_port).Bind(ch.member_lo).Bind(ch.member_hi).Bind(a->second.child_qpns[i]);
      if (!cs.Run()) return Error(what + " switch " + ps.name + " child " + std::to_string(i));
    }
  }
  return Status::Ok();
}

Status Store::PutTree(const StoredTree& tree, uint32_t next_tree_id) {
  return Transaction([&] {
    INC_RETURN_IF_ERROR(WriteTreeRows(tree));
    return PutNextTreeId(next_tree_id);
  });
}

Status Store::DeleteTree(uint32_t tree_id, uint32_t next_tree_id) {
  return Transaction([&] {
    INC_RETURN_IF_ERROR(DeleteTreeRows(tree_id));
    return PutNextTreeId(next_tree_id);
  });
}

Expected<StoredState> Store::Load() {
  std::lock_guard<std::mutex> lk(mu_);
  StoredState out;
  {
    Stmt st(db_, "SELECT value FROM meta WHERE name = 'next_tree_id'");
    int rc = st.Step();
    if (rc == SQLITE_ROW)
      out.next_tree_id = st.U32(0);
    else if (rc != SQLITE_DONE)
      return Error("reading next_tree_id");
  }
  {
    Stmt st(db_, "SELECT name, agent_address, slot_capacity FROM switches ORDER BY name");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) out.switches.push_back({st.Text(0), st.Text(1), st.U32(2)});
    if (rc != SQLITE_DONE) return Error("reading switches");
  }
  std::map<uint32_t, size_t> index_of;
  {
    Stmt st(db_, "SELECT * FROM trees ORDER BY id");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      StoredTree t = TreeFromRow(st);
      index_of[t.id] = out.trees.size();
      out.trees.push_back(std::move(t));
    }
    if (rc != SQLITE_DONE) return Error("reading trees");
  }
  auto tree = [&](uint32_t id, const char* table) -> Expected<StoredTree*> {
    auto it = index_of.find(id);
    if (it == index_of.end())
      return FailedPrecondition(std::string(table) + " has rows of tree " + std::to_string(id) +
                                " that is not in trees");
    return &out.trees[it->second];
  };
  {
    Stmt st(db_, "SELECT * FROM tree_members ORDER BY tree_id, rank");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      auto t = tree(st.U32(0), "tree_members");
      if (!t) return t.status();
      INC_RETURN_IF_ERROR(MemberFromRow(st, *t));
    }
    if (rc != SQLITE_DONE) return Error("reading tree members");
  }
  {
    Stmt st(db_, "SELECT * FROM tree_switches ORDER BY tree_id, position");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      auto t = tree(st.U32(0), "tree_switches");
      if (!t) return t.status();
      SwitchFromRow(st, *t);
    }
    if (rc != SQLITE_DONE) return Error("reading tree switches");
  }
  {
    Stmt st(db_, "SELECT * FROM tree_children ORDER BY tree_id, position, child_index");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      auto t = tree(st.U32(0), "tree_children");
      if (!t) return t.status();
      INC_RETURN_IF_ERROR(ChildFromRow(st, *t));
    }
    if (rc != SQLITE_DONE) return Error("reading tree children");
  }
  return out;
}

}  // namespace inc::am
