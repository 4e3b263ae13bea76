//! `IP6NDAdvertiser(IP6/MASK [IP6/MASK...] ETH, ...)`: answers Neighbor Solicitations
//! for the configured addresses with Neighbor Advertisements, as Click's element of
//! the same name, by RFC 4861's rules (7.1.1, 7.2.4).
//!
//! The table, its handlers and the per-worker snapshots are ARPResponder's
//! ([`crate::elements::neighbor::responder`]); this is what neighbour discovery brings
//! to it. An advertisement is written over the solicitation (no allocation unless the
//! solicitation was shorter and had no room), so it keeps the solicitation's device and
//! VLAN annotations.

use super::frame::{
    self, Outgoing, ALL_NODES, FLAG_OVERRIDE, FLAG_ROUTER, FLAG_SOLICITED, FRAME_LEN, NEIGHBOR_ADVERTISEMENT,
    NEIGHBOR_SOLICITATION,
};
use crate::args::{Args, FromArg};
use crate::element::*;
use crate::elements::ip6::Ipv6Prefix;
use crate::elements::neighbor::responder::{lookup, Answerer, Entry, ResponderSpec};
use crate::error::ConfigError;
use packet::Packet;
use std::net::Ipv6Addr;
use std::sync::Arc;

pub(crate) struct IP6NDAdvertiserClass;

impl ElementClass for IP6NDAdvertiserClass {
    fn name(&self) -> &'static str {
        "IP6NDAdvertiser"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let spec = ResponderSpec::<Nd>::new(&args.rest(), cx).map_err(|e| cx.error(e))?;
        Ok(Arc::new(spec))
    }
}

/// Neighbour discovery over Ethernet.
struct Nd;

impl Answerer for Nd {
    type Addr = u128;
    const USAGE: &'static str = "IP6/MASK [IP6/MASK...] ETH";
    const PREFIX_NAME: &'static str = "IPv6 address or prefix";
    const LOOKUP_EXPECTS: &'static str = "lookup expects IPv6 address";

    fn parse_prefix(s: &str) -> Option<(u128, u128)> {
        Ipv6Prefix::from_arg(s).map(|p| (p.addr, p.mask()))
    }

    fn parse_addr(s: &str) -> Option<u128> {
        Ipv6Addr::from_arg(s).map(u128::from)
    }

    /// `ADDR/LEN`: IPv6 prefixes are contiguous.
    fn prefix_text(addr: u128, mask: u128) -> String {
        format!("{}/{}", Ipv6Addr::from(addr), mask.leading_ones())
    }

    fn mask_bits(mask: u128) -> u32 {
        mask.leading_ones()
    }

    fn answer(entries: &[Entry<u128>], p: &mut Packet) -> bool {
        answer(entries, p)
    }
}

/// Turns `p` into the advertisement answering it if it is a valid Neighbor
/// Solicitation for an address one of `entries` covers.
fn answer(entries: &[Entry<u128>], p: &mut Packet) -> bool {
    let Some(ns) = frame::parse(p.data(), NEIGHBOR_SOLICITATION) else {
        return false;
    };
    let Some(e) = lookup(entries, ns.target) else {
        return false;
    };
    // RFC 4861 7.2.4: to the solicitor, solicited; a solicitation from an address not
    // yet assigned (duplicate address detection) is answered to all nodes, unsolicited.
    let (ip_dst, eth_dst, solicited) = if ns.ip_src == 0 {
        (ALL_NODES, frame::multicast_eth(ALL_NODES), 0)
    } else {
        (ns.ip_src, ns.link_addr.unwrap_or(ns.eth_src), FLAG_SOLICITED)
    };
    // A unicast answer to a group Ethernet address (a bogus source link-layer option)
    // would reach every host on the link: not answered.
    if ns.ip_src != 0 && eth_dst[0] & 1 != 0 {
        return false;
    }
    // Override for the router's own addresses; not for addresses it answers for as a
    // proxy (a shorter prefix), whose owner's own advertisement must win (RFC 4861
    // 7.2.8).
    let override_flag = if e.mask == u128::MAX { FLAG_OVERRIDE } else { 0 };
    let na = Outgoing {
        eth_dst,
        eth_src: e.eth,
        ip_src: ns.target,
        ip_dst,
        kind: NEIGHBOR_ADVERTISEMENT,
        flags: FLAG_ROUTER | solicited | override_flag,
        target: ns.target,
        link_addr: e.eth,
    };
    let len = p.len();
    if len > FRAME_LEN {
        p.take(len - FRAME_LEN);
    } else if len < FRAME_LEN && !p.try_put(FRAME_LEN - len) {
        return false;
    }
    let f = p.data_mut().first_chunk_mut().expect("sized to the frame");
    frame::write(f, &na);
    frame::mark_headers(p);
    true
}
