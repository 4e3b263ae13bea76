//! UDP headers (RFC 768).

use super::{be16, put16, view};

view!(
    /// A UDP header (8 bytes) and its payload.
    UdpHeader,
    8
);

impl<T: AsRef<[u8]>> UdpHeader<T> {
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn length(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[8..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpHeader<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v);
    }
    pub fn set_length(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[8..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let want = [0x04, 0xd2, 0x00, 0x35, 0x00, 0x09, 0xab, 0xcd, 0x01];
        let u = UdpHeader::new_checked(&want[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (1234, 53, 9, 0xabcd)
        );
        assert_eq!(u.payload(), &[1]);
        let mut b = [0u8; 9];
        let mut m = UdpHeader::new_checked(&mut b[..]).unwrap();
        m.set_src_port(1234);
        m.set_dst_port(53);
        m.set_length(9);
        m.set_checksum(0xabcd);
        m.payload_mut()[0] = 1;
        assert_eq!(b, want);
        assert!(UdpHeader::new_checked(&want[..7]).is_none());
    }
}
