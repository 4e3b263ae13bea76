//! TCP headers (RFC 9293).

use super::{be16, be32, put16, put32, view};

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;
pub const TCP_URG: u8 = 0x20;

view!(
    /// A TCP header (20 bytes plus options) and its payload.
    TcpHeader,
    20
);

impl<T: AsRef<[u8]>> TcpHeader<T> {
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn seq(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    pub fn ack(&self) -> u32 {
        be32(self.buf.as_ref(), 8)
    }
    /// Data offset field, in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.buf.as_ref()[12] >> 4
    }
    /// Header length in bytes per the data offset (may be < 20 or beyond the buffer).
    pub fn header_len(&self) -> usize {
        (self.data_offset() as usize) << 2
    }
    /// The eight flag bits (CWR ECE URG ACK PSH RST SYN FIN).
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[13]
    }
    pub fn window(&self) -> u16 {
        be16(self.buf.as_ref(), 14)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 16)
    }
    pub fn urgent(&self) -> u16 {
        be16(self.buf.as_ref(), 18)
    }
    /// Option bytes, clamped to the buffer.
    pub fn options(&self) -> &[u8] {
        let b = self.buf.as_ref();
        b.get(20..self.header_len().min(b.len())).unwrap_or(&[])
    }
    /// Bytes after the header, clamped; empty if the data offset is below 5.
    pub fn payload(&self) -> &[u8] {
        if self.header_len() < 20 {
            return &[];
        }
        self.buf.as_ref().get(self.header_len()..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpHeader<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v);
    }
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v);
    }
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buf.as_mut(), 8, v);
    }
    pub fn set_data_offset(&mut self, words: u8) {
        let b = self.buf.as_mut();
        b[12] = (words << 4) | (b[12] & 0x0f);
    }
    pub fn set_flags(&mut self, v: u8) {
        self.buf.as_mut()[13] = v;
    }
    pub fn set_window(&mut self, v: u16) {
        put16(self.buf.as_mut(), 14, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 16, v);
    }
    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buf.as_mut(), 18, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let want = [
            0x00, 0x50, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x60, 0x12, 0xff, 0xff,
            0x12, 0x34, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0xaa,
        ];
        let t = TcpHeader::new_checked(&want[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port(), t.seq(), t.ack()), (80, 0xc000, 1, 2));
        assert_eq!((t.data_offset(), t.header_len()), (6, 24));
        assert_eq!(t.flags(), TCP_SYN | TCP_ACK);
        assert_eq!((t.window(), t.checksum(), t.urgent()), (0xffff, 0x1234, 0));
        assert_eq!(t.options(), &[2, 4, 5, 0xb4]);
        assert_eq!(t.payload(), &[0xaa]);
        let mut b = want;
        b[..20].fill(0);
        let mut m = TcpHeader::new_checked(&mut b[..]).unwrap();
        m.set_src_port(80);
        m.set_dst_port(0xc000);
        m.set_seq(1);
        m.set_ack(2);
        m.set_data_offset(6);
        m.set_flags(TCP_SYN | TCP_ACK);
        m.set_window(0xffff);
        m.set_checksum(0x1234);
        m.set_urgent(0);
        assert_eq!(b, want);
        // Data offset 15 on a 25-byte buffer: options clamp, payload empty.
        b[12] = 0xf0;
        let t = TcpHeader::new_checked(&b[..]).unwrap();
        assert_eq!(t.options().len(), 5);
        assert!(t.payload().is_empty());
        assert!(TcpHeader::new_checked(&want[..19]).is_none());
    }
}
