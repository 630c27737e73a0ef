// SPDX-License-Identifier: Apache-2.0
// incamd: the aggregation manager daemon. docs/operations.md "## incamd"
// describes its flags, config file, signals and exit codes.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "am/config.h"
#include "am/manager.h"
#include "am/metrics.h"
#include "am/service.h"
#include "am/topology.h"
#include "common/daemon.h"
#include "common/grpc_log.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/metrics_tls.h"
#include "common/secret_file.h"
#include "common/service_manager.h"
#include "common/tls.h"
#include "common/version.h"

namespace {

// Exit codes (docs/operations.md).
constexpr int kExitCannotServe = 1;
constexpr int kExitBadConfig = 2;  // command line, config or topology

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

  auto config = inc::am::LoadAmConfig(config_path, flags);
  if (!config) {
    LOG_ERROR << "config: " << config.status().message();
    return kExitBadConfig;
  }
  if (inc::Status st = inc::am::ValidateAmConfig(*config); !st.ok()) {
    LOG_ERROR << (config_path.empty() ? "" : "config " + config_path + ": ") << st.message();
    return kExitBadConfig;
  }
  (void)inc::ApplyLogSettings(config->log_level().empty() ? "info" : config->log_level(),
                              config->log_format().empty() ? "text" : config->log_format());
  // The same certificate serves members, switches and operators and
  // identifies the AM to the switch agents it programs.
  auto security = inc::am::AmTransportSecurity(*config);
  auto server_credentials = security ? inc::MakeServerCredentials(*security) : security.status();
  auto switch_credentials = security ? inc::MakeWatchedChannelCredentials(*security) : security.status();
  if (!server_credentials || !switch_credentials) {
    LOG_ERROR << (config_path.empty() ? "" : "config " + config_path + ": ")
              << (server_credentials ? switch_credentials.status() : server_credentials.status()).message();
    return kExitBadConfig;
  }
  if (security->insecure) {
    LOG_WARN << "insecure: plaintext gRPC; anyone who reaches " << config->listen()
             << " can manage trees and register switches";
  }
  inc::am::RunningAm running;
  running.config = *config;
  if (inc::Status st = inc::am::ReadJsonFile(config->topology_file(), &running.topology); !st.ok()) {
    LOG_ERROR << "topology: " << st.ToString();
    return kExitBadConfig;
  }
  auto topo = inc::am::TopologyFromProto(running.topology);
  if (!topo) {
    LOG_ERROR << "topology: " << topo.status().WithContext(config->topology_file()).ToString();
    return kExitBadConfig;
  }
  LOG_INFO << "incamd " << inc::kVersion << ": topology " << config->topology_file() << ": "
           << topo->switches.size() << " switches, " << topo->hosts.size() << " hosts, " << topo->links.size()
           << " links";

  inc::am::AmOptions options;
  inc::am::ApplyConfig(*config, &options);
  options.switch_credentials = *switch_credentials;

  const std::string state_file = inc::am::StatePath(*config);
  if (!config->has_state_path()) {
    // The default folder, as a package would create it: root's (or
    // incamd's) alone, as the state store requires.
    (void)mkdir("/var/lib/incin", 0700);
    // Earlier incamds made it 0750 themselves: the default folder, when it
    // is this user's, is made private again (a configured folder is not
    // touched; the store refuses it instead).
    struct stat st {};
    if (stat("/var/lib/incin", &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
        (st.st_mode & 077) != 0) {
      if (chmod("/var/lib/incin", 0700) == 0) {
        LOG_WARN << "state: /var/lib/incin had mode " << std::oct << (st.st_mode & 0777) << std::dec
                 << " (made by an earlier incamd): now 700";
      }
    }
  }
  auto store = inc::am::Store::Open(state_file);
  if (!store) {
    LOG_ERROR << "state: " << store.status().ToString();
    return store.status().code() == inc::Code::kUnavailable ? kExitCannotServe : kExitBadConfig;
  }
  LOG_INFO << "state: "
           << (state_file.empty() ? "in memory only (state_path \"\"): a restart forgets every tree"
                                  : state_file);

  // Job credentials: from job_secret_file, else a secret kept in the state
  // file (made at the first start). Needed only where members are
  // authorized (mTLS); in plaintext nothing is checked.
  std::optional<inc::JobCredentials> job_credentials;
  if (!security->insecure) {
    auto secret = !config->job_secret_file().empty()
                      ? inc::ReadSecretFile(config->job_secret_file(), "job_secret_file")
                      : (*store)->JobSecret([] { return inc::JobCredentials::NewSecretHex(); });
    auto made =
        secret ? inc::JobCredentials::FromHex(*secret, config->job_secret_file().empty()
                                                           ? "the state file's job secret"
                                                           : "job_secret_file " + config->job_secret_file())
               : secret.status();
    if (!made) {
      LOG_ERROR << "job credentials: " << made.status().message();
      return kExitBadConfig;
    }
    job_credentials = std::move(*made);
    LOG_INFO << "job credentials: JoinGroup needs one issued for its job (secret from "
             << (config->job_secret_file().empty()
                     ? (state_file.empty() ? std::string("memory: a restart invalidates issued ones")
                                           : "the state file")
                     : config->job_secret_file())
             << ")";
  }

  inc::am::Manager manager(options, std::move(*topo), std::move(*store));
  if (config->netconf().enabled()) {
    auto nc_options = inc::am::NetconfClientOptionsFromConfig(*config);
    if (!nc_options.ok()) {
      LOG_ERROR << "config: " << nc_options.status().message();
      return kExitBadConfig;
    }
    auto netconf = inc::am::NetconfSwitchClient::Create(*nc_options);
    if (!netconf.ok()) {
      LOG_ERROR << "config: " << netconf.status().message();
      return kExitBadConfig;
    }
    manager.switch_clients().UseNetconf(std::move(*netconf));
  }
  if (inc::Status st = manager.Restore(); !st.ok()) {
    LOG_ERROR << "state: " << st.ToString();
    return kExitBadConfig;
  }
  inc::Authorizer authorizer(/*enforce=*/!security->insecure);
  inc::am::AmService service(&manager, &authorizer, job_credentials ? &*job_credentials : nullptr);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, *server_credentials, &port);
  builder.RegisterService(&service);
  inc::CallCounter calls;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(calls.Factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    LOG_ERROR << "cannot listen on " << options.listen;
    return kExitCannotServe;
  }
  std::unique_ptr<inc::MetricsServer> metrics;
  if (!config->metrics_listen().empty()) {
    auto serving = inc::MetricsServing(config->metrics_listen(), config->metrics_tls(), *security);
    auto started = serving ? inc::MetricsServer::Start(
                                 *serving, [&manager] { return inc::am::RenderAmMetrics(&manager); })
                           : serving.status();
    if (!started.ok()) {
      LOG_ERROR << started.status().ToString();
      server->Shutdown();
      return kExitCannotServe;
    }
    metrics = std::move(*started);
  }
  manager.Start();
  LOG_INFO << "listening on " << options.listen << " (port " << port << "); member heartbeat timeout "
           << options.member_heartbeat_timeout_ms << " ms, switch heartbeat timeout "
           << options.switch_heartbeat_timeout_ms << " ms; " << inc::Describe(*security);
  if (metrics) {
    LOG_INFO << "serving Prometheus metrics on " << config->metrics_listen() << " (port " << metrics->port()
             << ", path /metrics, " << inc::DescribeMetricsTls(config->metrics_tls()) << ")";
  }

  inc::NotifyReady("listening on " + options.listen);
  int sig = 0;
  while ((sig = inc::WaitForDaemonSignal()) == SIGHUP) {
    LOG_INFO << "SIGHUP: reloading the configuration";
    inc::NotifyReloading();
    inc::am::ReloadAmConfig(config_path, flags, &running, [&manager](const inc::v1::AmConfig& next) {
      inc::am::AmOptions retuned;
      inc::am::ApplyConfig(next, &retuned);
      manager.Retune(retuned);
    });
    inc::NotifyReady("listening on " + options.listen + " (configuration reloaded)");
  }
  inc::NotifyStopping("shutting down");
  // Calls in flight finish: one programming or asking switches may take a
  // switch RPC timeout; one waiting for its group or following events is
  // answered by Stop() at once. Then the server stops without waiting for
  // idle clients to hang up.
  const auto grace = std::chrono::milliseconds(std::max<uint32_t>(options.switch_rpc_timeout_ms + 500, 2000));
  LOG_INFO << inc::SignalName(sig) << ": shutting down; calls in flight get up to " << grace.count() << " ms";
  metrics.reset();
  manager.Stop();  // waiting members get UNAVAILABLE, event streams end
  if (!calls.WaitIdle(std::chrono::steady_clock::now() + grace)) {
    LOG_WARN << calls.InFlight() << " calls still running after " << grace.count() << " ms: cancelled";
  }
  server->Shutdown(std::chrono::system_clock::now());
  LOG_INFO << "stopped";
  return 0;
}
