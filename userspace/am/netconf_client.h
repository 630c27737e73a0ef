// SPDX-License-Identifier: Apache-2.0
// The AM's NETCONF edge toward its switches (docs/netconf.md): configure and
// remove trees with edit-config of the incin-switch module, read stats with
// get, over SSH with the AM's key (libnetconf2 client). Used by
// SwitchClients instead of the SwitchAgent gRPC calls when the AM config
// says netconf.enabled; switch registration and heartbeats stay gRPC.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "inc/v1/inc.pb.h"

struct nc_session;
struct ly_ctx;

namespace inc::am {

struct NetconfClientOptions {
  uint32_t port = 830;              // the switches' NETCONF port; host = the agent address's
  std::string private_key;          // PEM private key (the AM's)
  std::string username = "incamd";  // NetconfClientOptionsFromConfig: the CN of tls.cert
  uint32_t timeout_ms = 3000;
  // Each switch must present the key of the certificate it registered with
  // as its SSH host key; off only in plaintext ("insecure": no certificates).
  bool verify_host_keys = true;
  std::string yang_dir;  // empty = installed, else the source tree's
};

// From AmConfig: the netconf fields with defaults (private key: tls.key);
// errors name the field.
Expected<NetconfClientOptions> NetconfClientOptionsFromConfig(const v1::AmConfig& config);

class NetconfSwitchClient {
 public:
  static Expected<std::unique_ptr<NetconfSwitchClient>> Create(NetconfClientOptions options);
  ~NetconfSwitchClient();
  NetconfSwitchClient(const NetconfSwitchClient&) = delete;
  NetconfSwitchClient& operator=(const NetconfSwitchClient&) = delete;

  // agent_address is the switch's SwitchAgent address (host:port); the
  // NETCONF server is on the same host at options.port. Errors carry the
  // switch's rpc-error message; data-missing is NOT_FOUND, invalid-value
  // INVALID_ARGUMENT, resource-denied RESOURCE_EXHAUSTED.
  Status Configure(const std::string& agent_address, const v1::TreeConfig& tree);
  Status Remove(const std::string& agent_address, uint32_t tree_id);
  Expected<v1::SwitchStats> Stats(const std::string& agent_address, uint32_t tree_id);
  // Drops the session to a switch (it re-registered: it may have restarted).
  void Forget(const std::string& agent_address);
  // The switch at agent_address registered with certificate_pem: its SSH
  // host key must be that certificate's key (incswitchd's default host key
  // is its TLS key). An empty or unusable certificate forgets the key, and
  // with verify_host_keys the switch is then refused until it registers.
  void ExpectHostKey(const std::string& agent_address, const std::string& certificate_pem);
  // libnetconf2's host-key check (public for its C callback).
  bool HostKeyMatches(const std::string& host, const std::string& presented_base64);

  const NetconfClientOptions& options() const { return options_; }

 private:
  explicit NetconfSwitchClient(NetconfClientOptions options) : options_(std::move(options)) {}
  Status Init();
  Expected<nc_session*> SessionFor(const std::string& agent_address);
  // Sends an edit-config or get; *data gets get's <data> content as XML.
  Status Call(const std::string& agent_address, bool edit, const std::string& content, std::string* data);
  void Drop(const std::string& agent_address);
  std::mutex host_keys_mu_;                       // not mu_: the check runs inside a Call's connect
  std::map<std::string, std::string> host_keys_;  // host -> base64 SSH key blob

  NetconfClientOptions options_;
  std::string pubkey_path_;
  ly_ctx* ctx_ = nullptr;       // incin-switch, for building edits and reading replies
  void* thread_ctx_ = nullptr;  // libnetconf2's client options, shared by the calling threads
  std::mutex mu_;               // one call at a time (libnetconf2 client state)
  std::map<std::string, nc_session*> sessions_;
};

}  // namespace inc::am
