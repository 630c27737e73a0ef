// SPDX-License-Identifier: Apache-2.0
// The logger's two line formats (text, JSON), JSON string quoting, the level
// and format names, and gRPC's own lines arriving through the logger.
#include "common/log.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/grpc_log.h"
#include "common/tests/captured_stderr.h"

namespace inc {
namespace {

// 2026-11-22T03:00:00.123Z
std::chrono::system_clock::time_point FixedTime() {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(1795316400123LL));
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Restores the logger's global settings after a test changes them.
class LogSettings : public ::testing::Test {
 protected:
  void SetUp() override {
    level_ = GetLogLevel();
    format_ = GetLogFormat();
    component_ = GetLogComponent();
  }
  void TearDown() override {
    SetLogLevel(level_);
    SetLogFormat(format_);
    SetLogComponent(component_);
  }

 private:
  LogLevel level_ = LogLevel::kInfo;
  LogFormat format_ = LogFormat::kText;
  std::string component_;
};

google::protobuf::Struct ParseJsonObject(const std::string& line) {
  google::protobuf::Struct parsed;
  auto st = google::protobuf::util::JsonStringToMessage(line, &parsed);
  EXPECT_TRUE(st.ok()) << st.message() << " in: " << line;
  return parsed;
}

TEST(LogFormatLine, TextAndJsonCarryTimeLevelComponentAndMessage) {
  struct Case {
    const char* name;
    LogFormat format;
    LogLevel level;
    const char* component;
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"text info", LogFormat::kText, LogLevel::kInfo, "incamd", "listening",
       "2026-11-22T03:00:00.123Z I incamd: listening"},
      {"text error", LogFormat::kText, LogLevel::kError, "incswitchd", "x",
       "2026-11-22T03:00:00.123Z E incswitchd: x"},
      {"json debug", LogFormat::kJson, LogLevel::kDebug, "incamd", "join rank 3",
       R"({"time":"2026-11-22T03:00:00.123Z","level":"debug","component":"incamd","message":"join rank 3"})"},
      {"json warn, quotes in the message", LogFormat::kJson, LogLevel::kWarn, "incswitchd/grpc",
       "port \"p0\"\tdown",
       R"({"time":"2026-11-22T03:00:00.123Z","level":"warn","component":"incswitchd/grpc","message":"port \"p0\"\tdown"})"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatLogLine(c.format, FixedTime(), c.level, c.component, c.text), c.want) << c.name;
  }
}

// Text lines: whatever a peer put into a message (a ReportError text, a job
// id, a host name), the line stays one line without terminal escapes.
TEST(LogFormatLine, TextEscapesControlsSoAMessageIsOneLine) {
  struct Case {
    const char* name;
    std::string text;
    std::string want;  // the message part of the line
  };
  const Case cases[] = {
      {"plain", "tree 3 active", "tree 3 active"},
      {"newline forging a line", "boom\n2026-11-22T03:00:00.123Z W incamd: forged",
       "boom\\n2026-11-22T03:00:00.123Z W incamd: forged"},
      {"carriage return", "a\rb", "a\\rb"},
      {"tab", "a\tb", "a\\tb"},
      {"escape sequence", "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"},
      {"other controls and delete", std::string("\x01\x07\x7f", 3), "\\x01\\x07\\x7f"},
      {"NUL", std::string("a\0b", 3), "a\\x00b"},
      {"UTF-8 kept", "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},
      {"C1 control CSI (U+009B)",
       "a\xc2\x9b"
       "2Kb",
       "a\\xc2\\x9b2Kb"},
      {"bytes that are not UTF-8",
       "a\xff\x9b"
       "b",
       "a\\xff\\x9bb"},
      {"backslashes kept", "C:\\dir \\n", "C:\\dir \\n"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(EscapeLogText(c.text), c.want) << c.name;
    const std::string line = FormatLogLine(LogFormat::kText, FixedTime(), LogLevel::kWarn, "incamd", c.text);
    EXPECT_EQ(line, "2026-11-22T03:00:00.123Z W incamd: " + c.want) << c.name;
    EXPECT_EQ(line.find('\n'), std::string::npos) << c.name;
    EXPECT_EQ(line.find('\r'), std::string::npos) << c.name;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << c.name;
  }
  EXPECT_EQ(FormatLogLine(LogFormat::kText, FixedTime(), LogLevel::kInfo, "am\nx", "m"),
            "2026-11-22T03:00:00.123Z I am\\nx: m");
}

TEST(LogFormatLine, JsonLinesParseBackToTheSameFields) {
  const std::string message = "multi\nline \x01 \"quoted\" \\ caf\xc3\xa9 \xff";
  const std::string line = FormatLogLine(LogFormat::kJson, FixedTime(), LogLevel::kError, "incamd", message);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one object per line";
  google::protobuf::Struct parsed = ParseJsonObject(line);
  EXPECT_EQ(parsed.fields().size(), 4u);
  EXPECT_EQ(parsed.fields().at("time").string_value(), "2026-11-22T03:00:00.123Z");
  EXPECT_EQ(parsed.fields().at("level").string_value(), "error");
  EXPECT_EQ(parsed.fields().at("component").string_value(), "incamd");
  EXPECT_EQ(parsed.fields().at("message").string_value(),
            "multi\nline \x01 \"quoted\" \\ caf\xc3\xa9 \xef\xbf\xbd");
}

TEST(LogFormatLine, JsonFieldsAreMembersOfTheirOwnBeforeTheMessage) {
  struct Case {
    const char* name;
    LogFields fields;
    const char* want_json;  // between "component":"incamd", and "message"
  };
  const uint32_t tree = 7;
  const std::string job = "job \"a\"";
  const Case cases[] = {
      {"no fields", {}, ""},
      {"tree number, job string", {{"tree", tree}, {"job", job}}, R"("tree":7,"job":"job \"a\"",)"},
      {"switch and rank", {{"switch", "leaf0"}, {"rank", 3}}, R"("switch":"leaf0","rank":3,)"},
      {"64-bit number", {{"tree", uint64_t{1} << 40}}, R"("tree":1099511627776,)"},
      {"negative number", {{"delta", -2}}, R"("delta":-2,)"},
      {"the line's own keys are left out",
       {{"message", "x"}, {"time", "x"}, {"level", "x"}, {"component", "x"}, {"tree", 1}},
       R"("tree":1,)"},
      {"a key given twice: the first stays", {{"tree", 1}, {"tree", 2}}, R"("tree":1,)"},
      {"an empty key is left out", {{"", "x"}, {"job", "j"}}, R"("job":"j",)"},
      {"an empty string value is left out", {{"job", ""}, {"tree", 0}}, R"("tree":0,)"},
      {"values are quoted like messages", {{"job", "a\nb\xff"}}, R"("job":"a\nb\ufffd",)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatLogLine(LogFormat::kJson, FixedTime(), LogLevel::kInfo, "incamd", "m", c.fields),
              std::string(R"({"time":"2026-11-22T03:00:00.123Z","level":"info","component":"incamd",)") +
                  c.want_json + R"("message":"m"})")
        << c.name;
    EXPECT_EQ(FormatLogLine(LogFormat::kText, FixedTime(), LogLevel::kInfo, "incamd", "m", c.fields),
              "2026-11-22T03:00:00.123Z I incamd: m")
        << c.name << ": text lines do not change";
  }
}

TEST(LogFormatLine, JsonLinesWithFieldsParseBackToTypedMembers) {
  const std::string line =
      FormatLogLine(LogFormat::kJson, FixedTime(), LogLevel::kWarn, "incswitchd", "tree 9 removed",
                    {{"tree", 9}, {"job", "train-1"}, {"switch", "spine0"}, {"rank", 0}});
  google::protobuf::Struct parsed = ParseJsonObject(line);
  EXPECT_EQ(parsed.fields().size(), 8u) << line;
  EXPECT_EQ(parsed.fields().at("tree").number_value(), 9) << line;
  EXPECT_EQ(parsed.fields().at("rank").number_value(), 0) << line;
  EXPECT_EQ(parsed.fields().at("job").string_value(), "train-1") << line;
  EXPECT_EQ(parsed.fields().at("switch").string_value(), "spine0") << line;
  EXPECT_EQ(parsed.fields().at("message").string_value(), "tree 9 removed") << line;
}

TEST(JsonQuote, EscapesControlsAndReplacesBytesThatAreNotUtf8) {
  struct Case {
    const char* name;
    std::string in;
    std::string want;
  };
  const Case cases[] = {
      {"plain", "abc", R"("abc")"},
      {"empty", "", R"("")"},
      {"quote and backslash", "a\"b\\c", R"("a\"b\\c")"},
      {"newline, return, tab", "a\nb\rc\td", R"("a\nb\rc\td")"},
      {"other control characters", std::string("\x01\x1f\x7f", 3), R"("\u0001\u001f\u007f")"},
      {"NUL byte", std::string("a\0b", 3), R"("a\u0000b")"},
      {"two-byte UTF-8", "caf\xc3\xa9", "\"caf\xc3\xa9\""},
      {"three-byte UTF-8", "\xe2\x82\xac", "\"\xe2\x82\xac\""},
      {"four-byte UTF-8", "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},
      {"stray continuation byte", "a\x80z", R"("a\ufffdz")"},
      {"byte 0xff", "\xff", R"("\ufffd")"},
      {"truncated sequence at the end", "ok\xc3", R"("ok\ufffd")"},
      {"overlong encoding of '/'", "\xc0\xaf", R"("\ufffd\ufffd")"},
      {"UTF-16 surrogate", "\xed\xa0\x80", R"("\ufffd\ufffd\ufffd")"},
      {"above U+10FFFF", "\xf4\x90\x80\x80", R"("\ufffd\ufffd\ufffd\ufffd")"},
  };
  for (const Case& c : cases) EXPECT_EQ(JsonQuote(c.in), c.want) << c.name;
}

TEST(JournalStream, OnlyTheStreamJournalStreamNamesGetsPriorityPrefixes) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fds[1], &st), 0);
  const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other_inode = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  struct Case {
    const char* name;
    const char* env;
    bool want;
  };
  const Case cases[] = {
      {"unset (not under systemd)", nullptr, false},
      {"this pipe", mine.c_str(), true},
      {"another inode (stderr redirected by the unit's command)", other_inode.c_str(), false},
      {"empty", "", false},
      {"no inode", "12", false},
      {"trailing garbage", (mine + "x").c_str(), false},
  };
  for (const Case& c : cases) EXPECT_EQ(IsJournalStream(c.env, fds[1]), c.want) << c.name;
  EXPECT_FALSE(IsJournalStream(mine.c_str(), -1)) << "a closed fd";
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_STREQ(JournalPriorityPrefix(LogLevel::kError), "<3>");
  EXPECT_STREQ(JournalPriorityPrefix(LogLevel::kWarn), "<4>");
  EXPECT_STREQ(JournalPriorityPrefix(LogLevel::kInfo), "<6>");
  EXPECT_STREQ(JournalPriorityPrefix(LogLevel::kDebug), "<7>");
}

TEST(LogNames, LevelsAndFormatsParseAndPrint) {
  struct LevelCase {
    const char* text;
    bool ok;
    LogLevel level;
  };
  const LevelCase levels[] = {{"debug", true, LogLevel::kDebug}, {"info", true, LogLevel::kInfo},
                              {"warn", true, LogLevel::kWarn},   {"warning", true, LogLevel::kWarn},
                              {"error", true, LogLevel::kError}, {"INFO", false, LogLevel::kInfo},
                              {"", false, LogLevel::kInfo},      {"trace", false, LogLevel::kInfo}};
  for (const LevelCase& c : levels) {
    LogLevel got = LogLevel::kInfo;
    EXPECT_EQ(ParseLogLevel(c.text, &got), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(got, c.level) << c.text;
    }
  }
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    LogLevel back = LogLevel::kInfo;
    EXPECT_TRUE(ParseLogLevel(LogLevelName(l), &back));
    EXPECT_EQ(back, l);
  }
  struct FormatCase {
    const char* text;
    bool ok;
    LogFormat format;
  };
  const FormatCase formats[] = {{"text", true, LogFormat::kText},
                                {"json", true, LogFormat::kJson},
                                {"JSON", false, LogFormat::kText},
                                {"logfmt", false, LogFormat::kText},
                                {"", false, LogFormat::kText}};
  for (const FormatCase& c : formats) {
    LogFormat got = LogFormat::kText;
    EXPECT_EQ(ParseLogFormat(c.text, &got), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(got, c.format) << c.text;
      EXPECT_STREQ(LogFormatName(got), c.text);
    }
  }
}

TEST_F(LogSettings, LinesBelowTheLevelAreDroppedAndTheFormatAppliesAtOnce) {
  SetLogComponent("logtest");
  SetLogLevel(LogLevel::kWarn);
  testutil::CapturedStderr captured;
  LOG_INFO << "not shown";
  LOG_WARN << "shown as text";
  SetLogFormat(LogFormat::kJson);
  LOG_ERROR << "shown as json";
  SetLogLevel(LogLevel::kDebug);
  LOG_DEBUG << "debug now shown";
  const std::string text = captured.Text();
  EXPECT_FALSE(Contains(text, "not shown")) << text;
  EXPECT_TRUE(Contains(text, " W logtest: shown as text\n")) << text;
  EXPECT_TRUE(Contains(text, R"("level":"error","component":"logtest","message":"shown as json"})")) << text;
  EXPECT_TRUE(Contains(text, R"("message":"debug now shown")")) << text;
}

TEST_F(LogSettings, LogMacrosWithFieldsWriteThemInJsonOnlyAboveTheLevel) {
  SetLogComponent("logtest");
  SetLogLevel(LogLevel::kInfo);
  SetLogFormat(LogFormat::kJson);
  testutil::CapturedStderr captured;
  const std::string job = "j1";
  LOG_DEBUG_F({"tree", 5}) << "hidden at info";
  LOG_INFO_F({"tree", 5}, {"job", job}) << "tree " << 5 << " active";
  LOG_WARN_F({"switch", "leaf0"}, {"rank", 2u}) << "rank left";
  SetLogFormat(LogFormat::kText);
  LOG_ERROR_F({"tree", 6}) << "as text";
  const std::string text = captured.Text();
  EXPECT_FALSE(Contains(text, "hidden at info")) << text;
  EXPECT_TRUE(Contains(text, R"("component":"logtest","tree":5,"job":"j1","message":"tree 5 active"})"))
      << text;
  EXPECT_TRUE(Contains(
      text, R"("level":"warn","component":"logtest","switch":"leaf0","rank":2,"message":"rank left"})"))
      << text;
  EXPECT_TRUE(Contains(text, " E logtest: as text\n")) << text;
}

TEST(GrpcLog, SeveritiesMapToLevels) {
  struct Case {
    const char* name;
    int severity;
    LogLevel level;
  };
  const Case cases[] = {{"debug", GPR_LOG_SEVERITY_DEBUG, LogLevel::kDebug},
                        {"info", GPR_LOG_SEVERITY_INFO, LogLevel::kInfo},
                        {"error", GPR_LOG_SEVERITY_ERROR, LogLevel::kError}};
  for (const Case& c : cases) EXPECT_EQ(GrpcSeverityToLevel(c.severity), c.level) << c.name;
}

TEST_F(LogSettings, GrpcLinesGoThroughTheLoggerUnderTheGrpcComponent) {
  if (std::getenv("GRPC_VERBOSITY")) GTEST_SKIP() << "GRPC_VERBOSITY is set: gRPC decides what it logs";
  SetLogComponent("logtest");
  SetLogLevel(LogLevel::kInfo);
  RouteGrpcLogs();
  testutil::CapturedStderr captured;
  gpr_log(GPR_ERROR, "an error from gRPC %d", 1);
  gpr_log(GPR_INFO, "gRPC info, hidden at info: gRPC makes errors only");
  SetLogLevel(LogLevel::kDebug);
  SyncGrpcLogVerbosity();
  gpr_log(GPR_INFO, "gRPC info, shown at debug");
  SetLogFormat(LogFormat::kJson);
  gpr_log(GPR_DEBUG, "gRPC debug as json");
  SetLogLevel(LogLevel::kInfo);
  SyncGrpcLogVerbosity();
  const std::string text = captured.Text();
  EXPECT_TRUE(Contains(text, " E logtest/grpc: log_test.cc:")) << text;
  EXPECT_TRUE(Contains(text, ": an error from gRPC 1\n")) << text;
  EXPECT_FALSE(Contains(text, "hidden at info")) << text;
  EXPECT_TRUE(Contains(text, " I logtest/grpc: log_test.cc:")) << text;
  EXPECT_TRUE(Contains(text, "gRPC info, shown at debug")) << text;
  EXPECT_TRUE(Contains(text, R"("level":"debug","component":"logtest/grpc","message":"log_test.cc:)"))
      << text;
}

// A real gRPC failure: a server that cannot bind its port. gRPC explains why
// in its own log lines; they must come out formatted by incin's logger.
TEST_F(LogSettings, GrpcsOwnErrorOnAPortInUseComesOutAsJson) {
  if (std::getenv("GRPC_VERBOSITY")) GTEST_SKIP() << "GRPC_VERBOSITY is set: gRPC decides what it logs";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  SetLogComponent("logtest");
  SetLogFormat(LogFormat::kJson);
  SetLogLevel(LogLevel::kInfo);
  RouteGrpcLogs();
  std::string text;
  {
    testutil::CapturedStderr captured;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(taken, grpc::InsecureServerCredentials(), &port);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    EXPECT_EQ(port, 0);
    text = captured.Text();
  }
  close(fd);
  ASSERT_FALSE(text.empty()) << "gRPC said nothing about the port in use";
  size_t start = 0;
  int lines = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    ++lines;
    google::protobuf::Struct parsed = ParseJsonObject(line);
    EXPECT_EQ(parsed.fields().at("component").string_value(), "logtest/grpc") << line;
    EXPECT_EQ(parsed.fields().at("level").string_value(), "error") << line;
  }
  EXPECT_GT(lines, 0);
}

}  // namespace
}  // namespace inc
