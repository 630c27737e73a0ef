// SPDX-License-Identifier: Apache-2.0
// The runtime both MPI front ends share: libincmpi (interpose.cc, the PMPI
// interposer) and coll/incin (userspace/ompi/coll.cc, the Open MPI coll
// component) are thin skins over it. It holds MPI_COMM_WORLD's INC group
// and its state, forms the group, runs one intercepted call (Dispatch:
// offload on libinc or fall back, with the reasons, log lines, errors and
// counters of docs/mpi.md), and writes the summary. What the skins keep is
// what really differs: where settings come from, how a communicator is
// classified, when the group forms and ends, the progress hook libinc
// calls while it waits, and how an error reaches the program (ErrorPolicy).
//
// Invariant: every rank takes the same path for the same call. Decisions
// use only what a correct MPI program passes identically on every rank and
// the INCIN_* settings the ranks compared (SettingsAgree), the group is used
// only if every rank formed it, and an offloaded call that fails is an MPI
// error, never a silent local fallback (other ranks may already have
// finished it on the switch): that call and every later one that would have
// been offloaded is MPI_ERR_OTHER on every rank (docs/mpi.md "Errors").
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/communicator.h"
#include "common/log.h"
#include "common/status.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/fallback_log.h"
#include "mpi/offload.h"
#include "mpi/stats.h"

namespace inc::mpi {

// How a front end hands an MPI error to the program.
enum class ErrorPolicy {
  // libincmpi is the MPI_* function the program called, so it runs the
  // communicator's error handler itself, as MPI would, then returns the code.
  kCallErrhandler,
  // coll/incin returns the code to Open MPI's binding (ompi/mpi/c/*.c), which
  // runs the communicator's error handler on it; calling the handler here
  // too would run it twice (an MPI_ERRORS_RETURN program sees one error).
  kReturnCode,
};

struct FrontEnd {
  // Where a call that is not offloaded runs, for INCIN_REQUIRE_OFFLOAD's
  // error: "MPI", "Open MPI's next coll component".
  const char* fallback_name = "MPI";
  ErrorPolicy errors = ErrorPolicy::kCallErrhandler;
};

// What group formation takes from the skin.
struct JoinHooks {
  // libinc's CommunicatorOptions::on_wait: one turn of MPI's progress
  // engine. While this rank waits on the switch another may wait inside MPI
  // for data this rank's MPI has only queued (an eager send of an earlier
  // fallback or of the program's point-to-point), which moves only while
  // MPI's progress runs here.
  std::function<void()> progress;
  // The skin's own options (coll/incin: TLS from its MCA parameters); an
  // error is this rank's reason for no group. May be empty.
  std::function<Status(client::CommunicatorOptions&)> customize;
};

class Runtime {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Runtime(FrontEnd fe) : fe_(fe) {}

  // Set by the skin at init, then read by every call.
  Config cfg;
  bool cfg_parsed = true;
  int rank = 0;
  int world = 1;
  // MPI_COMM_WORLD's INC group; null without one.
  std::unique_ptr<client::Communicator> inc;
  // kNone = the group runs calls. Agreed by every rank once the group
  // formed, except kGroupFailed, which a rank sets when one of its
  // offloaded calls fails (another thread may read it meanwhile). Before,
  // this rank's own view (disabled, bad_config).
  std::atomic<Reason> group_reason{Reason::kNone};
  std::string group_detail;
  std::string job_id;
  int tree_id = -1;
  // The INC group numbers ranks host by host (mpi_types.h HostLayout):
  // world rank -> INC group rank, empty when they are the same.
  std::vector<int> inc_ranks;
  uint32_t inc_rank = 0;
  Stats stats;

  // A line at `level` if INCIN_MPI_LOG_LEVEL lets it through.
  void Log(LogLevel level, const std::string& text) const;
  // The settings did not parse (group_detail says why): one error line.
  void LogBadConfig() const;

  // Collective on MPI_COMM_WORLD (PMPI): every rank compares its deciding
  // settings with the others' (config.h AgreementFingerprint). Also a rank
  // with INC disabled or a bad value must come here, else it would pair
  // its next collective with the others' group formation. On a difference
  // every rank sets bad_config and false is returned.
  bool SettingsAgree(bool thread_multiple);

  // Collective on MPI_COMM_WORLD (PMPI): joins the AM and forms the group
  // on every rank or on none (kNoGroup with the reason).
  void FormGroup(const JoinHooks& hooks);

  // Leaves the group (the AM dismantles the tree once every rank left) and
  // returns libinc's status JSON for the summary ("" without a group).
  std::string Leave();

  // INCIN_MPI_SUMMARY / INCIN_MPI_SUMMARY_JSON.
  void WriteSummary(const std::string& libinc_status_json) const;

  static double Since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // A call whose communicator is not offloaded: straight to the fallback,
  // before anything looks at its datatypes (coll/incin: Open MPI calls in
  // with datatypes MPI cannot decode).
  template <typename Fallback>
  int PassOn(Call call, Reason reason, MPI_Comm comm, uint64_t bytes, Fallback&& fallback) {
    const auto t0 = Clock::now();
    if (RequiredOffloadFails(cfg, reason)) return RequiredOffloadError(call, reason, comm, bytes, t0);
    LogFallback(call, reason, comm, bytes);
    const int rc = fallback();
    stats.Record(call, reason, bytes, Since(t0));
    return rc;
  }

  // Runs one call whose communicator may be offloaded: offload (a libinc
  // call, `Status offload(const Decision&)`) or `int fallback()`.
  // `packed`: this rank's layout goes through MPI_Pack/MPI_Unpack when
  // offloaded; `packable`: it can be (mpi_types.h PackableItem); `bool
  // agree(int mine)`: MPI_MIN of an int over the communicator on MPI's
  // algorithm.
  template <typename Agree, typename Offload, typename Fallback>
  int Dispatch(MPI_Comm comm, const Request& q, bool packed, bool packable, Agree&& agree, Offload&& offload,
               Fallback&& fallback) {
    const auto t0 = Clock::now();
    Decision d = Decide(cfg, q);
    // Only a call of more than kMaxPackItem bytes can have an item MPI_Pack
    // cannot take, on some rank: the ranks agree before any of them
    // offloads. Also after INC failed, so that every rank still makes the
    // same calls.
    if (d.offload && q.bytes > kMaxPackItem && !agree(packable ? 1 : 0)) {
      d.offload = false;
      d.reason = Reason::kItemTooLarge;
      d.fail = RequiredOffloadFails(cfg, d.reason);
    }
    if (d.fail) return RequiredOffloadError(q.call, d.reason, comm, q.bytes, t0);
    if (d.offload) {
      Status s;
      bool have_group;
      {
        // One call at a time on the libinc Communicator, which is not
        // thread-safe: a correct program never runs two collectives on
        // MPI_COMM_WORLD's group at once (derived communicators fall back
        // under MPI_THREAD_MULTIPLE), an erroneous one must not corrupt it.
        std::lock_guard<std::mutex> l(inc_mu_);
        have_group = inc && group_reason == Reason::kNone;  // else: a call failed before
        if (have_group) s = offload(d);
      }
      if (!have_group) return FailedBefore(q, comm, t0);
      if (s.ok()) {
        stats.Record(q.call, Reason::kNone, q.bytes, Since(t0), packed);
        return MPI_SUCCESS;
      }
      if (!IsSwitchUnsupported(s)) return OffloadFailed(q, s, comm, t0);
      d.reason = Reason::kSwitchUnsupported;
      if (RequiredOffloadFails(cfg, d.reason))
        return RequiredOffloadError(q.call, d.reason, comm, q.bytes, t0, s.message());
    }
    LogFallback(q.call, d.reason, comm, q.bytes);
    const int rc = fallback();
    stats.Record(q.call, d.reason, q.bytes, Since(t0));
    return rc;
  }

 private:
  LogLevel FirstOrDebug(Call call, Reason reason, LogLevel level);
  void LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes);
  // MPI_ERR_OTHER to the program, as the ErrorPolicy says.
  int RaiseError(MPI_Comm comm);
  // "raising" or "returning", for the log lines.
  const char* ErrorVerb() const;
  // INCIN_REQUIRE_OFFLOAD: a call that would fall back is MPI_ERR_OTHER with
  // the reason instead (decision.h RequiredOffloadFails).
  int RequiredOffloadError(Call call, Reason reason, MPI_Comm comm, uint64_t bytes, Clock::time_point t0,
                           std::string detail = "");
  // A call that would run on the switch after INC failed on this rank:
  // another rank may find the tree failed only now, in this very call, so
  // running it on MPI here would leave this rank alone there.
  int FailedBefore(const Request& q, MPI_Comm comm, Clock::time_point t0);
  // An offloaded call failed: INC is failed on this rank from now on.
  int OffloadFailed(const Request& q, const Status& s, MPI_Comm comm, Clock::time_point t0);

  const FrontEnd fe_;
  std::mutex inc_mu_;
  FallbackLog logged_;
};

}  // namespace inc::mpi
