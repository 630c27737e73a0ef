// SPDX-License-Identifier: Apache-2.0
// incamd --check-config: a whole site's configs checked together (config.h,
// CheckAmSite). Apart from config.cc so that the config parsers (which the
// fuzzers link) do not pull in the NETCONF client.
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "am/config.h"
#include "am/netconf_client.h"
#include "am/topology.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"

namespace inc::am {

namespace {

// Every port the topology gives a switch, with what uses it.
std::map<std::string, std::string> TopologyPorts(const Topology& topo, const std::string& sw) {
  std::map<std::string, std::string> ports;
  for (const auto& [name, h] : topo.hosts)
    if (h.switch_name == sw) ports[h.switch_port] = "host " + name;
  for (const TopoLink& l : topo.links) {
    if (l.a == sw) ports[l.a_port] = "the link to " + l.b;
    if (l.b == sw) ports[l.b_port] = "the link to " + l.a;
  }
  return ports;
}

// A readable file, or a note naming the field that gives it.
void NoteUnreadable(const std::string& path, const std::string& field, std::vector<std::string>* notes) {
  if (!path.empty() && access(path.c_str(), R_OK) != 0)
    notes->push_back(field + " " + path + " cannot be read on this host (start would fail here)");
}

Status CheckSwitchConfig(const std::string& path, const v1::AmConfig& am, const Topology& topo,
                         std::vector<std::string>* notes) {
  v1::SwitchAgentConfig sw;
  INC_RETURN_IF_ERROR(ReadJsonFile(path, &sw));
  const std::string where = "switch config " + path + ": ";
  if (sw.switch_name().empty()) return InvalidArgument(where + "switch_name is not set");
  if (!topo.switches.count(sw.switch_name())) {
    std::string known;
    for (const auto& [name, s] : topo.switches) known += (known.empty() ? "" : ", ") + name;
    return InvalidArgument(where + "switch_name " + sw.switch_name() + " is not a switch of the topology " +
                           am.topology_file() + " (" + known + ")");
  }
  std::map<std::string, bool> configured;
  for (const auto& p : sw.ports()) configured[p.name()] = true;
  for (const auto& [port, user] : TopologyPorts(topo, sw.switch_name()))
    if (!configured.count(port))
      return InvalidArgument(where + "the topology " + am.topology_file() + " puts " + user + " on port " +
                             port + " of switch " + sw.switch_name() + ", which is not in its ports");
  for (const auto& p : sw.ports())
    if (!topo.PortUsed(sw.switch_name(), p.name()))
      notes->push_back(where + "port " + p.name() +
                       " is in no host or link of the topology (unused by trees)");
  const bool am_insecure = am.insecure();
  if (sw.insecure() != am_insecure)
    return InvalidArgument(where +
                           (sw.insecure() ? "insecure is set but the AM uses TLS"
                                          : "the switch uses TLS but the AM is insecure (plaintext)") +
                           ": the two cannot talk");
  if (sw.am_address().empty()) {
    notes->push_back(where + "no am_address: the switch runs standalone, the AM cannot use it");
  } else if (sw.am_address() != EffectiveAmConfig(am).listen()) {
    notes->push_back(where + "am_address " + sw.am_address() + " is not the AM's listen address " +
                     EffectiveAmConfig(am).listen() + " (fine if it reaches the AM by another name)");
  }
  if (!sw.metrics_listen().empty() && sw.metrics_listen() == sw.listen())
    return InvalidArgument(where + "metrics_listen " + sw.metrics_listen() +
                           " is the gRPC listen address too");
  return Status::Ok();
}

}  // namespace

Status CheckAmSite(const v1::AmConfig& config, const std::vector<std::string>& switch_configs,
                   Topology* topology, std::vector<std::string>* notes) {
  INC_RETURN_IF_ERROR(ValidateAmConfig(config));
  auto security = AmTransportSecurity(config);
  if (!security) return security.status();
  if (!security->insecure) {
    NoteUnreadable(config.tls().cert(), "tls.cert", notes);
    NoteUnreadable(config.tls().key(), "tls.key", notes);
    NoteUnreadable(config.tls().ca(), "tls.ca", notes);
  }
  if (!config.metrics_listen().empty() && config.metrics_listen() == EffectiveAmConfig(config).listen())
    return InvalidArgument("metrics_listen " + config.metrics_listen() + " is the gRPC listen address too");
  if (config.netconf().enabled()) {
    auto nc = NetconfClientOptionsFromConfig(config);
    if (!nc) return nc.status();
    NoteUnreadable(nc->private_key, "netconf.private_key", notes);
  }
  v1::TopologyFile file;
  INC_RETURN_IF_ERROR(ReadJsonFile(config.topology_file(), &file));
  auto topo = TopologyFromProto(file);
  if (!topo) return topo.status().WithContext("topology " + config.topology_file());
  for (const std::string& path : switch_configs)
    INC_RETURN_IF_ERROR(CheckSwitchConfig(path, config, *topo, notes));
  *topology = std::move(*topo);
  return Status::Ok();
}

}  // namespace inc::am
