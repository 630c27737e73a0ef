// SPDX-License-Identifier: Apache-2.0
// The RSVP credit codec (credit/rsvp.cc): what incswitchd's credit agent
// decodes from every RSVP datagram a neighbour sends. Each input is decoded
// twice: as received, and after the harness has done a sender's part (length
// field, SipHash MAC under the harness's key, checksum), because random bytes
// almost never carry a good checksum or MAC and would otherwise stop at
// those checks. Invariants: a message the sender's part was done for is never
// rejected for its checksum or MAC; a decoded message encodes and decodes
// back to itself; the Receiver refuses the same datagram a second time.
#include <cstring>
#include <string>
#include <vector>

#include "common/siphash.h"
#include "credit/rsvp.h"
#include "fuzz_check.h"

namespace {

using inc::credit::Reject;

constexpr uint64_t kKeyId = 0x00000000beefull;
const inc::SipKey kKey = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// Where the MAC of an INTEGRITY object sits (RFC 2747 layout, docs/wire-format.md).
constexpr size_t kIntegrityMacOff = 20;
constexpr size_t kIntegrityLen = 28;

void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Store64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

// Does what inc::credit::Encode does after laying out the objects: length,
// MAC of the first well-formed INTEGRITY object (checksum and MAC zero while
// hashing), checksum. Returns false if the message has no such object.
bool SignLikeASender(std::vector<uint8_t>* msg) {
  std::vector<uint8_t>& b = *msg;
  Store16(b.data() + 6, static_cast<uint16_t>(b.size()));
  Store16(b.data() + 2, 0);
  size_t integrity_off = 0;
  for (size_t off = inc::credit::kCommonHeaderLen; off + inc::credit::kObjectHeaderLen <= b.size();) {
    size_t olen = size_t{b[off]} << 8 | b[off + 1];
    if (olen < inc::credit::kObjectHeaderLen || olen % 4 || olen > b.size() - off) break;
    if (b[off + 2] == inc::credit::kClassIntegrity && olen == kIntegrityLen) {
      integrity_off = off;
      break;
    }
    off += olen;
  }
  if (integrity_off) {
    Store64(b.data() + integrity_off + kIntegrityMacOff, 0);
    Store64(b.data() + integrity_off + kIntegrityMacOff, inc::SipHash24(kKey, b.data(), b.size()));
  }
  uint16_t sum = inc::credit::InetChecksum(b.data(), b.size());
  // RFC 2205's "no checksum" is 0; a sum that folds to 0 is sent as 0xffff.
  Store16(b.data() + 2, sum ? sum : 0xffff);
  return integrity_off != 0;
}

void CheckDecoded(const inc::credit::Message& m, const inc::credit::KeyRing& keys) {
  FUZZ_CHECK(m.key_id <= inc::credit::kKeyIdMask);
  FUZZ_CHECK(m.flow.dest_qpn <= 0xffffff);
  if (m.type == inc::credit::MsgType::kCreditResv) FUZZ_CHECK(m.credit.has_value());
  auto it = keys.find(m.key_id);
  FUZZ_CHECK(it != keys.end());
  std::vector<uint8_t> again = inc::credit::Encode(m, m.key_id, it->second, m.seq);
  Reject why = Reject::kCount;
  auto back = inc::credit::Decode(again.data(), again.size(), keys, &why);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == m);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const inc::credit::KeyRing keys = {{kKeyId, kKey}};
  // Keys come from config files as 32 hex digits.
  auto key = inc::credit::ParseKey(std::string(reinterpret_cast<const char*>(data), size));
  if (key.ok()) FUZZ_CHECK(size == 32);
  std::vector<uint8_t> msg(data, data + size);
  Reject why = Reject::kCount;
  auto m = inc::credit::Decode(msg.data(), msg.size(), keys, &why);
  if (m.ok()) CheckDecoded(*m, keys);

  if (size < inc::credit::kCommonHeaderLen || size % 4 || size > 0xffff) return 0;
  bool signed_ = SignLikeASender(&msg);
  why = Reject::kCount;
  m = inc::credit::Decode(msg.data(), msg.size(), keys, &why);
  if (!m.ok()) {
    FUZZ_CHECK(why != Reject::kCount);  // every rejection names its reason
    FUZZ_CHECK(why != Reject::kBadChecksum && why != Reject::kBadLength);
    if (signed_) FUZZ_CHECK(why != Reject::kBadIntegrity);
    return 0;
  }
  CheckDecoded(*m, keys);
  inc::credit::Receiver receiver(keys);
  FUZZ_CHECK(receiver.Accept(msg.data(), msg.size()).ok());
  FUZZ_CHECK(!receiver.Accept(msg.data(), msg.size()).ok());
  FUZZ_CHECK(receiver.rejects()[static_cast<size_t>(Reject::kReplayed)] == 1);
  return 0;
}
