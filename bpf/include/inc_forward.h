/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * incin forwarding ABI: the best-path table and port maps of the XDP
 * forwarder, and the adaptive-routing notification (ARN) message.
 * Pinned by userspace/common/abi/forward.h.
 * Wire structs are in network byte order; map structs in host byte order
 * unless a field is typed __be*. docs/wire-format.md follows the ABI headers.
 */
#ifndef INC_FORWARD_ABI_H
#define INC_FORWARD_ABI_H

#include <linux/types.h>

/* Non-INC IPv4 traffic that matches a best-path-table (BPT) prefix is
 * forwarded in XDP: among the prefix's next hops that are usable, the
 * lowest-cost ones share the flows by a 5-tuple hash (the UDP source port is
 * RoCEv2's entropy). What the BPT does not cover goes to the kernel. */
#define INC_BPT_MAX_HOPS     8
#define INC_BPT_MAX_PREFIXES 4096
#define INC_FWD_MAX_PORTS    256 /* = INC_MAX_PORTS (pinned in C++) */

/* Why a next hop (INC_HOP_*) or a port (INC_PORT_*) must not carry flows.
 * Congested hops are used only when no uncongested hop is left; failed
 * hops never. */
#define INC_HOP_CONGESTED  0x01 /* an ARN said a link on this path is congested */
#define INC_HOP_FAILED	   0x02 /* an ARN said a link on this path failed */
#define INC_PORT_CONGESTED 0x01
#define INC_PORT_FAILED	   0x02

/* Key of the bpt LPM trie (prefixlen counts bits of addr). */
struct inc_bpt_key {
	__u32 prefixlen;
	__u32 addr; /* network byte order */
};

struct inc_bpt_hop {
	__u32 ifindex; /* egress port */
	__u16 cost;    /* lower is preferred */
	__u8 flags;    /* INC_HOP_* */
	__u8 pad;
	__u8 dmac[6]; /* next hop's MAC */
	__u8 smac[6]; /* egress port's MAC */
};

struct inc_bpt_entry {
	__u32 nhops; /* valid entries of hops[] */
	__u32 pad;
	struct inc_bpt_hop hops[INC_BPT_MAX_HOPS];
};

/* Value of port_health (key: ifindex): local detection's verdict, applied to
 * every prefix at once. */
struct inc_port_health {
	__u32 flags; /* INC_PORT_* */
	__u32 pad;
};

/* Value of the per-CPU port_tx map (key: ifindex): what the forwarder sent
 * out of a port; incswitchd turns it into utilisation. */
struct inc_port_tx {
	__u64 packets;
	__u64 bytes;
};

/* Per-CPU counters of the forwarder (map fwd_stats, key: enum inc_fwd_stat). */
enum inc_fwd_stat {
	INC_FWD_FORWARDED = 0,	/* redirected by the BPT */
	INC_FWD_NO_ROUTE,	/* no BPT prefix: to the kernel */
	INC_FWD_TTL,		/* TTL <= 1 or IP options: to the kernel */
	INC_FWD_NO_PATH,	/* every next hop failed: to the kernel */
	INC_FWD_CONGESTED_PATH, /* only congested hops left: used anyway */
	INC_FWD__MAX,
};

/* ARN message (UDP payload on INC_ARN_PORT, DSCP CS6; big-endian fields).
 * One message reports one link of the origin switch. */
#define INC_ARN_PORT	49791
#define INC_ARN_VERSION 1
#define INC_ARN_MAGIC	0x41524e31 /* "ARN1" */

enum inc_arn_type {
	INC_ARN_CONGESTION_DETECTED = 1,
	INC_ARN_CONGESTION_ELIMINATED = 2,
	INC_ARN_LINK_FAILED = 3,
	INC_ARN_LINK_RESTORED = 4,
};

/* Severity: congestion levels 1..3 (mild, heavy, severe); failure has its
 * own level so receivers never confuse it with congestion. 0 = cleared. */
#define INC_ARN_SEVERITY_CLEAR	 0
#define INC_ARN_SEVERITY_FAILURE 15

struct inc_arn_msg {
	__be32 magic;
	__u8 version;
	__u8 type;		/* enum inc_arn_type */
	__u8 severity;		/* INC_ARN_SEVERITY_* or congestion level */
	__u8 flags;		/* 0 */
	__be32 origin;		/* switch id of the sender */
	__be32 peer;		/* switch id at the link's far end (0 = a host) */
	__be32 local_port;	/* the origin's port index of the link */
	__be32 seq;		/* per origin; receivers ignore seq <= last seen */
	__be64 timestamp_ns;	/* CLOCK_REALTIME at the origin */
	__be32 utilisation_ppm; /* link utilisation when sent, parts per million */
	__be32 auth;		/* truncated keyed digest of the bytes before it */
};

#endif /* INC_FORWARD_ABI_H */
