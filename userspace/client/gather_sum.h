// SPDX-License-Identifier: Apache-2.0
// Small float sums in one round trip. A float SUM in block fixed point needs
// two switch collectives (the INT32 MAX exponent pre-pass, then the data).
// When every rank's elements together fit one packet, libinc instead gathers
// them through one INT32 SUM: rank r puts the raw bytes of its count elements
// at byte offset r * count * size and zeros everywhere else. The bytes of
// different ranks never overlap, so the switch's integer sum reproduces every
// rank's bits exactly and never overflows (also for 8-byte values split over
// two lanes, and for lanes shared by two ranks' 2-byte values). Every rank
// then adds the world values of each element in rank order (rank 0 first)
// with float_sum.h's SumGathered: the partial sums kept exactly as a pair
// and rounded once to the element type, IEEE results for inf and NaN. The
// order is fixed, so every rank and every run gets the same bits (-0 + -0 =
// -0, subnormals are kept).
#pragma once

#include <cstddef>
#include <cstdint>

#include "client/communicator.h"

namespace inc::client {

// Whether world blocks of count elements of elem_size bytes fit the payload
// of one packet of elems4 four-byte lanes.
constexpr bool GatherSumFits(uint32_t world, uint64_t count, size_t elem_size, uint32_t elems4) {
  return world > 0 && count > 0 && elem_size > 0 && count <= size_t{elems4} * 4 / (size_t{world} * elem_size);
}

// int32 lanes of the gathered vector (the last one zero-padded).
constexpr size_t GatherSumLanes(uint32_t world, uint64_t count, size_t elem_size) {
  return (size_t{world} * count * elem_size + 3) / 4;
}

// Rank rank's contribution: GatherSumLanes(world, count, elem_size) lanes,
// zero except the bytes of its own count elements.
void GatherSumContribution(uint32_t rank, uint32_t world, uint64_t count, size_t elem_size, const void* send,
                           int32_t* lanes);

// Adds the gathered values (world blocks of count elements of type t, as
// the switch returned them) in rank order into out (count elements of t).
// t is a float type.
void GatherSumAdd(DataType t, uint32_t world, uint64_t count, const int32_t* gathered, void* out);

}  // namespace inc::client
