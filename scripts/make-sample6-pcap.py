#!/usr/bin/env python3
"""Writes conf/samples/router6-sample.pcap: the shipped sample capture for conf/router6.click.

Every frame is built by hand here (no capture library), so the file's contents are
documented by this script. The mix exercises the IPv6 router core: UDP to the other
network and to a network behind a gateway, the router's own address, hop limits 1 and
0, an ICMPv6 error whose hop limit runs out, a bad version, a truncated header, a
payload length longer than the frame, Ethernet padding, no route, a reply back to the
first network, and a non-IPv6 frame.
"""
import ipaddress
import struct
import sys

from samplepcap import csum, write_pcap
from samplepcap import ether as ether_frame


def ip6(a):
    return ipaddress.IPv6Address(a).packed


def ipv6(src, dst, nxt, payload, hlim=64, version=6, plen=None):
    if plen is None:
        plen = len(payload)
    return struct.pack("!IHBB16s16s", version << 28, plen, nxt, hlim, ip6(src), ip6(dst)) + payload


def pseudo(src, dst, nxt, length):
    return ip6(src) + ip6(dst) + struct.pack("!IxxxB", length, nxt)


def udp(sport, dport, data, src, dst):
    length = 8 + len(data)
    u = struct.pack("!HHHH", sport, dport, length, 0) + data
    c = csum(pseudo(src, dst, 17, length) + u) or 0xFFFF
    return u[:6] + struct.pack("!H", c) + u[8:]


def icmp6(t, code, rest, body, src, dst):
    m = struct.pack("!BBHI", t, code, 0, rest) + body
    return m[:2] + struct.pack("!H", csum(pseudo(src, dst, 58, len(m)) + m)) + m[4:]


def ether(payload, ethertype=0x86DD):
    return ether_frame(payload, ethertype)


def frames():
    H = "2001:db8:1::2"
    B = "2001:db8:2::10"
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"hello net B", H, B)))
    yield ether(ipv6(H, "2001:db8:3::7", 17, udp(1024, 9, b"via gateway", H, "2001:db8:3::7")))
    yield ether(ipv6(H, "2001:db8:1::1", 17, udp(1024, 9, b"to the router", H, "2001:db8:1::1")))
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"hlim one", H, B), hlim=1))
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"hlim zero", H, B), hlim=0))
    # An ICMPv6 destination unreachable (quoting a made-up packet) whose hop limit runs
    # out: no error is sent about an error.
    quoted = ipv6(B, H, 17, udp(9, 1024, b"q", B, H))
    yield ether(ipv6(H, B, 58, icmp6(1, 0, 0, quoted, H, B), hlim=1))
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"version 4?", H, B), version=4))
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"x", H, B))[:30])
    yield ether(ipv6(H, B, 17, udp(1024, 9, b"too long", H, B), plen=200))
    # No next header (59) and no payload: 54 bytes, padded to 60 on the wire.
    yield ether(ipv6(H, B, 59, b""))
    yield ether(ipv6(H, "2001:db9::1", 17, udp(1024, 9, b"no route", H, "2001:db9::1")))
    yield ether(ipv6(B, H, 17, udp(9, 1024, b"reply to host", B, H)))
    # An IPv4 frame: not IPv6.
    v4 = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 1, 0, 64, 59, 0, bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1]))
    yield ether(v4[:10] + struct.pack("!H", csum(v4)) + v4[12:], ethertype=0x0800)


def main(path):
    write_pcap(path, frames())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "conf/samples/router6-sample.pcap")
