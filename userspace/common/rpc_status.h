// SPDX-License-Identifier: Apache-2.0
// The gRPC edge of the error model: inc::Status <-> grpc::Status, codes kept.
#pragma once

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace inc {

inline grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

inline Status FromGrpcStatus(const grpc::Status& s, const std::string& context = "") {
  if (s.ok()) return Status::Ok();
  Status out(static_cast<Code>(s.error_code()), s.error_message());
  return context.empty() ? out : out.WithContext(context);
}

}  // namespace inc
