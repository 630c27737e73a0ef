/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Cost breakdown for dp_bench: the pieces of the data path's contribution
 * path (bpf/parse.h, aggregate.h, csum.h, stats.h, compiled from the same
 * headers as inc_switch.bpf.c), each as its own XDP program so that
 * BPF_PROG_TEST_RUN with repeat can time it alone. Maps are this object's own
 * (never pinned); the CRC tables are left zero, which does not change the
 * cost of a table lookup. Every program returns XDP_DROP on success and
 * XDP_ABORTED if its input is not a well-formed INC frame. */
#include <linux/bpf.h>
/* inc_egress reads ctx->egress_ifindex, which only devmap programs may read,
 * and BPF_PROG_TEST_RUN cannot run devmap programs. bench_egress therefore
 * runs the same code with the copy's port taken from ingress_ifindex (lo in
 * test_run); struct xdp_md is already defined above, so only the code below
 * sees this. */
#define egress_ifindex ingress_ifindex
#include "pipeline.h"

static __always_inline struct inc_scratch *bench_scratch(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline struct inc_slot *bench_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&slots, &zero);
}

/* inc_parse alone: Ethernet, IPv4 (with header checksum), UDP, BTH, RETH,
 * INC header framing checks. */
SEC("xdp")
int bench_parse(struct xdp_md *ctx)
{
	struct inc_pkt p;

	return inc_parse(ctx, &p) ? XDP_ABORTED : XDP_DROP;
}

/* Staging the payload in the per-CPU scratch buffer (bpf_xdp_load_bytes). */
SEC("xdp")
int bench_stage(struct xdp_md *ctx)
{
	struct inc_scratch *buf = bench_scratch();
	struct inc_pkt p;

	if (!buf || inc_parse(ctx, &p))
		return XDP_ABORTED;
	if (p.payload_len > 0 &&
	    bpf_xdp_load_bytes(ctx, INC_OFF_PAYLOAD, buf->buf, p.payload_len & 0xfff))
		return XDP_ABORTED;
	return XDP_DROP;
}

/* The INT32 SUM lane loop of inc_combine over the frame's count, from
 * scratch into a slot accumulator, without the lock. */
SEC("xdp")
int bench_combine(struct xdp_md *ctx)
{
	struct inc_scratch *buf = bench_scratch();
	struct inc_slot *s = bench_slot();
	struct inc_pkt p;

	if (!buf || !s || inc_pkt_load(ctx, &p))
		return XDP_ABORTED;
	inc_combine(s->acc, buf->buf, bpf_ntohs(p.inc->count), INC_DTYPE_INT32, INC_OP_SUM, 0);
	return XDP_DROP;
}

/* Candidate faster INT32 SUM lane loop (measured for the data path's owner,
 * not used by it): two int32 lanes per 64-bit word (SWAR add without carry
 * across lanes) with the same signed-overflow detection, from scratch. */
#define BENCH_LOW31 0x7fffffff7fffffffull
#define BENCH_SIGN  0x8000000080000000ull

static __always_inline __u64 bench_swar_add(__u64 *a, __u64 y, __u64 *ovf)
{
	__u64 x = *a, r;

	r = ((x & BENCH_LOW31) + (y & BENCH_LOW31)) ^ ((x ^ y) & BENCH_SIGN);
	*ovf |= (x ^ r) & (y ^ r);
	*a = r;
	return r;
}

SEC("xdp")
int bench_combine_swar(struct xdp_md *ctx)
{
	struct inc_scratch *buf = bench_scratch();
	struct inc_slot *s = bench_slot();
	struct inc_pkt p;
	__u64 ovf = 0;
	__u32 words;

	if (!buf || !s || inc_pkt_load(ctx, &p))
		return XDP_ABORTED;
	words = (bpf_ntohs(p.inc->count) + 1) / 2;
	for (__u32 i = 0; i < INC_MAX_PAYLOAD_BYTES / 8; i++) {
		if (i >= words)
			break;
		bench_swar_add(&s->acc[i], buf->buf[i], &ovf);
	}
	s->flags |= (ovf & BENCH_SIGN) ? INC_FLAG_OVERFLOW : 0;
	return XDP_DROP;
}

/* The same SWAR loop reading the payload straight from the packet (no
 * staging copy; packet loads are allowed under a spin lock, helpers are
 * not), under the slot lock as the data path would run it. */
SEC("xdp")
int bench_combine_swar_direct_locked(struct xdp_md *ctx)
{
	struct inc_slot *s = bench_slot();
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	struct inc_pkt p;
	__u64 ovf = 0;
	__u32 words;

	if (!s || inc_pkt_load(ctx, &p))
		return XDP_ABORTED;
	words = (bpf_ntohs(p.inc->count) + 1) / 2;
	bpf_spin_lock(&s->lock);
	for (__u32 i = 0; i < INC_MAX_PAYLOAD_BYTES / 8; i++) {
		const __u64 *q = (const __u64 *)(data + INC_OFF_PAYLOAD) + i;

		if (i >= words || (void *)(q + 1) > (void *)end)
			break;
		bench_swar_add(&s->acc[i], *q, &ovf);
	}
	s->flags |= (ovf & BENCH_SIGN) ? INC_FLAG_OVERFLOW : 0;
	bpf_spin_unlock(&s->lock);
	return XDP_DROP;
}

/* Candidate: the data path's INT32 SUM lane body unrolled by 8 (one bound
 * check per 8 lanes), tail lane by lane; same overflow flag. From scratch,
 * no lock. */
SEC("xdp")
int bench_combine_unroll8(struct xdp_md *ctx)
{
	struct inc_scratch *buf = bench_scratch();
	struct inc_slot *s = bench_slot();
	struct inc_pkt p;
	__s32 ovf = 0;
	__u32 n, groups, base;

	if (!buf || !s || inc_pkt_load(ctx, &p))
		return XDP_ABORTED;
	n = bpf_ntohs(p.inc->count);
	if (n > INC_MAX_PAYLOAD_BYTES / 4)
		return XDP_ABORTED;
	groups = n / 8;
	{
		__s32 *a = (__s32 *)s->acc;
		const __s32 *b = (const __s32 *)buf->buf;

		for (__u32 g = 0; g < INC_MAX_PAYLOAD_BYTES / 32; g++) {
			if (g >= groups)
				break;
#pragma unroll
			for (__u32 k = 0; k < 8; k++) {
				__s32 x = a[g * 8 + k], y = b[g * 8 + k];
				__s32 r = (__s32)((__u32)x + (__u32)y);

				ovf |= (x ^ r) & (y ^ r);
				a[g * 8 + k] = r;
			}
		}
		base = groups * 8;
		for (__u32 k = 0; k < 8; k++) {
			__u32 i = base + k;
			__s32 x, y, r;

			if (i >= n || i >= INC_MAX_PAYLOAD_BYTES / 4)
				break;
			x = a[i];
			y = b[i];
			r = (__s32)((__u32)x + (__u32)y);
			ovf |= (x ^ r) & (y ^ r);
			a[i] = r;
		}
	}
	s->flags |= ovf < 0 ? INC_FLAG_OVERFLOW : 0;
	return XDP_DROP;
}

/* Taking and releasing one slot lock (uncontended). */
SEC("xdp")
int bench_lock(struct xdp_md *ctx)
{
	struct inc_slot *s = bench_slot();

	if (!s)
		return XDP_ABORTED;
	bpf_spin_lock(&s->lock);
	s->bitmap++;
	bpf_spin_unlock(&s->lock);
	return XDP_DROP;
}

/* The ICRC check exactly as ingress calls it (inc_verify_icrc_of: headers
 * from the packet, payload from scratch, slice-by-8 table CRC). */
SEC("xdp")
int bench_icrc(struct xdp_md *ctx)
{
	inc_verify_icrc_of(ctx);
	return XDP_DROP;
}

/* The per-packet counter updates of an aggregated contribution: global
 * rx/rx_inc/contrib, tree rx, member rx. */
SEC("xdp")
int bench_counters(struct xdp_md *ctx)
{
	struct inc_counters *c;

	inc_stat_add(INC_STAT_RX_PACKETS, 1);
	inc_stat_add(INC_STAT_RX_INC, 1);
	c = inc_tree_counters(7);
	if (c) {
		c->rx_packets++;
		c->rx_bytes += 1126;
	}
	c = inc_member_counters(7, 1);
	if (c) {
		c->rx_packets++;
		c->rx_bytes += 1126;
	}
	inc_stat_add(INC_STAT_CONTRIB, 1);
	return XDP_DROP;
}

/* The devmap egress program's work for one copy (port_child and children
 * entries are filled by dp_bench): look up the child, rewrite MACs, IPs,
 * UDP, BTH, RETH, IPv4 checksum, patch the ICRC from crc32_le(0, R). */
SEC("xdp")
int bench_egress(struct xdp_md *ctx)
{
	return inc_egress(ctx) == XDP_PASS ? XDP_DROP : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
