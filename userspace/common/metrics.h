// SPDX-License-Identifier: Apache-2.0
// Prometheus metrics: the text exposition format (version 0.0.4) and an
// HTTP endpoint that serves it at /metrics (cpp-httplib). A daemon renders
// its metrics from its own state on each scrape; nothing here keeps
// counters of its own except Histogram. Part of the inc_metrics library.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace inc {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Builds one exposition: each family's HELP and TYPE lines come once, then
// all of its samples together, whatever order they were added in (the format
// forbids a family split by another); families appear in the order they are
// first used. A histogram's _bucket/_sum/_count samples belong to its family.
class PrometheusText {
 public:
  // type: "counter", "gauge" or "histogram". Counters' names end in _total.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const MetricLabels& labels, double value);
  std::string text() const;

 private:
  std::string& Block(const std::string& family);
  std::map<std::string, std::string> types_;   // family -> its type
  std::vector<std::string> order_;             // families, first use first
  std::map<std::string, std::string> blocks_;  // family -> its lines
};

// incin_build_info{component=...,version=...} 1: which release serves.
void WriteBuildInfo(const std::string& component, PrometheusText* out);

// A cumulative histogram with fixed bucket bounds (upper bounds, ascending).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Writes name_bucket{le=...}, name_sum and name_count under `labels`.
  void Write(const std::string& name, const MetricLabels& labels, PrometheusText* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Serves GET /metrics with render()'s text on its own thread until
// destroyed. listen is "host:port" (port 0: the kernel picks one).
class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static Expected<std::unique_ptr<MetricsServer>> Start(const std::string& listen, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<std::thread> thread_;
  int port_ = 0;
};

}  // namespace inc
