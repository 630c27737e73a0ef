// SPDX-License-Identifier: Apache-2.0
// What every harness shares: an invariant check that aborts (libFuzzer then
// saves the input as a crash), and quiet logs so the parsers' warnings about
// bad input do not slow the fuzzer down to the speed of the terminal.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>

#include "common/log.h"

#define FUZZ_CHECK(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace inc::fuzz {

// Called from LLVMFuzzerInitialize: only inc's errors reach stderr, and none
// of protobuf's (it logs every string field that is not UTF-8 while parsing).
inline void QuietLogs() {
  SetLogLevel(LogLevel::kError);
  google::protobuf::SetLogHandler(nullptr);
}

}  // namespace inc::fuzz
