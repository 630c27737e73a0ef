// SPDX-License-Identifier: Apache-2.0
// libincmpi: an MPI profiling-interface (PMPI) library. Preloaded into (or
// linked with) an unmodified MPI program, it defines MPI_Init/_Init_thread/
// _Finalize and the C bindings of MPI_Allreduce, MPI_Reduce, MPI_Bcast,
// MPI_Barrier, MPI_Reduce_scatter_block and MPI_Allgather. At MPI_Init every
// rank joins MPI_COMM_WORLD's INC group at incamd through libinc; a
// collective then runs in the switches when the decision table (decision.h)
// allows it, otherwise on MPI's own algorithm through PMPI_* with a counted,
// logged reason. See docs/mpi.md.
//
// Invariant: every rank takes the same path for the same call. Decisions use
// only what a correct MPI program passes identically on every rank (op,
// counts, element type) and INCIN_* settings the ranks compared at init,
// the group is used only if every rank formed it (checked with one
// PMPI_Allreduce at init), and an offloaded collective that fails is an MPI
// error, never a silent local fallback (other ranks may already have
// finished it on the switch): that call and every later one that would have
// been offloaded raise MPI_ERR_OTHER on every rank (docs/mpi.md "Errors").
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/communicator.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "common/settings.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/mpi_types.h"
#include "mpi/offload.h"
#include "mpi/stats.h"

extern char** environ;

namespace inc::mpi {
namespace {

using Clock = std::chrono::steady_clock;

// Structural state of a communicator other than MPI_COMM_WORLD (cached as
// an MPI attribute, so it goes away with MPI_Comm_free).
struct CommState {
  Reason reason = Reason::kNone;  // structural: subcomm, intercomm, ...
  bool permuted = false;          // the world's group, in another order than the INC group's
  std::vector<int> to_world;      // comm rank -> INC group rank (permuted only)
};

struct Global {
  Config cfg;
  bool cfg_parsed = true;
  int rank = 0;
  int world = 1;
  int thread_level = MPI_THREAD_SINGLE;
  std::unique_ptr<client::Communicator> inc;
  // kNone = MPI_COMM_WORLD has an INC group. Agreed by every rank at init,
  // except kGroupFailed, which a rank sets when one of its offloaded calls
  // fails (another thread may read it meanwhile).
  std::atomic<Reason> group_reason{Reason::kNone};
  std::string group_detail;
  std::string job_id;
  int tree_id = -1;
  // The INC group numbers ranks host by host (mpi_types.h HostLayout):
  // world rank -> INC group rank, empty when they are the same.
  std::vector<int> inc_ranks;
  uint32_t inc_rank = 0;
  std::mutex inc_mu;  // one collective at a time on the libinc Communicator
  std::mutex log_mu;
  std::set<std::pair<Call, Reason>> logged;
  Stats stats;
  int keyval = MPI_KEYVAL_INVALID;         // CommState of derived communicators
  int type_keyval = MPI_KEYVAL_INVALID;    // TypeInfo of derived datatypes
  MPI_Comm progress_comm = MPI_COMM_NULL;  // private: probed to drive MPI's progress
  bool finalized = false;
};

Global* g = nullptr;  // set by MPI_Init*, kept until exit

void Log(LogLevel level, const std::string& text) {
  if (!g || level >= g->cfg.log_level) LogLine(level, text);
}

int DeleteCommState(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommState*>(value);
  return MPI_SUCCESS;
}

CommState* Classify(MPI_Comm comm) {
  auto* st = new CommState;
  int inter = 0, size = 0, cmp = MPI_UNEQUAL;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) {
    st->reason = Reason::kIntercomm;
    return st;
  }
  PMPI_Comm_size(comm, &size);
  if (size == 1) {
    st->reason = Reason::kSingleRank;
    return st;
  }
  PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
  if (cmp == MPI_UNEQUAL) {
    st->reason = Reason::kSubcomm;
  } else if (g->thread_level == MPI_THREAD_MULTIPLE) {
    // Threads may order collectives of different communicators differently
    // on different ranks; they would meet on the one shared INC group.
    st->reason = Reason::kThreadMultiple;
  } else if (cmp == MPI_SIMILAR || !g->inc_ranks.empty()) {
    // comm rank -> world rank -> INC group rank.
    st->permuted = true;
    st->to_world = cmp == MPI_SIMILAR ? WorldRanks(comm) : std::vector<int>(g->inc_ranks);
    if (cmp == MPI_SIMILAR && !g->inc_ranks.empty())
      for (int& r : st->to_world) r = g->inc_ranks[static_cast<size_t>(r)];
  }
  return st;
}

// What a communicator allows; *state is null for MPI_COMM_WORLD.
Reason CommReason(MPI_Comm comm, const CommState** state) {
  *state = nullptr;
  if (comm == MPI_COMM_NULL) return Reason::kInvalidArgs;
  // Without a world group nothing is offloaded; say so rather than why a
  // derived communicator could not have used it anyway. A failed group is
  // Dispatch's business: such a call is an error if it would have run on
  // the switch, and runs on MPI otherwise, as on every other rank.
  const Reason group = g->group_reason;
  if (group != Reason::kNone && group != Reason::kGroupFailed) return group;
  if (comm != MPI_COMM_WORLD) {
    void* val = nullptr;
    int flag = 0;
    if (g->keyval == MPI_KEYVAL_INVALID) return Reason::kNoGroup;
    if (PMPI_Comm_get_attr(comm, g->keyval, &val, &flag) != MPI_SUCCESS) return Reason::kInvalidArgs;
    if (!flag) {
      val = Classify(comm);
      PMPI_Comm_set_attr(comm, g->keyval, val);
    }
    *state = static_cast<const CommState*>(val);
    return (*state)->reason;
  }
  return Reason::kNone;
}

// The INC group ranks of a communicator's ranks (null: they are the
// world's ranks); st is null for MPI_COMM_WORLD.
RankMap ToWorld(const CommState* st) {
  if (st) return st->permuted ? &st->to_world : nullptr;
  return g->inc_ranks.empty() ? nullptr : &g->inc_ranks;
}

int DeleteTypeInfo(MPI_Datatype, int, void* value, void*) {
  delete static_cast<TypeInfo*>(value);
  return MPI_SUCCESS;
}

// Derived datatypes are decoded once and cached as an attribute (freed
// with the type, so a recycled handle is decoded afresh).
TypeInfo ClassifyType(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return TypeInfo();
  if (IsNamedType(t) || g->type_keyval == MPI_KEYVAL_INVALID) return DescribeType(t);
  void* val = nullptr;
  int flag = 0;
  if (PMPI_Type_get_attr(t, g->type_keyval, &val, &flag) == MPI_SUCCESS && flag)
    return *static_cast<TypeInfo*>(val);
  TypeInfo info = DescribeType(t);
  if (info.valid) PMPI_Type_set_attr(t, g->type_keyval, new TypeInfo(info));
  return info;
}

// The first line per call and reason at `level` (INCIN_MPI_FALLBACK_LOG=all:
// every one), later ones at debug.
LogLevel FirstOrDebug(Call call, Reason reason, LogLevel level) {
  std::lock_guard<std::mutex> l(g->log_mu);
  bool first = g->logged.insert({call, reason}).second;
  return first || g->cfg.fallback_log_all ? level : LogLevel::kDebug;
}

void LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes) {
  LogLevel level = FirstOrDebug(call, reason, g->cfg.fallback_log_level);
  if (level < g->cfg.log_level) return;
  std::string where = comm == MPI_COMM_WORLD ? "world" : "derived";
  std::string detail;
  if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig) && !g->group_detail.empty())
    detail = " detail=\"" + g->group_detail + "\"";
  LogLine(level, std::string("fallback reason=") + ReasonName(reason) + " call=" + CallName(call) + " rank=" +
                     std::to_string(g->rank) + " comm=" + where + " bytes=" + std::to_string(bytes) + detail);
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// INCIN_REQUIRE_OFFLOAD: a call that would fall back raises MPI_ERR_OTHER
// with the reason instead (decision.h RequiredOffloadFails).
int RequiredOffloadError(Call call, Reason reason, MPI_Comm comm, uint64_t bytes, Clock::time_point t0,
                         std::string detail = "") {
  if (reason == Reason::kNoGroup || reason == Reason::kBadConfig) detail = g->group_detail;
  const std::string why =
      settings::OffloadRequiredError(CallName(call), "MPI", ReasonName(reason), detail).message();
  Log(FirstOrDebug(call, reason, LogLevel::kError),
      "rank " + std::to_string(g->rank) + ": " + why + "; raising MPI_ERR_OTHER");
  g->stats.Record(call, reason, bytes, Since(t0));
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// A call whose communicator is not offloaded: straight to MPI, before
// anything looks at its datatypes.
template <typename Fallback>
int PassOn(Call call, Reason reason, MPI_Comm comm, uint64_t bytes, Fallback&& fallback) {
  auto t0 = Clock::now();
  if (RequiredOffloadFails(g->cfg, reason)) return RequiredOffloadError(call, reason, comm, bytes, t0);
  LogFallback(call, reason, comm, bytes);
  int rc = fallback();
  g->stats.Record(call, reason, bytes, Since(t0));
  return rc;
}

uint64_t Bytes(int count, MPI_Datatype t) {
  MPI_Count size = 0;
  if (count <= 0 || t == MPI_DATATYPE_NULL || PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

// MPI_MIN of an int over `comm` on MPI's own algorithm.
bool AllAgree(MPI_Comm comm, bool mine) {
  int in = mine ? 1 : 0, all = 0;
  PMPI_Allreduce(&in, &all, 1, MPI_INT, MPI_MIN, comm);
  return all != 0;
}

// Runs one intercepted call: offload (a libinc call) or fallback (PMPI_*).
// `packed`: this rank's layout goes through MPI_Pack/MPI_Unpack when
// offloaded; `packable`: it can be (mpi_types.h PackableItem).
template <typename Offload, typename Fallback>
int Dispatch(MPI_Comm comm, const Request& q, bool packed, bool packable, Offload&& offload,
             Fallback&& fallback) {
  auto t0 = Clock::now();
  Decision d = Decide(g->cfg, q);
  // Only a call of more than kMaxPackItem bytes can have an item MPI_Pack
  // cannot take, on some rank: the ranks agree before any of them offloads.
  // Also after INC failed, so that every rank still makes the same calls.
  if (d.offload && q.bytes > kMaxPackItem && !AllAgree(comm, packable)) {
    d.offload = false;
    d.reason = Reason::kItemTooLarge;
    d.fail = RequiredOffloadFails(g->cfg, d.reason);
  }
  if (d.fail) return RequiredOffloadError(q.call, d.reason, comm, q.bytes, t0);
  if (d.offload) {
    Status s;
    bool have_group;
    {
      std::lock_guard<std::mutex> l(g->inc_mu);
      have_group = g->inc && g->group_reason == Reason::kNone;  // else: a call failed before
      if (have_group) s = offload(d);
    }
    if (!have_group) {
      // Another rank may find the tree failed only now, in this very call:
      // running it on MPI here would leave this rank alone there.
      Log(FirstOrDebug(q.call, Reason::kGroupFailed, LogLevel::kError),
          std::string(CallName(q.call)) + " on rank " + std::to_string(g->rank) +
              " would run on the switch, but INC failed earlier (" + g->group_detail +
              "): raising MPI_ERR_OTHER");
      g->stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
      PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
      return MPI_ERR_OTHER;
    }
    if (s.ok()) {
      g->stats.Record(q.call, Reason::kNone, q.bytes, Since(t0), packed);
      return MPI_SUCCESS;
    }
    if (!IsSwitchUnsupported(s)) {
      {
        std::lock_guard<std::mutex> l(g->inc_mu);
        g->group_detail = s.ToString();
        g->group_reason = Reason::kGroupFailed;
      }
      FirstOrDebug(q.call, Reason::kGroupFailed, LogLevel::kError);
      LogLine(LogLevel::kError, std::string("offloaded ") + CallName(q.call) + " failed on rank " +
                                    std::to_string(g->rank) + ": " + s.ToString() +
                                    " (raising MPI_ERR_OTHER; every later call that would run on the switch "
                                    "fails too)");
      g->stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
      PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
      return MPI_ERR_OTHER;
    }
    d.reason = Reason::kSwitchUnsupported;
    if (RequiredOffloadFails(g->cfg, d.reason))
      return RequiredOffloadError(q.call, d.reason, comm, q.bytes, t0, s.message());
  }
  LogFallback(q.call, d.reason, comm, q.bytes);
  int rc = fallback();
  g->stats.Record(q.call, d.reason, q.bytes, Since(t0));
  return rc;
}

void FormGroup() {
  const Config& c = g->cfg;
  // Job id: INCIN_JOB_ID, else the one the job credential names (the
  // launcher got it for that id), else rank 0's, broadcast.
  const std::string credential = settings::Env().String(kJobCredentialEnv).value();
  auto credential_job = !credential.empty() ? JobOfCredential(credential) : Expected<std::string>("");
  if (c.job_id.empty() && credential_job.ok() && !credential_job->empty()) {
    g->job_id = *credential_job;
  } else if (c.job_id.empty()) {
    char buf[128] = {0};
    if (g->rank == 0) std::snprintf(buf, sizeof(buf), "%s", MakeJobId().c_str());
    PMPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
    g->job_id = buf;
  } else {
    g->job_id = c.job_id;
  }
  // Collective, so before anything that may differ between ranks.
  const HostLayout hosts = DescribeHosts(MPI_COMM_WORLD);
  int ok = 1;
  std::string why;
  if (!hosts.uniform()) {
    ok = 0;
    why = hosts.NotUniformReason();
  } else if (!PackIsRaw()) {
    ok = 0;
    why =
        "MPI_Pack does not write the bare data bytes (a heterogeneous job?), so non-contiguous datatypes "
        "could not be packed around an offloaded collective";
  } else if (c.am.empty()) {
    ok = 0;
    why = "INCIN_AM is not set";
  } else {
    client::CommunicatorOptions o;
    o.am_address = c.am;
    o.job_id = g->job_id;
    o.rank = hosts.inc_rank;
    o.world_size = static_cast<uint32_t>(g->world);
    o.local_size = static_cast<uint32_t>(hosts.local_size);
    o.local_rank = static_cast<uint32_t>(hosts.local_rank);
    o.iface = c.iface.empty() ? DefaultRouteInterface() : c.iface;
    o.transport = c.transport;
    o.join_timeout_ms = c.join_timeout_ms;
    o.op_timeout_ms = c.op_timeout_ms;
    // MPI_Finalize runs a PMPI_Barrier before leaving: every rank then holds
    // every result, so nothing needs the tree for retransmissions.
    o.leave_linger_ms = 0;
    // While this rank waits on the switch, another may still wait inside
    // MPI for data this rank's MPI has only queued (an eager send of an
    // earlier fallback or of the program's own point-to-point): with no
    // progress thread, it moves only while this rank is inside MPI. Probe
    // a private communicator, which runs MPI's progress engine.
    PMPI_Comm_dup(MPI_COMM_SELF, &g->progress_comm);
    o.on_wait = [] {
      int flag = 0;
      PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g->progress_comm, &flag, MPI_STATUS_IGNORE);
    };
    if (!c.reduce_mode.empty()) o.reduce_mode = c.reduce_mode;
    if (!c.broadcast_mode.empty()) o.broadcast_mode = c.broadcast_mode;
    auto made = client::Communicator::Create(o);
    if (made.ok()) {
      g->inc = std::move(*made);
    } else {
      ok = 0;
      why = made.status().ToString();
    }
  }
  // Every rank or none: a rank without the group would take PMPI paths
  // while the others wait on the switch.
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) {
    g->tree_id = static_cast<int>(g->inc->GetStatus().assignment.tree_id);
    g->inc_ranks = hosts.inc_ranks;
    g->inc_rank = hosts.inc_rank;
    Log(LogLevel::kInfo, "rank " + std::to_string(g->rank) + ": MPI_COMM_WORLD on INC tree " +
                             std::to_string(g->tree_id) + " (job " + g->job_id + "; " + hosts.Summary() +
                             ")");
    return;
  }
  g->inc.reset();
  g->group_reason = Reason::kNoGroup;
  g->group_detail = ok ? "another rank could not join the group" : why;
  LogLine(LogLevel::kWarn, "no INC group for MPI_COMM_WORLD on rank " + std::to_string(g->rank) + ": " +
                               g->group_detail + "; every collective falls back to MPI (reason=no_group)");
}

void Setup(int thread_level) {
  if (g) return;
  g = new Global;
  g->thread_level = thread_level;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g->world);
  SetLogComponent("incmpi");
  auto cfg = ParseConfig(settings::Env());
  if (cfg.ok()) {
    g->cfg = *cfg;
  } else {
    g->cfg_parsed = false;
    g->group_reason = Reason::kBadConfig;
    g->group_detail = cfg.status().message();
    g->cfg.require_offload = settings::RequireOffload();
  }
  SetLogLevel(g->cfg.log_level);
  if (!cfg.ok())
    LogLine(LogLevel::kError, "bad configuration: " + g->group_detail +
                                  "; every collective falls back to MPI" +
                                  (g->cfg.require_offload ? " (or fails: INCIN_REQUIRE_OFFLOAD)" : ""));
  for (const std::string& n : UnknownEnvNames(environ))
    Log(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCIN_* names)");
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteCommState, &g->keyval, nullptr);
  PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, DeleteTypeInfo, &g->type_keyval, nullptr);
  if (g->world == 1) {
    if (g->group_reason == Reason::kNone)
      g->group_reason = g->cfg.enable ? Reason::kSingleRank : Reason::kDisabled;
    return;
  }
  // Every rank compares its settings with the others' (config.h
  // AgreementFingerprint), also one with INC disabled or a bad value: a
  // rank that skipped what follows alone would pair its next collective
  // with the others' group formation.
  const uint64_t fp = AgreementFingerprint(g->cfg, g->cfg_parsed, thread_level == MPI_THREAD_MULTIPLE);
  unsigned long long mine[2] = {fp, ~fp}, min[2] = {0, 0};
  PMPI_Allreduce(mine, min, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  if (!FingerprintsAgree(min[0], min[1])) {
    g->group_reason = Reason::kBadConfig;
    g->group_detail =
        "the ranks do not agree on INCIN_MPI_ENABLE, INCIN_MPI_MIN_BYTES, INCIN_MPI_MAX_BYTES, "
        "INCIN_MPI_FLOAT_SUM, INCIN_MPI_REDUCE_MODE, INCIN_MPI_BROADCAST_MODE, INCIN_REQUIRE_OFFLOAD or the "
        "thread level (every rank must see the same values)";
    LogLine(LogLevel::kError, "rank " + std::to_string(g->rank) + ": " + g->group_detail +
                                  "; every collective falls back to MPI (reason=bad_config)");
    return;
  }
  if (g->group_reason != Reason::kNone) return;
  if (!g->cfg.enable) {
    g->group_reason = Reason::kDisabled;
    return;
  }
  FormGroup();
}

void Teardown() {
  if (!g || g->finalized) return;
  g->finalized = true;
  std::string libinc_json;
  if (g->inc) {
    PMPI_Barrier(MPI_COMM_WORLD);
    libinc_json = g->inc->GetStatus().ToJson();
    g->inc.reset();  // LeaveGroup: the AM dismantles the tree
  }
  if (g->progress_comm != MPI_COMM_NULL) PMPI_Comm_free(&g->progress_comm);
  Stats::Header h;
  h.rank = g->rank;
  h.world = g->world;
  h.enabled = g->cfg.enable;
  const Reason group = g->group_reason;
  h.group = group == Reason::kNone ? "ok" : ReasonName(group);
  h.group_detail = g->group_detail;
  h.job_id = g->job_id;
  h.tree_id = g->tree_id;
  h.libinc_status_json = libinc_json;
  WriteSummary(g->stats, h, g->cfg);
}

}  // namespace
}  // namespace inc::mpi

using namespace inc::mpi;  // NOLINT: the C entry points below
using inc::Status;
using inc::client::DataType;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return rc;
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  Setup(level);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  Setup(*provided);
  return rc;
}

int MPI_Finalize(void) {
  Teardown();
  return PMPI_Finalize();
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  auto fallback = [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kAllreduce, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  Request q = AllreduceRequest(comm_reason, recvbuf, count, t, op);
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t),
      [&](const Decision& d) {
        return OffloadAllreduce(*g->inc, d, sendbuf, recvbuf, count, datatype, t, q.bytes);
      },
      fallback);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  auto fallback = [&] { return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kReduce, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  int me = CommRank(comm);
  bool is_root = me == root;
  Request q = ReduceRequest(comm_reason, sendbuf, recvbuf, count, t, op, root, me, CommSize(comm));
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t),
      [&](const Decision& d) {
        return OffloadReduce(*g->inc, d, sendbuf, recvbuf, count, datatype, t, q.bytes, is_root,
                             WorldRank(ToWorld(st), root));
      },
      fallback);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Bcast(buffer, count, datatype, root, comm);
  auto fallback = [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kBcast, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  int me = CommRank(comm);
  Request q = BcastRequest(comm_reason, count, t, root, CommSize(comm));
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t),
      [&](const Decision&) {
        return OffloadBcast(*g->inc, buffer, count, datatype, t, q.bytes, me == root,
                            WorldRank(ToWorld(st), root));
      },
      fallback);
}

int MPI_Barrier(MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Barrier(comm);
  auto fallback = [&] { return PMPI_Barrier(comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone) return PassOn(Call::kBarrier, comm_reason, comm, 0, fallback);
  Request q;
  q.call = Call::kBarrier;
  return Dispatch(
      comm, q, false, true, [&](const Decision&) { return g->inc->Barrier(); }, fallback);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  auto fallback = [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone) {
    const int size = comm_reason != Reason::kInvalidArgs ? CommSize(comm) : 0;
    return PassOn(Call::kReduceScatterBlock, comm_reason, comm,
                  Bytes(recvcount, datatype) * static_cast<uint64_t>(size), fallback);
  }
  TypeInfo t = ClassifyType(datatype);
  int size = CommSize(comm);
  Request q = ReduceScatterBlockRequest(comm_reason, recvbuf, recvcount, t, op, size);
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t),
      [&](const Decision& d) {
        return OffloadReduceScatterBlock(*g->inc, d, sendbuf, recvbuf, recvcount, datatype, t, q.bytes, size,
                                         ToWorld(st));
      },
      fallback);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!g || g->finalized)
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  auto fallback = [&] {
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kAllgather, comm_reason, comm, Bytes(recvcount, recvtype), fallback);
  TypeInfo rt = ClassifyType(recvtype);
  TypeInfo stt = sendbuf == MPI_IN_PLACE ? rt : ClassifyType(sendtype);
  int me = CommRank(comm);
  int size = CommSize(comm);
  Request q = AllgatherRequest(comm_reason, sendbuf, sendcount, stt, recvbuf, recvcount, rt);
  return Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous, PackableItem(rt) && PackableItem(stt),
      [&](const Decision&) {
        return OffloadAllgather(*g->inc, sendbuf, sendcount, sendtype, stt, recvbuf, recvcount, recvtype, rt,
                                q.bytes, me, size, g->inc_rank, ToWorld(st));
      },
      fallback);
}

}  // extern "C"
