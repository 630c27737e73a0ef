// SPDX-License-Identifier: Apache-2.0
#include "credit/rsvp.h"

#include <cstring>

namespace inc::credit {
namespace {

constexpr size_t kIntegrityLen = 28;
constexpr size_t kSessionLen = 20;
constexpr size_t kHopLen = 12;
constexpr size_t kTimeValuesLen = 8;
constexpr size_t kCreditLen = 20;
// Offsets inside the INTEGRITY object of the fields the MAC skips.
constexpr size_t kIntegrityKeyIdOff = 6;
constexpr size_t kIntegritySeqOff = 12;
constexpr size_t kIntegrityMacOff = 20;

void Put16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void Put32(std::vector<uint8_t>& b, uint32_t v) {
  Put16(b, static_cast<uint16_t>(v >> 16));
  Put16(b, static_cast<uint16_t>(v));
}
void Put64(std::vector<uint8_t>& b, uint64_t v) {
  Put32(b, static_cast<uint32_t>(v >> 32));
  Put32(b, static_cast<uint32_t>(v));
}
void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Store64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint16_t Get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
uint32_t Get32(const uint8_t* p) {
  return static_cast<uint32_t>(Get16(p)) << 16 | Get16(p + 2);
}
uint64_t Get64(const uint8_t* p) {
  return static_cast<uint64_t>(Get32(p)) << 32 | Get32(p + 4);
}
uint64_t Get48(const uint8_t* p) {
  return static_cast<uint64_t>(Get16(p)) << 32 | Get32(p + 2);
}
void ObjectHeader(std::vector<uint8_t>& b, size_t len, uint8_t class_num, uint8_t c_type) {
  Put16(b, static_cast<uint16_t>(len));
  b.push_back(class_num);
  b.push_back(c_type);
}

// The MAC covers the whole message with the checksum and the MAC field zero
// (RFC 2747 s3), so it is computed before the checksum.
uint64_t Mac(const SipKey& key, const uint8_t* msg, size_t len, size_t integrity_off) {
  std::vector<uint8_t> copy(msg, msg + len);
  Store16(copy.data() + 2, 0);
  Store64(copy.data() + integrity_off + kIntegrityMacOff, 0);
  return SipHash24(key, copy.data(), copy.size());
}

}  // namespace

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kPathTear: return "path_tear";
    case MsgType::kResvTear: return "resv_tear";
    case MsgType::kCreditPath: return "credit_path";
    case MsgType::kCreditResv: return "credit_resv";
  }
  return "unknown";
}

const char* RejectName(Reject r) {
  switch (r) {
    case Reject::kTruncated: return "truncated";
    case Reject::kBadVersion: return "bad_version";
    case Reject::kBadChecksum: return "bad_checksum";
    case Reject::kBadLength: return "bad_length";
    case Reject::kUnsupportedType: return "unsupported_type";
    case Reject::kMissingObject: return "missing_object";
    case Reject::kBadObjectLength: return "bad_object_length";
    case Reject::kUnknownClass: return "unknown_class";
    case Reject::kUnknownCType: return "unknown_c_type";
    case Reject::kDuplicateObject: return "duplicate_object";
    case Reject::kMissingIntegrity: return "missing_integrity";
    case Reject::kBadIntegrity: return "bad_integrity";
    case Reject::kReplayed: return "replayed";
    case Reject::kUnknownKey: return "unknown_key";
    case Reject::kCount: break;
  }
  return "unknown";
}

std::string FlowId::ToString() const {
  auto ip = [](uint32_t a) {
    return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." +
           std::to_string((a >> 8) & 0xff) + "." + std::to_string(a & 0xff);
  };
  char qpn[16];
  snprintf(qpn, sizeof(qpn), "0x%x", dest_qpn);
  return ip(src_ip) + ":" + std::to_string(src_port) + "->" + ip(dst_ip) + ":" + std::to_string(dst_port) +
         " qpn " + qpn;
}

bool Message::operator==(const Message& o) const {
  return type == o.type && flags == o.flags && send_ttl == o.send_ttl && flow == o.flow && hop == o.hop &&
         period_ms == o.period_ms && credit == o.credit && key_id == o.key_id && seq == o.seq;
}

uint16_t InetChecksum(const uint8_t* data, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += Get16(data + i);
  if (len & 1) sum += static_cast<uint32_t>(data[len - 1]) << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

Expected<SipKey> ParseKey(const std::string& hex) {
  auto k = ParseSipKey(hex);
  if (!k.ok()) return InvalidArgument("RSVP " + k.status().message());
  return *k;
}

std::vector<uint8_t> Encode(const Message& m, uint64_t key_id, const SipKey& key, uint64_t seq) {
  std::vector<uint8_t> b;
  b.reserve(kCommonHeaderLen + kIntegrityLen + kSessionLen + kHopLen + kTimeValuesLen + kCreditLen);
  b.push_back(static_cast<uint8_t>(kRsvpVersion << 4 | (m.flags & 0x0f)));
  b.push_back(static_cast<uint8_t>(m.type));
  Put16(b, 0);  // checksum, set last
  b.push_back(m.send_ttl);
  b.push_back(0);
  Put16(b, 0);  // length, set below

  size_t integrity_off = b.size();
  ObjectHeader(b, kIntegrityLen, kClassIntegrity, kCTypeIntegritySipHash);
  b.push_back(0);  // flags
  b.push_back(0);  // reserved
  key_id &= kKeyIdMask;
  Put16(b, static_cast<uint16_t>(key_id >> 32));
  Put32(b, static_cast<uint32_t>(key_id));
  Put64(b, seq);
  Put64(b, 0);  // MAC, set below

  ObjectHeader(b, kSessionLen, kClassSession, kCTypeSessionRoce);
  Put32(b, m.flow.src_ip);
  Put32(b, m.flow.dst_ip);
  Put16(b, m.flow.src_port);
  Put16(b, m.flow.dst_port);
  Put32(b, m.flow.dest_qpn & 0xffffff);

  ObjectHeader(b, kHopLen, kClassRsvpHop, kCTypeHopIpv4);
  Put32(b, m.hop.address);
  Put32(b, m.hop.lih);

  if (m.type != MsgType::kPathTear && m.type != MsgType::kResvTear) {
    ObjectHeader(b, kTimeValuesLen, kClassTimeValues, kCTypeTimeValues);
    Put32(b, m.period_ms);
  }
  if (m.credit) {
    ObjectHeader(b, kCreditLen, kClassCredit, static_cast<uint8_t>(m.credit->unit));
    if (m.credit->unit == CreditUnit::kMegabytes) {
      Put32(b, static_cast<uint32_t>(m.credit->buffer));
      Put32(b, 0);
    } else {
      Put64(b, m.credit->buffer);
    }
    Put64(b, m.credit->freed_total);
  }
  Store16(b.data() + 6, static_cast<uint16_t>(b.size()));
  Store64(b.data() + integrity_off + kIntegrityMacOff, Mac(key, b.data(), b.size(), integrity_off));
  // A sum that folds to zero goes out as 0xffff, the other ones'-complement
  // zero (as UDP does, RFC 768): a 0 field means "no checksum" and Decode
  // refuses it, which dropped one message in 65536.
  uint16_t checksum = InetChecksum(b.data(), b.size());
  Store16(b.data() + 2, checksum ? checksum : 0xffff);
  return b;
}

Expected<Message> Decode(const uint8_t* data, size_t len, const KeyRing& keys, Reject* why) {
  auto fail = [&](Reject r, const std::string& text) -> Status {
    if (why) *why = r;
    return InvalidArgument(std::string("RSVP ") + RejectName(r) + ": " + text);
  };
  if (len < kCommonHeaderLen) return fail(Reject::kTruncated, std::to_string(len) + " bytes");
  if ((data[0] >> 4) != kRsvpVersion) return fail(Reject::kBadVersion, std::to_string(data[0] >> 4));
  size_t msg_len = Get16(data + 6);
  if (msg_len > len)
    return fail(Reject::kTruncated, "length field " + std::to_string(msg_len) + " > " + std::to_string(len));
  if (msg_len != len || msg_len < kCommonHeaderLen || msg_len % 4)
    return fail(Reject::kBadLength,
                "length field " + std::to_string(msg_len) + ", datagram " + std::to_string(len));
  // incin always sends a checksum, so a zero one (RFC 2205: "none sent") is
  // as bad as a wrong one.
  if (Get16(data + 2) == 0 || InetChecksum(data, len) != 0) return fail(Reject::kBadChecksum, "");
  Message m;
  uint8_t type = data[1];
  if (type != static_cast<uint8_t>(MsgType::kCreditPath) &&
      type != static_cast<uint8_t>(MsgType::kCreditResv) &&
      type != static_cast<uint8_t>(MsgType::kPathTear) && type != static_cast<uint8_t>(MsgType::kResvTear))
    return fail(Reject::kUnsupportedType, std::to_string(type));
  m.type = static_cast<MsgType>(type);
  m.flags = data[0] & 0x0f;
  m.send_ttl = data[4];

  bool have_session = false, have_hop = false, have_time = false;
  size_t integrity_off = 0;
  for (size_t off = kCommonHeaderLen; off < len;) {
    if (len - off < kObjectHeaderLen)
      return fail(Reject::kBadObjectLength, "object header at " + std::to_string(off));
    size_t olen = Get16(data + off);
    uint8_t cls = data[off + 2], ctype = data[off + 3];
    if (olen < kObjectHeaderLen || olen % 4 || olen > len - off)
      return fail(Reject::kBadObjectLength,
                  "class " + std::to_string(cls) + " length " + std::to_string(olen));
    const uint8_t* body = data + off + kObjectHeaderLen;
    auto expect = [&](bool& seen, uint8_t want_ctype, size_t want_len) -> Status {
      if (ctype != want_ctype)
        return fail(Reject::kUnknownCType,
                    "class " + std::to_string(cls) + " c-type " + std::to_string(ctype));
      if (olen != want_len)
        return fail(Reject::kBadObjectLength,
                    "class " + std::to_string(cls) + " length " + std::to_string(olen));
      if (seen) return fail(Reject::kDuplicateObject, "class " + std::to_string(cls));
      seen = true;
      return Status::Ok();
    };
    bool seen_integrity = integrity_off != 0, seen_credit = m.credit.has_value();
    switch (cls) {
      case kClassIntegrity:
        INC_RETURN_IF_ERROR(expect(seen_integrity, kCTypeIntegritySipHash, kIntegrityLen));
        integrity_off = off;
        m.key_id = Get48(body + kIntegrityKeyIdOff - kObjectHeaderLen);
        m.seq = Get64(body + kIntegritySeqOff - kObjectHeaderLen);
        break;
      case kClassSession:
        INC_RETURN_IF_ERROR(expect(have_session, kCTypeSessionRoce, kSessionLen));
        m.flow.src_ip = Get32(body);
        m.flow.dst_ip = Get32(body + 4);
        m.flow.src_port = Get16(body + 8);
        m.flow.dst_port = Get16(body + 10);
        m.flow.dest_qpn = Get32(body + 12) & 0xffffff;
        break;
      case kClassRsvpHop:
        INC_RETURN_IF_ERROR(expect(have_hop, kCTypeHopIpv4, kHopLen));
        m.hop.address = Get32(body);
        m.hop.lih = Get32(body + 4);
        break;
      case kClassTimeValues:
        INC_RETURN_IF_ERROR(expect(have_time, kCTypeTimeValues, kTimeValuesLen));
        m.period_ms = Get32(body);
        break;
      case kClassCredit: {
        uint8_t want = ctype == kCTypeCreditBytes ? kCTypeCreditBytes : kCTypeCreditMegabytes;
        INC_RETURN_IF_ERROR(expect(seen_credit, want, kCreditLen));
        Credit c;
        c.unit = static_cast<CreditUnit>(ctype);
        c.buffer = ctype == kCTypeCreditBytes ? Get64(body) : Get32(body);
        c.freed_total = Get64(body + 8);
        m.credit = c;
        break;
      }
      default:
        // RFC 2205 s3.10: 0bbbbbbb unknown -> reject; 10bbbbbb and
        // 11bbbbbb -> ignore (we do not forward objects, so both drop it).
        if (!(cls & 0x80)) return fail(Reject::kUnknownClass, std::to_string(cls));
        break;
    }
    off += olen;
  }
  if (!have_session) return fail(Reject::kMissingObject, "SESSION");
  if (!have_hop) return fail(Reject::kMissingObject, "RSVP_HOP");
  bool tear = m.type == MsgType::kPathTear || m.type == MsgType::kResvTear;
  if (!tear && !have_time) return fail(Reject::kMissingObject, "TIME_VALUES");
  if (m.type == MsgType::kCreditResv && !m.credit) return fail(Reject::kMissingObject, "CREDIT");
  // A TIME_VALUES in a tear or a CREDIT outside a RESV means nothing for that
  // type (the MAC still covers it): drop it, so that the message is what its
  // type says and encodes back to the same message.
  if (tear) m.period_ms = 0;
  if (m.type != MsgType::kCreditResv) m.credit.reset();
  if (!integrity_off) return fail(Reject::kMissingIntegrity, "");
  auto key = keys.find(m.key_id);
  if (key == keys.end()) return fail(Reject::kUnknownKey, std::to_string(m.key_id));
  uint64_t mac = Get64(data + integrity_off + kIntegrityMacOff);
  if (Mac(key->second, data, len, integrity_off) != mac) return fail(Reject::kBadIntegrity, "MAC mismatch");
  return m;
}

Expected<Message> Receiver::Accept(const uint8_t* data, size_t len) {
  Reject why = Reject::kCount;
  auto m = Decode(data, len, keys_, &why);
  if (!m.ok()) {
    rejects_[static_cast<size_t>(why)]++;
    return m.status();
  }
  auto [it, fresh] = last_seq_.try_emplace({m->key_id, m->hop.address}, m->seq);
  if (!fresh) {
    if (m->seq <= it->second) {
      rejects_[static_cast<size_t>(Reject::kReplayed)]++;
      return InvalidArgument("RSVP replayed: sequence " + std::to_string(m->seq) +
                             " <= " + std::to_string(it->second));
    }
    it->second = m->seq;
  }
  accepted_++;
  return m;
}

}  // namespace inc::credit
