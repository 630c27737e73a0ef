/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Checksums: the IPv4 header checksum and the RoCEv2 ICRC.
 *
 * ICRC = ~crc32_le(0xDEBB20E3, H || R) where H is the masked IP/UDP/BTH
 * headers plus the RETH (56 bytes, different for every destination) and R is
 * IMMDT + INC header + payload (the same for every copy of a result). CRC is
 * linear over GF(2), so crc32_le(seed, H || R) = crc32_le(seed, H) * x^(8|R|)
 * mod P xor crc32_le(0, R): a result computes crc32_le(0, R) once and every
 * copy adds its 56-byte header with one multiplication (x^(8|R|) comes from
 * the xpow map). */
#ifndef INC_CSUM_H
#define INC_CSUM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "tree_maps.h"

#define INC_CRC_POLY  0xEDB88320u
#define INC_ICRC_SEED 0xDEBB20E3u /* crc32_le(~0, 8 bytes of 0xFF) */

/* Set by the loader: slice-by-8 tables of the reflected CRC-32 polynomial
 * (table k = CRC of a byte followed by k zero bytes) and whether ingress
 * verifies the ICRC of every INC frame. */
const volatile __u32 inc_crc_tbl[8][256] = {};
const volatile __u8 inc_verify_icrc = 1;

#define INC_T(k, v) inc_crc_tbl[k][(v)&0xff]

static __always_inline __u32 inc_crc_step8(__u32 crc, __u32 lo, __u32 hi)
{
	lo ^= crc;
	return INC_T(7, lo) ^ INC_T(6, lo >> 8) ^ INC_T(5, lo >> 16) ^ INC_T(4, lo >> 24) ^
	       INC_T(3, hi) ^ INC_T(2, hi >> 8) ^ INC_T(1, hi >> 16) ^ INC_T(0, hi >> 24);
}

static __always_inline __u32 inc_crc_step4(__u32 crc, __u32 w)
{
	w ^= crc;
	return INC_T(3, w) ^ INC_T(2, w >> 8) ^ INC_T(1, w >> 16) ^ INC_T(0, w >> 24);
}

/* Chorba folding (arXiv 2412.16398): P divides x^300 + x^155 + x^117 +
 * x^89 + 1, so adding copies of a stream bit 145, 183, 211 and 300 bits
 * later and clearing it leaves the CRC unchanged. In little-endian 64-bit
 * words (bit j of word i = stream bit 64i + j), word x folds into the words
 * 2..5 after it; a fold costs shifts and xors, no table lookup. The first
 * two copies are 38 bits apart, so x ^ x << 38 and x ^ x >> 38 serve both. */
static __always_inline __u64 inc_fold2(__u64 x)
{
	return (x ^ (x << 38)) << 17;
}

static __always_inline __u64 inc_fold3(__u64 x)
{
	return ((x ^ (x >> 38)) >> 9) ^ (x << 19);
}

static __always_inline __u64 inc_fold4(__u64 x)
{
	return (x >> 45) ^ (x << 44);
}

static __always_inline __u64 inc_fold5(__u64 x)
{
	return x >> 20;
}

/* crc32_le(0, .) of the unfolded words from `first` on (at most 9), each
 * xored with what the folds left for it (c0 for word `first`, ...), and of
 * the last 4 bytes when len % 8 == 4. Leading zero words do not change
 * crc32_le(0, .), so this is the CRC of the whole folded buffer. */
static __always_inline __u32 inc_crc_fold_tail(const __u64 *buf, __u32 len, __u32 first, __u64 c0,
					       __u64 c1, __u64 c2, __u64 c3, __u64 c4)
{
	__u32 words = len / 8, crc = 0, j;

	for (__u32 i = 0; i < 9; i++) {
		__u64 w;

		j = first + i;
		asm volatile("" : "+r"(j)); /* bound-check the register used */
		if (j >= words || j >= INC_MAX_PAYLOAD_BYTES / 8)
			break;
		w = buf[j] ^ c0;
		crc = inc_crc_step8(crc, (__u32)w, (__u32)(w >> 32));
		c0 = c1;
		c1 = c2;
		c2 = c3;
		c3 = c4;
		c4 = 0;
	}
	j = words;
	asm volatile("" : "+r"(j));
	if ((len & 4) && j < INC_MAX_PAYLOAD_BYTES / 8)
		crc = inc_crc_step4(crc, (__u32)(buf[j] ^ c0));
	return crc;
}

/* Words of a len-byte buffer that fold in pairs: all but the last 5 or 6. */
static __always_inline __u32 inc_crc_fold_pairs(__u32 len)
{
	__u32 words = len / 8;

	return words > 5 ? (words - 5) / 2 : 0;
}

/* crc32_le over len bytes (a multiple of 4, <= INC_MAX_PAYLOAD_BYTES) of an
 * 8-byte aligned buffer in map memory: the seed xored into the first 4 bytes
 * (crc32_le(crc, D) = crc32_le(0, D ^ crc) for |D| >= 4), every word but the last 5 or 6
 * folded forward two at a time, the rest by the tables. */
static __always_inline __u32 inc_crc_buf(__u32 crc, const __u64 *buf, __u32 len)
{
	__u32 pairs = inc_crc_fold_pairs(len);
	__u64 c0 = crc, c1 = 0, c2 = 0, c3 = 0, c4 = 0, x, y;

	if (len == 0)
		return crc; /* no bytes to carry the seed */
	for (__u32 i = 0; i < INC_MAX_PAYLOAD_BYTES / 16; i++) {
		if (i >= pairs)
			break;
		x = buf[2 * i] ^ c0;
		y = buf[2 * i + 1] ^ c1;
		c0 = c2 ^ inc_fold2(x);
		c1 = c3 ^ inc_fold3(x) ^ inc_fold2(y);
		c2 = c4 ^ inc_fold4(x) ^ inc_fold3(y);
		c3 = inc_fold5(x) ^ inc_fold4(y);
		c4 = inc_fold5(y);
	}
	/* The tail's start again from a copy of len that clang cannot prove
	 * equal: the loop's exit test narrowed `pairs` differently at every
	 * iteration, and the verifier would walk the tail once per exit. */
	asm volatile("" : "+r"(len));
	return inc_crc_fold_tail(buf, len, 2 * inc_crc_fold_pairs(len), c0, c1, c2, c3, c4);
}

/* Global wrappers (verified once): crc32_le(crc, ...) over the first len
 * bytes of a slot copy's accumulator, or of this CPU's payload scratch. */
__attribute__((noinline)) __u32 inc_crc_slot_acc(__u32 slot_idx, __u32 crc, __u32 len)
{
	struct inc_slot *s = bpf_map_lookup_elem(&slots, &slot_idx);

	if (!s || len > INC_MAX_PAYLOAD_BYTES)
		return crc;
	return inc_crc_buf(crc, s->acc, len);
}

__attribute__((noinline)) __u32 inc_crc_scratch(__u32 crc, __u32 len)
{
	__u32 zero = 0;
	struct inc_scratch *b = bpf_map_lookup_elem(&scratch, &zero);

	if (!b || len > INC_MAX_PAYLOAD_BYTES)
		return crc;
	return inc_crc_buf(crc, b->buf, len);
}

/* crc32_le(crc, .) continued over a certificate trailer (12 words of map
 * memory): table steps, 96 bytes do not pay for the fold's setup. */
static __always_inline __u32 inc_crc_trailer(__u32 crc, const __u64 *t)
{
#pragma unroll
	for (int w = 0; w < INC_CERT_TRAILER_WORDS; w++)
		crc = inc_crc_step8(crc, (__u32)t[w], (__u32)(t[w] >> 32));
	return crc;
}

/* All ones if bit `bit` of v is set. Written as shift-left/arith-shift
 * behind a barrier: the verifier forks two states on the -(v & 1) form clang
 * would otherwise emit, which is 2^32 paths through the multiply below. */
static __always_inline __u32 inc_bit_mask(__u32 v, int bit)
{
	__u32 t = v << (31 - bit);

	asm volatile("" : "+r"(t));
	return (__u32)((__s32)t >> 31);
}

/* a * b mod P for CRC registers (reflected bit order: bit 31 is x^0). */
static __always_inline __u32 inc_crc_mulmodp(__u32 a, __u32 b)
{
	__u32 product = 0;

	/* Multiplying by a 0/1 bit instead of masking with 0/-1: the verifier
	 * forks two states on "AND with a value in [-1, 0]", which would be
	 * 2^32 paths through this loop. */
#pragma unroll
	for (int bit = 31; bit >= 0; bit--) {
		product ^= b * ((a >> bit) & 1);
		b = (b >> 1) ^ (INC_CRC_POLY * (b & 1));
	}
	return product;
}

static __always_inline __u32 inc_load32(const __u8 *p)
{
	return *(const __u32 *)p; /* unaligned packet loads are fine on x86/arm64 */
}

/* crc32_le(crc, IMMDT || INC header): the first 28 bytes of R. pkt must have
 * been bounds-checked up to INC_OFF_PAYLOAD. */
static __always_inline __u32 inc_crc_r_head(__u32 crc, const __u8 *pkt)
{
	const __u8 *p = pkt + INC_OFF_IMMDT;

	crc = inc_crc_step8(crc, inc_load32(p), inc_load32(p + 4));
	crc = inc_crc_step8(crc, inc_load32(p + 8), inc_load32(p + 12));
	crc = inc_crc_step8(crc, inc_load32(p + 16), inc_load32(p + 20));
	return inc_crc_step4(crc, inc_load32(p + 24));
}

/* crc32_le(INC_ICRC_SEED, H): the masked IP/UDP/BTH headers and the RETH. */
static __always_inline __u32 inc_crc_headers(const __u8 *pkt)
{
	const __u8 *p = pkt + INC_OFF_IP;
	__u32 crc = INC_ICRC_SEED;

	crc = inc_crc_step8(crc, inc_load32(p) | 0x0000ff00u, inc_load32(p + 4));
	crc = inc_crc_step8(crc, inc_load32(p + 8) | 0xffff00ffu, inc_load32(p + 12));
	crc = inc_crc_step8(crc, inc_load32(p + 16), inc_load32(p + 20));
	crc = inc_crc_step8(crc, inc_load32(p + 24) | 0xffff0000u, inc_load32(p + 28));
	crc = inc_crc_step8(crc, inc_load32(p + 32) | 0x000000ffu, inc_load32(p + 36));
	crc = inc_crc_step8(crc, inc_load32(p + 40), inc_load32(p + 44));
	crc = inc_crc_step8(crc, inc_load32(p + 48), inc_load32(p + 52));
	return crc;
}

/* The ICRC value from the header CRC and crc32_le(0, R); -1 if |R| is not a
 * multiple of 4 or too long. */
static __always_inline int inc_icrc_combine(__u32 crc_h, __u32 crc_r, __u32 len_r, __u32 *icrc)
{
	__u32 idx = len_r / 4;
	__u32 *xp;

	if (len_r & 3)
		return -1;
	xp = bpf_map_lookup_elem(&xpow, &idx);
	if (!xp)
		return -1;
	*icrc = ~(inc_crc_mulmodp(crc_h, *xp) ^ crc_r);
	return 0;
}

/* IPv4 header checksum over 20 bytes (the checksum field must be 0). */
static __always_inline __u16 inc_ip_csum(const __u8 *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

#endif /* INC_CSUM_H */
