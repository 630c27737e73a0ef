// SPDX-License-Identifier: Apache-2.0
#include "client/gather_sum.h"

#include <cstring>

#include "client/float_sum.h"

namespace inc::client {
void GatherSumContribution(uint32_t rank, uint32_t world, uint64_t count, size_t elem_size, const void* send,
                           int32_t* lanes) {
  const size_t n = GatherSumLanes(world, count, elem_size);
  std::memset(lanes, 0, n * sizeof(int32_t));
  const size_t block = count * elem_size;
  std::memcpy(reinterpret_cast<uint8_t*>(lanes) + rank * block, send, block);
}

void GatherSumAdd(DataType t, uint32_t world, uint64_t count, const int32_t* gathered, void* out) {
  SumGathered(t, world, count, gathered, out);
}

}  // namespace inc::client
