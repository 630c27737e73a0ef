// SPDX-License-Identifier: Apache-2.0
#include "am/metrics.h"

#include <map>

#include "common/metrics.h"

namespace inc::am {

std::string RenderAmMetrics(Manager* manager) {
  PrometheusText t;
  t.Family("incin_am_up", "gauge", "1 while the aggregation manager serves.");
  t.Sample("incin_am_up", {}, 1);
  WriteBuildInfo("incamd", &t);

  const std::vector<SwitchSummary> switches = manager->ListSwitches();
  size_t alive = 0;
  for (const SwitchSummary& s : switches) alive += s.alive;
  t.Family("incin_am_switches", "gauge", "Switches the AM knows, by whether their heartbeats arrive.");
  t.Sample("incin_am_switches", {{"state", "alive"}}, static_cast<double>(alive));
  t.Family("incin_am_switch_alive", "gauge", "1 if the switch's heartbeats arrive.");
  for (const SwitchSummary& s : switches) t.Sample("incin_am_switch_alive", {{"switch", s.name}}, s.alive);
  t.Sample("incin_am_switches", {{"state", "dead"}}, static_cast<double>(switches.size() - alive));

  const std::vector<TreeInfo> trees = manager->ListTrees();
  std::map<std::string, size_t> by_state = {{"PENDING", 0}, {"ACTIVE", 0}, {"FAILED", 0}, {"DESTROYED", 0}};
  size_t members = 0;
  for (const TreeInfo& tree : trees) {
    std::string state = TreeStateName(tree.state);
    if (state.rfind("TREE_", 0) == 0) state = state.substr(5);
    ++by_state[state];
    if (!Dismantled(tree.state)) members += tree.joined;
  }
  t.Family("incin_am_trees", "gauge",
           "Aggregation trees by state (FAILED and DESTROYED ones while the AM still shows them).");
  for (const auto& [state, n] : by_state)
    t.Sample("incin_am_trees", {{"state", state}}, static_cast<double>(n));
  t.Family("incin_am_members", "gauge", "Members joined to pending and active trees.");
  t.Sample("incin_am_members", {}, static_cast<double>(members));
  t.Family("incin_am_tree_moves_total", "counter", "Times each shown tree moved off a bad link.");
  for (const TreeInfo& tree : trees)
    t.Sample("incin_am_tree_moves_total", {{"tree", std::to_string(tree.tree_id)}, {"inc_job", tree.job}},
             tree.moves);
  manager->WriteTimingMetrics(&t);
  return t.text();
}

}  // namespace inc::am
