// SPDX-License-Identifier: Apache-2.0
// How a member transport waits for a result before it sleeps: a result
// usually lands within tens of microseconds, and a wake-up from poll()/epoll
// costs more than that on top. So look again after each sched_yield() for up
// to spin_us, which lets a peer process sharing the core (whose contribution
// we may be waiting for) run. On a machine busy with other work a yield hands
// the core away for a whole time slice where a wake-up would have preempted
// the other task: one yield that slow turns spinning off for a while.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "common/settings.h"

namespace inc::client {

class YieldSpin {
 public:
  // spin_us: the budget; the setting INCIN_XSK_SPIN_US overrides it (a bad
  // value is ignored: this is a tuning knob of the data path).
  explicit YieldSpin(uint32_t spin_us) : spin_us_(spin_us) {
    if (settings::Env().IsSet("INCIN_XSK_SPIN_US")) {
      auto v = settings::Env().UInt("INCIN_XSK_SPIN_US");
      if (v.ok()) spin_us_ = static_cast<uint32_t>(*v);
    }
  }

  // Calls ready() between yields until it returns true or the budget is
  // spent; returns its last answer.
  template <typename Ready>
  bool Wait(Ready ready) {
    if (spin_us_ == 0) return false;
    auto now = std::chrono::steady_clock::now();
    if (now < no_spin_until_) return false;
    const auto until = now + std::chrono::microseconds(spin_us_);
    do {
      sched_yield();
      auto after = std::chrono::steady_clock::now();
      if (after - now > kSlowYield) {
        no_spin_until_ = after + kNoSpinAfterSlowYield;
        return ready();
      }
      now = after;
      if (ready()) return true;
    } while (now < until);
    return false;
  }

 private:
  // A sched_yield() that returns this late means a task that is not one of
  // our peers ran a time slice on the core: the fair scheduler's slice is
  // 0.75 ms x (1 + log2 CPUs), 1.5 ms from two CPUs up. A peer rank sharing
  // the core gives it back sooner (its send burst of a whole window, ~86
  // frames at 256 KiB, takes ~0.45 ms on the lab VM); a gate below that
  // (300 us before) stopped the spin in every shared-core run, and each
  // result then woke a halted vCPU through an IPI (161 us mean there;
  // docs/perf.md "Idle time").
  static constexpr auto kSlowYield = std::chrono::milliseconds(1);
  static constexpr auto kNoSpinAfterSlowYield = std::chrono::milliseconds(100);

  uint32_t spin_us_;
  std::chrono::steady_clock::time_point no_spin_until_{};
};

}  // namespace inc::client
