#include "client/numerics.h"

#include <cmath>
#include <cstring>
#include <limits>

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

}  // namespace

int HeadroomBits(uint32_t world) {
  int h = 0;
  while ((uint64_t{1} << h) < world) h++;
  return h;
}

int32_t BlockExponentF32(const float* x, size_t n) {
  return BlockExponent(x, n);
}
int32_t BlockExponentF64(const double* x, size_t n) {
  return BlockExponent(x, n);
}

bool QuantiseF32(const float* x, size_t n, int32_t b, int h, int32_t* q) {
  if (b == kZeroBlockExponent) {
    std::memset(q, 0, n * sizeof(*q));
    return false;
  }
  return Quantise(x, n, b, h, 32, q);
}

void DequantiseF32(const int32_t* q, size_t n, int32_t b, int h, float* x) {
  const double unscale = std::ldexp(1.0, -(30 - h - b));
  for (size_t i = 0; i < n; i++)
    x[i] = b == kZeroBlockExponent ? 0.0f : static_cast<float>(static_cast<double>(q[i]) * unscale);
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
