/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Map layout of the benchmark suite's forwarding ceiling, shared by
 * bpf/bench/fwd_ceiling.bpf.c and its loader bench/suite/fwd_ceiling.cc.
 */
#ifndef INC_BENCH_FWD_CEILING_H
#define INC_BENCH_FWD_CEILING_H

#include <linux/types.h>

/* ICRC deltas are kept for UDP lengths 0..FWD_MAX_UDP_LEN-1. */
#define FWD_MAX_UDP_LEN 4096
#define FWD_MAX_PORTS	64

/*
 * One worker-facing port. Turning a member's contribution into a result
 * changes a fixed set of ICRC-covered bits (source/destination IPv4 swapped,
 * DestQP switch QPN -> member QPN, RESULT flag set); the ICRC is linear over
 * GF(2), so for a given UDP length the change of the ICRC is a constant that
 * the loader precomputes.
 */
struct fwd_port {
	__u32 member_qpn;
	__u32 reserved;
	__u32 icrc_delta[FWD_MAX_UDP_LEN]; /* XORed into the ICRC value */
};

enum fwd_stat {
	FWD_STAT_REFLECTED = 0, /* INC contribution sent back as a result */
	FWD_STAT_PASS,		/* not RoCEv2: kernel stack */
	FWD_STAT_UNKNOWN_PORT,	/* RoCEv2 on a port without a fwd_port entry: dropped */
	FWD_STAT_BAD_LENGTH,	/* UDP length disagrees with the frame or too long: dropped */
	FWD_STAT__MAX,
};

#endif /* INC_BENCH_FWD_CEILING_H */
