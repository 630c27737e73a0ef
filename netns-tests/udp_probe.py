#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""UDP probe for lab tests (no ping/iperf needed).

  udp_probe.py send IP PORT COUNT       send COUNT numbered datagrams, paced
  udp_probe.py recv PORT IDLE_SECONDS    count datagrams until IDLE_SECONDS
                                          pass without one (after the first);
                                          prints {"received": N, "rcvbuf_errors": E}
The receiver reports the namespace's UDP RcvbufErrors so a test can tell
drops by the lab's wire program from drops by a full socket buffer.
"""
import json
import socket
import sys
import time


def udp_rcvbuf_errors():
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    header, values = rows[0], rows[1]
    return int(values[header.index("RcvbufErrors")])


def send(ip, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = bytes(64)
    for i in range(count):
        s.sendto(i.to_bytes(4, "big") + payload, (ip, port))
        if i % 200 == 199:
            time.sleep(0.002)  # pacing: keep the receiver's buffer from overflowing


def recv(port, idle):
    errors_before = udp_rcvbuf_errors()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind(("0.0.0.0", port))
    print("ready", file=sys.stderr, flush=True)
    s.settimeout(120)
    received = 0
    seen = set()
    while True:
        try:
            data = s.recv(2048)
        except socket.timeout:
            break
        seq = int.from_bytes(data[:4], "big")
        if seq not in seen:
            seen.add(seq)
            received += 1
        s.settimeout(idle)
    print(json.dumps({"received": received,
                      "rcvbuf_errors": udp_rcvbuf_errors() - errors_before}))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(__doc__)
