/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * incin ABI: every wire struct and every BPF map key/value shared by the XDP
 * data path (C, clang -target bpf) and userspace (C++). Wire structs are in
 * network byte order; map structs are in host byte order unless a field is
 * typed __be*. docs/wire-format.md follows this file. C++ static_asserts the
 * sizes and offsets in userspace/common/abi.h.
 */
#ifndef INC_ABI_H
#define INC_ABI_H

#include <linux/types.h>
#include <linux/bpf.h> /* struct bpf_spin_lock in struct inc_slot */

/* ---------------------------------------------------------------- wire -- */

#define INC_ROCEV2_UDP_PORT		 4791
#define INC_BTH_OPCODE_UC_WRITE_ONLY_IMM 0x2B
#define INC_BTH_SE			 0x80 /* solicited event bit in bth.flags */
#define INC_BTH_PKEY_DEFAULT		 0xFFFF
#define INC_IP_TOS_DEFAULT		 0x6A /* DSCP 26 (AF31), ECT(0) */
#define INC_IP_TTL_DEFAULT		 64
#define INC_UDP_SPORT_BASE		 0xC000 /* | (source QPN & 0x3FFF) */
#define INC_QPN_MASK			 0x00FFFFFF
#define INC_PSN_MASK			 0x00FFFFFF
#define INC_ICRC_LEN			 4

#define INC_VERSION	    1
#define INC_FLAG_RESULT	    0x1
#define INC_FLAG_RETRANSMIT 0x2
#define INC_FLAG_OVERFLOW   0x4
/* Root -> child switches: "send me what you hold for this message". After a
 * tree moved to a new root, a leaf that already holds the old root's result
 * answers with it (RESULT from a child), so members that lost it recover. */
#define INC_FLAG_PULL  0x8
#define INC_FLAGS_MASK 0xF

#define INC_RANK_RESULT		     0xFFFF /* rank field of switch-to-member results */
#define INC_MAX_CHILDREN	     64
#define INC_DEFAULT_ELEMS_PER_PACKET 240 /* 24 + 960 bytes fit IB MTU 1024 */
/* Largest payload the data path handles: 3072 bytes (768 four-byte elements,
 * 384 eight-byte ones), a 3174-byte frame. That still fits one page with the
 * XDP headroom and skb_shared_info, so every frame stays a single-buffer XDP
 * buffer on veth (devmap broadcast cannot clone multi-buffer frames). Every
 * loop bound of bpf/ derives from it; the AM keeps counts at or below it. */
#define INC_MAX_PAYLOAD_BYTES 3072

enum inc_collective {
	INC_COLL_ALLREDUCE = 1,
	INC_COLL_REDUCE = 2,
	INC_COLL_BROADCAST = 3,
	INC_COLL_BARRIER = 4,
	INC_COLL_REDUCE_SCATTER = 5, /* host-level: Reduce per block */
	INC_COLL_ALLGATHER = 6,	     /* host-level: Broadcast per block */
};

enum inc_dtype {
	INC_DTYPE_INT32 = 1,
	INC_DTYPE_FP32 = 2,
	INC_DTYPE_INT64 = 3,
	INC_DTYPE_FP16 = 4, /* mapped onto FP32 by the host */
	INC_DTYPE_BF16 = 5, /* mapped onto FP32 by the host */
	INC_DTYPE_FP64 = 6, /* mapped onto INT64 fixed point by the host */
};

enum inc_op {
	INC_OP_SUM = 1,
	INC_OP_MIN = 2,
	INC_OP_MAX = 3,
};

/* Base Transport Header, 12 bytes. */
struct inc_bth {
	__u8 opcode;
	__u8 flags; /* SE(0x80) M(0x40) PadCnt(0x30) TVer(0x0f) */
	__be16 pkey;
	__be32 resv_destqp; /* byte 0: resv8 (FECN/BECN), bytes 1..3: DestQP */
	__be32 ack_psn;	    /* bit 31: AckReq, low 24 bits: PSN */
};

/* RDMA Extended Transport Header, 16 bytes; va is unaligned on the wire. */
struct inc_reth {
	__be64 va;
	__be32 rkey;
	__be32 dma_len;
} __attribute__((packed));

/* Immediate data, 4 bytes: the message id. */
struct inc_immdt {
	__be32 imm;
};

/* INC header, 24 bytes (docs/wire-format.md). */
struct inc_hdr {
	__u8 ver_flags; /* version << 4 | flags */
	__u8 collective;
	__u8 dtype;
	__u8 op;
	__be16 tree_id;
	__be16 rank;
	__be32 msg_id;
	__be16 slot;
	__be16 count;
	__be32 key;
	__s8 exponent;
	__u8 root_rank;
	__be16 reserved;
};

/* Byte offsets in an untagged IPv4 RoCEv2 INC frame. */
#define INC_OFF_IP	   14
#define INC_OFF_UDP	   34
#define INC_OFF_BTH	   42
#define INC_OFF_RETH	   54
#define INC_OFF_IMMDT	   70
#define INC_OFF_INC	   74
#define INC_OFF_PAYLOAD	   98
#define INC_FRAME_OVERHEAD (INC_OFF_PAYLOAD + INC_ICRC_LEN) /* 102 */

static inline __u32 inc_dtype_size(__u8 dtype)
{
	return dtype == INC_DTYPE_INT64 ? 8 : 4;
}

/* ------------------------------------------------------------ map ABI -- */

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
/* xpow map: index |R| / 4 where R = IMMDT + INC header + payload. */
#define INC_XPOW_ENTRIES ((4 + 24 + INC_MAX_PAYLOAD_BYTES) / 4 + 1)

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
	__u8 flags; /* INC_FLAG_OVERFLOW: exact sum out of range, or a child's partial had it */
	__u8 pad0;
	__u16 count; /* elements of the (partial) result */
	__u16 pad1;
	__u32 pad2;
	/* While AGGREGATING a SUM: int64 lanes for INT32 (no lane can leave
	 * int64 in 2^32 adds), int32 lanes for FP32 (quantised with headroom:
	 * already the wire format), or for INT64 INC_MAX_PAYLOAD_BYTES / 8
	 * int64 lanes followed by as many net wrap counts (+1 per carry out of
	 * int64, -1 per borrow).
	 * Otherwise, and once WAITING/DONE: the wire-format result, i.e. count
	 * little-endian lanes of the element size from byte 0. */
	__u64 acc[INC_MAX_PAYLOAD_BYTES / 4];
};

/* ------------------------------ best-path forwarding and ARN -- */

/* Non-INC IPv4 traffic that matches a best-path-table (BPT) prefix is
 * forwarded in XDP: among the prefix's next hops that are usable, the
 * lowest-cost ones share the flows by a 5-tuple hash (the UDP source port is
 * RoCEv2's entropy). What the BPT does not cover goes to the kernel. */
#define INC_BPT_MAX_HOPS     8
#define INC_BPT_MAX_PREFIXES 4096
#define INC_FWD_MAX_PORTS    INC_MAX_PORTS

/* Why a next hop (INC_HOP_*) or a port (INC_PORT_*) must not carry flows.
 * Congested hops are used only when no uncongested hop is left; failed
 * hops never. */
#define INC_HOP_CONGESTED  0x01 /* an ARN said a link on this path is congested */
#define INC_HOP_FAILED	   0x02 /* an ARN said a link on this path failed */
#define INC_PORT_CONGESTED 0x01
#define INC_PORT_FAILED	   0x02

/* Key of the bpt LPM trie (prefixlen counts bits of addr). */
struct inc_bpt_key {
	__u32 prefixlen;
	__u32 addr; /* network byte order */
};

struct inc_bpt_hop {
	__u32 ifindex; /* egress port */
	__u16 cost;    /* lower is preferred */
	__u8 flags;    /* INC_HOP_* */
	__u8 pad;
	__u8 dmac[6]; /* next hop's MAC */
	__u8 smac[6]; /* egress port's MAC */
};

struct inc_bpt_entry {
	__u32 nhops; /* valid entries of hops[] */
	__u32 pad;
	struct inc_bpt_hop hops[INC_BPT_MAX_HOPS];
};

/* Value of port_health (key: ifindex): local detection's verdict, applied to
 * every prefix at once. */
struct inc_port_health {
	__u32 flags; /* INC_PORT_* */
	__u32 pad;
};

/* Value of the per-CPU port_tx map (key: ifindex): what the forwarder sent
 * out of a port; incswitchd turns it into utilisation. */
struct inc_port_tx {
	__u64 packets;
	__u64 bytes;
};

/* Per-CPU counters of the forwarder (map fwd_stats, key: enum inc_fwd_stat). */
enum inc_fwd_stat {
	INC_FWD_FORWARDED = 0,	/* redirected by the BPT */
	INC_FWD_NO_ROUTE,	/* no BPT prefix: to the kernel */
	INC_FWD_TTL,		/* TTL <= 1 or IP options: to the kernel */
	INC_FWD_NO_PATH,	/* every next hop failed: to the kernel */
	INC_FWD_CONGESTED_PATH, /* only congested hops left: used anyway */
	INC_FWD__MAX,
};

/* ARN message (UDP payload on INC_ARN_PORT, DSCP CS6; big-endian fields).
 * One message reports one link of the origin switch. */
#define INC_ARN_PORT	49791
#define INC_ARN_VERSION 1
#define INC_ARN_MAGIC	0x41524e31 /* "ARN1" */

enum inc_arn_type {
	INC_ARN_CONGESTION_DETECTED = 1,
	INC_ARN_CONGESTION_ELIMINATED = 2,
	INC_ARN_LINK_FAILED = 3,
	INC_ARN_LINK_RESTORED = 4,
};

/* Severity: congestion levels 1..3 (mild, heavy, severe); failure has its
 * own level so receivers never confuse it with congestion. 0 = cleared. */
#define INC_ARN_SEVERITY_CLEAR	 0
#define INC_ARN_SEVERITY_FAILURE 15

struct inc_arn_msg {
	__be32 magic;
	__u8 version;
	__u8 type;		/* enum inc_arn_type */
	__u8 severity;		/* INC_ARN_SEVERITY_* or congestion level */
	__u8 flags;		/* 0 */
	__be32 origin;		/* switch id of the sender */
	__be32 peer;		/* switch id at the link's far end (0 = a host) */
	__be32 local_port;	/* the origin's port index of the link */
	__be32 seq;		/* per origin; receivers ignore seq <= last seen */
	__be64 timestamp_ns;	/* CLOCK_REALTIME at the origin */
	__be32 utilisation_ppm; /* link utilisation when sent, parts per million */
	__be32 auth;		/* truncated keyed digest of the bytes before it */
};

/* ------------------- benchmark: the packet-forwarding ceiling -- */

/* Map layout shared by bpf/fwd_ceiling.bpf.c (the forwarding ceiling of the
 * benchmark suite) and its loader netns-tests/bench/fwd_ceiling.cc. */
/* ICRC deltas are kept for UDP lengths 0..FWD_MAX_UDP_LEN-1. */
#define FWD_MAX_UDP_LEN 4096
#define FWD_MAX_PORTS	64

/*
 * One worker-facing port. Turning a member's contribution into a result
 * changes a fixed set of ICRC-covered bits (source/destination IPv4 swapped,
 * DestQP switch QPN -> member QPN, RESULT flag set); the ICRC is linear over
 * GF(2), so for a given UDP length the change of the ICRC is a constant that
 * the loader precomputes.
 */
struct fwd_port {
	__u32 member_qpn;
	__u32 reserved;
	__u32 icrc_delta[FWD_MAX_UDP_LEN]; /* XORed into the ICRC value */
};

enum fwd_stat {
	FWD_STAT_REFLECTED = 0, /* INC contribution sent back as a result */
	FWD_STAT_PASS,		/* not RoCEv2: kernel stack */
	FWD_STAT_UNKNOWN_PORT,	/* RoCEv2 on a port without a fwd_port entry: dropped */
	FWD_STAT_BAD_LENGTH,	/* UDP length disagrees with the frame or too long: dropped */
	FWD_STAT__MAX,
};

/* ------------------------- credit-based flow control -- */

/* RoCEv2 flows across a WAN link are forwarded only against credit that the
 * next hop granted (draft-hu-rtgwg-cbfc-rsvp-00, docs/credit.md "Data
 * path"). Credit is charged in bytes of the Ethernet frame as XDP sees it
 * (destination MAC to the ICRC, no FCS or preamble). A flow is keyed by
 * (IPv4 source, IPv4 destination, UDP source port, BTH DestQP): the UDP
 * source port alone can be shared by QPs (it is 0xC000 | QPN & 0x3FFF), the
 * DestQP alone is per receiver. */
#define INC_CREDIT_MAX_FLOWS 1024
#define INC_CREDIT_MAX_XSKS  256 /* hold-queue AF_XDP sockets (port, queue) */

/* Key of credit_flows. */
struct inc_credit_flow_key {
	__u32 saddr;	/* network byte order */
	__u32 daddr;	/* network byte order */
	__u16 sport;	/* UDP source port, network byte order */
	__u16 pad;	/* 0 */
	__u32 dest_qpn; /* BTH DestQP (24 bits), host order */
};

#define INC_CREDIT_HOP_VALID 0x1 /* else frames wait in the hold queue */
/* Receiver gateway: the flow's frames leave the credit domain here. The gate
 * only counts their bytes per ingress port (credit_ingress, the credit this
 * switch returns upstream) and passes them on to the forwarder/kernel. */
#define INC_CREDIT_COUNT_ONLY 0x2

/* Value of credit_flows: the flow's counter index and current next hop. The
 * agent replaces the whole entry on failover (one hash update, so XDP sees
 * either the old or the new hop, never a mix). */
struct inc_credit_flow {
	__u32 index;   /* into credit_counters, < INC_CREDIT_MAX_FLOWS */
	__u32 ifindex; /* egress port toward the next hop */
	__u8 dmac[6];  /* next hop's MAC */
	__u8 smac[6];  /* egress port's MAC */
	__u32 flags;   /* INC_CREDIT_HOP_* */
};

/* Element of the mmapable credit_counters array. Each field has one kind of
 * writer, so neither side clobbers the other:
 *   granted  - total bytes the next hop ever granted; stored by the agent only.
 *   consumed - total bytes sent; advanced only by atomic adds (XDP when it
 *              forwards, the hold queue when it drains). A sender reserves
 *              with fetch-add and gives the bytes back if the credit did not
 *              cover them, so consumed never passes granted for long and
 *              credit is never over-spent.
 *   queued   - frames now in the hold queue: XDP adds 1 before it diverts a
 *              frame, the hold queue subtracts 1 after it sent one.
 *   held     - frames ever diverted to the hold queue (statistics).
 * available = granted - consumed, modulo 2^64 (interpreted as signed). */
struct inc_credit_counters {
	__u64 granted;
	__u64 consumed;
	__u64 queued;
	__u64 held;
};

/* Key of credit_ingress: bytes of a flow that left this switch after coming
 * in on a port. A switch returns credit to each upstream for what it freed of
 * that upstream's bytes, and after a failover one flow arrives on two ports. */
struct inc_credit_ingress_key {
	__u32 index;   /* the flow's counter index */
	__u32 ifindex; /* ingress port */
};

/* Key of credit_xsk_slots: the hold-queue socket bound to an rx queue. */
struct inc_credit_xsk_key {
	__u32 ifindex;
	__u32 queue;
};

/* Per-CPU counters of the credit gate (map credit_stats). */
enum inc_credit_stat {
	INC_CREDIT_FORWARDED = 0,    /* credit covered it: sent to the next hop */
	INC_CREDIT_FORWARDED_BYTES,  /* bytes of those frames */
	INC_CREDIT_QUEUED_NO_CREDIT, /* to the hold queue: credit short */
	INC_CREDIT_QUEUED_BEHIND,    /* to the hold queue: earlier frames wait */
	INC_CREDIT_QUEUED_NO_HOP,    /* to the hold queue: no valid next hop */
	INC_CREDIT_DROP_NO_QUEUE,    /* had to wait but no hold-queue socket: dropped */
	INC_CREDIT_DROP_MALFORMED,   /* UDP 4791 frame too short for a BTH: dropped */
	INC_CREDIT_DROP_BAD_INDEX,   /* flow entry with index out of range: dropped */
	INC_CREDIT_UNKNOWN_FLOW,     /* RoCEv2 of no credit flow: to the forwarder */
	INC_CREDIT_DELIVERED,	     /* receiver gateway: counted, to the forwarder */
	INC_CREDIT__MAX,
};

#endif /* INC_ABI_H */
