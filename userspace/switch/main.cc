// SPDX-License-Identifier: Apache-2.0
// incswitchd: the switch agent. Owns the XDP data path of one switch, serves
// the SwitchAgent gRPC service, registers with and heartbeats to the AM.
// This file reads the command line and the config file; switch/daemon.h is
// the composition root. docs/operations.md "## incswitchd" describes config,
// flags, signals, restarts and exit codes.
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "common/daemon.h"
#include "common/grpc_log.h"
#include "common/log.h"
#include "common/version.h"
#include "switch/config.h"
#include "switch/daemon.h"

namespace {

using inc::sw::FlagOverrides;

// Exit codes (docs/operations.md): a bad command line or configuration
// (found before the data path is touched) is 2, a failure to run is 1.
constexpr int kExitFailed = 1;
constexpr int kExitBadConfig = 2;

int Fail(const std::string& what, int code = kExitFailed) {
  if (inc::GetLogFormat() == inc::LogFormat::kJson) {
    LOG_ERROR << what;  // a JSON log reader gets JSON
  } else {
    std::cerr << "incswitchd: error: " << what << "\n";
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask: a
  // SIGHUP must not kill the agent and leave XDP attached.
  inc::BlockDaemonSignals();

  CLI::App app{"incswitchd: incin switch agent (XDP data path, SwitchAgent gRPC service, AM registration)",
               "incswitchd"};
  std::string config_path;
  FlagOverrides flags;
  std::string name, listen, am, pin_root, xdp_mode, log_level, log_format, advertise;
  uint32_t slot_capacity = 0;
  bool icrc = false, keep = false;
  app.add_option("--config", config_path, "SwitchAgentConfig in protobuf JSON (flags override it)")
      ->check(CLI::ExistingFile);
  auto* o_name = app.add_option("--name", name, "switch name (pins under <pin-root>/<name>/)");
  auto* o_listen = app.add_option("--listen", listen,
                                  "SwitchAgent gRPC address (default: the management address, this host's "
                                  "address toward the AM, port 50061)");
  auto* o_am = app.add_option("--am", am, "aggregation manager address (host:port); empty = standalone");
  app.add_option("--port", flags.ports,
                 "switch port interface, IF or IF=IPV4 (repeatable; replaces config ports)");
  auto* o_pin =
      app.add_option("--pin-root", pin_root, "bpffs directory for pinned maps (default /sys/fs/bpf/incin)");
  auto* o_slots =
      app.add_option("--slot-capacity", slot_capacity, "aggregation slots in total (default 4096)");
  auto* o_icrc = app.add_flag("--icrc-verify,!--no-icrc-verify", icrc,
                              "check the ICRC of every contribution (default off; docs/operations.md)");
  auto* o_mode = app.add_option("--xdp-mode", xdp_mode, "native (default) or generic")
                     ->check(CLI::IsMember({"native", "generic"}));
  auto* o_keep =
      app.add_flag("--keep-datapath-on-exit", keep,
                   "on SIGTERM leave XDP attached and maps pinned, for a restarted agent to re-adopt");
  auto* o_log = app.add_option("--log-level", log_level, "debug, info, warn or error (default info)")
                    ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  auto* o_format =
      app.add_option("--log-format", log_format, "text (default) or json: one JSON object per log line")
          ->check(CLI::IsMember({"text", "json"}));
  app.add_option(
      "--advertise", advertise,
      "address the AM dials back (default: --listen, wildcard host replaced by the first port's IP)");
  std::string netconf_listen;
  auto* o_netconf =
      app.add_option("--netconf-listen", netconf_listen,
                     "serve NETCONF over SSH on host:port (docs/netconf.md; keys from the config's "
                     "netconf and tls)");
  bool insecure = false;
  auto* o_insecure = app.add_flag("--insecure", insecure,
                                  "plaintext gRPC without authorization (instead of the config's tls)");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "check the config with the flags over it, print the effective config with every default as "
               "JSON and exit: 0 valid, 2 not (the message names the field); touches no data path; "
               "interfaces and certificate files missing on this host are notes, not errors");
  app.set_version_flag("--version", std::string("incswitchd ") + inc::kVersion,
                       "Print incswitchd's version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadConfig;
  }

  if (o_name->count()) flags.switch_name = name;
  if (o_listen->count()) flags.listen = listen;
  if (o_am->count()) flags.am_address = am;
  if (o_pin->count()) flags.pin_root = pin_root;
  if (o_slots->count()) flags.slot_capacity = slot_capacity;
  if (o_icrc->count()) flags.icrc_verify = icrc;
  if (o_mode->count()) flags.xdp_mode = xdp_mode;
  if (o_keep->count()) flags.keep_datapath_on_exit = keep;
  if (o_insecure->count()) flags.insecure = insecure;
  if (o_netconf->count()) flags.netconf_listen = netconf_listen;
  if (o_log->count()) flags.log_level = log_level;
  if (o_format->count()) {
    flags.log_format = log_format;
    inc::ApplyLogFormatFlag(log_format);
  }

  inc::SetLogComponent("incswitchd");
  inc::RouteGrpcLogs();
  inc::v1::SwitchAgentConfig config = inc::sw::DefaultConfig();
  if (!config_path.empty()) {
    auto loaded = inc::sw::LoadConfigFile(config_path);
    if (!loaded.ok()) return Fail(loaded.status().message(), kExitBadConfig);
    config = *loaded;
  }
  inc::sw::ApplyFlags(flags, &config);
  if (auto st = inc::sw::ValidateConfig(config); !st.ok()) {
    return Fail((config_path.empty() ? "" : "config " + config_path + ": ") + st.message(), kExitBadConfig);
  }
  if (check_config) {
    std::vector<std::string> notes;
    inc::Status st = inc::sw::CheckSwitchConfig(config, config_path, advertise, &notes);
    for (const std::string& n : notes) std::cerr << "incswitchd: note: " << n << "\n";
    if (!st.ok()) return Fail(st.message(), kExitBadConfig);
    google::protobuf::util::JsonPrintOptions print;
    print.add_whitespace = true;
    print.always_print_primitive_fields = true;
    print.preserve_proto_field_names = true;
    std::string json;
    if (auto printed = google::protobuf::util::MessageToJsonString(config, &json, print); !printed.ok())
      return Fail("printing the config: " + std::string(printed.message()), kExitBadConfig);
    std::cout << json;
    std::cerr << "incswitchd: config " << (config_path.empty() ? "(flags only)" : config_path)
              << " is valid: switch " << config.switch_name() << ", " << config.ports_size() << " ports\n";
    return 0;
  }
  (void)inc::ApplyLogSettings(config.log_level(), config.log_format());  // validated above
  LOG_INFO << "incswitchd " << inc::kVersion << ": starting switch " << config.switch_name() << " ("
           << config.ports_size() << " ports, listen "
           << (config.listen().empty() ? "the management address" : config.listen()) << ", AM "
           << (config.am_address().empty() ? "none" : config.am_address()) << ")";

  auto plan = inc::sw::PlanSwitch(std::move(config), config_path, flags, advertise);
  if (!plan.ok()) return Fail(plan.status().message(), kExitBadConfig);
  auto daemon = inc::sw::SwitchDaemon::Start(std::move(*plan));
  if (!daemon.ok()) return Fail(daemon.status().message());
  return (*daemon)->Run();
}
