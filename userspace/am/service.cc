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

}  // namespace

grpc::Status AmService::JoinGroup(grpc::ServerContext* ctx, const v1::JoinGroupRequest* req,
                                  v1::JoinGroupResponse* resp) {
  auto a = m_->JoinGroup(*req, [ctx] { return ctx->IsCancelled(); });
  if (!a) return ToGrpcStatus(a.status());
  *resp->mutable_assignment() = std::move(*a);
  return grpc::Status::OK;
}

grpc::Status AmService::LeaveGroup(grpc::ServerContext*, const v1::LeaveGroupRequest* req,
                                   v1::LeaveGroupResponse*) {
  return ToGrpcStatus(m_->LeaveGroup(*req));
}

grpc::Status AmService::MemberHeartbeat(grpc::ServerContext*, const v1::MemberHeartbeatRequest* req,
                                        v1::MemberHeartbeatResponse* resp) {
  return Answer(m_->MemberHeartbeat(*req), resp);
}

grpc::Status AmService::ReportError(grpc::ServerContext*, const v1::ReportErrorRequest* req,
                                    v1::ReportErrorResponse*) {
  return ToGrpcStatus(m_->ReportError(*req));
}

grpc::Status AmService::RegisterSwitch(grpc::ServerContext*, const v1::RegisterSwitchRequest* req,
                                       v1::RegisterSwitchResponse* resp) {
  return Answer(m_->RegisterSwitch(*req), resp);
}

grpc::Status AmService::SwitchHeartbeat(grpc::ServerContext*, const v1::SwitchHeartbeatRequest* req,
                                        v1::SwitchHeartbeatResponse* resp) {
  return Answer(m_->SwitchHeartbeat(*req), resp);
}

grpc::Status AmService::ListSwitches(grpc::ServerContext*, const v1::ListSwitchesRequest*,
                                     v1::ListSwitchesResponse* resp) {
  *resp = m_->ListSwitches();
  return grpc::Status::OK;
}

grpc::Status AmService::GetSwitch(grpc::ServerContext*, const v1::GetSwitchRequest* req,
                                  v1::GetSwitchResponse* resp) {
  return Answer(m_->GetSwitch(*req), resp);
}

grpc::Status AmService::GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest*,
                                    v1::GetTopologyResponse* resp) {
  *resp = m_->GetTopology();
  return grpc::Status::OK;
}

grpc::Status AmService::CreateTree(grpc::ServerContext*, const v1::CreateTreeRequest* req,
                                   v1::CreateTreeResponse* resp) {
  return Answer(m_->CreateTree(*req), resp);
}

grpc::Status AmService::ListTrees(grpc::ServerContext*, const v1::ListTreesRequest*,
                                  v1::ListTreesResponse* resp) {
  *resp = m_->ListTrees();
  return grpc::Status::OK;
}

grpc::Status AmService::GetTree(grpc::ServerContext*, const v1::GetTreeRequest* req,
                                v1::GetTreeResponse* resp) {
  return Answer(m_->GetTree(*req), resp);
}

grpc::Status AmService::DestroyTree(grpc::ServerContext*, const v1::DestroyTreeRequest* req,
                                    v1::DestroyTreeResponse*) {
  return ToGrpcStatus(m_->DestroyTree(*req));
}

grpc::Status AmService::GetStats(grpc::ServerContext*, const v1::AmGetStatsRequest* req,
                                 v1::AmGetStatsResponse* resp) {
  return Answer(m_->GetStats(*req), resp);
}

grpc::Status AmService::WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                                    grpc::ServerWriter<v1::Event>* writer) {
  return ToGrpcStatus(m_->WatchEvents(
      *req, [ctx] { return ctx->IsCancelled(); }, [writer](const v1::Event& e) { return writer->Write(e); }));
}

}  // namespace inc::am
