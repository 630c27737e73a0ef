/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Credit gate of RoCEv2 flows across a WAN link (docs/credit.md
 * "Data path"). A frame of a credit flow goes to its next hop only when no
 * earlier frame of the flow waits and the flow's credit covers the frame's
 * length; otherwise it is diverted to the agent's hold queue (an AF_XDP
 * socket on the ingress queue), which sends it in order as credit returns.
 * Nothing waits silently: without a hold-queue socket the frame is dropped
 * and counted. Order within a flow holds because a flow's frames arrive on
 * one rx queue (RSS hashes the 5-tuple) and so are gated one after another. */
#ifndef INC_CREDIT_H
#define INC_CREDIT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "forward_maps.h" /* port_tx: the gate charges what the forwarder sent */
#include "credit_maps.h"

#define INC_CREDIT_NOT_MINE (-1) /* not a credit flow: next stage decides */

static __always_inline void inc_credit_stat(__u32 stat, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&credit_stats, &stat);

	if (v)
		*v += n;
}

/* Bytes that came in on this port and leave the switch: credit the agent
 * returns to the upstream behind the port (no entry: not an upstream). */
static __always_inline void inc_credit_freed(struct xdp_md *ctx, __u32 index, __u64 len)
{
	struct inc_credit_ingress_key key = {
	    .index = index,
	    .ifindex = ctx->ingress_ifindex,
	};
	__u64 *bytes = bpf_map_lookup_elem(&credit_ingress, &key);

	if (bytes)
		__sync_fetch_and_add(bytes, len);
}

/* Reserves len bytes of credit. Fetch-add first, give back on shortfall:
 * concurrent senders (both CPUs, the hold queue) can only under-spend. */
static __always_inline int inc_credit_take(struct inc_credit_counters *c, __u64 len)
{
	__u64 before = __sync_fetch_and_add(&c->consumed, len);

	if ((__s64)(c->granted - before) >= (__s64)len)
		return 1;
	__sync_fetch_and_add(&c->consumed, -len);
	return 0;
}

static __always_inline int inc_credit_hold(struct xdp_md *ctx, struct inc_credit_counters *c,
					   __u32 why)
{
	struct inc_credit_xsk_key key = {
	    .ifindex = ctx->ingress_ifindex,
	    .queue = ctx->rx_queue_index,
	};
	__u32 *slot = bpf_map_lookup_elem(&credit_xsk_slots, &key);

	if (!slot || !bpf_map_lookup_elem(&credit_xsks, slot)) {
		inc_credit_stat(INC_CREDIT_DROP_NO_QUEUE, 1);
		return XDP_DROP;
	}
	__sync_fetch_and_add(&c->queued, 1);
	__sync_fetch_and_add(&c->held, 1);
	inc_credit_stat(why, 1);
	return bpf_redirect_map(&credit_xsks, *slot, XDP_DROP);
}

/* Returns an XDP verdict for frames of credit flows, INC_CREDIT_NOT_MINE for
 * everything else (non-IPv4, non-UDP-4791, fragments, IP options, TTL <= 1,
 * unknown flows). */
static __always_inline int inc_credit_gate(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct inc_credit_flow_key key = {};
	struct ethhdr *eth = data;
	struct inc_credit_counters *c;
	struct inc_credit_flow *flow;
	struct inc_bth *bth;
	struct inc_port_tx *tx;
	struct udphdr *udp;
	struct iphdr *ip;
	__u32 idx, ifindex, csum;
	__u64 len = end - data;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return INC_CREDIT_NOT_MINE;
	ip = (struct iphdr *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    (ip->frag_off & bpf_htons(0x3fff)) || ip->ttl <= 1)
		return INC_CREDIT_NOT_MINE;
	udp = (struct udphdr *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(INC_ROCEV2_UDP_PORT))
		return INC_CREDIT_NOT_MINE;
	bth = (struct inc_bth *)(udp + 1);
	if ((void *)(bth + 1) > end) {
		inc_credit_stat(INC_CREDIT_DROP_MALFORMED, 1);
		return XDP_DROP;
	}
	key.saddr = ip->saddr;
	key.daddr = ip->daddr;
	key.sport = udp->source;
	key.dest_qpn = bpf_ntohl(bth->resv_destqp) & INC_QPN_MASK;
	flow = bpf_map_lookup_elem(&credit_flows, &key);
	if (!flow) {
		inc_credit_stat(INC_CREDIT_UNKNOWN_FLOW, 1);
		return INC_CREDIT_NOT_MINE;
	}
	idx = flow->index;
	c = bpf_map_lookup_elem(&credit_counters, &idx);
	if (!c) {
		inc_credit_stat(INC_CREDIT_DROP_BAD_INDEX, 1);
		return XDP_DROP;
	}
	if (flow->flags & INC_CREDIT_COUNT_ONLY) {
		inc_credit_freed(ctx, idx, len);
		inc_credit_stat(INC_CREDIT_DELIVERED, 1);
		return INC_CREDIT_NOT_MINE;
	}
	if (!(flow->flags & INC_CREDIT_HOP_VALID))
		return inc_credit_hold(ctx, c, INC_CREDIT_QUEUED_NO_HOP);
	if (*(volatile __u64 *)&c->queued)
		return inc_credit_hold(ctx, c, INC_CREDIT_QUEUED_BEHIND);
	if (!inc_credit_take(c, len))
		return inc_credit_hold(ctx, c, INC_CREDIT_QUEUED_NO_CREDIT);

	/* Routed like the forwarder does: TTL - 1 (RFC 1624), new MACs. */
	ip->ttl--;
	csum = (__u32)ip->check + bpf_htons(0x0100);
	ip->check = (__u16)(csum + (csum >> 16));
	__builtin_memcpy(eth->h_dest, flow->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, flow->smac, ETH_ALEN);
	ifindex = flow->ifindex;
	tx = bpf_map_lookup_elem(&port_tx, &ifindex);
	if (tx) {
		tx->packets++;
		tx->bytes += len;
	}
	inc_credit_freed(ctx, idx, len);
	inc_credit_stat(INC_CREDIT_FORWARDED, 1);
	inc_credit_stat(INC_CREDIT_FORWARDED_BYTES, len);
	return bpf_redirect(ifindex, 0);
}

#endif /* INC_CREDIT_H */
