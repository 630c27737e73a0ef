// SPDX-License-Identifier: Apache-2.0
#include "arn/detector.h"

#include "arn/message.h"

namespace inc::arn {

const char* ConditionName(Condition c) {
  switch (c) {
    case Condition::kHealthy: return "healthy";
    case Condition::kCongested: return "congested";
    case Condition::kFailed: return "failed";
  }
  return "unknown";
}

Status Validate(const DetectorConfig& c) {
  if (!(c.congested_above > 0 && c.congested_above <= 1.5))
    return InvalidArgument("congested_above must be in (0, 1.5], got " + std::to_string(c.congested_above));
  if (!(c.clear_below >= 0 && c.clear_below < c.congested_above))
    return InvalidArgument("clear_below must be in [0, congested_above), got " +
                           std::to_string(c.clear_below));
  if (c.raise_samples == 0 || c.clear_samples == 0 || c.restore_samples == 0)
    return InvalidArgument("raise_samples, clear_samples and restore_samples must be at least 1");
  if (c.severity_levels.empty() || c.severity_levels.size() > kSeverityMaxCongestion)
    return InvalidArgument("severity_levels needs 1 to 3 thresholds");
  for (size_t i = 1; i < c.severity_levels.size(); i++)
    if (c.severity_levels[i] <= c.severity_levels[i - 1])
      return InvalidArgument("severity_levels must increase");
  return Status::Ok();
}

uint8_t PortDetector::SeverityOf(const PortSample& s) const {
  uint8_t level = 1;  // errors alone are the mildest congestion
  for (size_t i = 0; i < cfg_.severity_levels.size(); i++)
    if (s.utilisation >= cfg_.severity_levels[i]) level = static_cast<uint8_t>(i + 1);
  return level;
}

std::optional<Change> PortDetector::Observe(const PortSample& s) {
  Change ch;
  ch.from = cond_;
  if (!s.link_up) {
    up_run_ = hot_run_ = cool_run_ = 0;
    if (cond_ == Condition::kFailed) return std::nullopt;
    cond_ = Condition::kFailed;  // failure is declared at once: no hysteresis
    severity_ = kSeverityFailure;
    ch.to = cond_;
    ch.severity = severity_;
    return ch;
  }
  if (cond_ == Condition::kFailed) {
    if (++up_run_ < cfg_.restore_samples) return std::nullopt;
    up_run_ = 0;
    cond_ = Condition::kHealthy;
    severity_ = 0;
    ch.to = cond_;
    return ch;
  }
  bool hot = s.utilisation >= cfg_.congested_above || s.tx_errors >= cfg_.error_threshold;
  bool cool = s.utilisation < cfg_.clear_below && s.tx_errors < cfg_.error_threshold;
  hot_run_ = hot ? hot_run_ + 1 : 0;
  cool_run_ = cool ? cool_run_ + 1 : 0;
  if (cond_ == Condition::kHealthy) {
    if (hot_run_ < cfg_.raise_samples) return std::nullopt;
    cond_ = Condition::kCongested;
    severity_ = SeverityOf(s);
    ch.to = cond_;
    ch.severity = severity_;
    return ch;
  }
  // Congested: clear after a run of cool samples; re-announce a severity
  // change only on a hot sample (between the thresholds nothing changes).
  if (cool_run_ >= cfg_.clear_samples) {
    cond_ = Condition::kHealthy;
    severity_ = 0;
    cool_run_ = 0;
    ch.to = cond_;
    return ch;
  }
  if (hot) {
    uint8_t sev = SeverityOf(s);
    if (sev != severity_) {
      severity_ = sev;
      ch.to = cond_;
      ch.severity = sev;
      return ch;
    }
  }
  return std::nullopt;
}

}  // namespace inc::arn
