#!/usr/bin/env python3
"""Writes the ESP test vectors of crates/graph/src/elements/esp/tests.rs.

Each is an ESP tunnel-mode packet (RFC 4303) sealed with AES-GCM (RFC 4106) by
Python's `cryptography` package, an implementation independent of the `ring` crate
the router uses, from fields laid out here by hand: outer IPv4 header, SPI and
sequence number, IV, inner packet, padding 1, 2, 3..., pad length, next header, ICV.

usage: python3 scripts/esp-vectors.py   (needs: pip install cryptography)
"""
import struct

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def csum(h):
    s = sum(struct.unpack("!%dH" % (len(h) // 2), h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(tos, total, ident, frag, ttl, proto, src, dst):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, tos, total, ident, frag, ttl, proto, 0, bytes(src), bytes(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]


def esp(key_salt, spi, seq, esn, inner, next_header, outer):
    """outer: (tos, ident, frag, ttl, src, dst)."""
    key, salt = key_salt[:-4], key_salt[-4:]
    iv = struct.pack("!Q", seq)
    pad = (4 - (len(inner) + 2) % 4) % 4
    plain = inner + bytes(range(1, pad + 1)) + bytes([pad, next_header])
    aad = struct.pack("!IQ", spi, seq) if esn else struct.pack("!II", spi, seq & 0xFFFFFFFF)
    sealed = AESGCM(key).encrypt(salt + iv, plain, aad)  # ciphertext, then the 16-byte tag
    payload = struct.pack("!II", spi, seq & 0xFFFFFFFF) + iv + sealed
    tos, ident, frag, ttl, src, dst = outer
    return ipv4(tos, 20 + len(payload), ident, frag, ttl, 50, src, dst) + payload


def udp4():
    """10.0.0.1:1234 -> 10.1.0.1:5678, "hello", TOS 0x28, DF, TTL 63."""
    data = b"hello"
    udp = struct.pack("!HHHH", 1234, 5678, 8 + len(data), 0) + data
    return ipv4(0x28, 20 + len(udp), 0x1C46, 0x4000, 63, 17, [10, 0, 0, 1], [10, 1, 0, 1]) + udp


def udp6():
    """2001:db8::1 -> 2001:db8:1::1, UDP 7 -> 9, 4 bytes, traffic class 0xb8, hop limit 64."""
    data = b"\x01\x02\x03\x04"
    udp = struct.pack("!HHHH", 7, 9, 8 + len(data), 0) + data
    src = bytes.fromhex("20010db8000000000000000000000001")
    dst = bytes.fromhex("20010db8000100000000000000000001")
    first = (6 << 28) | (0xB8 << 20)
    return struct.pack("!IHBB", first, len(udp), 17, 64) + src + dst + udp


def show(name, b):
    print(f"// {name}: {len(b)} bytes")
    print(f'const {name}: &str = "{b.hex()}";')


if __name__ == "__main__":
    k128 = bytes(range(16)) + bytes.fromhex("deadbeef")
    k256 = bytes(range(0x20, 0x40)) + bytes.fromhex("cafebabe")
    show("INNER4", udp4())
    show("ESP4", esp(k128, 0x1000, 1, False, udp4(), 4, (0x28, 0, 0x4000, 64, [192, 0, 2, 1], [192, 0, 2, 2])))
    show("INNER6", udp6())
    show("ESP6_ESN", esp(k256, 0x2000, (1 << 32) + 7, True, udp6(), 41, (0xB8, 5, 0, 64, [192, 0, 2, 1], [192, 0, 2, 2])))
