// SPDX-License-Identifier: Apache-2.0
// One switch collective over a contiguous vector in wire form: the
// Operation the engine runs for AllReduce, Reduce, Broadcast and Barrier.
// Block i carries elements [i*E, i*E + E) where E = elems per packet for
// the wire element size; message k carries block k, or block blocks[k]
// when only some blocks travel. Codecs turn user elements into wire lanes:
// raw copies (INT32, INT64, FP32 MIN/MAX) or block fixed point (FP32/FP64
// SUM, with one agreed exponent per block and the certificate code in
// inc_hdr.aux; float_sum.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/engine.h"

namespace inc::client {

// kFixedF32Wide: float32 values on 64-bit lanes (the FP64 wire type).
enum class Codec { kRaw, kFixedF32, kFixedF64, kFixedF32Wide };

struct BlockSpec {
  uint8_t collective = INC_COLL_ALLREDUCE;
  uint8_t wire_dtype = INC_DTYPE_INT32;  // INT32, FP32 or INT64
  uint8_t op = INC_OP_SUM;
  uint8_t root_index = 0;      // member index of the root (Reduce/Broadcast)
  const void* send = nullptr;  // user elements (count of them), or null
  void* recv = nullptr;        // where the result goes, or null
  uint64_t count = 0;          // elements
  uint32_t elems4 = INC_DEFAULT_ELEMS_PER_PACKET;
  Codec codec = Codec::kRaw;
  const int32_t* exponents = nullptr;  // per block, for fixed point
  int headroom = 0;
  // Only these blocks travel, one message each (null: every block).
  const uint32_t* blocks = nullptr;
  uint64_t num_blocks = 0;  // entries of blocks
  uint16_t aux = 0;         // inc_hdr.aux of every contribution (certificate code)
  // Out: per message, whether its result came back INC_AUX_UNCERTIFIED
  // (sized by the operation; may be null).
  std::vector<uint8_t>* uncertified = nullptr;
  // Per block (indexed like exponents): 1 marks its contribution OVERFLOW
  // (this rank cannot quantise it at the guessed exponent; float_sum.h).
  const uint8_t* mark_overflow = nullptr;
  // Out: per message, whether its result came back OVERFLOW.
  std::vector<uint8_t>* overflowed = nullptr;
  bool send_data = true;    // false: contribute without elements ("ready")
  bool send_zeros = false;  // with send == nullptr: contribute count zero lanes
  bool recv_data = true;    // false: the result is a completion notice
};

class BlockOperation : public Operation {
 public:
  explicit BlockOperation(const BlockSpec& spec);
  uint64_t NumMessages() const override { return packets_; }
  Expected<size_t> Build(uint64_t i, IncHeader* header, uint8_t* payload, size_t capacity) override;
  Reject Accept(uint64_t i, const ParsedFrame& result) override;
  uint64_t saturated() const { return saturated_; }
  bool HandlesOverflow() const override { return s_.overflowed != nullptr; }

 private:
  uint64_t BlockOf(uint64_t message) const { return s_.blocks ? s_.blocks[message] : message; }
  BlockSpec s_;
  size_t wire_size_;
  uint32_t per_packet_;
  uint64_t packets_;
  uint64_t saturated_ = 0;
};

}  // namespace inc::client
