// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the incinctl tests: reading fields of detail views and
// parsing the JSON output.
#pragma once

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace inc::cli::test_util {

// The tests talk plaintext to in-process AMs, and incinctl speaks plaintext
// only when asked to.
inline const bool kPlaintextForTests = (setenv("INCIN_INSECURE", "1", 1), true);

// The value of a "  key:   value" line of a detail view ("" if absent).
inline std::string Field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, key.size() + 1, key + ":") != 0) continue;
    size_t value = line.find_first_not_of(' ', start + key.size() + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "";
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct s;
  auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

}  // namespace inc::cli::test_util
