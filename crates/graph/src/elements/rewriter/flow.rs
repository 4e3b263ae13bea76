//! Flow identifiers and the rewriting of one packet's addresses and ports, with the IP
//! and transport checksums updated incrementally (RFC 1624).

use packet::checksum::{update16, update32};
use packet::Packet;
use std::fmt;
use std::net::Ipv4Addr;

pub(crate) const TCP: u8 = 6;
pub(crate) const UDP: u8 = 17;
pub(crate) const ICMP: u8 = 1;
/// ICMP echo request and reply types.
pub(crate) const ECHO: u8 = 8;
pub(crate) const ECHO_REPLY: u8 = 0;

/// A flow identifier: source address and port, destination address and port (host
/// order). Rewriters that change addresses only leave the ports 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct FlowId {
    pub saddr: u32,
    pub sport: u16,
    pub daddr: u32,
    pub dport: u16,
}

impl FlowId {
    pub fn new(saddr: u32, sport: u16, daddr: u32, dport: u16) -> FlowId {
        FlowId {
            saddr,
            sport,
            daddr,
            dport,
        }
    }

    /// The flow of the replies: source and destination swapped.
    pub fn reverse(self) -> FlowId {
        FlowId {
            saddr: self.daddr,
            sport: self.dport,
            daddr: self.saddr,
            dport: self.sport,
        }
    }

    /// Parses Click's `saddr sport daddr dport` (a `tcp_lookup` parameter).
    pub fn parse_words(s: &str) -> Option<FlowId> {
        let w: Vec<&str> = s.split_whitespace().collect();
        if w.len() != 4 {
            return None;
        }
        let a = |s: &str| crate::args::parse_ipv4(s).map(u32::from);
        Some(FlowId::new(
            a(w[0])?,
            w[1].parse().ok()?,
            a(w[2])?,
            w[3].parse().ok()?,
        ))
    }
}

/// Click's `IPFlowID` text: `(SA, SP, DA, DP)`.
impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({}, {}, {}, {})",
            Ipv4Addr::from(self.saddr),
            self.sport,
            Ipv4Addr::from(self.daddr),
            self.dport
        )
    }
}

/// What a rewriter reads of an IPv4 packet: its protocol, whether it is a first
/// fragment, whether a transport header of at least 8 bytes follows the IP header, and
/// its flow identifier (ports 0 unless it is a first fragment with that header).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parsed {
    pub proto: u8,
    pub first_fragment: bool,
    /// Bytes from the transport header to the end of the packet.
    pub transport_len: usize,
    pub flow: FlowId,
}

impl Parsed {
    /// True if the packet carries ports to rewrite: a first fragment with at least 8
    /// bytes of transport header (Click's test before a TCP or UDP lookup).
    pub fn has_ports(&self) -> bool {
        self.first_fragment && self.transport_len >= 8
    }
}

/// Reads the IPv4 header at the packet's network header annotation. `None` when there
/// is no annotation or no whole IPv4 header there (such a packet is dropped).
pub(crate) fn parse(p: &Packet) -> Option<Parsed> {
    let h = p.network_header()?;
    if h.len() < 20 || h[0] >> 4 != 4 {
        return None;
    }
    let hl = usize::from(h[0] & 0x0f) * 4;
    if hl < 20 || hl > h.len() {
        return None;
    }
    let first_fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff == 0;
    let transport_len = h.len() - hl;
    let saddr = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    let daddr = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
    let (sport, dport) = if first_fragment && transport_len >= 4 {
        (
            u16::from_be_bytes([h[hl], h[hl + 1]]),
            u16::from_be_bytes([h[hl + 2], h[hl + 3]]),
        )
    } else {
        (0, 0)
    };
    Some(Parsed {
        proto: h[9],
        first_fragment,
        transport_len,
        flow: FlowId::new(saddr, sport, daddr, dport),
    })
}

/// TCP flags and payload length of a TCP packet parsed as `parsed` (its header whole
/// in the packet), for the flow's state.
pub(crate) fn tcp_flags_and_payload(p: &Packet) -> Option<(u8, usize)> {
    let h = p.network_header()?;
    let hl = usize::from(h[0] & 0x0f) * 4;
    let t = h.get(hl..)?;
    if t.len() < 14 {
        return None;
    }
    let ip_len = usize::from(u16::from_be_bytes([h[2], h[3]])).min(h.len());
    let seg = ip_len.saturating_sub(hl);
    let off = usize::from(t[12] >> 4) * 4;
    Some((t[13], seg.saturating_sub(off)))
}

pub(crate) const TH_FIN: u8 = 0x01;
pub(crate) const TH_SYN: u8 = 0x02;
pub(crate) const TH_RST: u8 = 0x04;

/// Rewrites the packet's addresses to `to`'s, and its ports too when `ports` (TCP,
/// UDP: `proto`), updating the IP header checksum and the transport checksum
/// (which covers the addresses through the pseudo-header) incrementally. A non-first
/// fragment has its addresses rewritten only; a TCP header too short to hold its
/// checksum (under 18 bytes) keeps its ports, as in Click; a UDP checksum of 0 (none)
/// stays 0. Sets the destination address annotation when `dst_anno`.
pub(crate) fn rewrite(p: &mut Packet, parsed: &Parsed, to: FlowId, ports: bool, dst_anno: bool) {
    let Some(h) = p.network_header_mut() else {
        return;
    };
    let hl = usize::from(h[0] & 0x0f) * 4;
    let from = parsed.flow;
    let mut ip_sum = u16::from_be_bytes([h[10], h[11]]);
    if from.saddr != to.saddr {
        ip_sum = update32(ip_sum, from.saddr, to.saddr);
        h[12..16].copy_from_slice(&to.saddr.to_be_bytes());
    }
    if from.daddr != to.daddr {
        ip_sum = update32(ip_sum, from.daddr, to.daddr);
        h[16..20].copy_from_slice(&to.daddr.to_be_bytes());
    }
    h[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    if parsed.first_fragment {
        let t = &mut h[hl..];
        let csum_at = match parsed.proto {
            TCP if t.len() >= 18 => Some(16),
            UDP if t.len() >= 8 => Some(6),
            _ => None,
        };
        if let Some(at) = csum_at {
            let old = u16::from_be_bytes([t[at], t[at + 1]]);
            if !(parsed.proto == UDP && old == 0) {
                let mut sum = update32(old, from.saddr, to.saddr);
                sum = update32(sum, from.daddr, to.daddr);
                if ports {
                    sum = update16(sum, from.sport, to.sport);
                    sum = update16(sum, from.dport, to.dport);
                }
                if parsed.proto == UDP && sum == 0 {
                    sum = 0xffff;
                }
                t[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            }
            if ports {
                t[0..2].copy_from_slice(&to.sport.to_be_bytes());
                t[2..4].copy_from_slice(&to.dport.to_be_bytes());
            }
        }
    }
    if dst_anno {
        p.set_dst_ip_anno(to.daddr.to_be_bytes());
    }
}

/// An ICMP echo request's or reply's type and identifier (`parsed` a first fragment
/// with 8 bytes of ICMP header), or `None` for other ICMP messages.
pub(crate) fn echo(p: &Packet) -> Option<(u8, u16)> {
    let h = p.network_header()?;
    let hl = usize::from(h[0] & 0x0f) * 4;
    let t = h.get(hl..hl + 8)?;
    matches!(t[0], ECHO | ECHO_REPLY).then(|| (t[0], u16::from_be_bytes([t[4], t[5]])))
}

/// Sets an ICMP echo message's identifier, updating the ICMP checksum (which does
/// not cover the IP addresses).
pub(crate) fn set_echo_identifier(p: &mut Packet, ident: u16) {
    let Some(h) = p.network_header_mut() else {
        return;
    };
    let hl = usize::from(h[0] & 0x0f) * 4;
    let Some(t) = h.get_mut(hl..hl + 8) else {
        return;
    };
    let old = u16::from_be_bytes([t[4], t[5]]);
    if old != ident {
        let sum = update16(u16::from_be_bytes([t[2], t[3]]), old, ident);
        t[2..4].copy_from_slice(&sum.to_be_bytes());
        t[4..6].copy_from_slice(&ident.to_be_bytes());
        if sum == 0 {
            // The update gives +0 where the message may need -0 (an all-zero message's
            // only valid checksum is 0xFFFF): compute it over the message, as Click's
            // ICMPPingRewriter does when the result is +0.
            let total = usize::from(u16::from_be_bytes([h[2], h[3]])).min(h.len());
            if let Some(m) = h.get_mut(hl..total.max(hl + 8)) {
                m[2..4].fill(0);
                let c = packet::checksum::checksum(m);
                m[2..4].copy_from_slice(&c.to_be_bytes());
            }
        }
    }
}
