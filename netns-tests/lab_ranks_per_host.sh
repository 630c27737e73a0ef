#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.ranks_per_host_<topology>: several ranks per host. 8 ranks on the 4
# worker namespaces (2 per host) and 16 ranks (4 per host); the ranks of a
# host meet in shared memory and local rank 0 is the host's tree member
# (docs/architecture.md "Several ranks per host"). Checks: allreduce for
# every data type x op, reduce, broadcast, barrier, allgather and
# reduce_scatter with sizes that are not multiples of anything, 0 and 1
# elements, #wrong 0 on every rank against the exact host reference;
# float32/float64 sums of inexact values give the same bits on every rank
# and in two runs; `incinctl tree show` lists the 4 members (hosts) with the
# ranks behind each, in its table and its JSON.
. "$(dirname "$0")/lib.sh" "$1" rph
KIND=${2:?single or two}
require_bins incamd incswitchd incinctl inc-perf
lab_up k "$KIND"
L=k
T=/tmp/inclab-$P$L/rph  # goes with the lab (kept with its logs on failure)
mkdir -p "$T"

# A failed run is recorded (FAILED) and the others still run.
rph() { perf_rph "$@" || true; }
esize() { case $1 in int64 | float64) echo 8 ;; float16 | bfloat16) echo 2 ;; *) echo 4 ;; esac; }

for N in 2 4; do
  note "$KIND: $N ranks per host ($((4 * N)) ranks)"
  RPH_EMPTY_OK=1 rph $L "n$N-zero" "$N" -- allreduce -d float32 -o sum -b 0 -e 0 -n 1 -w 0
  rph $L "n$N-ar-f32" "$N" -- allreduce -d float32 -o sum -b 4 -e 1M -f 5.3 -n 2 -w 0
  for d in int32 int64 float16 bfloat16 float64; do
    e=$(esize "$d")
    rph $L "n$N-ar-$d" "$N" -- allreduce -d "$d" -o sum -b "$e" -e $((e * 3001)) -f 4.1 -n 1 -w 0
  done
  for op in min max; do
    rph $L "n$N-ar-f32-$op" "$N" -- allreduce -d float32 -o "$op" -b 4 -e 50000 -f 6.7 -n 1 -w 0
    rph $L "n$N-ar-f64-$op" "$N" -- allreduce -d float64 -o "$op" -b 8 -e 50000 -f 6.7 -n 1 -w 0
    rph $L "n$N-ar-i32-$op" "$N" -- allreduce -d int32 -o "$op" -b 4 -e 50000 -f 6.7 -n 1 -w 0
  done
  rph $L "n$N-red" "$N" -- reduce -d float32 -o sum -r $((N + 1)) -b 4 -e 100000 -f 7.1 -n 1 -w 0
  rph $L "n$N-bc" "$N" -- broadcast -d int32 -r $((2 * N - 1)) -b 4 -e 300000 -f 5.9 -n 1 -w 0
  rph $L "n$N-ag" "$N" -- allgather -d float16 -b $((2 * 4 * N)) -e 40000 -f 9.3 -n 1 -w 0
  rph $L "n$N-rs" "$N" -- reduce_scatter -d float32 -o sum -b $((4 * 4 * N)) -e 40000 -f 9.3 -n 1 -w 0
  rph $L "n$N-barrier" "$N" -- barrier -n 20 -w 1

  note "$KIND: $N per host: float sums of inexact values, identical bits on every rank and in two runs"
  for d in float32 float64; do
    for run in 1 2; do
      rph $L "n$N-digest-$d-$run" "$N" -- allreduce -d "$d" -o sum --inexact -b 4 -e 400000 -f 7.3 -n 1 \
        -w 0 --digest "$T/n$N-$d-$run-r{rank}"
    done
    python3 - "$T" "n$N-$d" $((4 * N)) <<'PY' || FAILED+=("n$N-digest-$d")
import sys, os
d, stem, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = {}
for run in (1, 2):
    for r in range(world):
        p = os.path.join(d, f"{stem}-{run}-r{r}")
        seen[(run, r)] = open(p).read() if os.path.exists(p) else None
ref = seen[(1, 0)]
if not ref:
    sys.exit(f"FAIL: {stem}: no digest of rank 0")
bad = [k for k, v in seen.items() if v != ref]
if bad:
    sys.exit(f"FAIL: {stem}: results differ from rank 0's first run on (run, rank) {bad}")
print(f"  {stem}: {len(ref.splitlines())} sizes, the same bits on {world} ranks in 2 runs")
PY
  done
done

note "$KIND: incinctl tree show lists the ranks behind each member"
# The tree lives from the last join until the ranks leave (a second after
# their last collective): look while a run of barriers goes on.
( perf_rph $L show 2 -- barrier -n 300 -w 0 >"$T/show.log" 2>&1 ) &
show_pid=$!
job="$P$L-show"
ok=0
for _ in $(seq 150); do
  if "$INCLAB" ctl "$P$L" tree show --job "$job" -o json >"$T/show.json" 2>/dev/null &&
    python3 - "$T/show.json" <<'PY'; then
import json, sys
doc = json.load(open(sys.argv[1]))
t = doc["tree"] if "tree" in doc else doc.get("trees", [doc])[0]
got = {m.get("rank", 0): [int(x) for x in m.get("host_ranks", m.get("hostRanks", []))]
       for m in t.get("members", []) if m.get("joined")}
want = {h: [2 * h, 2 * h + 1] for h in range(4)}
if len(got) < 4:
    sys.exit(1)  # not every member has joined yet
if got != want:
    print(f"FAIL: tree show members {got}, want {want}", file=sys.stderr)
    sys.exit(2)
print(f"  tree show JSON: member (host) -> ranks {got}")
PY
    "$INCLAB" ctl "$P$L" tree show --job "$job" >"$T/show.txt" 2>&1 || true
    ok=1
    break
  fi
  sleep 0.2
done
wait "$show_pid" || true
cat "$T/show.log"
[ "$ok" = 1 ] || { cat "$T/show.json" >&2 || true; fail "tree show JSON did not list ranks 2h,2h+1 behind member h"; }
grep -q "RANKS" "$T/show.txt" && grep -q "0,1" "$T/show.txt" && grep -q "6,7" "$T/show.txt" ||
  { cat "$T/show.txt" >&2; fail "tree show table has no RANKS column with 0,1 .. 6,7"; }
sed 's/^/  | /' "$T/show.txt" | head -20
pass
