// incswitchd: the switch agent. Owns the XDP data path of one switch, serves
// the SwitchAgent gRPC service, registers with and heartbeats to the AM.
// docs/operations.md "## incswitchd" describes config, flags, signals,
// restarts and exit codes.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <thread>

#include "common/daemon.h"
#include "common/grpc_log.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/service_manager.h"
#include "common/version.h"
#include "switch/agent.h"
#include "switch/am_client.h"
#include "switch/arn_config.h"
#include "switch/config.h"
#include "switch/credit_agent.h"
#include "switch/credit_config.h"
#include "switch/metrics.h"
#include "switch/routing_agent.h"
#include "switch/service.h"

namespace {

using inc::sw::FlagOverrides;

// What the AM dials back: the listen address, with a wildcard host replaced
// by the first port's IP.
std::string AdvertisedAddress(const std::string& listen, const std::vector<inc::sw::PortInfo>& ports) {
  if (listen.rfind("unix:", 0) == 0) return listen;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return listen;
  std::string host = listen.substr(0, colon);
  if ((host == "0.0.0.0" || host == "[::]" || host.empty()) && !ports.empty()) {
    return ports.front().ip.ToString() + listen.substr(colon);
  }
  return listen;
}

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
  bool insecure = false;
  auto* o_insecure = app.add_flag("--insecure", insecure,
                                  "plaintext gRPC without authorization (instead of the config's tls)");
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
  if (!advertise.empty()) {
    if (auto st = inc::ValidateDialAddress(advertise, "--advertise"); !st.ok())
      return Fail(st.message(), kExitBadConfig);
  }
  (void)inc::ApplyLogSettings(config.log_level(), config.log_format());  // validated above
  LOG_INFO << "incswitchd " << inc::kVersion << ": starting switch " << config.switch_name() << " ("
           << config.ports_size() << " ports, listen "
           << (config.listen().empty() ? "the management address" : config.listen()) << ", AM "
           << (config.am_address().empty() ? "none" : config.am_address()) << ")";

  auto ports = inc::sw::ResolvePorts(config);
  if (!ports.ok()) return Fail(ports.status().message(), kExitBadConfig);

  auto routing_settings = inc::sw::ParseRoutingSettings(config, *ports);
  if (!routing_settings.ok()) {
    return Fail(
        (config_path.empty() ? "" : "config " + config_path + ": ") + routing_settings.status().message(),
        kExitBadConfig);
  }

  auto credit_settings = inc::sw::ParseCreditSettings(config.credit(), *ports);
  if (!credit_settings.ok())
    return Fail(
        (config_path.empty() ? "" : "config " + config_path + ": ") + credit_settings.status().message(),
        kExitBadConfig);

  auto listen_address = inc::sw::ResolveListen(config);
  if (!listen_address) return Fail(listen_address.status().message(), kExitBadConfig);
  // Certificates are read and checked before the data path is touched, so
  // a bad file leaves nothing attached or pinned.
  auto security = inc::sw::SwitchTransportSecurity(config);
  auto server_credentials = security ? inc::MakeServerCredentials(*security) : security.status();
  auto am_credentials = security ? inc::MakeWatchedChannelCredentials(*security) : security.status();
  if (!server_credentials || !am_credentials) {
    return Fail((config_path.empty() ? "" : "config " + config_path + ": ") +
                    (server_credentials ? am_credentials.status() : server_credentials.status()).message(),
                kExitBadConfig);
  }
  if (security->insecure) {
    LOG_WARN << "insecure: plaintext gRPC; anyone who reaches " << *listen_address
             << " can configure and remove trees on this switch";
  }

  auto agent = inc::sw::Agent::Start(config, *ports);
  if (!agent.ok()) return Fail(agent.status().message());

  const bool arn_enabled = routing_settings->arn_enabled;
  std::unique_ptr<inc::sw::RoutingAgent> routing;
  if (!routing_settings->plan.empty() || routing_settings->arn_enabled) {
    auto r = inc::sw::RoutingAgent::Start(std::move(*routing_settings), (*agent)->datapath(),
                                          config.switch_name());
    if (!r.ok()) {
      (void)(*agent)->Stop(config.keep_datapath_on_exit());
      return Fail("routing: " + r.status().message());
    }
    routing = std::move(*r);
    (*agent)->SetLinkReporter([p = routing.get()] { return p->UnhealthyLocalLinks(); });
  }

  std::unique_ptr<inc::sw::CreditAgent> credit;
  if (credit_settings->enabled) {
    std::vector<std::string> data_ports;
    for (const auto& p : *ports) data_ports.push_back(p.name);
    auto c = inc::sw::CreditAgent::Start(std::move(*credit_settings), (*agent)->datapath(), data_ports,
                                         config.switch_name());
    if (!c.ok()) {
      routing.reset();
      (void)(*agent)->Stop(config.keep_datapath_on_exit());
      return Fail("credit: " + c.status().message());
    }
    credit = std::move(*c);
  }

  inc::Authorizer authorizer(/*enforce=*/!security->insecure);
  inc::sw::SwitchAgentService service(agent->get(), routing.get(), credit.get(), &authorizer);
  grpc::ServerBuilder builder;
  int bound_port = -1;
  builder.AddListeningPort(*listen_address, *server_credentials, &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    LOG_ERROR << "cannot listen on " << *listen_address;
    (void)(*agent)->Stop(config.keep_datapath_on_exit());
    return Fail("cannot serve SwitchAgent on " + *listen_address +
                " (address in use, not assigned in this namespace, or malformed)");
  }
  LOG_INFO << "serving SwitchAgent on " << *listen_address
           << (listen_address->rfind("unix:", 0) == 0 ? "" : " (port " + std::to_string(bound_port) + ")")
           << "; " << inc::Describe(*security);

  std::unique_ptr<inc::MetricsServer> metrics;
  if (!config.metrics_listen().empty()) {
    auto started = inc::MetricsServer::Start(config.metrics_listen(), [agent = agent->get()] {
      inc::v1::GetCapabilitiesResponse caps;
      auto stats = agent->GetStats(0);
      if (!stats.ok() || !agent->GetCapabilities(&caps).ok()) return std::string();
      return inc::sw::RenderSwitchMetrics(*stats, caps);
    });
    if (!started.ok()) {
      LOG_ERROR << started.status().ToString();
      server->Shutdown();
      (void)(*agent)->Stop(config.keep_datapath_on_exit());
      return Fail(started.status().message());
    }
    metrics = std::move(*started);
    LOG_INFO << "serving Prometheus metrics on " << config.metrics_listen() << " (port " << metrics->port()
             << ", path /metrics)";
  }

  std::unique_ptr<inc::sw::AmClient> am_client;
  if (!config.am_address().empty()) {
    inc::sw::AmClientOptions options;
    options.am_address = config.am_address();
    options.agent_address = advertise.empty() ? AdvertisedAddress(*listen_address, *ports) : advertise;
    options.default_heartbeat_ms = config.heartbeat_interval_ms();
    options.credentials = *am_credentials;
    am_client = std::make_unique<inc::sw::AmClient>(agent->get(), options);
    am_client->Start();
  } else {
    LOG_INFO << "no AM address: running standalone (SwitchAgent service only)";
  }

  // Link state: a port going down, or ARN finding a link congested or
  // healthy again, must reach the AM in the next heartbeat (it moves trees
  // off bad links), so the monitor heartbeats at once on a change.
  std::mutex monitor_mu;
  std::condition_variable monitor_cv;
  bool monitor_stop = false;
  std::thread monitor([&] {
    std::string arn_seen;  // the unhealthy links last reported, as text
    std::unique_lock<std::mutex> lock(monitor_mu);
    while (!monitor_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return monitor_stop; })) {
      lock.unlock();
      bool changed = (*agent)->RefreshPorts();
      if (routing) {
        std::string now;
        for (const auto& l : routing->UnhealthyLocalLinks())
          now += l.port() + ":" + l.condition() + ":" + std::to_string(l.severity()) + ";";
        changed |= now != arn_seen;
        arn_seen = std::move(now);
      }
      if (changed && am_client) am_client->Nudge();
      lock.lock();
    }
  });

  inc::NotifyReady("serving SwitchAgent on " + config.listen() + ", " + std::to_string(ports->size()) +
                   " ports with XDP attached");
  // What SIGHUP retunes in the running agents: the config that would be in
  // force must translate (cross-field checks such as clear_below <
  // congested_above), then each agent takes its fields.
  inc::LiveFields live;
  live.fields = inc::sw::SwitchLiveFields(routing && arn_enabled, credit != nullptr);
  live.nested = {"arn", "credit"};
  live.check = [&](const google::protobuf::Message& m) {
    const auto& next = static_cast<const inc::v1::SwitchAgentConfig&>(m);
    if (routing) INC_RETURN_IF_ERROR(inc::sw::ParseRoutingSettings(next, *ports).status());
    if (credit) INC_RETURN_IF_ERROR(inc::sw::ParseCreditSettings(next.credit(), *ports).status());
    return inc::Status::Ok();
  };
  live.apply = [&](const google::protobuf::Message& m) {
    const auto& next = static_cast<const inc::v1::SwitchAgentConfig&>(m);
    if (routing) {
      auto r = inc::sw::ParseRoutingSettings(next, *ports);
      if (!r.ok()) return r.status();
      routing->Retune(*r);
    }
    if (credit) {
      auto c = inc::sw::ParseCreditSettings(next.credit(), *ports);
      if (!c.ok()) return c.status();
      INC_RETURN_IF_ERROR(credit->Retune(*c));
    }
    return inc::Status::Ok();
  };
  int sig = 0;
  while ((sig = inc::WaitForDaemonSignal()) == SIGHUP) {
    LOG_INFO << "SIGHUP: reloading the configuration";
    inc::NotifyReloading();
    inc::sw::ReloadConfig(config_path, flags, &config, live);
    inc::NotifyReady("serving SwitchAgent on " + config.listen() + " (configuration reloaded)");
  }
  // SIGUSR2 is a restart (the unit's RestartKillSignal): the next agent
  // re-adopts the pinned trees, so they keep aggregating in between.
  const bool keep_datapath = config.keep_datapath_on_exit() || sig == SIGUSR2;
  LOG_INFO << "received " << inc::SignalName(sig) << ": stopping"
           << (keep_datapath ? ", leaving XDP attached and the maps pinned for the next agent"
                             : ", detaching XDP");
  inc::NotifyStopping(keep_datapath ? "stopping; the data path stays for the next agent"
                                    : "stopping; detaching XDP");

  metrics.reset();
  if (am_client) {
    am_client->Stop();
    LOG_INFO << "stopped talking to the AM (no deregistration: the AM notices missing heartbeats)";
  }
  {
    std::lock_guard<std::mutex> lock(monitor_mu);
    monitor_stop = true;
  }
  monitor_cv.notify_all();
  monitor.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  LOG_INFO << "stopped serving SwitchAgent";
  (*agent)->SetLinkReporter(nullptr);
  credit.reset();  // ends its flows (PathTear) while the data path still runs
  routing.reset();
  inc::Status st = (*agent)->Stop(keep_datapath);
  agent->reset();
  LOG_INFO << "exit" << (st.ok() ? "" : " with errors");
  return st.ok() ? 0 : 1;
}
