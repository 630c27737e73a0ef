#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.mpi_numerics: the plain MPI program mpi_numerics (MPI_Allreduce, in
# place and not, and MPI_Reduce to the first and last rank, with MPI_SUM,
# MPI_MIN and MPI_MAX over MPI_FLOAT and MPI_DOUBLE; inputs with +inf, -inf
# and NaN on some ranks, sums that overflow, -0.0, one +inf in a finite
# array, and magnitudes spread over 1e-6..1e6; every element judged against
# IEEE 754 as each rank computes it from the known inputs, wide-range sums
# within gamma(n-1) * sum|x_i| of the exact sum in double-double) on the
# lab's four workers:
#   1. plain Open MPI: every check passes (the program's own check);
#   2. with libincmpi preloaded and 3. with the coll/incin component: every
#      check passes, and every reduction ran on the switch (none fell back).
# All three runs are made and their failing categories printed before the
# test fails, so one run names every category the offload gets wrong.
. "$(dirname "$0")/lib.sh" "$1" mpinum
KIND=single
require_bins incamd incswitchd incinctl mpi_numerics libincmpi.so mca_coll_incin.so
need_ompi_component
NUMERICS=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_numerics -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
lab_up m "$KIND"
L="${P}m"
OUT="/tmp/inclab-$L/mpinum"
mkdir -p "$OUT"

BAD=()
# numerics TAG [inc-mpirun options]: one run; its failing categories are
# printed and the run is remembered in BAD unless it exits 0 with
# "failures 0".
numerics() {
  local tag=$1 rc=0 lines
  shift
  note "run $tag"
  timeout 200 "$LAB_TESTS_DIR/inc-mpirun" "$L" --timeout 190 "$@" -- "$NUMERICS" >"$OUT/$tag.log" 2>&1 || rc=$?
  lines=$(grep '^mpi_numerics: ' "$OUT/$tag.log" || true)
  grep -v '^mpi_numerics: ok ' <<<"$lines" | sed 's/^/  /' || true
  if [ "$rc" != 0 ] || ! grep -q '^mpi_numerics: ranks 4 checks [0-9]* failures 0$' <<<"$lines"; then
    grep '^mpi_numerics: rank 0 ' "$OUT/$tag.log" | head -n 40 | sed 's/^/    /' || true
    BAD+=("$tag (exit $rc, log $OUT/$tag.log)")
  fi
}
# offloaded TAG: rank 0's summary counts every reduction offloaded, none
# fallen back (the checks judged the switch's results, not MPI's).
offloaded() {
  python3 - "$OUT/$1-0.json" <<'PY' || BAD+=("$1: reductions fell back or none was offloaded")
import json, sys
d = json.load(open(sys.argv[1]))
ar, rd = (d["calls"][c]["offloaded"]["calls"] for c in ("MPI_Allreduce", "MPI_Reduce"))
print(f"  offloaded: MPI_Allreduce {ar}, MPI_Reduce {rd}; fell back: {d['fallback_reasons']}")
# 2 types x 3 ops x 3 arrays x 3 counts x 2 MPI_Allreduce (and 2 MPI_Reduce) calls.
sys.exit(0 if ar >= 108 and rd >= 108 and d["totals"]["fallback"]["calls"] == 0 else 1)
PY
}

numerics plain
numerics incmpi --preload "$LIBINCMPI" -x "INCIN_MPI_SUMMARY_JSON=$OUT/incmpi-%r.json"
offloaded incmpi
JOB="mpi-$L-num-$$"
# In the environment, passed on by name: never on mpirun's command line.
INCIN_JOB_CREDENTIAL=$("$INCLAB" ctl "$L" job credential "$JOB") || fail "no job credential for $JOB from the AM"
export INCIN_JOB_CREDENTIAL
numerics coll --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 -x INCIN_JOB_CREDENTIAL \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/coll-%r.json"
offloaded coll
[ ${#BAD[@]} = 0 ] || fail "${#BAD[@]} runs gave results that are not IEEE's: ${BAD[*]}"
mpi_no_error_lines plain incmpi coll
pass
