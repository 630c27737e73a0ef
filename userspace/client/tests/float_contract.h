// SPDX-License-Identifier: Apache-2.0
// The float-sum contract as tests check it (client/float_sum.h): inputs of
// every kind that matters (ordinary randn, a 1e-6..1e6 spread, inf/NaN at
// rank-dependent places, cancellation, values near the bottom of the range),
// the same on every rank from its rank number, and the per-element verdict:
// IEEE inf/NaN, or within (n-1)*u*sum|x_i| of the exact sum (+ n*eta below
// the normal range, as for any IEEE sum), with the exact sum carried as a
// long double pair. Shared by the host-stage unit test and the lab's
// inc-numerics-check.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/communicator.h"
#include "client/numerics.h"

namespace inc::client {

enum class Kind { kRandn, kWide, kSpecials, kCancel, kTiny, kZeros };

inline const char* KindName(Kind k) {
  switch (k) {
    case Kind::kRandn: return "randn";
    case Kind::kWide: return "wide 1e-6..1e6";
    case Kind::kSpecials: return "inf/nan";
    case Kind::kCancel: return "cancelling";
    case Kind::kTiny: return "tiny";
    case Kind::kZeros: return "exact zeros";
  }
  return "?";
}

// Rank r's values as doubles (exactly representable in t after Narrow).
inline std::vector<double> Inputs(Kind k, uint32_t r, uint32_t world, size_t n) {
  std::mt19937_64 g(1234 + r * 7919 + static_cast<int>(k) * 104729);
  std::normal_distribution<double> randn(0, 1);
  std::uniform_real_distribution<double> uni(0, 1);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; i++) {
    switch (k) {
      case Kind::kRandn: v[i] = randn(g); break;
      case Kind::kWide: v[i] = std::pow(10.0, -6 + 12 * uni(g)) * (uni(g) < 0.5 ? -1 : 1); break;
      case Kind::kSpecials:
        v[i] = randn(g);
        // Rank-dependent places: +inf alone, -inf alone, +inf and -inf
        // (NaN), NaN, and an inf in an otherwise tiny block.
        if (i % 97 == 5 && r == 1) v[i] = INFINITY;
        if (i % 97 == 11 && r == world - 1) v[i] = -INFINITY;
        if (i % 97 == 20) v[i] = r == 0 ? INFINITY : (r == 1 ? -INFINITY : v[i]);
        if (i % 131 == 7 && r == world / 2) v[i] = NAN;
        break;
      case Kind::kCancel: {
        // x on even ranks, -x on odd ones (plus a tiny rest on rank 0)
        // over a block whose maximum is large.
        std::mt19937_64 shared(99 + i);
        const double x = std::ldexp(1.0 + uni(shared), -30 + static_cast<int>(i % 40));
        v[i] = (r % 2 ? -x : x) + (r == 0 ? std::ldexp(1.0, -60) : 0.0);
        if (i % 256 == 0) v[i] = 1e3;
        break;
      }
      case Kind::kTiny: v[i] = std::ldexp(randn(g), -140 + static_cast<int>(i % 20)); break;
      case Kind::kZeros:
        // Elements that are 0 on every rank (the switch certifies an
        // all-zero element as an exact zero sum), and elements 0 on every
        // rank but the last, whose value ~2^-100 of the block's largest
        // rounds to lane 0 on 32- and 64-bit lanes alike: that rank must
        // flag its contribution, or the result would be 0.
        v[i] = randn(g);
        if (i % 3 == 0) v[i] = 0;
        if (i % 101 == 17) v[i] = r == world - 1 ? std::ldexp(1.0 + uni(g), -100) : 0.0;
        break;
    }
  }
  return v;
}

inline double Narrow(DataType t, double x) {
  switch (t) {
    case DataType::kFloat32: return static_cast<float>(x);
    case DataType::kFloat16: return F16ToF32(F32ToF16(static_cast<float>(x)));
    case DataType::kBFloat16: return Bf16ToF32(F32ToBf16(static_cast<float>(x)));
    default: return x;
  }
}

inline void Store(DataType t, double x, uint8_t* p) {
  if (t == DataType::kFloat32) {
    float f = static_cast<float>(x);
    std::memcpy(p, &f, 4);
  } else if (t == DataType::kFloat64) {
    std::memcpy(p, &x, 8);
  } else {
    uint16_t h = t == DataType::kFloat16 ? F32ToF16(static_cast<float>(x)) : F32ToBf16(static_cast<float>(x));
    std::memcpy(p, &h, 2);
  }
}

inline double Load(DataType t, const uint8_t* p) {
  if (t == DataType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (t == DataType::kFloat64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DataType::kFloat16 ? F16ToF32(h) : Bf16ToF32(h);
}

enum class Verdict { kCorrectlyRounded, kWithinBound, kViolation, kSpecialOk, kSpecialWrong };

// One element: xs = every rank's value, got = the result.
inline Verdict CheckElement(DataType t, const std::vector<double>& xs, double got, double* error = nullptr,
                            double* bound = nullptr) {
  const long double u = t == DataType::kFloat64    ? std::ldexp(1.0L, -53)
                        : t == DataType::kFloat16  ? std::ldexp(1.0L, -11)
                        : t == DataType::kBFloat16 ? std::ldexp(1.0L, -8)
                                                   : std::ldexp(1.0L, -24);
  const long double eta = t == DataType::kFloat64   ? std::ldexp(1.0L, -1075)
                          : t == DataType::kFloat16 ? std::ldexp(1.0L, -25)
                                                    : std::ldexp(1.0L, -150);
  bool nan = false, pinf = false, ninf = false;
  long double hi = 0, lo = 0, abs_sum = 0;  // the exact sum as hi + lo
  for (double x : xs) {
    if (std::isnan(x)) nan = true;
    if (std::isinf(x)) (x > 0 ? pinf : ninf) = true;
    if (!std::isfinite(x)) continue;
    const long double s = hi + x, bb = s - hi;
    lo += (hi - (s - bb)) + (x - bb);
    hi = s;
    abs_sum += std::fabs(static_cast<long double>(x));
  }
  if (nan || pinf || ninf) {
    const bool ok = (nan || (pinf && ninf)) ? std::isnan(got) : (std::isinf(got) && (got > 0) == pinf);
    return ok ? Verdict::kSpecialOk : Verdict::kSpecialWrong;
  }
  const long double exact = hi + lo;
  const double rounded = Narrow(t, static_cast<double>(exact));
  if (std::isinf(rounded))  // beyond the type's range: IEEE rounds it to inf
    return got == rounded ? Verdict::kSpecialOk : Verdict::kSpecialWrong;
  const long double err = std::fabs(static_cast<long double>(got) - exact);
  const long double lim = (xs.size() - 1) * u * abs_sum + xs.size() * eta;
  if (error) *error = static_cast<double>(err);
  if (bound) *bound = static_cast<double>(lim);
  if (got == rounded) return Verdict::kCorrectlyRounded;
  return err <= lim ? Verdict::kWithinBound : Verdict::kViolation;
}

struct ContractOutcome {
  size_t elements = 0, correctly_rounded = 0, violations = 0, special_mismatches = 0;
  std::string first_violation;
  void Add(Verdict v, size_t i) {
    elements++;
    if (v == Verdict::kCorrectlyRounded) correctly_rounded++;
    if (v == Verdict::kSpecialWrong && special_mismatches++ == 0)
      first_violation = "element " + std::to_string(i) + ": wrong IEEE special result";
    if (v == Verdict::kViolation && violations++ == 0)
      first_violation = "element " + std::to_string(i) + ": outside the error bound";
  }
};

}  // namespace inc::client
