//! IPv6 fixed headers (RFC 8200).

use super::{arr, be16, be32, put16, put32, view};

view!(
    /// An IPv6 fixed header (40 bytes) and what follows it.
    Ipv6Header,
    40
);

impl<T: AsRef<[u8]>> Ipv6Header<T> {
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[0] >> 4
    }
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.buf.as_ref(), 0) >> 4) & 0xff) as u8
    }
    pub fn flow_label(&self) -> u32 {
        be32(self.buf.as_ref(), 0) & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.buf.as_ref()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buf.as_ref()[7]
    }
    pub fn src(&self) -> [u8; 16] {
        arr(self.buf.as_ref(), 8)
    }
    pub fn dst(&self) -> [u8; 16] {
        arr(self.buf.as_ref(), 24)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[40..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Header<T> {
    /// Sets version, traffic class and flow label (the first 32-bit word).
    pub fn set_vtf(&mut self, version: u8, traffic_class: u8, flow_label: u32) {
        let w = ((version as u32 & 0xf) << 28) | ((traffic_class as u32) << 20) | (flow_label & 0xf_ffff);
        put32(self.buf.as_mut(), 0, w);
    }
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buf.as_mut()[6] = v;
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buf.as_mut()[7] = v;
    }
    pub fn set_src(&mut self, a: [u8; 16]) {
        self.buf.as_mut()[8..24].copy_from_slice(&a);
    }
    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.buf.as_mut()[24..40].copy_from_slice(&a);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[40..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let mut want = [0u8; 41];
        want[..8].copy_from_slice(&[0x6b, 0xa1, 0x23, 0x45, 0x00, 0x01, 17, 64]);
        want[8] = 0xfe;
        want[9] = 0x80;
        want[23] = 1;
        want[24] = 0xff;
        want[25] = 0x02;
        want[39] = 2;
        want[40] = 0x77;
        let h = Ipv6Header::new_checked(&want[..]).unwrap();
        assert_eq!(h.version(), 6);
        assert_eq!(h.traffic_class(), 0xba);
        assert_eq!(h.flow_label(), 0x12345);
        assert_eq!((h.payload_len(), h.next_header(), h.hop_limit()), (1, 17, 64));
        assert_eq!(h.src()[..2], [0xfe, 0x80]);
        assert_eq!(h.dst()[15], 2);
        assert_eq!(h.payload(), &[0x77]);

        let mut b = [0u8; 41];
        let mut m = Ipv6Header::new_checked(&mut b[..]).unwrap();
        m.set_vtf(6, 0xba, 0x12345);
        m.set_payload_len(1);
        m.set_next_header(17);
        m.set_hop_limit(64);
        m.set_src(h.src());
        m.set_dst(h.dst());
        m.payload_mut()[0] = 0x77;
        assert_eq!(b, want);
        assert!(Ipv6Header::new_checked(&want[..39]).is_none());
    }
}
