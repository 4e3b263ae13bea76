"""What the sample-capture scripts (make-sample-pcap.py, make-sample6-pcap.py) share:
the Internet checksum, the Ethernet header with its 60-byte minimum, the pcap file."""
import struct

ROUTER_MAC = bytes.fromhex("020000000001")
HOST_MAC = bytes.fromhex("020000000002")


def csum(b):
    """RFC 1071: the one's complement of the one's-complement sum of 16-bit words."""
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ether(payload, ethertype, dst=ROUTER_MAC, src=HOST_MAC, pad=True):
    """An Ethernet frame, padded with zeros to 60 bytes unless `pad` is false."""
    f = dst + src + struct.pack("!H", ethertype) + payload
    if pad and len(f) < 60:
        f += b"\0" * (60 - len(f))
    return f


def write_pcap(path, frames):
    """A microsecond pcap of Ethernet frames, record i stamped 1700000000 + i s, 1000 * i us."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1700000000 + i, 1000 * i, len(fr), len(fr)))
            f.write(fr)
