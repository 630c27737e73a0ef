#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The packages under systemd (started by guest/init as a oneshot service,
# systemd being PID 1 of the guest): installs the .debs named by incin.debs=
# with dpkg, configures one switch whose four ports lead to four worker
# namespaces, starts incamd.service and incswitchd@leaf0.service, runs an
# exact allreduce with the installed inc-perf through them, then checks what
# the units promise: READY and STATUS reach systemd, reload is SIGHUP,
# restart keeps XDP attached and the new agent re-adopts the tree state,
# stop detaches XDP and removes the pins; and that the sandboxing holds:
# systemd-analyze security's exposure of both units within bounds, incamd
# running as the user incamd without capabilities and with its state private,
# incswitchd with exactly the capabilities its unit names. One result line per
# check in results.txt on the host share; the guest powers off at the end.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
arg() { sed -n "s/.*incin\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
DEBS=$(arg debs)
OUT=/mnt/incin-out
up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "PKG[$(up)]: $*"; }
result() { echo "$*" >>"$OUT/results.txt"; log "RESULT $*"; }
check() {  # NAME command...: PASS or FAIL line
  local name=$1
  shift
  if "$@"; then result "PASS $name"; else result "FAIL $name"; fi
}
finish() {
  result "DONE guest uptime $(up) s"
  sync
  systemctl poweroff -ff 2>/dev/null || echo o >/proc/sysrq-trigger
  sleep 10
}
trap finish EXIT

mkdir -p "$OUT"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 incinout "$OUT" || {
  echo "PKG: cannot mount the results share"
  exit 1
}
result "BOOT $(up) s kernel $(uname -r), systemd $(systemctl --version | head -n1 | cut -d' ' -f2) as PID 1 ($(cat /proc/1/comm))"
modprobe -a veth || { result "FAIL modprobe veth"; exit 1; }
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
ip link set lo up

# Install: dependencies are the host's (this root is the host's, read-only,
# under a tmpfs overlay). man-db's trigger would re-index every man page of
# the host over 9p, minutes under TCG: its auto-update is off here.
rm -f /var/lib/man-db/auto-update
check "dpkg -i of $(ls "$DEBS"/*.deb | wc -l) packages" dpkg -i "$DEBS"/*.deb
check "units known to systemd after the postinst's daemon-reload" \
  bash -c 'systemctl cat incamd.service incswitchd@leaf0.service >/dev/null'

# The fabric: one switch (this namespace) with ports w0..w3, one worker
# namespace behind each. Plaintext control plane ("insecure"): what the
# units do is tested here, mTLS and authorization in lab.security.
export INC_INSECURE=1 INCIN_INSECURE=1
hosts=""
ports=""
for i in 0 1 2 3; do
  ip netns add w$i
  ip link add w$i address 02:1a:00:00:0$i:01 type veth peer name eth0 address 02:1a:00:00:0$i:02 netns w$i
  ip addr add 10.0.$i.1/24 dev w$i
  ip link set w$i up mtu 9000
  ip -n w$i addr add 10.0.$i.2/24 dev eth0
  ip -n w$i link set eth0 up mtu 9000
  ip -n w$i link set lo up
  ip -n w$i route add default via 10.0.$i.1
  ethtool -K w$i gro on tx off >/dev/null
  ip netns exec w$i ethtool -K eth0 gro on tx off >/dev/null
  hosts+="${hosts:+,}{\"name\": \"w$i\", \"ip\": \"10.0.$i.2\", \"mac\": \"02:1a:00:00:0$i:02\", \"switch_name\": \"leaf0\", \"switch_port\": \"w$i\"}"
  ports+="${ports:+,}{\"name\": \"w$i\", \"ip\": \"10.0.$i.1\"}"
done
cat >/etc/incin/topology.json <<J
{"switches": [{"name": "leaf0", "kind": "leaf"}], "hosts": [$hosts], "links": []}
J
cat >/etc/incin/incamd.json <<J
{"listen": "0.0.0.0:50051", "topology_file": "/etc/incin/topology.json", "metrics_listen": "127.0.0.1:9463",
 "insecure": true}
J
cat >/etc/incin/switch-leaf0.json <<J
{"switch_name": "leaf0", "listen": "127.0.0.1:50061", "am_address": "127.0.0.1:50051", "ports": [$ports],
 "metrics_listen": "127.0.0.1:9464", "insecure": true}
J

start_unit() {  # UNIT: systemctl start, and the unit's journal when that fails
  systemctl start "$1" && return 0
  journalctl -u "$1" --no-pager -n 40 | sed "s/^/PKG: $1: /"
  return 1
}
check "systemctl start incamd" start_unit incamd.service
check "systemctl start incswitchd@leaf0" start_unit incswitchd@leaf0.service
log "incamd: $(systemctl show -p StatusText --value incamd)"
log "incswitchd@leaf0: $(systemctl show -p StatusText --value incswitchd@leaf0)"
check "incamd STATUS= from sd_notify" bash -c '[[ "$(systemctl show -p StatusText --value incamd)" == "listening on 0.0.0.0:50051" ]]'
check "incswitchd STATUS= from sd_notify" \
  bash -c '[[ "$(systemctl show -p StatusText --value incswitchd@leaf0)" == "serving SwitchAgent on 127.0.0.1:50061, 4 ports with XDP attached" ]]'
for _ in $(seq 100); do
  grep -q leaf0 <<<"$(incinctl --am 127.0.0.1:50051 switch list 2>/dev/null)" && break
  sleep 0.2
done

# The sandbox. systemd-analyze security rates a unit's exposure from 0 (locked
# down) to 10 (no sandbox).
exposure_at_most() {  # UNIT BOUND
  local out score
  out=$(systemd-analyze security "$1" 2>&1 || true)
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  log "$1: exposure ${score:-?} (at most $2)"
  [ -n "$score" ] && awk -v s="$score" -v b="$2" 'BEGIN { exit !(s <= b) }'
}
check "incamd.service exposure at most 4.0" exposure_at_most incamd.service 4.0
check "incswitchd@leaf0.service exposure at most 6.0" exposure_at_most incswitchd@leaf0.service 6.0
status_of() {  # UNIT FIELD: a field of the unit's main process's /proc/PID/status
  sed -n "s/^$2:[[:space:]]*//p" "/proc/$(systemctl show -p MainPID --value "$1")/status" | tr -s '\t' ' '
}
caps_of() {  # UNIT FIELD: that capability set by name, sorted, comma-separated
  capsh --decode="$(status_of "$1" "$2")" | sed 's/^0x[0-9a-f]*=//' | tr ',' '\n' | sort | paste -sd,
}
runs_as_incamd() { local u; u=$(id -u incamd) && [ "$(status_of incamd Uid)" = "$u $u $u $u" ]; }
no_caps() { [ "$(status_of "$1" CapEff) $(status_of "$1" CapBnd)" = "0000000000000000 0000000000000000" ]; }
locked() { [ "$(status_of "$1" NoNewPrivs) $(status_of "$1" Seccomp)" = "1 2" ]; }
# The state file and its WAL journal hold every tree's key.
state_private() {
  [ "$(stat -c '%a %U' /var/lib/incin)" = "700 incamd" ] && [ -f /var/lib/incin/incamd.db ] &&
    [ -z "$(find /var/lib/incin -mindepth 1 \( ! -perm 600 -o ! -user incamd \) -print)" ]
}
SWITCH_CAPS=$(sed -n 's/^CapabilityBoundingSet=//p' /usr/lib/systemd/system/incswitchd@.service |
  tr 'A-Z ' 'a-z\n' | sort | paste -sd,)
switch_caps() { [ "$(caps_of incswitchd@leaf0 CapBnd)" = "$SWITCH_CAPS" ] && [ "$(caps_of incswitchd@leaf0 CapEff)" = "$SWITCH_CAPS" ]; }
for u in incamd incswitchd@leaf0; do
  log "$u: Uid $(status_of $u Uid), CapEff $(caps_of $u CapEff), CapBnd $(caps_of $u CapBnd)," \
    "NoNewPrivs $(status_of $u NoNewPrivs), Seccomp $(status_of $u Seccomp)"
done
log "AM state: $(stat -c '%n %a %U:%G' /var/lib/incin /var/lib/incin/* | paste -sd';')"
check "incamd runs as the user incamd" runs_as_incamd
check "incamd has no capabilities" no_caps incamd
check "incamd: no new privileges, seccomp filter" locked incamd
check "AM state directory 0700 and its files 0600, owned by incamd" state_private
check "incswitchd has exactly the unit's capabilities ($SWITCH_CAPS)" switch_caps
check "incswitchd: no new privileges, seccomp filter" locked incswitchd@leaf0

job() {  # TAG: an exact 4-rank allreduce with the installed inc-perf
  local tag=$1 i pids=() rc=0
  for i in 0 1 2 3; do
    ip netns exec w$i inc-perf allreduce -d int32 -o sum -b 4 -e 1M -f 16 -n 3 -w 1 --json --am 10.0.$i.1:50051 \
      --job "$tag" --rank $i --world 4 --iface eth0 >"/tmp/$tag-w$i.json" 2>"/tmp/$tag-w$i.log" &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait "${pids[$i]}" || rc=1; done
  cp /tmp/$tag-w*.log /tmp/$tag-w*.json "$OUT/" 2>/dev/null
  if [ "$rc" != 0 ]; then
    for i in 0 1 2 3; do tail -n 3 "/tmp/$tag-w$i.log" | sed "s/^/PKG: $tag w$i: /"; done
    return 1
  fi
  python3 -c '
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
rows = d["results"]
w = sum(r["wrong"] for r in rows)
print("PKG: %s: %d sizes, #wrong %d, retransmissions %s" % (sys.argv[2], len(rows), w, d["status"]["retransmissions"]))
sys.exit(0 if d["exit_code"] == 0 and w == 0 and rows else 1)' "/tmp/$tag-w0.json" "$tag"
}
check "allreduce through the units, exact" job units1

journal_has() { grep -q -- "$2" <<<"$(journalctl -u "$1" --no-pager)"; }
reload_is_sighup() { systemctl reload incswitchd@leaf0 && sleep 1 && journal_has incswitchd@leaf0 "SIGHUP: reloading the configuration"; }
check "systemctl reload incswitchd@leaf0 is a SIGHUP" reload_is_sighup
# Log levels reach the journal as priorities: the agent's plaintext warning is
# found with -p warning (priority 4) and its info lines are not.
warn_is_priority() {
  local w i
  w=$(journalctl -u incswitchd@leaf0 --no-pager -o cat -p warning)
  i=$(journalctl -u incswitchd@leaf0 --no-pager -o cat -p info..info)
  grep -q "W incswitchd: insecure: plaintext gRPC" <<<"$w" && ! grep -q " I incswitchd: " <<<"$w" &&
    grep -q " I incswitchd: " <<<"$i" && ! grep -q "<[0-7]>" <<<"$w$i"
}
check "journal: warnings have priority warning, info lines info" warn_is_priority
am_reload_is_sighup() { systemctl reload incamd && sleep 1 && journal_has incamd "SIGHUP: config /etc/incin/incamd.json reread"; }
check "systemctl reload incamd is a SIGHUP" am_reload_is_sighup
# incamd as its own user: a restart reads back the state it wrote.
check "systemctl restart incamd" systemctl restart incamd
check "restart: incamd restored its state from /var/lib/incin/incamd.db" journal_has incamd "am_restored.*: 1 switches"
pid1=$(systemctl show -p MainPID --value incswitchd@leaf0)
check "systemctl restart incswitchd@leaf0" systemctl restart incswitchd@leaf0
check "restart: the old agent left XDP attached (SIGUSR2)" \
  journal_has incswitchd@leaf0 "received SIGUSR2: stopping, leaving XDP attached"
check "restart: the new agent re-adopted the data path" journal_has incswitchd@leaf0 "re-adopted"
check "restart: a new main process" bash -c "[ \"\$(systemctl show -p MainPID --value incswitchd@leaf0)\" != $pid1 ]"
check "allreduce after the restart, exact" job units2

check "systemctl stop incswitchd@leaf0" systemctl stop incswitchd@leaf0
check "stop: XDP detached from w0" bash -c '! grep -q xdp <<<"$(ip link show w0)"'
check "stop: pins removed" bash -c '[ ! -e /sys/fs/bpf/incin/leaf0 ]'
check "systemctl stop incamd" systemctl stop incamd
journalctl -u incamd -u incswitchd@leaf0 --no-pager >"$OUT/journal.txt" 2>&1
