#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.chaos_<topology>: exact results and no leaks while daemons and members
# die. On the single- or two-level lab with 1 % random loss on every data
# link (wires both ways), a job loop runs short 4-rank int32 sum allreduces
# back to back (each a new job id; every rank checks every element), while a
# chaos loop, with pauses of CHAOS_PAUSE_MIN..CHAOS_PAUSE_MAX s, SIGKILLs in
# turn incamd, each incswitchd and one running inc-perf rank; daemons are
# started again at once with their command line (inclab restart) and the
# loop waits until every switch is registered again.
#
# Every job is recorded (netns-tests/chaos_report.py): exact, wrong, failed
# (with its kind and first error) or hung (no exit within its time limit).
# Asserts: no wrong element in any job; no hang; every failure follows a
# fault and ends with an error within BOUND_MS of the later of its start and
# the fault (join timeout + switch heartbeat timeout + 10 s slack: a rank
# that joined a restarted AM waits at most the join timeout for ranks whose
# JoinGroup died with the old one; a dead member or switch fails its tree
# within its heartbeat timeout); a job after the chaos is exact; then no
# ACTIVE/PENDING tree, every switch alive with all its slots free and no tree
# at the AM or in its data path, the pins only those of the live switches
# (as many as at the start), no inc-perf left, and no daemon above
# max(2 x, +64 MiB) its RSS or +32 its fds at the start (after a warm-up job).
# Prints the summary: cycles, jobs, exact, failures by kind, failure
# latencies, recovery times (kill -> end of the next job started after it
# that is exact), RSS and fds.
#
# Environment: CHAOS_SECONDS (fault phase, default 75), CHAOS_PAUSE_MIN/_MAX
# (s, default 2/5), CHAOS_REPORT_S (progress line every N s, 0 = none),
# CHAOS_LOSS (default 0.01), CHAOS_KEEP_LOGS=1 keeps exact jobs' rank logs,
# CHAOS_OUT: where the records and logs are copied (default /tmp/chaos-<lab>).
# scripts/soak.sh runs this for an hour.
. "$(dirname "$0")/lib.sh" "$1" chaos
KIND=${2:?single or two}
require_bins incamd incswitchd incinctl inc-perf

CHAOS_SECONDS=${CHAOS_SECONDS:-75}
PAUSE_MIN=${CHAOS_PAUSE_MIN:-2}
PAUSE_MAX=${CHAOS_PAUSE_MAX:-5}
REPORT_S=${CHAOS_REPORT_S:-0}
LOSS=${CHAOS_LOSS:-0.01}
MEMBER_TIMEOUT_MS=2000 # switch heartbeat timeout: 2 x this (inclab)
JOIN_TIMEOUT_MS=10000
BOUND_MS=$((JOIN_TIMEOUT_MS + 2 * MEMBER_TIMEOUT_MS + 10000))
RSS_FACTOR=2
RSS_EXTRA_KB=$((64 * 1024))
FD_EXTRA=32
[ "$PAUSE_MAX" -ge "$PAUSE_MIN" ] || fail "CHAOS_PAUSE_MAX < CHAOS_PAUSE_MIN"
CHAOS_DIR=$(cd "$(dirname "$0")" && pwd)

lab_up c "$KIND" --wire all --member-timeout-ms $MEMBER_TIMEOUT_MS
L="${P}c"
T="/tmp/inclab-$L"
C="$T/chaos"
mkdir -p "$C"
: >"$C/jobs.jsonl"
: >"$C/faults.tsv"
: >"$C/samples.tsv"
: >"$C/killed_tags"
: >"$C/launch_retries"
ctl() { "$INCLAB" ctl "$L" "$@"; }
now_ms() { date +%s%3N; }
SWITCHES=$(cd "$T/pids" && ls incswitchd-*.cmd | sed 's/^incswitchd-//; s/\.cmd$//' | sort | tr '\n' ' ')
DAEMONS="incamd $(for s in $SWITCHES; do printf 'incswitchd-%s ' "$s"; done)"
WORKERS=$(ip netns list | awk '{print $1}' | sed -n "s/^$L-\(w[0-9]*\)$/\1/p" | sort | tr '\n' ' ')

"$INCLAB" fault "$L" all --drop "$LOSS" 2>/dev/null
dropped_total() {
  "$INCLAB" fault-stats "$L" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(v[dir]["dropped"] for v in d.values() for dir in ("ab", "ba")))'
}
DROPPED0=$(dropped_total)

# samples.tsv: time, label, daemon, pid, VmRSS kB, open fds.
sample_daemons() {  # LABEL
  local d pid rss fds
  for d in $DAEMONS; do
    pid=$(cat "$T/pids/$d.pid" 2>/dev/null || true)
    [ -n "$pid" ] && [ -r "/proc/$pid/status" ] || continue
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    [ -z "$rss" ] || printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(now_ms)" "$1" "$d" "$pid" "$rss" "$fds" >>"$C/samples.tsv"
  done
}

# One job: 4 ranks (one per worker), sizes 64 KiB, 256 KiB, 1 MiB, a unique
# job id. A launch that finds the AM down (no job credential: no rank
# started) is retried, as a launcher would; that wait is not the job's.
JOB_ARGS=(allreduce -d int32 -o sum -b 64K -e 1M -f 4 -n 5 -w 1)
JOB_LIMIT_S=120 # set from the warm-up job below
run_job() {  # TAG -> appends its record to jobs.jsonl
  local tag=$1 start end rc tries=0
  while :; do
    start=$(now_ms)
    rc=0
    timeout -k 5 "$JOB_LIMIT_S" "$INCLAB" run "$L" --quiet --tag "$tag" -- inc-perf "${JOB_ARGS[@]}" --json \
      --join-timeout-ms "$JOIN_TIMEOUT_MS" --am '{am}' --job "{prefix}-$tag" --rank '{rank}' \
      --world '{world}' --iface '{iface}' >"$C/$tag.run" 2>&1 || rc=$?
    if [ "$rc" = 1 ] && grep -q "no job credential" "$C/$tag.run" && [ $tries -lt 240 ]; then
      tries=$((tries + 1))
      echo "$tag" >>"$C/launch_retries"
      sleep 0.25
      continue
    fi
    break
  done
  end=$(now_ms)
  if [ $((end - start)) -ge $((JOB_LIMIT_S * 1000)) ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then rc=124; fi
  python3 "$CHAOS_DIR/chaos_report.py" job "$T/logs" "$tag" "$start" "$end" "$rc" "$C/$tag.run" \
    "$C/killed_tags" >>"$C/jobs.jsonl" || true
  if [ "${CHAOS_KEEP_LOGS:-0}" != 1 ] && grep -q '"status": "exact"' <<<"$(tail -n1 "$C/jobs.jsonl")"; then
    rm -f "$T/logs/$tag"-w*.log "$C/$tag.run"
  fi
}
job_status() { tail -n1 "$C/jobs.jsonl" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["status"], j["error"])'; }

note "$KIND lab $L: switches $SWITCHES; workers $WORKERS; loss $LOSS on every data link"
t0=$(now_ms)
run_job warm
st=$(job_status)
[ "${st%% *}" = exact ] || fail "the warm-up job before any fault is not exact: $st"
warm_ms=$(($(now_ms) - t0))
# A hang is a job still running 3 x the warm-up's time + the failure bound later.
JOB_LIMIT_S=$(((3 * warm_ms + BOUND_MS) / 1000 + 10))
sample_daemons start
pins_of() { find "/sys/fs/bpf/incin/$L" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' '; }
pin_count() { find "/sys/fs/bpf/incin/$L" | wc -l; }
PINS0=$(pins_of)
PINCOUNT0=$(pin_count)
note "warm-up job exact in $warm_ms ms; job time limit $JOB_LIMIT_S s; failure bound $BOUND_MS ms; chaos for $CHAOS_SECONDS s"

START_MS=$(now_ms)
END_MS=$((START_MS + CHAOS_SECONDS * 1000))
FAULT_END_MS=$((END_MS - 8000)) # the last fault leaves time to recover before the end
echo 0 >"$C/jobs_started"
job_loop() {
  local i=0
  while [ "$(now_ms)" -lt "$END_MS" ]; do
    i=$((i + 1))
    echo "$i" >"$C/jobs_started"
    run_job "j$i"
  done
}
job_loop &
JOB_LOOP_PID=$!
# The job loop ends with the test, whichever way it ends (lib.sh's cleanup
# gets the test's exit status).
at_cleanup 'kill "$JOB_LOOP_PID" 2>/dev/null'

PROBLEMS=()
progress() {  # one line: elapsed, jobs by status, daemons' RSS and fds
  sample_daemons progress
  python3 - "$C" "$START_MS" "$DAEMONS" <<'PY'
import json, sys, time
d, start, daemons = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
jobs = [json.loads(l) for l in open(d + "/jobs.jsonl") if l.strip()]
by = {}
for j in jobs:
    by[j["status"]] = by.get(j["status"], 0) + 1
last = {}
for line in open(d + "/samples.tsv"):
    f = line.split("\t")
    last[f[2]] = (int(f[4]), int(f[5]))
faults = sum(1 for _ in open(d + "/faults.tsv"))
print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] +{(time.time() * 1000 - start) / 1000:.0f} s: "
      f"faults {faults}, jobs {len(jobs)}: exact {by.get('exact', 0)}, wrong {by.get('wrong', 0)}, "
      f"failed {by.get('failed', 0)}, hung {by.get('hang', 0)}; " +
      ", ".join(f"{n} {last[n][0] / 1024:.1f} MiB {last[n][1]} fds" for n in daemons if n in last), flush=True)
PY
}
LAST_REPORT=$(now_ms)
check_alive() {  # a daemon that died without being killed by us is a crash
  local d pid
  for d in $DAEMONS; do
    pid=$(cat "$T/pids/$d.pid" 2>/dev/null || true)
    if ! kill -0 "$pid" 2>/dev/null; then
      PROBLEMS+=("$d (pid $pid) died on its own")
      note "CRASH: $d (pid $pid) is not running; log: $T/logs/$d.log"
      return 1
    fi
  done
}
pause() {  # SECONDS, checking for crashes and printing progress
  local until=$(($(now_ms) + $1 * 1000))
  while [ "$(now_ms)" -lt "$until" ] && [ "$(now_ms)" -lt "$FAULT_END_MS" ]; do
    check_alive || return 1
    if [ "$REPORT_S" -gt 0 ] && [ $(($(now_ms) - LAST_REPORT)) -ge $((REPORT_S * 1000)) ]; then
      progress
      LAST_REPORT=$(now_ms)
    fi
    sleep 0.5
  done
}

kill_daemon() {  # NAME: SIGKILL, 0.5 s away, inclab restart, until every switch is registered
  local d=$1 pid t tr kind=${1%%-*}
  pid=$(cat "$T/pids/$d.pid")
  sample_daemons "before kill $d"
  t=$(now_ms)
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  printf '%s\t%s\t%s\n' "$t" "$kind" "$d" >>"$C/faults.tsv"
  sleep 0.5
  "$INCLAB" restart "$L" "$d" 2>/dev/null
  tr=$(now_ms)
  if ! "$INCLAB" wait-switches "$L" 30 2>"$C/wait.err"; then
    PROBLEMS+=("after the restart of $d the switches did not all register within 30 s: $(tail -n1 "$C/wait.err")")
    note "$d: switches not registered 30 s after its restart"
    return 1
  fi
  note "kill -9 $d (pid $pid); restarted after $((tr - t)) ms; every switch registered $(($(now_ms) - tr)) ms later"
}

active_jobs() {  # job ids of ACTIVE trees
  ctl -o json tree list 2>/dev/null | python3 -c '
import json, sys
print(" ".join(t["job_id"] for t in json.load(sys.stdin).get("trees", []) if t.get("state") == "TREE_ACTIVE"))' || true
}
# SIGKILL one running inc-perf rank (waits up to 10 s for one). Every other
# member fault hits a job whose tree is ACTIVE (mid-collective: the others
# learn it from the AM at the member heartbeat timeout), the rest whatever
# rank runs (joining, computing or lingering before LeaveGroup).
MEMBER_KILLS=0
kill_member() {
  local cands=() w pid i tag t want_active=$((MEMBER_KILLS % 2 == 0)) active=""
  MEMBER_KILLS=$((MEMBER_KILLS + 1))
  for i in $(seq 50); do
    cands=()
    [ "$want_active" = 0 ] || active=" $(active_jobs) "
    for w in $WORKERS; do
      for pid in $(ip netns pids "$L-$w" 2>/dev/null); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = inc-perf ] || continue
        tag=$(cat "/proc/$pid/cmdline" 2>/dev/null | tr '\0' '\n' | sed -n '/^--job$/{n;p}') || true
        [ -n "$tag" ] || continue
        [ "$want_active" = 0 ] || [[ "$active" == *" $tag "* ]] || continue
        cands+=("$pid:$w:${tag#"$L-"}")
      done
    done
    [ ${#cands[@]} -gt 0 ] && break
    sleep 0.2
  done
  if [ ${#cands[@]} = 0 ]; then
    note "member: no inc-perf running for 10 s; skipped"
    return 0
  fi
  i=${cands[$((RANDOM % ${#cands[@]}))]}
  pid=${i%%:*}
  i=${i#*:}
  w=${i%%:*}
  tag=${i#*:}
  echo "$tag" >>"$C/killed_tags"
  t=$(now_ms)
  kill -KILL "$pid" 2>/dev/null || return 0
  printf '%s\t%s\t%s\n' "$t" member "$w job $tag" >>"$C/faults.tsv"
  note "kill -9 inc-perf on $w (pid $pid, job $tag$([ "$want_active" = 0 ] || echo ", tree ACTIVE"))"
}

read -ra TARGETS <<<"$DAEMONS member"
k=0
while [ "$(now_ms)" -lt "$FAULT_END_MS" ]; do
  pause $((PAUSE_MIN + RANDOM % (PAUSE_MAX - PAUSE_MIN + 1))) || break
  [ "$(now_ms)" -lt "$FAULT_END_MS" ] || break
  target=${TARGETS[$((k % ${#TARGETS[@]}))]}
  k=$((k + 1))
  if [ "$target" = member ]; then kill_member; else kill_daemon "$target" || break; fi
done
CYCLES=$((k / ${#TARGETS[@]}))
note "faults over ($k: $CYCLES full cycles of ${#TARGETS[@]} targets); waiting for the job loop"
if [ ${#PROBLEMS[@]} -gt 0 ]; then
  kill "$JOB_LOOP_PID" 2>/dev/null || true
  for w in $WORKERS; do
    for pid in $(ip netns pids "$L-$w" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
fi
wait "$JOB_LOOP_PID" || true
sample_daemons "end of chaos"
DROPPED=$(($(dropped_total) - DROPPED0))

if [ ${#PROBLEMS[@]} = 0 ]; then
  note "after the chaos: one more job must be exact"
  run_job after
  st=$(job_status)
  [ "${st%% *}" = exact ] || PROBLEMS+=("the job after the chaos is not exact: $st")
fi

# No leaks: trees dismantled (a failed job's tree goes at the member
# heartbeat timeout), slots back, data paths empty, pins as at the start.
live_trees() {
  ctl -o json tree list 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(t["tree_id"]) + ":" + t["state"] for t in d.get("trees", []) if t.get("state") in ("TREE_ACTIVE", "TREE_PENDING")))'
}
left="?"
for _ in $(seq $((2 * MEMBER_TIMEOUT_MS / 1000 * 2 + 40))); do
  left=$(live_trees || echo "?")
  [ -z "$left" ] && break
  sleep 0.5
done
[ -z "$left" ] || PROBLEMS+=("trees still live after the last job: $left")
switch_leaks=$(ctl -o json switch list | python3 -c '
import json, sys
for s in json.load(sys.stdin).get("switches", []):
    c = s.get("capabilities", {})
    free, cap = c.get("free_slots", 0), c.get("slot_capacity", 0)
    bad = []
    if not s.get("alive"): bad.append("not alive")
    if free != cap or cap == 0: bad.append("free slots %d of %d" % (free, cap))
    if s.get("tree_ids"): bad.append("trees %s" % s["tree_ids"])
    if bad: print(s["name"] + ": " + ", ".join(bad))') || switch_leaks="switch list failed"
[ -z "$switch_leaks" ] || PROBLEMS+=("switches after the last job: $switch_leaks")
dp_trees=$(ctl -o json stats | python3 -c '
import json, sys
d = json.load(sys.stdin)
sw = d.get("switches", [])
for e in d.get("errors", []): print("no answer: " + e)
if len(sw) != int(sys.argv[1]): print("%d of %s switches answered" % (len(sw), sys.argv[1]))
for s in sw:
    if s.get("trees"): print(s.get("switch_name", "?") + ": " + " ".join(str(t.get("tree_id")) for t in s["trees"]))' \
  "$(echo $SWITCHES | wc -w)") ||
  dp_trees="stats failed"
[ -z "$dp_trees" ] || PROBLEMS+=("trees left in the data paths: $dp_trees")
pins=$(pins_of)
[ "$pins" = "$PINS0" ] || PROBLEMS+=("pins under /sys/fs/bpf/incin/$L: '$pins', at the start '$PINS0'")
pincount=$(pin_count)
[ "$pincount" = "$PINCOUNT0" ] || PROBLEMS+=("$pincount pinned files, $PINCOUNT0 at the start")
for w in $WORKERS; do
  for pid in $(ip netns pids "$L-$w" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = inc-perf ] && PROBLEMS+=("inc-perf pid $pid still runs on $w")
  done
done
sample_daemons end

echo "=== lab.chaos_$KIND summary: $(((END_MS - START_MS) / 1000)) s of chaos, $k faults ($CYCLES cycles over: ${TARGETS[*]}), pauses $PAUSE_MIN..$PAUSE_MAX s, loss $LOSS (the wires dropped $DROPPED frames)"
summary=$(python3 "$CHAOS_DIR/chaos_report.py" summary "$C" "$BOUND_MS")
echo "$summary" | grep -v '^VIOLATION: '
echo "launches retried while the AM was down: $(wc -l <"$C/launch_retries") (jobs $(sort -u "$C/launch_retries" | wc -l))"
echo "daemons (RSS, fds; bound max(${RSS_FACTOR} x, +$((RSS_EXTRA_KB / 1024)) MiB) the start, fds +$FD_EXTRA):"
rss=$(python3 "$CHAOS_DIR/chaos_report.py" rss "$C" "$RSS_FACTOR" "$RSS_EXTRA_KB" "$FD_EXTRA")
echo "$rss" | grep -v '^VIOLATION: '
echo "leaks: live trees '${left}', switches '${switch_leaks}', data-path trees '${dp_trees}', pins $pincount (start $PINCOUNT0)"
while IFS= read -r v; do PROBLEMS+=("${v#VIOLATION: }"); done < <(printf '%s\n%s\n' "$summary" "$rss" | grep '^VIOLATION: ' || true)
[ "$DROPPED" -gt 0 ] || PROBLEMS+=("the wires dropped no frame: the loss was not applied")
# The records and the logs outlive the lab (inclab down removes its files
# when the test passes): every job, fault and sample, the failed jobs' rank
# logs and the daemon logs.
OUT=${CHAOS_OUT:-/tmp/chaos-$L}
mkdir -p "$OUT"
cp -r "$C/." "$OUT/" && cp "$T"/logs/*.log "$OUT/" 2>/dev/null || true
echo "records and logs: $OUT"
if [ ${#PROBLEMS[@]} -gt 0 ]; then
  printf 'PROBLEM: %s\n' "${PROBLEMS[@]}" >&2
  fail "${#PROBLEMS[@]} problems (records in $C)"
fi
pass
