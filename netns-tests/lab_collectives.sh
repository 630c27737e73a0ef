#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.collectives_<topology>: allreduce, reduce, broadcast and barrier through
# the XDP switches of the single- or two-level lab give exact results on
# every rank: big sizes (up to 64 MiB) for float32 sum, one element and odd
# element counts (1, 3, 9, ... crossing packet boundaries) for every data
# type x operation, float sums on both sides of the one-packet gather
# threshold, and a repeated run. inc-perf checks every element of
# every rank against the exact host reference.
. "$(dirname "$0")/lib.sh" "$1" col
KIND=${2:?single or two}
require_bins incamd incswitchd incinctl inc-perf
lab_up k "$KIND"
L=k

note "$KIND: float32 sum allreduce 4 B .. 64 MiB"
run_perf $L big -- allreduce -d float32 -o sum -b 4 -e 64M -f 4 -n 2 -w 1

DTYPES="int32 float32 int64 float16 bfloat16 float64"
esize() { case $1 in int64 | float64) echo 8 ;; float16 | bfloat16) echo 2 ;; *) echo 4 ;; esac; }
for d in $DTYPES; do
  e=$(esize "$d")
  for op in sum min max; do
    # 1, 3, 9, ..., 2187 elements (odd counts; >240 spans several packets)
    run_perf $L "ar-$d-$op" -- allreduce -d "$d" -o "$op" -b "$e" -e $((e * 2187)) -f 3 -n 2 -w 0
  done
  run_perf $L "red-$d" -- reduce -d "$d" -o sum -r 2 -b "$e" -e $((e * 2187)) -f 3 -n 2 -w 0
  run_perf $L "bc-$d" -- broadcast -d "$d" -r 1 -b "$e" -e $((e * 2187)) -f 3 -n 2 -w 0
done
# Float sums whose four ranks' elements fit one packet are gathered through
# one INT32 SUM and added in rank order; one more element takes block fixed
# point. At 240 four-byte lanes per packet the last count that fits is 60
# float32, 30 float64 and 120 float16 elements. Messages rank 0 sent (first
# transmissions) tell the paths apart: 2 gathers, or 1 pre-pass + 1 data pass
# then 1 data pass whose exponents are guessed from the first call (same type
# and count), + inc-perf's own #wrong allreduce. In the two-level lab a leaf
# certifies an element from its own members' magnitudes only, so elements
# small on both of a leaf's ranks come back uncertified and are gathered again
# (more messages): there the fixed-point side must show those redos.
status_of() {  # TAG: "messages uncertified_blocks gathered_blocks" of rank 0
  python3 -c 'import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and "\"results\"" in l]
s = docs[-1]["status"] if docs else {}
print(s.get("messages", "none"), s.get("uncertified_blocks", "none"), s.get("gathered_blocks", "none"))' "/tmp/inclab-$P$L/logs/$1-w0.log"
}
for d in float32 float64 float16; do
  e=$(esize "$d")
  t=$((960 / 4 / e))
  for c in $((t - 1)) $t $((t + 1)); do
    run_perf $L "edge-$d-$c" -- allreduce -d "$d" -o sum --elems 240 -b $((e * c)) -e $((e * c)) -n 2 -w 0
    read -r got uncertified gathered <<<"$(status_of "edge-$d-$c")"
    ok=1
    if [ "$c" -le "$t" ]; then
      [ "$got" = 3 ] && [ "$uncertified" = 0 ] || ok=0
    elif [ "$KIND" = single ] || [ "$uncertified" = 0 ]; then
      [ "$got" = 4 ] && [ "$uncertified" = 0 ] || ok=0
    else
      # Fixed point twice, each uncertified block gathered once more.
      [ "$got" -gt 4 ] && [ "$gathered" = "$uncertified" ] || ok=0
    fi
    [ $ok = 1 ] || { echo "FAIL: edge-$d-$c sent $got messages ($uncertified uncertified, $gathered gathered blocks)" >&2; FAILED+=("edge-$d-$c-messages"); }
  done
done
# A leaf builds its partial in the frame of the message's last contribution;
# veth copies a frame that came from the stack into a page-pool fragment
# sized to fit, so partials of about 250-370 four-byte elements have no
# tailroom for the certificate trailer and grow at the head instead
# (bpf/replicate.h). Every element of inc-perf's data is certified by either
# leaf alone (one of each leaf's ranks holds a nonzero value), so no block
# may come back uncertified.
run_perf $L cert-trailer -- allreduce -d float32 -o sum -b 1K -e 1300 -f 1.1 -n 3 -w 0
read -r got uncertified gathered <<<"$(status_of cert-trailer)"
[ "$uncertified" = 0 ] || { echo "FAIL: cert-trailer: $uncertified of $got messages uncertified" >&2; FAILED+=(cert-trailer); }
run_perf $L "red-edge-float32" -- reduce -d float32 -o sum -r 3 --elems 240 -b 240 -e 245 -f 1.017 -n 2 -w 0
run_perf $L "ar-small-fixed" -- allreduce -d float32 -o sum --small-sum fixed -b 4 -e 256 -f 4 -n 2 -w 0
run_perf $L "red-max-root3" -- reduce -d int32 -o max -r 3 -b 4 -e 1M -f 16 -n 2 -w 0
note "bitwise: AND/OR/XOR of int32 (odd counts: the switch works on 64-bit words) and int64"
run_perf $L "ar-band-int32" -- allreduce -d int32 -o band -b 4 -e 256K -f 7 -n 2 -w 0
run_perf $L "ar-bor-int64" -- allreduce -d int64 -o bor -b 8 -e 256K -f 8 -n 2 -w 0
run_perf $L "red-bxor-root2" -- reduce -d int32 -o bxor -r 2 -b 4 -e 64K -f 9 -n 2 -w 0
run_perf $L "bc-root0-big" -- broadcast -d float32 -r 0 -b 4 -e 4M -f 16 -n 2 -w 0
run_perf $L barrier -- barrier -n 50 -w 1
note "repeat: the same job twice gives the same exact results"
run_perf $L rep1 -- allreduce -d float32 -o sum -b 4 -e 1M -f 7 -n 3 -w 0
run_perf $L rep2 -- allreduce -d float32 -o sum -b 4 -e 1M -f 7 -n 3 -w 0
pass
