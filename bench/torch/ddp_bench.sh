#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# DDP step time with gloo vs the incin backend (docs/pytorch.md
# "Performance"): brings up a namespace lab, runs netns-tests/torch_ddp_train.py
# (no checks, an MLP of --hidden width) on its four workers, one rank per
# worker, alternating gloo and incin RUNS times each, and prints per run the
# median and mean step time (forward + backward with DDP's allreduce +
# optimizer step) of the slowest rank. Needs root and a build with
# userspace/torch.
#
#   bench/torch/ddp_bench.sh [--build DIR] [--kind single|two] [--hidden N] [--steps N] [--runs N]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRC/build KIND=single HIDDEN=512 STEPS=200 RUNS=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(readlink -f "$2"); shift 2 ;;
    --kind) KIND=$2; shift 2 ;;
    --hidden) HIDDEN=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ddp_bench: unknown option $1" >&2; exit 2 ;;
  esac
done
PKG=$(find "$BUILD" -maxdepth 4 -name "_incin_torch*.so" | head -n1)
[ -n "$PKG" ] || { echo "ddp_bench: no incin torch extension in $BUILD" >&2; exit 2; }
PY=/usr/bin/python3
PYTHONPATH="$(dirname "$(dirname "$PKG")")"
export PYTHONPATH
INCLAB=$SRC/netns-tests/inclab
L=tbench$$
OUT=$(mktemp -d /tmp/incin-ddp-bench.XXXXXX)
trap '"$INCLAB" down "$L" >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
"$INCLAB" up "$KIND" --prefix "$L" --build "$BUILD" >/dev/null
port=29700
printf "%-6s %-4s %10s %10s   (hidden %s, %s steps, %s-level lab, 4 ranks)\n" backend run "median_ms" "mean_ms" \
  "$HIDDEN" "$STEPS" "$KIND"
for run in $(seq "$RUNS"); do
  for backend in gloo incin; do
    port=$((port + 1))
    "$INCLAB" run "$L" --quiet --tag "bench-$backend-$run" -- "$PY" "$SRC/netns-tests/torch_ddp_train.py" \
      --backend "$backend" --rank '{rank}' --world '{world}' --master "10.0.0.2:$port" --steps "$STEPS" \
      --hidden "$HIDDEN" --no-checks --bench --am '{am}' --job "{prefix}-bench-$backend-$run" \
      --out "$OUT/$backend-$run-{rank}.json"
    "$PY" - "$OUT" "$backend" "$run" <<'PY'
import json, sys
d, b, r = sys.argv[1:4]
docs = [json.load(open(f"{d}/{b}-{r}-{k}.json")) for k in range(4)]
med = max(x["step_ms_median"] for x in docs)
mean = max(x["step_ms_mean"] for x in docs)
print(f"{b:<6} {r:<4} {med:10.2f} {mean:10.2f}   params {docs[0]['params']}")
PY
  done
done
