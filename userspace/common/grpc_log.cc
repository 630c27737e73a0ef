// SPDX-License-Identifier: Apache-2.0
#include "common/grpc_log.h"

#include <grpc/support/log.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace inc {
namespace {

void Bridge(gpr_log_func_args* args) {
  const char* file = args->file ? args->file : "?";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  const LogLevel level = GrpcSeverityToLevel(args->severity);
  if (level < GetLogLevel()) return;
  LogLineFrom(
      level, "grpc",
      std::string(file) + ":" + std::to_string(args->line) + ": " + (args->message ? args->message : ""));
}

}  // namespace

LogLevel GrpcSeverityToLevel(int gpr_severity) {
  switch (gpr_severity) {
    case GPR_LOG_SEVERITY_DEBUG: return LogLevel::kDebug;
    case GPR_LOG_SEVERITY_INFO: return LogLevel::kInfo;
    default: return LogLevel::kError;
  }
}

void RouteGrpcLogs() {
  gpr_set_log_function(&Bridge);
  SyncGrpcLogVerbosity();
}

void SyncGrpcLogVerbosity() {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) return;
  gpr_set_log_verbosity(GetLogLevel() == LogLevel::kDebug ? GPR_LOG_SEVERITY_DEBUG : GPR_LOG_SEVERITY_ERROR);
}

}  // namespace inc
