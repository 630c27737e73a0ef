#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.mpi_launch: 200 Open MPI jobs in a row through inc-mpirun across the
# four worker namespaces of a single-level lab (one orted per namespace),
# each as short as a job gets (mpi_coverage --hello: MPI_Init, one
# MPI_Barrier, MPI_Finalize); every fourth with libincmpi preloaded. Every
# launch must finish within LAUNCH_TIMEOUT seconds with all four ranks
# started; a launch that does not is a hang. Passes with 0 hangs, 0 failed
# launches and no orted left behind. Before inc-mpirun gave every namespace
# its own Open MPI session directory, about 6% of launches hung (one remote
# orted crashed after daemonizing, so mpirun waited for it forever).
. "$(dirname "$0")/lib.sh" "$1" mpil
require_bins incamd incswitchd mpi_coverage libincmpi.so
# shellcheck disable=SC2034  # TEST_OK is lib.sh's (keeps the lab logs quiet on a skip)
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)" >&2; TEST_OK=1; exit 77; }
COVERAGE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_coverage -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
MPIRUN="$LAB_TESTS_DIR/inc-mpirun"
LAUNCHES=${LAUNCHES:-200}
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-20}
MAX_HANGS=3  # stop early: each hang costs LAUNCH_TIMEOUT
lab_up l single
L="${P}l"
OUT="/tmp/inclab-$L/launch"
mkdir -p "$OUT"

hangs=0
failed=0
times=()
note "$LAUNCHES launches, ${LAUNCH_TIMEOUT}s each at most"
for i in $(seq 1 "$LAUNCHES"); do
  opts=()
  [ $((i % 4)) = 0 ] && opts=(--preload "$LIBINCMPI")
  t0=$(date +%s%N)
  rc=0
  timeout -k 5 "$LAUNCH_TIMEOUT" "$MPIRUN" "$L" "${opts[@]}" -- "$COVERAGE" --hello >"$OUT/run.log" 2>&1 || rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  times+=("$ms")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    hangs=$((hangs + 1))
    cp "$OUT/run.log" "/tmp/lab_mpi_launch-$L-$i.hang.log"
    note "launch $i hung (no exit after ${LAUNCH_TIMEOUT}s; log /tmp/lab_mpi_launch-$L-$i.hang.log)"
    [ "$hangs" -lt "$MAX_HANGS" ] || break
  elif [ "$rc" != 0 ] || ! grep -q "^mpi_coverage: hello from 4 ranks$" "$OUT/run.log"; then
    failed=$((failed + 1))
    cp "$OUT/run.log" "/tmp/lab_mpi_launch-$L-$i.failed.log"
    note "launch $i failed (exit $rc; log /tmp/lab_mpi_launch-$L-$i.failed.log)"
  fi
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="${#times[@]}" -v h="$hangs" -v f="$failed" '
  { t[NR] = $1; s += $1 }
  END { printf "  %d launches: %d hung, %d failed; ms per launch: median %d, max %d, mean %d\n",
        n, h, f, t[int((NR + 1) / 2)], t[NR], s / NR }'
# Launches end with their orteds: none may outlive mpirun.
sleep 1
left=$(pgrep -f "inc-mpirun __agent $L" || true)
[ -z "$left" ] || fail "orted agents of lab $L still running after the last launch: $left"
[ "$hangs" = 0 ] || fail "$hangs of ${#times[@]} launches hung"
[ "$failed" = 0 ] || fail "$failed of ${#times[@]} launches failed"
pass
