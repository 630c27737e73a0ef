// SPDX-License-Identifier: Apache-2.0
#include "common/metrics.h"

#include <httplib.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "common/log.h"
#include "common/net.h"
#include "common/version.h"

namespace inc {
namespace {

// Label values escape backslash, double quote and newline.
std::string EscapeLabel(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Integers (every counter) exactly, the rest with enough digits.
  if (v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<long long>(v));
  // The shortest text that reads back as the same double: 0.0005, not
  // %.17g's 0.00050000000000000001.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

}  // namespace

std::string& PrometheusText::Block(const std::string& family) {
  auto [it, added] = blocks_.try_emplace(family);
  if (added) order_.push_back(family);
  return it->second;
}

void PrometheusText::Family(const std::string& name, const std::string& type, const std::string& help) {
  if (!types_.emplace(name, type).second) return;
  Block(name) = "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + Block(name);
}

void PrometheusText::Sample(const std::string& name, const MetricLabels& labels, double value) {
  std::string family = name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx = suffix;
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      auto t = types_.find(name.substr(0, name.size() - sfx.size()));
      if (t != types_.end() && t->second == "histogram") family = t->first;
    }
  }
  std::string& out = Block(family);
  out += name;
  if (!labels.empty()) {
    out += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out += ',';
      out += labels[i].first + "=\"" + EscapeLabel(labels[i].second) + "\"";
    }
    out += '}';
  }
  out += ' ' + FormatValue(value) + '\n';
}

std::string PrometheusText::text() const {
  std::string all;
  for (const std::string& family : order_) all += blocks_.at(family);
  return all;
}

void WriteBuildInfo(const std::string& component, PrometheusText* out) {
  out->Family("incin_build_info", "gauge", "Always 1; the labels say which incin release serves.");
  out->Sample("incin_build_info", {{"component", component}, {"version", kVersion}}, 1);
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Write(const std::string& name, const MetricLabels& labels, PrometheusText* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    MetricLabels l = labels;
    l.emplace_back("le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
    out->Sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  out->Sample(name + "_sum", labels, sum_);
  out->Sample(name + "_count", labels, static_cast<double>(count_));
}

Expected<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen, Render render) {
  auto hp = HostPort::Parse(listen);
  if (!hp.ok()) return hp.status().WithContext("metrics listen address");
  std::string host = hp->host.empty() ? "0.0.0.0" : hp->host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second daemon on the same port would silently share the scrapes.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s->server_->Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("metrics at /metrics\n", "text/plain");
  });
  if (hp->port == 0) {
    s->port_ = s->server_->bind_to_any_port(host);
  } else if (s->server_->bind_to_port(host, static_cast<int>(hp->port))) {
    s->port_ = static_cast<int>(hp->port);
  }
  if (s->port_ <= 0) {
    return Unavailable("cannot serve metrics on " + listen + " (address in use or not on this host)");
  }
  httplib::Server* server = s->server_.get();
  s->thread_ = std::make_unique<std::thread>([server] { server->listen_after_bind(); });
  // stop() ends only a server that runs already: one destroyed before its
  // thread got there would serve forever and the join would hang.
  for (int i = 0; i < 2000 && !server->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_ && thread_->joinable()) thread_->join();
}

}  // namespace inc
