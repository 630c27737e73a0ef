// SPDX-License-Identifier: Apache-2.0
// The Prometheus exposition: families with one HELP/TYPE each, label
// escaping, histogram buckets as the format defines them, and a real scrape
// of the HTTP endpoint.
#include "common/metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

namespace inc {
namespace {

TEST(PrometheusText, FamiliesOnceSamplesWithEscapedLabels) {
  PrometheusText t;
  t.Family("incin_drops_total", "counter", "Frames dropped, by reason.");
  t.Sample("incin_drops_total", {{"switch", "leaf0"}, {"reason", "bad_key"}}, 3);
  t.Family("incin_drops_total", "counter", "ignored the second time");
  t.Sample("incin_drops_total", {{"switch", "a\"b\\c\nd"}, {"reason", "stale"}}, 0);
  t.Family("incin_up", "gauge", "1 while serving.");
  t.Sample("incin_up", {}, 1);
  t.Sample("incin_ratio", {}, 0.25);
  EXPECT_EQ(t.text(),
            "# HELP incin_drops_total Frames dropped, by reason.\n"
            "# TYPE incin_drops_total counter\n"
            "incin_drops_total{switch=\"leaf0\",reason=\"bad_key\"} 3\n"
            "incin_drops_total{switch=\"a\\\"b\\\\c\\nd\",reason=\"stale\"} 0\n"
            "# HELP incin_up 1 while serving.\n"
            "# TYPE incin_up gauge\n"
            "incin_up 1\n"
            "incin_ratio 0.25\n");
}

TEST(Histogram, BucketsAreCumulativeWithInfSumAndCount) {
  Histogram h({1000, 10000});
  for (double v : {500.0, 1000.0, 5000.0, 20000.0}) h.Observe(v);
  PrometheusText t;
  t.Family("incin_tree_build_seconds", "histogram", "x");
  h.Write("incin_tree_build_seconds", {{"am", "a"}}, &t);
  EXPECT_EQ(t.text(),
            "# HELP incin_tree_build_seconds x\n"
            "# TYPE incin_tree_build_seconds histogram\n"
            "incin_tree_build_seconds_bucket{am=\"a\",le=\"1000\"} 2\n"
            "incin_tree_build_seconds_bucket{am=\"a\",le=\"10000\"} 3\n"
            "incin_tree_build_seconds_bucket{am=\"a\",le=\"+Inf\"} 4\n"
            "incin_tree_build_seconds_sum{am=\"a\"} 26500\n"
            "incin_tree_build_seconds_count{am=\"a\"} 4\n");
}

TEST(PrometheusText, AFamilyIsNeverSplitByAnother) {
  PrometheusText t;
  t.Family("incin_a", "gauge", "A.");
  t.Sample("incin_a", {{"state", "alive"}}, 1);
  t.Family("incin_b", "gauge", "B.");
  t.Sample("incin_b", {}, 2);
  t.Sample("incin_a", {{"state", "dead"}}, 3);  // after incin_b's lines were added
  Histogram h({1});
  t.Family("incin_h", "histogram", "H.");
  t.Sample("incin_b", {{"x", "y"}}, 4);
  h.Write("incin_h", {}, &t);
  t.Family("incin_a", "counter", "ignored: the first Family wins");
  EXPECT_EQ(t.text(),
            "# HELP incin_a A.\n# TYPE incin_a gauge\n"
            "incin_a{state=\"alive\"} 1\nincin_a{state=\"dead\"} 3\n"
            "# HELP incin_b B.\n# TYPE incin_b gauge\n"
            "incin_b 2\nincin_b{x=\"y\"} 4\n"
            "# HELP incin_h H.\n# TYPE incin_h histogram\n"
            "incin_h_bucket{le=\"1\"} 0\nincin_h_bucket{le=\"+Inf\"} 0\nincin_h_sum 0\nincin_h_count 0\n");
}

TEST(PrometheusText, BuildInfoNamesComponentAndVersion) {
  PrometheusText t;
  WriteBuildInfo("incamd", &t);
  EXPECT_NE(t.text().find("incin_build_info{component=\"incamd\",version=\""), std::string::npos) << t.text();
  EXPECT_NE(t.text().find("# TYPE incin_build_info gauge\n"), std::string::npos);
}

TEST(Histogram, BoundsPrintAsTheShortestDecimalThatReadsBack) {
  Histogram h({1e-7, 0.0005, 0.1, 2.5});
  PrometheusText t;
  h.Write("incin_x_seconds", {}, &t);
  const std::string text = t.text();
  for (const char* le : {"le=\"0.0005\"", "le=\"0.1\"", "le=\"2.5\"", "le=\"1e-07\""})
    EXPECT_NE(text.find(le), std::string::npos) << le << " in\n" << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
}

TEST(MetricsServer, ServesTheRenderedTextOnEachScrape) {
  int scrapes = 0;
  auto server = MetricsServer::Start("127.0.0.1:0", [&scrapes] {
    ++scrapes;
    return "incin_scrapes_total " + std::to_string(scrapes) + "\n";
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_GT((*server)->port(), 0);
  httplib::Client client("127.0.0.1", (*server)->port());
  for (int i = 1; i <= 2; ++i) {
    auto res = client.Get("/metrics");
    ASSERT_TRUE(res) << "no answer";
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "incin_scrapes_total " + std::to_string(i) + "\n");
    EXPECT_NE(res->get_header_value("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);
  }
}

TEST(MetricsServer, ABadOrBusyAddressIsAClearError) {
  auto bad = MetricsServer::Start("127.0.0.1:99999", [] { return std::string(); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("99999"), std::string::npos) << bad.status().ToString();
  auto first = MetricsServer::Start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  auto second =
      MetricsServer::Start("127.0.0.1:" + std::to_string((*first)->port()), [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace inc
