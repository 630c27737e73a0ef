// SPDX-License-Identifier: Apache-2.0
#include "client/block_op.h"

#include <cstring>
#include <string>

#include "client/numerics.h"

namespace inc::client {

BlockOperation::BlockOperation(const BlockSpec& spec)
    : s_(spec),
      wire_size_(inc_dtype_size(spec.wire_dtype)),
      per_packet_(ElemsPerPacket(spec.elems4, inc_dtype_size(spec.wire_dtype))),
      packets_(spec.blocks
                   ? spec.num_blocks
                   : PacketCount(spec.count, ElemsPerPacket(spec.elems4, inc_dtype_size(spec.wire_dtype)))) {
  if (s_.uncertified) s_.uncertified->assign(packets_, 0);
  if (s_.overflowed) s_.overflowed->assign(packets_, 0);
}

Expected<size_t> BlockOperation::Build(uint64_t m, IncHeader* h, uint8_t* payload, size_t capacity) {
  const uint64_t i = BlockOf(m);
  PacketRange r = PacketElements(i, s_.count, per_packet_);
  h->collective = s_.collective;
  h->dtype = s_.wire_dtype;
  h->op = s_.op;
  h->root_rank = s_.root_index;
  h->exponent = 0;
  h->aux = s_.aux;
  if (s_.mark_overflow && s_.mark_overflow[i]) h->flags |= INC_FLAG_OVERFLOW;
  if (s_.codec != Codec::kRaw && s_.exponents) h->exponent = static_cast<int8_t>(s_.exponents[i]);
  const bool zeros = s_.send_zeros && !s_.send;
  if (!zeros && (!s_.send_data || !s_.send)) {
    h->count = 0;
    return size_t{0};
  }
  h->count = static_cast<uint16_t>(r.count);
  const size_t bytes = size_t{r.count} * wire_size_;
  if (bytes > capacity)
    return InvalidArgument("payload of " + std::to_string(bytes) + " bytes exceeds the frame's " +
                           std::to_string(capacity));
  if (zeros) {
    std::memset(payload, 0, bytes);
    return bytes;
  }
  // Lanes go little-endian in host order, as on the wire.
  switch (s_.codec) {
    case Codec::kRaw:
      std::memcpy(payload, static_cast<const uint8_t*>(s_.send) + r.first * wire_size_, bytes);
      // A certified sum's lanes made elsewhere (the host stage's combined
      // lanes, where a 0 may be a cancellation of inexact values): a zero
      // lane proves nothing, so it must not count as an exact zero sum.
      if (s_.aux && HasZeroLane(payload, r.count, wire_size_)) h->aux |= INC_AUX_UNCERTIFIED;
      break;
    case Codec::kFixedF32: {
      const float* x = static_cast<const float*>(s_.send) + r.first;
      if (QuantiseF32(x, r.count, s_.exponents[i], s_.headroom, payload)) saturated_++;
      if (s_.aux && RoundedToZero(x, r.count, payload)) h->aux |= INC_AUX_UNCERTIFIED;
      break;
    }
    case Codec::kFixedF64: {
      const double* x = static_cast<const double*>(s_.send) + r.first;
      if (QuantiseF64(x, r.count, s_.exponents[i], s_.headroom, payload)) saturated_++;
      if (s_.aux && RoundedToZero(x, r.count, payload)) h->aux |= INC_AUX_UNCERTIFIED;
      break;
    }
    case Codec::kFixedF32Wide: {
      bool flushed = false;
      if (QuantiseF32Wide(static_cast<const float*>(s_.send) + r.first, r.count, s_.exponents[i], s_.headroom,
                          payload, &flushed))
        saturated_++;
      if (s_.aux && flushed) h->aux |= INC_AUX_UNCERTIFIED;
      break;
    }
  }
  return bytes;
}

Reject BlockOperation::Accept(uint64_t m, const ParsedFrame& f) {
  const uint64_t i = BlockOf(m);
  PacketRange r = PacketElements(i, s_.count, per_packet_);
  if (f.inc.collective != s_.collective) return Reject::kMismatch;
  // Every result of a certified sum, completion notices included, says
  // whether all its elements are certified.
  const bool flagged = s_.uncertified && (f.inc.aux & INC_AUX_UNCERTIFIED);
  const bool overflowed = s_.overflowed && (f.inc.flags & INC_FLAG_OVERFLOW);
  if (!s_.recv_data || !s_.recv) {
    // A completion notice; Reduce non-roots may also get the data.
    if (flagged) (*s_.uncertified)[m] = 1;
    if (overflowed) (*s_.overflowed)[m] = 1;
    return Reject::kNone;
  }
  if (f.inc.dtype != s_.wire_dtype || f.inc.count != r.count || f.payload_len != size_t{r.count} * wire_size_)
    return Reject::kMismatch;
  if (s_.codec != Codec::kRaw && s_.exponents && f.inc.exponent != static_cast<int8_t>(s_.exponents[i]))
    return Reject::kMismatch;
  if (flagged) (*s_.uncertified)[m] = 1;
  if (overflowed) (*s_.overflowed)[m] = 1;
  // Those elements are redone from the inputs, which recv may hold (an
  // in-place call): leave them.
  if (flagged || overflowed) return Reject::kNone;
  switch (s_.codec) {
    case Codec::kRaw:
      std::memcpy(static_cast<uint8_t*>(s_.recv) + r.first * wire_size_, f.payload, f.payload_len);
      break;
    case Codec::kFixedF32:
      DequantiseF32(f.payload, r.count, s_.exponents[i], s_.headroom, static_cast<float*>(s_.recv) + r.first);
      break;
    case Codec::kFixedF64:
      DequantiseF64(f.payload, r.count, s_.exponents[i], s_.headroom,
                    static_cast<double*>(s_.recv) + r.first);
      break;
    case Codec::kFixedF32Wide:
      DequantiseF32Wide(f.payload, r.count, s_.exponents[i], s_.headroom,
                        static_cast<float*>(s_.recv) + r.first);
      break;
  }
  return Reject::kNone;
}

}  // namespace inc::client
