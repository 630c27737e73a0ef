// SPDX-License-Identifier: Apache-2.0
// mTLS settings and credentials (tls.h) and authorization by certificate
// (authz.h): the checks one by one, then real calls over loopback mTLS.
#include "common/tls.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "common/authz.h"
#include "common/rpc_status.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc {
namespace {

std::string Data(const std::string& file) {
  return std::string(INC_TLS_TESTDATA) + "/" + file;
}

TlsFiles FilesOf(const std::string& name) {
  return {Data(name + ".pem"), Data(name + ".key"), Data("ca.pem")};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TlsSettings, PlaintextOnlyWhenAskedForAndNeverTogetherWithFiles) {
  auto none = ChooseTransportSecurity({}, false, "HOW");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no transport security configured"), std::string::npos);
  EXPECT_NE(none.status().message().find("HOW"), std::string::npos);

  auto insecure = ChooseTransportSecurity({}, true, "HOW");
  ASSERT_TRUE(insecure.ok());
  EXPECT_TRUE(insecure->insecure);

  auto both = ChooseTransportSecurity(FilesOf("w0"), true, "HOW");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("both TLS files and insecure"), std::string::npos);

  auto partial = ChooseTransportSecurity({"c.pem", "k.pem", ""}, false, "HOW");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("ca is missing"), std::string::npos);
}

TEST(TlsSettings, FromEnvironmentWithPrefix) {
  setenv("TLSTEST_TLS_CERT", "/c", 1);
  setenv("TLSTEST_TLS_KEY", "/k", 1);
  setenv("TLSTEST_TLS_CA", "/a", 1);
  auto s = TransportSecurityFromEnv("TLSTEST");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->files.cert, "/c");
  EXPECT_FALSE(s->insecure);
  setenv("TLSTEST_INSECURE", "yes", 1);
  EXPECT_EQ(TransportSecurityFromEnv("TLSTEST").status().message(), "TLSTEST_INSECURE=\"yes\" is not 0 or 1");
  unsetenv("TLSTEST_TLS_CERT");
  unsetenv("TLSTEST_TLS_KEY");
  unsetenv("TLSTEST_TLS_CA");
  setenv("TLSTEST_INSECURE", "1", 1);
  ASSERT_TRUE(TransportSecurityFromEnv("TLSTEST").ok());
  unsetenv("TLSTEST_INSECURE");
  EXPECT_NE(TransportSecurityFromEnv("TLSTEST").status().message().find("TLSTEST_INSECURE=1"),
            std::string::npos);
}

TEST(TlsMaterial, ErrorsNameTheFileAndWhatIsWrong) {
  ASSERT_TRUE(LoadTlsMaterial(FilesOf("leaf0")).ok());

  TlsFiles missing = FilesOf("leaf0");
  missing.cert = "/nonexistent/leaf0.pem";
  auto m = LoadTlsMaterial(missing);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kNotFound);
  EXPECT_NE(m.status().message().find("certificate file /nonexistent/leaf0.pem"), std::string::npos)
      << m.status().message();

  char dir[] = "/tmp/tlstestXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string junk = std::string(dir) + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  TlsFiles bad_cert = FilesOf("leaf0");
  bad_cert.cert = junk;
  EXPECT_EQ(LoadTlsMaterial(bad_cert).status().message(),
            "certificate file " + junk + ": no PEM certificate in it (want \"-----BEGIN CERTIFICATE-----\")");
  TlsFiles bad_key = FilesOf("leaf0");
  bad_key.key = junk;
  EXPECT_NE(LoadTlsMaterial(bad_key).status().message().find("no unencrypted PEM private key"),
            std::string::npos);
  TlsFiles bad_ca = FilesOf("leaf0");
  bad_ca.ca = junk;
  EXPECT_NE(LoadTlsMaterial(bad_ca).status().message().find("CA file " + junk), std::string::npos);
  TlsFiles wrong_key = FilesOf("leaf0");
  wrong_key.key = Data("leaf1.key");
  EXPECT_NE(LoadTlsMaterial(wrong_key).status().message().find("does not belong to the certificate"),
            std::string::npos);
  if (geteuid() != 0) {  // root reads anything
    const std::string locked = std::string(dir) + "/locked.pem";
    std::ofstream(locked) << ReadFile(Data("leaf0.pem"));
    chmod(locked.c_str(), 0);
    TlsFiles unreadable = FilesOf("leaf0");
    unreadable.cert = locked;
    EXPECT_EQ(LoadTlsMaterial(unreadable).status().code(), Code::kPermissionDenied);
    unlink(locked.c_str());
  }
  unlink(junk.c_str());
  rmdir(dir);
}

TEST(PeerIdentityTest, RoleFromOuNameFromCnAddressesFromIpSans) {
  auto id = IdentityFromCertificate(ReadFile(Data("leaf0.pem")), "ipv4:127.0.0.1:4242");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->role, Role::kSwitch);
  EXPECT_EQ(id->name, "leaf0");
  EXPECT_EQ(id->ip_sans, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(id->peer_ip, "127.0.0.1");
  EXPECT_EQ(id->ToString(), "switch leaf0 from 127.0.0.1");
  EXPECT_EQ(IdentityFromCertificate("junk", "").status().code(), Code::kUnauthenticated);

  EXPECT_EQ(PeerIp("ipv4:172.31.0.11:40212"), "172.31.0.11");
  EXPECT_EQ(PeerIp("ipv6:[::1]:40212"), "::1");
  EXPECT_EQ(PeerIp("ipv6:%5B::1%5D:40212"), "::1");
  EXPECT_EQ(PeerIp("unix:/tmp/x"), "");
}

Expected<PeerIdentity> Peer(Role role, const std::string& name, const std::string& from,
                            std::vector<std::string> sans = {}) {
  PeerIdentity id;
  id.role = role;
  id.name = name;
  id.peer_ip = from;
  id.ip_sans = std::move(sans);
  return id;
}

TEST(AuthorizerTest, RolesSwitchNamesAndMemberHostsAreCheckedAndDenialsCounted) {
  Authorizer az(true);
  EXPECT_TRUE(az.CheckRoles(Peer(Role::kOperator, "ops", "10.0.0.9"), "DestroyTree", {Role::kOperator}).ok());
  Status st = az.CheckRoles(Peer(Role::kMember, "w0", "10.0.0.9"), "DestroyTree", {Role::kOperator});
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "DestroyTree needs role operator; caller w0 has role member");
  EXPECT_EQ(az.denials(), 1u);

  st = az.CheckRoles(Unauthenticated("no verified client certificate"), "CreateTree", {Role::kOperator});
  EXPECT_EQ(st.code(), Code::kUnauthenticated);

  // A certificate bound to addresses is refused from any other one.
  st = az.CheckRoles(Peer(Role::kOperator, "ops", "10.0.0.9", {"10.0.0.1"}), "ListTrees", {Role::kOperator});
  EXPECT_EQ(st.message(), "certificate of ops is not valid from 10.0.0.9 (not among its IP SANs)");

  EXPECT_TRUE(az.CheckSwitch(Peer(Role::kSwitch, "leaf0", "10.0.0.1"), "RegisterSwitch", "leaf0").ok());
  st = az.CheckSwitch(Peer(Role::kSwitch, "leaf1", "10.0.0.1"), "RegisterSwitch", "leaf0");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "RegisterSwitch for switch 'leaf0' with the certificate of switch 'leaf1'");
  EXPECT_EQ(az.CheckSwitch(Peer(Role::kOperator, "leaf0", "10.0.0.1"), "RegisterSwitch", "leaf0").code(),
            Code::kPermissionDenied);

  auto hosts = [](const std::string& h) -> std::optional<std::string> {
    if (h == "w0") return "10.0.0.2";
    if (h == "w1") return "10.0.1.2";
    return std::nullopt;
  };
  EXPECT_TRUE(
      az.CheckMemberJoin(Peer(Role::kMember, "w0", "1.1.1.1"), "JoinGroup", {"", "10.0.0.2"}, hosts).ok());
  EXPECT_TRUE(az.CheckMemberJoin(Peer(Role::kMember, "w0", "1.1.1.1"), "JoinGroup", {"w0", ""}, hosts).ok());
  EXPECT_EQ(az.CheckMemberJoin(Peer(Role::kMember, "w0", "1.1.1.1"), "JoinGroup", {"", "10.0.1.2"}, hosts)
                .message(),
            "member claims IP 10.0.1.2 but host 'w0' has IP 10.0.0.2 in the topology");
  EXPECT_EQ(
      az.CheckMemberJoin(Peer(Role::kMember, "w0", "1.1.1.1"), "JoinGroup", {"w1", ""}, hosts).message(),
      "member claims host 'w1' with the certificate of host 'w0'");
  EXPECT_EQ(az.CheckMemberJoin(Peer(Role::kMember, "w9", "1.1.1.1"), "JoinGroup", {"", ""}, hosts).message(),
            "certificate names host 'w9', which is not in the topology");
  EXPECT_EQ(az.denials(), 8u);

  Authorizer open(false);  // plaintext: nothing to check against
  EXPECT_TRUE(open.CheckRoles(Peer(Role::kMember, "w0", ""), "DestroyTree", {Role::kOperator}).ok());
  EXPECT_TRUE(open.CheckRoles(Unauthenticated("none"), "DestroyTree", {Role::kOperator}).ok());
  EXPECT_EQ(open.denials(), 0u);
}

// A self-signed certificate with this subject (IdentityFromCertificate reads
// the subject only: the chain was verified by the TLS handshake).
std::string CertWithSubject(const std::string& subject) {
  char dir[] = "/tmp/tls_subject_XXXXXX";
  if (!mkdtemp(dir)) return "";
  const std::string d = dir;
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + d + "/k -out " +
      d + "/c -days 1 -subj '" + subject + "' 2>/dev/null";
  std::string pem;
  if (std::system(cmd.c_str()) == 0) pem = ReadFile(d + "/c");
  std::filesystem::remove_all(d);
  return pem;
}

TEST(PeerIdentityTest, TenantsComeFromExtraOusOfOperatorCertificatesOnly) {
  auto id = IdentityFromCertificate(
      CertWithSubject("/O=incin/OU=operator/OU=tenant:acme/OU=tenant:beta/CN=alice"), "ipv4:10.0.0.9:1");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->role, Role::kOperator);
  EXPECT_EQ(id->tenants, (std::vector<std::string>{"acme", "beta"}));
  auto cluster = IdentityFromCertificate(CertWithSubject("/O=incin/OU=operator/CN=root"), "");
  ASSERT_TRUE(cluster.ok());
  EXPECT_TRUE(cluster->tenants.empty());
  struct Case {
    const char* subject;
    const char* words;
  };
  const Case refused[] = {
      {"/O=incin/OU=member/OU=tenant:acme/CN=w0", "names tenants, which only operators have"},
      {"/O=incin/OU=operator/OU=tenant:/CN=a", "a tenant name is not empty"},
      {"/O=incin/OU=operator/OU=switch/CN=a", "2 subject OUs naming a role"},
      {"/O=incin/OU=tenant:acme/CN=a", "0 subject OUs naming a role"},
      {"/O=incin/OU=boss/CN=a", "OU=boss, not a role"},
  };
  for (const Case& c : refused) {
    auto bad = IdentityFromCertificate(CertWithSubject(c.subject), "");
    ASSERT_FALSE(bad.ok()) << c.subject;
    EXPECT_EQ(bad.status().code(), Code::kUnauthenticated) << c.subject;
    EXPECT_NE(bad.status().message().find(c.words), std::string::npos) << bad.status().message();
  }
}

Expected<PeerIdentity> TenantOperator(std::vector<std::string> tenants) {
  PeerIdentity id;
  id.role = Role::kOperator;
  id.name = "alice";
  id.peer_ip = "10.0.0.9";
  id.tenants = std::move(tenants);
  return id;
}

TEST(AuthorizerTest, OperatorsOfTenantsActOnTheirTenantsJobsOnly) {
  Authorizer az(true);
  EXPECT_TRUE(az.CheckOperatorForJob(TenantOperator({}), "IssueJobCredential", "anything").ok());
  EXPECT_TRUE(az.CheckOperatorForJob(TenantOperator({}), "IssueJobCredential", "acme/x").ok());
  EXPECT_TRUE(az.CheckOperatorForJob(TenantOperator({"acme"}), "IssueJobCredential", "acme/train-7").ok());
  EXPECT_TRUE(
      az.CheckOperatorForJob(TenantOperator({"beta", "acme"}), "RevokeJobCredentials", "acme/t").ok());
  Status st = az.CheckOperatorForJob(TenantOperator({"acme"}), "IssueJobCredential", "beta/train-7");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(
      st.message(),
      "IssueJobCredential for job 'beta/train-7': operator alice acts for jobs 'acme/...' only; this job "
      "is tenant 'beta''s");
  st = az.CheckOperatorForJob(TenantOperator({"acme"}), "IssueJobCredential", "train-7");
  EXPECT_NE(st.message().find("this job is of no tenant"), std::string::npos) << st.message();
  st = az.CheckOperatorForJob(TenantOperator({"acme"}), "IssueJobCredential", "acmes/x");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  st = az.CheckOperatorForJob(Peer(Role::kMember, "w0", "10.0.0.2"), "IssueJobCredential", "acme/x");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(az.denials(), 4u);
}

TEST(AuthorizerTest, JobCredentialsAreCheckedForTheCallersHost) {
  auto creds = JobCredentials::FromHex(std::string(64, 'c'), "x");
  ASSERT_TRUE(creds.ok());
  auto cred = creds->Issue({"acme/j", 1000, 9000, {"w0"}});
  ASSERT_TRUE(cred.ok());
  Authorizer az(true);
  EXPECT_TRUE(az.CheckJobCredential(Peer(Role::kMember, "w0", "10.0.0.2"), "JoinGroup", "acme/j", *cred,
                                    *creds, 2000, 0)
                  .ok());
  Status st = az.CheckJobCredential(Peer(Role::kMember, "w1", "10.0.1.2"), "JoinGroup", "acme/j", *cred,
                                    *creds, 2000, 0);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_NE(st.message().find("is for hosts w0, not for host 'w1'"), std::string::npos) << st.message();
  st = az.CheckJobCredential(Peer(Role::kMember, "w0", "10.0.0.2"), "JoinGroup", "acme/j", *cred, *creds,
                             9000, 0);
  EXPECT_NE(st.message().find("expired"), std::string::npos) << st.message();
  st = az.CheckJobCredential(Peer(Role::kMember, "w0", "10.0.0.2"), "JoinGroup", "acme/j", *cred, *creds,
                             2000, 1500);
  EXPECT_NE(st.message().find("was revoked"), std::string::npos) << st.message();
  EXPECT_EQ(az.denials(), 3u);
  Authorizer open(false);
  EXPECT_TRUE(
      open.CheckJobCredential(Peer(Role::kMember, "w1", ""), "JoinGroup", "x", "", *creds, 0, 0).ok());
}

// A switch agent that lets only the AM configure trees and the AM or an
// operator ask for its health.
class GuardedAgent final : public v1::SwitchAgent::Service {
 public:
  grpc::Status ConfigureTree(grpc::ServerContext* ctx, const v1::ConfigureTreeRequest*,
                             v1::ConfigureTreeResponse*) override {
    return ToGrpcStatus(authz.AllowRoles(*ctx, "ConfigureTree", {Role::kAm}));
  }
  grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest*, v1::HealthResponse*) override {
    return ToGrpcStatus(authz.AllowRoles(*ctx, "Health", {Role::kAm, Role::kOperator}));
  }
  Authorizer authz{true};
};

grpc::StatusCode Configure(const std::string& target, const TransportSecurity& security) {
  auto creds = MakeChannelCredentials(security);
  EXPECT_TRUE(creds.ok()) << creds.status().ToString();
  auto stub = v1::SwitchAgent::NewStub(grpc::CreateChannel(target, *creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ConfigureTreeRequest req;
  v1::ConfigureTreeResponse resp;
  return stub->ConfigureTree(&ctx, req, &resp).error_code();
}

TEST(MutualTls, OnlyTheAmConfiguresAndStrangersAndPlaintextDoNotConnect) {
  GuardedAgent agent;
  auto server_creds = MakeServerCredentials({false, FilesOf("leaf0")});
  ASSERT_TRUE(server_creds.ok()) << server_creds.status().ToString();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *server_creds, &port);
  builder.RegisterService(&agent);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server && port);
  const std::string target = "127.0.0.1:" + std::to_string(port);

  EXPECT_EQ(Configure(target, {false, FilesOf("am")}), grpc::StatusCode::OK);
  EXPECT_EQ(Configure(target, {false, FilesOf("operator")}), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Configure(target, {false, FilesOf("leaf1")}), grpc::StatusCode::PERMISSION_DENIED);
  // Bound to 10.9.9.9, calling from 127.0.0.1.
  EXPECT_EQ(Configure(target, {false, FilesOf("remote-w1")}), grpc::StatusCode::PERMISSION_DENIED);
  // A certificate of another CA fails the handshake, as does plaintext.
  TlsFiles stranger{Data("stranger.pem"), Data("stranger.key"), Data("ca.pem")};
  EXPECT_EQ(Configure(target, {false, stranger}), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Configure(target, {true, {}}), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(agent.authz.denials(), 3u);
  server->Shutdown();
}

// Serves GuardedAgent on 127.0.0.1 with `creds`; stops with the object.
class TestServer {
 public:
  explicit TestServer(const std::shared_ptr<grpc::ServerCredentials>& creds) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", creds, &port_);
    builder.RegisterService(&agent_);
    server_ = builder.BuildAndStart();
  }
  ~TestServer() {
    if (server_) server_->Shutdown();
  }
  bool running() const { return server_ && port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  GuardedAgent agent_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A channel of its own connection: gRPC otherwise shares one connection
// among channels to the same target, and a test of what a new handshake
// sees needs a new handshake.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, creds, args);
}

// The status of a Health call on `channel` and the CN of the certificate the
// server presented ("" when no handshake completed).
std::pair<grpc::StatusCode, std::string> CallHealth(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::SwitchAgent::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::HealthRequest req;
  v1::HealthResponse resp;
  grpc::Status st = stub->Health(&ctx, req, &resp);
  std::string cn;
  if (auto auth = ctx.auth_context())
    for (const auto& v : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) cn.assign(v.data(), v.size());
  return {st.error_code(), cn};
}

TEST(MutualTls, WatchedCredentialsKeepEveryCheckOfTheStaticOnes) {
  auto server_creds = MakeServerCredentials({false, FilesOf("leaf0")}, 1);
  ASSERT_TRUE(server_creds.ok()) << server_creds.status().ToString();
  TestServer server(*server_creds);
  ASSERT_TRUE(server.running());
  // remote-w1's SANs are 10.9.9.9 only: dialled at 127.0.0.1 it is refused.
  auto wrong_san_creds = MakeServerCredentials({false, FilesOf("remote-w1")}, 1);
  ASSERT_TRUE(wrong_san_creds.ok()) << wrong_san_creds.status().ToString();
  TestServer wrong_san(*wrong_san_creds);
  ASSERT_TRUE(wrong_san.running());

  grpc::SslCredentialsOptions no_cert;  // trusts the CA, presents nothing
  no_cert.pem_root_certs = ReadFile(Data("ca.pem"));
  TlsFiles stranger{Data("stranger.pem"), Data("stranger.key"), Data("ca.pem")};
  struct Case {
    const char* what;
    const TestServer& server;
    std::shared_ptr<grpc::ChannelCredentials> creds;
    grpc::StatusCode want;
  };
  const Case cases[] = {
      {"the AM, watched files", server, *MakeWatchedChannelCredentials({false, FilesOf("am")}, 1),
       grpc::StatusCode::OK},
      {"the AM, files read once", server, *MakeChannelCredentials({false, FilesOf("am")}),
       grpc::StatusCode::OK},
      {"no client certificate", server, grpc::SslCredentials(no_cert), grpc::StatusCode::UNAVAILABLE},
      {"a client of another CA", server, *MakeWatchedChannelCredentials({false, stranger}, 1),
       grpc::StatusCode::UNAVAILABLE},
      {"server certificate without the dialled address, watched", wrong_san,
       *MakeWatchedChannelCredentials({false, FilesOf("am")}, 1), grpc::StatusCode::UNAVAILABLE},
      {"server certificate without the dialled address, read once", wrong_san,
       *MakeChannelCredentials({false, FilesOf("am")}), grpc::StatusCode::UNAVAILABLE},
  };
  for (const Case& c : cases)
    EXPECT_EQ(CallHealth(OwnChannel(c.server.target(), c.creds)).first, c.want) << c.what;

  TlsFiles wrong_key = FilesOf("leaf0");
  wrong_key.key = Data("leaf1.key");
  EXPECT_NE(
      MakeServerCredentials({false, wrong_key}).status().message().find("does not belong to the certificate"),
      std::string::npos)
      << "the start-time checks stay";
  EXPECT_EQ(MakeWatchedChannelCredentials({false, {"/nonexistent/c.pem", Data("am.key"), Data("ca.pem")}})
                .status()
                .code(),
            Code::kNotFound);
}

// The certificate files are reached through a directory symlink, and a
// renewal swaps the link (one rename: key and certificate change together),
// as docs/operations.md tells operators to do.
TEST(MutualTls, ACertificateReplacedOnDiskServesNewConnectionsWithoutARestart) {
  char dir[] = "/tmp/tlsrotXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string base = dir;
  auto install = [&](const std::string& version, const std::string& name) {
    const std::string d = base + "/" + version;
    mkdir(d.c_str(), 0700);
    std::ofstream(d + "/cert.pem") << ReadFile(Data(name + ".pem"));
    std::ofstream(d + "/key.pem") << ReadFile(Data(name + ".key"));
    std::ofstream(d + "/ca.pem") << ReadFile(Data("ca.pem"));
    const std::string link = base + "/current.new";
    ASSERT_EQ(symlink(d.c_str(), link.c_str()), 0);
    ASSERT_EQ(rename(link.c_str(), (base + "/current").c_str()), 0);
  };
  install("v1", "leaf0");
  const TlsFiles files{base + "/current/cert.pem", base + "/current/key.pem", base + "/current/ca.pem"};
  auto server_creds = MakeServerCredentials({false, files}, 1);
  ASSERT_TRUE(server_creds.ok()) << server_creds.status().ToString();
  TestServer server(*server_creds);
  ASSERT_TRUE(server.running());
  auto client = MakeWatchedChannelCredentials({false, FilesOf("am")}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto first = OwnChannel(server.target(), *client);
  EXPECT_EQ(CallHealth(first), std::make_pair(grpc::StatusCode::OK, std::string("leaf0")));

  install("v2", "leaf1");
  // New handshakes see leaf1 once the watcher has looked (every second).
  std::pair<grpc::StatusCode, std::string> fresh;
  for (int i = 0; i < 50; i++) {
    fresh = CallHealth(OwnChannel(server.target(), *client));
    if (fresh.second == "leaf1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(fresh, std::make_pair(grpc::StatusCode::OK, std::string("leaf1")));
  // The connection made before the renewal goes on working.
  EXPECT_EQ(CallHealth(first).first, grpc::StatusCode::OK);

  for (const char* f : {"v1/cert.pem", "v1/key.pem", "v1/ca.pem", "v2/cert.pem", "v2/key.pem", "v2/ca.pem"})
    unlink((base + "/" + f).c_str());
  for (const char* d : {"v1", "v2"}) rmdir((base + "/" + d).c_str());
  unlink((base + "/current").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace inc
