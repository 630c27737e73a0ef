#include "common/icrc.h"

#include <arpa/inet.h>

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/abi.h"

namespace inc {
namespace {

constexpr uint32_t kPoly = 0xEDB88320;

struct Tables {
  uint32_t t[8][256];
  constexpr Tables() : t{} {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
      for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};
constexpr Tables kTables;

}  // namespace

namespace {

uint32_t Crc32LeTable(uint32_t crc, const uint8_t* p, size_t len) {
  const auto& t = kTables.t;
  while (len >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian host assumed (x86_64, arm64 LE)
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#if defined(__x86_64__)
// Carry-less multiplication folding (every ICRC a member builds or checks
// runs over a whole frame; the table walk costs ~1 ns per byte). Bytes load
// little-endian into 128-bit lanes, so lane bit i is the coefficient of
// x^(127-i) of that block (the CRC's reflected order). For a block S = H x^64
// + L (H = low 64 bits), S x^T + D keeps the residue mod P, and
// clmul(H, K(x^(T+63))) ^ clmul(L, K(x^(T-1))) ^ D equals it in 96 + 128 bits
// (a reflected clmul multiplies by an extra x). K(c) = c in register form
// (bit 31 = x^0) shifted to the top half of 64 bits. The folded 16 bytes and
// the tail then go through the table: same residue, same CRC.
uint32_t RegisterFormXPow(uint32_t n) {  // x^n mod P, bit 31 = x^0
  return Crc32MulModP(Crc32XPow8n(n / 8), 0x80000000u >> (n % 8));
}

struct FoldConstants {
  __m128i by4, by1;  // {K(x^(T+63)), K(x^(T-1))} for T = 512 and 128 bits
};

FoldConstants MakeFoldConstants() {
  auto k = [](uint32_t n) { return static_cast<long long>(uint64_t{RegisterFormXPow(n)} << 32); };
  return {_mm_set_epi64x(k(511), k(575)), _mm_set_epi64x(k(127), k(191))};
}

__attribute__((target("pclmul,sse2"))) inline __m128i Fold(__m128i s, __m128i d, __m128i k) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(s, k, 0x00), _mm_clmulepi64_si128(s, k, 0x11)), d);
}

__attribute__((target("pclmul,sse2"))) uint32_t Crc32LeClmul(uint32_t crc, const uint8_t* p, size_t len) {
  static const FoldConstants kc = MakeFoldConstants();
  auto load = [](const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); };
  __m128i a0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i a1 = load(p + 16), a2 = load(p + 32), a3 = load(p + 48);
  p += 64;
  len -= 64;
  for (; len >= 64; p += 64, len -= 64) {
    a0 = Fold(a0, load(p), kc.by4);
    a1 = Fold(a1, load(p + 16), kc.by4);
    a2 = Fold(a2, load(p + 32), kc.by4);
    a3 = Fold(a3, load(p + 48), kc.by4);
  }
  __m128i s = Fold(Fold(Fold(a0, a1, kc.by1), a2, kc.by1), a3, kc.by1);
  for (; len >= 16; p += 16, len -= 16) s = Fold(s, load(p), kc.by1);
  alignas(16) uint8_t folded[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(folded), s);
  return Crc32LeTable(Crc32LeTable(0, folded, 16), p, len);
}

bool HaveClmul() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
  }();
  return have;
}
#endif

}  // namespace

uint32_t Crc32Le(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  if (len >= 64 && HaveClmul()) return Crc32LeClmul(crc, p, len);
#endif
  return Crc32LeTable(crc, p, len);
}

uint32_t Crc32MulModP(uint32_t a, uint32_t b) {
  // Reflected order: bit 31 is x^0. Walk a's coefficients from x^0 upward,
  // multiplying b by x at each step.
  uint32_t product = 0;
  for (int bit = 31; bit >= 0; bit--) {
    if (a & (1u << bit)) product ^= b;
    b = (b >> 1) ^ ((b & 1) ? kPoly : 0);
  }
  return product;
}

uint32_t Crc32XPow8n(size_t n) {
  // Square-and-multiply over x^(2^k): x^8 = one zero byte.
  uint32_t result = 0x80000000u;                   // x^0
  uint32_t power = Crc32Le(0x80000000u, "\0", 1);  // x^8
  while (n) {
    if (n & 1) result = Crc32MulModP(result, power);
    power = Crc32MulModP(power, power);
    n >>= 1;
  }
  return result;
}

uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  return Crc32MulModP(crc_a, Crc32XPow8n(len_b)) ^ crc_b;
}

Expected<uint32_t> ComputeIcrc(const uint8_t* frame, size_t len) {
  if (len < INC_OFF_BTH + sizeof(inc_bth) + INC_ICRC_LEN)
    return InvalidArgument("frame too short for RoCEv2");
  if (frame[12] != 0x08 || frame[13] != 0x00) return InvalidArgument("not IPv4");
  const uint8_t* ip = frame + INC_OFF_IP;
  if (ip[0] != 0x45) return InvalidArgument("IPv4 header with options or bad version");
  const uint8_t* udp = frame + INC_OFF_UDP;
  uint16_t udp_len;
  std::memcpy(&udp_len, udp + 4, 2);
  udp_len = ntohs(udp_len);
  if (udp_len < 8 + sizeof(inc_bth) + INC_ICRC_LEN || INC_OFF_UDP + size_t{udp_len} > len) {
    return InvalidArgument("bad UDP length");
  }
  uint8_t masked[20 + 8 + 12];
  std::memcpy(masked, ip, 20);
  masked[1] = 0xFF;                // TOS
  masked[8] = 0xFF;                // TTL
  masked[10] = masked[11] = 0xFF;  // header checksum
  std::memcpy(masked + 20, udp, 8);
  masked[26] = masked[27] = 0xFF;  // UDP checksum
  std::memcpy(masked + 28, udp + 8, 12);
  masked[28 + 4] = 0xFF;  // BTH resv8 (FECN/BECN)
  uint32_t crc = Crc32Le(kIcrcSeed, masked, sizeof(masked));
  size_t rest = udp_len - 8 - sizeof(inc_bth) - INC_ICRC_LEN;
  crc = Crc32Le(crc, udp + 8 + sizeof(inc_bth), rest);
  return ~crc;
}

Status WriteIcrc(uint8_t* frame, size_t len) {
  auto v = ComputeIcrc(frame, len);
  if (!v.ok()) return v.status();
  uint16_t udp_len;
  std::memcpy(&udp_len, frame + INC_OFF_UDP + 4, 2);
  uint8_t* field = frame + INC_OFF_UDP + ntohs(udp_len) - INC_ICRC_LEN;
  uint32_t value = *v;
  for (int i = 0; i < 4; i++) field[i] = static_cast<uint8_t>(value >> (8 * i));
  return Status::Ok();
}

bool CheckIcrc(const uint8_t* frame, size_t len) {
  auto v = ComputeIcrc(frame, len);
  if (!v.ok()) return false;
  uint16_t udp_len;
  std::memcpy(&udp_len, frame + INC_OFF_UDP + 4, 2);
  const uint8_t* field = frame + INC_OFF_UDP + ntohs(udp_len) - INC_ICRC_LEN;
  uint32_t wire =
      uint32_t{field[0]} | uint32_t{field[1]} << 8 | uint32_t{field[2]} << 16 | uint32_t{field[3]} << 24;
  return wire == *v;
}

}  // namespace inc
