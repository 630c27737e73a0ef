// SPDX-License-Identifier: Apache-2.0
// incswitchd's NETCONF front end (docs/netconf.md): libnetconf2 over SSH
// next to the SwitchAgent gRPC service, driving the same tree agent.
//   get            running trees + state (<switch>, each tree's <state>)
//   get-config     running (the only datastore; no candidate, no startup)
//   edit-config    trees: merge/replace/create/delete/remove on <trees> or a
//                  <tree>; the result is validated by libyang against the
//                  module and by the agent, all or nothing
//   lock/unlock    of running
//   create-subscription  the NETCONF stream: tree-created, tree-removed,
//                  link-event
// SSH public-key authentication only: the host key is the switch's private
// key, the clients the holders of the authorized certificates' keys (am,
// operator roles may read and write) or of authorized_keys' (operator).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "netconf/ssh_keys.h"
#include "netconf/yang_data.h"
#include "switch/credit/credit_agent.h"
#include "switch/routing/routing_agent.h"
#include "switch/tree/agent.h"

struct nc_session;
struct nc_server_reply;
struct nc_pollsession;

namespace inc::sw::netconf {

struct NetconfOptions {
  std::string listen;    // "host:port"
  std::string host_key;  // PEM private key file
  std::vector<AuthorizedKey> authorized;
  std::string yang_dir;  // FindYangDir()'s answer
  std::string management_address;
  uint32_t arn_switch_id = 0;
  uint64_t credit_reserve_bytes = 0;
};

// The options from the switch config: listen, host key (default tls.key),
// authorized certificates and keys; errors name the field.
Expected<NetconfOptions> NetconfOptionsFromConfig(const v1::SwitchAgentConfig& config);

class NetconfServer {
 public:
  // One per process (libnetconf2's server state is global).
  static Expected<std::unique_ptr<NetconfServer>> Start(NetconfOptions options, Agent* agent,
                                                        const RoutingAgent* routing,
                                                        const CreditAgent* credit);
  ~NetconfServer();
  NetconfServer(const NetconfServer&) = delete;
  NetconfServer& operator=(const NetconfServer&) = delete;

  // Ends every session and stops listening; idempotent.
  void Stop();

  struct Identity {
    Role role = Role::kOperator;
    std::string name;
  };

 private:
  NetconfServer(NetconfOptions options, Agent* agent, const RoutingAgent* routing, const CreditAgent* credit)
      : options_(std::move(options)), agent_(agent), routing_(routing), credit_(credit) {}
  Status Init();
  void Run();
  void AcceptLoop();
  void CheckEvents(bool first);
  void Notify(lyd_node* event);
  void EndSession(nc_session* session);

  static nc_server_reply* Dispatch(lyd_node* rpc, nc_session* session);
  nc_server_reply* Get(lyd_node* rpc, bool config_only);
  nc_server_reply* EditConfig(lyd_node* rpc, nc_session* session);
  // The steps of EditConfig. Each returns nothing to go on, or the reply
  // that ends the RPC (an error; null when even that could not be built).
  using Refusal = std::optional<nc_server_reply*>;
  struct EditRequest {
    std::string default_op;
    LydTree edit;  // the <trees> containers of <config>; null: an empty edit
  };
  Refusal ParseEdit(lyd_node* rpc, nc_session* session, EditRequest* out);
  Refusal EditedTrees(const EditRequest& request, const std::map<uint16_t, v1::TreeConfig>& current,
                      LydTree* out);
  Refusal WantedTrees(LydTree edited, std::map<uint16_t, v1::TreeConfig>* wanted);
  Refusal ApplyTrees(const std::map<uint16_t, v1::TreeConfig>& current,
                     const std::map<uint16_t, v1::TreeConfig>& wanted, uint32_t sid);
  nc_server_reply* Lock(nc_session* session, bool lock);
  nc_server_reply* Subscribe(lyd_node* rpc, nc_session* session);
  nc_server_reply* Error(int tag, const std::string& message, const std::string& path = "",
                         const std::string& elem = "");
  nc_server_reply* FromStatus(const Status& st, const std::string& path);
  Expected<LydTree> Datastore(bool with_state);

  NetconfOptions options_;
  Agent* agent_;
  const RoutingAgent* routing_;
  const CreditAgent* credit_;
  LyCtx ctx_;
  nc_pollsession* ps_ = nullptr;
  bool nc_initialized_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;         // serves the sessions (Run)
  std::thread accept_thread_;  // accepts new ones (AcceptLoop)
  uint32_t lock_sid_ = 0;      // session holding the running lock, 0 = none
  // Seen by the event check: trees in the data path, port link state,
  // ARN link conditions.
  std::set<uint32_t> trees_seen_;
  std::map<std::string, bool> ports_seen_;
  std::map<std::string, std::string> arn_seen_;
};

}  // namespace inc::sw::netconf
