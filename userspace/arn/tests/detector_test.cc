// SPDX-License-Identifier: Apache-2.0
// Port detection: hysteresis on utilisation and errors, immediate failure,
// restoration after a run of link-up samples, severity levels.
#include "arn/detector.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "arn/message.h"

namespace inc::arn {
namespace {

PortSample Util(double u) {
  PortSample s;
  s.utilisation = u;
  return s;
}
PortSample Errors(uint64_t n) {
  PortSample s;
  s.tx_errors = n;
  return s;
}
PortSample Down() {
  PortSample s;
  s.link_up = false;
  return s;
}

// Feeds samples; returns "cond/severity" after each sample that changed
// something, "-" otherwise.
std::vector<std::string> Feed(PortDetector& d, const std::vector<PortSample>& samples) {
  std::vector<std::string> out;
  for (const auto& s : samples) {
    auto ch = d.Observe(s);
    out.push_back(ch ? std::string(ConditionName(ch->to)) + "/" + std::to_string(ch->severity) : "-");
  }
  return out;
}

TEST(PortDetector, DeclaresCongestionOnlyAfterThreeHotSamplesInARow) {
  PortDetector d;
  EXPECT_EQ(Feed(d, {Util(0.9), Util(0.9), Util(0.5), Util(0.85), Util(0.85), Util(0.85)}),
            (std::vector<std::string>{"-", "-", "-", "-", "-", "congested/1"}));
  EXPECT_EQ(d.condition(), Condition::kCongested);
}

TEST(PortDetector, ClearsOnlyBelowTheLowerThresholdForThreeSamples) {
  PortDetector d;
  Feed(d, {Util(0.9), Util(0.9), Util(0.9)});
  // 0.7 is between the thresholds: neither hot nor cool, nothing changes.
  EXPECT_EQ(Feed(d, {Util(0.7), Util(0.7), Util(0.7), Util(0.7), Util(0.5), Util(0.5), Util(0.7), Util(0.5),
                     Util(0.5), Util(0.5)}),
            (std::vector<std::string>{"-", "-", "-", "-", "-", "-", "-", "-", "-", "healthy/0"}));
}

TEST(PortDetector, TransmitErrorsCountAsCongestionWhateverTheUtilisation) {
  PortDetector d;
  EXPECT_EQ(Feed(d, {Errors(5), Errors(1), Errors(2)}), (std::vector<std::string>{"-", "-", "congested/1"}));
  EXPECT_EQ(Feed(d, {Errors(0), Errors(0), Errors(0)}), (std::vector<std::string>{"-", "-", "healthy/0"}));
}

TEST(PortDetector, ReannouncesWhenTheSeverityLevelChanges) {
  PortDetector d;
  EXPECT_EQ(Feed(d, {Util(0.95), Util(0.95), Util(0.95), Util(0.99), Util(0.99), Util(0.85), Util(0.7)}),
            (std::vector<std::string>{"-", "-", "congested/2", "congested/3", "-", "congested/1", "-"}));
}

TEST(PortDetector, FailsAtOnceAndRestoresAfterTwoLinkUpSamples) {
  PortDetector d;
  EXPECT_EQ(Feed(d, {Util(0.1), Down(), Down(), Util(0), Down(), Util(0), Util(0)}),
            (std::vector<std::string>{"-", "failed/15", "-", "-", "-", "-", "healthy/0"}))
      << "a flap while failed restarts the link-up run";
  PortDetector hot;
  Feed(hot, {Util(0.9), Util(0.9), Util(0.9)});
  EXPECT_EQ(Feed(hot, {Down()}), (std::vector<std::string>{"failed/15"})) << "failure overrides congestion";
}

TEST(PortDetector, ConfigValidationNamesTheBadField) {
  DetectorConfig c;
  EXPECT_TRUE(Validate(c).ok());
  c.clear_below = 0.9;
  EXPECT_NE(Validate(c).message().find("clear_below"), std::string::npos);
  c = DetectorConfig{};
  c.raise_samples = 0;
  EXPECT_EQ(Validate(c).code(), Code::kInvalidArgument);
  c = DetectorConfig{};
  c.severity_levels = {0.9, 0.8};
  EXPECT_NE(Validate(c).message().find("increase"), std::string::npos);
  c.severity_levels = {0.8, 0.85, 0.9, 0.95};
  EXPECT_EQ(Validate(c).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace inc::arn
