#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: 4 workers allreduce through XDP switches in the namespace lab,
# first through one leaf (single-level), then through two leaves and a spine
# (two-level). For each: bring the lab up (incamd + incswitchd per switch),
# run inc-perf allreduce (float32 sum, 8 B .. 64 MiB) on the 4 workers, print
# its table and `incinctl tree show` while the job's tree is live, tear down.
# Exits non-zero on any failure (a wrong element included).
#
#   bash scripts/demo.sh            (fresh Debian 12: installs, builds)
#   MAX=4M ITERS=3 bash scripts/demo.sh  (smaller run)
#   BUILD_DIR=build-x DEMO_SKIP_BUILD=1 bash scripts/demo.sh  (existing build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root (namespaces, XDP, bpffs)" >&2; exit 1; }

BUILD_DIR=${BUILD_DIR:-build}
MIN=${MIN:-8}
MAX=${MAX:-64M}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
FACTOR=${FACTOR:-2}  # x2 from 8 B reaches 64 MiB exactly
DTYPE=${DTYPE:-float32}
OP=${OP:-sum}
INCLAB="$ROOT/netns-tests/inclab"
export INCLAB_BUILD="$ROOT/$BUILD_DIR"

step() { printf '\n=== %s\n' "$*"; }

if [ "${DEMO_SKIP_BUILD:-0}" = 1 ]; then
  step "using the existing build in $BUILD_DIR (DEMO_SKIP_BUILD=1)"
else
  step "dependencies and build ($BUILD_DIR)"
  bash scripts/deps.sh
  BUILD_DIR=$BUILD_DIR bash scripts/build.sh
fi
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
INC_PERF=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name inc-perf -perm -u+x | head -n1)
[ -n "$INC_PERF" ] || { echo "demo.sh: inc-perf was not built" >&2; exit 1; }

LAB=""
cleanup() {
  local rc=$?
  if [ -n "$LAB" ]; then
    if [ $rc -ne 0 ]; then
      echo "demo.sh: failed; daemon and worker logs kept in /tmp/inclab-$LAB/logs" >&2
      "$INCLAB" down "$LAB" --keep-logs || true
    else
      "$INCLAB" down "$LAB" || true
    fi
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tree_state() {  # job -> state of its newest tree, or NONE
  "$INCLAB" ctl "$LAB" -o json tree list 2>/dev/null | python3 -c '
import json, sys
trees = [t for t in json.load(sys.stdin).get("trees", []) if t.get("job_id") == sys.argv[1]]
print(trees[-1]["state"] if trees else "NONE")' "$1" 2>/dev/null || echo NONE
}

demo() {  # kind
  local kind=$1 job
  LAB="demo$$${kind:0:1}"
  job="demo-$kind"
  step "$kind-level lab: 4 workers, $([ "$kind" = single ] && echo "1 leaf" || echo "2 leaves, 2 spines")"
  "$INCLAB" up "$kind" --prefix "$LAB" >/dev/null
  "$INCLAB" check "$LAB"
  "$INCLAB" ctl "$LAB" switch list

  step "$kind-level: inc-perf allreduce $DTYPE $OP, $MIN .. $MAX, 4 ranks"
  PATH="$(dirname "$INC_PERF"):$PATH" "$INCLAB" run "$LAB" --tag demo -- \
    inc-perf allreduce -d "$DTYPE" -o "$OP" -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" \
    --am '{am}' --job "$job" --rank '{rank}' --world '{world}' --iface '{iface}' &
  local run=$! shown=0 state
  # Show the tree while the job holds it (members leave when they finish).
  while kill -0 $run 2>/dev/null; do
    state=$(tree_state "$job")
    if [ "$state" = TREE_ACTIVE ]; then
      "$INCLAB" ctl "$LAB" tree show --job "$job" >"/tmp/inclab-$LAB/tree.txt" 2>&1 && shown=1
      break
    fi
    sleep 0.3
  done
  local rc=0
  wait $run || rc=$?
  [ $rc -eq 0 ] || { echo "demo.sh: inc-perf failed on the $kind-level lab (exit $rc)" >&2; return 1; }
  step "$kind-level: incinctl tree show (while the job ran)"
  if [ $shown = 1 ]; then
    cat "/tmp/inclab-$LAB/tree.txt"
  else
    echo "(the job finished before its tree could be shown; the AM's record now:)"
    "$INCLAB" ctl "$LAB" tree show --job "$job"
  fi
  step "$kind-level: switch counters"
  "$INCLAB" ctl "$LAB" stats || true
  "$INCLAB" down "$LAB"
  LAB=""
}

demo single
demo two
step "demo passed: single- and two-level allreduce correct on all 4 workers"
