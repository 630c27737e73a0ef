#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.arn_tree_move: an aggregation tree moves off a failed leaf-spine link.
# Four workers on two leaves run a long int32 allreduce through a two-level
# tree; mid-run the link from leaf0 to the tree's root spine goes down. The
# AM moves the tree to the other spine (members keep their leaf, QPN and
# slots), the new root pulls any result the old root had sent to one leaf
# only, and the run finishes with every element of every rank exact. Checks:
# inc-perf passes (#wrong 0), the tree is ACTIVE with one move and the other
# spine as root, the old root no longer holds it. Measured and printed, not
# asserted: link down -> tree_moved, and the run's extra time over an
# identical run without a failure.
. "$(dirname "$0")/lib.sh" "$1" mv
require_bins incswitchd incamd incinctl inc-perf

lab_up m two
L="${P}m"
T="/tmp/inclab-$L"
ctl() { "$INCLAB" ctl "$L" "$@"; }
now_ms() { date +%s%3N; }
# 1 MiB int32 sums, long enough to cut a link in the middle: the cut comes a
# quarter of the baseline's duration after the tree is active, so a faster
# data path cannot finish the run before the link goes down.
ARGS=(allreduce -d int32 -o sum -b 1M -e 1M -n 400 -w 0)

tree_json() { ctl -o json tree show --job "$L-$1"; }
tree_field() {  # tag python-expression-over-t
  tree_json "$1" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["tree"]
print(eval(sys.argv[1]))' "$2"
}
switch_stats() {  # switch -> "pulls_tx pull_answers results_adopted"
  ctl -o json stats | python3 -c '
import json, sys
want = sys.argv[1]
for s in json.load(sys.stdin)["switches"]:
    if s.get("switch_name") == want:
        g = s.get("global", {})
        print(*(int(g.get(k, 0)) for k in ("pulls_tx", "pull_answers", "results_adopted")))
        break
else:
    print("? ? ?")' "$1"
}

note "baseline: the same allreduce without a failure"
t0=$(now_ms)
perf m base -- "${ARGS[@]}" || fail "the baseline run failed"
base_ms=$(($(now_ms) - t0))

note "failure run: cut leaf0's link to the root spine mid-run"
t0=$(now_ms)
perf m move -- "${ARGS[@]}" >"$T/move.out" 2>&1 &
perf_pid=$!
root=""
for _ in $(seq 1 200); do
  root=$(tree_field move 't["root_switch"] if t.get("state") == "TREE_ACTIVE" else ""' 2>/dev/null || true)
  [ -n "$root" ] && break
  sleep 0.05
done
[ -n "$root" ] || { wait $perf_pid || true; cat "$T/move.out"; fail "the tree never became active"; }
case "$root" in
spine0) port=s0 other=spine1 ;;
spine1) port=s1 other=spine0 ;;
*) fail "unexpected root $root" ;;
esac
cut_after_ms=$((base_ms / 4))
[ "$cut_after_ms" -ge 300 ] || cut_after_ms=300
sleep "$(printf '%d.%03d' $((cut_after_ms / 1000)) $((cut_after_ms % 1000)))"
t_down=$(now_ms)
ip -n "$L-leaf0" link set "$port" down
moved_at=""
for _ in $(seq 1 400); do
  if [ "$(tree_field move 't["root_switch"]' 2>/dev/null || true)" = "$other" ]; then
    moved_at=$(tree_field move 'int(t["last_move_unix_ms"])')
    break
  fi
  sleep 0.025
done
[ -n "$moved_at" ] || fail "the tree did not move to $other after leaf0 $port went down"
rc=0
wait $perf_pid || rc=$?
run_ms=$(($(now_ms) - t0))
cat "$T/move.out"
[ "$rc" = 0 ] || fail "the allreduce across the link failure did not finish with exact results"

tree_json move >"$T/tree_after.json"
python3 - "$T/tree_after.json" "$other" <<'PY' || fail "the tree's record after the move is wrong (see $T/tree_after.json)"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tree"]
assert t["root_switch"] == sys.argv[2], t["root_switch"]
assert int(t.get("moves", 0)) == 1, t.get("moves")
assert "went down" in t.get("last_move_reason", ""), t.get("last_move_reason")
roots = [s for s in t["switches"] if s["role"] == "ROOT"]
assert [s["switch_name"] for s in roots] == [sys.argv[2]], roots
PY
ctl -o json switch show "$root" >"$T/old_root.json"
python3 - "$T/old_root.json" <<'PY' || fail "the old root still holds the tree"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["switch_summary"]
assert not s.get("tree_ids"), s.get("tree_ids")
PY
read -r pulls _ adopted <<<"$(switch_stats "$other")"
read -r _ leaf0_answers _ <<<"$(switch_stats leaf0)"
read -r _ leaf1_answers _ <<<"$(switch_stats leaf1)"
note "link leaf0-$root down: tree moved to $other after $((moved_at - t_down)) ms (AM event time)"
note "allreduce of 400 x 1 MiB: ${base_ms} ms without failure, ${run_ms} ms across it (+$((run_ms - base_ms)) ms)"
note "new root $other: pulls sent $pulls, results adopted $adopted; leaves answered pulls: leaf0 $leaf0_answers, leaf1 $leaf1_answers"
ip -n "$L-leaf0" link set "$port" up
pass
