#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.float_contract_<topology>: the float-sum contract (docs/operations.md
# "Numbers") through the XDP switches. inc-numerics-check runs on every
# worker (4 ranks; on the single-level lab also 8 ranks, 2 per host, through
# the host stage): AllReduce and Reduce SUM of float32, float64, float16 and
# bfloat16 over randn data, values spread over 1e-6..1e6, inf/-inf/NaN at
# rank-dependent places, cancelling values and values near the bottom of
# the range, 3, 1000 and 50000 elements. Every element must be the IEEE
# special result or within (n-1)*u*sum|x_i| of the exact sum, and every rank
# must get the same bits. Then a world of 3 (the smallest with a
# certificate) and of 2 (everything gathered) on the same lab. float32 sums
# run on 32-bit lanes and move to 64-bit ones where blocks come back
# uncertified ("auto"); the four64 case forces 64-bit lanes throughout.
. "$(dirname "$0")/lib.sh" "$1" flc
KIND=${2:?single or two}
require_bins incamd incswitchd incinctl inc-numerics-check
lab_up k "$KIND"
L=$P"k"

check() {  # TAG [inclab run options] -- extra args
  local tag=$1 rc=0 opts=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  "$INCLAB" run "$L" "${opts[@]}" --quiet --tag "$tag" -- inc-numerics-check --am '{am}' --job "{prefix}-$tag" \
    --rank '{rank}' --world '{world}' --iface '{iface}' "$@" || rc=$?
  local log="/tmp/inclab-$L/logs/$tag-w0.log"
  [ -f "$log" ] || log="/tmp/inclab-$L/logs/$tag-w0-0.log"
  python3 - "$log" "$tag" <<'PY' || rc=1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cases = [l for l in lines if "case" in l]
summary = [l["summary"] for l in lines if "summary" in l]
if not summary:
    sys.exit(f"FAIL: {sys.argv[2]}: no summary")
s = summary[-1]
bad = [c for c in cases if c["violations"] or c["special_mismatches"] or not c["ranks_agree"]]
gathered = sum(c["gathered_blocks"] for c in cases)
unc = sum(c["uncertified_blocks"] for c in cases)
randn = [c for c in cases if c["case"] == "randn" and c["dtype"] == "float32" and c["count"] == 50000]
share = sum(c["correctly_rounded"] for c in randn) / max(1, sum(c["elements"] for c in randn))
print(f"{sys.argv[2]}: world {s['world']}, {len(cases)} cases, {s['elements']} elements checked on rank 0, "
      f"{s['violations']} outside the bound, {s['special_mismatches']} wrong specials, "
      f"{s['cases_with_differing_ranks']} cases where ranks differ; {gathered} blocks gathered "
      f"({unc} uncertified by the switch), {s['status'].get('exponent_guess_misses', 0)} calls on guessed "
      f"exponents redone; randn float32 correctly rounded {share:.4f}")
for c in bad[:10]:
    print("  FAIL", json.dumps(c))
sys.exit(1 if bad or s["violations"] or s["special_mismatches"] or s["cases_with_differing_ranks"] else 0)
PY
  if [ "$rc" != 0 ]; then
    echo "FAIL: $tag" >&2
    FAILED+=("$tag")
  fi
}

note "$KIND: 4 ranks"
check four
note "$KIND: 4 ranks, float32 always on 64-bit lanes"
check four64 -- --float32-lanes 64 --sizes 3 --sizes 1000 --sizes 50000
if [ "$KIND" = single ]; then
  note "$KIND: 8 ranks, 2 per host (the host stage)"
  check eight --ranks-per-host 2 -- --root 5
fi
note "$KIND: 3 ranks (w0 w1 w2) and 2 ranks (w0 w3)"
check three --workers w0,w1,w2 -- --sizes 3 --sizes 1000 --sizes 20000
check two --workers w0,w3 -- --sizes 3 --sizes 1000 --sizes 20000
pass
