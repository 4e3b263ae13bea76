//! ARP packets for Ethernet and IPv4 (RFC 826).

use super::{arr, be16, put16, view};

pub const ARP_REQUEST: u16 = 1;
pub const ARP_REPLY: u16 = 2;

view!(
    /// An Ethernet/IPv4 ARP packet (28 bytes).
    ArpPacket,
    28
);

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub fn hardware_type(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn protocol_type(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn hardware_len(&self) -> u8 {
        self.buf.as_ref()[4]
    }
    pub fn protocol_len(&self) -> u8 {
        self.buf.as_ref()[5]
    }
    pub fn operation(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    /// True for hardware type Ethernet (1), protocol IPv4, lengths 6 and 4.
    pub fn is_ethernet_ipv4(&self) -> bool {
        self.hardware_type() == 1
            && self.protocol_type() == 0x0800
            && self.hardware_len() == 6
            && self.protocol_len() == 4
    }
    pub fn sender_hw(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 8)
    }
    pub fn sender_ip(&self) -> [u8; 4] {
        arr(self.buf.as_ref(), 14)
    }
    pub fn target_hw(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 18)
    }
    pub fn target_ip(&self) -> [u8; 4] {
        arr(self.buf.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed Ethernet/IPv4 preamble (types and lengths).
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buf.as_mut();
        put16(b, 0, 1);
        put16(b, 2, 0x0800);
        b[4] = 6;
        b[5] = 4;
    }
    pub fn set_operation(&mut self, op: u16) {
        put16(self.buf.as_mut(), 6, op);
    }
    pub fn set_sender_hw(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[8..14].copy_from_slice(&a);
    }
    pub fn set_sender_ip(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[14..18].copy_from_slice(&a);
    }
    pub fn set_target_hw(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[18..24].copy_from_slice(&a);
    }
    pub fn set_target_ip(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[24..28].copy_from_slice(&a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_roundtrip() {
        let want = [
            0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, // htype, ptype, hlen, plen, op
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 10, 0, 0, 1, // sender
            0, 0, 0, 0, 0, 0, 10, 0, 0, 2, // target
        ];
        let mut b = [0xeeu8; 28];
        let mut a = ArpPacket::new_checked(&mut b[..]).unwrap();
        a.set_ethernet_ipv4();
        a.set_operation(ARP_REQUEST);
        a.set_sender_hw([0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        a.set_sender_ip([10, 0, 0, 1]);
        a.set_target_hw([0; 6]);
        a.set_target_ip([10, 0, 0, 2]);
        assert_eq!(b, want);
        let a = ArpPacket::new_checked(&want[..]).unwrap();
        assert!(a.is_ethernet_ipv4());
        assert_eq!(a.operation(), ARP_REQUEST);
        assert_eq!(a.sender_ip(), [10, 0, 0, 1]);
        assert_eq!(a.target_ip(), [10, 0, 0, 2]);
        assert_eq!(a.sender_hw(), [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(a.target_hw(), [0; 6]);
        assert!(ArpPacket::new_checked(&want[..27]).is_none());
    }
}
