//! 802.1Q VLAN tags: the 4 bytes that follow an EtherType of 0x8100 (TCI, then the
//! encapsulated EtherType).

use super::{be16, put16, view};

view!(
    /// An 802.1Q tag (TCI and inner EtherType, 4 bytes) and what follows it.
    VlanTag,
    4
);

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub fn tci(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[4..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buf.as_mut(), 0, tci);
    }
    pub fn set_pcp(&mut self, pcp: u8) {
        let t = (self.tci() & 0x1fff) | ((pcp as u16 & 7) << 13);
        self.set_tci(t);
    }
    pub fn set_dei(&mut self, dei: bool) {
        let t = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(t);
    }
    pub fn set_vid(&mut self, vid: u16) {
        let t = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(t);
    }
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buf.as_mut(), 2, t);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[4..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        // PCP 5, DEI 1, VID 0x123; inner IPv4.
        let mut b = [0xb1, 0x23, 0x08, 0x00, 0x45];
        let v = VlanTag::new_checked(&b[..]).unwrap();
        assert_eq!((v.pcp(), v.dei(), v.vid()), (5, true, 0x123));
        assert_eq!(v.ethertype(), 0x0800);
        assert_eq!(v.payload(), &[0x45]);
        let mut m = VlanTag::new_checked(&mut b[..]).unwrap();
        m.set_vid(0xfff);
        m.set_pcp(1);
        m.set_dei(false);
        m.set_ethertype(0x86dd);
        assert_eq!(b, [0x2f, 0xff, 0x86, 0xdd, 0x45]);
        assert!(VlanTag::new_checked(&b[..3]).is_none());
    }
}
