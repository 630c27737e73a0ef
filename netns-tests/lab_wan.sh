#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.wan_baseline: the two-site WAN lab (inclab up wan) without credit-based
# flow control, the baseline credit flow control improves on. Checks that every node is
# reachable over the primary WAN path, that a RoCEv2 incast of three senders
# at about twice the WAN rate overflows the WAN shaper's buffer (drops are
# counted by the carrier router's tbf, goodput is the WAN rate), and that when
# gwa's primary WAN port goes down the flows continue over the backup path.
# Prints drops, goodput per second and the failover outage; asserts only what
# must hold whatever the VM's speed.
. "$(dirname "$0")/lib.sh" "$1" wan
require_bins incswitchd incamd incinctl
RATE_MBPS=20
PPS=1500 # per sender, 1 KiB datagrams: 3 senders offer ~37 Mbit/s
SECS=5

lab_up n wan --wan-rate-mbps "$RATE_MBPS" --wan-buffer-kb 64
L="${P}n"
T="/tmp/inclab-$L"
"$INCLAB" check "$L" >/dev/null

wan_drops() {  # router -> tbf drops toward gwb
  "$INCLAB" wan-stats "$L" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]]["gwb"]["drops"])' "$1"
}


d0=$(wan_drops wan0)
wan_incast base 4 "$SECS" $((SECS + 2))
d1=$(wan_drops wan0)
python3 - "$T" $((d1 - d0)) "$RATE_MBPS" <<'PY' || fail "the incast did not overflow the WAN shaper as expected"
import glob, json, sys
t, drops, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sent = sum(sum(json.load(open(f))["sent"]) for f in glob.glob(f"{t}/base-send-*.json"))
r = json.load(open(f"{t}/base-recv.json"))
full = r["per_second"][1:-1] or r["per_second"]
goodput = sum(full) / len(full) * 1066 * 8 / 1e6  # datagram + UDP/IP/Ethernet headers
print(f"  incast without credit flow control: sent {sent}, received {r['received']}, "
      f"WAN shaper dropped {drops} ({100 * drops / sent:.1f}%), reordered {r['reordered']}")
print(f"  goodput per second: {' '.join(map(str, r['per_second']))} (~{goodput:.1f} Mbit/s of {rate})")
assert drops > 0, "no drops: the senders did not exceed the WAN rate"
assert r["received"] + drops <= sent
PY

note "primary WAN port of gwa down mid-run: the kernel moves the flows to wan1"
wan_incast fail 4 6 8 ip -n "$L-gwa" link set wan0 down
python3 - "$T" <<'PY' || fail "the flows did not continue over the backup WAN path"
import glob, json, sys
t = sys.argv[1]
r = json.load(open(f"{t}/fail-recv.json"))
gap = max(f["longest_gap_ms"] for f in r["flows"].values())
print(f"  after the cut: received {r['received']}, longest silence of a flow {gap:.0f} ms, "
      f"per second {' '.join(map(str, r['per_second']))}")
assert r["per_second"][-2] > 0 or r["per_second"][-1] > 0, "nothing arrived after the cut"
PY
w1=$("$INCLAB" wan-stats "$L" | python3 -c 'import json,sys; print(json.load(sys.stdin)["wan1"]["gwb"]["packets"])')
[ "$w1" -gt 100 ] || fail "wan1 carried only $w1 packets after the primary path went down"
note "wan1 carried $w1 packets after the cut"
pass
