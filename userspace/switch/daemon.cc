// SPDX-License-Identifier: Apache-2.0
#include "switch/daemon.h"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <utility>

#include "common/daemon.h"
#include "common/log.h"
#include "common/metrics_tls.h"
#include "common/service_manager.h"
#include "switch/metrics.h"

namespace inc::sw {
namespace {

std::string InConfig(const std::string& config_path, const Status& st) {
  return (config_path.empty() ? "" : "config " + config_path + ": ") + st.message();
}

}  // namespace

std::string AdvertisedAddress(const std::string& listen, const std::vector<PortInfo>& ports) {
  if (listen.rfind("unix:", 0) == 0) return listen;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return listen;
  std::string host = listen.substr(0, colon);
  if ((host == "0.0.0.0" || host == "[::]" || host.empty()) && !ports.empty()) {
    return ports.front().ip.ToString() + listen.substr(colon);
  }
  return listen;
}

Expected<SwitchPlan> PlanSwitch(v1::SwitchAgentConfig config, const std::string& config_path,
                                const FlagOverrides& flags, const std::string& advertise) {
  SwitchPlan plan;
  plan.config_path = config_path;
  plan.flags = flags;
  plan.advertise = advertise;
  if (!advertise.empty()) INC_RETURN_IF_ERROR(ValidateDialAddress(advertise, "--advertise"));
  auto ports = ResolvePorts(config);
  if (!ports.ok()) return ports.status();
  plan.ports = std::move(*ports);
  auto routing = ParseRoutingSettings(config, plan.ports);
  if (!routing.ok()) return InvalidArgument(InConfig(config_path, routing.status()));
  plan.routing = std::move(*routing);
  auto credit = ParseCreditSettings(config.credit(), plan.ports);
  if (!credit.ok()) return InvalidArgument(InConfig(config_path, credit.status()));
  plan.credit = std::move(*credit);
  auto listen = ResolveListen(config);
  if (!listen.ok()) return listen.status();
  plan.listen = std::move(*listen);
  // Certificates are read and checked here, before the data path is
  // touched, so a bad file leaves nothing attached or pinned.
  auto security = SwitchTransportSecurity(config);
  if (!security.ok()) return InvalidArgument(InConfig(config_path, security.status()));
  plan.security = *security;
  auto server_credentials = MakeServerCredentials(*security);
  if (!server_credentials.ok()) return InvalidArgument(InConfig(config_path, server_credentials.status()));
  plan.server_credentials = *server_credentials;
  auto am_credentials = MakeWatchedChannelCredentials(*security);
  if (!am_credentials.ok()) return InvalidArgument(InConfig(config_path, am_credentials.status()));
  plan.am_credentials = *am_credentials;
  if (!config.netconf().listen().empty()) {
    auto nc = netconf::NetconfOptionsFromConfig(config);
    if (!nc.ok()) return InvalidArgument(InConfig(config_path, nc.status()));
    nc->management_address = advertise.empty() ? AdvertisedAddress(plan.listen, plan.ports) : advertise;
    plan.netconf = std::move(*nc);
  }
  plan.config = std::move(config);
  return plan;
}

Status CheckSwitchConfig(const v1::SwitchAgentConfig& config, const std::string& config_path,
                         const std::string& advertise, std::vector<std::string>* notes) {
  if (!advertise.empty()) INC_RETURN_IF_ERROR(ValidateDialAddress(advertise, "--advertise"));
  // The ports as configured; the interfaces' own facts where they exist.
  std::vector<PortInfo> ports;
  for (const auto& p : config.ports()) {
    v1::SwitchAgentConfig one;
    *one.add_ports() = p;
    auto found = ResolvePorts(one);
    if (found.ok()) {
      ports.push_back(found->front());
      continue;
    }
    notes->push_back(found.status().message() + " (start on this host would fail: exit 2)");
    PortInfo port;
    port.name = p.name();
    if (!p.ip().empty()) port.ip = *Ipv4::Parse(p.ip());  // ValidateConfig parsed it
    ports.push_back(port);
  }
  auto routing = ParseRoutingSettings(config, ports);
  if (!routing.ok()) return InvalidArgument(InConfig(config_path, routing.status()));
  auto credit = ParseCreditSettings(config.credit(), ports);
  if (!credit.ok()) return InvalidArgument(InConfig(config_path, credit.status()));
  auto security = SwitchTransportSecurity(config);
  if (!security.ok()) return InvalidArgument(InConfig(config_path, security.status()));
  if (!security->insecure) {
    const std::pair<const char*, std::string> files[] = {
        {"tls.cert", config.tls().cert()}, {"tls.key", config.tls().key()}, {"tls.ca", config.tls().ca()}};
    for (const auto& [field, path] : files) {
      if (!std::ifstream(path))
        notes->push_back(std::string(field) + " " + path + " cannot be read on this host");
    }
  }
  if (!config.metrics_listen().empty() && config.metrics_listen() == config.listen())
    return InvalidArgument(InConfig(config_path, InvalidArgument("metrics_listen " + config.metrics_listen() +
                                                                 " is the gRPC listen address too")));
  if (!config.netconf().listen().empty()) {
    auto nc = netconf::NetconfOptionsFromConfig(config);
    if (!nc.ok()) return InvalidArgument(InConfig(config_path, nc.status()));
  }
  if (config.listen().empty())
    notes->push_back(
        "no listen address: at start the agent serves on its management address toward "
        "am_address, port " +
        std::to_string(kDefaultListenPort));
  return Status::Ok();
}

Expected<std::unique_ptr<SwitchDaemon>> SwitchDaemon::Start(SwitchPlan plan) {
  std::unique_ptr<SwitchDaemon> d(new SwitchDaemon(std::move(plan)));
  if (d->plan_.security.insecure) {
    LOG_WARN << "insecure: plaintext gRPC; anyone who reaches " << d->plan_.listen
             << " can configure and remove trees on this switch";
  }
  Status st = d->StartParts();
  if (!st.ok()) {
    (void)d->Stop(d->plan_.config.keep_datapath_on_exit());
    return st;
  }
  return d;
}

Status SwitchDaemon::StartParts() {
  const auto& config = plan_.config;
  auto agent = Agent::Start(config, plan_.ports);
  if (!agent.ok()) return agent.status();
  agent_ = std::move(*agent);

  arn_enabled_ = plan_.routing.arn_enabled;
  if (!plan_.routing.plan.empty() || plan_.routing.arn_enabled) {
    auto r = RoutingAgent::Start(std::move(plan_.routing), agent_->datapath(), config.switch_name());
    if (!r.ok()) return r.status().WithContext("routing");
    routing_ = std::move(*r);
    agent_->SetLinkReporter([p = routing_.get()] { return p->UnhealthyLocalLinks(); });
  }
  if (plan_.credit.enabled) {
    std::vector<std::string> data_ports;
    for (const auto& p : plan_.ports) data_ports.push_back(p.name);
    auto c =
        CreditAgent::Start(std::move(plan_.credit), agent_->datapath(), data_ports, config.switch_name());
    if (!c.ok()) return c.status().WithContext("credit");
    credit_ = std::move(*c);
  }
  INC_RETURN_IF_ERROR(StartServer());
  INC_RETURN_IF_ERROR(StartNetconf());
  INC_RETURN_IF_ERROR(StartMetrics());
  StartAmClient();
  monitor_ = std::thread([this] { MonitorLinks(); });
  return Status::Ok();
}

Status SwitchDaemon::StartServer() {
  authorizer_ = std::make_unique<Authorizer>(/*enforce=*/!plan_.security.insecure);
  service_ =
      std::make_unique<SwitchAgentService>(agent_.get(), routing_.get(), credit_.get(), authorizer_.get());
  grpc::ServerBuilder builder;
  int bound_port = -1;
  builder.AddListeningPort(plan_.listen, plan_.server_credentials, &bound_port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || bound_port == 0) {
    LOG_ERROR << "cannot listen on " << plan_.listen;
    server_.reset();
    return Unavailable("cannot serve SwitchAgent on " + plan_.listen +
                       " (address in use, not assigned in this namespace, or malformed)");
  }
  LOG_INFO << "serving SwitchAgent on " << plan_.listen
           << (plan_.listen.rfind("unix:", 0) == 0 ? "" : " (port " + std::to_string(bound_port) + ")")
           << "; " << Describe(plan_.security);
  return Status::Ok();
}

Status SwitchDaemon::StartNetconf() {
  if (!plan_.netconf) return Status::Ok();
  auto started = netconf::NetconfServer::Start(*plan_.netconf, agent_.get(), routing_.get(), credit_.get());
  if (!started.ok()) {
    LOG_ERROR << started.status().ToString();
    return started.status();
  }
  netconf_ = std::move(*started);
  return Status::Ok();
}

Status SwitchDaemon::StartMetrics() {
  const std::string& listen = plan_.config.metrics_listen();
  if (listen.empty()) return Status::Ok();
  auto serving = MetricsServing(listen, plan_.config.metrics_tls(), plan_.security);
  if (!serving.ok()) {
    LOG_ERROR << serving.status().ToString();
    return serving.status();
  }
  auto started = MetricsServer::Start(*serving, [agent = agent_.get()] {
    v1::GetCapabilitiesResponse caps;
    auto stats = agent->GetStats(0);
    if (!stats.ok() || !agent->GetCapabilities(&caps).ok()) return std::string();
    return RenderSwitchMetrics(*stats, caps);
  });
  if (!started.ok()) {
    LOG_ERROR << started.status().ToString();
    return started.status();
  }
  metrics_ = std::move(*started);
  LOG_INFO << "serving Prometheus metrics on " << listen << " (port " << metrics_->port()
           << ", path /metrics, " << DescribeMetricsTls(plan_.config.metrics_tls()) << ")";
  return Status::Ok();
}

void SwitchDaemon::StartAmClient() {
  if (plan_.config.am_address().empty()) {
    LOG_INFO << "no AM address: running standalone (SwitchAgent service only)";
    return;
  }
  AmClientOptions options;
  options.am_address = plan_.config.am_address();
  options.agent_address =
      plan_.advertise.empty() ? AdvertisedAddress(plan_.listen, plan_.ports) : plan_.advertise;
  options.default_heartbeat_ms = plan_.config.heartbeat_interval_ms();
  options.credentials = plan_.am_credentials;
  am_client_ = std::make_unique<AmClient>(agent_.get(), options);
  am_client_->Start();
}

void SwitchDaemon::MonitorLinks() {
  std::string arn_seen;  // the unhealthy links last reported, as text
  std::unique_lock<std::mutex> lock(monitor_mu_);
  while (!monitor_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return monitor_stop_; })) {
    lock.unlock();
    bool changed = agent_->RefreshPorts();
    if (routing_) {
      std::string now;
      for (const auto& l : routing_->UnhealthyLocalLinks())
        now += l.port() + ":" + l.condition() + ":" + std::to_string(l.severity()) + ";";
      changed |= now != arn_seen;
      arn_seen = std::move(now);
    }
    if (changed && am_client_) am_client_->Nudge();
    lock.lock();
  }
}

// What SIGHUP retunes in the running agents: the config that would be in
// force must translate (cross-field checks such as clear_below <
// congested_above), then each agent takes its fields.
LiveFields SwitchDaemon::ReloadableFields() {
  LiveFields live;
  live.fields = SwitchLiveFields(routing_ && arn_enabled_, credit_ != nullptr);
  live.nested = {"arn", "credit"};
  live.check = [this](const google::protobuf::Message& m) {
    const auto& next = static_cast<const v1::SwitchAgentConfig&>(m);
    if (routing_) INC_RETURN_IF_ERROR(ParseRoutingSettings(next, plan_.ports).status());
    if (credit_) INC_RETURN_IF_ERROR(ParseCreditSettings(next.credit(), plan_.ports).status());
    return Status::Ok();
  };
  live.apply = [this](const google::protobuf::Message& m) {
    const auto& next = static_cast<const v1::SwitchAgentConfig&>(m);
    if (routing_) {
      auto r = ParseRoutingSettings(next, plan_.ports);
      if (!r.ok()) return r.status();
      routing_->Retune(*r);
    }
    if (credit_) {
      auto c = ParseCreditSettings(next.credit(), plan_.ports);
      if (!c.ok()) return c.status();
      INC_RETURN_IF_ERROR(credit_->Retune(*c));
    }
    return Status::Ok();
  };
  return live;
}

int SwitchDaemon::Run() {
  auto& config = plan_.config;
  NotifyReady("serving SwitchAgent on " + config.listen() + ", " + std::to_string(plan_.ports.size()) +
              " ports with XDP attached");
  const LiveFields live = ReloadableFields();
  int sig = 0;
  while ((sig = WaitForDaemonSignal()) == SIGHUP) {
    LOG_INFO << "SIGHUP: reloading the configuration";
    NotifyReloading();
    ReloadConfig(plan_.config_path, plan_.flags, &config, live);
    NotifyReady("serving SwitchAgent on " + config.listen() + " (configuration reloaded)");
  }
  // SIGUSR2 is a restart (the unit's RestartKillSignal): the next agent
  // re-adopts the pinned trees, so they keep aggregating in between.
  const bool keep_datapath = config.keep_datapath_on_exit() || sig == SIGUSR2;
  LOG_INFO << "received " << SignalName(sig) << ": stopping"
           << (keep_datapath ? ", leaving XDP attached and the maps pinned for the next agent"
                             : ", detaching XDP");
  NotifyStopping(keep_datapath ? "stopping; the data path stays for the next agent"
                               : "stopping; detaching XDP");
  Status st = Stop(keep_datapath);
  LOG_INFO << "exit" << (st.ok() ? "" : " with errors");
  return st.ok() ? 0 : 1;
}

Status SwitchDaemon::Stop(bool keep_datapath) {
  if (stopped_) return Status::Ok();
  stopped_ = true;
  metrics_.reset();
  if (am_client_) {
    am_client_->Stop();
    LOG_INFO << "stopped talking to the AM (no deregistration: the AM notices missing heartbeats)";
  }
  if (monitor_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(monitor_mu_);
      monitor_stop_ = true;
    }
    monitor_cv_.notify_all();
    monitor_.join();
  }
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    LOG_INFO << "stopped serving SwitchAgent";
  }
  netconf_.reset();  // its sessions end before the agent they drive
  Status st = Status::Ok();
  if (agent_) agent_->SetLinkReporter(nullptr);
  credit_.reset();  // ends its flows (PathTear) while the data path still runs
  routing_.reset();
  if (agent_) st = agent_->Stop(keep_datapath);
  agent_.reset();
  return st;
}

SwitchDaemon::~SwitchDaemon() {
  (void)Stop(plan_.config.keep_datapath_on_exit());
}

}  // namespace inc::sw
