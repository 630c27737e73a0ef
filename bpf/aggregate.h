/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Slot state machine and arithmetic (docs/architecture.md). One bpf_spin_lock
 * per slot copy serialises both CPUs; the payload is staged in a per-CPU
 * scratch buffer first because no helper may run under the lock. */
#ifndef INC_AGGREGATE_H
#define INC_AGGREGATE_H

#include "tree_maps.h"
#include "replicate.h"

#define INC_MAX_LANES32 (INC_MAX_PAYLOAD_BYTES / 4)
#define INC_MAX_LANES64 (INC_MAX_PAYLOAD_BYTES / 8)

/* What the locked section decided. */
enum inc_outcome {
	INC_OUT_CONSUMED = 0,	 /* aggregated, slot not complete */
	INC_OUT_COMPLETE,	 /* this contribution completed the slot */
	INC_OUT_RESEND_RESULT,	 /* retransmission: result known */
	INC_OUT_RESEND_PARTIAL,	 /* retransmission: partial is with the parent */
	INC_OUT_REPLICATE,	 /* leaf: result from the parent stored */
	INC_OUT_FINISH,		 /* SUM complete: inc_finish_slot must run */
	INC_OUT_RESULT_UP,	 /* leaf, pulled: send the held result upward */
	INC_OUT_PULL_IGNORED,	 /* leaf, pulled: no result for that message */
	INC_OUT_ADOPTED,	 /* root: a child's result became the slot's */
	INC_OUT_DROP_BASE = 100, /* + enum inc_drop_reason */
};

/* The lane loops below take several lanes per bound check and may run past
 * the count up to the next multiple of their step; those lanes are never part
 * of a result. The steps must divide the maximum. */
_Static_assert(INC_MAX_LANES32 % 8 == 0, "SUM and MIN/MAX loops take 8 / 4 lanes per step");
_Static_assert(INC_MAX_LANES64 % 4 == 0, "copy and INT64 loops take 4 / 2 lanes per step");

static __always_inline void inc_copy_lanes(__u64 *dst, const __u64 *src, __u32 bytes)
{
	__u32 words = (bytes + 7) / 8;

	for (__u32 i = 0; i < INC_MAX_LANES64 / 4; i++) {
		if (4 * i >= words)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++)
			dst[4 * i + k] = src[4 * i + k];
	}
}

/* All ones when x < y (signed), else 0. Branch-free on purpose: a branch
 * per lane would make the verifier walk 2^n paths through the loops below.
 * The asm barrier keeps clang from turning it back into a compare. */
static __always_inline __u64 inc_lt_mask(__s64 x, __s64 y)
{
	__u64 d = (__u64)x - (__u64)y;
	__u64 t = d ^ (((__u64)x ^ (__u64)y) & (d ^ (__u64)x));

	asm volatile("" : "+r"(t));
	return (__u64)((__s64)t >> 63);
}

/* All ones if x < 0, else 0. The barrier keeps clang from turning the
 * sign mask (and what it masks) into a compare and a branch per lane. */
static __always_inline __s64 inc_sign_mask(__s64 x)
{
	asm volatile("" : "+r"(x));
	return x >> 63;
}

/* INT32 and FP32 (fixed point) SUM: 4-byte lanes added into int64 lanes
 * (`add` a constant: 0 stores them, for the first contribution), 8 per bound
 * check, two per 64-bit load (each half sign-extended). */
static __always_inline void inc_sum32_lanes(__s64 *a, const __u64 *b, __u32 n, const int add)
{
	for (__u32 i = 0; i < INC_MAX_LANES32 / 8; i++) {
		if (8 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u64 w = b[4 * i + k];
			__s64 *lane = &a[8 * i + 2 * k];

			lane[0] = (add ? lane[0] : 0) + (__s32)w;
			lane[1] = (add ? lane[1] : 0) + ((__s64)w >> 32);
		}
	}
}

/* A loop of its own for the first contribution: masking every lane with
 * `keep` instead costs ~20 % of the loop (dp_bench). */
static __always_inline void inc_sum32(__s64 *a, const __u64 *b, __u32 n, __u64 first)
{
	if (first)
		inc_sum32_lanes(a, b, n, 0);
	else
		inc_sum32_lanes(a, b, n, 1);
}

/* FP32 (fixed point) SUM: 4-byte lanes added in place, two per 64-bit word
 * with no carry between them (the low 31 bits of each half add, the top bit
 * of each is the xor of the operands' and the carry into it), 8 per bound
 * check; `add` as in inc_sum32_lanes. No int64 widening and no narrowing at
 * completion: members quantise with ceil(log2(n)) bits of headroom, so the
 * sum of any subset of n contributions fits int32 (docs/architecture.md).
 * `cert` (a constant) also adds |lane| into the u32 abs sums of the slot's
 * second half (the certificate, inc_wire.h), two per word as well: the sign
 * bits moved to bit 0 of each half (neg) make the mask (neg << 32) - neg,
 * all ones in each negative half, and (y ^ mask) + neg is |y| per half (no
 * carry leaves a half: a negative half of y ^ mask is at most 0x7fffffff).
 * The abs sums add as one 64-bit word: members keep |q| < 2^(30 - h) with
 * n <= 2^h ranks, so no half reaches 2^30 and no carry crosses. */
static __always_inline void inc_fsum32_lanes(__u64 *a, const __u64 *b, __u32 n, const int add,
					     const int cert)
{
	const __u64 low31 = 0x7fffffff7fffffffull, lsb = 0x0000000100000001ull;
	__u64 *abs_sum = a + INC_MAX_LANES64;

	for (__u32 i = 0; i < INC_MAX_LANES32 / 8; i++) {
		if (8 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u64 x = add ? a[4 * i + k] : 0, y = b[4 * i + k];

			a[4 * i + k] = add ? ((x & low31) + (y & low31)) ^ ((x ^ y) & ~low31) : y;
			if (cert) {
				__u64 neg = (y >> 31) & lsb;
				__u64 mag = (y ^ ((neg << 32) - neg)) + neg;

				abs_sum[4 * i + k] = (add ? abs_sum[4 * i + k] : 0) + mag;
			}
		}
	}
}

/* FP64 (fixed point) SUM: 8-byte lanes added in place, 4 per bound check
 * (headroom as for FP32: no lane can overflow, so neither wrap counts nor
 * OVERFLOW); `cert` adds |lane| into the u64 abs sums of the second half. */
static __always_inline void inc_fsum64_lanes(__u64 *a, const __u64 *b, __u32 n, const int add,
					     const int cert)
{
	__u64 *abs_sum = a + INC_MAX_LANES64;

	for (__u32 i = 0; i < INC_MAX_LANES64 / 4; i++) {
		if (4 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u32 j = 4 * i + k;
			__u64 y = b[j];

			a[j] = (add ? a[j] : 0) + y;
			if (cert) {
				__u64 sign = (__u64)inc_sign_mask((__s64)y);

				abs_sum[j] = (add ? abs_sum[j] : 0) + ((y ^ sign) - sign);
			}
		}
	}
}

/* One loop per (first, cert) pair: each is straight-line code, and a message
 * without a threshold code pays nothing for the certificate. */
static __always_inline void inc_fsum(__u64 *a, const __u64 *b, __u32 n, __u8 dtype, __u64 first,
				     int cert)
{
	if (dtype == INC_DTYPE_FP64) {
		if (cert) {
			if (first)
				inc_fsum64_lanes(a, b, n, 0, 1);
			else
				inc_fsum64_lanes(a, b, n, 1, 1);
		} else {
			if (first)
				inc_fsum64_lanes(a, b, n, 0, 0);
			else
				inc_fsum64_lanes(a, b, n, 1, 0);
		}
	} else if (cert) {
		if (first)
			inc_fsum32_lanes(a, b, n, 0, 1);
		else
			inc_fsum32_lanes(a, b, n, 1, 1);
	} else {
		if (first)
			inc_fsum32_lanes(a, b, n, 0, 0);
		else
			inc_fsum32_lanes(a, b, n, 1, 0);
	}
}

/* INT64 SUM: wrapped int64 lanes plus a net wrap count per lane (`add` as
 * in inc_sum32_lanes). */
static __always_inline void inc_sum64_lanes(__s64 *a, const __s64 *b, __u32 n, const int add)
{
	__s64 *wraps = a + INC_MAX_LANES64;

	for (__u32 i = 0; i < INC_MAX_LANES64 / 2; i++) {
		if (2 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 2; k++) {
			__u32 j = 2 * i + k;
			__s64 x = add ? a[j] : 0, y = b[j], r, w;
			__u64 ov;

			r = (__s64)((__u64)x + (__u64)y);
			/* Signed overflow (0/1), then +1 when both were >= 0
			 * (carry), -1 when < 0. In 0/1 form, not 0/-1: the
			 * verifier forks two states on an AND or OR of a
			 * [-1, 0] value with a constant. */
			ov = (__u64)((x ^ r) & (y ^ r)) >> 63;
			w = (__s64)(ov - ((ov & ((__u64)x >> 63)) << 1));
			wraps[j] = (add ? wraps[j] : 0) + w;
			a[j] = r;
		}
	}
}

static __always_inline void inc_sum64(__s64 *a, const __s64 *b, __u32 n, __u64 first)
{
	if (first)
		inc_sum64_lanes(a, b, n, 0);
	else
		inc_sum64_lanes(a, b, n, 1);
}

/* INT64 MIN/MAX: MAX takes y when x < y; MIN when y <= x (equal values are
 * interchangeable). */
static __always_inline void inc_minmax64(__s64 *a, const __s64 *b, __u32 n, __u64 min_mask,
					 __u64 first)
{
	for (__u32 i = 0; i < INC_MAX_LANES64 / 2; i++) {
		if (2 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 2; k++) {
			__u32 j = 2 * i + k;
			__s64 x = a[j], y = b[j];
			__u64 take = (inc_lt_mask(x, y) ^ min_mask) | first;

			a[j] = x ^ ((x ^ y) & take);
		}
	}
}

/* INT32/FP32 MIN/MAX in place (4-byte lanes); FP32 compares on the
 * order-preserving key x ^ ((x >> 31) & 0x7fffffff) (key_mask 0x7fffffff).
 * Keys of sign-extended lanes stay sign-extended, and their 64-bit
 * difference cannot overflow: its sign is the comparison. */
static __always_inline void inc_minmax32(__s32 *a, const __s32 *b, __u32 n, __u64 key_mask,
					 __u64 min_mask, __u64 first)
{
	for (__u32 i = 0; i < INC_MAX_LANES32 / 4; i++) {
		if (4 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u32 j = 4 * i + k;
			__s64 x = a[j], y = b[j];
			__s64 kx = x ^ (inc_sign_mask(x) & key_mask);
			__s64 ky = y ^ (inc_sign_mask(y) & key_mask);
			__u64 take = ((__u64)inc_sign_mask(kx - ky) ^ min_mask) | first;

			a[j] = (__s32)(x ^ ((x ^ y) & take));
		}
	}
}

/* AND/OR/XOR of INT32 or INT64 lanes as whole 64-bit words (a bitwise op
 * does not see where one lane ends; an odd INT32 count's last word carries
 * 4 bytes past the count, which are never sent). One body for the three
 * ops: x & y & keep_and ^ (x ^ y) & keep_xor is AND with keep_xor 0, XOR
 * with keep_and 0 and OR with both all ones ((x & y) ^ (x ^ y) = x | y). */
static __always_inline void inc_bitwise(__u64 *a, const __u64 *b, __u32 words, __u64 keep_and,
					__u64 keep_xor, __u64 first)
{
	for (__u32 i = 0; i < INC_MAX_LANES64 / 4; i++) {
		if (4 * i >= words)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++) {
			__u32 j = 4 * i + k;
			__u64 x = a[j], y = b[j];
			__u64 r = (x & y & keep_and) ^ ((x ^ y) & keep_xor);

			a[j] = r ^ ((r ^ y) & first);
		}
	}
}

/* acc op= src over n lanes; `first` (all ones or 0) makes it acc = src, so
 * the first contribution of a message needs no separate pass. SUM never
 * tests for overflow per add (that would depend on the arrival order):
 * INT32 lanes add into int64 lanes, INT64 lanes keep a net wrap count per
 * lane, and inc_finish_sum decides OVERFLOW once the slot is complete; FP32
 * and FP64 lanes add in place (inc_fsum*_lanes: they cannot overflow), with
 * the certificate's abs sums when `cert`. Selection (MIN vs MAX, FP32 key)
 * uses masks computed once, so each loop body is straight-line code. */
static __always_inline void inc_combine(__u64 *acc, const __u64 *src, __u32 n, __u8 dtype, __u8 op,
					__u64 first, int cert)
{
	/* All ones when equal, without a branch: ((a ^ b) - 1) >> 31. */
	__u32 is_fp = inc_bit_mask((__u32)(dtype ^ INC_DTYPE_FP32) - 1, 31);
	__u64 min_mask = (__u64)(__s64)(__s32)inc_bit_mask((__u32)(op ^ INC_OP_MIN) - 1, 31);

	if (op >= INC_OP_BAND) {
		/* Masks as in min_mask: all ones unless the op is XOR (AND). */
		__u64 keep_and =
		    ~(__u64)(__s64)(__s32)inc_bit_mask((__u32)(op ^ INC_OP_BXOR) - 1, 31);
		__u64 keep_xor =
		    ~(__u64)(__s64)(__s32)inc_bit_mask((__u32)(op ^ INC_OP_BAND) - 1, 31);
		__u32 words = dtype == INC_DTYPE_INT64 ? n : (n + 1) / 2;

		inc_bitwise(acc, src, words, keep_and, keep_xor, first);
	} else if (dtype == INC_DTYPE_INT64) {
		if (op == INC_OP_SUM)
			inc_sum64((__s64 *)acc, (const __s64 *)src, n, first);
		else
			inc_minmax64((__s64 *)acc, (const __s64 *)src, n, min_mask, first);
	} else if (op != INC_OP_SUM) {
		/* A shift, not is_fp & 0x7fffffff: the verifier forks two
		 * states on an AND of a [-1, 0] value with a constant, and
		 * a constant key mask would fork every lane's (x >> 31) &
		 * key_mask again (4^4 paths per step). */
		inc_minmax32((__s32 *)acc, (const __s32 *)src, n, is_fp >> 1, min_mask, first);
	} else if (dtype == INC_DTYPE_FP32 || dtype == INC_DTYPE_FP64) {
		inc_fsum(acc, src, n, dtype, first, cert);
	} else {
		inc_sum32((__s64 *)acc, src, n, first);
	}
}

/* Turns a complete SUM accumulator into the wire-format result in place
 * and returns nonzero iff some lane's exact sum is outside the element
 * type. 4-byte lanes narrow pairwise: word j takes lanes 2j and 2j+1, which
 * were read from words 2j and 2j+1 >= j (little-endian lanes). A lane fits
 * int32 iff lane + 2^31 < 2^32, so or-ing those sums and testing the high
 * half once checks every lane. */
static __always_inline int inc_finish_sum(__u64 *acc, __u32 n, __u8 dtype)
{
	__u64 ovf = 0;
	__u32 pairs = (n + 1) / 2;

	if (dtype == INC_DTYPE_INT64) {
		const __s64 *wraps = (const __s64 *)acc + INC_MAX_LANES64;

		for (__u32 i = 0; i < INC_MAX_LANES64; i++) {
			if (i >= n)
				break;
			ovf |= wraps[i];
		}
		return ovf != 0;
	}
	/* Two pairs per step read up to lane n + 2: zero lanes n..n+2 (past
	 * the count, so not part of the result) and an odd last lane pairs
	 * with a zero lane. */
#pragma unroll
	for (__u32 k = 0; k < 3; k++) {
		__u32 pad = n + k;

		asm volatile("" : "+r"(pad)); /* bound-check the register used */
		if (pad < INC_MAX_LANES32)
			acc[pad] = 0;
	}
	for (__u32 i = 0; i < INC_MAX_LANES32 / 4; i++) {
		if (2 * i >= pairs)
			break;
#pragma unroll
		for (__u32 k = 0; k < 2; k++) {
			__u32 j = 2 * i + k;
			__u64 lo = acc[2 * j], hi = acc[2 * j + 1];

			ovf |= (lo + 0x80000000ull) | (hi + 0x80000000ull);
			acc[j] = (__u32)lo | (hi << 32);
		}
	}
	return (ovf >> 32) != 0;
}

/* ------------------------------------------------ accuracy certificate --
 * (inc_wire.h INC_AUX_*). Element i of a certified message is certified iff
 * A_i = sum over all ranks of |lane i| >= T, or (single switch) A_i = 0: every
 * lane is 0, and a member whose nonzero value rounded to lane 0 flags its
 * contribution INC_AUX_UNCERTIFIED, which flags the result (inc_combine_slot),
 * so an unflagged A_i = 0 is an exact zero sum. A leaf's trailer keeps
 * A_i >= T: its root ORs trailers, and a zero at one leaf says nothing about
 * another's elements. A single switch keeps the A_i
 * (inc_fsum*_lanes) and judges them at completion; a leaf turns its A_i
 * into the trailer of its partial (bit i: A_i >= T over its members, which
 * implies the total's); a root ORs its children's trailers. Members keep
 * every A_i below 2^30 (FP32) or 2^63 (FP64), which the comparisons below
 * rely on. They run once per message, at completion, under the slot lock
 * in inc_finish_slot (global: verified once). */

/* T = (C & 0xff) << ((C >> 8) & 0x3f) in *t, or -1 when T > limit. T <=
 * limit iff mant <= limit >> shift (integers), which shifts nothing out. */
static __always_inline int inc_cert_threshold(__u16 code, __u64 limit, __u64 *t)
{
	__u64 mant = code & 0xff;
	__u32 shift = (code >> 8) & 0x3f;

	if (mant > (limit >> shift))
		return -1;
	*t = mant << shift;
	return 0;
}

#define INC_CERT_TOP32 0x8000000080000000ull /* top bit of each u32 half */
#define INC_CERT_TOP64 0x8000000000000000ull

/* Single switch: nonzero iff some A_i (i < n) is below T and not 0. With
 * T < 2^31 copied into both halves (tt), (A | top) - tt keeps the top bit of
 * a half iff A >= T (A < 2^31: no borrow leaves the half), and A + 0x7fffffff
 * sets it iff A != 0 (no carry leaves the half); FP64 the same in one lane
 * with T < 2^63. The loops take 8 (4) lanes per bound check, so the
 * lanes past n up to the step are first set to the largest T, which they
 * pass. T above that: no conforming A_i reaches it. */
static __always_inline int inc_cert_check_sums(struct inc_slot *s, __u32 n)
{
	__u64 *sums = s->acc + INC_MAX_LANES64, bad = 0, t;

	if (n == 0)
		return 0;
	if (s->dtype == INC_DTYPE_FP64) {
		if (inc_cert_threshold(s->aux_code, INC_CERT_TOP64 - 1, &t))
			return 1;
#pragma unroll
		for (__u32 k = 0; k < 3; k++) {
			__u32 pad = n + k;

			asm volatile("" : "+r"(pad)); /* bound-check the register used */
			if (pad < INC_MAX_LANES64)
				sums[pad] = INC_CERT_TOP64 - 1;
		}
		for (__u32 i = 0; i < INC_MAX_LANES64 / 4; i++) {
			if (4 * i >= n)
				break;
#pragma unroll
			for (__u32 k = 0; k < 4; k++)
				bad |= ~((sums[4 * i + k] | INC_CERT_TOP64) - t) &
				       (sums[4 * i + k] + (INC_CERT_TOP64 - 1));
		}
		return (bad & INC_CERT_TOP64) != 0;
	}
	if (inc_cert_threshold(s->aux_code, 0x7fffffff, &t))
		return 1;
	t |= t << 32;
#pragma unroll
	for (__u32 k = 0; k < 7; k++) {
		__u32 pad = n + k;

		asm volatile("" : "+r"(pad));
		if (pad < INC_MAX_LANES32)
			((__u32 *)sums)[pad] = 0x7fffffff;
	}
	for (__u32 i = 0; i < INC_MAX_LANES32 / 8; i++) {
		if (8 * i >= n)
			break;
#pragma unroll
		for (__u32 k = 0; k < 4; k++)
			bad |= ~((sums[4 * i + k] | INC_CERT_TOP32) - t) &
			       (sums[4 * i + k] + (INC_CERT_TOP32 - 0x100000001ull));
	}
	return (bad & INC_CERT_TOP32) != 0;
}

/* Bits 0..rem-1 set, rem in 1..64 (two shifts: x << 64 is undefined). */
static __always_inline __u64 inc_low_bits(__u32 rem)
{
	return ~((~0ull << (rem - 1)) << 1);
}

/* Leaf: replaces the A_i by its partial's trailer, word w at sums[w]. Word w
 * reads the sums of lanes 64w..64w+63, i.e. words from 32w (FP32) or 64w
 * (FP64) on, which are >= w: every word read before it is written is still
 * the sums. Bits past n are cleared, words past the last zeroed. */
static __always_inline void inc_cert_trailer(struct inc_slot *s, __u32 n)
{
	__u64 *sums = s->acc + INC_MAX_LANES64, t = 0, bits;
	__u32 last = n ? (n - 1) / 64 : 0;
	int none; /* no element, or T above every conforming A_i */

	if (last >= INC_CERT_TRAILER_WORDS)
		last = INC_CERT_TRAILER_WORDS - 1;
	if (s->dtype == INC_DTYPE_FP64) {
		none = !n || inc_cert_threshold(s->aux_code, INC_CERT_TOP64 - 1, &t);
		for (__u32 w = 0; w < INC_MAX_LANES64 / 64; w++) {
			if (w > last || none)
				break;
			bits = 0;
			/* Lane 64w + k ends at bit k after the 64 shifts. */
#pragma unroll 8
			for (__u32 k = 0; k < 64; k++)
				bits = (bits >> 1) |
				       (((sums[64 * w + k] | INC_CERT_TOP64) - t) & INC_CERT_TOP64);
			sums[w] = bits;
		}
	} else {
		none = !n || inc_cert_threshold(s->aux_code, 0x7fffffff, &t);
		t |= t << 32;
		for (__u32 w = 0; w < INC_CERT_TRAILER_WORDS; w++) {
			if (w > last || none)
				break;
			bits = 0;
			/* Lanes 64w + 2k and 2k + 1 end at bits 2k, 2k + 1. */
#pragma unroll 8
			for (__u32 k = 0; k < 32; k++) {
				__u64 d = (sums[32 * w + k] | INC_CERT_TOP32) - t;

				bits =
				    (bits >> 2) | ((d << 31) & (1ull << 62)) | (d & INC_CERT_TOP64);
			}
			sums[w] = bits;
		}
	}
	if (none) {
		last = 0;
		sums[0] = 0;
	} else {
		sums[last] &= inc_low_bits(n - 64 * last);
	}
	for (__u32 w = 1; w < INC_CERT_TRAILER_WORDS; w++) {
		if (w > last)
			sums[w] = 0;
	}
}

/* Root: nonzero iff some element i < n has no bit in the OR of the
 * children's trailers (a child without a trailer certified nothing). */
static __always_inline int inc_cert_check_bitmap(struct inc_slot *s, __u32 n)
{
	const __u64 *bm = s->acc + INC_MAX_LANES64;
	__u64 bad = 0;
	__u32 last;

	if (n == 0)
		return 0;
	last = (n - 1) / 64;
	if (last >= INC_CERT_TRAILER_WORDS)
		return 1;
	for (__u32 w = 0; w < INC_CERT_TRAILER_WORDS; w++) {
		if (w >= last)
			break;
		bad |= ~bm[w];
	}
	bad |= ~bm[last] & inc_low_bits(n - 64 * last);
	return bad != 0;
}

/* The contribution in scratch into the slot copy, under its lock. Every
 * operand is read back from the slot (set or checked equal just before), not
 * taken from the caller's registers: the verifier knows nothing about map
 * memory, so every path that gets here enters the lane loops in the same
 * state and they are walked once, not once per path. `first` (all ones iff
 * the bitmap is empty) is computed without a branch for the same reason. */
static __always_inline void inc_combine_slot(struct inc_slot *s, const struct inc_scratch *payload,
					     __u8 ver_flags, const struct inc_tree_cfg *tree,
					     __u16 aux)
{
	__u64 bitmap, neg, *bm = s->acc + INC_MAX_LANES64;
	__u32 cert;

	/* Before the lane loops, so that nothing it branched on is live
	 * across them (they would be walked once per outcome): a root ORs its
	 * children's trailers; a child without one (no room at its leaf, or a
	 * member) certifies nothing. Only certified messages hold a code. */
	if (s->aux_code && tree->role == INC_ROLE_ROOT) {
		if (!s->bitmap) {
#pragma unroll
			for (__u32 w = 0; w < INC_CERT_TRAILER_WORDS; w++)
				bm[w] = 0;
		}
		if (aux & INC_AUX_TRAILER) {
#pragma unroll
			for (__u32 w = 0; w < INC_CERT_TRAILER_WORDS; w++)
				bm[w] |= payload->trailer[w];
		}
	}
	asm volatile("" ::: "memory"); /* load the fields, do not forward stores */
	bitmap = s->bitmap;
	/* Hidden from clang, which would turn (b | -b) >> 63 into b != 0, i.e.
	 * a branch, and the lane loops would be walked once per outcome. */
	neg = -bitmap;
	asm volatile("" : "+r"(neg));
	/* Abs sums unless a root (it judges its children's trailers, not
	 * partials): nonzero iff both factors are, as a product behind a
	 * barrier so that no 0/1 outcome of a branch is live in the loops. */
	cert = (__u32)s->aux_code * (tree->role ^ INC_ROLE_ROOT);
	asm volatile("" : "+r"(cert));
	inc_combine(s->acc, payload->buf, s->count, s->dtype, s->op, ((bitmap | neg) >> 63) - 1,
		    cert);
	/* A child switch's partial that was out of range (see
	 * docs/wire-format.md: OVERFLOW in two-level trees). */
	if (s->op == INC_OP_SUM)
		s->flags |= ver_flags & INC_FLAG_OVERFLOW;
	/* A member that rounded a nonzero value to lane 0, or a leaf whose
	 * partial is uncertified: the result is (see the certificate below). */
	if (s->aux_code && (aux & INC_AUX_UNCERTIFIED))
		s->flags |= INC_SLOT_FLAG_UNCERTIFIED;
}

/* Message m is newer than the copy's (serial-number order, 32-bit wrap). */
static __always_inline int inc_msg_newer(__u32 m, __u32 held)
{
	return (__s32)(m - held) > 0;
}

/* Folds one contribution into the slot copy under its lock. */
static __always_inline int inc_contribute(struct inc_slot *s, const struct inc_tree_cfg *tree,
					  const struct inc_hdr *h,
					  const struct inc_scratch *payload, __u32 msg, __u32 rank,
					  __u32 count, __u32 payload_len)
{
	__u8 coll = h->collective, dtype = h->dtype, op = h->op;
	__u16 aux = bpf_ntohs(h->aux);
	__u64 bit = 1ull << (rank & 63);
	int out;

	bpf_spin_lock(&s->lock);
	if (s->state == INC_SLOT_EMPTY || (s->msg_id != msg && inc_msg_newer(msg, s->msg_id))) {
		s->msg_id = msg;
		s->bitmap = 0;
		s->state = INC_SLOT_AGGREGATING;
		s->collective = coll;
		s->dtype = dtype;
		s->op = op;
		s->exponent = h->exponent;
		s->root_rank = h->root_rank;
		s->flags = 0;
		s->count = coll == INC_COLL_BROADCAST ? 0 : count;
		s->aux_code = inc_certified_msg(coll, dtype, op) ? aux & INC_AUX_CODE_MASK : 0;
	} else if (s->msg_id != msg) {
		out = INC_OUT_DROP_BASE + INC_DROP_STALE;
		goto unlock;
	}
	if (s->collective != coll || (coll != INC_COLL_BARRIER && s->dtype != dtype) ||
	    ((coll == INC_COLL_ALLREDUCE || coll == INC_COLL_REDUCE) && s->op != op) ||
	    ((coll == INC_COLL_REDUCE || coll == INC_COLL_BROADCAST) &&
	     s->root_rank != h->root_rank)) {
		out = INC_OUT_DROP_BASE + INC_DROP_BAD_DTYPE_OP;
		goto unlock;
	}
	/* A retransmission is answered before the count check: a leaf holding
	 * the parent's Reduce result for a subtree without the root stores
	 * count 0, so a child's full contribution must not read as bad_count. */
	if (s->bitmap & bit) {
		if (s->state == INC_SLOT_DONE)
			out = INC_OUT_RESEND_RESULT;
		else if (s->state == INC_SLOT_WAITING)
			out = INC_OUT_RESEND_PARTIAL;
		else
			out = INC_OUT_DROP_BASE + INC_DROP_DUPLICATE;
		goto unlock;
	}
	if (coll != INC_COLL_BROADCAST && s->count != count) {
		out = INC_OUT_DROP_BASE + INC_DROP_BAD_COUNT;
		goto unlock;
	}
	if (coll != INC_COLL_BARRIER && coll != INC_COLL_BROADCAST && dtype == INC_DTYPE_FP32 &&
	    op == INC_OP_SUM && s->exponent != h->exponent) {
		out = INC_OUT_DROP_BASE + INC_DROP_EXP_MISMATCH;
		goto unlock;
	}
	/* Like the exponent: one threshold code per message, or the
	 * certificate would answer a question no member asked. */
	if (inc_certified_msg(coll, dtype, op) && s->aux_code != (aux & INC_AUX_CODE_MASK)) {
		out = INC_OUT_DROP_BASE + INC_DROP_BAD_AUX;
		goto unlock;
	}
	if (coll == INC_COLL_BROADCAST) {
		if (count) {
			inc_copy_lanes(s->acc, payload->buf, payload_len);
			s->count = count;
		}
	} else if (coll != INC_COLL_BARRIER) {
		inc_combine_slot(s, payload, h->ver_flags, tree, aux);
	}
	/* Collective and op from the slot again (equal to the frame's), so the
	 * registers that held them are dead across the lane loops. */
	asm volatile("" ::: "memory");
	coll = s->collective;
	s->bitmap |= bit;
	if (s->bitmap == tree->children_mask) {
		if (coll != INC_COLL_BARRIER && coll != INC_COLL_BROADCAST && s->op == INC_OP_SUM &&
		    (s->dtype == INC_DTYPE_INT32 || s->dtype == INC_DTYPE_INT64 || s->aux_code)) {
			/* Stays AGGREGATING with the full bitmap (so a
			 * retransmission meanwhile is a duplicate) until
			 * inc_finish_slot has narrowed the integer sums or
			 * judged the certificate. */
			out = INC_OUT_FINISH;
			goto unlock;
		}
		s->state = tree->role == INC_ROLE_LEAF ? INC_SLOT_WAITING : INC_SLOT_DONE;
		out = INC_OUT_COMPLETE;
	} else {
		out = INC_OUT_CONSUMED;
	}
unlock:
	bpf_spin_unlock(&s->lock);
	return out;
}

/* Who sent the frame inc_update_slot applies, besides child ranks 0..63. */
#define INC_FROM_PARENT	      INC_MAX_CHILDREN	     /* a RESULT */
#define INC_FROM_PARENT_PULL  (INC_MAX_CHILDREN + 1) /* a PULL */
#define INC_FROM_CHILD_RESULT 128		     /* + child rank: an answered PULL */

/* A PULL from the parent (leaf role): only a finished copy of that very
 * message has something the new root lacks. Whatever is still aggregating
 * or waiting reaches the parent through the members' own retransmissions. */
static __always_inline int inc_answer_pull(struct inc_slot *s, __u32 msg)
{
	int out = INC_OUT_PULL_IGNORED;

	bpf_spin_lock(&s->lock);
	if (s->state == INC_SLOT_DONE && s->msg_id == msg)
		out = INC_OUT_RESULT_UP;
	bpf_spin_unlock(&s->lock);
	return out;
}

/* Stores a RESULT from the parent in the slot copy (leaf role), or (root
 * role, `adopt`) the result a child switch answered a PULL with: the old
 * root finished that message before the tree moved, so it is the whole
 * group's result. */
static __always_inline int inc_store_result(struct inc_slot *s, const struct inc_tree_cfg *tree,
					    const struct inc_hdr *h,
					    const struct inc_scratch *payload, __u32 msg,
					    __u32 count, __u32 payload_len, int adopt)
{
	int out = adopt ? INC_OUT_ADOPTED : INC_OUT_REPLICATE;

	bpf_spin_lock(&s->lock);
	if (s->state != INC_SLOT_EMPTY && s->msg_id != msg && !inc_msg_newer(msg, s->msg_id)) {
		out = INC_OUT_DROP_BASE + INC_DROP_STALE;
		goto unlock;
	}
	if (s->state == INC_SLOT_DONE && s->msg_id == msg) {
		/* The parent resent it: replicate again. A second answer
		 * to a pull is a duplicate. */
		if (adopt)
			out = INC_OUT_DROP_BASE + INC_DROP_DUPLICATE;
		goto unlock;
	}
	inc_copy_lanes(s->acc, payload->buf, payload_len);
	s->msg_id = msg;
	s->bitmap = tree->children_mask;
	s->state = INC_SLOT_DONE;
	s->collective = h->collective;
	s->dtype = h->dtype;
	s->op = h->op;
	s->exponent = h->exponent;
	s->root_rank = h->root_rank;
	/* Whatever the result says about the certificate, so that every copy
	 * this switch sends of it says the same. */
	s->flags = (h->ver_flags & INC_FLAG_OVERFLOW) |
		   (bpf_ntohs(h->aux) & INC_AUX_UNCERTIFIED ? INC_SLOT_FLAG_UNCERTIFIED : 0);
	s->aux_code = bpf_ntohs(h->aux) & INC_AUX_CODE_MASK;
	s->count = count;
unlock:
	bpf_spin_unlock(&s->lock);
	return out;
}

/* Global (verified once): reached from every path of inc_update_slot, the
 * narrowing and certificate loops would otherwise be re-verified per path.
 * Completes a SUM slot copy that inc_contribute left AGGREGATING with the
 * full bitmap: integer sums narrowed (OVERFLOW), or a certified float sum
 * judged (single, root) or turned into its partial's trailer (leaf). */
__attribute__((noinline)) int inc_finish_slot(__u32 slot_idx, __u32 msg, __u64 children_mask,
					      __u32 role)
{
	struct inc_slot *s = bpf_map_lookup_elem(&slots, &slot_idx);
	int out = INC_OUT_COMPLETE;

	if (!s)
		return INC_OUT_DROP_BASE + INC_DROP_BAD_SLOT;
	bpf_spin_lock(&s->lock);
	if (s->msg_id != msg || s->state != INC_SLOT_AGGREGATING || s->bitmap != children_mask) {
		out = INC_OUT_DROP_BASE + INC_DROP_STALE; /* reset by a newer message */
		goto unlock;
	}
	if (s->dtype == INC_DTYPE_INT32 || s->dtype == INC_DTYPE_INT64) {
		if (inc_finish_sum(s->acc, s->count, s->dtype))
			s->flags |= INC_FLAG_OVERFLOW;
	} else if (role == INC_ROLE_LEAF) {
		inc_cert_trailer(s, s->count);
	} else if (role == INC_ROLE_ROOT ? inc_cert_check_bitmap(s, s->count)
					 : inc_cert_check_sums(s, s->count)) {
		s->flags |= INC_SLOT_FLAG_UNCERTIFIED;
	}
	s->state = role == INC_ROLE_LEAF ? INC_SLOT_WAITING : INC_SLOT_DONE;
unlock:
	bpf_spin_unlock(&s->lock);
	return out;
}

/* Global (verified once, with unknown arguments) so the lane loops under the
 * lock are not re-verified for every path that reaches them. Applies the
 * frame (already validated, payload in scratch) to the slot copy: child
 * rank's contribution, or what INC_FROM_* says. Returns an enum inc_outcome.
 * The caller's tree and scratch values come in as plain memory (read only);
 * the slot is looked up here, since its lock needs a map value pointer. */
__attribute__((noinline)) int inc_update_slot(struct xdp_md *ctx, __u32 slot_idx,
					      const struct inc_tree_cfg *tree,
					      const struct inc_scratch *payload, __u32 rank)
{
	struct inc_slot *s;
	struct inc_pkt p;
	__u32 udp_len, len, count, msg;
	int out;

	s = bpf_map_lookup_elem(&slots, &slot_idx);
	if (!payload || !tree || !s || inc_pkt_load(ctx, &p))
		return INC_OUT_DROP_BASE + INC_DROP_BAD_SLOT;
	udp_len = bpf_ntohs(p.udp->len);
	if (udp_len < 8 + INC_UDP_FIXED)
		return INC_OUT_DROP_BASE + INC_DROP_TRUNC_INC;
	len = udp_len - 8 - INC_UDP_FIXED;
	/* The elements only: a child's trailer is in payload->trailer. */
	if (bpf_ntohs(p.inc->aux) & INC_AUX_TRAILER)
		len -= INC_CERT_TRAILER_BYTES;
	if (len > INC_MAX_PAYLOAD_BYTES)
		return INC_OUT_DROP_BASE + INC_DROP_BAD_COUNT;
	count = bpf_ntohs(p.inc->count);
	msg = bpf_ntohl(p.inc->msg_id);
	if (rank == INC_FROM_PARENT_PULL)
		return inc_answer_pull(s, msg);
	if (rank >= INC_MAX_CHILDREN)
		return inc_store_result(s, tree, p.inc, payload, msg, count, len,
					rank >= INC_FROM_CHILD_RESULT);
	out = inc_contribute(s, tree, p.inc, payload, msg, rank, count, len);
	if (out == INC_OUT_FINISH)
		out = inc_finish_slot(slot_idx, msg, tree->children_mask, tree->role);
	return out;
}

#endif /* INC_AGGREGATE_H */
