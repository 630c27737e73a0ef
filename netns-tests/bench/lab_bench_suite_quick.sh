#!/usr/bin/env bash
# lab.bench_suite_quick: runs the benchmark suite (scripts/bench.sh --quick:
# 8 B, 64 KiB and 1 MiB, one repetition, single- and two-level labs) on an
# existing build and checks that bench.csv has a row per topology and size
# with every column filled (INC, Open MPI, Gloo, ceiling and the ratios),
# that the speedups are the time ratios they claim to be, and that the
# summary checks the targets and reports the load, so the suite does not
# rot. Speed is not asserted. Exit 77 (SKIP) when a
# binary the suite drives is not built.
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

python3 - "$OUT/bench.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
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
    t = {s: float(r[f"{s}_time_us"]) for s in ("inc", "mpi", "gloo", "ceiling")}
    claims = {"speedup_vs_mpi": t["mpi"] / t["inc"], "speedup_vs_gloo": t["gloo"] / t["inc"],
              "speedup_vs_best_ring": min(t["mpi"], t["gloo"]) / t["inc"],
              "inc_over_ceiling_time": t["inc"] / t["ceiling"]}
    for k, want in claims.items():
        if abs(float(r[k]) / want - 1) > 1e-3:
            sys.exit(f"FAIL: {r['topology']} {r['size_bytes']} B: {k} = {r[k]}, the times give {want:.6g}")
print(f"bench.csv: {len(rows)} rows, every column filled, speedups are time ratios")
PY
grep -q "^### Targets" "$OUT/summary.md" || { echo "FAIL: summary.md checks no targets"; exit 1; }
grep -q "Load" "$OUT/summary.md" || { echo "FAIL: summary.md says nothing about the load"; exit 1; }
for t in single two; do
  [ -s "$OUT/busbw-$t.png" ] || { echo "FAIL: no plot busbw-$t.png"; exit 1; }
done
keep=0
echo "PASS lab.bench_suite_quick"
