// SPDX-License-Identifier: Apache-2.0
// The SwitchAgent gRPC service: a thin edge over Agent that turns inc::Status
// into gRPC status codes, logs each call and authorizes it by the caller's
// certificate: only the AM programs trees; the AM and operators may look.
#pragma once

#include "common/authz.h"
#include "inc/v1/inc.grpc.pb.h"
#include "switch/credit/credit_agent.h"
#include "switch/routing/routing_agent.h"
#include "switch/tree/agent.h"

namespace inc::sw {

class SwitchAgentService final : public v1::SwitchAgent::Service {
 public:
  // routing may be null (no routes and no ARN configured), credit too (credit
  // flow control off), authz too (no authorization: plaintext, tests).
  SwitchAgentService(Agent* agent, const RoutingAgent* routing, const CreditAgent* credit = nullptr,
                     Authorizer* authz = nullptr)
      : agent_(agent), routing_(routing), credit_(credit), authz_(authz ? authz : &allow_all_) {}

  grpc::Status GetCapabilities(grpc::ServerContext* ctx, const v1::GetCapabilitiesRequest* req,
                               v1::GetCapabilitiesResponse* resp) override;
  grpc::Status ConfigureTree(grpc::ServerContext* ctx, const v1::ConfigureTreeRequest* req,
                             v1::ConfigureTreeResponse* resp) override;
  grpc::Status RemoveTree(grpc::ServerContext* ctx, const v1::RemoveTreeRequest* req,
                          v1::RemoveTreeResponse* resp) override;
  grpc::Status GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest* req,
                        v1::GetStatsResponse* resp) override;
  grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest* req,
                      v1::HealthResponse* resp) override;
  grpc::Status GetArnStatus(grpc::ServerContext* ctx, const v1::GetArnStatusRequest* req,
                            v1::ArnStatus* resp) override;
  grpc::Status GetCreditStatus(grpc::ServerContext* ctx, const v1::GetCreditStatusRequest* req,
                               v1::CreditStatus* resp) override;

 private:
  Agent* agent_;
  const RoutingAgent* routing_;
  const CreditAgent* credit_;
  Authorizer allow_all_{false};
  Authorizer* authz_;
};

}  // namespace inc::sw
