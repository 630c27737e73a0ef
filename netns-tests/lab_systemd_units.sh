#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.systemd_units: the Debian packages installed and run as systemd units.
# Builds the packages from this build with CPack, then boots the rxe lab's
# qemu guest (the host's root read-only under a tmpfs overlay, Debian's
# kernel) with systemd as PID 1 and runs guest/pkg-guest.sh there: dpkg -i,
# incamd.service and incswitchd@leaf0.service started, an exact allreduce
# through them, reload, restart (XDP kept, state re-adopted) and stop (XDP
# detached). Exit 77 (skipped) without qemu or the guest kernel.
#   lab_systemd_units.sh BUILD_DIR
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: lab_systemd_units.sh BUILD_DIR}")
HERE=$(cd "$(dirname "$0")" && pwd)
command -v cpack >/dev/null || { echo "SKIP: cpack is not installed" >&2; exit 77; }
[ -x /lib/systemd/systemd ] || { echo "SKIP: systemd is not installed (the guest boots this root's systemd)" >&2; exit 77; }
PKGS=$(mktemp -d /tmp/incin-units.XXXXXX)
trap 'rm -rf "$PKGS"' EXIT
cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$PKGS/out" >"$PKGS/cpack.log" 2>&1 ||
  { cat "$PKGS/cpack.log"; echo "FAIL: cpack" >&2; exit 1; }
mkdir -p "$PKGS/debs"
mv "$PKGS/out/"*.deb "$PKGS/debs/"
echo "[$(date -u +%H:%M:%S)] packages: $(cd "$PKGS/debs" && ls | tr '\n' ' ')"
RXE_TIMEOUT=${RXE_TIMEOUT:-900} bash "$HERE/rxe/rxe-lab" --build "$BUILD" --systemd-packages "$PKGS/debs"
