// SPDX-License-Identifier: Apache-2.0
// RSVP credit signalling (draft-hu-rtgwg-cbfc-rsvp): the domain form
// of the Credit-based PATH (28), Credit-based RESV (29) and PathTear (5)
// messages, their encoding with an RFC 2205 common header and objects, and
// the receiver checks (checksum, objects, SipHash-2-4 integrity, replay).
// Byte layouts: docs/wire-format.md "RSVP credit signalling".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/siphash.h"
#include "common/status.h"

namespace inc::credit {

constexpr uint8_t kRsvpVersion = 1;
constexpr uint8_t kIpProtoRsvp = 46;
constexpr uint16_t kRoceV2Port = 4791;
constexpr size_t kCommonHeaderLen = 8;
constexpr size_t kObjectHeaderLen = 4;

// Message types. PathTear is RFC 2205's own teardown, reused with the credit
// SESSION C-Type (docs/credit.md says why).
enum class MsgType : uint8_t {
  kPathTear = 5,
  kResvTear = 6,  // a next hop can no longer carry the flow (docs/credit.md)
  kCreditPath = 28,
  kCreditResv = 29,
};
const char* MsgTypeName(MsgType t);

// Class-Nums and C-Types on the wire.
constexpr uint8_t kClassSession = 1;
constexpr uint8_t kClassRsvpHop = 3;
constexpr uint8_t kClassIntegrity = 4;
constexpr uint8_t kClassTimeValues = 5;
// 124: RFC 3936's private-use block (124-127) of the 0bbbbbbb range, whose
// unknown classes RFC 2205 s3.10 says a node must reject rather than ignore
// or forward: a hop that does not understand credit must not pass it on.
constexpr uint8_t kClassCredit = 124;
constexpr uint8_t kCTypeSessionRoce = 124;  // incin RoCEv2 flow SESSION
constexpr uint8_t kCTypeHopIpv4 = 1;
constexpr uint8_t kCTypeTimeValues = 1;
constexpr uint8_t kCTypeIntegritySipHash = 124;  // RFC 2747 layout, SipHash-2-4 MAC
constexpr uint8_t kCTypeCreditMegabytes = 1;     // the draft's unit
constexpr uint8_t kCTypeCreditBytes = 2;         // incin's finer unit
constexpr uint64_t kBytesPerMegabyte = 1ull << 20;

// A RoCEv2 flow: addresses in host order.
struct FlowId {
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = kRoceV2Port;
  uint32_t dest_qpn = 0;  // 24 bits
  auto Tie() const { return std::tie(src_ip, dst_ip, src_port, dst_port, dest_qpn); }
  bool operator<(const FlowId& o) const { return Tie() < o.Tie(); }
  bool operator==(const FlowId& o) const { return Tie() == o.Tie(); }
  std::string ToString() const;  // "10.0.0.1:49152->10.0.1.1:4791 qpn 0x11"
};

// RSVP_HOP: the sender of this message on this link (PATH: previous hop,
// RESV: next hop) and its logical interface handle.
struct Hop {
  uint32_t address = 0;
  uint32_t lih = 0;
  bool operator==(const Hop& o) const { return address == o.address && lih == o.lih; }
};

enum class CreditUnit : uint8_t { kMegabytes = kCTypeCreditMegabytes, kBytes = kCTypeCreditBytes };

// CREDIT: the buffer the sender of a RESV holds for the flow, plus the
// cumulative bytes it has freed (forwarded on) since the flow began, mod
// 2^64. The upstream may have sent buffer + freed_total bytes in all; a
// lost RESV is repaired by the next one.
struct Credit {
  CreditUnit unit = CreditUnit::kBytes;
  uint64_t buffer = 0;  // in `unit`; MB buffers are 32 bits on the wire
  uint64_t freed_total = 0;
  uint64_t BufferBytes() const {
    return unit == CreditUnit::kMegabytes ? buffer * kBytesPerMegabyte : buffer;
  }
  bool operator==(const Credit& o) const {
    return unit == o.unit && buffer == o.buffer && freed_total == o.freed_total;
  }
};

struct Message {
  MsgType type = MsgType::kCreditPath;
  uint8_t flags = 0;
  uint8_t send_ttl = 64;
  FlowId flow;
  Hop hop;
  uint32_t period_ms = 0;        // TIME_VALUES: refresh / heartbeat period
  std::optional<Credit> credit;  // RESV only
  // INTEGRITY, filled by Encode's signer and by Decode.
  uint64_t key_id = 0;  // 48 bits
  uint64_t seq = 0;
  bool operator==(const Message& o) const;
};

// Why a received message was not believed; the caller counts each.
enum class Reject {
  kTruncated = 0,
  kBadVersion,
  kBadChecksum,
  kBadLength,
  kUnsupportedType,
  kMissingObject,
  kBadObjectLength,
  kUnknownClass,  // a 0bbbbbbb Class-Num we do not know (RFC 2205: reject)
  kUnknownCType,
  kDuplicateObject,
  kMissingIntegrity,
  kBadIntegrity,
  kReplayed,
  kUnknownKey,
  kCount,
};
const char* RejectName(Reject r);
using RejectCounts = std::array<uint64_t, static_cast<size_t>(Reject::kCount)>;

// RFC 1071 ones-complement sum, folded and inverted.
uint16_t InetChecksum(const uint8_t* data, size_t len);

// Key ids are 48 bits (RFC 2747's Key Identifier).
constexpr uint64_t kKeyIdMask = (1ull << 48) - 1;
using KeyRing = std::map<uint64_t, SipKey>;
Expected<SipKey> ParseKey(const std::string& hex);  // 32 hex digits

// Builds the message with INTEGRITY first (RFC 2747), MAC and checksum set.
std::vector<uint8_t> Encode(const Message& m, uint64_t key_id, const SipKey& key, uint64_t seq);

// Stateless checks: framing, checksum, objects, the MAC under `keys`.
// Replay is the Receiver's (it needs the per-sender history).
Expected<Message> Decode(const uint8_t* data, size_t len, const KeyRing& keys, Reject* why);

// The receiving side: Decode plus a strictly increasing sequence number per
// (key id, sending hop address), and a counter per reject reason.
class Receiver {
 public:
  explicit Receiver(KeyRing keys) : keys_(std::move(keys)) {}
  Expected<Message> Accept(const uint8_t* data, size_t len);
  // The keys believed from now on (a rotation). The sequence history stays:
  // it is per key id, so a sender's first message under a new id starts
  // that id's history and a replay under the old id is still stale.
  void SetKeys(KeyRing keys) { keys_ = std::move(keys); }
  const RejectCounts& rejects() const { return rejects_; }
  uint64_t accepted() const { return accepted_; }

 private:
  KeyRing keys_;
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> last_seq_;
  RejectCounts rejects_{};
  uint64_t accepted_ = 0;
};

// The sending side: one key, a sequence number that only grows.
class Signer {
 public:
  Signer(uint64_t key_id, SipKey key, uint64_t first_seq)
      : key_id_(key_id & kKeyIdMask), key_(key), next_(first_seq) {}
  std::vector<uint8_t> Sign(const Message& m) { return Encode(m, key_id_, key_, next_++); }
  uint64_t next_seq() const { return next_; }

 private:
  uint64_t key_id_;
  SipKey key_;
  uint64_t next_;
};

}  // namespace inc::credit
