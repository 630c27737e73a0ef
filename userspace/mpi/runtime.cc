// SPDX-License-Identifier: Apache-2.0
#include "mpi/runtime.h"

#include <cstdio>
#include <utility>

#include "common/job_credential.h"
#include "common/settings.h"
#include "mpi/mpi_types.h"

namespace inc::mpi {

void Runtime::Log(LogLevel level, const std::string& text) const {
  if (level >= cfg.log_level) LogLine(level, text);
}

void Runtime::LogBadConfig() const {
  LogLine(LogLevel::kError, "bad configuration: " + group_detail + "; every collective falls back to MPI" +
                                (cfg.require_offload ? " (or fails: INCIN_REQUIRE_OFFLOAD)" : ""));
}

bool Runtime::SettingsAgree(bool thread_multiple) {
  const uint64_t fp = AgreementFingerprint(cfg, cfg_parsed, thread_multiple);
  unsigned long long mine[2] = {fp, ~fp}, min[2] = {0, 0};
  PMPI_Allreduce(mine, min, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  if (FingerprintsAgree(min[0], min[1])) return true;
  group_reason = Reason::kBadConfig;
  group_detail =
      "the ranks do not agree on INCIN_MPI_ENABLE, INCIN_MPI_MIN_BYTES, INCIN_MPI_MAX_BYTES, "
      "INCIN_MPI_FLOAT_SUM, INCIN_MPI_REDUCE_MODE, INCIN_MPI_BROADCAST_MODE, INCIN_REQUIRE_OFFLOAD or the "
      "thread level (every rank must see the same values)";
  LogLine(LogLevel::kError, "rank " + std::to_string(rank) + ": " + group_detail +
                                "; every collective falls back to MPI (reason=bad_config)");
  return false;
}

void Runtime::FormGroup(const JoinHooks& hooks) {
  const Config& c = cfg;
  // Job id: INCIN_JOB_ID, else the one the job credential names (the
  // launcher got it for that id), else rank 0's, broadcast.
  const std::string credential = settings::Env().String(kJobCredentialEnv).value();
  auto credential_job = !credential.empty() ? JobOfCredential(credential) : Expected<std::string>("");
  if (c.job_id.empty() && credential_job.ok() && !credential_job->empty()) {
    job_id = *credential_job;
  } else if (c.job_id.empty()) {
    char buf[128] = {0};
    if (rank == 0) std::snprintf(buf, sizeof(buf), "%s", MakeJobId().c_str());
    PMPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
    job_id = buf;
  } else {
    job_id = c.job_id;
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
    o.job_id = job_id;
    o.rank = hosts.inc_rank;
    o.world_size = static_cast<uint32_t>(world);
    o.local_size = static_cast<uint32_t>(hosts.local_size);
    o.local_rank = static_cast<uint32_t>(hosts.local_rank);
    o.iface = c.iface.empty() ? DefaultRouteInterface() : c.iface;
    o.transport = c.transport;
    o.join_timeout_ms = c.join_timeout_ms;
    o.op_timeout_ms = c.op_timeout_ms;
    // Both front ends leave after every rank finished every collective
    // (libincmpi: a barrier in MPI_Finalize; coll/incin: Open MPI's fence
    // before MPI_COMM_WORLD goes), and the AM keeps the tree until the last
    // rank left: nothing needs this rank for retransmissions. No linger.
    o.leave_linger_ms = 0;
    o.on_wait = hooks.progress;
    if (!c.reduce_mode.empty()) o.reduce_mode = c.reduce_mode;
    if (!c.broadcast_mode.empty()) o.broadcast_mode = c.broadcast_mode;
    if (hooks.customize) {
      Status s = hooks.customize(o);
      if (!s.ok()) {
        ok = 0;
        why = s.ToString();
      }
    }
    if (ok) {
      auto made = client::Communicator::Create(o);
      if (made.ok()) {
        inc = std::move(*made);
      } else {
        ok = 0;
        why = made.status().ToString();
      }
    }
  }
  // Every rank or none: a rank without the group would take MPI's paths
  // while the others wait on the switch.
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) {
    tree_id = static_cast<int>(inc->GetStatus().assignment.tree_id);
    inc_ranks = hosts.inc_ranks;
    inc_rank = hosts.inc_rank;
    Log(LogLevel::kInfo, "rank " + std::to_string(rank) + ": MPI_COMM_WORLD on INC tree " +
                             std::to_string(tree_id) + " (job " + job_id + "; " + hosts.Summary() + ")");
    return;
  }
  inc.reset();
  group_reason = Reason::kNoGroup;
  group_detail = ok ? "another rank could not join the group" : why;
  LogLine(LogLevel::kWarn, "no INC group for MPI_COMM_WORLD on rank " + std::to_string(rank) + ": " +
                               group_detail + "; every collective falls back to MPI (reason=no_group)");
}

std::string Runtime::Leave() {
  std::lock_guard<std::mutex> l(inc_mu_);
  if (!inc) return "";
  std::string json = inc->GetStatus().ToJson();
  inc.reset();  // LeaveGroup
  return json;
}

void Runtime::WriteSummary(const std::string& libinc_status_json) const {
  Stats::Header h;
  h.rank = rank;
  h.world = world;
  h.enabled = cfg.enable;
  const Reason group = group_reason;
  h.group = group == Reason::kNone ? "ok" : ReasonName(group);
  h.group_detail = group_detail;
  h.job_id = job_id;
  h.tree_id = tree_id;
  h.libinc_status_json = libinc_status_json;
  mpi::WriteSummary(stats, h, cfg);
}

LogLevel Runtime::FirstOrDebug(Call call, Reason reason, LogLevel level) {
  return logged_.Level(call, reason, level, cfg.fallback_log_all);
}

void Runtime::LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes) {
  const LogLevel level = FirstOrDebug(call, reason, cfg.fallback_log_level);
  if (level < cfg.log_level) return;
  LogLine(level, FallbackLine(call, reason, rank, comm == MPI_COMM_WORLD, bytes, group_detail));
}

int Runtime::RaiseError(MPI_Comm comm) {
  if (fe_.errors == ErrorPolicy::kCallErrhandler) PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

const char* Runtime::ErrorVerb() const {
  return fe_.errors == ErrorPolicy::kCallErrhandler ? "raising" : "returning";
}

int Runtime::RequiredOffloadError(Call call, Reason reason, MPI_Comm comm, uint64_t bytes,
                                  Clock::time_point t0, std::string detail) {
  if (reason == Reason::kNoGroup || reason == Reason::kBadConfig) detail = group_detail;
  const std::string why =
      settings::OffloadRequiredError(CallName(call), fe_.fallback_name, ReasonName(reason), detail).message();
  Log(FirstOrDebug(call, reason, LogLevel::kError),
      "rank " + std::to_string(rank) + ": " + why + "; " + ErrorVerb() + " MPI_ERR_OTHER");
  stats.Record(call, reason, bytes, Since(t0));
  return RaiseError(comm);
}

int Runtime::FailedBefore(const Request& q, MPI_Comm comm, Clock::time_point t0) {
  Log(FirstOrDebug(q.call, Reason::kGroupFailed, LogLevel::kError),
      std::string(CallName(q.call)) + " on rank " + std::to_string(rank) +
          " would run on the switch, but INC failed earlier (" + group_detail + "): " + ErrorVerb() +
          " MPI_ERR_OTHER");
  stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
  return RaiseError(comm);
}

int Runtime::OffloadFailed(const Request& q, const Status& s, MPI_Comm comm, Clock::time_point t0) {
  {
    std::lock_guard<std::mutex> l(inc_mu_);
    group_detail = s.ToString();
    group_reason = Reason::kGroupFailed;
  }
  // Logged at error level whatever the level: the job is about to end. Later
  // calls' "failed earlier" lines are then at debug.
  FirstOrDebug(q.call, Reason::kGroupFailed, LogLevel::kError);
  LogLine(LogLevel::kError, std::string("offloaded ") + CallName(q.call) + " failed on rank " +
                                std::to_string(rank) + ": " + s.ToString() + " (" + ErrorVerb() +
                                " MPI_ERR_OTHER; every later call that would run on the switch fails too)");
  stats.Record(q.call, Reason::kGroupFailed, q.bytes, Since(t0));
  return RaiseError(comm);
}

}  // namespace inc::mpi
