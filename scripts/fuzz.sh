#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs the libFuzzer harnesses of the userspace parsers (fuzz/).
# The main build is GCC; the harnesses need clang, so they live in their own
# tree, ${FUZZ_BUILD_DIR:-build-fuzz}, configured with clang and INC_FUZZ=ON.
#   scripts/fuzz.sh --build-only            configure and build every harness
#   scripts/fuzz.sh --time 3600 rsvp        a one-hour campaign on one target
#   scripts/fuzz.sh --time 600 -- -jobs=2   every target, extra libFuzzer flags
#   scripts/fuzz.sh --seeds                 rewrite fuzz/corpus/*/seed-* from the
#                                           project's builders and serializers
# Targets: frame rsvp arn_message switch_config am_config am_topology
# switch_translate am_convert mpi_env job_credential netconf_edit (default: all, one after
# another).
# New inputs of a campaign collect in $FUZZ_BUILD_DIR/fuzz/work/<target>/new;
# crashes in .../artifacts. fuzz/README.md says how to keep what a campaign finds.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
FUZZ_CXX=${FUZZ_CXX:-clang++}
ALL_TARGETS=(frame rsvp arn_message switch_config am_config am_topology switch_translate am_convert mpi_env
  job_credential netconf_edit)

seconds=60
build_only=0
seeds=0
targets=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --seeds) seeds=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      if [[ ! " ${ALL_TARGETS[*]} " == *" $1 "* ]]; then
        echo "fuzz.sh: no target '$1' (targets: ${ALL_TARGETS[*]})" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

# -O1 with asserts (no NDEBUG): the fuzzer should trip every assert.
if [ ! -f "$FUZZ_BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$FUZZ_BUILD_DIR" -DCMAKE_C_COMPILER="${FUZZ_CXX/clang++/clang}" \
    -DCMAKE_CXX_COMPILER="$FUZZ_CXX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DINC_FUZZ=ON >/dev/null
fi
build_targets=(fuzz_seeds)
for t in "${ALL_TARGETS[@]}"; do build_targets+=("fuzz_$t"); done
echo "fuzz: building ${#build_targets[@]} targets with $FUZZ_CXX in $FUZZ_BUILD_DIR"
cmake --build "$FUZZ_BUILD_DIR" -j"${JOBS:-2}" --target "${build_targets[@]}"
[ "$build_only" = 0 ] || exit 0

if [ "$seeds" = 1 ]; then
  "$FUZZ_BUILD_DIR/fuzz/fuzz_seeds" fuzz/corpus
  exit 0
fi

for t in "${targets[@]}"; do
  fuzz/run_fuzzer.sh "$FUZZ_BUILD_DIR/fuzz/fuzz_$t" "fuzz/corpus/$t" "$FUZZ_BUILD_DIR/fuzz/work/$t" "$seconds" \
    "${extra[@]}"
done
