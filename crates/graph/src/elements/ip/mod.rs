//! Click's IPv4 elements: header checking, address annotations, TTL decrement, ICMP
//! errors and fragmentation.

use crate::args::FromArg;
use std::net::Ipv4Addr;

pub(crate) mod checkipheader;
pub(crate) mod decipttl;
pub(crate) mod getipaddress;
pub(crate) mod icmperror;
pub(crate) mod ipfragmenter;
pub(crate) mod setipaddress;

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
