#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.netconf: incswitchd's NETCONF front end (docs/netconf.md), driven by
# Debian's python3-ncclient over SSH with the control-plane keys.
# (a) One switch, standalone (no AM: it would remove trees it did not make):
#     hello advertises the incin-switch module; get returns the state tree
#     (the switch, its ports); an edit-config of a tree over the four workers
#     makes it aggregate real traffic (inc-perf allreduce, int32 and float32,
#     AM-less with each rank's assignment: exact on every rank), and its
#     counters show in get; malformed or invalid edits (a bad value, an
#     unknown element, a leaf without a parent, a port the switch lacks) get
#     an rpc-error with the tag and path and change nothing (get-config
#     identical before and after); a delete removes the tree; a subscriber
#     sees tree-created, link-event down/up and tree-removed. As on gRPC,
#     only the AM's key edits (an operator's edit-config is access-denied),
#     no get or get-config shows a tree key, a key that is not authorized
#     cannot log in, a certificate's key logs in only as its CN, and a
#     login is logged only once authenticated.
# (b) (when incamd has NETCONF) the AM programs every switch over NETCONF:
#     whole jobs through single- and two-level labs are exact; the AM checks
#     each switch's SSH host key against the certificate it registered with
#     (a switch with another host key is refused), and a client stalled in
#     the SSH handshake of every switch does not hold the AM's sessions up.
. "$(dirname "$0")/lib.sh" "$1" nc
require_bins incamd incswitchd incinctl inc-perf
if ! /usr/bin/python3 -c 'import ncclient' 2>/dev/null; then
  echo "SKIP: python3-ncclient is not installed (apt-get install python3-ncclient)" >&2
  TEST_OK=1
  exit 77
fi
PERF=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name inc-perf -perm -u+x | head -n1)
NCPY="/usr/bin/python3 $LAB_TESTS_DIR/lab_netconf.py"

# ------------------------------------------------------------------ (a)
lab_up a single
L="${P}a"
LAB=/tmp/inclab-$L
host=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["listen"].rsplit(":",1)[0])' "$LAB/sw-leaf0.json")
NCADDR="$host:830"
edit_json "$LAB/sw-leaf0.json" "
doc['netconf'] = {'listen': '$NCADDR', 'authorized_certs': ['$LAB/pki/operator.pem', '$LAB/pki/am.pem']}
doc.pop('am_address', None)"
"$INCLAB" restart "$L" incswitchd-leaf0 >/dev/null
wait_log_count "$LAB/logs/incswitchd-leaf0.log" "serving NETCONF over SSH on $NCADDR" 1 ||
  fail "incswitchd does not serve NETCONF on $NCADDR"
# paramiko reads SEC1 EC keys only; the control-plane keys are PKCS#8.
openssl ec -in "$LAB/pki/operator.key" -out "$LAB/operator.ec" 2>/dev/null
openssl ec -in "$LAB/pki/am.key" -out "$LAB/am.ec" 2>/dev/null
KEY="$LAB/operator.ec"
nc() { "$INCLAB" exec "$L" mgmt $NCPY "$1" "$NCADDR" "$KEY" "${@:2}"; }
# The AM's key, as SSH user am (its CN), from the AM's address (its IP SAN).
nca() { "$INCLAB" exec "$L" mgmt $NCPY "$1" "$NCADDR" "$LAB/am.ec" "${@:2}" --user am; }
sleep 1

note "hello"
caps=$(nc hello)
grep -q '^urn:incin:yang:incin-switch?module=incin-switch&revision=' <<<"$caps" ||
  fail "hello lacks the incin-switch module: $caps"
grep -q 'urn:ietf:params:netconf:capability:notification:1.0' <<<"$caps" || fail "hello lacks :notification"

note "get: the state tree"
state=$(nc get)
for want in '<name>leaf0</name>' '<capabilities>' '<max-children>64</max-children>' '<port><name>w0</name>' \
  '<xdp-attached>true</xdp-attached>' '<statistics>'; do
  grep -qF "$want" <<<"$state" || fail "get lacks $want: ${state:0:600}"
done
[ "$(grep -o '<up>true</up>' <<<"$state" | wc -l)" = 4 ] || fail "get: want 4 ports up"

note "subscribing to notifications"
"$INCLAB" exec "$L" mgmt $NCPY listen "$NCADDR" "$KEY" 40 >"$LAB/notifications.txt" 2>&1 &
LISTEN_PID=$!
sleep 2

note "edit-config: tree 77 over the four workers"
$NCPY tree-xml "$LAB/topology.json" leaf0 77 4660 "$LAB/tree.xml" "$LAB" >/dev/null
[ "$(nca edit "$LAB/tree.xml")" = ok ] || fail "edit-config of tree 77 refused"
running=$(nc get --config)
grep -qF '<tree><id>77</id>' <<<"$running" || fail "get-config lacks tree 77: ${running:0:400}"

# One job per tree: a tree's slots keep the state of the job that used
# them, so the float32 job gets the tree anew (delete, then create again).
$NCPY tree-xml "$LAB/topology.json" leaf0 77 4660 "$LAB/delete.xml" "$LAB" --op delete >/dev/null
for dtype in int32 float32; do
  if [ "$dtype" = float32 ]; then
    [ "$(nca edit "$LAB/delete.xml")" = ok ] || fail "delete of tree 77 refused"
    [ "$(nca edit "$LAB/tree.xml")" = ok ] || fail "edit-config of tree 77 (again) refused"
  fi
  note "allreduce $dtype through the NETCONF-made tree"
  out="$LAB/perf-$dtype.txt"
  "$INCLAB" run "$L" -- "$PERF" allreduce -d "$dtype" -o sum -b 4 -e 256K -f 8 -n 3 -w 1 --json \
    --rank '{rank}' --world '{world}' --iface '{iface}' --qpn '100{rank}' \
    --assignment "$LAB/asg{rank}.json" >"$out" 2>&1 || fail "inc-perf $dtype failed: $(tail -5 "$out")"
  python3 - "$out" "$dtype" <<'PY' || fail "inc-perf $dtype results not exact"
import json, sys
doc = next(json.loads(l) for l in open(sys.argv[1]) if l.startswith("{"))
rows = doc["results"]
assert doc["exit_code"] == 0 and rows, doc
assert doc["status"]["tree_id"] == 77, doc["status"]
bad = [r for r in rows if r["wrong"] != 0]
assert not bad, bad
print("%s: %d sizes, #wrong 0 on every rank" % (sys.argv[2], len(rows)))
PY
  trees=$(nc get --subtree trees)
  python3 - "$trees" <<'PY' || fail "tree 77's state counters: ${trees:0:800}"
import re, sys
x = sys.argv[1]
st = re.search(r"<state><counters><rx-packets>(\d+)</rx-packets>", x)
assert st and int(st.group(1)) > 0, "no rx-packets"
assert re.search(r"<state>.*<member><rank>0</rank><identity>w0</identity><switch-qpn>1024</switch-qpn>", x), "member 0"
print("tree 77 rx-packets", st.group(1))
PY
done

note "malformed and invalid edits: a precise rpc-error, nothing changed"
before=$(nc get --config)
bad_edit() {  # name sed-expression want-tag want-path-part want-message-part
  sed "$2" "$LAB/tree.xml" >"$LAB/bad-$1.xml"
  local r
  r=$(nca edit "$LAB/bad-$1.xml") && fail "$1: edit-config accepted"
  case "$r" in
    "rpc-error $3|"*"$4"*"|"*"$5"*) note "$1: $r" ;;
    *) fail "$1: got '$r', want rpc-error $3 at *$4* saying *$5*" ;;
  esac
  [ "$(nc get --config)" = "$before" ] || fail "$1: the refused edit changed running"
}
bad_edit value 's#<pool-size>64</pool-size>#<pool-size>lots</pool-size>#' invalid-value \
  "tree[id='77']/pool-size" 'Invalid type uint16 value "lots"'
bad_edit unknown 's#<job-id>#<colour>red</colour><job-id>#' unknown-element "tree[id='77']" 'Node "colour" not found'
bad_edit no-parent 's#<role>single</role>#<role>leaf</role>#' invalid-value "tree[id='77']" 'needs a parent'
bad_edit port 's#<port>w1</port>#<port>nosuch</port>#' invalid-value "tree[id='77']" \
  "port 'nosuch' is not a port of this switch"
bad_edit qpn 's#<switch-qpn>1025</switch-qpn>#<switch-qpn>1024</switch-qpn>#' invalid-value "tree[id='77']" \
  'is already children[0]'

note "roles and keys: only the AM edits, no tree key is readable"
r=$(nc edit "$LAB/tree.xml") && fail "an operator's edit-config was accepted"
[[ "$r" == "rpc-error access-denied|"*"edit-config is for the am role only"* ]] || fail "operator edit-config: $r"
for who in nc nca; do
  cfg=$($who get --config)
  grep -qF '<tree><id>77</id>' <<<"$cfg" || fail "$who: get-config lacks tree 77"
  grep -q '<key>' <<<"$cfg" && fail "$who: get-config shows a tree key: ${cfg:0:400}"
  grep -q '<key>' <<<"$($who get)" && fail "$who: get shows a tree key"
done
grep -q "operator operator logged in from .* as SSH user 'operator'" "$LAB/logs/incswitchd-leaf0.log" ||
  fail "the operator's login is not logged"
if "$INCLAB" exec "$L" mgmt $NCPY hello "$NCADDR" "$LAB/am.ec" --user operator >/dev/null 2>&1; then
  fail "the AM's key logged in as SSH user operator"
fi
wait_log_count "$LAB/logs/incswitchd-leaf0.log" "logs in as SSH user 'am', not 'operator'" 1 ||
  fail "the login under another user name is not refused in the log"
grep -q "logged in from .* as SSH user 'operator'.*" <(grep -v "operator operator" "$LAB/logs/incswitchd-leaf0.log") &&
  fail "a refused login was logged as logged in"

note "a key that is not authorized cannot log in"
openssl ecparam -name prime256v1 -genkey -noout -out "$LAB/stranger.ec" 2>/dev/null
if "$INCLAB" exec "$L" mgmt $NCPY hello "$NCADDR" "$LAB/stranger.ec" >/dev/null 2>&1; then
  fail "a stranger's key logged in"
fi
wait_log_count "$LAB/logs/incswitchd-leaf0.log" "refused SSH user 'operator' from .*: its public key is not authorized" 1 ||
  fail "the refused login is not logged"

note "link down/up and delete: notifications"
"$INCLAB" exec "$L" leaf0 ip link set w3 down
sleep 1
"$INCLAB" exec "$L" leaf0 ip link set w3 up
sleep 1
[ "$(nca edit "$LAB/delete.xml")" = ok ] || fail "delete of tree 77 refused"
grep -qF '<tree><id>77</id>' <<<"$(nc get --config)" && fail "tree 77 still in running after delete"
r=$(nca edit "$LAB/delete.xml") && fail "a second delete was accepted"
[[ "$r" == "rpc-error data-missing|"*"tree 77 does not exist"* ]] || fail "second delete: $r"
for _ in $(seq 50); do
  grep -q '<tree-removed' "$LAB/notifications.txt" && break
  sleep 0.2
done
kill "$LISTEN_PID" 2>/dev/null || true
wait "$LISTEN_PID" 2>/dev/null || true
for want in '<tree-created xmlns="urn:incin:yang:incin-switch"><id>77</id><job-id>netconf-lab</job-id>' \
  '<link-event xmlns="urn:incin:yang:incin-switch"><port>w3</port><event>down</event>' \
  '<link-event xmlns="urn:incin:yang:incin-switch"><port>w3</port><event>up</event>' \
  '<tree-removed xmlns="urn:incin:yang:incin-switch"><id>77</id>'; do
  grep -qF "$want" "$LAB/notifications.txt" || fail "no notification $want: $(cat "$LAB/notifications.txt")"
done
lab_down a

# ------------------------------------------------------------------ (b)
AM_BIN=$(find "$INCLAB_BUILD" -maxdepth 4 -type f -name incamd -perm -u+x | head -n1)
if ! grep -qa 'programming switches over NETCONF' "$AM_BIN"; then
  note "(b) skipped: this incamd cannot program switches over NETCONF"
  pass
fi
for kind in single two; do
  note "(b) $kind: the AM programs every switch over NETCONF"
  lab_up "b$kind" "$kind"
  L="${P}b$kind"
  LAB=/tmp/inclab-$L
  nc_hosts=()
  for f in "$LAB"/sw-*.json; do
    sw=$(basename "$f" .json)
    sw=${sw#sw-}
    host=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["listen"].rsplit(":",1)[0])' "$f")
    nc_hosts+=("$host")
    edit_json "$f" "doc['netconf'] = {'listen': '$host:830', 'authorized_certs': ['$LAB/pki/am.pem', '$LAB/pki/operator.pem']}"
    "$INCLAB" restart "$L" "incswitchd-$sw" >/dev/null
  done
  edit_json "$LAB/am.json" "doc['netconf'] = {'enabled': True, 'port': 830}"
  "$INCLAB" restart "$L" incamd >/dev/null
  "$INCLAB" wait-switches "$L" 60 >/dev/null || fail "$kind: switches did not re-register"
  wait_log_count "$LAB/logs/incamd.log" "programming switches over NETCONF" 1 || fail "$kind: the AM does not use NETCONF"
  perf "b$kind" "nc-$kind-i32" -- allreduce -d int32 -o sum -b 4 -e 1M -f 16 -n 3 -w 1
  # A client that connects to every switch's NETCONF port and never says a
  # word (it stalls in the SSH handshake) must not hold up the AM's sessions.
  "$INCLAB" exec "$L" mgmt /usr/bin/python3 -c '
import socket, sys, time
held = [socket.create_connection((h, 830)) for h in sys.argv[1:]]
time.sleep(25)' "${nc_hosts[@]}" &
staller=$!
sleep 1
t0=$(date +%s)
  perf "b$kind" "nc-$kind-f32" -- allreduce -d float32 -o sum -b 4 -e 1M -f 16 -n 3 -w 1
kill $staller 2>/dev/null || true
wait $staller 2>/dev/null || true
note "$kind: float32 jobs took $(($(date +%s) - t0)) s while a client stalled in the SSH handshake of every switch"
  # Every leaf holds the jobs' trees, and in the two-level lab a spine
  # (the root): all of them got the trees over NETCONF.
  for f in "$LAB"/logs/incswitchd-leaf*.log; do
    grep -q "netconf: tree [0-9]* configured by session" "$f" || fail "$kind: $(basename "$f") got no tree over NETCONF"
  done
  if [ "$kind" = two ]; then
    grep -q "netconf: tree [0-9]* configured by session" "$LAB"/logs/incswitchd-spine*.log ||
      fail "two: no spine got a tree over NETCONF"
  fi
  if [ "$kind" = single ]; then
    note "(b) single: a switch whose SSH host key is not its certificate's key is refused by the AM"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$LAB/other-host.key" 2>/dev/null
    edit_json "$LAB/sw-leaf0.json" "doc['netconf']['host_key'] = '$LAB/other-host.key'"
    "$INCLAB" restart "$L" incswitchd-leaf0 >/dev/null
    "$INCLAB" wait-switches "$L" 60 >/dev/null || fail "single: leaf0 did not re-register"
    "$INCLAB" run "$L" --quiet --tag nc-hostkey -- inc-perf allreduce -d int32 -o sum -b 4 -e 4 -n 1 -w 0 --json \
      --am '{am}' --job "${P}nc-hostkey" --rank '{rank}' --world '{world}' --iface '{iface}' >/dev/null 2>&1 || true
    wait_log_count "$LAB/logs/incamd.log" "its SSH host key is not the key of the certificate it registered with" 1 ||
      fail "single: the AM did not refuse a switch presenting another SSH host key"
  fi
  lab_down "b$kind"
done
pass
