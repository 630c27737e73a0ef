#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.torch_checks_<kind> / lab.torch_numerics_<kind>: the torch.distributed
# backend "incin" keeps its ranks together and gives right answers
# (docs/pytorch.md "Failures"): netns-tests/torch_checks.py, one rank per
# worker namespace, one process group per scenario, each rank checking on
# its own (see that file for what each scenario checks):
#   late           a rank 25 s late (timeout 60 s) is waited for, not failed
#   barrier_async  barrier() waits for earlier async work
#   argerrors      argument errors raise like gloo's, the group stays offloaded
#   sparse         sparse all_reduce reaches gloo
#   empty          0-element tensors in every collective
#   monitored      incin.monitored_barrier
#   subgroup       all_gather_into_tensor / reduce_scatter(_tensor) in subgroups
#   absent         a rank absent past the timeout: every rank raises in time
#   killed         a rank SIGKILLed: the others raise in time
#   async          offloaded Works are asynchronous, wait/wait(timeout)/futures
#   asyncfail      queued async Works raise through wait() after a failure
#   teardown       destroy_process_group() with calls queued runs them first
#   dropcb         the group's last reference dropped on its worker thread
#   fallback       no AM: bf16/AVG all_reduce, _tensor forms on gloo, exact
#   numerics       inf/NaN and wide-range float SUM (libinc's codec)
# barrier_async, argerrors and sparse also run with gloo: the checks hold
# for the backend incin stands in for. Passes when every rank of every run
# exits 0 with no failure (killed: the killed rank dies of SIGKILL), and no
# rank outlives its time limit (a hang is a failure).
#   lab_torch_checks.sh BUILD single|two [CHECK...]
. "$(dirname "$0")/lib.sh" "$1" tc
KIND=${2:-single}
case "$KIND" in single | two) ;; *) fail "kind must be single or two, not '$KIND'" ;; esac
shift 2
CHECKS=("$@")
[ ${#CHECKS[@]} -gt 0 ] || CHECKS=(late barrier_async argerrors sparse empty monitored subgroup absent killed async asyncfail teardown dropcb fallback)
require_bins incswitchd incamd incinctl
need_torch
CHECK_PY="$LAB_TESTS_DIR/torch_checks.py"

DIR=$(mktemp -d /tmp/incin-torch-checks.XXXXXX)
at_cleanup '[ "$rc" != 0 ] || rm -rf "$DIR"'

lab_up l "$KIND"
L="$P"l
PORT=29700
BAD=()

# run_check BACKEND CHECK TIMEOUT_S LIMIT_S: the four ranks, each under
# `timeout LIMIT_S` (a hang fails the run), results in $DIR/BACKEND-CHECK-R.json.
run_check() {
  local backend=$1 check=$2 tmo=$3 limit=$4 r job cred="" pids=() rc t0
  local tag="$backend-$check"
  job="$L-$check-$backend"
  PORT=$((PORT + 1))
  if [ "$backend" = incin ]; then
    cred=$("$INCLAB" ctl "$L" job credential "$job" 2>/dev/null) || cred=""
  fi
  t0=$(date +%s)
  for r in 0 1 2 3; do
    INCIN_JOB_CREDENTIAL=$cred timeout -k 5 "$limit" "$INCLAB" exec "$L" "w$r" "$PY" "$CHECK_PY" --check "$check" \
      --backend "$backend" --rank "$r" --world 4 --master "10.0.0.2:$PORT" --timeout "$tmo" --job "$job" \
      --out "$DIR/$tag-$r.json" >"$DIR/$tag-$r.log" 2>&1 </dev/null &
    pids+=($!)
  done
  for r in 0 1 2 3; do
    rc=0
    # (2>/dev/null: bash's "Killed" notice for the killed check's rank)
    wait "${pids[$r]}" 2>/dev/null || rc=$?
    echo "$rc" >"$DIR/$tag-$r.rc"
  done
  python3 - "$DIR" "$tag" "$check" "$(($(date +%s) - t0))" <<'PY' || BAD+=("$tag")
import json, os, sys
d, tag, check, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
bad = []
notes = []
for r in range(4):
    rc = int(open(f"{d}/{tag}-{r}.rc").read())
    path = f"{d}/{tag}-{r}.json"
    if check == "killed" and r == 3:
        if rc not in (137, -9):
            bad.append(f"rank 3: exit {rc}, want death by SIGKILL (137)")
        continue
    if rc == 124 or rc == 137:
        bad.append(f"rank {r}: hung, killed by its time limit (log {d}/{tag}-{r}.log)")
        continue
    if not os.path.exists(path):
        bad.append(f"rank {r}: exit {rc}, no result (log {d}/{tag}-{r}.log)")
        continue
    doc = json.load(open(path))
    for f in doc["failures"]:
        bad.append(f"rank {r}: {f[:400]}")
    if rc != 0 and not doc["failures"]:
        bad.append(f"rank {r}: exit {rc}")
    info = {k: v for k, v in doc["info"].items() if k != "summary"}
    notes.append(f"rank {r}: {json.dumps(info)[:400]}")
print(f"  {tag}: {'ok' if not bad else 'FAILED'} ({secs} s)")
for n in notes:
    print("    " + n)
for b in bad:
    print("    " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

note "$KIND-level lab: checks ${CHECKS[*]}"
for check in "${CHECKS[@]}"; do
  case "$check" in
  late) run_check incin late 60 180 ;;
  absent | killed | asyncfail) run_check incin "$check" 10 90 ;;
  numerics) run_check incin numerics 60 300 ;;
  *) run_check incin "$check" 60 120 ;;
  esac
  case "$check" in barrier_async | argerrors | sparse | async) run_check gloo "$check" 60 120 ;; esac
done
[ ${#BAD[@]} = 0 ] || fail "${#BAD[@]} runs failed: ${BAD[*]} (logs in $DIR)"
pass
