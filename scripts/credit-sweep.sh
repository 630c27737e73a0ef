#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Credit-based flow control across the two-site WAN lab under several credit
# settings: runs lab.wan_credit (netns-tests/lab_wan_credit.sh) once per
# setting and prints one table row each: goodput, drops, signalling overhead,
# failover time and what was lost in flight. Every run also checks what the
# lab test checks (zero drops, order, failover), so a bad setting fails loudly.
#
#   bash scripts/credit-sweep.sh [--build DIR] [SETTING...]
#
# SETTING is reserve_kb/quantum_kb/heartbeat_ms (default: 16/2/100 16/4/100
# 20/8/100 16/4/30). 3 flows share the lab's 64 KB WAN buffer, so
# 3 x reserve_kb must stay below 64 or the shaper drops again.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build
while [ $# -gt 0 ]; do
  case "$1" in
  --build) BUILD_DIR=$2; shift 2 ;;
  -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "credit-sweep: unknown option $1" >&2; exit 2 ;;
  *) break ;;
  esac
done
SETTINGS=("$@")
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=(16/2/100 16/4/100 20/8/100 16/4/30)
printf '%-9s %-9s %-10s %-26s %-6s %-9s %-34s %s\n' reserve quantum heartbeat goodput drops overhead \
  "failover (failed/moved)" "lost in flight"
rc=0
for s in "${SETTINGS[@]}"; do
  IFS=/ read -r reserve quantum heartbeat <<<"$s"
  [[ "$reserve$quantum$heartbeat" =~ ^[0-9]+$ ]] || { echo "credit-sweep: bad setting '$s'" >&2; exit 2; }
  log=$(mktemp)
  if CREDIT_RESERVE_KB=$reserve CREDIT_QUANTUM_KB=$quantum CREDIT_HEARTBEAT_MS=$heartbeat \
    bash netns-tests/lab_wan_credit.sh "$BUILD_DIR" >"$log" 2>&1; then
    ok=""
  else
    ok=" FAILED (log: $log)"
    rc=1
  fi
  goodput=$(grep -o '(~[0-9.]* Mbit/s of [0-9]*, [0-9]*%)' "$log" | head -1 | tr -d '()~' || true)
  drops=$(grep -o 'WAN shaper drops [0-9]*' "$log" | head -1 | awk '{print $4}' || true)
  overhead=$(grep -o 'data bytes = [0-9.]*%' "$log" | head -1 | awk '{print $4}' || true)
  failover=$(grep -o 'moved to wan1): .*' "$log" | head -1 | cut -d' ' -f4- | tr -d ' ' || true)
  lost=$(grep -o 'lost [0-9]* (in flight' "$log" | head -1 | awk '{print $2}' || true)
  printf '%-9s %-9s %-10s %-26s %-6s %-9s %-34s %s%s\n' "${reserve} KiB" "${quantum} KiB" "${heartbeat} ms" \
    "${goodput:--}" "${drops:--}" "${overhead:--}" "${failover:--}" "${lost:--}" "$ok"
  [ -n "$ok" ] || rm -f "$log"
done
exit $rc
