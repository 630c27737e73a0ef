#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The benchmark suite: incin's in-network allreduce against ring allreduce
# baselines (Open MPI over TCP, Gloo ring over TCP) and against a
# packet-forwarding ceiling, on the namespace lab's single- and two-level
# topologies, at the same sizes, data type and worker count. Prints one table
# per topology (medians over the repetitions) and the targets met or missed,
# and writes CSV files, PNG plots and the machine record into the output
# directory.
#
#   bash scripts/bench.sh [--quick] [--reps N] [--out DIR] [--build DIR]
#                         [--no-build] [--topologies single,two]
#                         [--systems inc,mpi,gloo,ceiling] [--mtu N]
#                         [--workers 2|4] [--ranks-per-host N]
#
#   --quick       sizes 8 B, 64 KiB, 1 MiB and 1 repetition (the smoke test)
#   --reps N      repetitions of every configuration (default 5)
#   --out DIR     results (default bench-results/<UTC time>)
#   --build DIR   build directory (default build); --no-build uses it as is
#   --mtu N       lab MTU (default 9000: 768 four-byte elements per packet)
#   --workers N   4 (w0..w3, default) or 2 (w0 and w1: no more ranks than
#                 this VM's 2 vCPUs; in the two-level topology both sit on
#                 leaf0, so the run never crosses a spine)
#   --ranks-per-host N  N ranks on every worker (world = workers x N): INC
#                 through libinc's shared-memory host stage (one tree
#                 member per worker), Open MPI with its shared-memory
#                 transport (vader) inside a worker and ranks in blocks,
#                 Gloo over TCP; no ceiling (it reflects one member per
#                 port). Default 1
#
# Per topology two labs are up at once (same addresses, separate namespaces):
# one with incamd/incswitchd (the INC runs) and one without daemons, whose
# switch namespaces forward IP by ordinary kernel routing (Open MPI, Gloo)
# and where, for the ceiling, bpf/bench/fwd_ceiling.bpf.c turns every INC
# contribution straight back to its sender on the leaves' worker ports
# (bench/suite/fwd_ceiling.cc; the members run the unchanged inc-perf
# with an AM-less assignment and -c 0). Repetitions interleave the systems.
#
# Definitions (also in summary.md): time = mean per iteration on rank 0
# (inc-perf's method, used by every system); speedup vs Open MPI = Open MPI
# time / INC time, vs Gloo likewise, vs the faster ring = min(ring times) /
# INC time (> 1: INC is faster); INC/ceiling = INC time / ceiling time (1 =
# as fast as forwarding); algbw = size / time; busbw = algbw * 2(n-1)/n for
# every system (nccl-tests' allreduce definition), so busbw ratios equal the
# speedups. runs.csv has the 1-minute load average before and after every
# run; the summary flags runs where it exceeded 0.75 x the CPU count.
# Exit status: 0 when every run succeeded with no wrong element, else 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ "$(id -u)" -eq 0 ] || { echo "bench.sh: run as root (namespaces, XDP, bpffs)" >&2; exit 1; }

QUICK=0
REPS=5
REPS_SET=0
OUT=""
BUILD_DIR=build
DO_BUILD=1
TOPOLOGIES="single two"
SYSTEMS="inc mpi gloo ceiling"
MTU=9000
DTYPE=float32
NWORKERS=4
PER_HOST=1
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) QUICK=1; shift ;;
  --reps) REPS=$2; REPS_SET=1; shift 2 ;;
  --out) OUT=$2; shift 2 ;;
  --build) BUILD_DIR=$2; shift 2 ;;
  --no-build) DO_BUILD=0; shift ;;
  --topologies) TOPOLOGIES=${2//,/ }; shift 2 ;;
  --systems) SYSTEMS=${2//,/ }; shift 2 ;;
  --mtu) MTU=$2; shift 2 ;;
  --workers) NWORKERS=$2; shift 2 ;;
  --ranks-per-host) PER_HOST=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --reps must be a positive number" >&2; exit 2; }
[ "$QUICK" = 1 ] && [ "$REPS_SET" = 0 ] && REPS=1
case $NWORKERS in
2) WORKER_LIST=w0,w1 ;;
4) WORKER_LIST=w0,w1,w2,w3 ;;
*) echo "bench.sh: --workers must be 2 or 4" >&2; exit 2 ;;
esac
[[ "$PER_HOST" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --ranks-per-host must be a positive number" >&2; exit 2; }
if [ "$PER_HOST" -gt 1 ] && [[ " $SYSTEMS " == *" ceiling "* ]]; then
  echo "bench.sh: --ranks-per-host $PER_HOST: the ceiling is left out (one reflected member per port)" >&2
  SYSTEMS=$(echo " $SYSTEMS " | sed "s/ ceiling / /")
fi
RANKS=$((NWORKERS * PER_HOST))
for t in $TOPOLOGIES; do
  case $t in single | two) ;; *) echo "bench.sh: unknown topology $t" >&2; exit 2 ;; esac
done
for s in $SYSTEMS; do
  case $s in inc | mpi | gloo | ceiling) ;; *) echo "bench.sh: unknown system $s" >&2; exit 2 ;; esac
done

# Size ranges, one process launch each: MIN MAX FACTOR ITERS WARMUP. Fewer
# iterations for the large sizes keep a full run near 20-30 minutes here.
if [ "$QUICK" = 1 ]; then
  RANGES=("8 64K 8192 10 2" "1M 1M 2 3 1")
  RUN_TIMEOUT=120
else
  RANGES=("8 32K 8 20 5" "256K 16M 8 5 1" "64M 64M 2 3 1")
  RUN_TIMEOUT=900
fi

BUILD=$(readlink -f "$BUILD_DIR" 2>/dev/null || echo "$ROOT/$BUILD_DIR")
[ -n "$OUT" ] || OUT="$ROOT/bench-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT/logs"
OUT=$(readlink -f "$OUT")
INCLAB="$ROOT/netns-tests/inclab"
INCMPIRUN="$ROOT/netns-tests/inc-mpirun"
export INCLAB_BUILD="$BUILD"

step() { printf '\n=== [%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

if [ "$DO_BUILD" = 1 ]; then
  step "dependencies and build ($BUILD, target bench_suite)"
  bash scripts/deps.sh
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
  cmake --build "$BUILD" --target bench_suite -j"${JOBS:-2}"
fi
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

find_exe() { find "$BUILD" -maxdepth 4 -type f -name "$1" -perm -u+x 2>/dev/null | head -n1; }
INC_PERF=$(find_exe inc-perf)
MPI_PERF=$(find_exe mpi-allreduce-perf)
GLOO_PERF=$(find_exe gloo-allreduce-perf)
FWD=$(find_exe fwd-ceiling)
need() {  # system binary-variable-value name
  if [ -z "$2" ]; then
    echo "bench.sh: $3 is not built in $BUILD: system '$1' left out" >&2
    SYSTEMS=$(echo " $SYSTEMS " | sed "s/ $1 / /")
  fi
}
need inc "$INC_PERF" inc-perf
need ceiling "$INC_PERF" inc-perf
need ceiling "$FWD" fwd-ceiling
need mpi "$MPI_PERF" mpi-allreduce-perf
command -v mpirun >/dev/null || need mpi "" mpirun
need gloo "$GLOO_PERF" gloo-allreduce-perf
[ -n "${SYSTEMS// /}" ] || { echo "bench.sh: nothing to run" >&2; exit 1; }

# ------------------------------------------------------------ machine record
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (working tree differs)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x $(nproc)"
  echo "kernel: $(uname -r)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "open mpi: $(mpirun --version 2>/dev/null | head -n1 || echo none)"
  echo "gloo: $(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null || echo unknown)"
  echo "mode: $([ "$QUICK" = 1 ] && echo quick || echo full), reps $REPS, mtu $MTU, dtype $DTYPE sum, $NWORKERS workers ($WORKER_LIST), $PER_HOST rank(s) per worker"
  echo "systems: $SYSTEMS"
  echo "ranges (min max factor iters warmup): $(printf '[%s] ' "${RANGES[@]}")"
} >"$OUT/machine.txt"
step "machine"
cat "$OUT/machine.txt"

# With one rank per worker, Open MPI's placement stays inc-mpirun's default.
MPI_PLACEMENT=()
[ "$PER_HOST" = 1 ] || MPI_PLACEMENT=(--ranks-per-host "$PER_HOST")

RAW="$OUT/raw.csv"
echo "topology,system,workers,rep,size_bytes,time_us,algbw_GBps,busbw_GBps,wrong" >"$RAW"
RUNS="$OUT/runs.csv"
echo "topology,system,rep,run,exit,seconds,retransmissions,load1_before,load1_after,idle_pct,steal_pct" >"$RUNS"
FAILED=0

LABS=()
CEIL_PIDS=()
cleanup() {
  local rc=$? p
  trap '' PIPE
  for p in "${CEIL_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${LABS[@]}"; do "$INCLAB" down "$p" --keep-logs >/dev/null 2>&1 || true; done
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$INCLAB" reap

# Appends one CSV row per size from a run's output: inc-perf --json, or the
# table printed by inc-perf and the baselines.
record() {  # topology system rep logfile workers (a world the output names wins)
  python3 - "$@" >>"$RAW" <<'EOF'
import json, sys
topo, system, rep, path, world = sys.argv[1:6]
world = int(world)
rows = []
for line in open(path, errors="replace"):
    line = line.strip()
    if line.startswith('{"collective"'):
        doc = json.loads(line)
        world = doc["world"]
        rows += [(r["size"], r["time_us"], r["wrong"]) for r in doc["results"]]
    elif line.startswith("#") and " world " in line:
        world = int(line.split(" world ")[1].split()[0])
    elif line and not line.startswith("#"):
        f = line.split()
        if len(f) == 9 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), int(f[8])))
# From the time, not the printed (rounded) bandwidths; busbw = algbw *
# 2(n-1)/n for every system.
for size, t, wrong in rows:
    alg = size / t / 1e3 if t > 0 else 0.0
    bus = alg * 2 * (world - 1) / world
    print(f"{topo},{system},{world},{rep},{size},{t:.3f},{alg:.9f},{bus:.9f},{wrong}")
if not rows:
    sys.exit(f"no result rows in {path}")
EOF
}

# run TOPOLOGY SYSTEM REP LOG cmd...: runs with a time limit, records rows.
# cpu_times: the aggregate "cpu" line of /proc/stat (user nice system idle
# iowait irq softirq steal ...), for the idle and steal shares of a run.
cpu_times() { sed -n 's/^cpu  //p' /proc/stat; }
cpu_shares() {  # BEFORE AFTER: "idle_pct,steal_pct" of all CPUs between the two readings
  python3 -c 'import sys
b, a = [list(map(int, s.split())) for s in sys.argv[1:3]]
d = [y - x for x, y in zip(b, a)]
total = sum(d[:8]) or 1
print(f"{100 * (d[3] + d[4]) / total:.1f},{100 * d[7] / total:.1f}")' "$1" "$2"
}

run() {
  local topo=$1 sys=$2 rep=$3 log=$4 rc=0 t0=$SECONDS retx load0 cpu0
  shift 4
  load0=$(cut -d' ' -f1 /proc/loadavg)
  cpu0=$(cpu_times)
  timeout --kill-after=20 "$RUN_TIMEOUT" "$@" >"$log" 2>&1 || rc=$?
  # Open MPI's launch across the lab's namespaces now and then hangs before
  # any rank starts (about 1 run in 20 on the loaded VM; lab_mpi.sh retries
  # too): a run that timed out without a single result row is retried once,
  # and the first log is kept as .hang.log.
  if [ "$rc" = 124 ] && [ "$sys" = mpi ] && ! grep -qE '^ *[0-9]+ +[0-9]+ ' "$log"; then
    mv "$log" "${log%.log}.hang.log"
    echo "bench.sh: $sys on $topo (rep $rep) hung before its first result; retrying once" >&2
    rc=0
    timeout --kill-after=20 "$RUN_TIMEOUT" "$@" >"$log" 2>&1 || rc=$?
  fi
  # libinc's retransmissions (INC and ceiling; rank 0, whole run).
  retx=$(python3 -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("{\"collective\""):
        print(json.loads(line)["status"].get("retransmissions", "")); break' "$log" 2>/dev/null || true)
  echo "$topo,$sys,$rep,$(basename "$log" .log),$rc,$((SECONDS - t0)),$retx,$load0,$(cut -d' ' -f1 /proc/loadavg),$(cpu_shares "$cpu0" "$(cpu_times)")" \
    >>"$RUNS"
  if [ $rc -ne 0 ]; then
    echo "bench.sh: $sys on $topo (rep $rep) failed with exit $rc; log $log" >&2
    tail -n 15 "$log" | sed 's/^/  | /' >&2
    FAILED=1
  fi
  record "$topo" "$sys" "$rep" "$log" "$RANKS" || { FAILED=1; return 0; }
  if awk -F, -v s="$sys" -v t="$topo" -v r="$rep" '$1==t && $2==s && $4==r && $9 > 0 {bad=1} END {exit !bad}' "$RAW"; then
    echo "bench.sh: $sys on $topo (rep $rep) reported wrong elements; log $log" >&2
    FAILED=1
  fi
  return 0
}

# inclab turns TX checksum offload (and with it TSO) off on every veth, for
# frames that XDP redirects; the kernel-forwarding lab has no XDP on its
# TCP path, so the baselines get the kernel's defaults back, as TCP on plain
# Linux has them (Open MPI, 64 MiB, one run each under load: 2.6 s per
# allreduce without, 1.4 s with).
restore_offloads() {  # lab prefix
  local ns dev
  for ns in $(ip netns list | awk '{print $1}' | grep "^$1-"); do
    for dev in $(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
      [ "$dev" = lo ] || ip netns exec "$ns" ethtool -K "$dev" tx on tso on gso on >/dev/null 2>&1 || true
    done
  done
}

# The leaves with workers of the run (w0, w1 on leaf0 and w2, w3 on leaf1 in
# the two-level topology; all on leaf0 in the single-level one).
leaves_of() {  # topology -> "leaf:w,w ..."
  if [ "$1" = single ]; then
    [ "$NWORKERS" = 2 ] && echo "leaf0:0,1" || echo "leaf0:0,1,2,3"
  else
    [ "$NWORKERS" = 2 ] && echo "leaf0:0,1" || echo "leaf0:0,1 leaf1:2,3"
  fi
}

# The AM-less assignment of each member (rank i = worker wi) for the ceiling:
# the leaf port's address, switch QPN 400+i, and the pool and packet size of
# the INC runs.
write_assignments() {  # topology dir pool elems
  local topo=$1 dir=$2 pool=$3 elems=$4 i at ranks
  ranks=$(seq -s ', ' 0 $((NWORKERS - 1)))
  mkdir -p "$dir"
  for i in $(seq 0 $((NWORKERS - 1))); do
    at=$i
    [ "$topo" = two ] && at=$((i % 2))
    cat >"$dir/asg-$i.json" <<EOF
{"treeId": 1, "key": 305419896, "poolSize": $pool, "elemsPerPacket": $elems, "rankAtSwitch": $at,
 "memberIndex": $i, "switchName": "ceiling", "switchIp": "10.0.$i.1", "switchMac": "02:1a:00:00:0$i:01",
 "switchQpn": $((400 + i)), "heartbeatIntervalMs": 0, "memberIndexOfRank": [$ranks], "worldSize": $NWORKERS,
 "dtypes": ["INT32", "FP32", "INT64", "FP16", "BF16", "FP64"], "ops": ["SUM", "MIN", "MAX"],
 "collectives": ["ALLREDUCE", "REDUCE", "BROADCAST", "BARRIER", "REDUCE_SCATTER", "ALLGATHER"]}
EOF
  done
}

ceiling_run() {  # topology rep k lab min max factor iters warmup
  local topo=$1 rep=$2 k=$3 lab=$4 min=$5 max=$6 f=$7 n=$8 w=$9
  local tag="$topo-ceiling-r$rep-$k" leaf idx j spec pids=() p ok=1 tries=0 ports
  for spec in $(leaves_of "$topo"); do
    leaf=${spec%%:*}
    idx=${spec#*:}
    ports=()
    for j in ${idx//,/ }; do ports+=(--port "w$j,10.0.$j.2,10.0.$j.1,$((300 + j)),$((400 + j))"); done
    "$INCLAB" exec "$lab" "$leaf" "$FWD" "${ports[@]}" >"$OUT/logs/$tag-fwd-$leaf.log" 2>&1 &
    pids+=($!)
    CEIL_PIDS+=($!)
  done
  # Every loader prints "attached" once its ports carry the program.
  while [ "$(grep -l attached "$OUT/logs/$tag-fwd-"*.log 2>/dev/null | wc -l)" -lt "${#pids[@]}" ]; do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || ok=0; done
    tries=$((tries + 1))
    [ $ok = 1 ] && [ $tries -lt 150 ] || { ok=0; break; }
    sleep 0.2
  done
  if [ $ok = 1 ]; then
    run "$topo" ceiling "$rep" "$OUT/logs/$tag.log" \
      "$INCLAB" run "$lab" --workers "$WORKER_LIST" --tag ceiling -- \
      "$INC_PERF" allreduce -d "$DTYPE" -o sum -b "$min" -e "$max" -f "$f" -n "$n" -w "$w" -c 0 --json \
      --assignment "$OUT/ceiling-$topo/asg-{rank}.json" --qpn '30{rank}' \
      --rank '{rank}' --world '{world}' --iface '{iface}'
  else
    echo "bench.sh: fwd-ceiling did not attach on $topo; logs $OUT/logs/$tag-fwd-*.log" >&2
    FAILED=1
  fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  CEIL_PIDS=()
  # The counters prove the frames went through the XDP reflector.
  local reflected
  reflected=$(cat "$OUT/logs/$tag-fwd-"*.log | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    if line.startswith("{"):
        n += json.loads(line).get("reflected", 0)
print(n)')
  echo "  ceiling $topo rep $rep range $k: $reflected frames reflected by fwd_ceiling"
  [ "$reflected" -gt 0 ] || { echo "bench.sh: fwd_ceiling reflected nothing" >&2; FAILED=1; }
}

for topo in $TOPOLOGIES; do
  t=${topo:0:1}
  LAB_INC="bi$$$t"
  LAB_KRN="bk$$$t"
  step "$topo-level: labs $LAB_INC (incamd + incswitchd) and $LAB_KRN (kernel forwarding)," \
    "mtu $MTU, workers $WORKER_LIST"
  if [[ " $SYSTEMS " == *" inc "* ]]; then
    LABS+=("$LAB_INC")
    "$INCLAB" up "$topo" --prefix "$LAB_INC" --mtu "$MTU" --owner $$ --build "$BUILD" >/dev/null
  fi
  LABS+=("$LAB_KRN")
  "$INCLAB" up "$topo" --prefix "$LAB_KRN" --mtu "$MTU" --owner $$ --build "$BUILD" --no-daemons >/dev/null
  restore_offloads "$LAB_KRN"
  "$INCLAB" check "$LAB_KRN"
  # The AM's defaults, replaced by what the INC runs report.
  POOL=256
  ELEMS=768
  for rep in $(seq 1 "$REPS"); do
    k=0
    for range in "${RANGES[@]}"; do
      k=$((k + 1))
      read -r min max f n w <<<"$range"
      step "$topo-level rep $rep/$REPS: sizes $min..$max (x$f), $n iterations + $w warmup"
      if [[ " $SYSTEMS " == *" inc "* ]]; then
        log="$OUT/logs/$topo-inc-r$rep-$k.log"
        run "$topo" inc "$rep" "$log" "$INCLAB" run "$LAB_INC" --workers "$WORKER_LIST" --ranks-per-host "$PER_HOST" \
          --tag inc -- \
          "$INC_PERF" allreduce -d "$DTYPE" -o sum -b "$min" -e "$max" -f "$f" -n "$n" -w "$w" --json \
          --am '{am}' --job "bench-$rep-$k" --rank '{rank}' --world '{world}' --iface '{iface}'
        # The ceiling moves the same packets: the INC tree's pool and packet size.
        read -r POOL ELEMS < <(python3 -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("{\"collective\""):
        s = json.loads(line)["status"]
        print(s["pool_size"], s["elems_per_packet"]); break
else:
    print(sys.argv[2], sys.argv[3])' "$log" "$POOL" "$ELEMS")
      fi
      if [[ " $SYSTEMS " == *" mpi "* ]]; then
        run "$topo" mpi "$rep" "$OUT/logs/$topo-mpi-r$rep-$k.log" \
          "$INCMPIRUN" "$LAB_KRN" --workers "$WORKER_LIST" "${MPI_PLACEMENT[@]}" -- \
          "$MPI_PERF" -d "$DTYPE" -o sum -b "$min" -e "$max" -f "$f" -n "$n" -w "$w"
      fi
      if [[ " $SYSTEMS " == *" gloo "* ]]; then
        store=$(mktemp -d /tmp/incbench-gloo.XXXXXX)
        run "$topo" gloo "$rep" "$OUT/logs/$topo-gloo-r$rep-$k.log" \
          "$INCLAB" run "$LAB_KRN" --workers "$WORKER_LIST" --ranks-per-host "$PER_HOST" --tag gloo -- \
          "$GLOO_PERF" -d "$DTYPE" -o sum -b "$min" -e "$max" -f "$f" -n "$n" -w "$w" \
          --rank '{rank}' --world '{world}' --store "$store" --iface eth0
        rm -rf "$store"
      fi
      if [[ " $SYSTEMS " == *" ceiling "* ]]; then
        write_assignments "$topo" "$OUT/ceiling-$topo" "$POOL" "$ELEMS"
        ceiling_run "$topo" "$rep" "$k" "$LAB_KRN" "$min" "$max" "$f" "$n" "$w"
      fi
    done
  done
  for p in "$LAB_INC" "$LAB_KRN"; do
    [[ " ${LABS[*]} " == *" $p "* ]] || continue
    "$INCLAB" down "$p" >/dev/null
  done
  LABS=()
done

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
step "report"
python3 "$ROOT/bench/suite/bench_report.py" --raw "$RAW" --runs "$RUNS" --machine "$OUT/machine.txt" \
  --ranks-per-host "$PER_HOST" \
  --high-load "$(awk -v n="$(nproc)" 'BEGIN {print 0.75 * n}')" --out "$OUT"
echo "results in $OUT (summary.md, bench.csv, raw.csv, runs.csv, busbw-*.png, logs/)"
[ "$FAILED" = 0 ] || { echo "bench.sh: some runs failed or reported wrong elements (see above)" >&2; exit 1; }
