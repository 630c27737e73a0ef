/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps of the INC stage (trees, slots, their counters; ABI in inc_tree.h).
 * Maps marked "pinned" hold live state and are pinned under
 * <pin_root>/<switch>/ by the agent so a restarted agent keeps every tree
 * aggregating; the others are rebuilt at every load. */
#ifndef INC_TREE_MAPS_H
#define INC_TREE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "inc_tree.h"

/* Pinned. Tree configuration by tree id (role, key, pool, masks, parent). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INC_MAX_TREES);
	__type(key, __u32);
	__type(value, struct inc_tree_cfg);
} trees SEC(".maps");

/* Pinned. Child endpoints, key inc_child_index(tree, rank). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INC_MAX_TREES *INC_MAX_CHILDREN);
	__type(key, __u32);
	__type(value, struct inc_endpoint);
} children SEC(".maps");

/* Pinned. (egress port, tree) -> rank of the tree's child behind that port;
 * the devmap egress program uses it to address each broadcast copy. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, INC_MAX_PORT_CHILDREN);
	__type(key, struct inc_port_key);
	__type(value, __u32);
} port_child SEC(".maps");

/* Pinned. Slot copies (accumulator, bitmap, state); max_entries is set at
 * load to 2 * Options::slot_capacity. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct inc_slot);
} slots SEC(".maps");

/* Pinned. Next PSN of frames toward each peer, key inc_psn_index(tree, peer)
 * (peer = child rank, or INC_PEER_PARENT). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INC_MAX_TREES *INC_PEERS_PER_TREE);
	__type(key, __u32);
	__type(value, __u32);
} psn SEC(".maps");

/* Pinned. Global per-CPU counters, key enum inc_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_STAT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Pinned. Per-CPU drop counters, key enum inc_drop_reason. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_DROP__MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* Pinned. Per-CPU counters per tree, key tree id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_MAX_TREES);
	__type(key, __u32);
	__type(value, struct inc_counters);
} tree_stats SEC(".maps");

/* Pinned. Per-CPU counters per member QP, key inc_child_index(tree, rank). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_MAX_TREES *INC_MAX_CHILDREN);
	__type(key, __u32);
	__type(value, struct inc_counters);
} member_stats SEC(".maps");

/* This switch's own IPv4 addresses (network order -> number of endpoints
 * that use it as switch_ip): only RoCE frames addressed to one of them are
 * INC, others are routed by the kernel. Rebuilt from the trees by the agent
 * at every load and tree change. */
#define INC_MAX_LOCAL_IPS 1024
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, INC_MAX_LOCAL_IPS);
	__type(key, __u32);
	__type(value, __u32);
} local_ips SEC(".maps");

/* Switch ports for result broadcast (key and value ifindex, with the egress
 * program attached to every entry). Rebuilt by the agent at every load. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, INC_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} ports SEC(".maps");

/* x^(32 i) mod P in CRC register form, index i = |R| / 4: turns the CRC of
 * the per-destination headers into their contribution to the ICRC. Filled
 * by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INC_XPOW_ENTRIES);
	__type(key, __u32);
	__type(value, __u32);
} xpow SEC(".maps");

/* Per-CPU staging buffer for a frame's payload (copied out of the packet
 * before the slot lock is taken, since helpers cannot run under it): the
 * elements, and a leaf partial's certificate trailer (INC_AUX_TRAILER) in a
 * field of its own so that it is 8-byte aligned whatever the count. */
struct inc_scratch {
	__u64 buf[INC_MAX_PAYLOAD_BYTES / 8];
	__u64 trailer[INC_CERT_TRAILER_WORDS];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct inc_scratch);
} scratch SEC(".maps");

#endif /* INC_TREE_MAPS_H */
