// incamd: the aggregation manager daemon.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "am/manager.h"
#include "am/service.h"
#include "am/topology.h"
#include "common/log.h"

int main(int argc, char** argv) {
  CLI::App app{"incamd: incin aggregation manager (topology, tree building, resources, heartbeats)"};
  std::string config_path, listen, topology_path, log_level;
  app.add_option("--config", config_path, "AmConfig JSON file (docs/operations.md)");
  app.add_option("--listen", listen, "gRPC listen address (default 0.0.0.0:50051)");
  app.add_option("--topology", topology_path, "TopologyFile JSON file");
  app.add_option("--log-level", log_level, "debug|info|warn|error (default info)");
  CLI11_PARSE(app, argc, argv);

  inc::SetLogComponent("incamd");
  inc::v1::AmConfig config;
  if (!config_path.empty()) {
    inc::Status s = inc::am::ReadJsonFile(config_path, &config);
    if (!s.ok()) {
      LOG_ERROR << "config: " << s.ToString();
      return 2;
    }
  }
  // A relative topology_file in the config is relative to the config file.
  if (!config_path.empty() && !config.topology_file().empty() && config.topology_file()[0] != '/') {
    auto slash = config_path.rfind('/');
    if (slash != std::string::npos)
      config.set_topology_file(config_path.substr(0, slash + 1) + config.topology_file());
  }
  if (!listen.empty()) config.set_listen(listen);
  if (!topology_path.empty()) config.set_topology_file(topology_path);
  if (!log_level.empty()) config.set_log_level(log_level);
  if (!config.log_level().empty()) {
    inc::LogLevel level;
    if (!inc::ParseLogLevel(config.log_level(), &level)) {
      LOG_ERROR << "log level \"" << config.log_level() << "\" is not debug|info|warn|error";
      return 2;
    }
    inc::SetLogLevel(level);
  }
  if (config.move_on_congestion_severity() > 3) {
    LOG_ERROR << "config: move_on_congestion_severity " << config.move_on_congestion_severity()
              << " is not in 0..3 (0 = never move trees off congested links)";
    return 2;
  }
  if (config.topology_file().empty()) {
    LOG_ERROR << "no topology: give --topology FILE or topology_file in the config";
    return 2;
  }
  auto topo = inc::am::LoadTopologyFile(config.topology_file());
  if (!topo) {
    LOG_ERROR << "topology: " << topo.status().ToString();
    return 2;
  }
  LOG_INFO << "topology " << config.topology_file() << ": " << topo->switches.size() << " switches, "
           << topo->hosts.size() << " hosts, " << topo->links.size() << " links";

  inc::am::AmOptions options;
  inc::am::ApplyConfig(config, &options);

  // SIGTERM/SIGINT are taken by a waiting thread, not by async handlers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  inc::am::Manager manager(options, std::move(*topo));
  inc::am::AmService service(&manager);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    LOG_ERROR << "cannot listen on " << options.listen;
    return 1;
  }
  manager.Start();
  LOG_INFO << "listening on " << options.listen << " (port " << port << "); member heartbeat timeout "
           << options.member_heartbeat_timeout_ms << " ms, switch heartbeat timeout "
           << options.switch_heartbeat_timeout_ms << " ms";

  int sig = 0;
  sigwait(&signals, &sig);
  LOG_INFO << "signal " << sig << ": shutting down";
  manager.Stop();  // wakes waiting members and event watchers
  // In-flight calls (JoinGroup waiters, event streams) were ended by Stop();
  // anything left is cancelled after a short grace period.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  LOG_INFO << "stopped";
  return 0;
}
