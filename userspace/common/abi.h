// C++ view of bpf/include/inc_abi.h: includes it and pins every size and
// offset that the wire and the maps depend on.
#pragma once

#include <cstddef>

#include "inc_abi.h"

static_assert(sizeof(inc_bth) == 12, "BTH is 12 bytes");
static_assert(sizeof(inc_reth) == 16, "RETH is 16 bytes");
static_assert(sizeof(inc_immdt) == 4, "IMMDT is 4 bytes");
static_assert(sizeof(inc_hdr) == 24, "INC header is 24 bytes");
static_assert(offsetof(inc_hdr, tree_id) == 4);
static_assert(offsetof(inc_hdr, rank) == 6);
static_assert(offsetof(inc_hdr, msg_id) == 8);
static_assert(offsetof(inc_hdr, slot) == 12);
static_assert(offsetof(inc_hdr, count) == 14);
static_assert(offsetof(inc_hdr, key) == 16);
static_assert(offsetof(inc_hdr, exponent) == 20);
static_assert(offsetof(inc_hdr, root_rank) == 21);
static_assert(offsetof(inc_hdr, reserved) == 22);
static_assert(offsetof(inc_reth, rkey) == 8);
static_assert(offsetof(inc_reth, dma_len) == 12);
static_assert(INC_OFF_PAYLOAD == INC_OFF_INC + sizeof(inc_hdr));
static_assert(INC_OFF_INC == INC_OFF_IMMDT + sizeof(inc_immdt));
static_assert(INC_OFF_IMMDT == INC_OFF_RETH + sizeof(inc_reth));
static_assert(INC_OFF_RETH == INC_OFF_BTH + sizeof(inc_bth));

static_assert(sizeof(inc_endpoint) == 56, "inc_endpoint layout");
static_assert(offsetof(inc_endpoint, peer_ip) == 16);
static_assert(offsetof(inc_endpoint, va_base) == 40);
static_assert(offsetof(inc_endpoint, flags) == 52);
static_assert(offsetof(inc_tree_cfg, pool_size) == 8);
static_assert(offsetof(inc_tree_cfg, slot_base) == 12);
static_assert(offsetof(inc_tree_cfg, generation) == 20);
static_assert(offsetof(inc_tree_cfg, children_mask) == 24);
static_assert(offsetof(inc_tree_cfg, parent) == 32);
static_assert(sizeof(inc_tree_cfg) == 88, "inc_tree_cfg layout");
static_assert(sizeof(inc_counters) == 64, "inc_counters layout");
// Drop reasons index the pinned drops map: new ones are appended, so every
// number keeps its meaning for counters a previous agent left pinned.
static_assert(INC_DROP_BAD_SOURCE == 17 && INC_DROP_BAD_RESULT == 22 && INC_DROP_INTERNAL == 25);
static_assert(INC_DROP_BAD_PORT == 26 && INC_DROP__MAX == 27, "drop reasons are appended at the end");
static_assert(INC_MAX_PAYLOAD_BYTES % 8 == 0);
// bpf/ masks payload lengths with 0xfff for the verifier.
static_assert(INC_MAX_PAYLOAD_BYTES <= 0xfff);
// A frame stays one linear XDP buffer: a 4 KiB page minus XDP_PACKET_HEADROOM
// (256) and skb_shared_info (320 on x86-64), as veth and BPF_PROG_TEST_RUN lay it out.
static_assert(INC_FRAME_OVERHEAD + INC_MAX_PAYLOAD_BYTES <= 4096 - 256 - 320);
static_assert(offsetof(inc_slot, acc) == 32);
static_assert(sizeof(inc_slot) == 32 + 2 * INC_MAX_PAYLOAD_BYTES, "slot: header + one int64 per 4-byte lane");
static_assert(INC_XPOW_ENTRIES == (4 + sizeof(inc_hdr) + INC_MAX_PAYLOAD_BYTES) / 4 + 1,
              "xpow covers every |R|");
static_assert(sizeof(fwd_port) == 8 + 4 * FWD_MAX_UDP_LEN, "fwd_port layout (benchmark ceiling)");

// Credit flow control: map layouts of bpf/credit.h.
static_assert(sizeof(inc_credit_flow_key) == 16, "inc_credit_flow_key layout");
static_assert(offsetof(inc_credit_flow_key, sport) == 8);
static_assert(offsetof(inc_credit_flow_key, dest_qpn) == 12);
static_assert(sizeof(inc_credit_flow) == 24, "inc_credit_flow layout");
static_assert(offsetof(inc_credit_flow, dmac) == 8);
static_assert(offsetof(inc_credit_flow, smac) == 14);
static_assert(offsetof(inc_credit_flow, flags) == 20);
static_assert(sizeof(inc_credit_counters) == 32, "inc_credit_counters layout (mmaped)");
static_assert(offsetof(inc_credit_counters, consumed) == 8);
static_assert(offsetof(inc_credit_counters, queued) == 16);
static_assert(sizeof(inc_credit_xsk_key) == 8, "inc_credit_xsk_key layout");
