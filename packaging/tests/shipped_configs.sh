#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.shipped_configs: the example configs the packages install under
# /etc/incin (packaging/etc/) describe one site, loaded together the way an
# operator checks them: `incamd --check-config` with the AM config, its
# topology and the switch example, and `incswitchd --check-config` with the
# switch example. Both exit 0 and print the effective config as JSON (with
# metrics on the management addresses); then each broken variant of a file
# (a table below) exits 2 with a message naming the problem.
# Usage: shipped_configs.sh INCAMD INCSWITCHD ETC_DIR
set -euo pipefail
INCAMD=${1:?incamd}
INCSWITCHD=${2:?incswitchd}
ETC=${3:?packaging/etc}
WORK=$(mktemp -d /tmp/incin-shipped.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The AM config names /etc/incin/topology.json; --topology points it at the
# shipped file in this tree (flags override the file's fields).
am_check() {  # AM-CONFIG TOPOLOGY SWITCH-CONFIG OUT: incamd --check-config's exit code
  local rc=0
  "$INCAMD" --check-config --config "$1" --topology "$2" --switch-config "$3" >"$4" 2>"$4.err" || rc=$?
  return $rc
}

note() { echo "[shipped_configs] $*"; }

note "the shipped files together"
am_check "$ETC/incamd.json" "$ETC/topology.json" "$ETC/switch-example.json" "$WORK/am.json" ||
  fail "incamd --check-config refused the shipped configs: $(cat "$WORK/am.json.err")"
sed 's/^/  /' "$WORK/am.json.err"
"$INCSWITCHD" --check-config --config "$ETC/switch-example.json" >"$WORK/sw.json" 2>"$WORK/sw.json.err" ||
  fail "incswitchd --check-config refused switch-example.json: $(cat "$WORK/sw.json.err")"
sed 's/^/  /' "$WORK/sw.json.err"
python3 - "$WORK/am.json" "$WORK/sw.json" "$ETC/topology.json" <<'PY' || fail "the effective configs do not describe one site"
import json, sys
am, sw, topo = (json.load(open(f)) for f in sys.argv[1:4])
def need(cond, what):
    if not cond:
        sys.exit(what)
# Every default is printed: fields the file leaves out are there too.
for f in ("listen", "metrics_listen", "member_heartbeat_timeout_ms", "tree_move_holddown_ms", "state_path",
          "log_format", "move_on_congestion_severity"):
    need(f in am, "incamd's effective config lacks " + f)
for f in ("switch_name", "metrics_listen", "heartbeat_interval_ms", "log_format", "icrc_verify", "pin_root"):
    need(f in sw, "incswitchd's effective config lacks " + f)
need(am["state_path"] == "/var/lib/incin/incamd.db", "state_path default: " + am["state_path"])
need(am["log_format"] == "text" and sw["log_format"] == "text", "log_format defaults")
# Metrics on, on each daemon's management address, apart from gRPC.
am_host = am["listen"].rsplit(":", 1)[0]
sw_host = sw["listen"].rsplit(":", 1)[0]
need(am["metrics_listen"].rsplit(":", 1)[0] == am_host, "AM metrics not on its management address")
need(sw["metrics_listen"].rsplit(":", 1)[0] == sw_host, "switch metrics not on its management address")
need(am["metrics_listen"] != am["listen"] and sw["metrics_listen"] != sw["listen"], "metrics on the gRPC port")
for a in (am["metrics_listen"], sw["metrics_listen"]):
    need(not a.startswith("0.0.0.0") and not a.startswith("[::]"), "metrics on every interface: " + a)
# The switch dials the AM where it listens; both use TLS.
need(sw["am_address"] == am["listen"], "switch am_address %s, AM listen %s" % (sw["am_address"], am["listen"]))
need(sw["tls"]["ca"] == am["tls"]["ca"], "switch and AM trust different CAs")
# The switch is the topology's, with exactly the ports the topology gives it.
name = sw["switch_name"]
need(name in [s["name"] for s in topo["switches"]], name + " is not in the topology")
want = {h["switchPort"] for h in topo["hosts"] if h["switchName"] == name}
want |= {l["aPort"] for l in topo["links"] if l["a"] == name} | {l["bPort"] for l in topo["links"] if l["b"] == name}
have = {p["name"] for p in sw["ports"]}
need(want == have, "switch ports %s, topology ports %s" % (sorted(have), sorted(want)))
PY

note "broken variants exit 2 naming the problem"
# name | file the edit applies to (am, topology, switch) | python on `doc` | expected text in the error
CASES=(
  "switch not in the topology|switch|doc['switch_name'] = 'leaf9'|switch_name leaf9 is not a switch of the topology"
  "topology port missing from the switch|switch|doc['ports'] = doc['ports'][:2]|puts the link to spine0 on port eth3 of switch leaf0, which is not in its ports"
  "host on a port the switch lacks|topology|doc['hosts'][0]['switchPort'] = 'eth7'|puts host w0 on port eth7 of switch leaf0"
  "switch plaintext, AM with TLS|switch|doc.pop('tls'); doc['insecure'] = True|insecure is set but the AM uses TLS"
  "switch metrics on its gRPC address|switch|doc['metrics_listen'] = doc['listen']|metrics_listen 192.0.2.11:50061 is the gRPC listen address too"
  "AM metrics on its gRPC address|am|doc['metricsListen'] = doc['listen']|metrics_listen 192.0.2.1:50051 is the gRPC listen address too"
  "AM heartbeat timeout below two intervals|am|doc['memberHeartbeatTimeoutMs'] = 1500|member_heartbeat_timeout_ms 1500 is shorter than two heartbeats"
  "unknown AM field|am|doc['listne'] = 'x'|listne"
  "topology link to an unknown switch|topology|doc['links'][0]['b'] = 'spine9'|spine9"
)
for c in "${CASES[@]}"; do
  IFS='|' read -r name which edit want <<<"$c"
  cp "$ETC/incamd.json" "$WORK/c-am.json"
  cp "$ETC/topology.json" "$WORK/c-topology.json"
  cp "$ETC/switch-example.json" "$WORK/c-switch.json"
  case "$which" in
    am) f="$WORK/c-am.json" ;;
    topology) f="$WORK/c-topology.json" ;;
    switch) f="$WORK/c-switch.json" ;;
  esac
  python3 - "$f" "$edit" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(doc, open(sys.argv[1], "w"), indent=2)
PY
  rc=0
  am_check "$WORK/c-am.json" "$WORK/c-topology.json" "$WORK/c-switch.json" "$WORK/c.out" || rc=$?
  [ "$rc" = 2 ] || fail "$name: incamd --check-config exit $rc, want 2: $(cat "$WORK/c.out.err")"
  grep -qF -- "$want" "$WORK/c.out.err" || fail "$name: the error does not say '$want': $(cat "$WORK/c.out.err")"
  [ ! -s "$WORK/c.out" ] || fail "$name: an invalid config printed an effective config"
  echo "  $name: exit 2, $(grep 'error:' "$WORK/c.out.err" | head -n1)"
done

# incswitchd alone: its own checks, with the flags over the file.
rc=0
"$INCSWITCHD" --check-config --config "$ETC/switch-example.json" --listen 192.0.2.11:99999 >/dev/null 2>"$WORK/e" ||
  rc=$?
[ "$rc" = 2 ] && grep -qF 'port 99999 is not in 0..65535' "$WORK/e" ||
  fail "incswitchd --check-config --listen :99999: exit $rc, $(cat "$WORK/e")"
echo "  incswitchd, listen port 99999: exit 2, $(head -n1 "$WORK/e")"
# --help documents the flag (the man pages are made from --help).
for b in "$INCAMD" "$INCSWITCHD"; do
  grep -q -- '--check-config' <<<"$("$b" --help)" || fail "$b --help does not mention --check-config"
done
note "PASS"
