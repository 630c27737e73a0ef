#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.mpi_late_rank: the plain MPI program mpi_late_rank (MPI_ERRORS_RETURN;
# the last rank sleeps before its second MPI_Allreduce; later an Allreduce,
# a Bcast, a 4-byte Allreduce below INCIN_MPI_MIN_BYTES, an Allreduce on a split
# half and an MPI_PROD Allreduce; each rank's record of which calls
# succeeded is compared by point-to-point messages) on the lab's four
# workers:
#   1. plain Open MPI: every call succeeds (MPI waits for a late rank);
#   2. libincmpi and 3. coll/incin with the default INCIN_OP_TIMEOUT_MS
#      (no limit), the rank 4 s late: every call succeeds, as on plain MPI;
#   4. libincmpi and 5. coll/incin with INCIN_OP_TIMEOUT_MS=2000 and the
#      rank 6 s late: the late call fails on every rank, so do the Allreduce
#      and the Bcast after it (they would run on the switch: an MPI error,
#      never a fallback of one rank alone), while the three calls that run
#      on MPI's own algorithms succeed on every rank: the same record
#      everywhere, each rank's summary counts 3 failed calls and group
#      group_failed;
# and the runs where nothing failed logged no error line.
. "$(dirname "$0")/lib.sh" "$1" mpilate
KIND=single
require_bins incamd incswitchd incinctl mpi_late_rank libincmpi.so mca_coll_incin.so
need_ompi_component
LATE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_late_rank -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
lab_up m "$KIND"
L="${P}m"
OUT="/tmp/inclab-$L/mpilate"
mkdir -p "$OUT"

# late TAG RECORD [inc-mpirun options] -- program args: exit 0 with every
# rank's record equal to RECORD.
late() {
  local tag=$1 record=$2
  shift 2
  mpi_run "$tag" "$LATE" "^mpi_late_rank: ranks 4 record $record agreed yes expected yes .* results right" "$@"
}
# coll TAG: the component's options, with the job credential of its own
# that coll_credential TAG exported (-x passes it on from the environment:
# a credential on mpirun's command line would be every local user's).
coll_credential() {
  INCIN_JOB_CREDENTIAL=$("$INCLAB" ctl "$L" job credential "mpi-$L-$1-$$") || fail "no job credential from the AM"
  export INCIN_JOB_CREDENTIAL
}
coll_opts() {
  echo "--mca mca_component_path $CPATH_MCA --mca coll_incin_enable 1 -x INCIN_JOB_CREDENTIAL -x INCIN_MPI_SUMMARY_JSON=$OUT/$1-%r.json"
}
# failed_three TAG: every rank counted the three calls 1-3 as failed.
failed_three() {
  python3 - "$OUT" "$1" <<'PY' || fail "run $1: not 3 failed calls and group group_failed on every rank"
import json, sys
out, tag = sys.argv[1], sys.argv[2]
for r in range(4):
    d = json.load(open(f"{out}/{tag}-{r}.json"))
    if d["totals"]["failed"]["calls"] != 3 or d["group"] != "group_failed":
        sys.exit(f"rank {r}: failed {d['totals']['failed']['calls']}, group {d['group']}")
print(f"  {tag}: 3 failed calls and group group_failed on every rank")
PY
}

late plain SSSSSSS -- 4000
late incmpi SSSSSSS --preload "$LIBINCMPI" -x INCIN_MPI_MIN_BYTES=8 -- 4000
coll_credential coll
# shellcheck disable=SC2046  # coll_opts prints options without spaces inside them
late coll SSSSSSS $(coll_opts coll) -x INCIN_MPI_MIN_BYTES=8 -- 4000
late incmpi_timeout SFFFSSS --preload "$LIBINCMPI" -x INCIN_MPI_MIN_BYTES=8 -x INCIN_OP_TIMEOUT_MS=2000 \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/incmpi_timeout-%r.json" -- 6000 --expect-failure
failed_three incmpi_timeout
coll_credential coll_timeout
# shellcheck disable=SC2046
late coll_timeout SFFFSSS $(coll_opts coll_timeout) -x INCIN_MPI_MIN_BYTES=8 -x INCIN_OP_TIMEOUT_MS=2000 \
  -- 6000 --expect-failure
failed_three coll_timeout
mpi_no_error_lines plain incmpi coll
pass
