#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# PID 1 of the rxe lab guest (started by guest/init): prepares the guest
# (mounts, modules), checks that rdma_rxe works inside a network namespace,
# runs the scenarios named by incin.scen= (rxe-scenario.sh), writes one line
# per scenario to results.txt on the host share, and powers off.
LOG_PREFIX=RXE
. "$(dirname "$(readlink -f "$0")")/guest-setup.sh"
SCEN=$(arg scen | tr , ' ')
sysctl -qw kernel.printk="4 4 1 7"
log "guest up: kernel $(uname -r), $(nproc) vCPU, boot to script $(up) s"
result "BOOT $(up) s kernel $(uname -r)"
modprobe -a rdma_rxe ib_uverbs veth bridge || {
  result "setup FAIL (modprobe rdma_rxe ib_uverbs veth bridge)"
  exit 1
}
rdma system show

# rxe inside a namespace is what the scenarios need (Debian 7.x kernels).
check_rxe_netns() {
  ip netns add rxchk || return 1
  ip link add rxchk0 netns rxchk type veth peer name rxchk1 netns rxchk
  ip -n rxchk addr add 192.168.250.1/24 dev rxchk0
  ip -n rxchk link set rxchk0 up
  ip -n rxchk link set rxchk1 up
  local ok=1
  if ip netns exec rxchk rdma link add rxchk_rxe type rxe netdev rxchk0; then
    for _ in $(seq 50); do
      grep -qs "ffff:c0a8:fa01" /sys/class/infiniband/rxchk_rxe/ports/1/gids/* && { ok=0; break; }
      sleep 0.1
    done
    rdma link del rxchk_rxe
  fi
  ip netns del rxchk
  return $ok
}
if check_rxe_netns; then
  result "rxe-in-netns PASS"
else
  result "rxe-in-netns FAIL (kernel $(uname -r): rdma_rxe does not work inside a network namespace)"
  exit 1
fi

# A scenario is TOPOLOGY[:PHASE+PHASE...] (rxe-scenario.sh); the default
# phases run everything the topology is meant to show in one lab.
# TCG on a shared host starts daemons slowly: give switch registration time.
export WAIT_SECONDS=300
for s in $SCEN; do
  topo=${s%%:*}
  phases=${s#*:}
  [ "$phases" != "$s" ] || case $topo in
    single) phases=verbs+pingpong+unit+mixed ;;
    *) phases=verbs+pingpong ;;
  esac
  t0=$(up)
  log "=== $topo: ${phases//+/, }"
  RXE_RESULTS=$OUT/results.txt bash "$GUEST_DIR/rxe-scenario.sh" "$BUILD" "$topo" "${phases//+/,}" 2>&1 |
    sed -u "s/^/[$topo] /"
  rc=${PIPESTATUS[0]}
  secs=$(awk "BEGIN{printf \"%.1f\", $(up) - $t0}")
  if [ "$rc" = 0 ]; then result "$topo PASS (${secs} s)"; else result "$topo FAIL rc=$rc (${secs} s)"; fi
done
