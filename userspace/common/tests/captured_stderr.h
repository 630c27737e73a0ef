// SPDX-License-Identifier: Apache-2.0
// Test helper: everything written to stderr (fd 2) while a CapturedStderr
// lives goes to a temporary file, which Text() returns (and stops capturing).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace inc::testutil {

class CapturedStderr {
 public:
  CapturedStderr() {
    std::fflush(stderr);
    saved_ = dup(2);
    file_ = std::tmpfile();
    dup2(fileno(file_), 2);
  }
  ~CapturedStderr() {
    Restore();
    std::fclose(file_);
  }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;

  std::string Text() {
    Restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  int saved_ = -1;
  std::FILE* file_ = nullptr;
};

}  // namespace inc::testutil
