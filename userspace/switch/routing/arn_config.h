// SPDX-License-Identifier: Apache-2.0
// The routing part of a switch's config (SwitchAgentConfig.routes and .arn)
// translated to domain types at the edge, with every error naming the field
// it comes from. See docs/arn.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arn/detector.h"
#include "arn/message.h"
#include "arn/paths.h"
#include "common/net.h"
#include "common/status.h"
#include "inc/v1/inc.pb.h"
#include "switch/config.h"

namespace inc::sw {

struct WatchedPort {
  std::string name;
  uint32_t index = 0;  // position in the config's port list (the ARN local_port)
  uint64_t capacity_bps = 0;
  uint32_t peer_id = 0;  // 0 = a host
};

struct RoutingSettings {
  // Routes: configured ones plus a /32 without hops per own port address.
  std::vector<arn::PlannedRoute> plan;
  bool arn_enabled = false;
  uint32_t switch_id = 0;
  std::map<uint32_t, std::string> names;  // switch id -> name (group and self)
  std::map<uint32_t, Ipv4> peers;         // switch id -> ARN address (others)
  arn::AuthKey key{};
  std::optional<arn::AuthKey> accept_key;  // believed besides `key` (rotation)
  Ipv4 listen_address;
  uint16_t listen_port = INC_ARN_PORT;
  uint32_t sample_interval_ms = 100;
  uint32_t repeat_interval_ms = 500;
  uint32_t hold_ms = 2000;
  arn::DetectorConfig detector;
  std::vector<WatchedPort> ports;
  std::string NameOf(uint32_t id) const;
};

Expected<RoutingSettings> ParseRoutingSettings(const v1::SwitchAgentConfig& config,
                                               const std::vector<PortInfo>& ports);

}  // namespace inc::sw
