// SPDX-License-Identifier: Apache-2.0
// incinctl's output on hand-built AM responses: table layout, what the
// tables leave out, and the JSON form scripts parse.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/format.h"
#include "cli/tests/cli_test_util.h"

namespace inc::cli {
namespace {

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

using test_util::Contains;
using test_util::Field;
using test_util::ParseJson;

v1::Tree SampleTree() {
  v1::Tree t;
  t.set_tree_id(7);
  t.set_job_id("train-7");
  t.set_state(v1::TREE_ACTIVE);
  t.set_world_size(2);
  t.set_pool_size(32);
  t.set_elems_per_packet(256);
  t.set_root_switch("spine1");
  t.set_created_unix_ms(1'700'000'000'123);
  t.set_activated_unix_ms(1'700'000'001'000);
  t.set_build_us(850);
  t.set_program_us(12'345);
  t.set_joined(1);
  t.add_dtypes(v1::FP32);
  v1::TreeSwitch* root = t.add_switches();
  root->set_switch_name("spine1");
  root->set_role(v1::ROOT);
  root->set_slot_base(64);
  root->set_num_children(2);
  v1::TreeSwitch* leaf = t.add_switches();
  leaf->set_switch_name("leaf1");
  leaf->set_role(v1::LEAF);
  leaf->set_parent("spine1");
  leaf->set_slot_base(0);
  leaf->set_num_children(1);
  v1::TreeMember* m = t.add_members();
  m->set_rank(1);
  m->set_member_index(1);
  m->mutable_info()->set_host("h2");
  m->mutable_info()->set_ip("10.0.0.2");
  m->mutable_info()->set_qpn(0x11);
  m->mutable_info()->set_transport(v1::TRANSPORT_AF_XDP);
  m->set_switch_name("leaf1");
  m->set_switch_port("p2");
  m->set_rank_at_switch(0);
  m->set_last_heartbeat_ms_ago(1500);
  m->set_joined(true);
  v1::TreeMember* pending = t.add_members();  // not joined yet
  pending->set_rank(0);
  pending->mutable_info()->set_host("h1");
  pending->set_switch_name("leaf2");
  pending->set_switch_port("p1");
  return t;
}

TEST(CliFormat, TableAlignsColumnsRightAlignsNumbersAndTrimsTrailingSpace) {
  Table t({"NAME", ">COUNT", "NOTE"});
  t.AddRow({"a", "5", ""});
  t.AddRow({"longer", "12345", "x"});
  std::ostringstream out;
  t.Print(out, "  ");
  EXPECT_EQ(out.str(),
            "  NAME    COUNT  NOTE\n"
            "  a           5\n"
            "  longer  12345  x\n");
}

TEST(CliFormat, TableRowWithMissingCellsIsPadded) {
  Table t({"A", "B"});
  t.AddRow({"only-a"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(), "A       B\nonly-a\n");
}

TEST(CliFormat, AgoAndTimestampFormats) {
  EXPECT_EQ(FormatAgo(0), "0ms ago");
  EXPECT_EQ(FormatAgo(850), "850ms ago");
  EXPECT_EQ(FormatAgo(12'345), "12.3s ago");
  EXPECT_EQ(FormatAgo(245'000), "4m05s ago");
  EXPECT_EQ(FormatAgo(7'800'000), "2h10m ago");
  EXPECT_EQ(FormatUnixMs(0), "-");
  EXPECT_EQ(FormatUnixMs(1'700'000'000'123), "2023-11-14 22:13:20.123Z");
}

TEST(CliFormat, EnumNamesAreShortAndLowerCaseUnknownValuesAreNumbers) {
  EXPECT_EQ(TreeStateName(v1::TREE_ACTIVE), "active");
  EXPECT_EQ(TreeStateName(v1::TREE_DESTROYED), "destroyed");
  EXPECT_EQ(RoleName(v1::SINGLE), "single");
  EXPECT_EQ(RoleName(v1::ROLE_UNSPECIFIED), "unspecified");
  EXPECT_EQ(DataTypeName(v1::FP32), "fp32");
  EXPECT_EQ(TransportName(v1::TRANSPORT_AF_XDP), "af_xdp");
  EXPECT_EQ(TreeStateName(static_cast<v1::TreeState>(42)), "42");
}

TEST(CliFormat, TreeShowListsHeaderSwitchesAndMembers) {
  std::ostringstream out;
  PrintTree(SampleTree(), out);
  std::string s = out.str();
  std::vector<std::string> lines = Lines(s);
  ASSERT_GE(lines.size(), 15u) << s;
  EXPECT_EQ(lines[0], "tree 7");
  EXPECT_EQ(Field(s, "job"), "train-7") << s;
  EXPECT_EQ(Field(s, "state"), "active") << s;
  EXPECT_EQ(Field(s, "world size"), "2") << s;
  EXPECT_EQ(Field(s, "pool size"), "32") << s;
  EXPECT_EQ(Field(s, "elems/packet"), "256") << s;
  EXPECT_EQ(Field(s, "root switch"), "spine1") << s;
  EXPECT_EQ(Field(s, "joined"), "1 of 2") << s;
  EXPECT_EQ(Field(s, "dtypes"), "fp32") << s;
  EXPECT_EQ(Field(s, "ops"), "any") << s;
  EXPECT_EQ(Field(s, "activated"), "2023-11-14 22:13:21.000Z") << s;
  EXPECT_EQ(Field(s, "build time"), "850 us") << s;
  EXPECT_EQ(Field(s, "program time"), "12.35 ms") << s;
  EXPECT_EQ(Field(s, "dismantled"), "") << "a live tree has no dismantled line\n" << s;
  // Every value of the header block starts in the same column.
  size_t column = std::string::npos;
  for (size_t i = 1; i < lines.size() && lines[i].rfind("  ", 0) == 0; ++i) {
    size_t colon = lines[i].find(':');
    size_t value = lines[i].find_first_not_of(' ', colon + 1);
    if (column == std::string::npos) column = value;
    EXPECT_EQ(value, column) << lines[i];
  }
  EXPECT_FALSE(Contains(s, "reason")) << "no reason line for a live tree\n" << s;
  EXPECT_TRUE(Contains(s, "  SWITCH  ROLE  PARENT  SLOT BASE  CHILDREN\n")) << s;
  EXPECT_TRUE(Contains(s, "  spine1  root  -              64         2\n")) << s;
  EXPECT_TRUE(Contains(s, "  leaf1   leaf  spine1          0         1\n")) << s;
  // The joined member shows its QP, transport and heartbeat; the pending one dashes.
  EXPECT_TRUE(Contains(s, "     1  h2    10.0.0.2   17  af_xdp     leaf1   p2              0  1.5s ago\n"))
      << s;
  EXPECT_TRUE(Contains(s, "     0  h1    -           -  -          leaf2   p1              0  -\n")) << s;
}

TEST(CliFormat, DismantledTreeShowsItsReason) {
  v1::Tree t = SampleTree();
  t.set_state(v1::TREE_FAILED);
  t.set_reason("member 1 missed heartbeats");
  std::ostringstream out;
  PrintTree(t, out);
  EXPECT_EQ(Field(out.str(), "state"), "failed") << out.str();
  EXPECT_EQ(Field(out.str(), "reason"), "member 1 missed heartbeats") << out.str();
  EXPECT_TRUE(Contains(out.str(), "  state:  ")) << out.str();
}

TEST(CliFormat, TreeListOneLinePerTreeAndMessageWhenEmpty) {
  v1::ListTreesResponse r;
  *r.add_trees() = SampleTree();
  std::ostringstream out;
  PrintTreeList(r, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_EQ(lines[0],
            "ID  JOB      STATE   JOINED  POOL  ELEMS  ROOT    SWITCHES  CREATED                   REASON");
  EXPECT_EQ(lines[1],
            " 7  train-7  active     1/2    32    256  spine1         2  2023-11-14 22:13:20.123Z  -");
  std::ostringstream empty;
  PrintTreeList(v1::ListTreesResponse(), empty);
  EXPECT_EQ(empty.str(), "no trees\n");
}

TEST(CliFormat, SwitchListAndShow) {
  v1::ListSwitchesResponse r;
  v1::SwitchSummary* s = r.add_switches();
  s->set_name("leaf1");
  s->set_agent_address("127.0.0.1:50061");
  s->set_alive(true);
  s->set_last_heartbeat_ms_ago(420);
  s->add_tree_ids(3);
  s->add_tree_ids(9);
  s->mutable_capabilities()->set_slot_capacity(4096);
  s->mutable_capabilities()->set_free_slots(4000);
  s->mutable_capabilities()->add_dtypes(v1::INT32);
  s->mutable_capabilities()->add_dtypes(v1::FP32);
  s->mutable_capabilities()->add_ops(v1::SUM);
  v1::Port* p = s->add_ports();
  p->set_name("p1");
  p->set_ifindex(12);
  p->set_mac("02:00:00:00:01:01");
  p->set_ip("10.0.0.254");
  p->set_mtu(1500);
  p->set_up(true);
  p->set_xdp_attached(true);
  p->set_xdp_mode("native");
  std::ostringstream list;
  PrintSwitchList(r, list);
  EXPECT_EQ(list.str(),
            "NAME   AGENT            ALIVE  LAST HEARTBEAT  FREE SLOTS  PORTS  TREES\n"
            "leaf1  127.0.0.1:50061  yes    420ms ago        4000/4096      1  3,9\n");
  std::ostringstream show;
  PrintSwitch(*s, show);
  std::string out = show.str();
  EXPECT_TRUE(Contains(out, "switch leaf1\n")) << out;
  EXPECT_EQ(Field(out, "slots"), "4000 free of 4096") << out;
  EXPECT_EQ(Field(out, "dtypes"), "int32,fp32") << out;
  EXPECT_EQ(Field(out, "collectives"), "-") << out;
  EXPECT_TRUE(Contains(out, "  p1         12  02:00:00:00:01:01  10.0.0.254  1500  yes  native\n")) << out;
  std::ostringstream none;
  PrintSwitchList(v1::ListSwitchesResponse(), none);
  EXPECT_EQ(none.str(), "no switches\n");
  // A topology switch that never registered has no agent and no heartbeat.
  v1::ListSwitchesResponse unregistered;
  unregistered.add_switches()->set_name("spine1");
  std::ostringstream never;
  PrintSwitchList(unregistered, never);
  EXPECT_EQ(never.str(),
            "NAME    AGENT  ALIVE  LAST HEARTBEAT  FREE SLOTS  PORTS  TREES\n"
            "spine1  -      no     never                  0/0      0  -\n");
}

TEST(CliFormat, CreditShowListsHopsPerFlowUpstreamsQueueAndCounters) {
  v1::CreditStatus st;
  st.set_switch_name("gwa");
  st.set_enabled(true);
  v1::CreditFlowStatus* f = st.add_flows();
  f->mutable_flow()->set_src_ip("10.0.0.2");
  f->mutable_flow()->set_dst_ip("10.0.3.2");
  f->mutable_flow()->set_udp_sport(49152);
  f->mutable_flow()->set_dest_qpn(4096);
  f->set_role("sender_gateway");
  f->set_queued_packets(3);
  f->set_queued_bytes(3198);
  f->set_forwarded_bytes(2 << 20);
  for (const char* port : {"wan0", "wan1"}) {
    v1::CreditHopStatus* h = f->add_hops();
    h->set_port(port);
    h->set_neighbor(std::string(port) == "wan0" ? "10.3.1.2" : "10.3.3.2");
    h->set_state(std::string(port) == "wan0" ? "primary" : "failed");
    h->set_granted(16384);
    h->set_available(std::string(port) == "wan0" ? 4096 : 0);
    h->set_last_return_ms_ago(12);
  }
  v1::CreditUpstreamStatus* u = f->add_upstreams();
  u->set_port("wan0");
  u->set_neighbor("10.3.0.1");
  u->set_freed_total(1 << 20);
  u->set_resv_messages(256);
  u->set_resv_bytes(24576);
  u->set_overhead(24576.0 / (1 << 20));
  (*st.mutable_hold_queue())["sent"] = 7;
  (*st.mutable_hold_queue())["dropped_overflow"] = 0;
  (*st.mutable_hold_queue())["received"] = 9;
  (*st.mutable_signalling())["received"] = 40;
  (*st.mutable_datapath())["forwarded"] = 5;
  (*st.mutable_rejects())["bad_integrity"] = 2;
  (*st.mutable_rejects())["truncated"] = 0;
  st.set_signalling_bytes(2048);
  st.set_data_bytes(1 << 20);
  st.add_events("primary_changed 10.0.0.2:49152->10.0.3.2:4791 qpn 0x1000 via wan0");
  std::ostringstream out;
  PrintCreditStatus(st, out);
  auto lines = Lines(out.str());
  ASSERT_GE(lines.size(), 10u) << out.str();
  EXPECT_EQ(lines[0], "switch gwa");
  EXPECT_TRUE(Contains(lines[2], "10.0.0.2:49152>10.0.3.2 qp 4096  sender_gateway  wan0  10.3.1.2  primary"))
      << lines[2];
  EXPECT_TRUE(Contains(lines[2], "3 (3.1 KiB)")) << lines[2];
  EXPECT_TRUE(Contains(lines[3], "wan1  10.3.3.2  failed")) << lines[3];
  EXPECT_FALSE(Contains(lines[3], "10.0.0.2")) << "the flow is named once: " << lines[3];
  EXPECT_TRUE(
      Contains(out.str(), "upstream wan0 (10.3.0.1) freed 1.0 MiB, 256 RESVs (24.0 KiB, 2.34% of the data)"))
      << out.str();
  EXPECT_TRUE(Contains(lines[2], "  2.0 MiB")) << "bytes sent on: " << lines[2];
  EXPECT_TRUE(Contains(out.str(), "  hold queue: dropped_overflow=0 received=9 sent=7\n"))
      << "counters in name order: " << out.str();
  EXPECT_TRUE(Contains(out.str(), "rejected bad_integrity=2\n")) << "zero reject counters are left out";
  EXPECT_TRUE(Contains(out.str(), "    primary_changed 10.0.0.2")) << out.str();
  std::ostringstream off;
  v1::CreditStatus disabled;
  disabled.set_switch_name("leaf0");
  PrintCreditStatus(disabled, off);
  EXPECT_TRUE(Contains(off.str(), "switch leaf0 (credit flow control off)\n  no credit flows\n"))
      << off.str();
}

TEST(CliFormat, TopologyShowsNodesAndLinks) {
  v1::GetTopologyResponse r;
  v1::TopologyNode* n = r.add_nodes();
  n->set_name("leaf1");
  n->set_kind("leaf");
  n->add_ports()->set_name("p1");
  n->add_ports()->set_name("up1");
  v1::Link* l = r.add_links();
  l->set_a_node("leaf1");
  l->set_a_port("up1");
  l->set_b_node("spine1");
  l->set_b_port("d1");
  l->set_up(false);
  std::ostringstream out;
  PrintTopology(r, out);
  EXPECT_EQ(out.str(),
            "nodes\n"
            "  NAME   KIND  PORTS\n"
            "  leaf1  leaf  p1,up1\n"
            "links\n"
            "  A      A PORT  B       B PORT  UP\n"
            "  leaf1  up1     spine1  d1      no\n");
}

v1::AmGetStatsResponse SampleStats() {
  v1::AmGetStatsResponse r;
  v1::SwitchStats* s = r.add_switches();
  s->set_switch_name("leaf1");
  (*s->mutable_global())["rx_packets"] = 100;
  (*s->mutable_global())["completions"] = 0;
  (*s->mutable_global())["contrib"] = 64;
  v1::DropCounter* d = s->add_drops();
  d->set_reason("bad_key");
  d->set_packets(3);
  d = s->add_drops();
  d->set_reason("stale");
  d->set_packets(0);
  v1::TreeCounters* t = s->add_trees();
  t->set_tree_id(7);
  t->mutable_counters()->set_rx_packets(64);
  t->mutable_counters()->set_completions(32);
  v1::MemberCounters* idle = s->add_members();
  idle->set_tree_id(7);
  idle->set_rank(0);
  idle->set_switch_qpn(0x100);
  v1::MemberCounters* busy = s->add_members();
  busy->set_tree_id(7);
  busy->set_rank(1);
  busy->set_switch_qpn(0x101);
  busy->mutable_counters()->set_rx_packets(64);
  busy->mutable_counters()->set_retransmissions(2);
  return r;
}

TEST(CliFormat, StatsHideZeroCountersByDefault) {
  std::ostringstream out;
  PrintStats(SampleStats(), /*all=*/false, out);
  EXPECT_EQ(out.str(),
            "switch leaf1\n"
            "  global\n"
            "    COUNTER     VALUE\n"
            "    contrib        64\n"
            "    rx_packets    100\n"
            "    (1 counters all zero, not shown; --all shows them)\n"
            "  drops\n"
            "    REASON   PACKETS\n"
            "    bad_key        3\n"
            "    (1 drop reasons all zero, not shown; --all shows them)\n"
            "  trees\n"
            "    TREE  RX_PKTS  RX_BYTES  TX_PKTS  TX_BYTES  COMPLETIONS  RETRANS  DROPS\n"
            "       7       64         0        0         0           32        0      0\n"
            "  members\n"
            "    TREE  RANK  QPN  RX_PKTS  RX_BYTES  TX_PKTS  TX_BYTES  COMPLETIONS  RETRANS  DROPS\n"
            "       7     1  257       64         0        0         0            0        2      0\n"
            "    (1 member QPs all zero, not shown; --all shows them)\n");
}

TEST(CliFormat, StatsSaysNoneForEmptySectionsAndListsUnansweredSwitches) {
  v1::AmGetStatsResponse r;
  r.add_switches()->set_switch_name("spine1");
  r.add_errors("switch leaf2: UNAVAILABLE: connection refused");
  std::ostringstream out;
  PrintStats(r, /*all=*/false, out);
  EXPECT_EQ(out.str(),
            "switch spine1\n"
            "  global\n"
            "    (none)\n"
            "  drops\n"
            "    (none)\n"
            "  trees\n"
            "    (none)\n"
            "  members\n"
            "    (none)\n"
            "\n"
            "switches that did not answer\n"
            "  switch leaf2: UNAVAILABLE: connection refused\n");
}

TEST(CliFormat, StatsShowAuthorizationDenialsWhenThereAreAny) {
  v1::AmGetStatsResponse r;
  r.add_switches()->set_switch_name("leaf0");
  r.mutable_switches(0)->set_authorization_denials(4);
  r.add_switches()->set_switch_name("leaf1");
  r.set_authorization_denials(7);
  std::ostringstream out;
  PrintStats(r, /*all=*/false, out);
  EXPECT_TRUE(Contains(out.str(), "switch leaf0\n  authorization denials: 4\n  global\n")) << out.str();
  EXPECT_TRUE(Contains(out.str(), "switch leaf1\n  global\n")) << out.str();
  EXPECT_TRUE(Contains(out.str(), "\nAM authorization denials: 7\n")) << out.str();
}

TEST(CliFormat, StatsAllShowsEveryCounter) {
  std::ostringstream out;
  PrintStats(SampleStats(), /*all=*/true, out);
  std::string s = out.str();
  EXPECT_TRUE(Contains(s, "    completions      0\n")) << s;
  EXPECT_TRUE(Contains(s, "    stale          0\n")) << s;
  EXPECT_TRUE(Contains(s, "       7     0  256        0")) << s;
  EXPECT_FALSE(Contains(s, "not shown")) << s;
}

TEST(CliFormat, JsonUsesProtoFieldNamesAndPrintsDefaults) {
  v1::GetTreeResponse r;
  *r.mutable_tree() = SampleTree();
  r.mutable_tree()->clear_reason();
  std::string json = ToJson(r, /*pretty=*/true);
  google::protobuf::Struct parsed = ParseJson(json);
  const auto& tree = parsed.fields().at("tree").struct_value().fields();
  EXPECT_EQ(tree.at("tree_id").number_value(), 7);
  EXPECT_EQ(tree.at("job_id").string_value(), "train-7");
  EXPECT_EQ(tree.at("state").string_value(), "TREE_ACTIVE");
  EXPECT_EQ(tree.at("elems_per_packet").number_value(), 256);
  // uint64 is a string in protobuf JSON; defaults are present, not omitted.
  EXPECT_EQ(tree.at("created_unix_ms").string_value(), "1700000000123");
  ASSERT_TRUE(tree.count("reason"));
  EXPECT_EQ(tree.at("reason").string_value(), "");
  const auto& member = tree.at("members").list_value().values(0).struct_value().fields();
  EXPECT_EQ(member.at("switch_port").string_value(), "p2");
  EXPECT_EQ(member.at("rank_at_switch").number_value(), 0);
}

TEST(CliFormat, CompactJsonIsOneLine) {
  v1::Event e;
  e.set_unix_ms(1'700'000'000'000);
  e.set_kind("tree_active");
  e.set_tree_id(7);
  e.set_message("programmed on 3 switches");
  std::string json = ToJson(e, /*pretty=*/false);
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1) << json;
  google::protobuf::Struct parsed = ParseJson(json);
  EXPECT_EQ(parsed.fields().at("kind").string_value(), "tree_active");
  EXPECT_EQ(parsed.fields().at("switch_name").string_value(), "");
}

TEST(CliFormat, EventLineHasTimeKindAndSetFieldsOnly) {
  v1::Event e;
  e.set_unix_ms(1'700'000'000'000);
  e.set_kind("tree_dismantled");
  e.set_tree_id(7);
  e.set_job_id("train-7");
  e.set_message("operator");
  std::ostringstream out;
  PrintEvent(e, out);
  EXPECT_EQ(out.str(), "2023-11-14 22:13:20.000Z  tree_dismantled  tree=7  job=train-7  operator\n");
}

}  // namespace
}  // namespace inc::cli
