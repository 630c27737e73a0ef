#include "am/service.h"

#include "common/rpc_status.h"

namespace inc::am {
namespace {

template <typename T, typename R>
grpc::Status Answer(Expected<T> result, R* resp) {
  if (!result) return ToGrpcStatus(result.status());
  *resp = std::move(*result);
  return grpc::Status::OK;
}

// Operators inspect and manage; the AM itself never calls its own service.
constexpr std::initializer_list<Role> kOperators = {Role::kOperator};

// Job ids of credentials: what fits a log line and an MPI launcher's variable.
constexpr size_t kMaxJobIdLength = 200;

#define INC_AUTHORIZE(expr)                                                                   \
  do {                                                                                        \
    if (::inc::Status inc_authz_ = (expr); !inc_authz_.ok()) return ToGrpcStatus(inc_authz_); \
  } while (0)

}  // namespace

std::optional<std::string> AmService::HostIp(const std::string& host) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!host_ips_) {
    host_ips_.emplace();
    const v1::GetTopologyResponse topology = m_->GetTopology();
    for (const v1::TopologyNode& n : topology.nodes()) {
      if (n.kind() == "host") (*host_ips_)[n.name()] = n.ports_size() ? n.ports(0).ip() : "";
    }
  }
  auto it = host_ips_->find(host);
  if (it == host_ips_->end()) return std::nullopt;
  return it->second;
}

Status AmService::AllowMemberOfRank(const grpc::ServerContext& ctx, const char* method,
                                    const std::string& job_id, uint32_t rank) {
  std::string joined_host;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = rank_hosts_.find({job_id, rank});
    if (it != rank_hosts_.end()) joined_host = it->second;
  }
  return authz_->AllowMemberAs(ctx, method, joined_host);
}

grpc::Status AmService::JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                                  v1::JoinGroupResponse* resp) {
  INC_AUTHORIZE(authz_->AllowMemberJoin(*ctx, "JoinGroup", {req->member().host(), req->member().ip()},
                                        [this](const std::string& h) { return HostIp(h); }));
  if (job_credentials_) {
    INC_AUTHORIZE(authz_->AllowJobCredential(*ctx, "JoinGroup", req->job_id(), req->job_credential(),
                                             *job_credentials_));
  }
  auto a = m_->JoinGroup(*req, [ctx] { return ctx->IsCancelled(); });
  if (!a) return ToGrpcStatus(a.status());
  if (authz_->enforcing()) {
    if (auto peer = authz_->Identify(*ctx); peer.ok()) {
      std::lock_guard<std::mutex> lk(mu_);
      rank_hosts_[{req->job_id(), req->rank()}] = peer->name;
    }
  }
  *resp->mutable_assignment() = std::move(*a);
  return grpc::Status::OK;
}

grpc::Status AmService::LeaveGroup(grpc::ServerContext* ctx, const v1::LeaveGroupRequest* req,
                                   v1::LeaveGroupResponse*) {
  INC_AUTHORIZE(AllowMemberOfRank(*ctx, "LeaveGroup", req->job_id(), req->rank()));
  Status st = m_->LeaveGroup(*req);
  if (st.ok()) {
    std::lock_guard<std::mutex> lk(mu_);
    rank_hosts_.erase({req->job_id(), req->rank()});
  }
  return ToGrpcStatus(st);
}

grpc::Status AmService::MemberHeartbeat(grpc::ServerContext* ctx, const v1::MemberHeartbeatRequest* req,
                                        v1::MemberHeartbeatResponse* resp) {
  INC_AUTHORIZE(AllowMemberOfRank(*ctx, "MemberHeartbeat", req->job_id(), req->rank()));
  return Answer(m_->MemberHeartbeat(*req), resp);
}

grpc::Status AmService::ReportError(grpc::ServerContext* ctx, const v1::ReportErrorRequest* req,
                                    v1::ReportErrorResponse*) {
  INC_AUTHORIZE(AllowMemberOfRank(*ctx, "ReportError", req->job_id(), req->rank()));
  return ToGrpcStatus(m_->ReportError(*req));
}

grpc::Status AmService::RegisterSwitch(grpc::ServerContext* ctx, const v1::RegisterSwitchRequest* req,
                                       v1::RegisterSwitchResponse* resp) {
  INC_AUTHORIZE(authz_->AllowSwitch(*ctx, "RegisterSwitch", req->switch_name()));
  return Answer(m_->RegisterSwitch(*req), resp);
}

grpc::Status AmService::SwitchHeartbeat(grpc::ServerContext* ctx, const v1::SwitchHeartbeatRequest* req,
                                        v1::SwitchHeartbeatResponse* resp) {
  INC_AUTHORIZE(authz_->AllowSwitch(*ctx, "SwitchHeartbeat", req->switch_name()));
  return Answer(m_->SwitchHeartbeat(*req), resp);
}

grpc::Status AmService::ListSwitches(grpc::ServerContext* ctx, const v1::ListSwitchesRequest*,
                                     v1::ListSwitchesResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "ListSwitches", kOperators));
  *resp = m_->ListSwitches();
  return grpc::Status::OK;
}

grpc::Status AmService::GetSwitch(grpc::ServerContext* ctx, const v1::GetSwitchRequest* req,
                                  v1::GetSwitchResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetSwitch", kOperators));
  return Answer(m_->GetSwitch(*req), resp);
}

grpc::Status AmService::GetTopology(grpc::ServerContext* ctx, const v1::GetTopologyRequest*,
                                    v1::GetTopologyResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetTopology", kOperators));
  *resp = m_->GetTopology();
  return grpc::Status::OK;
}

grpc::Status AmService::CreateTree(grpc::ServerContext* ctx, const v1::CreateTreeRequest* req,
                                   v1::CreateTreeResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "CreateTree", kOperators));
  return Answer(m_->CreateTree(*req), resp);
}

grpc::Status AmService::ListTrees(grpc::ServerContext* ctx, const v1::ListTreesRequest*,
                                  v1::ListTreesResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "ListTrees", kOperators));
  *resp = m_->ListTrees();
  return grpc::Status::OK;
}

grpc::Status AmService::GetTree(grpc::ServerContext* ctx, const v1::GetTreeRequest* req,
                                v1::GetTreeResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetTree", kOperators));
  return Answer(m_->GetTree(*req), resp);
}

grpc::Status AmService::DestroyTree(grpc::ServerContext* ctx, const v1::DestroyTreeRequest* req,
                                    v1::DestroyTreeResponse*) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "DestroyTree", kOperators));
  return ToGrpcStatus(m_->DestroyTree(*req));
}

grpc::Status AmService::GetStats(grpc::ServerContext* ctx, const v1::AmGetStatsRequest* req,
                                 v1::AmGetStatsResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "GetStats", kOperators));
  auto stats = m_->GetStats(*req);
  if (stats) stats->set_authorization_denials(authz_->denials());
  return Answer(std::move(stats), resp);
}

grpc::Status AmService::WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                                    grpc::ServerWriter<v1::Event>* writer) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "WatchEvents", kOperators));
  return ToGrpcStatus(m_->WatchEvents(
      *req, [ctx] { return ctx->IsCancelled(); }, [writer](const v1::Event& e) { return writer->Write(e); }));
}

grpc::Status AmService::IssueJobCredential(grpc::ServerContext* ctx, const v1::IssueJobCredentialRequest* req,
                                           v1::IssueJobCredentialResponse* resp) {
  INC_AUTHORIZE(authz_->AllowRoles(*ctx, "IssueJobCredential", kOperators));
  if (!job_credentials_)
    return ToGrpcStatus(
        FailedPrecondition("this AM issues no job credentials (plaintext: JoinGroup needs none)"));
  if (req->job_id().empty()) return ToGrpcStatus(InvalidArgument("job_id is empty"));
  if (req->job_id().size() > kMaxJobIdLength)
    return ToGrpcStatus(InvalidArgument("job_id has " + std::to_string(req->job_id().size()) +
                                        " characters; at most " + std::to_string(kMaxJobIdLength)));
  resp->set_job_id(req->job_id());
  resp->set_credential(job_credentials_->Issue(req->job_id()));
  return grpc::Status::OK;
}

}  // namespace inc::am
