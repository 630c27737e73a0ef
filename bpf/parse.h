/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Parsing and framing checks of RoCEv2 INC frames (docs/wire-format.md).
 *
 * Classification: anything that is not IPv4/UDP/4791 with BTH opcode
 * UC RDMA_WRITE_ONLY_WITH_IMMEDIATE addressed to one of this switch's
 * addresses (local_ips) is not INC and goes to the kernel untouched (so
 * ordinary RoCE traffic, including 0x2B between hosts, is routed). A frame
 * that claims to be INC but is malformed is dropped and counted. */
#ifndef INC_PARSE_H
#define INC_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "tree_maps.h"
#include "csum.h"

#define INC_PARSE_PASS (-1) /* not INC: hand to the kernel */

/* Fixed UDP payload bytes around the INC payload: BTH RETH IMMDT INC ICRC. */
#define INC_UDP_FIXED (12 + 16 + 4 + 24 + INC_ICRC_LEN)

struct inc_pkt {
	__u8 *data; /* bounds-checked up to INC_OFF_PAYLOAD */
	struct iphdr *ip;
	struct udphdr *udp;
	struct inc_bth *bth;
	struct inc_reth *reth;
	struct inc_hdr *inc;
	__u32 frame_len;
	__u32 payload_len; /* INC payload bytes (between header and ICRC; elements
			    * and a certificate trailer if the frame has one) */
};

/* Re-derives the header pointers after a helper may have moved the packet.
 * Returns 0 when the fixed headers are present. */
static __always_inline int inc_pkt_load(struct xdp_md *ctx, struct inc_pkt *p)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;

	if (data + INC_OFF_PAYLOAD > end)
		return -1;
	p->data = data;
	p->ip = (struct iphdr *)(data + INC_OFF_IP);
	p->udp = (struct udphdr *)(data + INC_OFF_UDP);
	p->bth = (struct inc_bth *)(data + INC_OFF_BTH);
	p->reth = (struct inc_reth *)(data + INC_OFF_RETH);
	p->inc = (struct inc_hdr *)(data + INC_OFF_INC);
	p->frame_len = end - data;
	return 0;
}

/* Returns 0 for a well-framed INC frame, INC_PARSE_PASS for non-INC traffic,
 * or an enum inc_drop_reason. */
static __always_inline int inc_parse(struct xdp_md *ctx, struct inc_pkt *p)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u32 frame_len = end - data;
	struct ethhdr *eth = (struct ethhdr *)data;
	struct iphdr *ip;
	struct udphdr *udp;
	struct inc_bth *bth;
	__u32 ihl, tot_len, udp_len, daddr;

	if (data + sizeof(*eth) > end)
		return INC_DROP_TRUNC_ETH;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return INC_PARSE_PASS;
	ip = (struct iphdr *)(data + INC_OFF_IP);
	if ((__u8 *)(ip + 1) > end)
		return INC_DROP_TRUNC_IP;
	if (ip->version != 4 || ip->ihl < 5)
		return INC_DROP_BAD_IP;
	if (ip->protocol != IPPROTO_UDP)
		return INC_PARSE_PASS;
	ihl = ip->ihl * 4;
	/* ihl <= 60: the UDP header sits within the first 82 bytes. */
	if (ihl > 60)
		return INC_DROP_BAD_IP;
	udp = (struct udphdr *)(data + INC_OFF_IP + ihl);
	if ((__u8 *)(udp + 1) > end)
		return INC_DROP_TRUNC_UDP;
	if (udp->dest != bpf_htons(INC_ROCEV2_UDP_PORT))
		return INC_PARSE_PASS;
	/* RoCEv2 from here on. */
	bth = (struct inc_bth *)(udp + 1);
	if ((__u8 *)(bth + 1) > end)
		return INC_DROP_TRUNC_BTH;
	if (bth->opcode != INC_BTH_OPCODE_UC_WRITE_ONLY_IMM)
		return INC_PARSE_PASS; /* ordinary RoCE traffic */
	daddr = ip->daddr;
	if (!bpf_map_lookup_elem(&local_ips, &daddr))
		return INC_PARSE_PASS; /* transit: not addressed to this switch */
	/* INC-shaped from here on: malformed frames are dropped. */
	tot_len = bpf_ntohs(ip->tot_len);
	if (ihl != 20 || (ip->frag_off & bpf_htons(0x3fff)) || tot_len + INC_OFF_IP != frame_len)
		return INC_DROP_BAD_IP;
	/* TVer 0 and no pad: INC payloads are whole elements. */
	if (bth->flags & 0x3f)
		return INC_DROP_BAD_OPCODE;
	if (data + INC_OFF_IMMDT > end)
		return INC_DROP_TRUNC_RETH;
	if (data + INC_OFF_PAYLOAD + INC_ICRC_LEN > end)
		return INC_DROP_TRUNC_INC;
	if (inc_pkt_load(ctx, p))
		return INC_DROP_TRUNC_INC;
	if (inc_ip_csum((const __u8 *)p->ip) != 0)
		return INC_DROP_BAD_IP; /* header checksum over a valid one is 0 */
	udp_len = bpf_ntohs(p->udp->len);
	if (udp_len != tot_len - 20)
		return INC_DROP_BAD_UDP_LEN;
	if (udp_len < 8 + INC_UDP_FIXED)
		return INC_DROP_TRUNC_INC;
	if ((p->inc->ver_flags >> 4) != INC_VERSION)
		return INC_DROP_BAD_VERSION;
	p->payload_len = udp_len - 8 - INC_UDP_FIXED;
	if (p->payload_len > INC_MAX_WIRE_PAYLOAD_BYTES ||
	    bpf_ntohl(p->reth->dma_len) != sizeof(struct inc_hdr) + p->payload_len)
		return INC_DROP_BAD_COUNT;
	return 0;
}

#endif /* INC_PARSE_H */
