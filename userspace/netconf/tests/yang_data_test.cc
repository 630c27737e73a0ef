// SPDX-License-Identifier: Apache-2.0
// The NETCONF front end's translation: incin-switch YANG data <-> the
// TreeConfig the tree agent takes, the state tree, and the SSH keys of the
// control-plane certificates.
#include "netconf/yang_data.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "netconf/ssh_keys.h"

namespace inc::sw::netconf {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::TreeConfig LeafTree() {
  v1::TreeConfig c;
  c.set_tree_id(9);
  c.set_key(0xABCD1234);
  c.set_role(v1::LEAF);
  c.set_pool_size(32);
  c.set_slot_base(128);
  c.set_elems_per_packet(60);
  c.add_collectives(v1::ALLREDUCE);
  c.add_collectives(v1::REDUCE_SCATTER);
  c.add_dtypes(v1::FP32);
  c.add_ops(v1::MAX);
  for (int r = 0; r < 2; r++) {
    auto* e = c.add_children();
    e->set_port("w" + std::to_string(r));
    e->set_peer_mac("02:00:00:00:00:0" + std::to_string(r + 1));
    e->set_peer_ip("10.0." + std::to_string(r) + ".2");
    e->set_peer_qpn(1000 + r);
    e->set_switch_qpn(2000 + r);
    e->set_member_lo(r);
    e->set_member_hi(r + 1);
    e->set_peer_name("h" + std::to_string(r));
  }
  auto* p = c.mutable_parent();
  p->set_port("up");
  p->set_peer_mac("02:00:00:00:09:01");
  p->set_peer_ip("10.9.0.1");
  p->set_peer_qpn(7);
  p->set_switch_qpn(8);
  p->set_rkey(5);
  p->set_va_base(1ull << 40);
  p->set_slot_stride(4096);
  p->set_peer_name("spine0");
  c.set_rank_at_parent(3);
  c.set_job_id("job-a");
  c.set_generation(4);
  return c;
}

class YangData : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = NewContext(INC_SOURCE_YANG_DIR);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
  }
  LyCtx ctx_;
};

TEST_F(YangData, TreeRoundTripsAndValidates) {
  const v1::TreeConfig in = LeafTree();
  auto running = RunningToYang(ctx_.get(), {{9, in}});
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  lyd_node* root = running->release();
  ASSERT_EQ(lyd_validate_all(&root, ctx_.get(), LYD_VALIDATE_NO_STATE, nullptr), LY_SUCCESS)
      << LyError(ctx_.get(), "");
  LydTree owner(root);
  lyd_node* tree = nullptr;
  ASSERT_EQ(lyd_find_path(root, "/incin-switch:trees/tree[id='9']", 0, &tree), LY_SUCCESS);
  auto out = TreeFromYang(tree);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(in, *out)) << out->DebugString();
}

TEST_F(YangData, MemberRanksWithAGapAreRefused) {
  const char* xml =
      "<trees "
      "xmlns=\"urn:incin:yang:incin-switch\"><tree><id>3</id><role>single</role><pool-size>4</pool-size>"
      "<member><rank>0</rank><port>a</port><peer-mac>02:00:00:00:00:01</peer-mac><peer-ip>10.0.0.1</peer-ip>"
      "<peer-qpn>1</peer-qpn><switch-qpn>2</switch-qpn></member>"
      "<member><rank>2</rank><port>b</port><peer-mac>02:00:00:00:00:02</peer-mac><peer-ip>10.0.0.2</peer-ip>"
      "<peer-qpn>3</peer-qpn><switch-qpn>4</switch-qpn></member></tree></trees>";
  lyd_node* root = nullptr;
  ASSERT_EQ(lyd_parse_data_mem(ctx_.get(), xml, LYD_XML, LYD_PARSE_STRICT, LYD_VALIDATE_NO_STATE, &root),
            LY_SUCCESS)
      << LyError(ctx_.get(), "");
  LydTree owner(root);
  auto out = TreeFromYang(lyd_child(root));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kInvalidArgument);
  EXPECT_NE(out.status().message().find("rank 1 is missing"), std::string::npos) << out.status().message();
}

TEST_F(YangData, StateCarriesCountersPerMemberIdentity) {
  v1::GetCapabilitiesResponse caps;
  caps.set_switch_name("leaf0");
  caps.mutable_capabilities()->add_dtypes(v1::INT32);
  caps.mutable_capabilities()->set_max_children(64);
  auto* port = caps.add_ports();
  port->set_name("w0");
  port->set_mtu(1500);
  port->set_up(true);
  v1::SwitchStats stats;
  (*stats.mutable_global())["rx_packets"] = 12;
  auto* t = stats.add_trees();
  t->set_tree_id(9);
  t->mutable_counters()->set_rx_packets(10);
  auto* m = stats.add_members();
  m->set_tree_id(9);
  m->set_rank(1);
  m->set_switch_qpn(2001);
  m->mutable_counters()->set_completions(3);
  const std::map<uint16_t, v1::TreeConfig> trees = {{9, LeafTree()}};
  auto running = RunningToYang(ctx_.get(), trees);
  ASSERT_TRUE(running.ok());
  lyd_node* data = running->release();
  ASSERT_TRUE(StateToYang(ctx_.get(), caps, stats, trees, SwitchFacts{}, &data).ok());
  // The state tree is valid data of the module (config and state).
  const LY_ERR valid =
      lyd_validate_module(&data, ly_ctx_get_module_implemented(ctx_.get(), kModule), 0, nullptr);
  LydTree owner(data);
  ASSERT_EQ(valid, LY_SUCCESS) << LyError(ctx_.get(), "");
  char* xml = nullptr;
  lyd_print_mem(&xml, data, LYD_XML, LYD_PRINT_WITHSIBLINGS | LYD_PRINT_SHRINK);
  std::string s = xml;
  free(xml);
  EXPECT_NE(s.find("<capabilities><data-type>int32</data-type>"), std::string::npos) << s;
  EXPECT_NE(s.find("<mtu>1500</mtu>"), std::string::npos) << s;
  EXPECT_NE(s.find("<member><rank>1</rank><identity>h1</identity><switch-qpn>2001</switch-qpn><counters>"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("<completions>3</completions>"), std::string::npos) << s;
}

TEST_F(YangData, MissingYangDirIsNamed) {
  auto ctx = NewContext("/nonexistent/yang");
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("/nonexistent/yang"), std::string::npos);
}

TEST(SshKeys, CertificateKeyMatchesItsPrivateKey) {
  const std::string dir = INC_TLS_TESTDATA;
  auto from_cert = SshBlobFromPem(ReadFile(dir + "/operator.pem"));
  auto from_key = SshBlobFromPem(ReadFile(dir + "/operator.key"));
  ASSERT_TRUE(from_cert.ok()) << from_cert.status().ToString();
  ASSERT_TRUE(from_key.ok()) << from_key.status().ToString();
  EXPECT_EQ(*from_cert, *from_key);
  auto line = OpenSshLine(*from_cert, "operator");
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->rfind("ecdsa-sha2-nistp256 AAAA", 0), 0u) << *line;
  auto keys = LoadAuthorizedKeys({dir + "/operator.pem", dir + "/am.pem"}, "", dir + "/ca.pem");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].role, Role::kOperator);
  EXPECT_EQ((*keys)[1].role, Role::kAm);
  EXPECT_NE((*keys)[0].blob, (*keys)[1].blob);
}

TEST(SshKeys, AuthorizedKeysLinesAreCheckedPerLine) {
  const std::string path = ::testing::TempDir() + "/authorized_keys";
  auto blob = SshBlobFromPem(ReadFile(std::string(INC_TLS_TESTDATA) + "/am.pem"));
  ASSERT_TRUE(blob.ok());
  std::ofstream(path) << "# comment\n" << *OpenSshLine(*blob, "ops@example") << "\nssh-rsa !!!notbase64\n";
  auto keys = LoadAuthorizedKeys({}, path, "");
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.status().message().find(path + ":3"), std::string::npos) << keys.status().message();
  std::ofstream(path) << *OpenSshLine(*blob, "") << "\n";
  keys = LoadAuthorizedKeys({}, path, "");
  ASSERT_FALSE(keys.ok()) << "a line without a comment names no user";
  EXPECT_NE(keys.status().message().find("no comment naming the SSH user"), std::string::npos)
      << keys.status().message();
  std::ofstream(path) << *OpenSshLine(*blob, "ops@example") << "\n";
  keys = LoadAuthorizedKeys({}, path, "");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].name, "ops");
  EXPECT_EQ((*keys)[0].blob, *blob);
}

TEST(SshKeys, CertificatesMustBeOfTheCa) {
  const std::string dir = INC_TLS_TESTDATA;
  auto other_ca = LoadAuthorizedKeys({dir + "/stranger.pem"}, "", dir + "/ca.pem");
  ASSERT_FALSE(other_ca.ok()) << "a certificate of another CA was authorized";
  EXPECT_NE(other_ca.status().message().find(dir + "/stranger.pem: not a valid certificate of the CA"),
            std::string::npos)
      << other_ca.status().message();
  auto no_ca = LoadAuthorizedKeys({dir + "/am.pem"}, "", "");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("tls.ca"), std::string::npos) << no_ca.status().message();
  auto ok = LoadAuthorizedKeys({dir + "/am.pem"}, "", dir + "/ca.pem");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].ip_sans, std::vector<std::string>{"127.0.0.1"});
  EXPECT_GT((*ok)[0].not_after, (*ok)[0].not_before);
}

TEST(SshKeys, ALoginIsCheckedForUserValidityAndAddress) {
  AuthorizedKey cert{"blob", Role::kAm, "am", "am.pem", {"10.0.0.1"}, 1000, 2000};
  AuthorizedKey anywhere{"blob", Role::kOperator, "ops", "operator.pem", {}, 1000, 2000};
  AuthorizedKey plain{"blob", Role::kOperator, "ops", "authorized_keys:1", {}, 0, 0};
  struct Case {
    const char* name;
    const AuthorizedKey* key;
    const char* user;
    const char* host;
    int64_t now;
    const char* refusal;  // "" when allowed
  };
  const Case cases[] = {
      {"the CN from its address in time", &cert, "am", "10.0.0.1", 1500, ""},
      {"IPv4-mapped address", &cert, "am", "::ffff:10.0.0.1", 1500, ""},
      {"another user name", &cert, "root", "10.0.0.1", 1500, "logs in as SSH user 'am', not 'root'"},
      {"another address", &cert, "am", "10.0.0.9", 1500, "only from its IP SANs, not from 10.0.0.9"},
      {"expired", &cert, "am", "10.0.0.1", 2001, "not valid now"},
      {"not yet valid", &cert, "am", "10.0.0.1", 999, "not valid now"},
      {"no IP SANs: any address", &anywhere, "ops", "192.0.2.7", 1500, ""},
      {"authorized_keys: no expiry", &plain, "ops", "192.0.2.7", 99999999, ""},
      {"authorized_keys: its user only", &plain, "admin", "192.0.2.7", 1500, "not 'admin'"},
  };
  for (const Case& c : cases) {
    Status st = CheckLogin(*c.key, c.user, c.host, c.now);
    if (std::string(c.refusal).empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.code(), Code::kPermissionDenied) << c.name;
      EXPECT_NE(st.message().find(c.refusal), std::string::npos) << c.name << ": " << st.message();
    }
  }
}

}  // namespace
}  // namespace inc::sw::netconf
