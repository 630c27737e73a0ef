// SPDX-License-Identifier: Apache-2.0
#include "client/float_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "client/numerics.h"
#include "client/protocol.h"

namespace inc::client {
namespace {

// Unit roundoff of the user's type.
long double UnitRoundoff(DataType t) {
  switch (t) {
    case DataType::kFloat16: return std::ldexp(1.0L, -11);
    case DataType::kBFloat16: return std::ldexp(1.0L, -8);
    case DataType::kFloat64: return std::ldexp(1.0L, -53);
    default: return std::ldexp(1.0L, -24);
  }
}

// A binary floating-point format: p significand bits, normal exponents
// emin..emax.
struct Format {
  int p, emin, emax;
};

Format FormatOf(DataType t) {
  switch (t) {
    case DataType::kFloat16: return {11, -14, 15};
    case DataType::kBFloat16: return {8, -126, 127};
    case DataType::kFloat64: return {53, -1022, 1023};
    default: return {24, -126, 127};
  }
}

// a + b = s + err exactly (Knuth's TwoSum; any operand order).
template <typename A>
inline void TwoSum(A a, A b, A* s, A* err) {
  *s = a + b;
  const A bb = *s - a;
  *err = (a - (*s - bb)) + (b - bb);
}

// hi + lo (|lo| <= half an ulp of hi in A, hi finite) rounded to nearest
// (ties to even) in format f, returned as an A that f represents exactly
// (or +-inf when it overflows f). A tie of hi alone is broken by lo's sign:
// with midpoints of f representable in A that is correct rounding of hi + lo.
template <typename A>
A RoundTo(A hi, A lo, Format f) {
  if (hi == 0) return hi;  // keeps -0
  int e = std::ilogb(hi);
  if (e < f.emin) e = f.emin;  // subnormal in f: a fixed quantum
  const A scale = std::scalbn(A(1), f.p - 1 - e);
  const A m = hi * scale;  // exact: a power-of-two scaling inside A's range
  A r = std::nearbyint(m);
  const A below = std::floor(m);
  if (m - below == A(0.5) && lo != 0) r = lo > 0 ? below + 1 : below;
  const A v = r / scale;
  const A max = std::scalbn(A(2) - std::scalbn(A(1), 1 - f.p), f.emax);
  if (std::fabs(v) > max) return std::copysign(std::numeric_limits<A>::infinity(), v);
  return v;
}

template <typename T>
T LoadAt(const uint8_t* bytes, size_t index) {
  T v;
  std::memcpy(&v, bytes + index * sizeof(T), sizeof(T));
  return v;
}

// The element sums of SumGathered with In read from the bytes, widened to
// A, the rank-order sum kept as (s, e) with every addition's error, and
// narrowed by `store`.
template <typename In, typename A, typename Widen, typename Store>
void SumInRankOrder(const uint8_t* g, uint32_t world, uint64_t count, Format f, Widen widen, Store store) {
  for (uint64_t i = 0; i < count; i++) {
    bool nan = false, pinf = false, ninf = false;
    bool started = false;
    A s = 0, e = 0;
    for (uint32_t r = 0; r < world; r++) {
      const A x = widen(LoadAt<In>(g, r * count + i));
      if (!std::isfinite(x)) {
        nan |= std::isnan(x);
        pinf |= x > 0;
        ninf |= x < 0;
        continue;
      }
      if (!started) {
        s = x;  // the first term starts the sum (-0 stays -0)
        started = true;
        continue;
      }
      A err;
      TwoSum(s, x, &s, &err);
      e += err;
    }
    A out;
    if (nan || (pinf && ninf)) {
      out = std::numeric_limits<A>::quiet_NaN();
    } else if (pinf || ninf) {
      out = pinf ? std::numeric_limits<A>::infinity() : -std::numeric_limits<A>::infinity();
    } else {
      A hi = s, lo = 0;
      if (e != 0) TwoSum(s, e, &hi, &lo);  // (not for e == 0: -0 + +0 would lose the sign of a -0 sum)
      out = std::isfinite(hi) ? RoundTo(hi, lo, f) : hi;
    }
    store(i, out);
  }
}

// A small table of entries with a `last` use clock: at `max` entries the
// least recently used one goes (ExponentGuesses, LaneChoice).
template <typename Entry>
void MakeRoom(std::vector<Entry>* entries, size_t max) {
  if (entries->size() >= max)
    entries->erase(std::min_element(entries->begin(), entries->end(),
                                    [](const Entry& a, const Entry& b) { return a.last < b.last; }));
}

}  // namespace

DataType FixedPointType(DataType t) {
  return t == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32;
}

uint16_t CertificateCode(DataType t, uint32_t n) {
  return CertificateCode(t, FixedPointType(t), n);
}

uint16_t CertificateCode(DataType t, DataType fixed, uint32_t n) {
  if (n < 3) return 0;
  // Result R = round_t(round_f(Q*step)): f is the fixed point's float type,
  // round_t a second rounding to a 16-bit type (none when t is f itself).
  // With E = |Q*step - S| <= (n/2)*step (each rank rounds to nearest):
  //   |R - S| <= E*c1 + |S|*c2,  c1 = 1 + uf + ur*(1 + uf),  c2 = uf + ur*(1 + uf).
  // The contract allows (n-1)*ut*sum|x|, and sum|x| >= (A - n/2)*step with
  // A = sum over ranks of |q|, so A >= n/2 + (n/2)*c1/((n-1)*ut - c2)
  // certifies the element.
  const DataType f = fixed;
  const long double uf = UnitRoundoff(f), ut = UnitRoundoff(t);
  const long double ur = t == f ? 0 : ut;
  const long double c1 = 1 + uf + ur * (1 + uf), c2 = uf + ur * (1 + uf);
  const long double slack = (n - 1) * ut - c2;
  if (slack <= 0) return 0;
  const long double t_exact = n / 2.0L + (n / 2.0L) * c1 / slack;
  // Beyond what A can reach (n lanes of magnitude < 2^(lane bits - 2 - h))
  // no element is ever certified: say so as "no certificate".
  const int lane_bits = f == DataType::kFloat64 ? 64 : 32;
  const long double a_max = std::ldexp(static_cast<long double>(n), lane_bits - 2 - HeadroomBits(n));
  if (t_exact >= a_max) return 0;
  // Round up to m * 2^s with m < 256; +1 keeps a margin over rounding here.
  const uint64_t need = static_cast<uint64_t>(std::ceil(t_exact)) + 1;
  for (uint32_t s = 0; s < 64; s++) {
    const uint64_t m = (need + (uint64_t{1} << s) - 1) >> s;
    if (m <= 0xFF) return static_cast<uint16_t>((s << 8) | m);
  }
  return 0;
}

uint64_t CertificateThreshold(uint16_t code) {
  const uint32_t s = (code >> 8) & 0x3F;
  return uint64_t{code & 0xFFu} << s;
}

void SumGathered(DataType t, uint32_t world, uint64_t count, const void* gathered, void* out) {
  const auto* g = static_cast<const uint8_t*>(gathered);
  const Format f = FormatOf(t);
  switch (t) {
    case DataType::kFloat32: {
      auto* o = static_cast<float*>(out);
      SumInRankOrder<float, double>(
          g, world, count, f, [](float x) { return static_cast<double>(x); },
          [o](uint64_t i, double v) { o[i] = static_cast<float>(v); });
      break;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const bool half = t == DataType::kFloat16;
      auto* o = static_cast<uint16_t*>(out);
      SumInRankOrder<uint16_t, double>(
          g, world, count, f,
          [half](uint16_t x) { return static_cast<double>(half ? F16ToF32(x) : Bf16ToF32(x)); },
          [o, half](uint64_t i, double v) {
            // v is representable in the 16-bit type (or inf/NaN): both
            // conversions are exact.
            const float x = static_cast<float>(v);
            o[i] = half ? F32ToF16(x) : F32ToBf16(x);
          });
      break;
    }
    case DataType::kFloat64: {
      // long double: a wider exponent range (no overflow of partial sums of
      // finite doubles) and a 64-bit significand.
      auto* o = static_cast<double*>(out);
      SumInRankOrder<double, long double>(
          g, world, count, f, [](double x) { return static_cast<long double>(x); },
          [o](uint64_t i, long double v) { o[i] = static_cast<double>(v); });
      break;
    }
    case DataType::kInt32:
    case DataType::kInt64: break;  // integers take the switch's exact sum
  }
}

FloatSumPlan PlanFloatSum(const int32_t* agreed, uint64_t blocks) {
  FloatSumPlan p;
  for (uint64_t b = 0; b < blocks; b++) {
    const auto block = static_cast<uint32_t>(b);
    if (agreed[b] >= kGatherBlockExponent)
      p.gather.push_back(block);
    else if (agreed[b] == kZeroBlockExponent)
      p.zero.push_back(block);
    else
      p.fast.push_back(block);
  }
  return p;
}

ExponentGuesses::Entry* ExponentGuesses::Find(DataType t, DataType fixed, uint64_t count) {
  for (Entry& e : entries_)
    if (e.type == t && e.fixed == fixed && e.count == count) return &e;
  return nullptr;
}

const std::vector<int32_t>* ExponentGuesses::Use(DataType t, DataType fixed, uint64_t count) {
  Entry* e = Find(t, fixed, count);
  if (!e) return nullptr;
  e->last = ++clock_;
  if (++e->uses % kRefreshEvery == 0) return nullptr;  // a full pre-pass this time
  return &e->agreed;
}

void ExponentGuesses::Store(DataType t, DataType fixed, uint64_t count, std::vector<int32_t> agreed) {
  Entry* e = Find(t, fixed, count);
  if (!e) {
    MakeRoom(&entries_, kMaxEntries);
    entries_.push_back(Entry{t, fixed, count, 0, 0, {}});
    e = &entries_.back();
  }
  e->agreed = std::move(agreed);
  e->last = ++clock_;
}

void ExponentGuesses::Forget(DataType t, DataType fixed, uint64_t count) {
  for (size_t i = 0; i < entries_.size(); i++)
    if (entries_[i].type == t && entries_[i].fixed == fixed && entries_[i].count == count) {
      entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(i));
      return;
    }
}

bool LaneChoice::Parse(const std::string& text, Mode* mode) {
  if (text == "auto")
    *mode = Mode::kAuto;
  else if (text == "32")
    *mode = Mode::kNarrow;
  else if (text == "64")
    *mode = Mode::kWide;
  else
    return false;
  return true;
}

LaneChoice::Entry* LaneChoice::Find(uint64_t count) {
  for (Entry& e : entries_)
    if (e.count == count) return &e;
  return nullptr;
}

bool LaneChoice::Wide(uint64_t count) {
  if (mode_ != Mode::kAuto) return mode_ == Mode::kWide;
  Entry* e = Find(count);
  if (!e || !e->wide) return false;
  e->last = ++clock_;
  return ++e->uses < e->interval;  // then a narrow trial
}

void LaneChoice::Record(uint64_t count, bool wide, uint64_t fixed_blocks, uint64_t uncertified) {
  if (mode_ != Mode::kAuto || wide) return;  // a wide count stays wide until a narrow trial passes
  const bool go_wide = uncertified * kWideAbove > fixed_blocks;
  Entry* e = Find(count);
  if (!e) {
    if (!go_wide) return;  // nothing to remember: narrow is the default
    MakeRoom(&entries_, kMaxEntries);
    entries_.push_back(Entry{count});
    e = &entries_.back();
  }
  if (e->wide && go_wide) e->interval = std::min(e->interval * 2, kMaxRetryInterval);  // a failed trial
  if (!go_wide) e->interval = kRetryNarrowEvery;
  e->wide = go_wide;
  e->uses = 0;
  e->last = ++clock_;
}

std::vector<GatherChunk> ChunkGather(const std::vector<uint32_t>& blocks, uint64_t count, uint32_t per_block,
                                     uint32_t world, size_t esize, size_t max_bytes) {
  std::vector<GatherChunk> out;
  GatherChunk c;
  for (uint32_t b : blocks) {
    const uint64_t n = PacketElements(b, count, per_block).count * uint64_t{world};
    if (!c.blocks.empty() && (c.elements + n) * esize + 3 > max_bytes) {
      out.push_back(std::move(c));
      c = GatherChunk{};
    }
    c.blocks.push_back(b);
    c.offset.push_back(c.elements);
    c.elements += n;
  }
  if (!c.blocks.empty()) out.push_back(std::move(c));
  return out;
}

void GatherChunkContribution(const GatherChunk& c, uint64_t count, uint32_t per_block, uint32_t world,
                             uint32_t rank, size_t esize, const void* send, int32_t* lanes) {
  (void)world;
  auto* bytes = reinterpret_cast<uint8_t*>(lanes);
  std::memset(bytes, 0, c.Lanes(esize) * 4);
  for (size_t k = 0; k < c.blocks.size(); k++) {
    const PacketRange r = PacketElements(c.blocks[k], count, per_block);
    std::memcpy(bytes + (c.offset[k] + uint64_t{rank} * r.count) * esize,
                static_cast<const uint8_t*>(send) + r.first * esize, r.count * esize);
  }
}

void GatherChunkSum(const GatherChunk& c, DataType t, uint64_t count, uint32_t per_block, uint32_t world,
                    const int32_t* gathered, void* recv) {
  const size_t esize = DataTypeSize(t);
  const auto* bytes = reinterpret_cast<const uint8_t*>(gathered);
  for (size_t k = 0; k < c.blocks.size(); k++) {
    const PacketRange r = PacketElements(c.blocks[k], count, per_block);
    SumGathered(t, world, r.count, bytes + c.offset[k] * esize,
                static_cast<uint8_t*>(recv) + r.first * esize);
  }
}

}  // namespace inc::client
