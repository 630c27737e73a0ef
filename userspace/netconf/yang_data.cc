// SPDX-License-Identifier: Apache-2.0
#include "netconf/yang_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <functional>

namespace inc::sw::netconf {
namespace {

std::string Num(uint64_t v) {
  return std::to_string(v);
}

bool IsDir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool HasModule(const std::string& dir) {
  return IsDir(dir) && IsDir(dir + "/ietf");
}

Status NewPath(lyd_node* parent, const ly_ctx* ctx, const std::string& path, const std::string& value,
               lyd_node** node = nullptr) {
  LY_ERR err = lyd_new_path(parent, ctx, path.c_str(), value.empty() ? nullptr : value.c_str(), 0, node);
  if (err != LY_SUCCESS) {
    return Internal("building YANG data at " + path + ": " + LyError(ctx, "libyang error " + Num(err)));
  }
  return Status::Ok();
}

Status Term(lyd_node* parent, const std::string& name, const std::string& value) {
  LY_ERR err = lyd_new_term(parent, nullptr, name.c_str(), value.c_str(), 0, nullptr);
  if (err != LY_SUCCESS) {
    return Internal("building YANG leaf " + name + " = '" + value +
                    "': " + LyError(LYD_CTX(parent), "libyang error " + Num(err)));
  }
  return Status::Ok();
}

const char* Bool(bool b) {
  return b ? "true" : "false";
}

// Children of a node by name (first instance) and all instances.
const lyd_node* Child(const lyd_node* node, const char* name) {
  const lyd_node* c;
  LY_LIST_FOR(lyd_child(node), c) {
    if (!strcmp(LYD_NAME(c), name)) return c;
  }
  return nullptr;
}

std::vector<const lyd_node*> Children(const lyd_node* node, const char* name) {
  std::vector<const lyd_node*> out;
  const lyd_node* c;
  LY_LIST_FOR(lyd_child(node), c) {
    if (!strcmp(LYD_NAME(c), name)) out.push_back(c);
  }
  return out;
}

std::string Str(const lyd_node* node, const char* name) {
  const lyd_node* c = Child(node, name);
  return c ? lyd_get_value(c) : "";
}

uint64_t U64(const lyd_node* node, const char* name) {
  const lyd_node* c = Child(node, name);
  return c ? strtoull(lyd_get_value(c), nullptr, 10) : 0;
}

std::string ProtoEnumName(const std::string& yang_name) {
  std::string out = yang_name;
  for (char& ch : out) ch = ch == '-' ? '_' : static_cast<char>(toupper(static_cast<unsigned char>(ch)));
  return out;
}

template <typename E>
Status ParseEnum(const std::string& yang, const char* what, bool (*parse)(const std::string&, E*), E* out) {
  if (!parse(ProtoEnumName(yang), out))
    return InvalidArgument(std::string(what) + " '" + yang + "' is not known");
  return Status::Ok();
}

void EndpointFromYang(const lyd_node* n, v1::Endpoint* e) {
  e->set_peer_name(Str(n, "identity"));
  e->set_port(Str(n, "port"));
  e->set_peer_mac(Str(n, "peer-mac"));
  e->set_peer_ip(Str(n, "peer-ip"));
  e->set_peer_qpn(static_cast<uint32_t>(U64(n, "peer-qpn")));
  e->set_switch_qpn(static_cast<uint32_t>(U64(n, "switch-qpn")));
  e->set_rkey(static_cast<uint32_t>(U64(n, "rkey")));
  e->set_va_base(U64(n, "va-base"));
  e->set_slot_stride(static_cast<uint32_t>(U64(n, "slot-stride")));
  e->set_member_lo(static_cast<uint32_t>(U64(n, "member-lo")));
  e->set_member_hi(static_cast<uint32_t>(U64(n, "member-hi")));
}

Status EndpointToYang(lyd_node* n, const v1::Endpoint& e) {
  if (!e.peer_name().empty()) INC_RETURN_IF_ERROR(Term(n, "identity", e.peer_name()));
  INC_RETURN_IF_ERROR(Term(n, "port", e.port()));
  INC_RETURN_IF_ERROR(Term(n, "peer-mac", e.peer_mac()));
  INC_RETURN_IF_ERROR(Term(n, "peer-ip", e.peer_ip()));
  INC_RETURN_IF_ERROR(Term(n, "peer-qpn", Num(e.peer_qpn())));
  INC_RETURN_IF_ERROR(Term(n, "switch-qpn", Num(e.switch_qpn())));
  INC_RETURN_IF_ERROR(Term(n, "rkey", Num(e.rkey())));
  INC_RETURN_IF_ERROR(Term(n, "va-base", Num(e.va_base())));
  INC_RETURN_IF_ERROR(Term(n, "slot-stride", Num(e.slot_stride())));
  INC_RETURN_IF_ERROR(Term(n, "member-lo", Num(e.member_lo())));
  return Term(n, "member-hi", Num(e.member_hi()));
}

Status CountersToYang(lyd_node* parent, const v1::Counters& c) {
  lyd_node* n = nullptr;
  if (lyd_new_inner(parent, nullptr, "counters", 0, &n) != LY_SUCCESS) {
    return Internal("building YANG counters: " + LyError(LYD_CTX(parent), "libyang error"));
  }
  INC_RETURN_IF_ERROR(Term(n, "rx-packets", Num(c.rx_packets())));
  INC_RETURN_IF_ERROR(Term(n, "rx-bytes", Num(c.rx_bytes())));
  INC_RETURN_IF_ERROR(Term(n, "tx-packets", Num(c.tx_packets())));
  INC_RETURN_IF_ERROR(Term(n, "tx-bytes", Num(c.tx_bytes())));
  INC_RETURN_IF_ERROR(Term(n, "completions", Num(c.completions())));
  INC_RETURN_IF_ERROR(Term(n, "retransmissions", Num(c.retransmissions())));
  return Term(n, "drops", Num(c.drops()));
}

}  // namespace

std::string LyError(const ly_ctx* ctx, const std::string& fallback) {
  const ly_err_item* e = ly_err_last(ctx);
  if (!e || !e->msg) return fallback;
  std::string out = e->msg;
  if (e->path && *e->path) out += std::string(" (at ") + e->path + ")";
  return out;
}

std::string FindYangDir(const std::string& configured) {
  if (!configured.empty()) return configured;
  // The incin-switch package's, the incin-manager package's, a local install's.
  for (const char* dir :
       {"/usr/share/incin/yang", "/usr/share/incin-manager/yang", "/usr/local/share/incin/yang"}) {
    if (HasModule(dir)) return dir;
  }
  // A build tree: the binary's source tree (INC_SOURCE_YANG_DIR is set by CMake).
#ifdef INC_SOURCE_YANG_DIR
  if (HasModule(INC_SOURCE_YANG_DIR)) return INC_SOURCE_YANG_DIR;
#endif
  return "/usr/share/incin/yang";
}

Expected<LyCtx> NewContext(const std::string& yang_dir) {
  if (!HasModule(yang_dir)) {
    return NotFound("YANG directory " + yang_dir +
                    " does not exist or lacks ietf/ (set netconf.yang_dir; docs/netconf.md)");
  }
  ly_ctx* raw = nullptr;
  if (ly_ctx_new(yang_dir.c_str(), 0, &raw) != LY_SUCCESS) {
    return Internal("cannot create a libyang context over " + yang_dir);
  }
  LyCtx ctx(raw);
  const std::string ietf = yang_dir + "/ietf";
  if (ly_ctx_set_searchdir(raw, ietf.c_str()) != LY_SUCCESS) {
    return Internal("libyang: cannot search " + ietf);
  }
  const char* nc_features[] = {"writable-running", "xpath", nullptr};
  if (!ly_ctx_load_module(raw, "ietf-netconf", "2013-09-29", nc_features)) {
    return NotFound("cannot load ietf-netconf@2013-09-29 from " + ietf + ": " + LyError(raw, "not found"));
  }
  if (!ly_ctx_load_module(raw, "notifications", "2008-07-14", nullptr)) {
    return NotFound("cannot load notifications@2008-07-14 from " + ietf + ": " + LyError(raw, "not found"));
  }
  if (!ly_ctx_load_module(raw, kModule, nullptr, nullptr)) {
    return NotFound(std::string("cannot load ") + kModule + " from " + yang_dir + ": " +
                    LyError(raw, "not found"));
  }
  return ctx;
}

std::string YangEnumName(const std::string& proto_name) {
  std::string out = proto_name;
  for (char& ch : out) ch = ch == '_' ? '-' : static_cast<char>(tolower(static_cast<unsigned char>(ch)));
  return out;
}

Expected<v1::TreeConfig> TreeFromYang(const lyd_node* tree) {
  v1::TreeConfig c;
  c.set_tree_id(static_cast<uint32_t>(U64(tree, "id")));
  const std::string where = "tree " + Num(c.tree_id());
  c.set_key(static_cast<uint32_t>(U64(tree, "key")));
  v1::Role role;
  INC_RETURN_IF_ERROR(
      ParseEnum<v1::Role>(Str(tree, "role"), "role", v1::Role_Parse, &role).WithContext(where));
  c.set_role(role);
  c.set_pool_size(static_cast<uint32_t>(U64(tree, "pool-size")));
  c.set_slot_base(static_cast<uint32_t>(U64(tree, "slot-base")));
  c.set_elems_per_packet(static_cast<uint32_t>(U64(tree, "elems-per-packet")));
  for (const lyd_node* n : Children(tree, "collective")) {
    v1::Collective v;
    INC_RETURN_IF_ERROR(ParseEnum<v1::Collective>(lyd_get_value(n), "collective", v1::Collective_Parse, &v));
    c.add_collectives(v);
  }
  for (const lyd_node* n : Children(tree, "data-type")) {
    v1::DataType v;
    INC_RETURN_IF_ERROR(ParseEnum<v1::DataType>(lyd_get_value(n), "data-type", v1::DataType_Parse, &v));
    c.add_dtypes(v);
  }
  for (const lyd_node* n : Children(tree, "op")) {
    v1::ReduceOp v;
    INC_RETURN_IF_ERROR(ParseEnum<v1::ReduceOp>(lyd_get_value(n), "op", v1::ReduceOp_Parse, &v));
    c.add_ops(v);
  }
  std::map<uint64_t, const lyd_node*> members;
  for (const lyd_node* n : Children(tree, "member")) members[U64(n, "rank")] = n;
  uint64_t expect = 0;
  for (const auto& [rank, n] : members) {
    if (rank != expect) {
      return InvalidArgument(where + ": member ranks must be 0.." + Num(members.size() - 1) +
                             " without gaps, but rank " + Num(expect) + " is missing");
    }
    expect++;
    EndpointFromYang(n, c.add_children());
  }
  if (const lyd_node* parent = Child(tree, "parent")) EndpointFromYang(parent, c.mutable_parent());
  c.set_rank_at_parent(static_cast<uint32_t>(U64(tree, "rank-at-parent")));
  c.set_job_id(Str(tree, "job-id"));
  c.set_generation(static_cast<uint32_t>(U64(tree, "generation")));
  return c;
}

Status TreeToYang(const ly_ctx* ctx, const v1::TreeConfig& c, lyd_node** trees) {
  if (!*trees) INC_RETURN_IF_ERROR(NewPath(nullptr, ctx, std::string("/") + kModule + ":trees", "", trees));
  lyd_node* t = nullptr;
  const std::string id = Num(c.tree_id());
  if (lyd_new_list(*trees, nullptr, "tree", 0, &t, id.c_str()) != LY_SUCCESS) {
    return Internal("building YANG tree " + id + ": " + LyError(ctx, "libyang error"));
  }
  INC_RETURN_IF_ERROR(Term(t, "key", Num(c.key())));
  INC_RETURN_IF_ERROR(Term(t, "role", YangEnumName(v1::Role_Name(c.role()))));
  INC_RETURN_IF_ERROR(Term(t, "pool-size", Num(c.pool_size())));
  INC_RETURN_IF_ERROR(Term(t, "slot-base", Num(c.slot_base())));
  INC_RETURN_IF_ERROR(Term(t, "elems-per-packet", Num(c.elems_per_packet())));
  for (int v : c.collectives()) {
    INC_RETURN_IF_ERROR(
        Term(t, "collective", YangEnumName(v1::Collective_Name(static_cast<v1::Collective>(v)))));
  }
  for (int v : c.dtypes()) {
    INC_RETURN_IF_ERROR(Term(t, "data-type", YangEnumName(v1::DataType_Name(static_cast<v1::DataType>(v)))));
  }
  for (int v : c.ops()) {
    INC_RETURN_IF_ERROR(Term(t, "op", YangEnumName(v1::ReduceOp_Name(static_cast<v1::ReduceOp>(v)))));
  }
  for (int i = 0; i < c.children_size(); i++) {
    lyd_node* m = nullptr;
    const std::string rank = Num(i);
    if (lyd_new_list(t, nullptr, "member", 0, &m, rank.c_str()) != LY_SUCCESS) {
      return Internal("building YANG member " + rank + ": " + LyError(ctx, "libyang error"));
    }
    INC_RETURN_IF_ERROR(EndpointToYang(m, c.children(i)));
  }
  if (c.has_parent()) {
    lyd_node* p = nullptr;
    if (lyd_new_inner(t, nullptr, "parent", 0, &p) != LY_SUCCESS) {
      return Internal("building YANG parent: " + LyError(ctx, "libyang error"));
    }
    INC_RETURN_IF_ERROR(EndpointToYang(p, c.parent()));
  }
  if (c.role() == v1::LEAF) INC_RETURN_IF_ERROR(Term(t, "rank-at-parent", Num(c.rank_at_parent())));
  if (!c.job_id().empty()) INC_RETURN_IF_ERROR(Term(t, "job-id", c.job_id()));
  return Term(t, "generation", Num(c.generation()));
}

Expected<LydTree> RunningToYang(const ly_ctx* ctx, const std::map<uint16_t, v1::TreeConfig>& trees) {
  lyd_node* root = nullptr;
  for (const auto& [id, config] : trees) {
    Status st = TreeToYang(ctx, config, &root);
    if (!st.ok()) {
      lyd_free_all(root);
      return st;
    }
  }
  return LydTree(root);
}

Status StateToYang(const ly_ctx* ctx, const v1::GetCapabilitiesResponse& caps, const v1::SwitchStats& stats,
                   const std::map<uint16_t, v1::TreeConfig>& trees, const SwitchFacts& facts,
                   lyd_node** data) {
  lyd_node* sw = nullptr;
  INC_RETURN_IF_ERROR(NewPath(nullptr, ctx, std::string("/") + kModule + ":switch", "", &sw));
  if (*data) {
    lyd_insert_sibling(*data, sw, data);
  } else {
    *data = sw;
  }
  INC_RETURN_IF_ERROR(Term(sw, "name", caps.switch_name()));
  if (!facts.management_address.empty()) {
    INC_RETURN_IF_ERROR(Term(sw, "management-address", facts.management_address));
  }
  if (!facts.netconf_address.empty()) INC_RETURN_IF_ERROR(Term(sw, "netconf-address", facts.netconf_address));

  lyd_node* cap = nullptr;
  if (lyd_new_inner(sw, nullptr, "capabilities", 0, &cap) != LY_SUCCESS) {
    return Internal("building YANG capabilities: " + LyError(ctx, "libyang error"));
  }
  const auto& k = caps.capabilities();
  for (int v : k.collectives()) {
    INC_RETURN_IF_ERROR(
        Term(cap, "collective", YangEnumName(v1::Collective_Name(static_cast<v1::Collective>(v)))));
  }
  for (int v : k.dtypes()) {
    INC_RETURN_IF_ERROR(
        Term(cap, "data-type", YangEnumName(v1::DataType_Name(static_cast<v1::DataType>(v)))));
  }
  for (int v : k.ops()) {
    INC_RETURN_IF_ERROR(Term(cap, "op", YangEnumName(v1::ReduceOp_Name(static_cast<v1::ReduceOp>(v)))));
  }
  INC_RETURN_IF_ERROR(Term(cap, "max-children", Num(k.max_children())));
  INC_RETURN_IF_ERROR(Term(cap, "slot-capacity", Num(k.slot_capacity())));
  INC_RETURN_IF_ERROR(Term(cap, "free-slots", Num(k.free_slots())));
  INC_RETURN_IF_ERROR(Term(cap, "max-trees", Num(k.max_trees())));
  INC_RETURN_IF_ERROR(Term(cap, "max-elems-per-packet", Num(k.max_elems_per_packet())));
  uint32_t mtu = 0;
  for (const auto& p : caps.ports()) {
    if (p.mtu() && (mtu == 0 || p.mtu() < mtu)) mtu = p.mtu();
  }
  INC_RETURN_IF_ERROR(Term(cap, "mtu", Num(mtu)));
  INC_RETURN_IF_ERROR(Term(cap, "icrc-verify", Bool(k.icrc_verify())));

  for (const auto& p : caps.ports()) {
    lyd_node* n = nullptr;
    if (lyd_new_list(sw, nullptr, "port", 0, &n, p.name().c_str()) != LY_SUCCESS) {
      return Internal("building YANG port " + p.name() + ": " + LyError(ctx, "libyang error"));
    }
    INC_RETURN_IF_ERROR(Term(n, "ifindex", Num(p.ifindex())));
    if (!p.mac().empty()) INC_RETURN_IF_ERROR(Term(n, "mac", p.mac()));
    if (!p.ip().empty()) INC_RETURN_IF_ERROR(Term(n, "ip", p.ip()));
    INC_RETURN_IF_ERROR(Term(n, "mtu", Num(p.mtu())));
    INC_RETURN_IF_ERROR(Term(n, "up", Bool(p.up())));
    INC_RETURN_IF_ERROR(Term(n, "xdp-attached", Bool(p.xdp_attached())));
    if (!p.xdp_mode().empty()) INC_RETURN_IF_ERROR(Term(n, "xdp-mode", p.xdp_mode()));
  }

  lyd_node* arn = nullptr;
  if (lyd_new_inner(sw, nullptr, "arn", 0, &arn) != LY_SUCCESS) {
    return Internal("building YANG arn: " + LyError(ctx, "libyang error"));
  }
  INC_RETURN_IF_ERROR(Term(arn, "enabled", Bool(facts.arn_enabled)));
  INC_RETURN_IF_ERROR(Term(arn, "switch-id", Num(facts.arn_switch_id)));
  for (const auto& l : facts.unhealthy_links) {
    lyd_node* n = nullptr;
    if (lyd_new_list(arn, nullptr, "unhealthy-link", 0, &n, l.port().c_str()) != LY_SUCCESS) continue;
    INC_RETURN_IF_ERROR(Term(n, "condition", l.condition()));
    INC_RETURN_IF_ERROR(Term(n, "severity", Num(l.severity())));
  }
  lyd_node* credit = nullptr;
  if (lyd_new_inner(sw, nullptr, "credit", 0, &credit) != LY_SUCCESS) {
    return Internal("building YANG credit: " + LyError(ctx, "libyang error"));
  }
  INC_RETURN_IF_ERROR(Term(credit, "enabled", Bool(facts.credit_enabled)));
  INC_RETURN_IF_ERROR(Term(credit, "reserve-bytes", Num(facts.credit_reserve_bytes)));
  INC_RETURN_IF_ERROR(Term(credit, "flows", Num(facts.credit_flows)));

  lyd_node* st = nullptr;
  if (lyd_new_inner(sw, nullptr, "statistics", 0, &st) != LY_SUCCESS) {
    return Internal("building YANG statistics: " + LyError(ctx, "libyang error"));
  }
  std::map<std::string, uint64_t> global(stats.global().begin(), stats.global().end());
  for (const auto& [name, value] : global) {
    lyd_node* n = nullptr;
    if (lyd_new_list(st, nullptr, "global", 0, &n, name.c_str()) != LY_SUCCESS) continue;
    INC_RETURN_IF_ERROR(Term(n, "value", Num(value)));
  }
  for (const auto& d : stats.drops()) {
    lyd_node* n = nullptr;
    if (lyd_new_list(st, nullptr, "drop", 0, &n, d.reason().c_str()) != LY_SUCCESS) continue;
    INC_RETURN_IF_ERROR(Term(n, "packets", Num(d.packets())));
  }
  INC_RETURN_IF_ERROR(Term(st, "authorization-denials", Num(stats.authorization_denials())));

  // Per-tree state, under the configured trees only (a tree must have its
  // mandatory configuration to exist in the datastore).
  for (const auto& t : stats.trees()) {
    auto cfg = trees.find(static_cast<uint16_t>(t.tree_id()));
    if (cfg == trees.end()) continue;
    lyd_node* tn = nullptr;
    const std::string path = "/" + std::string(kModule) + ":trees/tree[id='" + Num(t.tree_id()) + "']";
    if (!*data || lyd_find_path(*data, path.c_str(), 0, &tn) != LY_SUCCESS) continue;
    lyd_node* sn = nullptr;
    if (lyd_new_inner(tn, nullptr, "state", 0, &sn) != LY_SUCCESS) {
      return Internal("building YANG tree state: " + LyError(ctx, "libyang error"));
    }
    INC_RETURN_IF_ERROR(CountersToYang(sn, t.counters()));
    for (const auto& m : stats.members()) {
      if (m.tree_id() != t.tree_id()) continue;
      lyd_node* mn = nullptr;
      const std::string rank = Num(m.rank());
      if (lyd_new_list(sn, nullptr, "member", 0, &mn, rank.c_str()) != LY_SUCCESS) continue;
      if (static_cast<int>(m.rank()) < cfg->second.children_size() &&
          !cfg->second.children(static_cast<int>(m.rank())).peer_name().empty()) {
        INC_RETURN_IF_ERROR(
            Term(mn, "identity", cfg->second.children(static_cast<int>(m.rank())).peer_name()));
      }
      INC_RETURN_IF_ERROR(Term(mn, "switch-qpn", Num(m.switch_qpn())));
      INC_RETURN_IF_ERROR(CountersToYang(mn, m.counters()));
    }
  }
  return Status::Ok();
}

}  // namespace inc::sw::netconf
