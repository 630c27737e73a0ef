// SPDX-License-Identifier: Apache-2.0
// Building and parsing RoCEv2 INC frames exactly as docs/wire-format.md and
// docs/wire-format.md say (UC RDMA WRITE ONLY with immediate + INC header).
// Used by the client transports, the BPF selftests and the benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/abi/wire.h"
#include "common/net.h"
#include "common/status.h"

namespace inc {

// The INC header in host byte order.
struct IncHeader {
  uint8_t version = INC_VERSION;
  uint8_t flags = 0;
  uint8_t collective = INC_COLL_ALLREDUCE;
  uint8_t dtype = INC_DTYPE_INT32;
  uint8_t op = INC_OP_SUM;
  uint16_t tree_id = 0;
  uint16_t rank = 0;
  uint32_t msg_id = 0;
  uint16_t slot = 0;
  uint16_t count = 0;
  uint32_t key = 0;
  int8_t exponent = 0;
  uint8_t root_rank = 0;
  uint16_t aux = 0;  // INC_AUX_*: certificate threshold code, TRAILER, UNCERTIFIED
};

struct FrameSpec {
  Mac src_mac;
  Mac dst_mac;
  Ipv4 src_ip;
  Ipv4 dst_ip;
  uint8_t tos = INC_IP_TOS_DEFAULT;
  uint8_t ttl = INC_IP_TTL_DEFAULT;
  uint16_t ip_id = 0;
  uint32_t src_qpn = 0;  // only feeds the UDP source port
  uint32_t dest_qpn = 0;
  uint32_t psn = 0;
  bool solicited = true;
  uint64_t va = 0;
  uint32_t rkey = 0;
  IncHeader inc;
  const uint8_t* payload = nullptr;
  size_t payload_len = 0;  // normally inc.count * element size
};

// Bytes of a frame with this payload (headers + payload + ICRC).
constexpr size_t FrameLength(size_t payload_len) {
  return INC_FRAME_OVERHEAD + payload_len;
}

uint16_t Ipv4HeaderChecksum(const uint8_t* ip_header);  // over 20 bytes, checksum field as is

// Writes the frame (with IP checksum and ICRC) into out; returns its length.
Expected<size_t> BuildFrame(const FrameSpec& spec, uint8_t* out, size_t capacity);
// The same around a payload already in place: spec.payload_len bytes at
// out + INC_OFF_PAYLOAD (spec.payload is not read), so a sender can write
// its payload straight into the frame.
Expected<size_t> BuildFrameAroundPayload(const FrameSpec& spec, uint8_t* out, size_t capacity);
Expected<std::vector<uint8_t>> BuildFrame(const FrameSpec& spec);

struct ParsedFrame {
  Mac src_mac;
  Mac dst_mac;
  Ipv4 src_ip;
  Ipv4 dst_ip;
  uint8_t tos = 0;
  uint8_t ttl = 0;
  uint16_t ip_id = 0;
  uint16_t udp_sport = 0;
  uint8_t opcode = 0;
  uint8_t bth_flags = 0;
  uint16_t pkey = 0;
  uint8_t bth_resv8 = 0;
  uint32_t dest_qpn = 0;
  uint32_t psn = 0;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  uint32_t imm = 0;
  IncHeader inc;
  const uint8_t* payload = nullptr;  // points into the parsed buffer
  size_t payload_len = 0;
  uint32_t icrc_wire = 0;
  bool icrc_ok = false;
};

// Big-endian field readers for wire headers.
inline uint16_t LoadBe16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline uint32_t LoadBe32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline uint64_t LoadBe64(const uint8_t* p) {
  return uint64_t{LoadBe32(p)} << 32 | LoadBe32(p + 4);
}

// Decodes the 24-byte INC header at h.
IncHeader DecodeIncHeader(const uint8_t* h);

// Parses and checks framing (Ethernet/IPv4/UDP 4791/BTH opcode/lengths).
// Does not reject a bad ICRC: see ParsedFrame::icrc_ok.
Expected<ParsedFrame> ParseFrame(const uint8_t* frame, size_t len);

}  // namespace inc
