#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.am_outage: a long incamd outage does not cost the running jobs. On the
# single lab a long exact int32 allreduce runs; incamd gets SIGKILL and stays
# away 15 s, long enough for incswitchd's reconnect back-off to the AM to
# grow to its maximum (5 s), then starts again (inclab restart). The switch
# must register with the restarted AM within 2 s of its start (well inside
# the AM's switch heartbeat timeout, 4 s here, after which the AM declares a
# restored switch lost and fails its trees), the tree must stay ACTIVE and
# the job exact. Three rounds, because how long a channel still waiting out
# its back-off would take depends on where in its back-off the AM returns.
. "$(dirname "$0")/lib.sh" "$1" ao
require_bins incswitchd incamd incinctl inc-perf

lab_up o single --member-timeout-ms 2000
L="${P}o"
T="/tmp/inclab-$L"
AM_LOG="$T/logs/incamd.log"
DOWN_S=15
LIMIT_MS=2000
ms_of() {  # log timestamp 2026-11-26T12:54:27.963Z -> epoch ms
  python3 -c 'import datetime, sys
t = datetime.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
print(int(t.timestamp() * 1000))' "$1"
}
tree_state() {
  "$INCLAB" ctl "$L" -o json tree show --job "$L-$1" 2>/dev/null | python3 -c '
import json, sys
print(json.load(sys.stdin)["tree"]["state"])' 2>/dev/null || echo NONE
}

for round in 1 2 3; do
  "$INCLAB" run "$L" --quiet --tag "job$round" -- inc-perf allreduce -d int32 -o sum -b 256K -e 256K -n 1000000 -w 0 \
    --json --am '{am}' --job "{prefix}-job$round" --rank '{rank}' --world '{world}' --iface '{iface}' >/dev/null 2>&1 &
  run_pid=$!
  for _ in $(seq 100); do
    [ "$(tree_state "job$round")" = TREE_ACTIVE ] && break
    sleep 0.1
  done
  [ "$(tree_state "job$round")" = TREE_ACTIVE ] || fail "round $round: the job's tree never became active"
  kill -KILL "$(cat "$T/pids/incamd.pid")"
  note "round $round: incamd killed; away for $DOWN_S s"
  sleep "$DOWN_S"
  "$INCLAB" restart "$L" incamd 2>/dev/null
  restart_log=""
  for _ in $(seq 100); do
    restart_log=$(sed -n '/^--- inclab restart incamd/h; /^--- inclab restart incamd/!H; ${x;p}' "$AM_LOG")
    grep -q "switch_registered: switch leaf0 .*after an AM restart\|switch_lost: switch leaf0" <<<"$restart_log" && break
    sleep 0.1
  done
  listening=$(grep -m1 -o '^[0-9T:.-]*Z I incamd: listening on' <<<"$restart_log" | cut -d' ' -f1)
  registered=$(grep -m1 -o '^[0-9T:.-]*Z I incamd: switch_registered: switch leaf0' <<<"$restart_log" | cut -d' ' -f1 || true)
  [ -n "$listening" ] || fail "round $round: the restarted AM did not log that it listens"
  ! grep -q "switch_lost\|tree_failed" <<<"$restart_log" ||
    fail "round $round: the restarted AM lost the switch or a tree: $(grep "switch_lost\|tree_failed" <<<"$restart_log")"
  [ -n "$registered" ] || fail "round $round: leaf0 did not register with the restarted AM within 10 s"
  delay=$(($(ms_of "$registered") - $(ms_of "$listening")))
  note "round $round: leaf0 registered $delay ms after the restarted AM listened (limit $LIMIT_MS ms)"
  [ "$delay" -le "$LIMIT_MS" ] || fail "round $round: leaf0 registered $delay ms after the AM's restart, more than $LIMIT_MS ms"
  sleep 3 # past the member heartbeat timeout: the members heartbeat to the new AM
  [ "$(tree_state "job$round")" = TREE_ACTIVE ] || fail "round $round: the tree is $(tree_state "job$round") after the restart"
  # The members stop (SIGTERM: they leave the group); the job was exact so far.
  for w in w0 w1 w2 w3; do
    for pid in $(ip netns pids "$L-$w"); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = inc-perf ] && kill -TERM "$pid"
    done
  done
  wait "$run_pid" || true
  ! grep -l "first wrong element" "$T"/logs/job"$round"-w*.log 2>/dev/null || fail "round $round: wrong elements"
done
pass
