//! IPv4 headers (RFC 791).

use super::{arr, be16, put16, view};
use crate::checksum;

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ESP: u8 = 50;

/// Reserved flag bit of the fragment field.
pub const IP_RF: u16 = 0x8000;
/// Don't-fragment flag bit of the fragment field.
pub const IP_DF: u16 = 0x4000;
/// More-fragments flag bit of the fragment field.
pub const IP_MF: u16 = 0x2000;
/// Mask of the fragment offset (in 8-byte units).
pub const IP_OFFMASK: u16 = 0x1fff;

view!(
    /// An IPv4 header (20 bytes plus options) and what follows it.
    Ipv4Header,
    20
);

impl<T: AsRef<[u8]>> Ipv4Header<T> {
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[0] >> 4
    }
    /// The IHL field, in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buf.as_ref()[0] & 0x0f
    }
    /// The header length in bytes as the IHL field says (may be < 20 or beyond the buffer).
    pub fn header_len(&self) -> usize {
        (self.ihl() as usize) << 2
    }
    pub fn tos(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn ident(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    /// The whole flags-and-fragment-offset field.
    pub fn frag_field(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    pub fn dont_frag(&self) -> bool {
        self.frag_field() & IP_DF != 0
    }
    pub fn more_frags(&self) -> bool {
        self.frag_field() & IP_MF != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.frag_field() & IP_OFFMASK
    }
    /// True unless this is a fragment other than the first (Click's `IP_FIRSTFRAG`).
    pub fn is_first_fragment(&self) -> bool {
        self.frag_offset() == 0
    }
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[8]
    }
    pub fn protocol(&self) -> u8 {
        self.buf.as_ref()[9]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 10)
    }
    pub fn src(&self) -> [u8; 4] {
        arr(self.buf.as_ref(), 12)
    }
    pub fn dst(&self) -> [u8; 4] {
        arr(self.buf.as_ref(), 16)
    }
    /// True if the IHL is at least 5 and the whole header is in the buffer.
    pub fn header_len_valid(&self) -> bool {
        let h = self.header_len();
        h >= 20 && h <= self.buf.as_ref().len()
    }
    /// The option bytes (between byte 20 and the header length), clamped to the buffer.
    pub fn options(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = self.header_len().min(b.len());
        b.get(20..end).unwrap_or(&[])
    }
    /// The bytes after the header (per IHL), clamped to the buffer; empty if IHL < 5.
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        if self.header_len() < 20 {
            return &[];
        }
        b.get(self.header_len()..).unwrap_or(&[])
    }
    /// Checks the header checksum; false when the header length is invalid.
    pub fn verify_checksum(&self) -> bool {
        self.header_len_valid() && checksum::checksum(&self.buf.as_ref()[..self.header_len()]) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Header<T> {
    pub fn set_version_ihl(&mut self, version: u8, ihl: u8) {
        self.buf.as_mut()[0] = (version << 4) | (ihl & 0x0f);
    }
    pub fn set_tos(&mut self, v: u8) {
        self.buf.as_mut()[1] = v;
    }
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v);
    }
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    pub fn set_frag_field(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buf.as_mut()[8] = v;
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buf.as_mut()[9] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 10, v);
    }
    pub fn set_src(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[12..16].copy_from_slice(&a);
    }
    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[16..20].copy_from_slice(&a);
    }
    /// Recomputes the header checksum. Returns false (and leaves the header unchanged)
    /// when the header length is invalid.
    pub fn fill_checksum(&mut self) -> bool {
        if !self.header_len_valid() {
            return false;
        }
        let h = self.header_len();
        self.set_checksum(0);
        let c = checksum::checksum(&self.buf.as_ref()[..h]);
        self.set_checksum(c);
        true
    }
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len().min(self.buf.as_ref().len());
        let b = self.buf.as_mut();
        b.get_mut(20..end).unwrap_or(&mut [])
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        if h < 20 {
            return &mut [];
        }
        self.buf.as_mut().get_mut(h..).unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7 (a well-known header).
    const H: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0,
        0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn fields_and_checksum() {
        let h = Ipv4Header::new_checked(&H[..]).unwrap();
        assert_eq!((h.version(), h.ihl(), h.header_len()), (4, 5, 20));
        assert_eq!(h.total_len(), 0x73);
        assert!(h.dont_frag() && !h.more_frags() && h.is_first_fragment());
        assert_eq!((h.ttl(), h.protocol(), h.checksum()), (64, PROTO_UDP, 0xb861));
        assert_eq!(h.src(), [192, 168, 0, 1]);
        assert_eq!(h.dst(), [192, 168, 0, 199]);
        assert!(h.verify_checksum());
        assert!(h.options().is_empty() && h.payload().is_empty());
    }

    #[test]
    fn setters_and_fill() {
        let mut b = [0u8; 20];
        let mut h = Ipv4Header::new_checked(&mut b[..]).unwrap();
        h.set_version_ihl(4, 5);
        h.set_total_len(0x73);
        h.set_frag_field(IP_DF);
        h.set_ttl(64);
        h.set_protocol(PROTO_UDP);
        h.set_src([192, 168, 0, 1]);
        h.set_dst([192, 168, 0, 199]);
        assert!(h.fill_checksum());
        assert_eq!(b, H);
    }

    #[test]
    fn bad_header_lengths() {
        let mut b = H;
        b[0] = 0x44; // IHL 4
        let h = Ipv4Header::new_checked(&b[..]).unwrap();
        assert!(!h.verify_checksum());
        assert!(h.payload().is_empty() && h.options().is_empty());
        b[0] = 0x46; // IHL 6 but only 20 bytes
        let mut h = Ipv4Header::new_checked(&mut b[..]).unwrap();
        assert!(!h.fill_checksum());
        assert!(h.options().is_empty() && h.payload().is_empty());
        assert!(Ipv4Header::new_checked(&H[..19]).is_none());
    }

    #[test]
    fn options_and_payload() {
        let mut b = [0u8; 26];
        b[..20].copy_from_slice(&H);
        b[0] = 0x46;
        b[20..24].copy_from_slice(&[1, 1, 1, 0]);
        b[24..].copy_from_slice(&[9, 8]);
        let h = Ipv4Header::new_checked(&b[..]).unwrap();
        assert_eq!(h.options(), &[1, 1, 1, 0]);
        assert_eq!(h.payload(), &[9, 8]);
    }
}
