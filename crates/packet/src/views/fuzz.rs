//! Property: no view accessor panics on any bytes.

use super::*;
use proptest::prelude::*;

fn read_all(b: &[u8]) -> usize {
    let mut n = 0usize;
    if let Some(e) = EthernetFrame::new_checked(b) {
        n += e.dst()[0] as usize + e.src()[0] as usize + e.ethertype() as usize + e.payload().len();
        n += e.dst_is_group() as usize + e.dst_is_broadcast() as usize;
    }
    if let Some(v) = VlanTag::new_checked(b) {
        n += v.tci() as usize + v.pcp() as usize + v.dei() as usize + v.vid() as usize;
        n += v.ethertype() as usize + v.payload().len();
    }
    if let Some(a) = ArpPacket::new_checked(b) {
        n += a.hardware_type() as usize + a.protocol_type() as usize + a.operation() as usize;
        n += a.hardware_len() as usize + a.protocol_len() as usize + a.is_ethernet_ipv4() as usize;
        n += a.sender_hw()[0] as usize + a.sender_ip()[0] as usize;
        n += a.target_hw()[0] as usize + a.target_ip()[0] as usize;
    }
    if let Some(h) = Ipv4Header::new_checked(b) {
        n += h.version() as usize + h.ihl() as usize + h.header_len() + h.tos() as usize;
        n += h.total_len() as usize + h.ident() as usize + h.frag_field() as usize;
        n += h.dont_frag() as usize + h.more_frags() as usize + h.frag_offset() as usize;
        n += h.is_first_fragment() as usize + h.ttl() as usize + h.protocol() as usize;
        n += h.checksum() as usize + h.src()[0] as usize + h.dst()[0] as usize;
        n += h.header_len_valid() as usize + h.options().len() + h.payload().len();
        n += h.verify_checksum() as usize;
    }
    if let Some(h) = Ipv6Header::new_checked(b) {
        n += h.version() as usize + h.traffic_class() as usize + h.flow_label() as usize;
        n += h.payload_len() as usize + h.next_header() as usize + h.hop_limit() as usize;
        n += h.src()[0] as usize + h.dst()[0] as usize + h.payload().len();
    }
    if let Some(h) = IcmpHeader::new_checked(b) {
        n += h.icmp_type() as usize + h.code() as usize + h.checksum() as usize + h.rest() as usize;
        n += h.ident() as usize + h.seq() as usize + h.pointer() as usize + h.gateway()[0] as usize;
        n += h.next_mtu() as usize + h.payload().len() + h.is_error() as usize;
        n += h.verify_checksum() as usize;
    }
    if let Some(u) = UdpHeader::new_checked(b) {
        n += u.src_port() as usize + u.dst_port() as usize + u.length() as usize + u.checksum() as usize;
        n += u.payload().len();
    }
    if let Some(t) = TcpHeader::new_checked(b) {
        n += t.src_port() as usize + t.dst_port() as usize + t.seq() as usize + t.ack() as usize;
        n += t.data_offset() as usize + t.header_len() + t.flags() as usize + t.window() as usize;
        n += t.checksum() as usize + t.urgent() as usize + t.options().len() + t.payload().len();
    }
    if let Some(e) = EspHeader::new_checked(b) {
        n += e.spi() as usize + e.seq() as usize + e.payload().len();
    }
    n
}

fn write_all(b: &mut [u8]) {
    if let Some(mut h) = Ipv4Header::new_checked(&mut *b) {
        h.fill_checksum();
        h.options_mut().fill(1);
        h.payload_mut().fill(2);
        h.set_ttl(3);
    }
    if let Some(mut h) = IcmpHeader::new_checked(&mut *b) {
        h.fill_checksum();
        h.payload_mut().fill(4);
    }
    if let Some(mut t) = TcpHeader::new_checked(&mut *b) {
        t.set_data_offset(15);
        t.set_flags(0xff);
    }
    if let Some(mut v) = VlanTag::new_checked(&mut *b) {
        v.set_pcp(0xff);
        v.set_vid(0xffff);
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = read_all(&bytes);
        let mut m = bytes.clone();
        write_all(&mut m);
        let _ = read_all(&m);
    }
}
