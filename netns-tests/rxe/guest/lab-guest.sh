#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# PID 1 of the lab guest (rxe-lab --lab SCRIPT): runs one namespace lab test
# (netns-tests/lab_*.sh) under the guest's Debian kernel, for what the host
# kernel cannot do (lab.xdp_coexist's chained part needs freplace programs,
# which some hosts' kernels refuse). Writes "lab PASS|FAIL|SKIP" to
# results.txt on the host share and powers off (set-up: guest-setup.sh).
LOG_PREFIX=INCIN
. "$(dirname "$(readlink -f "$0")")/guest-setup.sh"
LAB=$(arg lab)
modprobe -a veth bridge || {
  result "setup FAIL (modprobe veth bridge)"
  exit 1
}
echo "INCIN: guest kernel $(uname -r): $(basename "$LAB")"
# TCG on a shared host starts daemons slowly: give switch registration time.
export WAIT_SECONDS=300
t0=$(up)
bash "$LAB" "$BUILD" 2>&1 | sed -u 's/^/INCIN: | /'
rc=${PIPESTATUS[0]}
secs=$(awk "BEGIN{printf \"%.1f\", $(up) - $t0}")
case $rc in
  0) result "lab PASS (${secs} s, kernel $(uname -r))" ;;
  77) result "lab SKIP (${secs} s, kernel $(uname -r))" ;;
  *) result "lab FAIL rc=$rc (${secs} s)" ;;
esac
