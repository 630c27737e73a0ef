#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.arn_failover: best-path forwarding in XDP on a leaf-spine lab with ARN.
# Checks that (1) worker traffic is forwarded by the switches' XDP forwarder
# over both spines, (2) when the leaf0-spine0 link goes down, leaf0 marks its
# port at once and leaf1 marks its path through spine0 on the notices of
# leaf0/spine0, every flow keeps being delivered in both directions, and the
# dead link carries nothing, (3) the link coming back clears every mark, and
# (4) malformed, unknown-origin and stale ARN datagrams are dropped and
# counted, and (5) the group's key rotates in three SIGHUP steps while
# notices of a failed link are repeated, none refused. Reroute times and
# losses are measured and printed, not asserted.
. "$(dirname "$0")/lib.sh" "$1" arn
require_bins incswitchd incamd incinctl
FLOW="$LAB_TESTS_DIR/flow_probe.py"
SAMPLE_MS=50

lab_up a two --routing --arn-sample-ms "$SAMPLE_MS"
L="${P}a"
T="/tmp/inclab-$L"

arn_json() { "$INCLAB" ctl "$L" -o json arn status "$@"; }
now_ms() { date +%s%3N; }

# Polls a switch's report until the python expression over `r` (the report)
# gives a number (when the condition began, Unix ms); prints it.
wait_for() {  # switch timeout_s python-expression
  local sw=$1 deadline=$(($(date +%s) + $2)) expr=$3
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if arn_json --switch "$sw" | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
t = eval(sys.argv[1])
if t is None: sys.exit(1)
print(int(t))' "$expr"; then
      return 0
    fi
    sleep 0.05
  done
  return 1
}

forwarded() {  # switch -> forwarder "forwarded" counter
  arn_json --switch "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["forwarder"].get("forwarded", 0))'
}

# 1. Forwarding in XDP over both spines.
f0=$(forwarded spine0)
f1=$(forwarded spine1)
"$INCLAB" exec "$L" w2 python3 "$FLOW" recv 7100 --seconds 4 >"$T/warm.json" 2>/dev/null &
sleep 0.5
"$INCLAB" exec "$L" w0 python3 "$FLOW" send 10.0.2.2 7100 --flows 16 --pps 400 --seconds 2 >/dev/null
wait
s0=$(($(forwarded spine0) - f0))
s1=$(($(forwarded spine1) - f1))
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["received"])' "$T/warm.json")
note "warm-up: 800 datagrams in 16 flows, received $got; spine0 forwarded $s0, spine1 $s1"
[ "$s0" -gt 50 ] && [ "$s1" -gt 50 ] || fail "flows were not spread over both spines by the XDP forwarder"

# 2. Link failure under traffic, both directions.
DUR=9
"$INCLAB" exec "$L" w2 python3 "$FLOW" recv 7101 --seconds $((DUR + 2)) >"$T/to_w2.json" 2>/dev/null &
"$INCLAB" exec "$L" w0 python3 "$FLOW" recv 7102 --seconds $((DUR + 2)) >"$T/to_w0.json" 2>/dev/null &
sleep 0.5
"$INCLAB" exec "$L" w0 python3 "$FLOW" send 10.0.2.2 7101 --flows 16 --pps 400 --seconds "$DUR" >"$T/from_w0.json" &
"$INCLAB" exec "$L" w2 python3 "$FLOW" send 10.0.0.2 7102 --flows 16 --pps 400 --seconds "$DUR" >"$T/from_w2.json" &
sleep 2
t_down=$(now_ms)
ip -n "$L-leaf0" link set s0 down
local_at=$(wait_for leaf0 10 \
  'next((l["since_unix_ms"] for l in r.get("local_links", []) if l["port"] == "s0" and l["condition"] == "failed"), None)') ||
  fail "leaf0 did not mark its port s0 failed"
remote_at=$(wait_for leaf1 10 \
  'min([int(l["since_unix_ms"]) for l in r.get("remote_links", []) if l["condition"] == "failed" and {l["origin"], l.get("peer", "")} == {"leaf0", "spine0"}] or [None])') ||
  fail "leaf1 did not learn that leaf0-spine0 failed"
note "link leaf0-spine0 down: leaf0 rerouted locally after $((local_at - t_down)) ms, leaf1 after $((remote_at - t_down)) ms (sampling every $SAMPLE_MS ms)"
arn_json --switch leaf1 >"$T/leaf1_failed.json"
python3 - "$T/leaf1_failed.json" <<'PY' || fail "leaf1's hops through spine0 toward leaf0 are not marked failed"
import json, sys
r = json.load(open(sys.argv[1]))[0]
for route in r["routes"]:
    if route.get("dest_switch") == "leaf0":
        for h in route["hops"]:
            want = ["failed"] if h["via_switch"] == "spine0" else []
            assert h.get("marks", []) == want, route
PY
sleep 2.5
t_up=$(now_ms)
ip -n "$L-leaf0" link set s0 up
wait_for leaf1 10 '0 if not any(l["condition"] == "failed" for l in r.get("remote_links", [])) else None' >/dev/null ||
  fail "leaf1 kept the failure after the link came back"
note "link back: leaf1 cleared its marks within $(($(now_ms) - t_up)) ms (upper bound: includes polling)"
wait

python3 - "$T" "$t_down" "$t_up" <<'PY' || fail "traffic was not delivered around the failure"
import json, sys
d, t_down, t_up = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for direction, sent_f, recv_f in (("w0->w2", "from_w0.json", "to_w2.json"), ("w2->w0", "from_w2.json", "to_w0.json")):
    sent = json.load(open(f"{d}/{sent_f}"))["sent"]
    got = json.load(open(f"{d}/{recv_f}"))
    flows = got["flows"]
    lost = sum(sent) - got["received"]
    gaps = sorted(f["longest_gap_ms"] for f in flows.values())
    print(f"  {direction}: sent {sum(sent)} in {len(sent)} flows, received {got['received']}, lost {lost} "
          f"({100.0 * lost / sum(sent):.2f}%), longest silence per flow: median {gaps[len(gaps) // 2]} ms, max {gaps[-1]} ms")
    assert len(flows) == len(sent), f"{direction}: only {len(flows)} of {len(sent)} flows arrived"
    # Every flow, including those that were on the failed link, delivered
    # datagrams sent after the failure and to the end of the run.
    for f, st in flows.items():
        assert st["max_seq"] >= sent[int(f)] - 5, f"{direction} flow {f} stopped at {st['max_seq']} of {sent[int(f)]}"
PY

# 3. Every mark gone, and the failed period left the link unused.
arn_json >"$T/after.json"
python3 - "$T/after.json" <<'PY' || fail "marks or failed links left after the link came back"
import json, sys
for r in json.load(open(sys.argv[1])):
    assert all(l["condition"] == "healthy" for l in r.get("local_links", [])), r["switch_name"]
    assert not r.get("remote_links"), r["switch_name"]
    assert all(not h.get("marks") for route in r.get("routes", []) for h in route["hops"]), r["switch_name"]
PY

# 4. Datagrams that must not be believed, sent from the management network.
python3 - "$(sed -n 's/.*"listen_address": "\([0-9.]*\)".*/\1/p' "$T/sw-leaf0.json")" <<'PY' >"$T/forge.py"
import sys
print(f"LEAF0 = {sys.argv[1]!r}")
PY
cat >>"$T/forge.py" <<'PY'
import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def msg(origin, seq, typ=3, sev=15):
    body = struct.pack("!IBBBBIIIIQI", 0x41524E31, 1, typ, sev, 0, origin, 3, 1, seq, time.time_ns(), 0)
    return body + struct.pack("!I", 0)
s.sendto(b"short", (LEAF0, 49791))                       # truncated
s.sendto(msg(99, 1), (LEAF0, 49791))                      # unknown origin
s.sendto(msg(2, 0x7fffffff)[:4] + bytes([9]) + msg(2, 1)[5:], (LEAF0, 49791))  # bad version
s.sendto(msg(2, 1, typ=1, sev=0), (LEAF0, 49791))         # congestion without a severity
PY
"$INCLAB" exec "$L" mgmt python3 "$T/forge.py"
sleep 0.5
arn_json --switch leaf0 >"$T/leaf0_rejects.json"
python3 - "$T/leaf0_rejects.json" <<'PY' || fail "forged ARN datagrams were not all rejected and counted"
import json, sys
r = json.load(open(sys.argv[1]))[0]
rej = r.get("rejects", {})
print("  leaf0 rejects:", {k: v for k, v in rej.items() if v})
for reason in ("truncated", "unknown_origin", "bad_version", "bad_severity"):
    assert int(rej.get(reason, 0)) >= 1, reason
assert not r.get("remote_links"), "a forged notice changed leaf0's view"
PY

# 5. The group's ARN key rotates (docs/operations.md "Keys of the
# switch-to-switch signalling") while leaf0 and spine0 repeat their notices
# of a failed link: after a key K1 is put on every switch (nothing in flight:
# every link healthy), the three steps K1 -> K2, a SIGHUP per switch each.
# No notice may be refused, and leaf1 must keep the failure throughout (it
# forgets a notice not repeated within hold_ms) and clear it on the restore
# notice signed with K2.
K1=000102030405060708090a0b0c0d0e0f
K2=f0e0d0c0b0a090807060504030201000
SWITCHES=$(cd "$T" && ls sw-*.json | sed 's/^sw-//; s/\.json$//')
applied=0 # SIGHUP lines about ARN keys each switch's log should hold by now
arn_key_step() {  # step: rewrites every switch's arn keys, SIGHUPs it, waits until applied
  local step=$1 sw
  for sw in $SWITCHES; do
    python3 - "$T/sw-$sw.json" "$step" "$K1" "$K2" <<'PY'
import json, sys
path, step, k1, k2 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
doc = json.load(open(path))
a = doc["arn"]
a.pop("accept_key_hex", None)
a["key_hex"] = {0: k1, 1: k1, 2: k2, 3: k2}[step]
if step in (1, 2):
    a["accept_key_hex"] = {1: k2, 2: k1}[step]
json.dump(doc, open(path, "w"), indent=2)
PY
    kill -HUP "$(cat "$T/pids/incswitchd-$sw.pid")"
  done
  applied=$((applied + (step == 2 ? 2 : 1)))
  for sw in $SWITCHES; do
    wait_log_count "$T/logs/incswitchd-$sw.log" 'SIGHUP: arn\.\(accept_\)\?key_hex changed: applied' "$applied" ||
      fail "$sw did not apply step $step of the ARN key rotation (see $T/logs/incswitchd-$sw.log)"
  done
}
arn_key_step 0
ip -n "$L-leaf0" link set s0 down
wait_for leaf1 10 \
  'min([int(l["since_unix_ms"]) for l in r.get("remote_links", []) if l["condition"] == "failed" and {l["origin"], l.get("peer", "")} == {"leaf0", "spine0"}] or [None])' >/dev/null ||
  fail "leaf1 did not learn that leaf0-spine0 failed under key K1"
arn_json >"$T/rotation-before.json"
for step in 1 2 3; do
  arn_key_step $step
  sleep 0.6 # a few repeats under the step's keys
  arn_json --switch leaf1 | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
assert any(l["condition"] == "failed" and {l["origin"], l.get("peer", "")} == {"leaf0", "spine0"}
           for l in r.get("remote_links", [])), r.get("remote_links")
' || fail "leaf1 lost the leaf0-spine0 failure at step $step of the key rotation: notices were refused"
done
arn_json >"$T/rotation-after.json"
ip -n "$L-leaf0" link set s0 up
wait_for leaf1 10 '0 if not any(l["condition"] == "failed" for l in r.get("remote_links", [])) else None' >/dev/null ||
  fail "leaf1 did not clear the failure on the restore notice signed with the new key"
python3 - "$T" <<'PY' || fail "ARN notices were refused across the key rotation"
import json, sys
t = sys.argv[1]
before = {r["switch_name"]: r for r in json.load(open(f"{t}/rotation-before.json"))}
after = {r["switch_name"]: r for r in json.load(open(f"{t}/rotation-after.json"))}
got = int(after["leaf1"].get("notices_received", 0)) - int(before["leaf1"].get("notices_received", 0))
bad = {n: int(after[n].get("rejects", {}).get("bad_auth", 0)) - int(before[n].get("rejects", {}).get("bad_auth", 0))
       for n in after}
print(f"  ARN key rotated K1 -> K2 on {len(after)} switches with a link down: leaf1 believed {got} notices "
      f"meanwhile, refused for authentication {bad}")
assert got >= 6, "leaf1 heard too few repeats during the rotation"
assert not any(bad.values()), "notices failed authentication"
PY
if grep -qi -e "$K1" -e "$K2" <<<"$(grep -h 'SIGHUP: arn' "$T"/logs/incswitchd-*.log)"; then
  fail "an ARN key value was logged"
fi
pass
