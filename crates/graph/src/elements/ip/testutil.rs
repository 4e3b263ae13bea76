//! Helpers for the IP element tests: an RFC 1071 checksum written independently of
//! `packet::checksum`, and a builder for hand-made IPv4 headers.

/// Internet checksum, the textbook way: sum 16-bit big-endian words in a u64, fold,
/// complement.
pub fn cksum(b: &[u8]) -> u16 {
    let mut s: u64 = 0;
    let mut i = 0;
    while i < b.len() {
        let hi = b[i] as u64;
        let lo = if i + 1 < b.len() { b[i + 1] as u64 } else { 0 };
        s += (hi << 8) | lo;
        i += 2;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A 20-byte IPv4 header with a correct checksum.
#[allow(clippy::too_many_arguments)]
pub fn ip_header(
    tos: u8,
    len: u16,
    id: u16,
    off: u16,
    ttl: u8,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
) -> Vec<u8> {
    let mut h = vec![
        0x45,
        tos,
        (len >> 8) as u8,
        len as u8,
        (id >> 8) as u8,
        id as u8,
        (off >> 8) as u8,
        off as u8,
        ttl,
        proto,
        0,
        0,
    ];
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = cksum(&h);
    h[10] = (c >> 8) as u8;
    h[11] = c as u8;
    h
}

/// Writes a correct checksum into the IPv4 header at the start of `b` (IHL respected).
pub fn fix_ip_cksum(b: &mut [u8]) {
    let hl = ((b[0] & 0xf) as usize) * 4;
    b[10] = 0;
    b[11] = 0;
    let c = cksum(&b[..hl]);
    b[10] = (c >> 8) as u8;
    b[11] = c as u8;
}
