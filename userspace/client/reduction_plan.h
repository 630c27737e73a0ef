// SPDX-License-Identifier: Apache-2.0
// How a typed reduction travels through the switches: the one planner for
// both of libinc's paths, one rank per host (communicator.cc) and several
// (host_stage.cc), so a type or an op is mapped onto the wire in one place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "client/communicator.h"
#include "inc_wire.h"

namespace inc::client {

enum class LaneForm {
  kRaw,         // int32/int64 lanes as the user gave them (any op)
  kFloatSum,    // a float SUM: block fixed point (client/float_sum.h), which picks its wire type
  kFloatKey32,  // float32/float16/bfloat16 MIN/MAX: float32 lanes the switch orders by key
  kFloatKey64,  // float64 MIN/MAX: int64 ordered keys (OrderedFromF64)
};

struct ReductionPlan {
  LaneForm form;
  uint8_t wire;  // the switch's type (enum inc_dtype); kFloatSum: chosen by the float sum
  size_t lane;   // bytes per lane on the wire
};

// For a type and op the caller has already checked (bitwise ops only on
// integer types).
inline ReductionPlan PlanReduction(DataType t, ReduceOp op) {
  const bool sum = op == ReduceOp::kSum;
  switch (t) {
    case DataType::kInt32: return {LaneForm::kRaw, INC_DTYPE_INT32, 4};
    case DataType::kInt64: return {LaneForm::kRaw, INC_DTYPE_INT64, 8};
    case DataType::kFloat64:
      return sum ? ReductionPlan{LaneForm::kFloatSum, INC_DTYPE_FP64, 8}
                 : ReductionPlan{LaneForm::kFloatKey64, INC_DTYPE_INT64, 8};
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16: break;
  }
  return sum ? ReductionPlan{LaneForm::kFloatSum, INC_DTYPE_FP32, 4}
             : ReductionPlan{LaneForm::kFloatKey32, INC_DTYPE_FP32, 4};
}

}  // namespace inc::client
