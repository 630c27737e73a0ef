// SPDX-License-Identifier: Apache-2.0
// The Prometheus exposition: families with one HELP/TYPE each, label
// escaping, histogram buckets as the format defines them, and real scrapes
// of the HTTP(S) endpoint: slow clients, TLS and client certificates.
#include "common/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace inc {
namespace {

// A TCP connection to 127.0.0.1:port from `source` (any 127.x.y.z: each is
// another client address), with receive/send timeouts; -1 when refused.
int ConnectFrom(const char* source, int port, int timeout_ms = 3000) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  return send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

// The whole answer to GET /metrics (status line, headers, body) over plain
// HTTP from `source`; empty when there was none within the timeout.
std::string Scrape(const char* source, int port) {
  int fd = ConnectFrom(source, port);
  if (fd < 0) return "";
  std::string answer;
  if (SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) {
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string TestData(const std::string& name) {
  return std::string(INC_TLS_TESTDATA) + "/" + name;
}

// GET /metrics over TLS, verifying the server against ca.pem and presenting
// `client` (.pem/.key in the test data) unless empty. The whole answer, or
// "handshake failed".
std::string TlsScrape(int port, const std::string& client) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, TestData("ca.pem").c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!client.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx, TestData(client + ".pem").c_str());
    SSL_CTX_use_PrivateKey_file(ctx, TestData(client + ".key").c_str(), SSL_FILETYPE_PEM);
  }
  int fd = ConnectFrom("127.0.0.1", port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  std::string answer = "handshake failed";
  if (fd >= 0 && SSL_connect(ssl) == 1) {
    answer.clear();
    std::string request = "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) answer.append(buf, static_cast<size_t>(n));
  }
  SSL_free(ssl);
  if (fd >= 0) close(fd);
  SSL_CTX_free(ctx);
  return answer;
}

bool Ok(const std::string& answer) {
  return answer.rfind("HTTP/1.1 200", 0) == 0;
}

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

TEST(MetricsServer, SlowClientsOfOneAddressDoNotStarveScrapesFromAnother) {
  auto server = MetricsServer::Start("127.0.0.1:0", [] { return std::string("incin_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // 64 connections that send half a request line and then nothing: each
  // used to hold one of the HTTP library's few threads.
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {
    int fd = ConnectFrom("127.0.0.1", (*server)->port());
    if (fd >= 0 && SendAll(fd, "GET /met")) slow.push_back(fd);
  }
  EXPECT_GE(slow.size(), 8u);
  for (int i = 0; i < 3; ++i) {
    std::string answer = Scrape("127.0.0.2", (*server)->port());
    EXPECT_TRUE(Ok(answer)) << "scrape " << i << " while 64 slow clients wait: " << answer;
    EXPECT_NE(answer.find("incin_up 1"), std::string::npos);
  }
  for (int fd : slow) close(fd);
}

TEST(MetricsServer, AClientThatNeverCompletesItsRequestIsClosedInTime) {
  MetricsServerOptions options;
  options.listen = "127.0.0.1:0";
  options.request_timeout_ms = 300;
  auto server = MetricsServer::Start(options, [] { return std::string("incin_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int silent = ConnectFrom("127.0.0.3", (*server)->port());
  int trickle = ConnectFrom("127.0.0.4", (*server)->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(trickle, 0);
  // One header byte every 100 ms for 7 s: never idle long enough for an
  // idle timeout, never a complete request. The server must hang up first.
  auto Closed = [](int fd) {
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  };
  bool trickle_closed = false;
  std::string header = "GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(40, 'a');
  for (size_t i = 0; i < header.size() && !trickle_closed; ++i) {
    trickle_closed = !SendAll(trickle, header.substr(i, 1)) || Closed(trickle);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(trickle_closed) << "a client trickling its request for 7 s was never hung up on";
  EXPECT_TRUE(Closed(silent)) << "a silent client was not hung up on";
  EXPECT_GE((*server)->timed_out_connections(), 2u);
  EXPECT_TRUE(Ok(Scrape("127.0.0.5", (*server)->port())));
  close(silent);
  close(trickle);
}

TEST(MetricsServer, ClientsOfManyAddressesFillingEverySocketGiveThemBackInTime) {
  MetricsServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_connections = 16;
  options.request_timeout_ms = 500;
  auto server = MetricsServer::Start(options, [] { return std::string("incin_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<int> idle;
  for (int i = 0; i < 32; ++i) {
    std::string source = "127.0.1." + std::to_string(i + 1);
    int fd = ConnectFrom(source.c_str(), (*server)->port());
    if (fd >= 0) idle.push_back(fd);
  }
  bool scraped = false;
  for (int attempt = 0; attempt < 10 && !scraped; ++attempt)
    scraped = Ok(Scrape("127.0.0.2", (*server)->port()));
  EXPECT_TRUE(scraped) << "no scrape got through while idle clients of 32 addresses held the sockets";
  for (int fd : idle) close(fd);
}

TEST(MetricsServer, ServesOverTlsAndChecksClientCertificatesAgainstTheCa) {
  MetricsServerOptions options;
  options.listen = "127.0.0.1:0";
  options.cert_pem = ReadFile(TestData("am.pem"));
  options.key_pem = ReadFile(TestData("am.key"));
  options.client_ca_pem = ReadFile(TestData("ca.pem"));
  auto server = MetricsServer::Start(options, [] { return std::string("incin_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE((*server)->tls());
  std::string answer = TlsScrape((*server)->port(), "operator");
  EXPECT_TRUE(Ok(answer)) << answer;
  EXPECT_NE(answer.find("incin_up 1"), std::string::npos);
  EXPECT_FALSE(Ok(TlsScrape((*server)->port(), ""))) << "no client certificate";
  EXPECT_FALSE(Ok(TlsScrape((*server)->port(), "stranger"))) << "a certificate of another CA";
  EXPECT_FALSE(Ok(Scrape("127.0.0.1", (*server)->port()))) << "plain HTTP on the TLS port";

  // Without a client CA, any TLS client may scrape.
  options.client_ca_pem.clear();
  auto open = MetricsServer::Start(options, [] { return std::string("incin_up 1\n"); });
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_TRUE(Ok(TlsScrape((*open)->port(), "")));
}

TEST(MetricsServer, IncompleteTlsSettingsAreRefused) {
  MetricsServerOptions options;
  options.listen = "127.0.0.1:0";
  options.cert_pem = ReadFile(TestData("am.pem"));
  auto no_key = MetricsServer::Start(options, [] { return std::string(); });
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().code(), Code::kInvalidArgument);
  options.cert_pem.clear();
  options.client_ca_pem = ReadFile(TestData("ca.pem"));
  auto ca_only = MetricsServer::Start(options, [] { return std::string(); });
  ASSERT_FALSE(ca_only.ok());
  EXPECT_EQ(ca_only.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace inc
