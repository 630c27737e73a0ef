// SPDX-License-Identifier: Apache-2.0
// Leveled logging to stderr, one line per message, in one of two formats:
//   text: "2026-11-22T03:00:00.123Z I incamd: message"
//   json: {"time":"2026-11-22T03:00:00.123Z","level":"info","component":"incamd","message":"message"}
// A line may carry fields (LogField: tree, job, switch, rank, ...): in JSON
// each is a member of the object of its own, between "component" and
// "message" (numbers as JSON numbers), so a log store can select the lines
// of one tree or job without parsing messages; text lines are unchanged (the
// message says the same in words):
//   LOG_INFO_F({"tree", id}, {"job", job}) << "tree " << id << " active";
//   {"time":...,"level":"info","component":"incamd","tree":7,"job":"j1","message":"tree 7 active"}
// Daemons set the level and format from --log-level / --log-format and their
// config (both can change at run time); libbpf output is routed here by the
// data-path library and gRPC's own lines by common/grpc_log.h. When stderr is
// the systemd journal's stream (JOURNAL_STREAM names it), every line starts
// with its syslog priority ("<3>" error, "<4>" warn, "<6>" info, "<7>"
// debug), which journald strips and stores as PRIORITY=, so `journalctl -p
// warning` finds the warnings.
#pragma once

#include <chrono>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace inc {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText = 0, kJson = 1 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug|info|warn|error"; false on anything else.
bool ParseLogLevel(const std::string& text, LogLevel* out);
// "debug", "info", "warn", "error".
const char* LogLevelName(LogLevel level);

void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// Parses "text|json"; false on anything else.
bool ParseLogFormat(const std::string& text, LogFormat* out);
const char* LogFormatName(LogFormat format);

void SetLogComponent(const std::string& component);
std::string GetLogComponent();

// One structured field of a log line. Integers become JSON numbers, the
// rest JSON strings. The keys time, level, component and message are the
// line's own: a field with one of them (or a key given twice) is left out,
// and so is a string field with an empty value (nothing to select by).
struct LogField {
  LogField(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  LogField(std::string k, const char* v) : key(std::move(k)), value(v ? v : "") {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogField(std::string k, T v) : key(std::move(k)), value(std::to_string(v)), number(true) {}
  std::string key;
  std::string value;
  bool number = false;
};
using LogFields = std::vector<LogField>;

void LogLine(LogLevel level, const std::string& text);
void LogLine(LogLevel level, const std::string& text, const LogFields& fields);
// A line from another library in this process (gRPC), logged under
// "<component>/<source>" so it can be told from the process's own lines.
void LogLineFrom(LogLevel level, const std::string& source, const std::string& text);

// Whether fd is the journal stream JOURNAL_STREAM ("DEVICE:INODE", as
// systemd sets it for a unit's stdout/stderr) names; false for null/bad text.
bool IsJournalStream(const char* journal_stream, int fd);
// "<N>": the syslog priority prefix of a level (sd-daemon.h's SD_ERR etc.).
const char* JournalPriorityPrefix(LogLevel level);

// One line as LogLine writes it, without the newline (for tests). In text
// the component and message go through EscapeLogText.
std::string FormatLogLine(LogFormat format, std::chrono::system_clock::time_point time, LogLevel level,
                          const std::string& component, const std::string& text,
                          const LogFields& fields = {});
// Text-log escaping: '\n', '\r', '\t' become "\n", "\r", "\t"; every other
// byte below 0x20, 0x7F, the C1 controls U+0080..U+009F and bytes that are
// not UTF-8 become "\xNN"; the rest (backslashes included) is kept. So a
// message is one line whatever a peer put into it, and holds no terminal
// escape sequence.
std::string EscapeLogText(const std::string& text);
// A JSON string literal (quotes included): control characters escaped,
// bytes that are not UTF-8 replaced by U+FFFD, so every line parses.
std::string JsonQuote(const std::string& text);

namespace detail {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level, LogFields fields = {}) : level_(level), fields_(std::move(fields)) {}
  ~LogMessage() { LogLine(level_, stream_.str(), fields_); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  LogFields fields_;
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace inc

#define INC_LOG(level)                                 \
  if (::inc::LogLevel::level < ::inc::GetLogLevel()) { \
  } else                                               \
    ::inc::detail::LogMessage(::inc::LogLevel::level).stream()

// INC_LOG_F(level, {"key", value}, ...): a line with fields (LogField).
#define INC_LOG_F(level, ...)                          \
  if (::inc::LogLevel::level < ::inc::GetLogLevel()) { \
  } else                                               \
    ::inc::detail::LogMessage(::inc::LogLevel::level, ::inc::LogFields{__VA_ARGS__}).stream()

#define LOG_DEBUG INC_LOG(kDebug)
#define LOG_INFO INC_LOG(kInfo)
#define LOG_WARN INC_LOG(kWarn)
#define LOG_ERROR INC_LOG(kError)
#define LOG_DEBUG_F(...) INC_LOG_F(kDebug, __VA_ARGS__)
#define LOG_INFO_F(...) INC_LOG_F(kInfo, __VA_ARGS__)
#define LOG_WARN_F(...) INC_LOG_F(kWarn, __VA_ARGS__)
#define LOG_ERROR_F(...) INC_LOG_F(kError, __VA_ARGS__)
