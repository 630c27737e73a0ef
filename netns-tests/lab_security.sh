#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.security: every control-plane channel runs mTLS and every call is
# authorized by the caller's certificate (docs/operations.md "Security
# model"). While an exact 4-rank allreduce runs on the two-level lab, rogue
# clients with the lab's own certificates (or none, or another CA's) try what
# their role does not allow (joining the job without its credential or with
# another job's among them, an expired, revoked or other host's credential,
# heartbeats, error reports and leaves for another host's or another job's
# rank); each is refused with the expected code, logged and counted, and the
# job's results stay exact. An error report with a newline stays one line of
# the AM's log. An unprivileged process (uid 65534) polling every command
# line in /proc during an `inclab run` and an inc-mpirun launch
# finds no job credential, and every execve of that `inclab run` (strace) has
# none in its arguments; uid 65534 cannot read the AM's state file.
# shellcheck disable=SC2046  # $(creds NAME) is meant to split into --cert F --key F --ca F
. "$(dirname "$0")/lib.sh" "$1" sec
require_bins incamd incswitchd incinctl inc-perf inc-rpc-probe
# shellcheck disable=SC2034  # TEST_OK is lib.sh's (keeps the lab logs quiet on a skip)
command -v strace >/dev/null || { echo "SKIP: strace not installed" >&2; TEST_OK=1; exit 77; }
MPIRUN="$LAB_TESTS_DIR/inc-mpirun"
COVERAGE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_coverage -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
lab_up s two
L="${P}s"
LAB_DIR="/tmp/inclab-$L"
PKI="$LAB_DIR/pki"
AM=172.31.0.1:50051
PROBE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name inc-rpc-probe -perm -u+x | head -n1)
CTL=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name incinctl -perm -u+x | head -n1)
AM_LOG="$LAB_DIR/logs/incamd.log"
LEAF0_LOG="$LAB_DIR/logs/incswitchd-leaf0.log"

creds() { echo --cert "$PKI/$1.pem" --key "$PKI/$1.key" --ca "$PKI/ca.pem"; }

# expect NODE CODE WHAT probe-args...: one rogue call from NODE's namespace.
expect() {
  local node=$1 code=$2 what=$3 out
  shift 3
  # The exec environment carries the operator's INCIN_* and the worker's
  # INC_* variables; the probe uses only what it is given.
  if out=$("$INCLAB" exec "$L" "$node" "$PROBE" --expect "$code" "$@" 2>&1); then
    note "  $what: $out (as expected)"
  else
    fail "$what: wanted $code, got: $out"
  fi
}

# nobody ARGS...: ARGS as uid/gid 65534 without groups, from / (an
# unprivileged local user).
nobody() { (cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups -- "$@"); }

# The unprivileged poller: every command line in /proc, every 20 ms, until
# SIGTERM; prints the programs it saw, any command line holding a job
# credential ("incjob"), and any environment of a rank it could read.
POLLER='
import os, re, signal, sys, time
seen, leaks, environs = set(), [], set()
me = str(os.getpid())
CRED = re.compile(rb"incjob[0-9]:[0-9a-fA-F]{64}")
def done(*_):
    print("seen: " + " ".join(sorted(seen)))
    for l in leaks: print("LEAK " + l)
    for e in sorted(environs): print("ENVIRON " + e)
    sys.stdout.flush()
    os._exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f: c = f.read()
        except OSError: continue
        if not c: continue
        args = [a.decode(errors="replace") for a in c.split(b"\0")]
        name = os.path.basename(args[0])
        seen.add(name)
        # A credential (incjob1/incjob2 and 64 hex digits), not this script.
        if p != me and CRED.search(c) and len(leaks) < 20: leaks.append(p + ": " + " ".join(args))
        if name in ("inc-perf", "mpi_coverage", "mpirun", "orted"):
            try:
                with open("/proc/%s/environ" % p, "rb") as f: f.read()
                environs.add(name)
            except OSError: pass
    time.sleep(0.02)
'

leaf0_agent=$("$INCLAB" ctl "$L" -o json switch list | python3 -c '
import json, sys
print([s["agent_address"] for s in json.load(sys.stdin)["switches"] if s["name"] == "leaf0"][0])')
note "leaf0's agent: $leaf0_agent"

# A job long enough for every rogue call to land while it runs.
perf s job -- allreduce -d int32 -o sum -b 1M -e 1M -n 800 -w 1 &
JOB=$!
tree=""
for _ in $(seq 100); do
  tree=$("$INCLAB" ctl "$L" -o json tree list | python3 -c '
import json, sys
for t in json.load(sys.stdin).get("trees", []):
    if t["job_id"] == sys.argv[1] and t.get("state") == "TREE_ACTIVE":
        print(t["tree_id"])' "$L-job" 2>/dev/null || true)
  [ -n "$tree" ] && break
  sleep 0.1
done
[ -n "$tree" ] || fail "the job's tree did not become active"
note "job $L-job runs on tree $tree"

note "a member speaks only for the ranks its host joined as"
expect w0 PERMISSION_DENIED "LeaveGroup for w1's rank of the running job with w0's certificate" \
  --target $AM $(creds w0) leave-group --job "$L-job" --rank 1

expect w0 PERMISSION_DENIED "MemberHeartbeat for w1's rank by tree id with w0's certificate" \
  --target $AM $(creds w0) member-heartbeat --tree "$tree" --rank 1
expect w0 PERMISSION_DENIED "MemberHeartbeat for w1's rank by tree and job with w0's certificate" \
  --target $AM $(creds w0) member-heartbeat --tree "$tree" --job "$L-job" --rank 1
expect w0 PERMISSION_DENIED "ReportError (gave up) for w1's rank with w0's certificate" \
  --target $AM $(creds w0) report-error --tree "$tree" --rank 1 --gave-up --message "forged by w0"
expect w0 OK "MemberHeartbeat for w0's own rank" --target $AM $(creds w0) member-heartbeat --tree "$tree" --rank 0

note "a member speaks for no rank of another job, also while that rank waits in JoinGroup"
other=$("$INCLAB" ctl "$L" job credential "$L-other")
expect w1 ABORTED "w1 waits in JoinGroup of job $L-other (world 2) until it leaves" \
  --target $AM $(creds w1) --timeout 20 join-group --job "$L-other" --rank 0 --world 2 --host w1 \
  --credential "$other" --wait-ms 15000 &
WAITER=$!
other_tree=""
for _ in $(seq 100); do
  other_tree=$("$INCLAB" ctl "$L" -o json tree list | python3 -c '
import json, sys
for t in json.load(sys.stdin).get("trees", []):
    if t["job_id"] == sys.argv[1]:
        print(t["tree_id"])' "$L-other" 2>/dev/null || true)
  [ -n "$other_tree" ] && break
  sleep 0.1
done
[ -n "$other_tree" ] || fail "job $L-other's group did not form"
expect w0 PERMISSION_DENIED "MemberHeartbeat for job $L-other's waiting rank 0 with w0's certificate" \
  --target $AM $(creds w0) member-heartbeat --tree "$other_tree" --rank 0
expect w0 PERMISSION_DENIED "ReportError for job $L-other's waiting rank 0 with w0's certificate" \
  --target $AM $(creds w0) report-error --job "$L-other" --rank 0 --gave-up --message "forged"
expect w0 PERMISSION_DENIED "LeaveGroup for job $L-other's waiting rank 0 with w0's certificate" \
  --target $AM $(creds w0) leave-group --job "$L-other" --rank 0
expect w1 OK "LeaveGroup of job $L-other's rank 0 by w1, which joined it" \
  --target $AM $(creds w1) leave-group --job "$L-other" --rank 0
wait $WAITER || fail "w1's JoinGroup of job $L-other did not end ABORTED by its own LeaveGroup"

note "an error report cannot forge a line of the AM's log"
expect w0 OK "ReportError for w0's own rank with a newline and a forged line in it" \
  --target $AM $(creds w0) report-error --tree "$tree" --rank 0 \
  --message 'lab-forgery\n2026-01-01T00:00:00.000Z W incamd: denied DestroyTree to operator forged'

note "credentials expire, are bound to hosts and can be revoked"
short=$("$INCLAB" ctl "$L" job credential "$L-short" --ttl 1)
bound=$("$INCLAB" ctl "$L" job credential "$L-bound" --hosts w1)
revoked=$("$INCLAB" ctl "$L" job credential "$L-rev")
"$INCLAB" ctl "$L" job revoke "$L-rev" | grep -q "every credential issued until now is refused" ||
  fail "incinctl job revoke did not confirm"
sleep 1.2
expect w0 PERMISSION_DENIED "JoinGroup with an expired credential (--ttl 1)" \
  --target $AM $(creds w0) join-group --job "$L-short" --rank 0 --world 2 --credential "$short"
expect w0 PERMISSION_DENIED "JoinGroup from w0 with a credential for host w1" \
  --target $AM $(creds w0) join-group --job "$L-bound" --rank 0 --world 2 --credential "$bound"
expect w0 PERMISSION_DENIED "JoinGroup with a credential issued before incinctl job revoke" \
  --target $AM $(creds w0) join-group --job "$L-rev" --rank 0 --world 2 --credential "$revoked"
fresh=$("$INCLAB" ctl "$L" job credential "$L-rev" --hosts w0)
expect w0 DEADLINE_EXCEEDED "JoinGroup with a credential issued after the revocation (authorized; waits for rank 1)" \
  --target $AM $(creds w0) join-group --job "$L-rev" --rank 0 --world 2 --host w0 --credential "$fresh"

note "operators may inspect (control)"
expect mgmt OK "ListSwitches with the operator's certificate" --target $AM $(creds operator) list-switches

note "a member may not manage trees"
out=$("$INCLAB" exec "$L" w0 "$CTL" --am $AM $(creds w0) tree delete "$tree" 2>&1) && fail "incinctl tree delete with w0's certificate succeeded"
grep -q "PERMISSION_DENIED: DestroyTree needs role operator; caller w0 has role member" <<<"$out" ||
  fail "incinctl tree delete with a member certificate: $out"
note "  incinctl tree delete $tree with w0's certificate: $out"
expect w0 PERMISSION_DENIED "DestroyTree with w0's certificate" --target $AM $(creds w0) destroy-tree --tree "$tree"

note "only the AM programs a switch"
expect mgmt PERMISSION_DENIED "ConfigureTree at leaf0 with the operator's certificate" \
  --target "$leaf0_agent" $(creds operator) configure-tree --tree 77
expect w0 PERMISSION_DENIED "ConfigureTree at leaf0 with w0's certificate" \
  --target "$leaf0_agent" $(creds w0) configure-tree --tree 77
expect mgmt PERMISSION_DENIED "RemoveTree of the job's tree at leaf0 with the operator's certificate" \
  --target "$leaf0_agent" $(creds operator) remove-tree --tree "$tree"
expect leaf1 PERMISSION_DENIED "RemoveTree at leaf0 with leaf1's certificate" \
  --target "$leaf0_agent" $(creds leaf1) remove-tree --tree "$tree"

note "a switch registers only as itself"
expect leaf1 PERMISSION_DENIED "RegisterSwitch as leaf0 with leaf1's certificate" \
  --target $AM $(creds leaf1) register-switch --name leaf0 --agent "${leaf0_agent%:*}:1"
expect mgmt PERMISSION_DENIED "RegisterSwitch as leaf1 with leaf1's certificate from another address" \
  --target $AM $(creds leaf1) register-switch --name leaf1 --agent 172.31.0.1:1

note "a member joins only as its own host"
expect w0 PERMISSION_DENIED "JoinGroup as host w1 with w0's certificate" \
  --target $AM $(creds w0) join-group --job rogue --host w1
expect w0 PERMISSION_DENIED "JoinGroup with w1's IP and w0's certificate" \
  --target $AM $(creds w0) join-group --job rogue --ip 10.0.1.2

note "a member joins only a job it holds the credential of"
expect w0 PERMISSION_DENIED "JoinGroup as w0 without the job's credential" \
  --target $AM $(creds w0) join-group --job "$L-job" --rank 3 --world 4
expect w0 PERMISSION_DENIED "JoinGroup as w0 with another job's credential" \
  --target $AM $(creds w0) join-group --job "$L-job" --rank 3 --world 4 --credential "$other"
expect w0 PERMISSION_DENIED "JoinGroup as w0 with another job's credential relabelled" \
  --target $AM $(creds w0) join-group --job "$L-job" --rank 3 --world 4 --credential "${other%:*}:$L-job"
expect w0 PERMISSION_DENIED "IssueJobCredential with w0's certificate" \
  --target $AM $(creds w0) issue-job-credential --job "$L-job"
expect mgmt OK "IssueJobCredential with the operator's certificate" \
  --target $AM $(creds operator) issue-job-credential --job "$L-job"

note "no certificate of this CA, no connection"
expect mgmt UNAVAILABLE "plaintext ListSwitches at the AM" --target $AM --insecure list-switches
expect mgmt UNAVAILABLE "plaintext ConfigureTree at leaf0" --target "$leaf0_agent" --insecure configure-tree --tree 77
ROGUE_CA="$LAB_DIR/rogue-ca"
"$LAB_TESTS_DIR/../scripts/inc-certs" ca "$ROGUE_CA" --days 1
"$LAB_TESTS_DIR/../scripts/inc-certs" issue "$ROGUE_CA" operator operator --days 1
expect mgmt UNAVAILABLE "an operator certificate of another CA" \
  --target $AM --cert "$ROGUE_CA/operator.pem" --key "$ROGUE_CA/operator.key" --ca "$PKI/ca.pem" list-switches

wait $JOB || true
[ ${#FAILED[@]} = 0 ] || fail "the job's results were not exact while rogue calls came in"

note "no job credential on any command line: inclab run under strace (every execve), inc-mpirun"
# From here on (the rogue probes above carry credentials on purpose).
# The system's python (a python3 earlier on root's PATH may be root's own).
# (Started here, not by nobody(): $! must be python's own pid.)
(cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups -- /usr/bin/python3 -c "$POLLER") \
  >"$LAB_DIR/poller.txt" 2>&1 &
POLLER_PID=$!
at_cleanup "kill $POLLER_PID 2>/dev/null || true"
sleep 0.5
kill -0 "$POLLER_PID" 2>/dev/null || fail "the uid 65534 poller did not start: $(head -c 300 "$LAB_DIR/poller.txt")"
strace -f -qq --seccomp-bpf -e trace=execve -e signal=none -s 65536 -o "$LAB_DIR/execve.txt" \
  "$INCLAB" run "$L" --quiet --tag argv -- inc-perf allreduce -d int32 -o sum -b 64K -e 64K -n 20 -w 1 --json \
  --am '{am}' --job '{prefix}-argv' --rank '{rank}' --world '{world}' --iface '{iface}' ||
  fail "inclab run under strace failed (see $LAB_DIR/logs/argv-w0.log)"
execs=$(grep -c 'execve(' "$LAB_DIR/execve.txt" || true)
[ "$execs" -ge 8 ] || fail "strace saw only $execs execve calls of inclab run"
grep -q 'execve("[^"]*inc-perf"' "$LAB_DIR/execve.txt" || fail "strace did not see the ranks' inc-perf"
if grep -F incjob "$LAB_DIR/execve.txt" | head -n3 | grep .; then
  fail "a job credential in the arguments of an execve of inclab run ($LAB_DIR/execve.txt)"
fi
note "  inclab run: $execs execve calls, none with a credential in its arguments"
if command -v mpirun >/dev/null && [ -n "$COVERAGE" ] && [ -n "$LIBINCMPI" ]; then
  "$MPIRUN" "$L" --preload "$LIBINCMPI" -- "$COVERAGE" --hello >"$LAB_DIR/mpirun.log" 2>&1 ||
    fail "inc-mpirun --preload libincmpi failed (see $LAB_DIR/mpirun.log)"
  grep -q "^mpi_coverage: hello from 4 ranks$" "$LAB_DIR/mpirun.log" || fail "inc-mpirun: not 4 ranks"
  MPI_SEEN=1
else
  note "  inc-mpirun part skipped: no mpirun, mpi_coverage or libincmpi.so"
  MPI_SEEN=0
fi
sleep 0.2
kill -TERM "$POLLER_PID"
wait "$POLLER_PID" || true
note "  poller (uid 65534): $(grep -c . "$LAB_DIR/poller.txt") lines; $(grep -o 'inc-perf\|mpirun\|orted\|mpi_coverage' "$LAB_DIR/poller.txt" | sort -u | tr '\n' ' ')"
grep -q '^seen: .*inc-perf' "$LAB_DIR/poller.txt" || fail "the poller never saw an inc-perf rank: $(head -c 300 "$LAB_DIR/poller.txt")"
if [ "$MPI_SEEN" = 1 ]; then
  grep -q '^seen: .*mpirun' "$LAB_DIR/poller.txt" || fail "the poller never saw mpirun"
  grep -q '^seen: .*orted' "$LAB_DIR/poller.txt" || fail "the poller never saw an orted"
fi
if grep '^LEAK' "$LAB_DIR/poller.txt"; then
  fail "uid 65534 read a job credential in a command line"
fi
if grep '^ENVIRON' "$LAB_DIR/poller.txt"; then
  fail "uid 65534 read the environment of a rank"
fi

note "denials are logged and counted; leaf0 is still itself"
grep -q "W incamd: denied RegisterSwitch to switch leaf1 from .*: PERMISSION_DENIED: RegisterSwitch for switch 'leaf0' with the certificate of switch 'leaf1'" "$AM_LOG" ||
  fail "no log line for the rogue registration in $AM_LOG"
grep -q "W incamd: denied JoinGroup to member w0 from .*: PERMISSION_DENIED: JoinGroup for job '$L-job' needs the job's credential" "$AM_LOG" ||
  fail "no log line for the JoinGroup without a credential in $AM_LOG"
grep -q "W incswitchd: denied ConfigureTree to operator operator from 172.31.0.1: PERMISSION_DENIED" "$LEAF0_LOG" ||
  fail "no log line for the operator's ConfigureTree in $LEAF0_LOG"
grep -q "W incamd: denied MemberHeartbeat to member w0 from .*: PERMISSION_DENIED: MemberHeartbeat for rank 1 of tree $tree (job $L-job): the rank was joined from host 'w1'" "$AM_LOG" ||
  fail "no log line for w0's heartbeat for w1's rank in $AM_LOG"
grep -q "member_error: rank 0 of job $L-job on tree $tree: lab-forgery\\\\n2026-01-01T00:00:00.000Z W incamd: denied DestroyTree to operator forged" "$AM_LOG" ||
  fail "the error report with a newline is not one escaped line in $AM_LOG"
! grep -q "^2026-01-01T00:00:00.000Z" "$AM_LOG" || fail "an error report forged a line of $AM_LOG"

note "the AM's state is root's alone"
[ "$(stat -c %a "$LAB_DIR/am")" = 700 ] || fail "$LAB_DIR/am has mode $(stat -c %a "$LAB_DIR/am"), not 700"
for f in "$LAB_DIR/am/incamd.db" "$LAB_DIR/am/incamd.db-wal"; do
  [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f"), not 600"
  ! nobody cat "$f" >/dev/null 2>&1 || fail "uid 65534 read $f"
done
! nobody ls "$LAB_DIR/am" >/dev/null 2>&1 || fail "uid 65534 listed $LAB_DIR/am"
note "  $LAB_DIR/am 700, incamd.db and its -wal 600: uid 65534 reads neither"
"$INCLAB" ctl "$L" -o json stats >"$LAB_DIR/stats.json"
python3 - "$LAB_DIR/stats.json" "$leaf0_agent" <<'PY' || fail "denial counters or leaf0's registration wrong"
import json, sys
d = json.load(open(sys.argv[1]))
am = int(d.get("authorization_denials", 0))
sw = {s["switch_name"]: int(s.get("authorization_denials", 0)) for s in d.get("switches", [])}
print(f"  denials: AM {am}, switches {sw}")
# AM: incinctl's and the probe's DestroyTree, 2 RegisterSwitch, 8 JoinGroup, 2 LeaveGroup,
# 4 MemberHeartbeat, 2 ReportError, 1 IssueJobCredential.
if am < 20 or sw.get("leaf0", 0) < 4:
    sys.exit("too few denials counted")
PY
"$INCLAB" ctl "$L" -o json switch list | python3 -c '
import json, sys
sw = {s["name"]: s for s in json.load(sys.stdin)["switches"]}
ok = sw["leaf0"]["alive"] and sw["leaf0"]["agent_address"] == sys.argv[1]
sys.exit(0 if ok else 1)' "$leaf0_agent" || fail "leaf0 is no longer registered at its own address"
pass
