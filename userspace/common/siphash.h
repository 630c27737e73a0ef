// SPDX-License-Identifier: Apache-2.0
// SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit hash, cheap for short
// messages. The MAC of every authenticated control message in incin (ARN
// notices, RSVP credit messages): the project may use no crypto library, and
// a 64-bit keyed PRF is what those MACs need.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace inc {

using SipKey = std::array<uint8_t, 16>;

uint64_t SipHash24(const SipKey& key, const uint8_t* data, size_t len);

// A key written as 32 hex digits (either case); INVALID_ARGUMENT otherwise.
Expected<SipKey> ParseSipKey(const std::string& hex);

}  // namespace inc
