#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.xdp_coexist: incin next to another XDP program on a worker's interface
# (docs/operations.md "Other XDP programs on the same interface"). A counting
# program (bpf/lab/xdp_count.bpf.c, XDP_PASS for everything) is loaded on
# w0's eth0 with xdp-loader, i.e. through libxdp's dispatcher. Checks:
# 1. chained: an afxdp allreduce is exact and went through the switch; while
#    it ran, `xdp-loader status` listed incin's xsk_redirect in the chain
#    after xdp_count (priority 60 > 50) and libinc said it chained; the
#    counter saw the job's RoCEv2 frames; afterwards xdp_count is still
#    attached (same program id) and xsk_redirect is gone.
# 2. fallback, the xdp transport (its program cannot be chained): the job is
#    exact, libinc warns naming the dispatcher's program id and the remedy,
#    and the dispatcher with xdp_count is back on eth0 afterwards.
# 3. fallback, a program attached without libxdp (bpftool): the afxdp job is
#    exact, libinc warns naming the program's id and how to run both, and the
#    program is back on eth0 afterwards.
# SKIP (77) without xdp-loader/bpftool or a libinc built without libxdp.
. "$(dirname "$0")/lib.sh" "$1" xc
require_bins incswitchd incamd incinctl inc-perf
command -v xdp-loader >/dev/null || skip "xdp-loader not installed (apt-get install xdp-tools)"
command -v bpftool >/dev/null || skip "bpftool not installed"
grep -q '^LIBXDP_FOUND:INTERNAL=1' "$INCLAB_BUILD/CMakeCache.txt" 2>/dev/null ||
  skip "libinc in $INCLAB_BUILD was built without libxdp (apt-get install libxdp-dev, then cmake again)"
OBJ="$INCLAB_BUILD/bpf/xdp_count.bpf.o"
[ -f "$OBJ" ] || skip "$OBJ is not built"

# MTU 3000: libxdp 1.3.1's dispatcher is built without multi-buffer (frags)
# support, and a veth takes such an XDP program only up to about 3.5 KB.
# --member-timeout-ms: under the qemu guest's emulated CPUs (rxe.xdp_coexist_guest)
# a busy rank can miss the default heartbeat window.
lab_up x single --mtu 3000 --member-timeout-ms 30000
L="${P}x"
PIN="/sys/fs/bpf/incin-xc-$$"
at_cleanup 'rm -f "$PIN"'
w0() { "$INCLAB" exec "$L" w0 "$@"; }
status() { w0 xdp-loader status eth0 2>&1; }
# ID of program NAME in `xdp-loader status eth0` output on stdin (empty if absent).
prog_id() { awk -v n="$1" '{for (i = 1; i < NF; i++) if ($i == n) {for (j = i + 1; j <= NF; j++) if ($j ~ /^[0-9]+$/) {print $j; exit}}}'; }
# RoCEv2 frames xdp_count counted (its map, by the program's id).
roce_count() {
  local map
  map=$(bpftool -j prog show id "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["map_ids"][0])')
  bpftool -j map lookup id "$map" key 1 0 0 0 | python3 -c '
import json, sys
d = json.load(sys.stdin)
v = d.get("value", d)
print(int.from_bytes(bytes(int(b, 16) for b in v), "little") if isinstance(v, list) else int(v))'
}
# Attaching XDP to a veth takes its link down for a moment: wait until the
# AM has every port of leaf0 up again, or the next job's tree is refused.
ports_up() {
  local i
  for i in $(seq 100); do
    "$INCLAB" ctl "$L" -o json switch show leaf0 | python3 -c '
import json, sys
ports = json.load(sys.stdin)["switch_summary"]["ports"]
sys.exit(0 if ports and all(p["up"] for p in ports) else 1)' 2>/dev/null && return 0
    sleep 0.1
  done
  fail "leaf0's ports did not all come up"
}
# Slots leaf0's XDP program completed (the job was aggregated there: offloaded).
aggregated() {
  "$INCLAB" ctl "$L" -o json stats | python3 -c '
import json, sys
for s in json.load(sys.stdin)["switches"]:
    if s["switch_name"] == "leaf0":
        print(int(s.get("global", {}).get("completions", 0)))'
}

note "xdp_count loaded on w0's eth0 with xdp-loader"
if ! out=$(w0 xdp-loader load -vv -m native eth0 "$OBJ" 2>&1); then
  grep -i -E "frag|dispatcher|fail|error" <<<"$out" | tail -n 20 >&2
  fail "xdp-loader could not load $OBJ on w0's eth0"
fi
st=$(status)
count_id=$(prog_id xdp_count <<<"$st")
[ -n "$count_id" ] || fail "xdp-loader status does not list xdp_count:"$'\n'"$st"
CHAINED=0
grep -q xdp_dispatcher <<<"$st" && CHAINED=1
ports_up

if [ "$CHAINED" = 1 ]; then
  note "1. chained: an afxdp job next to xdp_count"
  roce0=$(roce_count "$count_id")
  agg0=$(aggregated)
  seen="$(mktemp)"
  at_cleanup 'rm -f "$seen"'
  (while :; do status >>"$seen"; sleep 0.2; done) &
  poller=$!
  at_cleanup "kill $poller 2>/dev/null"
  run_perf x chained -- allreduce -d int32 -o sum -b 4 -e 256K -f 4 -n 5 -w 1 --transport afxdp --log-level info
  kill "$poller" 2>/dev/null
  wait "$poller" 2>/dev/null || true
  [ ${#FAILED[@]} = 0 ] || fail "the afxdp job next to xdp_count failed"
  grep -q xsk_redirect "$seen" || fail "xdp-loader status never listed incin's xsk_redirect during the job"
  during=$(grep -m1 -B6 xsk_redirect "$seen" | tail -n 7)
  note "xdp-loader status during the job:"$'\n'"$during"
  # The chain lists programs in run order: xdp_count (50) before xsk_redirect (60).
  order=$(awk '{for (i = 1; i <= NF; i++) if ($i == "xdp_count" || $i == "xsk_redirect") print $i}' <<<"$during" | tr '\n' ' ')
  [ "$order" = "xdp_count xsk_redirect " ] || fail "run order in the chain is '$order', want 'xdp_count xsk_redirect'"
  grep -q "chained into libxdp's dispatcher on eth0" "/tmp/inclab-$L/logs/chained-w0.log" ||
    fail "libinc did not log that it chained into the dispatcher (logs/chained-w0.log)"
  roce1=$(roce_count "$count_id")
  note "xdp_count counted $((roce1 - roce0)) RoCEv2 frames during the job"
  [ "$((roce1 - roce0))" -gt 0 ] || fail "xdp_count saw no RoCEv2 frame: it did not run in front of incin's program"
  agg1=$(aggregated)
  note "leaf0 completions: $agg0 -> $agg1"
  [ "$agg1" -gt "$agg0" ] || fail "leaf0's completions did not move: the job was not offloaded"
  st=$(status)
  [ "$(prog_id xdp_count <<<"$st")" = "$count_id" ] || fail "xdp_count (id $count_id) is gone after the job:"$'\n'"$st"
  ! grep -q xsk_redirect <<<"$st" || fail "incin's xsk_redirect is still in the chain after the job:"$'\n'"$st"

  note "2. the xdp transport cannot chain: exclusive for the job, the dispatcher restored"
  disp_id=$(prog_id xdp_dispatcher <<<"$st")
  ports_up
  run_perf x xdpio -- allreduce -d int32 -o sum -b 4 -e 64K -f 4 -n 3 -w 0 --transport xdp
  [ ${#FAILED[@]} = 0 ] || fail "the xdp-transport job failed"
  grep -q "XDP program id $disp_id (xdp_dispatcher) on eth0 is replaced by incin's .*the afxdp transport" \
    "/tmp/inclab-$L/logs/xdpio-w0.log" || fail "no warning naming the dispatcher (id $disp_id) in logs/xdpio-w0.log"
  st=$(status)
  [ "$(prog_id xdp_dispatcher <<<"$st")" = "$disp_id" ] && [ "$(prog_id xdp_count <<<"$st")" = "$count_id" ] ||
    fail "the dispatcher (id $disp_id) with xdp_count was not put back:"$'\n'"$st"
  w0 xdp-loader unload eth0 --all >/dev/null || fail "xdp-loader unload --all failed"
  note "3. a program attached without libxdp (bpftool)"
  bpftool prog load "$OBJ" "$PIN" type xdp || fail "bpftool could not load $OBJ"
  w0 bpftool net attach xdpdrv pinned "$PIN" dev eth0 || fail "bpftool could not attach $OBJ to w0's eth0"
  plain_id=$(bpftool -j prog show pinned "$PIN" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  ports_up
else
  # libxdp fell back to attaching xdp_count alone: its dispatcher needs
  # freplace (BPF_PROG_TYPE_EXT) programs, which this kernel refuses.
  note "libxdp's dispatcher is unusable here (xdp-loader attached xdp_count without it): only the fallback runs"
  plain_id=$count_id
fi

note "3. a program not behind libxdp's dispatcher: replaced for the job, with the remedy, then restored"
run_perf x plain -- allreduce -d int32 -o sum -b 4 -e 64K -f 4 -n 3 -w 0 --transport afxdp
[ ${#FAILED[@]} = 0 ] || fail "the afxdp job in place of xdp_count failed"
grep -q "XDP program id $plain_id (xdp_count) on eth0 is replaced by incin's .*not attached through libxdp's.*xdp-loader load -m native eth0" \
  "/tmp/inclab-$L/logs/plain-w0.log" || fail "no warning naming program $plain_id and the remedy in logs/plain-w0.log"
note "libinc said: $(grep -o "XDP program id $plain_id .*" "/tmp/inclab-$L/logs/plain-w0.log" | head -n1)"
now=$(w0 ip -j link show dev eth0 | python3 -c 'import json, sys; print(json.load(sys.stdin)[0].get("xdp", {}).get("prog", {}).get("id", 0))')
[ "$now" = "$plain_id" ] || fail "program $plain_id was not put back on eth0 (now: $now)"
w0 ip link set dev eth0 xdpdrv off
[ "$CHAINED" = 1 ] || skip "the chained checks need libxdp's dispatcher, which this kernel refuses (no freplace/EXT programs: xdp-loader load -vv says why); the fallback checks passed"
pass
