#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.arn_congestion: a leaf-spine link limited by a BPF token bucket (the
# wire program) becomes a bottleneck. Without detection (the link's
# configured capacity is far above the limit) the bottleneck drops what
# exceeds it for as long as the traffic lasts; with detection, spine0 finds
# its port toward leaf0 congested, tells the group, and leaf1 moves the flows
# that crossed spine0 to spine1, so the bottleneck drops only during the
# detection windows. Checks that the notice arrives, that leaf1 marks the
# right hops, and that the drops fall well below the baseline's; prints the
# times and drop counts.
. "$(dirname "$0")/lib.sh" "$1" arnc
require_bins incswitchd incamd incinctl
FLOW="$LAB_TESTS_DIR/flow_probe.py"
RATE_MBPS=4
PPS=1500
SECONDS_RUN=6

# l1s1 (spine1 <-> leaf1) is limited but watched at 10 Gbit/s: the baseline.
# l0s0 (leaf0 <-> spine0) is limited and watched at its real rate.
lab_up c two --routing --wire l0s0,l1s1 --arn-sample-ms 50 --arn-clear-samples 40 \
  --link-capacity "10000000000,l0s0=$((RATE_MBPS * 1000000))"
L="${P}c"
T="/tmp/inclab-$L"
# Limited toward the leaves only (direction "ba", see run), so the path the
# flows move to (leaf1 -> spine1) is not itself a bottleneck.
"$INCLAB" fault "$L" l0s0 --rate-mbps "$RATE_MBPS" --dir ba 2>/dev/null
"$INCLAB" fault "$L" l1s1 --rate-mbps "$RATE_MBPS" --dir ba 2>/dev/null

rate_dropped() {  # link dir
  "$INCLAB" fault-stats "$L" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]][sys.argv[2]]["rate_dropped"])' "$1" "$2"
}

# run FROM TO_NODE TO_IP PORT LINK DIR -> "sent received wire_drops"
run() {
  local from=$1 to=$2 ip=$3 port=$4 link=$5 dir=$6 d0 d1
  d0=$(rate_dropped "$link" "$dir")
  "$INCLAB" exec "$L" "$to" python3 "$FLOW" recv "$port" --seconds $((SECONDS_RUN + 2)) >"$T/recv-$port.json" 2>/dev/null &
  sleep 0.5
  "$INCLAB" exec "$L" "$from" python3 "$FLOW" send "$ip" "$port" --flows 16 --pps "$PPS" --seconds "$SECONDS_RUN" \
    >"$T/send-$port.json"
  wait
  d1=$(rate_dropped "$link" "$dir")
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
print(sum(s["sent"]), r["received"], int(sys.argv[3]))' "$T/send-$port.json" "$T/recv-$port.json" $((d1 - d0))
}

# A wire's "ab" direction runs from the link's first end (the leaf) to the
# second (the spine); traffic toward a leaf's workers leaves the spine: "ba".
# Baseline: w0 -> w2, half of whose flows cross spine1 -> leaf1.
read -r bsent brecv bdrop < <(run w0 w2 10.0.2.2 7300 l1s1 ba)
note "baseline (no detection): sent $bsent, received $brecv, bottleneck dropped $bdrop"
[ "$bdrop" -gt 0 ] || fail "the baseline did not congest the limited link (sender too slow?)"

t_start=$(date +%s%3N)
read -r asent arecv adrop < <(run w2 w0 10.0.0.2 7301 l0s0 ba)
note "with ARN: sent $asent, received $arecv, bottleneck dropped $adrop"

"$INCLAB" ctl "$L" -o json arn status --switch spine0 >"$T/spine0.json"
"$INCLAB" ctl "$L" -o json arn status --switch leaf1 >"$T/leaf1.json"
python3 - "$T/spine0.json" "$T/leaf1.json" "$t_start" "$bdrop" "$adrop" "$bsent" "$asent" <<'PY' || fail "congestion was not handled"
import json, sys
spine0, leaf1 = (json.load(open(f))[0] for f in sys.argv[1:3])
t_start, bdrop, adrop, bsent, asent = map(int, sys.argv[3:8])
ev0 = [e for e in spine0.get("events", []) if "port l0 " in e and "-> congested" in e]
ev1 = [e for e in leaf1.get("events", []) if "congestion_detected on spine0->leaf0" in e]
print(f"  spine0 declared l0 congested {len(ev0)} times; leaf1 applied {len(ev1)} notices")
for e in spine0.get("events", [])[-4:]:
    print("   ", e)
assert ev0, "spine0 never declared its port toward leaf0 congested"
assert ev1, "leaf1 never received spine0's congestion notice"
base_rate, arn_rate = bdrop / bsent, adrop / asent
print(f"  bottleneck drops: baseline {100 * base_rate:.2f}% of sent, with ARN {100 * arn_rate:.2f}% "
      f"({base_rate / max(arn_rate, 1e-9):.1f}x fewer)")
assert arn_rate * 3 < base_rate, "ARN did not cut the bottleneck's drops to a third of the baseline"
PY
python3 - "$T/recv-7300.json" "$T/recv-7301.json" "$PPS" <<'PY'
import json, sys
pps = int(sys.argv[3])
for name, f in (("baseline", sys.argv[1]), ("with ARN", sys.argv[2])):
    secs = json.load(open(f)).get("per_second", [])
    print(f"  goodput per second, {name} (offered {pps}/s, 1 KiB each): " + " ".join(str(n) for n in secs))
PY
python3 - "$asent" "$arecv" "$adrop" <<'PY' || fail "datagrams were lost beyond the bottleneck's drops"
import sys
sent, got, drop = map(int, sys.argv[1:4])
print(f"  with ARN: {sent - got - drop} datagrams lost elsewhere (socket buffers, path changes)")
assert got + drop >= 0.97 * sent
PY

# SIGHUP retunes a running detector: spine1 watches its port toward leaf1 at
# 10 Gbit/s, so the baseline never looked congested to it. With
# congested_above lowered (and clear_below under it) in its config file and
# a SIGHUP, the same traffic is now detected, without a restart.
edit_json "$T/sw-spine1.json" 'doc["arn"]["congested_above"] = 0.0001; doc["arn"]["clear_below"] = 0.00005'
kill -HUP "$(cat "$T/pids/incswitchd-spine1.pid")"
for field in 'arn.congested_above .* -> 0.000100' 'arn.clear_below .* -> 0.000050'; do
  wait_log_count "$T/logs/incswitchd-spine1.log" "SIGHUP: $field: applied" 1 ||
    fail "spine1 did not apply the new ARN thresholds on SIGHUP (see $T/logs/incswitchd-spine1.log)"
done
read -r rsent rrecv rdrop < <(run w0 w2 10.0.2.2 7302 l1s1 ba)
note "baseline again after spine1's SIGHUP: sent $rsent, received $rrecv, bottleneck dropped $rdrop"
"$INCLAB" ctl "$L" -o json arn status --switch spine1 >"$T/spine1.json"
python3 - "$T/spine1.json" <<'PY' || fail "spine1 did not detect with the retuned thresholds"
import json, sys
spine1 = json.load(open(sys.argv[1]))[0]
ev = [e for e in spine1.get("events", []) if "port l1 " in e and "-> congested" in e]
print(f"  spine1 declared l1 congested {len(ev)} times after the SIGHUP")
assert ev, "no congestion event on spine1's port toward leaf1"
PY
pass
