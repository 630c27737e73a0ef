#!/usr/bin/env bash
# The one test command: installs missing packages, builds, and runs every
# ctest group (unit, selftest, lab, rxe). Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -R selftest.drop
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "test.sh: run as root (XDP, namespaces, bpffs)" >&2; exit 1; }
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 1500 "$@"
