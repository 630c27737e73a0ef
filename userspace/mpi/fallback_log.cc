// SPDX-License-Identifier: Apache-2.0
#include "mpi/fallback_log.h"

namespace inc::mpi {

LogLevel FallbackLog::Level(Call call, Reason reason, LogLevel level, bool all) {
  std::lock_guard<std::mutex> l(mu_);
  const bool first = logged_.insert({call, reason}).second;
  return first || all ? level : LogLevel::kDebug;
}

std::string FallbackLine(Call call, Reason reason, int rank, bool world_comm, uint64_t bytes,
                         const std::string& group_detail) {
  std::string detail;
  if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig) && !group_detail.empty())
    detail = " detail=\"" + group_detail + "\"";
  return std::string("fallback reason=") + ReasonName(reason) + " call=" + CallName(call) +
         " rank=" + std::to_string(rank) + " comm=" + (world_comm ? "world" : "derived") +
         " bytes=" + std::to_string(bytes) + detail;
}

}  // namespace inc::mpi
