#include "client/numerics.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace inc::client {
namespace {

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
  if (special) return 127;
  if (max_abs == 0) return kZeroBlockExponent;
  int e = std::ilogb(max_abs);
  if (e > 127) e = 127;
  if (e < -127) e = -127;
  return e;
}

template <typename F, typename I>
bool Quantise(const F* x, size_t n, int32_t b, int h, int total_bits, I* q) {
  // |x| < 2^(b+1) => |x * 2^(total_bits-2-h-b)| < 2^(total_bits-1-h). Scaling
  // by a power of two is exact in double; rounding to an integer is exact
  // too (above 2^52 every double already is one), so 64-bit lanes need no
  // wider type.
  const double scale = std::ldexp(1.0, total_bits - 2 - h - b);
  // Largest integer-valued double below 2^(total_bits-1-h) (2^k - 1 itself
  // is not a double when k > 53).
  const double limit = total_bits - 1 - h > 53 ? std::nextafter(std::ldexp(1.0, total_bits - 1 - h), 0.0)
                                               : std::ldexp(1.0, total_bits - 1 - h) - 1;
  bool saturated = false;
  for (size_t i = 0; i < n; i++) {
    double s = static_cast<double>(x[i]) * scale;
    if (!(s <= limit && s >= -limit)) {  // also NaN
      saturated = true;
      s = std::isnan(s) ? 0 : (s > 0 ? limit : -limit);
    }
    q[i] = static_cast<I>(std::nearbyint(s));  // round half to even
  }
  return saturated;
}

#if defined(__SSE2__)
// The per-element work of FP32 SUM runs on every byte a member sends and
// receives; these SSE2 paths (x86-64 baseline) do four lanes per step and give
// bit-identical results to the scalar code above.

// Largest magnitude of a float block from the bits: |x| orders like
// (bits & 0x7fffffff) as a non-negative integer, inf/NaN above every finite.
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
  for (; i < n; i++) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof(b));
    max_bits = std::max(max_bits, b & 0x7fffffffu);
  }
  if (max_bits >= 0x7f800000u) return 127;  // inf or NaN
  if (max_bits == 0) return kZeroBlockExponent;
  float m;
  std::memcpy(&m, &max_bits, sizeof(m));
  int e = std::ilogb(m);
  return std::max(-127, std::min(127, e));
}

// q = round_half_even(x * 2^e) when 2^e is a normal float: the product is
// then exact in float (or below 2^-126 and rounds to 0 either way), and
// cvtps2dq rounds with the current mode like nearbyint. Returns false when
// a lane would saturate (|s| > 2^(31-h) - 1) or is NaN: the caller redoes
// the block on the scalar path, which saturates exactly as before.
bool QuantiseF32Sse2(const float* x, size_t n, int e, int h, int32_t* q) {
  float scale_f;
  uint32_t scale_bits = static_cast<uint32_t>(e + 127) << 23;
  std::memcpy(&scale_f, &scale_bits, sizeof(scale_f));
  const __m128 scale = _mm_set1_ps(scale_f);
  // The scalar limit 2^(31-h) - 1 as a float test: exact up to 2^24; above,
  // no float lies between it and 2^(31-h), so the largest float below
  // 2^(31-h) is the same test.
  const float limit =
      31 - h > 24 ? std::nextafter(std::ldexp(1.0f, 31 - h), 0.0f) : std::ldexp(1.0f, 31 - h) - 1;
  const __m128 bound = _mm_set1_ps(limit);
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 bad = _mm_setzero_ps();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 s = _mm_mul_ps(_mm_loadu_ps(x + i), scale);
    // !(|s| <= limit) is also true for NaN.
    bad = _mm_or_ps(bad, _mm_cmpnle_ps(_mm_and_ps(s, abs_mask), bound));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm_cvtps_epi32(s));
  }
  if (_mm_movemask_ps(bad)) return false;
  for (; i < n; i++) {
    float s = x[i] * scale_f;
    if (!(std::fabs(s) <= limit)) return false;
    q[i] = static_cast<int32_t>(std::nearbyint(s));
  }
  return true;
}

// x = float(q * 2^-e): int32 -> double is exact, the scaling too (double
// range), and the one rounding to float matches the scalar path.
void DequantiseF32Sse2(const int32_t* q, size_t n, double unscale, float* x) {
  const __m128d u = _mm_set1_pd(unscale);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    __m128 lo = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(v), u));
    __m128 hi = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(_mm_srli_si128(v, 8)), u));
    _mm_storeu_ps(x + i, _mm_movelh_ps(lo, hi));
  }
  for (; i < n; i++) x[i] = static_cast<float>(static_cast<double>(q[i]) * unscale);
}
#endif

}  // namespace

int HeadroomBits(uint32_t world) {
  int h = 0;
  while ((uint64_t{1} << h) < world) h++;
  return h;
}

int32_t BlockExponentF32(const float* x, size_t n) {
#if defined(__SSE2__)
  return BlockExponentF32Sse2(x, n);
#else
  return BlockExponent(x, n);
#endif
}
int32_t BlockExponentF64(const double* x, size_t n) {
  return BlockExponent(x, n);
}

bool QuantiseF32(const float* x, size_t n, int32_t b, int h, int32_t* q) {
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(*q));
    return false;
  }
#if defined(__SSE2__)
  const int e = 30 - h - b;
  if (e >= -126 && e <= 127 && h <= 31 && QuantiseF32Sse2(x, n, e, h, q)) return false;
#endif
  return Quantise(x, n, b, h, 32, q);
}

void DequantiseF32(const int32_t* q, size_t n, int32_t b, int h, float* x) {
  if (b == kZeroBlockExponent) {
    std::memset(x, 0, n * sizeof(*x));
    return;
  }
  const double unscale = std::ldexp(1.0, -(30 - h - b));
#if defined(__SSE2__)
  DequantiseF32Sse2(q, n, unscale, x);
#else
  for (size_t i = 0; i < n; i++) x[i] = static_cast<float>(static_cast<double>(q[i]) * unscale);
#endif
}

bool QuantiseF64(const double* x, size_t n, int32_t b, int h, int64_t* q) {
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(*q));
    return false;
  }
  return Quantise(x, n, b, h, 64, q);
}

void DequantiseF64(const int64_t* q, size_t n, int32_t b, int h, double* x) {
  const double unscale = std::ldexp(1.0, -(62 - h - b));
  for (size_t i = 0; i < n; i++) x[i] = b == kZeroBlockExponent ? 0.0 : static_cast<double>(q[i]) * unscale;
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
