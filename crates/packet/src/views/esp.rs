//! IPsec ESP headers (RFC 4303): SPI and sequence number, then the encrypted payload.

use super::{be32, put32, view};

view!(
    /// An ESP header (8 bytes) and what follows it.
    EspHeader,
    8
);

impl<T: AsRef<[u8]>> EspHeader<T> {
    pub fn spi(&self) -> u32 {
        be32(self.buf.as_ref(), 0)
    }
    pub fn seq(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[8..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EspHeader<T> {
    pub fn set_spi(&mut self, v: u32) {
        put32(self.buf.as_mut(), 0, v);
    }
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v);
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
        let want = [0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7, 0x55];
        let e = EspHeader::new_checked(&want[..]).unwrap();
        assert_eq!((e.spi(), e.seq()), (0xdeadbeef, 7));
        assert_eq!(e.payload(), &[0x55]);
        let mut b = [0u8; 9];
        let mut m = EspHeader::new_checked(&mut b[..]).unwrap();
        m.set_spi(0xdeadbeef);
        m.set_seq(7);
        m.payload_mut()[0] = 0x55;
        assert_eq!(b, want);
        assert!(EspHeader::new_checked(&want[..7]).is_none());
    }
}
