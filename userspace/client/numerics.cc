// SPDX-License-Identifier: Apache-2.0
#include "client/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/simd.h"

namespace inc::client {
namespace {

// Lane i of little-endian wire lanes at any alignment.
template <typename I>
I LoadLane(const void* q, size_t i) {
  I v;
  std::memcpy(&v, static_cast<const uint8_t*>(q) + i * sizeof(I), sizeof(v));
  return v;
}
template <typename I>
void StoreLane(void* q, size_t i, I v) {
  std::memcpy(static_cast<uint8_t*>(q) + i * sizeof(I), &v, sizeof(v));
}

// float32 block exponents travel in the INC header's int8 too, so they are
// clamped below at -127 (a finer step than float32's smallest subnormal
// still needs); float64's use their whole range.
template <typename F>
int32_t ClampExponent(int e) {
  return sizeof(F) == 4 ? std::max(-127, e) : e;
}

template <typename F>
int32_t BlockExponent(const F* x, size_t n) {
  F max_abs = 0;
  bool special = false;
  for (size_t i = 0; i < n; i++) {
    F a = std::fabs(x[i]);
    if (!std::isfinite(a)) {
      special = true;
    } else if (a > max_abs) {
      max_abs = a;
    }
  }
  if (special) return kNonFiniteBlockExponent;
  if (max_abs == 0) return kZeroBlockExponent;
  return ClampExponent<F>(std::ilogb(max_abs));
}

// The vector paths find the largest magnitude from the bits: |x| orders like
// (bits & ~sign) as a non-negative integer, inf/NaN above every finite.
template <typename F, typename U>
int32_t ExponentOfLargestBits(U max_bits) {
  constexpr U kInf = static_cast<U>(sizeof(U) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  if (max_bits >= kInf) return kNonFiniteBlockExponent;  // inf or NaN
  if (max_bits == 0) return kZeroBlockExponent;
  F m;
  std::memcpy(&m, &max_bits, sizeof(m));
  return ClampExponent<F>(std::ilogb(m));
}

template <typename F>
uint32_t AbsBitsF32(const F* x, size_t i) {
  uint32_t b;
  std::memcpy(&b, x + i, sizeof(b));
  return b & 0x7fffffffu;
}

// Largest integer-valued double below 2^(total_bits-1-h), the largest lane
// magnitude (2^k - 1 itself is not a double when k > 53).
double LaneLimit(int total_bits, int h) {
  return total_bits - 1 - h > 53 ? std::nextafter(std::ldexp(1.0, total_bits - 1 - h), 0.0)
                                 : std::ldexp(1.0, total_bits - 1 - h) - 1;
}

// nearbyint (the current mode: to nearest, ties to even) without a libm call.
inline int64_t NearbyInt64(double v) {
#if defined(__x86_64__)
  return _mm_cvtsd_si64(_mm_set_sd(v));
#else
  return static_cast<int64_t>(std::nearbyint(v));
#endif
}

template <typename F, typename I>
bool Quantise(const F* x, size_t n, int32_t b, int h, int total_bits, void* q) {
  // |x| < 2^(b+1) => |x * 2^(total_bits-2-h-b)| < 2^(total_bits-1-h). Scaling
  // by a power of two is exact in double (std::ldexp per element: 2^shift
  // itself may be outside double's range for float64's extreme exponents;
  // a product below double's range only loses what rounds to 0 anyway);
  // rounding to an integer is exact too (above 2^52 every double already
  // is one), so 64-bit lanes need no wider type.
  const int shift = total_bits - 2 - h - b;
  const double limit = LaneLimit(total_bits, h);
  bool saturated = false;
  for (size_t i = 0; i < n; i++) {
    double s = std::ldexp(static_cast<double>(x[i]), shift);
    if (!(s <= limit && s >= -limit)) {  // also NaN
      saturated = true;
      s = std::isnan(s) ? 0 : (s > 0 ? limit : -limit);
    }
    StoreLane(q, i, static_cast<I>(std::nearbyint(s)));  // round half to even
  }
  return saturated;
}

// 64-bit lanes when 2^shift (scale) is a normal double, one element at a
// time: (double)x is exact for float and double, x * scale is the exact
// product rounded once as std::ldexp's scaling is, so the lanes are
// Quantise's bit for bit, without a libm call per element. *flushed: whether
// a nonzero x got lane 0 (RoundedToZero), in the same pass.
template <typename F>
bool QuantiseScaled64(const F* x, size_t n, double scale, double limit, void* q, bool* flushed) {
  bool saturated = false, zeroed = false;
  for (size_t i = 0; i < n; i++) {
    double v = static_cast<double>(x[i]) * scale;
    if (!(v <= limit && v >= -limit)) {  // also NaN
      saturated = true;
      v = std::isnan(v) ? 0 : (v > 0 ? limit : -limit);
    }
    const int64_t lane = NearbyInt64(v);
    zeroed |= (lane == 0) & (x[i] != 0);
    StoreLane(q, i, lane);
  }
  *flushed = zeroed;
  return saturated;
}

// double(q) * 2^k (unscale, a normal double): the conversion's rounding, then
// an exact scaling rounded once, as std::ldexp(double(q), k); then once more
// to O (float for float32 on 64-bit lanes).
template <typename O>
void DequantiseScaled64(const void* q, size_t n, double unscale, O* x) {
  for (size_t i = 0; i < n; i++)
    x[i] = static_cast<O>(static_cast<double>(LoadLane<int64_t>(q, i)) * unscale);
}

// FP32 quantisation on the vector paths: q = round_half_even(x * 2^e) when
// 2^e is a normal float: the product is then exact in float (or below
// 2^-126 and rounds to 0 either way), and cvtps2dq rounds with the current
// mode like nearbyint. A path returns false when a lane would saturate
// (|s| > 2^(31-h) - 1) or is NaN: the caller redoes the block on the scalar
// path, which saturates exactly as before.
struct F32Scale {
  float scale;
  // The scalar limit 2^(31-h) - 1 as a float test: exact up to 2^24; above,
  // no float lies between it and 2^(31-h), so the largest float below
  // 2^(31-h) is the same test.
  float limit;
};

F32Scale MakeF32Scale(int e, int h) {
  float scale;
  uint32_t scale_bits = static_cast<uint32_t>(e + 127) << 23;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return {scale, 31 - h > 24 ? std::nextafter(std::ldexp(1.0f, 31 - h), 0.0f) : std::ldexp(1.0f, 31 - h) - 1};
}

// Elements [i, n) of a vector path's block; false as above.
bool QuantiseF32Tail(const float* x, size_t i, size_t n, F32Scale k, void* q) {
  for (; i < n; i++) {
    float s = x[i] * k.scale;
    if (!(std::fabs(s) <= k.limit)) return false;
    StoreLane(q, i, static_cast<int32_t>(std::nearbyint(s)));
  }
  return true;
}

// x = float(q * 2^-e): int32 -> double is exact, the scaling too (double
// range), and the one rounding to float is the result's.
void DequantiseF32Scalar(const void* q, size_t i, size_t n, double unscale, float* x) {
  for (; i < n; i++) x[i] = static_cast<float>(static_cast<double>(LoadLane<int32_t>(q, i)) * unscale);
}

// When 2^k (k = -e) keeps every non-zero q * 2^k a normal float (1 <= |q| <
// 2^31, so -126 <= k <= 96), scaling commutes with rounding:
// float(q * 2^k) = float(q) * 2^k with an exact product, so the vector paths
// convert in float, twice the lanes of the double path.
bool DequantiseF32InFloat(int k) {
  return k >= -126 && k <= 96;
}

#if defined(__x86_64__)
// The per-element work of FP32 SUM runs on every byte a member sends and
// receives: SSE2 (x86-64 baseline), AVX2 and AVX-512 paths of the scalar
// definitions above, bit-identical to them.

int32_t BlockExponentF32Sse2(const float* x, size_t n) {
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff);
  __m128i max4 = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128i v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), abs_mask);
    __m128i gt = _mm_cmpgt_epi32(v, max4);
    max4 = _mm_or_si128(_mm_and_si128(gt, v), _mm_andnot_si128(gt, max4));
  }
  uint32_t lanes[4];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), max4);
  uint32_t max_bits = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  for (; i < n; i++) max_bits = std::max(max_bits, AbsBitsF32(x, i));
  return ExponentOfLargestBits<float>(max_bits);
}

bool QuantiseF32Sse2(const float* x, size_t n, F32Scale k, void* q) {
  auto* out = static_cast<uint8_t*>(q);
  const __m128 scale = _mm_set1_ps(k.scale);
  const __m128 bound = _mm_set1_ps(k.limit);
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 bad = _mm_setzero_ps();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 s = _mm_mul_ps(_mm_loadu_ps(x + i), scale);
    // !(|s| <= limit) is also true for NaN.
    bad = _mm_or_ps(bad, _mm_cmpnle_ps(_mm_and_ps(s, abs_mask), bound));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i), _mm_cvtps_epi32(s));
  }
  return !_mm_movemask_ps(bad) && QuantiseF32Tail(x, i, n, k, q);
}

void DequantiseF32Sse2(const void* q, size_t n, double unscale, float* x) {
  const auto* in = static_cast<const uint8_t*>(q);
  const __m128d u = _mm_set1_pd(unscale);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 4 * i));
    __m128 lo = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(v), u));
    __m128 hi = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(_mm_srli_si128(v, 8)), u));
    _mm_storeu_ps(x + i, _mm_movelh_ps(lo, hi));
  }
  DequantiseF32Scalar(q, i, n, unscale, x);
}

void DequantiseF32FloatSse2(const void* q, size_t n, double unscale, float* x) {
  const auto* in = static_cast<const uint8_t*>(q);
  const __m128 u = _mm_set1_ps(static_cast<float>(unscale));
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 4 * i));
    _mm_storeu_ps(x + i, _mm_mul_ps(_mm_cvtepi32_ps(v), u));
  }
  DequantiseF32Scalar(q, i, n, unscale, x);
}

INC_TARGET_AVX2 int32_t BlockExponentF32Avx2(const float* x, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  size_t i = 0;
  const auto* p = reinterpret_cast<const __m256i*>(x);
  for (; i + 16 <= n; i += 16, p += 2) {
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(p), abs_mask));
    m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256(p + 1), abs_mask));
  }
  if (i + 8 <= n) {
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(p), abs_mask));
    i += 8;
  }
  __m256i m = _mm256_max_epu32(m0, m1);
  __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4e));
  m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xb1));
  uint32_t max_bits = static_cast<uint32_t>(_mm_cvtsi128_si32(m4));
  for (; i < n; i++) max_bits = std::max(max_bits, AbsBitsF32(x, i));
  return ExponentOfLargestBits<float>(max_bits);
}

INC_TARGET_AVX2 bool QuantiseF32Avx2(const float* x, size_t n, F32Scale k, void* q) {
  auto* out = static_cast<uint8_t*>(q);
  const __m256 scale = _mm256_set1_ps(k.scale);
  const __m256 bound = _mm256_set1_ps(k.limit);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 s = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(s, abs_mask), bound, _CMP_NLE_UQ));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * i), _mm256_cvtps_epi32(s));
  }
  return !_mm256_movemask_ps(bad) && QuantiseF32Tail(x, i, n, k, q);
}

INC_TARGET_AVX2 void DequantiseF32Avx2(const void* q, size_t n, double unscale, float* x) {
  const auto* in = static_cast<const uint8_t*>(q);
  const __m256 u = _mm256_set1_ps(static_cast<float>(unscale));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i));
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), u));
  }
  DequantiseF32Scalar(q, i, n, unscale, x);
}

INC_AVX512_WARNINGS_OFF

// AVX-512: whole blocks of 16 lanes, the rest under a lane mask (masked-off
// lanes are neither read nor written).
INC_TARGET_AVX512 inline __mmask16 TailMask16(size_t left) {
  return static_cast<__mmask16>((1u << left) - 1);
}

INC_TARGET_AVX512 inline __mmask8 TailMask8(size_t left) {
  return left >= 8 ? __mmask8{0xff} : static_cast<__mmask8>((1u << left) - 1);
}

INC_TARGET_AVX512 int32_t BlockExponentF32Avx512(const float* x, size_t n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), abs_mask));
  }
  for (; i + 16 <= n; i += 16)
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
  if (i < n)
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_maskz_loadu_epi32(TailMask16(n - i), x + i), abs_mask));
  return ExponentOfLargestBits<float>(_mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1)));
}

INC_TARGET_AVX512 bool QuantiseF32Avx512(const float* x, size_t n, F32Scale k, void* q) {
  auto* out = static_cast<uint8_t*>(q);
  const __m512 scale = _mm512_set1_ps(k.scale);
  const __m512 bound = _mm512_set1_ps(k.limit);
  __mmask16 bad = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 s = _mm512_mul_ps(_mm512_loadu_ps(x + i), scale);
    bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(s), bound, _CMP_NLE_UQ);
    _mm512_storeu_si512(out + 4 * i, _mm512_cvtps_epi32(s));
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
    bad |= _mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(s), bound, _CMP_NLE_UQ);
    _mm512_mask_storeu_epi32(out + 4 * i, m, _mm512_cvtps_epi32(s));
  }
  return bad == 0;
}

INC_TARGET_AVX512 void DequantiseF32Avx512(const void* q, size_t n, double unscale, float* x) {
  const auto* in = static_cast<const uint8_t*>(q);
  const __m512 u = _mm512_set1_ps(static_cast<float>(unscale));
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(in + 4 * i)), u));
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(x + i, m,
                          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, in + 4 * i)), u));
  }
}

// FP64 on AVX-512 only (AVX2 has no int64 <-> double conversion).
INC_TARGET_AVX512 int32_t BlockExponentF64Avx512(const double* x, size_t n) {
  const __m512i abs_mask = _mm512_set1_epi64(0x7fffffffffffffffll);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm512_max_epu64(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
    m1 = _mm512_max_epu64(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 8), abs_mask));
  }
  for (; i < n; i += 8) {
    const __mmask8 m = TailMask8(n - i);
    m0 = _mm512_max_epu64(m0, _mm512_maskz_and_epi64(m, _mm512_maskz_loadu_epi64(m, x + i), abs_mask));
  }
  return ExponentOfLargestBits<double>(
      static_cast<uint64_t>(_mm512_reduce_max_epu64(_mm512_max_epu64(m0, m1))));
}

// Same contract as the FP32 paths: false when a lane saturates or is NaN.
INC_TARGET_AVX512 bool QuantiseF64Avx512(const double* x, size_t n, double scale_d, double limit_d, void* q) {
  auto* out = static_cast<uint8_t*>(q);
  const __m512d scale = _mm512_set1_pd(scale_d);
  const __m512d bound = _mm512_set1_pd(limit_d);
  __mmask8 bad = 0;
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 m = TailMask8(n - i);
    __m512d s = _mm512_mul_pd(_mm512_maskz_loadu_pd(m, x + i), scale);
    bad |= _mm512_mask_cmp_pd_mask(m, _mm512_abs_pd(s), bound, _CMP_NLE_UQ);
    _mm512_mask_storeu_epi64(out + 8 * i, m, _mm512_cvtpd_epi64(s));
  }
  return bad == 0;
}

INC_TARGET_AVX512 void DequantiseF64Avx512(const void* q, size_t n, double unscale, double* x) {
  const auto* in = static_cast<const uint8_t*>(q);
  const __m512d u = _mm512_set1_pd(unscale);
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 m = TailMask8(n - i);
    _mm512_mask_storeu_pd(x + i, m,
                          _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_maskz_loadu_epi64(m, in + 8 * i)), u));
  }
}
INC_AVX512_WARNINGS_ON
#endif

Simd DetectSimd() {
#if defined(__x86_64__)
  if (CpuHasAvx512()) return Simd::kAvx512;
  if (__builtin_cpu_supports("avx2")) return Simd::kAvx2;
  return Simd::kSse2;
#else
  return Simd::kScalar;
#endif
}

Simd Usable(Simd s) {
  return std::min(s, BestSimd());
}

}  // namespace

Simd BestSimd() {
  static const Simd best = DetectSimd();
  return best;
}

bool SimdSupported(Simd s) {
  return s <= BestSimd();
}

const char* SimdName(Simd s) {
  switch (s) {
    case Simd::kScalar: return "scalar";
    case Simd::kSse2: return "sse2";
    case Simd::kAvx2: return "avx2";
    case Simd::kAvx512: return "avx512";
  }
  return "?";
}

int HeadroomBits(uint32_t world) {
  int h = 0;
  while ((uint64_t{1} << h) < world) h++;
  return h;
}

int32_t BlockExponentF32(Simd s, const float* x, size_t n) {
  switch (Usable(s)) {
#if defined(__x86_64__)
    case Simd::kAvx512: return BlockExponentF32Avx512(x, n);
    case Simd::kAvx2: return BlockExponentF32Avx2(x, n);
    case Simd::kSse2: return BlockExponentF32Sse2(x, n);
#endif
    default: return BlockExponent(x, n);
  }
}

int32_t BlockExponentF64(Simd s, const double* x, size_t n) {
#if defined(__x86_64__)
  if (Usable(s) == Simd::kAvx512) return BlockExponentF64Avx512(x, n);
#endif
  (void)s;
  return BlockExponent(x, n);
}

bool QuantiseF32(Simd s, const float* x, size_t n, int32_t b, int h, void* q) {
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(int32_t));
    return false;
  }
  const int e = 30 - h - b;
  if (e >= -126 && e <= 127 && h >= 0 && h <= 31) {
    const F32Scale k = MakeF32Scale(e, h);
    switch (Usable(s)) {
#if defined(__x86_64__)
      case Simd::kAvx512:
        if (QuantiseF32Avx512(x, n, k, q)) return false;
        break;
      case Simd::kAvx2:
        if (QuantiseF32Avx2(x, n, k, q)) return false;
        break;
      case Simd::kSse2:
        if (QuantiseF32Sse2(x, n, k, q)) return false;
        break;
#endif
      default: break;
    }
  }
  return Quantise<float, int32_t>(x, n, b, h, 32, q);
}

void DequantiseF32(Simd s, const void* q, size_t n, int32_t b, int h, float* x) {
  if (b == kZeroBlockExponent) {
    std::memset(x, 0, n * sizeof(*x));
    return;
  }
  const int k = -(30 - h - b);
  const double unscale = std::ldexp(1.0, k);
  const bool in_float = DequantiseF32InFloat(k);
  switch (Usable(s)) {
#if defined(__x86_64__)
    case Simd::kAvx512:
      if (in_float) return DequantiseF32Avx512(q, n, unscale, x);
      return DequantiseF32Sse2(q, n, unscale, x);
    case Simd::kAvx2:
      if (in_float) return DequantiseF32Avx2(q, n, unscale, x);
      return DequantiseF32Sse2(q, n, unscale, x);
    case Simd::kSse2:
      if (in_float) return DequantiseF32FloatSse2(q, n, unscale, x);
      return DequantiseF32Sse2(q, n, unscale, x);
#endif
    default: return DequantiseF32Scalar(q, 0, n, unscale, x);
  }
}

bool QuantiseF64(Simd s, const double* x, size_t n, int32_t b, int h, void* q) {
  if (n == 0) return false;  // q and x may be null
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(int64_t));
    return false;
  }
  if (Usable(s) != Simd::kScalar && h >= 0 && h <= 63 && 62 - h - b >= -1022 && 62 - h - b <= 1023) {
    const double limit = LaneLimit(64, h), scale = std::ldexp(1.0, 62 - h - b);
#if defined(__x86_64__)
    if (Usable(s) == Simd::kAvx512 && QuantiseF64Avx512(x, n, scale, limit, q)) return false;
#endif
    bool flushed;
    return QuantiseScaled64(x, n, scale, limit, q, &flushed);
  }
  return Quantise<double, int64_t>(x, n, b, h, 64, q);
}

void DequantiseF64(Simd s, const void* q, size_t n, int32_t b, int h, double* x) {
  if (n == 0) return;  // q and x may be null
  if (b == kZeroBlockExponent) {
    std::memset(x, 0, n * sizeof(*x));
    return;
  }
  const int k = -(62 - h - b);
  if (Usable(s) != Simd::kScalar && k >= -1022 && k <= 1023) {
#if defined(__x86_64__)
    if (Usable(s) == Simd::kAvx512) return DequantiseF64Avx512(q, n, std::ldexp(1.0, k), x);
#endif
    return DequantiseScaled64(q, n, std::ldexp(1.0, k), x);
  }
  for (size_t i = 0; i < n; i++) x[i] = std::ldexp(static_cast<double>(LoadLane<int64_t>(q, i)), k);
}

bool QuantiseF32Wide(const float* x, size_t n, int32_t b, int h, void* q, bool* rounded_to_zero) {
  *rounded_to_zero = false;
  if (n == 0) return false;  // q and x may be null
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++) *rounded_to_zero |= x[i] != 0;
    return false;
  }
  const int shift = 62 - h - b;
  if (h < 0 || h > 63 || shift < -1022 || shift > 1023) {
    // Scales outside double's normal range: the definition.
    const bool saturated = Quantise<float, int64_t>(x, n, b, h, 64, q);
    for (size_t i = 0; i < n; i++) *rounded_to_zero |= LoadLane<int64_t>(q, i) == 0 && x[i] != 0;
    return saturated;
  }
  return QuantiseScaled64(x, n, std::ldexp(1.0, shift), LaneLimit(64, h), q, rounded_to_zero);
}

void DequantiseF32Wide(const void* q, size_t n, int32_t b, int h, float* x) {
  if (n == 0) return;  // q and x may be null
  if (b == kZeroBlockExponent) {
    std::memset(x, 0, n * sizeof(*x));
    return;
  }
  const int k = -(62 - h - b);
  if (k >= -1022 && k <= 1023) return DequantiseScaled64(q, n, std::ldexp(1.0, k), x);
  for (size_t i = 0; i < n; i++)
    x[i] = static_cast<float>(std::ldexp(static_cast<double>(LoadLane<int64_t>(q, i)), k));
}

int32_t BlockExponentF32(const float* x, size_t n) {
  return BlockExponentF32(BestSimd(), x, n);
}
int32_t BlockExponentF64(const double* x, size_t n) {
  return BlockExponentF64(BestSimd(), x, n);
}
namespace {

template <typename F, typename I>
bool RoundedToZeroT(const F* x, size_t n, const void* q) {
  const auto* lanes = static_cast<const uint8_t*>(q);
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    I v;
    std::memcpy(&v, lanes + i * sizeof(I), sizeof(I));
    any |= (v == 0) & (x[i] != 0);
  }
  return any;
}

}  // namespace

bool RoundedToZero(const float* x, size_t n, const void* q) {
#if defined(__x86_64__)
  // Four at a time on the baseline path: this runs on every float32
  // block a member sends.
  const auto* lanes = static_cast<const uint8_t*>(q);
  const __m128i zero_i = _mm_setzero_si128();
  const __m128 zero_f = _mm_setzero_ps();
  __m128i any = zero_i;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128i lane_zero =
        _mm_cmpeq_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes + 4 * i)), zero_i);
    const __m128i x_nonzero = _mm_castps_si128(_mm_cmpneq_ps(_mm_loadu_ps(x + i), zero_f));  // NaN too
    any = _mm_or_si128(any, _mm_and_si128(lane_zero, x_nonzero));
  }
  return _mm_movemask_epi8(any) != 0 || RoundedToZeroT<float, int32_t>(x + i, n - i, lanes + 4 * i);
#else
  return RoundedToZeroT<float, int32_t>(x, n, q);
#endif
}

bool RoundedToZero(const double* x, size_t n, const void* q) {
  return RoundedToZeroT<double, int64_t>(x, n, q);
}

bool HasZeroLane(const void* q, size_t n, size_t lane_size) {
  const auto* lanes = static_cast<const uint8_t*>(q);
  bool any = false;
  if (lane_size == 8) {
    for (size_t i = 0; i < n; i++) {
      uint64_t v;
      std::memcpy(&v, lanes + i * 8, 8);
      any |= v == 0;
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      uint32_t v;
      std::memcpy(&v, lanes + i * 4, 4);
      any |= v == 0;
    }
  }
  return any;
}

bool QuantiseF32(const float* x, size_t n, int32_t b, int h, void* q) {
  return QuantiseF32(BestSimd(), x, n, b, h, q);
}
void DequantiseF32(const void* q, size_t n, int32_t b, int h, float* x) {
  DequantiseF32(BestSimd(), q, n, b, h, x);
}
bool QuantiseF64(const double* x, size_t n, int32_t b, int h, void* q) {
  return QuantiseF64(BestSimd(), x, n, b, h, q);
}
void DequantiseF64(const void* q, size_t n, int32_t b, int h, double* x) {
  DequantiseF64(BestSimd(), q, n, b, h, x);
}

int64_t OrderedFromF64(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  if (u >> 63) u ^= 0x7FFFFFFFFFFFFFFFull;
  int64_t v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

double F64FromOrdered(int64_t v) {
  uint64_t u;
  std::memcpy(&u, &v, sizeof(u));
  if (u >> 63) u ^= 0x7FFFFFFFFFFFFFFFull;
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

float F16ToF32(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&bits, &f, sizeof(bits));
      bits |= sign;
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t exp = (bits >> 23) & 0xFF;
  uint32_t mant = bits & 0x7FFFFF;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 | (mant >> 13) : 0));
  int e = static_cast<int>(exp) - 127;
  if (e > 15) return static_cast<uint16_t>(sign | 0x7C00);  // overflow -> inf
  if (e >= -14) {
    // Normal half: 10 mantissa bits, round half to even on the 13 dropped.
    uint32_t m = mant | 0x800000;
    uint32_t half_bits = ((static_cast<uint32_t>(e + 15)) << 10) | ((m >> 13) & 0x3FF);
    uint32_t rest = m & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (half_bits & 1))) half_bits++;  // may carry into exp: correct
    return static_cast<uint16_t>(sign | half_bits);
  }
  if (e < -25) return sign;
  // Subnormal half: value = round(|f| * 2^24) ulps of 2^-24.
  float scaled = std::ldexp(std::fabs(f), 24);
  float r = std::nearbyint(scaled);
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
}

float Bf16ToF32(uint16_t b) {
  uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFF))
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace inc::client
