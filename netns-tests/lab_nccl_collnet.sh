#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.nccl_collnet: the NCCL CollNet plugin (libnccl-net-incin.so,
# docs/nccl.md) on the lab's four workers, driven through NCCL's plugin ABI
# by nccl_collnet_harness as NCCL's proxy would (no NCCL library and no GPU
# here): dlopen + dlsym of ncclCollNetPlugin_vN, listen, handles exchanged
# through files in a shared directory (NCCL's bootstrap all-gather),
# connect, regMr, four iallreduce requests in flight per size (1, 1000,
# 100003 and 262144 elements; and 0) polled with test(), every element checked:
# int32 SUM and float32 SUM of exact values exactly, float32 SUM of random
# values against a double reference and bit-identical on every rank, int32
# MAX in place; whole-buffer iallgather and ireducescatter; then the
# library's net plugin (ncclNetPlugin_v8, TCP): a ring of sends between the
# namespaces, byte by byte. Single-level with the v8 CollNet struct, then
# two-level with v10.
. "$(dirname "$0")/lib.sh" "$1" nc
require_bins incswitchd incamd nccl_collnet_harness
HARNESS=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name nccl_collnet_harness -perm -u+x | head -n1)
PLUGIN=$(find "$INCLAB_BUILD" -maxdepth 4 -name libnccl-net-incin.so | head -n1)
[ -n "$PLUGIN" ] || { echo "SKIP: libnccl-net-incin.so is not built in $INCLAB_BUILD" >&2; TEST_OK=1; exit 77; }

DIR=$(mktemp -d /tmp/incin-nccl.XXXXXX)
at_cleanup 'rm -rf "$DIR"'

# run_job LAB KIND VERSION: one job of the harness on LAB's four workers;
# fails the test unless every rank reports 0 wrong.
run_job() {
  local lab="$P$1" kind=$2 version=$3 t0 rc=0
  mkdir -p "$DIR/$kind"
  t0=$(date +%s.%N)
  "$INCLAB" run "$lab" --quiet --tag "nccl-$kind" -- "$HARNESS" --plugin "$PLUGIN" --am '{am}' \
    --job "{prefix}-nccl-$kind" --rank '{rank}' --world '{world}' --iface '{iface}' --dir "$DIR/$kind" \
    --version "$version" || rc=$?
  grep -h " wrong$" "/tmp/inclab-$lab/logs/nccl-$kind-"w*.log | sed 's/^/  /' || true
  [ "$rc" = 0 ] || fail "$kind: the harness failed (exit $rc; logs /tmp/inclab-$lab/logs/nccl-$kind-w*.log)"
  [ "$(grep -l ": 0 wrong$" "/tmp/inclab-$lab/logs/nccl-$kind-"w*.log | wc -l)" = 4 ] ||
    fail "$kind: not every rank reported 0 wrong"
  note "$kind: 4 ranks, 0 wrong, $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s"
}

note "single-level lab, ncclCollNetPlugin_v8"
lab_up s single
run_job s single 8
lab_down s

note "two-level lab, ncclCollNetPlugin_v10"
lab_up t two
run_job t two 10
pass
