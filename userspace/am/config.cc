// SPDX-License-Identifier: Apache-2.0
#include "am/config.h"

#include <google/protobuf/util/message_differencer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <map>

#include "am/manager.h"
#include "am/topology.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/metrics_tls.h"
#include "common/net.h"

namespace inc::am {
namespace {

// "member_heartbeat_timeout_ms 500" or, for an absent field,
// "member_heartbeat_timeout_ms 5000 (the default)".
std::string Field(const char* name, uint32_t configured, uint32_t effective) {
  return std::string(name) + " " + std::to_string(effective) + (configured ? "" : " (the default)");
}

constexpr uint32_t kLeastIntervalMs = 10;
constexpr uint32_t kLargestPool = 0xFFFF;

}  // namespace

std::string StatePath(const v1::AmConfig& config) {
  return config.has_state_path() ? config.state_path() : kDefaultStatePath;
}

Expected<v1::AmConfig> LoadAmConfig(const std::string& path, const AmFlags& flags) {
  v1::AmConfig config;
  if (!path.empty()) {
    INC_RETURN_IF_ERROR(ReadJsonFile(path, &config));
    // Relative paths in the file are relative to the file's folder.
    auto relative_to_file = [&path](const std::string& p) {
      auto slash = path.rfind('/');
      if (p.empty() || p[0] == '/' || slash == std::string::npos) return p;
      return path.substr(0, slash + 1) + p;
    };
    config.set_topology_file(relative_to_file(config.topology_file()));
    if (config.has_tls()) {
      config.mutable_tls()->set_cert(relative_to_file(config.tls().cert()));
      config.mutable_tls()->set_key(relative_to_file(config.tls().key()));
      config.mutable_tls()->set_ca(relative_to_file(config.tls().ca()));
    }
    if (config.has_state_path() && !config.state_path().empty() && config.state_path()[0] != '/') {
      auto slash = path.rfind('/');
      if (slash != std::string::npos) config.set_state_path(path.substr(0, slash + 1) + config.state_path());
    }
  }
  if (flags.listen) config.set_listen(*flags.listen);
  if (flags.topology_file) config.set_topology_file(*flags.topology_file);
  if (flags.log_level) config.set_log_level(*flags.log_level);
  if (flags.log_format) config.set_log_format(*flags.log_format);
  if (flags.insecure) config.set_insecure(*flags.insecure);
  if (flags.state_path) config.set_state_path(*flags.state_path);
  return config;
}

Status ValidateAmConfig(const v1::AmConfig& c) {
  AmOptions o;
  ApplyConfig(c, &o);
  INC_RETURN_IF_ERROR(ValidateListenAddress(o.listen, "listen"));
  if (!c.metrics_listen().empty()) {
    auto metrics = HostPort::Parse(c.metrics_listen());
    if (!metrics.ok()) return metrics.status().WithContext("metrics_listen");
  }
  INC_RETURN_IF_ERROR(ValidateMetricsTls(c.metrics_tls(), c.insecure()));
  INC_RETURN_IF_ERROR(ValidateLogSettings(c.log_level().empty() ? "info" : c.log_level(),
                                          c.log_format().empty() ? "text" : c.log_format()));
  if (o.default_pool_size > kLargestPool)
    return InvalidArgument("default_pool_size " + std::to_string(o.default_pool_size) +
                           " is not in 1..65535 (a switch's slots per tree)");
  struct Heartbeat {
    const char* timeout_name;
    uint32_t timeout_configured, timeout;
    const char* interval_name;
    uint32_t interval_configured, interval;
    const char* what;
  };
  const Heartbeat beats[] = {
      {"member_heartbeat_timeout_ms", c.member_heartbeat_timeout_ms(), o.member_heartbeat_timeout_ms,
       "member_heartbeat_interval_ms", c.member_heartbeat_interval_ms(), o.member_heartbeat_interval_ms,
       "fail a tree"},
      {"switch_heartbeat_timeout_ms", c.switch_heartbeat_timeout_ms(), o.switch_heartbeat_timeout_ms,
       "switch_heartbeat_interval_ms", c.switch_heartbeat_interval_ms(), o.switch_heartbeat_interval_ms,
       "declare a switch dead"},
  };
  for (const Heartbeat& b : beats) {
    if (b.interval < kLeastIntervalMs)
      return InvalidArgument(Field(b.interval_name, b.interval_configured, b.interval) + " is below " +
                             std::to_string(kLeastIntervalMs) + " ms");
    if (static_cast<uint64_t>(b.timeout) < 2ull * b.interval)
      return InvalidArgument(Field(b.timeout_name, b.timeout_configured, b.timeout) +
                             " is shorter than two heartbeats (" +
                             Field(b.interval_name, b.interval_configured, b.interval) +
                             "): one late heartbeat would " + b.what);
  }
  if (o.move_on_congestion_severity > 3)
    return InvalidArgument("move_on_congestion_severity " + std::to_string(o.move_on_congestion_severity) +
                           " is not in 0..3 (0 = never move trees off congested links)");
  if (c.topology_file().empty())
    return InvalidArgument("no topology: give --topology FILE or topology_file in the config");
  const std::string state = StatePath(c);
  if (!state.empty()) {
    const std::string field = "state_path " + state + (c.has_state_path() ? "" : " (the default)");
    struct stat st {};
    if (stat(state.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return InvalidArgument(field + " is not a regular file (give the database file, not its folder)");
    const auto slash = state.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : state.substr(0, slash);
    if (state.back() == '/') return InvalidArgument(field + " names a folder; give the database file in it");
    // The default's folder is created at start, as a package would.
    if (c.has_state_path() && (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      return InvalidArgument(field + ": folder " + dir +
                             " does not exist (create it, or set state_path \"\" " +
                             "to keep the state in memory only)");
  }
  return Status::Ok();
}

Expected<TransportSecurity> AmTransportSecurity(const v1::AmConfig& c) {
  return ChooseTransportSecurity(
      {c.tls().cert(), c.tls().key(), c.tls().ca()}, c.insecure(),
      "config \"tls\": {\"cert\", \"key\", \"ca\"}, or \"insecure\": true / --insecure");
}

v1::AmConfig EffectiveAmConfig(const v1::AmConfig& c) {
  AmOptions o;
  ApplyConfig(c, &o);
  v1::AmConfig e = c;
  e.set_listen(o.listen);
  e.set_member_heartbeat_timeout_ms(o.member_heartbeat_timeout_ms);
  e.set_member_heartbeat_interval_ms(o.member_heartbeat_interval_ms);
  e.set_switch_heartbeat_timeout_ms(o.switch_heartbeat_timeout_ms);
  e.set_switch_heartbeat_interval_ms(o.switch_heartbeat_interval_ms);
  e.set_join_timeout_ms(o.join_timeout_ms);
  e.set_default_pool_size(o.default_pool_size);
  e.set_default_elems_per_packet(o.default_elems_per_packet);
  e.set_switch_rpc_timeout_ms(o.switch_rpc_timeout_ms);
  e.set_dismantled_retention_ms(o.dismantled_retention_ms);
  e.set_move_on_congestion_severity(o.move_on_congestion_severity);
  e.set_tree_move_holddown_ms(o.tree_move_holddown_ms);
  if (e.log_level().empty()) e.set_log_level("info");
  if (e.log_format().empty()) e.set_log_format("text");
  if (e.metrics_tls().empty()) e.set_metrics_tls("off");
  e.set_state_path(StatePath(c));
  return e;
}

const std::set<std::string>& AmLiveFields() {
  static const std::set<std::string> fields = {
      "member_heartbeat_timeout_ms", "switch_heartbeat_timeout_ms", "join_timeout_ms",
      "default_pool_size",           "default_elems_per_packet",    "dismantled_retention_ms",
      "move_on_congestion_severity", "tree_move_holddown_ms",
  };
  return fields;
}

void ReloadAmConfig(const std::string& path, const AmFlags& flags, RunningAm* running,
                    const std::function<void(const v1::AmConfig&)>& retune) {
  if (path.empty()) {
    LOG_INFO << "SIGHUP: no --config file, nothing to reload";
    return;
  }
  auto reread = LoadAmConfig(path, flags);
  Status st = reread.ok() ? ValidateAmConfig(*reread) : reread.status();
  if (!st.ok()) {
    LOG_ERROR << "SIGHUP: config " << path << " not reloaded, the running one stays: " << st.message();
    return;
  }
  if (auto file_only = LoadAmConfig(path, AmFlags()); file_only.ok()) {
    std::vector<FlagOverride> overrides;
    if (flags.listen) overrides.push_back({"--listen", "listen", *flags.listen});
    if (flags.topology_file) overrides.push_back({"--topology", "topology_file", *flags.topology_file});
    if (flags.log_level) overrides.push_back({"--log-level", "log_level", *flags.log_level});
    if (flags.log_format) overrides.push_back({"--log-format", "log_format", *flags.log_format});
    if (flags.state_path) overrides.push_back({"--state-path", "state_path", *flags.state_path});
    LogFlagOverrides(*file_only, overrides, path);
  }
  LiveFields live;
  live.fields = AmLiveFields();
  live.check = [](const google::protobuf::Message& next) {
    return ValidateAmConfig(static_cast<const v1::AmConfig&>(next));
  };
  live.apply = [&retune](const google::protobuf::Message& next) {
    if (retune) retune(static_cast<const v1::AmConfig&>(next));
    return Status::Ok();
  };
  size_t changes = ApplyReload(*reread, "incamd", &running->config, live);
  if (reread->topology_file() == running->config.topology_file()) {
    v1::TopologyFile topology;
    st = ReadJsonFile(reread->topology_file(), &topology);
    if (!st.ok()) {
      LOG_WARN << "SIGHUP: topology file unreadable now (the running topology stays): " << st.message();
    } else if (!google::protobuf::util::MessageDifferencer::Equals(topology, running->topology)) {
      LOG_WARN << "SIGHUP: topology file " << reread->topology_file()
               << " changed: not applied, needs a restart of incamd";
      ++changes;
    }
  }
  if (changes == 0) {
    LOG_INFO << "SIGHUP: config " << path << " reread, nothing changed";
  }
}

void ApplyConfig(const v1::AmConfig& c, AmOptions* o) {
  if (!c.listen().empty()) o->listen = c.listen();
  if (c.member_heartbeat_timeout_ms()) o->member_heartbeat_timeout_ms = c.member_heartbeat_timeout_ms();
  if (c.member_heartbeat_interval_ms()) o->member_heartbeat_interval_ms = c.member_heartbeat_interval_ms();
  if (c.switch_heartbeat_timeout_ms()) o->switch_heartbeat_timeout_ms = c.switch_heartbeat_timeout_ms();
  if (c.switch_heartbeat_interval_ms()) o->switch_heartbeat_interval_ms = c.switch_heartbeat_interval_ms();
  if (c.join_timeout_ms()) o->join_timeout_ms = c.join_timeout_ms();
  if (c.default_pool_size()) o->default_pool_size = c.default_pool_size();
  if (c.default_elems_per_packet()) o->default_elems_per_packet = c.default_elems_per_packet();
  if (c.switch_rpc_timeout_ms()) o->switch_rpc_timeout_ms = c.switch_rpc_timeout_ms();
  if (c.dismantled_retention_ms()) o->dismantled_retention_ms = c.dismantled_retention_ms();
  if (c.move_on_congestion_severity()) o->move_on_congestion_severity = c.move_on_congestion_severity();
  if (c.tree_move_holddown_ms()) o->tree_move_holddown_ms = c.tree_move_holddown_ms();
}

}  // namespace inc::am
