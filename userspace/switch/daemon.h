// SPDX-License-Identifier: Apache-2.0
// incswitchd's composition root. PlanSwitch checks everything a
// configuration asks for before the data path is touched; SwitchDaemon then
// builds the agents (tree agent, routing agent, credit agent), wires them to
// each other and to the SwitchAgent service, the metrics endpoint, the AM
// client and the link monitor, serves until a stop signal (reloading on
// SIGHUP) and takes everything down in order. main.cc only reads the command
// line. docs/architecture.md "incswitchd" draws the wiring.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/authz.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/tls.h"
#include "switch/am_client.h"
#include "switch/config.h"
#include "switch/credit/credit_agent.h"
#include "switch/credit/credit_config.h"
#include "switch/netconf/server.h"
#include "switch/routing/arn_config.h"
#include "switch/routing/routing_agent.h"
#include "switch/service.h"
#include "switch/tree/agent.h"

namespace inc::sw {

// A configuration checked as a whole: a failure to make one is a bad
// configuration (incswitchd exits 2) and leaves nothing attached or pinned.
struct SwitchPlan {
  v1::SwitchAgentConfig config;
  std::string config_path;  // re-read on SIGHUP; empty = flags only
  FlagOverrides flags;      // applied again on every reload
  std::string advertise;    // --advertise, empty = derived from the listen address
  std::vector<PortInfo> ports;
  RoutingSettings routing;
  CreditSettings credit;
  std::string listen;
  TransportSecurity security;
  std::shared_ptr<grpc::ServerCredentials> server_credentials;
  std::shared_ptr<grpc::ChannelCredentials> am_credentials;
  // NETCONF next to gRPC (docs/netconf.md); absent = off.
  std::optional<netconf::NetconfOptions> netconf;
};

// Errors name the config file when there is one.
Expected<SwitchPlan> PlanSwitch(v1::SwitchAgentConfig config, const std::string& config_path,
                                const FlagOverrides& flags, const std::string& advertise);

// incswitchd --check-config: the checks of PlanSwitch that need neither the
// data path nor this host's interfaces: routing, credit and NETCONF settings
// against the configured ports, transport security, metrics_listen apart
// from listen. Interfaces that are missing here, or lack the configured IP,
// and certificate files that cannot be read go to `notes` (start on this
// host would fail on them) rather than failing the check, so a config can be
// checked away from its switch.
Status CheckSwitchConfig(const v1::SwitchAgentConfig& config, const std::string& config_path,
                         const std::string& advertise, std::vector<std::string>* notes);

// What the AM dials back: the listen address, with a wildcard host replaced
// by the first port's IP.
std::string AdvertisedAddress(const std::string& listen, const std::vector<PortInfo>& ports);

class SwitchDaemon {
 public:
  // Attaches the data path and starts every part the plan asks for; on a
  // failure what was started is stopped again (the data path kept only if
  // the config says keep_datapath_on_exit).
  static Expected<std::unique_ptr<SwitchDaemon>> Start(SwitchPlan plan);
  ~SwitchDaemon();
  SwitchDaemon(const SwitchDaemon&) = delete;
  SwitchDaemon& operator=(const SwitchDaemon&) = delete;

  // Serves until SIGTERM, SIGINT or SIGUSR2 (a restart: the data path stays
  // for the next agent), reloading on SIGHUP, then stops. The process exit
  // code: 0, or 1 if stopping failed.
  int Run();

 private:
  explicit SwitchDaemon(SwitchPlan plan) : plan_(std::move(plan)) {}
  Status StartParts();
  Status StartServer();
  Status StartMetrics();
  Status StartNetconf();
  void StartAmClient();
  // Link state: a port going down, or ARN finding a link congested or
  // healthy again, must reach the AM in the next heartbeat (it moves trees
  // off bad links), so the monitor heartbeats at once on a change.
  void MonitorLinks();
  LiveFields ReloadableFields();
  // Stops everything in the reverse order of starting; idempotent.
  Status Stop(bool keep_datapath);

  SwitchPlan plan_;
  bool arn_enabled_ = false;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<RoutingAgent> routing_;
  std::unique_ptr<CreditAgent> credit_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<SwitchAgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<netconf::NetconfServer> netconf_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<AmClient> am_client_;

  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_stop_ = false;
  std::thread monitor_;
  bool stopped_ = false;
};

}  // namespace inc::sw
