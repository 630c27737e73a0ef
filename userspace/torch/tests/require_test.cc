// SPDX-License-Identifier: Apache-2.0
// The torch backend's INCIN_REQUIRE_OFFLOAD rule (require.h), without torch.
#include "require.h"

#include <gtest/gtest.h>

namespace incin_torch {
namespace {

struct Case {
  bool required;
  const char* collective;
  const char* reason;
  bool fails;
};

const Case kCases[] = {
    {false, "allreduce", "no_group", false},
    {false, "allreduce", "unsupported_op", false},
    {true, "allreduce", "offloaded", false},
    {true, "allreduce", "no_group", true},
    {true, "allreduce", "unsupported_dtype", true},
    {true, "allreduce", "unsupported_op", true},
    {true, "broadcast", "not_cpu", true},
    {true, "allgather", "switch_unsupported", true},
    {true, "reduce", "unsupported_collective", true},
    {true, "barrier", "disabled", true},
    {true, "barrier", "bad_config", true},
    {true, "send", "unsupported_collective", false},
    {true, "recv", "unsupported_collective", false},
};

TEST(TorchRequireOffload, FallbacksFailOnlyWhenRequiredAndNotPointToPoint) {
  for (const Case& c : kCases)
    EXPECT_EQ(RequiredOffloadFails(c.required, c.collective, c.reason), c.fails)
        << c.collective << " reason=" << c.reason << " required=" << c.required;
}

TEST(TorchRequireOffload, MessageNamesSettingCollectiveReasonAndDetail) {
  EXPECT_EQ(
      RequiredOffloadMessage("allreduce", "no_group", "INCIN_AM is not set"),
      "incin: INCIN_REQUIRE_OFFLOAD is set: allreduce would fall back to gloo (reason=no_group: INCIN_AM "
      "is not set)");
  EXPECT_EQ(
      RequiredOffloadMessage("reduce", "unsupported_collective", ""),
      "incin: INCIN_REQUIRE_OFFLOAD is set: reduce would fall back to gloo (reason=unsupported_collective)");
}

}  // namespace
}  // namespace incin_torch
