// SPDX-License-Identifier: Apache-2.0
// incinctl's config files (cli/client_config.h): the JSON format with
// precise errors, where the user's file is, precedence flags > environment
// > user file > system file, and Run() taking the AM address from
// $INCIN_CONFIG's file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/client_config.h"
#include "cli/commands.h"

namespace inc::cli {
namespace {

ClientConfig Am(const char* am) {
  ClientConfig c;
  c.am = am;
  return c;
}

struct PrecedenceCase {
  const char* what;
  ClientConfig flags, env, user, system;
  std::string want_am;
};

TEST(CliConfig, PrecedenceIsFlagsThenEnvironmentThenUserFileThenSystemFile) {
  const PrecedenceCase cases[] = {
      {"flag over all", Am("f:1"), Am("e:1"), Am("u:1"), Am("s:1"), "f:1"},
      {"environment over files", {}, Am("e:1"), Am("u:1"), Am("s:1"), "e:1"},
      {"user file over system file", {}, {}, Am("u:1"), Am("s:1"), "u:1"},
      {"system file alone", {}, {}, {}, Am("s:1"), "s:1"},
      {"nothing set", {}, {}, {}, {}, ""},
  };
  for (const auto& c : cases)
    EXPECT_EQ(Resolve({c.flags, c.env, c.user, c.system}).am.value_or(""), c.want_am) << c.what;
}

TEST(CliConfig, EachFieldResolvesOnItsOwn) {
  ClientConfig env;
  env.cert = "/env/op.pem";
  ClientConfig user;
  user.am = "u:1";
  user.key = "/user/op.key";
  ClientConfig system;
  system.ca = "/etc/incin/ca.pem";
  system.cert = "/etc/incin/op.pem";
  system.insecure = false;
  ClientConfig r = Resolve({{}, env, user, system});
  EXPECT_EQ(r.am.value_or(""), "u:1");
  EXPECT_EQ(r.cert.value_or(""), "/env/op.pem");
  EXPECT_EQ(r.key.value_or(""), "/user/op.key");
  EXPECT_EQ(r.ca.value_or(""), "/etc/incin/ca.pem");
  EXPECT_EQ(r.insecure, std::optional<bool>(false));
}

TEST(CliConfig, ParsesEveryKey) {
  auto c = ParseClientConfigJson(
      R"({"am": "10.0.0.1:50051", "cert": "/c.pem", "key": "/k.pem", "ca": "/ca.pem", "insecure": true})",
      "f");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c->am, "10.0.0.1:50051");
  EXPECT_EQ(*c->cert, "/c.pem");
  EXPECT_EQ(*c->key, "/k.pem");
  EXPECT_EQ(*c->ca, "/ca.pem");
  EXPECT_EQ(c->insecure, std::optional<bool>(true));
}

TEST(CliConfig, BadFilesAreNamedWithWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"am": 5})", "/x.json: \"am\" must be a non-empty string"},
      {R"({"amm": "a:1"})", "/x.json: unknown key \"amm\" (known: am, cert, key, ca, insecure)"},
      {R"({"insecure": "yes"})", "/x.json: \"insecure\" must be true or false"},
      {R"(["a"])", "/x.json: not a JSON object"},
  };
  for (const auto& [text, want] : cases) {
    auto c = ParseClientConfigJson(text, "/x.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().message().rfind(want, 0), 0u) << c.status().message();
  }
}

TEST(CliConfig, UserFileIsIncinConfigThenXdgThenHome) {
  auto find = [](std::map<std::string, std::string> env) {
    return FindUserConfig([env](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  auto a = find({{"INCIN_CONFIG", "/tmp/i.json"}, {"HOME", "/root"}});
  EXPECT_EQ(a.path, "/tmp/i.json");
  EXPECT_TRUE(a.must_exist);
  auto b = find({{"XDG_CONFIG_HOME", "/xdg"}, {"HOME", "/root"}});
  EXPECT_EQ(b.path, "/xdg/incin/incinctl.json");
  EXPECT_FALSE(b.must_exist);
  EXPECT_EQ(find({{"HOME", "/root"}}).path, "/root/.config/incin/incinctl.json");
  EXPECT_EQ(find({}).path, "");
}

TEST(CliConfig, MissingFileIsEmptyUnlessIncinConfigNamesIt) {
  EXPECT_TRUE(LoadClientConfigFile("/nonexistent/incinctl.json", false).ok());
  auto named = LoadClientConfigFile("/nonexistent/incinctl.json", true);
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().message(), "/nonexistent/incinctl.json (INCIN_CONFIG): cannot be read");
}

TEST(CliConfig, EnvironmentIncludesOldTlsNames) {
  std::map<std::string, std::string> env = {{"INC_TLS_CA", "/old/ca.pem"}, {"INCIN_INSECURE", "0"}};
  settings::Reader reader(
      [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      nullptr);
  auto c = ClientConfigFromEnv(reader);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ca.value_or(""), "/old/ca.pem");
  EXPECT_EQ(c->insecure, std::optional<bool>(false));
  EXPECT_FALSE(c->am.has_value());
  env["INCIN_INSECURE"] = "yes";
  EXPECT_EQ(ClientConfigFromEnv(reader).status().message(), "INCIN_INSECURE='yes': expected 0|1");
}

// Run(): with no --am and no $INCIN_AM, the address of $INCIN_CONFIG's file.
TEST(CliConfig, RunTakesTheAmAddressFromTheConfigFile) {
  char path[] = "/tmp/incinctl-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << R"({"am": "10.7.7.7:9", "insecure": true})";
  }
  unsetenv("INCIN_AM");
  unsetenv("INCIN_INSECURE");
  setenv("INCIN_CONFIG", path, 1);
  std::vector<std::string> seen;
  Connector record = [&](const std::string& address,
                         const std::shared_ptr<grpc::ChannelCredentials>&) -> std::unique_ptr<AmStub> {
    seen.push_back(address);
    return nullptr;
  };
  std::ostringstream out, err;
  EXPECT_EQ(cli::Run({"switch", "list"}, out, err, record), kExitUnreachable) << err.str();
  setenv("INCIN_AM", "10.8.8.8:9", 1);
  EXPECT_EQ(cli::Run({"switch", "list"}, out, err, record), kExitUnreachable) << err.str();
  EXPECT_EQ(cli::Run({"switch", "list", "--am", "10.9.9.9:9"}, out, err, record), kExitUnreachable)
      << err.str();
  EXPECT_EQ(seen, (std::vector<std::string>{"10.7.7.7:9", "10.8.8.8:9", "10.9.9.9:9"}));
  // A broken file is a usage error naming the file.
  {
    std::ofstream f(path);
    f << R"({"am": "x:1", "colour": "blue"})";
  }
  std::ostringstream err2;
  EXPECT_EQ(cli::Run({"switch", "list"}, out, err2, record), kExitUsage);
  EXPECT_NE(err2.str().find(std::string(path) + ": unknown key \"colour\""), std::string::npos) << err2.str();
  unsetenv("INCIN_AM");
  unsetenv("INCIN_CONFIG");
  unlink(path);
}

}  // namespace
}  // namespace inc::cli
