#!/usr/bin/env python3
"""Writes conf/samples/router-sample.pcap: the shipped sample capture for conf/router.click.

Every frame is built by hand here (no capture library), so the file's contents are
documented by this script. The mix exercises the router core: ordinary UDP/TCP/ICMP to
each network, the router's own address, TTL 1 and 0, a bad checksum, a bad version,
a truncated header, IP options, Ethernet padding, a frame to fragment, a DF frame too
big for the link, ARP, and a broadcast source address.
"""
import struct
import sys

from samplepcap import HOST_MAC, csum, write_pcap
from samplepcap import ether as ether_frame


def ip4(a):
    return bytes(int(x) for x in a.split("."))


def ipv4(src, dst, proto, payload, ttl=64, ident=1, df=False, options=b"", tos=0, fix_csum=True, version=4):
    ihl = 5 + len(options) // 4
    total = ihl * 4 + len(payload)
    flags = 0x4000 if df else 0
    h = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, tos, total, ident, flags, ttl, proto, 0, ip4(src), ip4(dst)) + options
    if fix_csum:
        h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def udp(sport, dport, data, src, dst):
    length = 8 + len(data)
    pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, 17, length)
    u = struct.pack("!HHHH", sport, dport, length, 0) + data
    c = csum(pseudo + u) or 0xFFFF
    return u[:6] + struct.pack("!H", c) + u[8:]


def tcp_syn(sport, dport, src, dst):
    t = struct.pack("!HHIIBBHHH", sport, dport, 1000, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, 6, len(t))
    return t[:16] + struct.pack("!H", csum(pseudo + t)) + t[18:]


def icmp_echo(ident, seq, data):
    m = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + data
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def ether(payload, ethertype=0x0800, **kw):
    return ether_frame(payload, ethertype, **kw)


def frames():
    H = "10.0.0.2"
    yield ether(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"hello net A", H, "198.18.1.10")))
    yield ether(ipv4(H, "198.19.2.20", 6, tcp_syn(40000, 80, H, "198.19.2.20"), ident=2))
    yield ether(ipv4(H, "198.18.1.10", 1, icmp_echo(7, 1, b"ping"), ident=3))
    yield ether(ipv4(H, "10.0.0.1", 1, icmp_echo(7, 2, b"to the router"), ident=4))
    yield ether(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"ttl one", H, "198.18.1.10"), ttl=1, ident=5))
    yield ether(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"ttl zero", H, "198.18.1.10"), ttl=0, ident=6))
    bad = bytearray(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"bad checksum", H, "198.18.1.10"), ident=7))
    bad[10] ^= 0xFF
    yield ether(bytes(bad))
    yield ether(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"version 6?", H, "198.18.1.10"), ident=8, version=6))
    yield ether(ipv4(H, "198.18.1.10", 17, udp(1024, 9, b"x", H, "198.18.1.10"), ident=9)[:12])
    # Record-route option (type 7, length 7, pointer 4) padded with an end-of-options byte.
    opts = bytes([7, 7, 4, 0, 0, 0, 0, 0])
    yield ether(ipv4(H, "198.19.2.20", 17, udp(1024, 9, b"options", H, "198.19.2.20"), ident=10, options=opts))
    big = bytes(range(256)) * 4
    yield ether(ipv4(H, "198.19.2.20", 17, udp(1024, 9, big, H, "198.19.2.20"), ident=11))
    yield ether(ipv4(H, "198.19.2.20", 17, udp(1024, 9, big, H, "198.19.2.20"), ident=12, df=True))
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, HOST_MAC, ip4(H), b"\0" * 6, ip4("10.0.0.1"))
    yield ether(arp, ethertype=0x0806, dst=b"\xff" * 6)
    yield ether(ipv4("255.255.255.255", "198.18.1.10", 17, udp(1024, 9, b"bcast src", "255.255.255.255", "198.18.1.10"), ident=13))
    yield ether(ipv4(H, "203.0.113.9", 17, udp(1024, 9, b"no route", H, "203.0.113.9"), ident=14))
    yield ether(ipv4("198.19.2.20", H, 17, udp(9, 1024, b"reply to host", "198.19.2.20", H), ident=15))


def main(path):
    write_pcap(path, frames())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "conf/samples/router-sample.pcap")
