#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs one libFuzzer harness for a bounded time over its committed corpus.
#   run_fuzzer.sh HARNESS CORPUS WORK_DIR SECONDS [libFuzzer flags...]
# New inputs go to WORK_DIR/new (libFuzzer writes into its first corpus
# folder, and the committed corpus must only change on purpose); a crash,
# leak, timeout or UBSan report is saved under WORK_DIR/artifacts and fails.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 HARNESS CORPUS WORK_DIR SECONDS [libFuzzer flags...]" >&2; exit 2; }
harness=$1 corpus=$2 work=$3 seconds=$4
shift 4
if [ ! -x "$harness" ]; then
  echo "run_fuzzer: $harness was not built (scripts/fuzz.sh --build-only)" >&2
  exit 1
fi
mkdir -p "$work/new" "$work/artifacts"
# halt_on_error: a UBSan report must end the run with an error, not scroll by.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "run_fuzzer: $(basename "$harness") for ${seconds}s over $corpus (new inputs: $work/new)"
exec "$harness" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/new" "$corpus"
