// SPDX-License-Identifier: Apache-2.0
#include "common/metrics.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
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

// Each open connection's clock: since when it has owed us a complete
// request (its start, or the end of its last response), and whether a
// request is being answered (not owed then).
struct MetricsServer::Connections {
  struct Clock {
    int fd = -1;
    std::chrono::steady_clock::time_point since;
    bool answering = false;
  };
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::map<MHD_Connection*, Clock> open;
  uint64_t timed_out = 0;
};

// What libmicrohttpd's callbacks are given.
struct MetricsServer::Context {
  Render* render;
  Connections* connections;
  bool verify_clients;
};

namespace {

using SteadyClock = std::chrono::steady_clock;

// libmicrohttpd's own messages (a client's bad request or TLS handshake) are
// about clients, which anyone can cause: debug level, so that they cannot
// flood the log.
void LogFromMhd(void*, const char* format, va_list args) {
  char line[512];
  std::vsnprintf(line, sizeof(line), format, args);
  size_t n = std::strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  LOG_DEBUG << "metrics http: " << line;
}

void NotifyConnection(void* cls, MHD_Connection* connection, void**,
                      enum MHD_ConnectionNotificationCode code) {
  auto* connections = static_cast<MetricsServer::Context*>(cls)->connections;
  std::lock_guard<std::mutex> lock(connections->mu);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    MetricsServer::Connections::Clock clock;
    clock.fd = info ? info->connect_fd : -1;
    clock.since = SteadyClock::now();
    connections->open[connection] = clock;
  } else {
    // Erased before libmicrohttpd closes the socket: the sweeper never
    // touches a descriptor number that may already be someone else's.
    connections->open.erase(connection);
  }
}

void RequestCompleted(void* cls, MHD_Connection* connection, void**, enum MHD_RequestTerminationCode) {
  auto* connections = static_cast<MetricsServer::Context*>(cls)->connections;
  std::lock_guard<std::mutex> lock(connections->mu);
  auto it = connections->open.find(connection);
  if (it == connections->open.end()) return;
  it->second.since = SteadyClock::now();
  it->second.answering = false;
}

MHD_Result Reply(MHD_Connection* connection, unsigned status, const std::string& body, const char* type) {
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (!response) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

// The client's certificate chains to the configured CA and is valid now
// (GnuTLS checks the dates against the trust libmicrohttpd was given).
bool ClientCertificateVerified(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (!info || !info->tls_session) return false;
  unsigned status = 0;
  int rc = gnutls_certificate_verify_peers2(static_cast<gnutls_session_t>(info->tls_session), &status);
  return rc == GNUTLS_E_SUCCESS && status == 0;
}

MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                  const char*, size_t*, void**) {
  auto* context = static_cast<MetricsServer::Context*>(cls);
  {
    std::lock_guard<std::mutex> lock(context->connections->mu);
    auto it = context->connections->open.find(connection);
    if (it != context->connections->open.end()) it->second.answering = true;
  }
  const char* text = "text/plain; charset=utf-8";
  if (context->verify_clients && !ClientCertificateVerified(connection))
    return Reply(connection, MHD_HTTP_FORBIDDEN, "a client certificate of the site's CA is required\n", text);
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0)
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", text);
  if (std::strcmp(url, "/metrics") == 0)
    return Reply(connection, MHD_HTTP_OK, (*context->render)(), "text/plain; version=0.0.4; charset=utf-8");
  if (std::strcmp(url, "/") == 0) return Reply(connection, MHD_HTTP_OK, "metrics at /metrics\n", text);
  return Reply(connection, MHD_HTTP_NOT_FOUND, "not found; metrics at /metrics\n", text);
}

// A bound, listening, non-blocking socket for host:port (SO_REUSEADDR only:
// with SO_REUSEPORT a second daemon on the same port would silently share
// the scrapes).
Expected<int> Listen(const std::string& listen) {
  auto hp = HostPort::Parse(listen);
  if (!hp.ok()) return hp.status().WithContext("metrics listen address");
  std::string host = hp->host.empty() ? "0.0.0.0" : hp->host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string port = std::to_string(hp->port);
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
    return Unavailable("cannot serve metrics on " + listen + " (unknown host)");
  int fd = -1;
  int err = 0;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return Unavailable("cannot serve metrics on " + listen + " (" + std::strerror(err) +
                       ": address in use or not on this host)");
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace

Expected<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen, Render render) {
  MetricsServerOptions options;
  options.listen = listen;
  return Start(options, std::move(render));
}

Expected<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options,
                                                              Render render) {
  if (options.cert_pem.empty() != options.key_pem.empty())
    return InvalidArgument("metrics over TLS needs both a certificate and its key");
  if (!options.client_ca_pem.empty() && options.cert_pem.empty())
    return InvalidArgument("metrics client certificates need TLS (a server certificate and key)");
  if (options.max_connections == 0 || options.request_timeout_ms == 0)
    return InvalidArgument("metrics server bounds must be positive");
  auto fd = Listen(options.listen);
  if (!fd.ok()) return fd.status();

  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->options_ = options;
  s->render_ = std::move(render);
  s->listen_fd_ = *fd;
  s->port_ = BoundPort(*fd);
  s->connections_ = std::make_unique<Connections>();
  // Owned by the server object, which outlives the daemon (stopped first in
  // the destructor).
  s->context_ =
      std::make_unique<Context>(Context{&s->render_, s->connections_.get(), !options.client_ca_pem.empty()});

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  std::vector<MHD_OptionItem> items;
  items.push_back({MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogFromMhd), nullptr});
  items.push_back({MHD_OPTION_LISTEN_SOCKET, *fd, nullptr});
  items.push_back({MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(options.max_connections), nullptr});
  items.push_back(
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<intptr_t>(options.max_connections_per_ip), nullptr});
  // libmicrohttpd's own idle timeout (whole seconds) backs up the sweeper's.
  items.push_back({MHD_OPTION_CONNECTION_TIMEOUT,
                   static_cast<intptr_t>((options.request_timeout_ms + 999) / 1000 + 1), nullptr});
  items.push_back(
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&NotifyConnection), s->context_.get()});
  items.push_back(
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&RequestCompleted), s->context_.get()});
  if (!options.cert_pem.empty()) {
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
      close(*fd);
      return FailedPrecondition("metrics over TLS: this libmicrohttpd has no TLS");
    }
    flags |= MHD_USE_TLS;
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(s->options_.cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(s->options_.key_pem.c_str())});
    if (!options.client_ca_pem.empty())
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(s->options_.client_ca_pem.c_str())});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  s->daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &Answer, s->context_.get(), MHD_OPTION_ARRAY,
                                items.data(), MHD_OPTION_END);
  if (!s->daemon_) {
    close(*fd);
    s->listen_fd_ = -1;
    return Unavailable("cannot serve metrics on " + options.listen +
                       (options.cert_pem.empty() ? std::string() : " (is the TLS certificate and key PEM?)"));
  }
  s->sweeper_ = std::make_unique<std::thread>([server = s.get()] { server->Sweep(); });
  return s;
}

// Closes (shuts down: libmicrohttpd then sees the end and frees it) every
// connection that has owed a complete request for longer than
// request_timeout_ms: a client that sends a byte at a time, or nothing after
// connecting or after the TLS handshake, gives its socket back in bounded
// time whatever libmicrohttpd's idle timeout would allow.
void MetricsServer::Sweep() {
  const auto timeout = std::chrono::milliseconds(options_.request_timeout_ms);
  const auto tick = std::max(std::chrono::milliseconds(10), timeout / 5);
  std::unique_lock<std::mutex> lock(connections_->mu);
  while (!connections_->stopping) {
    connections_->wake.wait_for(lock, tick);
    auto now = SteadyClock::now();
    for (auto& [connection, clock] : connections_->open) {
      if (clock.answering || clock.fd < 0 || now - clock.since < timeout) continue;
      shutdown(clock.fd, SHUT_RDWR);
      clock.since = SteadyClock::time_point::max();
      connections_->timed_out++;
    }
  }
}

uint64_t MetricsServer::timed_out_connections() const {
  std::lock_guard<std::mutex> lock(connections_->mu);
  return connections_->timed_out;
}

MetricsServer::~MetricsServer() {
  if (sweeper_) {
    {
      std::lock_guard<std::mutex> lock(connections_->mu);
      connections_->stopping = true;
    }
    connections_->wake.notify_all();
    sweeper_->join();
  }
  // Stops the event loop's thread and closes every connection and the
  // listening socket.
  if (daemon_) MHD_stop_daemon(daemon_);
}

}  // namespace inc
