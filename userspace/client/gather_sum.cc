// SPDX-License-Identifier: Apache-2.0
#include "client/gather_sum.h"

#include <cstring>

#include "client/numerics.h"

namespace inc::client {
namespace {

template <typename T>
T Load(const uint8_t* bytes, size_t index) {
  T v;
  std::memcpy(&v, bytes + index * sizeof(T), sizeof(T));
  return v;
}

// out[i] = widen(block 0)[i] + widen(block 1)[i] + ... in double, left to
// right; the first term starts the sum (so -0 stays -0).
template <typename T, typename Widen, typename Narrow>
void AddInRankOrder(const uint8_t* gathered, uint32_t world, uint64_t count, void* out, Widen widen,
                    Narrow narrow) {
  auto* o = static_cast<T*>(out);
  for (uint64_t i = 0; i < count; i++) {
    double acc = widen(Load<T>(gathered, i));
    for (uint32_t r = 1; r < world; r++) acc += widen(Load<T>(gathered, r * count + i));
    o[i] = narrow(acc);
  }
}

}  // namespace

void GatherSumContribution(uint32_t rank, uint32_t world, uint64_t count, size_t elem_size, const void* send,
                           int32_t* lanes) {
  const size_t n = GatherSumLanes(world, count, elem_size);
  std::memset(lanes, 0, n * sizeof(int32_t));
  const size_t block = count * elem_size;
  std::memcpy(reinterpret_cast<uint8_t*>(lanes) + rank * block, send, block);
}

void GatherSumAdd(DataType t, uint32_t world, uint64_t count, const int32_t* gathered, void* out) {
  const auto* g = reinterpret_cast<const uint8_t*>(gathered);
  switch (t) {
    case DataType::kFloat32:
      AddInRankOrder<float>(
          g, world, count, out, [](float x) { return static_cast<double>(x); },
          [](double s) { return static_cast<float>(s); });
      break;
    case DataType::kFloat64:
      AddInRankOrder<double>(
          g, world, count, out, [](double x) { return x; }, [](double s) { return s; });
      break;
    case DataType::kFloat16:
      AddInRankOrder<uint16_t>(
          g, world, count, out, [](uint16_t x) { return static_cast<double>(F16ToF32(x)); },
          [](double s) { return F32ToF16(static_cast<float>(s)); });
      break;
    case DataType::kBFloat16:
      AddInRankOrder<uint16_t>(
          g, world, count, out, [](uint16_t x) { return static_cast<double>(Bf16ToF32(x)); },
          [](double s) { return F32ToBf16(static_cast<float>(s)); });
      break;
    case DataType::kInt32:
    case DataType::kInt64: break;  // integers take the switch's exact sum
  }
}

}  // namespace inc::client
