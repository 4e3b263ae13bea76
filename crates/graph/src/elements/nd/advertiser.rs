//! `IP6NDAdvertiser(IP6/MASK [IP6/MASK...] ETH, ...)`: answers Neighbor Solicitations
//! for the configured addresses with Neighbor Advertisements, as Click's element of
//! the same name, by RFC 4861's rules (7.1.1, 7.2.4).
//!
//! As in ARPResponder, the table lives in the spec behind a lock only handlers and a
//! worker picking up a new table take; each instance keeps the table it last saw and
//! compares a generation counter once per batch. An advertisement is written over the
//! solicitation (no allocation unless the solicitation was shorter and had no room),
//! so it keeps the solicitation's device and VLAN annotations.

use super::frame::{
    self, Outgoing, ALL_NODES, FLAG_OVERRIDE, FLAG_ROUTER, FLAG_SOLICITED, FRAME_LEN, NEIGHBOR_ADVERTISEMENT,
    NEIGHBOR_SOLICITATION,
};
use crate::args::{split_args, split_words, Args, EtherAddr, FromArg};
use crate::element::*;
use crate::elements::arp::eth_text;
use crate::elements::ip6::Ipv6Prefix;
use crate::error::ConfigError;
use crate::stats::WorkerCounters;
use packet::{Packet, PacketBatch};
use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub(crate) struct IP6NDAdvertiserClass;

impl ElementClass for IP6NDAdvertiserClass {
    fn name(&self) -> &'static str {
        "IP6NDAdvertiser"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let mut entries = Vec::new();
        for arg in args.rest() {
            add_entries(&mut entries, &arg).map_err(|e| cx.error(e))?;
        }
        Ok(Arc::new(AdvertiserSpec {
            shared: Arc::new(Shared {
                entries: RwLock::new(Arc::new(entries)),
                generation: AtomicU64::new(0),
                drops: WorkerCounters::new(cx.workers),
            }),
            two_outputs: cx.noutputs > 1,
        }))
    }
}

/// One answered prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// The prefix's address with the bits past the prefix cleared.
    addr: u128,
    len: u8,
    eth: [u8; 6],
}

impl Entry {
    fn mask(&self) -> u128 {
        match self.len {
            0 => 0,
            l => u128::MAX << (128 - u32::from(l)),
        }
    }

    fn matches(&self, ip: u128) -> bool {
        ip & self.mask() == self.addr
    }

    fn prefix_text(&self) -> String {
        format!("{}/{}", Ipv6Addr::from(self.addr), self.len)
    }
}

/// Parses one `IP6/MASK [IP6/MASK...] ETH` argument into `entries`. An entry for a
/// prefix already present replaces it; entries stay ordered longest prefix first (then
/// in the order given), so the most specific prefix answers.
fn add_entries(entries: &mut Vec<Entry>, arg: &str) -> Result<(), String> {
    let words = split_words(arg);
    let (Some(last), prefixes) = (words.last(), words.len().saturating_sub(1)) else {
        return Err("empty argument: expected 'IP6/MASK [IP6/MASK...] ETH'".to_string());
    };
    let eth = EtherAddr::from_arg(last).ok_or_else(|| {
        if prefixes == 0 {
            format!(
                "expected 'IP6/MASK [IP6/MASK...] ETH', not '{}' (addresses by name need AddressInfo, which brickroute does not have)",
                arg
            )
        } else {
            format!("'{}' is not an Ethernet address", last)
        }
    })?;
    if prefixes == 0 {
        return Err(format!("'{}' has no IPv6 address or prefix before it", last));
    }
    for w in &words[..prefixes] {
        let p = Ipv6Prefix::from_arg(w).ok_or_else(|| format!("'{}' is not an IPv6 address or prefix", w))?;
        insert(
            entries,
            Entry {
                addr: p.network(),
                len: p.len,
                eth: eth.0,
            },
        );
    }
    Ok(())
}

fn insert(entries: &mut Vec<Entry>, e: Entry) {
    if let Some(old) = entries.iter_mut().find(|o| o.addr == e.addr && o.len == e.len) {
        old.eth = e.eth;
        return;
    }
    let at = entries
        .iter()
        .position(|o| o.len < e.len)
        .unwrap_or(entries.len());
    entries.insert(at, e);
}

fn lookup(entries: &[Entry], ip: u128) -> Option<&Entry> {
    entries.iter().find(|e| e.matches(ip))
}

struct Shared {
    entries: RwLock<Arc<Vec<Entry>>>,
    /// Bumped after every change of `entries`.
    generation: AtomicU64,
    /// Frames not answered and dropped for want of output 1.
    drops: WorkerCounters,
}

impl Shared {
    fn snapshot(&self) -> (u64, Arc<Vec<Entry>>) {
        // The generation first: a change landing meanwhile shows as a newer one.
        let g = self.generation.load(Ordering::Acquire);
        let e = self.entries.read().unwrap_or_else(|e| e.into_inner()).clone();
        (g, e)
    }

    fn change(&self, f: impl FnOnce(&mut Vec<Entry>) -> Result<(), String>) -> Result<(), String> {
        let mut guard = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let mut next = Vec::clone(&guard);
        f(&mut next)?;
        *guard = Arc::new(next);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

struct AdvertiserSpec {
    shared: Arc<Shared>,
    two_outputs: bool,
}

impl ElementSpec for AdvertiserSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let (generation, entries) = self.shared.snapshot();
        Box::new(IP6NDAdvertiser {
            shared: self.shared.clone(),
            entries,
            generation,
            two_outputs: self.two_outputs,
            worker: w.index,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("table"),
            HandlerInfo::read("lookup"),
            HandlerInfo::write("add"),
            HandlerInfo::write("remove"),
            HandlerInfo::read("drops"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "table" => {
                let (_, entries) = self.shared.snapshot();
                Some(
                    entries
                        .iter()
                        .map(|e| format!("{} {}\n", e.prefix_text(), eth_text(e.eth)))
                        .collect(),
                )
            }
            "drops" => Some(self.shared.drops.sum().to_string()),
            _ => None,
        }
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        (name == "lookup").then(|| {
            let ip = Ipv6Addr::from_arg(param).ok_or_else(|| "lookup expects IPv6 address".to_string())?;
            let (_, entries) = self.shared.snapshot();
            match lookup(&entries, u128::from(ip)) {
                Some(e) => Ok(eth_text(e.eth)),
                None => Err(format!("no entry for {}", ip)),
            }
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match name {
            "add" => Some(self.shared.change(|entries| {
                let args = split_args(value);
                if args.is_empty() {
                    return Err("expected 'IP6/MASK [IP6/MASK...] ETH'".to_string());
                }
                args.iter().try_for_each(|a| add_entries(entries, a))
            })),
            "remove" => Some(self.shared.change(|entries| {
                let p = Ipv6Prefix::from_arg(value)
                    .ok_or_else(|| format!("'{}' is not an IPv6 address or prefix", value.trim()))?;
                let addr = p.network();
                let at = entries
                    .iter()
                    .position(|e| e.addr == addr && e.len == p.len)
                    .ok_or_else(|| format!("no entry for {}/{}", Ipv6Addr::from(addr), p.len))?;
                entries.remove(at);
                Ok(())
            })),
            _ => None,
        }
    }
}

struct IP6NDAdvertiser {
    shared: Arc<Shared>,
    /// The table as of `generation`.
    entries: Arc<Vec<Entry>>,
    generation: u64,
    two_outputs: bool,
    worker: usize,
}

/// Turns `p` into the advertisement answering it if it is a valid Neighbor
/// Solicitation for an address one of `entries` covers.
fn answer(entries: &[Entry], p: &mut Packet) -> bool {
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
    // Override for the router's own addresses; not for addresses it answers for as a
    // proxy (a shorter prefix), whose owner's own advertisement must win (RFC 4861
    // 7.2.8).
    let override_flag = if e.len == 128 { FLAG_OVERRIDE } else { 0 };
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

impl Element for IP6NDAdvertiser {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation.load(Ordering::Acquire) != self.generation {
            (self.generation, self.entries) = self.shared.snapshot();
        }
        let entries = &self.entries[..];
        let other = if self.two_outputs { 1 } else { DROP };
        let mut dropped = 0u64;
        out.route_each(batch, |p| {
            if answer(entries, p) {
                0
            } else {
                dropped += u64::from(other == DROP);
                other
            }
        });
        if dropped > 0 {
            self.shared.drops.add(self.worker, dropped);
        }
    }
}
