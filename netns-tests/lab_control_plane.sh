#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.control_plane: incamd and the four incswitchd of the two-level
# lab run for real and register; four members (inc-perf, one per worker,
# spread over both leaves) join; the AM builds a tree rooted at a spine with
# both leaves under it and programs it on those switches; then one member is
# killed with SIGKILL and its missing heartbeats must dismantle the tree
# (state FAILED, gone from every switch) within the configured member
# heartbeat timeout plus generous slack.
. "$(dirname "$0")/lib.sh" "$1" cp
require_bins incamd incswitchd incinctl inc-perf
TIMEOUT_MS=2000
lab_up c two --member-timeout-ms $TIMEOUT_MS
L="${P}c"
"$INCLAB" ctl "$L" switch list

# Members: a long barrier loop keeps them joined and heartbeating. Their own
# retransmission budget (1000 x 2 s) is far beyond the heartbeat timeout, so
# after the kill the survivors keep waiting and only the AM's heartbeat
# supervision can dismantle the tree (else they would leave first).
"$INCLAB" run "$L" --quiet --tag member -- inc-perf barrier -n 1000000 -w 0 \
  --timeout-us 2000000 --retries 1000 \
  --am '{am}' --job "$L-cp" --rank '{rank}' --world '{world}' --iface '{iface}' &
RUN_PID=$!

tree_json() { "$INCLAB" ctl "$L" -o json tree list; }
jq_tree() {  # python expression over `t` (the job's tree) -> printed
  tree_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
trees = [t for t in d.get("trees", []) if t.get("job_id") == sys.argv[1]]
t = trees[-1] if trees else None
print(eval(sys.argv[2]))' "$L-cp" "$1"
}

note "waiting for the job's tree to become active"
for _ in $(seq 120); do
  state=$(jq_tree 't["state"] if t else "NONE"' 2>/dev/null || echo NONE)
  [ "$state" = TREE_ACTIVE ] && break
  kill -0 $RUN_PID 2>/dev/null || fail "members exited before the tree became active"
  sleep 0.5
done
[ "$state" = TREE_ACTIVE ] || fail "tree state $state, want TREE_ACTIVE"
"$INCLAB" ctl "$L" tree show --job "$L-cp"

root=$(jq_tree 't["root_switch"]')
roles=$(jq_tree '" ".join(sorted(s["switch_name"] + ":" + s["role"] for s in t["switches"]))')
tree_id=$(jq_tree 't["tree_id"]')
members=$(jq_tree 'len(t["members"])')
note "tree $tree_id: root $root, switches $roles, members $members"
[[ "$root" == spine* ]] || fail "root is '$root', want a spine"
[ "$roles" = "leaf0:LEAF leaf1:LEAF $root:ROOT" ] || fail "tree switches '$roles', want both leaves under $root"
[ "$members" = 4 ] || fail "tree has $members members, want 4"

# Every switch of the tree holds it (the agents report live tree ids).
on_switches() {
  "$INCLAB" ctl "$L" -o json switch list | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(sorted(s["name"] for s in d.get("switches", []) if int(sys.argv[1]) in [int(x) for x in s.get("tree_ids", [])])))' "$tree_id"
}
held=$(on_switches)
[ "$held" = "$(echo "leaf0 leaf1 $root" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')" ] ||
  fail "tree $tree_id is on switches '$held', want leaf0 leaf1 $root"

# Kill rank 3's process (w3) with SIGKILL: no LeaveGroup, only silence.
victim=$(ip netns pids "$L-w3" | while read -r pid; do
  [ "$(cat /proc/$pid/comm 2>/dev/null)" = inc-perf ] && echo "$pid"; done | head -n1)
[ -n "$victim" ] || fail "no inc-perf process in $L-w3"
note "kill -9 $victim (rank 3 on w3)"
kill -KILL "$victim"
killed_at=$SECONDS

limit=$((TIMEOUT_MS / 1000 + 60))  # configured timeout + generous slack for a loaded VM
while :; do
  state=$(jq_tree 't["state"] if t else "NONE"' 2>/dev/null || echo NONE)
  [ "$state" = TREE_FAILED ] && break
  [ $((SECONDS - killed_at)) -le $limit ] || fail "tree still $state $limit s after the kill"
  sleep 0.5
done
reason=$(jq_tree 't["reason"]')
note "tree $tree_id dismantled after ~$((SECONDS - killed_at)) s: $state ($reason)"
for _ in $(seq 60); do
  held=$(on_switches)
  [ -z "$held" ] && break
  sleep 0.5
done
[ -z "$held" ] || fail "tree $tree_id still on switches '$held' after dismantling"
"$INCLAB" ctl "$L" tree show --job "$L-cp" || true

# The surviving members notice (FAILED in their heartbeat replies) and exit
# non-zero; wait for them so nothing outlives the test.
for _ in $(seq 120); do kill -0 $RUN_PID 2>/dev/null || break; sleep 0.5; done
kill -0 $RUN_PID 2>/dev/null && fail "surviving members still run 60 s after their tree was dismantled"
rc=0
wait $RUN_PID || rc=$?
[ "$rc" != 0 ] || fail "members exited 0 although their tree was dismantled"
pass
