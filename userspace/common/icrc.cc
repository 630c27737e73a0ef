#include "common/icrc.h"

#include <arpa/inet.h>

#include <array>
#include <cstring>

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

uint32_t Crc32Le(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
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
