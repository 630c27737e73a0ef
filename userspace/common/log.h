// SPDX-License-Identifier: Apache-2.0
// Leveled logging to stderr, one line per message, in one of two formats:
//   text: "2026-11-22T03:00:00.123Z I incamd: message"
//   json: {"time":"2026-11-22T03:00:00.123Z","level":"info","component":"incamd","message":"message"}
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

void LogLine(LogLevel level, const std::string& text);
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
                          const std::string& component, const std::string& text);
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
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { LogLine(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace inc

#define INC_LOG(level)                                 \
  if (::inc::LogLevel::level < ::inc::GetLogLevel()) { \
  } else                                               \
    ::inc::detail::LogMessage(::inc::LogLevel::level).stream()

#define LOG_DEBUG INC_LOG(kDebug)
#define LOG_INFO INC_LOG(kInfo)
#define LOG_WARN INC_LOG(kWarn)
#define LOG_ERROR INC_LOG(kError)
