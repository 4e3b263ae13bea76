//! ARP over Ethernet (RFC 826): the 42-byte frame both elements read and write.

use packet::Packet;

pub(super) const ETHER_LEN: usize = 14;
pub(super) const ARP_LEN: usize = 28;
/// An Ethernet header and an ARP packet for IPv4 over Ethernet, unpadded.
pub(super) const FRAME_LEN: usize = ETHER_LEN + ARP_LEN;

pub(super) const ETHERTYPE_ARP: u16 = 0x0806;
pub(super) const ETHERTYPE_IP: u16 = 0x0800;
pub(super) const OP_REQUEST: u16 = 1;
pub(super) const OP_REPLY: u16 = 2;

pub(super) const BROADCAST_ETH: [u8; 6] = [0xff; 6];

/// Hardware type Ethernet, protocol IPv4, address lengths 6 and 4: the fixed part of
/// every ARP packet these elements understand.
const ARP_FIXED: [u8; 6] = [0x00, 0x01, 0x08, 0x00, 6, 4];

/// The fields of a well-formed ARP packet for IPv4 over Ethernet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Arp {
    pub op: u16,
    /// Sender hardware and protocol addresses.
    pub sha: [u8; 6],
    pub spa: [u8; 4],
    /// Target hardware and protocol addresses.
    pub tha: [u8; 6],
    pub tpa: [u8; 4],
}

/// Reads an Ethernet frame carrying ARP for IPv4 over Ethernet; `None` for anything
/// else (too short, another type, other hardware or protocol, other lengths). Bytes
/// after the 42 (Ethernet padding) are ignored.
pub(super) fn parse(frame: &[u8]) -> Option<Arp> {
    let f: &[u8; FRAME_LEN] = frame.first_chunk()?;
    if u16::from_be_bytes([f[12], f[13]]) != ETHERTYPE_ARP || f[14..20] != ARP_FIXED {
        return None;
    }
    let field = |at: usize| -> [u8; 6] { f[at..at + 6].try_into().expect("6 bytes") };
    let addr = |at: usize| -> [u8; 4] { f[at..at + 4].try_into().expect("4 bytes") };
    Some(Arp {
        op: u16::from_be_bytes([f[20], f[21]]),
        sha: field(22),
        spa: addr(28),
        tha: field(32),
        tpa: addr(38),
    })
}

/// Writes an Ethernet header (`eth_dst`, `eth_src`, ARP) and `arp` into `f`.
pub(super) fn write(f: &mut [u8; FRAME_LEN], eth_dst: [u8; 6], eth_src: [u8; 6], arp: &Arp) {
    f[0..6].copy_from_slice(&eth_dst);
    f[6..12].copy_from_slice(&eth_src);
    f[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    f[14..20].copy_from_slice(&ARP_FIXED);
    f[20..22].copy_from_slice(&arp.op.to_be_bytes());
    f[22..28].copy_from_slice(&arp.sha);
    f[28..32].copy_from_slice(&arp.spa);
    f[32..38].copy_from_slice(&arp.tha);
    f[38..42].copy_from_slice(&arp.tpa);
}

/// Marks the Ethernet header at the front of a frame just written and the ARP packet
/// behind it.
pub(super) fn mark_headers(p: &mut Packet) {
    p.set_mac_header(0);
    p.set_network_header(ETHER_LEN as isize, ARP_LEN);
}

/// A new frame: `arp` sent to `eth_dst` from `eth_src`.
pub(super) fn build(eth_dst: [u8; 6], eth_src: [u8; 6], arp: &Arp) -> Packet {
    let mut f = [0u8; FRAME_LEN];
    write(&mut f, eth_dst, eth_src, arp);
    let mut p = Packet::from_slice(&f);
    mark_headers(&mut p);
    p
}
