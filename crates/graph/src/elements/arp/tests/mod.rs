//! Frames and packets built by hand, byte by byte, for the ARP elements' tests.

mod fuzz;
mod querier;
mod responder;

use packet::Packet;

/// An Ethernet frame carrying ARP for IPv4 over Ethernet, fields in wire order.
pub(super) fn arp_frame(
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    op: u8,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&eth_dst);
    f.extend_from_slice(&eth_src);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, op]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&tpa);
    f
}

/// The Internet checksum of `bytes`, summed here word by word.
fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A UDP-protocol IPv4 packet from 10.0.0.1 to `dst`, 4 payload bytes ending in `tag`.
pub(super) fn ip_bytes(dst: [u8; 4], tag: u8) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 24, 0, tag, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1];
    h.extend_from_slice(&dst);
    let c = internet_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(&[0xde, 0xad, 0xbe, tag]);
    h
}

/// [`ip_bytes`] as a packet whose network header and destination annotation are set,
/// as after a route lookup.
pub(super) fn ip_packet(next_hop: [u8; 4], tag: u8) -> Packet {
    let mut p = Packet::from_slice(&ip_bytes(next_hop, tag));
    p.set_network_header(0, 20);
    p.set_dst_ip_anno(next_hop);
    p
}

#[test]
fn the_test_checksum_is_the_internet_checksum() {
    // RFC 1071's example words sum to 0xddf2; the checksum is its complement.
    assert_eq!(
        internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
        !0xddf2
    );
    // A header holding its own checksum sums to zero.
    assert_eq!(internet_checksum(&ip_bytes([10, 0, 0, 2], 1)[..20]), 0);
}
