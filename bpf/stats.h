/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-CPU counters: global events, drop reasons, per tree, per member QP. */
#ifndef INC_STATS_H
#define INC_STATS_H

#include "tree_maps.h"

static __always_inline void inc_stat_add(__u32 stat, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);

	if (v)
		*v += n;
}

static __always_inline struct inc_counters *inc_tree_counters(__u32 tree_id)
{
	return bpf_map_lookup_elem(&tree_stats, &tree_id);
}

static __always_inline struct inc_counters *inc_member_counters(__u32 tree_id, __u32 rank)
{
	__u32 key;

	if (rank >= INC_MAX_CHILDREN)
		return 0;
	key = inc_child_index(tree_id, rank);
	return bpf_map_lookup_elem(&member_stats, &key);
}

/* Counts a drop; tree_id/rank are attributed when known (0 / >= 64: not). */
static __always_inline int inc_drop(__u32 reason, __u32 tree_id, __u32 rank)
{
	__u64 *v = bpf_map_lookup_elem(&drops, &reason);
	struct inc_counters *c;

	if (v)
		*v += 1;
	inc_stat_add(INC_STAT_DROPS, 1);
	if (tree_id) {
		c = inc_tree_counters(tree_id);
		if (c)
			c->drops++;
		c = inc_member_counters(tree_id, rank);
		if (c)
			c->drops++;
	}
	return XDP_DROP;
}

static __always_inline void inc_count_tx(__u32 tree_id, __u32 rank, __u64 bytes)
{
	struct inc_counters *c = inc_tree_counters(tree_id);

	if (c) {
		c->tx_packets++;
		c->tx_bytes += bytes;
	}
	c = inc_member_counters(tree_id, rank);
	if (c) {
		c->tx_packets++;
		c->tx_bytes += bytes;
	}
}

#endif /* INC_STATS_H */
