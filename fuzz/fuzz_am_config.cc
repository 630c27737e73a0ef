// SPDX-License-Identifier: Apache-2.0
// incamd's config file: the AmConfig JSON parser (am/topology.cc
// ParseJsonText, what LoadAmConfig reads the file with) and ValidateAmConfig.
// Invariant: a parsed config printed as JSON parses back to the same config.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "am/config.h"
#include "am/topology.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  inc::v1::AmConfig config;
  if (!inc::am::ParseJsonText(json, "fuzz", &config).ok()) return 0;
  (void)inc::am::ValidateAmConfig(config);

  std::string printed;
  FUZZ_CHECK(google::protobuf::util::MessageToJsonString(config, &printed).ok());
  inc::v1::AmConfig reparsed;
  FUZZ_CHECK(inc::am::ParseJsonText(printed, "printed", &reparsed).ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(config, reparsed));
  return 0;
}
