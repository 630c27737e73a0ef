#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one test command: installs missing packages, builds, and runs every
# ctest group (unit, selftest, lab, rxe, fuzz), then the unit tests of the input
# parsers again under ASan/UBSan (scripts/sanitize.sh). Extra arguments go to
# ctest and skip the sanitizer pass, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -R selftest.drop
# The label long (PyTorch's own process-group suite, about 25 minutes) runs only
# when asked for: scripts/test.sh -L long
# INC_SANITIZE_PASS=0 skips the sanitizer pass of a full run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "test.sh: run as root (XDP, namespaces, bpffs)" >&2; exit 1; }
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
if [ $# -eq 0 ]; then
  (cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1500 -LE '^long$')
else
  (cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1500 "$@")
fi
if [ $# -eq 0 ] && [ "${INC_SANITIZE_PASS:-1}" = 1 ]; then
  bash scripts/sanitize.sh
fi
