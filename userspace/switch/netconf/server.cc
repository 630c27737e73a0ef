// SPDX-License-Identifier: Apache-2.0
// incswitchd's NETCONF server: SSH login, the session loop, event notifications and each operation.
#include "switch/netconf/server.h"

#define NC_ENABLED_SSH
#include <google/protobuf/util/message_differencer.h>
#include <libnetconf2/log.h>
#include <libnetconf2/messages_server.h>
#include <libnetconf2/netconf.h>
#include <libnetconf2/session_server.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <optional>

#include "common/log.h"
#include "common/net.h"

namespace inc::sw::netconf {
namespace {

constexpr uint16_t kAuthTimeoutSeconds = 10;
NetconfServer* g_server = nullptr;  // libnetconf2's callbacks carry no object
std::mutex g_server_mu;
// Who authenticated on each session (by its pointer), set during SSH
// authentication inside nc_accept.
std::mutex g_identities_mu;
std::map<const nc_session*, NetconfServer::Identity> g_identities;

std::optional<NetconfServer::Identity> IdentityOf(const nc_session* s) {
  std::lock_guard<std::mutex> lk(g_identities_mu);
  auto it = g_identities.find(s);
  if (it == g_identities.end()) return std::nullopt;
  return it->second;
}

void ForgetIdentity(const nc_session* s) {
  std::lock_guard<std::mutex> lk(g_identities_mu);
  g_identities.erase(s);
}

void NcLog(NC_VERB_LEVEL level, const char* msg) {
  switch (level) {
    case NC_VERB_ERROR: LOG_WARN << "netconf: " << msg; break;
    case NC_VERB_WARNING: LOG_INFO << "netconf: " << msg; break;
    default: LOG_DEBUG << "netconf: " << msg; break;
  }
}

int HostKey(const char* /*name*/, void* user_data, char** privkey_path, char** /*privkey_data*/,
            NC_SSH_KEY_TYPE* /*type*/) {
  auto* path = static_cast<std::string*>(user_data);
  *privkey_path = strdup(path->c_str());
  return 0;
}

// libnetconf2 asks this for the key a client offers, both when the client
// only asks whether the key would do and when it signs with it: nothing is
// logged as a login here (the signature is not checked yet), only refusals.
int PubkeyAuth(const nc_session* session, ssh_key key, void* user_data) {
  auto* keys = static_cast<std::vector<AuthorizedKey>*>(user_data);
  char* b64 = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK || !b64) return 1;
  std::string got = b64;
  ssh_string_free_char(b64);
  const std::string user = nc_session_get_username(session) ?: "";
  const std::string host = nc_session_get_host(session) ?: "";
  for (const auto& k : *keys) {
    if (BlobBase64(k.blob) != got) continue;
    Status allowed = CheckLogin(k, user, host, static_cast<int64_t>(std::time(nullptr)));
    if (!allowed.ok()) {
      LOG_WARN << "netconf: refused SSH user '" << user << "' from " << host << ": " << allowed.message();
      return 1;
    }
    // Not nc_session_set_data: libnetconf2 uses the session's data while
    // it accepts an SSH session.
    std::lock_guard<std::mutex> lk(g_identities_mu);
    g_identities[session] = NetconfServer::Identity{k.role, k.name};
    return 0;
  }
  LOG_WARN << "netconf: refused SSH user '" << user << "' from " << host
           << ": its public key is not authorized (netconf.authorized_certs, netconf.authorized_keys)";
  return 1;
}

// Tree keys are secrets between the AM and the switch (a member's packets
// must carry its tree's key): no get or get-config shows them, to anyone.
void HideTreeKeys(lyd_node* root) {
  if (!root) return;
  ly_set* set = nullptr;
  if (lyd_find_xpath(root, "/incin-switch:trees/tree/key", &set) != LY_SUCCESS || !set) return;
  for (uint32_t i = 0; i < set->count; i++) lyd_free_tree(set->dnodes[i]);
  ly_set_free(set, nullptr);
}

const lyd_node* Child(const lyd_node* node, const char* name) {
  const lyd_node* c;
  LY_LIST_FOR(lyd_child(node), c) {
    if (!strcmp(LYD_NAME(c), name)) return c;
  }
  return nullptr;
}

std::string MetaValue(const lyd_node* node, const char* name) {
  const lyd_meta* m = lyd_find_meta(node->meta, nullptr, name);
  return m ? lyd_get_meta_value(m) : "";
}

// libyang's error path ("Data location \"/a:b/c\", line number 7.") as
// the data path alone.
std::string ErrPath(const ly_err_item* e) {
  if (!e || !e->path) return "";
  std::string p = e->path;
  auto q = p.find('"');
  if (q == std::string::npos) return p;
  auto end = p.find('"', q + 1);
  return end == std::string::npos ? p.substr(q + 1) : p.substr(q + 1, end - q - 1);
}

std::string TreePath(uint32_t id) {
  return std::string("/") + kModule + ":trees/tree[id='" + std::to_string(id) + "']";
}

// Any nc:operation below the given node (only <trees> and <tree> take one).
const lyd_node* NestedOperation(const lyd_node* node) {
  const lyd_node* c;
  LY_LIST_FOR(lyd_child(node), c) {
    if (lyd_find_meta(c->meta, nullptr, "ietf-netconf:operation")) return c;
    if (const lyd_node* deeper = NestedOperation(c)) return deeper;
  }
  return nullptr;
}

// Dups `node` with its parents; returns the root of the dup.
lyd_node* DupWithParents(const lyd_node* node) {
  lyd_node* dup = nullptr;
  if (lyd_dup_single(node, nullptr, LYD_DUP_RECURSIVE | LYD_DUP_WITH_PARENTS | LYD_DUP_NO_META, &dup) !=
      LY_SUCCESS) {
    return nullptr;
  }
  while (dup && dup->parent) dup = reinterpret_cast<lyd_node*>(dup->parent);
  return dup;
}

}  // namespace

Expected<NetconfOptions> NetconfOptionsFromConfig(const v1::SwitchAgentConfig& config) {
  const auto& nc = config.netconf();
  NetconfOptions o;
  o.listen = nc.listen();
  if (o.listen.empty()) return InvalidArgument("netconf.listen is empty (NETCONF is off)");
  auto colon = o.listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == o.listen.size()) {
    return InvalidArgument("netconf.listen '" + o.listen + "' is not host:port");
  }
  o.host_key = nc.host_key().empty() ? config.tls().key() : nc.host_key();
  if (o.host_key.empty()) {
    return InvalidArgument(
        "netconf: no SSH host key: set netconf.host_key or tls.key (the switch's private key)");
  }
  if (!std::ifstream(o.host_key)) return InvalidArgument("netconf: cannot read the host key " + o.host_key);
  std::vector<std::string> certs(nc.authorized_certs().begin(), nc.authorized_certs().end());
  auto keys = LoadAuthorizedKeys(certs, nc.authorized_keys(), config.tls().ca());
  if (!keys.ok()) return InvalidArgument("netconf: " + keys.status().message());
  if (keys->empty()) {
    return InvalidArgument(
        "netconf: nobody may log in: set netconf.authorized_certs (the AM's, operators' certificates) or "
        "netconf.authorized_keys");
  }
  o.authorized = std::move(*keys);
  o.yang_dir = FindYangDir(nc.yang_dir());
  o.arn_switch_id = config.arn().switch_id();
  o.credit_reserve_bytes = config.credit().reserve_bytes();
  return o;
}

Expected<std::unique_ptr<NetconfServer>> NetconfServer::Start(NetconfOptions options, Agent* agent,
                                                              const RoutingAgent* routing,
                                                              const CreditAgent* credit) {
  std::lock_guard<std::mutex> lk(g_server_mu);
  if (g_server) return FailedPrecondition("a NETCONF server already runs in this process");
  std::unique_ptr<NetconfServer> s(new NetconfServer(std::move(options), agent, routing, credit));
  Status st = s->Init();
  if (!st.ok()) return st;
  g_server = s.get();
  s->CheckEvents(/*first=*/true);
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

Status NetconfServer::Init() {
  auto ctx = NewContext(options_.yang_dir);
  if (!ctx.ok()) return ctx.status().WithContext("netconf");
  ctx_ = std::move(*ctx);
  nc_set_print_clb(NcLog);
  nc_verbosity(NC_VERB_WARNING);
  if (nc_server_init(ctx_.get())) return Internal("netconf: nc_server_init failed");
  nc_initialized_ = true;
  nc_set_global_rpc_clb(&NetconfServer::Dispatch);
  // RFC 5277 notifications, interleaved with other RPCs on the session.
  nc_server_set_capability("urn:ietf:params:netconf:capability:notification:1.0");
  nc_server_set_capability("urn:ietf:params:netconf:capability:interleave:1.0");
  const auto colon = options_.listen.rfind(':');
  std::string host = options_.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto port = std::stoul(options_.listen.substr(colon + 1));
  if (port == 0 || port > 65535) return InvalidArgument("netconf.listen port out of range 1..65535");
  if (nc_server_add_endpt("ssh", NC_TI_LIBSSH) || nc_server_endpt_set_address("ssh", host.c_str()) ||
      nc_server_endpt_set_port("ssh", static_cast<uint16_t>(port))) {
    return Unavailable("netconf: cannot listen on " + options_.listen +
                       " (address in use, not assigned in this namespace, or malformed)");
  }
  nc_server_ssh_set_hostkey_clb(HostKey, &options_.host_key, nullptr);
  if (nc_server_ssh_endpt_add_hostkey("ssh", "switch-key", -1) ||
      nc_server_ssh_endpt_set_auth_methods("ssh", NC_SSH_AUTH_PUBLICKEY)) {
    return Internal("netconf: cannot set the SSH host key or authentication methods");
  }
  nc_server_ssh_set_pubkey_auth_clb(PubkeyAuth, &options_.authorized, nullptr);
  // A client gets this long to authenticate; until then it holds up only
  // other new logins (AcceptLoop), never the sessions already served.
  nc_server_ssh_endpt_set_auth_timeout("ssh", kAuthTimeoutSeconds);
  ps_ = nc_ps_new();
  LOG_INFO << "serving NETCONF over SSH on " << options_.listen << " (module " << kModule << " from "
           << options_.yang_dir << ", " << options_.authorized.size() << " authorized keys)";
  return Status::Ok();
}

void NetconfServer::Stop() {
  if (stop_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  if (thread_.joinable()) thread_.join();
  if (ps_) {
    for (uint16_t i = 0; i < nc_ps_session_count(ps_); i++) ForgetIdentity(nc_ps_get_session(ps_, i));
    nc_ps_clear(ps_, 1, nullptr);
    nc_ps_free(ps_);
    ps_ = nullptr;
  }
  if (nc_initialized_) {
    nc_server_destroy();
    nc_initialized_ = false;
  }
  std::lock_guard<std::mutex> lk(g_server_mu);
  if (g_server == this) g_server = nullptr;
  LOG_INFO << "stopped serving NETCONF";
}

NetconfServer::~NetconfServer() {
  Stop();
}

void NetconfServer::EndSession(nc_session* session) {
  const uint32_t sid = nc_session_get_id(session);
  if (lock_sid_ == sid) {
    lock_sid_ = 0;
    LOG_INFO << "netconf: session " << sid << " ended holding the running lock; released";
  }
  LOG_DEBUG << "netconf: session " << sid << " ended";
  nc_ps_del_session(ps_, session);
  ForgetIdentity(session);
  nc_session_free(session, nullptr);
}

// New sessions are accepted on a thread of their own: libnetconf2's accept
// runs the whole SSH handshake and login, so a client that stalls in it
// would otherwise stop every established session (the AM's included) for up
// to kAuthTimeoutSeconds.
void NetconfServer::AcceptLoop() {
  while (!stop_) {
    nc_session* session = nullptr;
    if (nc_accept(100, &session) != NC_MSG_HELLO) continue;
    // Authenticated (signature checked) and past the hello: now a login.
    const auto id = IdentityOf(session);
    LOG_INFO << "netconf: "
             << (id ? RoleName(id->role) + std::string(" ") + id->name : std::string("unknown"))
             << " logged in from " << (nc_session_get_host(session) ?: "?") << " as SSH user '"
             << (nc_session_get_username(session) ?: "") << "' (session " << nc_session_get_id(session)
             << ")";
    nc_ps_add_session(ps_, session);
  }
}

void NetconfServer::Run() {
  auto last_check = std::chrono::steady_clock::now();
  while (!stop_) {
    if (nc_ps_session_count(ps_) > 0) {
      nc_session* session = nullptr;
      int r = nc_ps_poll(ps_, 100, &session);
      if ((r & (NC_PSPOLL_SESSION_TERM | NC_PSPOLL_SESSION_ERROR)) && session) {
        EndSession(session);
      } else if (r & NC_PSPOLL_SSH_CHANNEL) {
        nc_session* extra = nullptr;
        if (nc_ps_accept_ssh_channel(ps_, &extra) == NC_MSG_HELLO) nc_ps_add_session(ps_, extra);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last_check >= std::chrono::milliseconds(200)) {
      last_check = now;
      CheckEvents(false);
    }
  }
}

// Events are seen by comparing what the agent reports now with what it
// reported last: trees created or removed over NETCONF or gRPC alike, link
// state from the agent's port monitor, ARN conditions from the routing agent.
void NetconfServer::CheckEvents(bool first) {
  v1::HealthResponse health;
  if (!agent_->Health(&health).ok()) return;
  std::set<uint32_t> trees(health.tree_ids().begin(), health.tree_ids().end());
  std::map<uint16_t, v1::TreeConfig> configs;
  if (trees != trees_seen_ && !first) configs = agent_->ConfiguredTrees();
  if (!first) {
    for (uint32_t id : trees) {
      if (trees_seen_.count(id)) continue;
      lyd_node* n = nullptr;
      const std::string base = std::string("/") + kModule + ":tree-created";
      if (lyd_new_path(nullptr, ctx_.get(), (base + "/id").c_str(), std::to_string(id).c_str(), 0, &n) !=
          LY_SUCCESS) {
        continue;
      }
      auto c = configs.find(static_cast<uint16_t>(id));
      if (c != configs.end()) {
        if (!c->second.job_id().empty())
          lyd_new_term(n, nullptr, "job-id", c->second.job_id().c_str(), 0, nullptr);
        lyd_new_term(n, nullptr, "role", YangEnumName(v1::Role_Name(c->second.role())).c_str(), 0, nullptr);
      }
      Notify(n);
    }
    for (uint32_t id : trees_seen_) {
      if (trees.count(id)) continue;
      lyd_node* n = nullptr;
      const std::string path = std::string("/") + kModule + ":tree-removed/id";
      if (lyd_new_path(nullptr, ctx_.get(), path.c_str(), std::to_string(id).c_str(), 0, &n) == LY_SUCCESS) {
        Notify(n);
      }
    }
  }
  trees_seen_ = std::move(trees);

  auto link_event = [this](const std::string& port, const char* event, const std::string& detail) {
    lyd_node* n = nullptr;
    const std::string path = std::string("/") + kModule + ":link-event/port";
    if (lyd_new_path(nullptr, ctx_.get(), path.c_str(), port.c_str(), 0, &n) != LY_SUCCESS) return;
    lyd_new_term(n, nullptr, "event", event, 0, nullptr);
    if (!detail.empty()) lyd_new_term(n, nullptr, "detail", detail.c_str(), 0, nullptr);
    Notify(n);
  };
  for (const auto& p : health.ports()) {
    auto it = ports_seen_.find(p.name());
    if (!first && it != ports_seen_.end() && it->second != p.up())
      link_event(p.name(), p.up() ? "up" : "down", "");
    ports_seen_[p.name()] = p.up();
  }
  if (routing_) {
    std::map<std::string, std::string> now;
    for (const auto& l : routing_->UnhealthyLocalLinks()) {
      now[l.port()] = l.condition() + " (severity " + std::to_string(l.severity()) + ")";
    }
    if (!first) {
      for (const auto& [port, detail] : now) {
        auto it = arn_seen_.find(port);
        if (it == arn_seen_.end() || it->second != detail) link_event(port, "congested", detail);
      }
      for (const auto& [port, detail] : arn_seen_) {
        if (!now.count(port)) link_event(port, "healthy", "");
      }
    }
    arn_seen_ = std::move(now);
  }
}

void NetconfServer::Notify(lyd_node* event) {
  char* when = nullptr;
  if (ly_time_time2str(time(nullptr), nullptr, &when) != LY_SUCCESS) {
    lyd_free_all(event);
    return;
  }
  nc_server_notif* notif = nc_server_notif_new(event, when, NC_PARAMTYPE_FREE);
  if (!notif) {
    lyd_free_all(event);
    free(when);
    return;
  }
  for (uint16_t i = 0; i < nc_ps_session_count(ps_); i++) {
    nc_session* s = nc_ps_get_session(ps_, i);
    if (!s || !nc_session_get_notif_status(s)) continue;
    if (nc_server_notif_send(s, notif, 1000) != NC_MSG_NOTIF) {
      LOG_WARN << "netconf: sending a " << LYD_NAME(event) << " notification to session "
               << nc_session_get_id(s) << " failed";
    }
  }
  LOG_DEBUG << "netconf: notification " << LYD_NAME(event);
  nc_server_notif_free(notif);
}

nc_server_reply* NetconfServer::Error(int tag, const std::string& message, const std::string& path,
                                      const std::string& elem) {
  lyd_node* e = nullptr;
  const auto t = static_cast<NC_ERR>(tag);
  switch (t) {
    case NC_ERR_DATA_EXISTS:
    case NC_ERR_DATA_MISSING:
    case NC_ERR_MALFORMED_MSG: e = nc_err(ctx_.get(), t); break;
    case NC_ERR_LOCK_DENIED: e = nc_err(ctx_.get(), t, lock_sid_); break;
    case NC_ERR_UNKNOWN_ELEM:
    case NC_ERR_BAD_ELEM:
    case NC_ERR_MISSING_ELEM:
      e = nc_err(ctx_.get(), t, NC_ERR_TYPE_APP, elem.empty() ? "config" : elem.c_str());
      break;
    default: e = nc_err(ctx_.get(), t, NC_ERR_TYPE_APP); break;
  }
  if (!e) return nullptr;
  nc_err_set_msg(e, message.c_str(), "en");
  if (!path.empty()) nc_err_set_path(e, path.c_str());
  return nc_server_reply_err(e);
}

nc_server_reply* NetconfServer::FromStatus(const Status& st, const std::string& path) {
  switch (st.code()) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kOutOfRange: return Error(NC_ERR_INVALID_VALUE, st.message(), path);
    case Code::kResourceExhausted:
    case Code::kAlreadyExists: return Error(NC_ERR_RES_DENIED, st.message(), path);
    case Code::kPermissionDenied:
    case Code::kUnauthenticated: return Error(NC_ERR_ACCESS_DENIED, st.message(), path);
    default: return Error(NC_ERR_OP_FAILED, st.message(), path);
  }
}

nc_server_reply* NetconfServer::Dispatch(lyd_node* rpc, nc_session* session) {
  NetconfServer* self = g_server;
  if (!self) return nullptr;
  const std::string name = LYD_NAME(rpc);
  const std::string module = rpc->schema ? rpc->schema->module->name : "";
  const auto id = IdentityOf(session);
  const bool allowed = id && (id->role == Role::kAm || id->role == Role::kOperator);
  LOG_DEBUG << "netconf: " << module << ":" << name << " from session " << nc_session_get_id(session);
  if (!allowed) {
    return self->Error(NC_ERR_ACCESS_DENIED,
                       std::string("only the am and operator roles may use NETCONF; ") +
                           (id ? RoleName(id->role) + std::string(" ") + id->name : "unknown") + " may not");
  }
  if (module == "ietf-netconf") {
    if (name == "get") return self->Get(rpc, false);
    if (name == "get-config") return self->Get(rpc, true);
    // As on gRPC, only the AM configures trees (and so locks running for
    // it); operators read and subscribe.
    if ((name == "edit-config" || name == "lock" || name == "unlock") && id->role != Role::kAm) {
      return self->Error(NC_ERR_ACCESS_DENIED,
                         name + " is for the am role only (trees are the AM's to configure); " +
                             RoleName(id->role) + " " + id->name + " may not");
    }
    if (name == "edit-config") return self->EditConfig(rpc, session);
    if (name == "lock") return self->Lock(session, true);
    if (name == "unlock") return self->Lock(session, false);
  }
  if (module == "notifications" && name == "create-subscription") return self->Subscribe(rpc, session);
  return self->Error(NC_ERR_OP_NOT_SUPPORTED,
                     module + ":" + name +
                         " is not supported (get, get-config, edit-config of running, "
                         "lock, unlock, create-subscription are; docs/netconf.md)");
}

Expected<LydTree> NetconfServer::Datastore(bool with_state) {
  auto trees = agent_->ConfiguredTrees();
  auto running = RunningToYang(ctx_.get(), trees);
  if (!running.ok() || !with_state) return running;
  v1::GetCapabilitiesResponse caps;
  Status st = agent_->GetCapabilities(&caps);
  if (!st.ok()) return st;
  caps.set_switch_name(agent_->name());
  auto stats = agent_->GetStats(0);
  if (!stats.ok()) return stats.status();
  SwitchFacts facts;
  facts.management_address = options_.management_address;
  facts.netconf_address = options_.listen;
  if (routing_) {
    facts.arn_enabled = routing_->Report().enabled();
    facts.arn_switch_id = options_.arn_switch_id;
    facts.unhealthy_links = routing_->UnhealthyLocalLinks();
  }
  if (credit_) {
    auto report = credit_->Report();
    facts.credit_enabled = report.enabled();
    facts.credit_reserve_bytes = options_.credit_reserve_bytes;
    facts.credit_flows = static_cast<uint32_t>(report.flows_size());
  }
  lyd_node* data = running->release();
  st = StateToYang(ctx_.get(), caps, *stats, trees, facts, &data);
  LydTree out(data);
  if (!st.ok()) return st;
  return out;
}

nc_server_reply* NetconfServer::Get(lyd_node* rpc, bool config_only) {
  auto data = Datastore(!config_only);
  if (!data.ok()) return FromStatus(data.status(), "");
  HideTreeKeys(data->get());
  LydTree result;
  const lyd_node* filter = Child(rpc, "filter");
  if (!filter) {
    result = std::move(*data);
  } else {
    std::string xpath;
    if (MetaValue(filter, "ietf-netconf:type") == "xpath") {
      xpath = MetaValue(filter, "ietf-netconf:select");
      if (xpath.empty()) return Error(NC_ERR_MISSING_ATTR, "an xpath filter needs a select attribute");
    } else {
      // Subtree filter: the top-level nodes it names select their whole
      // subtree. libyang hands the content over as a data tree (empty
      // selection containers included), else as text.
      const auto* any = reinterpret_cast<const lyd_node_any*>(filter);
      lyd_node* f = nullptr;
      bool owned = false;
      if (any->value_type == LYD_ANYDATA_DATATREE) {
        f = any->value.tree;
      } else if (any->value.str && *any->value.str) {
        owned = true;
        if (lyd_parse_data_mem(ctx_.get(), any->value.str, LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_OPAQ, 0, &f) !=
            LY_SUCCESS) {
          return Error(NC_ERR_BAD_ELEM, "the subtree filter cannot be parsed: " + LyError(ctx_.get(), ""),
                       "filter");
        }
      }
      const lyd_node* n;
      LY_LIST_FOR(f, n) {
        std::string mod;
        if (n->schema) {
          mod = n->schema->module->name;
        } else {
          const auto* o = reinterpret_cast<const lyd_node_opaq*>(n);
          const lys_module* m =
              o->name.module_ns ? ly_ctx_get_module_implemented_ns(ctx_.get(), o->name.module_ns) : nullptr;
          if (!m) continue;  // selects nothing this server has
          mod = m->name;
        }
        xpath += (xpath.empty() ? "" : " | ") + std::string("/") + mod + ":" + LYD_NAME(n);
      }
      if (owned) lyd_free_all(f);
    }
    if (!xpath.empty() && *data) {
      ly_set* set = nullptr;
      if (lyd_find_xpath(data->get(), xpath.c_str(), &set) != LY_SUCCESS) {
        return Error(NC_ERR_INVALID_VALUE,
                     "the filter's XPath '" + xpath + "' is not valid: " + LyError(ctx_.get(), ""));
      }
      lyd_node* merged = nullptr;
      for (uint32_t i = 0; i < set->count; i++) {
        lyd_node* dup = DupWithParents(set->dnodes[i]);
        if (dup) lyd_merge_tree(&merged, dup, LYD_MERGE_DESTRUCT);
      }
      ly_set_free(set, nullptr);
      result.reset(merged);
    }
  }
  lyd_node* output = nullptr;
  if (lyd_dup_single(rpc, nullptr, 0, &output) != LY_SUCCESS) return Error(NC_ERR_OP_FAILED, "out of memory");
  lyd_node* tree = result.release();
  if (lyd_new_any(output, nullptr, "data", tree, 1, LYD_ANYDATA_DATATREE, 1, nullptr) != LY_SUCCESS) {
    lyd_free_all(tree);
    lyd_free_all(output);
    return Error(NC_ERR_OP_FAILED, "building the reply: " + LyError(ctx_.get(), ""));
  }
  return nc_server_reply_data(output, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

nc_server_reply* NetconfServer::Lock(nc_session* session, bool lock) {
  const uint32_t sid = nc_session_get_id(session);
  if (lock) {
    if (lock_sid_ && lock_sid_ != sid)
      return Error(NC_ERR_LOCK_DENIED, "running is locked by another session");
    if (lock_sid_ == sid) return Error(NC_ERR_LOCK_DENIED, "this session already holds the running lock");
    lock_sid_ = sid;
  } else {
    if (lock_sid_ != sid) return Error(NC_ERR_OP_FAILED, "this session does not hold the running lock");
    lock_sid_ = 0;
  }
  return nc_server_reply_ok();
}

nc_server_reply* NetconfServer::Subscribe(lyd_node* rpc, nc_session* session) {
  const lyd_node* stream = Child(rpc, "stream");
  if (stream && strcmp(lyd_get_value(stream), "NETCONF") != 0) {
    return Error(NC_ERR_INVALID_VALUE, std::string("stream '") + lyd_get_value(stream) +
                                           "' does not exist (this server has the NETCONF stream)");
  }
  if (Child(rpc, "startTime")) return Error(NC_ERR_OP_NOT_SUPPORTED, "replay (startTime) is not supported");
  if (Child(rpc, "filter")) return Error(NC_ERR_OP_NOT_SUPPORTED, "notification filters are not supported");
  if (nc_session_get_notif_status(session)) {
    return Error(NC_ERR_IN_USE, "this session already has a subscription");
  }
  nc_session_inc_notif_status(session);
  LOG_INFO << "netconf: session " << nc_session_get_id(session) << " subscribed to the NETCONF stream";
  return nc_server_reply_ok();
}

// edit-config in its four steps; each step either goes on or ends the RPC
// with its refusal, and no change reaches the agent before step 4.
nc_server_reply* NetconfServer::EditConfig(lyd_node* rpc, nc_session* session) {
  EditRequest request;
  if (Refusal refused = ParseEdit(rpc, session, &request)) return *refused;
  const auto current = agent_->ConfiguredTrees();
  LydTree edited;
  if (Refusal refused = EditedTrees(request, current, &edited)) return *refused;
  std::map<uint16_t, v1::TreeConfig> wanted;
  if (Refusal refused = WantedTrees(std::move(edited), &wanted)) return *refused;
  if (Refusal refused = ApplyTrees(current, wanted, nc_session_get_id(session))) return *refused;
  return nc_server_reply_ok();
}

// 1. The request: the running datastore free for this session, its
//    options, and the edit parsed strictly against the module (unknown
//    nodes, bad values and state data are refused here).
NetconfServer::Refusal NetconfServer::ParseEdit(lyd_node* rpc, nc_session* session, EditRequest* out) {
  const uint32_t sid = nc_session_get_id(session);
  if (lock_sid_ && lock_sid_ != sid) {
    return Error(NC_ERR_IN_USE, "running is locked by session " + std::to_string(lock_sid_));
  }
  const lyd_node* config = Child(rpc, "config");
  if (!config) return Error(NC_ERR_OP_NOT_SUPPORTED, "edit-config takes <config> (url is not supported)");
  out->default_op = "merge";
  if (const lyd_node* d = Child(rpc, "default-operation")) out->default_op = lyd_get_value(d);
  if (const lyd_node* t = Child(rpc, "test-option")) {
    if (strcmp(lyd_get_value(t), "test-then-set") != 0) {
      return Error(NC_ERR_OP_NOT_SUPPORTED,
                   "test-option " + std::string(lyd_get_value(t)) +
                       " is not supported (every edit is tested, then set, all or nothing)");
    }
  }

  char* text = nullptr;
  const auto* any = reinterpret_cast<const lyd_node_any*>(config);
  if (any->value_type == LYD_ANYDATA_DATATREE) {
    // Printed whole: an empty <trees nc:operation="delete"/> must survive.
    if (any->value.tree) {
      lyd_print_mem(&text, any->value.tree, LYD_XML, LYD_PRINT_WITHSIBLINGS | LYD_PRINT_KEEPEMPTYCONT);
    }
  } else {
    lyd_any_value_str(config, &text);
  }
  if (text && *text) {
    lyd_node* e = nullptr;
    ly_err_clean(ctx_.get(), nullptr);
    LY_ERR err = lyd_parse_data_mem(ctx_.get(), text, LYD_XML,
                                    LYD_PARSE_STRICT | LYD_PARSE_ONLY | LYD_PARSE_NO_STATE, 0, &e);
    free(text);
    if (err != LY_SUCCESS) {
      lyd_free_all(e);
      const ly_err_item* li = ly_err_last(ctx_.get());
      const std::string msg =
          "the edit is not valid for " + std::string(kModule) + ": " + LyError(ctx_.get(), "");
      const std::string path = ErrPath(li);
      if (li && li->msg && strstr(li->msg, "not found")) {
        // "Node \"colour\" not found as a child of \"tree\" node."
        std::string m = li->msg, elem;
        auto q = m.find('"');
        if (q != std::string::npos) elem = m.substr(q + 1, m.find('"', q + 1) - q - 1);
        return Error(NC_ERR_UNKNOWN_ELEM, msg, path, elem);
      }
      return Error(NC_ERR_INVALID_VALUE, msg, path);
    }
    out->edit.reset(e);
  } else {
    free(text);
  }
  const lyd_node* n;
  LY_LIST_FOR(out->edit.get(), n) {
    if (!n->schema || strcmp(n->schema->module->name, kModule) != 0 || strcmp(LYD_NAME(n), "trees") != 0) {
      return Error(NC_ERR_UNKNOWN_ELEM,
                   std::string("edit-config changes ") + kModule + ":trees only, not " + LYD_NAME(n),
                   LYD_NAME(n));
    }
  }
  return std::nullopt;
}

// 2. The running trees with the edit applied (null: no trees).
NetconfServer::Refusal NetconfServer::EditedTrees(const EditRequest& request,
                                                  const std::map<uint16_t, v1::TreeConfig>& current,
                                                  LydTree* out) {
  auto running = RunningToYang(ctx_.get(), current);
  if (!running.ok()) return FromStatus(running.status(), "");
  lyd_node* cand = running->release();
  auto find_tree = [&](uint32_t id) -> lyd_node* {
    lyd_node* found = nullptr;
    if (cand && lyd_find_path(cand, TreePath(id).c_str(), 0, &found) == LY_SUCCESS) return found;
    return nullptr;
  };
  auto fail = [&](nc_server_reply* r) {
    lyd_free_all(cand);
    return r;
  };
  auto merge_in = [&](const lyd_node* node) -> bool {
    lyd_node* dup = DupWithParents(node);
    if (!dup) return false;
    return lyd_merge_tree(&cand, dup, LYD_MERGE_DESTRUCT) == LY_SUCCESS;
  };
  const lyd_node* n;
  LY_LIST_FOR(request.edit.get(), n) {  // the <trees> container
    std::string trees_op = MetaValue(n, "ietf-netconf:operation");
    if (trees_op.empty()) trees_op = request.default_op;
    if (trees_op == "delete" || trees_op == "remove") {
      if (trees_op == "delete" && !cand) {
        return fail(Error(NC_ERR_DATA_MISSING, "delete of trees: there are none",
                          std::string("/") + kModule + ":trees"));
      }
      lyd_free_all(cand);
      cand = nullptr;
      continue;
    }
    if (trees_op == "replace") {
      lyd_free_all(cand);
      cand = nullptr;
      lyd_node* dup = nullptr;
      if (lyd_dup_single(n, nullptr, LYD_DUP_RECURSIVE | LYD_DUP_NO_META, &dup) != LY_SUCCESS) {
        return fail(Error(NC_ERR_OP_FAILED, "out of memory"));
      }
      cand = dup;
      continue;
    }
    if (trees_op == "create" && cand) {
      return fail(
          Error(NC_ERR_DATA_EXISTS, "create of trees: trees exist", std::string("/") + kModule + ":trees"));
    }
    const lyd_node* t;
    LY_LIST_FOR(lyd_child(n), t) {
      const uint32_t id = static_cast<uint32_t>(strtoul(lyd_get_value(lyd_child(t)), nullptr, 10));
      const std::string path = TreePath(id);
      if (const lyd_node* nested = NestedOperation(t)) {
        return fail(Error(NC_ERR_OP_NOT_SUPPORTED,
                          std::string("an operation on ") + LYD_NAME(nested) +
                              ": only <trees> and <tree> take an operation (edit whole trees)",
                          path));
      }
      std::string op = MetaValue(t, "ietf-netconf:operation");
      if (op.empty()) op = trees_op == "create" ? "merge" : trees_op;
      lyd_node* existing = find_tree(id);
      if (op == "none") continue;
      if (op == "delete" || op == "remove") {
        if (!existing) {
          if (op == "delete")
            return fail(Error(NC_ERR_DATA_MISSING, "tree " + std::to_string(id) + " does not exist", path));
          continue;
        }
        lyd_free_tree(existing);
        if (cand == existing) cand = nullptr;
        continue;
      }
      if (op == "create" && existing) {
        return fail(Error(NC_ERR_DATA_EXISTS, "tree " + std::to_string(id) + " already exists", path));
      }
      if (op == "replace" && existing) lyd_free_tree(existing);
      if (!merge_in(t))
        return fail(Error(NC_ERR_OP_FAILED, "applying the edit: " + LyError(ctx_.get(), ""), path));
    }
  }
  // An emptied <trees> container is no trees.
  if (cand && !lyd_child(cand)) {
    lyd_free_all(cand);
    cand = nullptr;
  }
  out->reset(cand);
  return std::nullopt;
}

// 3. The edited trees validated as a whole (mandatory leaves, must, when,
//    defaults), then translated into the agent's TreeConfigs.
NetconfServer::Refusal NetconfServer::WantedTrees(LydTree edited,
                                                  std::map<uint16_t, v1::TreeConfig>* wanted) {
  lyd_node* cand = edited.release();
  if (cand) {
    ly_err_clean(ctx_.get(), nullptr);
    if (lyd_validate_all(&cand, ctx_.get(), LYD_VALIDATE_NO_STATE, nullptr) != LY_SUCCESS) {
      const ly_err_item* li = ly_err_last(ctx_.get());
      nc_server_reply* r =
          Error(NC_ERR_INVALID_VALUE, "the edited configuration is not valid: " + LyError(ctx_.get(), ""),
                ErrPath(li));
      lyd_free_all(cand);
      return r;
    }
  }
  LydTree cand_owner(cand);
  if (!cand) return std::nullopt;
  lyd_node* trees = nullptr;
  if (lyd_find_path(cand, (std::string("/") + kModule + ":trees").c_str(), 0, &trees) == LY_SUCCESS) {
    const lyd_node* t;
    LY_LIST_FOR(lyd_child(trees), t) {
      auto c = TreeFromYang(t);
      if (!c.ok())
        return FromStatus(c.status(),
                          TreePath(static_cast<uint32_t>(strtoul(lyd_get_value(lyd_child(t)), nullptr, 10))));
      (*wanted)[static_cast<uint16_t>(c->tree_id())] = *c;
    }
  }
  return std::nullopt;
}

// 4. The agent applies the changes; a refusal undoes what was applied.
NetconfServer::Refusal NetconfServer::ApplyTrees(const std::map<uint16_t, v1::TreeConfig>& current,
                                                 const std::map<uint16_t, v1::TreeConfig>& wanted,
                                                 uint32_t sid) {
  using google::protobuf::util::MessageDifferencer;
  std::vector<uint16_t> configured, removed;
  auto rollback = [&]() {
    for (uint16_t id : configured) {
      auto old = current.find(id);
      Status st = old != current.end() ? agent_->ConfigureTree(old->second).status()
                                       : agent_->RemoveTree(id).status();
      if (!st.ok()) {
        LOG_WARN << "netconf: rolling back tree " << id << " failed: " << st.ToString();
      }
    }
    for (uint16_t id : removed) {
      Status st = agent_->ConfigureTree(current.at(id)).status();
      if (!st.ok()) {
        LOG_WARN << "netconf: restoring tree " << id << " failed: " << st.ToString();
      }
    }
  };
  for (const auto& [id, old] : current) {
    if (wanted.count(id)) continue;
    auto r = agent_->RemoveTree(id);
    if (!r.ok() && r.status().code() != Code::kNotFound) {
      rollback();
      return FromStatus(r.status(), TreePath(id));
    }
    removed.push_back(id);
    LOG_INFO << "netconf: tree " << id << " removed by session " << sid;
  }
  for (const auto& [id, config] : wanted) {
    auto old = current.find(id);
    if (old != current.end() && MessageDifferencer::Equals(old->second, config)) continue;
    auto r = agent_->ConfigureTree(config);
    if (!r.ok()) {
      rollback();
      return FromStatus(r.status(), TreePath(id));
    }
    configured.push_back(id);
    LOG_INFO << "netconf: tree " << id << " configured by session " << sid;
  }
  return std::nullopt;
}

}  // namespace inc::sw::netconf
