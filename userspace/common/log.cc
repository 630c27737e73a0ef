#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace inc {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
std::string g_component = "incin";
}  // namespace

void SetLogLevel(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel GetLogLevel() {
  return static_cast<LogLevel>(g_level.load());
}

bool ParseLogLevel(const std::string& text, LogLevel* out) {
  if (text == "debug")
    *out = LogLevel::kDebug;
  else if (text == "info")
    *out = LogLevel::kInfo;
  else if (text == "warn" || text == "warning")
    *out = LogLevel::kWarn;
  else if (text == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

void SetLogComponent(const std::string& component) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_component = component;
}

void LogLine(LogLevel level, const std::string& text) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s.%03dZ %c %s: %s\n", stamp, static_cast<int>(ms), kLetters[static_cast<int>(level)],
               g_component.c_str(), text.c_str());
}

}  // namespace inc
