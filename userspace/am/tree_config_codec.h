// SPDX-License-Identifier: Apache-2.0
// The bytes the state store keeps of a switch's tree config: the serialized
// message sent to the agent, so that a restarted AM re-sends it byte for
// byte (which the agent takes as a no-op). Implemented with the message
// translation in convert.cc; callers need no proto.
#pragma once

#include <string>

#include "am/model.h"
#include "common/status.h"

namespace inc::am {

std::string EncodeTreeConfig(const TreeConfig& c);
Expected<TreeConfig> DecodeTreeConfig(const std::string& bytes);

}  // namespace inc::am
