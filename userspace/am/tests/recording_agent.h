// SPDX-License-Identifier: Apache-2.0
// Test double of the switch side for AM tests and the benchmark: an
// in-process SwitchAgent gRPC server that records ConfigureTree/RemoveTree,
// plus generators for leaf-spine topologies and matching registrations.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inc/v1/inc.grpc.pb.h"

namespace inc::am::testing {

class RecordingAgent final : public v1::SwitchAgent::Service {
 public:
  explicit RecordingAgent(std::string name) : name_(std::move(name)) {}
  ~RecordingAgent() override;
  // Serves on 127.0.0.1 with an ephemeral port.
  void Start();
  void Shutdown();
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& name() const { return name_; }

  // ConfigureTree answers this status (OK by default).
  void FailConfigure(grpc::Status status);

  std::vector<v1::TreeConfig> configures();
  std::vector<uint32_t> removes();
  std::map<uint32_t, v1::TreeConfig> trees();  // what the switch holds now

  grpc::Status GetCapabilities(grpc::ServerContext*, const v1::GetCapabilitiesRequest*,
                               v1::GetCapabilitiesResponse*) override;
  grpc::Status ConfigureTree(grpc::ServerContext*, const v1::ConfigureTreeRequest*,
                             v1::ConfigureTreeResponse*) override;
  grpc::Status RemoveTree(grpc::ServerContext*, const v1::RemoveTreeRequest*,
                          v1::RemoveTreeResponse*) override;
  grpc::Status GetStats(grpc::ServerContext*, const v1::GetStatsRequest*, v1::GetStatsResponse*) override;
  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*, v1::HealthResponse*) override;

 private:
  std::string name_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  grpc::Status configure_status_ = grpc::Status::OK;
  std::vector<v1::TreeConfig> configures_;
  std::vector<uint32_t> removes_;
  std::map<uint32_t, v1::TreeConfig> trees_;
};

// leaves leaf00.., spines spine0.., hosts_per_leaf hosts hLL_i per leaf (port
// "hI" on the leaf), every leaf linked to every spine (leaf port "upS", spine
// port "dnLL").
v1::TopologyFile MakeFabric(int leaves, int spines, int hosts_per_leaf);

// A registration for `name` with every port the topology gives it (up, MTU
// 1500, generated MAC/IP), full capabilities and `slot_capacity` slots.
v1::RegisterSwitchRequest MakeRegistration(const v1::TopologyFile& topo, const std::string& name,
                                           const std::string& agent_address, uint32_t slot_capacity = 4096);

// A member of `host` for JoinGroup (the topology supplies its IP and MAC).
v1::JoinGroupRequest MakeJoin(const std::string& job, uint32_t rank, uint32_t world, const std::string& host,
                              uint32_t timeout_ms = 20000);

}  // namespace inc::am::testing
