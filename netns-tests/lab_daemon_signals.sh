#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.daemon_signals: SIGHUP to incamd and incswitchd while a job runs. Both
# reread their config files: the log level and format and the AM's timeouts
# apply at once, a field that needs a restart is refused with a log line, a
# timeout the running heartbeat interval cannot meet and an invalid file change
# nothing; both keep running (XDP stays attached, the switch stays
# registered and reports it) and the job finishes with every element exact.
# Every signal the daemons do not use (SIGUSR1, SIGPIPE, SIGALRM, the
# job-control stops, the real-time ones, ...) is sent to both mid-job: each
# is logged as ignored or ignored outright, neither daemon exits or stops,
# XDP stays attached. Then SIGTERM: incswitchd detaches XDP and removes its
# pins, incamd exits 0.
. "$(dirname "$0")/lib.sh" "$1" sig
require_bins incamd incswitchd incinctl inc-perf
lab_up s single
L="${P}s"
LAB_DIR="/tmp/inclab-$L"
AM_PID=$(cat "$LAB_DIR/pids/incamd.pid")
SW_PID=$(cat "$LAB_DIR/pids/incswitchd-leaf0.pid")
AM_LOG="$LAB_DIR/logs/incamd.log"
SW_LOG="$LAB_DIR/logs/incswitchd-leaf0.log"

# set_json FILE KEY VALUE: one top-level field of a JSON config file.
set_json() {
  python3 - "$@" <<'PY'
import json, sys
path, key, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
doc = json.load(open(path))
doc[key] = value
json.dump(doc, open(path, "w"), indent=2)
PY
}

# wait_log FILE TEXT: up to 10 s for TEXT in FILE.
wait_log() {
  local i
  for i in $(seq 100); do
    grep -qF -- "$2" "$1" && return 0
    sleep 0.1
  done
  fail "no '$2' in $1"
}

alive() {  # both daemons still run, the switch is alive at the AM
  kill -0 "$AM_PID" 2>/dev/null || fail "incamd exited after $1"
  kill -0 "$SW_PID" 2>/dev/null || fail "incswitchd exited after $1"
  "$INCLAB" ctl "$L" -o json switch list | python3 -c '
import json, sys
s = [s for s in json.load(sys.stdin)["switches"] if s["name"] == "leaf0"]
sys.exit(0 if s and s[0]["alive"] else 1)' || fail "leaf0 not alive at the AM after $1"
}

# Attaching XDP to a veth takes its link down for a moment: wait until the
# AM has every port of leaf0 up, or the tree build refuses the job.
for _ in $(seq 100); do
  "$INCLAB" ctl "$L" -o json switch show leaf0 | python3 -c '
import json, sys
ports = json.load(sys.stdin)["switch_summary"]["ports"]
sys.exit(0 if ports and all(p["up"] for p in ports) else 1)' && break
  sleep 0.1
done

# The job: enough float32 sums that the signals land while it runs; every
# rank checks every element against the exact host reference.
perf s sighup -- allreduce -b 4K -e 4M -f 4 -n 300 -w 2 -d float32 -o sum &
JOB=$!

note "waiting for the job's tree"
for _ in $(seq 120); do
  grep -q '"TREE_ACTIVE"' <<<"$("$INCLAB" ctl "$L" -o json tree list)" && break
  kill -0 $JOB 2>/dev/null || fail "the job ended before its tree became active"
  sleep 0.25
done

# 1. Log level and a timeout apply, a field that needs a restart is refused.
set_json "$LAB_DIR/am.json" log_level '"debug"'
set_json "$LAB_DIR/am.json" member_heartbeat_timeout_ms 9000
set_json "$LAB_DIR/am.json" member_heartbeat_interval_ms 2000
set_json "$LAB_DIR/sw-leaf0.json" log_level '"debug"'
set_json "$LAB_DIR/sw-leaf0.json" slot_capacity 2048
kill -HUP "$AM_PID" "$SW_PID"
wait_log "$AM_LOG" 'I incamd: SIGHUP: log_level "info" -> "debug": applied'
wait_log "$AM_LOG" 'I incamd: SIGHUP: member_heartbeat_timeout_ms'
wait_log "$AM_LOG" '-> 9000: applied'
wait_log "$AM_LOG" 'W incamd: SIGHUP: member_heartbeat_interval_ms'
wait_log "$AM_LOG" '-> 2000: not applied, needs a restart of incamd'
wait_log "$SW_LOG" 'I incswitchd: SIGHUP: log_level "info" -> "debug": applied'
wait_log "$SW_LOG" 'W incswitchd: SIGHUP: slot_capacity 4096 -> 2048: not applied, needs a restart of incswitchd'
kill -0 $JOB 2>/dev/null || fail "the job ended before the first SIGHUP was handled: make it longer"
alive "the first SIGHUP"
note "SIGHUP 1: log level and timeout applied, the rest refused, both daemons running, job running"

# 1b. A timeout the running heartbeat interval cannot meet changes nothing,
# though the file alone is valid (its interval would need a restart).
cp "$LAB_DIR/am.json" "$LAB_DIR/am.json.before"
set_json "$LAB_DIR/am.json" member_heartbeat_timeout_ms 300
set_json "$LAB_DIR/am.json" member_heartbeat_interval_ms 100
kill -HUP "$AM_PID"
wait_log "$AM_LOG" 'E incamd: SIGHUP: nothing applied, the running settings stay: member_heartbeat_timeout_ms 300 is shorter than two heartbeats'
mv "$LAB_DIR/am.json.before" "$LAB_DIR/am.json"
alive "the refused timeout"

# 1c. Signals neither daemon uses: each is ignored (logged when taken by
# sigwait, SIG_IGN for SIGPIPE, SIGXFSZ and the job-control stops); neither
# daemon exits nor stops, the switch stays registered with XDP attached.
LOGGED_SIGNALS=(SIGUSR1 SIGALRM SIGVTALRM SIGPROF SIGIO SIGPWR SIGSTKFLT SIGRTMIN SIGRTMIN+3 SIGRTMAX)
SET_IGNORED=(SIGPIPE SIGTSTP SIGTTIN SIGTTOU SIGXFSZ)
for sig in "${LOGGED_SIGNALS[@]}" "${SET_IGNORED[@]}"; do
  kill -s "$sig" "$AM_PID" "$SW_PID" || fail "kill -s $sig failed"
done
for sig in "${LOGGED_SIGNALS[@]}"; do
  wait_log "$AM_LOG" "I incamd: ignored $sig (the daemon takes no action on it)"
  wait_log "$SW_LOG" "I incswitchd: ignored $sig (the daemon takes no action on it)"
done
sleep 0.5
for pid in "$AM_PID" "$SW_PID"; do
  state=$(ps -o stat= -p "$pid" | cut -c1)
  [ "$state" != T ] || fail "process $pid is stopped after ${SET_IGNORED[*]}"
done
kill -0 $JOB 2>/dev/null || fail "the job ended before the unused signals were handled: make it longer"
alive "${LOGGED_SIGNALS[*]} ${SET_IGNORED[*]}"
grep -q xdp <<<"$(ip -n "$L-leaf0" link show w0)" || fail "XDP is gone from leaf0's port w0 after the unused signals"
note "unused signals: ${LOGGED_SIGNALS[*]} logged, ${SET_IGNORED[*]} ignored; both daemons running, XDP attached"

# 2. An invalid file changes nothing.
cp "$LAB_DIR/am.json" "$LAB_DIR/am.json.valid"
cp "$LAB_DIR/sw-leaf0.json" "$LAB_DIR/sw-leaf0.json.valid"
set_json "$LAB_DIR/am.json" log_level '"loud"'
set_json "$LAB_DIR/sw-leaf0.json" listen '"0.0.0.0:99999"'
kill -HUP "$AM_PID" "$SW_PID"
wait_log "$AM_LOG" 'E incamd: SIGHUP: config'
wait_log "$AM_LOG" 'not reloaded, the running one stays: log_level "loud"'
wait_log "$SW_LOG" 'not reloaded, the running one stays: listen: "0.0.0.0:99999": port 99999 is not in 0..65535'
alive "the second SIGHUP"

# 3. JSON log lines from here on.
mv "$LAB_DIR/am.json.valid" "$LAB_DIR/am.json"
mv "$LAB_DIR/sw-leaf0.json.valid" "$LAB_DIR/sw-leaf0.json"
set_json "$LAB_DIR/am.json" log_format '"json"'
set_json "$LAB_DIR/sw-leaf0.json" log_format '"json"'
kill -HUP "$AM_PID" "$SW_PID"
wait_log "$AM_LOG" 'SIGHUP: log_format "" -> "json": applied'
wait_log "$SW_LOG" 'SIGHUP: log_format "text" -> "json": applied'
alive "the third SIGHUP"

wait $JOB || fail "the job failed across the SIGHUPs (see $LAB_DIR/logs/sighup-w0.log)"
note "job finished exact"

# Both daemons write JSON lines now, one object each.
for f in "$AM_LOG" "$SW_LOG"; do
  python3 - "$f" <<'PY' || fail "bad JSON log lines in $f"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
assert lines, "no JSON lines"
with_fields = 0
for l in lines:
    d = json.loads(l)
    keys = list(d)
    # The line's own keys, and between component and message the fields of
    # lines about a tree, job, switch or member (docs/operations.md "Logs").
    assert keys[:3] == ["time", "level", "component"] and keys[-1] == "message", d
    assert set(keys[3:-1]) <= {"event", "tree", "job", "switch", "rank"}, d
    for k in ("tree", "rank"):
        assert k not in d or isinstance(d[k], int), d
    with_fields += len(keys) > 4
print(f"  {sys.argv[1]}: {len(lines)} JSON lines, {with_fields} with fields")
PY
done

# XDP stayed attached through the signals, and the AM reports it.
grep -q xdp <<<"$(ip -n "$L-leaf0" link show w0)" || fail "XDP is gone from leaf0's port w0"
xdp=$("$INCLAB" ctl "$L" -o json switch show leaf0 | python3 -c '
import json, sys
ports = json.load(sys.stdin)["switch_summary"]["ports"]
print(" ".join(sorted(p["name"] + ":" + str(p["xdp_attached"]) + ":" + p["xdp_mode"] for p in ports)))')
[ "$xdp" = "w0:True:native w1:True:native w2:True:native w3:True:native" ] ||
  fail "switch show leaf0 reports XDP '$xdp', want every port attached, native"

# SIGTERM: the agent detaches XDP and removes its pins, both exit 0.
kill -TERM "$SW_PID"
for _ in $(seq 100); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$SW_PID" 2>/dev/null || fail "incswitchd still runs 10 s after SIGTERM"
grep -q xdp <<<"$(ip -n "$L-leaf0" link show w0)" && fail "XDP still attached to w0 after incswitchd's SIGTERM"
[ ! -e "/sys/fs/bpf/incin/$L/leaf0" ] || fail "pins of leaf0 left after SIGTERM"
wait_log "$SW_LOG" '"message":"exit"'
kill -TERM "$AM_PID"
wait_log "$AM_LOG" '"message":"stopped"'
pass
