/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Best-path forwarding of non-INC IPv4 traffic (docs/arn.md).
 *
 * The agent keeps one bpt entry per destination prefix: the next hops with
 * their cost and the INC_HOP_* marks that ARN messages from other switches
 * set; port_health carries this switch's own detection per egress port.
 * The forwarder picks among the usable next hops of the lowest cost by a
 * hash of the flow, so a flow keeps its path while the set is unchanged,
 * and skips a bad port or path the moment the agent marks it. Whatever the
 * table does not cover (ARP, IP options, TTL expiry, local addresses, no
 * usable path) goes to the kernel, which stays the fallback router. */
#ifndef INC_FORWARD_H
#define INC_FORWARD_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "forward_maps.h"

static __always_inline void inc_fwd_stat(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&fwd_stats, &stat);

	if (v)
		*v += 1;
}

/* Mixes the 5-tuple so that RoCEv2's UDP source port entropy spreads flows
 * over the hops (a multiply-xorshift finaliser: cheap and well spread). */
static __always_inline __u32 inc_flow_hash(__u32 saddr, __u32 daddr, __u32 ports, __u32 proto)
{
	__u64 h = ((__u64)saddr << 32 | daddr) * 0x9e3779b97f4a7c15ULL;

	h ^= ((__u64)ports << 8 | proto) + (h >> 29);
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (__u32)h;
}

static __always_inline __u8 inc_hop_badness(const struct inc_bpt_hop *hop)
{
	struct inc_port_health *ph;
	__u32 ifindex = hop->ifindex;
	__u8 bad = hop->flags;

	ph = bpf_map_lookup_elem(&port_health, &ifindex);
	if (ph) {
		if (ph->flags & INC_PORT_FAILED)
			bad |= INC_HOP_FAILED;
		if (ph->flags & INC_PORT_CONGESTED)
			bad |= INC_HOP_CONGESTED;
	}
	return bad;
}

/* Chooses a next hop of e for a flow hash: the lowest cost among hops that
 * are neither failed nor congested; if every live hop is congested, the
 * lowest cost among those. Returns the index or -1 (no live hop). */
static __always_inline int inc_pick_hop(const struct inc_bpt_entry *e, __u32 hash,
					int *congested_only)
{
	__u32 best_cost = 0x10000, ncand = 0, pick, i;
	__u8 bad[INC_BPT_MAX_HOPS];
	int want_congested = 0, seen = 0;

	/* Pass 1: the cheapest cost among the best class of live hops. */
	for (i = 0; i < INC_BPT_MAX_HOPS; i++) {
		if (i >= e->nhops)
			break;
		bad[i] = inc_hop_badness(&e->hops[i]);
	}
	for (i = 0; i < INC_BPT_MAX_HOPS; i++) {
		if (i >= e->nhops)
			break;
		if (bad[i] & INC_HOP_FAILED)
			continue;
		seen = 1;
		if (!(bad[i] & INC_HOP_CONGESTED) && e->hops[i].cost < best_cost)
			best_cost = e->hops[i].cost;
	}
	if (!seen)
		return -1;
	if (best_cost == 0x10000) {
		want_congested = 1;
		for (i = 0; i < INC_BPT_MAX_HOPS; i++) {
			if (i >= e->nhops)
				break;
			if (!(bad[i] & INC_HOP_FAILED) && e->hops[i].cost < best_cost)
				best_cost = e->hops[i].cost;
		}
	}
	/* Pass 2: count the candidates, then take the (hash mod n)-th. */
	for (i = 0; i < INC_BPT_MAX_HOPS; i++) {
		if (i >= e->nhops)
			break;
		if (!(bad[i] & INC_HOP_FAILED) &&
		    (want_congested || !(bad[i] & INC_HOP_CONGESTED)) &&
		    e->hops[i].cost == best_cost)
			ncand++;
	}
	if (!ncand)
		return -1;
	pick = hash % ncand;
	for (i = 0; i < INC_BPT_MAX_HOPS; i++) {
		if (i >= e->nhops)
			break;
		if (!(bad[i] & INC_HOP_FAILED) &&
		    (want_congested || !(bad[i] & INC_HOP_CONGESTED)) &&
		    e->hops[i].cost == best_cost) {
			if (pick == 0) {
				*congested_only = want_congested;
				return i;
			}
			pick--;
		}
	}
	return -1;
}

/* Forwards a non-INC frame by the BPT, or returns XDP_PASS for the kernel. */
static __always_inline int inc_bpt_forward(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct inc_bpt_key key = {};
	const struct inc_bpt_entry *e;
	const struct inc_bpt_hop *hop;
	struct inc_port_tx *tx;
	struct iphdr *ip;
	__u32 ports = 0, csum, ifindex;
	int idx, congested_only = 0;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (struct iphdr *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return XDP_PASS;
	key.prefixlen = 32;
	key.addr = ip->daddr;
	e = bpf_map_lookup_elem(&bpt, &key);
	if (!e) {
		inc_fwd_stat(INC_FWD_NO_ROUTE);
		return XDP_PASS;
	}
	if (e->nhops == 0) /* a local address of this switch */
		return XDP_PASS;
	if (ip->ihl != 5 || ip->ttl <= 1 || (ip->frag_off & bpf_htons(0x3fff))) {
		inc_fwd_stat(INC_FWD_TTL);
		return XDP_PASS;
	}
	if (ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) {
		/* Both headers start with the two ports. */
		__u32 *l4 = (__u32 *)(ip + 1);

		if ((void *)(l4 + 1) <= end)
			ports = *l4;
	}
	idx = inc_pick_hop(e, inc_flow_hash(ip->saddr, ip->daddr, ports, ip->protocol),
			   &congested_only);
	if (idx < 0 || idx >= INC_BPT_MAX_HOPS) {
		inc_fwd_stat(INC_FWD_NO_PATH);
		return XDP_PASS;
	}
	if (congested_only)
		inc_fwd_stat(INC_FWD_CONGESTED_PATH);
	hop = &e->hops[idx];

	/* TTL - 1: the checksum word holding TTL grows by 0x0100 (RFC 1624). */
	ip->ttl--;
	csum = (__u32)ip->check + bpf_htons(0x0100);
	ip->check = (__u16)(csum + (csum >> 16));
	__builtin_memcpy(eth->h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, hop->smac, ETH_ALEN);

	ifindex = hop->ifindex;
	tx = bpf_map_lookup_elem(&port_tx, &ifindex);
	if (tx) {
		tx->packets++;
		tx->bytes += (__u64)(end - data);
	}
	inc_fwd_stat(INC_FWD_FORWARDED);
	return bpf_redirect(ifindex, 0);
}

#endif /* INC_FORWARD_H */
