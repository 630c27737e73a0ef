// SPDX-License-Identifier: Apache-2.0
// Names of counters and drop reasons as the agent, the CLI and the tests
// print them.
#include "datapath/datapath.h"

namespace inc::dp {

const char* DropReasonName(int reason) {
  switch (reason) {
    case INC_DROP_NONE: return "none";
    case INC_DROP_TRUNC_ETH: return "truncated_eth";
    case INC_DROP_TRUNC_IP: return "truncated_ip";
    case INC_DROP_BAD_IP: return "bad_ip";
    case INC_DROP_TRUNC_UDP: return "truncated_udp";
    case INC_DROP_BAD_UDP_LEN: return "bad_udp_length";
    case INC_DROP_TRUNC_BTH: return "truncated_bth";
    case INC_DROP_BAD_OPCODE: return "bad_opcode";
    case INC_DROP_TRUNC_RETH: return "truncated_reth";
    case INC_DROP_TRUNC_INC: return "truncated_inc";
    case INC_DROP_BAD_VERSION: return "bad_version";
    case INC_DROP_UNKNOWN_TREE: return "unknown_tree";
    case INC_DROP_BAD_KEY: return "bad_key";
    case INC_DROP_BAD_SLOT: return "bad_slot";
    case INC_DROP_BAD_COUNT: return "bad_count";
    case INC_DROP_BAD_DTYPE_OP: return "bad_dtype_op";
    case INC_DROP_BAD_RANK: return "bad_rank";
    case INC_DROP_BAD_SOURCE: return "bad_source";
    case INC_DROP_BAD_ICRC: return "bad_icrc";
    case INC_DROP_STALE: return "stale";
    case INC_DROP_DUPLICATE: return "duplicate";
    case INC_DROP_EXP_MISMATCH: return "exponent_mismatch";
    case INC_DROP_BAD_RESULT: return "bad_result";
    case INC_DROP_NO_PORT: return "no_port";
    case INC_DROP_NO_ROOM: return "no_room";
    case INC_DROP_INTERNAL: return "internal";
    case INC_DROP_BAD_PORT: return "bad_port";
    case INC_DROP_BAD_AUX: return "bad_aux";
    default: return "unknown";
  }
}

const char* StatName(int stat) {
  switch (stat) {
    case INC_STAT_RX_PACKETS: return "rx_packets";
    case INC_STAT_RX_INC: return "rx_inc";
    case INC_STAT_PASS: return "pass";
    case INC_STAT_CONTRIB: return "contributions";
    case INC_STAT_COMPLETIONS: return "completions";
    case INC_STAT_RESULTS_TX: return "results_tx";
    case INC_STAT_PARTIALS_TX: return "partials_tx";
    case INC_STAT_RETRANS_RX: return "retransmissions_rx";
    case INC_STAT_RESENDS: return "resends";
    case INC_STAT_DROPS: return "drops";
    case INC_STAT_PULLS_TX: return "pulls_tx";
    case INC_STAT_PULL_ANSWERS: return "pull_answers";
    case INC_STAT_PULLS_IGNORED: return "pulls_ignored";
    case INC_STAT_ADOPTED: return "results_adopted";
    default: return "unknown";
  }
}

bool Endpoint::operator==(const Endpoint& o) const {
  return port == o.port && peer_mac == o.peer_mac && peer_ip == o.peer_ip && peer_qpn == o.peer_qpn &&
         switch_qpn == o.switch_qpn && rkey == o.rkey && va_base == o.va_base &&
         slot_stride == o.slot_stride && member_lo == o.member_lo && member_hi == o.member_hi;
}

bool TreeSpec::operator==(const TreeSpec& o) const {
  return tree_id == o.tree_id && key == o.key && role == o.role && pool_size == o.pool_size &&
         max_elems == o.max_elems && slot_base == o.slot_base && dtype_mask == o.dtype_mask &&
         op_mask == o.op_mask && coll_mask == o.coll_mask && children == o.children && parent == o.parent &&
         rank_at_parent == o.rank_at_parent;
}

}  // namespace inc::dp
