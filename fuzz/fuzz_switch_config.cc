// SPDX-License-Identifier: Apache-2.0
// incswitchd's config file (switch/config.cc ParseConfigJson, then
// ValidateConfig and the routing/ARN and credit sections' parsers in
// switch/routing/arn_config.cc and switch/credit/credit_config.cc). The ports those parsers
// check against are the config's own, as ResolvePorts would report them for a
// machine that has every configured interface. Invariant: a parsed config
// printed as JSON parses back to the same config.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>
#include <vector>

#include "fuzz_check.h"
#include "switch/config.h"
#include "switch/credit/credit_config.h"
#include "switch/routing/arn_config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  auto config = inc::sw::ParseConfigJson(json);
  if (!config.ok()) return 0;

  std::string printed;
  FUZZ_CHECK(google::protobuf::util::MessageToJsonString(*config, &printed).ok());
  auto reparsed = inc::sw::ParseConfigJson(printed);
  FUZZ_CHECK(reparsed.ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*config, *reparsed));

  (void)inc::sw::ValidateConfig(*config);
  std::vector<inc::sw::PortInfo> ports;
  uint32_t ifindex = 1;
  for (const auto& p : config->ports()) {
    inc::sw::PortInfo info;
    info.name = p.name();
    info.ifindex = ifindex++;
    auto ip = inc::Ipv4::Parse(p.ip());
    if (ip.ok()) info.ip = *ip;
    info.mtu = 1500;
    info.up = true;
    ports.push_back(info);
  }
  (void)inc::sw::ParseRoutingSettings(*config, ports);
  (void)inc::sw::ParseCreditSettings(config->credit(), ports);
  return 0;
}
