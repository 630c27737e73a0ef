#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.mpi_<topology>: an unmodified Open MPI program (mpi_coverage: every
# intercepted call x int/unsigned/long/int64/float/double x SUM/MIN/MAX, in
# place, dup, a rank-reversing split, a split into halves, MPI_COMM_SELF,
# calls no switch computes, a vector datatype, collectives entered with a
# point-to-point send pending) launched by inc-mpirun across the lab's four
# worker namespaces, one orted each:
#   1. without libincmpi (Open MPI's own algorithms over TCP): exact results;
#   2. with libincmpi preloaded: exact results, the same digest as run 1,
#      every intercepted call offloaded at least once on every rank with the
#      same counts on every rank, every expected fallback reason counted and
#      logged ("incmpi: fallback reason=..."), the vector broadcast packed,
#      no "reason=empty" for a call with bytes, libinc sent frames, and the
#      AM has no tree left after MPI_Finalize;
#   3. with an unreachable AM: exact results, every call fell back (no_group);
#      with INCIN_REQUIRE_OFFLOAD=1 too: the job fails, every failing rank
#      naming the setting and reason=no_group;
#   4. with INCIN_MPI_ENABLE=0: exact results, every call fell back (disabled);
#      with INCIN_MPI_ENABLE=0 on rank 1 only: exact results, every call on
#      every rank fell back (bad_config: the ranks compare their settings);
#   5. (4 ranks) mpi_comm_loop, MPICH's communicator loop (splits,
#      intercommunicators and their merges, dups, creates; derived datatypes)
#      without and with libincmpi: exit 0, the same digest;
# and no run logged an error line (a clean run is quiet).
# The two-level run starts the program with MPI_Init_thread.
# With a rank count NP above 4 (third argument) the ranks share hosts: NP/4
# per worker, placed round robin (rank r on worker r mod 4), so libincmpi
# finds them with MPI_COMM_TYPE_SHARED, numbers the INC group host by host
# (a permutation of the world's ranks) and each host's first rank is its
# tree member; runs 1 and 2 only.
. "$(dirname "$0")/lib.sh" "$1" mpi
KIND=${2:?single or two}
NP=${3:-4}
[ "$NP" = 4 ] || MPI_RUN_TIMEOUT=${MPI_RUN_TIMEOUT:-240}  # 16 ranks on 2 cores
require_bins incamd incswitchd incinctl mpi_coverage mpi_comm_loop libincmpi.so
# shellcheck disable=SC2034  # TEST_OK is lib.sh's (keeps the lab logs quiet on a skip)
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)" >&2; TEST_OK=1; exit 77; }
COVERAGE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_coverage -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
lab_up m "$KIND"
L="${P}m"
OUT="/tmp/inclab-$L/mpi"
mkdir -p "$OUT"
ARGS=()
[ "$KIND" = two ] && ARGS+=(--init-thread)

# run TAG [inc-mpirun options] -- [program args]: mpi_coverage, "failures 0".
run() {
  local tag=$1
  shift
  mpi_run "$tag" "$COVERAGE" "^mpi_coverage: ranks $NP checks [0-9]* failures 0 " "$@"
}
digest() { sed -n 's/^mpi_coverage: .* digest \([0-9a-f]*\)$/\1/p' "$1"; }

NPARGS=() INCARGS=()
[ "$NP" = 4 ] || { NPARGS+=(--np "$NP"); INCARGS+=(-x INCIN_MPI_LOG_LEVEL=info); }
export MPI_LOCAL_SIZE=$((NP / 4))
run plain "${NPARGS[@]}" -- "${ARGS[@]}"

# INCIN_MPI_MIN_BYTES=8: single int/float elements (4 bytes) stay on MPI.
run inc "${NPARGS[@]}" "${INCARGS[@]}" --preload "$LIBINCMPI" -x INCIN_MPI_MIN_BYTES=8 -x "INCIN_MPI_SUMMARY_JSON=$OUT/inc-%r.json" \
  -x INCIN_MPI_SUMMARY=1 -- "${ARGS[@]}"
[ "$(digest "$OUT/plain.log")" = "$(digest "$OUT/inc.log")" ] ||
  fail "results differ with and without libincmpi (digests $(digest "$OUT/plain.log") / $(digest "$OUT/inc.log"))"
grep -q "incmpi: summary rank 0/$NP: group ok" "$OUT/inc.log" || fail "no summary on stderr"
if [ "$NP" != 4 ]; then
  grep -q "MPI_COMM_WORLD on INC tree [0-9]* (job .*; 4 hosts x $MPI_LOCAL_SIZE ranks" "$OUT/inc.log" ||
    fail "no rank logged its group as 4 hosts x $MPI_LOCAL_SIZE ranks"
  grep "rank 1: MPI_COMM_WORLD on INC tree" "$OUT/inc.log" | sed 's/^.*incmpi: /  /'
fi
mpi_offloaded_summary inc "$NP" "user_op unsupported_op unsupported_dtype unsupported_op_for_dtype \
  noncontiguous_dtype below_min_bytes subcomm single_rank"
for reason in user_op unsupported_op subcomm below_min_bytes noncontiguous_dtype; do
  grep -q "incmpi: fallback reason=$reason call=" "$OUT/inc.log" || fail "no log line for reason=$reason"
done
! grep "incmpi: fallback reason=empty .* bytes=[1-9]" "$OUT/inc.log" || fail "a call with bytes logged as empty"
"$INCLAB" ctl "$L" -o json tree list | python3 -c '
import json, sys
kind = sys.argv[1]
trees = json.load(sys.stdin).get("trees", [])
mine = [t for t in trees if t.get("job_id", "").startswith("mpi-")]
left = [t for t in mine if str(t.get("state", "")).upper().replace("TREE_", "") in ("ACTIVE", "PENDING")]
roots = [t.get("root_switch", "") for t in mine]
print(f"  MPI job trees at the AM after MPI_Finalize: {len(mine)} (root {roots}), still active or pending: {len(left)}")
# The two-level job must have been aggregated at a spine.
want = "spine" if kind == "two" else "leaf0"
sys.exit(1 if left or len(mine) != 1 or not roots[0].startswith(want) else 0)' "$KIND" ||
  fail "the MPI job did not have exactly one tree rooted at the expected switch, or it is still live after MPI_Finalize"

[ "$NP" = 4 ] || { mpi_no_error_lines plain inc; pass; }
# The AM's port is closed: every rank fails to join, all fall back together.
run noam --preload "$LIBINCMPI" -x INCIN_AM=172.31.0.1:1 -x INCIN_JOIN_TIMEOUT_MS=2000 \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/noam-%r.json" -- --quick "${ARGS[@]}"
run off --preload "$LIBINCMPI" -x INCIN_MPI_ENABLE=0 -x "INCIN_MPI_SUMMARY_JSON=$OUT/off-%r.json" -- --quick "${ARGS[@]}"
grep -q "incmpi: fallback reason=no_group call=MPI_Allreduce" "$OUT/noam.log" || fail "no log line for reason=no_group"
# The same job with INCIN_REQUIRE_OFFLOAD=1: where run noam fell back, it
# fails, naming the setting and the reason, instead.
note "$KIND: run noamreq (the AM's port closed, offload required: must fail)"
rc=0
timeout 90 "$LAB_TESTS_DIR/inc-mpirun" "$L" --timeout 80 --preload "$LIBINCMPI" -x INCIN_AM=172.31.0.1:1 \
  -x INCIN_JOIN_TIMEOUT_MS=2000 -x INCIN_REQUIRE_OFFLOAD=1 -- "$COVERAGE" --quick "${ARGS[@]}" \
  >"$OUT/noamreq.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "run noamreq: exit 0 although offload was required and the AM is unreachable"
want="INCIN_REQUIRE_OFFLOAD is set: MPI_[A-Za-z_]* would fall back to MPI (reason=no_group"
grep -q "$want" "$OUT/noamreq.log" || { tail -n 30 "$OUT/noamreq.log" >&2; fail "run noamreq: no error naming the reason"; }
grep -m1 "$want" "$OUT/noamreq.log" | sed 's/^.*incmpi: /  exit '"$rc"': /'
# Rank 1 alone sees INCIN_MPI_ENABLE=0 (its host's environment differs): the
# ranks compare their settings at MPI_Init and all run on MPI (bad_config).
# Before, rank 1 skipped the group formation the others ran, and its first
# collective met their formation's.
cat >"$OUT/rank1-disabled.sh" <<EOF
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && export INCIN_MPI_ENABLE=0
exec "$COVERAGE" "\$@"
EOF
chmod +x "$OUT/rank1-disabled.sh"
mpi_run mixed "$OUT/rank1-disabled.sh" "^mpi_coverage: ranks 4 checks [0-9]* failures 0 " --preload "$LIBINCMPI" \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/mixed-%r.json" -- --quick "${ARGS[@]}"
mpi_all_fell_back 4 noam:no_group off:disabled mixed:bad_config
[ "$(digest "$OUT/mixed.log")" = "$(digest "$OUT/off.log")" ] || fail "run mixed: results differ from run off"

LOOP=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_comm_loop -perm -u+x | head -n1)
loopdigest() { sed -n 's/^mpi_comm_loop: .* digest \([0-9a-f]*\)$/\1/p' "$1"; }
for tag in loopplain loopinc; do
  opts=()
  [ "$tag" = loopinc ] && opts=(--preload "$LIBINCMPI" -x "INCIN_MPI_SUMMARY_JSON=$OUT/loopinc-%r.json")
  mpi_run "$tag" "$LOOP" "^mpi_comm_loop: ranks 4 comms [0-9]* checks [0-9]* failures 0 " "${opts[@]}" --
done
[ "$(loopdigest "$OUT/loopplain.log")" = "$(loopdigest "$OUT/loopinc.log")" ] ||
  fail "mpi_comm_loop: results differ with and without libincmpi"
mpi_offloaded_summary loopinc 4 "subcomm intercomm unsupported_op" "no_group group_failed bad_config"
mpi_no_error_lines plain inc off loopplain loopinc
pass
