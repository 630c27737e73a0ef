// SPDX-License-Identifier: Apache-2.0
#include "common/icrc.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/abi/wire.h"
#include "common/simd.h"

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

// The kernels read the first 64 bytes of their input through this mask,
// byte i as (p[i] & keep[i]) | set[i], so the ICRC's masked header fields
// need no copy. Null: no mask.
struct HeadMask {
  alignas(64) uint8_t keep[64];
  alignas(64) uint8_t set[64];
};

// Table path; with a mask, the first min(len, 64) bytes masked.
uint32_t Crc32LeTableMasked(uint32_t crc, const uint8_t* p, size_t len, const HeadMask* m) {
  if (!m) return Crc32LeTable(crc, p, len);
  uint8_t head[64];
  const size_t n = len < 64 ? len : 64;
  for (size_t i = 0; i < n; i++) head[i] = static_cast<uint8_t>((p[i] & m->keep[i]) | m->set[i]);
  return Crc32LeTable(Crc32LeTable(crc, head, n), p + n, len - n);
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
// the tail then go through the table: same residue, same CRC. The VPCLMULQDQ
// path folds four such lanes per 512-bit register with the same constants.
uint32_t RegisterFormXPow(uint32_t n) {  // x^n mod P, bit 31 = x^0
  return Crc32MulModP(Crc32XPow8n(n / 8), 0x80000000u >> (n % 8));
}

// {K(x^(T+63)), K(x^(T-1))}: folds a 16-byte lane forward by T bits.
__m128i FoldConstant(uint32_t t) {
  auto k = [](uint32_t n) { return static_cast<long long>(uint64_t{RegisterFormXPow(n)} << 32); };
  return _mm_set_epi64x(k(t - 1), k(t + 63));
}

struct FoldConstants {
  __m128i by16, by4, by1;  // T = 2048, 512 and 128 bits
};

const FoldConstants& Constants() {
  static const FoldConstants kc{FoldConstant(2048), FoldConstant(512), FoldConstant(128)};
  return kc;
}

#define INC_TARGET_PCLMUL __attribute__((target("pclmul,sse2")))
#define INC_TARGET_VPCLMUL __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,vpclmulqdq,pclmul")))

INC_TARGET_PCLMUL inline __m128i Fold(__m128i s, __m128i d, __m128i k) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(s, k, 0x00), _mm_clmulepi64_si128(s, k, 0x11)), d);
}

INC_TARGET_PCLMUL inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// s is the fold of everything before p; the rest from p on.
INC_TARGET_PCLMUL uint32_t FinishClmul(__m128i s, const uint8_t* p, size_t len) {
  const __m128i by1 = Constants().by1;
  for (; len >= 16; p += 16, len -= 16) s = Fold(s, Load16(p), by1);
  alignas(16) uint8_t folded[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(folded), s);
  return Crc32LeTable(Crc32LeTable(0, folded, 16), p, len);
}

INC_TARGET_PCLMUL uint32_t Crc32LeClmul(uint32_t crc, const uint8_t* p, size_t len, const HeadMask* m) {
  if (len < 64) return Crc32LeTableMasked(crc, p, len, m);
  const FoldConstants& kc = Constants();
  __m128i a0 = Load16(p), a1 = Load16(p + 16), a2 = Load16(p + 32), a3 = Load16(p + 48);
  if (m) {
    auto mask = [m](__m128i v, int i) {
      return _mm_or_si128(_mm_and_si128(v, Load16(m->keep + 16 * i)), Load16(m->set + 16 * i));
    };
    a0 = mask(a0, 0), a1 = mask(a1, 1), a2 = mask(a2, 2), a3 = mask(a3, 3);
  }
  a0 = _mm_xor_si128(a0, _mm_cvtsi32_si128(static_cast<int>(crc)));
  p += 64;
  len -= 64;
  for (; len >= 64; p += 64, len -= 64) {
    a0 = Fold(a0, Load16(p), kc.by4);
    a1 = Fold(a1, Load16(p + 16), kc.by4);
    a2 = Fold(a2, Load16(p + 32), kc.by4);
    a3 = Fold(a3, Load16(p + 48), kc.by4);
  }
  return FinishClmul(Fold(Fold(Fold(a0, a1, kc.by1), a2, kc.by1), a3, kc.by1), p, len);
}

INC_AVX512_WARNINGS_OFF

INC_TARGET_VPCLMUL inline __m512i Fold512(__m512i s, __m512i d, __m512i k) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(s, k, 0x00), _mm512_clmulepi64_epi128(s, k, 0x11),
                                   d, 0x96);  // a ^ b ^ c
}

INC_TARGET_VPCLMUL uint32_t Crc32LeVpclmul(uint32_t crc, const uint8_t* p, size_t len, const HeadMask* m) {
  if (len < 256) return Crc32LeClmul(crc, p, len, m);
  const FoldConstants& kc = Constants();
  const __m512i by16 = _mm512_broadcast_i32x4(kc.by16), by4 = _mm512_broadcast_i32x4(kc.by4);
  __m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64);
  __m512i z2 = _mm512_loadu_si512(p + 128), z3 = _mm512_loadu_si512(p + 192);
  if (m) z0 = _mm512_ternarylogic_epi64(z0, _mm512_load_si512(m->keep), _mm512_load_si512(m->set), 0xEA);
  z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(crc))));
  p += 256;
  len -= 256;
  for (; len >= 256; p += 256, len -= 256) {
    z0 = Fold512(z0, _mm512_loadu_si512(p), by16);
    z1 = Fold512(z1, _mm512_loadu_si512(p + 64), by16);
    z2 = Fold512(z2, _mm512_loadu_si512(p + 128), by16);
    z3 = Fold512(z3, _mm512_loadu_si512(p + 192), by16);
  }
  __m512i z = Fold512(Fold512(Fold512(z0, z1, by4), z2, by4), z3, by4);
  for (; len >= 64; p += 64, len -= 64) z = Fold512(z, _mm512_loadu_si512(p), by4);
  __m128i s = Fold(_mm512_castsi512_si128(z), _mm512_extracti32x4_epi32(z, 1), kc.by1);
  s = Fold(Fold(s, _mm512_extracti32x4_epi32(z, 2), kc.by1), _mm512_extracti32x4_epi32(z, 3), kc.by1);
  return FinishClmul(s, p, len);
}

INC_AVX512_WARNINGS_ON
#endif

Crc32Path DetectCrc32Path() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse2")) return Crc32Path::kTable;
  if (__builtin_cpu_supports("vpclmulqdq") && CpuHasAvx512()) return Crc32Path::kVpclmul;
  return Crc32Path::kPclmul;
#else
  return Crc32Path::kTable;
#endif
}

uint32_t Crc32LeMasked(Crc32Path path, uint32_t crc, const uint8_t* p, size_t len, const HeadMask* m) {
  switch (std::min(path, BestCrc32Path())) {
#if defined(__x86_64__)
    case Crc32Path::kVpclmul: return Crc32LeVpclmul(crc, p, len, m);
    case Crc32Path::kPclmul: return Crc32LeClmul(crc, p, len, m);
#endif
    default: return Crc32LeTableMasked(crc, p, len, m);
  }
}

// The ICRC covers 8 bytes of 0xFF, then the IPv4 header, UDP header and BTH
// with TOS, TTL, the two checksums and BTH resv8 read as 0xFF, then the rest
// of the UDP payload before the ICRC. crc32_le(~0, 0xFF x 8 | M) equals
// crc32_le(0, 0 x k | 0xFF x 4 | M) for any k (the seed cancels the first
// four 0xFF bytes, and leading zeros leave a zero register as it is), which
// is frame[10 - k, end - 4) under a mask: one pass, with k (<= 10, the bytes
// before frame + 10) chosen to make the length a multiple of 16 where it can,
// so no byte goes to the table but the last 16.
constexpr size_t kIcrcStart = INC_OFF_IP - 4;
constexpr size_t kMaxLead = kIcrcStart;

std::array<HeadMask, kMaxLead + 1> MakeIcrcMasks() {
  std::array<HeadMask, kMaxLead + 1> masks{};
  const size_t masked[] = {INC_OFF_IP + 1,  INC_OFF_IP + 8,  INC_OFF_IP + 10, INC_OFF_IP + 11,
                           INC_OFF_UDP + 6, INC_OFF_UDP + 7, INC_OFF_BTH + 4};
  for (size_t k = 0; k <= kMaxLead; k++) {
    HeadMask& m = masks[k];
    std::memset(m.keep, 0xFF, sizeof(m.keep));
    std::memset(m.set, 0, sizeof(m.set));
    std::memset(m.keep, 0, k + 4);
    std::memset(m.set + k, 0xFF, 4);
    for (size_t off : masked) {
      m.keep[off - kIcrcStart + k] = 0;
      m.set[off - kIcrcStart + k] = 0xFF;
    }
  }
  return masks;
}

}  // namespace

Crc32Path BestCrc32Path() {
  static const Crc32Path best = DetectCrc32Path();
  return best;
}

bool Crc32PathSupported(Crc32Path path) {
  return path <= BestCrc32Path();
}

const char* Crc32PathName(Crc32Path path) {
  switch (path) {
    case Crc32Path::kTable: return "table";
    case Crc32Path::kPclmul: return "pclmul";
    case Crc32Path::kVpclmul: return "vpclmul";
  }
  return "?";
}

uint32_t Crc32Le(Crc32Path path, uint32_t crc, const void* data, size_t len) {
  return Crc32LeMasked(path, crc, static_cast<const uint8_t*>(data), len, nullptr);
}

uint32_t Crc32Le(uint32_t crc, const void* data, size_t len) {
  return Crc32Le(BestCrc32Path(), crc, data, len);
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

Expected<uint32_t> ComputeIcrc(Crc32Path path, const uint8_t* frame, size_t len) {
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
  static const std::array<HeadMask, kMaxLead + 1> kMasks = MakeIcrcMasks();
  const size_t covered = INC_OFF_UDP + size_t{udp_len} - INC_ICRC_LEN - kIcrcStart;
  size_t lead = (16 - covered % 16) % 16;
  if (lead > kMaxLead) lead = 0;
  return ~Crc32LeMasked(path, 0, frame + kIcrcStart - lead, covered + lead, &kMasks[lead]);
}

Expected<uint32_t> ComputeIcrc(const uint8_t* frame, size_t len) {
  return ComputeIcrc(BestCrc32Path(), frame, len);
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
