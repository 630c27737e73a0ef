// SPDX-License-Identifier: Apache-2.0
#include "am/netconf_client.h"

#define NC_ENABLED_SSH
#include <libnetconf2/log.h>
#include <libnetconf2/messages_client.h>
#include <libnetconf2/netconf.h>
#include <libnetconf2/session_client.h>
#include <libssh/libssh.h>
#include <libyang/libyang.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "netconf/ssh_keys.h"
#include "netconf/yang_data.h"

namespace inc::am {
namespace {

namespace ncy = inc::sw::netconf;

void NcLog(NC_VERB_LEVEL level, const char* msg) {
  if (level == NC_VERB_ERROR) {
    LOG_WARN << "netconf client: " << msg;
  } else {
    LOG_DEBUG << "netconf client: " << msg;
  }
}

// libnetconf2 asks this before it logs in: 0 accepts the switch's host key.
int CheckHostKey(const char* hostname, ssh_session session, void* priv) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session, &key) != SSH_OK || !key) return -1;
  char* b64 = nullptr;
  int rc = ssh_pki_export_pubkey_base64(key, &b64);
  ssh_key_free(key);
  if (rc != SSH_OK || !b64) return -1;
  std::string presented = b64;
  ssh_string_free_char(b64);
  auto* self = static_cast<NetconfSwitchClient*>(priv);
  return self->HostKeyMatches(hostname ? hostname : "", presented) ? 0 : -1;
}

const lyd_node* Child(const lyd_node* node, const char* name) {
  const lyd_node* c;
  LY_LIST_FOR(lyd_child(node), c) {
    if (!strcmp(LYD_NAME(c), name)) return c;
  }
  return nullptr;
}

std::string Value(const lyd_node* n) {
  if (!n) return "";
  if (n->schema) return lyd_get_value(n) ? lyd_get_value(n) : "";
  return reinterpret_cast<const lyd_node_opaq*>(n)->value ?: "";
}

uint64_t U64(const lyd_node* node, const char* name) {
  return strtoull(Value(Child(node, name)).c_str(), nullptr, 10);
}

void Counters(const lyd_node* c, v1::Counters* out) {
  if (!c) return;
  out->set_rx_packets(U64(c, "rx-packets"));
  out->set_rx_bytes(U64(c, "rx-bytes"));
  out->set_tx_packets(U64(c, "tx-packets"));
  out->set_tx_bytes(U64(c, "tx-bytes"));
  out->set_completions(U64(c, "completions"));
  out->set_retransmissions(U64(c, "retransmissions"));
  out->set_drops(U64(c, "drops"));
}

std::string Host(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

Expected<NetconfClientOptions> NetconfClientOptionsFromConfig(const v1::AmConfig& config) {
  NetconfClientOptions o;
  const auto& nc = config.netconf();
  if (nc.port() > 65535)
    return InvalidArgument("netconf.port " + std::to_string(nc.port()) + " is out of range");
  if (nc.port()) o.port = nc.port();
  o.private_key = nc.private_key().empty() ? config.tls().key() : nc.private_key();
  if (o.private_key.empty()) {
    return InvalidArgument("netconf: no key to log in with: set netconf.private_key or tls.key");
  }
  // The switch lets a certificate's key log in only as its CN: the AM's
  // CN unless a user name is configured.
  if (!nc.username().empty()) {
    o.username = nc.username();
  } else if (!config.tls().cert().empty()) {
    std::ifstream in(config.tls().cert());
    std::stringstream pem;
    pem << in.rdbuf();
    auto id = IdentityFromCertificate(pem.str(), "");
    if (!id.ok())
      return InvalidArgument("netconf: the SSH user name from " + config.tls().cert() + ": " +
                             id.status().message());
    o.username = id->name;
  }
  if (config.switch_rpc_timeout_ms()) o.timeout_ms = config.switch_rpc_timeout_ms();
  o.verify_host_keys = !config.insecure();
  return o;
}

Expected<std::unique_ptr<NetconfSwitchClient>> NetconfSwitchClient::Create(NetconfClientOptions options) {
  std::unique_ptr<NetconfSwitchClient> c(new NetconfSwitchClient(std::move(options)));
  Status st = c->Init();
  if (!st.ok()) return st;
  return c;
}

Status NetconfSwitchClient::Init() {
  std::ifstream in(options_.private_key);
  if (!in) return InvalidArgument("netconf: cannot read the private key " + options_.private_key);
  std::stringstream pem;
  pem << in.rdbuf();
  auto blob = ncy::SshBlobFromPem(pem.str());
  if (!blob.ok()) return InvalidArgument("netconf: " + options_.private_key + ": " + blob.status().message());
  auto line = ncy::OpenSshLine(*blob, "incamd");
  if (!line.ok()) return line.status();
  // libssh wants the public half in a file of its own.
  char tmpl[] = "/tmp/incamd-netconf-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return ErrnoStatus("netconf: creating the public key file", errno);
  const std::string text = *line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    close(fd);
    return ErrnoStatus("netconf: writing the public key file", errno);
  }
  close(fd);
  pubkey_path_ = tmpl;

  auto ctx = ncy::NewContext(ncy::FindYangDir(options_.yang_dir));
  if (!ctx.ok()) return ctx.status();
  ctx_ = ctx->release();

  nc_client_init();
  nc_set_print_clb(NcLog);
  nc_verbosity(NC_VERB_WARNING);
  nc_client_ssh_set_username(options_.username.c_str());
  if (nc_client_ssh_add_keypair(pubkey_path_.c_str(), options_.private_key.c_str())) {
    return InvalidArgument("netconf: libssh cannot use the key " + options_.private_key);
  }
  nc_client_ssh_set_auth_pref(NC_SSH_AUTH_PUBLICKEY, 10);
  nc_client_ssh_set_auth_pref(NC_SSH_AUTH_PASSWORD, -1);
  nc_client_ssh_set_auth_pref(NC_SSH_AUTH_INTERACTIVE, -1);
  nc_client_ssh_set_auth_hostkey_check_clb(CheckHostKey, this);
  const std::string yang = ncy::FindYangDir(options_.yang_dir);
  nc_client_set_schema_searchpath(yang.c_str());
  thread_ctx_ = nc_client_get_thread_context();
  LOG_INFO << "programming switches over NETCONF (port " << options_.port << ", user " << options_.username
           << ", key " << options_.private_key << ")";
  return Status::Ok();
}

NetconfSwitchClient::~NetconfSwitchClient() {
  std::lock_guard<std::mutex> lk(mu_);
  if (thread_ctx_) nc_client_set_thread_context(thread_ctx_);
  for (auto& [addr, s] : sessions_) nc_session_free(s, nullptr);
  sessions_.clear();
  if (ctx_) ly_ctx_destroy(ctx_);
  if (!pubkey_path_.empty()) unlink(pubkey_path_.c_str());
}

Expected<nc_session*> NetconfSwitchClient::SessionFor(const std::string& agent_address) {
  auto it = sessions_.find(agent_address);
  if (it != sessions_.end()) {
    if (nc_session_get_status(it->second) == NC_STATUS_RUNNING) return it->second;
    nc_session_free(it->second, nullptr);
    sessions_.erase(it);
  }
  const std::string host = Host(agent_address);
  nc_session* s = nc_connect_ssh(host.c_str(), static_cast<uint16_t>(options_.port), nullptr);
  if (!s) {
    return Unavailable(
        "NETCONF at " + host + ":" + std::to_string(options_.port) +
        ": cannot connect or log in (is netconf.listen set on the switch, the AM's key authorized?)");
  }
  sessions_[agent_address] = s;
  return s;
}

void NetconfSwitchClient::Drop(const std::string& agent_address) {
  auto it = sessions_.find(agent_address);
  if (it == sessions_.end()) return;
  nc_session_free(it->second, nullptr);
  sessions_.erase(it);
}

void NetconfSwitchClient::ExpectHostKey(const std::string& agent_address,
                                        const std::string& certificate_pem) {
  const std::string host = Host(agent_address);
  std::lock_guard<std::mutex> lk(host_keys_mu_);
  auto blob = certificate_pem.empty() ? Expected<std::string>(NotFound("no certificate"))
                                      : ncy::SshBlobFromPem(certificate_pem);
  if (!blob.ok()) {
    host_keys_.erase(host);
    if (options_.verify_host_keys) {
      LOG_WARN << "netconf: the switch at " << host << " registered without a usable certificate ("
               << blob.status().message()
               << "): its SSH host key cannot be checked, NETCONF to it is refused";
    }
    return;
  }
  host_keys_[host] = ncy::BlobBase64(*blob);
}

bool NetconfSwitchClient::HostKeyMatches(const std::string& host, const std::string& presented_base64) {
  if (!options_.verify_host_keys) return true;
  std::lock_guard<std::mutex> lk(host_keys_mu_);
  auto it = host_keys_.find(host);
  if (it == host_keys_.end()) {
    LOG_WARN
        << "netconf: refused the switch at " << host
        << ": no registered certificate to check its SSH host key against (it registers over gRPC first)";
    return false;
  }
  if (it->second != presented_base64) {
    LOG_WARN
        << "netconf: refused the switch at " << host
        << ": its SSH host key is not the key of the certificate it registered with (netconf.host_key must "
           "be the switch's tls.key, the default)";
    return false;
  }
  return true;
}

void NetconfSwitchClient::Forget(const std::string& agent_address) {
  std::lock_guard<std::mutex> lk(mu_);
  nc_client_set_thread_context(thread_ctx_);
  Drop(agent_address);
}

Status NetconfSwitchClient::Call(const std::string& agent_address, bool edit, const std::string& content,
                                 std::string* data) {
  std::lock_guard<std::mutex> lk(mu_);
  nc_client_set_thread_context(thread_ctx_);
  const std::string where =
      "NETCONF " + std::string(edit ? "edit-config" : "get") + " at " + Host(agent_address);
  Status last;
  for (int attempt = 0; attempt < 2; attempt++) {  // a stale session (switch restarted) is retried once
    auto s = SessionFor(agent_address);
    if (!s.ok()) return s.status().WithContext(where);
    nc_rpc* rpc =
        edit ? nc_rpc_edit(NC_DATASTORE_RUNNING, NC_RPC_EDIT_DFLTOP_MERGE, NC_RPC_EDIT_TESTOPT_UNKNOWN,
                           NC_RPC_EDIT_ERROPT_UNKNOWN, content.c_str(), NC_PARAMTYPE_CONST)
             : nc_rpc_get(content.c_str(), NC_WD_UNKNOWN, NC_PARAMTYPE_CONST);
    uint64_t msgid = 0;
    NC_MSG_TYPE sent = nc_send_rpc(*s, rpc, static_cast<int>(options_.timeout_ms), &msgid);
    if (sent != NC_MSG_RPC) {
      nc_rpc_free(rpc);
      Drop(agent_address);
      last = Unavailable(where + ": sending failed");
      continue;
    }
    lyd_node *envp = nullptr, *op = nullptr;
    NC_MSG_TYPE got = nc_recv_reply(*s, rpc, msgid, static_cast<int>(options_.timeout_ms), &envp, &op);
    nc_rpc_free(rpc);
    if (got != NC_MSG_REPLY && got != NC_MSG_REPLY_ERR_MSGID) {
      lyd_free_all(envp);
      lyd_free_all(op);
      Drop(agent_address);
      if (got == NC_MSG_WOULDBLOCK)
        return DeadlineExceeded(where + ": no reply in " + std::to_string(options_.timeout_ms) + " ms");
      last = Unavailable(where + ": no reply (session lost)");
      continue;
    }
    Status result = Status::Ok();
    // <rpc-reply> children: <ok/>, <rpc-error>s, or (get) the output in op.
    const lyd_node* c;
    LY_LIST_FOR(lyd_child(envp), c) {
      if (strcmp(LYD_NAME(c), "rpc-error") != 0) continue;
      const std::string tag = Value(Child(c, "error-tag"));
      std::string msg = Value(Child(c, "error-message"));
      const std::string path = Value(Child(c, "error-path"));
      if (!path.empty()) msg += " (at " + path + ")";
      msg = where + ": " + tag + ": " + msg;
      if (tag == "data-missing") {
        result = NotFound(msg);
      } else if (tag == "invalid-value" || tag == "unknown-element" || tag == "bad-element") {
        result = InvalidArgument(msg);
      } else if (tag == "resource-denied") {
        result = ResourceExhausted(msg);
      } else if (tag == "access-denied") {
        result = PermissionDenied(msg);
      } else if (tag == "data-exists") {
        result = AlreadyExists(msg);
      } else {
        result = FailedPrecondition(msg);
      }
      break;
    }
    if (result.ok() && data && op) {
      const lyd_node* d = Child(op, "data");
      if (d && (d->schema && (d->schema->nodetype & LYD_NODE_ANY))) {
        const auto* any = reinterpret_cast<const lyd_node_any*>(d);
        char* text = nullptr;
        if (any->value_type == LYD_ANYDATA_DATATREE) {
          if (any->value.tree) lyd_print_mem(&text, any->value.tree, LYD_XML, LYD_PRINT_WITHSIBLINGS);
        } else {
          lyd_any_value_str(d, &text);
        }
        if (text) *data = text;
        free(text);
      }
    }
    lyd_free_all(envp);
    lyd_free_all(op);
    return result;
  }
  return last;
}

Status NetconfSwitchClient::Configure(const std::string& agent_address, const v1::TreeConfig& tree) {
  lyd_node* trees = nullptr;
  Status st = ncy::TreeToYang(ctx_, tree, &trees);
  if (!st.ok()) {
    lyd_free_all(trees);
    return st;
  }
  // The whole tree, replacing what the switch had for it.
  lyd_node* t = lyd_child(trees);
  if (t) lyd_new_meta(ctx_, t, nullptr, "ietf-netconf:operation", "replace", 0, nullptr);
  char* xml = nullptr;
  lyd_print_mem(&xml, trees, LYD_XML, LYD_PRINT_SHRINK);
  lyd_free_all(trees);
  if (!xml) return Internal("building the edit of tree " + std::to_string(tree.tree_id()));
  std::string content = xml;
  free(xml);
  return Call(agent_address, true, content, nullptr);
}

Status NetconfSwitchClient::Remove(const std::string& agent_address, uint32_t tree_id) {
  const std::string content = std::string("<trees xmlns=\"") + ncy::kNamespace +
                              "\"><tree xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" "
                              "nc:operation=\"delete\"><id>" +
                              std::to_string(tree_id) + "</id></tree></trees>";
  return Call(agent_address, true, content, nullptr);
}

Expected<v1::SwitchStats> NetconfSwitchClient::Stats(const std::string& agent_address, uint32_t tree_id) {
  std::string xml;
  const std::string filter =
      std::string("<switch xmlns=\"") + ncy::kNamespace + "\"/><trees xmlns=\"" + ncy::kNamespace + "\"/>";
  Status st = Call(agent_address, false, filter, &xml);
  if (!st.ok()) return st;
  v1::SwitchStats out;
  if (xml.empty()) return out;
  lyd_node* tree = nullptr;
  if (lyd_parse_data_mem(ctx_, xml.c_str(), LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_OPAQ, 0, &tree) !=
      LY_SUCCESS) {
    return Internal("NETCONF get at " + Host(agent_address) +
                    ": the reply does not parse: " + ncy::LyError(ctx_, ""));
  }
  const lyd_node* top;
  LY_LIST_FOR(tree, top) {
    if (!strcmp(LYD_NAME(top), "switch")) {
      out.set_switch_name(Value(Child(top, "name")));
      const lyd_node* st_node = Child(top, "statistics");
      const lyd_node* c;
      LY_LIST_FOR(lyd_child(st_node), c) {
        if (!strcmp(LYD_NAME(c), "global"))
          (*out.mutable_global())[Value(Child(c, "name"))] = U64(c, "value");
        if (!strcmp(LYD_NAME(c), "drop")) {
          auto* d = out.add_drops();
          d->set_reason(Value(Child(c, "reason")));
          d->set_packets(U64(c, "packets"));
        }
      }
      if (st_node) out.set_authorization_denials(U64(st_node, "authorization-denials"));
    }
    if (!strcmp(LYD_NAME(top), "trees")) {
      const lyd_node* t;
      LY_LIST_FOR(lyd_child(top), t) {
        const uint32_t id = static_cast<uint32_t>(U64(t, "id"));
        if (tree_id != 0 && id != tree_id) continue;
        const lyd_node* state = Child(t, "state");
        if (!state) continue;
        auto* tc = out.add_trees();
        tc->set_tree_id(id);
        Counters(Child(state, "counters"), tc->mutable_counters());
        const lyd_node* m;
        LY_LIST_FOR(lyd_child(state), m) {
          if (strcmp(LYD_NAME(m), "member") != 0) continue;
          auto* mc = out.add_members();
          mc->set_tree_id(id);
          mc->set_rank(static_cast<uint32_t>(U64(m, "rank")));
          mc->set_switch_qpn(static_cast<uint32_t>(U64(m, "switch-qpn")));
          Counters(Child(m, "counters"), mc->mutable_counters());
        }
      }
    }
  }
  lyd_free_all(tree);
  return out;
}

}  // namespace inc::am
