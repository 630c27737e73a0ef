// SPDX-License-Identifier: Apache-2.0
// coll/incin's configuration: the coll_incin_* MCA parameters stand for the
// settings table's INCIN_* settings (every setting the component reads has
// one, or a reason why not), an explicitly set parameter wins over its
// variable through libincmpi's one parser (mpi/config.h), and Open MPI's
// own ompi_info, loading the built component, shows coll/incin off by
// default with every parameter, its default and its help.
#include "params.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/settings.h"
#include "mpi/config.h"

namespace {

using inc::mpi::Config;
using inc::mpi::ParseConfig;
using inc::mpi::SettingOverride;
using inc::ompi::McaParams;
using inc::ompi::UnregisteredSettings;

// Every field, so that two configurations compare as a whole.
std::string Dump(const Config& c) {
  return "enable=" + std::to_string(c.enable) + " require=" + std::to_string(c.require_offload) +
         " min=" + std::to_string(c.min_bytes) + " max=" + std::to_string(c.max_bytes) + " am=" + c.am +
         " iface=" + c.iface + " transport=" + c.transport + " job=" + c.job_id +
         " join=" + std::to_string(c.join_timeout_ms) + " op=" + std::to_string(c.op_timeout_ms) +
         " float_sum=" + std::to_string(c.float_sum) + " reduce=" + c.reduce_mode +
         " bcast=" + c.broadcast_mode + " log=" + std::to_string(static_cast<int>(c.log_level)) +
         " fblog=" + std::to_string(static_cast<int>(c.fallback_log_level)) +
         " fball=" + std::to_string(c.fallback_log_all) +
         " summary=" + std::to_string(static_cast<int>(c.summary)) + " json=" + c.summary_json;
}

inc::settings::EnvLookup Env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(McaParams, EachStandsForOneSettingOfTheTable) {
  std::set<std::string> names;
  for (const auto& p : McaParams()) {
    const inc::settings::Setting* s = inc::settings::Find(p.setting);
    ASSERT_NE(s, nullptr) << p.setting << " is not in the settings table";
    EXPECT_TRUE(names.insert(p.name).second) << "coll_incin_" << p.name << " twice";
    EXPECT_NE(p.name, "enable") << "the component's own switch";
    EXPECT_NE(p.name, "priority");
    EXPECT_GE(p.level, 1);
    EXPECT_LE(p.level, 9);
    EXPECT_NE(p.help.find(s->doc), std::string::npos) << p.name << ": help lacks the table's text";
    EXPECT_NE(p.help.find(p.setting), std::string::npos) << p.name << ": help does not name its variable";
  }
  EXPECT_EQ(McaParams().front().name, "am");
  EXPECT_LE(McaParams().size(), 32u) << "component.c registers at most INCIN_MAX_PARAMS (32)";
  EXPECT_TRUE(names.count("min_bytes") && names.count("max_bytes") && names.count("tls_cert") &&
              names.count("require_offload") && names.count("log_level") && names.count("op_timeout_ms"));
}

// A new common or MPI setting must get a parameter or a stated reason.
TEST(McaParams, CoverEveryCommonAndMpiSettingOrSayWhyNot) {
  std::set<std::string> covered;
  for (const auto& p : McaParams()) covered.insert(p.setting);
  for (const auto& u : UnregisteredSettings()) {
    EXPECT_TRUE(covered.insert(u.setting).second) << u.setting << " both registered and not";
    EXPECT_NE(inc::settings::Find(u.setting), nullptr) << u.setting;
    EXPECT_GT(std::string(u.why).size(), 20u) << u.setting << " needs a reason";
  }
  for (const auto& s : inc::settings::Table()) {
    const std::string fe = s.front_end;
    if (fe != "common" && fe != "mpi") continue;
    EXPECT_TRUE(covered.count(s.name)) << s.name << " has no coll_incin_ parameter";
  }
}

TEST(McaParams, TheCredentialIsNoParameter) {
  for (const auto& p : McaParams()) EXPECT_NE(std::string(p.setting), "INCIN_JOB_CREDENTIAL");
}

// The default ompi_info shows is what coll/incin does with the setting unset.
TEST(McaParams, DefaultsAreWhatAnUnsetSettingMeans) {
  auto unset = ParseConfig(std::vector<SettingOverride>{}, Env({}));
  ASSERT_TRUE(unset.ok()) << unset.status().ToString();
  for (const auto& p : McaParams()) {
    if (p.def.empty()) continue;
    auto given = ParseConfig({{p.setting, p.def, "coll_incin_" + p.name}}, Env({}));
    ASSERT_TRUE(given.ok()) << p.name << "=" << p.def << ": " << given.status().ToString();
    EXPECT_EQ(Dump(*given), Dump(*unset)) << "coll_incin_" << p.name << "'s default " << p.def;
  }
}

TEST(Overlay, SetParameterWinsOverTheVariable) {
  auto c = ParseConfig({{"INCIN_MPI_MIN_BYTES", "8", "coll_incin_min_bytes"}},
                       Env({{"INCIN_MPI_MIN_BYTES", "1M"}, {"INCIN_MPI_MAX_BYTES", "64M"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->min_bytes, 8u);
  EXPECT_EQ(c->max_bytes, 64u << 20) << "a setting without a parameter still reads its variable";
}

TEST(Overlay, VariableAndDefaultWithoutParameters) {
  auto c = ParseConfig(std::vector<SettingOverride>{}, Env({{"INCIN_MPI_MIN_BYTES", "1M"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->min_bytes, 1u << 20);
  EXPECT_EQ(c->join_timeout_ms, 30000u);
  EXPECT_FALSE(c->require_offload);
}

TEST(Overlay, ParameterCanTurnOffWhatTheVariableTurnedOn) {
  auto c = ParseConfig({{"INCIN_REQUIRE_OFFLOAD", "false", "coll_incin_require_offload"}},
                       Env({{"INCIN_REQUIRE_OFFLOAD", "1"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->require_offload);
}

TEST(Overlay, OldNameOfAnOverriddenSettingIsNotRead) {
  std::vector<std::string> warnings;
  auto c = ParseConfig({{"INCIN_AM", "10.0.0.2:50051", "coll_incin_am"}}, Env({{"INCMPI_AM", "10.0.0.9:1"}}),
                       [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->am, "10.0.0.2:50051");
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  // Without the parameter the old name still works, with its warning.
  auto old = ParseConfig(std::vector<SettingOverride>{}, Env({{"INCMPI_AM", "10.0.0.9:1"}}),
                         [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->am, "10.0.0.9:1");
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(Overlay, BadParameterIsNamedInTheError) {
  auto c = ParseConfig({{"INCIN_MPI_MIN_BYTES", "lots", "coll_incin_min_bytes"}}, Env({}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("coll_incin_min_bytes (INCIN_MPI_MIN_BYTES)='lots': expected", 0), 0u)
      << c.status().message();
  auto below = ParseConfig({{"INCIN_MPI_MAX_BYTES", "4", "coll_incin_max_bytes"}},
                           Env({{"INCIN_MPI_MIN_BYTES", "8"}}));
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().message(),
            "coll_incin_max_bytes (INCIN_MPI_MAX_BYTES)=4 is below INCIN_MPI_MIN_BYTES=8: nothing would be "
            "offloaded");
  auto choice = ParseConfig({{"INCIN_TRANSPORT", "carrier-pigeon", "coll_incin_transport"}}, Env({}));
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("coll_incin_transport (INCIN_TRANSPORT)='carrier-pigeon'"),
            std::string::npos)
      << choice.status().message();
}

TEST(Overlay, BadVariableIsStillNamedAsTheVariable) {
  auto c = ParseConfig({{"INCIN_MPI_MAX_BYTES", "1M", "coll_incin_max_bytes"}},
                       Env({{"INCIN_MPI_MIN_BYTES", "lots"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("INCIN_MPI_MIN_BYTES='lots'", 0), 0u) << c.status().message();
}

// ompi_info --parsable of the built component: "mca:coll:incin:param:NAME:FIELD:VALUE" lines.
struct Info {
  int status = -1;
  std::string text;
  std::map<std::string, std::map<std::string, std::string>> params;  // name -> field -> value
  bool listed = false;
};

Info OmpiInfo(const std::string& env) {
  Info info;
  std::string dir = INCIN_COMPONENT_PATH;
  dir = dir.substr(0, dir.rfind('/'));
  // Open MPI's own directory first (a component path replaces the default).
  const std::string cmd = "env -u OMPI_MCA_coll_incin_enable " + env +
                          " OMPI_MCA_mca_component_path=\"$(ompi_info --path pkglibdir --parsable | sed -n "
                          "'s/^path:pkglibdir://p'):" +
                          dir + "\" ompi_info --param coll incin --level 9 --parsable 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return info;
  char buf[4096];
  while (fgets(buf, sizeof(buf), f)) {
    std::string line = buf;
    info.text += line;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (line.rfind("mca:coll:incin:version:", 0) == 0) info.listed = true;
    const std::string prefix = "mca:coll:incin:param:";
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size());
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string& v = info.params[line.substr(0, a)][line.substr(a + 1, b - a - 1)];
    // Help may span lines in the parsable output; the first one is enough.
    if (v.empty()) v = line.substr(b + 1);
  }
  info.status = pclose(f);
  return info;
}

bool HaveOmpiInfo() {
  return std::system("command -v ompi_info >/dev/null 2>&1") == 0;
}

TEST(OmpiInfo, ListsTheComponentOffByDefaultWithEveryParameter) {
  if (!HaveOmpiInfo()) GTEST_SKIP() << "ompi_info is not installed (openmpi-bin)";
  Info info = OmpiInfo("");
  ASSERT_EQ(info.status, 0) << info.text;
  ASSERT_TRUE(info.listed) << "ompi_info does not list coll/incin:\n" << info.text;
  EXPECT_EQ(info.params["coll_incin_enable"]["value"], "false") << info.text;
  EXPECT_EQ(info.params["coll_incin_enable"]["source"], "default");
  EXPECT_EQ(info.params["coll_incin_priority"]["value"], "90");
  for (const auto& p : McaParams()) {
    const std::string name = "coll_incin_" + p.name;
    ASSERT_TRUE(info.params.count(name)) << name << " is not registered:\n" << info.text;
    auto& f = info.params[name];
    EXPECT_EQ(f["value"], p.def) << name;
    EXPECT_EQ(f["source"], "default") << name;
    EXPECT_EQ(f["type"], "string") << name;
    EXPECT_EQ(f["level"], std::to_string(p.level)) << name;
    EXPECT_NE(f["help"].find(p.setting), std::string::npos) << name << ": " << f["help"];
  }
  EXPECT_EQ(info.params.count("coll_incin_job_credential"), 0u);
  // priority, enable and the table's parameters: nothing else.
  EXPECT_EQ(info.params.size(), McaParams().size() + 2);
}

TEST(OmpiInfo, ShowsParametersSetInTheEnvironment) {
  if (!HaveOmpiInfo()) GTEST_SKIP() << "ompi_info is not installed (openmpi-bin)";
  Info info = OmpiInfo("OMPI_MCA_coll_incin_enable=1 OMPI_MCA_coll_incin_min_bytes=8K");
  ASSERT_EQ(info.status, 0) << info.text;
  EXPECT_EQ(info.params["coll_incin_enable"]["value"], "true") << info.text;
  EXPECT_EQ(info.params["coll_incin_min_bytes"]["value"], "8K");
  EXPECT_EQ(info.params["coll_incin_min_bytes"]["source"], "environment");
}

}  // namespace
