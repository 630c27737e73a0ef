// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Packet-forwarding ceiling of the benchmark suite (docs/perf.md):
 * attached instead of the INC data path on a switch's worker-facing ports,
 * it turns every INC contribution straight back to its sender as if it were
 * the result (MACs and IPv4 addresses swapped, DestQP = the member's QPN,
 * RESULT flag, ICRC patched by a precomputed delta), with XDP_TX. No
 * aggregation, no state: the per-packet work is what forwarding costs, so
 * an unchanged libinc client measures the fastest any switch design on this
 * machine could move the frames of an allreduce. The IPv4 checksum needs no
 * update (a swap keeps the one's-complement sum).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "inc_wire.h"
#include "bench/fwd_ceiling.h"

/* Worker-facing ports (key: ingress ifindex): member QPN and ICRC deltas. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct fwd_port);
} fwd_ports SEC(".maps");

/* Per-CPU packet counters, indexed by enum fwd_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FWD_STAT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} fwd_stats SEC(".maps");

static __always_inline int count(__u32 stat, int action)
{
	__u64 *c = bpf_map_lookup_elem(&fwd_stats, &stat);

	if (c)
		*c += 1;
	return action;
}

SEC("xdp.frags")
int fwd_ceiling(struct xdp_md *ctx)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	struct ethhdr *eth = (struct ethhdr *)data;
	struct iphdr *ip = (struct iphdr *)(data + INC_OFF_IP);
	struct udphdr *udp = (struct udphdr *)(data + INC_OFF_UDP);
	struct inc_bth *bth = (struct inc_bth *)(data + INC_OFF_BTH);
	struct inc_hdr *inc = (struct inc_hdr *)(data + INC_OFF_INC);
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 frame_len, udp_len, delta, addr;
	__u8 mac[ETH_ALEN], *icrc;
	struct fwd_port *port;

	if (data + INC_OFF_PAYLOAD > end)
		return count(FWD_STAT_PASS, XDP_PASS);
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    udp->dest != bpf_htons(INC_ROCEV2_UDP_PORT) ||
	    bth->opcode != INC_BTH_OPCODE_UC_WRITE_ONLY_IMM)
		return count(FWD_STAT_PASS, XDP_PASS);
	port = bpf_map_lookup_elem(&fwd_ports, &ifindex);
	if (!port)
		return count(FWD_STAT_UNKNOWN_PORT, XDP_DROP);
	frame_len = end - data;
	udp_len = bpf_ntohs(udp->len);
	if (udp_len >= FWD_MAX_UDP_LEN || INC_OFF_UDP + udp_len != frame_len)
		return count(FWD_STAT_BAD_LENGTH, XDP_DROP);
	icrc = data + ((frame_len - INC_ICRC_LEN) & (FWD_MAX_UDP_LEN * 2 - 1));
	if (icrc + INC_ICRC_LEN > end)
		return count(FWD_STAT_BAD_LENGTH, XDP_DROP);

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	addr = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = addr;
	bth->resv_destqp = (bth->resv_destqp & bpf_htonl(~INC_QPN_MASK)) |
			   bpf_htonl(port->member_qpn & INC_QPN_MASK);
	inc->ver_flags |= INC_FLAG_RESULT;
	/* The wire carries the ICRC value little-endian. */
	delta = port->icrc_delta[udp_len];
	icrc[0] ^= delta;
	icrc[1] ^= delta >> 8;
	icrc[2] ^= delta >> 16;
	icrc[3] ^= delta >> 24;
	return count(FWD_STAT_REFLECTED, XDP_TX);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
