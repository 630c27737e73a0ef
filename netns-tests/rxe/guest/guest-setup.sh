# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced first by the guest's PID-1 scripts (rxe-guest.sh, lab-guest.sh),
# with LOG_PREFIX set (the console lines rxe-lab shows start with it): the
# incin.* arguments of the kernel command line, log/result to the console
# and to results.txt on the host share, power-off on exit, and the guest
# prepared: fresh /run and /tmp, bpffs, tracefs, the results share, the
# kernel's modules, lo up, unlimited locked memory.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
GUEST_DIR=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
arg() { sed -n "s/.*incin\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
BUILD=$(arg build)
KDIR=$(arg kdir)
OUT=/mnt/incin-out
up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "${LOG_PREFIX}[$(up)]: $*"; }
result() { echo "$*" >>"$OUT/results.txt"; log "RESULT $*"; }
finish() {
  result "DONE guest uptime $(up) s"
  sync
  echo o >/proc/sysrq-trigger
  sleep 10
}
trap finish EXIT

# Fresh /run and /tmp: the overlay would otherwise show the host's lab
# directories (/tmp/inclab-*) to the guest's inclab. A checkout or build tree
# that lives under /tmp (CI clones there) is bound back into the fresh /tmp.
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
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 incinout "$OUT" || {
  echo "$LOG_PREFIX: cannot mount the results share"
  exit 1
}
mkdir -p /lib/modules && mount --bind "$KDIR/lib/modules" /lib/modules
ip link set lo up
ulimit -l unlimited
