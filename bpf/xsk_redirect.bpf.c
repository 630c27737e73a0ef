// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Worker-side XDP program of libinc's AF_XDP transport: RoCEv2 frames (UDP
 * 4791) addressed to this worker's IPv4 address (and, when configured, to its
 * QPN) go to the AF_XDP socket of the receive queue; everything else (ARP,
 * gRPC to the AM, other RoCEv2 peers) passes to the kernel stack untouched.
 * Attached natively on the worker's veth, it also makes the veth accept the
 * frames an XDP switch redirects into it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "inc_wire.h"

/* libxdp's run-configuration macro (libxdp-dev); the same definition when
 * it is not installed, so the object builds either way. */
#if __has_include(<xdp/xdp_helpers.h>)
#include <xdp/xdp_helpers.h>
#else
#define _CONCAT(x, y)	  x##y
#define XDP_RUN_CONFIG(f) _CONCAT(_, f) SEC(".xdp_run_config")
#endif

/* Load-time filter: network-order IPv4 of the worker (0 = any), QPN (0 = any). */
const volatile __u32 worker_ip_be = 0;
const volatile __u32 member_qpn = 0;

enum xsk_stat {
	XSK_STAT_REDIRECTED = 0, /* handed to the XSKMAP (socket may still be absent) */
	XSK_STAT_PASS_OTHER,	 /* not UDP 4791 IPv4: kernel stack */
	XSK_STAT_PASS_FILTERED,	 /* RoCEv2 but another IP or QPN: kernel stack */
	XSK_STAT__MAX,
};

/* The AF_XDP socket bound to each receive queue (key: rx_queue_index). */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* Per-CPU packet counters, indexed by enum xsk_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XSK_STAT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} xsk_stats SEC(".maps");

static __always_inline int count(__u32 stat, int action)
{
	__u64 *c = bpf_map_lookup_elem(&xsk_stats, &stat);

	if (c)
		*c += 1;
	return action;
}

/* Run configuration for libxdp's multi-program dispatcher, read when libinc
 * chains this program next to others (userspace/client/xdp_attach.cc; docs/
 * operations.md "Other XDP programs on the same interface"). Priority 60:
 * after programs at libxdp's default 50 (firewalls, monitors loaded with
 * xdp-loader's defaults), so they see - and may drop - incin's frames
 * before this program takes them into the AF_XDP socket, where no later
 * program would see them. Chain on XDP_PASS only: everything that is not
 * this member's RoCEv2 traffic passes and goes on to the next program. */
struct {
	__uint(priority, 60);
	__uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(xsk_redirect);

SEC("xdp.frags")
int xsk_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	struct inc_bth *bth = (void *)(udp + 1);

	if ((void *)(bth + 1) > data_end)
		return count(XSK_STAT_PASS_OTHER, XDP_PASS);
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    udp->dest != bpf_htons(INC_ROCEV2_UDP_PORT))
		return count(XSK_STAT_PASS_OTHER, XDP_PASS);
	if (worker_ip_be && ip->daddr != worker_ip_be)
		return count(XSK_STAT_PASS_FILTERED, XDP_PASS);
	if (member_qpn && (bpf_ntohl(bth->resv_destqp) & INC_QPN_MASK) != member_qpn)
		return count(XSK_STAT_PASS_FILTERED, XDP_PASS);
	count(XSK_STAT_REDIRECTED, XDP_PASS);
	/* No socket on this queue: let the stack have it (it drops UDP 4791). */
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
