// The offload logic of coll/incin: per call, libincmpi's decision table
// (mpi/decision.h) on what the call asks for and what its communicator
// allows, then either libinc on MPI_COMM_WORLD's INC group or the saved
// function of the next component, with libincmpi's reasons, log lines and
// counters (mpi/stats.h) and its INCMPI_* configuration (mpi/config.h), so
// the same launcher and the same checks serve both. Unlike libincmpi the
// group is formed at the first collective on a communicator with the
// world's group (Open MPI selects components inside MPI_Init, before MPI
// calls are allowed), and it ends when MPI_COMM_WORLD is destroyed in
// MPI_Finalize.
//
// Invariant (as in libincmpi): every rank takes the same path for the same
// call; decisions use only what every rank passes identically, and a failed
// offload is an MPI error, never a silent local fallback.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/communicator.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "glue.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/stats.h"

extern char** environ;

using inc::Code;
using inc::Expected;
using inc::LogLevel;
using inc::LogLine;
using inc::Status;
using namespace inc::mpi;  // NOLINT: libincmpi's decision vocabulary

struct incin_comm {
  bool classified = false;
  Reason reason = Reason::kNone;  // structural: subcomm, thread_multiple
  bool permuted = false;          // the world's group in another order
  std::vector<int> to_world;      // comm rank -> world rank (permuted only)
};

namespace {

using Clock = std::chrono::steady_clock;

struct Global {
  Config cfg;
  // Atomic: under MPI_THREAD_MULTIPLE another thread's call on another
  // communicator may read them while the group is formed or ended.
  std::atomic<bool> attempted{false};  // group formation ran (once, at the first eligible call)
  std::atomic<bool> forming{false};    // inside formation: every call goes to the saved functions
  std::atomic<bool> done{false};       // shut down
  int rank = 0;
  int world = 1;
  std::unique_ptr<inc::client::Communicator> inc;
  Reason group_reason = Reason::kNone;
  std::string group_detail;
  std::string job_id;
  int tree_id = -1;
  std::mutex log_mu;
  std::set<std::pair<Call, Reason>> logged;
  Stats stats;
};

Global& G() {
  static Global* g = new Global;  // lives until exit: Open MPI may call in after close
  return *g;
}

std::string DefaultRouteInterface() {
  std::ifstream f("/proc/net/route");
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    char ifname[64] = {0};
    unsigned long dest = 1;
    if (std::sscanf(line.c_str(), "%63s %lx", ifname, &dest) == 2 && dest == 0) return ifname;
  }
  return "eth0";
}

std::string MakeJobId() {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* ns = std::getenv("PMIX_NAMESPACE");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  std::string id = std::string("mpi-") + (ns && *ns ? ns : host) + "-" + std::to_string(getpid()) + "-" +
                   std::to_string(ms % 100000000);
  return id.substr(0, 100);
}

// Non-contiguous local layouts are packed with MPI_Pack around an offload;
// that exchanges the right bytes with other ranks only if MPI_Pack writes
// exactly the data bytes in signature order (a homogeneous job).
bool PackIsRaw() {
  struct {
    double d;
    int i;
  } pair[2] = {{1.5, 7}, {-2.25, 9}};
  uint8_t want[24], got[24] = {0};
  for (int k = 0; k < 2; k++) {
    std::memcpy(want + 12 * k, &pair[k].d, 8);
    std::memcpy(want + 12 * k + 8, &pair[k].i, 4);
  }
  int size = 0, pos = 0;
  return PMPI_Pack_size(2, MPI_DOUBLE_INT, MPI_COMM_WORLD, &size) == MPI_SUCCESS && size == 24 &&
         PMPI_Pack(pair, 2, MPI_DOUBLE_INT, got, sizeof(got), &pos, MPI_COMM_WORLD) == MPI_SUCCESS &&
         pos == 24 && std::memcmp(want, got, sizeof(want)) == 0;
}

// Runs on every rank at once: the first eligible call is on a communicator
// with the world's group, so every world rank is in it. The collectives
// here go to the saved functions (G().forming).
void FormGroup() {
  Global& g = G();
  g.attempted = true;
  g.forming = true;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.world);
  // Unlike in MPI_Init, ranks get here from arbitrary program states: one
  // may still wait in MPI for a message another has only queued, and the
  // blocking JoinGroup below does not run MPI's progress engine. The
  // barrier progresses MPI until every rank has arrived, so all join at once.
  PMPI_Barrier(MPI_COMM_WORLD);
  const Config& c = g.cfg;
  const char* credential = std::getenv(inc::kJobCredentialEnv);
  auto credential_job =
      credential && *credential ? inc::JobOfCredential(credential) : Expected<std::string>(std::string());
  if (c.job_id.empty() && credential_job.ok() && !credential_job->empty()) {
    g.job_id = *credential_job;
  } else if (c.job_id.empty()) {
    char buf[128] = {0};
    if (g.rank == 0) std::snprintf(buf, sizeof(buf), "%s", MakeJobId().c_str());
    PMPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
    g.job_id = buf;
  } else {
    g.job_id = c.job_id;
  }
  int ok = 1;
  std::string why;
  if (!PackIsRaw()) {
    ok = 0;
    why = "MPI_Pack does not write the bare data bytes (a heterogeneous job?)";
  } else if (c.am.empty()) {
    ok = 0;
    why = "INCMPI_AM is not set";
  } else {
    inc::client::CommunicatorOptions o;
    o.am_address = c.am;
    o.job_id = g.job_id;
    o.rank = static_cast<uint32_t>(g.rank);
    o.world_size = static_cast<uint32_t>(g.world);
    o.iface = c.iface.empty() ? DefaultRouteInterface() : c.iface;
    o.transport = c.transport;
    o.join_timeout_ms = c.join_timeout_ms;
    // While this rank waits on the switch, another may wait inside MPI for
    // data this rank's MPI has only queued; Open MPI moves it only while
    // its progress engine runs.
    o.on_wait = [] { incin_progress(); };
    if (!c.reduce_mode.empty()) o.reduce_mode = c.reduce_mode;
    if (!c.broadcast_mode.empty()) o.broadcast_mode = c.broadcast_mode;
    auto made = inc::client::Communicator::Create(o);
    if (made.ok()) {
      g.inc = std::move(*made);
    } else {
      ok = 0;
      why = made.status().ToString();
    }
  }
  // Every rank or none.
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  g.forming = false;
  if (all) {
    g.tree_id = static_cast<int>(g.inc->GetStatus().assignment.tree_id);
    LogLine(LogLevel::kInfo, "rank " + std::to_string(g.rank) + ": MPI_COMM_WORLD on INC tree " +
                                 std::to_string(g.tree_id) + " (job " + g.job_id + ")");
    return;
  }
  g.inc.reset();
  g.group_reason = Reason::kNoGroup;
  g.group_detail = ok ? "another rank could not join the group" : why;
  LogLine(LogLevel::kWarn, "no INC group for MPI_COMM_WORLD on rank " + std::to_string(g.rank) + ": " +
                               g.group_detail + "; every collective falls back to MPI (reason=no_group)");
}

// Configuration is read once, at the first call (the environment is the
// ranks' by then).
void ConfigureOnce() {
  Global& g = G();
  inc::SetLogComponent("coll/incin");
  auto cfg = ParseConfig([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
  if (cfg.ok()) {
    g.cfg = *cfg;
  } else {
    g.group_reason = Reason::kBadConfig;
    g.group_detail = cfg.status().message();
    g.attempted = true;
  }
  inc::SetLogLevel(g.cfg.log_level);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.world);
  if (!cfg.ok()) {
    LogLine(LogLevel::kError,
            "bad configuration: " + g.group_detail + "; every collective falls back to MPI");
  } else if (!g.cfg.enable) {
    g.group_reason = Reason::kDisabled;
    g.attempted = true;
  }
  for (const std::string& n : UnknownEnvNames(environ))
    LogLine(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCMPI_* names)");
  LogLine(LogLevel::kInfo, "coll/incin selected on rank " + std::to_string(g.rank));
}

void Configure() {
  static std::once_flag once;
  std::call_once(once, ConfigureOnce);
}

void Classify(incin_comm* st, MPI_Comm comm) {
  st->classified = true;
  int cmp = MPI_UNEQUAL, size = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  if (cmp == MPI_UNEQUAL) {
    st->reason = Reason::kSubcomm;
  } else if (comm != MPI_COMM_WORLD && level == MPI_THREAD_MULTIPLE) {
    // Threads may order collectives of different communicators differently
    // on different ranks; they would meet on the one shared INC group.
    st->reason = Reason::kThreadMultiple;
  } else if (cmp == MPI_SIMILAR) {
    st->permuted = true;
    MPI_Group cg, wg;
    PMPI_Comm_group(comm, &cg);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int i = 0; i < size; i++) ranks[static_cast<size_t>(i)] = i;
    st->to_world.resize(static_cast<size_t>(size));
    PMPI_Group_translate_ranks(cg, size, ranks.data(), wg, st->to_world.data());
    PMPI_Group_free(&cg);
    PMPI_Group_free(&wg);
  }
}

// What the communicator allows (kNone: the INC group may run the call).
Reason CommReason(incin_comm* st, MPI_Comm comm) {
  Configure();
  if (!st->classified) Classify(st, comm);
  Global& g = G();
  if (!g.attempted && st->reason == Reason::kNone) FormGroup();
  if (g.group_reason != Reason::kNone) return g.group_reason;
  return st->reason;  // also for a subcomm before any collective with the world's group
}

// A datatype: the element type of its signature (the only part that enters
// a decision) and its local layout (whether this rank packs).
struct TypeInfo {
  bool valid = false;
  bool contiguous = false;
  Elem elem = Elem::kBytes;
  uint64_t size = 0;
  int64_t extent = 0;
};

Elem PredefinedElem(MPI_Datatype t) {
  constexpr Elem kLong = sizeof(long) == 8 ? Elem::kInt64 : Elem::kInt32;
  constexpr Elem kULong = sizeof(long) == 8 ? Elem::kUInt64 : Elem::kUInt32;
  const std::pair<MPI_Datatype, Elem> table[] = {
      {MPI_INT, Elem::kInt32},
      {MPI_INT32_T, Elem::kInt32},
      {MPI_UNSIGNED, Elem::kUInt32},
      {MPI_UINT32_T, Elem::kUInt32},
      {MPI_LONG, kLong},
      {MPI_UNSIGNED_LONG, kULong},
      {MPI_LONG_LONG, Elem::kInt64},
      {MPI_LONG_LONG_INT, Elem::kInt64},
      {MPI_INT64_T, Elem::kInt64},
      {MPI_AINT, Elem::kInt64},
      {MPI_COUNT, Elem::kInt64},
      {MPI_UNSIGNED_LONG_LONG, Elem::kUInt64},
      {MPI_UINT64_T, Elem::kUInt64},
      {MPI_FLOAT, Elem::kFloat32},
      {MPI_DOUBLE, Elem::kFloat64},
  };
  for (const auto& e : table)
    if (e.first == t) return e.second;
  return Elem::kBytes;
}

int Combiner(MPI_Datatype t, int* ni, int* na, int* nd) {
  int combiner = -1;
  if (PMPI_Type_get_envelope(t, ni, na, nd, &combiner) != MPI_SUCCESS) return -1;
  return combiner;
}

void FreeIfDerived(MPI_Datatype t) {
  int ni, na, nd;
  if (Combiner(t, &ni, &na, &nd) != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
}

// SignatureElem's view of an MPI datatype (MPI_Type_get_envelope/_contents).
struct TypeTree {
  std::vector<MPI_Datatype> unused;
  TypeNode<MPI_Datatype> Decode(MPI_Datatype t) {
    TypeNode<MPI_Datatype> node;
    int ni = 0, na = 0, nd = 0;
    int combiner = Combiner(t, &ni, &na, &nd);
    MPI_Count size = 0;
    PMPI_Type_size_x(t, &size);
    if (combiner == MPI_COMBINER_NAMED || combiner < 0 || nd == 0) {
      node.named = true;
      node.elem = combiner == MPI_COMBINER_NAMED ? PredefinedElem(t) : Elem::kBytes;
      node.size = static_cast<uint64_t>(std::max<MPI_Count>(size, 0));
      return node;
    }
    std::vector<int> ints(static_cast<size_t>(ni));
    std::vector<MPI_Aint> addrs(static_cast<size_t>(na));
    std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
    PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data());
    for (size_t i = 0; i < types.size(); i++) {
      // A struct's block lengths follow its count; other constructors have
      // one inner type, contributing iff the type has data.
      bool contributes = combiner == MPI_COMBINER_STRUCT ? ints.size() > i + 1 && ints[i + 1] > 0 : size > 0;
      (contributes ? node.parts : unused).push_back(types[i]);
    }
    return node;
  }
  void Release(MPI_Datatype t) { FreeIfDerived(t); }
  ~TypeTree() {
    for (MPI_Datatype t : unused) FreeIfDerived(t);
  }
};

bool Ordered(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0;
  int combiner = Combiner(t, &ni, &na, &nd);
  if (combiner == MPI_COMBINER_NAMED) return true;
  if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 || ni > 1 || na > 0)
    return false;
  int ints[1] = {0};
  MPI_Aint addrs[1];
  MPI_Datatype inner;
  if (PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return false;
  bool ordered = Ordered(inner);
  FreeIfDerived(inner);
  return ordered;
}

TypeInfo ClassifyType(MPI_Datatype t) {
  TypeInfo info;
  if (t == MPI_DATATYPE_NULL) return info;
  MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
  if (PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0 ||
      PMPI_Type_get_extent_x(t, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(t, &tlb, &textent) != MPI_SUCCESS)
    return info;
  TypeTree tree;
  info.elem = SignatureElem(tree, t).value_or(Elem::kBytes);
  info.size = static_cast<uint64_t>(size);
  info.extent = extent;
  Layout l;
  l.ordered = Ordered(t);
  l.size = size;
  l.lb = lb;
  l.extent = extent;
  l.true_lb = tlb;
  l.true_extent = textent;
  info.contiguous = IsContiguous(l);
  info.valid = true;
  return info;
}

uint64_t Elements(const TypeInfo& t, uint64_t bytes) {
  return bytes / ElemSize(t.elem);
}

// `count` items at `buf` to (pack) or from (unpack) their count x size
// bytes at `run`; MPI_Pack counts in int, hence the chunks.
Status CopyPacked(bool pack, const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti,
                  uint8_t* run) {
  const uint64_t per = std::max<uint64_t>(1, static_cast<uint64_t>(INT_MAX) / std::max<uint64_t>(ti.size, 1));
  for (uint64_t done = 0; done < static_cast<uint64_t>(count);) {
    const uint64_t n = std::min<uint64_t>(per, static_cast<uint64_t>(count) - done);
    const uint64_t bytes = n * ti.size;
    if (bytes > static_cast<uint64_t>(INT_MAX))
      return inc::Internal("a datatype item is too large for MPI_Pack");
    auto* item =
        const_cast<uint8_t*>(static_cast<const uint8_t*>(buf)) + static_cast<int64_t>(done) * ti.extent;
    uint8_t* at = run + done * ti.size;
    int pos = 0;
    int rc =
        pack ? PMPI_Pack(item, static_cast<int>(n), t, at, static_cast<int>(bytes), &pos, MPI_COMM_WORLD)
             : PMPI_Unpack(at, static_cast<int>(bytes), &pos, item, static_cast<int>(n), t, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS || static_cast<uint64_t>(pos) != bytes)
      return inc::Internal(std::string(pack ? "MPI_Pack" : "MPI_Unpack") + " gave " + std::to_string(pos) +
                           " of " + std::to_string(bytes) + " bytes");
    done += n;
  }
  return Status::Ok();
}

Status Pack(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti, uint8_t* run) {
  return CopyPacked(true, buf, count, t, ti, run);
}
Status Unpack(const uint8_t* run, void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
  return CopyPacked(false, buf, count, t, ti, const_cast<uint8_t*>(run));
}

// The contiguous bytes of `count` items: the buffer itself or a packed copy.
class Staged {
 public:
  Status Load(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
    if (ti.contiguous) {
      data_ = static_cast<const uint8_t*>(buf);
      return Status::Ok();
    }
    copy_.resize(static_cast<size_t>(count) * ti.size);
    data_ = copy_.data();
    return Pack(buf, count, t, ti, copy_.data());
  }
  const uint8_t* data() const { return data_; }
  uint8_t* copy() { return copy_.data(); }

 private:
  const uint8_t* data_ = nullptr;
  std::vector<uint8_t> copy_;
};

OpKind ClassifyOp(MPI_Op op) {
  if (op == MPI_SUM) return OpKind::kSum;
  if (op == MPI_MIN) return OpKind::kMin;
  if (op == MPI_MAX) return OpKind::kMax;
  if (op == MPI_OP_NULL) return OpKind::kNone;
  const MPI_Op others[] = {MPI_PROD, MPI_LAND,   MPI_BAND,   MPI_LOR,     MPI_BOR,  MPI_LXOR,
                           MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
  for (MPI_Op o : others)
    if (o == op) return OpKind::kOtherPredefined;
  return OpKind::kUser;
}

void LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes) {
  Global& g = G();
  LogLevel level = g.cfg.fallback_log_level;
  {
    std::lock_guard<std::mutex> l(g.log_mu);
    bool first = g.logged.insert({call, reason}).second;
    if (!first && !g.cfg.fallback_log_all) level = LogLevel::kDebug;
  }
  if (level < g.cfg.log_level) return;
  std::string detail;
  if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig) && !g.group_detail.empty())
    detail = " detail=\"" + g.group_detail + "\"";
  LogLine(level, std::string("fallback reason=") + ReasonName(reason) + " call=" + CallName(call) + " rank=" +
                     std::to_string(g.rank) + " comm=" + (comm == MPI_COMM_WORLD ? "world" : "derived") +
                     " bytes=" + std::to_string(bytes) + detail);
}

bool IsSwitchUnsupported(const Status& s) {
  return s.code() == Code::kFailedPrecondition && s.message().find(" does not ") != std::string::npos;
}

template <typename Offload, typename Fallback>
int Dispatch(MPI_Comm comm, const Request& q, bool packed, Offload&& offload, Fallback&& fallback) {
  Global& g = G();
  auto t0 = Clock::now();
  Decision d = Decide(g.cfg, q);
  if (d.offload) {
    if (!g.inc || g.group_reason != Reason::kNone) {
      d.reason = Reason::kGroupFailed;
    } else {
      Status s = offload(d);
      if (s.ok()) {
        g.stats.Record(q.call, Reason::kNone, q.bytes,
                       std::chrono::duration<double>(Clock::now() - t0).count(), packed);
        return MPI_SUCCESS;
      }
      if (!IsSwitchUnsupported(s)) {
        g.group_reason = Reason::kGroupFailed;
        g.group_detail = s.ToString();
        LogLine(LogLevel::kError, std::string("offloaded ") + CallName(q.call) + " failed on rank " +
                                      std::to_string(g.rank) + ": " + s.ToString() +
                                      " (INC is off for the rest of the job; returning MPI_ERR_OTHER)");
        return MPI_ERR_OTHER;
      }
      d.reason = Reason::kSwitchUnsupported;
    }
  }
  LogFallback(q.call, d.reason, comm, q.bytes);
  int rc = fallback();
  g.stats.Record(q.call, d.reason, q.bytes, std::chrono::duration<double>(Clock::now() - t0).count());
  return rc;
}

int CommRank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

int CommSize(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}

uint32_t IncRoot(const incin_comm* st, int root) {
  return st->permuted ? static_cast<uint32_t>(st->to_world[static_cast<size_t>(root)])
                      : static_cast<uint32_t>(root);
}

// libinc's types are at least two bytes wide: an odd count goes through a
// padded copy.
Status BroadcastBytes(void* buf, uint64_t bytes, uint32_t root, bool is_root) {
  auto& inc = *G().inc;
  if (bytes % 2 == 0) return inc.Broadcast(buf, bytes / 2, inc::client::DataType::kFloat16, root);
  std::vector<uint8_t> tmp(bytes + 1, 0);
  if (is_root) std::memcpy(tmp.data(), buf, bytes);
  INC_RETURN_IF_ERROR(inc.Broadcast(tmp.data(), tmp.size() / 2, inc::client::DataType::kFloat16, root));
  std::memcpy(buf, tmp.data(), bytes);
  return Status::Ok();
}

Status AllGatherBytes(const void* send, uint8_t* out, uint64_t block) {
  auto& inc = *G().inc;
  if (block % 2 == 0) return inc.AllGather(send, out, block / 2, inc::client::DataType::kFloat16);
  const uint32_t n = inc.world_size();
  const auto mine = static_cast<uint32_t>(G().rank);
  for (uint32_t w = 0; w < n; w++) {
    uint8_t* dst = out + w * block;
    if (w == mine) std::memcpy(dst, send, block);
    INC_RETURN_IF_ERROR(BroadcastBytes(dst, block, w, w == mine));
  }
  return Status::Ok();
}

// Bypass: inside group formation every call is the saved function's, and
// uncounted (it is the component's own, not the program's).
bool Bypass() {
  return G().forming || G().done;
}

}  // namespace

extern "C" {

incin_comm* incin_comm_new(void) {
  return new (std::nothrow) incin_comm;
}

void incin_comm_free(incin_comm* st, MPI_Comm comm) {
  delete st;
  if (comm == MPI_COMM_WORLD) incin_shutdown();
}

void incin_shutdown(void) {
  Global& g = G();
  if (g.done.exchange(true)) return;
  std::string libinc_json;
  if (g.inc) {
    libinc_json = g.inc->GetStatus().ToJson();
    g.inc.reset();  // LeaveGroup: the AM dismantles the tree
  }
  if (!g.attempted && g.group_reason == Reason::kNone && g.stats.Offloaded() + g.stats.FellBack() == 0)
    return;
  Stats::Header h;
  h.rank = g.rank;
  h.world = g.world;
  h.enabled = g.cfg.enable;
  h.group = g.group_reason == Reason::kNone ? "ok" : ReasonName(g.group_reason);
  h.group_detail = g.group_detail;
  h.job_id = g.job_id;
  h.tree_id = g.tree_id;
  h.libinc_status_json = libinc_json;
  if (g.cfg.summary == SummaryMode::kAll || (g.cfg.summary == SummaryMode::kRank0 && g.rank == 0)) {
    std::string text = g.stats.ToText(h);
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  std::string path = SummaryPathForRank(g.cfg.summary_json, g.rank);
  if (!path.empty()) {
    std::ofstream f(path, std::ios::trunc);
    f << g.stats.ToJson(h) << "\n";
    if (!f) LogLine(LogLevel::kError, "cannot write INCMPI_SUMMARY_JSON file " + path);
  }
}

int incin_allreduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allreduce(m, sbuf, rbuf, count, dt, op, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kAllreduce;
  q.comm_reason = CommReason(st, comm);
  TypeInfo t = ClassifyType(dt);
  q.valid = t.valid && count >= 0 && (count == 0 || rbuf);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
        if (t.contiguous) return G().inc->AllReduce(send, rbuf, Elements(t, q.bytes), d.dtype, d.op);
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(send, count, dt, t));
        INC_RETURN_IF_ERROR(G().inc->AllReduce(in.copy(), in.copy(), Elements(t, q.bytes), d.dtype, d.op));
        return Unpack(in.copy(), rbuf, count, dt, t);
      },
      fallback);
}

int incin_reduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                 int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce(m, sbuf, rbuf, count, dt, op, root, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kReduce;
  q.comm_reason = CommReason(st, comm);
  TypeInfo t = ClassifyType(dt);
  int me = CommRank(comm);
  bool is_root = me == root;
  q.valid = t.valid && count >= 0 && root >= 0 && root < CommSize(comm) && (count == 0 || !is_root || rbuf) &&
            (is_root || sbuf != MPI_IN_PLACE);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
        const uint64_t n = Elements(t, q.bytes);
        if (t.contiguous)
          return G().inc->Reduce(send, is_root ? rbuf : nullptr, n, d.dtype, d.op, IncRoot(st, root));
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(send, count, dt, t));
        INC_RETURN_IF_ERROR(
            G().inc->Reduce(in.copy(), is_root ? in.copy() : nullptr, n, d.dtype, d.op, IncRoot(st, root)));
        return is_root ? Unpack(in.copy(), rbuf, count, dt, t) : Status::Ok();
      },
      fallback);
}

int incin_bcast(incin_comm* st, void* m, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_bcast(m, buf, count, dt, root, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kBcast;
  q.comm_reason = CommReason(st, comm);
  TypeInfo t = ClassifyType(dt);
  int me = CommRank(comm);
  q.valid = t.valid && count >= 0 && root >= 0 && root < CommSize(comm);
  q.elem = Elem::kBytes;
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision&) -> Status {
        const uint32_t inc_root = IncRoot(st, root);
        if (t.contiguous) return BroadcastBytes(buf, q.bytes, inc_root, me == root);
        std::vector<uint8_t> run(q.bytes);
        if (me == root) INC_RETURN_IF_ERROR(Pack(buf, count, dt, t, run.data()));
        INC_RETURN_IF_ERROR(BroadcastBytes(run.data(), q.bytes, inc_root, me == root));
        return me == root ? Status::Ok() : Unpack(run.data(), buf, count, dt, t);
      },
      fallback);
}

int incin_barrier(incin_comm* st, void* m, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_barrier(m, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kBarrier;
  q.comm_reason = CommReason(st, comm);
  return Dispatch(
      comm, q, false, [&](const Decision&) { return G().inc->Barrier(); }, fallback);
}

int incin_reduce_scatter_block(incin_comm* st, void* m, const void* sbuf, void* rbuf, int rcount,
                               MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce_scatter_block(m, sbuf, rbuf, rcount, dt, op, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kReduceScatterBlock;
  q.comm_reason = CommReason(st, comm);
  TypeInfo t = ClassifyType(dt);
  int size = CommSize(comm);
  q.valid = t.valid && rcount >= 0 && (rcount == 0 || rbuf);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = rcount > 0 ? static_cast<uint64_t>(rcount) * t.size * static_cast<uint64_t>(size) : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
        const uint64_t blk = q.bytes / static_cast<uint64_t>(size);
        const uint64_t n = Elements(t, blk);
        // libinc reads the blocks in world rank order and writes block
        // `rank` while reading: a copy when they are in rbuf or permuted.
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(src, static_cast<int64_t>(rcount) * size, dt, t));
        std::vector<uint8_t> copy;
        const uint8_t* input = in.data();
        if (st->permuted) {
          copy.resize(q.bytes);
          for (int c = 0; c < size; c++)
            std::memcpy(copy.data() + static_cast<uint64_t>(st->to_world[static_cast<size_t>(c)]) * blk,
                        input + static_cast<uint64_t>(c) * blk, blk);
          input = copy.data();
        } else if (t.contiguous && sbuf == MPI_IN_PLACE) {
          copy.assign(input, input + q.bytes);
          input = copy.data();
        }
        if (t.contiguous) return G().inc->ReduceScatter(input, rbuf, n, d.dtype, d.op);
        std::vector<uint8_t> out(blk);
        INC_RETURN_IF_ERROR(G().inc->ReduceScatter(input, out.data(), n, d.dtype, d.op));
        return Unpack(out.data(), rbuf, rcount, dt, t);
      },
      fallback);
}

int incin_allgather(incin_comm* st, void* m, const void* sbuf, int scount, MPI_Datatype sdt, void* rbuf,
                    int rcount, MPI_Datatype rdt, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allgather(m, sbuf, scount, sdt, rbuf, rcount, rdt, comm); };
  if (Bypass()) return fallback();
  Request q;
  q.call = Call::kAllgather;
  q.comm_reason = CommReason(st, comm);
  TypeInfo rt = ClassifyType(rdt);
  bool in_place = sbuf == MPI_IN_PLACE;
  TypeInfo stt = in_place ? rt : ClassifyType(sdt);
  int me = CommRank(comm);
  int size = CommSize(comm);
  uint64_t block = rcount > 0 ? static_cast<uint64_t>(rcount) * rt.size : 0;
  uint64_t sblock = in_place ? block : (scount > 0 ? static_cast<uint64_t>(scount) * stt.size : 0);
  q.valid = rt.valid && stt.valid && rcount >= 0 && (in_place || scount >= 0) && block == sblock &&
            (block == 0 || rbuf);
  q.elem = Elem::kBytes;
  q.bytes = block;
  return Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous,
      [&](const Decision&) -> Status {
        auto* recv = static_cast<uint8_t*>(rbuf);
        Staged send;
        std::vector<uint8_t> own;
        if (!in_place) {
          INC_RETURN_IF_ERROR(send.Load(sbuf, scount, sdt, stt));
        } else if (rt.contiguous) {
          own.assign(recv + static_cast<uint64_t>(me) * block, recv + static_cast<uint64_t>(me + 1) * block);
        } else {
          own.resize(block);
          INC_RETURN_IF_ERROR(
              Pack(recv + static_cast<int64_t>(me) * rcount * rt.extent, rcount, rdt, rt, own.data()));
        }
        const void* mine = in_place ? own.data() : send.data();
        // libinc's blocks are in world rank order: a permuted communicator
        // or a non-contiguous receive type gathers into a copy.
        const uint64_t total = block * static_cast<uint64_t>(size);
        std::vector<uint8_t> gathered(st->permuted || !rt.contiguous ? total : 0);
        INC_RETURN_IF_ERROR(AllGatherBytes(mine, gathered.empty() ? recv : gathered.data(), block));
        std::vector<uint8_t> ordered(st->permuted && !rt.contiguous ? total : 0);
        const uint8_t* run = gathered.data();
        if (st->permuted) {
          uint8_t* to = rt.contiguous ? recv : ordered.data();
          for (int c = 0; c < size; c++)
            std::memcpy(to + static_cast<uint64_t>(c) * block,
                        gathered.data() + static_cast<uint64_t>(st->to_world[static_cast<size_t>(c)]) * block,
                        block);
          run = to;
        }
        if (rt.contiguous) return Status::Ok();
        return Unpack(run, rbuf, static_cast<int64_t>(rcount) * size, rdt, rt);
      },
      fallback);
}

}  // extern "C"
