// Leveled logging to stderr: "2026-11-22T03:00:00.123Z I incamd: message".
// Daemons set the level from --log-level / config; libbpf output is routed
// here by the data-path library.
#pragma once

#include <sstream>
#include <string>

namespace inc {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug|info|warn|error"; false on anything else.
bool ParseLogLevel(const std::string& text, LogLevel* out);
void SetLogComponent(const std::string& component);
void LogLine(LogLevel level, const std::string& text);

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
