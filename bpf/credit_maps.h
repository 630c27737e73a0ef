/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps of the credit gate (ABI in inc_credit.h); none is pinned. */
#ifndef INC_CREDIT_MAPS_H
#define INC_CREDIT_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "inc_credit.h"

/* Credit flow control. RoCEv2 flow key -> counter index and
 * current next hop; written by the agent, rewritten on failover. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, INC_CREDIT_MAX_FLOWS);
	__type(key, struct inc_credit_flow_key);
	__type(value, struct inc_credit_flow);
} credit_flows SEC(".maps");

/* Credit counters per flow index (granted by the agent, consumed and queued
 * advanced atomically); mmapable so the agent reads and grants without a
 * syscall per update. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INC_CREDIT_MAX_FLOWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct inc_credit_counters);
} credit_counters SEC(".maps");

/* (flow index, ingress port) -> bytes of the flow that came in on that port
 * and left this switch (forwarded or delivered); the agent creates the
 * entries of its upstream ports and returns credit from them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4 * INC_CREDIT_MAX_FLOWS);
	__type(key, struct inc_credit_ingress_key);
	__type(value, __u64);
} credit_ingress SEC(".maps");

/* (ingress ifindex, rx queue) -> slot of credit_xsks holding the agent's
 * hold-queue AF_XDP socket for that queue. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, INC_CREDIT_MAX_XSKS);
	__type(key, struct inc_credit_xsk_key);
	__type(value, __u32);
} credit_xsk_slots SEC(".maps");

/* Hold-queue AF_XDP sockets of the agent, by slot (see credit_xsk_slots). */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, INC_CREDIT_MAX_XSKS);
	__type(key, __u32);
	__type(value, __u32);
} credit_xsks SEC(".maps");

/* Per-CPU counters of the credit gate, key enum inc_credit_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_CREDIT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} credit_stats SEC(".maps");

#endif /* INC_CREDIT_MAPS_H */
