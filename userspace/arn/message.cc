// SPDX-License-Identifier: Apache-2.0
#include "arn/message.h"

#include <arpa/inet.h>

#include <cstring>

namespace inc::arn {
namespace {

uint64_t Be64(uint64_t v) {
  return (static_cast<uint64_t>(htonl(static_cast<uint32_t>(v))) << 32) |
         htonl(static_cast<uint32_t>(v >> 32));
}

bool KeyIsZero(const AuthKey& k) {
  for (auto b : k)
    if (b) return false;
  return true;
}

constexpr size_t kAuthOffset = offsetof(inc_arn_msg, auth);

}  // namespace

static_assert(offsetof(inc_arn_msg, timestamp_ns) == 24);
static_assert(offsetof(inc_arn_msg, auth) == 36);

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCongestionDetected: return "congestion_detected";
    case Type::kCongestionEliminated: return "congestion_eliminated";
    case Type::kLinkFailed: return "link_failed";
    case Type::kLinkRestored: return "link_restored";
  }
  return "unknown";
}

const char* RejectName(Reject r) {
  switch (r) {
    case Reject::kTruncated: return "truncated";
    case Reject::kBadMagic: return "bad_magic";
    case Reject::kBadVersion: return "bad_version";
    case Reject::kBadType: return "bad_type";
    case Reject::kBadSeverity: return "bad_severity";
    case Reject::kBadAuth: return "bad_auth";
    case Reject::kUnknownOrigin: return "unknown_origin";
    case Reject::kOwnMessage: return "own_message";
    case Reject::kStale: return "stale_sequence";
    case Reject::kCount: break;
  }
  return "unknown";
}

bool Message::operator==(const Message& o) const {
  return type == o.type && severity == o.severity && origin == o.origin && peer == o.peer &&
         local_port == o.local_port && seq == o.seq && timestamp_ns == o.timestamp_ns &&
         utilisation_ppm == o.utilisation_ppm;
}

Expected<AuthKey> ParseAuthKey(const std::string& hex) {
  auto k = ParseSipKey(hex);
  if (!k.ok()) return InvalidArgument("ARN " + k.status().message());
  return *k;
}

uint32_t Digest(const AuthKey& key, const uint8_t* data, size_t len) {
  uint64_t h = SipHash24(key, data, len);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

std::vector<uint8_t> Encode(const Message& m, const AuthKey& key) {
  inc_arn_msg w{};
  w.magic = htonl(INC_ARN_MAGIC);
  w.version = INC_ARN_VERSION;
  w.type = static_cast<uint8_t>(m.type);
  w.severity = m.severity;
  w.origin = htonl(m.origin);
  w.peer = htonl(m.peer);
  w.local_port = htonl(m.local_port);
  w.seq = htonl(m.seq);
  w.timestamp_ns = Be64(m.timestamp_ns);
  w.utilisation_ppm = htonl(m.utilisation_ppm);
  std::vector<uint8_t> out(sizeof(w));
  std::memcpy(out.data(), &w, sizeof(w));
  uint32_t auth = KeyIsZero(key) ? 0 : Digest(key, out.data(), kAuthOffset);
  uint32_t auth_be = htonl(auth);
  std::memcpy(out.data() + kAuthOffset, &auth_be, 4);
  return out;
}

Expected<Message> Decode(const uint8_t* data, size_t len, const AuthKey& key, Reject* why) {
  auto reject = [&](Reject r, const std::string& what) -> Status {
    if (why) *why = r;
    return InvalidArgument("ARN message: " + what);
  };
  if (len < sizeof(inc_arn_msg)) return reject(Reject::kTruncated, std::to_string(len) + " bytes, need 40");
  inc_arn_msg w;
  std::memcpy(&w, data, sizeof(w));
  if (ntohl(w.magic) != INC_ARN_MAGIC) return reject(Reject::kBadMagic, "bad magic");
  if (w.version != INC_ARN_VERSION)
    return reject(Reject::kBadVersion, "version " + std::to_string(w.version));
  if (w.type < INC_ARN_CONGESTION_DETECTED || w.type > INC_ARN_LINK_RESTORED)
    return reject(Reject::kBadType, "type " + std::to_string(w.type));
  Message m;
  m.type = static_cast<Type>(w.type);
  m.severity = w.severity;
  bool failure_level = m.severity == kSeverityFailure;
  switch (m.type) {
    case Type::kCongestionDetected:
      if (m.severity < 1 || m.severity > kSeverityMaxCongestion)
        return reject(Reject::kBadSeverity, "congestion severity " + std::to_string(m.severity));
      break;
    case Type::kLinkFailed:
      if (!failure_level) return reject(Reject::kBadSeverity, "link failure without the failure severity");
      break;
    case Type::kCongestionEliminated:
    case Type::kLinkRestored:
      if (m.severity != kSeverityClear)
        return reject(Reject::kBadSeverity, "clearing notice with a severity");
      break;
  }
  uint32_t auth = ntohl(w.auth);
  uint32_t want = KeyIsZero(key) ? 0 : Digest(key, data, kAuthOffset);
  if (auth != want) return reject(Reject::kBadAuth, "authentication failed");
  m.origin = ntohl(w.origin);
  m.peer = ntohl(w.peer);
  m.local_port = ntohl(w.local_port);
  m.seq = ntohl(w.seq);
  m.timestamp_ns = Be64(w.timestamp_ns);
  m.utilisation_ppm = ntohl(w.utilisation_ppm);
  return m;
}

Expected<Message> Receiver::Accept(const uint8_t* data, size_t len) {
  Reject why = Reject::kTruncated;
  auto m = Decode(data, len, key_, &why);
  if (!m.ok() && why == Reject::kBadAuth && accept_) m = Decode(data, len, *accept_, &why);
  auto count = [&](Reject r, Status s) -> Status {
    rejects_[static_cast<size_t>(r)]++;
    return s;
  };
  if (!m.ok()) return count(why, m.status());
  if (m->origin == self_)
    return count(Reject::kOwnMessage, FailedPrecondition("ARN message from this switch"));
  if (!group_.count(m->origin))
    return count(Reject::kUnknownOrigin, Status(Code::kPermissionDenied, "ARN message from unknown switch " +
                                                                             std::to_string(m->origin)));
  auto it = last_seq_.find(m->origin);
  if (it != last_seq_.end() && !SeqNewer(m->seq, it->second))
    return count(Reject::kStale, FailedPrecondition("stale ARN sequence " + std::to_string(m->seq) +
                                                    " from " + std::to_string(m->origin) + " (last " +
                                                    std::to_string(it->second) + ")"));
  last_seq_[m->origin] = m->seq;
  accepted_++;
  return m;
}

std::map<std::string, uint64_t> Receiver::RejectCounts() const {
  std::map<std::string, uint64_t> out;
  for (size_t i = 0; i < static_cast<size_t>(Reject::kCount); i++)
    out[RejectName(static_cast<Reject>(i))] = rejects_[i];
  return out;
}

}  // namespace inc::arn
