//! Click's IPv4 elements: header checking, address annotations, TTL decrement, ICMP
//! errors, fragmentation, and the rest of an IP router's forwarding path (link-level
//! broadcast filtering, router IP options, ICMP error source fixing).

use crate::args::FromArg;
use crate::registry::Registry;
use std::net::Ipv4Addr;
use std::sync::Arc;

pub(crate) mod checkdrops;
pub(crate) mod checkipheader;
pub(crate) mod checktransport;
pub(crate) mod decipttl;
pub(crate) mod dropbroadcasts;
pub(crate) mod encap;
pub(crate) mod fixipsrc;
pub(crate) mod getipaddress;
pub(crate) mod icmperror;
pub(crate) mod icmppingencap;
pub(crate) mod ipencap;
pub(crate) mod ipfragmenter;
pub(crate) mod ipgwoptions;
pub(crate) mod ipprint;
pub(crate) mod markipheader;
pub(crate) mod setipaddress;
pub(crate) mod setipchecksum;
pub(crate) mod setipdscp;
pub(crate) mod settransportchecksum;
pub(crate) mod storeipaddress;
pub(crate) mod stripipheader;
pub(crate) mod udpipencap;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
pub(crate) mod testutil;

/// A space-separated list of IPv4 addresses (Click's `Vector<IPAddress>` argument).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IpList(pub Vec<[u8; 4]>);

impl FromArg for IpList {
    const WHAT: &'static str = "list of IP addresses";
    fn from_arg(s: &str) -> Option<Self> {
        crate::args::split_words(s)
            .iter()
            .map(|w| Ipv4Addr::from_arg(w).map(|a| a.octets()))
            .collect::<Option<Vec<_>>>()
            .map(IpList)
    }
}

/// A 4-byte annotation given by offset into the user annotation area or by name
/// (Click's `AnnoArg(4)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anno4(pub usize);

impl FromArg for Anno4 {
    const WHAT: &'static str = "annotation";
    fn from_arg(s: &str) -> Option<Self> {
        use packet::anno::*;
        let s = s.trim();
        let named = match s {
            "DST_IP" | "DST_IP_ANNO" => Some(DST_IP_ANNO_OFFSET),
            "AGGREGATE" | "AGGREGATE_ANNO" => Some(AGGREGATE_ANNO_OFFSET),
            "EXTRA_PACKETS" | "EXTRA_PACKETS_ANNO" => Some(EXTRA_PACKETS_ANNO_OFFSET),
            "EXTRA_LENGTH" | "EXTRA_LENGTH_ANNO" => Some(EXTRA_LENGTH_ANNO_OFFSET),
            "PACKET_NUMBER" | "PACKET_NUMBER_ANNO" => Some(PACKET_NUMBER_ANNO_OFFSET),
            "SEQUENCE_NUMBER" | "SEQUENCE_NUMBER_ANNO" => Some(SEQUENCE_NUMBER_ANNO_OFFSET),
            _ => None,
        };
        let off = match named {
            Some(o) => o,
            None => usize::from_arg(s)?,
        };
        (off + 4 <= ANNO_SIZE).then_some(Anno4(off))
    }
}

/// Dotted-quad text of an address.
pub(crate) fn ip_text(a: [u8; 4]) -> String {
    Ipv4Addr::from(a).to_string()
}

/// Registers the elements of Click's IP router's forwarding path (`make-ip-conf.pl`'s
/// `DropBroadcasts -> PaintTee -> IPGWOptions -> FixIPSrc -> ...`), with CheckPaint,
/// PaintTee's companion.
pub(crate) fn register_gateway(reg: &mut Registry) {
    use crate::elements::paint::{CheckPaintClass, PaintTeeClass};
    reg.add(Arc::new(dropbroadcasts::DropBroadcastsClass));
    reg.add(Arc::new(PaintTeeClass));
    reg.add(Arc::new(CheckPaintClass));
    reg.add(Arc::new(ipgwoptions::IPGW_OPTIONS));
    reg.add(Arc::new(fixipsrc::FixIPSrcClass));
}

/// The IPv4 header at `p`'s network header, as many bytes as its header length field
/// says; `None` when there is none, the field says less than 20 or the data is shorter.
pub(crate) fn ipv4_header_mut(p: &mut packet::Packet) -> Option<&mut [u8]> {
    let h = p.network_header_mut()?;
    let hlen = usize::from(h.first().map_or(0, |b| b & 0x0f)) * 4;
    if hlen < 20 || h.len() < hlen {
        return None;
    }
    Some(&mut h[..hlen])
}

/// Writes the checksum of IPv4 header `h` (the whole header, options included).
pub(crate) fn set_header_checksum(h: &mut [u8]) {
    h[10..12].fill(0);
    let sum = packet::checksum::checksum(h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
}

#[cfg(test)]
mod gateway_tests {
    use crate::registry::Registry;
    use crate::router::RouterSpec;

    #[test]
    fn click_ip_router_interface_chain_builds_from_the_library() {
        // One interface's forwarding path as Click's make-ip-conf.pl writes it.
        let flat = crate::lang::parse(
            "InfiniteSource(LIMIT 1) -> DropBroadcasts -> cp :: PaintTee(1)
               -> gio :: IPGWOptions(18.26.4.1, 18.26.7.1) -> FixIPSrc(18.26.4.1)
               -> dt :: DecIPTTL -> Discard;
             gio[1] -> ICMPError(18.26.4.1, parameterproblem) -> Discard;
             cp[1] -> ICMPError(18.26.4.1, redirect, host) -> CheckPaint(0) -> Discard;
             dt[1] -> Discard",
            "t.click",
            &Default::default(),
        )
        .unwrap();
        let reg = Registry::with_library();
        let router = RouterSpec::build(&flat, &reg, std::path::Path::new("."), 1).unwrap();
        assert_eq!(router.read_handler("gio.drops").unwrap(), "0");
        assert_eq!(router.read_handler("cp.color").unwrap(), "1");
        for class in [
            "DropBroadcasts",
            "PaintTee",
            "IPGWOptions",
            "FixIPSrc",
            "CheckPaint",
        ] {
            assert_eq!(router.elements_of_class(class).len(), 1, "{}", class);
        }
    }
}
