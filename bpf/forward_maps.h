/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps of the best-path forwarder (ABI in inc_forward.h); none is pinned. */
#ifndef INC_FORWARD_MAPS_H
#define INC_FORWARD_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "inc_forward.h"

/* Best-path table: destination prefix -> next hops with cost and ARN marks.
 * Kept by the agent (desired state, rebuilt at every load); a /32 entry with
 * no hops marks one of the switch's own addresses (to the kernel). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, INC_BPT_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct inc_bpt_key);
	__type(value, struct inc_bpt_entry);
} bpt SEC(".maps");

/* Local detection per egress port (ifindex -> INC_PORT_* flags), written by
 * the agent's congestion/failure detector; no entry = healthy. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, INC_FWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct inc_port_health);
} port_health SEC(".maps");

/* Per-CPU bytes and packets the forwarder sent per egress port (ifindex);
 * entries are created by the agent for every port, read for utilisation. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, INC_FWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct inc_port_tx);
} port_tx SEC(".maps");

/* Per-CPU forwarder counters (key: enum inc_fwd_stat). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_FWD__MAX);
	__type(key, __u32);
	__type(value, __u64);
} fwd_stats SEC(".maps");

#endif /* INC_FORWARD_MAPS_H */
