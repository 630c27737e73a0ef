#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Many-flow UDP traffic for routing lab tests (RoCEv2-sized datagrams).

  flow_probe.py send DST PORT --flows N --pps R --seconds S [--size B] [--sport-base P] [--roce-qpn Q]
      N flows (one socket each, source ports P..P+N-1: the entropy a RoCEv2
      NIC puts in the UDP source port), round robin at R datagrams/s in
      total for S seconds. Prints {"sent": [...per flow...], "start_ms": T}.
  flow_probe.py recv PORT --seconds S [--roce] [--by-source]
      Counts for S seconds. Prints per flow: received, highest sequence
      number, lost (sequence numbers never seen below the highest), and the
      longest silence between two datagrams of the flow (the outage a path
      change caused), plus when the last datagram of each flow was sent, and
      the datagrams received in each second since the first ("per_second").
      --roce: each datagram carries a RoCEv2 BTH first (DestQP Q+flow, PSN =
      sequence); "reordered" counts datagrams that arrived after a later one
      of their flow. --by-source keys flows by sender address too.
"""
import argparse
import json
import socket
import struct
import sys
import time

HDR = struct.Struct("!HId")  # flow, seq, send time (s since epoch)
# --roce: a RoCEv2 base transport header first (opcode UC SEND only, P_Key
# 0xffff, DestQP = the flow's QPN, PSN = seq mod 2^24), sent to UDP 4791.
BTH = struct.Struct("!BBHII")
UC_SEND_ONLY = 0x24


def bth(qpn, seq):
    return BTH.pack(UC_SEND_ONLY, 0, 0xFFFF, qpn & 0xFFFFFF, seq & 0xFFFFFF)


def send(a):
    socks = []
    for f in range(a.flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", a.sport_base + f))
        socks.append(s)
    head = BTH.size if a.roce_qpn is not None else 0
    pad = bytes(max(0, a.size - HDR.size - head))
    sent = [0] * a.flows
    start = time.time()
    interval = 1.0 / a.pps
    i = 0
    while True:
        now = time.time()
        if now - start >= a.seconds:
            break
        due = start + i * interval
        if due > now:
            time.sleep(due - now)
        f = i % a.flows
        try:
            msg = HDR.pack(f, sent[f], time.time()) + pad
            if a.roce_qpn is not None:
                msg = bth(a.roce_qpn + f, sent[f]) + msg
            socks[f].sendto(msg, (a.dst, a.port))
        except OSError:
            pass  # no route for a moment: the datagram is lost, as on a wire
        sent[f] += 1
        i += 1
    print(json.dumps({"sent": sent, "start_ms": int(start * 1000)}))


def recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.2)
    print("ready", file=sys.stderr, flush=True)
    flows = {}
    per_second = []  # datagrams received in each second since the first one
    first = None
    end = time.time() + a.seconds
    while time.time() < end:
        try:
            data, src = s.recvfrom(65536)
        except socket.timeout:
            continue
        if a.roce:
            if len(data) < BTH.size + HDR.size:
                continue
            data = data[BTH.size:]
        if len(data) < HDR.size:
            continue
        f, seq, t_sent = HDR.unpack_from(data)
        if a.by_source:
            f = f"{src[0]}:{f}"
        now = time.time()
        first = now if first is None else first
        sec = int(now - first)
        per_second.extend([0] * (sec + 1 - len(per_second)))
        per_second[sec] += 1
        st = flows.setdefault(f, {"received": 0, "max_seq": -1, "gap_ms": 0.0, "last": now,
                                  "last_sent_ms": 0, "reordered": 0})
        if seq < st["max_seq"]:
            st["reordered"] += 1  # arrived after a later datagram of its flow
        st["gap_ms"] = max(st["gap_ms"], (now - st["last"]) * 1000)
        st["last"] = now
        st["received"] += 1
        st["max_seq"] = max(st["max_seq"], seq)
        st["last_sent_ms"] = int(t_sent * 1000)
    out = {}
    for f, st in sorted(flows.items()):
        out[str(f)] = {"received": st["received"], "max_seq": st["max_seq"],
                       "lost": st["max_seq"] + 1 - st["received"], "longest_gap_ms": round(st["gap_ms"], 1),
                       "last_sent_ms": st["last_sent_ms"], "reordered": st["reordered"]}
    print(json.dumps({"flows": out, "received": sum(v["received"] for v in out.values()),
                      "lost": sum(v["lost"] for v in out.values()),
                      "reordered": sum(v["reordered"] for v in out.values()), "per_second": per_second}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("send")
    ps.add_argument("dst")
    ps.add_argument("port", type=int)
    ps.add_argument("--flows", type=int, default=16)
    ps.add_argument("--pps", type=float, default=1000)
    ps.add_argument("--seconds", type=float, default=5)
    ps.add_argument("--size", type=int, default=1024)
    ps.add_argument("--sport-base", type=int, default=49152)
    ps.add_argument("--roce-qpn", type=int, help="RoCEv2 mode: flow i goes to DestQP QPN+i (send to port 4791)")
    pr = sub.add_parser("recv")
    pr.add_argument("port", type=int)
    pr.add_argument("--seconds", type=float, default=10)
    pr.add_argument("--roce", action="store_true", help="datagrams start with a RoCEv2 BTH")
    pr.add_argument("--by-source", action="store_true", help="tell flows of different senders apart")
    a = p.parse_args()
    send(a) if a.cmd == "send" else recv(a)


if __name__ == "__main__":
    main()
