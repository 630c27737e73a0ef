#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.client_afxdp_loopback and lab.client_xdp_loopback: two private
# namespaces (prefix cli + pid) joined by a veth pair, then the client lab
# test binary with the member transport CLI_TRANSPORT (default afxdp).
# Always cleaned up.
#   [CLI_TRANSPORT=xdp] afxdp_loopback.sh /path/to/client_lab_test [gtest args]
set -euo pipefail
bin=$1
shift
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (namespaces, XDP)"; exit 77; }
A=cli$$a
B=cli$$b
M1=cli$$m1
M2=cli$$m2
cleanup() {
  for ns in "$A" "$B" "$M1" "$M2"; do ip netns del "$ns" 2>/dev/null || true; done
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
# Two more members for the three-rank software-switch test: Mi/ethc <-> B/ethci.
for i in 1 2; do
  m=cli$$m$i
  ip netns add "$m"
  ip link add cli$$p$i netns "$m" type veth peer name cli$$q$i netns "$B"
  ip -n "$m" link set cli$$p$i name ethc
  ip -n "$B" link set cli$$q$i name ethc$i
  ip -n "$m" addr add 10.250.$i.1/24 dev ethc
  ip -n "$B" addr add 10.250.$i.2/24 dev ethc$i
  ip -n "$m" link set lo up
  ip -n "$m" link set ethc up
  ip -n "$B" link set ethc$i up
done
CLI_TRANSPORT=${CLI_TRANSPORT:-afxdp} CLI_NS_M1=$M1 CLI_NS_M2=$M2 CLI_NS_A=$A CLI_NS_B=$B CLI_IF_A=ethc CLI_IF_B=ethc \
  "$bin" "$@"
