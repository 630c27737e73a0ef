// SPDX-License-Identifier: Apache-2.0
// incamd: the aggregation manager daemon. docs/operations.md "## incamd"
// describes its flags, config file, signals and exit codes. This file reads
// the command line and runs --check-config; daemon.{h,cc} builds, runs and
// stops the parts.
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "am/config.h"
#include "am/daemon.h"
#include "am/topology.h"
#include "common/daemon.h"
#include "common/grpc_log.h"
#include "common/log.h"
#include "common/version.h"

namespace {

using inc::am::kExitBadConfig;

// --check-config: the effective config as JSON on stdout, notes and the
// verdict on stderr; nothing is started, listened on or written.
int CheckConfig(const std::string& config_path, const inc::am::AmFlags& flags,
                const std::vector<std::string>& switch_configs) {
  auto config = inc::am::LoadAmConfig(config_path, flags);
  inc::Status st = config ? inc::Status::Ok() : config.status();
  inc::am::Topology topology;
  std::vector<std::string> notes;
  if (st.ok()) st = inc::am::CheckAmSite(*config, switch_configs, &topology, &notes);
  for (const std::string& n : notes) std::cerr << "incamd: note: " << n << "\n";
  if (!st.ok()) {
    std::cerr << "incamd: error: " << (config_path.empty() ? "" : "config " + config_path + ": ")
              << st.message() << "\n";
    return kExitBadConfig;
  }
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  std::string json;
  if (auto printed =
          google::protobuf::util::MessageToJsonString(inc::am::EffectiveAmConfig(*config), &json, print);
      !printed.ok()) {
    std::cerr << "incamd: error: printing the config: " << printed.message() << "\n";
    return kExitBadConfig;
  }
  std::cout << json;
  std::cerr << "incamd: config " << (config_path.empty() ? "(flags only)" : config_path)
            << " is valid: topology " << config->topology_file() << " (" << topology.switches.size()
            << " switches, " << topology.hosts.size() << " hosts, " << topology.links.size() << " links), "
            << switch_configs.size() << " switch config(s) checked against it\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask.
  inc::BlockDaemonSignals();

  CLI::App app{"incamd: incin aggregation manager (topology, tree building, resources, heartbeats)",
               "incamd"};
  std::string config_path, listen, topology_path, log_level, log_format, state_path;
  app.add_option("--config", config_path, "AmConfig JSON file (docs/operations.md); SIGHUP reads it again");
  auto* o_listen = app.add_option("--listen", listen,
                                  "gRPC listen address: the management address (default 127.0.0.1:50051)");
  auto* o_topology = app.add_option("--topology", topology_path, "TopologyFile JSON file");
  auto* o_state = app.add_option("--state-path", state_path,
                                 std::string("SQLite file of the AM's state (default ") +
                                     inc::am::kDefaultStatePath + "); \"\" keeps it in memory only");
  auto* o_level = app.add_option("--log-level", log_level, "debug|info|warn|error (default info)");
  auto* o_format =
      app.add_option("--log-format", log_format, "text (default) or json: one JSON object per line")
          ->check(CLI::IsMember({"text", "json"}));
  bool insecure = false;
  auto* o_insecure = app.add_flag("--insecure", insecure,
                                  "plaintext gRPC without authorization (instead of the config's tls)");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "check the config and its topology (and each --switch-config against them), print the "
               "effective config with every default as JSON and exit: 0 valid, 2 not (the message names the "
               "file and field); starts nothing");
  std::vector<std::string> switch_configs;
  app.add_option("--switch-config", switch_configs,
                 "with --check-config: a switch agent's config to check against this AM's config and "
                 "topology (repeatable)")
      ->check(CLI::ExistingFile);
  app.set_version_flag("--version", std::string("incamd ") + inc::kVersion,
                       "Print incamd's version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadConfig;
  }

  inc::SetLogComponent("incamd");
  inc::RouteGrpcLogs();
  inc::am::AmFlags flags;
  if (o_listen->count()) flags.listen = listen;
  if (o_topology->count()) flags.topology_file = topology_path;
  if (o_insecure->count()) flags.insecure = insecure;
  if (o_level->count()) flags.log_level = log_level;
  if (o_state->count()) flags.state_path = state_path;
  if (o_format->count()) {
    flags.log_format = log_format;
    inc::ApplyLogFormatFlag(log_format);
  }

  if (check_config) return CheckConfig(config_path, flags, switch_configs);
  if (!switch_configs.empty()) {
    LOG_ERROR << "--switch-config is for --check-config only";
    return kExitBadConfig;
  }

  int exit_code = 0;
  auto daemon = inc::am::AmDaemon::Start(config_path, flags, &exit_code);
  if (!daemon) return exit_code;
  return daemon->Run();
}
