// SPDX-License-Identifier: Apache-2.0
// AM -> switch agent calls (SwitchAgent service), one cached channel per agent
// address, each call bounded by a deadline. The AM's edge toward its
// switches: tree configs are translated to messages here.
#pragma once

#include <grpcpp/security/credentials.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "am/model.h"
#include "am/netconf_client.h"
#include "common/status.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc::am {

class SwitchClients {
 public:
  // credentials: how to dial the agents (null = plaintext).
  SwitchClients(uint32_t timeout_ms, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : timeout_ms_(timeout_ms),
        credentials_(credentials ? std::move(credentials) : grpc::InsecureChannelCredentials()) {}
  Status Configure(const std::string& address, const TreeConfig& tree);
  Status Remove(const std::string& address, uint32_t tree_id);
  Expected<v1::SwitchStats> Stats(const std::string& address, uint32_t tree_id);
  // Starts connecting to an agent so that the first tree does not pay for it.
  void Connect(const std::string& address);
  // Replaces the channel to an agent by a new one and starts connecting it:
  // an agent that registers may have just restarted, and the old channel may
  // then be waiting out gRPC's reconnect back-off (calls fail UNAVAILABLE
  // meanwhile). Calls in flight finish on the old channel.
  // Over NETCONF, certificate_pem (the switch's verified certificate) gives
  // the SSH host key the switch must present from now on.
  void Reconnect(const std::string& address, const std::string& certificate_pem = "");
  // From now on Configure, Remove and Stats go over NETCONF (docs/netconf.md)
  // to the same switches; call before the AM serves.
  void UseNetconf(std::shared_ptr<NetconfSwitchClient> netconf) { netconf_ = std::move(netconf); }

 private:
  std::shared_ptr<v1::SwitchAgent::Stub> StubFor(const std::string& address);
  void SetDeadline(grpc::ClientContext* ctx) const;

  uint32_t timeout_ms_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  std::map<std::string, std::shared_ptr<v1::SwitchAgent::Stub>> stubs_;
  std::shared_ptr<NetconfSwitchClient> netconf_;
};

}  // namespace inc::am
