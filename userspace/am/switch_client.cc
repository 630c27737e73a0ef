// SPDX-License-Identifier: Apache-2.0
#include "am/switch_client.h"

#include <chrono>

#include "am/convert.h"
#include "common/rpc_status.h"

namespace inc::am {

namespace {

// Agents are few and near: retry a lost connection within a second rather
// than after gRPC's default back-off of up to two minutes.
constexpr int kReconnectBackoffMs = 100;
constexpr int kMaxReconnectBackoffMs = 1000;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC takes it as the least time a
  // connection attempt may last, too short for a loaded host.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  // Without this, a new channel to the same address shares the old one's
  // subchannel, back-off included, and Reconnect would gain nothing.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace

std::shared_ptr<v1::SwitchAgent::Stub> SwitchClients::StubFor(const std::string& address) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    auto channel = NewChannel(address, credentials_);
    channels_[address] = channel;
    stub = v1::SwitchAgent::NewStub(channel);
  }
  return stub;
}

void SwitchClients::Connect(const std::string& address) {
  if (netconf_) return;  // connects on the first call
  StubFor(address);
  std::lock_guard<std::mutex> lk(mu_);
  channels_.at(address)->GetState(/*try_to_connect=*/true);
}

void SwitchClients::Reconnect(const std::string& address, const std::string& certificate_pem) {
  if (netconf_) {
    netconf_->Forget(address);
    netconf_->ExpectHostKey(address, certificate_pem);
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto channel = NewChannel(address, credentials_);
  channels_[address] = channel;
  stubs_[address] = v1::SwitchAgent::NewStub(channel);
  channel->GetState(/*try_to_connect=*/true);
}

void SwitchClients::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
}

Status SwitchClients::Configure(const std::string& address, const TreeConfig& tree) {
  if (netconf_) return netconf_->Configure(address, TreeConfigToProto(tree));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ConfigureTreeRequest req;
  *req.mutable_tree() = TreeConfigToProto(tree);
  v1::ConfigureTreeResponse resp;
  return FromGrpcStatus(StubFor(address)->ConfigureTree(&ctx, req, &resp), "ConfigureTree at " + address);
}

Status SwitchClients::Remove(const std::string& address, uint32_t tree_id) {
  if (netconf_) return netconf_->Remove(address, tree_id);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::RemoveTreeRequest req;
  req.set_tree_id(tree_id);
  v1::RemoveTreeResponse resp;
  return FromGrpcStatus(StubFor(address)->RemoveTree(&ctx, req, &resp), "RemoveTree at " + address);
}

Expected<v1::SwitchStats> SwitchClients::Stats(const std::string& address, uint32_t tree_id) {
  if (netconf_) return netconf_->Stats(address, tree_id);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStatsRequest req;
  req.set_tree_id(tree_id);
  v1::GetStatsResponse resp;
  Status s = FromGrpcStatus(StubFor(address)->GetStats(&ctx, req, &resp), "GetStats at " + address);
  if (!s.ok()) return s;
  return resp.stats();
}

}  // namespace inc::am
