#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.concurrent_jobs: two jobs of two ranks each run at the same time through
# the one leaf switch (w0,w1 and w2,w3). Each gets its own tree, slots and key;
# each rank's result is checked against its own job's reference. The jobs
# differ in data type (int32 vs float32 bit patterns) and sizes, so a
# contribution of one job counted in the other shows up as wrong elements.
. "$(dirname "$0")/lib.sh" "$1" cj
require_bins incamd incswitchd incinctl inc-perf
lab_up j single
perf j jobA --workers w0,w1 -- allreduce -d int32 -o sum -b 4 -e 4M -f 4 -n 3 -w 1 &
A=$!
perf j jobB --workers w2,w3 -- allreduce -d float32 -o sum -b 4 -e 4M -f 3 -n 3 -w 1 &
B=$!
rc=0
wait $A || rc=1
wait $B || rc=1
[ $rc = 0 ] || fail "a concurrent job failed"
# Both jobs really were on the switch as separate trees.
"$INCLAB" ctl "${P}j" -o json tree list | python3 -c '
import json, sys
trees = json.load(sys.stdin).get("trees", [])
jobs = {t["job_id"]: t["tree_id"] for t in trees}
a, b = [jobs.get(sys.argv[1] + j) for j in ("-jobA", "-jobB")]
print(f"  trees: jobA {a}, jobB {b}")
sys.exit(0 if a and b and a != b else 1)' "${P}j" || fail "the two jobs did not get two distinct trees"
pass
