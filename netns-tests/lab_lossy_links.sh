#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.lossy_links_<topology>: with the link_fault wire dropping 1 % and then
# 5 % of the frames on every link in both directions, collectives still give
# exact results (retransmission, duplicate suppression at the switch) and the
# wires really dropped frames.
. "$(dirname "$0")/lib.sh" "$1" lossy
KIND=${2:?single or two}
require_bins incamd incswitchd incinctl inc-perf
lab_up l "$KIND" --wire all
L="${P}l"
dropped_total() {
  "$INCLAB" fault-stats "$L" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(v[dir]["dropped"] for v in d.values() for dir in ("ab", "ba")))'
}
for frac in 0.01 0.05; do
  "$INCLAB" fault "$L" all --drop $frac
  before=$(dropped_total)
  pct=${frac#0.}
  run_perf l "ar-f32-$pct" -- allreduce -d float32 -o sum -b 4 -e 4M -f 8 -n 2 -w 0
  run_perf l "ar-i64-$pct" -- allreduce -d int64 -o max -b 8 -e 1M -f 9 -n 2 -w 0
  run_perf l "red-$pct" -- reduce -d int32 -o sum -r 1 -b 4 -e 1M -f 9 -n 2 -w 0
  run_perf l "bc-$pct" -- broadcast -d bfloat16 -r 2 -b 2 -e 256K -f 9 -n 2 -w 0
  run_perf l "bar-$pct" -- barrier -n 20 -w 0
  after=$(dropped_total)
  note "drop $frac: the wires dropped $((after - before)) frames during these jobs"
  [ $((after - before)) -gt 0 ] || fail "no frame was dropped at $frac: the test proved nothing"
done
pass
