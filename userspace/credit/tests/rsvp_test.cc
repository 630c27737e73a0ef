// SPDX-License-Identifier: Apache-2.0
// RSVP credit codec: documented byte layout, round trips of every message,
// and a table of malformed inputs each rejected with its own reason.
#include "credit/rsvp.h"

#include <gtest/gtest.h>

#include <functional>

namespace inc::credit {
namespace {

SipKey Key(uint8_t seed) {
  SipKey k{};
  for (size_t i = 0; i < k.size(); i++) k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

constexpr uint64_t kKeyId = 0x0000aabbccddeeffULL;

FlowId Flow() {
  FlowId f;
  f.src_ip = 0xc0a8010a;  // 192.168.1.10
  f.dst_ip = 0xc0a80214;  // 192.168.2.20
  f.src_port = 0xc011;
  f.dest_qpn = 0x000011;
  return f;
}

Message Resv(CreditUnit unit = CreditUnit::kBytes) {
  Message m;
  m.type = MsgType::kCreditResv;
  m.send_ttl = 63;
  m.flow = Flow();
  m.hop = Hop{0x0a000102, 2};
  m.period_ms = 100;
  m.credit = Credit{unit, unit == CreditUnit::kBytes ? 3000000ull : 2ull, 0xfffffffffffff000ULL};
  return m;
}

KeyRing Ring() {
  return KeyRing{{kKeyId, Key(1)}};
}

std::vector<uint8_t> Enc(const Message& m, uint64_t seq = 7) {
  return Encode(m, kKeyId, Key(1), seq);
}

uint64_t Be64At(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; i++) v = v << 8 | b[off + i];
  return v;
}

// Recomputes the length field, the MAC (INTEGRITY first, as Encode puts it:
// MAC at byte 28) and the checksum after a test edits a message, so that
// only the intended defect remains.
void Reseal(std::vector<uint8_t>& b, const SipKey& key = Key(1), bool fix_length = true) {
  if (fix_length) {
    b[6] = static_cast<uint8_t>(b.size() >> 8);
    b[7] = static_cast<uint8_t>(b.size());
  }
  b[2] = b[3] = 0;
  for (size_t i = 28; i < 36; i++) b[i] = 0;
  uint64_t mac = SipHash24(key, b.data(), b.size());
  for (int i = 7; i >= 0; i--, mac >>= 8) b[28 + i] = static_cast<uint8_t>(mac);
  uint16_t c = InetChecksum(b.data(), b.size());
  b[2] = static_cast<uint8_t>(c >> 8);
  b[3] = static_cast<uint8_t>(c);
}

TEST(RsvpChecksum, MatchesRfc1071Example) {
  // RFC 1071 s3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
  const uint8_t words[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(InetChecksum(words, sizeof(words)), static_cast<uint16_t>(~0xddf2));
}

TEST(RsvpCodec, ResvLaysOutHeaderAndObjectsAtDocumentedOffsets) {
  auto b = Enc(Resv());
  ASSERT_EQ(b.size(), 96u);
  EXPECT_EQ(b[0], 0x10);  // version 1, flags 0
  EXPECT_EQ(b[1], 29);
  EXPECT_EQ(b[4], 63);
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6] << 8 | b[7], 96);
  EXPECT_EQ(InetChecksum(b.data(), b.size()), 0);  // a valid checksum sums to 0xffff
  // INTEGRITY at 8: length 28, class 4, c-type 124, key id 48 bits at 14, seq at 20.
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 8, b.begin() + 12), (std::vector<uint8_t>{0, 28, 4, 124}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 14, b.begin() + 20),
            (std::vector<uint8_t>{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}));
  EXPECT_EQ(Be64At(b, 20), 7u);
  // SESSION at 36: class 1, c-type 124, src ip, dst ip, ports, qpn.
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 36, b.begin() + 40), (std::vector<uint8_t>{0, 20, 1, 124}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 40, b.begin() + 56),
            (std::vector<uint8_t>{192, 168, 1, 10, 192, 168, 2, 20, 0xc0, 0x11, 0x12, 0xb7, 0, 0, 0, 0x11}));
  // RSVP_HOP at 56, TIME_VALUES at 68, CREDIT at 76.
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 56, b.begin() + 68),
            (std::vector<uint8_t>{0, 12, 3, 1, 10, 0, 1, 2, 0, 0, 0, 2}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 68, b.begin() + 76),
            (std::vector<uint8_t>{0, 8, 5, 1, 0, 0, 0, 100}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 76, b.begin() + 80), (std::vector<uint8_t>{0, 20, 124, 2}));
  EXPECT_EQ(Be64At(b, 80), 3000000u);
  EXPECT_EQ(Be64At(b, 88), 0xfffffffffffff000ULL);
}

TEST(RsvpCodec, MegabyteCreditIs32BitsThenReserved) {
  auto b = Enc(Resv(CreditUnit::kMegabytes));
  ASSERT_EQ(b.size(), 96u);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 76, b.begin() + 88),
            (std::vector<uint8_t>{0, 20, 124, 1, 0, 0, 0, 2, 0, 0, 0, 0}));
  Reject why = Reject::kCount;
  auto m = Decode(b.data(), b.size(), Ring(), &why);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->credit->BufferBytes(), 2u << 20);
}

TEST(RsvpCodec, EveryMessageRoundTrips) {
  Message path;
  path.type = MsgType::kCreditPath;
  path.flow = Flow();
  path.hop = Hop{0x0a000101, 1};
  path.period_ms = 300;
  Message tear;
  tear.type = MsgType::kPathTear;
  tear.flow = Flow();
  tear.hop = Hop{0x0a000101, 1};
  Message resv_tear = tear;
  resv_tear.type = MsgType::kResvTear;
  for (Message m : {path, Resv(), Resv(CreditUnit::kMegabytes), tear, resv_tear}) {
    m.key_id = kKeyId;
    m.seq = 0x0123456789abcdefULL;
    auto b = Enc(m, m.seq);
    Reject why = Reject::kCount;
    auto d = Decode(b.data(), b.size(), Ring(), &why);
    ASSERT_TRUE(d.ok()) << MsgTypeName(m.type) << ": " << d.status().ToString();
    EXPECT_EQ(*d, m) << MsgTypeName(m.type);
  }
  EXPECT_EQ(Enc(path).size(), 76u);
  EXPECT_EQ(Enc(tear).size(), 68u);
  EXPECT_EQ(Enc(resv_tear).size(), 68u);
}

// Found by fuzz/fuzz_rsvp.cc (corpus/rsvp/crash-tear-with-time-values): a
// ResvTear that also carried TIME_VALUES and CREDIT decoded with a period and
// a credit, which Encode never writes for a tear, so the decoded message did
// not encode back to itself. Decode drops what the type does not carry.
TEST(RsvpCodec, ObjectsTheTypeDoesNotCarryAreDropped) {
  Message resv = Resv();
  resv.key_id = kKeyId;
  resv.seq = 9;
  auto b = Enc(resv, resv.seq);
  b[1] = static_cast<uint8_t>(MsgType::kResvTear);  // the RESV's objects under a ResvTear's type
  Reseal(b);
  auto d = Decode(b.data(), b.size(), Ring(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->period_ms, 0u);
  EXPECT_FALSE(d->credit.has_value());
  auto again = Enc(*d, d->seq);
  auto back = Decode(again.data(), again.size(), Ring(), nullptr);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *d);

  b[1] = static_cast<uint8_t>(MsgType::kCreditPath);  // a PATH carries no CREDIT
  Reseal(b);
  d = Decode(b.data(), b.size(), Ring(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->period_ms, resv.period_ms);
  EXPECT_FALSE(d->credit.has_value());
}

// Found by fuzz/fuzz_rsvp.cc (corpus/rsvp/crash-checksum-folds-to-zero): one
// message in 65536 has a ones'-complement sum that folds to zero; its
// checksum field was then 0, which RFC 2205 reads as "no checksum" and
// Decode rejects, so the receiver dropped the sender's own valid message.
// As in UDP (RFC 768), such a sum is sent as 0xffff, the other zero.
TEST(RsvpCodec, ChecksumThatFoldsToZeroIsSentAsAllOnes) {
  Message resv = Resv();
  bool found = false;
  for (uint64_t seq = 1; seq < (1u << 20) && !found; seq++) {
    auto b = Enc(resv, seq);
    uint16_t field = static_cast<uint16_t>(b[2] << 8 | b[3]);
    if (field != 0 && field != 0xffff) continue;
    found = true;
    EXPECT_EQ(field, 0xffff) << "seq " << seq;
    Reject why = Reject::kCount;
    auto d = Decode(b.data(), b.size(), Ring(), &why);
    EXPECT_TRUE(d.ok()) << "seq " << seq << ": " << d.status().ToString();
  }
  EXPECT_TRUE(found) << "no sequence number gave a zero sum; the test needs another message";
}

struct Malformed {
  const char* name;
  std::function<void(std::vector<uint8_t>&)> edit;
  Reject want;
};

TEST(RsvpCodec, MalformedInputsAreRejectedWithTheirReason) {
  std::vector<Malformed> cases = {
      {"shorter than the common header", [](auto& b) { b.resize(6); }, Reject::kTruncated},
      {"length field beyond the datagram", [](auto& b) { b.resize(92); }, Reject::kTruncated},
      {"version 2", [](auto& b) { b[0] = 0x20; }, Reject::kBadVersion},
      {"flipped credit byte", [](auto& b) { b[85] ^= 1; }, Reject::kBadChecksum},
      {"zero checksum", [](auto& b) { b[2] = b[3] = 0; }, Reject::kBadChecksum},
      {"trailing bytes after the length",
       [](auto& b) {
         b.insert(b.end(), 4, 0);
         Reseal(b, Key(1), false);
       },
       Reject::kBadLength},
      {"length not a multiple of 4",
       [](auto& b) {
         b.resize(94);
         Reseal(b);
       },
       Reject::kBadLength},
      {"RFC 2205 Path (type 1)",
       [](auto& b) {
         b[1] = 1;
         Reseal(b);
       },
       Reject::kUnsupportedType},
      {"type 30",
       [](auto& b) {
         b[1] = 30;
         Reseal(b);
       },
       Reject::kUnsupportedType},
      {"RESV without CREDIT",
       [](auto& b) {
         b.resize(76);
         Reseal(b);
       },
       Reject::kMissingObject},
      {"RESV without RSVP_HOP",
       [](auto& b) {
         b.erase(b.begin() + 56, b.begin() + 68);
         Reseal(b);
       },
       Reject::kMissingObject},
      {"object length past the end",
       [](auto& b) {
         b[77] = 24;
         Reseal(b);
       },
       Reject::kBadObjectLength},
      {"object length below its header",
       [](auto& b) {
         b[77] = 2;
         Reseal(b);
       },
       Reject::kBadObjectLength},
      {"CREDIT 16 bytes long",
       [](auto& b) {
         b[77] = 16;
         Reseal(b);
       },
       Reject::kBadObjectLength},
      {"unknown class 100 (must-understand range)",
       [](auto& b) {
         b[78] = 100;
         Reseal(b);
       },
       Reject::kUnknownClass},
      {"CREDIT hidden in an ignore-class (0x90)",
       [](auto& b) {
         b[78] = 0x90;
         Reseal(b);
       },
       Reject::kMissingObject},
      {"CREDIT c-type 3",
       [](auto& b) {
         b[79] = 3;
         Reseal(b);
       },
       Reject::kUnknownCType},
      {"classic IPv4 SESSION c-type 1",
       [](auto& b) {
         b[39] = 1;
         Reseal(b);
       },
       Reject::kUnknownCType},
      {"RSVP_HOP twice",
       [](auto& b) {
         std::vector<uint8_t> hop(b.begin() + 56, b.begin() + 68);
         b.insert(b.end(), hop.begin(), hop.end());
         Reseal(b);
       },
       Reject::kDuplicateObject},
      {"INTEGRITY moved to an ignore-class",
       [](auto& b) {
         b[10] = 0xc4;
         Reseal(b);
       },
       Reject::kMissingIntegrity},
      {"credit raised, checksum fixed, MAC not",
       [](auto& b) {
         b[85] ^= 1;
         b[2] = b[3] = 0;
         uint16_t c = InetChecksum(b.data(), b.size());
         b[2] = static_cast<uint8_t>(c >> 8);
         b[3] = static_cast<uint8_t>(c);
       },
       Reject::kBadIntegrity},
      {"signed with another key", [](auto& b) { Reseal(b, Key(9)); }, Reject::kBadIntegrity},
      {"unknown key id",
       [](auto& b) {
         b[19] ^= 1;
         Reseal(b);
       },
       Reject::kUnknownKey},
  };
  for (const auto& c : cases) {
    auto b = Enc(Resv());
    c.edit(b);
    Reject why = Reject::kCount;
    auto m = Decode(b.data(), b.size(), Ring(), &why);
    EXPECT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(why, c.want) << c.name << ": got " << RejectName(why) << " (" << m.status().ToString() << ")";
  }
}

TEST(RsvpReceiver, RejectsReplaysAndCountsEveryReason) {
  Receiver r(Ring());
  auto first = Enc(Resv(), 100);
  auto older = Enc(Resv(), 99);
  auto newer = Enc(Resv(), 101);
  EXPECT_TRUE(r.Accept(first.data(), first.size()).ok());
  EXPECT_FALSE(r.Accept(first.data(), first.size()).ok());
  EXPECT_FALSE(r.Accept(older.data(), older.size()).ok());
  EXPECT_TRUE(r.Accept(newer.data(), newer.size()).ok());
  // Another sender's sequence numbers are its own.
  Message other = Resv();
  other.hop.address = 0x0a000202;
  auto from_other = Enc(other, 5);
  EXPECT_TRUE(r.Accept(from_other.data(), from_other.size()).ok());
  auto bad = newer;
  bad[85] ^= 1;
  EXPECT_FALSE(r.Accept(bad.data(), bad.size()).ok());
  EXPECT_EQ(r.rejects()[static_cast<size_t>(Reject::kReplayed)], 2u);
  EXPECT_EQ(r.rejects()[static_cast<size_t>(Reject::kBadChecksum)], 1u);
  EXPECT_EQ(r.accepted(), 3u);
  for (size_t i = 0; i < static_cast<size_t>(Reject::kCount); i++)
    EXPECT_STRNE(RejectName(static_cast<Reject>(i)), "unknown");
}

TEST(RsvpKey, ParsesHexAndRejectsBadDigits) {
  auto k = ParseKey("000102030405060708090a0b0c0d0e0f");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, Key(0));
  EXPECT_FALSE(ParseKey("00").ok());
  EXPECT_FALSE(ParseKey("zz0102030405060708090a0b0c0d0e0f").ok());
}

}  // namespace
}  // namespace inc::credit
