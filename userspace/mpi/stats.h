// SPDX-License-Identifier: Apache-2.0
// Per-call accounting of libincmpi: calls, bytes and wall time, offloaded or
// fallen back per reason; rendered as a text table and as JSON at
// MPI_Finalize (INCIN_MPI_SUMMARY, INCIN_MPI_SUMMARY_JSON).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "mpi/config.h"
#include "mpi/decision.h"

namespace inc::mpi {

struct Tally {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

class Stats {
 public:
  // kNone = offloaded; kGroupFailed = the call returned an MPI error (an
  // offload failed, or INC had failed before: counted as "failed", not as a
  // fallback); `packed`: an offloaded call that went through
  // MPI_Pack/MPI_Unpack on this rank (a non-contiguous local layout).
  void Record(Call call, Reason reason, uint64_t bytes, double seconds, bool packed = false);
  Tally Get(Call call, Reason reason) const;
  uint64_t Packed(Call call) const;
  uint64_t Offloaded() const;  // calls, all collectives
  uint64_t FellBack() const;
  uint64_t Failed() const;

  struct Header {
    int rank = 0;
    int world = 0;
    bool enabled = true;
    std::string group;  // "ok" or the reason it is not
    std::string group_detail;
    std::string job_id;
    int tree_id = -1;
    std::string libinc_status_json;  // "" = none
  };
  std::string ToJson(const Header& h) const;
  std::string ToText(const Header& h) const;

 private:
  mutable std::mutex mu_;
  std::array<std::array<Tally, static_cast<size_t>(Reason::kCount)>, static_cast<size_t>(Call::kCount)> t_{};
  std::array<uint64_t, static_cast<size_t>(Call::kCount)> packed_{};
};

// The summary as INCIN_MPI_SUMMARY and INCIN_MPI_SUMMARY_JSON ask for it: the
// text table on stderr, the JSON document in this rank's file.
void WriteSummary(const Stats& stats, const Stats::Header& h, const Config& cfg);

}  // namespace inc::mpi
