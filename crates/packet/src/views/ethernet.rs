//! Ethernet II frames.

use super::{arr, be16, put16, view};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;

view!(
    /// An Ethernet II header (14 bytes) and its payload.
    EthernetFrame,
    14
);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub fn dst(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 0)
    }
    pub fn src(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 6)
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), 12)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[14..]
    }
    /// True if the destination is a group (multicast or broadcast) address.
    pub fn dst_is_group(&self) -> bool {
        self.buf.as_ref()[0] & 1 != 0
    }
    pub fn dst_is_broadcast(&self) -> bool {
        self.dst() == [0xff; 6]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[0..6].copy_from_slice(&a);
    }
    pub fn set_src(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[6..12].copy_from_slice(&a);
    }
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buf.as_mut(), 12, t);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[14..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let mut b = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x06, 0xaa,
        ];
        let e = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(e.dst(), [0xff; 6]);
        assert!(e.dst_is_broadcast() && e.dst_is_group());
        assert_eq!(e.src(), [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(e.ethertype(), ETHERTYPE_ARP);
        assert_eq!(e.payload(), &[0xaa]);
        let mut m = EthernetFrame::new_checked(&mut b[..]).unwrap();
        m.set_dst([2, 0, 0, 0, 0, 1]);
        m.set_src([2, 0, 0, 0, 0, 2]);
        m.set_ethertype(ETHERTYPE_IPV4);
        m.payload_mut()[0] = 0xbb;
        assert_eq!(b, [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00, 0xbb]);
        assert!(EthernetFrame::new_checked(&b[..13]).is_none());
    }
}
