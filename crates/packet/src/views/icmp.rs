//! ICMP (v4) headers (RFC 792).

use super::{arr, be16, be32, put16, put32, view};
use crate::checksum;

pub const ICMP_ECHOREPLY: u8 = 0;
pub const ICMP_UNREACH: u8 = 3;
pub const ICMP_SOURCEQUENCH: u8 = 4;
pub const ICMP_REDIRECT: u8 = 5;
pub const ICMP_ECHO: u8 = 8;
pub const ICMP_TIMXCEED: u8 = 11;
pub const ICMP_PARAMPROB: u8 = 12;

view!(
    /// An ICMP header (8 bytes: type, code, checksum, rest-of-header) and its data.
    IcmpHeader,
    8
);

impl<T: AsRef<[u8]>> IcmpHeader<T> {
    pub fn icmp_type(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    /// The 4-byte rest-of-header word.
    pub fn rest(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    /// Echo identifier.
    pub fn ident(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    /// Echo sequence number.
    pub fn seq(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    /// Parameter-problem pointer.
    pub fn pointer(&self) -> u8 {
        self.buf.as_ref()[4]
    }
    /// Redirect gateway.
    pub fn gateway(&self) -> [u8; 4] {
        arr(self.buf.as_ref(), 4)
    }
    /// Next-hop MTU of a "fragmentation needed" unreachable (RFC 1191).
    pub fn next_mtu(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[8..]
    }
    /// True for the ICMP error types (unreachable, source quench, redirect, time
    /// exceeded, parameter problem).
    pub fn is_error(&self) -> bool {
        is_error_type(self.icmp_type())
    }
    /// Checks the checksum over the whole buffer (header and data).
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.buf.as_ref()) == 0
    }
}

/// True for the ICMP error message types.
pub fn is_error_type(t: u8) -> bool {
    matches!(
        t,
        ICMP_UNREACH | ICMP_SOURCEQUENCH | ICMP_REDIRECT | ICMP_TIMXCEED | ICMP_PARAMPROB
    )
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpHeader<T> {
    pub fn set_icmp_type(&mut self, v: u8) {
        self.buf.as_mut()[0] = v;
    }
    pub fn set_code(&mut self, v: u8) {
        self.buf.as_mut()[1] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v);
    }
    pub fn set_rest(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v);
    }
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    pub fn set_seq(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    pub fn set_pointer(&mut self, v: u8) {
        self.buf.as_mut()[4] = v;
    }
    pub fn set_gateway(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[4..8].copy_from_slice(&a);
    }
    pub fn set_next_mtu(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[8..]
    }
    /// Recomputes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buf.as_ref());
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request() {
        // Echo request id 0x1234 seq 1, data "ab": checksum = ~(0x0800 + 0x1234 + 0x0001
        // + 0x6162) = ~0x7b97 = 0x8468.
        let want = [8, 0, 0x84, 0x68, 0x12, 0x34, 0x00, 0x01, b'a', b'b'];
        let h = IcmpHeader::new_checked(&want[..]).unwrap();
        assert_eq!((h.icmp_type(), h.code(), h.ident(), h.seq()), (8, 0, 0x1234, 1));
        assert!(h.verify_checksum() && !h.is_error());
        assert_eq!(h.payload(), b"ab");
        let mut b = [0u8; 10];
        let mut m = IcmpHeader::new_checked(&mut b[..]).unwrap();
        m.set_icmp_type(ICMP_ECHO);
        m.set_ident(0x1234);
        m.set_seq(1);
        m.payload_mut().copy_from_slice(b"ab");
        m.fill_checksum();
        assert_eq!(b, want);
    }

    #[test]
    fn error_fields() {
        let mut b = [0u8; 8];
        let mut m = IcmpHeader::new_checked(&mut b[..]).unwrap();
        m.set_icmp_type(ICMP_UNREACH);
        m.set_code(4);
        m.set_next_mtu(1500);
        assert_eq!(m.next_mtu(), 1500);
        assert!(m.is_error());
        m.set_gateway([1, 2, 3, 4]);
        assert_eq!(m.rest(), 0x01020304);
        m.set_pointer(9);
        assert_eq!(m.pointer(), 9);
        assert!(IcmpHeader::new_checked(&b[..7]).is_none());
    }
}
