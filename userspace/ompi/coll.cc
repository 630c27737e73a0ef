// SPDX-License-Identifier: Apache-2.0
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
#include "glue.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/mpi_types.h"
#include "mpi/offload.h"
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
  std::vector<int> to_inc;        // comm rank -> INC group rank, made at first use
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
  // The INC group numbers ranks host by host (mpi_types.h HostLayout):
  // world rank -> INC group rank, empty when they are the same.
  std::vector<int> inc_ranks;
  uint32_t inc_rank = 0;
  std::mutex log_mu;
  std::set<std::pair<Call, Reason>> logged;
  Stats stats;
};

Global& G() {
  static Global* g = new Global;  // lives until exit: Open MPI may call in after close
  return *g;
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
  const HostLayout hosts = DescribeHosts(MPI_COMM_WORLD);
  int ok = 1;
  std::string why;
  if (!hosts.uniform()) {
    ok = 0;
    why = hosts.NotUniformReason();
  } else if (!PackIsRaw()) {
    ok = 0;
    why = "MPI_Pack does not write the bare data bytes (a heterogeneous job?)";
  } else if (c.am.empty()) {
    ok = 0;
    why = "INCMPI_AM is not set";
  } else {
    inc::client::CommunicatorOptions o;
    o.am_address = c.am;
    o.job_id = g.job_id;
    o.rank = hosts.inc_rank;
    o.world_size = static_cast<uint32_t>(g.world);
    o.local_size = static_cast<uint32_t>(hosts.local_size);
    o.local_rank = static_cast<uint32_t>(hosts.local_rank);
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
    g.inc_ranks = hosts.inc_ranks;
    g.inc_rank = hosts.inc_rank;
    LogLine(LogLevel::kInfo, "rank " + std::to_string(g.rank) + ": MPI_COMM_WORLD on INC tree " +
                                 std::to_string(g.tree_id) + " (job " + g.job_id + "; " + hosts.Summary() +
                                 ")");
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
  int cmp = MPI_UNEQUAL;
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
    st->to_world = WorldRanks(comm);
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

// The INC group ranks of a communicator's ranks (null: they are the
// world's ranks). Only after the group formed, which fixes inc_ranks.
RankMap ToWorld(incin_comm* st) {
  const std::vector<int>& inc = G().inc_ranks;
  if (inc.empty()) return st->permuted ? &st->to_world : nullptr;
  if (!st->permuted) return &inc;
  if (st->to_inc.empty())
    for (int w : st->to_world) st->to_inc.push_back(inc[static_cast<size_t>(w)]);
  return &st->to_inc;
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
  WriteSummary(g.stats, h, g.cfg);
}

int incin_allreduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allreduce(m, sbuf, rbuf, count, dt, op, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  TypeInfo t = DescribeType(dt);
  Request q = AllreduceRequest(comm_reason, rbuf, count, t, op);
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) { return OffloadAllreduce(*G().inc, d, sbuf, rbuf, count, dt, t, q.bytes); },
      fallback);
}

int incin_reduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                 int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce(m, sbuf, rbuf, count, dt, op, root, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  TypeInfo t = DescribeType(dt);
  int me = CommRank(comm);
  bool is_root = me == root;
  Request q = ReduceRequest(comm_reason, sbuf, rbuf, count, t, op, root, me, CommSize(comm));
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) {
        return OffloadReduce(*G().inc, d, sbuf, rbuf, count, dt, t, q.bytes, is_root,
                             WorldRank(ToWorld(st), root));
      },
      fallback);
}

int incin_bcast(incin_comm* st, void* m, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_bcast(m, buf, count, dt, root, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  TypeInfo t = DescribeType(dt);
  int me = CommRank(comm);
  Request q = BcastRequest(comm_reason, count, t, root, CommSize(comm));
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision&) {
        return OffloadBcast(*G().inc, buf, count, dt, t, q.bytes, me == root, WorldRank(ToWorld(st), root));
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
  Reason comm_reason = CommReason(st, comm);
  TypeInfo t = DescribeType(dt);
  int size = CommSize(comm);
  Request q = ReduceScatterBlockRequest(comm_reason, rbuf, rcount, t, op, size);
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) {
        return OffloadReduceScatterBlock(*G().inc, d, sbuf, rbuf, rcount, dt, t, q.bytes, size, ToWorld(st));
      },
      fallback);
}

int incin_allgather(incin_comm* st, void* m, const void* sbuf, int scount, MPI_Datatype sdt, void* rbuf,
                    int rcount, MPI_Datatype rdt, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allgather(m, sbuf, scount, sdt, rbuf, rcount, rdt, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  TypeInfo rt = DescribeType(rdt);
  TypeInfo stt = sbuf == MPI_IN_PLACE ? rt : DescribeType(sdt);
  int me = CommRank(comm);
  int size = CommSize(comm);
  Request q = AllgatherRequest(comm_reason, sbuf, scount, stt, rbuf, rcount, rt);
  return Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous,
      [&](const Decision&) {
        return OffloadAllgather(*G().inc, sbuf, scount, sdt, stt, rbuf, rcount, rdt, rt, q.bytes, me, size,
                                G().inc_rank, ToWorld(st));
      },
      fallback);
}

}  // extern "C"
