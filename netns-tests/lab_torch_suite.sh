#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.torch_suite_<kind>: PyTorch 1.13's own process-group suite
# (torch/testing/_internal/distributed/distributed_test.py, the tests
# selected as for gloo) with backend "incin", 4 ranks in the lab's 4 worker
# namespaces (netns-tests/torch_suite.py says how), then with gloo in the
# same lab for comparison. Passes when no incin test fails: every test of the
# selection passes or is in torch_suite.py's skip list, which names why.
# Prints both backends' pass/fail/skip counts and every test whose status
# differs between them. TORCH_SUITE_BACKENDS="incin" skips the gloo run;
# TORCH_SUITE_TESTS=REGEX runs only the tests it matches.
#   lab_torch_suite.sh BUILD single|two
. "$(dirname "$0")/lib.sh" "$1" tu
KIND=${2:-single}
case "$KIND" in single | two) ;; *) fail "kind must be single or two, not '$KIND'" ;; esac
require_bins incswitchd incamd incinctl
need_torch torch.testing._internal.distributed.distributed_test
SUITE="$LAB_TESTS_DIR/torch_suite.py"

DIR=$(mktemp -d /tmp/incin-torch-suite.XXXXXX)
at_cleanup '[ "$rc" != 0 ] || rm -rf "$DIR"'

lab_up l "$KIND"
L="$P"l
# shellcheck source=/dev/null  # the lab's generated settings
AM=$(. "/tmp/inclab-$L/lab.env" && echo "$AM")
RUNS=()
for backend in ${TORCH_SUITE_BACKENDS:-incin gloo}; do
  note "$KIND-level lab: torch suite with backend $backend (log $DIR/$backend.log)"
  rc=0
  INCIN_SUITE_BACKEND=$backend "$PY" "$SUITE" --backend "$backend" --lab "$L" --am "$AM" \
    --out "$DIR/$backend.json" --logs "$DIR/$backend" ${TORCH_SUITE_TESTS:+--tests "$TORCH_SUITE_TESTS"} \
    >"$DIR/$backend.log" 2>&1 </dev/null || rc=$?
  if [ "$rc" = 77 ]; then
    tail -n 3 "$DIR/$backend.log" >&2
    TEST_OK=1
    exit 77
  fi
  [ -f "$DIR/$backend.json" ] || { tail -n 40 "$DIR/$backend.log" >&2; fail "$backend: no result (exit $rc)"; }
  grep -h "^torch suite, backend" "$DIR/$backend.log" | sed 's/^/  /' || true
  RUNS+=("$backend")
done

python3 - "$DIR" "${RUNS[@]}" <<'PY' || fail "incin tests failed (logs in $DIR)"
import json, sys
d, runs = sys.argv[1], sys.argv[2:]
docs = {b: json.load(open(f"{d}/{b}.json")) for b in runs}
for b, doc in docs.items():
    c = doc["counts"]
    print(f"  {b}: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped ({doc['seconds']} s)")
inc = docs.get("incin")
if inc:
    print("  incin offloaded calls over the suite (rank 0):", inc["offloaded_calls"])
    print("  incin fallbacks over the suite (rank 0):", inc["fallback_calls"], "failed offloads:",
          inc["failed_offloads"])
if len(docs) == 2:
    g = docs["gloo"]["tests"]
    for n, v in sorted(inc["tests"].items()):
        gs = g.get(n, {}).get("status", "-")
        if v["status"] != gs:
            why = v["message"].splitlines()[0][:150] if v["status"] == "skip" else ""
            print(f"  differs: {n}: incin {v['status']}, gloo {gs} {why}")
bad = 0
for b, doc in docs.items():
    for n, v in sorted(doc["tests"].items()):
        if v["status"] == "fail":
            tail = [l for l in v["message"].splitlines() if l.strip()][-6:]
            print(f"  {b} FAILED {n}:", file=sys.stderr)
            for l in tail:
                print("     " + l[:200], file=sys.stderr)
            bad += b == "incin"
sys.exit(1 if bad else 0)
PY
pass
