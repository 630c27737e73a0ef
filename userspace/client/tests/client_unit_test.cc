// libinc unit tests: packet/window arithmetic, block fixed point, number
// mappings, result-frame validation, the block operation's codecs and the
// engine's wait hook.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "client/block_op.h"
#include "client/engine.h"
#include "client/numerics.h"
#include "client/protocol.h"
#include "common/frame.h"

namespace inc::client {
namespace {

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

// Reference for the vectorised FP32 paths: the definition in numerics.h
// computed in double, one element at a time.
int32_t RefBlockExponent(const float* x, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return 127;
    m = std::max(m, std::fabs(x[i]));
  }
  if (m == 0) return kZeroBlockExponent;
  return std::max(-127, std::min(127, std::ilogb(m)));
}

TEST(FixedPoint, VectorisedFloat32PathsMatchTheScalarDefinitionBitForBit) {
  std::mt19937 rng(11);
  const float specials[] = {0.0f,       -0.0f,         1e-45f,       -1e-40f,   1.1754944e-38f,
                            3.4e38f,    -3.4e38f,      INFINITY,     -INFINITY, NAN,
                            0.5f,       1.5f,          2.5f,         -2.5f,     std::nextafter(2.0f, 0.0f),
                            8388607.5f, 1073741823.0f, 1073741824.0f};
  for (int round = 0; round < 400; round++) {
    size_t n = 1 + rng() % 509;  // odd tails included
    int spread = static_cast<int>(rng() % 60);
    std::vector<float> x(n);
    for (auto& v : x) {
      if (rng() % 50 == 0) {
        v = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
      } else {
        v = std::ldexp(static_cast<float>(static_cast<int32_t>(rng())) / 2147483648.0f,
                       static_cast<int>(rng() % (2 * spread + 1)) - spread);
      }
    }
    const int32_t own = RefBlockExponent(x.data(), n);
    ASSERT_EQ(BlockExponentF32(x.data(), n), own) << "round " << round;
    for (int h : {0, 2, 6, 7, 8, 12}) {
      // The agreed exponent is at least the block's own; sometimes below it
      // (saturation), sometimes far above (underflow to 0).
      for (int32_t b : {own, own + 1, own + 40, own - 3, -127, 127}) {
        if (own == kZeroBlockExponent && b != own) continue;
        b = std::max(-127, std::min(127, b));
        std::vector<int32_t> q(n), want(n);
        bool sat = QuantiseF32(x.data(), n, b, h, q.data());
        bool want_sat = false;
        const double scale = std::ldexp(1.0, 30 - h - b), limit = std::ldexp(1.0, 31 - h) - 1;
        for (size_t i = 0; i < n; i++) {
          double s = static_cast<double>(x[i]) * scale;
          if (!(s <= limit && s >= -limit)) {
            want_sat = true;
            s = std::isnan(s) ? 0 : (s > 0 ? limit : -limit);
          }
          want[i] = static_cast<int32_t>(std::nearbyint(s));
        }
        ASSERT_EQ(sat, want_sat) << "round " << round << " h " << h << " b " << b;
        ASSERT_EQ(q, want) << "round " << round << " h " << h << " b " << b;
        std::vector<float> back(n);
        DequantiseF32(q.data(), n, b, h, back.data());
        for (size_t i = 0; i < n; i++) {
          float w = static_cast<float>(static_cast<double>(want[i]) * std::ldexp(1.0, -(30 - h - b)));
          ASSERT_EQ(std::memcmp(&back[i], &w, sizeof(w)), 0) << "element " << i;
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
    size_t n = op.Build(i, &h, payload.data());
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
  op.Build(0, &h, payload.data());
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
    size_t na = opa.Build(i, &ha, pa.data());
    size_t nb = opb.Build(i, &hb, pb.data());
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
  EXPECT_EQ(op.Build(0, &h, payload.data()), 0u);
  EXPECT_EQ(h.count, 0);
  BlockSpec bar;
  bar.collective = INC_COLL_BARRIER;
  bar.count = 0;
  bar.send_data = false;
  bar.recv_data = false;
  BlockOperation barrier(bar);
  EXPECT_EQ(barrier.NumMessages(), 1u);
  EXPECT_EQ(barrier.Build(0, &h, payload.data()), 0u);
  EXPECT_EQ(barrier.Accept(0, ResultFor(h, {})), Reject::kNone);
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
