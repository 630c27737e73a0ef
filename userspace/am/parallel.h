// SPDX-License-Identifier: Apache-2.0
// Fan-out of switch calls: a tree's switches (at most 65 for two levels)
// are called in parallel.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace inc::am {

constexpr size_t kSwitchRpcWidth = 65;

// Runs fn(0..n-1) on up to `width` threads.
inline void ParallelFor(size_t n, size_t width, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  width = std::min(n, width);
  if (width <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < width; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : threads) t.join();
}

}  // namespace inc::am
