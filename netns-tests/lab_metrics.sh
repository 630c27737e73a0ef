#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.metrics: the Prometheus endpoints of incamd and incswitchd follow a
# job. inclab gives every daemon metrics_listen on its management address
# (port 9464). Scraped from the management network before, twice during and
# after a 4-worker allreduce (and while 64 slow connections per daemon from
# an unprivileged process on a worker wait): the AM shows its switch alive, the
# tree ACTIVE with 4 members during the job and a programming observed in
# its histograms; the switch's contribution and completion counters, the
# tree's and every member's counters grow between the two scrapes in the
# job, and every port reports XDP attached; every metric the Grafana
# dashboard (docs/grafana-incin.json) and the alerting rules
# (packaging/prometheus/incin-rules.yml) query is exported, the AM counted
# the job's joins as OK and none failed; last, `promtool check metrics` finds nothing to
# lint in either daemon's scrape (SKIP, after every other check passed, when
# promtool is not installed).
. "$(dirname "$0")/lib.sh" "$1" mt
require_bins incswitchd incamd incinctl inc-perf

lab_up m single
L="${P}m"
T="/tmp/inclab-$L"
am_url="http://$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics_listen"])' "$T/am.json")/metrics"
sw_url="http://$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics_listen"])' "$T/sw-leaf0.json")/metrics"
scrape() {  # URL OUT: the text, fetched from the management namespace
  "$INCLAB" exec "$L" mgmt python3 -c '
import sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=5)
assert r.status == 200, r.status
assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
sys.stdout.write(r.read().decode())' "$1" >"$2" || fail "scraping $1 failed"
}
value() {  # FILE METRIC-WITH-LABELS: the sample's value, or "none"
  awk -v m="$2" '$1 == m {print $2; found=1} END {if (!found) print "none"}' "$1"
}

scrape "$am_url" "$T/am0.txt"
scrape "$sw_url" "$T/sw0.txt"
[ "$(value "$T/am0.txt" 'incin_am_switches{state="alive"}')" = 1 ] || fail "AM: 1 switch alive expected (see $T/am0.txt)"
[ "$(value "$T/am0.txt" 'incin_am_trees{state="ACTIVE"}')" = 0 ] || fail "AM: a tree before any job"
for p in w0 w1 w2 w3; do
  [ "$(value "$T/sw0.txt" "incin_port_xdp_attached{switch=\"leaf0\",port=\"$p\",mode=\"native\"}")" = 1 ] ||
    fail "switch: port $p not reported with XDP attached (see $T/sw0.txt)"
done

note "a job, scraped twice while it runs"
perf m job -- allreduce -d int32 -o sum -b 1M -e 1M -n 300 -w 0 &
job=$!
tree=""
for _ in $(seq 100); do
  scrape "$am_url" "$T/am1.txt"
  [ "$(value "$T/am1.txt" 'incin_am_trees{state="ACTIVE"}')" = 1 ] && break
  sleep 0.1
done
[ "$(value "$T/am1.txt" 'incin_am_trees{state="ACTIVE"}')" = 1 ] || fail "AM: the job's tree never showed ACTIVE"
[ "$(value "$T/am1.txt" 'incin_am_members')" = 4 ] || fail "AM: 4 members expected during the job"
sleep 0.5
scrape "$sw_url" "$T/sw1.txt"
tree=$(sed -n 's/^incin_tree_completions_total{switch="leaf0",tree="\([0-9]*\)"}.*/\1/p' "$T/sw1.txt" | head -n1)
[ -n "$tree" ] || fail "switch: no tree counters during the job (see $T/sw1.txt)"
sleep 1
scrape "$sw_url" "$T/sw2.txt"
kill -0 $job 2>/dev/null || fail "the job ended before the second scrape: make it longer"
grow() {  # METRIC-WITH-LABELS: must be larger in sw2 than in sw1
  local a b
  a=$(value "$T/sw1.txt" "$1")
  b=$(value "$T/sw2.txt" "$1")
  [ "$a" != none ] && [ "$b" != none ] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)' "$a" "$b" ||
    fail "switch: $1 did not grow during the job ($a -> $b)"
  echo "  $1: $a -> $b"
}
grow 'incin_switch_contributions_total{switch="leaf0"}'
grow 'incin_switch_completions_total{switch="leaf0"}'
grow "incin_tree_completions_total{switch=\"leaf0\",tree=\"$tree\"}"
grow "incin_tree_rx_bytes_total{switch=\"leaf0\",tree=\"$tree\"}"
members=$(grep -c "^incin_member_rx_packets_total{switch=\"leaf0\",tree=\"$tree\"," "$T/sw2.txt" || true)
[ "$members" = 4 ] || fail "switch: $members members with counters, want 4"
wait $job || fail "the job failed"

scrape "$am_url" "$T/am3.txt"
n=$(value "$T/am3.txt" 'incin_am_tree_program_seconds_count')
[ "$n" != none ] && [ "$n" -ge 1 ] || fail "AM: no tree programming in the histogram (count '$n')"
[ "$(value "$T/am3.txt" 'incin_am_tree_build_seconds_bucket{le="+Inf"}')" = "$n" ] ||
  fail "AM: the build histogram's +Inf bucket differs from the programming count"
note "AM: $n tree programming(s) observed; scrapes kept in $T when the test fails"

joins=$(value "$T/am3.txt" 'incin_am_joins_total{code="OK"}')
[ "$joins" != none ] && [ "$joins" -ge 4 ] ||
  fail "AM: incin_am_joins_total{code=\"OK\"} is '$joins', want at least the job's 4 joins"
! grep -q '^incin_am_joins_total{code="[A-Z_]*"} [1-9]' <(grep -v 'code="OK"' "$T/am3.txt") ||
  fail "AM: failed joins counted in a job that ran: $(grep '^incin_am_joins_total' "$T/am3.txt" | tr '\n' ' ')"

# Every metric the alerting rules name exists in a scrape.
python3 - "$LAB_TESTS_DIR/../packaging/prometheus/incin-rules.yml" "$T/am3.txt" "$T/sw2.txt" <<'PY' ||
import re, sys
names = set()
for f in sys.argv[2:]:
    for line in open(f):
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
missing = sorted(set(re.findall(r"\b(incin_[a-z_]+)", open(sys.argv[1]).read())) - names)
if missing:
    sys.exit("the alerting rules query metrics no daemon exports: " + ", ".join(missing))
PY
  fail "packaging/prometheus/incin-rules.yml queries metrics that do not exist"

# Every metric the Grafana dashboard in docs/ queries exists.
python3 - "$LAB_TESTS_DIR/../docs/grafana-incin.json" "$T/am3.txt" "$T/sw2.txt" <<'PY' ||
import json, re, sys
names = set()
for f in sys.argv[2:]:
    for line in open(f):
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
missing = set()
for panel in json.load(open(sys.argv[1]))["panels"]:
    for target in panel["targets"]:
        for m in re.findall(r"\b(incin_[a-z_]+)", target["expr"]):
            if m not in names:
                missing.add(m)
if missing:
    sys.exit("dashboard queries metrics no daemon exports: " + ", ".join(sorted(missing)))
PY
  fail "docs/grafana-incin.json queries metrics that do not exist"

# Slow clients: an unprivileged process on worker w1 holds 64 connections to
# each daemon's /metrics, each with half a request line sent and nothing
# more (they used to hold every thread of the HTTP server); scrapes from the
# management network still answer, and the daemons hang up on the slow ones.
note "64 slow connections per daemon from w1 (uid 65534) while scraping from mgmt"
SLOW='
import socket, sys, time
held = []
for url in sys.argv[1:]:
    host, port = url.split("/")[2].split(":")
    for _ in range(64):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            s.send(b"GET /met")
            held.append(s)
        except OSError:
            pass
print(len(held), "connected", flush=True)
time.sleep(12)
closed = 0
for s in held:
    try:
        s.settimeout(0.1)
        closed += s.recv(1) == b""
    except OSError as e:
        closed += not isinstance(e, socket.timeout)
print(closed, "hung up on", flush=True)
'
(cd / && exec "$INCLAB" exec "$L" w1 setpriv --reuid 65534 --regid 65534 --clear-groups -- /usr/bin/python3 -c "$SLOW" "$am_url" "$sw_url" \
  ) >"$T/slow.txt" 2>&1 &
slow=$!
for _ in $(seq 50); do grep -q connected "$T/slow.txt" 2>/dev/null && break; sleep 0.1; done
grep -q connected "$T/slow.txt" || fail "the slow clients did not start: $(cat "$T/slow.txt")"
for i in 1 2 3; do
  scrape "$am_url" "$T/am-slow$i.txt"
  scrape "$sw_url" "$T/sw-slow$i.txt"
  sleep 1
done
wait $slow || fail "the slow clients failed: $(cat "$T/slow.txt")"
connected=$(sed -n 's/ connected$//p' "$T/slow.txt")
hung=$(sed -n 's/ hung up on$//p' "$T/slow.txt")
note "slow clients: $connected connected, $hung hung up on by the daemons; 6 scrapes answered"
[ -n "$connected" ] && [ "$connected" -gt 0 ] && [ "${hung:-0}" = "$connected" ] || fail "the daemons kept slow connections open past their request timeout ($(tr '\n' ' ' <"$T/slow.txt"))"

# Prometheus's own linter on both daemons' live scrapes (names, units,
# suffixes, HELP and TYPE lines).
command -v promtool >/dev/null ||
  skip "promtool is not installed (apt-get install prometheus; scripts/deps.sh installs it): every other check passed"
for f in am3 sw2; do
  promtool check metrics <"$T/$f.txt" >"$T/$f.lint" 2>&1 || { cat "$T/$f.lint"; fail "promtool check metrics: $f.txt"; }
  note "promtool check metrics: $f.txt clean"
done
pass
