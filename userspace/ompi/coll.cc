// SPDX-License-Identifier: Apache-2.0
// The offload logic of coll/incin: per call, libincmpi's decision table
// (mpi/decision.h) on what the call asks for and what its communicator
// allows, then either libinc on MPI_COMM_WORLD's INC group or the saved
// function of the next component, with libincmpi's reasons, log lines and
// counters (mpi/stats.h) and its INCIN_* configuration (mpi/config.h), so
// the same launcher and the same checks serve both. The coll_incin_* MCA
// parameters (params.h) are that configuration too: one the user set wins
// over its INCIN_* variable, through the same parser. Unlike libincmpi the
// group is formed at the first collective on a communicator with the
// world's group (Open MPI selects components inside MPI_Init, before MPI
// calls are allowed), and it ends when MPI_COMM_WORLD is destroyed in
// MPI_Finalize.
//
// Invariant (as in libincmpi): every rank takes the same path for the same
// call; decisions use only what every rank passes identically (and the
// INCIN_* settings, which the ranks compare when the group forms), and a
// failed offload is an MPI error, never a silent local fallback: that call
// and every later one that would have been offloaded return MPI_ERR_OTHER
// on every rank (docs/mpi.md "Errors").
//
// Nothing coll/incin does may fail a call that plain Open MPI completes.
// Open MPI calls a communicator's collectives from its own algorithms too,
// on communicators the program never sees (an intercommunicator's local
// one) and with datatypes MPI_Type_get_envelope cannot decode (raising
// MPI_ERR_INTERN through MPI_COMM_WORLD's error handler): a call on a
// communicator that is not provably MPI_COMM_WORLD's group therefore goes
// to the next component before anything looks at its datatypes, and the
// communicator is judged from Open MPI's structures (component.c), not
// through MPI calls that could raise errors.
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
#include "common/tls.h"
#include "glue.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/mpi_types.h"
#include "mpi/offload.h"
#include "mpi/stats.h"
#include "params.h"

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
  // The environment with the coll_incin_* parameters the user set on top.
  inc::settings::EnvLookup env;
  std::vector<SettingOverride> overrides;
  Config cfg;
  bool cfg_parsed = true;
  // Atomic: under MPI_THREAD_MULTIPLE another thread's call on another
  // communicator may read them while the group is formed or ended.
  std::atomic<bool> attempted{false};  // group formation ran (once, at the first eligible call)
  std::atomic<bool> forming{false};    // inside formation: every call goes to the saved functions
  std::atomic<bool> done{false};       // shut down
  int rank = 0;
  int world = 1;
  std::unique_ptr<inc::client::Communicator> inc;
  // Until the group formed: this rank's own view (disabled, bad_config);
  // from then on agreed by every rank, except kGroupFailed, which a rank
  // sets when one of its offloaded calls fails.
  std::atomic<Reason> group_reason{Reason::kNone};
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

const char* GetEnv(const char* name) {
  return std::getenv(name);
}

// The coll_incin_* parameters the user set, as overrides of their settings.
std::vector<SettingOverride> SetParams() {
  std::vector<SettingOverride> out;
  const auto& params = inc::ompi::McaParams();
  for (size_t i = 0; i < params.size(); i++)
    if (const char* v = incin_mca_value(static_cast<int>(i)))
      out.push_back({params[i].setting, v, "coll_incin_" + params[i].name});
  return out;
}

bool Overridden(const Global& g, const char* setting) {
  for (const SettingOverride& o : g.overrides)
    if (o.name == setting) return true;
  return false;
}

// The ranks must agree on every INCIN_* setting that decides a path
// (config.h AgreementFingerprint); each reads its own environment.
bool SettingsAgree(Global& g) {
  const uint64_t fp = AgreementFingerprint(g.cfg, g.cfg_parsed, incin_thread_multiple() != 0);
  unsigned long long mine[2] = {fp, ~fp}, min[2] = {0, 0};
  PMPI_Allreduce(mine, min, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  return FingerprintsAgree(min[0], min[1]);
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
  // Every rank comes here, also one with INC disabled or a bad setting:
  // only together can they tell whether all of them would offload alike.
  if (!SettingsAgree(g)) {
    g.group_reason = Reason::kBadConfig;
    g.group_detail =
        "the ranks do not agree on INCIN_MPI_ENABLE, INCIN_MPI_MIN_BYTES, INCIN_MPI_MAX_BYTES, "
        "INCIN_MPI_FLOAT_SUM, INCIN_MPI_REDUCE_MODE, INCIN_MPI_BROADCAST_MODE, INCIN_REQUIRE_OFFLOAD or the "
        "thread level (every rank must see the same values)";
    LogLine(LogLevel::kError, "rank " + std::to_string(g.rank) + ": " + g.group_detail +
                                  "; every collective falls back to MPI (reason=bad_config)");
    g.forming = false;
    return;
  }
  if (g.group_reason != Reason::kNone) {  // disabled or bad_config on every rank
    g.forming = false;
    return;
  }
  const Config& c = g.cfg;
  const std::string credential = inc::settings::Env().String(inc::kJobCredentialEnv).value();
  auto credential_job =
      !credential.empty() ? inc::JobOfCredential(credential) : Expected<std::string>(std::string());
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
    why = "INCIN_AM is not set";
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
    o.op_timeout_ms = c.op_timeout_ms;
    // The group is left when MPI_COMM_WORLD is destroyed in MPI_Finalize,
    // after Open MPI's fence: every rank has finished every collective by
    // then, and the AM keeps the tree until the last rank left, so a rank
    // still retransmitting for its last result finds it. No linger.
    o.leave_linger_ms = 0;
    // While this rank waits on the switch, another may wait inside MPI for
    // data this rank's MPI has only queued; Open MPI moves it only while
    // its progress engine runs.
    o.on_wait = [] { incin_progress(); };
    // libinc reads INCIN_TLS_* and INCIN_INSECURE itself; a parameter among
    // them means the choice is made here, from parameters and variables.
    if (Overridden(g, "INCIN_TLS_CERT") || Overridden(g, "INCIN_TLS_KEY") || Overridden(g, "INCIN_TLS_CA") ||
        Overridden(g, "INCIN_INSECURE")) {
      const inc::settings::Reader r(g.env, nullptr);
      inc::TlsFiles files{r.String("INCIN_TLS_CERT").value(), r.String("INCIN_TLS_KEY").value(),
                          r.String("INCIN_TLS_CA").value()};
      auto insecure = r.Choice("INCIN_INSECURE");
      auto security = insecure.ok() ? inc::ChooseTransportSecurity(
                                          files, *insecure == "1",
                                          "coll_incin_tls_cert, coll_incin_tls_key and coll_incin_tls_ca or "
                                          "coll_incin_insecure=1, or the INCIN_ variables")
                                    : Expected<inc::TransportSecurity>(insecure.status());
      if (security.ok()) {
        o.security = *security;
      } else {
        ok = 0;
        why = security.status().ToString();
      }
    }
    if (!c.reduce_mode.empty()) o.reduce_mode = c.reduce_mode;
    if (!c.broadcast_mode.empty()) o.broadcast_mode = c.broadcast_mode;
    if (ok) {
      auto made = inc::client::Communicator::Create(o);
      if (made.ok()) {
        g.inc = std::move(*made);
      } else {
        ok = 0;
        why = made.status().ToString();
      }
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
// ranks' by then). Not collective: the first call may be on a communicator
// of a few ranks; the ranks compare settings in FormGroup.
void ConfigureOnce() {
  Global& g = G();
  inc::SetLogComponent("coll/incin");
  g.overrides = SetParams();
  g.env = OverlayEnv(g.overrides, GetEnv);
  auto cfg =
      ParseConfig(g.overrides, GetEnv, [](const std::string& text) { LogLine(LogLevel::kWarn, text); });
  if (cfg.ok()) {
    g.cfg = *cfg;
  } else {
    g.cfg_parsed = false;
    g.group_reason = Reason::kBadConfig;
    g.group_detail = cfg.status().message();
    // A garbled value counts as set: a job that asked for offload gets
    // errors instead of silent fallbacks (settings.h RequireOffload).
    auto require = inc::settings::Reader(g.env, nullptr).Bool("INCIN_REQUIRE_OFFLOAD");
    g.cfg.require_offload = !require.ok() || *require;
  }
  inc::SetLogLevel(g.cfg.log_level);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.world);
  if (!cfg.ok()) {
    LogLine(LogLevel::kError,
            "bad configuration: " + g.group_detail + "; every collective falls back to MPI");
  } else if (!g.cfg.enable) {
    g.group_reason = Reason::kDisabled;
  }
  for (const std::string& n : UnknownEnvNames(environ))
    LogLine(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCIN_* names)");
  LogLine(LogLevel::kInfo, "coll/incin selected on rank " + std::to_string(g.rank));
}

void Configure() {
  static std::once_flag once;
  std::call_once(once, ConfigureOnce);
}

// From Open MPI's structures (no MPI call): an internal communicator, a
// merged one or a split one is offloaded only if its group is provably the
// world's, whose INC group was formed.
void Classify(incin_comm* st, MPI_Comm comm) {
  st->classified = true;
  const int rel = incin_comm_relation(comm);
  if (rel != MPI_IDENT && rel != MPI_SIMILAR) {
    st->reason = Reason::kSubcomm;
  } else if (comm != MPI_COMM_WORLD && incin_thread_multiple()) {
    // Threads may order collectives of different communicators differently
    // on different ranks; they would meet on the one shared INC group.
    st->reason = Reason::kThreadMultiple;
  } else if (rel == MPI_SIMILAR) {
    st->to_world.resize(static_cast<size_t>(incin_comm_size(comm)));
    if (incin_comm_world_ranks(comm, st->to_world.data()) != MPI_SUCCESS) {
      st->reason = Reason::kSubcomm;  // cannot map the ranks: not provably the world's
      st->to_world.clear();
      return;
    }
    st->permuted = true;
  }
}

// What the communicator allows (kNone: the INC group may run the call;
// kGroupFailed is not the communicator's business: Dispatch makes such a
// call an error if it would have been offloaded).
Reason CommReason(incin_comm* st, MPI_Comm comm) {
  Configure();
  if (!st->classified) Classify(st, comm);
  Global& g = G();
  if (!g.attempted && st->reason == Reason::kNone) FormGroup();
  const Reason group = g.group_reason;
  if (group != Reason::kNone && group != Reason::kGroupFailed) return group;
  return st->reason;  // also for a subcomm before any collective with the world's group
}

// The first line per call and reason at `level` (INCIN_MPI_FALLBACK_LOG=all:
// every one), later ones at debug.
LogLevel FirstOrDebug(Call call, Reason reason, LogLevel level) {
  Global& g = G();
  std::lock_guard<std::mutex> l(g.log_mu);
  bool first = g.logged.insert({call, reason}).second;
  return first || g.cfg.fallback_log_all ? level : LogLevel::kDebug;
}

void LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes) {
  Global& g = G();
  LogLevel level = FirstOrDebug(call, reason, g.cfg.fallback_log_level);
  if (level < g.cfg.log_level) return;
  std::string detail;
  if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig) && !g.group_detail.empty())
    detail = " detail=\"" + g.group_detail + "\"";
  LogLine(level, std::string("fallback reason=") + ReasonName(reason) + " call=" + CallName(call) + " rank=" +
                     std::to_string(g.rank) + " comm=" + (comm == MPI_COMM_WORLD ? "world" : "derived") +
                     " bytes=" + std::to_string(bytes) + detail);
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// INCIN_REQUIRE_OFFLOAD: a call that would fall back returns MPI_ERR_OTHER
// with the reason instead (decision.h RequiredOffloadFails).
int RequiredOffloadError(Call call, Reason reason, uint64_t bytes, Clock::time_point t0,
                         std::string detail = "") {
  Global& g = G();
  if (reason == Reason::kNoGroup || reason == Reason::kBadConfig) detail = g.group_detail;
  const std::string why = inc::settings::OffloadRequiredError(
                              CallName(call), "Open MPI's next coll component", ReasonName(reason), detail)
                              .message();
  if (FirstOrDebug(call, reason, LogLevel::kError) >= g.cfg.log_level)
    LogLine(LogLevel::kError, "rank " + std::to_string(g.rank) + ": " + why + "; returning MPI_ERR_OTHER");
  g.stats.Record(call, reason, bytes, Since(t0));
  return MPI_ERR_OTHER;
}

// A call on a communicator that is not offloaded: straight to the next
// component, counted with the bytes Open MPI's own datatype record gives
// (nothing decodes the datatype).
template <typename Fallback>
int PassOn(Call call, Reason reason, MPI_Comm comm, uint64_t bytes, Fallback&& fallback) {
  auto t0 = Clock::now();
  if (RequiredOffloadFails(G().cfg, reason)) return RequiredOffloadError(call, reason, bytes, t0);
  LogFallback(call, reason, comm, bytes);
  int rc = fallback();
  G().stats.Record(call, reason, bytes, Since(t0));
  return rc;
}

uint64_t Bytes(int count, MPI_Datatype dt) {
  return count > 0 ? static_cast<uint64_t>(count) * incin_type_size(dt) : 0;
}

bool HasTypeRecord(MPI_Datatype dt) {
  return incin_type_decodable(dt) != 0;
}

// `packable`: this rank can pack its layout (PackableItem); `agree`
// reduces an int with MPI_MIN over the communicator on the next component.
template <typename Agree, typename Offload, typename Fallback>
int Dispatch(MPI_Comm comm, const Request& q, bool packed, bool packable, Agree&& agree, Offload&& offload,
             Fallback&& fallback) {
  Global& g = G();
  auto t0 = Clock::now();
  Decision d = Decide(g.cfg, q);
  // Only a call of more than kMaxPackItem bytes can have an item MPI_Pack
  // cannot take, on some rank: the ranks agree before any of them offloads.
  // Also after INC failed, so that every rank still makes the same calls.
  if (d.offload && q.bytes > kMaxPackItem && !agree(packable ? 1 : 0)) {
    d.offload = false;
    d.reason = Reason::kItemTooLarge;
    d.fail = RequiredOffloadFails(g.cfg, d.reason);
  }
  if (d.fail) return RequiredOffloadError(q.call, d.reason, q.bytes, t0);
  if (d.offload) {
    Status s;
    if (!g.inc || g.group_reason == Reason::kGroupFailed) {
      // Another rank may still find the tree failed only now, in this very
      // call; running it on MPI here would leave this rank alone there.
      LogLine(FirstOrDebug(q.call, Reason::kGroupFailed, LogLevel::kError),
              std::string(CallName(q.call)) + " on rank " + std::to_string(g.rank) +
                  " would run on the switch, but INC failed earlier (" + g.group_detail +
                  "): returning MPI_ERR_OTHER");
      g.stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
      return MPI_ERR_OTHER;
    }
    s = offload(d);
    if (s.ok()) {
      g.stats.Record(q.call, Reason::kNone, q.bytes, Since(t0), packed);
      return MPI_SUCCESS;
    }
    if (!IsSwitchUnsupported(s)) {
      g.group_detail = s.ToString();
      g.group_reason = Reason::kGroupFailed;
      {
        std::lock_guard<std::mutex> l(g.log_mu);
        g.logged.insert({q.call, Reason::kGroupFailed});
      }
      LogLine(LogLevel::kError, std::string("offloaded ") + CallName(q.call) + " failed on rank " +
                                    std::to_string(g.rank) + ": " + s.ToString() +
                                    " (returning MPI_ERR_OTHER; every later call that would run on the "
                                    "switch fails too)");
      g.stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
      return MPI_ERR_OTHER;
    }
    d.reason = Reason::kSwitchUnsupported;
    if (RequiredOffloadFails(g.cfg, d.reason))
      return RequiredOffloadError(q.call, d.reason, q.bytes, t0, s.message());
  }
  LogFallback(q.call, d.reason, comm, q.bytes);
  int rc = fallback();
  g.stats.Record(q.call, d.reason, q.bytes, Since(t0));
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

void incin_note_disabled(int rank) {
  static std::once_flag once;
  std::call_once(once, [rank] {
    // Quietly: the component is off, so its configuration is none of this
    // job's business beyond the log level.
    auto cfg = ParseConfig(SetParams(), GetEnv);
    if (!cfg.ok() || cfg->log_level > LogLevel::kInfo) return;
    inc::SetLogComponent("coll/incin");
    inc::SetLogLevel(cfg->log_level);
    LogLine(LogLevel::kInfo, "rank " + std::to_string(rank) +
                                 ": not enabled (coll_incin_enable is false; --mca coll_incin_enable 1 turns "
                                 "it on): Open MPI's other coll components run every collective");
  });
}

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
    g.inc.reset();  // LeaveGroup: the AM dismantles the tree once every rank left
  }
  if (!g.attempted && g.group_reason == Reason::kNone && g.stats.Offloaded() + g.stats.FellBack() == 0)
    return;
  Stats::Header h;
  h.rank = g.rank;
  h.world = g.world;
  h.enabled = g.cfg.enable;
  const Reason group = g.group_reason;
  h.group = group == Reason::kNone ? "ok" : ReasonName(group);
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
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kAllreduce, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  Request q = AllreduceRequest(comm_reason, rbuf, count, t, op);
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision& d) { return OffloadAllreduce(*G().inc, d, sbuf, rbuf, count, dt, t, q.bytes); },
      fallback);
}

int incin_reduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                 int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce(m, sbuf, rbuf, count, dt, op, root, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kReduce, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int me = incin_comm_rank(comm);
  bool is_root = me == root;
  Request q = ReduceRequest(comm_reason, sbuf, rbuf, count, t, op, root, me, incin_comm_size(comm));
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
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
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kBcast, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int me = incin_comm_rank(comm);
  Request q = BcastRequest(comm_reason, count, t, root, incin_comm_size(comm));
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision&) {
        return OffloadBcast(*G().inc, buf, count, dt, t, q.bytes, me == root, WorldRank(ToWorld(st), root));
      },
      fallback);
}

int incin_barrier(incin_comm* st, void* m, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_barrier(m, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone) return PassOn(Call::kBarrier, comm_reason, comm, 0, fallback);
  Request q;
  q.call = Call::kBarrier;
  return Dispatch(
      comm, q, false, true, [](int) { return true; }, [&](const Decision&) { return G().inc->Barrier(); },
      fallback);
}

int incin_reduce_scatter_block(incin_comm* st, void* m, const void* sbuf, void* rbuf, int rcount,
                               MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce_scatter_block(m, sbuf, rbuf, rcount, dt, op, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kReduceScatterBlock, comm_reason, comm,
                  Bytes(rcount, dt) * static_cast<uint64_t>(incin_comm_size(comm)), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int size = incin_comm_size(comm);
  Request q = ReduceScatterBlockRequest(comm_reason, rbuf, rcount, t, op, size);
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
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
  if (comm_reason != Reason::kNone)
    return PassOn(Call::kAllgather, comm_reason, comm, Bytes(rcount, rdt), fallback);
  TypeInfo rt = DescribeType(rdt, HasTypeRecord);
  TypeInfo stt = sbuf == MPI_IN_PLACE ? rt : DescribeType(sdt, HasTypeRecord);
  int me = incin_comm_rank(comm);
  int size = incin_comm_size(comm);
  Request q = AllgatherRequest(comm_reason, sbuf, scount, stt, rbuf, rcount, rt);
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous, PackableItem(rt) && PackableItem(stt), agree,
      [&](const Decision&) {
        return OffloadAllgather(*G().inc, sbuf, scount, sdt, stt, rbuf, rcount, rdt, rt, q.bytes, me, size,
                                G().inc_rank, ToWorld(st));
      },
      fallback);
}

}  // extern "C"
