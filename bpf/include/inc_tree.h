/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * incin aggregation-tree ABI: the keys and values of the tree maps of the
 * INC data path (trees, children, slots, counters) and the drop reasons.
 * Pinned by userspace/common/abi/tree.h.
 * Wire structs are in network byte order; map structs in host byte order
 * unless a field is typed __be*. docs/wire-format.md follows the ABI headers.
 */
#ifndef INC_TREE_H
#define INC_TREE_H

#include <linux/types.h>
#include <linux/bpf.h> /* struct bpf_spin_lock in struct inc_slot */

#include "inc_wire.h"

#define INC_MAX_TREES 1024 /* tree ids 1..1023; 0 is never valid */

enum inc_role {
	INC_ROLE_SINGLE = 1, /* root whose children are all members */
	INC_ROLE_LEAF = 2,   /* non-root: sends partials to a parent */
	INC_ROLE_ROOT = 3,   /* root of a multi-level tree */
};

/* One RoCEv2 peer of a switch (a member or a neighbouring switch) in a tree,
 * seen from the switch. Host byte order except the addresses. */
struct inc_endpoint {
	__u32 ifindex; /* switch port that reaches the peer */
	__u8 peer_mac[6];
	__u8 port_mac[6]; /* MAC of that switch port (source of our frames) */
	__be32 peer_ip;
	__be32 switch_ip;  /* address the peer's QP is connected to */
	__u32 peer_qpn;	   /* DestQP of frames toward the peer */
	__u32 switch_qpn;  /* DestQP the peer's frames carry toward us */
	__u32 rkey;	   /* peer's result-buffer rkey */
	__u32 slot_stride; /* bytes between slots in the peer's buffer */
	__u64 va_base;	   /* peer's result-buffer address for slot 0 */
	__u16 member_lo;   /* member indices [lo, hi) reachable through this peer */
	__u16 member_hi;   /* (for Reduce/Broadcast root routing) */
	__u32 flags;	   /* INC_EP_VALID */
};

#define INC_EP_VALID 0x1

/* Allowed-set bits (1 << enum value) for inc_tree_cfg masks. */
#define INC_BIT(v) (1u << (v))

/* Value of the trees map (key: tree id). */
struct inc_tree_cfg {
	__u32 key; /* tree secret; packets carry it in inc_hdr.key */
	__u8 role; /* enum inc_role */
	__u8 num_children;
	__u8 rank_at_parent;	    /* this switch's child index at its parent */
	__u8 flags;		    /* INC_TREE_ACTIVE */
	__u16 pool_size;	    /* S: slots per tree */
	__u16 max_elems;	    /* elements per packet limit */
	__u32 slot_base;	    /* first index of the tree's slots in the slot map */
	__u16 dtype_mask;	    /* INC_BIT(enum inc_dtype) accepted by this tree */
	__u8 op_mask;		    /* INC_BIT(enum inc_op) */
	__u8 coll_mask;		    /* INC_BIT(enum inc_collective) */
	__u32 generation;	    /* bumped by the agent on every reconfigure */
	__u64 children_mask;	    /* bit i: child i configured; full bitmap */
	struct inc_endpoint parent; /* valid for INC_ROLE_LEAF */
};

#define INC_TREE_ACTIVE 0x1

/* Drop and event reasons, indices into the per-CPU stats map. */
enum inc_drop_reason {
	INC_DROP_NONE = 0,
	INC_DROP_TRUNC_ETH,
	INC_DROP_TRUNC_IP,
	INC_DROP_BAD_IP, /* version, IHL, fragment, total length */
	INC_DROP_TRUNC_UDP,
	INC_DROP_BAD_UDP_LEN,
	INC_DROP_TRUNC_BTH,
	INC_DROP_BAD_OPCODE,
	INC_DROP_TRUNC_RETH,
	INC_DROP_TRUNC_INC,
	INC_DROP_BAD_VERSION,
	INC_DROP_UNKNOWN_TREE,
	INC_DROP_BAD_KEY,
	INC_DROP_BAD_SLOT,     /* slot >= pool or slot != msg_id mod pool */
	INC_DROP_BAD_COUNT,    /* count > max or frame length mismatch */
	INC_DROP_BAD_DTYPE_OP, /* dtype/op/collective not the tree's or slot's */
	INC_DROP_BAD_RANK,     /* rank not a configured child */
	INC_DROP_BAD_SOURCE,   /* source IP or DestQP not the child's */
	INC_DROP_BAD_ICRC,
	INC_DROP_STALE,	       /* message older than the slot copy holds */
	INC_DROP_DUPLICATE,    /* bit already set while aggregating */
	INC_DROP_EXP_MISMATCH, /* FP32 SUM exponent differs within a slot */
	INC_DROP_BAD_RESULT,   /* RESULT not from the tree's parent */
	INC_DROP_NO_PORT,      /* redirect target missing */
	INC_DROP_NO_ROOM,      /* frame could not grow to carry the result */
	INC_DROP_INTERNAL,     /* map lookup/helper failure (was XDP_ABORTED) */
	/* Appended, not grouped with BAD_SOURCE: pinned drop counters keep
	 * their indices across an upgrade. */
	INC_DROP_BAD_PORT, /* child's or parent's frame on another switch port */
	INC_DROP_BAD_AUX, /* threshold code differs within a slot, or a trailer where none may be */
	INC_DROP__MAX,
};

/* Global per-CPU counters (map stats, key: enum inc_stat). */
enum inc_stat {
	INC_STAT_RX_PACKETS = 0, /* every frame the program saw */
	INC_STAT_RX_INC,	 /* parsed as INC */
	INC_STAT_PASS,		 /* handed to the kernel (not INC) */
	INC_STAT_CONTRIB,	 /* contributions aggregated */
	INC_STAT_COMPLETIONS,	 /* slots completed at this switch */
	INC_STAT_RESULTS_TX,	 /* result copies sent to children */
	INC_STAT_PARTIALS_TX,	 /* partials sent upward */
	INC_STAT_RETRANS_RX,	 /* retransmissions received */
	INC_STAT_RESENDS,	 /* results or partials resent on retransmission */
	INC_STAT_DROPS,		 /* sum of all drop reasons */
	INC_STAT_PULLS_TX,	 /* root: pulls sent to child switches */
	INC_STAT_PULL_ANSWERS,	 /* leaf: held results sent up on a pull */
	INC_STAT_PULLS_IGNORED,	 /* leaf: pulls for a message not finished here */
	INC_STAT_ADOPTED,	 /* root: results adopted from a child */
	INC_STAT__MAX,
};

/* Per-tree and per-member counters (per-CPU maps tree_stats and
 * member_stats; member key = tree_id * INC_MAX_CHILDREN + rank). */
struct inc_counters {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 completions;
	__u64 retransmissions;
	__u64 drops;
	__u64 reserved;
};

/* ------------------------------------------- data-path map layout (v1) -- */

/* Map sizes. children, psn and member_stats are indexed per (tree, peer). */
#define INC_PEERS_PER_TREE    (INC_MAX_CHILDREN + 1) /* children, then parent */
#define INC_PEER_PARENT	      INC_MAX_CHILDREN	     /* psn index of the parent */
#define INC_MAX_PORT_CHILDREN 16384		     /* (tree, port) -> rank entries */
#define INC_MAX_PORTS	      256		     /* devmap entries */
#define INC_SLOT_COPIES	      2
/* xpow map: index |R| / 4 where R = IMMDT + INC header + payload (with a
 * certificate trailer on a leaf's partials). */
#define INC_XPOW_ENTRIES ((4 + 24 + INC_MAX_WIRE_PAYLOAD_BYTES) / 4 + 1)

static inline __u32 inc_child_index(__u32 tree_id, __u32 rank)
{
	return tree_id * INC_MAX_CHILDREN + rank;
}

static inline __u32 inc_psn_index(__u32 tree_id, __u32 peer)
{
	return tree_id * INC_PEERS_PER_TREE + peer;
}

/* Key of the port_child map: which child of a tree sits behind a port. */
struct inc_port_key {
	__u32 ifindex;
	__u16 tree_id;
	__u16 pad; /* 0 */
};

enum inc_slot_state {
	INC_SLOT_EMPTY = 0,
	INC_SLOT_AGGREGATING = 1,
	INC_SLOT_WAITING = 2, /* leaf: partial sent upward, waiting for RESULT */
	INC_SLOT_DONE = 3,    /* result known; kept for retransmissions */
};

/* inc_slot.flags besides the wire's INC_FLAG_OVERFLOW: never sent as such.
 * UNCERTIFIED: the message's result has an element below the certificate
 * threshold (judged here at completion, or taken from the parent's or a
 * child's RESULT); every result frame built from the slot then carries
 * INC_AUX_UNCERTIFIED. */
#define INC_SLOT_FLAG_UNCERTIFIED 0x80

/* Value of the slots map: one copy of one slot of one tree. Index =
 * (tree.slot_base + slot) * 2 + ((msg_id / pool_size) & 1). */
struct inc_slot {
	struct bpf_spin_lock lock;
	__u32 msg_id;
	__u64 bitmap; /* children that contributed */
	__u8 state;   /* enum inc_slot_state */
	__u8 collective;
	__u8 dtype;
	__u8 op;
	__s8 exponent;
	__u8 root_rank;
	__u8 flags; /* INC_FLAG_OVERFLOW: exact sum out of range, or a child's
		     * partial had it; INC_SLOT_FLAG_UNCERTIFIED */
	__u8 pad0;
	__u16 count;	/* elements of the (partial) result */
	__u16 aux_code; /* certificate threshold code C of an FP32/FP64 SUM
			 * (INC_AUX_CODE_MASK; 0: none, and for every other
			 * message unless a RESULT brought one) */
	__u32 pad2;
	/* While AGGREGATING a SUM: int64 lanes for INT32 (no lane can leave
	 * int64 in 2^32 adds), int32 lanes for FP32 and int64 lanes for FP64
	 * (quantised with headroom: already the wire format), or for INT64
	 * INC_MAX_PAYLOAD_BYTES / 8 int64 lanes followed by as many net wrap
	 * counts (+1 per carry out of int64, -1 per borrow).
	 * Otherwise, and once WAITING/DONE: the wire-format result, i.e. count
	 * little-endian lanes of the element size from byte 0.
	 * The second half (from acc[INC_MAX_PAYLOAD_BYTES / 8]) of an FP32/FP64
	 * SUM with a threshold code: on a single or leaf switch the abs sums
	 * A_i (u32 lanes for FP32, u64 for FP64) while AGGREGATING, on a leaf
	 * then the INC_CERT_TRAILER_WORDS words of its partial's trailer; on a
	 * root the OR of its children's trailers. */
	__u64 acc[INC_MAX_PAYLOAD_BYTES / 4];
};

#endif /* INC_TREE_H */
