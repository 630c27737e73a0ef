// SPDX-License-Identifier: Apache-2.0
// The data-path selftests' main: one private network namespace for the
// whole process (fixture.h), 77 when BPF cannot run here.
#include "fixture.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  inc::SetLogLevel(inc::LogLevel::kWarn);
  inc::dp::g_skip = inc::dp::SetupNetns();
  int rc = RUN_ALL_TESTS();
  rmdir(inc::dp::kPinRoot.c_str());
  // ctest reads 77 as "skipped" (SKIP_RETURN_CODE in datapath_tests.cmake).
  if (rc == 0 && !inc::dp::g_skip.empty()) return 77;
  return rc;
}
