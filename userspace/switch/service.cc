// SPDX-License-Identifier: Apache-2.0
#include "switch/service.h"

#include "common/log.h"
#include "common/rpc_status.h"

namespace inc::sw {
namespace {

// Programming trees is the AM's alone; reading state is for the AM and
// operators (incinctl switch show, arn status, credit show).
constexpr std::initializer_list<Role> kProgrammers = {Role::kAm};
constexpr std::initializer_list<Role> kReaders = {Role::kAm, Role::kOperator};

}  // namespace

grpc::Status SwitchAgentService::GetCapabilities(grpc::ServerContext* ctx, const v1::GetCapabilitiesRequest*,
                                                 v1::GetCapabilitiesResponse* resp) {
  LOG_DEBUG << "GetCapabilities from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "GetCapabilities", kReaders); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(agent_->GetCapabilities(resp));
}

grpc::Status SwitchAgentService::ConfigureTree(grpc::ServerContext* ctx, const v1::ConfigureTreeRequest* req,
                                               v1::ConfigureTreeResponse* resp) {
  LOG_DEBUG << "ConfigureTree tree " << req->tree().tree_id() << " from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "ConfigureTree", kProgrammers); !st.ok()) return ToGrpcStatus(st);
  if (!req->has_tree()) return ToGrpcStatus(InvalidArgument("ConfigureTreeRequest.tree is required"));
  auto changed = agent_->ConfigureTree(req->tree());
  if (!changed.ok()) return ToGrpcStatus(changed.status());
  resp->set_changed(*changed);
  return grpc::Status::OK;
}

grpc::Status SwitchAgentService::RemoveTree(grpc::ServerContext* ctx, const v1::RemoveTreeRequest* req,
                                            v1::RemoveTreeResponse* resp) {
  LOG_DEBUG << "RemoveTree tree " << req->tree_id() << " from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "RemoveTree", kProgrammers); !st.ok()) return ToGrpcStatus(st);
  auto existed = agent_->RemoveTree(req->tree_id());
  if (!existed.ok()) return ToGrpcStatus(existed.status());
  resp->set_existed(*existed);
  return grpc::Status::OK;
}

grpc::Status SwitchAgentService::GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest* req,
                                          v1::GetStatsResponse* resp) {
  LOG_DEBUG << "GetStats tree " << req->tree_id() << " from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "GetStats", kReaders); !st.ok()) return ToGrpcStatus(st);
  auto stats = agent_->GetStats(req->tree_id());
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  *resp->mutable_stats() = std::move(*stats);
  resp->mutable_stats()->set_authorization_denials(authz_->denials());
  return grpc::Status::OK;
}

grpc::Status SwitchAgentService::Health(grpc::ServerContext* ctx, const v1::HealthRequest*,
                                        v1::HealthResponse* resp) {
  LOG_DEBUG << "Health from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "Health", kReaders); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(agent_->Health(resp));
}

grpc::Status SwitchAgentService::GetArnStatus(grpc::ServerContext* ctx, const v1::GetArnStatusRequest*,
                                              v1::ArnStatus* resp) {
  LOG_DEBUG << "GetArnStatus from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "GetArnStatus", kReaders); !st.ok()) return ToGrpcStatus(st);
  if (!routing_) {
    resp->set_switch_name(agent_->name());
    resp->set_enabled(false);  // no routes, no ARN: everything is kernel-routed
    return grpc::Status::OK;
  }
  *resp = routing_->Report();
  return grpc::Status::OK;
}

grpc::Status SwitchAgentService::GetCreditStatus(grpc::ServerContext* ctx, const v1::GetCreditStatusRequest*,
                                                 v1::CreditStatus* resp) {
  LOG_DEBUG << "GetCreditStatus from " << ctx->peer();
  if (Status st = authz_->AllowRoles(*ctx, "GetCreditStatus", kReaders); !st.ok()) return ToGrpcStatus(st);
  if (!credit_) {
    resp->set_switch_name(agent_->name());
    resp->set_enabled(false);
    return grpc::Status::OK;
  }
  *resp = credit_->Report();
  return grpc::Status::OK;
}

}  // namespace inc::sw
