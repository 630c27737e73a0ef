// SPDX-License-Identifier: Apache-2.0
// The settings vocabulary (common/settings.h): new names, old names with
// one deprecation warning each, both set (the new name wins), bad values
// with precise errors, and the table's own consistency.
#include "common/settings.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace inc::settings {
namespace {

struct Fixture {
  std::map<std::string, std::string> env;
  std::vector<std::string> warnings;
  Reader reader{[this](const char* n) -> const char* {
                  auto it = env.find(n);
                  return it == env.end() ? nullptr : it->second.c_str();
                },
                [this](const std::string& w) { warnings.push_back(w); }};
};

enum class Getter { kString, kBool, kUInt, kBytes, kChoice };

struct Case {
  const char* what;
  std::map<std::string, std::string> env;
  Getter getter;
  const char* name;
  bool ok;
  std::string value;               // as text (bool: "1"/"0"), or the error message
  std::vector<std::string> warns;  // substrings, one per expected warning
};

std::string Get(const Reader& r, Getter g, const char* name, bool* ok) {
  auto text = [&](auto e) -> std::string {
    *ok = e.ok();
    if (!e.ok()) return e.status().message();
    if constexpr (std::is_same_v<std::decay_t<decltype(*e)>, bool>) return *e ? "1" : "0";
    if constexpr (std::is_same_v<std::decay_t<decltype(*e)>, uint64_t>) return std::to_string(*e);
    if constexpr (std::is_same_v<std::decay_t<decltype(*e)>, std::string>) return *e;
  };
  switch (g) {
    case Getter::kString: return text(r.String(name));
    case Getter::kBool: return text(r.Bool(name));
    case Getter::kUInt: return text(r.UInt(name));
    case Getter::kBytes: return text(r.Bytes(name));
    case Getter::kChoice: return text(r.Choice(name));
  }
  return "";
}

const Case kCases[] = {
    {"new name", {{"INCIN_AM", "10.0.0.1:50051"}}, Getter::kString, "INCIN_AM", true, "10.0.0.1:50051", {}},
    {"unset string is empty", {}, Getter::kString, "INCIN_AM", true, "", {}},
    {"empty value counts as unset",
     {{"INCIN_MPI_MIN_BYTES", ""}},
     Getter::kBytes,
     "INCIN_MPI_MIN_BYTES",
     true,
     "0",
     {}},
    {"unset number takes the table's default", {}, Getter::kUInt, "INCIN_LOCAL_SIZE", true, "1", {}},
    {"unset number without a default is 0", {}, Getter::kUInt, "INCIN_OP_TIMEOUT_MS", true, "0", {}},
    {"MPI's old name, with a warning naming the new one",
     {{"INCMPI_AM", "h:1"}},
     Getter::kString,
     "INCIN_AM",
     true,
     "h:1",
     {"INCMPI_AM is deprecated, use INCIN_AM"}},
    {"libinc's old name",
     {{"INC_AM_ADDRESS", "h:2"}},
     Getter::kString,
     "INCIN_AM",
     true,
     "h:2",
     {"INC_AM_ADDRESS is deprecated, use INCIN_AM"}},
    {"old TLS name",
     {{"INC_TLS_CA", "/ca.pem"}},
     Getter::kString,
     "INCIN_TLS_CA",
     true,
     "/ca.pem",
     {"INC_TLS_CA is deprecated, use INCIN_TLS_CA"}},
    {"both set: the new name wins and the warning says so",
     {{"INCIN_MPI_MIN_BYTES", "1K"}, {"INCMPI_MIN_BYTES", "2K"}},
     Getter::kBytes,
     "INCIN_MPI_MIN_BYTES",
     true,
     "1024",
     {"INCMPI_MIN_BYTES and INCIN_MPI_MIN_BYTES are both set: INCIN_MPI_MIN_BYTES wins"}},
    {"two old names: the first in the table wins, each warned about",
     {{"INCMPI_AM", "a:1"}, {"INC_AM_ADDRESS", "b:2"}},
     Getter::kString,
     "INCIN_AM",
     true,
     "a:1",
     {"INCMPI_AM is deprecated", "INC_AM_ADDRESS and INCMPI_AM are both set: INCMPI_AM wins"}},
    {"bytes with a suffix",
     {{"INCIN_MPI_MAX_BYTES", "4M"}},
     Getter::kBytes,
     "INCIN_MPI_MAX_BYTES",
     true,
     "4194304",
     {}},
    {"bool words", {{"INCIN_REQUIRE_OFFLOAD", "yes"}}, Getter::kBool, "INCIN_REQUIRE_OFFLOAD", true, "1", {}},
    {"bool default", {}, Getter::kBool, "INCIN_MPI_ENABLE", true, "1", {}},
    {"torch summary defaults to rank 0s table", {}, Getter::kChoice, "INCIN_TORCH_SUMMARY", true, "1", {}},
    {"choice", {{"INCIN_TRANSPORT", "afxdp"}}, Getter::kChoice, "INCIN_TRANSPORT", true, "afxdp", {}},
    {"bad bool names the variable, value and what is accepted",
     {{"INCIN_REQUIRE_OFFLOAD", "maybe"}},
     Getter::kBool,
     "INCIN_REQUIRE_OFFLOAD",
     false,
     "INCIN_REQUIRE_OFFLOAD='maybe': expected 0|1|true|false|yes|no|on|off",
     {}},
    {"bad number under an old name names both",
     {{"INCMPI_MIN_BYTES", "lots"}},
     Getter::kBytes,
     "INCIN_MPI_MIN_BYTES",
     false,
     "INCMPI_MIN_BYTES (the old name of INCIN_MPI_MIN_BYTES)='lots': expected a number with an optional K, M "
     "or "
     "G suffix",
     {"INCMPI_MIN_BYTES is deprecated"}},
    {"number above the table's maximum",
     {{"INCIN_JOIN_TIMEOUT_MS", "3600001"}},
     Getter::kUInt,
     "INCIN_JOIN_TIMEOUT_MS",
     false,
     "INCIN_JOIN_TIMEOUT_MS='3600001': expected at most 3600000",
     {}},
    {"negative number",
     {{"INCIN_OP_TIMEOUT_MS", "-1"}},
     Getter::kUInt,
     "INCIN_OP_TIMEOUT_MS",
     false,
     "INCIN_OP_TIMEOUT_MS='-1': expected a non-negative number",
     {}},
    {"suffix where none is allowed",
     {{"INCIN_OP_TIMEOUT_MS", "5K"}},
     Getter::kUInt,
     "INCIN_OP_TIMEOUT_MS",
     false,
     "INCIN_OP_TIMEOUT_MS='5K': expected a non-negative number",
     {}},
    {"choice outside the list",
     {{"INCIN_TRANSPORT", "tcp"}},
     Getter::kChoice,
     "INCIN_TRANSPORT",
     false,
     "INCIN_TRANSPORT='tcp': expected auto|xdp|afxdp|verbs",
     {}},
};

class SettingsTable : public testing::TestWithParam<Case> {};

TEST_P(SettingsTable, ValueOrErrorAndWarnings) {
  const Case& c = GetParam();
  Fixture f;
  f.env = c.env;
  bool ok = false;
  std::string got = Get(f.reader, c.getter, c.name, &ok);
  EXPECT_EQ(ok, c.ok) << got;
  EXPECT_EQ(got, c.value);
  ASSERT_EQ(f.warnings.size(), c.warns.size()) << (f.warnings.empty() ? "" : f.warnings[0]);
  for (size_t i = 0; i < c.warns.size(); i++)
    EXPECT_NE(f.warnings[i].find(c.warns[i]), std::string::npos) << f.warnings[i];
}

INSTANTIATE_TEST_SUITE_P(Cases, SettingsTable, testing::ValuesIn(kCases), [](const auto& info) {
  std::string n;
  for (const char* p = info.param.what; *p; p++) n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return n;
});

TEST(Settings, OneDeprecationWarningPerOldNamePerReader) {
  Fixture f;
  f.env = {{"INCMPI_AM", "h:1"}};
  for (int i = 0; i < 3; i++) EXPECT_EQ(*f.reader.String("INCIN_AM"), "h:1");
  Reader copy = f.reader;  // copies share the record, as the process-wide reader does
  EXPECT_EQ(*copy.String("INCIN_AM"), "h:1");
  EXPECT_EQ(f.warnings.size(), 1u);
}

TEST(Settings, EveryNameIsIncinAndNoOldNameIsTwice) {
  std::set<std::string> seen;
  for (const Setting& s : Table()) {
    EXPECT_EQ(std::string(s.name).rfind("INCIN_", 0), 0u) << s.name;
    EXPECT_TRUE(seen.insert(s.name).second) << s.name;
    for (const char* old : s.old_names) EXPECT_TRUE(seen.insert(old).second) << old;
    EXPECT_EQ(s.type == Type::kChoice, s.accepted != nullptr) << s.name;
    EXPECT_TRUE(*s.doc) << s.name;
  }
}

TEST(Settings, UnknownNamesAreIncinOrIncmpiNamesOutsideTheTable) {
  std::vector<std::string> lines = {"INCIN_AM=x",    "INCMPI_MIN_BYTES=1", "INCIN_MPI_MIN_BYTE=1",
                                    "INCMPI_TYPO=1", "INC_AM_ADDRESS=y",   "PATH=/bin"};
  std::vector<char*> env;
  for (std::string& l : lines) env.push_back(l.data());
  env.push_back(nullptr);
  EXPECT_EQ(UnknownNames(env.data()), (std::vector<std::string>{"INCIN_MPI_MIN_BYTE", "INCMPI_TYPO"}));
}

TEST(Settings, OffloadRequiredErrorSaysWhatWhyAndWhereItWouldHaveRun) {
  Status s = OffloadRequiredError("MPI_Allreduce", "MPI", "no_group", "INCIN_AM is not set");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(
      s.message(),
      "INCIN_REQUIRE_OFFLOAD is set: MPI_Allreduce would fall back to MPI (reason=no_group: INCIN_AM is not "
      "set)");
}

TEST(Settings, ParseNumberForValuesFromElsewhere) {
  EXPECT_EQ(*ParseNumber("opt", "64K", 1 << 20, true), 65536u);
  EXPECT_EQ(ParseNumber("opt", "x", 10, false).status().message(), "opt='x': expected a non-negative number");
  EXPECT_TRUE(*ParseBool("opt", "on"));
  EXPECT_EQ(ParseBool("opt", "2").status().message(), "opt='2': expected 0|1|true|false|yes|no|on|off");
}

}  // namespace
}  // namespace inc::settings
