/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Benchmark floor for dp_bench: the least work any INT32 SUM aggregation of
 * one packet must do. One bounds check, then BENCH_FLOOR_ELEMS int32 lanes
 * read from the packet's INC payload and added into one map value. No
 * parsing, no validation, no locking, no ICRC: the data path's INT32
 * contribution is compared against this. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "inc_wire.h"

#define BENCH_FLOOR_ELEMS 256

struct bench_acc {
	__u32 lane[BENCH_FLOOR_ELEMS];
};

/* The accumulator the floor adds into (one entry, shared by all CPUs). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bench_acc);
} floor_acc SEC(".maps");

SEC("xdp")
int bench_floor(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	const __u32 *in = data + INC_OFF_PAYLOAD;
	struct bench_acc *acc;
	__u32 key = 0;
	int i;

	if ((void *)(in + BENCH_FLOOR_ELEMS) > data_end)
		return XDP_PASS;
	acc = bpf_map_lookup_elem(&floor_acc, &key);
	if (!acc)
		return XDP_PASS;
#pragma unroll
	for (i = 0; i < BENCH_FLOOR_ELEMS; i++)
		acc->lane[i] += in[i];
	return XDP_DROP;
}

/* Attached to the far end of dp_bench's veths: drops the copies the switch
 * sends, so a live measurement includes the veth hand-over but not the peer
 * stack's receive path. */
SEC("xdp")
int bench_sink(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
