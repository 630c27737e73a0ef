#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.ompi_coll: the unmodified mpi_coverage program across the lab's four
# worker namespaces with Open MPI's coll component coll/incin
# (build/userspace/ompi/mca_coll_incin.so, loaded from a component path,
# no LD_PRELOAD; docs/openmpi.md). The component is off by default: every
# run that wants it says --mca coll_incin_enable 1.
#   1. plain Open MPI (no component path): exact results, the reference digest;
#   2. ompi_info lists coll/incin from the component path, off by default,
#      with its parameters (coll_incin_am, _min_bytes, ...; no credential);
#   3. with the component enabled: exact results, the same digest, the
#      component selected and offloading every collective it offers at least
#      once on every rank with the same counts on every rank, libincmpi's
#      fallback reasons counted and logged ("coll/incin: fallback
#      reason=..."), libinc moved frames, and the AM has no tree of the job
#      left after MPI_Finalize. Its size threshold and log level come from MCA
#      parameters that win over contrary INCIN_* variables
#      (INCIN_MPI_MIN_BYTES=1G would send every call to MPI);
#   4. with an unreachable AM given as coll_incin_am (over the lab's INCIN_AM)
#      and with INCIN_MPI_ENABLE=0: the plain results, every call counted as a
#      no_group / disabled fallback; with INCIN_MPI_ENABLE=0 on rank 1 only: the
#      plain results, every call on every rank a bad_config fallback (the
#      ranks compare their settings);
#      On a lab with mTLS, coll_incin_tls_ca naming no file wins over the
#      lab's INCIN_TLS_CA: every call a no_group fallback, the file named;
#   5. on the component path without coll_incin_enable (the default): exact
#      results, every rank logs that coll/incin is not enabled and nothing
#      else of it (no selection, no fallback line, no summary);
#   6. mpi_comm_loop, MPICH's communicator loop (MPI_Comm_split halves ->
#      MPI_Intercomm_create -> MPI_Intercomm_merge both ways, MPI_Comm_dup,
#      MPI_Comm_create of subgroups) with collectives on the
#      intercommunicators and on every intracommunicator (Allreduce, Reduce,
#      Bcast, Barrier, Allgather, Reduce_scatter_block, and calls the
#      component passes on: Alltoall, Gather, Allgatherv, Scan, Exscan,
#      Reduce_scatter, PROD, MINLOC) over predefined and derived datatypes:
#      plain Open MPI, then with the component: exit 0, the same digest, the
#      six collectives offloaded on every rank alike (merged and dup'd
#      communicators with the world's group included), subcommunicators
#      passed on; on a lab with mTLS the CA comes from coll_incin_tls_ca
#      (coll/incin then chooses the transport security itself). Before the fix Open MPI's coll/inter ran MPI_Allgatherv on
#      the intercommunicator with an internal datatype through the
#      component, which decoded it: MPI_ERR_INTERN, the job aborted;
#   7. no run that passed logged an error (a clean run is quiet: no " E "
#      line from libinc, coll/incin or libincmpi on any rank).
. "$(dirname "$0")/lib.sh" "$1" ompicoll
KIND=single
require_bins incamd incswitchd incinctl mpi_coverage mpi_comm_loop mca_coll_incin.so
need_ompi_component
COVERAGE=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_coverage -perm -u+x | head -n1)
LOOP=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_comm_loop -perm -u+x | head -n1)

note "ompi_info with the component path"
INFO=$(OMPI_MCA_mca_component_path=$CPATH_MCA ompi_info --param coll incin --level 9 2>&1)
grep -q 'MCA coll: incin (MCA v2.1.0, API v2.0.0' <<<"$INFO" || fail "ompi_info does not list coll/incin: $INFO"
grep -q 'coll_incin_priority" (current value: "90"' <<<"$INFO" || fail "no coll_incin_priority 90 in ompi_info"
grep -q 'coll_incin_enable" (current value: "false", data source: default' <<<"$INFO" ||
  fail "coll_incin_enable is not false by default in ompi_info"
for p in am iface tls_cert tls_key tls_ca insecure min_bytes max_bytes join_timeout_ms op_timeout_ms \
  require_offload log_level; do
  grep -q "coll_incin_$p\"" <<<"$INFO" || fail "no coll_incin_$p in ompi_info"
done
! grep -qi 'credential"' <<<"$INFO" || fail "ompi_info shows a credential parameter"
echo "$INFO" | grep 'MCA coll: incin' | sed 's/^ */  /'

lab_up m "$KIND"
L="${P}m"
OUT="/tmp/inclab-$L/ompicoll"
mkdir -p "$OUT"

run() {
  mpi_run "$1" "$COVERAGE" "^mpi_coverage: ranks 4 checks [0-9]* failures 0 " "${@:2}"
}
digest() { sed -n 's/^mpi_coverage: .* digest \([0-9a-f]*\)$/\1/p' "$1"; }

run plain --
[ -n "$(digest "$OUT/plain.log")" ] || fail "no digest in the plain run"

# The launcher's part on an AM with mTLS (inc-mpirun does it only for
# --preload): the job's credential for every rank; the component joins as
# the job it names, as libincmpi does.
JOB="mpi-$L-coll-$$"
# In the environment, passed on by name: never on mpirun's command line.
INCIN_JOB_CREDENTIAL=$("$INCLAB" ctl "$L" job credential "$JOB") || fail "no job credential for $JOB from the AM"
export INCIN_JOB_CREDENTIAL
# coll_incin_min_bytes=8: single int/float elements (4 bytes) stay on MPI.
# The MCA parameters win over the contrary variables (with
# INCIN_MPI_MIN_BYTES=1G nothing would be offloaded, and at warn the
# selection lines checked below are not logged).
run coll --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 --mca coll_incin_min_bytes 8 \
  --mca coll_incin_log_level info -x INCIN_JOB_CREDENTIAL -x INCIN_MPI_MIN_BYTES=1G -x INCIN_MPI_LOG_LEVEL=warn \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/coll-%r.json" -x INCIN_MPI_SUMMARY=1 --
[ "$(digest "$OUT/plain.log")" = "$(digest "$OUT/coll.log")" ] ||
  fail "results differ with and without coll/incin (digests $(digest "$OUT/plain.log") / $(digest "$OUT/coll.log"))"
for r in 0 1 2 3; do
  grep -q "coll/incin: coll/incin selected on rank $r\$" "$OUT/coll.log" || fail "no selection line for rank $r"
  grep -q "coll/incin: rank $r: MPI_COMM_WORLD on INC tree" "$OUT/coll.log" || fail "rank $r joined no INC tree"
done
# Two of libincmpi's reasons never reach a coll component: single_rank
# (coll/incin is not selected for MPI_COMM_SELF) and noncontiguous_dtype
# (Open MPI's MPI_Allreduce rejects a predefined op on a struct datatype
# before any component runs).
mpi_offloaded_summary coll 4 "user_op unsupported_op unsupported_dtype unsupported_op_for_dtype below_min_bytes \
  subcomm" "single_rank no_group group_failed"
for reason in user_op unsupported_op subcomm below_min_bytes unsupported_op_for_dtype; do
  grep -q "coll/incin: fallback reason=$reason call=" "$OUT/coll.log" || fail "no log line for reason=$reason"
done
"$INCLAB" ctl "$L" -o json tree list | python3 -c '
import json, sys
trees = json.load(sys.stdin).get("trees", [])
mine = [t for t in trees if t.get("job_id", "") == sys.argv[1]]
left = [t for t in mine if str(t.get("state", "")).upper().replace("TREE_", "") in ("ACTIVE", "PENDING")]
print(f"  MPI job trees at the AM after MPI_Finalize: {len(mine)}, still active or pending: {len(left)}")
sys.exit(1 if left or len(mine) != 1 else 0)' "$JOB" ||
  fail "the job did not have exactly one tree, or it is still live after MPI_Finalize"

# The AM's port is closed (coll_incin_am wins over the lab's INCIN_AM, which
# inc-mpirun always exports): every rank fails to join, all fall back
# together; INCIN_MPI_ENABLE=0: the component stays selected and sends
# everything on.
run noam --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 --mca coll_incin_am 172.31.0.1:1 \
  -x INCIN_JOIN_TIMEOUT_MS=2000 -x "INCIN_MPI_SUMMARY_JSON=$OUT/noam-%r.json" -- --quick
run disabled --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 -x INCIN_MPI_ENABLE=0 \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/disabled-%r.json" -- --quick
grep -q "coll/incin: fallback reason=no_group call=MPI_Allreduce" "$OUT/noam.log" || fail "no log line for reason=no_group"
# Rank 1 alone sees INCIN_MPI_ENABLE=0 (its host's environment differs): the
# ranks compare their settings when the group forms and all pass every call
# on (bad_config).
cat >"$OUT/rank1-disabled.sh" <<EOF
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && export INCIN_MPI_ENABLE=0
exec "$COVERAGE" "\$@"
EOF
chmod +x "$OUT/rank1-disabled.sh"
mpi_run mixed "$OUT/rank1-disabled.sh" "^mpi_coverage: ranks 4 checks [0-9]* failures 0 " \
  --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 -x "INCIN_MPI_SUMMARY_JSON=$OUT/mixed-%r.json" \
  -- --quick
FELL_BACK=(noam:no_group disabled:disabled mixed:bad_config)
# On a lab with mTLS: coll_incin_tls_ca naming no file wins over the lab's
# INCIN_TLS_CA (the member certificates stay the variables'): no rank can
# reach the AM, all fall back together.
# shellcheck source=/dev/null  # the lab's generated settings
if [ "$(. "/tmp/inclab-$L/lab.env" && echo "${TLS:-0}")" = 1 ]; then
  run badca --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 \
    --mca coll_incin_tls_ca "$OUT/no-such-ca.pem" -x "INCIN_MPI_SUMMARY_JSON=$OUT/badca-%r.json" -- --quick
  grep -q "no INC group for MPI_COMM_WORLD on rank 0: .*no-such-ca.pem" "$OUT/badca.log" ||
    fail "coll_incin_tls_ca's missing file is not why the group did not form"
  FELL_BACK+=(badca:no_group)
fi
mpi_all_fell_back 4 "${FELL_BACK[@]}"

# The same path without coll_incin_enable (off by default, as the package
# installs it for every job): plain results, and coll/incin says it is off
# and does nothing else.
run off --mca mca_component_path "$CPATH_MCA" -x INCIN_MPI_LOG_LEVEL=info \
  -x "INCIN_MPI_SUMMARY_JSON=$OUT/off-%r.json" -- --quick
for r in 0 1 2 3; do
  grep -q "coll/incin: rank $r: not enabled (coll_incin_enable is false" "$OUT/off.log" ||
    fail "rank $r did not log that coll/incin is off by default"
done
others=$(grep "coll/incin" "$OUT/off.log" | grep -v "not enabled (coll_incin_enable is false" || true)
[ -z "$others" ] || fail "coll/incin ran without coll_incin_enable:"$'\n'"$others"
! ls "$OUT"/off-*.json >/dev/null 2>&1 || fail "coll/incin wrote a summary without coll_incin_enable"
for tag in noam disabled mixed; do
  [ "$(digest "$OUT/$tag.log")" = "$(digest "$OUT/off.log")" ] || fail "run $tag: results differ from plain Open MPI"
done

# MPICH's communicator loop, plain and with the component (its own job).
loop() {
  mpi_run "$1" "$LOOP" "^mpi_comm_loop: ranks 4 comms [0-9]* checks [0-9]* failures 0 " "${@:2}"
}
loopdigest() { sed -n 's/^mpi_comm_loop: .* digest \([0-9a-f]*\)$/\1/p' "$1"; }
loop loopplain --
JOB2="mpi-$L-loop-$$"
INCIN_JOB_CREDENTIAL=$("$INCLAB" ctl "$L" job credential "$JOB2") || fail "no job credential for $JOB2 from the AM"
# On a lab with mTLS the CA as a parameter (a copy, so it is not the
# variable's file): coll/incin then chooses the transport security from the
# parameters and the variables (the member certificates the lab's agent
# exports per host).
TLS_MCA=()
# shellcheck source=/dev/null  # the lab's generated settings
if [ "$(. "/tmp/inclab-$L/lab.env" && echo "${TLS:-0}")" = 1 ]; then
  cp "/tmp/inclab-$L/pki/ca.pem" "$OUT/ca-param.pem"
  TLS_MCA=(--mca coll_incin_tls_ca "$OUT/ca-param.pem")
fi
loop loopcoll --mca mca_component_path "$CPATH_MCA" --mca coll_incin_enable 1 "${TLS_MCA[@]}" \
  -x INCIN_JOB_CREDENTIAL -x INCIN_MPI_LOG_LEVEL=info -x "INCIN_MPI_SUMMARY_JSON=$OUT/loopcoll-%r.json" --
[ "$(loopdigest "$OUT/loopplain.log")" = "$(loopdigest "$OUT/loopcoll.log")" ] ||
  fail "mpi_comm_loop: results differ with and without coll/incin (digests $(loopdigest "$OUT/loopplain.log") / $(loopdigest "$OUT/loopcoll.log"))"
grep -q "coll/incin: rank 0: MPI_COMM_WORLD on INC tree" "$OUT/loopcoll.log" || fail "mpi_comm_loop: no INC tree with coll/incin"
mpi_offloaded_summary loopcoll 4 "subcomm unsupported_op" "single_rank no_group group_failed bad_config"
# The merged and dup'd communicators have the world's group: offloaded too.
# Seven intracommunicators have it (world, dup, reversed split, both merges
# of the halves, the dup of a merge, the merge of rank 0 against the rest),
# and on each the program makes 12 offloadable MPI_Allreduce calls (counts
# 1, 7 and 1000 x int SUM, MIN, MAX and double SUM in place): at least 84.
python3 - "$OUT" <<'PY' || fail "mpi_comm_loop: too few MPI_Allreduce offloaded for the communicators with the world's group"
import json, sys
d = json.load(open(f"{sys.argv[1]}/loopcoll-0.json"))
n = d["calls"]["MPI_Allreduce"]["offloaded"]["calls"]
print(f"  mpi_comm_loop: {n} MPI_Allreduce offloaded on rank 0")
sys.exit(0 if n >= 84 else 1)
PY

mpi_no_error_lines plain coll disabled off loopplain loopcoll
pass
