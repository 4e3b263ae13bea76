//! `ARPResponder(IP/MASK [IP/MASK...] ETH, ...)`: answers ARP requests for the
//! configured addresses, as Click's element of the same name.
//!
//! The table lives in the spec, behind a lock that only handlers and a worker picking
//! up a new table take: each instance keeps the table it last saw and compares a
//! generation counter once per batch. A reply is the request rewritten in place (no
//! allocation), so it keeps the request's device and VLAN annotations, as Click's
//! replies do.

use super::frame::{self, Arp, FRAME_LEN, OP_REPLY, OP_REQUEST};
use super::{eth_text, prefix_text};
use crate::args::{split_args, split_words, Args, EtherAddr, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::error::ConfigError;
use crate::stats::WorkerCounters;
use packet::{Packet, PacketBatch};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub(crate) struct ARPResponderClass;

impl ElementClass for ARPResponderClass {
    fn name(&self) -> &'static str {
        "ARPResponder"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let mut entries = Vec::new();
        for arg in args.rest() {
            add_entries(&mut entries, &arg).map_err(|e| cx.error(e))?;
        }
        Ok(Arc::new(ARPResponderSpec {
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
    /// The prefix's address with the host bits cleared.
    addr: u32,
    mask: u32,
    eth: [u8; 6],
}

impl Entry {
    fn matches(&self, ip: u32) -> bool {
        ip & self.mask == self.addr
    }
}

/// Parses one `IP/MASK [IP/MASK...] ETH` argument into `entries`. An entry for a
/// prefix already present replaces it; entries stay ordered most specific mask first
/// (then in the order given), so the most specific prefix answers.
fn add_entries(entries: &mut Vec<Entry>, arg: &str) -> Result<(), String> {
    let words = split_words(arg);
    let (Some(last), prefixes) = (words.last(), words.len().saturating_sub(1)) else {
        return Err("empty argument: expected 'IP/MASK [IP/MASK...] ETH'".to_string());
    };
    let eth = EtherAddr::from_arg(last).ok_or_else(|| {
        if prefixes == 0 {
            format!(
                "expected 'IP/MASK [IP/MASK...] ETH', not '{}' (addresses by name need AddressInfo, which brickroute does not have)",
                arg
            )
        } else {
            format!("'{}' is not an Ethernet address", last)
        }
    })?;
    if prefixes == 0 {
        return Err(format!("'{}' has no IP address or prefix before it", last));
    }
    for w in &words[..prefixes] {
        let p = Ipv4Prefix::from_arg(w).ok_or_else(|| format!("'{}' is not an IP address or prefix", w))?;
        let mask = u32::from(p.mask);
        insert(
            entries,
            Entry {
                addr: u32::from(p.addr) & mask,
                mask,
                eth: eth.0,
            },
        );
    }
    Ok(())
}

fn insert(entries: &mut Vec<Entry>, e: Entry) {
    if let Some(old) = entries.iter_mut().find(|o| o.addr == e.addr && o.mask == e.mask) {
        old.eth = e.eth;
        return;
    }
    let at = entries
        .iter()
        .position(|o| o.mask.count_ones() < e.mask.count_ones())
        .unwrap_or(entries.len());
    entries.insert(at, e);
}

fn lookup(entries: &[Entry], ip: u32) -> Option<&Entry> {
    entries.iter().find(|e| e.matches(ip))
}

struct Shared {
    entries: RwLock<Arc<Vec<Entry>>>,
    /// Bumped after every change of `entries`.
    generation: AtomicU64,
    /// Frames dropped for want of output 1.
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

struct ARPResponderSpec {
    shared: Arc<Shared>,
    two_outputs: bool,
}

impl ElementSpec for ARPResponderSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let (generation, entries) = self.shared.snapshot();
        Box::new(ARPResponder {
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
                        .map(|e| format!("{} {}\n", prefix_text(e.addr, e.mask), eth_text(e.eth)))
                        .collect(),
                )
            }
            "drops" => Some(self.shared.drops.sum().to_string()),
            _ => None,
        }
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        (name == "lookup").then(|| {
            let ip = Ipv4Addr::from_arg(param).ok_or_else(|| "lookup expects IP address".to_string())?;
            let (_, entries) = self.shared.snapshot();
            match lookup(&entries, u32::from(ip)) {
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
                    return Err("expected 'IP/MASK [IP/MASK...] ETH'".to_string());
                }
                args.iter().try_for_each(|a| add_entries(entries, a))
            })),
            "remove" => Some(self.shared.change(|entries| {
                let p = Ipv4Prefix::from_arg(value)
                    .ok_or_else(|| format!("'{}' is not an IP address or prefix", value.trim()))?;
                let mask = u32::from(p.mask);
                let addr = u32::from(p.addr) & mask;
                let at = entries
                    .iter()
                    .position(|e| e.addr == addr && e.mask == mask)
                    .ok_or_else(|| format!("no entry for {}", prefix_text(addr, mask)))?;
                entries.remove(at);
                Ok(())
            })),
            _ => None,
        }
    }
}

struct ARPResponder {
    shared: Arc<Shared>,
    /// The table as of `generation`.
    entries: Arc<Vec<Entry>>,
    generation: u64,
    two_outputs: bool,
    worker: usize,
}

/// Turns `p` into the reply to it if it is an ARP request one of `entries` answers.
#[inline]
fn answer(entries: &[Entry], p: &mut Packet) -> bool {
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

impl Element for ARPResponder {
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
