#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.am_restart: incamd keeps running jobs across a crash, and a job starts
# right after an agent restart. Four workers on the two-level lab run a long
# exact int32 allreduce; mid-run incamd gets SIGKILL and is started again with
# the same config (inclab restart). Checks: the run finishes with #wrong 0,
# the tree is ACTIVE with the same id and generation after the restart (no
# live tree lost) and still after a member heartbeat timeout (its members
# heartbeat to the new AM), and the AM log says it kept the tree. Then
# incswitchd on leaf0 gets SIGKILL and is restarted, and a new job starts as
# soon as the agent has registered again: it must succeed. Recovery times are
# printed, not asserted.
. "$(dirname "$0")/lib.sh" "$1" ar
require_bins incswitchd incamd incinctl inc-perf

lab_up r two
L="${P}r"
T="/tmp/inclab-$L"
ctl() { "$INCLAB" ctl "$L" "$@"; }
now_ms() { date +%s%3N; }
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
AM_LOG="$T/logs/incamd.log"
MEMBER_TIMEOUT_MS=5000 # inclab's default

tree_field() {  # job-tag python-expression-over-t
  ctl -o json tree show --job "$L-$1" 2>/dev/null | python3 -c '
import json, sys
t = json.load(sys.stdin)["tree"]
print(eval(sys.argv[1]))' "$2" 2>/dev/null
}
live_trees() {
  ctl -o json tree list 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for t in d.get("trees", []) if t.get("state") in ("TREE_ACTIVE", "TREE_PENDING")))'
}

note "calibration: 20 allreduces of 1 MiB int32"
perf r cal -- allreduce -d int32 -o sum -b 1M -e 1M -n 20 -w 0 || fail "the calibration run failed"
# inc-perf's own mean time per iteration (the run's wall time also holds the
# join and the linger).
per_iter=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{") and "\"results\"" in line:
        print(max(1, int(json.loads(line)["results"][0]["time_us"] / 1000)))' "$T/logs/cal-w0.log")
# Long enough for: 2 s before the kill, the restart, and more than a member
# heartbeat timeout after it.
iters=$((14000 / per_iter))
[ "$iters" -ge 100 ] || iters=100
[ "$iters" -le 20000 ] || iters=20000
note "job: $iters allreduces of 1 MiB int32 (~${per_iter} ms each)"

perf r job -- allreduce -d int32 -o sum -b 1M -e 1M -n "$iters" -w 0 >"$T/job.out" 2>&1 &
perf_pid=$!
tree_id=""
for _ in $(seq 1 400); do
  tree_id=$(tree_field job 't["tree_id"] if t.get("state") == "TREE_ACTIVE" else ""' || true)
  [ -n "$tree_id" ] && break
  sleep 0.05
done
[ -n "$tree_id" ] || { wait $perf_pid || true; cat "$T/job.out"; fail "the job's tree never became active"; }
gen=$(tree_field job 't.get("generation", 0)')
before=$(live_trees)
note "tree $tree_id active (generation $gen, $before live trees); SIGKILL to incamd in 2 s"
sleep 2

am_pid=$(cat "$T/pids/incamd.pid")
t_kill=$(now_ms)
kill -KILL "$am_pid"
while kill -0 "$am_pid" 2>/dev/null; do sleep 0.01; done
t_dead=$(now_ms)
sleep 0.5 # the AM stays away a moment, as a crashed one would
t_start=$(now_ms)
"$INCLAB" restart "$L" incamd 2>/dev/null
answered=""
for _ in $(seq 1 400); do
  if [ "$(tree_field job 't["tree_id"], t["state"], t.get("generation", 0)' || true)" = "($tree_id, 'TREE_ACTIVE', $gen)" ]; then
    answered=$(now_ms)
    break
  fi
  sleep 0.025
done
[ -n "$answered" ] || fail "after the restart, incamd does not list tree $tree_id ACTIVE with generation $gen"
after=$(live_trees)
[ "$after" = "$before" ] || fail "$before live trees before the restart, $after after"
"$INCLAB" wait-switches "$L" 20 2>/dev/null || fail "the switches did not register again with the restarted AM"
registered=$(now_ms)
# Past a member heartbeat timeout after the restart, the tree is still
# active: its members heartbeat to the new AM.
sleep_ms $((MEMBER_TIMEOUT_MS + 1000 - ($(now_ms) - t_start)))
state=$(tree_field job 't["state"]' || true)
if [ "$state" != TREE_ACTIVE ] && kill -0 $perf_pid 2>/dev/null; then
  fail "tree $tree_id is $state a member heartbeat timeout after the restart"
fi
rc=0
wait $perf_pid || rc=$?
cat "$T/job.out"
[ "$rc" = 0 ] || fail "the allreduce across the AM restart did not finish with exact results"
restart_log=$(sed -n '/^--- inclab restart incamd/,$p' "$AM_LOG")
grep -q "am_restored: .* 1 trees restored: $tree_id (job $L-job" <<<"$restart_log" ||
  fail "the restarted AM's log does not say it restored tree $tree_id"
kept=$(grep -c "keeping tree $tree_id (job $L-job.*known from the state store" <<<"$restart_log" || true)
[ "$kept" -ge 1 ] || fail "the restarted AM's log does not say it kept tree $tree_id on its switches"
! grep -q "tree_failed: tree $tree_id " <<<"$restart_log" || fail "the restarted AM failed tree $tree_id"
grep "switch_registered: .*after an AM restart" <<<"$restart_log" | sed 's/^/  /'
note "AM: SIGKILL, gone (reaped) after $((t_dead - t_kill)) ms, restarted $((t_start - t_dead)) ms later; tree $tree_id listed ACTIVE $((answered - t_start)) ms after the restart, every switch registered again after $((registered - t_start)) ms; $kept switches kept it"

note "incswitchd on leaf0: SIGKILL, restart, and a new job at once"
sw_pid=$(cat "$T/pids/incswitchd-leaf0.pid")
regs_before=$(grep -c "switch_reregistered: switch leaf0 " "$AM_LOG" || true)
kill -KILL "$sw_pid"
while kill -0 "$sw_pid" 2>/dev/null; do sleep 0.01; done
# The AM calls the dead agent (as an operator's `stats` or a tree removal
# would), so that its channel to it fails and backs off.
for _ in 1 2 3; do ctl stats >/dev/null 2>&1 || true; sleep 0.3; done
t_sw=$(now_ms)
"$INCLAB" restart "$L" incswitchd-leaf0 2>/dev/null
rereg=""
for _ in $(seq 1 400); do
  if [ "$(grep -c "switch_reregistered: switch leaf0 " "$AM_LOG" || true)" -gt "$regs_before" ]; then
    rereg=$(now_ms)
    break
  fi
  sleep 0.02
done
[ -n "$rereg" ] || fail "incswitchd on leaf0 did not register again within 8 s of its restart"
t_job=$(now_ms)
perf r after -- allreduce -d int32 -o sum -b 64K -e 64K -n 50 -w 0 ||
  fail "a job started $((t_job - rereg)) ms after leaf0's agent registered again failed"
note "agent: re-registered $((rereg - t_sw)) ms after its restart; a job started $((t_job - rereg)) ms later ran exact in $(($(now_ms) - t_job)) ms"
pass
