// SPDX-License-Identifier: Apache-2.0
// The AggregationManager gRPC service: the AM's edge. It authorizes each
// call by the caller's certificate (common/authz.h): members join as their
// own host and speak only for the ranks they joined as, switches register
// and heartbeat as themselves, operators do the rest; translates each
// message to the manager's domain types and back (convert.h); and turns
// inc::Status into grpc::Status.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "am/manager.h"
#include "common/authz.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc::am {

class AmService final : public v1::AggregationManager::Service {
 public:
  // authz null: no authorization (plaintext, in-process tests). With
  // job_credentials, an enforcing authz also requires JoinGroup to carry a
  // credential they issued for the job, and IssueJobCredential issues them.
  explicit AmService(Manager* manager, Authorizer* authz = nullptr,
                     const JobCredentials* job_credentials = nullptr)
      : m_(manager), authz_(authz ? authz : &allow_all_), job_credentials_(job_credentials) {}

  grpc::Status JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                         v1::JoinGroupResponse* resp) override;
  grpc::Status LeaveGroup(grpc::ServerContext* ctx, const v1::LeaveGroupRequest* req,
                          v1::LeaveGroupResponse* resp) override;
  grpc::Status MemberHeartbeat(grpc::ServerContext* ctx, const v1::MemberHeartbeatRequest* req,
                               v1::MemberHeartbeatResponse* resp) override;
  grpc::Status ReportError(grpc::ServerContext* ctx, const v1::ReportErrorRequest* req,
                           v1::ReportErrorResponse* resp) override;
  grpc::Status RegisterSwitch(grpc::ServerContext* ctx, const v1::RegisterSwitchRequest* req,
                              v1::RegisterSwitchResponse* resp) override;
  grpc::Status SwitchHeartbeat(grpc::ServerContext* ctx, const v1::SwitchHeartbeatRequest* req,
                               v1::SwitchHeartbeatResponse* resp) override;
  grpc::Status ListSwitches(grpc::ServerContext* ctx, const v1::ListSwitchesRequest* req,
                            v1::ListSwitchesResponse* resp) override;
  grpc::Status GetSwitch(grpc::ServerContext* ctx, const v1::GetSwitchRequest* req,
                         v1::GetSwitchResponse* resp) override;
  grpc::Status GetTopology(grpc::ServerContext* ctx, const v1::GetTopologyRequest* req,
                           v1::GetTopologyResponse* resp) override;
  grpc::Status CreateTree(grpc::ServerContext* ctx, const v1::CreateTreeRequest* req,
                          v1::CreateTreeResponse* resp) override;
  grpc::Status ListTrees(grpc::ServerContext* ctx, const v1::ListTreesRequest* req,
                         v1::ListTreesResponse* resp) override;
  grpc::Status GetTree(grpc::ServerContext* ctx, const v1::GetTreeRequest* req,
                       v1::GetTreeResponse* resp) override;
  grpc::Status DestroyTree(grpc::ServerContext* ctx, const v1::DestroyTreeRequest* req,
                           v1::DestroyTreeResponse* resp) override;
  grpc::Status GetStats(grpc::ServerContext* ctx, const v1::AmGetStatsRequest* req,
                        v1::AmGetStatsResponse* resp) override;
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                           grpc::ServerWriter<v1::Event>* writer) override;
  grpc::Status IssueJobCredential(grpc::ServerContext* ctx, const v1::IssueJobCredentialRequest* req,
                                  v1::IssueJobCredentialResponse* resp) override;
  grpc::Status RevokeJobCredentials(grpc::ServerContext* ctx, const v1::RevokeJobCredentialsRequest* req,
                                    v1::RevokeJobCredentialsResponse* resp) override;

  // Job credentials' lifetimes: the default and the longest an operator may
  // ask for (a revocation is kept that long).
  static constexpr uint32_t kDefaultCredentialTtlSeconds = 24 * 3600;
  static constexpr uint32_t kMaxCredentialTtlSeconds = 7 * 24 * 3600;

 private:
  // A topology host's data-path IP by name, for JoinGroup's check.
  std::optional<std::string> HostIp(const std::string& host);
  // A member's call for a rank: the caller has the member role, and the
  // host its certificate names (returned; nullopt when nothing is
  // authorized) is then checked by the manager against the host that
  // joined the rank, found by tree id or job, waiting or restored alike.
  Expected<std::optional<std::string>> MemberCaller(const grpc::ServerContext& ctx, const char* method);
  // A manager's PERMISSION_DENIED for a rank another host joined is a
  // denial like the others: logged and counted.
  grpc::Status MemberResult(const grpc::ServerContext& ctx, const char* method, const Status& st);

  Manager* m_;
  Authorizer allow_all_{false};
  Authorizer* authz_;
  const JobCredentials* job_credentials_;
  std::mutex mu_;
  std::optional<std::map<std::string, std::string>> host_ips_;  // from the topology, once
};

}  // namespace inc::am
