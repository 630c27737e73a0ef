// SPDX-License-Identifier: Apache-2.0
// Prometheus metrics: the text exposition format (version 0.0.4) and an
// HTTP(S) endpoint that serves it at /metrics (libmicrohttpd, as the
// Prometheus C client's promhttp). A daemon renders
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

struct MHD_Daemon;

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

// How a MetricsServer serves. The bounds keep slow or idle clients from
// starving scrapes: every connection is served by one event loop (a client
// that stalls holds a socket, never a thread), gets request_timeout_ms to
// deliver a complete request (and again between requests on a kept-alive
// connection), and one address holds at most max_connections_per_ip of the
// max_connections sockets.
struct MetricsServerOptions {
  std::string listen;  // "host:port" (port 0: the kernel picks one)
  // PEM contents. cert_pem and key_pem set: HTTPS with that certificate.
  std::string cert_pem;
  std::string key_pem;
  // Set (with cert_pem): scrapers must present a certificate of this CA
  // bundle, valid now; the others get 403.
  std::string client_ca_pem;
  unsigned max_connections = 64;
  unsigned max_connections_per_ip = 8;
  unsigned request_timeout_ms = 5000;
};

// Serves GET /metrics with render()'s text on its own thread until
// destroyed.
class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static Expected<std::unique_ptr<MetricsServer>> Start(const MetricsServerOptions& options, Render render);
  // Plain HTTP on `listen` with the default bounds.
  static Expected<std::unique_ptr<MetricsServer>> Start(const std::string& listen, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }
  bool tls() const { return !options_.cert_pem.empty(); }
  // Connections closed because they had not sent a complete request in
  // time, since start.
  uint64_t timed_out_connections() const;

  struct Connections;  // the open connections' clocks (metrics.cc)
  struct Context;      // what the HTTP library's callbacks get (metrics.cc)

 private:
  MetricsServer() = default;
  void Sweep();

  MetricsServerOptions options_;
  Render render_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::unique_ptr<Connections> connections_;
  std::unique_ptr<Context> context_;
  std::unique_ptr<std::thread> sweeper_;
};

}  // namespace inc
