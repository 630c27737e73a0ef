#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.link_fault_drops: the link_fault wire drops the configured fraction of
# frames in each direction (binomial bounds, not timing), counts exactly what
# it dropped, and with --roce-only spares everything but UDP 4791.
. "$(dirname "$0")/lib.sh" "$1" fault
PROBE="$LAB_TESTS_DIR/udp_probe.py"
N=20000

lab_up f single --no-daemons --wire w0
L="${P}f"

# send_and_count FROM_NODE TO_NODE TO_IP PORT -> prints "received"
send_and_count() {
  local from=$1 to=$2 ip=$3 port=$4
  rm -f "/tmp/inclab-$L/recv.json" "/tmp/inclab-$L/recv.err"
  "$INCLAB" exec "$L" "$to" python3 "$PROBE" recv "$port" 1 >"/tmp/inclab-$L/recv.json" 2>"/tmp/inclab-$L/recv.err" &
  local rpid=$!
  for _ in $(seq 100); do grep -q ready "/tmp/inclab-$L/recv.err" 2>/dev/null && break; sleep 0.1; done
  "$INCLAB" exec "$L" "$from" python3 "$PROBE" send "$ip" "$port" "$N"
  wait $rpid
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["received"], d["rcvbuf_errors"])' "/tmp/inclab-$L/recv.json"
}

counter() {  # dir(ab|ba) name
  "$INCLAB" fault-stats "$L" w0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["w0"][sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

# check_fraction DIR FRACTION FROM TO IP PORT EXPECT_DROPS(1|0)
check_fraction() {
  local dir=$1 frac=$2 from=$3 to=$4 ip=$5 port=$6 expect=$7
  local d0 e0 d1 e1 got errs dropped eligible
  d0=$(counter "$dir" dropped)
  e0=$(counter "$dir" eligible)
  read -r got errs < <(send_and_count "$from" "$to" "$ip" "$port")
  d1=$(counter "$dir" dropped)
  e1=$(counter "$dir" eligible)
  dropped=$((d1 - d0))
  eligible=$((e1 - e0))
  note "$dir drop=$frac port=$port: sent $N received $got (rcvbuf errors $errs), wire dropped $dropped of $eligible eligible"
  # Exact accounting: every datagram either arrived, was dropped by the wire,
  # or overflowed the receiver's socket buffer.
  [ $((got + dropped + errs)) = "$N" ] || fail "received $got + wire drops $dropped + rcvbuf $errs != sent $N"
  if [ "$expect" = 0 ]; then
    [ "$dropped" = 0 ] || fail "wire dropped $dropped frames it should have spared"
    return
  fi
  python3 - "$N" "$frac" "$dropped" <<'PY' || fail "drop count outside 6 sigma of the setting"
import math, sys
n, p, d = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
mean, sd = n * p, math.sqrt(n * p * (1 - p))
print(f"  measured drop fraction {d / n:.4f} (setting {p}, 6 sigma = ±{6 * sd / n:.4f})")
sys.exit(0 if abs(d - mean) <= 6 * sd else 1)
PY
}

"$INCLAB" fault "$L" w0 --drop 0.05
check_fraction ab 0.05 w0 w1 10.0.1.2 4791 1   # worker -> switch direction
check_fraction ba 0.05 w1 w0 10.0.0.2 4791 1   # switch -> worker direction
"$INCLAB" fault "$L" w0 --drop 0.01
check_fraction ab 0.01 w0 w2 10.0.2.2 4791 1
check_fraction ba 0.01 w2 w0 10.0.0.2 4791 1
"$INCLAB" fault "$L" w0 --drop 0.05 --roce-only
check_fraction ab 0.05 w0 w1 10.0.1.2 9000 0   # not RoCEv2: spared
check_fraction ab 0.05 w0 w1 10.0.1.2 4791 1
"$INCLAB" fault "$L" w0 --drop 0.05 --dir ab
check_fraction ba 0.05 w1 w0 10.0.0.2 4791 0   # other direction lossless
"$INCLAB" fault "$L" w0 --drop 0
check_fraction ab 0 w0 w1 10.0.1.2 4791 0
pass
