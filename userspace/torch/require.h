// SPDX-License-Identifier: Apache-2.0
// The torch backend's INCIN_REQUIRE_OFFLOAD rule, free of torch so that it
// is unit-tested without it (tests/require_test.cc).
#pragma once

#include <cstring>
#include <string>

namespace incin_torch {

// Whether a call that would run on gloo for `reason` (docs/pytorch.md's
// reason names) raises instead when offload is required. Every collective
// that falls back does; point-to-point calls (send, recv), which incin
// never offloads and which are no collectives, keep running on gloo.
inline bool RequiredOffloadFails(bool required, const char* collective, const char* reason) {
  if (!required || std::strcmp(reason, "offloaded") == 0) return false;
  return std::strcmp(collective, "send") != 0 && std::strcmp(collective, "recv") != 0;
}

// The exception text: what, where it would have run, and why.
inline std::string RequiredOffloadMessage(const char* collective, const char* reason,
                                          const std::string& detail) {
  return std::string("incin: INCIN_REQUIRE_OFFLOAD is set: ") + collective +
         " would fall back to gloo (reason=" + reason + (detail.empty() ? "" : ": " + detail) + ")";
}

}  // namespace incin_torch
