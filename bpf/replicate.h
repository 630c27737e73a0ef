/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Turning a received frame into an outgoing result or partial, and addressing
 * it to one peer (child or parent): MACs, IPs, UDP source port, DestQP, PSN,
 * RETH VA/rkey and the ICRC patched from crc32_le(0, R). */
#ifndef INC_REPLICATE_H
#define INC_REPLICATE_H

#include "tree_maps.h"
#include "csum.h"
#include "parse.h"
#include "stats.h"

const volatile __u8 inc_ip_ttl = INC_IP_TTL_DEFAULT;
const volatile __u8 inc_ip_tos = INC_IP_TOS_DEFAULT;

#define INC_ERR_NO_ROOM (-2)

/* Grows the frame by delta bytes at its head: the headers move toward it and
 * the frame's end stays, so the payload bytes are stale and the caller writes
 * them (every caller that grows rewrites the payload from the slot). For a
 * buffer without tailroom: veth copies a frame that came from the stack
 * (AF_PACKET, AF_XDP copy mode) into a page-pool fragment sized to fit, so a
 * leaf could not add the certificate trailer to a partial of ~250-370
 * four-byte elements, and the root then certified nothing. The headroom
 * (XDP_PACKET_HEADROOM there) takes what a trailer needs. The headers are
 * staged in this CPU's scratch, whose contribution is merged by then. */
static __always_inline int inc_grow_at_head(struct xdp_md *ctx, int delta)
{
	__u32 zero = 0;
	struct inc_scratch *b = bpf_map_lookup_elem(&scratch, &zero);

	if (!b || bpf_xdp_load_bytes(ctx, 0, b->buf, INC_OFF_PAYLOAD))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -delta))
		return -1;
	return bpf_xdp_store_bytes(ctx, 0, b->buf, INC_OFF_PAYLOAD) ? -1 : 0;
}

/* Resizes the frame to carry payload_len bytes of INC payload and sets every
 * length field. Pointers in p are re-derived. Growing takes tailroom, else
 * headroom (inc_grow_at_head: the payload must then be rewritten). */
static __always_inline int inc_resize(struct xdp_md *ctx, struct inc_pkt *p, __u32 payload_len)
{
	int delta = (int)payload_len - (int)p->payload_len;

	if (payload_len > INC_MAX_WIRE_PAYLOAD_BYTES)
		return -1;
	/* Growing fails when the buffer has neither tailroom nor headroom
	 * enough, e.g. a count-0 ready that veth copied out of an skb
	 * (AF_XDP copy-mode or stack TX) growing to a whole result. */
	if (delta && bpf_xdp_adjust_tail(ctx, delta) && (delta < 0 || inc_grow_at_head(ctx, delta)))
		return INC_ERR_NO_ROOM;
	if (inc_pkt_load(ctx, p))
		return -1;
	p->payload_len = payload_len;
	p->ip->tot_len = bpf_htons(20 + 8 + INC_UDP_FIXED + payload_len);
	p->udp->len = bpf_htons(8 + INC_UDP_FIXED + payload_len);
	p->reth->dma_len = bpf_htonl(sizeof(struct inc_hdr) + payload_len);
	return 0;
}

/* Where a leaf keeps its partial's certificate trailer (inc_tree.h). */
#define INC_SLOT_TRAILER(s) ((s)->acc + INC_MAX_PAYLOAD_BYTES / 8)

/* Writes the slot's accumulator as the payload of a frame carrying `count`
 * elements (then the slot's certificate trailer if `trailer`) and returns
 * crc32_le(0, R) in *crc_r. The INC header is set to flags/rank/count/aux;
 * the other fields stay as received (they match the slot). The slot must be
 * stable (WAITING or DONE). */
static __always_inline int inc_build_from_slot(struct xdp_md *ctx, struct inc_pkt *p,
					       struct inc_slot *s, __u32 slot_idx, __u8 flags,
					       __u16 rank, __u32 count, __u16 aux, int trailer,
					       __u32 *crc_r)
{
	__u32 len = count * inc_dtype_size(s->dtype);
	__u32 crc;

	if (len > INC_MAX_PAYLOAD_BYTES)
		return -1;
	int err = inc_resize(ctx, p, len + (trailer ? INC_CERT_TRAILER_BYTES : 0));

	if (err)
		return err;
	if (len > 0 && bpf_xdp_store_bytes(ctx, INC_OFF_PAYLOAD, s->acc, len & 0xfff))
		return -1;
	if (trailer && bpf_xdp_store_bytes(ctx, INC_OFF_PAYLOAD + (len & 0xfff),
					   INC_SLOT_TRAILER(s), INC_CERT_TRAILER_BYTES))
		return -1;
	if (inc_pkt_load(ctx, p))
		return -1;
	p->inc->ver_flags = (INC_VERSION << 4) | flags;
	p->inc->rank = bpf_htons(rank);
	p->inc->count = bpf_htons(count);
	p->inc->aux = bpf_htons(aux);
	crc = inc_crc_r_head(0, p->data);
	crc = inc_crc_slot_acc(slot_idx, crc, len);
	if (trailer)
		crc = inc_crc_trailer(crc, INC_SLOT_TRAILER(s));
	*crc_r = crc;
	return 0;
}

/* aux of every result frame built from the slot: the message's threshold
 * code and whether an element is uncertified (0 for uncertified kinds of
 * message, whose slots hold no code). */
static __always_inline __u16 inc_result_aux(const struct inc_slot *s)
{
	return s->aux_code | (s->flags & INC_SLOT_FLAG_UNCERTIFIED ? INC_AUX_UNCERTIFIED : 0);
}

/* Grows a partial of len element bytes to carry its certificate trailer.
 * Fails (and the partial goes without it, certifying nothing at the root)
 * when the frame has no tailroom, or when the longer frame would exceed the
 * MTU of the parent's port, which would drop it silently and stall the
 * message; the AM sizes packets for the elements alone. */
static __always_inline int inc_grow_for_trailer(struct xdp_md *ctx, struct inc_pkt *p,
						const struct inc_endpoint *ep, __u32 len)
{
	__u32 mtu_len = 20 + 8 + INC_UDP_FIXED + len + INC_CERT_TRAILER_BYTES;

	if (len > INC_MAX_PAYLOAD_BYTES || bpf_check_mtu(ctx, ep->ifindex, &mtu_len, 0, 0))
		return -1;
	return inc_resize(ctx, p, len + INC_CERT_TRAILER_BYTES);
}

static __always_inline int inc_store_icrc_field(struct xdp_md *ctx, struct inc_pkt *p, __u32 value)
{
	return bpf_xdp_store_bytes(ctx, INC_OFF_PAYLOAD + (p->payload_len & 0xfff), &value,
				   sizeof(value));
}

static __always_inline int inc_load_icrc_field(struct xdp_md *ctx, struct inc_pkt *p, __u32 *value)
{
	return bpf_xdp_load_bytes(ctx, INC_OFF_PAYLOAD + (p->payload_len & 0xfff), value,
				  sizeof(*value));
}

/* Addresses the frame to ep (PSN from psn[psn_key]) and writes its ICRC. */
static __always_inline int inc_address(struct xdp_md *ctx, struct inc_pkt *p,
				       const struct inc_endpoint *ep, __u32 psn_key, __u32 crc_r)
{
	__u32 *next_psn = bpf_map_lookup_elem(&psn, &psn_key);
	__u32 seq = 0, icrc;
	__u16 slot = bpf_ntohs(p->inc->slot);
	__u8 *eth = p->data;

	if (next_psn)
		seq = __sync_fetch_and_add(next_psn, 1);
	__builtin_memcpy(eth, ep->peer_mac, 6);
	__builtin_memcpy(eth + 6, ep->port_mac, 6);

	p->ip->version = 4;
	p->ip->ihl = 5;
	p->ip->tos = inc_ip_tos;
	p->ip->id = 0;
	p->ip->frag_off = bpf_htons(0x4000); /* DF */
	p->ip->ttl = inc_ip_ttl;
	p->ip->protocol = IPPROTO_UDP;
	p->ip->saddr = ep->switch_ip;
	p->ip->daddr = ep->peer_ip;
	p->ip->check = 0;
	p->ip->check = inc_ip_csum((const __u8 *)p->ip);

	p->udp->source = bpf_htons(INC_UDP_SPORT_BASE | (ep->switch_qpn & 0x3fff));
	p->udp->dest = bpf_htons(INC_ROCEV2_UDP_PORT);
	p->udp->check = 0;

	p->bth->opcode = INC_BTH_OPCODE_UC_WRITE_ONLY_IMM;
	p->bth->flags = INC_BTH_SE;
	p->bth->pkey = bpf_htons(INC_BTH_PKEY_DEFAULT);
	p->bth->resv_destqp = bpf_htonl(ep->peer_qpn & INC_QPN_MASK);
	p->bth->ack_psn = bpf_htonl(seq & INC_PSN_MASK);

	p->reth->va = bpf_cpu_to_be64(ep->va_base + (__u64)slot * ep->slot_stride);
	p->reth->rkey = bpf_htonl(ep->rkey);

	if (inc_icrc_combine(inc_crc_headers(p->data), crc_r,
			     4 + sizeof(struct inc_hdr) + p->payload_len, &icrc))
		return -1;
	return inc_store_icrc_field(ctx, p, icrc);
}

/* Sends the addressed frame out of ep's port. */
static __always_inline int inc_forward(struct xdp_md *ctx, const struct inc_endpoint *ep)
{
	if (ep->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(ep->ifindex, 0);
}

/* Reduce: only the child whose members include the root gets the elements. */
static __always_inline int inc_child_gets_data(const struct inc_endpoint *ep, __u8 collective,
					       __u8 root_rank)
{
	return collective != INC_COLL_REDUCE ||
	       (root_rank >= ep->member_lo && root_rank < ep->member_hi);
}

enum inc_emit_mode {
	INC_EMIT_BROADCAST = 0, /* result to every child (devmap broadcast) */
	INC_EMIT_RESEND_RESULT, /* result to one child */
	INC_EMIT_PARTIAL,	/* partial aggregate to the parent */
	INC_EMIT_RESEND_PARTIAL,
	INC_EMIT_PULL,		 /* root: ask every child switch for the message */
	INC_EMIT_RESULT_UP,	 /* leaf: the held result to the parent, on a pull */
	INC_EMIT_FORWARD_RESULT, /* leaf: the parent's RESULT, as it is, to every child */
};

/* Turns the received frame into the slot's result or partial and sends it
 * (enum inc_emit_mode). Global (verified once) so the CRC and copy loops are
 * not re-verified at every call site. */
__attribute__((noinline)) int inc_emit(struct xdp_md *ctx, __u32 slot_idx, __u32 tree_id,
				       __u32 rank, __u32 mode)
{
	const struct inc_endpoint *ep;
	struct inc_tree_cfg *tree;
	struct inc_slot *s;
	struct inc_pkt p;
	__u32 crc_r, udp_len, count, idx, psn_key;
	__u16 out_rank, aux;
	__u8 flags;
	int err, trailer = 0;

	s = bpf_map_lookup_elem(&slots, &slot_idx);
	tree = bpf_map_lookup_elem(&trees, &tree_id);
	if (!s || !tree || tree_id >= INC_MAX_TREES || inc_pkt_load(ctx, &p))
		return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
	udp_len = bpf_ntohs(p.udp->len);
	if (udp_len < 8 + INC_UDP_FIXED)
		return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
	p.payload_len = udp_len - 8 - INC_UDP_FIXED;
	count = s->count;

	if (mode == INC_EMIT_FORWARD_RESULT) {
		/* The parent's RESULT already carries the payload and INC header
		 * the children get, and crc32_le(0, R) follows from its ICRC with
		 * one multiplication (ICRC = ~(crc(H) x^(8|R|) + crc(0, R))), so
		 * neither is rebuilt. A frame damaged on the way keeps an ICRC
		 * that its members reject. */
		__u32 icrc, xkey, *xp;

		if (p.payload_len > INC_MAX_WIRE_PAYLOAD_BYTES ||
		    inc_load_icrc_field(ctx, &p, &icrc))
			return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
		xkey = (4 + sizeof(struct inc_hdr) + p.payload_len) / 4;
		xp = bpf_map_lookup_elem(&xpow, &xkey);
		if (!xp)
			return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
		crc_r = ~icrc ^ inc_crc_mulmodp(inc_crc_headers(p.data), *xp);
		if (inc_store_icrc_field(ctx, &p, crc_r))
			return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
		return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
	}

	if (mode == INC_EMIT_PARTIAL || mode == INC_EMIT_RESEND_PARTIAL ||
	    mode == INC_EMIT_RESULT_UP) {
		ep = &tree->parent;
		psn_key = inc_psn_index(tree_id, INC_PEER_PARENT);
		flags = s->flags & INC_FLAG_OVERFLOW;
		if (mode == INC_EMIT_RESEND_PARTIAL)
			flags |= INC_FLAG_RETRANSMIT;
		out_rank = tree->rank_at_parent;
		if (mode == INC_EMIT_RESULT_UP) {
			flags |= INC_FLAG_RESULT;
			aux = inc_result_aux(s);
		} else {
			/* A partial of a certified message carries the leaf's
			 * trailer (inc_finish_slot wrote it) when it fits. */
			aux = s->aux_code;
			if (aux &&
			    !inc_grow_for_trailer(ctx, &p, ep, count * inc_dtype_size(s->dtype))) {
				trailer = 1;
				aux |= INC_AUX_TRAILER;
			}
		}
	} else if (mode == INC_EMIT_PULL) {
		flags = INC_FLAG_PULL;
		out_rank = INC_RANK_RESULT;
		count = 0;
		aux = 0;
		ep = 0;
		psn_key = 0;
	} else {
		flags = INC_FLAG_RESULT | (s->flags & INC_FLAG_OVERFLOW);
		aux = inc_result_aux(s);
		out_rank = INC_RANK_RESULT;
		ep = 0;
		psn_key = 0;
		if (mode == INC_EMIT_RESEND_RESULT) {
			if (rank >= INC_MAX_CHILDREN)
				return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
			idx = inc_child_index(tree_id, rank);
			ep = bpf_map_lookup_elem(&children, &idx);
			if (!ep)
				return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
			psn_key = inc_psn_index(tree_id, rank);
			if (!inc_child_gets_data(ep, s->collective, s->root_rank))
				count = 0;
		}
	}
	err =
	    inc_build_from_slot(ctx, &p, s, slot_idx, flags, out_rank, count, aux, trailer, &crc_r);
	if (err)
		return inc_drop(err == INC_ERR_NO_ROOM ? INC_DROP_NO_ROOM : INC_DROP_INTERNAL,
				tree_id, rank);
	if (!ep) {
		/* Every copy is addressed by the egress program, which finds
		 * crc32_le(0, R) in the ICRC field. */
		if (inc_store_icrc_field(ctx, &p, crc_r))
			return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
		return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
	}
	if (inc_address(ctx, &p, ep, psn_key, crc_r))
		return inc_drop(INC_DROP_INTERNAL, tree_id, rank);
	if (mode == INC_EMIT_PARTIAL) {
		inc_stat_add(INC_STAT_PARTIALS_TX, 1);
	} else if (mode == INC_EMIT_RESULT_UP) {
		inc_stat_add(INC_STAT_PULL_ANSWERS, 1);
	} else {
		inc_stat_add(INC_STAT_RESENDS, 1);
		if (mode == INC_EMIT_RESEND_RESULT)
			inc_stat_add(INC_STAT_RESULTS_TX, 1);
	}
	inc_count_tx(tree_id, ep == &tree->parent ? INC_MAX_CHILDREN : rank, p.frame_len);
	return inc_forward(ctx, ep);
}

#endif /* INC_REPLICATE_H */
