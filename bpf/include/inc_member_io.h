/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ABI of the member-side XDP transport (bpf/member_io.bpf.c, libinc's
 * userspace/client/xdp_io.*): frames a member sends are written by the
 * process into an mmapped array map and put on the wire by BPF_PROG_RUN in
 * live-frame mode; frames addressed to the member are copied by its XDP
 * program into a BPF ring buffer. No skb and no AF_XDP socket on either path.
 * docs/wire-format.md "Member transport" follows this file.
 */
#ifndef INC_MEMBER_IO_H
#define INC_MEMBER_IO_H

#include <linux/types.h>

/* Largest frame (Ethernet header to ICRC) the transport carries. A live
 * frame of BPF_PROG_RUN is one page minus XDP headroom, the test-run page
 * head and skb_shared_info (~3.3 KB on 4 KiB pages); the largest INC frame
 * (102 bytes of headers and ICRC + INC_MAX_PAYLOAD_BYTES) must fit. */
#define INC_IO_FRAME_BYTES 3200

/* One frame: value of the tx_frames array (mmapped by the process) and the
 * record of the rx_ring ring buffer. len == 0 in rx_ring is a wake-up
 * record, not a frame. */
struct inc_io_frame {
	__u32 len;
	__u32 reserved;
	__u8 data[INC_IO_FRAME_BYTES];
};

/* What BPF_PROG_RUN starts every live frame from: 8 bytes of XDP metadata
 * holding the program's tx_cookie, then a frame of INC_IO_TX_TEMPLATE_BYTES
 * that member_tx overwrites. */
#define INC_IO_TX_TEMPLATE_BYTES 64
struct inc_io_tx_template {
	__u64 cookie; /* metadata */
	__u8 frame[INC_IO_TX_TEMPLATE_BYTES];
};

/* Per-CPU counters of member_io (map io_stats, key: enum inc_io_stat). */
enum inc_io_stat {
	INC_IO_STAT_TX = 0,	   /* frames put on the wire by member_tx */
	INC_IO_STAT_TX_BAD_LEN,	   /* tx_frames entry with an impossible length */
	INC_IO_STAT_TX_ERROR,	   /* adjust_tail/store_bytes failed */
	INC_IO_STAT_RX,		   /* frames copied into rx_ring */
	INC_IO_STAT_RX_RING_FULL,  /* frames dropped: rx_ring had no room */
	INC_IO_STAT_RX_BAD_LEN,	   /* frames for us shorter than the INC headers or too long */
	INC_IO_STAT_RX_WAKEUPS,	   /* frames that woke the process (AF_XDP socket or record) */
	INC_IO_STAT_PASS_OTHER,	   /* not UDP 4791 IPv4: kernel stack */
	INC_IO_STAT_PASS_FILTERED, /* RoCEv2 for another IP or QPN: kernel stack */
	INC_IO_STAT__MAX,
};

#endif /* INC_MEMBER_IO_H */
