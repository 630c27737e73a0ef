// SPDX-License-Identifier: Apache-2.0
#include "switch/metrics.h"

#include "common/metrics.h"

namespace inc::sw {
namespace {

// Counters every tree and every member has (v1::Counters).
struct CounterField {
  const char* suffix;
  const char* help;
  uint64_t (*get)(const v1::Counters&);
};
const CounterField kCounterFields[] = {
    {"rx_packets_total", "INC frames received", [](const v1::Counters& c) { return c.rx_packets(); }},
    {"rx_bytes_total", "INC bytes received", [](const v1::Counters& c) { return c.rx_bytes(); }},
    {"tx_packets_total", "INC frames sent", [](const v1::Counters& c) { return c.tx_packets(); }},
    {"tx_bytes_total", "INC bytes sent", [](const v1::Counters& c) { return c.tx_bytes(); }},
    {"completions_total", "messages completed", [](const v1::Counters& c) { return c.completions(); }},
    {"retransmissions_total", "retransmitted contributions received",
     [](const v1::Counters& c) { return c.retransmissions(); }},
    {"drops_total", "frames dropped", [](const v1::Counters& c) { return c.drops(); }},
};

}  // namespace

std::string RenderSwitchMetrics(const v1::SwitchStats& stats,
                                const v1::GetCapabilitiesResponse& capabilities) {
  PrometheusText t;
  const std::string& sw = stats.switch_name();
  t.Family("incin_switch_up", "gauge", "1 while the switch agent serves.");
  t.Sample("incin_switch_up", {{"switch", sw}}, 1);
  WriteBuildInfo("incswitchd", &t);

  // The data path's global counters, one family each (enum inc_stat names).
  for (const auto& [name, value] : stats.global()) {
    const std::string metric = "incin_switch_" + name + "_total";
    t.Family(metric, "counter", "Data path counter " + name + " of the whole switch.");
    t.Sample(metric, {{"switch", sw}}, static_cast<double>(value));
  }
  t.Family("incin_switch_dropped_frames_total", "counter", "Frames the data path dropped, by reason.");
  for (const v1::DropCounter& d : stats.drops())
    t.Sample("incin_switch_dropped_frames_total", {{"switch", sw}, {"reason", d.reason()}},
             static_cast<double>(d.packets()));

  t.Family("incin_switch_trees", "gauge", "Aggregation trees the switch holds.");
  t.Sample("incin_switch_trees", {{"switch", sw}}, stats.trees_size());
  for (const CounterField& f : kCounterFields) {
    const std::string metric = std::string("incin_tree_") + f.suffix;
    t.Family(metric, "counter", std::string("Per tree on this switch: ") + f.help + ".");
    for (const v1::TreeCounters& tree : stats.trees())
      t.Sample(metric, {{"switch", sw}, {"tree", std::to_string(tree.tree_id())}},
               static_cast<double>(f.get(tree.counters())));
  }
  for (const CounterField& f : kCounterFields) {
    const std::string metric = std::string("incin_member_") + f.suffix;
    t.Family(metric, "counter", std::string("Per child (member or child switch) of a tree: ") + f.help + ".");
    for (const v1::MemberCounters& m : stats.members())
      t.Sample(metric,
               {{"switch", sw},
                {"tree", std::to_string(m.tree_id())},
                {"member", std::to_string(m.rank())},
                {"qpn", std::to_string(m.switch_qpn())}},
               static_cast<double>(f.get(m.counters())));
  }

  t.Family("incin_port_up", "gauge", "1 if the port's link is up.");
  for (const v1::Port& p : capabilities.ports())
    t.Sample("incin_port_up", {{"switch", sw}, {"port", p.name()}}, p.up());
  t.Family("incin_port_xdp_attached", "gauge", "1 if the INC program is attached to the port.");
  for (const v1::Port& p : capabilities.ports())
    t.Sample("incin_port_xdp_attached", {{"switch", sw}, {"port", p.name()}, {"mode", p.xdp_mode()}},
             p.xdp_attached());
  t.Family("incin_port_mtu_bytes", "gauge", "The port's MTU.");
  for (const v1::Port& p : capabilities.ports())
    t.Sample("incin_port_mtu_bytes", {{"switch", sw}, {"port", p.name()}}, p.mtu());
  return t.text();
}

}  // namespace inc::sw
