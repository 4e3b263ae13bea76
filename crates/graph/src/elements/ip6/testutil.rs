//! Hand-built IPv6 packets for the tests.

use std::net::Ipv6Addr;

/// An IPv6 header (traffic class and flow label 0, next header UDP) from `src` to
/// `dst` with hop limit `hlim`, then `payload`, its length in the payload-length field.
pub(crate) fn ip6_packet(src: &str, dst: &str, hlim: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0x60, 0, 0, 0];
    b.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    b.extend_from_slice(&[17, hlim]);
    b.extend_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
    b.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    b.extend_from_slice(payload);
    b
}
