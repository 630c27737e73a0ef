// SPDX-License-Identifier: Apache-2.0
// CRC-32 as the kernel's crc32_le computes it (reflected polynomial
// 0xEDB88320, no pre- or post-inversion), the RoCEv2 ICRC built on it, and the
// GF(2) arithmetic that lets a CRC be patched or combined instead of recomputed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace inc {

constexpr uint32_t kIcrcSeed = 0xDEBB20E3;  // crc32_le(~0, 8 bytes of 0xFF)

// Paths of the CRC-32 kernel: slice-by-8 tables, carry-less multiplication
// folding 16 bytes a step (PCLMULQDQ) and 64 bytes a step (VPCLMULQDQ on
// AVX-512). The functions without a path take the best this CPU has; all
// give the same value (tests and the micro-benchmark pick one).
enum class Crc32Path : uint8_t { kTable, kPclmul, kVpclmul };
Crc32Path BestCrc32Path();
bool Crc32PathSupported(Crc32Path path);
const char* Crc32PathName(Crc32Path path);

// crc32_le(crc, data).
uint32_t Crc32Le(uint32_t crc, const void* data, size_t len);
// The same on an explicit path (one the CPU lacks falls back to the best).
uint32_t Crc32Le(Crc32Path path, uint32_t crc, const void* data, size_t len);

// Product of two CRC-register polynomials modulo P (reflected bit order).
uint32_t Crc32MulModP(uint32_t a, uint32_t b);
// x^(8n) mod P: Crc32Le(c, n zero bytes) == Crc32MulModP(c, Crc32XPow8n(n)).
uint32_t Crc32XPow8n(size_t n);
// Crc32Le(crc_a, B) from crc_b = Crc32Le(0, B) and len_b = |B|.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

// ICRC value of an untagged IPv4 RoCEv2 frame (Ethernet header first). The
// ICRC field is the last 4 bytes of the UDP payload (found via UDP length).
// The wire carries the value little-endian.
// One pass over the frame: the masked header fields are masked as they
// load.
Expected<uint32_t> ComputeIcrc(const uint8_t* frame, size_t len);
Expected<uint32_t> ComputeIcrc(Crc32Path path, const uint8_t* frame, size_t len);
// Computes the ICRC and stores it in the frame's ICRC field.
Status WriteIcrc(uint8_t* frame, size_t len);
// True when the frame's ICRC field holds the right value.
bool CheckIcrc(const uint8_t* frame, size_t len);

}  // namespace inc
