// SPDX-License-Identifier: Apache-2.0
#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace inc {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

Expected<std::string> ReadSecretFile(const std::string& path, const std::string& field) {
  const std::string where = field + ": " + path;
  if (path.empty() || path[0] != '/')
    return InvalidArgument(field + ": \"" + path + "\" is not an absolute path");
  // O_NOFOLLOW: the mode checked is the file's own, not a link's target's.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return InvalidArgument(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return InvalidArgument(where + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument(where + " is not a regular file");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    return FailedPrecondition(where + " has mode " + Octal(st.st_mode) +
                              ": group or others may access it; chmod 600 " + path);
  }
  if (static_cast<size_t>(st.st_size) > kMaxSecretBytes) {
    close(fd);
    return InvalidArgument(where + " is larger than " + std::to_string(kMaxSecretBytes) +
                           " bytes: not a key");
  }
  std::string content(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = read(fd, content.data(), content.size());
  int e = errno;
  close(fd);
  if (n < 0) return InvalidArgument(where + ": cannot read: " + std::strerror(e));
  content.resize(static_cast<size_t>(n));
  const char* space = " \t\r\n";
  size_t begin = content.find_first_not_of(space);
  if (begin == std::string::npos) return InvalidArgument(where + " is empty");
  size_t end = content.find_last_not_of(space);
  return content.substr(begin, end - begin + 1);
}

Expected<std::optional<SipKey>> ReadKeySetting(const std::string& hex, const std::string& file,
                                               const std::string& hex_field, const std::string& file_field) {
  if (!hex.empty() && !file.empty())
    return InvalidArgument(file_field + ": set both " + hex_field + " and " + file_field + "; keep one");
  if (!file.empty()) {
    auto text = ReadSecretFile(file, file_field);
    if (!text.ok()) return text.status();
    auto k = ParseSipKey(*text);
    if (!k.ok()) return InvalidArgument(file_field + ": " + file + " does not hold 32 hex digits");
    return std::optional<SipKey>(*k);
  }
  if (!hex.empty()) {
    auto k = ParseSipKey(hex);
    if (!k.ok()) return InvalidArgument(hex_field + ": " + k.status().message());
    return std::optional<SipKey>(*k);
  }
  return std::optional<SipKey>();
}

}  // namespace inc
