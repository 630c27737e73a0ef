#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Capture one member frame and replay it from another port (lab.port_spoof).

    port_spoof.py capture IFACE SRC_IP OUT [--seconds S]
        Waits on IFACE (AF_PACKET, both directions) for an INC contribution
        (IPv4 UDP 4791, BTH opcode 0x2B, INC header not RESULT/PULL) sent by
        SRC_IP and writes it to OUT as hex. Exit 1 if none came in time.

    port_spoof.py replay IFACE FRAME --src-mac M --dst-mac M --count N
                         [--ahead K --stride D --pool S] [--gap-us G]
        Sends the captured frame out of IFACE N times, with only the
        Ethernet addresses changed (the IP addresses, QPNs, tree key and
        message are the member's). With --ahead K every second frame is
        instead a forgery of a later message of the member (message id +
        D, 2D, ... KD, so that some are ahead of the running job): message
        id, slot (msg mod S) and immediate changed, every payload byte
        flipped, ICRC recomputed. Were one aggregated, the member's real
        contribution would be a duplicate and the result wrong.
        Prints one JSON line: {"sent": N, "replayed": R, "forged": F}.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "selftests"))
import icrc_ref  # noqa: E402  (the selftests' independent ICRC reference)

OFF_IP, OFF_UDP, OFF_BTH, OFF_IMMDT, OFF_INC, OFF_PAYLOAD = 14, 34, 42, 70, 74, 98
FLAG_RESULT, FLAG_PULL = 0x1, 0x8


def is_contribution(frame, src_ip):
    if len(frame) < OFF_PAYLOAD + 4 or frame[12:14] != b"\x08\x00":
        return False
    if frame[OFF_IP + 9] != 17 or frame[OFF_IP + 12:OFF_IP + 16] != src_ip:
        return False
    if struct.unpack_from("!H", frame, OFF_UDP + 2)[0] != 4791 or frame[OFF_BTH] != 0x2B:
        return False
    flags = frame[OFF_INC] & 0xF
    return not flags & (FLAG_RESULT | FLAG_PULL)


def capture(args):
    src = socket.inet_aton(args.src_ip)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((args.iface, 0))
    s.settimeout(0.5)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        try:
            frame = s.recv(65535)
        except socket.timeout:
            continue
        if is_contribution(frame, src):
            with open(args.out, "w") as f:
                f.write(frame.hex() + "\n")
            msg = struct.unpack_from("!I", frame, OFF_INC + 8)[0]
            rank = struct.unpack_from("!H", frame, OFF_INC + 6)[0]
            print(json.dumps({"captured": len(frame), "msg_id": msg, "rank": rank}))
            return 0
    print("no contribution from %s on %s within %s s" % (args.src_ip, args.iface, args.seconds), file=sys.stderr)
    return 1


def with_icrc(frame):
    masked, icrc_off = icrc_ref.masked_bytes(bytes(frame))
    value = zlib.crc32(b"\xff" * 8 + masked) & 0xFFFFFFFF
    frame[icrc_off:icrc_off + 4] = struct.pack("<I", value)
    return frame


def forged_ahead(frame, ahead, pool):
    f = bytearray(frame)
    msg = (struct.unpack_from("!I", f, OFF_INC + 8)[0] + ahead) & 0xFFFFFFFF
    struct.pack_into("!I", f, OFF_IMMDT, msg)
    struct.pack_into("!I", f, OFF_INC + 8, msg)
    struct.pack_into("!H", f, OFF_INC + 12, msg % pool)
    for i in range(OFF_PAYLOAD, len(f) - 4):
        f[i] ^= 0xFF
    return bytes(with_icrc(f))


def replay(args):
    frame = bytearray(bytes.fromhex(open(args.frame).read().strip()))
    frame[0:6] = bytes.fromhex(args.dst_mac.replace(":", ""))
    frame[6:12] = bytes.fromhex(args.src_mac.replace(":", ""))
    frame = bytes(frame)
    forgeries = [forged_ahead(frame, k * args.stride, args.pool) for k in range(1, args.ahead + 1)]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    replayed = forged = 0
    for i in range(args.count):
        if forgeries and i % 2:
            s.send(forgeries[(i // 2) % len(forgeries)])
            forged += 1
        else:
            s.send(frame)
            replayed += 1
        if args.gap_us:
            time.sleep(args.gap_us / 1e6)
    print(json.dumps({"sent": replayed + forged, "replayed": replayed, "forged": forged}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("iface")
    c.add_argument("src_ip")
    c.add_argument("out")
    c.add_argument("--seconds", type=float, default=20)
    r = sub.add_parser("replay")
    r.add_argument("iface")
    r.add_argument("frame")
    r.add_argument("--src-mac", required=True)
    r.add_argument("--dst-mac", required=True)
    r.add_argument("--count", type=int, default=300)
    r.add_argument("--ahead", type=int, default=0)
    r.add_argument("--stride", type=int, default=1)
    r.add_argument("--pool", type=int, default=256)
    r.add_argument("--gap-us", type=float, default=2000)
    a = ap.parse_args()
    return capture(a) if a.cmd == "capture" else replay(a)


if __name__ == "__main__":
    sys.exit(main())
