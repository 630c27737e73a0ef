#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.switch_agent wrapper: runs the GoogleTest lab binary with a unique
# namespace prefix and removes whatever that prefix left behind (namespaces,
# agents, pins, temp dirs) even if the test binary crashes.
#   lab_switch.sh SWITCH_LAB_TEST INCSWITCHD [INCAMD] [gtest args...]
# INCAMD may be empty or not built: the real-AM case then skips.
set -u
test_bin=$1
agent_bin=$2
am_bin=${3:-}
shift 2
[ $# -gt 0 ] && shift
if [ "$(id -u)" -ne 0 ]; then
  echo "lab.switch_agent: needs root (namespaces, XDP, bpffs)" >&2
  exec "$test_bin" "$@"  # every test reports GTEST_SKIP with the reason
fi
export CSW_PREFIX="csw$$"
export INCSWITCHD=$agent_bin
export INCAMD=$am_bin

cleanup() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${CSW_PREFIX}t" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf /sys/fs/bpf/"${CSW_PREFIX}"t* /tmp/"${CSW_PREFIX}"t* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$test_bin" "$@"
