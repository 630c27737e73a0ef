/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * incin wire ABI: the RoCEv2 headers an INC frame carries (BTH, RETH, IMMDT)
 * and the INC header behind them, with their constants and byte offsets.
 * Shared by the XDP programs (C) and userspace (C++), which pins the sizes
 * and offsets in userspace/common/abi/wire.h.
 * Wire structs are in network byte order; map structs in host byte order
 * unless a field is typed __be*. docs/wire-format.md follows the ABI headers.
 */
#ifndef INC_WIRE_H
#define INC_WIRE_H

#include <linux/types.h>

#include "inc_ops.h"

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

/* inc_hdr.aux: the accuracy certificate of FP32/FP64 SUM (AllReduce, Reduce).
 * Block fixed point is exact, but an element whose quantised values are tiny
 * on every rank next to its block's maximum keeps few significant bits; only
 * the switch sees every rank's lanes, so it tells the members which messages
 * hold such an element and they redo only those. Element i is certified iff
 * A_i = sum over all ranks of |lane i| >= T, T = (C & 0xFF) << ((C >> 8) &
 * 0x3F), where C is the threshold code the members send (the same in every
 * contribution of a message); C = 0: no certificate, never flagged. */
#define INC_AUX_CODE_MASK 0x3FFF
/* Leaf -> root partial: INC_CERT_TRAILER_BYTES follow the count elements,
 * 12 little-endian u64 words, bit i (word i / 64, bit i % 64) set iff A_i >= T
 * over the leaf's members (i < count; the other bits 0). */
#define INC_AUX_TRAILER 0x4000
/* Results (switch -> member, root -> leaf, every resend, count-0 Reduce
 * notices, pull answers): some element of the message is uncertified. */
#define INC_AUX_UNCERTIFIED    0x8000
#define INC_CERT_TRAILER_WORDS 12
#define INC_CERT_TRAILER_BYTES (INC_CERT_TRAILER_WORDS * 8)

#define INC_RANK_RESULT		     0xFFFF /* rank field of switch-to-member results */
#define INC_MAX_CHILDREN	     64
#define INC_DEFAULT_ELEMS_PER_PACKET 240 /* 24 + 960 bytes fit IB MTU 1024 */
/* Largest payload the data path handles: 3072 bytes (768 four-byte elements,
 * 384 eight-byte ones), a 3174-byte frame. That still fits one page with the
 * XDP headroom and skb_shared_info, so every frame stays a single-buffer XDP
 * buffer on veth (devmap broadcast cannot clone multi-buffer frames). Every
 * loop bound of bpf/ derives from it; the AM keeps counts at or below it. */
#define INC_MAX_PAYLOAD_BYTES 3072
/* Bytes between INC header and ICRC: elements, plus a leaf's certificate
 * trailer on its partials (3270-byte frames, still one page). */
#define INC_MAX_WIRE_PAYLOAD_BYTES (INC_MAX_PAYLOAD_BYTES + INC_CERT_TRAILER_BYTES)

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
	INC_DTYPE_FP64 = 6, /* SUM: int64 block fixed point (members quantise, the
			     * switch adds int64 lanes); MIN/MAX travel as
			     * INT64 ordered keys, mapped by the host */
};

/* From the op table (inc_ops.h). */
enum inc_op {
#define INC_OP_ENUM(name, camel, value, text, int_only) INC_OP_##name = value,
	INC_OP_TABLE(INC_OP_ENUM)
#undef INC_OP_ENUM
};

static inline int inc_op_bitwise(__u8 op)
{
	return op >= INC_OP_BAND && op <= INC_OP_BXOR;
}

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
	__be16 aux; /* INC_AUX_*: certificate threshold code and bits */
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
	return dtype == INC_DTYPE_INT64 || dtype == INC_DTYPE_FP64 ? 8 : 4;
}

/* Messages the switch certifies (inc_hdr.aux): float sums in block fixed
 * point. Every other message ignores the threshold code and its results carry
 * aux 0. */
static inline int inc_certified_msg(__u8 collective, __u8 dtype, __u8 op)
{
	return (collective == INC_COLL_ALLREDUCE || collective == INC_COLL_REDUCE) &&
	       op == INC_OP_SUM && (dtype == INC_DTYPE_FP32 || dtype == INC_DTYPE_FP64);
}

#endif /* INC_WIRE_H */
