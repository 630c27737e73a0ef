// SPDX-License-Identifier: Apache-2.0
#include "cli/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <utility>

namespace inc::cli {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "TREE_ACTIVE" -> "active" with prefix "TREE_"; unknown values print as numbers.
std::string ShortEnumName(const std::string& full, const std::string& prefix, int value) {
  if (full.empty()) return std::to_string(value);
  std::string s = full;
  if (!prefix.empty() && s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return Lower(s);
}

std::string YesNo(bool b) {
  return b ? "yes" : "no";
}
std::string OrDash(const std::string& s) {
  return s.empty() ? "-" : s;
}
std::string Num(uint64_t v) {
  return std::to_string(v);
}

// Aligned "key:  value" lines.
class KeyValues {
 public:
  void Add(std::string key, std::string value) { rows_.emplace_back(std::move(key), std::move(value)); }
  void Print(std::ostream& out, const std::string& indent) const {
    size_t width = 0;
    for (const auto& [k, v] : rows_) width = std::max(width, k.size() + 1);
    for (const auto& [k, v] : rows_)
      out << indent << k << ':' << std::string(width - k.size() - 1 + 2, ' ') << v << '\n';
  }

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

template <typename Enum, typename NameFn>
std::string JoinEnums(const google::protobuf::RepeatedField<int>& values, NameFn name,
                      const char* if_empty = "-") {
  if (values.empty()) return if_empty;
  std::string s;
  for (int v : values) {
    if (!s.empty()) s += ',';
    s += name(static_cast<Enum>(v));
  }
  return s;
}

void PrintPorts(const google::protobuf::RepeatedPtrField<v1::Port>& ports, std::ostream& out,
                const std::string& indent) {
  Table t({"NAME", ">IFINDEX", "MAC", "IP", ">MTU", "UP", "XDP"});
  for (const v1::Port& p : ports) {
    std::string xdp = p.xdp_attached() ? (p.xdp_mode().empty() ? "attached" : p.xdp_mode()) : "-";
    t.AddRow({p.name(), Num(p.ifindex()), OrDash(p.mac()), OrDash(p.ip()), Num(p.mtu()), YesNo(p.up()), xdp});
  }
  t.Print(out, indent);
}

bool AllZero(const v1::Counters& c) {
  return c.rx_packets() == 0 && c.rx_bytes() == 0 && c.tx_packets() == 0 && c.tx_bytes() == 0 &&
         c.completions() == 0 && c.retransmissions() == 0 && c.drops() == 0;
}

const std::vector<std::string> kCounterHeader = {">RX_PKTS",     ">RX_BYTES", ">TX_PKTS", ">TX_BYTES",
                                                 ">COMPLETIONS", ">RETRANS",  ">DROPS"};

void AppendCounters(const v1::Counters& c, std::vector<std::string>& row) {
  for (uint64_t v : {c.rx_packets(), c.rx_bytes(), c.tx_packets(), c.tx_bytes(), c.completions(),
                     c.retransmissions(), c.drops()})
    row.push_back(Num(v));
}

// The AM lists topology switches that never registered: no agent address.
std::string LastHeartbeat(const v1::SwitchSummary& s) {
  return s.agent_address().empty() ? "never" : FormatAgo(s.last_heartbeat_ms_ago());
}

// A stats section: its table, or why it has no rows.
void PrintSection(const Table& table, size_t hidden, const char* what, std::ostream& out) {
  const std::string indent = "    ";
  if (table.rows() > 0) table.Print(out, indent);
  if (hidden > 0)
    out << indent << "(" << hidden << ' ' << what << " all zero, not shown; --all shows them)\n";
  else if (table.rows() == 0)
    out << indent << "(none)\n";
}

}  // namespace

Table::Table(std::vector<std::string> header) {
  for (std::string& h : header) {
    bool right = !h.empty() && h[0] == '>';
    right_.push_back(right);
    header_.push_back(right ? h.substr(1) : std::move(h));
  }
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, const std::string& indent) const {
  std::vector<size_t> width(header_.size());
  for (size_t i = 0; i < header_.size(); ++i) width[i] = header_[i].size();
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      std::string pad(width[i] - row[i].size(), ' ');
      if (i > 0) line += "  ";
      line += right_[i] ? pad + row[i] : row[i] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  print_row(header_);
  for (const auto& row : rows_) print_row(row);
}

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return "{\"error\":\"cannot print " + message.GetTypeName() + " as JSON\"}\n";
  // add_whitespace ends with a newline; a compact document does not.
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

std::string FormatBytes(uint64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (bytes < (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  return buf;
}

std::string FormatAgo(uint64_t ms) {
  char buf[64];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%llums ago", static_cast<unsigned long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs ago", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%llum%02llus ago", static_cast<unsigned long long>(ms / 60'000),
                  static_cast<unsigned long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lluh%02llum ago", static_cast<unsigned long long>(ms / 3'600'000),
                  static_cast<unsigned long long>(ms / 60'000 % 60));
  }
  return buf;
}

std::string FormatMicros(uint64_t us) {
  if (us < 1000) return std::to_string(us) + " us";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(us) / 1000.0);
  return buf;
}

std::string FormatUnixMs(uint64_t unix_ms) {
  if (unix_ms == 0) return "-";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s.%03lluZ", date, static_cast<unsigned long long>(unix_ms % 1000));
  return buf;
}

std::string TreeStateName(v1::TreeState s) {
  return ShortEnumName(v1::TreeState_Name(s), "TREE_", s);
}
std::string RoleName(v1::Role r) {
  return ShortEnumName(v1::Role_Name(r), "ROLE_", r);
}
std::string DataTypeName(v1::DataType d) {
  return ShortEnumName(v1::DataType_Name(d), "", d);
}
std::string ReduceOpName(v1::ReduceOp o) {
  return ShortEnumName(v1::ReduceOp_Name(o), "", o);
}
std::string CollectiveName(v1::Collective c) {
  return ShortEnumName(v1::Collective_Name(c), "", c);
}
std::string TransportName(v1::Transport t) {
  return ShortEnumName(v1::Transport_Name(t), "TRANSPORT_", t);
}

std::string JoinIds(const google::protobuf::RepeatedField<uint32_t>& ids) {
  if (ids.empty()) return "-";
  std::string s;
  for (uint32_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

void PrintSwitchList(const v1::ListSwitchesResponse& response, std::ostream& out) {
  if (response.switches().empty()) {
    out << "no switches\n";
    return;
  }
  Table t({"NAME", "AGENT", "ALIVE", "LAST HEARTBEAT", ">FREE SLOTS", ">PORTS", "TREES"});
  for (const v1::SwitchSummary& s : response.switches()) {
    const v1::Capabilities& c = s.capabilities();
    t.AddRow({s.name(), OrDash(s.agent_address()), YesNo(s.alive()), LastHeartbeat(s),
              Num(c.free_slots()) + "/" + Num(c.slot_capacity()), Num(s.ports_size()),
              JoinIds(s.tree_ids())});
  }
  t.Print(out);
}

void PrintSwitch(const v1::SwitchSummary& s, std::ostream& out) {
  const v1::Capabilities& c = s.capabilities();
  out << "switch " << s.name() << '\n';
  KeyValues kv;
  kv.Add("agent address", OrDash(s.agent_address()));
  kv.Add("alive", YesNo(s.alive()));
  kv.Add("last heartbeat", LastHeartbeat(s));
  kv.Add("trees", JoinIds(s.tree_ids()));
  kv.Add("slots", Num(c.free_slots()) + " free of " + Num(c.slot_capacity()));
  kv.Add("max trees", Num(c.max_trees()));
  kv.Add("max children", Num(c.max_children()));
  kv.Add("max elems/packet", Num(c.max_elems_per_packet()));
  kv.Add("icrc verify", YesNo(c.icrc_verify()));
  kv.Add("dtypes", JoinEnums<v1::DataType>(c.dtypes(), DataTypeName));
  kv.Add("ops", JoinEnums<v1::ReduceOp>(c.ops(), ReduceOpName));
  kv.Add("collectives", JoinEnums<v1::Collective>(c.collectives(), CollectiveName));
  kv.Print(out, "  ");
  out << "ports\n";
  PrintPorts(s.ports(), out, "  ");
}

void PrintArnStatus(const v1::ArnStatus& st, std::ostream& out) {
  out << "switch " << st.switch_name() << (st.enabled() ? "" : " (ARN off)") << '\n';
  if (st.local_links_size()) {
    out << "  own links\n";
    Table t({"PORT", "PEER", "CONDITION", "SEVERITY", "UTILISATION", "SINCE"});
    for (const auto& l : st.local_links()) {
      char util[32];
      std::snprintf(util, sizeof(util), "%.1f%%", l.utilisation() * 100);
      t.AddRow({l.port(), OrDash(l.peer()), l.condition(), Num(l.severity()), util,
                l.age_ms() ? FormatAgo(l.age_ms()) : "-"});
    }
    t.Print(out, "    ");
  }
  out << "  reported by others" << (st.remote_links_size() ? "" : ": nothing") << '\n';
  if (st.remote_links_size()) {
    Table t({"LINK", "CONDITION", "SEVERITY", "HEARD"});
    for (const auto& l : st.remote_links())
      t.AddRow(
          {l.origin() + "->" + OrDash(l.peer()), l.condition(), Num(l.severity()), FormatAgo(l.age_ms())});
    t.Print(out, "    ");
  }
  if (st.routes_size()) {
    out << "  best-path routes\n";
    Table t({"PREFIX", "DEST", "PORT", "VIA", "COST", "MARKS"});
    for (const auto& r : st.routes()) {
      if (r.hops_size() == 0) t.AddRow({r.prefix(), "(local)", "-", "-", "-", "-"});
      for (const auto& h : r.hops()) {
        std::string marks;
        for (const auto& m : h.marks()) marks += (marks.empty() ? "" : ",") + m;
        t.AddRow({r.prefix(), OrDash(r.dest_switch()), h.port(), OrDash(h.via_switch()), Num(h.cost()),
                  OrDash(marks)});
      }
    }
    t.Print(out, "    ");
  }
  std::string fwd;
  for (const auto& [k, v] : st.forwarder()) fwd += (fwd.empty() ? "" : " ") + k + "=" + Num(v);
  out << "  forwarder: " << OrDash(fwd) << '\n';
  std::string rejects;
  for (const auto& [k, v] : st.rejects())
    if (v) rejects += (rejects.empty() ? "" : " ") + k + "=" + Num(v);
  out << "  notices: sent " << st.notices_sent() << ", accepted " << st.notices_received() << ", rejected "
      << OrDash(rejects) << '\n';
  if (st.events_size()) {
    out << "  events\n";
    for (const auto& e : st.events()) out << "    " << e << '\n';
  }
}

// "name=value ..." in name order (a proto map has none of its own).
static std::string JoinCounters(const google::protobuf::Map<std::string, uint64_t>& counters,
                                bool skip_zero) {
  std::map<std::string, uint64_t> sorted(counters.begin(), counters.end());
  std::string out;
  for (const auto& [k, v] : sorted)
    if (v || !skip_zero) out += (out.empty() ? "" : " ") + k + "=" + Num(v);
  return out;
}

void PrintCreditStatus(const v1::CreditStatus& st, std::ostream& out) {
  out << "switch " << st.switch_name() << (st.enabled() ? "" : " (credit flow control off)") << '\n';
  if (st.flows_size()) {
    Table t({"FLOW", "ROLE", "PORT", "NEXT HOP", "STATE", ">GRANTED", ">CONSUMED", ">AVAILABLE",
             "LAST RETURN", ">QUEUED", ">FORWARDED"});
    for (const auto& f : st.flows()) {
      const auto& k = f.flow();
      const std::string flow =
          k.src_ip() + ":" + Num(k.udp_sport()) + ">" + k.dst_ip() + " qp " + Num(k.dest_qpn());
      const std::string queued = Num(f.queued_packets()) + " (" + FormatBytes(f.queued_bytes()) + ")";
      const std::string fwd = FormatBytes(f.forwarded_bytes());
      if (f.hops_size() == 0) t.AddRow({flow, f.role(), "-", "-", "-", "-", "-", "-", "-", queued, fwd});
      for (int i = 0; i < f.hops_size(); ++i) {
        const auto& h = f.hops(i);
        t.AddRow({i ? "" : flow, i ? "" : f.role(), h.port(), OrDash(h.neighbor()), h.state(),
                  FormatBytes(h.granted()), FormatBytes(h.consumed()), FormatBytes(h.available()),
                  FormatAgo(h.last_return_ms_ago()), i ? "" : queued, i ? "" : fwd});
      }
    }
    t.Print(out, "  ");
    for (const auto& f : st.flows())
      for (const auto& u : f.upstreams()) {
        char overhead[32];
        std::snprintf(overhead, sizeof overhead, "%.2f%%", 100 * u.overhead());
        out << "  qp " << f.flow().dest_qpn() << " from " << f.flow().src_ip() << ":" << f.flow().udp_sport()
            << ": upstream " << u.port() << " (" << OrDash(u.neighbor()) << ") freed "
            << FormatBytes(u.freed_total()) << ", " << Num(u.resv_messages()) << " RESVs ("
            << FormatBytes(u.resv_bytes()) << ", " << overhead << " of the data)\n";
      }
  } else {
    out << "  no credit flows\n";
  }
  out << "  hold queue: " << OrDash(JoinCounters(st.hold_queue(), false)) << '\n';
  out << "  rsvp: " << OrDash(JoinCounters(st.signalling(), false)) << '\n';
  out << "  credit gate: " << OrDash(JoinCounters(st.datapath(), false)) << '\n';
  const std::string rejects = JoinCounters(st.rejects(), true);
  out << "  signalling: " << FormatBytes(st.signalling_bytes()) << " sent for "
      << FormatBytes(st.data_bytes()) << " of data; rejected " << OrDash(rejects) << '\n';
  if (st.events_size()) {
    out << "  events\n";
    for (const auto& e : st.events()) out << "    " << e << '\n';
  }
}

void PrintTopology(const v1::GetTopologyResponse& response, std::ostream& out) {
  out << "nodes\n";
  Table nodes({"NAME", "KIND", "PORTS"});
  for (const v1::TopologyNode& n : response.nodes()) {
    std::string ports;
    for (const v1::Port& p : n.ports()) {
      if (!ports.empty()) ports += ',';
      ports += p.name();
    }
    nodes.AddRow({n.name(), OrDash(n.kind()), OrDash(ports)});
  }
  nodes.Print(out, "  ");
  out << "links\n";
  Table links({"A", "A PORT", "B", "B PORT", "UP"});
  for (const v1::Link& l : response.links())
    links.AddRow({l.a_node(), OrDash(l.a_port()), l.b_node(), OrDash(l.b_port()), YesNo(l.up())});
  links.Print(out, "  ");
}

void PrintTreeList(const v1::ListTreesResponse& response, std::ostream& out) {
  if (response.trees().empty()) {
    out << "no trees\n";
    return;
  }
  Table t({">ID", "JOB", "STATE", ">JOINED", ">POOL", ">ELEMS", "ROOT", ">SWITCHES", "CREATED", "REASON"});
  for (const v1::Tree& tr : response.trees())
    t.AddRow({Num(tr.tree_id()), tr.job_id(), TreeStateName(tr.state()),
              Num(tr.joined()) + "/" + Num(tr.world_size()), Num(tr.pool_size()), Num(tr.elems_per_packet()),
              OrDash(tr.root_switch()), Num(tr.switches_size()), FormatUnixMs(tr.created_unix_ms()),
              OrDash(tr.reason())});
  t.Print(out);
}

void PrintTree(const v1::Tree& tr, std::ostream& out) {
  out << "tree " << tr.tree_id() << '\n';
  KeyValues kv;
  kv.Add("job", tr.job_id());
  kv.Add("state", TreeStateName(tr.state()));
  if (!tr.reason().empty()) kv.Add("reason", tr.reason());
  kv.Add("world size", Num(tr.world_size()));
  kv.Add("joined", Num(tr.joined()) + " of " + Num(tr.world_size()));
  kv.Add("pool size", Num(tr.pool_size()));
  kv.Add("elems/packet", Num(tr.elems_per_packet()));
  kv.Add("root switch", OrDash(tr.root_switch()));
  kv.Add("dtypes", JoinEnums<v1::DataType>(tr.dtypes(), DataTypeName, "any"));
  kv.Add("ops", JoinEnums<v1::ReduceOp>(tr.ops(), ReduceOpName, "any"));
  kv.Add("collectives", JoinEnums<v1::Collective>(tr.collectives(), CollectiveName, "any"));
  kv.Add("created", FormatUnixMs(tr.created_unix_ms()));
  if (tr.activated_unix_ms() != 0) kv.Add("activated", FormatUnixMs(tr.activated_unix_ms()));
  if (tr.dismantled_unix_ms() != 0) kv.Add("dismantled", FormatUnixMs(tr.dismantled_unix_ms()));
  kv.Add("build time", FormatMicros(tr.build_us()));
  kv.Add("program time", FormatMicros(tr.program_us()));
  kv.Add("error reports", Num(tr.error_reports()));
  kv.Add("generation", Num(tr.generation()));
  if (tr.moves() != 0)
    kv.Add("moves", Num(tr.moves()) + " (last " + FormatUnixMs(tr.last_move_unix_ms()) + ": " +
                        tr.last_move_reason() + ")");
  kv.Print(out, "  ");
  out << "switches\n";
  Table sw({"SWITCH", "ROLE", "PARENT", ">SLOT BASE", ">CHILDREN"});
  for (const v1::TreeSwitch& s : tr.switches())
    sw.AddRow(
        {s.switch_name(), RoleName(s.role()), OrDash(s.parent()), Num(s.slot_base()), Num(s.num_children())});
  sw.Print(out, "  ");
  out << "members\n";
  // Several ranks per host: a RANKS column with the job's ranks behind each
  // member (the member's RANK then numbers the hosts).
  bool ranks = false;
  for (const v1::TreeMember& mb : tr.members()) ranks = ranks || !mb.host_ranks().empty();
  std::vector<std::string> cols = {">RANK",  "HOST", "IP",           ">QPN",          "TRANSPORT",
                                   "SWITCH", "PORT", ">RANK@SWITCH", "LAST HEARTBEAT"};
  if (ranks) cols.insert(cols.begin() + 2, "RANKS");
  Table m(cols);
  for (const v1::TreeMember& mb : tr.members()) {
    const v1::MemberInfo& info = mb.info();
    bool joined = mb.joined();
    std::vector<std::string> row = {Num(mb.rank()),
                                    OrDash(info.host()),
                                    OrDash(info.ip()),
                                    joined ? Num(info.qpn()) : "-",
                                    joined ? TransportName(info.transport()) : "-",
                                    OrDash(mb.switch_name()),
                                    OrDash(mb.switch_port()),
                                    Num(mb.rank_at_switch()),
                                    joined ? FormatAgo(mb.last_heartbeat_ms_ago()) : "-"};
    if (ranks) {
      std::string list;
      for (uint32_t r : mb.host_ranks()) list += (list.empty() ? "" : ",") + std::to_string(r);
      row.insert(row.begin() + 2, list.empty() ? "-" : list);
    }
    m.AddRow(row);
  }
  m.Print(out, "  ");
}

void PrintStats(const v1::AmGetStatsResponse& response, bool all, std::ostream& out) {
  if (response.switches().empty() && response.errors().empty()) {
    out << "no switch statistics\n";
    return;
  }
  bool first = true;
  for (const v1::SwitchStats& s : response.switches()) {
    if (!first) out << '\n';
    first = false;
    out << "switch " << s.switch_name() << '\n';
    // Calls the agent refused for the caller's certificate (only when any).
    if (s.authorization_denials())
      out << "  authorization denials: " << Num(s.authorization_denials()) << '\n';

    std::vector<std::pair<std::string, uint64_t>> global(s.global().begin(), s.global().end());
    std::sort(global.begin(), global.end());
    Table g({"COUNTER", ">VALUE"});
    size_t hidden = 0;
    for (const auto& [name, value] : global) {
      if (value == 0 && !all) {
        ++hidden;
        continue;
      }
      g.AddRow({name, Num(value)});
    }
    out << "  global\n";
    PrintSection(g, hidden, "counters", out);

    Table d({"REASON", ">PACKETS"});
    hidden = 0;
    for (const v1::DropCounter& dc : s.drops()) {
      if (dc.packets() == 0 && !all) {
        ++hidden;
        continue;
      }
      d.AddRow({dc.reason(), Num(dc.packets())});
    }
    out << "  drops\n";
    PrintSection(d, hidden, "drop reasons", out);

    std::vector<std::string> tree_header = {">TREE"};
    tree_header.insert(tree_header.end(), kCounterHeader.begin(), kCounterHeader.end());
    Table t(tree_header);
    hidden = 0;
    for (const v1::TreeCounters& tc : s.trees()) {
      if (AllZero(tc.counters()) && !all) {
        ++hidden;
        continue;
      }
      std::vector<std::string> row = {Num(tc.tree_id())};
      AppendCounters(tc.counters(), row);
      t.AddRow(std::move(row));
    }
    out << "  trees\n";
    PrintSection(t, hidden, "trees", out);

    std::vector<std::string> member_header = {">TREE", ">RANK", ">QPN"};
    member_header.insert(member_header.end(), kCounterHeader.begin(), kCounterHeader.end());
    Table m(member_header);
    hidden = 0;
    for (const v1::MemberCounters& mc : s.members()) {
      if (AllZero(mc.counters()) && !all) {
        ++hidden;
        continue;
      }
      std::vector<std::string> row = {Num(mc.tree_id()), Num(mc.rank()), Num(mc.switch_qpn())};
      AppendCounters(mc.counters(), row);
      m.AddRow(std::move(row));
    }
    out << "  members\n";
    PrintSection(m, hidden, "member QPs", out);
  }
  if (!response.errors().empty()) {
    if (!first) out << '\n';
    out << "switches that did not answer\n";
    for (const std::string& e : response.errors()) out << "  " << e << '\n';
  }
  if (response.authorization_denials()) {
    out << "\nAM authorization denials: " << Num(response.authorization_denials()) << '\n';
  }
}

void PrintEvent(const v1::Event& e, std::ostream& out) {
  out << FormatUnixMs(e.unix_ms()) << "  " << e.kind();
  if (e.tree_id() != 0) out << "  tree=" << e.tree_id();
  if (!e.job_id().empty()) out << "  job=" << e.job_id();
  if (!e.switch_name().empty()) out << "  switch=" << e.switch_name();
  if (!e.message().empty()) out << "  " << e.message();
  out << '\n';
}

}  // namespace inc::cli
