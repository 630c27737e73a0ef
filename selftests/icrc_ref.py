#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent RoCEv2 ICRC reference for the incin selftests (stdlib only).

The C++ ICRC (userspace/common/icrc.cc) and the XDP data path are checked
against this file, so it shares no code with them: it parses the frame itself
and computes the CRC twice, once with zlib and once with a table-driven
crc32_le written out here, and refuses to answer if the two disagree.

Definition (docs/wire-format.md, verified against Linux rxe):
    masked = IPv4 header, TOS/TTL/header checksum set to all ones
           + UDP header, checksum set to all ones
           + BTH, byte 4 (FECN/BECN/reserved) set to 0xFF
           + every byte after the BTH up to the ICRC
    value  = ~crc32_le(0xDEBB20E3, masked) = zlib.crc32(b'\\xff' * 8 + masked)
    wire   = value as a little-endian u32 (low byte first)

Usage:
    icrc_ref.py selftest          known-answer checks (incl. two frames sent by rxe)
    icrc_ref.py pcap FILE         one line per frame: INDEX COMPUTED WIRE OK|MISMATCH|SKIP
                                  (values as 8 hex digits; exit 0 when the file parsed)
    icrc_ref.py hex HEXFRAME...   same line format for frames given as hex
"""
import struct
import sys
import zlib

ROCEV2_PORT = 4791
ICRC_SEED = 0xDEBB20E3  # crc32_le(~0, 8 bytes of 0xFF)
REFLECTED_POLY = 0xEDB88320


def _make_table():
    table = []
    for byte in range(256):
        reg = byte
        for _ in range(8):
            reg = (reg >> 1) ^ (REFLECTED_POLY if reg & 1 else 0)
        table.append(reg)
    return table


_TABLE = _make_table()


def crc32_le(reg, data):
    """Linux lib/crc32.c crc32_le: reflected, no inversion on entry or exit."""
    for b in data:
        reg = (reg >> 8) ^ _TABLE[(reg ^ b) & 0xFF]
    return reg


class NotRoce(ValueError):
    pass


def masked_bytes(frame):
    """Returns (masked, icrc_offset) for an Ethernet frame carrying RoCEv2 over IPv4."""
    if len(frame) < 14:
        raise NotRoce('short frame')
    pos = 12
    ethertype = int.from_bytes(frame[pos:pos + 2], 'big')
    while ethertype in (0x8100, 0x88A8):  # VLAN tags are outside the ICRC
        pos += 4
        ethertype = int.from_bytes(frame[pos:pos + 2], 'big')
    ip = pos + 2
    if ethertype != 0x0800:
        raise NotRoce('ethertype 0x%04x' % ethertype)
    if len(frame) < ip + 20 or frame[ip] != 0x45 or frame[ip + 9] != 17:
        raise NotRoce('not IPv4/IHL 5/UDP')
    udp = ip + 20
    if len(frame) < udp + 8:
        raise NotRoce('short UDP')
    if int.from_bytes(frame[udp + 2:udp + 4], 'big') != ROCEV2_PORT:
        raise NotRoce('not UDP port 4791')
    udp_len = int.from_bytes(frame[udp + 4:udp + 6], 'big')
    end = udp + udp_len
    if udp_len < 8 + 12 + 4 or end > len(frame):
        raise NotRoce('bad UDP length %d' % udp_len)
    ip_hdr = bytearray(frame[ip:ip + 20])
    ip_hdr[1] = 0xFF
    ip_hdr[8] = 0xFF
    ip_hdr[10] = ip_hdr[11] = 0xFF
    udp_hdr = bytearray(frame[udp:udp + 8])
    udp_hdr[6] = udp_hdr[7] = 0xFF
    bth = bytearray(frame[udp + 8:udp + 20])
    bth[4] = 0xFF
    rest = bytes(frame[udp + 20:end - 4])
    return bytes(ip_hdr) + bytes(udp_hdr) + bytes(bth) + rest, end - 4


def icrc_value(frame):
    masked, _ = masked_bytes(frame)
    by_zlib = zlib.crc32(b'\xff' * 8 + masked) & 0xFFFFFFFF
    by_table = ~crc32_le(ICRC_SEED, masked) & 0xFFFFFFFF
    if by_zlib != by_table:
        raise AssertionError('zlib %08x != table %08x' % (by_zlib, by_table))
    return by_zlib


def wire_value(frame):
    _, off = masked_bytes(frame)
    return struct.unpack_from('<I', bytes(frame), off)[0]


# Two RDMA WRITE WITH IMMEDIATE frames sent by the Linux rxe driver (kernel
# 7.2; shared/probes/wire-rxe/rxe_tx.pcap). The second has TOS 0x6A, the
# first TOS 0: the masking must make that irrelevant.
RXE_FRAMES = (
    '0200000000020200000000010800450000787a3040004011aba80a4d00010a4d0002c01212b7006400002b80ffff0000'
    '04560000010000000000000010000badcafe00000038cafe000157504150504844522d7278652d746f2d73656e646572'
    '2121a0000000a0000001a0000002a0000003a0000004a0000005a0000006a00000072ac1fe81',
    '0200000000020200000000010800456a00787a2e40004011ab400a4d00010a4d0002d35312b7006400002b80ffff0000'
    '012300000100dead0000beef00001234abcd00000038cafe000157504150504844522d7278652d746f2d73656e646572'
    '2121a0000000a0000001a0000002a0000003a0000004a0000005a0000006a00000073dd59fc7',
)


def selftest():
    assert zlib.crc32(b'123456789') == 0xCBF43926  # the standard CRC-32 check value
    assert ~crc32_le(0xFFFFFFFF, b'123456789') & 0xFFFFFFFF == 0xCBF43926
    assert crc32_le(0xFFFFFFFF, b'\xff' * 8) == ICRC_SEED
    for text in RXE_FRAMES:
        frame = bytearray(bytes.fromhex(text))
        assert icrc_value(frame) == wire_value(frame), 'rxe frame ICRC'
        for masked_pos in (15, 22, 24, 25, 40, 41, 46):  # TOS, TTL, IP csum, UDP csum, FECN
            changed = bytearray(frame)
            changed[masked_pos] ^= 0x5A
            assert icrc_value(changed) == icrc_value(frame), 'masked byte %d' % masked_pos
        changed = bytearray(frame)
        changed[60] ^= 1
        assert icrc_value(changed) != wire_value(changed), 'payload bit flip detected'
    return True


def pcap_frames(path):
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < 24:
        raise SystemExit('%s: not a pcap file' % path)
    magic = struct.unpack_from('<I', data, 0)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        order = '<'
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        order = '>'
    else:
        raise SystemExit('%s: not a pcap file (magic %08x)' % (path, magic))
    if struct.unpack_from(order + 'I', data, 20)[0] != 1:
        raise SystemExit('%s: link type is not Ethernet' % path)
    pos = 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(order + 'I', data, pos + 8)[0]
        yield data[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen


def report(frames):
    mismatches = 0
    for index, frame in enumerate(frames):
        try:
            computed, wire = icrc_value(frame), wire_value(frame)
        except NotRoce as e:
            print('%d - - SKIP %s' % (index, e))
            continue
        ok = computed == wire
        mismatches += not ok
        print('%d %08x %08x %s' % (index, computed, wire, 'OK' if ok else 'MISMATCH'))
    print('# frames=%d mismatches=%d' % (index + 1 if frames else 0, mismatches))


def main(argv):
    selftest()
    if len(argv) < 2 or argv[1] == 'selftest':
        print('icrc_ref selftest ok (zlib and table CRC agree, rxe frames verify)')
        return 0
    if argv[1] == 'pcap' and len(argv) == 3:
        report(list(pcap_frames(argv[2])))
        return 0
    if argv[1] == 'hex' and len(argv) >= 3:
        report([bytes.fromhex(h) for h in argv[2:]])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
