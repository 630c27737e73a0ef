// SPDX-License-Identifier: Apache-2.0
// gRPC's own log lines (gpr_log, the logging of the gRPC 1.51 that Debian 12
// ships; absl's log sinks arrived in later releases) through inc's logger, so
// they share the daemon's format and level. Header of the inc_grpc_log
// library: inc_common itself has no gRPC.
#pragma once

#include "common/log.h"

namespace inc {

// Installs the bridge: every gRPC line is logged with LogLineFrom(level,
// "grpc", "file:line: message"), gRPC's ERROR as error, INFO as info and
// DEBUG as debug. Call before the first gRPC object is made.
void RouteGrpcLogs();

// Tells gRPC which lines to produce for inc's current log level: all of
// them at debug, its errors only otherwise. Call again after the level
// changes. Does nothing when GRPC_VERBOSITY is set in the environment (it
// then decides, as gRPC documents).
void SyncGrpcLogVerbosity();

// The level a gRPC severity (GPR_LOG_SEVERITY_*) is logged at.
LogLevel GrpcSeverityToLevel(int gpr_severity);

}  // namespace inc
