// SPDX-License-Identifier: Apache-2.0
// The agent's side of the AggregationManager protocol: RegisterSwitch with
// backoff until the AM answers, then SwitchHeartbeat at the interval the AM
// returned; registers again when the AM says it does not know the switch
// (reregister=true or NOT_FOUND, e.g. after an AM restart). Runs on its own
// thread; the agent keeps serving whatever the AM does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "inc/v1/inc.grpc.pb.h"
#include "switch/tree/agent.h"

namespace inc::sw {

struct AmClientOptions {
  std::string am_address;                // host:port or unix:/path
  std::string agent_address;             // what the AM dials back
  uint32_t default_heartbeat_ms = 1000;  // if the AM returns 0
  uint32_t min_backoff_ms = 200;
  uint32_t max_backoff_ms = 5000;
  uint32_t rpc_timeout_ms = 3000;
  // How to dial the AM (mTLS with this switch's certificate); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

class AmClient {
 public:
  AmClient(Agent* agent, AmClientOptions options);
  ~AmClient();  // stops the thread

  void Start();
  void Stop();
  // Heartbeat now (a port changed state).
  void Nudge();

  bool registered() const { return registered_; }
  uint64_t registrations() const { return registrations_; }

 private:
  void Run();
  bool Register(uint32_t attempt);
  // false if the AM asked this agent to register again.
  bool Heartbeat();
  // Waits up to ms or until Stop/Nudge; true if stopping.
  bool Wait(uint32_t ms);
  // A new channel and stub to the AM (after a failed heartbeat).
  void NewChannel();

  Agent* agent_;
  AmClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AggregationManager::Stub> stub_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool nudged_ = false;
  std::atomic<bool> registered_{false};
  std::atomic<uint64_t> registrations_{0};
  uint32_t heartbeat_ms_ = 1000;
  uint64_t heartbeat_failures_ = 0;
};

}  // namespace inc::sw
