#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# PID 1 of the lab guest (rxe-lab --lab SCRIPT): runs one namespace lab test
# (netns-tests/lab_*.sh) under the guest's Debian kernel, for what the host
# kernel cannot do (lab.xdp_coexist's chained part needs freplace programs,
# which some hosts' kernels refuse). Writes "lab PASS|FAIL|SKIP" to
# results.txt on the host share and powers off. The set-up is rxe-guest.sh's.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
GUEST_DIR=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
arg() { sed -n "s/.*incin\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
BUILD=$(arg build)
KDIR=$(arg kdir)
LAB=$(arg lab)
OUT=/mnt/incin-out
up() { cut -d' ' -f1 /proc/uptime; }
result() { echo "$*" >>"$OUT/results.txt"; echo "INCIN: RESULT $*"; }
finish() {
  result "DONE guest uptime $(up) s"
  sync
  echo o >/proc/sysrq-trigger
  sleep 10
}
trap finish EXIT

# Fresh /run and /tmp (the overlay shows the host's lab directories), with
# a checkout or build tree under /tmp bound back in.
SRC_ROOT=$(cd "$GUEST_DIR/../../.." && pwd)
KEEP=""
for p in "$SRC_ROOT" "$BUILD"; do
  case "$p" in /tmp/?*) KEEP="$KEEP /tmp/$(echo "${p#/tmp/}" | cut -d/ -f1)" ;; esac
done
mkdir -p /mnt/hosttmp
mount --bind /tmp /mnt/hosttmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
for k in $(printf '%s\n' $KEEP | sort -u); do
  mkdir -p "$k"
  mount --bind "/mnt/hosttmp/${k#/tmp/}" "$k"
done
mkdir -p /run/netns "$OUT"
mount -t bpf bpf /sys/fs/bpf
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 incinout "$OUT" || {
  echo "INCIN: cannot mount the results share"
  exit 1
}
mkdir -p /lib/modules && mount --bind "$KDIR/lib/modules" /lib/modules
ip link set lo up
ulimit -l unlimited
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
