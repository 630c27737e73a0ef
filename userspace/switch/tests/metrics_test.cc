// SPDX-License-Identifier: Apache-2.0
// incswitchd's /metrics text from a stats and capabilities answer: every
// counter under its family with the switch, tree, member and reason labels.
#include "switch/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace inc::sw {
namespace {

TEST(SwitchMetrics, CountersDropsTreesMembersAndPortsWithTheirLabels) {
  v1::SwitchStats stats;
  stats.set_switch_name("leaf0");
  (*stats.mutable_global())["contributions"] = 120;
  (*stats.mutable_global())["completions"] = 30;
  auto* drop = stats.add_drops();
  drop->set_reason("bad_key");
  drop->set_packets(7);
  auto* tree = stats.add_trees();
  tree->set_tree_id(3);
  tree->mutable_counters()->set_rx_packets(120);
  tree->mutable_counters()->set_completions(30);
  auto* member = stats.add_members();
  member->set_tree_id(3);
  member->set_rank(1);
  member->set_switch_qpn(257);
  member->mutable_counters()->set_rx_bytes(368640);
  v1::GetCapabilitiesResponse caps;
  auto* port = caps.add_ports();
  port->set_name("w0");
  port->set_up(true);
  port->set_xdp_attached(true);
  port->set_xdp_mode("native");
  port->set_mtu(9000);

  const std::string text = RenderSwitchMetrics(stats, caps);
  struct Want {
    const char* what;
    const char* line;
  };
  const Want wants[] = {
      {.what = "agent up", .line = "incin_switch_up{switch=\"leaf0\"} 1\n"},
      {.what = "a global counter", .line = "incin_switch_contributions_total{switch=\"leaf0\"} 120\n"},
      {.what = "its type", .line = "# TYPE incin_switch_completions_total counter\n"},
      {.what = "drops by reason",
       .line = "incin_switch_dropped_frames_total{switch=\"leaf0\",reason=\"bad_key\"} 7\n"},
      {.what = "live trees", .line = "incin_switch_trees{switch=\"leaf0\"} 1\n"},
      {.what = "tree counter", .line = "incin_tree_completions_total{switch=\"leaf0\",tree=\"3\"} 30\n"},
      {.what = "member counter",
       .line = "incin_member_rx_bytes_total{switch=\"leaf0\",tree=\"3\",member=\"1\",qpn=\"257\"} 368640\n"},
      {.what = "port link", .line = "incin_port_up{switch=\"leaf0\",port=\"w0\"} 1\n"},
      {.what = "port XDP",
       .line = "incin_port_xdp_attached{switch=\"leaf0\",port=\"w0\",mode=\"native\"} 1\n"},
      {.what = "port MTU", .line = "incin_port_mtu_bytes{switch=\"leaf0\",port=\"w0\"} 9000\n"},
  };
  for (const Want& w : wants) EXPECT_NE(text.find(w.line), std::string::npos) << w.what << "\n" << text;
  // One HELP per family even with several samples.
  size_t helps = 0;
  for (size_t at = 0; (at = text.find("# HELP incin_member_rx_bytes_total ", at)) != std::string::npos; ++at)
    ++helps;
  EXPECT_EQ(helps, 1u);
}

}  // namespace
}  // namespace inc::sw
