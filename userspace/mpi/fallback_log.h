// SPDX-License-Identifier: Apache-2.0
// What both MPI front ends (libincmpi and coll/incin) log about a call that
// does not run on the switch, free of MPI so that it is tested without a
// running MPI: which line of a (call, reason) pair is logged at its level
// and which at debug (INCIN_MPI_FALLBACK_LOG=first|all), and the text of
// the "fallback reason=..." line that scripts and the lab tests grep.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "common/log.h"
#include "mpi/config.h"
#include "mpi/decision.h"

namespace inc::mpi {

class FallbackLog {
 public:
  // `level` for the first line about (call, reason), and for every line
  // with `all` (INCIN_MPI_FALLBACK_LOG=all); kDebug for later ones, so a
  // loop that falls back a million times logs once at the visible level.
  // Also marks the pair as logged when the caller logs by other means.
  LogLevel Level(Call call, Reason reason, LogLevel level, bool all);

 private:
  std::mutex mu_;  // front ends log from any thread under MPI_THREAD_MULTIPLE
  std::set<std::pair<Call, Reason>> logged_;
};

// The fallback line: "fallback reason=<r> call=<MPI_...> rank=<n>
// comm=world|derived bytes=<n>[ detail="<group detail>"]". The detail
// (why the group is missing) only for no_group and bad_config, the reasons
// it explains.
std::string FallbackLine(Call call, Reason reason, int rank, bool world_comm, uint64_t bytes,
                         const std::string& group_detail);

}  // namespace inc::mpi
