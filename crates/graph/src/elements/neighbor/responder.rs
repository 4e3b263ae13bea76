//! The responder both answering elements share: ARPResponder (ARP requests) and
//! IP6NDAdvertiser (Neighbor Solicitations) keep the same table of prefixes and
//! Ethernet addresses and differ only in the frames they read and write, which an
//! [`Answerer`] supplies.
//!
//! The table lives in the spec, behind a lock that only handlers and a worker picking
//! up a new table take: each instance keeps the table it last saw and compares a
//! generation counter once per batch.

use super::table::NeighborAddr;
use crate::args::{split_args, split_words, EtherAddr, FromArg};
use crate::element::*;
use crate::stats::WorkerCounters;
use packet::{Packet, PacketBatch};
use std::ops::BitAnd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What one protocol brings to the responder.
pub(crate) trait Answerer: Send + Sync + 'static {
    /// An address, and a mask of the same width.
    type Addr: NeighborAddr + BitAnd<Output = Self::Addr>;
    /// The configuration's form of one argument: `IP/MASK [IP/MASK...] ETH`.
    const USAGE: &'static str;
    /// How errors name a prefix: `'X' is not an IP address or prefix`.
    const PREFIX_NAME: &'static str;
    /// The `lookup` handler's error for a parameter that is not an address.
    const LOOKUP_EXPECTS: &'static str;

    /// A prefix as the configuration writes it: its address (bits past the mask not
    /// yet cleared) and mask.
    fn parse_prefix(s: &str) -> Option<(Self::Addr, Self::Addr)>;
    fn parse_addr(s: &str) -> Option<Self::Addr>;
    /// How the `table` handler and errors write a prefix.
    fn prefix_text(addr: Self::Addr, mask: Self::Addr) -> String;
    /// The mask's length in bits, which orders entries most specific first.
    fn mask_bits(mask: Self::Addr) -> u32;
    /// Turns `p` into the answer to it if it asks for an address one of `entries`
    /// covers; false, with `p` unchanged, otherwise.
    fn answer(entries: &[Entry<Self::Addr>], p: &mut Packet) -> bool;
}

/// One answered prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry<A> {
    /// The prefix's address with the bits past the mask cleared.
    pub addr: A,
    pub mask: A,
    pub eth: [u8; 6],
}

impl<A: NeighborAddr + BitAnd<Output = A>> Entry<A> {
    fn matches(&self, ip: A) -> bool {
        ip & self.mask == self.addr
    }
}

/// The entry that answers for `ip`: the most specific one covering it.
pub(crate) fn lookup<A: NeighborAddr + BitAnd<Output = A>>(entries: &[Entry<A>], ip: A) -> Option<&Entry<A>> {
    entries.iter().find(|e| e.matches(ip))
}

/// Parses one `ADDR/MASK [ADDR/MASK...] ETH` argument into `entries`. An entry for a
/// prefix already present replaces it; entries stay ordered most specific mask first
/// (then in the order given), so the most specific prefix answers.
fn add_entries<P: Answerer>(entries: &mut Vec<Entry<P::Addr>>, arg: &str) -> Result<(), String> {
    let words = split_words(arg);
    let (Some(last), prefixes) = (words.last(), words.len().saturating_sub(1)) else {
        return Err(format!("empty argument: expected '{}'", P::USAGE));
    };
    let eth = EtherAddr::from_arg(last).ok_or_else(|| {
        if prefixes == 0 {
            format!(
                "expected '{}', not '{}' (or an AddressInfo name of both)",
                P::USAGE,
                arg
            )
        } else {
            format!("'{}' is not an Ethernet address", last)
        }
    })?;
    // An AddressInfo name giving both an address and an Ethernet address stands for
    // both, as in Click: its prefix is answered too.
    let prefixes = if P::parse_prefix(last).is_some() {
        words.len()
    } else {
        prefixes
    };
    if prefixes == 0 {
        return Err(format!("'{}' has no {} before it", last, P::PREFIX_NAME));
    }
    for w in &words[..prefixes] {
        let (addr, mask) =
            P::parse_prefix(w).ok_or_else(|| format!("'{}' is not an {}", w, P::PREFIX_NAME))?;
        insert::<P>(
            entries,
            Entry {
                addr: addr & mask,
                mask,
                eth: eth.0,
            },
        );
    }
    Ok(())
}

fn insert<P: Answerer>(entries: &mut Vec<Entry<P::Addr>>, e: Entry<P::Addr>) {
    if let Some(old) = entries.iter_mut().find(|o| o.addr == e.addr && o.mask == e.mask) {
        old.eth = e.eth;
        return;
    }
    let bits = P::mask_bits(e.mask);
    let at = entries
        .iter()
        .position(|o| P::mask_bits(o.mask) < bits)
        .unwrap_or(entries.len());
    entries.insert(at, e);
}

struct Shared<A> {
    entries: RwLock<Arc<Vec<Entry<A>>>>,
    /// Bumped after every change of `entries`.
    generation: AtomicU64,
    /// Frames dropped for want of output 1.
    drops: WorkerCounters,
}

impl<A: Clone> Shared<A> {
    fn snapshot(&self) -> (u64, Arc<Vec<Entry<A>>>) {
        // The generation first: a change landing meanwhile shows as a newer one.
        let g = self.generation.load(Ordering::Acquire);
        let e = self.entries.read().unwrap_or_else(|e| e.into_inner()).clone();
        (g, e)
    }

    fn change(&self, f: impl FnOnce(&mut Vec<Entry<A>>) -> Result<(), String>) -> Result<(), String> {
        let mut guard = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let mut next = Vec::clone(&guard);
        f(&mut next)?;
        *guard = Arc::new(next);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

pub(crate) struct ResponderSpec<P: Answerer> {
    shared: Arc<Shared<P::Addr>>,
    two_outputs: bool,
}

impl<P: Answerer> ResponderSpec<P> {
    /// The spec for the configuration's arguments, each `ADDR/MASK [ADDR/MASK...] ETH`.
    pub(crate) fn new(args: &[String], cx: &BuildContext) -> Result<ResponderSpec<P>, String> {
        let mut entries = Vec::new();
        for arg in args {
            add_entries::<P>(&mut entries, arg)?;
        }
        Ok(ResponderSpec {
            shared: Arc::new(Shared {
                entries: RwLock::new(Arc::new(entries)),
                generation: AtomicU64::new(0),
                drops: WorkerCounters::new(cx.workers),
            }),
            two_outputs: cx.noutputs > 1,
        })
    }
}

impl<P: Answerer> ElementSpec for ResponderSpec<P> {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let (generation, entries) = self.shared.snapshot();
        Box::new(Responder::<P> {
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
                        .map(|e| format!("{} {}\n", P::prefix_text(e.addr, e.mask), EtherAddr(e.eth)))
                        .collect(),
                )
            }
            "drops" => Some(self.shared.drops.sum().to_string()),
            _ => None,
        }
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        (name == "lookup").then(|| {
            let ip = P::parse_addr(param).ok_or_else(|| P::LOOKUP_EXPECTS.to_string())?;
            let (_, entries) = self.shared.snapshot();
            match lookup(&entries, ip) {
                Some(e) => Ok(EtherAddr(e.eth).to_string()),
                None => {
                    let mut s = "no entry for ".to_string();
                    let _ = ip.write_text(&mut s);
                    Err(s)
                }
            }
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match name {
            "add" => Some(self.shared.change(|entries| {
                let args = split_args(value);
                if args.is_empty() {
                    return Err(format!("expected '{}'", P::USAGE));
                }
                args.iter().try_for_each(|a| add_entries::<P>(entries, a))
            })),
            "remove" => Some(self.shared.change(|entries| {
                let (addr, mask) = P::parse_prefix(value)
                    .ok_or_else(|| format!("'{}' is not an {}", value.trim(), P::PREFIX_NAME))?;
                let addr = addr & mask;
                let at = entries
                    .iter()
                    .position(|e| e.addr == addr && e.mask == mask)
                    .ok_or_else(|| format!("no entry for {}", P::prefix_text(addr, mask)))?;
                entries.remove(at);
                Ok(())
            })),
            _ => None,
        }
    }
}

struct Responder<P: Answerer> {
    shared: Arc<Shared<P::Addr>>,
    /// The table as of `generation`.
    entries: Arc<Vec<Entry<P::Addr>>>,
    generation: u64,
    two_outputs: bool,
    worker: usize,
}

impl<P: Answerer> Element for Responder<P> {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if self.shared.generation.load(Ordering::Acquire) != self.generation {
            (self.generation, self.entries) = self.shared.snapshot();
        }
        let entries = &self.entries[..];
        let other = if self.two_outputs { 1 } else { DROP };
        let mut dropped = 0u64;
        out.route_each(batch, |p| {
            if P::answer(entries, p) {
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
