#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.topology_connectivity: both lab topologies come up, every worker reaches
# every other worker, every switch port address and the management address
# (kernel forwarding through the switch namespaces, with and without wires),
# and `inclab down` leaves no namespace and no pin behind.
. "$(dirname "$0")/lib.sh" "$1" conn

for kind in single two; do
  for wire in "" all; do
    note "$kind lab${wire:+ with wires on every link}"
    lab_up "$kind${wire:+w}" "$kind" --no-daemons ${wire:+--wire $wire} --mtu 2200
    "$INCLAB" check "$P$kind${wire:+w}"
    # MTU is applied to every data link end.
    mtu=$("$INCLAB" exec "$P$kind${wire:+w}" w3 cat /sys/class/net/eth0/mtu)
    [ "$mtu" = 2200 ] || fail "w3 eth0 mtu $mtu, want 2200"
    # The veth caveat: GRO on the peers, so XDP redirects are delivered.
    gro=$("$INCLAB" exec "$P$kind${wire:+w}" leaf0 ethtool -k w0 | awk '/generic-receive-offload/ {print $2}')
    [ "$gro" = on ] || fail "GRO is '$gro' on leaf0/w0"
    lab_down "$kind${wire:+w}"
  done
done
pass
