// SPDX-License-Identifier: Apache-2.0
#include "client/protocol.h"

namespace inc::client {

const char* RejectName(Reject r) {
  switch (r) {
    case Reject::kNone: return "none";
    case Reject::kMalformed: return "malformed";
    case Reject::kBadIcrc: return "bad_icrc";
    case Reject::kWrongQpn: return "wrong_qpn";
    case Reject::kWrongSource: return "wrong_source";
    case Reject::kBadVersion: return "bad_version";
    case Reject::kNotResult: return "not_result";
    case Reject::kWrongTree: return "wrong_tree";
    case Reject::kBadKey: return "bad_key";
    case Reject::kBadSlot: return "bad_slot";
    case Reject::kUnknownMessage: return "unknown_message";
    case Reject::kDuplicate: return "duplicate";
    case Reject::kMismatch: return "mismatch";
    case Reject::kCount: break;
  }
  return "?";
}

Reject CheckResultFrame(const ParsedFrame& f, const ResultFilter& want) {
  if (!f.icrc_ok) return Reject::kBadIcrc;
  if (f.dest_qpn != want.member_qpn) return Reject::kWrongQpn;
  if (want.switch_ip.host && f.src_ip != want.switch_ip) return Reject::kWrongSource;
  if (f.inc.version != INC_VERSION) return Reject::kBadVersion;
  if (!(f.inc.flags & INC_FLAG_RESULT)) return Reject::kNotResult;
  if (f.inc.tree_id != want.tree_id) return Reject::kWrongTree;
  if (f.inc.key != want.key) return Reject::kBadKey;
  if (want.pool_size == 0 || f.inc.slot != SlotOf(f.inc.msg_id, want.pool_size)) return Reject::kBadSlot;
  if (f.payload_len != size_t{f.inc.count} * inc_dtype_size(f.inc.dtype) && f.payload_len != 0)
    return Reject::kMismatch;
  return Reject::kNone;
}

}  // namespace inc::client
