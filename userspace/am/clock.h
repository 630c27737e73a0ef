// SPDX-License-Identifier: Apache-2.0
// The two clocks the manager's parts read: wall-clock milliseconds for what
// operators and the state store see, and milliseconds elapsed on the steady
// clock for timeouts (which must not jump with the wall clock).
#pragma once

#include <chrono>
#include <cstdint>

namespace inc::am {

inline uint64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 0 for a time point in the future.
inline uint64_t MsSince(std::chrono::steady_clock::time_point t) {
  auto d = std::chrono::steady_clock::now() - t;
  return d.count() < 0 ? 0 : std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace inc::am
