//! `ARPResponder(IP/MASK [IP/MASK...] ETH, ...)`: answers ARP requests for the
//! configured addresses, as Click's element of the same name.
//!
//! The table, its handlers and the per-worker snapshots are the responder IP6NDAdvertiser
//! shares ([`crate::elements::neighbor::responder`]); this is what ARP brings to it. A
//! reply is the request rewritten in place (no allocation), so it keeps the request's
//! device and VLAN annotations, as Click's replies do.

use super::frame::{self, Arp, FRAME_LEN, OP_REPLY, OP_REQUEST};
use super::prefix_text;
use crate::args::{Args, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::elements::neighbor::responder::{lookup, Answerer, Entry, ResponderSpec};
use crate::error::ConfigError;
use packet::Packet;
use std::net::Ipv4Addr;
use std::sync::Arc;

pub(crate) struct ARPResponderClass;

impl ElementClass for ARPResponderClass {
    fn name(&self) -> &'static str {
        "ARPResponder"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let spec = ResponderSpec::<Arp4>::new(&args.rest(), cx).map_err(|e| cx.error(e))?;
        Ok(Arc::new(spec))
    }
}

/// ARP for IPv4 over Ethernet.
struct Arp4;

impl Answerer for Arp4 {
    type Addr = u32;
    const USAGE: &'static str = "IP/MASK [IP/MASK...] ETH";
    const PREFIX_NAME: &'static str = "IP address or prefix";
    const LOOKUP_EXPECTS: &'static str = "lookup expects IP address";

    fn parse_prefix(s: &str) -> Option<(u32, u32)> {
        Ipv4Prefix::from_arg(s).map(|p| (u32::from(p.addr), u32::from(p.mask)))
    }

    fn parse_addr(s: &str) -> Option<u32> {
        Ipv4Addr::from_arg(s).map(u32::from)
    }

    fn prefix_text(addr: u32, mask: u32) -> String {
        prefix_text(addr, mask)
    }

    fn mask_bits(mask: u32) -> u32 {
        mask.count_ones()
    }

    /// The reply, if `p` is an ARP request one of `entries` answers.
    #[inline]
    fn answer(entries: &[Entry<u32>], p: &mut Packet) -> bool {
        let Some(req) = frame::parse(p.data()) else {
            return false;
        };
        if req.op != OP_REQUEST {
            return false;
        }
        let Some(e) = lookup(entries, u32::from_be_bytes(req.tpa)) else {
            return false;
        };
        let reply = Arp {
            op: OP_REPLY,
            sha: e.eth,
            spa: req.tpa,
            tha: req.sha,
            tpa: req.spa,
        };
        let extra = p.len() - FRAME_LEN;
        let f = p.data_mut().first_chunk_mut().expect("parse saw 42 bytes");
        frame::write(f, req.sha, e.eth, &reply);
        // The request's Ethernet padding is no part of the reply.
        p.take(extra);
        frame::mark_headers(p);
        true
    }
}
