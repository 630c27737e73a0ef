// SPDX-License-Identifier: Apache-2.0
// ARN message codec and receiver checks: layout on the wire, every reject
// reason counted, sequence numbers across the 32-bit wrap.
#include "arn/message.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

namespace inc::arn {
namespace {

AuthKey Key(uint8_t seed) {
  AuthKey k{};
  for (size_t i = 0; i < k.size(); i++) k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

Message Sample() {
  Message m;
  m.type = Type::kCongestionDetected;
  m.severity = 2;
  m.origin = 0x01020304;
  m.peer = 7;
  m.local_port = 3;
  m.seq = 42;
  m.timestamp_ns = 0x1122334455667788ULL;
  m.utilisation_ppm = 910000;
  return m;
}

TEST(SipHash, MatchesTheReferenceVectors) {
  // The SipHash paper's test key 00..0f; messages 00..(n-1).
  AuthKey k = Key(0);
  uint8_t msg[15];
  for (int i = 0; i < 15; i++) msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(SipHash24(k, msg, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(SipHash24(k, msg, 15), 0xa129ca6149be45e5ULL);
}

TEST(ArnMessage, EncodesBigEndianFieldsAtDocumentedOffsets) {
  auto b = Encode(Sample(), AuthKey{});
  ASSERT_EQ(b.size(), 40u);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 4), (std::vector<uint8_t>{'A', 'R', 'N', '1'}));
  EXPECT_EQ(b[4], INC_ARN_VERSION);
  EXPECT_EQ(b[5], INC_ARN_CONGESTION_DETECTED);
  EXPECT_EQ(b[6], 2);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 8, b.begin() + 12), (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(b[23], 42);  // seq
  EXPECT_EQ(b[24], 0x11);
  EXPECT_EQ(b[31], 0x88);  // timestamp
  EXPECT_EQ(b[36] | b[37] | b[38] | b[39], 0) << "no key: auth field 0";
}

TEST(ArnMessage, RoundTripsWithAndWithoutAKey) {
  for (const AuthKey& k : {AuthKey{}, Key(9)}) {
    auto b = Encode(Sample(), k);
    auto m = Decode(b.data(), b.size(), k, nullptr);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(*m, Sample());
  }
}

TEST(ArnMessage, ParsesAuthKeysStrictly) {
  EXPECT_TRUE(ParseAuthKey("000102030405060708090a0b0c0d0e0f").ok());
  EXPECT_EQ(*ParseAuthKey("000102030405060708090A0B0C0D0E0F"), Key(0));
  EXPECT_EQ(ParseAuthKey("0001").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseAuthKey("zz0102030405060708090a0b0c0d0e0f").status().code(), Code::kInvalidArgument);
}

struct RejectCase {
  const char* description;
  std::function<void(Message&)> edit_message;
  std::function<void(std::vector<uint8_t>&)> edit_bytes;  // after encoding
  Reject reason;
};

TEST(ArnMessage, RejectsMalformedAndForgedMessagesWithTheirReason) {
  const AuthKey key = Key(1);
  std::vector<RejectCase> cases = {
      {"truncated", nullptr, [](auto& b) { b.resize(39); }, Reject::kTruncated},
      {"bad magic", nullptr, [](auto& b) { b[0] = 'X'; }, Reject::kBadMagic},
      {"bad version", nullptr, [](auto& b) { b[4] = 2; }, Reject::kBadVersion},
      {"type 0", nullptr, [](auto& b) { b[5] = 0; }, Reject::kBadType},
      {"type 5", nullptr, [](auto& b) { b[5] = 5; }, Reject::kBadType},
      {"congestion severity 0", [](Message& m) { m.severity = 0; }, nullptr, Reject::kBadSeverity},
      {"congestion severity 4", [](Message& m) { m.severity = 4; }, nullptr, Reject::kBadSeverity},
      {"failure without the failure level", [](Message& m) { m.type = Type::kLinkFailed; }, nullptr,
       Reject::kBadSeverity},
      {"elimination with a severity", [](Message& m) { m.type = Type::kCongestionEliminated; }, nullptr,
       Reject::kBadSeverity},
      {"a flipped bit in the body", nullptr, [](auto& b) { b[10] ^= 1; }, Reject::kBadAuth},
      {"a flipped bit in the digest", nullptr, [](auto& b) { b[39] ^= 1; }, Reject::kBadAuth},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    Message m = Sample();
    if (c.edit_message) c.edit_message(m);
    auto b = Encode(m, key);
    if (c.edit_bytes) c.edit_bytes(b);
    Reject why = Reject::kCount;
    auto d = Decode(b.data(), b.size(), key, &why);
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(why, c.reason) << RejectName(why);
  }
  auto forged = Encode(Sample(), Key(2));  // another group's key
  Reject why = Reject::kCount;
  EXPECT_FALSE(Decode(forged.data(), forged.size(), key, &why).ok());
  EXPECT_EQ(why, Reject::kBadAuth);
}

TEST(ArnReceiver, AcceptsOnlyNewerSequencesFromKnownOthersAndCountsTheRest) {
  const AuthKey key = Key(3);
  Receiver rx(/*self=*/5, {1, 2, 5}, key);
  auto send = [&](uint32_t origin, uint32_t seq) {
    Message m = Sample();
    m.origin = origin;
    m.seq = seq;
    auto b = Encode(m, key);
    return rx.Accept(b.data(), b.size());
  };
  EXPECT_TRUE(send(1, 10).ok());
  EXPECT_EQ(send(1, 10).status().code(), Code::kFailedPrecondition) << "a replay is stale";
  EXPECT_FALSE(send(1, 9).ok());
  EXPECT_TRUE(send(1, 11).ok());
  EXPECT_TRUE(send(2, 1).ok()) << "sequence numbers are per origin";
  EXPECT_EQ(send(9, 100).status().code(), Code::kPermissionDenied) << "unknown origin";
  EXPECT_FALSE(send(5, 100).ok()) << "own message";
  EXPECT_TRUE(send(2, 0x40000000u).ok()) << "ahead by less than half the space is newer";
  EXPECT_TRUE(send(2, 0x80000000u).ok());
  EXPECT_TRUE(send(2, 0xfffffff0u).ok());
  EXPECT_TRUE(send(2, 3).ok()) << "across the wrap";
  EXPECT_FALSE(send(2, 0xffffffffu).ok()) << "behind across the wrap";
  auto bad = Encode(Sample(), Key(4));
  EXPECT_FALSE(rx.Accept(bad.data(), bad.size()).ok());
  EXPECT_EQ(rx.accepted(), 7u);
  EXPECT_EQ(rx.rejects(Reject::kStale), 3u);
  EXPECT_EQ(rx.rejects(Reject::kUnknownOrigin), 1u);
  EXPECT_EQ(rx.rejects(Reject::kOwnMessage), 1u);
  EXPECT_EQ(rx.rejects(Reject::kBadAuth), 1u);
  EXPECT_EQ(rx.RejectCounts().at("stale_sequence"), 3u);
}

TEST(ArnReceiver, BelievesTheGroupKeyOrTheAcceptedKeyAndNoOther) {
  const AuthKey old_key = Key(3), new_key = Key(4), stranger = Key(5);
  struct Case {
    const char* what;
    AuthKey signed_with;
    bool believed;
  };
  const Case cases[] = {
      {"the group key", old_key, true},
      {"the accepted key", new_key, true},
      {"a third key", stranger, false},
      {"no key (auth field 0)", AuthKey{}, false},
  };
  uint32_t seq = 1;
  for (const Case& c : cases) {
    Receiver rx(/*self=*/5, {1}, old_key, new_key);
    Message m = Sample();
    m.origin = 1;
    m.seq = seq++;
    auto b = Encode(m, c.signed_with);
    auto got = rx.Accept(b.data(), b.size());
    EXPECT_EQ(got.ok(), c.believed) << c.what;
    EXPECT_EQ(rx.rejects(Reject::kBadAuth), c.believed ? 0u : 1u) << c.what;
  }
}

TEST(ArnReceiver, KeyChangeKeepsTheSequenceHistoryAndDropsTheRetiredKey) {
  const AuthKey old_key = Key(3), new_key = Key(4);
  Receiver rx(/*self=*/5, {1}, old_key);
  auto send = [&](const AuthKey& key, uint32_t seq) {
    Message m = Sample();
    m.origin = 1;
    m.seq = seq;
    auto b = Encode(m, key);
    return rx.Accept(b.data(), b.size());
  };
  EXPECT_TRUE(send(old_key, 10).ok());
  EXPECT_FALSE(send(new_key, 11).ok()) << "not accepted before step 1";
  rx.SetKeys(old_key, new_key);  // step 1: the next key is accepted
  EXPECT_TRUE(send(new_key, 12).ok());
  rx.SetKeys(new_key, old_key);  // step 2: signing with the next key
  EXPECT_TRUE(send(old_key, 13).ok()) << "a sender not yet switched is still believed";
  EXPECT_EQ(send(new_key, 12).status().code(), Code::kFailedPrecondition)
      << "a replay stays stale across the key change";
  rx.SetKeys(new_key, std::nullopt);  // step 3: the old key retired
  EXPECT_EQ(send(old_key, 20).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(send(new_key, 21).ok());
  EXPECT_EQ(rx.rejects(Reject::kBadAuth), 2u);
  EXPECT_EQ(rx.rejects(Reject::kStale), 1u);
  EXPECT_EQ(rx.accepted(), 4u);
}

}  // namespace
}  // namespace inc::arn
