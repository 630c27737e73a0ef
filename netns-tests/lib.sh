# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by the lab tests: one lab per test with a unique prefix, torn down
# on every exit path (logs kept on failure), and small assertion helpers.
# Usage in a test:  . lib.sh "$BUILD" <tag>; lab_up single ...; ...; pass
set -euo pipefail
LAB_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INCLAB="$LAB_TESTS_DIR/inclab"
INCLAB_BUILD=$(readlink -f "${1:?usage: test.sh BUILD_DIR}")
export INCLAB_BUILD
TEST_TAG=${2:?test tag}
# Unique per test process: concurrent ctest jobs and labs never collide.
P="t${TEST_TAG}$(( $$ % 10000 ))"
LABS_UP=()
TEST_OK=0
AT_CLEANUP=()

# at_cleanup CMD: the test's own teardown (temp files, helper processes),
# run by cleanup before the labs go down, with $rc the test's exit status.
at_cleanup() { AT_CLEANUP+=("$1"); }

cleanup() {
  local rc=$? p f c
  # A closed stdout/stderr (e.g. piped into head) must not stop the teardown.
  trap '' PIPE
  set +e
  for c in "${AT_CLEANUP[@]}"; do eval "$c"; done
  for p in "${LABS_UP[@]}"; do
    if [ "$TEST_OK" = 1 ]; then
      "$INCLAB" down "$p" >/dev/null 2>&1 || "$INCLAB" down "$p" || true
    else
      "$INCLAB" down "$p" --keep-logs >/dev/null 2>&1 || "$INCLAB" down "$p" --keep-logs || true
      {
        echo "--- lab $p daemon logs (tail) ---"
        for f in /tmp/inclab-"$p"/logs/*.log; do
          [ -e "$f" ] || continue
          echo "== $f"
          tail -n 25 "$f"
        done
        echo "logs kept in /tmp/inclab-$p"
      } >&2 || true
    fi
  done
  exit $rc
}
trap cleanup EXIT
# Labs of earlier test processes that were killed (ctest timeout) go first.
"$INCLAB" reap
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "[$(date -u +%H:%M:%S)] $*"; }

# edit_json FILE PYTHON: runs PYTHON on the file's JSON document `doc` and
# writes it back (a daemon's config before a SIGHUP).
edit_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(doc, open(sys.argv[1], "w"), indent=2)
PY
}

# wait_log_count FILE REGEX N: up to 10 s for N lines of FILE matching REGEX
# (grep's basic regular expressions); false if they do not come.
wait_log_count() {
  local i n
  for i in $(seq 100); do
    n=$(grep -c -- "$2" "$1" 2>/dev/null || true)
    [ "${n:-0}" -ge "$3" ] && return 0
    sleep 0.1
  done
  return 1
}

# lab_up NAME_SUFFIX KIND [inclab options]: brings up lab "$P$NAME_SUFFIX".
lab_up() {
  local p="$P$1"
  shift
  LABS_UP+=("$p")
  "$INCLAB" up "$@" --prefix "$p" --owner $$ >/dev/null
}

lab_down() {  # NAME_SUFFIX: tear down early and check nothing is left
  local p="$P$1" i
  "$INCLAB" down "$p" >/dev/null
  for i in "${!LABS_UP[@]}"; do [ "${LABS_UP[$i]}" = "$p" ] && unset "LABS_UP[$i]"; done
  ! grep -q "^$p-" <<<"$(ip netns list)" || fail "namespaces of $p left after down"
  [ ! -e "/sys/fs/bpf/incin/$p" ] || fail "pins of $p left after down"
  return 0
}

skip() {  # WHY: the test is skipped (ctest SKIP_RETURN_CODE 77), the lab logs stay quiet
  echo "SKIP: $*" >&2
  TEST_OK=1
  exit 77
}

# cow_root WORK ROOT: ROOT becomes a copy-on-write root of this machine
# (overlayfs over /, its upper layer on a tmpfs at WORK/cow), so dpkg can
# install packages against what is really installed here and the host stays
# untouched; SKIP without overlayfs. The test's cleanup calls cow_root_down.
cow_root() {
  mkdir -p "$1/cow" "$2"
  mount -t tmpfs tmpfs "$1/cow"
  mkdir -p "$1/cow/upper" "$1/cow/work"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$1/cow/upper,workdir=$1/cow/work" "$2" ||
    skip "overlayfs over / is not available"
}
# cow_root_down WORK ROOT [MOUNTS...]: unmounts MOUNTS (inside ROOT), ROOT and
# WORK/cow, lazily where busy (a failed test's daemons may still run there).
cow_root_down() {
  local work=$1 root=$2 m
  shift 2
  for m in "$@" "$root" "$work/cow"; do
    if mountpoint -q "$m"; then umount "$m" 2>/dev/null || umount -l "$m"; fi
  done
}

# need_ompi_component: Open MPI and the built coll/incin; sets COMPONENT and
# CPATH_MCA (Open MPI's own component directory first, ours after it).
need_ompi_component() {
  command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
  command -v ompi_info >/dev/null || skip "ompi_info not installed (openmpi-bin)"
  COMPONENT=$(readlink -f "$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name mca_coll_incin.so | head -n1)")
  local pkglib
  pkglib=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
  [ -d "$pkglib" ] || skip "ompi_info names no pkglibdir (Open MPI's component directory)"
  # shellcheck disable=SC2034  # read by lab_ompi_coll.sh
  CPATH_MCA="$pkglib:$(dirname "$COMPONENT")"
}

# need_torch [MODULE]: a python3 that imports torch.distributed (and finds MODULE)
# and the built incin extension on PYTHONPATH; sets PY.
need_torch() {
  local p mod=${1:-torch.distributed} pkg
  PY=""
  for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null && "$p" -c "import importlib.util, sys, torch.distributed
sys.exit(importlib.util.find_spec('$mod') is None)" 2>/dev/null; then
      PY=$(command -v "$p")
      break
    fi
  done
  [ -n "$PY" ] || skip "$mod is not importable (apt-get install python3-torch)"
  pkg=$(find "$INCLAB_BUILD" -maxdepth 4 -name "_incin_torch*.so" | head -n1)
  [ -n "$pkg" ] || skip "the incin torch extension is not built in $INCLAB_BUILD (userspace/torch)"
  PYTHONPATH="$(dirname "$(dirname "$pkg")")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
}

require_bins() {  # names...: skip (ctest SKIP_RETURN_CODE 77) if one is not built
  local b
  for b in "$@"; do
    if [ -z "$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name "$b" -perm -u+x 2>/dev/null | head -n1)" ]; then
      echo "SKIP: $b is not built in $INCLAB_BUILD" >&2
      TEST_OK=1
      exit 77
    fi
  done
}

FAILED=()
# pass: fails instead if any perf run failed (all runs are tried, so one
# report names every failing combination).
pass() {
  [ ${#FAILED[@]} = 0 ] || fail "${#FAILED[@]} runs failed: ${FAILED[*]}"
  TEST_OK=1
  note "PASS"
  exit 0
}

# perf LABSUFFIX TAG [--workers w0,w1] -- inc-perf-args...
# Runs inc-perf on the lab's workers (one rank per worker namespace, job id
# unique per call), then checks rank 0's JSON: exit code 0, at least one row,
# #wrong 0 on every row. Every rank compares every element with the exact
# host reference, so a pass also means bit-identical results on all ranks.
perf() {
  local lab="$P$1" tag=$2
  shift 2
  local workers=()
  if [ "${1:-}" = --workers ]; then workers=(--workers "$2"); shift 2; fi
  [ "${1:-}" = -- ] && shift
  local rc=0
  "$INCLAB" run "$lab" "${workers[@]}" --quiet --tag "$tag" -- inc-perf "$@" --json \
    --am '{am}' --job "{prefix}-$tag" --rank '{rank}' --world '{world}' --iface '{iface}' || rc=$?
  local first=${workers[1]:-w0}
  first=${first%%,*}
  local out="/tmp/inclab-$lab/logs/$tag-$first.log"
  if [ "$rc" != 0 ]; then
    echo "FAIL: inc-perf $tag ($*) exited $rc" >&2
    FAILED+=("$tag")
    return 1
  fi
  python3 - "$out" "$tag" <<'PY' || { echo "FAIL: inc-perf $tag: bad results (see $out)" >&2; FAILED+=("$tag"); return 1; }
import json, sys
doc = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") and '"results"' in line:
        doc = json.loads(line)
if doc is None:
    sys.exit("no JSON result line")
rows = doc["results"]
wrong = sum(r["wrong"] for r in rows)
print(f"  {sys.argv[2]}: {doc['collective']} {doc['dtype']} {doc['op']} world {doc['world']}: "
      f"{len(rows)} sizes {rows[0]['size'] if rows else '-'}..{rows[-1]['size'] if rows else '-'} B, "
      f"#wrong {wrong}, retransmissions {doc.get('status', {}).get('retransmissions', '?')}")
if doc["exit_code"] != 0 or not rows or wrong != 0:
    sys.exit(1)
PY
}

# inc-perf from the build tree, for `inclab run`.
INC_PERF_BIN=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name inc-perf -perm -u+x 2>/dev/null | head -n1)
if [ -n "$INC_PERF_BIN" ]; then
  PATH="$(dirname "$INC_PERF_BIN"):$PATH"
  export PATH
fi

# run_perf: perf, recording a failure for pass() instead of stopping the test.
run_perf() { perf "$@" || true; }

# The two-site WAN labs' incast (lab_wan*.sh): w3 receives for RSECS while
# w0, w1 and w2 each send FLOWS RoCEv2-framed flows (DestQP 4096) at $PPS
# datagrams/s for SECS; with an action, it runs 2 s in. Results:
# $T/TAG-recv.json and $T/TAG-send-wK.json. Needs $INCLAB, $L, $T, $PPS.
wan_incast() {  # TAG FLOWS SECS RSECS [action...]
  local tag=$1 flows=$2 secs=$3 rsecs=$4 w
  shift 4
  "$INCLAB" exec "$L" w3 python3 "$LAB_TESTS_DIR/flow_probe.py" recv 4791 --roce --by-source --seconds "$rsecs" \
    >"$T/$tag-recv.json" 2>/dev/null &
  local rpid=$!
  sleep 0.5
  for w in w0 w1 w2; do
    "$INCLAB" exec "$L" "$w" python3 "$LAB_TESTS_DIR/flow_probe.py" send 10.0.3.2 4791 --flows "$flows" \
      --pps "$PPS" --seconds "$secs" --roce-qpn 4096 >"$T/$tag-send-$w.json" &
  done
  if [ $# -gt 0 ]; then
    sleep 2
    "$@"
  fi
  wait
  wait $rpid 2>/dev/null || true
}

# The MPI labs (lab_mpi*.sh): mpi_run TAG PROGRAM PASS_REGEX [inc-mpirun
# options] -- [program args] runs PROGRAM through inc-mpirun on lab $L's
# workers (at most $MPI_RUN_TIMEOUT seconds, default 90), keeps its output in
# $OUT/TAG.log and fails the test unless it exits 0 with a line matching
# PASS_REGEX, which it prints.
mpi_run() {
  local tag=$1 prog=$2 pass=$3 rc=0 limit=${MPI_RUN_TIMEOUT:-90}
  shift 3
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  note "${KIND:-}: run $tag"
  # No retry: a launch that hangs is a failure (lab.mpi_launch).
  timeout "$limit" "$LAB_TESTS_DIR/inc-mpirun" "$L" --timeout $((limit - 10)) "${opts[@]}" -- "$prog" "$@" \
    >"$OUT/$tag.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || ! grep -q "$pass" "$OUT/$tag.log"; then
    tail -n 40 "$OUT/$tag.log" >&2
    fail "run $tag: exit $rc or wrong results (log $OUT/$tag.log)"
  fi
  grep "$pass" "$OUT/$tag.log" | sed 's/^/  /'
}

# mpi_no_error_lines TAG...: a passing job logs no error: no line of any
# rank's log ($OUT/TAG.log, every rank's stderr) at level E (the logs'
# "<time>Z E <component>: ..." format of libinc, libincmpi and coll/incin).
mpi_no_error_lines() {
  local tag lines
  for tag in "$@"; do
    lines=$(grep -E '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z E ' "$OUT/$tag.log" || true)
    [ -z "$lines" ] || fail "run $tag passed but logged errors:"$'\n'"$lines"
  done
  echo "  no error lines in: $*"
}

# mpi_offloaded_summary TAG RANKS WANT [NEVER]: the INCIN_MPI_SUMMARY_JSON of
# the offloading run TAG ($OUT/TAG-<rank>.json) on each of RANKS ranks: the
# group formed, every collective offloaded at least once and as often as on
# rank 0 (every rank takes the same path), a fallback counted for each
# reason in WANT and none for those in NEVER (space-separated lists), the
# vector datatype's broadcast packed (MPI_Pack/MPI_Unpack), libinc moved
# frames (with MPI_LOCAL_SIZE=L ranks per host: one rank per host did). Prints
# rank 0's counts.
mpi_offloaded_summary() {
  python3 - "$OUT" "$@" <<'PY' || fail "summary JSON checks failed (files $OUT/$1-*.json)"
import json, sys
out, tag, ranks, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
never = sys.argv[5].split() if len(sys.argv) > 5 else []
local = int(__import__("os").environ.get("MPI_LOCAL_SIZE", "1"))
docs = [json.load(open(f"{out}/{tag}-{r}.json")) for r in range(ranks)]
calls = ["MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Barrier", "MPI_Reduce_scatter_block", "MPI_Allgather"]
bad = []
for d in docs:
    r = d["rank"]
    if d["group"] != "ok" or d["tree_id"] < 0:
        bad.append(f"rank {r}: group {d['group']} ({d['group_detail']})")
    for c in calls:
        if d["calls"][c]["offloaded"]["calls"] == 0:
            bad.append(f"rank {r}: {c} never offloaded")
        if d["calls"][c]["offloaded"]["calls"] != docs[0]["calls"][c]["offloaded"]["calls"]:
            bad.append(f"rank {r}: {c} offloaded {d['calls'][c]['offloaded']['calls']} times, rank 0 "
                       f"{docs[0]['calls'][c]['offloaded']['calls']}")
    for w in want:
        if d["fallback_reasons"].get(w, 0) == 0:
            bad.append(f"rank {r}: no fallback counted as {w}")
    for n in never:
        if d["fallback_reasons"].get(n, 0):
            bad.append(f"rank {r}: {n} counted")
    if d["calls"]["MPI_Bcast"]["packed"] == 0:
        bad.append(f"rank {r}: no MPI_Bcast was packed")
    if local == 1 and (d["libinc"]["tx_packets"] == 0 or d["libinc"]["rx_packets"] == 0):
        bad.append(f"rank {r}: libinc moved no frames")
# Several ranks per host: only each host's member sends to the switch.
movers = sum(1 for d in docs if d["libinc"]["tx_packets"] and d["libinc"]["rx_packets"])
if local > 1 and movers != ranks // local:
    bad.append(f"{movers} ranks moved frames, want one per host ({ranks // local})")
d = docs[0]
print("  offloaded per call:", {c: d["calls"][c]["offloaded"]["calls"] for c in calls})
print("  fallback reasons:", d["fallback_reasons"])
print(f"  libinc: tx {d['libinc']['tx_packets']} rx {d['libinc']['rx_packets']} frames, "
      f"retransmissions {d['libinc']['retransmissions']}")
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# mpi_all_fell_back RANKS TAG:REASON...: in each run TAG, every one of RANKS
# ranks' INCIN_MPI_SUMMARY_JSON ($OUT/TAG-<rank>.json) counts no offloaded call
# and every call as a fallback for REASON: the check that a job without a
# usable INC group still ran everything, on MPI, for the right reason.
mpi_all_fell_back() {
  python3 - "$OUT" "$@" <<'PY' || fail "fallback-everything JSON checks failed"
import json, sys
out, ranks = sys.argv[1], int(sys.argv[2])
for run in sys.argv[3:]:
    tag, reason = run.split(":")
    for r in range(ranks):
        d = json.load(open(f"{out}/{tag}-{r}.json"))
        n = d["fallback_reasons"].get(reason, 0)
        if d["totals"]["offloaded"]["calls"] != 0 or n == 0 or n != d["totals"]["fallback"]["calls"]:
            sys.exit(f"{tag} rank {r}: offloaded {d['totals']['offloaded']['calls']}, {reason} {n}, "
                     f"fallback {d['totals']['fallback']['calls']}")
    print(f"  {tag}: every call fell back as {reason} ({n} calls per rank)")
PY
}

# Several ranks per host (lab_ranks_per_host.sh): perf_rph LABSUFFIX TAG N
# -- inc-perf-args... runs N inc-perf ranks in each of the workers $RPH_WORKERS
# (default w0 w1 w2 w3): rank = worker index x N + local rank, with
# INCIN_LOCAL_SIZE=N and INCIN_LOCAL_RANK set, so local rank 0 of each worker is
# its host's tree member (docs/operations.md "Several ranks per host"). The
# job id is unique per call ($RPH_JOB: "{lab}-TAG"); rank i's output goes to
# /tmp/inclab-LAB/logs/TAG-r<i>.log and "{rank}" in the arguments becomes the
# rank. Fails the run (FAILED) unless every rank exits 0 and rank 0's JSON
# has rows (RPH_EMPTY_OK=1: none needed, e.g. size 0), exit code 0 and
# #wrong 0 on every row.
perf_rph() {
  local lab="$P$1" tag=$2 n=$3
  shift 3
  [ "${1:-}" = -- ] && shift
  # shellcheck disable=SC2206  # a list of worker names
  local workers=(${RPH_WORKERS:-w0 w1 w2 w3}) logs="/tmp/inclab-$lab/logs" w l rank=0 rc=0 cred
  local world=$((${#workers[@]} * n)) pids=() args a
  RPH_JOB="$lab-$tag"
  # An AM with mTLS wants the job's credential (the launcher's part), bound
  # to the run's hosts; it reaches each rank in its environment (a prefix
  # assignment), never on a command line, which every user can read.
  cred=$("$INCLAB" ctl "$lab" job credential "$RPH_JOB" --hosts "$(IFS=,; echo "${workers[*]}")" 2>/dev/null) ||
    cred=""
  for w in "${workers[@]}"; do
    for l in $(seq 0 $((n - 1))); do
      args=()
      for a in "$@"; do args+=("${a//\{rank\}/$rank}"); done
      INCIN_LOCAL_SIZE=$n INCIN_LOCAL_RANK=$l INCIN_JOB_CREDENTIAL=$cred \
        "$INCLAB" exec "$lab" "$w" sh -c 'exec inc-perf "$@" --am "$INCLAB_AM"' inc-perf "${args[@]}" --json \
        --job "$RPH_JOB" --rank "$rank" --world "$world" --iface eth0 >"$logs/$tag-r$rank.log" 2>&1 </dev/null &
      pids+=($!)
      rank=$((rank + 1))
    done
  done
  for rank in "${!pids[@]}"; do
    wait "${pids[$rank]}" || {
      echo "FAIL: $tag rank $rank exited $?; last lines of $logs/$tag-r$rank.log:" >&2
      tail -n 15 "$logs/$tag-r$rank.log" | sed "s/^/  r$rank| /" >&2
      rc=1
    }
  done
  [ "$rc" = 0 ] || { FAILED+=("$tag"); return 1; }
  python3 - "$logs/$tag-r0.log" "$tag" "$n" "${RPH_EMPTY_OK:-0}" <<'PY' || { echo "FAIL: $tag: bad results (see $logs/$tag-r0.log)" >&2; FAILED+=("$tag"); return 1; }
import json, sys
doc = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") and '"results"' in line:
        doc = json.loads(line)
if doc is None:
    sys.exit("no JSON result line")
rows = doc["results"]
wrong = sum(r["wrong"] for r in rows)
print(f"  {sys.argv[2]}: {doc['collective']} {doc['dtype']} {doc['op']} world {doc['world']} "
      f"({sys.argv[3]} per host): {len(rows)} sizes {rows[0]['size'] if rows else '-'}.."
      f"{rows[-1]['size'] if rows else '-'} B, #wrong {wrong}")
if doc["exit_code"] != 0 or (not rows and sys.argv[4] != "1") or wrong != 0:
    sys.exit(1)
PY
}
