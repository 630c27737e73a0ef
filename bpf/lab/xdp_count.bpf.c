// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_count: a stand-in for "another XDP program on the same interface"
 * (lab.xdp_coexist, netns-tests/lab_xdp_coexist.sh): counts every frame
 * and every RoCEv2 frame (IPv4 UDP dport 4791) in an array map and passes
 * everything. Loaded with xdp-loader, i.e. through libxdp's dispatcher; the
 * test reads the counters with bpftool to see that it kept seeing the
 * traffic while incin's program ran after it in the chain. xdp.frags, so it
 * never is the reason a dispatcher lacks multi-buffer support.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define XDP_COUNT_ALL  0
#define XDP_COUNT_ROCE 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} xdp_count_pkts SEC(".maps");

static __always_inline void bump(__u32 key)
{
	__u64 *c = bpf_map_lookup_elem(&xdp_count_pkts, &key);

	if (c)
		__sync_fetch_and_add(c, 1);
}

SEC("xdp.frags")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);

	bump(XDP_COUNT_ALL);
	if ((void *)(udp + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IP) && ip->ihl == 5 &&
	    ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(4791))
		bump(XDP_COUNT_ROCE);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
