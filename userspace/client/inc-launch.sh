#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# inc-launch.sh: run one inc-perf per worker network namespace (rank i in the
# i-th namespace), wait for all, report every rank's exit code.
#
#   inc-launch.sh --am 10.99.0.1:50051 [--job ID] [--iface IF] [--logs DIR] \
#                 [--inc-perf PATH] NS0,NS1,... -- allreduce -b 8 -e 64M -d float32 -o sum
#
# Rank 0's output goes to stdout; every rank's output also goes to
# DIR/rank<i>.log (default: a fresh directory under /tmp). Without --iface,
# each namespace's interface is the first non-loopback one with an IPv4
# address. Exit status: 0 when every rank exited 0, else the first non-zero
# rank exit code (inc-perf: 1 wrong results, 2 usage, 3 setup, 4 collective
# failed); 2 for bad usage of this script. The ranks inherit libinc's
# credentials (INCIN_TLS_CERT/KEY/CA or INCIN_INSECURE=1, and with mTLS the job's
# INCIN_JOB_CREDENTIAL from `incinctl job credential ID`) from this environment,
# so all of them present one member certificate: the AM accepts that only
# for the host it names (docs/operations.md "Security model").
set -uo pipefail

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

am="" job="inc-launch-$$" iface="" logs="" perf=""
while [ $# -gt 0 ]; do
  case $1 in
    --am) am=$2; shift 2 ;;
    --job) job=$2; shift 2 ;;
    --iface) iface=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --inc-perf) perf=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "inc-launch: unknown option $1" >&2; usage ;;
    *) nslist=$1; shift ;;
  esac
done
[ -n "${nslist:-}" ] || { echo "inc-launch: give the namespaces as NS0,NS1,..." >&2; usage; }
[ -n "$am" ] || { echo "inc-launch: --am is required" >&2; usage; }
[ $# -gt 0 ] || { echo "inc-launch: give the inc-perf arguments after --" >&2; usage; }
if [ -z "$perf" ]; then
  perf=$(command -v inc-perf || true)
  [ -n "$perf" ] || perf=$(dirname "$0")/inc-perf
fi
[ -x "$perf" ] || { echo "inc-launch: no inc-perf at '$perf' (use --inc-perf)" >&2; exit 2; }
[ -n "$logs" ] || logs=$(mktemp -d /tmp/inc-launch.XXXXXX)
mkdir -p "$logs"

IFS=, read -r -a namespaces <<<"$nslist"
world=${#namespaces[@]}
pids=()
for rank in "${!namespaces[@]}"; do
  ns=${namespaces[$rank]}
  ip netns pids "$ns" >/dev/null 2>&1 || { echo "inc-launch: no namespace $ns" >&2; exit 2; }
  dev=$iface
  if [ -z "$dev" ]; then
    dev=$(ip -n "$ns" -o -4 addr show | awk '$2 != "lo" { print $2; exit }')
    [ -n "$dev" ] || { echo "inc-launch: no IPv4 interface in $ns (use --iface)" >&2; exit 2; }
  fi
  log=$logs/rank$rank.log
  if [ "$rank" = 0 ]; then
    ip netns exec "$ns" "$perf" "$@" --am "$am" --job "$job" --rank "$rank" --world "$world" --iface "$dev" \
      2>&1 | tee "$log" &
  else
    ip netns exec "$ns" "$perf" "$@" --am "$am" --job "$job" --rank "$rank" --world "$world" --iface "$dev" \
      >"$log" 2>&1 &
  fi
  pids+=($!)
done

# Stop every rank on Ctrl-C/TERM (they leave their group on SIGTERM's exit).
# shellcheck disable=SC2154  # p is the loop variable of the trap's own command
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' INT TERM

rc=0
codes=()
for rank in "${!pids[@]}"; do
  wait "${pids[$rank]}"
  code=$?
  codes+=("rank$rank=$code")
  [ "$rc" = 0 ] && [ "$code" != 0 ] && rc=$code
done
echo "inc-launch: job $job, world $world: ${codes[*]} (logs in $logs)" >&2
exit "$rc"
