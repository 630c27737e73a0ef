// SPDX-License-Identifier: Apache-2.0
#include "switch/tree/agent.h"

#include <google/protobuf/util/message_differencer.h>

#include <sstream>

#include "common/log.h"

namespace inc::sw {
namespace {

std::string Join(const std::vector<uint32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); i++) out << (i ? "," : "") << ids[i];
  return ids.empty() ? "none" : out.str();
}

const char* RoleName(uint8_t role) {
  switch (role) {
    case INC_ROLE_SINGLE: return "SINGLE";
    case INC_ROLE_LEAF: return "LEAF";
    case INC_ROLE_ROOT: return "ROOT";
  }
  return "?";
}

std::string Describe(const dp::TreeSpec& s) {
  std::ostringstream out;
  out << "tree " << s.tree_id << " role " << RoleName(s.role) << ", " << s.children.size() << " children (";
  for (size_t i = 0; i < s.children.size(); i++) {
    out << (i ? " " : "") << i << ":" << s.children[i].port << "/" << s.children[i].peer_ip.ToString()
        << "/qpn" << s.children[i].switch_qpn;
  }
  out << "), slots [" << s.slot_base << ", " << s.slot_base + s.pool_size << "), " << s.max_elems
      << " elems/packet";
  if (s.parent) out << ", parent " << s.parent->port << "/" << s.parent->peer_ip.ToString();
  return out.str();
}

}  // namespace

Agent::Agent(v1::SwitchAgentConfig config, std::vector<PortInfo> ports,
             std::unique_ptr<dp::Datapath> datapath)
    : config_(std::move(config)), ports_(std::move(ports)), dp_(std::move(datapath)) {
  for (const auto& p : config_.ports()) {
    if (!p.ip().empty()) configured_ip_.insert(p.name());
  }
}

Agent::~Agent() = default;

Expected<std::unique_ptr<Agent>> Agent::Start(const v1::SwitchAgentConfig& config,
                                              std::vector<PortInfo> ports) {
  dp::Options options;
  options.switch_name = config.switch_name();
  options.pin_root = config.pin_root();
  options.slot_capacity = config.slot_capacity();
  options.verify_icrc = config.icrc_verify();
  options.generic_xdp = config.xdp_mode() == "generic";
  LOG_INFO << "opening data path: pins at " << config.pin_root() << "/" << config.switch_name() << ", "
           << config.slot_capacity() << " slots, ICRC verify " << (config.icrc_verify() ? "on" : "off")
           << ", XDP mode " << config.xdp_mode();
  auto datapath = dp::Datapath::Open(options);
  if (!datapath.ok()) return datapath.status().WithContext("opening the data path");
  std::unique_ptr<Agent> agent(new Agent(config, std::move(ports), std::move(*datapath)));
  dp::Datapath& d = *agent->dp_;

  auto trees = d.ListTrees();
  if (!trees.ok()) {
    // Pinned maps we cannot read are not state to keep serving on.
    if (!d.adopted()) (void)d.Destroy();
    return trees.status().WithContext("reading the trees map");
  }
  std::vector<uint32_t> ids;
  for (auto& spec : *trees) {
    ids.push_back(spec.tree_id);
    agent->live_[spec.tree_id] = spec;
  }
  if (d.adopted()) {
    LOG_INFO << "re-adopted the pinned data path of a previous agent; live trees: " << Join(ids);
    for (const auto& [id, spec] : agent->live_) LOG_INFO << "live " << Describe(spec);
  } else {
    LOG_INFO << "loaded a fresh data path (nothing pinned for switch " << config.switch_name() << ")";
  }

  for (const auto& port : agent->ports_) {
    Status st = d.AttachPort(port.name);
    if (!st.ok()) {
      LOG_ERROR << "port " << port.name << ": attaching XDP failed: " << st.ToString();
      // A fresh data path is ours to clean up; an adopted one still carries
      // live trees on the other ports, so it stays for the next attempt.
      if (!d.adopted()) (void)d.Destroy();
      return st.WithContext("attaching XDP (" + config.xdp_mode() + ") to port " + port.name);
    }
    LOG_INFO << "port " << port.name << " (ifindex " << port.ifindex << ", " << port.mac.ToString() << ", "
             << port.ip.ToString() << ", mtu " << port.mtu << ", " << (port.up ? "up" : "DOWN")
             << "): XDP attached (" << config.xdp_mode() << ")";
    if (port.is_veth && config.xdp_mode() == "native") {
      LOG_WARN
          << "port " << port.name
          << " is a veth: frames this switch sends out of it (XDP_TX/XDP_REDIRECT) reach the peer only if "
             "the peer veth has an XDP program or GRO enabled (ethtool -K <peer> gro on); otherwise they "
             "are dropped silently";
    }
  }
  const auto caps = d.capabilities();
  LOG_INFO << "data path ready: " << caps.slot_capacity << " slots (" << d.FreeSlots() << " free), max "
           << caps.max_trees << " trees, " << caps.max_children << " children, " << caps.max_elems_per_packet
           << " elems/packet";
  return agent;
}

PortTable Agent::PortTableLocked() {
  PortTable table;
  std::map<std::string, bool> attached;
  for (const auto& p : dp_->Ports()) attached[p.name] = p.attached;
  for (const auto& p : ports_) table[p.name] = PortFacts{attached[p.name], p.up};
  return table;
}

void Agent::FillPortsLocked(google::protobuf::RepeatedPtrField<v1::Port>* out) {
  std::map<std::string, bool> attached;
  for (const auto& p : dp_->Ports()) attached[p.name] = p.attached;
  for (const auto& p : ports_) {
    auto* port = out->Add();
    port->set_name(p.name);
    port->set_ifindex(p.ifindex);
    port->set_mac(p.mac.ToString());
    port->set_ip(p.ip.ToString());
    port->set_mtu(p.mtu);
    port->set_up(p.up);
    port->set_xdp_attached(attached[p.name]);
    port->set_xdp_mode(config_.xdp_mode());
  }
}

std::vector<uint32_t> Agent::LiveTreeIdsLocked() {
  std::vector<uint32_t> ids;
  for (const auto& [id, spec] : live_) ids.push_back(id);
  return ids;
}

Status Agent::GetCapabilities(v1::GetCapabilitiesResponse* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dp_) return Unavailable("switch agent " + name() + " is shutting down");
  out->set_switch_name(name());
  FillCapabilities(dp_->capabilities(), dp_->FreeSlots(), out->mutable_capabilities());
  FillPortsLocked(out->mutable_ports());
  return Status::Ok();
}

Expected<bool> Agent::ConfigureTree(const v1::TreeConfig& tree) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dp_) return Unavailable("switch agent " + name() + " is shutting down");
  const uint16_t id = static_cast<uint16_t>(tree.tree_id());
  auto known = desired_.find(id);
  if (known != desired_.end() && live_.count(id) &&
      google::protobuf::util::MessageDifferencer::Equals(known->second, tree)) {
    LOG_DEBUG << "tree " << id << ": same config as programmed (generation " << tree.generation()
              << "), nothing to do";
    return false;
  }
  const auto caps = dp_->capabilities();
  auto spec = TreeConfigToSpec(tree, PortTableLocked(), caps);
  if (!spec.ok()) {
    LOG_WARN << "ConfigureTree rejected: " << spec.status().ToString();
    return spec.status();
  }
  Status placed = CheckPlacement(*spec, live_, caps);
  if (!placed.ok()) {
    LOG_WARN << "ConfigureTree rejected: " << placed.ToString();
    return placed;
  }
  auto live = live_.find(id);
  if (live != live_.end() && live->second == *spec) {
    // E.g. the AM re-sending a tree this agent re-adopted after a restart.
    desired_[id] = tree;
    LOG_INFO << "tree " << id << ": already programmed as requested (generation " << tree.generation()
             << "), no change";
    return false;
  }
  Status st = dp_->ConfigureTree(*spec);
  if (!st.ok()) {
    LOG_WARN << "ConfigureTree tree " << id << " failed in the data path: " << st.ToString();
    return st.WithContext("tree " + std::to_string(id));
  }
  LOG_INFO_F({"tree", id}, {"job", tree.job_id()}, {"switch", name()})
      << (live != live_.end() ? "reconfigured " : "configured ") << Describe(*spec) << " (job '"
      << tree.job_id() << "', generation " << tree.generation() << ")";
  live_[id] = *spec;
  desired_[id] = tree;
  return true;
}

Expected<bool> Agent::RemoveTree(uint32_t tree_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dp_) return Unavailable("switch agent " + name() + " is shutting down");
  if (tree_id == 0 || tree_id >= INC_MAX_TREES) {
    return InvalidArgument("tree_id " + std::to_string(tree_id) + " is out of range 1.." +
                           std::to_string(INC_MAX_TREES - 1));
  }
  const uint16_t id = static_cast<uint16_t>(tree_id);
  Status st = dp_->RemoveTree(id);
  if (st.code() == Code::kNotFound) {
    live_.erase(id);
    desired_.erase(id);
    return NotFound("tree " + std::to_string(id) + " is not configured on switch " + name());
  }
  if (!st.ok()) {
    LOG_WARN << "RemoveTree " << id << " failed: " << st.ToString();
    return st.WithContext("removing tree " + std::to_string(id));
  }
  auto known = desired_.find(id);
  const std::string job = known != desired_.end() ? known->second.job_id() : "";
  live_.erase(id);
  desired_.erase(id);
  LOG_INFO_F({"tree", id}, {"job", job}, {"switch", name()})
      << "RemoveTree " << id << ": done, tree " << id << (job.empty() ? "" : " of job '" + job + "'")
      << " removed from the data path";
  return true;
}

Expected<v1::SwitchStats> Agent::GetStats(uint32_t tree_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dp_) return Unavailable("switch agent " + name() + " is shutting down");
  if (tree_id >= INC_MAX_TREES) {
    return InvalidArgument("tree_id " + std::to_string(tree_id) + " is out of range 0.." +
                           std::to_string(INC_MAX_TREES - 1) + " (0 = all)");
  }
  if (tree_id != 0 && !live_.count(static_cast<uint16_t>(tree_id))) {
    return NotFound("tree " + std::to_string(tree_id) + " is not configured on switch " + name());
  }
  auto stats = dp_->ReadStats();
  if (!stats.ok()) return stats.status().WithContext("reading counters");
  v1::SwitchStats out;
  out.set_switch_name(name());
  FillStats(*stats, static_cast<uint16_t>(tree_id), live_, &out);
  return out;
}

std::map<uint16_t, v1::TreeConfig> Agent::ConfiguredTrees() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint16_t, v1::TreeConfig> out;
  for (const auto& [id, config] : desired_) {
    if (live_.count(id)) out.emplace(id, config);
  }
  return out;
}

Status Agent::Health(v1::HealthResponse* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dp_) return Unavailable("switch agent " + name() + " is shutting down");
  out->set_switch_name(name());
  out->set_serving(!stopped_);
  out->set_uptime_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_)
          .count()));
  // Read back from the maps rather than from memory: Health is how an
  // operator checks what the data path really holds.
  auto trees = dp_->ListTrees();
  if (trees.ok()) {
    for (const auto& t : *trees) out->add_tree_ids(t.tree_id);
  } else {
    LOG_WARN << "Health: reading the trees map failed: " << trees.status().ToString();
    for (uint32_t id : LiveTreeIdsLocked()) out->add_tree_ids(id);
  }
  FillPortsLocked(out->mutable_ports());
  return Status::Ok();
}

v1::RegisterSwitchRequest Agent::BuildRegister(const std::string& agent_address) {
  std::lock_guard<std::mutex> lock(mu_);
  v1::RegisterSwitchRequest req;
  req.set_switch_name(name());
  req.set_agent_address(agent_address);
  if (!dp_) return req;
  FillCapabilities(dp_->capabilities(), dp_->FreeSlots(), req.mutable_capabilities());
  FillPortsLocked(req.mutable_ports());
  for (uint32_t id : LiveTreeIdsLocked()) req.add_live_tree_ids(id);
  return req;
}

void Agent::SetLinkReporter(std::function<std::vector<v1::ArnLinkState>()> reporter) {
  std::lock_guard<std::mutex> lock(mu_);
  link_reporter_ = std::move(reporter);
}

v1::SwitchHeartbeatRequest Agent::BuildHeartbeat() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::SwitchHeartbeatRequest req;
  req.set_switch_name(name());
  if (!dp_) return req;
  FillPortsLocked(req.mutable_ports());
  req.set_free_slots(dp_->FreeSlots());
  for (uint32_t id : LiveTreeIdsLocked()) req.add_live_tree_ids(id);
  if (link_reporter_)
    for (auto& l : link_reporter_()) *req.add_arn_links() = std::move(l);
  return req;
}

bool Agent::RefreshPorts() {
  std::lock_guard<std::mutex> lock(mu_);
  bool changed = false;
  for (auto& port : ports_) {
    auto now = ReadPort(port.name);
    const bool up = now.ok() && now->up;
    if (up != port.up) {
      changed = true;
      if (up) {
        LOG_INFO << "port " << port.name << ": link up";
      } else {
        LOG_WARN << "port " << port.name << ": link down"
                 << (now.ok() ? "" : " (" + now.status().message() + ")");
      }
      port.up = up;
    }
    if (now.ok() && now->ifindex != port.ifindex && dp_) {
      // The interface was deleted and created again: its XDP program and
      // devmap entry went with the old ifindex.
      LOG_WARN << "port " << port.name << ": interface re-created (ifindex " << port.ifindex << " -> "
               << now->ifindex << "), attaching XDP again";
      (void)dp_->DetachPort(port.name);
      Status st = dp_->AttachPort(port.name);
      if (!st.ok()) {
        LOG_ERROR << "port " << port.name << ": re-attaching XDP failed: " << st.ToString();
      }
      port.ifindex = now->ifindex;
      port.mac = now->mac;
      if (!configured_ip_.count(port.name)) port.ip = now->ip;
      changed = true;
    }
    if (now.ok() && now->mtu != port.mtu) {
      LOG_INFO << "port " << port.name << ": mtu " << port.mtu << " -> " << now->mtu;
      port.mtu = now->mtu;
      changed = true;
    }
  }
  return changed;
}

Status Agent::Stop(bool keep) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return Status::Ok();
  stopped_ = true;
  if (keep) {
    LOG_INFO << "keeping the data path: XDP stays attached and maps stay pinned at " << config_.pin_root()
             << "/" << name() << " for the next agent (live trees: " << Join(LiveTreeIdsLocked()) << ")";
    dp_.reset();
    return Status::Ok();
  }
  LOG_INFO << "detaching XDP from every port and removing " << config_.pin_root() << "/" << name();
  Status st = dp_->Destroy();
  dp_.reset();
  if (!st.ok()) {
    LOG_ERROR << "removing the data path failed: " << st.ToString();
  }
  return st;
}

}  // namespace inc::sw
