#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Soak (not in CI): the lab.chaos scenario (netns-tests/lab_chaos.sh) for an
# hour by default: exact int32 allreduce jobs back to back on a lab with 1 %
# loss, while incamd, each incswitchd and a member rank are SIGKILLed and
# restarted in turn, one every ~--pause seconds (a daemon restart every few
# minutes). Every --report seconds, and at the end, it prints the jobs (exact,
# wrong, failed, hung) and each daemon's RSS and open fds. Exits non-zero on
# any wrong result, hang, unbounded failure, crash or leak (lab_chaos.sh's
# assertions); the records and logs are kept in /tmp/chaos-<lab>.
#
#   scripts/soak.sh [--minutes 60] [--topology single|two] [--pause 120] [--report 300] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60 topology=two pause=120 report=300 build=${BUILD_DIR:-build}
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
  --minutes) minutes=$2; shift 2 ;;
  --topology) topology=$2; shift 2 ;;
  --pause) pause=$2; shift 2 ;;
  --report) report=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  -h | --help) usage 0 ;;
  *) echo "soak.sh: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+$ ]] && [ "$minutes" -ge 1 ] || { echo "soak.sh: --minutes must be >= 1" >&2; exit 2; }
[[ "$pause" =~ ^[0-9]+$ ]] && [ "$pause" -ge 2 ] || { echo "soak.sh: --pause must be >= 2 (s)" >&2; exit 2; }
[[ "$report" =~ ^[0-9]+$ ]] && [ "$report" -ge 1 ] || { echo "soak.sh: --report must be >= 1 (s)" >&2; exit 2; }
case "$topology" in single | two) ;; *) echo "soak.sh: --topology single or two" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "soak.sh: run as root (XDP, namespaces, bpffs)" >&2; exit 1; }
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
echo "soak: $minutes min on the $topology lab, a fault every ~$pause s, a report every $report s"
# Pauses of pause/2..pause*3/2 around the asked mean.
CHAOS_SECONDS=$((minutes * 60)) CHAOS_PAUSE_MIN=$((pause / 2)) CHAOS_PAUSE_MAX=$((pause * 3 / 2)) \
  CHAOS_REPORT_S=$report exec bash netns-tests/lab_chaos.sh "$build" "$topology"
