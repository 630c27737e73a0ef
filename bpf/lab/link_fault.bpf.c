// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * link_fault: a lossy "wire" for the namespace lab. The kernel here has no
 * netem, and both ends of a lab link already run XDP (the switch data path on
 * the switch port, the AF_XDP program on the worker), so faults cannot be
 * injected on the link's own veths: XDP_REDIRECTed and AF_XDP frames bypass
 * tc. Instead the lab can splice a wire namespace into a link
 * (end A <-> a | wire ns | b <-> end B); this program runs on both wire
 * interfaces, forwards every frame to the other one with bpf_redirect and
 * drops a configurable fraction of them, per direction, optionally only
 * RoCEv2 (UDP 4791) frames, and can limit each direction's rate with a
 * token bucket (a bottleneck link: what exceeds the rate is dropped). netns-tests/inclab configures
 * it with bpftool
 * (`inclab fault`), so the map layouts below are that script's ABI too.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define LINK_FAULT_ROCE_ONLY 0x1 /* drop only IPv4 UDP dport 4791 frames */
#define ROCEV2_UDP_PORT	     4791

/* Per wire port, keyed by ingress ifindex (host byte order, 16 bytes). */
struct link_fault_port {
	__u32 egress_ifindex; /* the other wire interface */
	__u32 drop_threshold; /* drop if prandom_u32 < this; 0 = lossless */
	__u32 flags;	      /* LINK_FAULT_* */
	__u32 dir;	      /* direction index for the counters: 0 or 1 */
};

enum link_fault_counter {
	LF_SEEN = 0,	     /* frames that entered the port */
	LF_ELIGIBLE = 1,     /* frames the drop rule applies to */
	LF_DROPPED = 2,	     /* frames dropped on purpose */
	LF_FORWARDED = 3,    /* frames handed to the other interface */
	LF_RATE_DROPPED = 4, /* frames over the rate limit */
	LF_NCOUNTERS = 5,
};

/* Token bucket of one direction (key: dir); rate 0 = unlimited. */
struct link_fault_rate {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 bytes_per_sec;
	__u64 burst_bytes;
	__u64 tokens;
	__u64 last_ns;
};

/* Wire configuration: ingress ifindex -> where to forward and what to drop. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct link_fault_port);
} lf_ports SEC(".maps");

/* Rate limit per direction (key 0 or 1): set by `inclab fault --rate-mbps`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct link_fault_rate);
} lf_rate SEC(".maps");

/* Per-CPU counters, key = dir * LF_NCOUNTERS + enum link_fault_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LF_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} lf_counters SEC(".maps");

static __always_inline void lf_count(__u32 dir, __u32 counter)
{
	__u32 key = (dir & 1) * LF_NCOUNTERS + counter;
	__u64 *value = bpf_map_lookup_elem(&lf_counters, &key);

	if (value)
		*value += 1;
}

static __always_inline int lf_is_rocev2(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
		return 0;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > data_end)
		return 0;
	return udp->dest == bpf_htons(ROCEV2_UDP_PORT);
}

/* Returns 1 if the frame fits the direction's rate (and takes its tokens). */
static __always_inline int lf_rate_allows(__u32 dir, __u64 len)
{
	struct link_fault_rate *r = bpf_map_lookup_elem(&lf_rate, &dir);
	__u64 now, dt, tokens;
	int ok;

	if (!r || !r->bytes_per_sec)
		return 1;
	now = bpf_ktime_get_ns();
	bpf_spin_lock(&r->lock);
	dt = now - r->last_ns;
	if (dt > 1000000000ULL)
		dt = 1000000000ULL; /* keeps dt * rate inside u64 */
	tokens = r->tokens + dt * r->bytes_per_sec / 1000000000ULL;
	if (tokens > r->burst_bytes)
		tokens = r->burst_bytes;
	r->last_ns = now;
	ok = tokens >= len;
	r->tokens = ok ? tokens - len : tokens;
	bpf_spin_unlock(&r->lock);
	return ok;
}

SEC("xdp.frags")
int link_fault(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct link_fault_port *port = bpf_map_lookup_elem(&lf_ports, &ifindex);

	if (!port)
		return XDP_PASS; /* not configured yet: the wire ns stack sees it */
	lf_count(port->dir, LF_SEEN);
	if (!(port->flags & LINK_FAULT_ROCE_ONLY) || lf_is_rocev2(ctx)) {
		lf_count(port->dir, LF_ELIGIBLE);
		if (port->drop_threshold && bpf_get_prandom_u32() < port->drop_threshold) {
			lf_count(port->dir, LF_DROPPED);
			return XDP_DROP;
		}
	}
	if (!lf_rate_allows(port->dir & 1, (__u64)(ctx->data_end - ctx->data))) {
		lf_count(port->dir, LF_RATE_DROPPED);
		return XDP_DROP;
	}
	lf_count(port->dir, LF_FORWARDED);
	return bpf_redirect(port->egress_ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
