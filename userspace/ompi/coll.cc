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
// The runtime (the group, offload or fall back, errors, counters, summary)
// is libincmpi's (mpi/runtime.h), with its invariant; this file is the
// coll skin: settings from the environment and the coll_incin_*
// parameters, communicators judged from Open MPI's structures, the group
// formed at the first eligible call, Open MPI's progress engine turned
// while libinc waits, and errors returned to Open MPI's binding, which runs
// the communicator's error handler (ErrorPolicy::kReturnCode).
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
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "common/tls.h"
#include "glue.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/mpi_types.h"
#include "mpi/offload.h"
#include "mpi/runtime.h"
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

// The skin's own state beside the shared runtime.
struct Global {
  Global() : rt(FrontEnd{"Open MPI's next coll component", ErrorPolicy::kReturnCode}) {}
  Runtime rt;
  // The environment with the coll_incin_* parameters the user set on top.
  inc::settings::EnvLookup env;
  std::vector<SettingOverride> overrides;
  // Atomic: under MPI_THREAD_MULTIPLE another thread's call on another
  // communicator may read them while the group is formed or ended.
  std::atomic<bool> attempted{false};  // group formation ran (once, at the first eligible call)
  std::atomic<bool> forming{false};    // inside formation: every call goes to the saved functions
  std::atomic<bool> done{false};       // shut down
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

// libinc reads INCIN_TLS_* and INCIN_INSECURE itself; a parameter among
// them means the choice is made here, from parameters and variables.
inc::Status ChooseSecurity(const Global& g, inc::client::CommunicatorOptions& o) {
  if (!Overridden(g, "INCIN_TLS_CERT") && !Overridden(g, "INCIN_TLS_KEY") && !Overridden(g, "INCIN_TLS_CA") &&
      !Overridden(g, "INCIN_INSECURE"))
    return Status();
  const inc::settings::Reader r(g.env, nullptr);
  inc::TlsFiles files{r.String("INCIN_TLS_CERT").value(), r.String("INCIN_TLS_KEY").value(),
                      r.String("INCIN_TLS_CA").value()};
  auto insecure = r.Choice("INCIN_INSECURE");
  if (!insecure.ok()) return insecure.status();
  auto security =
      inc::ChooseTransportSecurity(files, *insecure == "1",
                                   "coll_incin_tls_cert, coll_incin_tls_key and coll_incin_tls_ca or "
                                   "coll_incin_insecure=1, or the INCIN_ variables");
  if (!security.ok()) return security.status();
  o.security = *security;
  return Status();
}

// Runs on every rank at once: the first eligible call is on a communicator
// with the world's group, so every world rank is in it. The collectives
// here go to the saved functions (G().forming).
void FormGroup() {
  Global& g = G();
  Runtime& rt = g.rt;
  g.attempted = true;
  g.forming = true;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rt.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &rt.world);
  // Unlike in MPI_Init, ranks get here from arbitrary program states: one
  // may still wait in MPI for a message another has only queued, and the
  // blocking JoinGroup below does not run MPI's progress engine. The
  // barrier progresses MPI until every rank has arrived, so all join at once.
  PMPI_Barrier(MPI_COMM_WORLD);
  // Every rank comes here, also one with INC disabled or a bad setting:
  // only together can they tell whether all of them would offload alike.
  // Disabled or bad_config (this rank's view, now every rank's) forms nothing.
  if (rt.SettingsAgree(incin_thread_multiple() != 0) && rt.group_reason == Reason::kNone) {
    JoinHooks hooks;
    // Open MPI moves queued data only while its progress engine runs.
    hooks.progress = [] { incin_progress(); };
    hooks.customize = [&g](inc::client::CommunicatorOptions& o) { return ChooseSecurity(g, o); };
    rt.FormGroup(hooks);
  }
  g.forming = false;
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
    g.rt.cfg = *cfg;
  } else {
    g.rt.cfg_parsed = false;
    g.rt.group_reason = Reason::kBadConfig;
    g.rt.group_detail = cfg.status().message();
    // A garbled value counts as set: a job that asked for offload gets
    // errors instead of silent fallbacks (settings.h RequireOffload).
    auto require = inc::settings::Reader(g.env, nullptr).Bool("INCIN_REQUIRE_OFFLOAD");
    g.rt.cfg.require_offload = !require.ok() || *require;
  }
  inc::SetLogLevel(g.rt.cfg.log_level);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rt.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.rt.world);
  if (!cfg.ok()) {
    g.rt.LogBadConfig();
  } else if (!g.rt.cfg.enable) {
    g.rt.group_reason = Reason::kDisabled;
  }
  for (const std::string& n : UnknownEnvNames(environ))
    LogLine(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCIN_* names)");
  LogLine(LogLevel::kInfo, "coll/incin selected on rank " + std::to_string(g.rt.rank));
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
  const Reason group = g.rt.group_reason;
  if (group != Reason::kNone && group != Reason::kGroupFailed) return group;
  return st->reason;  // also for a subcomm before any collective with the world's group
}

// Counted with the bytes Open MPI's own datatype record gives (a call
// passed on decodes no datatype).
uint64_t Bytes(int count, MPI_Datatype dt) {
  return count > 0 ? static_cast<uint64_t>(count) * incin_type_size(dt) : 0;
}

bool HasTypeRecord(MPI_Datatype dt) {
  return incin_type_decodable(dt) != 0;
}

// The INC group ranks of a communicator's ranks (null: they are the
// world's ranks). Only after the group formed, which fixes inc_ranks.
RankMap ToWorld(incin_comm* st) {
  const std::vector<int>& inc = G().rt.inc_ranks;
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
  // After Open MPI's fence: every rank has finished every collective.
  const std::string libinc_json = g.rt.Leave();
  // A component Open MPI selected but the program never used says nothing.
  if (!g.attempted && g.rt.group_reason == Reason::kNone &&
      g.rt.stats.Offloaded() + g.rt.stats.FellBack() == 0)
    return;
  g.rt.WriteSummary(libinc_json);
}

int incin_allreduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allreduce(m, sbuf, rbuf, count, dt, op, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return G().rt.PassOn(Call::kAllreduce, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  Request q = AllreduceRequest(comm_reason, rbuf, count, t, op);
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return G().rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision& d) { return OffloadAllreduce(*G().rt.inc, d, sbuf, rbuf, count, dt, t, q.bytes); },
      fallback);
}

int incin_reduce(incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                 int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce(m, sbuf, rbuf, count, dt, op, root, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return G().rt.PassOn(Call::kReduce, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int me = incin_comm_rank(comm);
  bool is_root = me == root;
  Request q = ReduceRequest(comm_reason, sbuf, rbuf, count, t, op, root, me, incin_comm_size(comm));
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return G().rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision& d) {
        return OffloadReduce(*G().rt.inc, d, sbuf, rbuf, count, dt, t, q.bytes, is_root,
                             WorldRank(ToWorld(st), root));
      },
      fallback);
}

int incin_bcast(incin_comm* st, void* m, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_bcast(m, buf, count, dt, root, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return G().rt.PassOn(Call::kBcast, comm_reason, comm, Bytes(count, dt), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int me = incin_comm_rank(comm);
  Request q = BcastRequest(comm_reason, count, t, root, incin_comm_size(comm));
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return G().rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision&) {
        return OffloadBcast(*G().rt.inc, buf, count, dt, t, q.bytes, me == root,
                            WorldRank(ToWorld(st), root));
      },
      fallback);
}

int incin_barrier(incin_comm* st, void* m, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_barrier(m, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone) return G().rt.PassOn(Call::kBarrier, comm_reason, comm, 0, fallback);
  Request q;
  q.call = Call::kBarrier;
  return G().rt.Dispatch(
      comm, q, false, true, [](int) { return true; }, [&](const Decision&) { return G().rt.inc->Barrier(); },
      fallback);
}

int incin_reduce_scatter_block(incin_comm* st, void* m, const void* sbuf, void* rbuf, int rcount,
                               MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_reduce_scatter_block(m, sbuf, rbuf, rcount, dt, op, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return G().rt.PassOn(Call::kReduceScatterBlock, comm_reason, comm,
                         Bytes(rcount, dt) * static_cast<uint64_t>(incin_comm_size(comm)), fallback);
  TypeInfo t = DescribeType(dt, HasTypeRecord);
  int size = incin_comm_size(comm);
  Request q = ReduceScatterBlockRequest(comm_reason, rbuf, rcount, t, op, size);
  auto agree = [&](int mine) {
    int all = 0;
    incin_prev_allreduce(m, &mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all != 0;
  };
  return G().rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), agree,
      [&](const Decision& d) {
        return OffloadReduceScatterBlock(*G().rt.inc, d, sbuf, rbuf, rcount, dt, t, q.bytes, size,
                                         ToWorld(st));
      },
      fallback);
}

int incin_allgather(incin_comm* st, void* m, const void* sbuf, int scount, MPI_Datatype sdt, void* rbuf,
                    int rcount, MPI_Datatype rdt, MPI_Comm comm) {
  auto fallback = [&] { return incin_prev_allgather(m, sbuf, scount, sdt, rbuf, rcount, rdt, comm); };
  if (Bypass()) return fallback();
  Reason comm_reason = CommReason(st, comm);
  if (comm_reason != Reason::kNone)
    return G().rt.PassOn(Call::kAllgather, comm_reason, comm, Bytes(rcount, rdt), fallback);
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
  return G().rt.Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous, PackableItem(rt) && PackableItem(stt), agree,
      [&](const Decision&) {
        return OffloadAllgather(*G().rt.inc, sbuf, scount, sdt, stt, rbuf, rcount, rdt, rt, q.bytes, me, size,
                                G().rt.inc_rank, ToWorld(st));
      },
      fallback);
}

}  // extern "C"
