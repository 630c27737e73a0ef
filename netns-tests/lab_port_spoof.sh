#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.port_spoof: a member's frame sent from another switch port is not the
# member's. During a 4-rank int32 sum allreduce, one real contribution of
# rank 0 is captured on its link and sent from w1's namespace into leaf0's
# port w1, unchanged but for the Ethernet addresses (rank 0's IP, QPN, tree
# key and message), a few hundred times, mixed with forgeries of rank 0's
# later messages, 1000 apart over the rest of the job (payload flipped,
# ICRC recomputed). Aggregated, a forgery would reset its slot copy ahead
# of the job (the real frames of the messages before it are then stale and
# the job stalls) or make rank 0's real frame a duplicate (a wrong result). The job
# must finish with every element exact on every rank, and leaf0 must count
# every one of those frames as drop reason bad_port.
#
# Where the frame is captured: the member transports send XDP live frames
# or use AF_PACKET with qdisc bypass, which no packet socket on the worker
# sees, and leaf0's XDP program drops contributions before any socket. So
# w0's link runs through a wire namespace (--wire w0) whose two veth ends
# are bridged in the kernel (its link_fault XDP program detached): frames
# cross it as skbs, and an AF_PACKET socket on its w0-side end sees them.
. "$(dirname "$0")/lib.sh" "$1" spoof
require_bins incamd incswitchd incinctl inc-perf
SPOOF="$LAB_TESTS_DIR/port_spoof.py"
lab_up s single --wire w0
L="${P}s"
LAB_DIR="/tmp/inclab-$L"
WIRE_NS="$L-xw0"
W1_MAC=02:1a:00:00:01:02      # w1's eth0
LEAF_W1_MAC=02:1a:00:00:01:01 # leaf0's port w1

note "bridging the w0 wire in the kernel so its frames can be captured"
for end in lfa lfb; do ip -n "$WIRE_NS" link set dev "$end" xdp off; done
ip -n "$WIRE_NS" link add br0 type bridge
ip -n "$WIRE_NS" link set br0 mtu 9000
for end in lfa lfb; do ip -n "$WIRE_NS" link set dev "$end" master br0; done
ip -n "$WIRE_NS" link set br0 up
"$INCLAB" check "$L" >/dev/null || fail "the lab does not forward across the bridged wire"

stat_of() {  # KIND NAME: leaf0's drop reason (KIND drops) or global counter (KIND global)
  "$INCLAB" ctl "$L" -o json stats | python3 -c '
import json, sys
kind, name = sys.argv[1], sys.argv[2]
for s in json.load(sys.stdin)["switches"]:
    if s["switch_name"] != "leaf0":
        continue
    if kind == "drops":
        print(sum(int(d.get("packets", 0)) for d in s.get("drops", []) if d["reason"] == name))
    else:
        print(int(s.get("global", {}).get(name, 0)))
    sys.exit(0)
sys.exit("leaf0 missing from stats")' "$1" "$2"
}

# Attaching XDP to a veth takes its link down for a moment: wait until the
# AM has every port of leaf0 up, or the tree build refuses the job.
for _ in $(seq 100); do
  "$INCLAB" ctl "$L" -o json switch show leaf0 | python3 -c '
import json, sys
ports = json.load(sys.stdin)["switch_summary"]["ports"]
sys.exit(0 if ports and all(p["up"] for p in ports) else 1)' && break
  sleep 0.1
done

bad_port_before=$(stat_of drops bad_port)
[ "$bad_port_before" = 0 ] || fail "bad_port is $bad_port_before before any spoofed frame"

# Long enough that the capture and the whole replay land while it runs:
# 4 KiB int32 sums (two messages each), 200000 iterations (~18 s at ~90 us
# each on an idle lab VM; slower under load).
perf s spoof -- allreduce -d int32 -o sum -b 4K -e 4K -n 200000 -w 0 &
JOB=$!

note "waiting for the job's tree"
for _ in $(seq 120); do
  grep -q '"TREE_ACTIVE"' <<<"$("$INCLAB" ctl "$L" -o json tree list)" && break
  kill -0 $JOB 2>/dev/null || fail "the job ended before its tree became active"
  sleep 0.25
done
POOL=$("$INCLAB" ctl "$L" -o json tree list | python3 -c '
import json, sys
trees = [t for t in json.load(sys.stdin)["trees"] if t.get("state") == "TREE_ACTIVE"]
print(trees[0]["pool_size"] if trees else "")')
[ -n "$POOL" ] || fail "no active tree"

note "capturing one contribution of rank 0 (10.0.0.2) on the w0 wire"
ip netns exec "$WIRE_NS" python3 "$SPOOF" capture lfa 10.0.0.2 "$LAB_DIR/rank0.hex" --seconds 20 ||
  fail "no contribution of rank 0 captured"
contrib_before=$(stat_of global contributions)

note "sending it (and forgeries of rank 0's next messages) from w1 into leaf0's port w1"
"$INCLAB" exec "$L" w1 python3 "$SPOOF" replay eth0 "$LAB_DIR/rank0.hex" --src-mac "$W1_MAC" \
  --dst-mac "$LEAF_W1_MAC" --count 400 --ahead 200 --stride 1000 --pool "$POOL" --gap-us 5000 \
  >"$LAB_DIR/replay.json" ||
  fail "replay failed"
kill -0 $JOB 2>/dev/null || fail "the job ended before the replay finished: make it longer"
sent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"])' "$LAB_DIR/replay.json")
bad_port=$(stat_of drops bad_port)
contrib_after=$(stat_of global contributions)
note "sent $(cat "$LAB_DIR/replay.json"); leaf0 bad_port $bad_port_before -> $bad_port"

wait $JOB || fail "the job failed or had wrong elements (see $LAB_DIR/logs/spoof-w0.log)"
[ ${#FAILED[@]} = 0 ] || fail "inc-perf: ${FAILED[*]}"
# Every frame sent into port w1 claimed rank 0 of a live tree, so every one
# is a bad_port drop (the veth may lose a frame under load: 95 % at least).
[ "$bad_port" -le "$sent" ] || fail "bad_port $bad_port > frames sent $sent"
[ $((bad_port * 100)) -ge $((sent * 95)) ] || fail "only $bad_port of $sent spoofed frames counted as bad_port"
[ "$contrib_after" -gt "$contrib_before" ] || fail "the job did not aggregate during the replay"
note "job exact (#wrong 0), leaf0 counted $bad_port of $sent spoofed frames as bad_port"
pass
