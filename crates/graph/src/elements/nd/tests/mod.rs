//! Frames and packets built by hand, byte by byte, for the neighbour discovery
//! elements' tests.

mod advertiser;
mod fuzz;
mod solicitor;

use std::net::Ipv6Addr;

pub(super) fn v6(s: &str) -> [u8; 16] {
    s.parse::<Ipv6Addr>().unwrap().octets()
}

/// The Internet checksum of `bytes`, summed here word by word.
pub(super) fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The ICMPv6 checksum of `message` from `src` to `dst`: over RFC 8200 8.1's
/// pseudo-header (source, destination, 32-bit length, three zero bytes, next header
/// 58) and the message.
pub(super) fn icmp6_checksum(src: [u8; 16], dst: [u8; 16], message: &[u8]) -> u16 {
    let mut b = Vec::new();
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&(message.len() as u32).to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 58]);
    b.extend_from_slice(message);
    internet_checksum(&b)
}

/// A neighbour discovery message as it goes on the wire. `hlim` and `code` are
/// parameters so tests can break them; `checksum: None` computes the right one.
pub(super) struct Nd {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub hlim: u8,
    pub kind: u8,
    pub code: u8,
    pub flags: u8,
    pub target: [u8; 16],
    pub options: Vec<u8>,
    pub checksum: Option<u16>,
}

impl Nd {
    pub(super) fn frame(&self) -> Vec<u8> {
        let mut icmp = vec![self.kind, self.code, 0, 0, self.flags, 0, 0, 0];
        icmp.extend_from_slice(&self.target);
        icmp.extend_from_slice(&self.options);
        let c = self
            .checksum
            .unwrap_or_else(|| icmp6_checksum(self.src, self.dst, &icmp));
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut f = Vec::new();
        f.extend_from_slice(&self.eth_dst);
        f.extend_from_slice(&self.eth_src);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
        f.extend_from_slice(&[58, self.hlim]);
        f.extend_from_slice(&self.src);
        f.extend_from_slice(&self.dst);
        f.extend_from_slice(&icmp);
        f
    }
}

/// A link-layer address option: type 1 (source) or 2 (target), length 1, `eth`.
pub(super) fn ll_option(kind: u8, eth: [u8; 6]) -> Vec<u8> {
    let mut o = vec![kind, 1];
    o.extend_from_slice(&eth);
    o
}

#[test]
fn the_test_checksum_is_the_icmpv6_checksum() {
    // RFC 1071's example words sum to 0xddf2; the checksum is its complement.
    assert_eq!(
        internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
        !0xddf2
    );
    // An echo request from fe80::1 to fe80::2 (id 0x1234, seq 1), summed by hand:
    // 0xfe80 + 1 + 0xfe80 + 2 (addresses) + 8 (length) + 0x3a (next header) + 0x8000
    // (type 128) + 0x1234 + 1 = 0x2_8f7a, folded 0x8f7c, complement 0x7083.
    let msg = [0x80, 0, 0, 0, 0x12, 0x34, 0, 1];
    assert_eq!(icmp6_checksum(v6("fe80::1"), v6("fe80::2"), &msg), 0x7083);
}
