// SPDX-License-Identifier: Apache-2.0
// libinc unit tests: packet/window arithmetic, block fixed point, number
// mappings, result-frame validation, the block operation's codecs, the
// small float sums gathered in one packet and the engine's wait hook.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "client/block_op.h"
#include "client/communicator.h"
#include "client/engine.h"
#include "client/float_sum.h"
#include "client/gather_sum.h"
#include "client/numerics.h"
#include "client/protocol.h"
#include "client/tests/loopback_io.h"
#include "common/frame.h"

namespace inc::client {
namespace {

// Every op of the wire table has a name that parses back to it; the
// bitwise ones (and only they) are for integer types.
TEST(ReduceOps, NamesFromTheWireTableParseBackAndOnlyBitwiseOpsAreIntegerOnly) {
  struct Case {
    const char* name;
    ReduceOp op;
    uint8_t wire;
    bool integer_only;
  };
  const Case cases[] = {
      {"sum", ReduceOp::kSum, INC_OP_SUM, false}, {"min", ReduceOp::kMin, INC_OP_MIN, false},
      {"max", ReduceOp::kMax, INC_OP_MAX, false}, {"band", ReduceOp::kBand, INC_OP_BAND, true},
      {"bor", ReduceOp::kBor, INC_OP_BOR, true},  {"bxor", ReduceOp::kBxor, INC_OP_BXOR, true}};
  for (const Case& c : cases) {
    ReduceOp parsed{};
    ASSERT_TRUE(ParseReduceOp(c.name, &parsed)) << c.name;
    EXPECT_EQ(parsed, c.op) << c.name;
    EXPECT_STREQ(ReduceOpName(c.op), c.name);
    EXPECT_EQ(static_cast<int>(c.op), c.wire) << c.name;
    EXPECT_EQ(ReduceOpIntegerOnly(c.op), c.integer_only) << c.name;
    EXPECT_EQ(inc_op_bitwise(c.wire) != 0, c.integer_only) << c.name;
    EXPECT_TRUE(INC_OPS_ALL & (1u << c.wire)) << c.name;
  }
  ReduceOp unchanged = ReduceOp::kMax;
  EXPECT_FALSE(ParseReduceOp("prod", &unchanged));
  EXPECT_FALSE(ParseReduceOp("BAND", &unchanged));
  EXPECT_EQ(unchanged, ReduceOp::kMax);
  EXPECT_EQ(INC_OPS_ALL, 0x7eu) << "a new op needs a row in this table";
}

TEST(Chunking, ElemsPerPacketKeepsPayloadBytes) {
  EXPECT_EQ(ElemsPerPacket(240, 4), 240u);
  EXPECT_EQ(ElemsPerPacket(240, 8), 120u);
  EXPECT_EQ(ElemsPerPacket(506, 8), 253u);
}

TEST(Chunking, PacketCountCoversOddSizes) {
  EXPECT_EQ(PacketCount(0, 240), 1u);  // a barrier is still one message
  EXPECT_EQ(PacketCount(1, 240), 1u);
  EXPECT_EQ(PacketCount(240, 240), 1u);
  EXPECT_EQ(PacketCount(241, 240), 2u);
  EXPECT_EQ(PacketCount(16u << 20, 240), ((16u << 20) + 239) / 240);
}

TEST(Chunking, PacketElementsPartitionTheBufferExactly) {
  for (uint64_t count : {1ull, 7ull, 239ull, 240ull, 241ull, 1000ull, 4801ull}) {
    uint64_t covered = 0;
    for (uint64_t p = 0; p < PacketCount(count, 240); p++) {
      PacketRange r = PacketElements(p, count, 240);
      EXPECT_EQ(r.first, covered);
      EXPECT_GT(r.count, 0u);
      EXPECT_LE(r.count, 240u);
      covered += r.count;
    }
    EXPECT_EQ(covered, count);
  }
}

TEST(Window, NeverMoreThanPoolInFlightAndSlotReuseWaitsForResult) {
  const uint32_t pool = 4;
  EXPECT_TRUE(WindowAllows(3, 0, pool));
  EXPECT_FALSE(WindowAllows(4, 0, pool));  // message 4 reuses slot 0: needs message 0's result
  EXPECT_TRUE(WindowAllows(4, 1, pool));
  EXPECT_EQ(SlotOf(4, pool), SlotOf(0, pool));
  EXPECT_EQ(SlotOf(0xFFFFFFFFu, 256), 255);
}

TEST(FixedPoint, HeadroomIsCeilLog2World) {
  EXPECT_EQ(HeadroomBits(1), 0);
  EXPECT_EQ(HeadroomBits(2), 1);
  EXPECT_EQ(HeadroomBits(3), 2);
  EXPECT_EQ(HeadroomBits(4), 2);
  EXPECT_EQ(HeadroomBits(5), 3);
  EXPECT_EQ(HeadroomBits(64), 6);
}

TEST(FixedPoint, BlockExponentBoundsEveryElement) {
  float x[] = {0.5f, -3.0f, 1e-3f};
  int32_t b = BlockExponentF32(x, 3);
  EXPECT_EQ(b, 1);  // 3 < 2^2
  for (float v : x) EXPECT_LT(std::fabs(v), std::ldexp(1.0, b + 1));
  float zeros[4] = {};
  EXPECT_EQ(BlockExponentF32(zeros, 4), kZeroBlockExponent);
  float big[] = {3.0e38f};
  EXPECT_EQ(BlockExponentF32(big, 1), 127);
}

TEST(FixedPoint, QuantisationOfDyadicValuesIsExact) {
  std::vector<float> x = {0.25f, -1.75f, 1.5f, 0.0f, -0.5f, 1.0f};
  int h = HeadroomBits(8);
  int32_t b = BlockExponentF32(x.data(), x.size());
  std::vector<int32_t> q(x.size());
  EXPECT_FALSE(QuantiseF32(x.data(), x.size(), b, h, q.data()));
  std::vector<float> back(x.size());
  DequantiseF32(q.data(), q.size(), b, h, back.data());
  EXPECT_EQ(back, x);
}

TEST(FixedPoint, WorstCaseSumOfWorldContributionsDoesNotOverflow) {
  for (uint32_t world : {1u, 2u, 3u, 7u, 64u, 1000u}) {
    int h = HeadroomBits(world);
    float v = std::nextafter(2.0f, 0.0f);  // largest value below 2^(b+1) for b = 0
    int32_t q;
    QuantiseF32(&v, 1, 0, h, &q);
    int64_t sum = int64_t{q} * world;
    EXPECT_LE(sum, int64_t{INT32_MAX}) << world;
    float neg = -v;
    QuantiseF32(&neg, 1, 0, h, &q);
    EXPECT_GE(int64_t{q} * world, int64_t{INT32_MIN}) << world;
  }
}

TEST(FixedPoint, Int64LanesSaturateWithoutOverflowForAWorldOfOne) {
  double v = INFINITY;
  int64_t q;
  EXPECT_TRUE(QuantiseF64(&v, 1, 0, 0, &q));
  EXPECT_GT(q, int64_t{1} << 62);
  v = -INFINITY;
  EXPECT_TRUE(QuantiseF64(&v, 1, 0, 0, &q));
  EXPECT_LT(q, -(int64_t{1} << 62));
}

TEST(FixedPoint, SaturationIsReportedForValuesAboveTheAgreedExponent) {
  float v = 100.0f;
  int32_t q;
  EXPECT_TRUE(QuantiseF32(&v, 1, 0, 1, &q));  // 100 does not fit |x| < 2
  EXPECT_EQ(q, (1 << 30) - 1);
}

// References for the vectorised paths: the definitions in numerics.h
// computed in double, one element at a time.
template <typename F>
int32_t RefBlockExponent(const F* x, size_t n) {
  F m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return kNonFiniteBlockExponent;
    m = std::max(m, std::fabs(x[i]));
  }
  if (m == 0) return kZeroBlockExponent;
  // float32 exponents are clamped below at -127 (they travel in an int8
  // too); float64's keep their whole range.
  return sizeof(F) == 4 ? std::max(-127, std::ilogb(m)) : std::ilogb(m);
}

template <typename I>
constexpr int kLaneBits = static_cast<int>(8 * sizeof(I));

template <typename I, typename F>
std::vector<I> RefQuantise(const F* x, size_t n, int32_t b, int h, bool* saturated) {
  std::vector<I> q(n, 0);
  *saturated = false;
  if (b == kZeroBlockExponent) return q;
  const int bits = kLaneBits<I>;
  const double limit = bits - 1 - h > 53 ? std::nextafter(std::ldexp(1.0, bits - 1 - h), 0.0)
                                         : std::ldexp(1.0, bits - 1 - h) - 1;
  for (size_t i = 0; i < n; i++) {
    double s = std::ldexp(static_cast<double>(x[i]), bits - 2 - h - b);
    if (!(s <= limit && s >= -limit)) {
      *saturated = true;
      s = std::isnan(s) ? 0 : (s > 0 ? limit : -limit);
    }
    q[i] = static_cast<I>(std::nearbyint(s));
  }
  return q;
}

template <typename F, typename I>
F RefDequantise(I q, int32_t b, int h) {
  if (b == kZeroBlockExponent) return 0;
  return static_cast<F>(std::ldexp(static_cast<double>(q), -(kLaneBits<I> - 2 - h - b)));
}

std::vector<Simd> SupportedSimd() {
  std::vector<Simd> out;
  for (Simd s : {Simd::kScalar, Simd::kSse2, Simd::kAvx2, Simd::kAvx512})
    if (SimdSupported(s)) out.push_back(s);
  return out;
}

// Random values in [-2^spread, 2^spread] and now and then a special one.
template <typename F, size_t N>
std::vector<F> RandomBlock(std::mt19937& rng, size_t n, const F (&specials)[N]) {
  int spread = static_cast<int>(rng() % 60);
  std::vector<F> x(n);
  for (auto& v : x) {
    if (rng() % 50 == 0) {
      v = specials[rng() % N];
    } else {
      v = std::ldexp(static_cast<F>(static_cast<int32_t>(rng())) / static_cast<F>(2147483648.0),
                     static_cast<int>(rng() % (2 * spread + 1)) - spread);
    }
  }
  return x;
}

// Every path of BlockExponent, Quantise and Dequantise against the scalar
// definition: random blocks of every length up to 509 (vector tails), NaN,
// inf, subnormals, saturation, exponents whose scale leaves the float range,
// inputs at every alignment and wire lanes at odd byte offsets (a frame's
// payload).
// One name for the FP32 and FP64 entry points.
int32_t BlockExponent(Simd s, const float* x, size_t n) {
  return BlockExponentF32(s, x, n);
}
int32_t BlockExponent(Simd s, const double* x, size_t n) {
  return BlockExponentF64(s, x, n);
}
bool Quantise(Simd s, const float* x, size_t n, int32_t b, int h, void* q) {
  return QuantiseF32(s, x, n, b, h, q);
}
bool Quantise(Simd s, const double* x, size_t n, int32_t b, int h, void* q) {
  return QuantiseF64(s, x, n, b, h, q);
}
void Dequantise(Simd s, const void* q, size_t n, int32_t b, int h, float* x) {
  DequantiseF32(s, q, n, b, h, x);
}
void Dequantise(Simd s, const void* q, size_t n, int32_t b, int h, double* x) {
  DequantiseF64(s, q, n, b, h, x);
}

template <typename F, typename I, size_t N>
void ExpectEveryPathMatchesTheDefinition(const F (&specials)[N], std::initializer_list<int> headrooms,
                                         int rounds) {
  std::mt19937 rng(11);
  const std::vector<Simd> paths = SupportedSimd();
  for (int round = 0; round < rounds; round++) {
    const size_t n = round < 40 ? static_cast<size_t>(round) : 1 + rng() % 509;
    const std::vector<F> block = RandomBlock<F>(rng, n, specials);
    const size_t x_shift = rng() % 16, q_shift = rng() % 8;
    std::vector<F> x_buf(n + 16);
    std::copy(block.begin(), block.end(), x_buf.begin() + x_shift);
    const F* x = x_buf.data() + x_shift;
    std::vector<uint8_t> q_buf((n + 1) * sizeof(I));
    uint8_t* q = q_buf.data() + q_shift % sizeof(I);
    const int32_t own = RefBlockExponent(x, n);
    for (Simd path : paths) {
      SCOPED_TRACE(std::string(SimdName(path)) + " round " + std::to_string(round) + " n " +
                   std::to_string(n));
      ASSERT_EQ(BlockExponent(path, x, n), own);
      for (int h : headrooms) {
        // The agreed exponent is at least the block's own; sometimes below it
        // (saturation), sometimes far above (underflow to 0).
        // float64's whole exponent range: scales outside double's own.
        const int32_t lo = sizeof(F) == 4 ? -127 : -1074, hi = sizeof(F) == 4 ? 127 : 1023;
        for (int32_t b : {own, own + 1, own + 40, own - 3, lo, hi}) {
          if (own == kZeroBlockExponent && b != own) continue;
          if (b != kZeroBlockExponent) b = std::max(lo, std::min(hi, b));
          SCOPED_TRACE("h " + std::to_string(h) + " b " + std::to_string(b));
          bool want_sat;
          const std::vector<I> want = RefQuantise<I>(x, n, b, h, &want_sat);
          const bool sat = Quantise(path, x, n, b, h, q);
          ASSERT_EQ(sat, want_sat);
          ASSERT_TRUE(n == 0 || std::memcmp(q, want.data(), n * sizeof(I)) == 0);
          // Dequantise the lanes and, for scales outside what quantising
          // yields, random lanes of the whole range.
          std::vector<I> lanes = want;
          if (rng() % 2) {
            for (auto& v : lanes) v = static_cast<I>(static_cast<uint64_t>(rng()) << 32 | rng());
            if (n) lanes[0] = std::numeric_limits<I>::min();
            if (n > 1) lanes[1] = std::numeric_limits<I>::max();
          }
          if (n) std::memcpy(q, lanes.data(), n * sizeof(I));
          std::vector<F> back(n + 1);
          F* out = back.data() + (rng() % 2);
          Dequantise(path, q, n, b, h, out);
          for (size_t i = 0; i < n; i++) {
            F w = RefDequantise<F>(lanes[i], b, h);
            ASSERT_EQ(std::memcmp(&out[i], &w, sizeof(w)), 0) << "element " << i << " lane " << lanes[i];
          }
        }
      }
    }
  }
}

TEST(FixedPoint, VectorisedFloat32PathsMatchTheScalarDefinitionBitForBit) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1e-45f,
                            -1e-40f,
                            std::numeric_limits<float>::denorm_min(),
                            std::nextafter(std::numeric_limits<float>::min(), 0.0f),
                            1.1754944e-38f,
                            3.4e38f,
                            -3.4e38f,
                            std::numeric_limits<float>::max(),
                            INFINITY,
                            -INFINITY,
                            NAN,
                            -NAN,
                            0.5f,
                            1.5f,
                            2.5f,
                            -2.5f,
                            std::nextafter(2.0f, 0.0f),
                            8388607.5f,
                            1073741823.0f,
                            1073741824.0f};
  ExpectEveryPathMatchesTheDefinition<float, int32_t>(specials, {0, 1, 2, 6, 7, 8, 12, 24, 31}, 300);
}

TEST(FixedPoint, VectorisedFloat64PathsMatchTheScalarDefinitionBitForBit) {
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::denorm_min(),
                             -1e-310,
                             std::numeric_limits<double>::min(),
                             1e300,
                             -1e300,
                             std::ldexp(1.0, 127),
                             INFINITY,
                             -INFINITY,
                             NAN,
                             -NAN,
                             0.5,
                             1.5,
                             2.5,
                             -2.5,
                             std::nextafter(2.0, 0.0),
                             4503599627370495.5,
                             9007199254740993.0};
  ExpectEveryPathMatchesTheDefinition<double, int64_t>(specials, {0, 1, 2, 9, 10, 11, 12, 40, 63}, 150);
}

// The check behind a member's UNCERTIFIED flag: a nonzero value (NaN too)
// with lane 0, at any position (the vector path and its tail).
TEST(FixedPoint, RoundedToZeroFindsANonzeroValueWithLaneZeroAnywhere) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{385}}) {
    std::vector<float> x(n, 0.0f);
    std::vector<int32_t> q(n, 0);
    EXPECT_FALSE(RoundedToZero(x.data(), n, q.data())) << "all zero, n " << n;
    for (size_t i = 0; i < n; i++) {
      x[i] = i % 2 ? 1e-30f : -0.0f;
      q[i] = 0;
      EXPECT_EQ(RoundedToZero(x.data(), n, q.data()), i % 2 == 1) << "n " << n << " at " << i;
      q[i] = 5;
      EXPECT_FALSE(RoundedToZero(x.data(), n, q.data())) << "a nonzero lane, n " << n << " at " << i;
      x[i] = NAN;
      q[i] = 0;
      EXPECT_TRUE(RoundedToZero(x.data(), n, q.data())) << "NaN, n " << n << " at " << i;
      x[i] = 0.0f;
    }
  }
}

// float32 on 64-bit lanes (LaneChoice "64") is the float64 codec of the
// widened values, bit for bit, with the result rounded once more to float;
// and says when a nonzero value got lane 0.
TEST(FixedPoint, Float32OnSixtyFourBitLanesIsTheFloat64CodecOfTheWidenedValues) {
  std::mt19937 rng(5);
  std::normal_distribution<float> randn(0, 1);
  const float specials[] = {0.0f,   -0.0f,    std::numeric_limits<float>::denorm_min(),
                            1e-40f, INFINITY, -INFINITY,
                            NAN,    1.5f,     std::ldexp(1.0f, 127),
                            2.5f};
  for (int round = 0; round < 200; round++) {
    const size_t n = round < 20 ? static_cast<size_t>(round) : 1 + rng() % 400;
    std::vector<float> x(n);
    for (auto& v : x)
      v = rng() % 8 == 0 ? specials[rng() % std::size(specials)]
                         : std::ldexp(randn(rng), static_cast<int>(rng() % 120) - 60);
    const std::vector<double> wide(x.begin(), x.end());
    const int32_t own = BlockExponentF32(x.data(), n);
    for (int h : {0, 2, 3, 10}) {
      for (int32_t b : {own, own + 1, own + 70, own - 2, int32_t{-127}, int32_t{127}, kZeroBlockExponent}) {
        SCOPED_TRACE("round " + std::to_string(round) + " n " + std::to_string(n) + " h " +
                     std::to_string(h) + " b " + std::to_string(b));
        std::vector<int64_t> want(n + 1), got(n + 1);
        const bool want_sat = QuantiseF64(wide.data(), n, b, h, want.data());
        bool flushed = false;
        ASSERT_EQ(QuantiseF32Wide(x.data(), n, b, h, got.data(), &flushed), want_sat);
        ASSERT_EQ(got, want);
        ASSERT_EQ(flushed, RoundedToZero(wide.data(), n, want.data()));
        std::vector<double> back(n);
        std::vector<float> back32(n);
        DequantiseF64(want.data(), n, b, h, back.data());
        DequantiseF32Wide(want.data(), n, b, h, back32.data());
        for (size_t i = 0; i < n; i++) {
          const float w = static_cast<float>(back[i]);
          ASSERT_EQ(std::memcmp(&back32[i], &w, sizeof(w)), 0) << "element " << i;
        }
      }
    }
  }
}

// The switch adds int32 lanes; emulate that in any order and check that the
// dequantised result is bit-identical whatever the order, and close to the
// real sum.
TEST(FixedPoint, ResultIsBitIdenticalAcrossArrivalOrders) {
  const uint32_t world = 5;
  const size_t n = 240;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (auto& v : data)
    for (auto& x : v) x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
  int32_t b = kZeroBlockExponent;
  for (auto& v : data) b = std::max(b, BlockExponentF32(v.data(), n));
  int h = HeadroomBits(world);
  std::vector<std::vector<int32_t>> q(world, std::vector<int32_t>(n));
  for (uint32_t r = 0; r < world; r++) EXPECT_FALSE(QuantiseF32(data[r].data(), n, b, h, q[r].data()));
  std::vector<uint32_t> order(world);
  std::iota(order.begin(), order.end(), 0);
  std::vector<float> first;
  for (int perm = 0; perm < 20; perm++) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> acc(n, 0);
    for (uint32_t r : order)
      for (size_t i = 0; i < n; i++) acc[i] += q[r][i];
    std::vector<float> out(n);
    DequantiseF32(acc.data(), n, b, h, out.data());
    if (first.empty()) first = out;
    ASSERT_EQ(0, std::memcmp(first.data(), out.data(), n * sizeof(float))) << "order " << perm;
  }
  double scale = std::ldexp(1.0, b + 1);
  for (size_t i = 0; i < n; i++) {
    double exact = 0;
    for (uint32_t r = 0; r < world; r++) exact += data[r][i];
    // world roundings of half a quantum each, plus the float rounding.
    EXPECT_NEAR(first[i], exact, world * scale * std::ldexp(1.0, -(31 - h)) + std::fabs(exact) * 1e-7);
  }
}

TEST(FixedPoint, Float64UsesSixtyFourBitLanesExactly) {
  std::vector<double> x = {1.0 / 3, -2.5e-3, 12345.678, 0.0};
  int32_t b = BlockExponentF64(x.data(), x.size());
  int h = HeadroomBits(4);
  std::vector<int64_t> q(x.size());
  EXPECT_FALSE(QuantiseF64(x.data(), x.size(), b, h, q.data()));
  std::vector<double> back(x.size());
  DequantiseF64(q.data(), q.size(), b, h, back.data());
  for (size_t i = 0; i < x.size(); i++) EXPECT_NEAR(back[i], x[i], std::ldexp(1.0, b + 1 - (62 - h)));
  EXPECT_EQ(back[2], x[2]);  // 12345.678 needs fewer bits than the lane offers
}

TEST(Mapping, OrderedFloat64PreservesOrderAndRoundTrips) {
  std::vector<double> v = {-INFINITY, -1e300, -2.0, -1e-300, -0.0, 0.0, 1e-300, 3.0, 1e300, INFINITY};
  for (size_t i = 0; i + 1 < v.size(); i++) EXPECT_LT(OrderedFromF64(v[i]), OrderedFromF64(v[i + 1])) << i;
  for (double d : v) {
    double back = F64FromOrdered(OrderedFromF64(d));
    EXPECT_EQ(0, std::memcmp(&back, &d, sizeof(d)));
  }
}

TEST(Mapping, Float16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF)) continue;  // NaN payloads
    EXPECT_EQ(F32ToF16(F16ToF32(bits)), bits) << std::hex << h;
  }
}

TEST(Mapping, Float16NarrowingRoundsToNearestEven) {
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + std::ldexp(1.0f, -11))), 1.0f);  // halfway: to even
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(F32ToF16(70000.0f), 0x7C00);                                        // overflow to +inf
  EXPECT_EQ(F16ToF32(F32ToF16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
}

TEST(Mapping, BFloat16RoundTripsAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7F80) == 0x7F80 && (bits & 0x7F)) continue;
    EXPECT_EQ(F32ToBf16(Bf16ToF32(bits)), bits);
  }
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

// ---------------------------------------------------------- validation --

struct ResultFrameTest : ::testing::Test {
  ResultFilter want{0x800123, *Ipv4::Parse("10.0.0.1"), 7, 0xC0FFEE, 256};
  FrameSpec spec;
  std::vector<int32_t> data = {1, 2, 3};
  void SetUp() override {
    spec.src_mac = *Mac::Parse("02:00:00:00:00:01");
    spec.dst_mac = *Mac::Parse("02:00:00:00:00:02");
    spec.src_ip = *Ipv4::Parse("10.0.0.1");
    spec.dst_ip = *Ipv4::Parse("10.0.0.2");
    spec.dest_qpn = 0x800123;
    spec.inc.flags = INC_FLAG_RESULT;
    spec.inc.tree_id = 7;
    spec.inc.key = 0xC0FFEE;
    spec.inc.msg_id = 300;
    spec.inc.slot = 300 % 256;
    spec.inc.rank = INC_RANK_RESULT;
    spec.inc.count = 3;
    spec.payload = reinterpret_cast<const uint8_t*>(data.data());
    spec.payload_len = 12;
  }
  Reject Check(const std::vector<uint8_t>& frame) {
    auto p = ParseFrame(frame.data(), frame.size());
    if (!p.ok()) return Reject::kMalformed;
    return CheckResultFrame(*p, want);
  }
  Reject Build() { return Check(*BuildFrame(spec)); }
};

TEST_F(ResultFrameTest, AcceptsAGoodResult) {
  EXPECT_EQ(Build(), Reject::kNone);
}

TEST_F(ResultFrameTest, RejectsACorruptedIcrc) {
  auto f = *BuildFrame(spec);
  f[f.size() - 1] ^= 0x01;
  EXPECT_EQ(Check(f), Reject::kBadIcrc);
}

TEST_F(ResultFrameTest, RejectsAPayloadBitFlip) {
  auto f = *BuildFrame(spec);
  f[INC_OFF_PAYLOAD] ^= 0x80;
  EXPECT_EQ(Check(f), Reject::kBadIcrc);
}

TEST_F(ResultFrameTest, RejectsAnotherQpn) {
  spec.dest_qpn = 0x800124;
  EXPECT_EQ(Build(), Reject::kWrongQpn);
}

TEST_F(ResultFrameTest, RejectsAnotherSource) {
  spec.src_ip = *Ipv4::Parse("10.0.0.9");
  EXPECT_EQ(Build(), Reject::kWrongSource);
}

TEST_F(ResultFrameTest, RejectsAContributionWithoutResultFlag) {
  spec.inc.flags = 0;
  EXPECT_EQ(Build(), Reject::kNotResult);
}

TEST_F(ResultFrameTest, RejectsWrongTreeKeySlotVersion) {
  spec.inc.tree_id = 8;
  EXPECT_EQ(Build(), Reject::kWrongTree);
  spec.inc.tree_id = 7;
  spec.inc.key = 1;
  EXPECT_EQ(Build(), Reject::kBadKey);
  spec.inc.key = 0xC0FFEE;
  spec.inc.slot = 45;
  EXPECT_EQ(Build(), Reject::kBadSlot);
  spec.inc.slot = 44;
  spec.inc.version = 2;
  EXPECT_EQ(Build(), Reject::kBadVersion);
}

TEST_F(ResultFrameTest, RejectsCountThatDisagreesWithPayload) {
  spec.inc.count = 4;
  EXPECT_EQ(Build(), Reject::kMismatch);
}

TEST_F(ResultFrameTest, RejectsTruncatedFrame) {
  auto f = *BuildFrame(spec);
  f.resize(60);
  EXPECT_EQ(Check(f), Reject::kMalformed);
}

// ------------------------------------------------------ block operation --

ParsedFrame ResultFor(const IncHeader& h, const std::vector<uint8_t>& payload) {
  ParsedFrame f;
  f.inc = h;
  f.inc.flags = INC_FLAG_RESULT;
  f.payload = payload.data();
  f.payload_len = payload.size();
  return f;
}

TEST(BlockOperation, RawInt32CoversOddCountsAndPlacesResults) {
  const uint64_t count = 241;  // two packets: 240 + 1
  std::vector<int32_t> in(count), out(count, -1);
  std::iota(in.begin(), in.end(), 100);
  BlockSpec s;
  s.send = in.data();
  s.recv = out.data();
  s.count = count;
  BlockOperation op(s);
  ASSERT_EQ(op.NumMessages(), 2u);
  std::vector<uint8_t> payload(INC_MAX_PAYLOAD_BYTES);
  for (uint64_t i = 0; i < 2; i++) {
    IncHeader h;
    size_t n = *op.Build(i, &h, payload.data(), payload.size());
    EXPECT_EQ(n, h.count * 4u);
    EXPECT_EQ(h.count, i == 0 ? 240 : 1);
    std::vector<uint8_t> p(payload.begin(), payload.begin() + n);
    EXPECT_EQ(op.Accept(i, ResultFor(h, p)), Reject::kNone);
  }
  EXPECT_EQ(out, in);
}

TEST(BlockOperation, RejectsResultWithWrongCountOrCollective) {
  std::vector<int32_t> in(10, 1), out(10);
  BlockSpec s;
  s.send = in.data();
  s.recv = out.data();
  s.count = 10;
  BlockOperation op(s);
  IncHeader h;
  std::vector<uint8_t> payload(40);
  ASSERT_TRUE(op.Build(0, &h, payload.data(), payload.size()).ok());
  IncHeader bad = h;
  bad.count = 9;
  EXPECT_EQ(op.Accept(0, ResultFor(bad, std::vector<uint8_t>(36))), Reject::kMismatch);
  bad = h;
  bad.collective = INC_COLL_BROADCAST;
  EXPECT_EQ(op.Accept(0, ResultFor(bad, payload)), Reject::kMismatch);
}

TEST(BlockOperation, FixedF32SumOfSimulatedSwitchMatchesExactSum) {
  // Two "members" quantise with the agreed exponents; the test adds the
  // lanes as the switch would and lets the operation dequantise.
  const uint64_t count = 500;
  std::vector<float> a(count), b(count), out(count);
  for (uint64_t i = 0; i < count; i++) {
    a[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
    b[i] = static_cast<float>(i % 7) * 0.5f;
  }
  uint32_t per = ElemsPerPacket(240, 4);
  std::vector<int32_t> exps(PacketCount(count, per));
  for (size_t p = 0; p < exps.size(); p++) {
    PacketRange r = PacketElements(p, count, per);
    exps[p] = std::max(BlockExponentF32(a.data() + r.first, r.count),
                       BlockExponentF32(b.data() + r.first, r.count));
  }
  BlockSpec s;
  s.wire_dtype = INC_DTYPE_FP32;
  s.codec = Codec::kFixedF32;
  s.exponents = exps.data();
  s.headroom = HeadroomBits(2);
  s.count = count;
  BlockSpec sb = s;
  s.send = a.data();
  s.recv = out.data();
  sb.send = b.data();
  BlockOperation opa(s), opb(sb);
  for (uint64_t i = 0; i < opa.NumMessages(); i++) {
    IncHeader ha, hb;
    std::vector<uint8_t> pa(INC_MAX_PAYLOAD_BYTES), pb(INC_MAX_PAYLOAD_BYTES);
    size_t na = *opa.Build(i, &ha, pa.data(), pa.size());
    size_t nb = *opb.Build(i, &hb, pb.data(), pb.size());
    ASSERT_EQ(na, nb);
    ASSERT_EQ(ha.exponent, hb.exponent);
    std::vector<uint8_t> sum(na);
    for (size_t k = 0; k < na; k += 4) {
      int32_t x, y;
      std::memcpy(&x, &pa[k], 4);
      std::memcpy(&y, &pb[k], 4);
      int32_t z = x + y;
      std::memcpy(&sum[k], &z, 4);
    }
    EXPECT_EQ(opa.Accept(i, ResultFor(ha, sum)), Reject::kNone);
  }
  for (uint64_t i = 0; i < count; i++) EXPECT_EQ(out[i], a[i] + b[i]) << i;
}

TEST(BlockOperation, EmptyContributionsForBroadcastNonRootAndBarrier) {
  std::vector<int32_t> out(5, 0);
  BlockSpec s;
  s.collective = INC_COLL_BROADCAST;
  s.send_data = false;
  s.recv = out.data();
  s.count = 5;
  BlockOperation op(s);
  IncHeader h;
  std::vector<uint8_t> payload(64);
  EXPECT_EQ(*op.Build(0, &h, payload.data(), payload.size()), 0u);
  EXPECT_EQ(h.count, 0);
  BlockSpec bar;
  bar.collective = INC_COLL_BARRIER;
  bar.count = 0;
  bar.send_data = false;
  bar.recv_data = false;
  BlockOperation barrier(bar);
  EXPECT_EQ(barrier.NumMessages(), 1u);
  EXPECT_EQ(*barrier.Build(0, &h, payload.data(), payload.size()), 0u);
  EXPECT_EQ(barrier.Accept(0, ResultFor(h, {})), Reject::kNone);
}

TEST(BlockOperation, BuildRefusesAPayloadLargerThanTheFrameHolds) {
  std::vector<int32_t> in(240, 1);
  BlockSpec s;
  s.send = in.data();
  s.count = in.size();
  BlockOperation op(s);
  IncHeader h;
  std::vector<uint8_t> payload(960);
  EXPECT_FALSE(op.Build(0, &h, payload.data(), 956).ok());
  EXPECT_EQ(*op.Build(0, &h, payload.data(), 960), 960u);
}

// ------------------------------------------------------------- engine --

// The engine's whole path on real frames: the operation writes its lanes
// straight into the TX frame (at the payload's offset 98, not 4-aligned),
// the frame's headers and ICRC go around them, and results dequantise
// straight from the received frame. A world of one gets back
// Dequantise(Quantise(x)) for every element, tails included.
struct EngineLoopbackCase {
  const char* name;
  Codec codec;
  uint8_t wire_dtype;
  uint64_t count;
  uint32_t elems4;
};

class EngineLoopback : public ::testing::TestWithParam<EngineLoopbackCase> {};

TEST_P(EngineLoopback, ResultsMatchTheCodecElementForElement) {
  const EngineLoopbackCase& c = GetParam();
  EngineConfig ec;
  ec.member_ip = *Ipv4::Parse("10.0.0.2");
  ec.member_qpn = 0x800123;
  ec.switch_ip = *Ipv4::Parse("10.0.0.1");
  ec.switch_qpn = 0x100;
  ec.tree_id = 7;
  ec.key = 0xC0FFEE;
  ec.pool_size = 16;
  ec.elems_per_packet = c.elems4;
  ec.first_msg_id = 77;
  ec.timeout = std::chrono::milliseconds(20);
  ec.max_retries = 1;
  LoopbackIo io(ec.first_msg_id, ec.member_qpn);
  Engine engine(&io, ec);
  const size_t esize = inc_dtype_size(c.wire_dtype);
  const uint32_t per = ElemsPerPacket(c.elems4, esize);
  std::mt19937 rng(5);
  std::vector<uint8_t> in(c.count * esize), out(c.count * esize, 0xAB), want(c.count * esize);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  std::vector<int32_t> exps(PacketCount(c.count, per));
  BlockSpec s;
  s.wire_dtype = c.wire_dtype;
  s.codec = c.codec;
  s.count = c.count;
  s.elems4 = c.elems4;
  s.send = in.data();
  s.recv = out.data();
  s.headroom = 0;
  s.exponents = exps.data();
  if (c.codec == Codec::kFixedF32) {
    auto* x = reinterpret_cast<float*>(in.data());
    for (uint64_t i = 0; i < c.count; i++)
      x[i] = std::ldexp(static_cast<float>(rng() % 2001) - 1000, rng() % 20);
  }
  std::vector<int32_t> lanes(per);
  for (size_t p = 0; p < exps.size(); p++) {
    PacketRange r = PacketElements(p, c.count, per);
    if (c.codec == Codec::kFixedF32) {
      const float* x = reinterpret_cast<const float*>(in.data()) + r.first;
      exps[p] = BlockExponentF32(x, r.count);
      QuantiseF32(x, r.count, exps[p], 0, lanes.data());
      DequantiseF32(lanes.data(), r.count, exps[p], 0, reinterpret_cast<float*>(want.data()) + r.first);
    }
  }
  if (c.codec == Codec::kRaw) want = in;
  BlockOperation op(s);
  Status st = engine.Run(&op);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(io.malformed(), 0u);
  EXPECT_EQ(io.sent(), exps.size());
  EXPECT_EQ(engine.counters().retransmissions, 0u);
  EXPECT_EQ(out, want);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, EngineLoopback,
    ::testing::Values(
        EngineLoopbackCase{"Fp32SumOddTail", Codec::kFixedF32, INC_DTYPE_FP32, 5 * 240 + 17, 240},
        EngineLoopbackCase{"Fp32SumLargeFrames", Codec::kFixedF32, INC_DTYPE_FP32, 3 * 768 + 1, 768},
        EngineLoopbackCase{"Int32Raw", Codec::kRaw, INC_DTYPE_INT32, 1000, 240},
        EngineLoopbackCase{"Int64Raw", Codec::kRaw, INC_DTYPE_INT64, 333, 240}),
    [](const ::testing::TestParamInfo<EngineLoopbackCase>& info) { return std::string(info.param.name); });
// ------------------------------------------------------------ gather sum --

TEST(GatherSum, FitsWhenEveryRanksElementsFillAtMostOnePacket) {
  for (uint32_t elems4 : {60u, 240u, 768u})
    for (uint32_t world = 1; world <= 8; world++)
      for (size_t esize : {size_t{2}, size_t{4}, size_t{8}}) {
        SCOPED_TRACE(::testing::Message() << "elems4 " << elems4 << " world " << world << " esize " << esize);
        const uint64_t max = size_t{elems4} * 4 / (world * esize);
        ASSERT_GT(max, 1u);
        EXPECT_TRUE(GatherSumFits(world, max - 1, esize, elems4));
        EXPECT_TRUE(GatherSumFits(world, max, esize, elems4));
        EXPECT_FALSE(GatherSumFits(world, max + 1, esize, elems4));
        EXPECT_FALSE(GatherSumFits(world, 0, esize, elems4));
        EXPECT_LE(GatherSumLanes(world, max, esize), elems4);
      }
  EXPECT_FALSE(GatherSumFits(4, uint64_t{1} << 62, 8, 768));  // no wrap-around
}

// Element bytes of a float type from a double (16-bit types through float).
std::vector<uint8_t> Encode(DataType t, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * DataTypeSize(t));
  for (size_t i = 0; i < v.size(); i++) {
    uint8_t* o = out.data() + i * DataTypeSize(t);
    float f = static_cast<float>(v[i]);
    uint16_t h = t == DataType::kFloat16 ? F32ToF16(f) : F32ToBf16(f);
    switch (t) {
      case DataType::kFloat32: std::memcpy(o, &f, 4); break;
      case DataType::kFloat64: std::memcpy(o, &v[i], 8); break;
      default: std::memcpy(o, &h, 2); break;
    }
  }
  return out;
}

double Decode(DataType t, const uint8_t* p) {
  float f;
  double d;
  uint16_t h;
  switch (t) {
    case DataType::kFloat32: std::memcpy(&f, p, 4); return f;
    case DataType::kFloat64: std::memcpy(&d, p, 8); return d;
    default: std::memcpy(&h, p, 2); return t == DataType::kFloat16 ? F16ToF32(h) : Bf16ToF32(h);
  }
}

// The definition of the result: element i of every rank's input, rank 0
// first, added in double; rounded to float32 (and narrowed to nearest even
// for 16-bit types) or kept as a double.
// The exact sum of finite doubles rounded once (to nearest, ties to even)
// to the format of t, by big-integer arithmetic independent of the
// library's floating-point code: every x = m * 2^e with a 53-bit integer m,
// all aligned to the smallest e and added as one signed big integer.
double ExactRoundedSum(DataType t, const std::vector<double>& xs) {
  int p = 24, emin = -126, emax = 127;
  if (t == DataType::kFloat64) p = 53, emin = -1022, emax = 1023;
  if (t == DataType::kFloat16) p = 11, emin = -14, emax = 15;
  if (t == DataType::kBFloat16) p = 8;
  std::vector<std::pair<int64_t, int>> terms;  // m, e
  int e0 = INT32_MAX;
  for (double x : xs) {
    if (x == 0) continue;
    int e;
    const double f = std::frexp(x, &e);
    terms.push_back({static_cast<int64_t>(std::ldexp(f, 53)), e - 53});
    e0 = std::min(e0, e - 53);
  }
  if (terms.empty()) return 0.0;  // (the sign of a zero sum is checked elsewhere)
  // Two's complement big integer, 32-bit limbs, little-endian.
  std::vector<uint32_t> n(2200 / 32 + 8, 0);
  auto add_shifted = [&](int64_t m, int shift) {
    const bool neg = m < 0;
    uint64_t a = static_cast<uint64_t>(neg ? -m : m);
    std::vector<uint32_t> v(n.size(), 0);
    const int limb = shift / 32, bit = shift % 32;
    unsigned __int128 w = static_cast<unsigned __int128>(a) << bit;
    for (int k = 0; k < 4 && limb + k < static_cast<int>(v.size()); k++)
      v[limb + k] = static_cast<uint32_t>(w >> (32 * k));
    if (neg) {  // two's complement of v
      uint64_t carry = 1;
      for (auto& l : v) {
        uint64_t x = uint64_t{static_cast<uint32_t>(~l)} + carry;
        l = static_cast<uint32_t>(x);
        carry = x >> 32;
      }
    }
    uint64_t carry = 0;
    for (size_t k = 0; k < n.size(); k++) {
      uint64_t x = uint64_t{n[k]} + v[k] + carry;
      n[k] = static_cast<uint32_t>(x);
      carry = x >> 32;
    }
  };
  for (auto [m, e] : terms) add_shifted(m, e - e0);
  const bool neg = n.back() >> 31;
  if (neg) {
    uint64_t carry = 1;
    for (auto& l : n) {
      uint64_t x = uint64_t{static_cast<uint32_t>(~l)} + carry;
      l = static_cast<uint32_t>(x);
      carry = x >> 32;
    }
  }
  auto bit_at = [&](int i) { return i < 0 ? 0 : (n[i / 32] >> (i % 32)) & 1; };
  int top = -1;
  for (int i = static_cast<int>(n.size()) * 32 - 1; i >= 0; i--)
    if (bit_at(i)) {
      top = i;
      break;
    }
  if (top < 0) return 0.0;
  int e = top + e0;                  // value in [2^e, 2^(e+1))
  if (e < emin) e = emin;            // subnormal: a fixed quantum
  const int lsb = e - (p - 1) - e0;  // bit index of the kept quantum
  uint64_t m = 0;
  for (int i = top; i >= std::max(lsb, 0); i--) m = (m << 1) | bit_at(i);
  if (lsb > 0) {
    const int half = bit_at(lsb - 1);
    bool sticky = false;
    for (int i = lsb - 2; i >= 0 && !sticky; i--) sticky = bit_at(i);
    if (half && (sticky || (m & 1))) m++;
  } else {
    m <<= -lsb;
  }
  double v = std::ldexp(static_cast<double>(m), e - (p - 1));
  const double max = std::ldexp(2.0 - std::ldexp(1.0, 1 - p), emax);
  if (v > max) v = INFINITY;
  return neg ? -v : v;
}

// What SumGathered promises for one element: IEEE inf/NaN, else the exact
// sum rounded once (world <= 2) or within (world-1)*u*sum|x| (+ world * eta
// below the normal range).
::testing::AssertionResult SumIsRight(DataType t, const std::vector<double>& xs, double got) {
  bool nan = false, pinf = false, ninf = false;
  long double abs_sum = 0;
  for (double x : xs) {
    nan |= std::isnan(x);
    pinf |= std::isinf(x) && x > 0;
    ninf |= std::isinf(x) && x < 0;
    if (std::isfinite(x)) abs_sum += std::fabs(static_cast<long double>(x));
  }
  if (nan || (pinf && ninf))
    return std::isnan(got) ? ::testing::AssertionSuccess()
                           : ::testing::AssertionFailure() << got << " is not NaN";
  if (pinf || ninf)
    return std::isinf(got) && (got > 0) == pinf ? ::testing::AssertionSuccess()
                                                : ::testing::AssertionFailure() << got << " is not the inf";
  const double want = ExactRoundedSum(t, xs);
  if (got == want) return ::testing::AssertionSuccess();
  if (xs.size() <= 2 || std::isinf(want))
    return ::testing::AssertionFailure() << "got " << got << ", the correctly rounded sum is " << want;
  const long double u = t == DataType::kFloat64    ? std::ldexp(1.0L, -53)
                        : t == DataType::kFloat16  ? std::ldexp(1.0L, -11)
                        : t == DataType::kBFloat16 ? std::ldexp(1.0L, -8)
                                                   : std::ldexp(1.0L, -24);
  const long double eta = t == DataType::kFloat64   ? std::ldexp(1.0L, -1075)
                          : t == DataType::kFloat16 ? std::ldexp(1.0L, -25)
                                                    : std::ldexp(1.0L, -150);
  // want is the exact sum within half an ulp; the bound is checked against it
  // with that half ulp added.
  const long double err = std::fabs(static_cast<long double>(got) - want);
  const long double bound =
      (xs.size() - 1) * u * abs_sum + xs.size() * eta + u * std::fabs(static_cast<long double>(want));
  if (err <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", exact about " << want << ", error "
                                       << static_cast<double>(err) << " > " << static_cast<double>(bound);
}

// One gather-sum collective of in.size() ranks as libinc runs it: every
// rank's contribution is built by the raw INT32 SUM block operation, a
// simulated switch adds the lanes in a random arrival order (64-bit
// accumulator, as the data path), every rank accepts the result and adds the
// gathered values. Fails the test if the collective would take more than
// one message or if any partial sum of a lane left int32 (the switch would
// flag OVERFLOW; a leaf's partial in a two-level tree is such a partial).
std::vector<std::vector<uint8_t>> GatherSumThroughSwitch(DataType t,
                                                         const std::vector<std::vector<uint8_t>>& in,
                                                         uint64_t count, uint32_t elems4, std::mt19937& rng) {
  const uint32_t world = static_cast<uint32_t>(in.size());
  const size_t es = DataTypeSize(t);
  const size_t lanes = GatherSumLanes(world, count, es);
  std::vector<std::vector<int32_t>> mine(world, std::vector<int32_t>(lanes)), all(world);
  std::vector<std::unique_ptr<BlockOperation>> ops;
  std::vector<std::vector<uint8_t>> payloads(world, std::vector<uint8_t>(size_t{elems4} * 4));
  IncHeader h;
  for (uint32_t r = 0; r < world; r++) {
    GatherSumContribution(r, world, count, es, in[r].data(), mine[r].data());
    all[r].assign(lanes, -1);
    BlockSpec s;
    s.collective = INC_COLL_ALLREDUCE;
    s.wire_dtype = INC_DTYPE_INT32;
    s.op = INC_OP_SUM;
    s.count = lanes;
    s.elems4 = elems4;
    s.send = mine[r].data();
    s.recv = all[r].data();
    ops.push_back(std::make_unique<BlockOperation>(s));
    EXPECT_EQ(ops[r]->NumMessages(), 1u);
    auto built = ops[r]->Build(0, &h, payloads[r].data(), payloads[r].size());
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    EXPECT_EQ(built.ok() ? *built : 0, lanes * 4);
  }
  std::vector<uint32_t> order(world);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint8_t> result(lanes * 4);
  for (size_t k = 0; k < lanes; k++) {
    int64_t acc = 0;
    for (uint32_t r : order) {
      int32_t x;
      std::memcpy(&x, payloads[r].data() + k * 4, 4);
      acc += x;
      EXPECT_TRUE(acc >= INT32_MIN && acc <= INT32_MAX) << "lane " << k << " overflows";
    }
    auto lane = static_cast<int32_t>(acc);
    std::memcpy(result.data() + k * 4, &lane, 4);
  }
  std::vector<std::vector<uint8_t>> out(world, std::vector<uint8_t>(count * es));
  for (uint32_t r = 0; r < world; r++) {
    EXPECT_EQ(ops[r]->Accept(0, ResultFor(h, result)), Reject::kNone);
    GatherSumAdd(t, world, count, all[r].data(), out[r].data());
  }
  return out;
}

// Random element bytes: mostly values of mixed sign over a spread of
// magnitudes, some arbitrary bit patterns (NaNs, infinities, subnormals,
// negative zeros).
std::vector<uint8_t> RandomElements(DataType t, uint64_t count, std::mt19937& rng) {
  const size_t es = DataTypeSize(t);
  std::vector<uint8_t> out(count * es);
  for (uint64_t i = 0; i < count; i++) {
    if (rng() % 8 == 0) {
      uint64_t bits = (uint64_t{rng()} << 32) | rng();
      std::memcpy(out.data() + i * es, &bits, es);
    } else {
      double v = std::ldexp(static_cast<double>(static_cast<int32_t>(rng())) / 2147483648.0,
                            static_cast<int>(rng() % 41) - 20);
      std::vector<uint8_t> e = Encode(t, {v});
      std::memcpy(out.data() + i * es, e.data(), es);
    }
  }
  return out;
}

struct GatherTypeCase {
  const char* name;
  DataType type;
};

TEST(GatherSum, EveryRankGetsTheSameCorrectSumAtTheThreshold) {
  const GatherTypeCase kTypes[] = {{"float32", DataType::kFloat32},
                                   {"float64", DataType::kFloat64},
                                   {"float16", DataType::kFloat16},
                                   {"bfloat16", DataType::kBFloat16}};
  std::mt19937 rng(29);
  for (const auto& tc : kTypes)
    for (uint32_t elems4 : {240u, 768u})
      for (uint32_t world = 1; world <= 8; world++) {
        const size_t es = DataTypeSize(tc.type);
        const uint64_t max = size_t{elems4} * 4 / (world * es);
        ASSERT_FALSE(GatherSumFits(world, max + 1, es, elems4)) << tc.name;
        for (uint64_t count : {uint64_t{1}, max - 1, max}) {
          SCOPED_TRACE(::testing::Message()
                       << tc.name << " elems4 " << elems4 << " world " << world << " count " << count);
          ASSERT_TRUE(GatherSumFits(world, count, es, elems4));
          std::vector<std::vector<uint8_t>> in(world);
          for (auto& v : in) v = RandomElements(tc.type, count, rng);
          auto out = GatherSumThroughSwitch(tc.type, in, count, elems4, rng);
          for (uint32_t r = 1; r < world; r++) ASSERT_EQ(out[r], out[0]) << "rank " << r;
          for (uint64_t i = 0; i < count; i++) {
            std::vector<double> xs;
            for (uint32_t r = 0; r < world; r++) xs.push_back(Decode(tc.type, in[r].data() + i * es));
            ASSERT_TRUE(SumIsRight(tc.type, xs, Decode(tc.type, out[0].data() + i * es))) << "element " << i;
          }
        }
      }
}

struct GatherSpecialCase {
  const char* name;
  DataType type;
  std::vector<double> ranks;  // element 0 of rank 0, 1, ...
  double want;                // NaN: any NaN
};

TEST(GatherSum, SpecialValuesFollowIeeeAndFiniteSumsAreRoundedOnce) {
  const double inf = INFINITY, nan = NAN;
  const double f32_min_sub = std::ldexp(1.0, -149), f16_min_sub = std::ldexp(1.0, -24);
  const GatherSpecialCase kCases[] = {
      {"negative zeros stay negative", DataType::kFloat32, {-0.0, -0.0, -0.0}, -0.0},
      {"one positive zero makes the zero positive", DataType::kFloat32, {-0.0, 0.0, -0.0}, 0.0},
      {"infinity absorbs finite values", DataType::kFloat32, {1.0, inf, -3.0}, inf},
      {"opposite infinities give NaN", DataType::kFloat32, {inf, 2.0, -inf}, nan},
      {"NaN propagates", DataType::kFloat32, {1.0, nan, 2.0, 3.0}, nan},
      {"subnormals add exactly",
       DataType::kFloat32,
       {f32_min_sub, f32_min_sub, f32_min_sub},
       3 * f32_min_sub},
      {"a total above FLT_MAX rounds to infinity", DataType::kFloat32, {FLT_MAX, FLT_MAX}, inf},
      {"partial sums above FLT_MAX do not overflow",
       DataType::kFloat32,
       {FLT_MAX, FLT_MAX, -FLT_MAX},
       FLT_MAX},
      {"small terms add up before the one rounding",
       DataType::kFloat32,
       {1.0, 0x1p-24, 0x1p-24},
       1 + 0x1p-23},
      {"a cancellation keeps the small term (1)", DataType::kFloat32, {1e30, -1e30, 1.0}, 1.0},
      {"a cancellation keeps the small term (2)", DataType::kFloat32, {1e30, 1.0, -1e30}, 1.0},
      {"terms are rounded once (a tie broken by a term below float64's precision)",
       DataType::kFloat32,
       {1.0, 0x1p-24, 0x1p-80},
       1.0 + 0x1p-23},
      {"world of one returns the input", DataType::kFloat32, {-0x1.fffffep-3}, -0x1.fffffep-3},
      {"float64 negative zeros stay negative", DataType::kFloat64, {-0.0, -0.0}, -0.0},
      {"float64 subnormals add exactly", DataType::kFloat64, {0x1p-1074, 0x1p-1074}, 0x1p-1073},
      {"float64 overflow is infinity", DataType::kFloat64, {DBL_MAX, DBL_MAX, 1.0}, inf},
      {"float64 NaN propagates", DataType::kFloat64, {nan, -inf}, nan},
      {"float64 a cancellation keeps the small term", DataType::kFloat64, {1e300, 1.0, -1e300}, 1.0},
      {"float64 partial sums above DBL_MAX do not overflow",
       DataType::kFloat64,
       {DBL_MAX, DBL_MAX, -DBL_MAX},
       DBL_MAX},
      {"float64 two terms are rounded once",
       DataType::kFloat64,
       {1.0 + 0x1p-52, 0x1p-53 + 0x1p-110},
       1.0 + 0x1p-51},
      {"float16 subnormals add exactly",
       DataType::kFloat16,
       {f16_min_sub, f16_min_sub, f16_min_sub},
       3 * f16_min_sub},
      {"float16 above 65504 is infinity", DataType::kFloat16, {65504.0, 32.0}, inf},
      {"float16 terms are rounded once (no double rounding through float32)",
       DataType::kFloat16,
       {1024.0, 0.5, 0x1p-24},
       1025.0},
      {"float16 negative zeros stay negative", DataType::kFloat16, {-0.0, -0.0, -0.0, -0.0}, -0.0},
      {"float16 NaN propagates", DataType::kFloat16, {nan, 1.0}, nan},
      {"bfloat16 terms below its precision add up first",
       DataType::kBFloat16,
       {1.0, 0x1p-8, 0x1p-8},
       1 + 0x1p-7},
      {"bfloat16 opposite infinities give NaN", DataType::kBFloat16, {-inf, inf}, nan},
  };
  std::mt19937 rng(3);
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    const uint32_t world = static_cast<uint32_t>(c.ranks.size());
    std::vector<std::vector<uint8_t>> in;
    for (double v : c.ranks) in.push_back(Encode(c.type, {v}));
    auto out = GatherSumThroughSwitch(c.type, in, 1, 240, rng);
    for (uint32_t r = 1; r < world; r++) EXPECT_EQ(out[r], out[0]) << "rank " << r;
    const double got = Decode(c.type, out[0].data());
    if (std::isnan(c.want)) {
      EXPECT_TRUE(std::isnan(got)) << got;
    } else {
      EXPECT_EQ(got, c.want);
      EXPECT_EQ(std::signbit(got), std::signbit(c.want));
    }
  }
}

TEST(ExponentGuesses, AGuessIsUsedSevenTimesThenRefreshedAndForgottenOnAMiss) {
  ExponentGuesses g;
  EXPECT_EQ(g.Use(DataType::kFloat32, DataType::kFloat32, 100), nullptr) << "nothing stored yet";
  g.Store(DataType::kFloat32, DataType::kFloat32, 100, {3, 4});
  EXPECT_EQ(g.Use(DataType::kFloat64, DataType::kFloat64, 100), nullptr) << "another type";
  EXPECT_EQ(g.Use(DataType::kFloat32, DataType::kFloat64, 100), nullptr) << "other lanes";
  EXPECT_EQ(g.Use(DataType::kFloat32, DataType::kFloat32, 101), nullptr) << "another count";
  int used = 0;
  for (uint32_t i = 1; i <= ExponentGuesses::kRefreshEvery; i++) {
    const std::vector<int32_t>* e = g.Use(DataType::kFloat32, DataType::kFloat32, 100);
    if (i % ExponentGuesses::kRefreshEvery == 0) {
      EXPECT_EQ(e, nullptr) << "every kRefreshEvery-th call runs the pre-pass";
    } else {
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(*e, (std::vector<int32_t>{3, 4}));
      used++;
    }
  }
  EXPECT_EQ(used, static_cast<int>(ExponentGuesses::kRefreshEvery) - 1);
  g.Forget(DataType::kFloat32, DataType::kFloat32, 100);
  EXPECT_EQ(g.Use(DataType::kFloat32, DataType::kFloat32, 100), nullptr);
  // The least recently used entry goes when the table is full.
  for (uint64_t c = 1; c <= ExponentGuesses::kMaxEntries; c++)
    g.Store(DataType::kFloat32, DataType::kFloat32, c, {1});
  ASSERT_NE(g.Use(DataType::kFloat32, DataType::kFloat32, 1), nullptr);  // entry 1 is now the most recent
  g.Store(DataType::kFloat32, DataType::kFloat32, 9999, {2});
  EXPECT_NE(g.Use(DataType::kFloat32, DataType::kFloat32, 1), nullptr);
  EXPECT_EQ(g.Use(DataType::kFloat32, DataType::kFloat32, 2), nullptr)
      << "entry 2 was the least recently used";
}

TEST(LaneChoice, ACountGoesWideAfterManyUncertifiedBlocksAndTriesNarrowAgainLessOften) {
  LaneChoice c;
  EXPECT_FALSE(c.Wide(1000)) << "a new count starts on 32-bit lanes";
  c.Record(1000, false, 80, 10);  // exactly 1/8: stays narrow
  EXPECT_FALSE(c.Wide(1000));
  c.Record(1000, false, 80, 11);  // more than 1/8 uncertified
  EXPECT_FALSE(c.Wide(999)) << "another count is unaffected";
  // Each failed narrow trial doubles the interval up to the maximum.
  for (uint32_t interval = LaneChoice::kRetryNarrowEvery; interval <= 2 * LaneChoice::kMaxRetryInterval;
       interval *= 2) {
    const uint32_t want = std::min(interval, LaneChoice::kMaxRetryInterval);
    uint32_t wide = 0;
    bool w;
    while ((w = c.Wide(1000))) {
      c.Record(1000, true, 80, 0);
      wide++;
      ASSERT_LE(wide, want);
    }
    EXPECT_EQ(wide, want - 1) << "a narrow trial after " << want << " calls";
    c.Record(1000, false, 80, 40);  // the trial fails
  }
  for (uint32_t i = 1; i < LaneChoice::kMaxRetryInterval; i++) ASSERT_TRUE(c.Wide(1000));
  EXPECT_FALSE(c.Wide(1000)) << "the next trial";
  c.Record(1000, false, 80, 0);
  EXPECT_FALSE(c.Wide(1000)) << "the trial was certified: back to 32-bit lanes";
  c.Record(1000, false, 80, 11);
  for (uint32_t i = 1; i < LaneChoice::kRetryNarrowEvery; i++) ASSERT_TRUE(c.Wide(1000));
  EXPECT_FALSE(c.Wide(1000)) << "wide again, and the interval starts over";

  LaneChoice narrow(LaneChoice::Mode::kNarrow), wide64(LaneChoice::Mode::kWide);
  narrow.Record(5, false, 10, 10);
  EXPECT_FALSE(narrow.Wide(5)) << "\"32\" never changes";
  EXPECT_TRUE(wide64.Wide(5)) << "\"64\" always";
  LaneChoice::Mode m;
  EXPECT_TRUE(LaneChoice::Parse("64", &m));
  EXPECT_EQ(m, LaneChoice::Mode::kWide);
  EXPECT_FALSE(LaneChoice::Parse("48", &m));
}

// ---------------------------------------------------------------- engine --

// A switch of one member behind the engine's PacketIo: it answers every
// contribution with a result of the same payload once `held` receive
// calls have come back empty (a peer that has not contributed yet).
class OneMemberSwitch : public PacketIo {
 public:
  explicit OneMemberSwitch(const EngineConfig& c) : cfg_(c) {}
  int held = 0;
  int empty_receives = 0;

  size_t MaxFrame() const override { return 4096; }
  // The same buffer until it is committed (the engine probes for one).
  uint8_t* TxBuffer() override {
    pending_.resize(MaxFrame());
    return pending_.data();
  }
  void TxCommit(size_t len) override {
    pending_.resize(len);
    tx_.push_back(std::move(pending_));
    pending_.clear();
  }
  Status Flush() override {
    for (const auto& f : tx_) {
      auto p = ParseFrame(f.data(), f.size());
      if (!p.ok()) return p.status();
      FrameSpec r;
      r.src_mac = cfg_.switch_mac;
      r.dst_mac = cfg_.member_mac;
      r.src_ip = cfg_.switch_ip;
      r.dst_ip = cfg_.member_ip;
      r.dest_qpn = cfg_.member_qpn;
      r.inc = p->inc;
      r.inc.flags = INC_FLAG_RESULT;
      r.inc.rank = INC_RANK_RESULT;
      std::vector<uint8_t> payload(p->payload, p->payload + p->payload_len);
      r.payload = payload.data();
      r.payload_len = payload.size();
      auto built = BuildFrame(r);
      if (!built.ok()) return built.status();
      results_.push_back(*built);
    }
    tx_.clear();
    return Status::Ok();
  }
  Expected<size_t> Receive(const FrameHandler& handler, int, size_t max_frames) override {
    if (held > 0 || results_.empty()) {
      held -= held > 0;
      empty_receives++;
      return size_t{0};
    }
    size_t n = 0;
    while (!results_.empty() && n < max_frames) {
      handler(results_.front().data(), results_.front().size());
      results_.erase(results_.begin());
      n++;
    }
    return n;
  }
  PacketIoStats Stats() const override { return {}; }

 private:
  EngineConfig cfg_;
  std::vector<uint8_t> pending_;
  std::vector<std::vector<uint8_t>> tx_;
  std::vector<std::vector<uint8_t>> results_;
};

EngineConfig OneMemberConfig() {
  EngineConfig c;
  c.member_mac = *Mac::Parse("02:00:00:00:00:01");
  c.switch_mac = *Mac::Parse("02:00:00:00:00:02");
  c.member_ip = *Ipv4::Parse("10.0.0.2");
  c.switch_ip = *Ipv4::Parse("10.0.0.1");
  c.member_qpn = 0x800123;
  c.tree_id = 7;
  c.key = 0xC0FFEE;
  c.pool_size = 256;
  c.timeout = std::chrono::seconds(10);  // no retransmission during the test
  return c;
}

TEST(Engine, CallsOnWaitWhileItWaitsForResultsAndCompletesAfterwards) {
  struct Case {
    const char* what;
    int held;         // empty receives before the switch answers
    bool want_waits;  // on_wait called at all
  };
  const Case cases[] = {
      {"results at once: never idle", 0, false},
      {"a peer three polls late", 3, true},
  };
  for (const Case& k : cases) {
    EngineConfig c = OneMemberConfig();
    int waits = 0;
    c.on_wait = [&] { waits++; };
    OneMemberSwitch sw(c);
    sw.held = k.held;
    Engine engine(&sw, c);
    std::vector<int32_t> in(500), out(500, -1);
    std::iota(in.begin(), in.end(), 7);
    BlockSpec s;
    s.send = in.data();
    s.recv = out.data();
    s.count = in.size();
    BlockOperation op(s);
    Status st = engine.Run(&op);
    ASSERT_TRUE(st.ok()) << k.what << ": " << st.ToString();
    EXPECT_EQ(out, in) << k.what;
    EXPECT_EQ(waits, sw.empty_receives) << k.what << ": once per empty wait";
    EXPECT_EQ(waits > 0, k.want_waits) << k.what;
  }
}

}  // namespace
}  // namespace inc::client
