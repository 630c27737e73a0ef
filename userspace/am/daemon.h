// SPDX-License-Identifier: Apache-2.0
// incamd's composition root. AmDaemon builds the parts in the order each
// needs the one before (config and credentials, topology, state store, job
// credentials, manager with its NETCONF edge, gRPC service, metrics), serves
// until a stop signal (reloading on SIGHUP) and takes them down in reverse.
// main.cc only reads the command line (and runs --check-config), so the
// daemon's shape matches incswitchd's (switch/daemon.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "am/config.h"
#include "am/manager.h"
#include "am/service.h"
#include "common/authz.h"
#include "common/daemon.h"
#include "common/job_credential.h"
#include "common/metrics.h"
#include "common/tls.h"

namespace inc::am {

// Exit codes (docs/operations.md).
constexpr int kExitCannotServe = 1;
constexpr int kExitBadConfig = 2;  // command line, config or topology

class AmDaemon {
 public:
  // Builds and starts every part. On a failure the reason is logged, what
  // was built is taken down again, *exit_code says how incamd exits and the
  // result is null.
  static std::unique_ptr<AmDaemon> Start(std::string config_path, AmFlags flags, int* exit_code);
  ~AmDaemon();
  AmDaemon(const AmDaemon&) = delete;
  AmDaemon& operator=(const AmDaemon&) = delete;

  // Serves until SIGTERM or SIGINT, reloading on SIGHUP, then stops the
  // manager and the server. The process exit code.
  int Run();

 private:
  AmDaemon(std::string config_path, AmFlags flags)
      : config_path_(std::move(config_path)), flags_(std::move(flags)) {}
  // Each step returns 0 or the exit code of its failure (already logged).
  int LoadConfig();
  int LoadTopology();
  int OpenStore();
  int MakeJobCredentials();
  int BuildManager();
  int StartServer();
  int StartMetrics();
  // "config <path>: " when there is a config file, so errors name it.
  std::string ConfigPrefix() const;

  // Members in construction order: destruction runs in reverse, so the
  // metrics endpoint and the server go before the service and the manager
  // they call into.
  const std::string config_path_;  // re-read on SIGHUP; empty = flags only
  const AmFlags flags_;            // applied again on every reload
  v1::AmConfig config_;
  TransportSecurity security_;
  std::shared_ptr<grpc::ServerCredentials> server_credentials_;
  std::shared_ptr<grpc::ChannelCredentials> switch_credentials_;
  RunningAm running_;
  std::optional<Topology> topology_;  // moved into the manager
  AmOptions options_;
  std::string state_file_;
  std::unique_ptr<Store> store_;  // moved into the manager
  std::optional<JobCredentials> job_credentials_;
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<AmService> service_;
  int port_ = 0;
  CallCounter calls_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  bool server_shut_down_ = false;
};

}  // namespace inc::am
