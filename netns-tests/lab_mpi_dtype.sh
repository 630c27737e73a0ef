#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.mpi_dtype_<topology>: datatype conformance of libincmpi. The plain MPI
# program mpi_dtype_conformance runs every intercepted collective over every
# predefined datatype (pair types included), derived contiguous, vector,
# indexed, struct and resized types, datatypes that differ between ranks with
# one type signature, MPI_IN_PLACE, counts 0/1/2/odd/large, every root, on
# the world, a dup, a rank-reversing split and a split into halves, and
# compares each result element by element with Open MPI's own (PMPI_*) on the
# same input. Launched by inc-mpirun across the lab's four worker namespaces:
#   1. without libincmpi: MPI_* and PMPI_* agree (the program checks itself);
#   2. with libincmpi preloaded (and --derived-reductions): every result
#      equals Open MPI's, and each rank's summary JSON shows that exactly the
#      calls the switch can do ran there -- per collective as many offloaded
#      calls as the program counted, and as many of them packed (a
#      non-contiguous layout on that rank, pair types included) as it
#      counted; reductions on a struct of an int and a double are logged as
#      noncontiguous_dtype, no call with bytes as empty;
# and neither run logged an error line.
. "$(dirname "$0")/lib.sh" "$1" mpid
KIND=${2:?single or two}
require_bins incamd incswitchd mpi_dtype_conformance libincmpi.so
# shellcheck disable=SC2034  # TEST_OK is lib.sh's (keeps the lab logs quiet on a skip)
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)" >&2; TEST_OK=1; exit 77; }
PROG=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mpi_dtype_conformance -perm -u+x | head -n1)
LIBINCMPI=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name libincmpi.so | head -n1)
lab_up d "$KIND"
L="${P}d"
OUT="/tmp/inclab-$L/mpi"
mkdir -p "$OUT"

# run TAG [inc-mpirun options] -- [program args]: mpi_dtype_conformance, "failures 0".
# shellcheck disable=SC2034  # read by lib.sh's mpi_run
MPI_RUN_TIMEOUT=200
run() {
  local tag=$1
  shift
  mpi_run "$tag" "$PROG" "^dtype_conformance: ranks 4 checks [0-9]* failures 0 " "$@"
}

run plain --
run inc --preload "$LIBINCMPI" -x "INCIN_MPI_SUMMARY_JSON=$OUT/inc-%r.json" -x INCIN_MPI_SUMMARY=1 -- --derived-reductions
python3 - "$OUT" <<'PY' || fail "the summaries do not show the expected calls on the switch (files $OUT/inc-*.json)"
import json, re, sys
out = sys.argv[1]
log = open(f"{out}/inc.log").read()
expect = {}
for m in re.finditer(r"^dtype_conformance: rank (\d+) expect (\{.*\})$", log, re.M):
    expect[int(m.group(1))] = json.loads(m.group(2))
bad = []
if sorted(expect) != [0, 1, 2, 3]:
    bad.append(f"expectations printed by ranks {sorted(expect)}")
for r in sorted(expect):
    d = json.load(open(f"{out}/inc-{r}.json"))
    if d["group"] != "ok":
        bad.append(f"rank {r}: group {d['group']} ({d['group_detail']})")
    for call, (offloaded, packed) in expect[r].items():
        got = d["calls"][call]
        if got["offloaded"]["calls"] != offloaded or got["packed"] != packed:
            bad.append(f"rank {r}: {call} offloaded {got['offloaded']['calls']} (packed {got['packed']}), "
                       f"expected {offloaded} (packed {packed}); fallbacks {got['fallback_reasons']}")
    if d["fallback_reasons"].get("noncontiguous_dtype", 0) == 0:
        bad.append(f"rank {r}: no fallback counted as noncontiguous_dtype")
d = json.load(open(f"{out}/inc-0.json"))
print("  rank 0 offloaded (packed) per call:",
      {c: f"{v['offloaded']['calls']} ({v['packed']})" for c, v in d["calls"].items()})
print("  rank 0 fallback reasons:", d["fallback_reasons"])
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
grep -q "incmpi: fallback reason=noncontiguous_dtype call=MPI_Allreduce" "$OUT/inc.log" ||
  fail "no log line for reason=noncontiguous_dtype"
! grep "incmpi: fallback reason=empty .* bytes=[1-9]" "$OUT/inc.log" || fail "a call with bytes logged as empty"
mpi_no_error_lines plain inc
pass
