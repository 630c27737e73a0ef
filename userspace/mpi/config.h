// SPDX-License-Identifier: Apache-2.0
// libincmpi configuration: every knob is an environment variable (the MPI
// program is unmodified; mpirun -x exports them to the ranks), read through
// libinc's settings table (common/settings.h). Names and defaults are
// documented in docs/mpi.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "common/status.h"

namespace inc::mpi {

enum class SummaryMode { kOff, kRank0, kAll };

// The settings' names and defaults are those of the settings table
// (common/settings.h; docs/mpi.md lists them).
struct Config {
  bool enable = true;                // INCIN_MPI_ENABLE
  bool require_offload = false;      // INCIN_REQUIRE_OFFLOAD: a call that would fall back is an error
  uint64_t min_bytes = 0;            // INCIN_MPI_MIN_BYTES: smaller messages use MPI's algorithm
  uint64_t max_bytes = 0;            // INCIN_MPI_MAX_BYTES: larger ones too (0 = no limit)
  std::string am;                    // INCIN_AM: host:port of incamd ("" = no INC)
  std::string iface;                 // INCIN_IFACE: "" = the interface of the default route
  std::string transport = "auto";    // INCIN_TRANSPORT
  std::string job_id;                // INCIN_JOB_ID: "" = made by rank 0 and broadcast
  uint32_t join_timeout_ms = 30000;  // INCIN_JOIN_TIMEOUT_MS
  // INCIN_OP_TIMEOUT_MS: how long an offloaded collective waits without
  // progress for the slowest rank before it fails (libinc's op_timeout_ms;
  // 0 = as long as it takes, as MPI's own algorithms wait).
  uint32_t op_timeout_ms = 0;
  bool float_sum = true;                          // INCIN_MPI_FLOAT_SUM=offload|fallback (fixed-point sums)
  std::string reduce_mode;                        // INCIN_MPI_REDUCE_MODE: libinc's, "" = its default
  std::string broadcast_mode;                     // INCIN_MPI_BROADCAST_MODE: libinc's, "" = its default
  LogLevel log_level = LogLevel::kWarn;           // INCIN_MPI_LOG_LEVEL (also libinc's)
  LogLevel fallback_log_level = LogLevel::kWarn;  // INCIN_MPI_FALLBACK_LOG_LEVEL
  bool fallback_log_all = false;                  // INCIN_MPI_FALLBACK_LOG=first|all
  SummaryMode summary = SummaryMode::kOff;        // INCIN_MPI_SUMMARY=0|1|all
  std::string summary_json;                       // INCIN_MPI_SUMMARY_JSON: path, %r = rank
};

// getenv-like lookup; nullptr = unset. Unset and empty mean "default".
using EnvLookup = settings::EnvLookup;

// Every problem is reported (INVALID_ARGUMENT naming the variable as set,
// its value and what is accepted); old names (INCMPI_*) are read with a
// deprecation warning, the new name winning when both are set.
Expected<Config> ParseConfig(const settings::Reader& reader);
// From `env`, deprecation warnings to `warn` (nullptr: none).
Expected<Config> ParseConfig(const EnvLookup& env, const settings::WarnSink& warn = nullptr);

// A setting given by another source than the environment: coll/incin's
// MCA parameters (docs/openmpi.md). `value` has the variable's syntax and
// goes through the same parser; `from` names the source in errors
// ("coll_incin_min_bytes").
struct SettingOverride {
  std::string name;  // the setting's INCIN_ name
  std::string value;
  std::string from;
};

// `env` with `overrides` on top: an overridden setting reads its override,
// and its old names read as unset (so no deprecation warning speaks of a
// variable that lost); every other name reads `env`.
EnvLookup OverlayEnv(std::vector<SettingOverride> overrides, EnvLookup env);

// ParseConfig of `env` with `overrides` on top (an override wins over the
// variable). An error about an overridden setting names its `from`.
Expected<Config> ParseConfig(const std::vector<SettingOverride>& overrides, const EnvLookup& env,
                             const settings::WarnSink& warn = nullptr);

// INCIN_* and INCMPI_* names in environ that name no setting (likely
// typos), for a warning.
std::vector<std::string> UnknownEnvNames(char** environ_list);

// What every rank must have alike for every rank to take the same path for
// the same call: the settings the decision table reads (enable, the byte
// limits, float SUM, require offload) and those that change libinc's protocol (reduce and
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

// INCIN_MPI_SUMMARY_JSON's path for a rank ("%r" replaced); "" = this rank
// writes nothing (no %r: only rank 0 writes).
std::string SummaryPathForRank(const std::string& pattern, int rank);

// INCIN_IFACE's default: the interface of the default route (eth0 when
// /proc/net/route names none).
std::string DefaultRouteInterface();

// INCIN_JOB_ID's default, made by rank 0 and broadcast: the launcher's
// PMIx namespace (else the host), the pid and the time, at most 100 bytes.
std::string MakeJobId();

}  // namespace inc::mpi
