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

/* Payload length of the frame, whose payload bench_stage already staged in
 * this CPU's scratch (dp_bench runs it first with the same frame). */
static __always_inline int bench_payload_len(struct xdp_md *ctx, __u32 *len)
{
	struct inc_pkt p;
	__u32 udp_len;

	if (inc_pkt_load(ctx, &p))
		return -1;
	udp_len = bpf_ntohs(p.udp->len);
	if (udp_len < 8 + INC_UDP_FIXED || udp_len - 8 - INC_UDP_FIXED > INC_MAX_PAYLOAD_BYTES)
		return -1;
	*len = udp_len - 8 - INC_UDP_FIXED;
	return 0;
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

/* As inc_contribute runs them: operands from the slot (not a contribution
 * that starts the message) on a single switch; `code` is the certificate's
 * threshold code (0: none). */
static __always_inline void bench_combine_as_slot(struct inc_slot *s, const struct inc_scratch *buf,
						  __u32 n, __u8 dtype, __u8 op, __u16 code)
{
	s->count = n;
	s->dtype = dtype;
	s->op = op;
	s->aux_code = code;
	s->bitmap = 1;
	struct inc_tree_cfg single = {.role = INC_ROLE_SINGLE};

	inc_combine_slot(s, buf, 0, &single, 0);
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
	bench_combine_as_slot(s, buf, bpf_ntohs(p.inc->count), INC_DTYPE_INT32, INC_OP_SUM, 0);
	return XDP_DROP;
}

/* Candidates for the INT32/FP32 SUM lane loop (the data path takes 8 lanes
 * per bound check), from scratch into a slot, no lock: lanes sign-extended
 * from 64-bit loads (two lanes per load), 4 lanes per bound check, with the
 * `keep` mask of the first contribution (all ones here, but opaque to clang)
 * or a constant one that folds away, as a loop split on the first
 * contribution would run. */
static __always_inline __u64 bench_keep(struct inc_slot *s)
{
	__u64 keep;

	s->bitmap = 1;
	asm volatile("" ::: "memory");
	keep = s->bitmap;
	return -keep;
}

static __always_inline void bench_sum32_x4(__s64 *a, const __u64 *b, __u32 n, __u64 keep)
{
	for (__u32 i = 0; i < INC_MAX_LANES32 / 4; i++) {
		__u64 w0, w1;

		if (4 * i >= n)
			break;
		w0 = b[2 * i];
		w1 = b[2 * i + 1];
		a[4 * i] = (a[4 * i] & keep) + (__s64)(__s32)w0;
		a[4 * i + 1] = (a[4 * i + 1] & keep) + ((__s64)w0 >> 32);
		a[4 * i + 2] = (a[4 * i + 2] & keep) + (__s64)(__s32)w1;
		a[4 * i + 3] = (a[4 * i + 3] & keep) + ((__s64)w1 >> 32);
	}
}

#define BENCH_SUM32_PROG(name, call)                                                               \
	SEC("xdp")                                                                                 \
	int name(struct xdp_md *ctx)                                                               \
	{                                                                                          \
		struct inc_scratch *buf = bench_scratch();                                         \
		struct inc_slot *s = bench_slot();                                                 \
		struct inc_pkt p;                                                                  \
		__u32 n;                                                                           \
                                                                                                   \
		if (!buf || !s || inc_pkt_load(ctx, &p))                                           \
			return XDP_ABORTED;                                                        \
		n = bpf_ntohs(p.inc->count);                                                       \
		call;                                                                              \
		return XDP_DROP;                                                                   \
	}

BENCH_SUM32_PROG(bench_sum32_x4_keep, bench_sum32_x4((__s64 *)s->acc, buf->buf, n, bench_keep(s)))
BENCH_SUM32_PROG(bench_sum32_x4_add, bench_sum32_x4((__s64 *)s->acc, buf->buf, n, ~0ull))

/* Candidate: the data path's INT32 SUM loop reading the payload straight
 * from the packet (no staging copy), 8 lanes per bounds check, then the last
 * 0..7 lanes one by one (the packet ends 4 bytes after the payload). */
SEC("xdp")
int bench_sum32_pkt(struct xdp_md *ctx)
{
	struct inc_slot *s = bench_slot();
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	struct inc_pkt p;
	__s64 *a;
	__u32 n, groups;

	if (!s || inc_pkt_load(ctx, &p))
		return XDP_ABORTED;
	a = (__s64 *)s->acc;
	n = bpf_ntohs(p.inc->count);
	groups = n / 8;
	for (__u32 i = 0; i < INC_MAX_LANES32 / 8; i++) {
		const __u64 *q = (const __u64 *)(data + INC_OFF_PAYLOAD) + 4 * i;

		if (i >= groups || (const void *)(q + 4) > (const void *)end)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u64 w = q[k];

			a[8 * i + 2 * k] += (__s32)w;
			a[8 * i + 2 * k + 1] += (__s64)w >> 32;
		}
	}
	for (__u32 k = 0; k < 7; k++) {
		__u32 j = groups * 8 + k;
		const __s32 *q;

		asm volatile("" : "+r"(j));
		q = (const __s32 *)(data + INC_OFF_PAYLOAD) + j;
		if (j >= n || j >= INC_MAX_LANES32 || (const void *)(q + 1) > (const void *)end)
			break;
		a[j] += *q;
	}
	return XDP_DROP;
}

/* The other lane loops of inc_combine and the SUM narrowing at completion,
 * over the frame's payload (8-byte lanes: half as many). */
#define BENCH_LANES_PROG(name, call)                                                               \
	SEC("xdp")                                                                                 \
	int name(struct xdp_md *ctx)                                                               \
	{                                                                                          \
		struct inc_scratch *buf = bench_scratch();                                         \
		struct inc_slot *s = bench_slot();                                                 \
		__u32 len;                                                                         \
                                                                                                   \
		if (!buf || !s || bench_payload_len(ctx, &len))                                    \
			return XDP_ABORTED;                                                        \
		call;                                                                              \
		return XDP_DROP;                                                                   \
	}

BENCH_LANES_PROG(bench_max32, bench_combine_as_slot(s, buf, len / 4, INC_DTYPE_FP32, INC_OP_MAX, 0))
BENCH_LANES_PROG(bench_sum64,
		 bench_combine_as_slot(s, buf, len / 8, INC_DTYPE_INT64, INC_OP_SUM, 0))
BENCH_LANES_PROG(bench_max64,
		 bench_combine_as_slot(s, buf, len / 8, INC_DTYPE_INT64, INC_OP_MAX, 0))
BENCH_LANES_PROG(bench_finish32, s->flags = inc_finish_sum(s->acc, len / 4, INC_DTYPE_INT32))
/* Float sums in block fixed point, without and with the certificate's abs
 * sums (threshold code 0x0101: T = 2), and the certificate's judgement at
 * completion of a single switch. */
BENCH_LANES_PROG(bench_fsum32,
		 bench_combine_as_slot(s, buf, len / 4, INC_DTYPE_FP32, INC_OP_SUM, 0))
BENCH_LANES_PROG(bench_fsum32_cert,
		 bench_combine_as_slot(s, buf, len / 4, INC_DTYPE_FP32, INC_OP_SUM, 0x0101))
BENCH_LANES_PROG(bench_fsum64_cert,
		 bench_combine_as_slot(s, buf, len / 8, INC_DTYPE_FP64, INC_OP_SUM, 0x0101))
BENCH_LANES_PROG(bench_cert_check32, s->aux_code = 0x0101; s->dtype = INC_DTYPE_FP32;
		 s->flags = inc_cert_check_sums(s, len / 4))

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

/* crc32_le results of the bench_crc* programs; dp_bench checks each against
 * the C++ crc32_le of the payload (it fills the CRC tables and xpow the way
 * the data path's loader does). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bench_out SEC(".maps");

static __always_inline int bench_crc_done(__u32 crc)
{
	__u32 zero = 0;
	__u32 *out = bpf_map_lookup_elem(&bench_out, &zero);

	if (!out)
		return XDP_ABORTED;
	*out = crc;
	return XDP_DROP;
}

/* crc32_le(0, payload) from scratch as the data path computes it (the
 * per-message result CRC and the payload part of ICRC verification). */
SEC("xdp")
int bench_crc(struct xdp_md *ctx)
{
	__u32 len;

	if (bench_payload_len(ctx, &len))
		return XDP_ABORTED;
	return bench_crc_done(inc_crc_scratch(0, len));
}

/* CRC candidates, each crc32_le(0, payload) over scratch. */
#define BENCH_WORDS (INC_MAX_PAYLOAD_BYTES / 8)

/* crc continued over the whole words from `first` on (at most 9) and the
 * last 4 bytes: the fold's table tail with crc as what is pending for word
 * `first` (crc32_le(crc, D) = crc32_le(0, D ^ crc)). */
static __always_inline __u32 bench_crc_rest(__u32 crc, const __u64 *buf, __u32 len, __u32 first)
{
	asm volatile("" : "+r"(first));
	if (first >= len / 8 && !(len & 4))
		return crc;
	return inc_crc_fold_tail(buf, len, first, crc, 0, 0, 0, 0);
}

/* Slice-by-8 as bpf/csum.h had it before the Chorba fold, one 8-byte step
 * per loop iteration. */
static __always_inline __u32 bench_crc_slice8(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, crc = 0;

	for (__u32 i = 0; i < BENCH_WORDS; i++) {
		__u64 w;

		if (i >= words)
			break;
		w = buf[i];
		crc = inc_crc_step8(crc, (__u32)w, (__u32)(w >> 32));
	}
	return bench_crc_rest(crc, buf, len, words);
}

/* Slice-by-8 on the whole 64-bit word: byte k's table index is (w >> (8k -
 * 2)) & 0x3fc, one shift and one mask, no split into halves. */
#define BENCH_T64(k, w, sh)                                                                        \
	(*(const volatile __u32 *)((const __u8 *)inc_crc_tbl[k] + (((w)sh) & 0x3fc)))
static __always_inline __u32 bench_step8_u64(__u32 crc, __u64 w)
{
	w ^= crc;
	return BENCH_T64(7, w, << 2) ^ BENCH_T64(6, w, >> 6) ^ BENCH_T64(5, w, >> 14) ^
	       BENCH_T64(4, w, >> 22) ^ BENCH_T64(3, w, >> 30) ^ BENCH_T64(2, w, >> 38) ^
	       BENCH_T64(1, w, >> 46) ^ BENCH_T64(0, w, >> 54);
}

static __always_inline __u32 bench_crc_slice8_u64(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, crc = 0;

	for (__u32 i = 0; i < BENCH_WORDS; i++) {
		if (i >= words)
			break;
		crc = bench_step8_u64(crc, buf[i]);
	}
	return bench_crc_rest(crc, buf, len, words);
}

/* Independent streams: the payload's first `ways` equal parts of whole words
 * each from CRC 0, interleaved in one loop; the rest (odd words, the last 4
 * bytes) extends the last stream. Combined with the GF(2) multiply by
 * x^(8 * bytes after the part) from xpow. */
static __always_inline __u32 bench_crc_combine(__u32 crc_a, __u32 crc_b, __u32 len_b)
{
	__u32 idx = len_b / 4;
	__u32 *xp = bpf_map_lookup_elem(&xpow, &idx);

	return xp ? inc_crc_mulmodp(crc_a, *xp) ^ crc_b : 0;
}

static __always_inline __u32 bench_crc_2way(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, part = words / 2, a = 0, b = 0, j;

	for (__u32 i = 0; i < BENCH_WORDS / 2; i++) {
		__u64 wa, wb;

		if (i >= part)
			break;
		j = part + i;
		if (j >= BENCH_WORDS)
			break;
		wa = buf[i];
		wb = buf[j];
		a = inc_crc_step8(a, (__u32)wa, (__u32)(wa >> 32));
		b = inc_crc_step8(b, (__u32)wb, (__u32)(wb >> 32));
	}
	b = bench_crc_rest(b, buf, len, 2 * part);
	return bench_crc_combine(a, b, len - part * 8);
}

static __always_inline __u32 bench_crc_4way(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, part = words / 4, a = 0, b = 0, c = 0, d = 0, j, rest;

	for (__u32 i = 0; i < BENCH_WORDS / 4; i++) {
		__u64 wa, wb, wc, wd;

		if (i >= part)
			break;
		j = 3 * part + i;
		if (j >= BENCH_WORDS)
			break;
		wa = buf[i];
		wb = buf[j - 2 * part];
		wc = buf[j - part];
		wd = buf[j];
		a = inc_crc_step8(a, (__u32)wa, (__u32)(wa >> 32));
		b = inc_crc_step8(b, (__u32)wb, (__u32)(wb >> 32));
		c = inc_crc_step8(c, (__u32)wc, (__u32)(wc >> 32));
		d = inc_crc_step8(d, (__u32)wd, (__u32)(wd >> 32));
	}
	d = bench_crc_rest(d, buf, len, 4 * part);
	rest = len - part * 8 * 3;
	a = bench_crc_combine(a, b, part * 8);
	a = bench_crc_combine(a, c, part * 8);
	return bench_crc_combine(a, d, rest);
}

/* Slice-by-16: two words per table pass, 16 tables (this object's own). */
const volatile __u32 bench_crc_tbl16[16][256] = {};
#define BENCH_T16(k, v) bench_crc_tbl16[k][(v)&0xff]
static __always_inline __u32 bench_crc_slice16(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, pairs = words / 2, crc = 0;

	for (__u32 i = 0; i < BENCH_WORDS / 2; i++) {
		__u32 a, b, c, d;

		if (i >= pairs)
			break;
		a = (__u32)buf[2 * i] ^ crc;
		b = (__u32)(buf[2 * i] >> 32);
		c = (__u32)buf[2 * i + 1];
		d = (__u32)(buf[2 * i + 1] >> 32);
		crc = BENCH_T16(15, a) ^ BENCH_T16(14, a >> 8) ^ BENCH_T16(13, a >> 16) ^
		      BENCH_T16(12, a >> 24) ^ BENCH_T16(11, b) ^ BENCH_T16(10, b >> 8) ^
		      BENCH_T16(9, b >> 16) ^ BENCH_T16(8, b >> 24) ^ BENCH_T16(7, c) ^
		      BENCH_T16(6, c >> 8) ^ BENCH_T16(5, c >> 16) ^ BENCH_T16(4, c >> 24) ^
		      BENCH_T16(3, d) ^ BENCH_T16(2, d >> 8) ^ BENCH_T16(1, d >> 16) ^
		      BENCH_T16(0, d >> 24);
	}
	return bench_crc_rest(crc, buf, len, 2 * pairs);
}

/* Chorba as in bpf/csum.h, one word per iteration (pending words rotate). */
static __always_inline __u32 bench_crc_chorba1(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, n = words > 5 ? words - 5 : 0;
	__u64 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, x;

	for (__u32 i = 0; i < BENCH_WORDS; i++) {
		if (i >= n)
			break;
		x = buf[i] ^ c0;
		c0 = c1;
		c1 = c2 ^ inc_fold2(x);
		c2 = c3 ^ inc_fold3(x);
		c3 = c4 ^ inc_fold4(x);
		c4 = inc_fold5(x);
	}
	asm volatile("" : "+r"(len));
	words = len / 8;
	return inc_crc_fold_tail(buf, len, words > 5 ? words - 5 : 0, c0, c1, c2, c3, c4);
}

/* Chorba, four words per iteration: words 2 and 3 of a group take the folds
 * of words 0 and 1 first; the tail is 5 to 8 words. */
static __always_inline __u32 bench_crc_chorba4(const __u64 *buf, __u32 len)
{
	__u32 words = len / 8, quads = words > 5 ? (words - 5) / 4 : 0;
	__u64 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, x0, x1, x2, x3;

	for (__u32 i = 0; i < BENCH_WORDS / 4; i++) {
		if (i >= quads)
			break;
		x0 = buf[4 * i] ^ c0;
		x1 = buf[4 * i + 1] ^ c1;
		x2 = buf[4 * i + 2] ^ c2 ^ inc_fold2(x0);
		x3 = buf[4 * i + 3] ^ c3 ^ inc_fold3(x0) ^ inc_fold2(x1);
		c0 = c4 ^ inc_fold4(x0) ^ inc_fold3(x1) ^ inc_fold2(x2);
		c1 = inc_fold5(x0) ^ inc_fold4(x1) ^ inc_fold3(x2) ^ inc_fold2(x3);
		c2 = inc_fold5(x1) ^ inc_fold4(x2) ^ inc_fold3(x3);
		c3 = inc_fold5(x2) ^ inc_fold4(x3);
		c4 = inc_fold5(x3);
	}
	asm volatile("" : "+r"(len));
	words = len / 8;
	return inc_crc_fold_tail(buf, len, words > 5 ? (words - 5) / 4 * 4 : 0, c0, c1, c2, c3, c4);
}

#define BENCH_CRC_PROG(name, fn)                                                                   \
	SEC("xdp")                                                                                 \
	int name(struct xdp_md *ctx)                                                               \
	{                                                                                          \
		struct inc_scratch *buf = bench_scratch();                                         \
		__u32 len;                                                                         \
                                                                                                   \
		if (!buf || bench_payload_len(ctx, &len))                                          \
			return XDP_ABORTED;                                                        \
		return bench_crc_done(fn(buf->buf, len));                                          \
	}

BENCH_CRC_PROG(bench_crc_slice8_loop, bench_crc_slice8)
BENCH_CRC_PROG(bench_crc_slice8_u64_loop, bench_crc_slice8_u64)
BENCH_CRC_PROG(bench_crc_2way_loop, bench_crc_2way)
BENCH_CRC_PROG(bench_crc_4way_loop, bench_crc_4way)
BENCH_CRC_PROG(bench_crc_slice16_loop, bench_crc_slice16)
BENCH_CRC_PROG(bench_crc_chorba1_loop, bench_crc_chorba1)
BENCH_CRC_PROG(bench_crc_chorba4_loop, bench_crc_chorba4)

/* The ICRC check exactly as ingress calls it (inc_verify_icrc_of: headers
 * from the packet by the tables, payload from scratch by the fold). */
SEC("xdp")
int bench_icrc(struct xdp_md *ctx)
{
	inc_verify_icrc_of(ctx, bench_scratch());
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
