// SPDX-License-Identifier: Apache-2.0
// libincmpi's environment (mpi/config.cc): ParseConfig over INCIN_* (and
// the old INCMPI_*) variables, UnknownEnvNames over environ and
// SummaryPathForRank over INCIN_MPI_SUMMARY_JSON. All are pure functions of their strings, so no MPI is
// needed. The input is an environment block: NAME=VALUE lines (a NUL-free
// text; the last definition of a name wins, as with setenv). Invariants: a
// parsed config is within the documented ranges; parsing is deterministic;
// every name UnknownEnvNames reports is really not in the settings table.
#include <map>
#include <string>
#include <vector>

#include "common/settings.h"
#include "fuzz_check.h"
#include "mpi/config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find('\0') != std::string::npos) return 0;  // environ strings cannot hold NUL

  std::vector<std::string> lines;
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty()) {
      lines.push_back(line);
      size_t eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    start = end + 1;
  }
  auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };

  auto config = inc::mpi::ParseConfig(lookup);
  auto again = inc::mpi::ParseConfig(lookup);
  FUZZ_CHECK(config.ok() == again.ok());
  if (config.ok()) {
    const inc::mpi::Config& c = *config;
    FUZZ_CHECK(c.min_bytes <= (1ull << 40) && c.max_bytes <= (1ull << 40));
    FUZZ_CHECK(c.max_bytes == 0 || c.max_bytes >= c.min_bytes);
    FUZZ_CHECK(c.join_timeout_ms >= 1 && c.join_timeout_ms <= 3600000);
    FUZZ_CHECK(c.job_id.size() <= 100);
    FUZZ_CHECK(c.am.empty() || c.am.find(':') != std::string::npos);
    FUZZ_CHECK(c.summary_json == again->summary_json && c.min_bytes == again->min_bytes);
    for (int rank : {0, 1, 12345}) {
      std::string path = inc::mpi::SummaryPathForRank(c.summary_json, rank);
      FUZZ_CHECK(path.find("%r") == std::string::npos || c.summary_json.find("%r") == std::string::npos);
    }
  } else {
    FUZZ_CHECK(config.status().message() == again.status().message());
  }

  std::vector<char*> environ_list;
  for (std::string& line : lines) environ_list.push_back(line.data());
  environ_list.push_back(nullptr);
  for (const std::string& name : inc::mpi::UnknownEnvNames(environ_list.data())) {
    FUZZ_CHECK(name.rfind("INCMPI_", 0) == 0 || name.rfind("INCIN_", 0) == 0);
    FUZZ_CHECK(!inc::settings::IsKnownName(name));
  }
  return 0;
}
