// SPDX-License-Identifier: Apache-2.0
// C++ view of bpf/include/inc_tree.h: pins every size and offset of the tree
// maps (several are pinned and outlive the agent that wrote them).
#pragma once

#include <cstddef>

#include "common/abi/wire.h"
#include "inc_tree.h"

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
static_assert(INC_DROP_BAD_PORT == 26 && INC_DROP_BAD_AUX == 27 && INC_DROP__MAX == 28,
              "drop reasons are appended at the end");
static_assert(INC_MAX_PAYLOAD_BYTES % 8 == 0);
// bpf/ masks payload lengths with 0xfff for the verifier.
static_assert(INC_MAX_WIRE_PAYLOAD_BYTES <= 0xfff);
// A frame stays one linear XDP buffer: a 4 KiB page minus XDP_PACKET_HEADROOM
// (256) and skb_shared_info (320 on x86-64), as veth and BPF_PROG_TEST_RUN lay it out.
// A leaf's partial with its certificate trailer is the largest frame.
static_assert(INC_FRAME_OVERHEAD + INC_MAX_WIRE_PAYLOAD_BYTES <= 4096 - 256 - 320);
static_assert(offsetof(inc_slot, acc) == 32);
static_assert(sizeof(inc_slot) == 32 + 2 * INC_MAX_PAYLOAD_BYTES, "slot: header + one int64 per 4-byte lane");
static_assert(INC_XPOW_ENTRIES == (4 + sizeof(inc_hdr) + INC_MAX_WIRE_PAYLOAD_BYTES) / 4 + 1,
              "xpow covers every |R|");

static_assert(offsetof(inc_slot, msg_id) == 4);
static_assert(offsetof(inc_slot, bitmap) == 8);
static_assert(offsetof(inc_slot, state) == 16);
static_assert(offsetof(inc_slot, flags) == 22);
static_assert(offsetof(inc_slot, count) == 24);
static_assert(offsetof(inc_slot, aux_code) == 26);
// The slot-only flag never collides with a wire flag kept in the same byte.
static_assert((INC_SLOT_FLAG_UNCERTIFIED & INC_FLAGS_MASK) == 0);
// The second half of acc holds the certificate: 768 u32 or 384 u64 abs sums,
// or the trailer words.
static_assert(sizeof(inc_slot::acc) / 2 == INC_MAX_PAYLOAD_BYTES &&
              INC_CERT_TRAILER_BYTES <= INC_MAX_PAYLOAD_BYTES);
// The slots map is pinned and survives agent restarts: a new agent must read
// what the previous one left, so the key and value layouts never change.
static_assert(sizeof(inc_port_key) == 8, "inc_port_key layout");
static_assert(offsetof(inc_port_key, tree_id) == 4);
