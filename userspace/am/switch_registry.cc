// SPDX-License-Identifier: Apache-2.0
#include "am/switch_registry.h"

namespace inc::am {
namespace {

uint64_t MsSince(std::chrono::steady_clock::time_point t) {
  auto d = std::chrono::steady_clock::now() - t;
  return d.count() < 0 ? 0 : std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

void SwitchRegistry::Restore(const StoredSwitch& stored, Clock::time_point now) {
  Record& rec = switches_[stored.name];
  rec.name = stored.name;
  rec.agent_address = stored.agent_address;
  rec.caps.slot_capacity = stored.slot_capacity;
  rec.alive = true;
  rec.restored = true;
  rec.last_heartbeat = now;
}

SwitchRegistry::Registered SwitchRegistry::Register(const SwitchRegistration& reg) {
  Record& rec = switches_[reg.name];
  Registered r{rec.registered, rec.restored};
  rec.name = reg.name;
  rec.agent_address = reg.agent_address;
  rec.caps = reg.caps;
  rec.ports = reg.ports;
  rec.registered = true;
  rec.alive = true;
  rec.restored = false;
  rec.last_heartbeat = Clock::now();
  return r;
}

Expected<bool> SwitchRegistry::Heartbeat(const SwitchBeat& beat, EventLog* events) {
  auto it = switches_.find(beat.name);
  if (it == switches_.end() || !it->second.registered || !it->second.alive)
    return NotFound("switch " + beat.name + " is not registered");
  Record& rec = it->second;
  rec.last_heartbeat = Clock::now();
  bool changed = false;
  for (const auto& [pname, ps] : beat.ports) {
    auto cur = rec.ports.find(pname);
    if (cur == rec.ports.end() || cur->second.up != ps.up) {
      changed = true;
      events->Append(ps.up ? "port_up" : "port_down",
                     "switch " + rec.name + " port " + pname + (ps.up ? " is up" : " is down"), 0, rec.name);
    }
    rec.ports[pname] = ps;
  }
  if (beat.congested_ports != rec.congested_ports) {
    for (const auto& [port, sev] : beat.congested_ports)
      if (!rec.congested_ports.count(port) || rec.congested_ports.at(port) != sev)
        events->Append("link_congested",
                       "switch " + rec.name + " port " + port + " congested, severity " + std::to_string(sev),
                       0, rec.name);
    for (const auto& [port, sev] : rec.congested_ports)
      if (!beat.congested_ports.count(port))
        events->Append("link_uncongested", "switch " + rec.name + " port " + port + " is no longer congested",
                       0, rec.name);
    rec.congested_ports = beat.congested_ports;
    changed = true;
  }
  return changed;
}

std::vector<std::pair<std::string, std::string>> SwitchRegistry::ExpireSilent(uint32_t timeout_ms) {
  std::vector<std::pair<std::string, std::string>> lost;
  for (auto& [name, rec] : switches_) {
    if (!rec.alive) continue;
    const uint64_t silent = MsSince(rec.last_heartbeat);
    if (silent <= timeout_ms) continue;
    rec.alive = false;
    lost.emplace_back(
        name, rec.restored ? "switch " + name + " did not register within " + std::to_string(silent) +
                                 " ms of the AM's restart"
                           : "switch " + name + " missed heartbeats for " + std::to_string(silent) + " ms");
    rec.restored = false;
  }
  return lost;
}

const SwitchRegistry::Record* SwitchRegistry::Find(const std::string& name) const {
  auto it = switches_.find(name);
  return it == switches_.end() ? nullptr : &it->second;
}

std::string SwitchRegistry::AgentAddress(const std::string& name) const {
  const Record* rec = Find(name);
  return rec ? rec->agent_address : std::string();
}

Expected<PortState> SwitchRegistry::Port(const std::string& switch_name, const std::string& port) const {
  const Record* rec = Find(switch_name);
  if (!rec) return FailedPrecondition("switch " + switch_name + " is not registered");
  auto p = rec->ports.find(port);
  if (p == rec->ports.end())
    return FailedPrecondition("switch " + switch_name + " did not report port " + port);
  return p->second;
}

bool SwitchRegistry::PortUp(const std::string& switch_name, const std::string& port) const {
  const Record* rec = Find(switch_name);
  if (!rec || !rec->alive) return false;
  auto p = rec->ports.find(port);
  return p != rec->ports.end() && p->second.up;
}

bool SwitchRegistry::PortCongested(const std::string& switch_name, const std::string& port,
                                   uint32_t min_severity) const {
  if (min_severity == 0) return false;
  const Record* rec = Find(switch_name);
  if (!rec) return false;
  auto c = rec->congested_ports.find(port);
  return c != rec->congested_ports.end() && c->second >= min_severity;
}

std::map<std::string, SwitchView> SwitchRegistry::Views(const ResourcePool& pool) const {
  std::map<std::string, SwitchView> views;
  for (const auto& [name, rec] : switches_) {
    SwitchView v;
    v.name = name;
    v.registered = rec.registered;
    v.alive = rec.alive;
    v.caps = rec.caps;
    v.ports = rec.ports;
    pool.Describe(name, &v);
    views.emplace(name, std::move(v));
  }
  return views;
}

SwitchSummary SwitchRegistry::Summary(const std::string& name, const ResourcePool& pool) const {
  SwitchSummary s;
  s.name = name;
  const Record* rec = Find(name);
  if (!rec) return s;
  s.known = true;
  s.agent_address = rec->agent_address;
  // A switch known from the state store is not alive until it registers.
  s.alive = rec->alive && !rec->restored;
  s.caps = rec->caps;
  const SwitchResources* res = pool.Get(name);
  s.free_slots = res ? res->slots.free_total() : 0;
  for (const auto& [pname, p] : rec->ports) s.ports.push_back(p);
  s.last_heartbeat_ms_ago = MsSince(rec->last_heartbeat);
  return s;
}

std::vector<SwitchTarget> SwitchRegistry::AliveAgents() const {
  std::vector<SwitchTarget> out;
  for (const auto& [name, rec] : switches_)
    if (rec.alive) out.push_back({name, rec.agent_address});
  return out;
}

std::vector<std::string> SwitchRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, rec] : switches_) out.push_back(name);
  return out;
}

}  // namespace inc::am
