// The RoCEv2/INC frame parser libinc runs on every frame its AF_XDP and XDP
// receive paths hand it (client/engine.cc: ParseFrame, then CheckResultFrame).
// Invariants: a parsed frame's payload lies inside the input, and a frame
// rebuilt from the parsed fields parses back to the same fields with a good
// ICRC.
#include <cstring>
#include <vector>

#include "client/protocol.h"
#include "common/frame.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan sees any read past the frame.
  std::vector<uint8_t> frame(data, data + size);
  auto parsed = inc::ParseFrame(frame.data(), frame.size());
  if (!parsed.ok()) return 0;
  const inc::ParsedFrame& p = *parsed;
  FUZZ_CHECK(p.payload >= frame.data() + INC_OFF_PAYLOAD);
  FUZZ_CHECK(p.payload + p.payload_len + INC_ICRC_LEN <= frame.data() + frame.size());

  // The result checks, once against a member the frame was meant for (so
  // they run to the end) and once against another.
  inc::client::ResultFilter mine{p.dest_qpn, p.src_ip, p.inc.tree_id, p.inc.key,
                                 static_cast<uint32_t>(p.inc.slot) + 1};
  (void)inc::client::CheckResultFrame(p, mine);
  (void)inc::client::CheckResultFrame(p, inc::client::ResultFilter{});

  // BuildFrame takes whole 4-byte elements only.
  if (p.payload_len % 4 != 0) return 0;
  inc::FrameSpec spec;
  spec.src_mac = p.src_mac;
  spec.dst_mac = p.dst_mac;
  spec.src_ip = p.src_ip;
  spec.dst_ip = p.dst_ip;
  spec.tos = p.tos;
  spec.ttl = p.ttl;
  spec.ip_id = p.ip_id;
  spec.dest_qpn = p.dest_qpn;
  spec.psn = p.psn;
  spec.va = p.va;
  spec.rkey = p.rkey;
  spec.inc = p.inc;
  spec.payload = p.payload;
  spec.payload_len = p.payload_len;
  auto rebuilt = inc::BuildFrame(spec);
  FUZZ_CHECK(rebuilt.ok());
  auto again = inc::ParseFrame(rebuilt->data(), rebuilt->size());
  FUZZ_CHECK(again.ok());
  const inc::ParsedFrame& q = *again;
  FUZZ_CHECK(q.icrc_ok);
  FUZZ_CHECK(q.src_mac == p.src_mac && q.dst_mac == p.dst_mac);
  FUZZ_CHECK(q.src_ip.host == p.src_ip.host && q.dst_ip.host == p.dst_ip.host);
  FUZZ_CHECK(q.tos == p.tos && q.ttl == p.ttl && q.ip_id == p.ip_id);
  FUZZ_CHECK(q.dest_qpn == p.dest_qpn && q.psn == p.psn && q.va == p.va && q.rkey == p.rkey);
  FUZZ_CHECK(q.inc.version == p.inc.version && q.inc.flags == p.inc.flags && q.inc.msg_id == p.inc.msg_id);
  FUZZ_CHECK(q.inc.collective == p.inc.collective && q.inc.dtype == p.inc.dtype && q.inc.op == p.inc.op);
  FUZZ_CHECK(q.inc.tree_id == p.inc.tree_id && q.inc.rank == p.inc.rank && q.inc.slot == p.inc.slot);
  FUZZ_CHECK(q.inc.count == p.inc.count && q.inc.key == p.inc.key && q.inc.exponent == p.inc.exponent);
  FUZZ_CHECK(q.inc.root_rank == p.inc.root_rank && q.inc.reserved == p.inc.reserved);
  FUZZ_CHECK(q.imm == p.inc.msg_id);
  FUZZ_CHECK(q.payload_len == p.payload_len);
  FUZZ_CHECK(p.payload_len == 0 || std::memcmp(q.payload, p.payload, p.payload_len) == 0);
  return 0;
}
