// SPDX-License-Identifier: Apache-2.0
#include "am/service.h"

#include <algorithm>
#include <chrono>

#include "am/convert.h"
#include "am/parallel.h"
#include "common/rpc_status.h"

namespace inc::am {
namespace {

// Operators inspect and manage; the AM itself never calls its own service.
constexpr std::initializer_list<Role> kOperators = {Role::kOperator};

// Job ids of credentials: what fits a log line and an MPI launcher's variable.
constexpr size_t kMaxJobIdLength = 200;

// A job id a credential may name: not empty, short enough for a log line and
// a launcher's variable.
Status CheckCredentialJobId(const std::string& job_id) {
  if (job_id.empty()) return InvalidArgument("job_id is empty");
  if (job_id.size() > kMaxJobIdLength)
    return InvalidArgument("job_id has " + std::to_string(job_id.size()) + " characters; at most " +
                           std::to_string(kMaxJobIdLength));
  return Status::Ok();
}

uint64_t UnixNowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

#define INC_AUTHORIZE(expr)                                                                   \
  do {                                                                                        \
    if (::inc::Status inc_authz_ = (expr); !inc_authz_.ok()) return ToGrpcStatus(inc_authz_); \
  } while (0)

}  // namespace

std::optional<std::string> AmService::HostIp(const std::string& host) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!host_ips_) {
    host_ips_.emplace();
    for (const TopologyView::Node& n : m_->GetTopology().nodes)
      if (n.kind == "host") (*host_ips_)[n.name] = n.host_ip ? n.host_ip->ToString() : "";
  }
  auto it = host_ips_->find(host);
  if (it == host_ips_->end()) return std::nullopt;
  return it->second;
}

Expected<std::optional<std::string>> AmService::MemberCaller(const grpc::ServerContext& ctx,
                                                             const char* method) {
  if (!authz_->enforcing()) return std::optional<std::string>();
  auto peer = authz_->Identify(ctx);
  INC_RETURN_IF_ERROR(authz_->CheckRoles(peer, method, {Role::kMember}));
  return std::optional<std::string>(peer->name);
}

grpc::Status AmService::MemberResult(const grpc::ServerContext& ctx, const char* method, const Status& st) {
  if (st.code() == Code::kPermissionDenied && authz_->enforcing())
    return ToGrpcStatus(authz_->Refuse(ctx, method, st));
  return ToGrpcStatus(st);
}

grpc::Status AmService::JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                                  v1::JoinGroupResponse* resp) {
  INC_AUTHORIZE(authz_->AllowMemberJoin(*ctx, "JoinGroup", {req->member().host(), req->member().ip()},
                                        [this](const std::string& h) { return HostIp(h); }));
  if (job_credentials_) {
    INC_AUTHORIZE(authz_->AllowJobCredential(*ctx, "JoinGroup", req->job_id(), req->job_credential(),
                                             *job_credentials_, UnixNowMs(),
                                             m_->JobRevokedAt(req->job_id())));
  }
  auto join = JoinFromProto(*req);
  if (!join) return ToGrpcStatus(join.status());
  if (authz_->enforcing()) {
    auto peer = authz_->Identify(*ctx);
    if (!peer) return ToGrpcStatus(peer.status());
    join->owner = peer->name;
  }
  auto a = m_->JoinGroup(*join, [ctx] { return ctx->IsCancelled(); });
  if (!a) return ToGrpcStatus(a.status());
  *resp->mutable_assignment() = AssignmentToProto(*a);
  return grpc::Status::OK;
}

grpc::Status AmService::LeaveGroup(grpc::ServerContext* ctx, const v1::LeaveGroupRequest* req,
                                   v1::LeaveGroupResponse*) {
  auto as = MemberCaller(*ctx, "LeaveGroup");
  if (!as) return ToGrpcStatus(as.status());
  return MemberResult(*ctx, "LeaveGroup", m_->LeaveGroup(req->job_id(), req->rank(), *as));
}

grpc::Status AmService::MemberHeartbeat(grpc::ServerContext* ctx, const v1::MemberHeartbeatRequest* req,
                                        v1::MemberHeartbeatResponse* resp) {
  auto as = MemberCaller(*ctx, "MemberHeartbeat");
  if (!as) return ToGrpcStatus(as.status());
  auto reply = m_->MemberHeartbeat({{req->tree_id(), req->job_id()}, req->rank(), *as});
  if (!reply) return MemberResult(*ctx, "MemberHeartbeat", reply.status());
  *resp = BeatReplyToProto(*reply);
  return grpc::Status::OK;
}

grpc::Status AmService::ReportError(grpc::ServerContext* ctx, const v1::ReportErrorRequest* req,
                                    v1::ReportErrorResponse*) {
  auto as = MemberCaller(*ctx, "ReportError");
  if (!as) return ToGrpcStatus(as.status());
  return MemberResult(*ctx, "ReportError",
                      m_->ReportError({{req->tree_id(), req->job_id()},
                                       req->rank(),
                                       req->error(),
                                       req->msg_id(),
                                       req->timeouts(),
                                       req->gave_up(),
                                       *as}));
}

grpc::Status AmService::RegisterSwitch(grpc::ServerContext* ctx, const v1::RegisterSwitchRequest* req,
                                       v1::RegisterSwitchResponse* resp) {
  INC_AUTHORIZE(authz_->AllowSwitch(*ctx, "RegisterSwitch", req->switch_name()));
  // An unknown switch hears that before anything about the rest of its request.
  if (Status known = m_->CheckSwitchName(req->switch_name()); !known.ok()) return ToGrpcStatus(known);
  auto reg = RegistrationFromProto(*req);
  if (!reg) return ToGrpcStatus(reg.status());
  reg->certificate_pem = PeerCertificatePem(*ctx);
  auto interval = m_->RegisterSwitch(*reg);
  if (!interval) return ToGrpcStatus(interval.status());
  resp->set_heartbeat_interval_ms(*interval);
  return grpc::Status::OK;
}

grpc::Status AmService::SwitchHeartbeat(grpc::ServerContext* ctx, const v1::SwitchHeartbeatRequest* req,
                                        v1::SwitchHeartbeatResponse* resp) {
  INC_AUTHORIZE(authz_->AllowSwitch(*ctx, "SwitchHeartbeat", req->switch_name()));
  auto beat = SwitchBeatFromProto(*req);
  if (!beat) return ToGrpcStatus(beat.status());
  auto reply = m_->SwitchHeartbeat(*beat);
  if (!reply) return ToGrpcStatus(reply.status());
  resp->set_reregister(reply->reregister);
  return grpc::Status::OK;
}

grpc::Status AmService::ListSwitches(grpc::ServerContext* ctx, const v1::ListSwitchesRequest*,
                                     v1::ListSwitchesResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "ListSwitches", kOperators));
  for (const SwitchSummary& s : m_->ListSwitches()) *resp->add_switches() = SummaryToProto(s);
  return grpc::Status::OK;
}

grpc::Status AmService::GetSwitch(grpc::ServerContext* ctx, const v1::GetSwitchRequest* req,
                                  v1::GetSwitchResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetSwitch", kOperators));
  auto s = m_->GetSwitch(req->name());
  if (!s) return ToGrpcStatus(s.status());
  *resp->mutable_switch_summary() = SummaryToProto(*s);
  return grpc::Status::OK;
}

grpc::Status AmService::GetTopology(grpc::ServerContext* ctx, const v1::GetTopologyRequest*,
                                    v1::GetTopologyResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetTopology", kOperators));
  *resp = TopologyToProto(m_->GetTopology());
  return grpc::Status::OK;
}

grpc::Status AmService::CreateTree(grpc::ServerContext* ctx, const v1::CreateTreeRequest* req,
                                   v1::CreateTreeResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "CreateTree", kOperators));
  auto create = CreateTreeFromProto(*req);
  if (!create) return ToGrpcStatus(create.status());
  auto tree = m_->CreateTree(*create);
  if (!tree) return ToGrpcStatus(tree.status());
  *resp->mutable_tree() = TreeToProto(*tree);
  return grpc::Status::OK;
}

grpc::Status AmService::ListTrees(grpc::ServerContext* ctx, const v1::ListTreesRequest*,
                                  v1::ListTreesResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "ListTrees", kOperators));
  for (const TreeInfo& t : m_->ListTrees()) *resp->add_trees() = TreeToProto(t);
  return grpc::Status::OK;
}

grpc::Status AmService::GetTree(grpc::ServerContext* ctx, const v1::GetTreeRequest* req,
                                v1::GetTreeResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetTree", kOperators));
  auto tree = m_->GetTree({req->tree_id(), req->job_id()});
  if (!tree) return ToGrpcStatus(tree.status());
  *resp->mutable_tree() = TreeToProto(*tree);
  return grpc::Status::OK;
}

grpc::Status AmService::DestroyTree(grpc::ServerContext* ctx, const v1::DestroyTreeRequest* req,
                                    v1::DestroyTreeResponse*) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "DestroyTree", kOperators));
  return ToGrpcStatus(m_->DestroyTree(req->tree_id(), req->reason()));
}

grpc::Status AmService::GetStats(grpc::ServerContext* ctx, const v1::AmGetStatsRequest* req,
                                 v1::AmGetStatsResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetStats", kOperators));
  auto targets = m_->StatsTargets(req->tree_id());
  if (!targets) return ToGrpcStatus(targets.status());
  // The switches' counters are relayed as they report them.
  std::vector<Expected<v1::SwitchStats>> results(targets->size(), Status(Code::kUnknown, ""));
  ParallelFor(targets->size(), kSwitchRpcWidth, [&](size_t i) {
    results[i] = m_->switch_clients().Stats((*targets)[i].agent_address, req->tree_id());
  });
  for (size_t i = 0; i < targets->size(); ++i) {
    if (results[i]) {
      v1::SwitchStats* s = resp->add_switches();
      *s = *results[i];
      if (s->switch_name().empty()) s->set_switch_name((*targets)[i].name);
    } else {
      resp->add_errors("switch " + (*targets)[i].name + ": " + results[i].status().ToString());
    }
  }
  resp->set_authorization_denials(authz_->denials());
  return grpc::Status::OK;
}

grpc::Status AmService::WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                                    grpc::ServerWriter<v1::Event>* writer) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "WatchEvents", kOperators));
  return ToGrpcStatus(m_->WatchEvents(
      {req->replay(), req->stop_after_replay()}, [ctx] { return ctx->IsCancelled(); },
      [writer](const Event& e) { return writer->Write(EventToProto(e)); }));
}

grpc::Status AmService::IssueJobCredential(grpc::ServerContext* ctx, const v1::IssueJobCredentialRequest* req,
                                           v1::IssueJobCredentialResponse* resp) {
  INC_AUTHORIZE(authz_->AllowOperatorForJob(*ctx, "IssueJobCredential", req->job_id()));
  if (!job_credentials_)
    return ToGrpcStatus(
        FailedPrecondition("this AM issues no job credentials (plaintext: JoinGroup needs none)"));
  if (Status st = CheckCredentialJobId(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  if (req->ttl_seconds() > kMaxCredentialTtlSeconds)
    return ToGrpcStatus(InvalidArgument("ttl_seconds " + std::to_string(req->ttl_seconds()) + " is above " +
                                        std::to_string(kMaxCredentialTtlSeconds) + " (7 days)"));
  JobCredentialClaims claims;
  claims.job = req->job_id();
  for (const std::string& h : req->hosts()) {
    if (Status st = CheckCredentialHost(h); !st.ok()) return ToGrpcStatus(st);
    if (!HostIp(h)) return ToGrpcStatus(InvalidArgument("hosts: '" + h + "' is not a host of the topology"));
    claims.hosts.push_back(h);
  }
  // Issued in the millisecond of a revocation would count as revoked.
  claims.issued_ms = std::max(UnixNowMs(), m_->JobRevokedAt(claims.job) + 1);
  const uint32_t ttl = req->ttl_seconds() ? req->ttl_seconds() : kDefaultCredentialTtlSeconds;
  claims.expires_ms = claims.issued_ms + 1000ull * ttl;
  auto credential = job_credentials_->Issue(claims);
  if (!credential) return ToGrpcStatus(credential.status());
  resp->set_job_id(req->job_id());
  resp->set_credential(*credential);
  resp->set_expires_unix_ms(claims.expires_ms);
  for (const auto& h : claims.hosts) resp->add_hosts(h);
  return grpc::Status::OK;
}

grpc::Status AmService::RevokeJobCredentials(grpc::ServerContext* ctx,
                                             const v1::RevokeJobCredentialsRequest* req,
                                             v1::RevokeJobCredentialsResponse* resp) {
  INC_AUTHORIZE(authz_->AllowOperatorForJob(*ctx, "RevokeJobCredentials", req->job_id()));
  if (Status st = CheckCredentialJobId(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  const uint64_t now = std::max(UnixNowMs(), m_->JobRevokedAt(req->job_id()) + 1);
  Status st = m_->RevokeJobCredentials(req->job_id(), now, now + 1000ull * kMaxCredentialTtlSeconds);
  if (!st.ok()) return ToGrpcStatus(st);
  resp->set_revoked_unix_ms(now);
  return grpc::Status::OK;
}

}  // namespace inc::am
