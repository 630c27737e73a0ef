#!/usr/bin/env bash
# lab.client_afxdp_loopback: two private namespaces (prefix cli + pid) joined
# by a veth pair, then the AF_XDP lab test binary. Always cleaned up.
#   afxdp_loopback.sh /path/to/client_lab_test [gtest args]
set -euo pipefail
bin=$1
shift
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (namespaces, XDP)"; exit 77; }
A=cli$$a
B=cli$$b
cleanup() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
ip netns add "$A"
ip netns add "$B"
ip link add cli$$x netns "$A" type veth peer name cli$$y netns "$B"
ip -n "$A" link set cli$$x name ethc
ip -n "$B" link set cli$$y name ethc
ip -n "$A" addr add 10.250.0.1/24 dev ethc
ip -n "$B" addr add 10.250.0.2/24 dev ethc
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" link set ethc up
ip -n "$B" link set ethc up
CLI_NS_A=$A CLI_NS_B=$B CLI_IF_A=ethc CLI_IF_B=ethc "$bin" "$@"
