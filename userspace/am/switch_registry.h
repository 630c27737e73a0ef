// SPDX-License-Identifier: Apache-2.0
// The switches the AM knows: where each agent listens, its capabilities and
// ports as last reported, ARN congestion, and whether its heartbeats arrive.
// Not thread-safe: the manager calls it under its own lock, because switch
// facts and trees change together.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "am/api.h"
#include "am/events.h"
#include "am/model.h"
#include "am/resources.h"
#include "am/store.h"
#include "common/status.h"

namespace inc::am {

class SwitchRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  struct Record {
    std::string name;
    std::string agent_address;
    Caps caps;
    std::map<std::string, PortState> ports;
    std::map<std::string, uint32_t> congested_ports;  // port -> ARN severity, from heartbeats
    bool registered = false;
    bool alive = false;
    // Known from the store, not registered since the AM started: counted
    // alive so that it is declared lost (and its trees handled) when it
    // does not register within the switch heartbeat timeout.
    bool restored = false;
    Clock::time_point last_heartbeat;
  };

  // A switch from the state store, alive until the heartbeat timeout.
  void Restore(const StoredSwitch& stored, Clock::time_point now);

  struct Registered {
    bool again = false;          // it had registered before
    bool after_restart = false;  // it was known from the state store
  };
  // Takes the registration's facts (a switch may register any number of times).
  Registered Register(const SwitchRegistration& reg);

  // A heartbeat's ports and congestion; logs port and congestion changes to
  // `events`. NOT_FOUND when the switch must register (again) first: unknown,
  // or declared lost. True when a port or its congestion changed.
  Expected<bool> Heartbeat(const SwitchBeat& beat, EventLog* events);

  // Switches alive until now whose heartbeats stopped for longer than
  // timeout_ms, now marked lost, each with why.
  std::vector<std::pair<std::string, std::string>> ExpireSilent(uint32_t timeout_ms);

  const Record* Find(const std::string& name) const;
  // The agent's address; empty when the switch never registered.
  std::string AgentAddress(const std::string& name) const;
  // A port the switch reported; FAILED_PRECONDITION naming what is missing.
  Expected<PortState> Port(const std::string& switch_name, const std::string& port) const;
  bool PortUp(const std::string& switch_name, const std::string& port) const;
  // Congested at `min_severity` or worse (0: never).
  bool PortCongested(const std::string& switch_name, const std::string& port, uint32_t min_severity) const;

  // What the tree builder knows of every switch.
  std::map<std::string, SwitchView> Views(const ResourcePool& pool) const;
  // Operators' view (tree ids are the manager's to fill in).
  SwitchSummary Summary(const std::string& name, const ResourcePool& pool) const;
  std::vector<SwitchTarget> AliveAgents() const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, Record> switches_;
};

}  // namespace inc::am
