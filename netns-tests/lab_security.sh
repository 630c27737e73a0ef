#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.security: every control-plane channel runs mTLS and every call is
# authorized by the caller's certificate (docs/operations.md "Security
# model"). While an exact 4-rank allreduce runs on the two-level lab, rogue
# clients with the lab's own certificates (or none, or another CA's) try what
# their role does not allow (joining the job without its credential or with
# another job's among them); each is refused with the expected code, logged
# and counted, and the job's results stay exact.
# shellcheck disable=SC2046  # $(creds NAME) is meant to split into --cert F --key F --ca F
. "$(dirname "$0")/lib.sh" "$1" sec
require_bins incamd incswitchd incinctl inc-perf inc-rpc-probe
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
other=$("$INCLAB" ctl "$L" job credential "$L-other")
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

note "denials are logged and counted; leaf0 is still itself"
grep -q "W incamd: denied RegisterSwitch to switch leaf1 from .*: PERMISSION_DENIED: RegisterSwitch for switch 'leaf0' with the certificate of switch 'leaf1'" "$AM_LOG" ||
  fail "no log line for the rogue registration in $AM_LOG"
grep -q "W incamd: denied JoinGroup to member w0 from .*: PERMISSION_DENIED: JoinGroup for job '$L-job' needs the job's credential" "$AM_LOG" ||
  fail "no log line for the JoinGroup without a credential in $AM_LOG"
grep -q "W incswitchd: denied ConfigureTree to operator operator from 172.31.0.1: PERMISSION_DENIED" "$LEAF0_LOG" ||
  fail "no log line for the operator's ConfigureTree in $LEAF0_LOG"
"$INCLAB" ctl "$L" -o json stats >"$LAB_DIR/stats.json"
python3 - "$LAB_DIR/stats.json" "$leaf0_agent" <<'PY' || fail "denial counters or leaf0's registration wrong"
import json, sys
d = json.load(open(sys.argv[1]))
am = int(d.get("authorization_denials", 0))
sw = {s["switch_name"]: int(s.get("authorization_denials", 0)) for s in d.get("switches", [])}
print(f"  denials: AM {am}, switches {sw}")
# AM: incinctl's and the probe's DestroyTree, 2 RegisterSwitch, 5 JoinGroup, 1 LeaveGroup,
# 1 IssueJobCredential.
if am < 11 or sw.get("leaf0", 0) < 4:
    sys.exit("too few denials counted")
PY
"$INCLAB" ctl "$L" -o json switch list | python3 -c '
import json, sys
sw = {s["name"]: s for s in json.load(sys.stdin)["switches"]}
ok = sw["leaf0"]["alive"] and sw["leaf0"]["agent_address"] == sys.argv[1]
sys.exit(0 if ok else 1)' "$leaf0_agent" || fail "leaf0 is no longer registered at its own address"
pass
