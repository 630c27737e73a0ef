#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.wan_credit: credit-based flow control across the two-site WAN lab
# (inclab up wan --credit; docs/credit.md). The same incast as lab.wan_baseline
# (three senders at about twice the WAN rate into a 20 Mbit/s, 64 KB shaper)
# now goes through gwa's credit gate: checks zero drops anywhere, every
# datagram delivered in order, goodput near the WAN rate, and prints the
# credit signalling overhead. Then the primary WAN path is cut at its far end
# (carrier router wan0 <-> gwb, so gwa only notices by missing credit
# returns): traffic moves to wan1, the failover time and what was lost in
# flight on the dead hop are printed (bounded by the credit window). The
# first incast runs across a rotation of the credit key on every credit
# switch (three SIGHUP steps): still lossless, no RSVP rejected. Last,
# forged and malformed RSVP messages are dropped and counted by reason, and
# stopping gwa's agent ends its flows (PathTear): gwb frees all their state.
#
# With "transit" (lab.wan_credit_transit) a credit-aware transit switch, tra,
# sits on the primary path between gwa and the carrier router (inclab
# --credit-transit): every hop answers PATH with its own credit, tra forwards
# against gwb's credit and returns credit to gwa as it forwards. The cut
# beyond tra leaves tra without a next hop: it sends gwa a ResvTear and
# falls silent, gwa fails over, and what was held at tra is lost with what
# was in flight beyond it (docs/credit.md "Failure beyond a transit").
MODE=${2:-direct}
case "$MODE" in
direct) TAG=wcr ;;
transit) TAG=wct ;;
*) echo "usage: $0 BUILD [direct|transit]" >&2; exit 2 ;;
esac
. "$(dirname "$0")/lib.sh" "$1" "$TAG"
require_bins incswitchd incamd incinctl
RATE_MBPS=20
PPS=1500 # per sender, 1 KiB datagrams: 3 senders offer ~37 Mbit/s
SECS=5
# Credit window per flow: 3 flows x 16 KiB fit the 64 KB WAN buffer. The
# environment may change the credit settings (scripts/credit-sweep.sh does).
RESERVE_KB=${CREDIT_RESERVE_KB:-16}
QUANTUM_KB=${CREDIT_QUANTUM_KB:-4}
HEARTBEAT_MS=${CREDIT_HEARTBEAT_MS:-100}
KEY=000102030405060708090a0b0c0d0e0f
NEXT_KEY=f0e0d0c0b0a090807060504030201000 # the credit key rotates to it (key id 1 -> 2) during the incast
TRANSIT=()
[ "$MODE" = transit ] && TRANSIT=(--credit-transit)

lab_up n wan --wan-rate-mbps "$RATE_MBPS" --wan-buffer-kb 64 --credit --credit-reserve-kb "$RESERVE_KB" \
  --credit-quantum-kb "$QUANTUM_KB" --credit-heartbeat-ms "$HEARTBEAT_MS" --credit-key "$KEY" "${TRANSIT[@]}"
L="${P}n"
T="/tmp/inclab-$L"
"$INCLAB" check "$L" >/dev/null

credit_json() {  # switch -> incinctl credit show JSON (one report)
  "$INCLAB" ctl "$L" -o json credit show --switch "$1"
}

wan_stats() { "$INCLAB" wan-stats "$L" >"$T/wan-$1.json"; }

# Both gateways know the flows before any data: gwa as sender gateway with
# wan0 primary and wan1 backup, gwb as receiver gateway.
ok=0
for _ in $(seq 1 50); do
  if credit_json gwa | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
assert len(r["flows"]) == 3
for f in r["flows"]:
    assert f["role"] == "sender_gateway"
    states = {h["port"]: h["state"] for h in f["hops"]}
    assert states == {"wan0": "primary", "wan1": "backup"}, states
' 2>/dev/null; then
    ok=1
    break
  fi
  sleep 0.1
done
[ $ok = 1 ] || { credit_json gwa >&2; fail "gwa did not learn wan0 (primary) and wan1 (backup) for its 3 flows"; }
credit_json gwb | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
assert [f["role"] for f in r["flows"]] == ["receiver_gateway"] * 3, r
' || fail "gwb is not the receiver gateway of the 3 flows"
note "signalling up: gwa sends on wan0 (primary), wan1 is the backup; gwb is the receiver gateway"
if [ "$MODE" = transit ]; then
  credit_json tra | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
assert len(r["flows"]) == 3, r
for f in r["flows"]:
    assert f["role"] == "transit", f
    assert [(h["port"], h["state"], h["neighbor"]) for h in f["hops"]] == [("wan0", "primary", "10.3.1.2")], f
    assert [(u["port"], u["neighbor"]) for u in f["upstreams"]] == [("gwa", "10.3.0.1")], f
' || { credit_json tra >&2; fail "tra did not learn the 3 flows as transit (upstream gwa, next hop gwb via wan0)"; }
  credit_json gwa | python3 -c '
import json, sys
for f in json.load(sys.stdin)[0]["flows"]:
    h = {h["port"]: h["neighbor"] for h in f["hops"]}
    assert h["wan0"] == "10.3.0.2", h  # the transit answered on the primary path, not gwb
' || fail "gwa's primary next hop is not the transit"
  note "tra is transit for the 3 flows: credit from gwb, upstream gwa; gwa's primary next hop is tra"
fi


# ---- SIGHUP retunes gwb's credit returns (smaller batches) without a
# restart; the incast below then runs on the retuned node.
edit_json "$T/sw-gwb.json" 'doc["credit"]["return_quantum_bytes"] = 2048'
kill -HUP "$(cat "$T/pids/incswitchd-gwb.pid")"
wait_log_count "$T/logs/incswitchd-gwb.log" 'SIGHUP: credit.return_quantum_bytes .* -> 2048: applied' 1 ||
  fail "gwb did not apply credit.return_quantum_bytes on SIGHUP (see $T/logs/incswitchd-gwb.log)"
note "gwb took credit.return_quantum_bytes 2048 on SIGHUP"

# ---- the credit key rotates from id 1 to id 2 on every credit switch, in
# the three steps of docs/operations.md, while the incast below runs: accept
# the next key everywhere, sign with it everywhere (the old one still
# accepted), drop the old one; each step a SIGHUP per switch, one switch at
# a time. The incast must stay lossless and no RSVP message be rejected.
CREDIT_SWITCHES="gwa gwb"
[ "$MODE" = transit ] && CREDIT_SWITCHES="gwa tra gwb"
rotate_credit_key() {
  local step sw
  for step in 1 2 3; do
    for sw in $CREDIT_SWITCHES; do
      python3 - "$T/sw-$sw.json" "$step" "$KEY" "$NEXT_KEY" <<'PY'
import json, sys
path, step, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
doc = json.load(open(path))
c = doc["credit"]
if step == 1:
    c["accept_keys"] = [{"key_id": 2, "key_hex": new}]
elif step == 2:
    c["key_hex"], c["key_id"] = new, 2
    c["accept_keys"] = [{"key_id": 1, "key_hex": old}]
else:
    c.pop("accept_keys", None)
json.dump(doc, open(path, "w"), indent=2)
PY
      kill -HUP "$(cat "$T/pids/incswitchd-$sw.pid")"
      # Each step changes accept_keys: the step-th such line says it is in force.
      wait_log_count "$T/logs/incswitchd-$sw.log" 'SIGHUP: credit.accept_keys changed: applied' "$step" ||
        fail "$sw did not apply step $step of the key rotation (see $T/logs/incswitchd-$sw.log)"
    done
    echo "$step $(date +%s.%N)" >>"$T/rotation-steps"
  done
  grep -q 'SIGHUP: credit.key_id 1 -> 2: applied' "$T/logs/incswitchd-gwa.log" ||
    fail "gwa did not log the new key id"
  if grep -qi -e "$KEY" -e "$NEXT_KEY" <<<"$(grep -h 'SIGHUP: credit' "$T"/logs/incswitchd-*.log)"; then
    fail "a key value was logged"
  fi
}

# ---- incast with credit flow control
wan_stats before
credit_json gwa >"$T/gwa-before.json"
credit_json gwb >"$T/gwb-before.json"
[ "$MODE" = transit ] && credit_json tra >"$T/tra-before.json"
# The WAN drains ~2340 datagrams/s: the receiver listens until the held
# backlog (~17 of 22.5 k datagrams beyond the WAN rate) has crossed.
cpu_ticks() {  # utime + stime of gwa's incswitchd (the credit agent's hold queue is in it)
  awk '{print $14 + $15}' "/proc/$(cat "$T/pids/incswitchd-gwa.pid")/stat"
}
idle0=$(cpu_ticks) # the agent's 1 ms tick with flows and no traffic
sleep 2
cpu0=$(cpu_ticks)
echo "$cpu0 $idle0 2" >"$T/gwa-idle-cpu"
t0=$(date +%s.%N)
wan_incast credit 1 "$SECS" $((2 * SECS + 5)) rotate_credit_key
echo "$(cpu_ticks) $cpu0 $(date +%s.%N) $t0 $(getconf CLK_TCK)" >"$T/gwa-cpu"
wan_stats after
credit_json gwa >"$T/gwa-after.json"
credit_json gwb >"$T/gwb-after.json"
[ "$MODE" = transit ] && credit_json tra >"$T/tra-after.json"
python3 - "$T" "$RATE_MBPS" "$MODE" <<'PY' || fail "the credit-controlled incast was not lossless and in order"
import glob, json, os, sys
t, rate, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
j = lambda n: json.load(open(f"{t}/{n}"))
sent = sum(sum(j(f.split("/")[-1])["sent"]) for f in glob.glob(f"{t}/credit-send-*.json"))
r = j("credit-recv.json")
drops = sum(j("wan-after.json")[w]["gwb"]["drops"] - j("wan-before.json")[w]["gwb"]["drops"] for w in ("wan0", "wan1"))
gwa, gwb = j("gwa-after.json")[0], j("gwb-after.json")[0]
gwa0, gwb0 = j("gwa-before.json")[0], j("gwb-before.json")[0]
d = lambda a, b, k: int(a.get(k, 0)) - int(b.get(k, 0))  # proto JSON: uint64 as strings
gate = {k: d(gwa["datapath"], gwa0["datapath"], k) for k in gwa["datapath"]}
hold = {k: d(gwa["hold_queue"], gwa0["hold_queue"], k) for k in gwa["hold_queue"]}
# Seconds in which all three senders were sending and the WAN was saturated.
full = [x for x in r["per_second"][1:] if x][: 4] or r["per_second"]
goodput = sum(full) / len(full) * 1066 * 8 / 1e6  # datagram + UDP/IP/Ethernet headers
sig = d(gwb, gwb0, "signalling_bytes") + d(gwa, gwa0, "signalling_bytes")
if mode == "transit":
    tra, tra0 = j("tra-after.json")[0], j("tra-before.json")[0]
    sig += d(tra, tra0, "signalling_bytes")
    tgate = {k: d(tra["datapath"], tra0["datapath"], k) for k in tra["datapath"]}
    thold = {k: d(tra["hold_queue"], tra0["hold_queue"], k) for k in tra["hold_queue"]}
    freed = sum(int(u["freed_total"]) for f in tra["flows"] for u in f["upstreams"]) - \
        sum(int(u["freed_total"]) for f in tra0["flows"] for u in f["upstreams"])
data = d(gwb, gwb0, "data_bytes")
print(f"  incast with credit flow control: sent {sent}, received {r['received']}, lost {r['lost']}, "
      f"reordered {r['reordered']}, WAN shaper drops {drops}")
print(f"  goodput per second: {' '.join(map(str, r['per_second']))} (~{goodput:.1f} Mbit/s of {rate}, "
      f"{100 * goodput / rate:.0f}%)")
print(f"  credit gate at gwa: forwarded {gate['forwarded']}, held (no credit {gate['queued_no_credit']}, "
      f"behind others {gate['queued_behind']}, no hop {gate['queued_no_hop']}); hold queue sent {hold['sent']}, "
      f"dropped {hold['dropped_overflow'] + hold['dropped_no_flow'] + hold['dropped_malformed']}, "
      f"kernel drops {hold['kernel_drops']}, reconciled {hold['reconciled']}")
if mode == "transit":
    print(f"  credit gate at tra: forwarded {tgate['forwarded']}, held (no credit {tgate['queued_no_credit']}, "
          f"behind others {tgate['queued_behind']}, no hop {tgate['queued_no_hop']}); hold queue sent "
          f"{thold['sent']}, dropped {thold['dropped_overflow'] + thold['dropped_no_flow'] + thold['dropped_malformed']}, "
          f"kernel drops {thold['kernel_drops']}; credit returned to gwa {freed} bytes")
print(f"  credit signalling: {sig} bytes of RSVP for {data} data bytes = {100 * sig / max(data, 1):.2f}%")
c1, c0, w1, w0, hz = map(float, open(f"{t}/gwa-cpu").read().split())
i1, i0, isecs = map(float, open(f"{t}/gwa-idle-cpu").read().split())
print(f"  gwa's incswitchd used {(c1 - c0) / hz:.2f} CPU-s in {w1 - w0:.1f} s of incast "
      f"({100 * (c1 - c0) / hz / (w1 - w0):.0f}% of a core; {hold['sent']} frames through the hold queue), "
      f"{100 * (i1 - i0) / hz / isecs:.0f}% of a core idle with 3 flows")
assert drops == 0, f"the WAN shaper dropped {drops} packets"
assert r["received"] == sent and r["lost"] == 0, "datagrams were lost"
assert r["reordered"] == 0, "datagrams were reordered"
assert gate["drop_no_queue"] == 0 and hold["dropped_overflow"] == 0 and hold["kernel_drops"] == 0
assert gate["queued_no_credit"] + gate["queued_behind"] > 0, "nothing waited for credit: no back-pressure?"
assert goodput > 0.5 * rate, "goodput below half the WAN rate"
if mode == "transit":
    assert tgate["forwarded"] + thold["sent"] >= sent, "not every datagram went through the transit"
    assert tgate["queued_no_credit"] + tgate["queued_behind"] > 0, "tra never waited for gwb's credit"
    assert tgate["drop_no_queue"] == 0 and thold["dropped_overflow"] == 0 and thold["kernel_drops"] == 0
    assert freed >= sent * 1000, "tra returned less credit to gwa than it forwarded"
PY
[ "$(wc -l <"$T/rotation-steps")" = 3 ] || fail "the key rotation did not finish its three steps"
python3 - "$T" "$CREDIT_SWITCHES" "$t0" <<'PY' || fail "RSVP messages were rejected across the key rotation"
import json, sys
t, switches, t0 = sys.argv[1], sys.argv[2].split(), float(sys.argv[3])
done = [float(line.split()[1]) - t0 for line in open(f"{t}/rotation-steps")]
r = json.load(open(f"{t}/credit-recv.json"))
busy = sum(1 for x in r["per_second"] if x)  # seconds in which datagrams arrived
for sw in switches:
    a, b = json.load(open(f"{t}/{sw}-after.json"))[0], json.load(open(f"{t}/{sw}-before.json"))[0]
    d = {k: int(v) - int(b["rejects"].get(k, 0)) for k, v in a["rejects"].items()}
    d = {k: v for k, v in d.items() if v}
    assert not d, f"{sw} rejected RSVP during the rotation: {d}"
print(f"  credit key rotated 1 -> 2 on {', '.join(switches)} during the incast (steps done "
      f"{', '.join(f'{x:.1f}' for x in done)} s after its start, data arriving for {busy} s): no RSVP rejected")
assert done[-1] < busy, "the rotation ended after the traffic: it was not tested under load"

PY

# ---- primary WAN path cut at its far end
note "cutting wan0 <-> gwb at the carrier router 2 s into the incast"
wan_stats before-cut
cut() {
  date +%s.%N >"$T/cut-time"
  ip -n "$L-wan0" link set gwb down
}
wan_incast fail 1 "$SECS" $((2 * SECS + 6)) cut
wan_stats after-cut
credit_json gwa >"$T/gwa-cut.json"
python3 - "$T" "$RESERVE_KB" "$T/logs/incswitchd-gwa.log" "$MODE" <<'PY' || fail "failover to the backup WAN path went wrong"
import datetime, glob, json, os, re, sys
t, reserve_kb, log, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
j = lambda n: json.load(open(f"{t}/{n}"))
cut = float(open(f"{t}/cut-time").read())
sent = sum(sum(j(f.split("/")[-1])["sent"]) for f in glob.glob(f"{t}/fail-send-*.json"))
r = j("fail-recv.json")
failed, moved = {}, {}
for line in open(log):
    m = re.match(r"(\S+)Z .*credit: (next_hop_failed|gate: flow) (\S+) .*(via wan0|-> wan1)$", line.strip())
    if not m:
        continue
    ts = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
    if ts < cut - 0.01:
        continue
    (failed if m.group(2) == "next_hop_failed" else moved).setdefault(m.group(3), ts)
wan1 = j("wan-after-cut.json")["wan1"]["gwb"]["packets"] - j("wan-before-cut.json")["wan1"]["gwb"]["packets"]
drops1 = j("wan-after-cut.json")["wan1"]["gwb"]["drops"] - j("wan-before-cut.json")["wan1"]["gwb"]["drops"]
lost = sent - r["received"]
gap = max(f["longest_gap_ms"] for f in r["flows"].values())
window = 3 * reserve_kb * 1024 // 1066 + 3
if mode == "transit":
    # Lost: what was beyond tra (its windows from gwb) and what tra held
    # (the windows it granted gwa).
    window *= 2
    nopath = []
    for line in open(f"{t}/logs/incswitchd-tra.log"):
        m = re.match(r"(\S+)Z .*credit: no_path ", line.strip())
        if m:
            ts = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
            if ts >= cut - 0.01:
                nopath.append(ts)
    tears = int(j("gwa-cut.json")[0]["signalling"].get("resv_tears", 0))
    print("  tra lost its only next hop (no_path): " + ", ".join(f"{1000 * (x - cut):.0f} ms" for x in nopath) +
          f"; ResvTears believed by gwa: {tears}")
    assert len(nopath) == 3, f"tra reported no_path for {len(nopath)} flows, not 3"
    assert tears >= 3, "gwa did not get tra's ResvTears"
print(f"  after the cut: sent {sent}, received {r['received']}, lost {lost} (in flight on the dead hop; "
      f"bound: the credit windows, {window} datagrams), reordered {r['reordered']}, wan1 carried {wan1}, "
      f"wan1 drops {drops1}")
if failed:
    print("  failover (cut -> next hop declared failed -> gate moved to wan1): " + ", ".join(
        f"{1000 * (failed[k] - cut):.0f}/{1000 * (moved.get(k, float('nan')) - cut):.0f} ms" for k in sorted(failed)))
print(f"  longest silence of a flow at the receiver: {gap:.0f} ms")
hq = j("gwa-cut.json")[0]["hold_queue"]
assert len(failed) == 3 and len(moved) == 3, f"not every flow failed over: failed {failed}, moved {moved}"
assert 0 <= lost <= window, "more lost than was in flight on the dead hop"
assert drops1 == 0, "the backup path dropped packets"
assert wan1 > 1000, "the backup carried too little"
assert r["reordered"] == 0
assert int(hq["dropped_overflow"]) == 0 and int(hq["kernel_drops"]) == 0
PY
ip -n "$L-wan0" link set gwb up

# ---- forged and malformed RSVP toward gwb
note "forged and malformed RSVP messages toward gwb"
credit_json gwb >"$T/gwb-rej-before.json"
"$INCLAB" exec "$L" wan0 python3 - <<'PY'
import socket, struct
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def tear(key_id, mac=b"\0" * 8, good_sum=True):
    # A PathTear of a live flow (wire-format.md section 6): the most harmful
    # message to accept from a forger, it would free the flow's state.
    integ = struct.pack("!HBBBB", 28, 4, 124, 0, 0) + key_id.to_bytes(6, "big") + struct.pack("!Q", 1) + mac
    session = struct.pack("!HBB", 20, 1, 124) + socket.inet_aton("10.0.0.2") + socket.inet_aton("10.0.3.2") + \
        struct.pack("!HHI", 49152, 4791, 4096)
    hop = struct.pack("!HBB", 12, 3, 1) + socket.inet_aton("10.3.0.1") + struct.pack("!I", 1)
    body = integ + session + hop
    m = struct.pack("!BBHBBH", 0x10, 5, 0, 64, 0, 8 + len(body)) + body
    c = csum(m) if good_sum else 0x1234
    return m[:2] + struct.pack("!H", c) + m[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 46)
# truncated; bad checksum; unknown key id (1 retired by the rotation, 99 never
# known); the configured key id (2 since the rotation) with a wrong MAC
for m in (b"\x10\x05\x00", tear(2, good_sum=False), tear(1), tear(99), tear(2, mac=b"\x01" * 8)):
    s.sendto(m, ("10.3.1.2", 0))
PY
sleep 0.3
credit_json gwb >"$T/gwb-rej-after.json"
python3 - "$T" <<'PY' || fail "forged or malformed RSVP was not counted"
import json, sys
t = sys.argv[1]
a, b = json.load(open(f"{t}/gwb-rej-after.json"))[0], json.load(open(f"{t}/gwb-rej-before.json"))[0]
d = {k: int(v) - int(b["rejects"].get(k, 0)) for k, v in a["rejects"].items()}
d = {k: v for k, v in d.items() if v}
print(f"  rejected by gwb: {d}")
assert d == {"truncated": 1, "bad_checksum": 1, "unknown_key": 2, "bad_integrity": 1}, d
assert len(a["flows"]) == 3, "a forged PathTear freed flow state"
PY

# ---- termination: gwa's agent stops and floods PathTear; gwb frees the flows
note "stopping gwa's incswitchd: its flows end with a PathTear"
kill -TERM "$(cat "$T/pids/incswitchd-gwa.pid")"
flow_holders=gwb
[ "$MODE" = transit ] && flow_holders="tra gwb"
for s in $flow_holders; do
  freed=0
  for _ in $(seq 1 50); do
    n=$(credit_json "$s" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[0]["flows"]))')
    [ "$n" = 0 ] && { freed=1; break; }
    sleep 0.1
  done
  [ $freed = 1 ] || fail "$s still holds $n credit flows after gwa ended them"
done
ended=$(grep -c "credit: flow_ended" "$T/logs/incswitchd-gwb.log" || true)
removed=$(grep -c "credit: gate: flow .* removed" "$T/logs/incswitchd-gwb.log" || true)
note "gwb freed every flow: $ended flow_ended events, $removed gate entries removed"
[ "$ended" = 3 ] && [ "$removed" = 3 ] || fail "expected 3 flows ended and 3 gate entries removed at gwb"
pass
