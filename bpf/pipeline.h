/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The INC stage of the two XDP programs: ingress (parse, validate,
 * aggregate, emit) and the devmap egress rewrite of each broadcast copy. The
 * entry program (inc_switch.bpf.c) chains the stages. */
#ifndef INC_PIPELINE_H
#define INC_PIPELINE_H

#include "tree_maps.h"
#include "aggregate.h"

/* inc_ingress's answer for a frame that is not INC traffic: the entry
 * program hands it to the next stage (credit gate, forwarder, kernel). */
#define INC_NOT_INC (-1)

/* Global (verified once) so the CRC and copy loops are not re-verified at
 * every call site. Checks the ICRC of the received frame whose payload is
 * already in scratch (the caller's scratch value). Returns 1 if it matches. */
__attribute__((noinline)) int inc_verify_icrc_of(struct xdp_md *ctx,
						 const struct inc_scratch *payload)
{
	__u32 crc, wire, udp_len, len, trailer;
	struct inc_pkt p;

	if (!payload || inc_pkt_load(ctx, &p))
		return 0;
	udp_len = bpf_ntohs(p.udp->len);
	if (udp_len < 8 + INC_UDP_FIXED)
		return 0;
	len = udp_len - 8 - INC_UDP_FIXED;
	trailer = bpf_ntohs(p.inc->aux) & INC_AUX_TRAILER ? INC_CERT_TRAILER_BYTES : 0;
	p.payload_len = len;
	len -= trailer;
	if (len > INC_MAX_PAYLOAD_BYTES)
		return 0;
	crc = inc_crc_headers(p.data);
	crc = inc_crc_r_head(crc, p.data);
	crc = inc_crc_buf(crc, payload->buf, len);
	if (trailer)
		crc = inc_crc_trailer(crc, payload->trailer);
	if (inc_load_icrc_field(ctx, &p, &wire))
		return 0;
	return ~crc == wire;
}

/* What the ingress checks learn about an INC frame on the way to its slot. */
struct inc_ingress_frame {
	struct inc_pkt p;
	struct inc_tree_cfg *tree;
	struct inc_counters *tc; /* the tree's counters (may be absent) */
	__u32 tree_id, msg, slot_no, count, len, trailer;
	__u32 rank; /* the sending child, INC_MAX_CHILDREN for the parent */
	__u32 from; /* inc_update_slot's sender (INC_FROM_*) */
	__u8 coll, flags;
};

/* inc_admit's and inc_identify's answer to go on to the slot. */
#define INC_GO_ON (-2)

/* The header against its tree: the tree, its key, the slot for the message,
 * collective/type/op, the certificate bits and the element count. Returns
 * INC_GO_ON or the XDP action of a counted drop. */
static __always_inline int inc_admit(struct inc_ingress_frame *f)
{
	struct inc_hdr *h = f->p.inc;
	struct inc_tree_cfg *tree;
	__u8 dtype = h->dtype, op = h->op, coll = h->collective;
	__u32 elem;
	__u16 aux;

	f->tree_id = bpf_ntohs(h->tree_id);
	if (f->tree_id == 0 || f->tree_id >= INC_MAX_TREES)
		return inc_drop(INC_DROP_UNKNOWN_TREE, 0, INC_MAX_CHILDREN);
	tree = bpf_map_lookup_elem(&trees, &f->tree_id);
	if (!tree || !(tree->flags & INC_TREE_ACTIVE))
		return inc_drop(INC_DROP_UNKNOWN_TREE, 0, INC_MAX_CHILDREN);
	f->tree = tree;
	f->tc = inc_tree_counters(f->tree_id);
	if (f->tc) {
		f->tc->rx_packets++;
		f->tc->rx_bytes += f->p.frame_len;
	}
	if (bpf_ntohl(h->key) != tree->key)
		return inc_drop(INC_DROP_BAD_KEY, f->tree_id, INC_MAX_CHILDREN);

	f->msg = bpf_ntohl(h->msg_id);
	f->slot_no = bpf_ntohs(h->slot);
	if (tree->pool_size == 0 || f->slot_no >= tree->pool_size ||
	    f->msg % tree->pool_size != f->slot_no)
		return inc_drop(INC_DROP_BAD_SLOT, f->tree_id, INC_MAX_CHILDREN);

	if (coll >= 16 || !(tree->coll_mask & INC_BIT(coll)) ||
	    (coll != INC_COLL_BARRIER && (dtype >= 16 || !(tree->dtype_mask & INC_BIT(dtype)))) ||
	    ((coll == INC_COLL_ALLREDUCE || coll == INC_COLL_REDUCE) &&
	     (op >= 8 || !(tree->op_mask & INC_BIT(op)) ||
	      /* FP64 is a switch type for SUM only: MIN/MAX go as INT64 keys. */
	      (dtype == INC_DTYPE_FP64 && op != INC_OP_SUM) ||
	      /* Bitwise ops compute on integer lanes only. */
	      (inc_op_bitwise(op) && dtype != INC_DTYPE_INT32 && dtype != INC_DTYPE_INT64))))
		return inc_drop(INC_DROP_BAD_DTYPE_OP, f->tree_id, INC_MAX_CHILDREN);
	f->coll = coll;
	f->flags = h->ver_flags & 0xf;
	/* A certificate trailer comes only on a contribution (a leaf's partial)
	 * of a certified message with a threshold code; a switch that is not a
	 * root ignores its bits (see inc_combine_slot). */
	aux = bpf_ntohs(h->aux);
	f->trailer = aux & INC_AUX_TRAILER ? INC_CERT_TRAILER_BYTES : 0;
	if (f->trailer && ((f->flags & (INC_FLAG_RESULT | INC_FLAG_PULL)) ||
			   !(aux & INC_AUX_CODE_MASK) || !inc_certified_msg(coll, dtype, op)))
		return inc_drop(INC_DROP_BAD_AUX, f->tree_id, INC_MAX_CHILDREN);
	f->count = bpf_ntohs(h->count);
	elem = coll == INC_COLL_BARRIER ? 4 : inc_dtype_size(dtype);
	f->len = f->count * elem;
	if (f->count > tree->max_elems || f->len + f->trailer != f->p.payload_len ||
	    f->len > INC_MAX_PAYLOAD_BYTES || (coll == INC_COLL_BARRIER && f->count))
		return inc_drop(INC_DROP_BAD_COUNT, f->tree_id, INC_MAX_CHILDREN);
	return INC_GO_ON;
}

/* Who sent the frame: the parent (a RESULT or a PULL, leaf role) or a child
 * on its own port with its own address and QPN. Sets rank and from. Returns
 * INC_GO_ON or the XDP action of a counted drop. */
static __always_inline int inc_identify(struct xdp_md *ctx, struct inc_ingress_frame *f)
{
	const struct inc_tree_cfg *tree = f->tree;
	const struct inc_endpoint *ep;
	struct inc_counters *mc;
	__u8 flags = f->flags;
	__u32 rank, idx;

	if ((flags & INC_FLAG_PULL) || ((flags & INC_FLAG_RESULT) && tree->role == INC_ROLE_LEAF)) {
		/* From the parent: a RESULT, or a PULL of the result. */
		if (tree->role != INC_ROLE_LEAF || f->p.ip->saddr != tree->parent.peer_ip ||
		    (bpf_ntohl(f->p.bth->resv_destqp) & INC_QPN_MASK) != tree->parent.switch_qpn ||
		    (flags & INC_FLAG_PULL && flags & INC_FLAG_RESULT))
			return inc_drop(INC_DROP_BAD_RESULT, f->tree_id, INC_MAX_CHILDREN);
		/* Addresses and QPNs are in every frame on the wire, so anyone
		 * can copy them; the port a frame arrives on cannot be forged. */
		if (ctx->ingress_ifindex != tree->parent.ifindex)
			return inc_drop(INC_DROP_BAD_PORT, f->tree_id, INC_MAX_CHILDREN);
		f->rank = INC_MAX_CHILDREN;
		f->from = flags & INC_FLAG_PULL ? INC_FROM_PARENT_PULL : INC_FROM_PARENT;
		return INC_GO_ON;
	}
	rank = bpf_ntohs(f->p.inc->rank);
	f->rank = INC_MAX_CHILDREN;
	if (rank >= INC_MAX_CHILDREN || !(tree->children_mask & (1ull << rank)))
		return inc_drop(INC_DROP_BAD_RANK, f->tree_id, INC_MAX_CHILDREN);
	idx = inc_child_index(f->tree_id, rank);
	ep = bpf_map_lookup_elem(&children, &idx);
	if (!ep)
		return inc_drop(INC_DROP_BAD_RANK, f->tree_id, INC_MAX_CHILDREN);
	f->rank = rank;
	mc = inc_member_counters(f->tree_id, rank);
	if (mc) {
		mc->rx_packets++;
		mc->rx_bytes += f->p.frame_len;
	}
	if (f->p.ip->saddr != ep->peer_ip ||
	    (bpf_ntohl(f->p.bth->resv_destqp) & INC_QPN_MASK) != ep->switch_qpn)
		return inc_drop(INC_DROP_BAD_SOURCE, f->tree_id, rank);
	/* A copy of a child's frame (its IP, QPN and the tree key are all on
	 * the wire) injected at another port must not count as the child's
	 * contribution: the real one would then be a duplicate and the result
	 * wrong. */
	if (ctx->ingress_ifindex != ep->ifindex)
		return inc_drop(INC_DROP_BAD_PORT, f->tree_id, rank);
	f->from = rank;
	if (flags & INC_FLAG_RESULT) {
		/* A child switch answering the root's pull; a result a subtree
		 * gets without data (Reduce elsewhere) cannot stand for the
		 * group's. */
		if (tree->role != INC_ROLE_ROOT)
			return inc_drop(INC_DROP_BAD_RESULT, f->tree_id, rank);
		if (!inc_child_gets_data(ep, f->coll, f->p.inc->root_rank)) {
			inc_stat_add(INC_STAT_PULLS_IGNORED, 1);
			return XDP_DROP;
		}
		f->from = INC_FROM_CHILD_RESULT + rank;
	} else if (f->coll == INC_COLL_BROADCAST && f->count &&
		   (f->p.inc->root_rank < ep->member_lo || f->p.inc->root_rank >= ep->member_hi)) {
		/* Broadcast data comes only from the side of the root. */
		return inc_drop(INC_DROP_BAD_COUNT, f->tree_id, rank);
	}
	return INC_GO_ON;
}

/* What the frame does after the slot took it (inc_update_slot's outcome):
 * which frames go out, and the counters. */
static __always_inline int inc_dispatch(struct xdp_md *ctx, const struct inc_ingress_frame *f,
					__u32 idx, int r)
{
	__u32 tree_id = f->tree_id, rank = f->rank;
	struct inc_counters *mc;

	switch (r) {
	case INC_OUT_REPLICATE:
		return inc_emit(ctx, idx, tree_id, rank, INC_EMIT_FORWARD_RESULT);
	case INC_OUT_ADOPTED:
		inc_stat_add(INC_STAT_ADOPTED, 1);
		return inc_emit(ctx, idx, tree_id, rank, INC_EMIT_BROADCAST);
	case INC_OUT_RESULT_UP:
		return inc_emit(ctx, idx, tree_id, rank, INC_EMIT_RESULT_UP);
	case INC_OUT_PULL_IGNORED:
		inc_stat_add(INC_STAT_PULLS_IGNORED, 1);
		return XDP_DROP;
	case INC_OUT_CONSUMED:
		inc_stat_add(INC_STAT_CONTRIB, 1);
		return XDP_DROP;
	case INC_OUT_COMPLETE:
		inc_stat_add(INC_STAT_CONTRIB, 1);
		inc_stat_add(INC_STAT_COMPLETIONS, 1);
		if (f->tc)
			f->tc->completions++;
		return inc_emit(ctx, idx, tree_id, rank,
				f->tree->role == INC_ROLE_LEAF ? INC_EMIT_PARTIAL
							       : INC_EMIT_BROADCAST);
	case INC_OUT_RESEND_RESULT:
	case INC_OUT_RESEND_PARTIAL:
		inc_stat_add(INC_STAT_RETRANS_RX, 1);
		if (f->tc)
			f->tc->retransmissions++;
		mc = inc_member_counters(tree_id, rank);
		if (mc)
			mc->retransmissions++;
		/* Broadcast data resent from the root's side: if the frame that
		 * completed the slot was a ready too short to grow (no_room),
		 * no child has the result yet, so replicate it to all again. */
		if (r == INC_OUT_RESEND_RESULT && f->coll == INC_COLL_BROADCAST && f->count)
			return inc_emit(ctx, idx, tree_id, rank, INC_EMIT_BROADCAST);
		return inc_emit(ctx, idx, tree_id, rank,
				r == INC_OUT_RESEND_PARTIAL ? INC_EMIT_RESEND_PARTIAL
							    : INC_EMIT_RESEND_RESULT);
	default:
		if (r == INC_OUT_DROP_BASE + INC_DROP_DUPLICATE && f->from < INC_MAX_CHILDREN) {
			inc_stat_add(INC_STAT_RETRANS_RX, 1);
			if (f->tc)
				f->tc->retransmissions++;
			/* A child retransmits what the root already counted:
			 * another child may hold the result from before the
			 * tree moved here (section "Tree moves" of
			 * docs/wire-format.md), so ask them all. */
			if ((f->flags & INC_FLAG_RETRANSMIT) && f->tree->role == INC_ROLE_ROOT)
				return inc_emit(ctx, idx, tree_id, rank, INC_EMIT_PULL);
		}
		if (r >= INC_OUT_DROP_BASE)
			return inc_drop(r - INC_OUT_DROP_BASE, tree_id, rank);
		return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
	}
}

/* Parse, admit, identify the sender, load and check the payload, fold it
 * into its slot, dispatch the outcome. */
static __always_inline int inc_ingress(struct xdp_md *ctx)
{
	struct inc_ingress_frame f = {};
	struct inc_scratch *payload;
	__u32 zero = 0, idx, len;
	int r;

	inc_stat_add(INC_STAT_RX_PACKETS, 1);
	r = inc_parse(ctx, &f.p);
	if (r == INC_PARSE_PASS) {
		inc_stat_add(INC_STAT_PASS, 1);
		return INC_NOT_INC;
	}
	if (r)
		return inc_drop(r, 0, INC_MAX_CHILDREN);
	inc_stat_add(INC_STAT_RX_INC, 1);
	r = inc_admit(&f);
	if (r != INC_GO_ON)
		return r;
	r = inc_identify(ctx, &f);
	if (r != INC_GO_ON)
		return r;

	payload = bpf_map_lookup_elem(&scratch, &zero);
	if (!payload)
		return inc_drop(INC_DROP_INTERNAL, f.tree_id, f.rank);
	/* inc_admit bounded the length; said again here, where it comes back
	 * from the stack, so that the verifier sees a nonzero size below. */
	len = f.len;
	if (len > INC_MAX_PAYLOAD_BYTES)
		return inc_drop(INC_DROP_INTERNAL, f.tree_id, f.rank);
	if (len > 0 && bpf_xdp_load_bytes(ctx, INC_OFF_PAYLOAD, payload->buf, len))
		return inc_drop(INC_DROP_INTERNAL, f.tree_id, f.rank);
	if (f.trailer && bpf_xdp_load_bytes(ctx, INC_OFF_PAYLOAD + len, payload->trailer,
					    INC_CERT_TRAILER_BYTES))
		return inc_drop(INC_DROP_INTERNAL, f.tree_id, f.rank);
	if (inc_verify_icrc && !inc_verify_icrc_of(ctx, payload))
		return inc_drop(INC_DROP_BAD_ICRC, f.tree_id, f.rank);

	/* inc_update_slot looks the slot up (and drops bad_slot without it). */
	idx = (f.tree->slot_base + f.slot_no) * INC_SLOT_COPIES + ((f.msg / f.tree->pool_size) & 1);
	r = inc_update_slot(ctx, idx, f.tree, payload, f.from);
	return inc_dispatch(ctx, &f, idx, r);
}

/* Addresses one broadcast copy to the tree's child behind the egress port;
 * ports without a child of the tree drop their copy (not an error). */
static __always_inline int inc_egress(struct xdp_md *ctx)
{
	struct inc_port_key key = {};
	const struct inc_endpoint *ep;
	struct inc_pkt p;
	__u32 *rank, idx, crc_r, udp_len, stat;

	if (inc_pkt_load(ctx, &p))
		return XDP_DROP;
	udp_len = bpf_ntohs(p.udp->len);
	if (udp_len < 8 + INC_UDP_FIXED || udp_len - 8 - INC_UDP_FIXED > INC_MAX_PAYLOAD_BYTES)
		return XDP_DROP;
	p.payload_len = udp_len - 8 - INC_UDP_FIXED;
	key.ifindex = ctx->egress_ifindex;
	key.tree_id = bpf_ntohs(p.inc->tree_id);
	rank = bpf_map_lookup_elem(&port_child, &key);
	if (!rank || *rank >= INC_MAX_CHILDREN)
		return XDP_DROP;
	idx = inc_child_index(key.tree_id, *rank);
	ep = bpf_map_lookup_elem(&children, &idx);
	if (!ep || !(ep->flags & INC_EP_VALID))
		return XDP_DROP;
	if (p.payload_len && !inc_child_gets_data(ep, p.inc->collective, p.inc->root_rank)) {
		if (inc_resize(ctx, &p, 0))
			return XDP_DROP;
		p.inc->count = 0;
		crc_r = inc_crc_r_head(0, p.data);
	} else if (inc_load_icrc_field(ctx, &p, &crc_r)) {
		return XDP_DROP;
	}
	stat = p.inc->ver_flags & INC_FLAG_PULL ? INC_STAT_PULLS_TX : INC_STAT_RESULTS_TX;
	if (inc_address(ctx, &p, ep, inc_psn_index(key.tree_id, *rank), crc_r))
		return XDP_DROP;
	inc_stat_add(stat, 1);
	inc_count_tx(key.tree_id, *rank, p.frame_len);
	return XDP_PASS;
}

#endif /* INC_PIPELINE_H */
