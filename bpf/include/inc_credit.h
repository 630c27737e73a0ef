/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * incin credit-flow-control ABI: the maps of the credit gate (flows,
 * counters, hold-queue sockets, ingress bytes) and its counters.
 * Pinned by userspace/common/abi/credit.h.
 * Wire structs are in network byte order; map structs in host byte order
 * unless a field is typed __be*. docs/wire-format.md follows the ABI headers.
 */
#ifndef INC_CREDIT_ABI_H
#define INC_CREDIT_ABI_H

#include <linux/types.h>

/* RoCEv2 flows across a WAN link are forwarded only against credit that the
 * next hop granted (draft-hu-rtgwg-cbfc-rsvp-00, docs/credit.md "Data
 * path"). Credit is charged in bytes of the Ethernet frame as XDP sees it
 * (destination MAC to the ICRC, no FCS or preamble). A flow is keyed by
 * (IPv4 source, IPv4 destination, UDP source port, BTH DestQP): the UDP
 * source port alone can be shared by QPs (it is 0xC000 | QPN & 0x3FFF), the
 * DestQP alone is per receiver. */
#define INC_CREDIT_MAX_FLOWS 1024
#define INC_CREDIT_MAX_XSKS  256 /* hold-queue AF_XDP sockets (port, queue) */

/* Key of credit_flows. */
struct inc_credit_flow_key {
	__u32 saddr;	/* network byte order */
	__u32 daddr;	/* network byte order */
	__u16 sport;	/* UDP source port, network byte order */
	__u16 pad;	/* 0 */
	__u32 dest_qpn; /* BTH DestQP (24 bits), host order */
};

#define INC_CREDIT_HOP_VALID 0x1 /* else frames wait in the hold queue */
/* Receiver gateway: the flow's frames leave the credit domain here. The gate
 * only counts their bytes per ingress port (credit_ingress, the credit this
 * switch returns upstream) and passes them on to the forwarder/kernel. */
#define INC_CREDIT_COUNT_ONLY 0x2

/* Value of credit_flows: the flow's counter index and current next hop. The
 * agent replaces the whole entry on failover (one hash update, so XDP sees
 * either the old or the new hop, never a mix). */
struct inc_credit_flow {
	__u32 index;   /* into credit_counters, < INC_CREDIT_MAX_FLOWS */
	__u32 ifindex; /* egress port toward the next hop */
	__u8 dmac[6];  /* next hop's MAC */
	__u8 smac[6];  /* egress port's MAC */
	__u32 flags;   /* INC_CREDIT_HOP_* */
};

/* Element of the mmapable credit_counters array. Each field has one kind of
 * writer, so neither side clobbers the other:
 *   granted  - total bytes the next hop ever granted; stored by the agent only.
 *   consumed - total bytes sent; advanced only by atomic adds (XDP when it
 *              forwards, the hold queue when it drains). A sender reserves
 *              with fetch-add and gives the bytes back if the credit did not
 *              cover them, so consumed never passes granted for long and
 *              credit is never over-spent.
 *   queued   - frames now in the hold queue: XDP adds 1 before it diverts a
 *              frame, the hold queue subtracts 1 after it sent one.
 *   held     - frames ever diverted to the hold queue (statistics).
 * available = granted - consumed, modulo 2^64 (interpreted as signed). */
struct inc_credit_counters {
	__u64 granted;
	__u64 consumed;
	__u64 queued;
	__u64 held;
};

/* Key of credit_ingress: bytes of a flow that left this switch after coming
 * in on a port. A switch returns credit to each upstream for what it freed of
 * that upstream's bytes, and after a failover one flow arrives on two ports. */
struct inc_credit_ingress_key {
	__u32 index;   /* the flow's counter index */
	__u32 ifindex; /* ingress port */
};

/* Key of credit_xsk_slots: the hold-queue socket bound to an rx queue. */
struct inc_credit_xsk_key {
	__u32 ifindex;
	__u32 queue;
};

/* Per-CPU counters of the credit gate (map credit_stats). */
enum inc_credit_stat {
	INC_CREDIT_FORWARDED = 0,    /* credit covered it: sent to the next hop */
	INC_CREDIT_FORWARDED_BYTES,  /* bytes of those frames */
	INC_CREDIT_QUEUED_NO_CREDIT, /* to the hold queue: credit short */
	INC_CREDIT_QUEUED_BEHIND,    /* to the hold queue: earlier frames wait */
	INC_CREDIT_QUEUED_NO_HOP,    /* to the hold queue: no valid next hop */
	INC_CREDIT_DROP_NO_QUEUE,    /* had to wait but no hold-queue socket: dropped */
	INC_CREDIT_DROP_MALFORMED,   /* UDP 4791 frame too short for a BTH: dropped */
	INC_CREDIT_DROP_BAD_INDEX,   /* flow entry with index out of range: dropped */
	INC_CREDIT_UNKNOWN_FLOW,     /* RoCEv2 of no credit flow: to the forwarder */
	INC_CREDIT_DELIVERED,	     /* receiver gateway: counted, to the forwarder */
	INC_CREDIT__MAX,
};

#endif /* INC_CREDIT_ABI_H */
