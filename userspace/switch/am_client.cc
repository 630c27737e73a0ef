// SPDX-License-Identifier: Apache-2.0
#include "switch/am_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "common/rpc_status.h"

namespace inc::sw {
namespace {

std::chrono::system_clock::time_point Deadline(uint32_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

AmClient::AmClient(Agent* agent, AmClientOptions options) : agent_(agent), options_(std::move(options)) {
  NewChannel();
  heartbeat_ms_ = options_.default_heartbeat_ms;
}

void AmClient::NewChannel() {
  grpc::ChannelArguments args;
  // Reconnect quickly once the AM is back instead of gRPC's default backoff
  // of up to two minutes: our own loop paces the retries.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.min_backoff_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.min_backoff_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff_ms));
  // Not the connection (and back-off) of an earlier channel to the same AM.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(
      options_.am_address, options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(),
      args);
  stub_ = v1::AggregationManager::NewStub(channel_);
}

AmClient::~AmClient() {
  Stop();
}

void AmClient::Start() {
  thread_ = std::thread([this] { Run(); });
}

void AmClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AmClient::Nudge() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nudged_ = true;
  }
  cv_.notify_all();
}

bool AmClient::Wait(uint32_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stop_ || nudged_; });
  nudged_ = false;
  return stop_;
}

bool AmClient::Register(uint32_t attempt) {
  v1::RegisterSwitchRequest req = agent_->BuildRegister(options_.agent_address);
  v1::RegisterSwitchResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(options_.rpc_timeout_ms));
  grpc::Status st = stub_->RegisterSwitch(&ctx, req, &resp);
  if (!st.ok()) {
    LOG_WARN << "RegisterSwitch with AM " << options_.am_address << " failed (attempt " << attempt
             << "): " << FromGrpcStatus(st).ToString();
    return false;
  }
  heartbeat_ms_ = resp.heartbeat_interval_ms() ? resp.heartbeat_interval_ms() : options_.default_heartbeat_ms;
  std::string trees;
  for (uint32_t id : req.live_tree_ids()) trees += (trees.empty() ? "" : ",") + std::to_string(id);
  LOG_INFO << "registered with AM " << options_.am_address << " as " << req.switch_name()
           << " (agent address " << options_.agent_address << ", " << req.ports_size()
           << " ports, live trees " << (trees.empty() ? "none" : trees) << "); heartbeat every "
           << heartbeat_ms_ << " ms";
  registered_ = true;
  registrations_++;
  heartbeat_failures_ = 0;
  return true;
}

bool AmClient::Heartbeat() {
  v1::SwitchHeartbeatRequest req = agent_->BuildHeartbeat();
  v1::SwitchHeartbeatResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(std::min(options_.rpc_timeout_ms, std::max<uint32_t>(heartbeat_ms_, 500))));
  grpc::Status st = stub_->SwitchHeartbeat(&ctx, req, &resp);
  if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
    LOG_WARN << "AM does not know switch " << req.switch_name() << " (" << st.error_message()
             << "): registering again";
    return false;
  }
  if (!st.ok()) {
    // The AM may be restarting: keep heartbeating; a restarted AM answers
    // reregister=true. Log the first failure and then every tenth.
    if (heartbeat_failures_++ % 10 == 0) {
      LOG_WARN << "SwitchHeartbeat to AM " << options_.am_address << " failed (" << heartbeat_failures_
               << " in a row): " << FromGrpcStatus(st).ToString();
    }
    // The next heartbeat goes over a new channel, which connects at once: a
    // channel that saw the AM go away fails every call until its reconnect
    // back-off (growing to max_backoff_ms while the AM is away) runs out, and
    // a restarted AM declares a restored switch lost, failing its trees, if
    // it does not register within the AM's switch heartbeat timeout.
    NewChannel();
    return true;
  }
  if (heartbeat_failures_) {
    LOG_INFO << "AM " << options_.am_address << " answers heartbeats again";
    heartbeat_failures_ = 0;
  }
  if (resp.reregister()) {
    LOG_INFO << "AM asked switch " << req.switch_name() << " to register again (AM restarted?)";
    return false;
  }
  LOG_DEBUG << "heartbeat sent: " << req.ports_size() << " ports, " << req.free_slots() << " free slots, "
            << req.live_tree_ids_size() << " live trees";
  return true;
}

void AmClient::Run() {
  LOG_INFO << "AM client: registering with " << options_.am_address;
  uint32_t attempt = 0;
  uint32_t backoff = options_.min_backoff_ms;
  for (;;) {
    if (!registered_) {
      if (Register(++attempt)) {
        attempt = 0;
        backoff = options_.min_backoff_ms;
        if (Wait(heartbeat_ms_)) break;
      } else {
        LOG_INFO << "next RegisterSwitch attempt in " << backoff << " ms";
        if (Wait(backoff)) break;
        backoff = std::min(backoff * 2, options_.max_backoff_ms);
      }
      continue;
    }
    if (!Heartbeat()) {
      registered_ = false;
      continue;
    }
    if (Wait(heartbeat_ms_)) break;
  }
  LOG_INFO << "AM client stopped";
}

}  // namespace inc::sw
