//! Neighbor Solicitations and Advertisements over Ethernet (RFC 4861 4.3, 4.4, 7.1),
//! as both elements read and write them: an Ethernet header, an IPv6 header with no
//! extension headers, the ICMPv6 message and its options.

use crate::elements::ip6::icmp6_checksum;
use crate::elements::neighbor::querier::{ether_header, is_group, ETHER_LEN};
use packet::checksum::{fold, pseudo_header_v6, sum};
use packet::Packet;

pub(super) const ETHERTYPE_IP6: u16 = 0x86dd;
const NEXT_ICMP6: u8 = 58;
/// Neighbor discovery messages are sent, and accepted, with hop limit 255 only: one
/// that crossed a router is not from the link (RFC 4861 7.1).
const ND_HOP_LIMIT: u8 = 255;
pub(super) const NEIGHBOR_SOLICITATION: u8 = 135;
pub(super) const NEIGHBOR_ADVERTISEMENT: u8 = 136;
const OPT_SOURCE_LL: u8 = 1;
const OPT_TARGET_LL: u8 = 2;

const IP6_LEN: usize = 40;
/// Type, code, checksum, flags or reserved word, target address.
const ND_LEN: usize = 24;
/// A link-layer address option for Ethernet: type, length 1 (8 bytes), address.
const LL_OPT_LEN: usize = 8;
/// Every message these elements send: the fixed part and one link-layer address option.
pub(super) const MESSAGE_LEN: usize = ND_LEN + LL_OPT_LEN;
/// The frames these elements send.
pub(super) const FRAME_LEN: usize = ETHER_LEN + IP6_LEN + MESSAGE_LEN;

/// The advertisement flags (RFC 4861 4.4): router, solicited, override.
pub(super) const FLAG_ROUTER: u8 = 0x80;
pub(super) const FLAG_SOLICITED: u8 = 0x40;
pub(super) const FLAG_OVERRIDE: u8 = 0x20;

/// `ff02::1`, all nodes on the link.
pub(super) const ALL_NODES: u128 = 0xff02 << 112 | 1;

pub(super) fn is_multicast(a: u128) -> bool {
    a >> 120 == 0xff
}

/// The solicited-node multicast address of `a` (RFC 4291 2.7.1): `ff02::1:ff00:0/104`
/// and the low 24 bits of `a`.
pub(super) fn solicited_node(a: u128) -> u128 {
    0xff02_0000_0000_0000_0000_0001_ff00_0000 | (a & 0xff_ffff)
}

/// The Ethernet address an IPv6 multicast address maps to (RFC 2464 7): `33:33` and
/// its low 32 bits.
pub(super) fn multicast_eth(a: u128) -> [u8; 6] {
    let [b, c, d, e] = (a as u32).to_be_bytes();
    [0x33, 0x33, b, c, d, e]
}

/// What the elements use of a neighbour discovery message found in a frame that passed
/// RFC 4861's validity checks for its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Message {
    pub eth_src: [u8; 6],
    pub ip_src: u128,
    pub target: u128,
    /// The Ethernet address of the source (solicitations) or target (advertisements)
    /// link-layer address option, if present. The last one counts if there are several.
    pub link_addr: Option<[u8; 6]>,
}

/// Reads an Ethernet frame carrying a neighbour discovery message of `kind` (135, 136)
/// and checks it as RFC 4861 7.1.1 (solicitations) and 7.1.2 (advertisements) ask: IPv6
/// hop limit 255, ICMPv6 checksum right, code 0, ICMPv6 length 24 or more, target not
/// multicast, every option of non-zero length. A solicitation from the unspecified
/// address must be to a solicited-node multicast address and carry no source
/// link-layer address option; an advertisement to a multicast address must not have
/// the solicited flag. `None` for anything else, including messages behind extension
/// headers (which no node sends for neighbour discovery) and a link-layer option whose
/// length is not one for Ethernet. Bytes past the IPv6 payload (Ethernet padding) are
/// ignored.
pub(super) fn parse(frame: &[u8], kind: u8) -> Option<Message> {
    let (eth, rest) = frame.split_first_chunk::<ETHER_LEN>()?;
    let (ip, rest) = rest.split_first_chunk::<IP6_LEN>()?;
    if u16::from_be_bytes([eth[12], eth[13]]) != ETHERTYPE_IP6 || ip[0] >> 4 != 6 {
        return None;
    }
    if ip[6] != NEXT_ICMP6 || ip[7] != ND_HOP_LIMIT {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let icmp = rest.get(..plen)?;
    if plen < ND_LEN || icmp[0] != kind || icmp[1] != 0 {
        return None;
    }
    let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
    let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
    if fold(sum(icmp, pseudo_header_v6(&src, &dst, NEXT_ICMP6, plen as u32))) != 0xffff {
        return None;
    }
    let (ip_src, ip_dst) = (u128::from_be_bytes(src), u128::from_be_bytes(dst));
    let target = u128::from_be_bytes(icmp[8..24].try_into().expect("16 bytes"));
    // No multicast source (RFC 4291 2.7): an answer would go to a group, with the
    // Solicited flag that makes receivers discard it (RFC 4861 7.1.2).
    if is_multicast(target) || is_multicast(ip_src) {
        return None;
    }
    let solicitation = kind == NEIGHBOR_SOLICITATION;
    let wanted = if solicitation {
        OPT_SOURCE_LL
    } else {
        OPT_TARGET_LL
    };
    let link_addr = link_option(&icmp[ND_LEN..], wanted)?;
    if solicitation && ip_src == 0 {
        let to_solicited_node = ip_dst >> 24 == solicited_node(0) >> 24;
        if !to_solicited_node || link_addr.is_some() {
            return None;
        }
    }
    if !solicitation && is_multicast(ip_dst) && icmp[4] & FLAG_SOLICITED != 0 {
        return None;
    }
    Some(Message {
        eth_src: eth[6..12].try_into().expect("6 bytes"),
        ip_src,
        target,
        link_addr,
    })
}

/// Walks the options: `Some(address of the last option of type wanted)` (`Some(None)`
/// without one), or `None` if an option has length zero, runs past the end, or is a
/// link-layer address option of the wrong size for Ethernet.
fn link_option(mut opts: &[u8], wanted: u8) -> Option<Option<[u8; 6]>> {
    let mut found = None;
    while !opts.is_empty() {
        let len = usize::from(*opts.get(1)?) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == wanted {
            if len != LL_OPT_LEN {
                return None;
            }
            found = Some(opts[2..8].try_into().expect("6 bytes"));
        }
        opts = &opts[len..];
    }
    Some(found)
}

/// The fields of a message to write.
pub(super) struct Outgoing {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    pub ip_src: u128,
    pub ip_dst: u128,
    pub kind: u8,
    pub flags: u8,
    pub target: u128,
    /// The link-layer address option's address (source option in a solicitation,
    /// target option in an advertisement).
    pub link_addr: [u8; 6],
}

/// Writes `m` as a whole frame into `f`: Ethernet header, IPv6 header (hop limit 255),
/// the message with its checksum and one link-layer address option.
pub(super) fn write(f: &mut [u8; FRAME_LEN], m: &Outgoing) {
    f[..ETHER_LEN].copy_from_slice(&ether_header(m.eth_dst, m.eth_src, ETHERTYPE_IP6));
    let ip = &mut f[ETHER_LEN..ETHER_LEN + IP6_LEN];
    ip[..4].copy_from_slice(&[0x60, 0, 0, 0]);
    ip[4..6].copy_from_slice(&(MESSAGE_LEN as u16).to_be_bytes());
    ip[6] = NEXT_ICMP6;
    ip[7] = ND_HOP_LIMIT;
    ip[8..24].copy_from_slice(&m.ip_src.to_be_bytes());
    ip[24..40].copy_from_slice(&m.ip_dst.to_be_bytes());
    let icmp = &mut f[ETHER_LEN + IP6_LEN..];
    icmp[..8].copy_from_slice(&[m.kind, 0, 0, 0, m.flags, 0, 0, 0]);
    icmp[8..24].copy_from_slice(&m.target.to_be_bytes());
    let opt = if m.kind == NEIGHBOR_SOLICITATION {
        OPT_SOURCE_LL
    } else {
        OPT_TARGET_LL
    };
    icmp[24] = opt;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&m.link_addr);
    let c = icmp6_checksum(&m.ip_src.to_be_bytes(), &m.ip_dst.to_be_bytes(), icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
}

/// Marks the Ethernet header at the front of a frame just written and the IPv6 header
/// behind it.
pub(super) fn mark_headers(p: &mut Packet) {
    p.set_mac_header(0);
    p.set_network_header(ETHER_LEN as isize, IP6_LEN);
}

/// A new frame holding `m`.
pub(super) fn build(m: &Outgoing) -> Packet {
    let mut f = [0u8; FRAME_LEN];
    write(&mut f, m);
    let mut p = Packet::from_slice(&f);
    mark_headers(&mut p);
    p
}

/// Whether an Ethernet address may be recorded for a neighbour.
pub(super) fn is_unicast_eth(eth: [u8; 6]) -> bool {
    !is_group(eth) && eth != [0; 6]
}
