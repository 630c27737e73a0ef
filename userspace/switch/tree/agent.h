// SPDX-License-Identifier: Apache-2.0
// The switch agent's state: the data path, the port table and the trees the
// AM asked for. The gRPC service and the AM client call into it; one mutex
// serialises every data-path operation.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "datapath/datapath.h"
#include "inc/v1/inc.pb.h"
#include "switch/config.h"
#include "switch/tree/translate.h"

namespace inc::sw {

class Agent {
 public:
  // Opens (or re-adopts) the data path and attaches XDP to every port.
  static Expected<std::unique_ptr<Agent>> Start(const v1::SwitchAgentConfig& config,
                                                std::vector<PortInfo> ports);
  ~Agent();

  const std::string& name() const { return config_.switch_name(); }

  // SwitchAgent service.
  Status GetCapabilities(v1::GetCapabilitiesResponse* out);
  Expected<bool> ConfigureTree(const v1::TreeConfig& tree);  // true if the data path changed
  Expected<bool> RemoveTree(uint32_t tree_id);               // true if it existed
  Expected<v1::SwitchStats> GetStats(uint32_t tree_id);
  Status Health(v1::HealthResponse* out);
  // The TreeConfig last applied per tree (the NETCONF running datastore;
  // trees re-adopted at start show once the AM re-sends them).
  std::map<uint16_t, v1::TreeConfig> ConfiguredTrees();

  // AM registration and heartbeats.
  v1::RegisterSwitchRequest BuildRegister(const std::string& agent_address);
  v1::SwitchHeartbeatRequest BuildHeartbeat();

  // Re-reads every port's link state; returns true if any port changed
  // (logged per port), so the caller can heartbeat at once.
  bool RefreshPorts();

  // The data path, for the routing agent's best-path table (its maps are
  // independent of the tree state this class serialises).
  const dp::Datapath& datapath() const { return *dp_; }
  // Adds the routing agent's unhealthy links to every heartbeat.
  void SetLinkReporter(std::function<std::vector<v1::ArnLinkState>()> reporter);

  // Shutdown: keep=true leaves programs attached and maps pinned for the next
  // agent; keep=false detaches and removes the pinned state.
  Status Stop(bool keep);

 private:
  Agent(v1::SwitchAgentConfig config, std::vector<PortInfo> ports, std::unique_ptr<dp::Datapath> datapath);
  void FillPortsLocked(google::protobuf::RepeatedPtrField<v1::Port>* out);
  std::vector<uint32_t> LiveTreeIdsLocked();
  PortTable PortTableLocked();

  const v1::SwitchAgentConfig config_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::vector<PortInfo> ports_;
  std::set<std::string> configured_ip_;  // ports whose IP the config fixes
  std::unique_ptr<dp::Datapath> dp_;
  // What the data path holds (read back at start, then kept in step).
  std::map<uint16_t, dp::TreeSpec> live_;
  // The last TreeConfig the AM sent per tree (absent for re-adopted trees
  // until the AM re-sends them).
  std::map<uint16_t, v1::TreeConfig> desired_;
  bool stopped_ = false;
  std::function<std::vector<v1::ArnLinkState>()> link_reporter_;
};

}  // namespace inc::sw
