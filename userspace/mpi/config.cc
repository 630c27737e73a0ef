// SPDX-License-Identifier: Apache-2.0
#include "mpi/config.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <type_traits>

namespace inc::mpi {

Expected<Config> ParseConfig(const settings::Reader& r) {
  Config c;
  auto level = [](const std::string& v, LogLevel* out) {
    if (!v.empty()) ParseLogLevel(v, out);  // the table accepts only names ParseLogLevel knows
  };
  auto take = [](auto e, auto* out) -> Status {
    if (!e.ok()) return e.status();
    *out = static_cast<std::remove_reference_t<decltype(*out)>>(*e);
    return Status::Ok();
  };
  INC_RETURN_IF_ERROR(take(r.Bool("INCIN_MPI_ENABLE"), &c.enable));
  INC_RETURN_IF_ERROR(take(r.Bool("INCIN_REQUIRE_OFFLOAD"), &c.require_offload));
  INC_RETURN_IF_ERROR(take(r.Bytes("INCIN_MPI_MIN_BYTES"), &c.min_bytes));
  INC_RETURN_IF_ERROR(take(r.Bytes("INCIN_MPI_MAX_BYTES"), &c.max_bytes));
  if (c.max_bytes && c.max_bytes < c.min_bytes)
    return InvalidArgument("INCIN_MPI_MAX_BYTES=" + std::to_string(c.max_bytes) +
                           " is below INCIN_MPI_MIN_BYTES=" + std::to_string(c.min_bytes) +
                           ": nothing would be offloaded");
  INC_RETURN_IF_ERROR(take(r.String("INCIN_AM"), &c.am));
  if (!c.am.empty() && c.am.find(':') == std::string::npos) {
    auto v = r.Raw("INCIN_AM");
    return InvalidArgument(v->from + "='" + c.am + "': expected host:port of incamd");
  }
  INC_RETURN_IF_ERROR(take(r.String("INCIN_IFACE"), &c.iface));
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_TRANSPORT"), &c.transport));
  INC_RETURN_IF_ERROR(take(r.String("INCIN_JOB_ID"), &c.job_id));
  if (c.job_id.size() > 100)
    return InvalidArgument(r.Raw("INCIN_JOB_ID")->from + "='" + c.job_id +
                           "': expected at most 100 characters");
  if (r.IsSet("INCIN_JOIN_TIMEOUT_MS")) {
    uint64_t ms = 0;
    INC_RETURN_IF_ERROR(take(r.UInt("INCIN_JOIN_TIMEOUT_MS"), &ms));
    if (ms == 0) return InvalidArgument(r.Raw("INCIN_JOIN_TIMEOUT_MS")->from + "='0': expected 1..3600000");
    c.join_timeout_ms = static_cast<uint32_t>(ms);
  }
  INC_RETURN_IF_ERROR(take(r.UInt("INCIN_OP_TIMEOUT_MS"), &c.op_timeout_ms));
  std::string v;
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_FLOAT_SUM"), &v));
  c.float_sum = v == "offload";
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_REDUCE_MODE"), &c.reduce_mode));
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_BROADCAST_MODE"), &c.broadcast_mode));
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_LOG_LEVEL"), &v));
  level(v, &c.log_level);
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_FALLBACK_LOG_LEVEL"), &v));
  level(v, &c.fallback_log_level);
  INC_RETURN_IF_ERROR(take(r.Choice("INCIN_MPI_FALLBACK_LOG"), &v));
  c.fallback_log_all = v == "all";
  if (auto summary = r.Raw("INCIN_MPI_SUMMARY")) {
    if (summary->text == "all") {
      c.summary = SummaryMode::kAll;
    } else {
      auto on = settings::ParseBool(summary->from, summary->text);
      if (!on.ok()) return InvalidArgument(summary->from + "='" + summary->text + "': expected 0|1|all");
      c.summary = *on ? SummaryMode::kRank0 : SummaryMode::kOff;
    }
  }
  INC_RETURN_IF_ERROR(take(r.String("INCIN_MPI_SUMMARY_JSON"), &c.summary_json));
  return c;
}

Expected<Config> ParseConfig(const EnvLookup& env, const settings::WarnSink& warn) {
  return ParseConfig(settings::Reader(env, warn));
}

EnvLookup OverlayEnv(std::vector<SettingOverride> overrides, EnvLookup env) {
  return [overrides = std::move(overrides), env = std::move(env)](const char* name) -> const char* {
    for (const SettingOverride& o : overrides) {
      if (o.name == name) return o.value.c_str();
      const settings::Setting* s = settings::Find(o.name);
      if (!s) continue;
      for (const char* old : s->old_names)
        if (std::strcmp(old, name) == 0) return nullptr;
    }
    return env(name);
  };
}

Expected<Config> ParseConfig(const std::vector<SettingOverride>& overrides, const EnvLookup& env,
                             const settings::WarnSink& warn) {
  auto c = ParseConfig(settings::Reader(OverlayEnv(overrides, env), warn));
  if (c.ok()) return c;
  // The parser names the setting as "INCIN_X='v'" or "INCIN_X=v": where the
  // value came from an override, its source is named instead.
  std::string msg = c.status().message();
  for (const SettingOverride& o : overrides) {
    const std::string key = o.name + "=";
    for (size_t pos = msg.find(key); pos != std::string::npos; pos = msg.find(key, pos)) {
      const bool starts_name =
          pos == 0 || !(std::isalnum(static_cast<unsigned char>(msg[pos - 1])) || msg[pos - 1] == '_');
      if (!starts_name) {
        pos += key.size();
        continue;
      }
      const std::string named = o.from + " (" + o.name + ")=";
      msg.replace(pos, key.size(), named);
      pos += named.size();
    }
  }
  return Status(c.status().code(), msg);
}

uint64_t AgreementFingerprint(const Config& c, bool parsed, bool thread_multiple) {
  // Every field by name, so that a change of one can never cancel another.
  std::string text = "incmpi-agreement-1";
  if (!parsed) {
    text += "|unparsed";
  } else {
    text += "|enable=" + std::to_string(c.enable) + "|min=" + std::to_string(c.min_bytes) +
            "|max=" + std::to_string(c.max_bytes) + "|float_sum=" + std::to_string(c.float_sum) +
            "|reduce=" + c.reduce_mode + "|bcast=" + c.broadcast_mode +
            "|require=" + std::to_string(c.require_offload);
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
  return settings::UnknownNames(environ_list);
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
