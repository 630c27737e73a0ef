// SPDX-License-Identifier: Apache-2.0
#include "common/siphash.h"

namespace inc {
namespace {

uint64_t Load64Le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

uint64_t Rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

void SipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = Rotl(v1, 13) ^ v0;
  v0 = Rotl(v0, 32);
  v2 += v3;
  v3 = Rotl(v3, 16) ^ v2;
  v0 += v3;
  v3 = Rotl(v3, 21) ^ v0;
  v2 += v1;
  v1 = Rotl(v1, 17) ^ v2;
  v2 = Rotl(v2, 32);
}

}  // namespace

uint64_t SipHash24(const SipKey& key, const uint8_t* data, size_t len) {
  uint64_t k0 = Load64Le(key.data()), k1 = Load64Le(key.data() + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
  size_t full = len & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = Load64Le(data + i);
    v3 ^= m;
    SipRound(v0, v1, v2, v3);
    SipRound(v0, v1, v2, v3);
    v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(len & 0xff) << 56;
  for (size_t i = 0; i < (len & 7); i++) last |= static_cast<uint64_t>(data[full + i]) << (8 * i);
  v3 ^= last;
  SipRound(v0, v1, v2, v3);
  SipRound(v0, v1, v2, v3);
  v0 ^= last;
  v2 ^= 0xff;
  for (int i = 0; i < 4; i++) SipRound(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

Expected<SipKey> ParseSipKey(const std::string& hex) {
  if (hex.size() != 32)
    return InvalidArgument("key must be 32 hex digits, got " + std::to_string(hex.size()));
  SipKey k{};
  for (size_t i = 0; i < 32; i++) {
    const char c = hex[i];
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
    if (d < 0) return InvalidArgument(std::string("key: '") + c + "' is not a hex digit");
    k[i / 2] = static_cast<uint8_t>(k[i / 2] << 4 | d);
  }
  return k;
}

}  // namespace inc
