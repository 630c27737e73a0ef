#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.multiqueue: members on multi-queue interfaces. Every lab link has two
# receive queues (inclab --queues 2); a veth puts each frame on the queue of
# the CPU that sent it, so results reach the members on both queues, as
# RSS spreads them on a multi-queue NIC. Checks: an allreduce with the
# default (xdp) transport is exact and results arrived on queue 1 too (the
# member's veth counters); the afxdp transport, which serves one queue,
# warns with the remedies (ethtool steering or the xdp transport).
. "$(dirname "$0")/lib.sh" "$1" mq
require_bins incswitchd incamd incinctl inc-perf

lab_up q single --queues 2
L="${P}q"
queues=$("$INCLAB" exec "$L" w0 ethtool -l eth0 | awk '/^Current/{c=1} c && /^RX:/{print $2; exit}')
[ "$queues" = 2 ] || fail "w0's eth0 has '$queues' receive queues, want 2"

q1_before=$("$INCLAB" exec "$L" w0 ethtool -S eth0 | awk '/rx_queue_1_xdp_packets:/{print $2}')
perf q xdp -- allreduce -d float32 -o sum -b 4 -e 4M -f 4 -n 5 -w 1 --transport xdp ||
  fail "the allreduce over two-queue links was not exact"
q1_after=$("$INCLAB" exec "$L" w0 ethtool -S eth0 | awk '/rx_queue_1_xdp_packets:/{print $2}')
note "w0 received $((q1_after - q1_before)) frames on queue 1 during the job"
[ "$((q1_after - q1_before))" -gt 0 ] || fail "no frame arrived on queue 1: the test did not exercise a second queue"

perf q afxdp -- allreduce -d int32 -o sum -b 4 -e 64 -f 4 -n 2 -w 0 --transport afxdp || true
grep -q "eth0 has 2 receive queues and this AF_XDP socket serves queue 0 only: steer RoCEv2 there" \
  "/tmp/inclab-$L/logs/afxdp-w0.log" || fail "the afxdp transport did not warn about the second queue"
FAILED=()  # the afxdp run may lose results on queue 1; only its warning is checked
pass
