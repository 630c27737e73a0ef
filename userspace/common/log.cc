// SPDX-License-Identifier: Apache-2.0
#include "common/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace inc {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_mu;
std::string g_component = "incin";

// Length of the UTF-8 sequence starting at s[i] (1..4), or 0 if the bytes
// there are not a well-formed sequence (overlong forms, surrogates and code
// points above U+10FFFF included).
size_t Utf8Length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; k++)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

std::string Timestamp(std::chrono::system_clock::time_point now) {
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[40];
  std::snprintf(out, sizeof(out), "%s.%03dZ", stamp, static_cast<int>(ms));
  return out;
}

// Decided once: a unit's stderr does not change under the process.
bool StderrIsJournal() {
  static const bool journal = IsJournalStream(std::getenv("JOURNAL_STREAM"), STDERR_FILENO);
  return journal;
}

void Write(LogLevel level, const std::string& component, const std::string& text,
           const LogFields& fields = {}) {
  const LogFormat format = GetLogFormat();
  std::string line = StderrIsJournal() ? JournalPriorityPrefix(level) : "";
  line += FormatLogLine(format, std::chrono::system_clock::now(), level, component, text, fields);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

bool IsJournalStream(const char* journal_stream, int fd) {
  if (!journal_stream) return false;
  uintmax_t dev = 0, ino = 0;
  char tail = 0;
  if (std::sscanf(journal_stream, "%" SCNuMAX ":%" SCNuMAX "%c", &dev, &ino, &tail) != 2) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == dev && static_cast<uintmax_t>(st.st_ino) == ino;
}

const char* JournalPriorityPrefix(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "<7>";
    case LogLevel::kInfo: return "<6>";
    case LogLevel::kWarn: return "<4>";
    case LogLevel::kError: return "<3>";
  }
  return "<6>";
}

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

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

void SetLogFormat(LogFormat format) {
  g_format = static_cast<int>(format);
}
LogFormat GetLogFormat() {
  return static_cast<LogFormat>(g_format.load());
}

bool ParseLogFormat(const std::string& text, LogFormat* out) {
  if (text == "text")
    *out = LogFormat::kText;
  else if (text == "json")
    *out = LogFormat::kJson;
  else
    return false;
  return true;
}

const char* LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

void SetLogComponent(const std::string& component) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_component = component;
}

std::string GetLogComponent() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_component;
}

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else if (c >= 0x80) {
          size_t n = Utf8Length(text, i);
          if (n == 0) {
            out += "\\ufffd";
            i += 1;
          } else {
            out.append(text, i, n);
            i += n;
          }
          continue;
        } else {
          out += static_cast<char>(c);
        }
    }
    i += 1;
  }
  out += '"';
  return out;
}

std::string EscapeLogText(const std::string& text) {
  size_t i = 0;
  // The common case, nothing to escape, copies once.
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F || c >= 0x80) break;
    ++i;
  }
  if (i == text.size()) return text;
  std::string out(text, 0, i);
  out.reserve(text.size() + 16);
  char buf[8];
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c >= 0x80) {
      const size_t n = Utf8Length(text, i);
      // C1 controls (U+0080..U+009F, 0xC2 0x80..0x9F) act like ESC
      // sequences on some terminals; stray bytes may too.
      if (n == 0 || (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0)) {
        const size_t k = n == 0 ? 1 : n;
        for (size_t j = 0; j < k; ++j) {
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(text[i + j]));
          out += buf;
        }
        i += k;
      } else {
        out.append(text, i, n);
        i += n;
      }
      continue;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

std::string FormatLogLine(LogFormat format, std::chrono::system_clock::time_point time, LogLevel level,
                          const std::string& component, const std::string& text, const LogFields& fields) {
  if (format == LogFormat::kJson) {
    std::string line = "{\"time\":\"" + Timestamp(time) + "\",\"level\":\"" + LogLevelName(level) +
                       "\",\"component\":" + JsonQuote(component);
    std::vector<const std::string*> seen;
    for (const LogField& f : fields) {
      if (f.key.empty() || (!f.number && f.value.empty()) || f.key == "time" || f.key == "level" ||
          f.key == "component" || f.key == "message")
        continue;
      bool repeated = false;
      for (const std::string* k : seen) repeated |= *k == f.key;
      if (repeated) continue;
      seen.push_back(&f.key);
      line += "," + JsonQuote(f.key) + ":" + (f.number ? f.value : JsonQuote(f.value));
    }
    return line + ",\"message\":" + JsonQuote(text) + "}";
  }
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  // Escaped: a peer's text (an error report, a job id, a host name) cannot
  // end the line and forge the next one, nor drive the reader's terminal.
  return Timestamp(time) + " " + kLetters[static_cast<int>(level)] + " " + EscapeLogText(component) + ": " +
         EscapeLogText(text);
}

void LogLine(LogLevel level, const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mu);
  Write(level, g_component, text);
}

void LogLine(LogLevel level, const std::string& text, const LogFields& fields) {
  std::lock_guard<std::mutex> lock(g_mu);
  Write(level, g_component, text, fields);
}

void LogLineFrom(LogLevel level, const std::string& source, const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mu);
  Write(level, g_component + "/" + source, text);
}

}  // namespace inc
