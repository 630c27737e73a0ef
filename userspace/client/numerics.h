// SPDX-License-Identifier: Apache-2.0
// Host-side number mapping for in-network reduction (docs/wire-format.md,
// "Numbers"): the switch adds only integers, so
// - FP32 SUM is block fixed point: every member quantises a block with the
//   agreed block exponent (the MAX over members of each member's block
//   exponent) into int32 lanes with ceil(log2(world)) bits of headroom; the
//   integer sum is exact and order-free, so every rank gets the same bits.
// - FP64 SUM is the same on int64 lanes.
// - Float SUMs whose ranks' elements together fit one packet are gathered
//   and added in rank order instead (gather_sum.h).
// - FP32/FP64 MIN/MAX travel as order-preserving integers (FP32: raw bits,
//   the switch applies the transform; FP64: transformed here onto INT64).
// - FP16/BF16 widen to FP32 exactly and narrow back with round-to-nearest-even.
#pragma once

#include <cstddef>
#include <cstdint>

namespace inc::client {

// Exponent value of a block that holds only zeros (below every real one,
// float64's -1074 included).
constexpr int32_t kZeroBlockExponent = -2000;
// Exponent value of a block that holds inf or NaN (above every real one):
// such a block cannot be quantised (float_sum.h gathers it instead).
constexpr int32_t kNonFiniteBlockExponent = 2000;

// Bits of headroom for summing world values without overflow.
int HeadroomBits(uint32_t world);

// Instruction sets the FP32/FP64 SUM codec has paths for. The functions
// without a Simd argument take the best one this CPU has (BestSimd); every
// path gives the same bits (tests and the micro-benchmark pick one).
enum class Simd : uint8_t { kScalar, kSse2, kAvx2, kAvx512 };
Simd BestSimd();
bool SimdSupported(Simd s);
const char* SimdName(Simd s);

// b such that every |x| in the block is < 2^(b+1) (ilogb of the largest
// magnitude; float32 clamped below at -127, which still quantises its
// subnormals exactly), kZeroBlockExponent for an all-zero block, or
// kNonFiniteBlockExponent when the block holds inf or NaN.
int32_t BlockExponentF32(const float* x, size_t n);
int32_t BlockExponentF64(const double* x, size_t n);

// Quantise n values with the agreed block exponent b and headroom h:
// q = round_half_even(x * 2^(30 - h - b)) saturated to +-(2^(31-h) - 1).
// Returns true if any value saturated (only NaN/inf, or a b below the
// block's own exponent, can do that). The lanes q are little-endian int32s
// at any alignment (a frame's payload), as on the wire.
bool QuantiseF32(const float* x, size_t n, int32_t b, int h, void* q);
void DequantiseF32(const void* q, size_t n, int32_t b, int h, float* x);
// int64 lanes: q = round(x * 2^(62 - h - b)), saturated to +-(2^(63-h) - 1);
// b may be any double exponent (-1074..1023).
bool QuantiseF64(const double* x, size_t n, int32_t b, int h, void* q);
void DequantiseF64(const void* q, size_t n, int32_t b, int h, double* x);

// float32 values on 64-bit lanes: exactly QuantiseF64 / DequantiseF64 of
// the values widened to double (and the result rounded once more to
// float), without a double copy of the block. QuantiseF32Wide also says in
// *rounded_to_zero whether a nonzero value got lane 0 (RoundedToZero).
bool QuantiseF32Wide(const float* x, size_t n, int32_t b, int h, void* q, bool* rounded_to_zero);
void DequantiseF32Wide(const void* q, size_t n, int32_t b, int h, float* x);

// Whether some nonzero x[i] has lane 0 in q (n int32 / int64 lanes, as
// Quantise wrote them): a rounding to zero the switch's certificate cannot
// see (bpf/aggregate.h: an all-zero element counts as an exact zero sum).
bool RoundedToZero(const float* x, size_t n, const void* q);
bool RoundedToZero(const double* x, size_t n, const void* q);
// Whether one of n lanes of lane_size (4 or 8) bytes is 0.
bool HasZeroLane(const void* q, size_t n, size_t lane_size);

// The same on an explicit path; one the CPU lacks falls back to the best
// it has (SimdSupported tells).
int32_t BlockExponentF32(Simd s, const float* x, size_t n);
int32_t BlockExponentF64(Simd s, const double* x, size_t n);
bool QuantiseF32(Simd s, const float* x, size_t n, int32_t b, int h, void* q);
void DequantiseF32(Simd s, const void* q, size_t n, int32_t b, int h, float* x);
bool QuantiseF64(Simd s, const double* x, size_t n, int32_t b, int h, void* q);
void DequantiseF64(Simd s, const void* q, size_t n, int32_t b, int h, double* x);

// FP64 <-> int64 whose signed order equals the doubles' order (-0 < +0);
// the mapping is its own inverse.
int64_t OrderedFromF64(double x);
double F64FromOrdered(int64_t v);

// IEEE binary16 and bfloat16 <-> binary32 (widening is exact; narrowing
// rounds to nearest even and keeps NaN a NaN).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
float Bf16ToF32(uint16_t b);
uint16_t F32ToBf16(float f);

}  // namespace inc::client
