// SPDX-License-Identifier: Apache-2.0
#include "mpi/config.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace inc::mpi {

const std::vector<EnvVar> kEnvVars = {
    {"INCMPI_ENABLE", "1", "0 = every call goes to MPI (counted as reason=disabled)"},
    {"INCMPI_MIN_BYTES", "0", "messages smaller than this (bytes one rank contributes) use MPI's algorithm"},
    {"INCMPI_MAX_BYTES", "0", "messages larger than this use MPI's algorithm; 0 = no limit"},
    {"INCMPI_AM", "(none)", "incamd address host:port; unset = no INC group (reason=no_group)"},
    {"INCMPI_IFACE", "(default route's)", "the worker's interface toward its switch"},
    {"INCMPI_TRANSPORT", "auto", "libinc transport: auto, xdp, afxdp or verbs"},
    {"INCMPI_JOB_ID", "(made by rank 0)",
     "job id of MPI_COMM_WORLD's INC group; unset, the job INC_JOB_CREDENTIAL names, if set"},
    {"INCMPI_JOIN_TIMEOUT_MS", "30000", "how long joining the group may take at MPI_Init"},
    {"INCMPI_OP_TIMEOUT_MS", "0",
     "how long an offloaded collective waits without progress for the slowest rank; 0 = no limit"},
    {"INCMPI_FLOAT_SUM", "offload", "offload|fallback: float/double SUM run in fixed point on the switch"},
    {"INCMPI_REDUCE_MODE", "(libinc's)", "native|allreduce: how MPI_Reduce runs on the switch"},
    {"INCMPI_BROADCAST_MODE", "(libinc's)", "allreduce|native: how MPI_Bcast runs on the switch"},
    {"INCMPI_LOG_LEVEL", "warn", "debug|info|warn|error for libincmpi and libinc"},
    {"INCMPI_FALLBACK_LOG_LEVEL", "warn", "level of the 'incmpi: fallback reason=...' lines"},
    {"INCMPI_FALLBACK_LOG", "first", "first = one line per call and reason, later ones at debug; all"},
    {"INCMPI_SUMMARY", "0", "0|1|all: per-call table at MPI_Finalize on stderr (1 = rank 0)"},
    {"INCMPI_SUMMARY_JSON", "(none)", "write the summary as JSON; %r = rank (without %r only rank 0)"},
};

namespace {

Status Bad(const char* name, const std::string& value, const std::string& accepted) {
  return InvalidArgument(std::string(name) + "='" + value + "': expected " + accepted);
}

Status ParseBool(const char* name, const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    *out = true;
  } else if (v == "0" || v == "false" || v == "no" || v == "off") {
    *out = false;
  } else {
    return Bad(name, v, "0|1|true|false|yes|no|on|off");
  }
  return Status::Ok();
}

Status ParseU64(const char* name, const std::string& v, uint64_t max, uint64_t* out) {
  // Suffixes K/M/G (binary) so INCMPI_MIN_BYTES=64K reads naturally.
  errno = 0;
  char* end = nullptr;
  if (v.empty() || v[0] == '-' || v[0] == '+') return Bad(name, v, "a non-negative number");
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (errno || end == v.c_str()) return Bad(name, v, "a non-negative number");
  uint64_t mult = 1;
  std::string rest(end);
  if (rest == "K" || rest == "k" || rest == "KiB") {
    mult = 1ull << 10;
  } else if (rest == "M" || rest == "MiB") {
    mult = 1ull << 20;
  } else if (rest == "G" || rest == "GiB") {
    mult = 1ull << 30;
  } else if (!rest.empty()) {
    return Bad(name, v, "a number with an optional K, M or G suffix");
  }
  if (n > max / mult) return Bad(name, v, "at most " + std::to_string(max));
  *out = n * mult;
  return Status::Ok();
}

Status ParseLevel(const char* name, const std::string& v, LogLevel* out) {
  if (!ParseLogLevel(v, out)) return Bad(name, v, "debug|info|warn|error");
  return Status::Ok();
}

}  // namespace

Expected<Config> ParseConfig(const EnvLookup& env) {
  Config c;
  auto get = [&](const char* name, std::string* out) {
    const char* v = env(name);
    if (!v || !*v) return false;
    *out = v;
    return true;
  };
  std::string v;
  if (get("INCMPI_ENABLE", &v)) INC_RETURN_IF_ERROR(ParseBool("INCMPI_ENABLE", v, &c.enable));
  if (get("INCMPI_MIN_BYTES", &v))
    INC_RETURN_IF_ERROR(ParseU64("INCMPI_MIN_BYTES", v, 1ull << 40, &c.min_bytes));
  if (get("INCMPI_MAX_BYTES", &v))
    INC_RETURN_IF_ERROR(ParseU64("INCMPI_MAX_BYTES", v, 1ull << 40, &c.max_bytes));
  if (c.max_bytes && c.max_bytes < c.min_bytes)
    return InvalidArgument("INCMPI_MAX_BYTES=" + std::to_string(c.max_bytes) + " is below INCMPI_MIN_BYTES=" +
                           std::to_string(c.min_bytes) + ": nothing would be offloaded");
  get("INCMPI_AM", &c.am);
  if (!c.am.empty() && c.am.find(':') == std::string::npos)
    return Bad("INCMPI_AM", c.am, "host:port of incamd");
  get("INCMPI_IFACE", &c.iface);
  if (get("INCMPI_TRANSPORT", &v)) c.transport = v;
  get("INCMPI_JOB_ID", &c.job_id);
  if (c.job_id.size() > 100) return Bad("INCMPI_JOB_ID", c.job_id, "at most 100 characters");
  if (get("INCMPI_JOIN_TIMEOUT_MS", &v)) {
    uint64_t ms = 0;
    INC_RETURN_IF_ERROR(ParseU64("INCMPI_JOIN_TIMEOUT_MS", v, 3600000, &ms));
    if (ms == 0) return Bad("INCMPI_JOIN_TIMEOUT_MS", v, "1..3600000");
    c.join_timeout_ms = static_cast<uint32_t>(ms);
  }
  if (get("INCMPI_OP_TIMEOUT_MS", &v)) {
    uint64_t ms = 0;
    INC_RETURN_IF_ERROR(ParseU64("INCMPI_OP_TIMEOUT_MS", v, 0xffffffffull, &ms));
    c.op_timeout_ms = static_cast<uint32_t>(ms);
  }
  if (get("INCMPI_FLOAT_SUM", &v)) {
    if (v == "offload") {
      c.float_sum = true;
    } else if (v == "fallback") {
      c.float_sum = false;
    } else {
      return Bad("INCMPI_FLOAT_SUM", v, "offload|fallback");
    }
  }
  if (get("INCMPI_REDUCE_MODE", &v)) {
    if (v != "native" && v != "allreduce") return Bad("INCMPI_REDUCE_MODE", v, "native|allreduce");
    c.reduce_mode = v;
  }
  if (get("INCMPI_BROADCAST_MODE", &v)) {
    if (v != "native" && v != "allreduce") return Bad("INCMPI_BROADCAST_MODE", v, "allreduce|native");
    c.broadcast_mode = v;
  }
  if (get("INCMPI_LOG_LEVEL", &v)) INC_RETURN_IF_ERROR(ParseLevel("INCMPI_LOG_LEVEL", v, &c.log_level));
  if (get("INCMPI_FALLBACK_LOG_LEVEL", &v))
    INC_RETURN_IF_ERROR(ParseLevel("INCMPI_FALLBACK_LOG_LEVEL", v, &c.fallback_log_level));
  if (get("INCMPI_FALLBACK_LOG", &v)) {
    if (v == "first") {
      c.fallback_log_all = false;
    } else if (v == "all") {
      c.fallback_log_all = true;
    } else {
      return Bad("INCMPI_FALLBACK_LOG", v, "first|all");
    }
  }
  if (get("INCMPI_SUMMARY", &v)) {
    if (v == "all") {
      c.summary = SummaryMode::kAll;
    } else {
      bool on = false;
      Status s = ParseBool("INCMPI_SUMMARY", v, &on);
      if (!s.ok()) return Bad("INCMPI_SUMMARY", v, "0|1|all");
      c.summary = on ? SummaryMode::kRank0 : SummaryMode::kOff;
    }
  }
  get("INCMPI_SUMMARY_JSON", &c.summary_json);
  return c;
}

uint64_t AgreementFingerprint(const Config& c, bool parsed, bool thread_multiple) {
  // Every field by name, so that a change of one can never cancel another.
  std::string text = "incmpi-agreement-1";
  if (!parsed) {
    text += "|unparsed";
  } else {
    text += "|enable=" + std::to_string(c.enable) + "|min=" + std::to_string(c.min_bytes) +
            "|max=" + std::to_string(c.max_bytes) + "|float_sum=" + std::to_string(c.float_sum) +
            "|reduce=" + c.reduce_mode + "|bcast=" + c.broadcast_mode;
  }
  text += "|thread_multiple=" + std::to_string(thread_multiple);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<std::string> UnknownEnvNames(char** environ_list) {
  std::vector<std::string> out;
  for (char** e = environ_list; e && *e; e++) {
    if (std::strncmp(*e, "INCMPI_", 7) != 0) continue;
    std::string name(*e, std::strcspn(*e, "="));
    bool known = false;
    for (const EnvVar& k : kEnvVars) known = known || name == k.name;
    if (!known) out.push_back(name);
  }
  return out;
}

std::string SummaryPathForRank(const std::string& pattern, int rank) {
  if (pattern.empty()) return "";
  size_t pos = pattern.find("%r");
  if (pos == std::string::npos) return rank == 0 ? pattern : "";
  std::string out = pattern;
  while ((pos = out.find("%r")) != std::string::npos) out.replace(pos, 2, std::to_string(rank));
  return out;
}

std::string DefaultRouteInterface() {
  std::ifstream f("/proc/net/route");
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    char ifname[64] = {0};
    unsigned long dest = 1;
    if (std::sscanf(line.c_str(), "%63s %lx", ifname, &dest) == 2 && dest == 0) return ifname;
  }
  return "eth0";
}

std::string MakeJobId() {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* ns = std::getenv("PMIX_NAMESPACE");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  std::string id = std::string("mpi-") + (ns && *ns ? ns : host) + "-" + std::to_string(getpid()) + "-" +
                   std::to_string(ms % 100000000);
  return id.substr(0, 100);
}

}  // namespace inc::mpi
