#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One rxe-lab topology with its phases, run inside the qemu guest by
# rxe-guest.sh (needs the guest's rdma_rxe). Brings up an inclab topology with
# incamd and incswitchd and puts an rxe device on worker interfaces (inside
# the worker namespaces). Phases:
#   verbs     verbs transport on 4 workers: allreduce int32 sum and float32
#             sum, broadcast, barrier; exact results on every rank, every
#             rank on verbs
#   pingpong  ibv_uc_pingpong between the first and last worker through the
#             switch namespaces' forwarding path
#   unit      verbs_unit_test's device tests in a worker namespace
#   mixed     rxe removed from w2,w3; every rank --transport auto: w0,w1 on
#             verbs, w2,w3 on the xdp transport in one job (allreduce int32, float32)
# After the phases: zero bad_icrc drops in every switch's data path (incinctl
# stats), zero error counters on every rxe device (hw_counters), packets
# counted on both. One line per phase goes to $RXE_RESULTS ("topo/phase PASS").
#   rxe-scenario.sh BUILD_DIR single|two PHASE[,PHASE...]
. "$(dirname "$(readlink -f "$0")")/../../lib.sh" "$1" rx
TOPO=${2:?single or two}
PHASES=${3:-verbs}
RXE_RESULTS=${RXE_RESULTS:-/dev/null}
# TCG under a busy host can stall a member for seconds: heartbeats get 30 s.
lab_up a "$TOPO" --member-timeout-ms 30000 --icrc-verify  # the switches check rxe's ICRCs
L=a
PFX=$P$L
LOGS=/tmp/inclab-$PFX/logs

# rxe on a worker's eth0, created inside its namespace; waits for the RoCEv2
# GID of the worker's address (the GID table fills asynchronously).
RXE_DEVS=()
add_rxe() {  # worker
  local w=$1 dev=${PFX}$1 i
  ip netns exec "$PFX-$w" rdma link add "$dev" type rxe netdev eth0 || fail "rdma link add $dev on $PFX-$w/eth0"
  RXE_DEVS+=("$dev")
  for i in $(seq 50); do
    [ -n "$(gid_index "$dev")" ] && return 0
    sleep 0.1
  done
  fail "$dev has no RoCEv2 IPv4 GID after 5 s"
}

gid_index() {  # dev -> index of its RoCE v2 IPv4-mapped GID
  local f i
  for f in /sys/class/infiniband/$1/ports/1/gids/*; do
    i=${f##*/}
    case "$(cat "$f" 2>/dev/null)" in 0000:0000:0000:0000:0000:ffff:*)
      [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && {
        echo "$i"
        return 0
      } ;;
    esac
  done
}

# Every worker log of a perf run must show the expected transport.
expect_transport() {  # tag worker transport
  grep -q "\"transport\":\"$3\"" "$LOGS/$1-$2.log" || {
    echo "FAIL: $1 on $2 did not run over $3" >&2
    FAILED+=("$1-$2-transport")
  }
}

# No ICRC failures in any switch, and the switches did see RoCE traffic.
check_switch_counters() {
  "$INCLAB" ctl "$PFX" -o json stats >"$LOGS/stats.json" || fail "incinctl stats failed"
  python3 - "$LOGS/stats.json" <<'PY' || FAILED+=("switch-counters")
import json, sys
doc = json.load(open(sys.argv[1]))
found, icrc, rx = 0, 0, 0
def walk(o):
    global found, icrc, rx
    if isinstance(o, dict):
        if o.get("reason") == "bad_icrc":
            found += 1
            icrc += int(o.get("packets", 0))
        g = o.get("global")
        if isinstance(g, dict):
            rx += sum(int(v) for k, v in g.items() if k.startswith("rx"))
        for v in o.values():
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(doc)
print(f"  switch counters: bad_icrc {icrc} (in {found} switches), rx counters total {rx}")
if found == 0:
    sys.exit("no bad_icrc counter in incinctl stats")
if icrc != 0 or rx == 0:
    sys.exit(1)
PY
}

# rxe error counters are zero, packets were sent and received.
check_rxe_counters_of() {  # dev
  local dev=$1 d=/sys/class/infiniband/$1/ports/1/hw_counters f v bad=0 sent rcvd
  [ -d "$d" ] || { echo "FAIL: $d missing" >&2; FAILED+=("rxe-counters-$dev"); return; }
  sent=$(cat "$d/sent_pkts")
  rcvd=$(cat "$d/rcvd_pkts")
  for f in "$d"/*; do
    case ${f##*/} in *err* | link_downed | out_of_seq_request | duplicate_request)
      v=$(cat "$f")
      [ "$v" = 0 ] || { echo "  $dev ${f##*/} = $v" >&2; bad=1; } ;;
    esac
  done
  echo "  rxe $dev: sent_pkts $sent rcvd_pkts $rcvd"
  [ "$sent" -gt 0 ] && [ "$rcvd" -gt 0 ] || bad=1
  [ "$bad" = 0 ] || { echo "FAIL: rxe $dev counters show errors or no traffic" >&2; FAILED+=("rxe-counters-$dev"); }
}
check_rxe_counters() {
  local dev
  for dev in "${RXE_DEVS[@]}"; do check_rxe_counters_of "$dev"; done
  rdma statistic show 2>/dev/null | head -n 8 || true
}

pingpong() {  # server-worker client-worker
  local s=$1 c=$2 sdev=${PFX}$1 cdev=${PFX}$2 sg cg sip spid rc=0 src=0
  sg=$(gid_index "$sdev")
  cg=$(gid_index "$cdev")
  sip=$(ip -n "$PFX-$s" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  note "ibv_uc_pingpong $s ($sdev gid $sg) <- $c ($cdev gid $cg) via the switch"
  ip netns exec "$PFX-$s" timeout 120 ibv_uc_pingpong -d "$sdev" -g "$sg" -n 200 -s 1024 -m 1024 \
    >"$LOGS/pp-server.log" 2>&1 &
  spid=$!
  sleep 1
  ip netns exec "$PFX-$c" timeout 120 ibv_uc_pingpong -d "$cdev" -g "$cg" -n 200 -s 1024 -m 1024 "$sip" \
    >"$LOGS/pp-client.log" 2>&1 || rc=$?
  wait $spid || src=$?
  sed 's/^/  pp-server| /' "$LOGS/pp-server.log"
  sed 's/^/  pp-client| /' "$LOGS/pp-client.log"
  [ "$rc" = 0 ] && [ "$src" = 0 ] || { echo "FAIL: ibv_uc_pingpong server $src client $rc" >&2; FAILED+=(pingpong); }
}

# phase NAME: runs phase_NAME and records PASS/FAIL by whether it added failures.
phase() {
  local before=${#FAILED[@]} t0=$SECONDS
  "phase_$1"
  if [ ${#FAILED[@]} = "$before" ]; then
    echo "$TOPO/$1 PASS ($((SECONDS - t0)) s)" >>"$RXE_RESULTS"
  else
    echo "$TOPO/$1 FAIL: ${FAILED[*]:$before} ($((SECONDS - t0)) s)" >>"$RXE_RESULTS"
  fi
}

# inc-perf on every worker; --log-level info makes every rank log its status
# JSON (with the transport it used).
vperf() { run_perf "$@" --log-level info; }

phase_verbs() {
  local t w
  for w in w0 w1 w2 w3; do add_rxe $w; done
  note "$TOPO: verbs transport, 4 workers"
  vperf $L v-ar-int32 -- allreduce -d int32 -o sum -b 4 -e 16K -f 64 -n 2 -w 0 --transport verbs
  vperf $L v-ar-f32 -- allreduce -d float32 -o sum -b 4 -e 16K -f 64 -n 2 -w 0 --transport verbs
  vperf $L v-bc -- broadcast -d float32 -r 1 -b 4 -e 16K -f 64 -n 2 -w 0 --transport verbs
  vperf $L v-bar -- barrier -n 10 -w 0 --transport verbs
  for t in v-ar-int32 v-ar-f32 v-bc v-bar; do
    for w in w0 w1 w2 w3; do expect_transport $t $w verbs; done
  done
}

phase_pingpong() {
  add_rxe_once w0
  add_rxe_once w3
  pingpong w0 w3
}

phase_unit() {
  local bin
  bin=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name verbs_unit_test -perm -u+x | head -n1)
  [ -n "$bin" ] || { echo "FAIL: verbs_unit_test is not built" >&2; FAILED+=(unit-missing); return; }
  add_rxe_once w0
  "$INCLAB" exec "$PFX" w0 "$bin" --gtest_filter='VerbsDevice.*:TransportSelection.*' >"$LOGS/unit.log" 2>&1 ||
    { FAILED+=(unit); }
  sed 's/^/  unit| /' "$LOGS/unit.log"
  # A skip here would mean the device was not found: that is a failure in the guest.
  ! grep -q "SKIPPED" "$LOGS/unit.log" || { echo "FAIL: device test skipped in the guest" >&2; FAILED+=(unit-skipped); }
}

phase_mixed() {
  local w
  add_rxe_once w0
  add_rxe_once w1
  for w in w2 w3; do del_rxe $w; done
  note "mixed job: w0,w1 have rxe, w2,w3 do not; every rank --transport auto"
  vperf $L m-ar-int32 -- allreduce -d int32 -o sum -b 4 -e 16K -f 64 -n 2 -w 0 --transport auto
  vperf $L m-ar-f32 -- allreduce -d float32 -o sum -b 4 -e 16K -f 64 -n 2 -w 0 --transport auto
  for t in m-ar-int32 m-ar-f32; do
    expect_transport $t w0 verbs
    expect_transport $t w1 verbs
    expect_transport $t w2 xdp
    expect_transport $t w3 xdp
  done
}

add_rxe_once() { [ -d "/sys/class/infiniband/${PFX}$1" ] || add_rxe "$1"; }
del_rxe() {  # worker: remove its device, keep its counters checked
  local dev=${PFX}$1 i
  [ -d "/sys/class/infiniband/$dev" ] || return 0
  check_rxe_counters_of "$dev"
  rdma link del "$dev"
  for i in "${!RXE_DEVS[@]}"; do [ "${RXE_DEVS[$i]}" = "$dev" ] && unset "RXE_DEVS[$i]"; done
  return 0
}

for ph in ${PHASES//,/ }; do
  declare -F "phase_$ph" >/dev/null || fail "unknown phase $ph"
  phase "$ph"
done
before=${#FAILED[@]}
check_switch_counters
check_rxe_counters
if [ ${#FAILED[@]} = "$before" ]; then
  echo "$TOPO/counters PASS (bad_icrc 0, rxe errors 0)" >>"$RXE_RESULTS"
else
  echo "$TOPO/counters FAIL: ${FAILED[*]:$before}" >>"$RXE_RESULTS"
fi
for dev in "${RXE_DEVS[@]}"; do rdma link del "$dev" 2>/dev/null || true; done
pass
