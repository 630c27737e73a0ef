// SPDX-License-Identifier: Apache-2.0
// Float SUM: the accuracy contract and the pieces both float-sum paths use
// (one rank per host in communicator.cc, several ranks per host in
// host_stage.cc). docs/operations.md "Numbers" states the contract:
//
//   every element of a float SUM over n ranks is within (n-1)*u*sum|x_i|
//   of the exact sum (u the unit roundoff of the type), the bound of an IEEE
//   sum of the same values in some order, whatever their range; inf, -inf
//   and NaN give per element what an IEEE sum gives; every rank gets the
//   same bits, run after run.
//
// How: block fixed point (numerics.h) carries ordinary data. A pre-pass
// agrees per block on the largest exponent, or on kGatherBlockExponent when
// some rank's block holds inf or NaN. The switch adds the integer lanes and,
// for each element, the sum over ranks of |lane| (A); an element is
// certified when A >= T (CertificateThreshold): then the fixed point's
// quantisation error provably fits the bound. A message with an uncertified
// element comes back flagged (inc_hdr.aux INC_AUX_UNCERTIFIED), and its
// block, like a block with inf/NaN, is gathered: every rank's raw values go
// through an exact INT32 SUM of disjoint bytes and every rank adds them in
// rank order with SumGathered. With n <= 2 no certificate exists (the bound
// leaves no room for any quantisation error) and every block is gathered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/communicator.h"
#include "client/numerics.h"

namespace inc::client {

// Pre-pass value of a block that some rank must not quantise (inf or NaN
// in it): above every real exponent, so the INT32 MAX agrees on it.
constexpr int32_t kGatherBlockExponent = kNonFiniteBlockExponent;

// The type block fixed point runs on for a float type (16-bit types widen
// to float32 exactly): kFloat32 or kFloat64.
DataType FixedPointType(DataType t);

// Certificate threshold code (inc_hdr.aux bits 0..13) for a float SUM of
// type t over n ranks with fixed-point lanes of type `fixed` (float32 or
// float64 lanes: 32 or 64 bits): the smallest code whose threshold is >= the
// T derived in float_sum.cc. 0 when no certificate exists (n <= 2).
uint16_t CertificateCode(DataType t, DataType fixed, uint32_t n);
// With the lanes of FixedPointType(t).
uint16_t CertificateCode(DataType t, uint32_t n);
// T = (code & 0xFF) << ((code >> 8) & 0x3F); 0 for code 0.
uint64_t CertificateThreshold(uint16_t code);

// Sums of world values per element: rank r's count elements of type t at
// element offset r * count of `gathered` (any alignment), added in rank
// order into out (count elements of t). inf/NaN as IEEE; otherwise within
// (world-1)*u*sum|x| of the exact sum (the rank-order partial sums are kept
// exactly as an unevaluated pair and rounded once, so world <= 2 is
// correctly rounded). t is a float type.
void SumGathered(DataType t, uint32_t world, uint64_t count, const void* gathered, void* out);

// Blocks of a float SUM by what carries them.
struct FloatSumPlan {
  std::vector<uint32_t> fast;    // block fixed point (agreed exponent below kGatherBlockExponent)
  std::vector<uint32_t> gather;  // gathered (inf/NaN somewhere); more join after the data pass
  std::vector<uint32_t> zero;    // zero on every rank: the result is +0, nothing is sent
};
// From the agreed pre-pass exponents of `blocks` blocks.
FloatSumPlan PlanFloatSum(const int32_t* agreed, uint64_t blocks);

// Exponents of the data pass without a pre-pass round trip: a float SUM of
// a type and count seen before (a training loop's gradient buckets) uses
// that call's agreed exponents as its own. A rank whose block would
// saturate under them (its own exponent is larger, or the block holds
// inf/NaN) marks that block's contribution OVERFLOW; the switch ORs the
// flag into the result, and every rank redoes exactly those blocks with a
// pre-pass. The guesses are the same on every rank (agreed values of the
// same earlier call), so every rank takes the same path and gets the same
// bits; results stay within the contract whatever the guess (the
// certificate is computed at the step actually used). Every kRefreshEvery-th
// use of a guess is a full pre-pass again, so that exponents follow data
// whose magnitude shrinks.
// Entries are per type, count and fixed-point lane type (a float32 sum on
// 64-bit lanes has other blocks than on 32-bit ones).
class ExponentGuesses {
 public:
  static constexpr uint32_t kRefreshEvery = 8;
  static constexpr size_t kMaxEntries = 64;
  // The guess for this call, or null (then run the pre-pass and Store).
  const std::vector<int32_t>* Use(DataType type, DataType fixed, uint64_t count);
  void Store(DataType type, DataType fixed, uint64_t count, std::vector<int32_t> agreed);
  void Forget(DataType type, DataType fixed, uint64_t count);

 private:
  struct Entry {
    DataType type, fixed;
    uint64_t count;
    uint32_t uses = 0;
    uint64_t last = 0;  // for eviction of the least recently used
    std::vector<int32_t> agreed;
  };
  Entry* Find(DataType t, DataType fixed, uint64_t count);
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

// The fixed-point lanes of a float32 SUM. 32-bit lanes carry twice the
// elements per packet, but their certificate covers only elements within
// about 2^4 of their block's largest (n = 4; CertificateCode): data with a
// wide range inside a block (gradients) come back uncertified and are
// gathered, n times the bytes plus a round trip. 64-bit lanes certify
// elements down to about 2^-36 of the block's largest. "auto" starts a
// (count) on 32-bit lanes and moves it to 64-bit ones after a call in which
// more than 1/kWideAbove of its blocks came back uncertified; after
// kRetryNarrowEvery calls of a wide count it tries 32-bit lanes again, and
// each trial that fails doubles that interval (up to kMaxRetryInterval). The
// uncertified flags are the switch's, the same on every rank, so every rank
// makes the same choice call after call (the same bits). Entries are least
// recently used out beyond kMaxEntries.
class LaneChoice {
 public:
  enum class Mode { kAuto, kNarrow, kWide };
  static constexpr uint32_t kWideAbove = 8;
  static constexpr uint32_t kRetryNarrowEvery = 32;
  static constexpr uint32_t kMaxRetryInterval = 1024;
  static constexpr size_t kMaxEntries = 64;
  explicit LaneChoice(Mode mode = Mode::kAuto) : mode_(mode) {}
  // "auto", "32" or "64" (CommunicatorOptions::float32_lanes).
  static bool Parse(const std::string& text, Mode* mode);
  // Whether this float32 SUM of count elements runs on 64-bit lanes.
  bool Wide(uint64_t count);
  // What a call on the lanes Wide() chose saw: blocks sent in fixed point,
  // and of those, blocks that came back uncertified.
  void Record(uint64_t count, bool wide, uint64_t fixed_blocks, uint64_t uncertified);

 private:
  struct Entry {
    uint64_t count;
    bool wide = false;
    uint32_t uses = 0;                      // calls since the last narrow one
    uint32_t interval = kRetryNarrowEvery;  // calls between narrow trials
    uint64_t last = 0;
  };
  Entry* Find(uint64_t count);
  Mode mode_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

// Gathering blocks: the blocks of one gather pass and where each rank's
// values go. A pass's vector holds, block after block, world regions of the
// block's elements (rank-major), padded to whole int32 lanes at its end.
struct GatherChunk {
  std::vector<uint32_t> blocks;
  std::vector<uint64_t> offset;  // element offset of each block's region 0 in the vector
  uint64_t elements = 0;         // world x the blocks' elements
  size_t Lanes(size_t esize) const { return (elements * esize + 3) / 4; }
};
// Splits `blocks` (of a vector of count elements, per_block per block) into
// passes of at most max_bytes of gathered vector (at least one block each).
std::vector<GatherChunk> ChunkGather(const std::vector<uint32_t>& blocks, uint64_t count, uint32_t per_block,
                                     uint32_t world, size_t esize, size_t max_bytes);
// Rank rank's contribution to a chunk: zeros except its own values of each
// block (user elements of type t, from send) at their place. lanes has
// chunk.Lanes(esize) int32s.
void GatherChunkContribution(const GatherChunk& c, uint64_t count, uint32_t per_block, uint32_t world,
                             uint32_t rank, size_t esize, const void* send, int32_t* lanes);
// The summed elements of the chunk's blocks into recv (user type t).
void GatherChunkSum(const GatherChunk& c, DataType t, uint64_t count, uint32_t per_block, uint32_t world,
                    const int32_t* gathered, void* recv);

}  // namespace inc::client
