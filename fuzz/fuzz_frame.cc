// SPDX-License-Identifier: Apache-2.0
// The RoCEv2/INC frame parser libinc runs on every frame its AF_XDP and XDP
// receive paths hand it (client/engine.cc: ParseFrame, CheckResultFrame, then
// the operation's Accept, which copies or decodes the payload into the user's
// buffer). Invariants: a parsed frame's payload lies inside the input; a
// frame rebuilt from the parsed fields parses back to the same fields with a
// good ICRC; a result the checks pass is written only inside a receive buffer
// sized for the operation (ASan watches its edges).
#include <cstring>
#include <vector>

#include "client/block_op.h"
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
  FUZZ_CHECK(q.inc.root_rank == p.inc.root_rank && q.inc.aux == p.inc.aux);
  FUZZ_CHECK(q.imm == p.inc.msg_id);
  FUZZ_CHECK(q.payload_len == p.payload_len);
  FUZZ_CHECK(p.payload_len == 0 || std::memcmp(q.payload, p.payload, p.payload_len) == 0);

  // The rebuilt frame has a good ICRC, so the result checks run to the end
  // when the member expects exactly this message.
  inc::client::ResultFilter expecting{q.dest_qpn, q.src_ip, q.inc.tree_id, q.inc.key, 1u << 16};
  if (q.inc.slot != inc::client::SlotOf(q.inc.msg_id, expecting.pool_size)) return 0;
  if (inc::client::CheckResultFrame(q, expecting) != inc::client::Reject::kNone) return 0;
  FUZZ_CHECK(q.inc.flags & INC_FLAG_RESULT);
  FUZZ_CHECK(q.payload_len == 0 || q.payload_len == size_t{q.inc.count} * inc_dtype_size(q.inc.dtype));

  // An operation of the frame's shape, one packet of inc.count elements (the
  // user's element type is what the codec decodes to).
  inc::client::BlockSpec spec_op;
  spec_op.collective = q.inc.collective;
  spec_op.wire_dtype = q.inc.dtype == INC_DTYPE_INT64 ? INC_DTYPE_INT64 : INC_DTYPE_INT32;
  spec_op.count = q.inc.count;
  spec_op.elems4 = 0xFFFF;  // a packet as large as the count field allows
  const int32_t exponents[2] = {q.inc.exponent, q.inc.exponent};
  size_t user_size = inc_dtype_size(spec_op.wire_dtype);
  switch (q.inc.op % 3) {
    case 1:
      spec_op.wire_dtype = INC_DTYPE_INT32;
      spec_op.codec = inc::client::Codec::kFixedF32;
      user_size = sizeof(float);
      break;
    case 2:
      spec_op.wire_dtype = INC_DTYPE_INT64;
      spec_op.codec = inc::client::Codec::kFixedF64;
      user_size = sizeof(double);
      break;
    default: break;
  }
  spec_op.exponents = exponents;
  spec_op.headroom = q.inc.root_rank % 8;
  std::vector<uint8_t> recv(size_t{q.inc.count} * user_size);
  spec_op.recv = recv.data();
  inc::client::BlockOperation op(spec_op);
  (void)op.Accept(0, q);
  return 0;
}
