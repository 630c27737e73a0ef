// SPDX-License-Identifier: Apache-2.0
#include "common/frame.h"

#include <arpa/inet.h>

#include <cstring>

#include "common/icrc.h"

namespace inc {
namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v >> 32));
  Put32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace

IncHeader DecodeIncHeader(const uint8_t* h) {
  IncHeader o;
  o.version = h[0] >> 4;
  o.flags = h[0] & 0x0F;
  o.collective = h[1];
  o.dtype = h[2];
  o.op = h[3];
  o.tree_id = LoadBe16(h + 4);
  o.rank = LoadBe16(h + 6);
  o.msg_id = LoadBe32(h + 8);
  o.slot = LoadBe16(h + 12);
  o.count = LoadBe16(h + 14);
  o.key = LoadBe32(h + 16);
  o.exponent = static_cast<int8_t>(h[20]);
  o.root_rank = h[21];
  o.aux = LoadBe16(h + 22);
  return o;
}

uint16_t Ipv4HeaderChecksum(const uint8_t* ip) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) {
    if (i == 10) continue;
    sum += LoadBe16(ip + i);
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

Expected<size_t> BuildFrame(const FrameSpec& s, uint8_t* out, size_t capacity) {
  if (FrameLength(s.payload_len) <= capacity && s.payload_len)
    std::memcpy(out + INC_OFF_PAYLOAD, s.payload, s.payload_len);
  return BuildFrameAroundPayload(s, out, capacity);
}

Expected<size_t> BuildFrameAroundPayload(const FrameSpec& s, uint8_t* out, size_t capacity) {
  size_t len = FrameLength(s.payload_len);
  if (len > capacity) return InvalidArgument("frame of " + std::to_string(len) + " bytes exceeds buffer");
  if (s.payload_len % 4 != 0) return InvalidArgument("payload length must be a multiple of 4");
  if (len - 14 > 0xFFFF) return InvalidArgument("frame too large for IPv4");
  std::memset(out, 0, INC_OFF_PAYLOAD);
  // Ethernet
  std::memcpy(out, s.dst_mac.bytes.data(), 6);
  std::memcpy(out + 6, s.src_mac.bytes.data(), 6);
  Put16(out + 12, 0x0800);
  // IPv4
  uint8_t* ip = out + INC_OFF_IP;
  ip[0] = 0x45;
  ip[1] = s.tos;
  Put16(ip + 2, static_cast<uint16_t>(len - 14));
  Put16(ip + 4, s.ip_id);
  Put16(ip + 6, 0x4000);  // DF
  ip[8] = s.ttl;
  ip[9] = 17;
  Put32(ip + 12, s.src_ip.host);
  Put32(ip + 16, s.dst_ip.host);
  Put16(ip + 10, Ipv4HeaderChecksum(ip));
  // UDP
  uint8_t* udp = out + INC_OFF_UDP;
  Put16(udp, static_cast<uint16_t>(INC_UDP_SPORT_BASE | (s.src_qpn & 0x3FFF)));
  Put16(udp + 2, INC_ROCEV2_UDP_PORT);
  Put16(udp + 4, static_cast<uint16_t>(len - INC_OFF_UDP));
  // BTH
  uint8_t* bth = out + INC_OFF_BTH;
  bth[0] = INC_BTH_OPCODE_UC_WRITE_ONLY_IMM;
  bth[1] = s.solicited ? INC_BTH_SE : 0;
  Put16(bth + 2, INC_BTH_PKEY_DEFAULT);
  Put32(bth + 4, s.dest_qpn & INC_QPN_MASK);
  Put32(bth + 8, s.psn & INC_PSN_MASK);
  // RETH
  uint8_t* reth = out + INC_OFF_RETH;
  Put64(reth, s.va);
  Put32(reth + 8, s.rkey);
  Put32(reth + 12, static_cast<uint32_t>(sizeof(inc_hdr) + s.payload_len));
  // IMMDT
  Put32(out + INC_OFF_IMMDT, s.inc.msg_id);
  // INC header
  uint8_t* h = out + INC_OFF_INC;
  h[0] = static_cast<uint8_t>(s.inc.version << 4 | (s.inc.flags & 0x0F));
  h[1] = s.inc.collective;
  h[2] = s.inc.dtype;
  h[3] = s.inc.op;
  Put16(h + 4, s.inc.tree_id);
  Put16(h + 6, s.inc.rank);
  Put32(h + 8, s.inc.msg_id);
  Put16(h + 12, s.inc.slot);
  Put16(h + 14, s.inc.count);
  Put32(h + 16, s.inc.key);
  h[20] = static_cast<uint8_t>(s.inc.exponent);
  h[21] = s.inc.root_rank;
  Put16(h + 22, s.inc.aux);
  INC_RETURN_IF_ERROR(WriteIcrc(out, len));
  return len;
}

Expected<std::vector<uint8_t>> BuildFrame(const FrameSpec& spec) {
  std::vector<uint8_t> out(FrameLength(spec.payload_len));
  auto n = BuildFrame(spec, out.data(), out.size());
  if (!n.ok()) return n.status();
  return out;
}

Expected<ParsedFrame> ParseFrame(const uint8_t* f, size_t len) {
  if (len < INC_FRAME_OVERHEAD) return InvalidArgument("frame shorter than INC headers");
  if (LoadBe16(f + 12) != 0x0800) return InvalidArgument("not IPv4");
  const uint8_t* ip = f + INC_OFF_IP;
  if (ip[0] != 0x45) return InvalidArgument("IPv4 version/IHL not 4/5");
  if (ip[9] != 17) return InvalidArgument("not UDP");
  uint16_t ip_len = LoadBe16(ip + 2);
  if (size_t{ip_len} + 14 > len || ip_len < 20 + 8) return InvalidArgument("bad IPv4 total length");
  const uint8_t* udp = f + INC_OFF_UDP;
  if (LoadBe16(udp + 2) != INC_ROCEV2_UDP_PORT) return InvalidArgument("not UDP port 4791");
  uint16_t udp_len = LoadBe16(udp + 4);
  if (udp_len != ip_len - 20) return InvalidArgument("UDP length disagrees with IPv4 length");
  size_t end = INC_OFF_UDP + size_t{udp_len};
  if (end < INC_FRAME_OVERHEAD) return InvalidArgument("UDP payload shorter than INC headers");
  ParsedFrame p;
  std::memcpy(p.dst_mac.bytes.data(), f, 6);
  std::memcpy(p.src_mac.bytes.data(), f + 6, 6);
  p.tos = ip[1];
  p.ttl = ip[8];
  p.ip_id = LoadBe16(ip + 4);
  p.src_ip.host = LoadBe32(ip + 12);
  p.dst_ip.host = LoadBe32(ip + 16);
  p.udp_sport = LoadBe16(udp);
  const uint8_t* bth = f + INC_OFF_BTH;
  p.opcode = bth[0];
  if (p.opcode != INC_BTH_OPCODE_UC_WRITE_ONLY_IMM)
    return InvalidArgument("BTH opcode is not UC WRITE ONLY with immediate");
  p.bth_flags = bth[1];
  p.pkey = LoadBe16(bth + 2);
  p.bth_resv8 = bth[4];
  p.dest_qpn = LoadBe32(bth + 4) & INC_QPN_MASK;
  p.psn = LoadBe32(bth + 8) & INC_PSN_MASK;
  const uint8_t* reth = f + INC_OFF_RETH;
  p.va = LoadBe64(reth);
  p.rkey = LoadBe32(reth + 8);
  p.dma_len = LoadBe32(reth + 12);
  p.imm = LoadBe32(f + INC_OFF_IMMDT);
  p.inc = DecodeIncHeader(f + INC_OFF_INC);
  p.payload = f + INC_OFF_PAYLOAD;
  p.payload_len = end - INC_FRAME_OVERHEAD;
  if (p.dma_len != sizeof(inc_hdr) + p.payload_len)
    return InvalidArgument("RETH DMA length disagrees with the frame");
  const uint8_t* icrc = f + end - INC_ICRC_LEN;
  p.icrc_wire =
      uint32_t{icrc[0]} | uint32_t{icrc[1]} << 8 | uint32_t{icrc[2]} << 16 | uint32_t{icrc[3]} << 24;
  auto want = ComputeIcrc(f, end);
  p.icrc_ok = want.ok() && *want == p.icrc_wire;
  return p;
}

}  // namespace inc
