// SPDX-License-Identifier: Apache-2.0
// Adaptive Routing Notification messages (draft-wh-rtgwg-adaptive-routing-arn):
// the domain form of struct inc_arn_msg, its encoding, and the checks a
// receiver applies before it believes one. Wire layout:
// docs/wire-format.md "ARN messages".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/abi/forward.h"
#include "common/siphash.h"
#include "common/status.h"

namespace inc::arn {

enum class Type : uint8_t {
  kCongestionDetected = INC_ARN_CONGESTION_DETECTED,
  kCongestionEliminated = INC_ARN_CONGESTION_ELIMINATED,
  kLinkFailed = INC_ARN_LINK_FAILED,
  kLinkRestored = INC_ARN_LINK_RESTORED,
};
const char* TypeName(Type t);  // "congestion_detected", ...

// Congestion severities 1..3; failures always carry kSeverityFailure.
constexpr uint8_t kSeverityClear = INC_ARN_SEVERITY_CLEAR;
constexpr uint8_t kSeverityMaxCongestion = 3;
constexpr uint8_t kSeverityFailure = INC_ARN_SEVERITY_FAILURE;

struct Message {
  Type type = Type::kCongestionDetected;
  uint8_t severity = 1;
  uint32_t origin = 0;      // switch id of the sender
  uint32_t peer = 0;        // switch id at the far end of the link (0 = a host)
  uint32_t local_port = 0;  // the origin's port index of the link
  uint32_t seq = 0;
  uint64_t timestamp_ns = 0;
  uint32_t utilisation_ppm = 0;
  bool operator==(const Message& o) const;
};

// A group's shared 128-bit key; all zeros = messages are not authenticated
// (their auth field is 0 and receivers only check the origin).
using AuthKey = SipKey;
Expected<AuthKey> ParseAuthKey(const std::string& hex);  // 32 hex digits

std::vector<uint8_t> Encode(const Message& m, const AuthKey& key);

// Why a received datagram was not believed; each has a counter.
enum class Reject {
  kTruncated = 0,
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadSeverity,  // failure type without the failure level, or the reverse
  kBadAuth,
  kUnknownOrigin,
  kOwnMessage,
  kStale,  // sequence number not newer than the origin's last
  kCount,
};
const char* RejectName(Reject r);

// SipHash-2-4 lives in common/siphash.h (shared with the RSVP credit MAC).
using inc::SipHash24;
// The auth field: SipHash-2-4 of the message bytes before it, folded to 32
// bits; enough to keep a host on the fabric from steering traffic with
// forged notices.
uint32_t Digest(const AuthKey& key, const uint8_t* data, size_t len);

// Decodes and checks one datagram: framing, version, type/severity
// consistency and authentication (origin and sequence are the Receiver's).
Expected<Message> Decode(const uint8_t* data, size_t len, const AuthKey& key, Reject* why);

// The receiving side of a group: who may speak, and the newest sequence
// number seen per origin (serial-number arithmetic, so the 32-bit counter
// may wrap). Counts every reject by reason.
//
// Messages carry no key id, so during a key rotation a message is believed
// under the group key or under one more accepted key (the next key or the
// previous one). The sequence numbers are per origin whatever the key, so a
// rotation neither resets nor confuses the replay check.
class Receiver {
 public:
  Receiver(uint32_t self, std::set<uint32_t> group, AuthKey key, std::optional<AuthKey> accept = std::nullopt)
      : self_(self), group_(std::move(group)), key_(key), accept_(accept) {}
  // The message if it is new and believable; otherwise counts why.
  Expected<Message> Accept(const uint8_t* data, size_t len);
  // New keys for the messages that arrive from now on (SIGHUP); the
  // sequence history and the counters stay.
  void SetKeys(AuthKey key, std::optional<AuthKey> accept) {
    key_ = key;
    accept_ = accept;
  }
  uint64_t rejects(Reject r) const { return rejects_[static_cast<size_t>(r)]; }
  std::map<std::string, uint64_t> RejectCounts() const;
  uint64_t accepted() const { return accepted_; }

 private:
  uint32_t self_;
  std::set<uint32_t> group_;
  AuthKey key_;
  std::optional<AuthKey> accept_;
  std::map<uint32_t, uint32_t> last_seq_;
  uint64_t rejects_[static_cast<size_t>(Reject::kCount)] = {};
  uint64_t accepted_ = 0;
};

// True if a is newer than b in 32-bit serial arithmetic (RFC 1982).
inline bool SeqNewer(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) > 0;
}

}  // namespace inc::arn
