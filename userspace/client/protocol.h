// SPDX-License-Identifier: Apache-2.0
// Member-side protocol arithmetic and result validation (docs/wire-format.md,
// docs/architecture.md): how a buffer is cut into packets (one packet = one
// message), the credit window over the slot pool, and the checks a received frame must
// pass before its payload touches a user buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/frame.h"

namespace inc::client {

// Elements of elem_size bytes in one packet when the tree carries
// elems4 four-byte elements per packet (the payload size is the same).
constexpr uint32_t ElemsPerPacket(uint32_t elems4, size_t elem_size) {
  return static_cast<uint32_t>(elems4 * 4 / elem_size);
}

// Packets for count elements; at least one (a Barrier or an empty
// contribution is still one message).
constexpr uint64_t PacketCount(uint64_t count, uint32_t per_packet) {
  return count == 0 ? 1 : (count + per_packet - 1) / per_packet;
}

struct PacketRange {
  uint64_t first = 0;  // element index
  uint32_t count = 0;
};

constexpr PacketRange PacketElements(uint64_t packet, uint64_t count, uint32_t per_packet) {
  uint64_t first = packet * per_packet;
  if (first >= count) return {first, 0};
  uint64_t rest = count - first;
  return {first, static_cast<uint32_t>(rest < per_packet ? rest : per_packet)};
}

constexpr uint16_t SlotOf(uint32_t msg_id, uint32_t pool_size) {
  return static_cast<uint16_t>(msg_id % pool_size);
}

// Credit window: message `next` (relative to the operation's first) may go
// out only while fewer than pool_size messages are unfinished, i.e. after the
// result of next - pool_size (the previous user of its slot) arrived.
constexpr bool WindowAllows(uint64_t next, uint64_t oldest_unfinished, uint32_t pool_size) {
  return next < oldest_unfinished + pool_size;
}

// Why a received frame was not used. Counted per reason.
enum class Reject : uint8_t {
  kNone = 0,
  kMalformed,  // not a parseable RoCEv2 INC frame
  kBadIcrc,
  kWrongQpn,     // BTH DestQP is not this member's QP
  kWrongSource,  // source IP is not the attachment switch
  kBadVersion,
  kNotResult,  // RESULT flag missing
  kWrongTree,
  kBadKey,
  kBadSlot,         // slot != msg_id mod pool size
  kUnknownMessage,  // message id not sent yet, or from an earlier operation
  kDuplicate,       // result for a message already finished
  kMismatch,        // collective, dtype or element count differ from the request
  kCount,
};

const char* RejectName(Reject r);

struct ResultFilter {
  uint32_t member_qpn = 0;
  Ipv4 switch_ip;
  uint16_t tree_id = 0;
  uint32_t key = 0;
  uint32_t pool_size = 1;
};

// Checks that do not depend on which messages are in flight.
Reject CheckResultFrame(const ParsedFrame& f, const ResultFilter& want);

}  // namespace inc::client
