#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.bench_suite_quick: runs the benchmark suite (scripts/bench.sh --quick:
# 8 B, 64 KiB and 1 MiB, one repetition, single- and two-level labs, 4
# workers) on an existing build and checks, so the suite does not rot, that
# bench.csv has a row per topology and size with every column filled and
# positive (times with min/max of the repetitions, speedups, INC/ceiling,
# busbw of INC, Open MPI, Gloo and the ceiling), that the speedups are the time ratios and the busbw ratios
# equal them, that runs.csv has the load before and after every run, and
# that summary.md states the targets that apply to these sizes ((a) and (d))
# with met or missed. Speed is not asserted. Exit 77 (SKIP) when a binary the
# suite drives is not built.
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: lab_bench_suite_quick.sh BUILD_DIR}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
for exe in inc-perf incamd incswitchd incinctl fwd-ceiling mpi-allreduce-perf gloo-allreduce-perf; do
  [ -n "$(find "$BUILD" -maxdepth 4 -type f -name "$exe" -perm -u+x | head -n1)" ] ||
    { echo "SKIP: $exe is not built in $BUILD (cmake --build $BUILD --target bench_suite)"; exit 77; }
done
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed"; exit 77; }

OUT=$(mktemp -d /tmp/bench-quick.XXXXXX)
keep=1
trap '[ $keep = 1 ] && echo "results kept in $OUT" >&2 || rm -rf "$OUT"' EXIT
bash "$ROOT/scripts/bench.sh" --quick --no-build --build "$BUILD" --out "$OUT"

python3 - "$OUT" <<'PY'
import csv, os, re, sys
out = sys.argv[1]
columns = ["topology", "workers", "size_bytes", "inc_time_us", "mpi_time_us", "gloo_time_us", "ceiling_time_us",
           "speedup_vs_mpi", "speedup_vs_gloo", "speedup_vs_faster_ring", "inc_over_ceiling_time",
           "inc_busbw_GBps", "mpi_busbw_GBps", "gloo_busbw_GBps", "ceiling_busbw_GBps", "reps",
           "inc_min_us", "inc_max_us", "mpi_min_us", "mpi_max_us", "gloo_min_us", "gloo_max_us",
           "ceiling_min_us", "ceiling_max_us"]
with open(os.path.join(out, "bench.csv")) as f:
    reader = csv.DictReader(f)
    if reader.fieldnames != columns:
        sys.exit(f"FAIL: bench.csv columns {reader.fieldnames}, want {columns}")
    rows = list(reader)
want = {(t, s) for t in ("single", "two") for s in (8, 65536, 1048576)}
got = {(r["topology"], int(r["size_bytes"])) for r in rows}
missing = want - got
if missing:
    sys.exit(f"FAIL: bench.csv lacks rows {sorted(missing)}")
for r in rows:
    empty = [k for k, v in r.items() if v is None or v == ""]
    if empty:
        sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B has empty columns {empty}")
    for k, v in r.items():
        if k != "topology" and not float(v) > 0:
            sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B: {k} = {v} is not positive")

def close(a, b, what, r):
    if abs(a - b) > 1e-3 * max(abs(a), abs(b)):
        sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B: {what}: {a:.6g} != {b:.6g}")

for r in rows:
    v = {k: float(x) for k, x in r.items() if k != "topology"}
    if v["workers"] != 4:
        sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B: workers {r['workers']}, want 4")
    close(v["speedup_vs_mpi"], v["mpi_time_us"] / v["inc_time_us"], "speedup vs Open MPI", r)
    close(v["speedup_vs_gloo"], v["gloo_time_us"] / v["inc_time_us"], "speedup vs Gloo", r)
    close(v["speedup_vs_faster_ring"], min(v["mpi_time_us"], v["gloo_time_us"]) / v["inc_time_us"],
          "speedup vs the faster ring", r)
    close(v["inc_over_ceiling_time"], v["inc_time_us"] / v["ceiling_time_us"], "INC/ceiling", r)
    close(v["inc_busbw_GBps"] / v["mpi_busbw_GBps"], v["speedup_vs_mpi"], "busbw ratio vs Open MPI", r)
    close(v["inc_busbw_GBps"] / v["gloo_busbw_GBps"], v["speedup_vs_gloo"], "busbw ratio vs Gloo", r)
    close(v["inc_busbw_GBps"], v["size_bytes"] / v["inc_time_us"] / 1e3 * 1.5, "INC busbw = algbw x 2(n-1)/n", r)
    for system in ("inc", "mpi", "gloo", "ceiling"):
        lo, mid, hi = v[f"{system}_min_us"], v[f"{system}_time_us"], v[f"{system}_max_us"]
        if not lo * (1 - 1e-6) <= mid <= hi * (1 + 1e-6):
            sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B: {system} time {mid} outside [min {lo}, max {hi}]")
print(f"bench.csv: {len(rows)} rows, every column filled, speedups = time ratios = busbw ratios")

with open(os.path.join(out, "runs.csv")) as f:
    runs = list(csv.DictReader(f))
have = {(r["topology"], r["system"]) for r in runs}
lack = {(t, s) for t in ("single", "two") for s in ("inc", "mpi", "gloo", "ceiling")} - have
if lack:
    sys.exit(f"FAIL: runs.csv has no run of {sorted(lack)}")
for r in runs:
    for k in ("load1_before", "load1_after", "idle_pct", "steal_pct"):
        try:
            float(r[k])
        except (KeyError, TypeError, ValueError):
            sys.exit(f"FAIL: runs.csv {r.get('run')}: {k} = {r.get(k)!r} is not a number")
print(f"runs.csv: {len(runs)} runs with the load before and after and their CPU idle/steal shares")

summary = open(os.path.join(out, "summary.md")).read()
for label in ("(a)", "(d)"):
    block = summary.split(f"- {label} ", 1)
    if len(block) < 2:
        sys.exit(f"FAIL: summary.md does not state target {label}")
    lines = block[1].split("\n- ", 1)[0]
    for topo in ("single", "two"):
        if not re.search(rf"{topo}-level: .*\b(met|missed)\b", lines):
            sys.exit(f"FAIL: summary.md target {label}: no met/missed for {topo}-level")
if "not checked in this run" not in summary or not re.search(r"Load average \(1 min\) around each run", summary):
    sys.exit("FAIL: summary.md lacks the targets not checked or the load line")
print("summary.md: targets (a) and (d) with met/missed per topology, load stated")
PY
for t in single two; do
  [ -s "$OUT/busbw-$t.png" ] || { echo "FAIL: no plot busbw-$t.png"; exit 1; }
done
keep=0
echo "PASS lab.bench_suite_quick"
