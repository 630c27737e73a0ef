// SPDX-License-Identifier: Apache-2.0
#include "mpi/decision.h"

namespace inc::mpi {

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kNone: return "none";
    case Reason::kDisabled: return "disabled";
    case Reason::kBadConfig: return "bad_config";
    case Reason::kNoGroup: return "no_group";
    case Reason::kGroupFailed: return "group_failed";
    case Reason::kIntercomm: return "intercomm";
    case Reason::kSingleRank: return "single_rank";
    case Reason::kSubcomm: return "subcomm";
    case Reason::kThreadMultiple: return "thread_multiple";
    case Reason::kInvalidArgs: return "invalid_args";
    case Reason::kEmpty: return "empty";
    case Reason::kNoncontiguousDtype: return "noncontiguous_dtype";
    case Reason::kUnsupportedDtype: return "unsupported_dtype";
    case Reason::kUserOp: return "user_op";
    case Reason::kUnsupportedOp: return "unsupported_op";
    case Reason::kUnsupportedOpForDtype: return "unsupported_op_for_dtype";
    case Reason::kFloatSumDisabled: return "float_sum_disabled";
    case Reason::kBelowMinBytes: return "below_min_bytes";
    case Reason::kAboveMaxBytes: return "above_max_bytes";
    case Reason::kSwitchUnsupported: return "switch_unsupported";
    case Reason::kItemTooLarge: return "item_too_large";
    case Reason::kCount: break;
  }
  return "unknown";
}

const char* CallName(Call c) {
  switch (c) {
    case Call::kAllreduce: return "MPI_Allreduce";
    case Call::kReduce: return "MPI_Reduce";
    case Call::kBcast: return "MPI_Bcast";
    case Call::kBarrier: return "MPI_Barrier";
    case Call::kReduceScatterBlock: return "MPI_Reduce_scatter_block";
    case Call::kAllgather: return "MPI_Allgather";
    case Call::kCount: break;
  }
  return "MPI_unknown";
}

namespace {

bool Reduces(Call c) {
  return c == Call::kAllreduce || c == Call::kReduce || c == Call::kReduceScatterBlock;
}

Decision Fallback(Reason r) {
  Decision d;
  d.reason = r;
  return d;
}

Decision DecideOrFallBack(const Config& config, const Request& q);

}  // namespace

bool RequiredOffloadFails(const Config& config, Reason reason) {
  if (!config.require_offload) return false;
  switch (reason) {
    case Reason::kNone:
    case Reason::kEmpty:
    case Reason::kSingleRank:
    case Reason::kInvalidArgs: return false;
    default: return true;
  }
}

Decision Decide(const Config& config, const Request& q) {
  Decision d = DecideOrFallBack(config, q);
  d.fail = !d.offload && RequiredOffloadFails(config, d.reason);
  return d;
}

namespace {

Decision DecideOrFallBack(const Config& config, const Request& q) {
  if (!config.enable) return Fallback(Reason::kDisabled);
  if (q.comm_reason != Reason::kNone) return Fallback(q.comm_reason);
  if (!q.valid) return Fallback(Reason::kInvalidArgs);
  Decision d;
  if (q.call == Call::kBarrier) {
    d.offload = true;
    return d;
  }
  if (q.bytes == 0) return Fallback(Reason::kEmpty);
  if (Reduces(q.call)) {
    switch (q.op) {
#define INC_MPI_OP_CASE(name, camel, value, text, int_only) \
  case OpKind::k##camel: d.op = client::ReduceOp::k##camel; break;
      INC_OP_TABLE(INC_MPI_OP_CASE)
#undef INC_MPI_OP_CASE
      case OpKind::kUser: return Fallback(Reason::kUserOp);
      case OpKind::kOtherPredefined:
      case OpKind::kNone: return Fallback(Reason::kUnsupportedOp);
    }
    const bool bitwise = client::ReduceOpIntegerOnly(d.op);
    const bool minmax = d.op == client::ReduceOp::kMin || d.op == client::ReduceOp::kMax;
    switch (q.elem) {
      case Elem::kInt32: d.dtype = client::DataType::kInt32; break;
      case Elem::kInt64: d.dtype = client::DataType::kInt64; break;
      // Two's complement addition and bitwise ops give the same bits for
      // unsigned lanes; the order of MIN/MAX does not.
      case Elem::kUInt32:
        if (minmax) return Fallback(Reason::kUnsupportedOpForDtype);
        d.dtype = client::DataType::kInt32;
        break;
      case Elem::kUInt64:
        if (minmax) return Fallback(Reason::kUnsupportedOpForDtype);
        d.dtype = client::DataType::kInt64;
        break;
      case Elem::kFloat32:
      case Elem::kFloat64:
        if (bitwise) return Fallback(Reason::kUnsupportedOpForDtype);
        if (!minmax && !config.float_sum) return Fallback(Reason::kFloatSumDisabled);
        d.dtype = q.elem == Elem::kFloat32 ? client::DataType::kFloat32 : client::DataType::kFloat64;
        break;
      case Elem::kBytes: return Fallback(Reason::kUnsupportedDtype);
      case Elem::kMixed: return Fallback(Reason::kNoncontiguousDtype);
    }
  }
  if (q.bytes < config.min_bytes) return Fallback(Reason::kBelowMinBytes);
  if (config.max_bytes && q.bytes > config.max_bytes) return Fallback(Reason::kAboveMaxBytes);
  d.offload = true;
  return d;
}

}  // namespace

}  // namespace inc::mpi
