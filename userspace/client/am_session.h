// SPDX-License-Identifier: Apache-2.0
// A Communicator's membership at the aggregation manager: JoinGroup (which
// yields the tree assignment), member heartbeats on a thread of their own
// (which abort the engine when the AM reports the tree failed or
// destroyed), error reports when the engine gives up, and LeaveGroup at the
// end. Kept apart from the collectives so that the gRPC side of libinc can
// be read, and changed, on its own.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/communicator.h"
#include "common/status.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc::client {

class Engine;

// The assignment in a JoinGroup answer (or in its JSON form).
Assignment AssignmentFromProto(const inc::v1::MemberAssignment& a);

class AmSession {
 public:
  // A channel to options.am_address, connected by the first call. The
  // options are those of this member (with several ranks per host: the
  // host's rank and world).
  AmSession(const CommunicatorOptions& options, std::shared_ptr<grpc::ChannelCredentials> credentials);
  ~AmSession();  // Close()
  AmSession(const AmSession&) = delete;
  AmSession& operator=(const AmSession&) = delete;

  // JoinGroup for this member, reachable at `member`; blocks until every
  // rank joined (or the AM's join timeout). host_ranks and total_ranks
  // describe the job's ranks behind this member when there are several
  // per host (else empty and 0).
  Expected<Assignment> Join(const std::string& credential, const inc::v1::MemberInfo& member,
                            const std::vector<uint32_t>& host_ranks, uint32_t total_ranks);
  bool joined() const { return joined_; }

  // Heartbeats for tree_id every interval_ms (0: every second) until
  // Close(); a tree the AM reports failed or destroyed aborts `engine`.
  void StartHeartbeats(uint32_t tree_id, uint32_t interval_ms, Engine* engine);
  // Tells the AM that this rank gave up on message msg_id after `timeouts`.
  void ReportError(uint32_t tree_id, uint32_t msg_id, uint32_t timeouts, const std::string& error);
  // The communicator is being destroyed: a tree destroyed from now on is
  // the normal end of a job, not a warning.
  void SetLingering() { lingering_.store(true); }
  // Stops the heartbeats, then leaves the group if Join succeeded. Once.
  void Close();

  uint64_t heartbeats_failed() const { return hb_failed_.load(); }
  std::string tree_state() const;  // from the last heartbeat answer

 private:
  std::unique_ptr<inc::v1::AggregationManager::Stub> FreshStub() const;
  void Heartbeats(uint32_t tree_id, uint32_t interval_ms, Engine* engine);
  void OnHeartbeatReply(const inc::v1::MemberHeartbeatResponse& resp, uint32_t tree_id, Engine* engine);
  void Leave();

  const CommunicatorOptions opt_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;  // TLS or plaintext, as the options say
  std::unique_ptr<inc::v1::AggregationManager::Stub> am_;
  bool joined_ = false;  // JoinGroup succeeded: leave in Close()

  std::thread hb_thread_;
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::atomic<uint64_t> hb_failed_{0};
  std::atomic<bool> lingering_{false};
  mutable std::mutex state_mu_;
  std::string tree_state_ = "ACTIVE";
  uint32_t tree_generation_ = 0;  // heartbeat thread only
};

}  // namespace inc::client
