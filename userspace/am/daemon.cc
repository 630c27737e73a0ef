// SPDX-License-Identifier: Apache-2.0
#include "am/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "am/metrics.h"
#include "am/netconf_client.h"
#include "am/topology.h"
#include "common/log.h"
#include "common/metrics_tls.h"
#include "common/secret_file.h"
#include "common/service_manager.h"
#include "common/version.h"

namespace inc::am {

std::unique_ptr<AmDaemon> AmDaemon::Start(std::string config_path, AmFlags flags, int* exit_code) {
  std::unique_ptr<AmDaemon> d(new AmDaemon(std::move(config_path), std::move(flags)));
  for (int (AmDaemon::*step)() :
       {&AmDaemon::LoadConfig, &AmDaemon::LoadTopology, &AmDaemon::OpenStore, &AmDaemon::MakeJobCredentials,
        &AmDaemon::BuildManager, &AmDaemon::StartServer, &AmDaemon::StartMetrics}) {
    if (int code = ((*d).*step)(); code != 0) {
      *exit_code = code;
      return nullptr;
    }
  }
  d->manager_->Start();
  LOG_INFO << "listening on " << d->options_.listen << " (port " << d->port_ << "); member heartbeat timeout "
           << d->options_.member_heartbeat_timeout_ms << " ms, switch heartbeat timeout "
           << d->options_.switch_heartbeat_timeout_ms << " ms; " << Describe(d->security_);
  if (d->metrics_) {
    LOG_INFO << "serving Prometheus metrics on " << d->config_.metrics_listen() << " (port "
             << d->metrics_->port() << ", path /metrics, " << DescribeMetricsTls(d->config_.metrics_tls())
             << ")";
  }
  *exit_code = 0;
  return d;
}

AmDaemon::~AmDaemon() {
  // A start that failed after the server was listening: it stops before the
  // service and the manager are destroyed.
  metrics_.reset();
  if (server_ && !server_shut_down_) server_->Shutdown();
}

std::string AmDaemon::ConfigPrefix() const {
  return config_path_.empty() ? "" : "config " + config_path_ + ": ";
}

int AmDaemon::LoadConfig() {
  auto config = LoadAmConfig(config_path_, flags_);
  if (!config) {
    LOG_ERROR << "config: " << config.status().message();
    return kExitBadConfig;
  }
  if (Status st = ValidateAmConfig(*config); !st.ok()) {
    LOG_ERROR << ConfigPrefix() << st.message();
    return kExitBadConfig;
  }
  config_ = std::move(*config);
  (void)ApplyLogSettings(config_.log_level().empty() ? "info" : config_.log_level(),
                         config_.log_format().empty() ? "text" : config_.log_format());
  // The same certificate serves members, switches and operators and
  // identifies the AM to the switch agents it programs.
  auto security = AmTransportSecurity(config_);
  auto server_credentials = security ? MakeServerCredentials(*security) : security.status();
  auto switch_credentials = security ? MakeWatchedChannelCredentials(*security) : security.status();
  if (!server_credentials || !switch_credentials) {
    LOG_ERROR << ConfigPrefix()
              << (server_credentials ? switch_credentials.status() : server_credentials.status()).message();
    return kExitBadConfig;
  }
  security_ = std::move(*security);
  server_credentials_ = std::move(*server_credentials);
  switch_credentials_ = std::move(*switch_credentials);
  if (security_.insecure) {
    LOG_WARN << "insecure: plaintext gRPC; anyone who reaches " << config_.listen()
             << " can manage trees and register switches";
  }
  return 0;
}

int AmDaemon::LoadTopology() {
  running_.config = config_;
  if (Status st = ReadJsonFile(config_.topology_file(), &running_.topology); !st.ok()) {
    LOG_ERROR << "topology: " << st.ToString();
    return kExitBadConfig;
  }
  auto topo = TopologyFromProto(running_.topology);
  if (!topo) {
    LOG_ERROR << "topology: " << topo.status().WithContext(config_.topology_file()).ToString();
    return kExitBadConfig;
  }
  LOG_INFO << "incamd " << kVersion << ": topology " << config_.topology_file() << ": "
           << topo->switches.size() << " switches, " << topo->hosts.size() << " hosts, " << topo->links.size()
           << " links";
  topology_ = std::move(*topo);
  return 0;
}

int AmDaemon::OpenStore() {
  ApplyConfig(config_, &options_);
  options_.switch_credentials = switch_credentials_;
  state_file_ = StatePath(config_);
  if (!config_.has_state_path()) {
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
  auto store = Store::Open(state_file_);
  if (!store) {
    LOG_ERROR << "state: " << store.status().ToString();
    return store.status().code() == Code::kUnavailable ? kExitCannotServe : kExitBadConfig;
  }
  store_ = std::move(*store);
  LOG_INFO << "state: "
           << (state_file_.empty() ? "in memory only (state_path \"\"): a restart forgets every tree"
                                   : state_file_);
  return 0;
}

int AmDaemon::MakeJobCredentials() {
  // Job credentials: from job_secret_file, else a secret kept in the state
  // file (made at the first start). Needed only where members are
  // authorized (mTLS); in plaintext nothing is checked.
  if (security_.insecure) return 0;
  auto secret = !config_.job_secret_file().empty()
                    ? ReadSecretFile(config_.job_secret_file(), "job_secret_file")
                    : store_->JobSecret([] { return JobCredentials::NewSecretHex(); });
  auto made = secret ? JobCredentials::FromHex(*secret, config_.job_secret_file().empty()
                                                            ? "the state file's job secret"
                                                            : "job_secret_file " + config_.job_secret_file())
                     : secret.status();
  if (!made) {
    LOG_ERROR << "job credentials: " << made.status().message();
    return kExitBadConfig;
  }
  job_credentials_ = std::move(*made);
  LOG_INFO << "job credentials: JoinGroup needs one issued for its job (secret from "
           << (config_.job_secret_file().empty()
                   ? (state_file_.empty() ? std::string("memory: a restart invalidates issued ones")
                                          : "the state file")
                   : config_.job_secret_file())
           << ")";
  return 0;
}

int AmDaemon::BuildManager() {
  manager_ = std::make_unique<Manager>(options_, std::move(*topology_), std::move(store_));
  topology_.reset();
  if (config_.netconf().enabled()) {
    auto nc_options = NetconfClientOptionsFromConfig(config_);
    if (!nc_options.ok()) {
      LOG_ERROR << "config: " << nc_options.status().message();
      return kExitBadConfig;
    }
    auto netconf = NetconfSwitchClient::Create(*nc_options);
    if (!netconf.ok()) {
      LOG_ERROR << "config: " << netconf.status().message();
      return kExitBadConfig;
    }
    manager_->switch_clients().UseNetconf(std::move(*netconf));
  }
  if (Status st = manager_->Restore(); !st.ok()) {
    LOG_ERROR << "state: " << st.ToString();
    return kExitBadConfig;
  }
  return 0;
}

int AmDaemon::StartServer() {
  authorizer_ = std::make_unique<Authorizer>(/*enforce=*/!security_.insecure);
  service_ = std::make_unique<AmService>(manager_.get(), authorizer_.get(),
                                         job_credentials_ ? &*job_credentials_ : nullptr);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, server_credentials_, &port_);
  builder.RegisterService(service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(calls_.Factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    LOG_ERROR << "cannot listen on " << options_.listen;
    return kExitCannotServe;
  }
  return 0;
}

int AmDaemon::StartMetrics() {
  if (config_.metrics_listen().empty()) return 0;
  auto serving = MetricsServing(config_.metrics_listen(), config_.metrics_tls(), security_);
  Manager* manager = manager_.get();
  auto started = serving ? MetricsServer::Start(*serving, [manager] { return RenderAmMetrics(manager); })
                         : serving.status();
  if (!started.ok()) {
    LOG_ERROR << started.status().ToString();
    return kExitCannotServe;  // the destructor shuts the server down
  }
  metrics_ = std::move(*started);
  return 0;
}

int AmDaemon::Run() {
  NotifyReady("listening on " + options_.listen);
  int sig = 0;
  while ((sig = WaitForDaemonSignal()) == SIGHUP) {
    LOG_INFO << "SIGHUP: reloading the configuration";
    NotifyReloading();
    Manager* manager = manager_.get();
    ReloadAmConfig(config_path_, flags_, &running_, [manager](const v1::AmConfig& next) {
      AmOptions retuned;
      ApplyConfig(next, &retuned);
      manager->Retune(retuned);
    });
    NotifyReady("listening on " + options_.listen + " (configuration reloaded)");
  }
  NotifyStopping("shutting down");
  // Calls in flight finish: one programming or asking switches may take a
  // switch RPC timeout; one waiting for its group or following events is
  // answered by Stop() at once. Then the server stops without waiting for
  // idle clients to hang up.
  const auto grace =
      std::chrono::milliseconds(std::max<uint32_t>(options_.switch_rpc_timeout_ms + 500, 2000));
  LOG_INFO << SignalName(sig) << ": shutting down; calls in flight get up to " << grace.count() << " ms";
  metrics_.reset();
  manager_->Stop();  // waiting members get UNAVAILABLE, event streams end
  if (!calls_.WaitIdle(std::chrono::steady_clock::now() + grace)) {
    LOG_WARN << calls_.InFlight() << " calls still running after " << grace.count() << " ms: cancelled";
  }
  server_->Shutdown(std::chrono::system_clock::now());
  server_shut_down_ = true;
  LOG_INFO << "stopped";
  return 0;
}

}  // namespace inc::am
