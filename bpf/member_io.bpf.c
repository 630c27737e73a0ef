// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Member-side XDP transport of libinc (userspace/client/xdp_io.*).
 *
 * member_tx runs under BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, once
 * per frame the process queued: it copies the next entry of tx_frames into
 * the live frame and redirects it into tx_port, the member's interface, as
 * an xdp_frame, so the switch's XDP program sees it without an skb being
 * built on either side. (A devmap, not XDP_TX: the run's ingress device is
 * resolved in the calling thread's namespace, which need not be the
 * interface's.)
 *
 * member_rx is attached to the member's interface: RoCEv2 frames for this
 * member go into rx_ring (BPF ring buffer, read by the process in place) and
 * are dropped; everything else (ARP, gRPC, other QPs) passes to the kernel.
 * It also makes the veth accept the frames a switch redirects into it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "inc_wire.h"
#include "inc_member_io.h"

/* Load-time filter: network-order IPv4 of the member (0 = any), QPN (0 = any). */
const volatile __u32 member_ip_be = 0;
const volatile __u32 member_qpn = 0;
/* tx_frames' max_entries - 1 (max_entries is a power of two). */
const volatile __u32 tx_mask = 0;

/* Index of the next tx_frames entry to send (set by the process before
 * each BPF_PROG_RUN; one process per program instance). */
__u32 tx_next = 0;
/* Random, set by the process: the live frames it runs the program on carry
 * it as XDP metadata (struct inc_io_tx_template), which no frame from the
 * wire can have, so none can start a send. Zero until set: nothing is sent. */
__u64 tx_cookie = 0;
/* 1 while the process sleeps: the next frame for it goes to the AF_XDP
 * socket in wake_xsks instead of rx_ring, whose readiness wakes the process
 * straight from this softirq, and clears it. (A BPF ring buffer wakes its
 * reader through irq_work, a self-interrupt per wake-up: ~25 us per round
 * trip more on the lab VM.) */
__u32 rx_sleeping = 0;
/* Receive queue the wake-up socket is bound to. An AF_XDP socket takes only
 * frames of its own queue (a redirect from another one is dropped by the
 * kernel), and a multi-queue NIC spreads results over all of them: frames
 * of other queues wake the process through the ring instead. */
const volatile __u32 wake_queue = 0;

/* Frames the process queued for sending; entry i % max_entries (a power of
 * two set by the process) holds the i-th. Mmapped by the process. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct inc_io_frame);
} tx_frames SEC(".maps");

/* The member's interface (key 0), where member_tx sends. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

/* Frames received for this member, in arrival order (struct inc_io_frame
 * records; len 0 = wake-up record). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} rx_ring SEC(".maps");

/* The process's AF_XDP socket for wake-ups (key 0; bound to wake_queue). */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} wake_xsks SEC(".maps");

/* Per-CPU packet counters, indexed by enum inc_io_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, INC_IO_STAT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} io_stats SEC(".maps");

static __always_inline int count(__u32 stat, int action)
{
	__u64 *c = bpf_map_lookup_elem(&io_stats, &stat);

	if (c)
		*c += 1;
	return action;
}

/* Sends the next queued frame in place of the live frame ctx. */
static __always_inline int member_tx(struct xdp_md *ctx)
{
	__u32 key = tx_next++ & tx_mask;
	struct inc_io_frame *f;
	__u32 len, cur;

	f = bpf_map_lookup_elem(&tx_frames, &key);
	if (!f)
		return count(INC_IO_STAT_TX_BAD_LEN, XDP_DROP);
	len = f->len;
	if (len < INC_OFF_PAYLOAD || len > INC_IO_FRAME_BYTES)
		return count(INC_IO_STAT_TX_BAD_LEN, XDP_DROP);
	cur = (__u32)((void *)(long)ctx->data_end - (void *)(long)ctx->data);
	/* Keep clang from folding the pointers into 32-bit arithmetic. */
	asm volatile("" : "+r"(cur));
	if (bpf_xdp_adjust_tail(ctx, (int)len - (int)cur))
		return count(INC_IO_STAT_TX_ERROR, XDP_DROP);
	if (bpf_xdp_store_bytes(ctx, 0, f->data, len))
		return count(INC_IO_STAT_TX_ERROR, XDP_DROP);
	if (bpf_redirect_map(&tx_port, 0, XDP_DROP) != XDP_REDIRECT)
		return count(INC_IO_STAT_TX_ERROR, XDP_DROP);
	return count(INC_IO_STAT_TX, XDP_REDIRECT);
}

/* Delivers a frame for this member into rx_ring. */
static __always_inline int member_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	struct inc_bth *bth = (void *)(udp + 1);
	struct inc_io_frame *rec;
	__u32 len;

	if ((void *)(bth + 1) > data_end)
		return count(INC_IO_STAT_PASS_OTHER, XDP_PASS);
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    udp->dest != bpf_htons(INC_ROCEV2_UDP_PORT))
		return count(INC_IO_STAT_PASS_OTHER, XDP_PASS);
	if (member_ip_be && ip->daddr != member_ip_be)
		return count(INC_IO_STAT_PASS_FILTERED, XDP_PASS);
	if (member_qpn && (bpf_ntohl(bth->resv_destqp) & INC_QPN_MASK) != member_qpn)
		return count(INC_IO_STAT_PASS_FILTERED, XDP_PASS);
	len = data_end - data;
	if (len < INC_OFF_PAYLOAD || len > INC_IO_FRAME_BYTES)
		return count(INC_IO_STAT_RX_BAD_LEN, XDP_DROP);
	if (ctx->rx_queue_index == wake_queue && rx_sleeping &&
	    __sync_val_compare_and_swap(&rx_sleeping, 1, 0) == 1) {
		if (bpf_redirect_map(&wake_xsks, 0, XDP_PASS) == XDP_REDIRECT)
			return count(INC_IO_STAT_RX_WAKEUPS, XDP_REDIRECT);
		/* No wake-up socket: the ring, with a wake-up record. */
		__sync_lock_test_and_set(&rx_sleeping, 1);
	}
	rec = bpf_ringbuf_reserve(&rx_ring, sizeof(*rec), 0);
	if (!rec)
		return count(INC_IO_STAT_RX_RING_FULL, XDP_DROP);
	rec->len = len;
	rec->reserved = 0;
	if (bpf_xdp_load_bytes(ctx, 0, rec->data, len)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		return count(INC_IO_STAT_RX_BAD_LEN, XDP_DROP);
	}
	/* The commit is an xchg (a full barrier), so rx_sleeping is read again
	 * after the record became visible: a process that raised it after the
	 * check above and then found the ring empty gets a wake-up record
	 * (rare: the only case that pays for irq_work). */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	if (rx_sleeping && __sync_val_compare_and_swap(&rx_sleeping, 1, 0) == 1) {
		struct inc_io_frame *wake;

		wake = bpf_ringbuf_reserve(&rx_ring, sizeof(__u64), 0);
		if (wake) {
			wake->len = 0;
			wake->reserved = 0;
			bpf_ringbuf_submit(wake, BPF_RB_FORCE_WAKEUP);
			count(INC_IO_STAT_RX_WAKEUPS, 0);
		}
	}
	return count(INC_IO_STAT_RX, XDP_DROP);
}

/* One program for both directions: attached to the interface it is in the
 * kernel's XDP dispatcher already, so BPF_PROG_RUN with repeat > 1 does not
 * rebuild the dispatcher (an RCU grace period, ~50 ms) on every send. */
SEC("xdp.frags")
int member_io(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *cookie = (void *)(long)ctx->data_meta;

	/* A live frame of BPF_PROG_RUN: the metadata holds the cookie and the
	 * frame is the template's size (a recycled page keeps the metadata but
	 * not the template's bytes, which the last send overwrote). The
	 * process's own frames coming back (a reflecting switch) keep the
	 * metadata too, but are longer than the template. */
	if ((void *)(cookie + 1) <= data && data + INC_IO_TX_TEMPLATE_BYTES == data_end &&
	    tx_cookie && *cookie == tx_cookie)
		return member_tx(ctx);
	return member_rx(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
