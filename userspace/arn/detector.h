// SPDX-License-Identifier: Apache-2.0
// Congestion and failure detection for one switch port, with hysteresis so
// that a link hovering around a threshold does not flap the fabric's paths.
// Fed one sample per interval (utilisation from the forwarder's per-port
// counters against the configured link capacity, transmit errors such as a
// full veth ring, and link state); says when the port's condition changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace inc::arn {

struct DetectorConfig {
  double congested_above = 0.80;  // utilisation that counts as congested
  double clear_below = 0.60;      // utilisation that counts as clear
  uint32_t raise_samples = 3;     // consecutive congested samples to declare
  uint32_t clear_samples = 3;     // consecutive clear samples to eliminate
  uint32_t restore_samples = 2;   // consecutive link-up samples after a failure
  // A sample with at least this many transmit errors counts as congested
  // whatever the utilisation (a full queue drops before the link is busy).
  uint64_t error_threshold = 1;
  // Severity 1..3 by utilisation: level i applies at or above levels[i-1].
  std::vector<double> severity_levels = {0.80, 0.90, 0.97};
};

// Checks ranges and ordering; InvalidArgument with the field's name.
Status Validate(const DetectorConfig& c);

struct PortSample {
  double utilisation = 0;  // 0..1 (may exceed 1 by measurement noise)
  uint64_t tx_errors = 0;  // since the previous sample
  bool link_up = true;
};

enum class Condition { kHealthy, kCongested, kFailed };
const char* ConditionName(Condition c);

struct Change {
  Condition from = Condition::kHealthy;
  Condition to = Condition::kHealthy;
  uint8_t severity = 0;  // congestion level 1..3, kSeverityFailure, or 0
};

class PortDetector {
 public:
  explicit PortDetector(DetectorConfig c = {}) : cfg_(std::move(c)) {}
  // A change of condition or of congestion severity, if this sample makes one.
  std::optional<Change> Observe(const PortSample& s);
  // New thresholds from the next sample on; the condition and the runs of
  // samples counted so far stay.
  void Reconfigure(DetectorConfig c) { cfg_ = std::move(c); }
  Condition condition() const { return cond_; }
  uint8_t severity() const { return severity_; }

 private:
  uint8_t SeverityOf(const PortSample& s) const;

  DetectorConfig cfg_;
  Condition cond_ = Condition::kHealthy;
  uint8_t severity_ = 0;
  uint32_t hot_run_ = 0, cool_run_ = 0, up_run_ = 0;
};

}  // namespace inc::arn
