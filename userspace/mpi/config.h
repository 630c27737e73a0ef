// SPDX-License-Identifier: Apache-2.0
// libincmpi configuration: every knob is an environment variable (the MPI
// program is unmodified; mpirun -x exports them to the ranks). Names and
// defaults are documented in docs/mpi.md and listed by kEnvVars below.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace inc::mpi {

enum class SummaryMode { kOff, kRank0, kAll };

struct Config {
  bool enable = true;                // INCMPI_ENABLE
  uint64_t min_bytes = 0;            // INCMPI_MIN_BYTES: smaller messages use MPI's algorithm
  uint64_t max_bytes = 0;            // INCMPI_MAX_BYTES: larger ones too (0 = no limit)
  std::string am;                    // INCMPI_AM: host:port of incamd ("" = no INC)
  std::string iface;                 // INCMPI_IFACE: "" = the interface of the default route
  std::string transport = "auto";    // INCMPI_TRANSPORT
  std::string job_id;                // INCMPI_JOB_ID: "" = made by rank 0 and broadcast
  uint32_t join_timeout_ms = 30000;  // INCMPI_JOIN_TIMEOUT_MS
  // INCMPI_OP_TIMEOUT_MS: how long an offloaded collective waits without
  // progress for the slowest rank before it fails (libinc's op_timeout_ms;
  // 0 = as long as it takes, as MPI's own algorithms wait).
  uint32_t op_timeout_ms = 0;
  bool float_sum = true;                          // INCMPI_FLOAT_SUM=offload|fallback (fixed-point sums)
  std::string reduce_mode;                        // INCMPI_REDUCE_MODE: libinc's, "" = its default
  std::string broadcast_mode;                     // INCMPI_BROADCAST_MODE: libinc's, "" = its default
  LogLevel log_level = LogLevel::kWarn;           // INCMPI_LOG_LEVEL (also libinc's)
  LogLevel fallback_log_level = LogLevel::kWarn;  // INCMPI_FALLBACK_LOG_LEVEL
  bool fallback_log_all = false;                  // INCMPI_FALLBACK_LOG=first|all
  SummaryMode summary = SummaryMode::kOff;        // INCMPI_SUMMARY=0|1|all
  std::string summary_json;                       // INCMPI_SUMMARY_JSON: path, %r = rank
};

struct EnvVar {
  const char* name;
  const char* default_text;
  const char* meaning;
};
extern const std::vector<EnvVar> kEnvVars;

// getenv-like lookup; nullptr = unset. Unset and empty mean "default".
using EnvLookup = std::function<const char*(const char*)>;

// Every problem is reported (INVALID_ARGUMENT naming the variable, its value
// and what is accepted); unknown INCMPI_* names are not checked here.
Expected<Config> ParseConfig(const EnvLookup& env);

// Unknown INCMPI_* names in environ (likely typos), for a warning.
std::vector<std::string> UnknownEnvNames(char** environ_list);

// What every rank must have alike for every rank to take the same path for
// the same call: the settings the decision table reads (enable, the byte
// limits, float SUM) and those that change libinc's protocol (reduce and
// broadcast modes), whether the configuration parsed at all, and whether
// derived communicators fall back as thread_multiple. As a 64-bit
// fingerprint, so ranks compare theirs with one MPI_MIN allreduce of
// {fp, ~fp} (equal everywhere iff min(fp) == ~min(~fp)). The environment is
// each rank's own (mpirun -x may not reach every host alike), so it is never
// trusted to agree by itself.
uint64_t AgreementFingerprint(const Config& c, bool parsed, bool thread_multiple);

// Whether {min(fp), min(~fp)} over the ranks says every fp was equal.
inline bool FingerprintsAgree(uint64_t min_fp, uint64_t min_not_fp) {
  return min_fp == ~min_not_fp;
}

// INCMPI_SUMMARY_JSON's path for a rank ("%r" replaced); "" = this rank
// writes nothing (no %r: only rank 0 writes).
std::string SummaryPathForRank(const std::string& pattern, int rank);

// INCMPI_IFACE's default: the interface of the default route (eth0 when
// /proc/net/route names none).
std::string DefaultRouteInterface();

// INCMPI_JOB_ID's default, made by rank 0 and broadcast: the launcher's
// PMIx namespace (else the host), the pid and the time, at most 100 bytes.
std::string MakeJobId();

}  // namespace inc::mpi
