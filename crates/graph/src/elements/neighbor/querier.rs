//! The querier both address-resolution elements share: ARPQuerier (IPv4, ARP) and
//! IP6NDSolicitor (IPv6, neighbour discovery) differ only in the frames they write
//! and read, which a [`Protocol`] supplies.
//!
//! The table is the spec's ([`super::table`]), shared by all workers. Each instance
//! keeps the Ethernet header of every next hop it used in a cache of its own, valid
//! until the entry's next poll or expiry, and compares the table's generation once per
//! batch: a batch whose next hops are all cached takes no lock. Packets waiting for an
//! address stay in the instance that saved them; the instance is polled (`run`) while
//! it holds any, so it sends them when another worker's instance records the reply,
//! and drops them when they have waited `PENDING_TIMEOUT_MS`.

use super::clock::Clock;
use super::table::{Limits, Lookup, NeighborAddr, Save, Table, PENDING_TIMEOUT_MS};
use crate::args::{split_words, Args, EtherAddr, FromArg, Interval};
use crate::element::*;
use crate::error::ConfigError;
use crate::stats::WorkerCounters;
use packet::{Packet, PacketBatch};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

pub(crate) const ETHER_LEN: usize = 14;

/// What one resolution protocol brings to the querier.
pub(crate) trait Protocol: Send + Sync + 'static {
    type Addr: NeighborAddr;
    /// The Ethernet type of the packets encapsulated (0x0800, 0x86DD).
    const ETHERTYPE: u16;
    /// How handler messages name an address: `IP` in `expected 'IP ETH'`.
    const ADDR_ARG: &'static str;
    /// How handler errors name an address: `'X' is not an IP address`.
    const ADDR_NAME: &'static str;
    /// The second line of the `stats` handler: `N ARP queries sent`.
    const QUERIES_SENT: &'static str;
    /// The `insert` handler's error when every entry holds saved packets.
    const TABLE_FULL: &'static str;

    /// The next hop of a packet on input 0, from its destination annotation.
    fn next_hop(p: &Packet) -> Self::Addr;
    /// Whether `a` is the unspecified address, to which nothing can be sent.
    fn is_unspecified(a: Self::Addr) -> bool;
    fn parse_addr(s: &str) -> Option<Self::Addr>;
    /// The Ethernet destination of a packet to `dst` that needs no resolution
    /// (broadcast, multicast).
    fn direct(&self, dst: Self::Addr) -> Option<[u8; 6]>;
    /// A query for `target`, from `eth`, carrying `trigger`'s annotations as the
    /// protocol wants: a first query if `known` is `None`, a poll of the entry at
    /// `known` otherwise.
    fn query(&self, eth: [u8; 6], target: Self::Addr, known: Option<[u8; 6]>, trigger: &Packet) -> Packet;
    /// A frame on input 1: the address it answers for and the Ethernet address it
    /// gives, if it is a well-formed response whose sender may be recorded. A response
    /// without an Ethernet address (`None`) confirms the one recorded, if any.
    fn response(&self, frame: &[u8]) -> Option<(Self::Addr, Option<[u8; 6]>)>;

    /// Whether a querier configured with `other` resolves for the same host (Click's
    /// ARPQuerier takes a replaced one's table only for the same addresses).
    fn same_host(&self, other: &Self) -> bool;

    /// Handlers of the protocol's own, listed after the shared read handlers.
    fn handlers(&self) -> Vec<HandlerInfo>;
    fn read_handler(&self, name: &str) -> Option<String>;
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>>;
}

const DEFAULT_CAPACITY: usize = 2048;
const DEFAULT_TIMEOUT: Interval = Interval(300_000_000_000);
const DEFAULT_POLL_TIMEOUT: Interval = Interval(60_000_000_000);

/// Reads the keywords both elements take for their table: CAPACITY, ENTRY_CAPACITY,
/// ENTRY_PACKET_CAPACITY, TIMEOUT, POLL_TIMEOUT.
pub(crate) fn limits(args: &mut Args, cx: &BuildContext) -> Result<Limits, ConfigError> {
    let err = |e: String| cx.error(e);
    let capacity = args
        .keyword::<usize>("CAPACITY")
        .map_err(err)?
        .unwrap_or(DEFAULT_CAPACITY);
    let entry_capacity = args.keyword::<usize>("ENTRY_CAPACITY").map_err(err)?.unwrap_or(0);
    let entry_packet_capacity = args
        .keyword::<usize>("ENTRY_PACKET_CAPACITY")
        .map_err(err)?
        .unwrap_or(0);
    let timeout = args
        .keyword::<Interval>("TIMEOUT")
        .map_err(err)?
        .unwrap_or(DEFAULT_TIMEOUT);
    let poll_timeout = args
        .keyword::<Interval>("POLL_TIMEOUT")
        .map_err(err)?
        .unwrap_or(DEFAULT_POLL_TIMEOUT);
    Ok(Limits {
        capacity,
        entry_capacity,
        entry_packet_capacity,
        timeout_ms: millis(timeout),
        poll_timeout_ms: millis(poll_timeout),
    })
}

/// What both elements are configured with, besides their protocol.
pub(crate) struct Config {
    pub limits: Limits,
    pub clock: Clock,
    /// This host's Ethernet address: the source of everything sent.
    pub eth: [u8; 6],
    /// Outputs: queries leave on output 1 when there are two.
    pub noutputs: usize,
    pub workers: usize,
}

/// Milliseconds, at least 1 for an interval that is not zero; 0 stays 0 ("never").
fn millis(i: Interval) -> u64 {
    i.0.div_ceil(1_000_000)
}

/// The 14-byte Ethernet header of a packet of type `ethertype` to `dst` from `src`.
pub(crate) fn ether_header(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> [u8; ETHER_LEN] {
    let mut h = [0u8; ETHER_LEN];
    h[0..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    h
}

/// Whether an Ethernet address is a group (multicast or broadcast) address.
pub(crate) fn is_group(eth: [u8; 6]) -> bool {
    eth[0] & 1 != 0
}

struct Shared<P: Protocol> {
    protocol: P,
    table: Table<P::Addr>,
    clock: Clock,
    eth: [u8; 6],
    queries: WorkerCounters,
    responses: WorkerCounters,
    drops: WorkerCounters,
}

pub(crate) struct QuerierSpec<P: Protocol> {
    shared: Arc<Shared<P>>,
    /// Output queries leave on: 1 when there are two outputs.
    query_port: usize,
}

impl<P: Protocol> QuerierSpec<P> {
    pub(crate) fn new(protocol: P, c: Config) -> QuerierSpec<P> {
        QuerierSpec {
            shared: Arc::new(Shared {
                protocol,
                table: Table::new(c.limits),
                clock: c.clock,
                eth: c.eth,
                queries: WorkerCounters::new(c.workers),
                responses: WorkerCounters::new(c.workers),
                drops: WorkerCounters::new(c.workers),
            }),
            query_port: usize::from(c.noutputs > 1),
        }
    }

    fn parse_addr(word: &str) -> Result<P::Addr, String> {
        P::parse_addr(word).ok_or_else(|| format!("'{}' is not an {}", word.trim(), P::ADDR_NAME))
    }

    fn insert(&self, value: &str) -> Result<(), String> {
        let words = split_words(value);
        let [ip, eth] = &words[..] else {
            return Err(format!("expected '{} ETH'", P::ADDR_ARG));
        };
        let ip = Self::parse_addr(ip)?;
        let eth = EtherAddr::from_arg(eth).ok_or_else(|| format!("'{}' is not an Ethernet address", eth))?;
        let now = self.shared.clock.now_outside();
        if self.shared.table.lock().learn(ip, eth.0, now) {
            Ok(())
        } else {
            Err(P::TABLE_FULL.to_string())
        }
    }

    fn delete(&self, value: &str) -> Result<(), String> {
        let ip = Self::parse_addr(value)?;
        if self.shared.table.lock().delete(ip) {
            Ok(())
        } else {
            let mut s = "no entry for ".to_string();
            let _ = ip.write_text(&mut s);
            Err(s)
        }
    }
}

impl<P: Protocol> ElementSpec for QuerierSpec<P> {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(Querier {
            shared: self.shared.clone(),
            worker: w.index,
            query_port: self.query_port,
            // Not the table's: the first batch starts from an empty cache either way.
            generation: u64::MAX,
            cache: AddrMap::default(),
            pending: HashMap::new(),
            pending_deadline: u64::MAX,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        let mut h: Vec<HandlerInfo> = [
            "table",
            "stats",
            "queries",
            "responses",
            "drops",
            "count",
            "length",
        ]
        .into_iter()
        .map(HandlerInfo::read)
        .collect();
        h.extend(self.shared.protocol.handlers());
        h.extend(["insert", "delete", "clear"].map(HandlerInfo::write));
        h
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let now = || s.clock.now_outside();
        Some(match name {
            "table" => s.table.lock().text(now()),
            "stats" => format!(
                "{} packets killed\n{} {}\n",
                s.drops.sum(),
                s.queries.sum(),
                P::QUERIES_SENT
            ),
            "queries" => s.queries.sum().to_string(),
            "responses" => s.responses.sum().to_string(),
            "drops" => s.drops.sum().to_string(),
            "count" => s.table.lock().len(now()).to_string(),
            "length" => s.table.lock().saved().to_string(),
            _ => return s.protocol.read_handler(name),
        })
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        Some(match name {
            "insert" => self.insert(value),
            "delete" => self.delete(value),
            "clear" => {
                self.shared.table.lock().clear();
                Ok(())
            }
            _ => return self.shared.protocol.write_handler(name, value),
        })
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// As Click's ARPQuerier: a querier for the same host (addresses, Ethernet address)
    /// takes the resolved entries and the counters. Packets the old one's workers
    /// held for addresses still being queried are not carried.
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<QuerierSpec<P>>(old) else {
            return false;
        };
        let (s, o) = (&self.shared, &old.shared);
        if s.eth != o.eth || !s.protocol.same_host(&o.protocol) {
            return false;
        }
        s.table.take_from(&o.table);
        for (mine, theirs) in [
            (&s.queries, &o.queries),
            (&s.responses, &o.responses),
            (&s.drops, &o.drops),
        ] {
            mine.add_shared(0, theirs.sum());
        }
        true
    }
}

/// A multiplicative hash for the instance's cache: it is read for every packet, and
/// its keys are next hops that answered, not addresses senders choose. (The table and
/// the saved packets, keyed by any address a route leads to, use the standard
/// library's keyed hash.)
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(v)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u128(&mut self, v: u128) {
        // An IPv6 next hop as four words rather than sixteen bytes.
        for w in [(v >> 96) as u32, (v >> 64) as u32, (v >> 32) as u32, v as u32] {
            self.write_u32(w);
        }
    }
}

type AddrMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

/// A next hop this instance has used: its packets' Ethernet header, good until
/// `recheck_ms` (the entry's next poll or its expiry).
struct Cached {
    header: [u8; ETHER_LEN],
    recheck_ms: u64,
}

/// Packets saved for one address, in arrival order.
struct Pending {
    packets: Vec<Packet>,
    /// When they are dropped if the address has not resolved.
    deadline_ms: u64,
}

struct Querier<P: Protocol> {
    shared: Arc<Shared<P>>,
    worker: usize,
    query_port: usize,
    /// The table generation `cache` and `pending` were last brought up to.
    generation: u64,
    cache: AddrMap<P::Addr, Cached>,
    pending: HashMap<P::Addr, Pending>,
    /// The earliest `deadline_ms` in `pending` (`u64::MAX` if none).
    pending_deadline: u64,
}

impl<P: Protocol> Querier<P> {
    #[inline]
    fn header_to(&self, eth: [u8; 6]) -> [u8; ETHER_LEN] {
        ether_header(eth, self.shared.eth, P::ETHERTYPE)
    }

    /// The header for a packet to `dst` without asking the table: broadcast and
    /// multicast addresses, and next hops in the cache.
    #[inline]
    fn known_header(&self, dst: P::Addr, now: u64) -> Option<[u8; ETHER_LEN]> {
        match self.cache.get(&dst) {
            Some(c) if now < c.recheck_ms => Some(c.header),
            _ => self.shared.protocol.direct(dst).map(|eth| self.header_to(eth)),
        }
    }

    /// Brings the cache and the saved packets up to the table: on a new generation the
    /// cache goes (an entry may have changed or gone) and saved packets whose address
    /// resolved leave; saved packets past their deadline are dropped.
    #[inline]
    fn sync(&mut self, now: u64, out: &mut Outputs<'_>) {
        let g = self.shared.table.generation();
        if g != self.generation {
            self.generation = g;
            self.cache.clear();
            if !self.pending.is_empty() {
                self.service_pending(now, out);
            }
        } else if now >= self.pending_deadline {
            self.service_pending(now, out);
        }
    }

    #[cold]
    fn service_pending(&mut self, now: u64, out: &mut Outputs<'_>) {
        let shared = self.shared.clone();
        let mut table = shared.table.lock();
        let mut deadline = u64::MAX;
        let mut dropped = 0u64;
        self.pending.retain(|&ip, q| {
            let n = q.packets.len();
            if let Some(eth) = table.usable(ip, now) {
                let header = ether_header(eth, shared.eth, P::ETHERTYPE);
                for mut p in q.packets.drain(..) {
                    p.push_mac_header_bytes(&header);
                    out.push(0, p);
                }
                table.unsave(ip, n);
                false
            } else if now >= q.deadline_ms {
                dropped += n as u64;
                table.unsave(ip, n);
                false
            } else {
                deadline = deadline.min(q.deadline_ms);
                true
            }
        });
        self.pending_deadline = deadline;
        if dropped > 0 {
            shared.drops.add(self.worker, dropped);
        }
    }

    /// Packets to send: the first `done` are encapsulated already; the others need the
    /// table (or are dropped).
    #[cold]
    fn push_slow(&mut self, batch: &mut PacketBatch, done: usize, now: u64, out: &mut Outputs<'_>) {
        let shared = self.shared.clone();
        let mut table = shared.table.lock();
        let (mut dropped, mut queries) = (0u64, 0u64);
        for (i, mut p) in batch.drain().enumerate() {
            if i < done {
                out.push(0, p);
                continue;
            }
            let dst = P::next_hop(&p);
            if let Some(h) = self.known_header(dst, now) {
                p.push_mac_header_bytes(&h);
                out.push(0, p);
                continue;
            }
            if P::is_unspecified(dst) {
                dropped += 1;
                continue;
            }
            // Packets saved here for `dst` go first, even if it resolved meanwhile.
            if !self.pending.contains_key(&dst) {
                match table.lookup(dst, now) {
                    Lookup::Known {
                        eth,
                        recheck_ms,
                        poll,
                    } => {
                        if poll {
                            let q = shared.protocol.query(shared.eth, dst, Some(eth), &p);
                            out.push(self.query_port, q);
                            queries += 1;
                        }
                        let header = self.header_to(eth);
                        self.cache.insert(dst, Cached { header, recheck_ms });
                        p.push_mac_header_bytes(&header);
                        out.push(0, p);
                        continue;
                    }
                    Lookup::Unknown => {
                        self.cache.remove(&dst);
                    }
                }
            }
            let (saved, query) = match table.save(dst, now) {
                Save::Full { query } => (false, query),
                Save::Saved { query } => (true, query),
            };
            if query {
                out.push(self.query_port, shared.protocol.query(shared.eth, dst, None, &p));
                queries += 1;
            }
            if !saved {
                dropped += 1;
                continue;
            }
            let deadline_ms = now.saturating_add(PENDING_TIMEOUT_MS);
            let q = self.pending.entry(dst).or_insert_with(|| Pending {
                packets: Vec::new(),
                deadline_ms,
            });
            self.pending_deadline = self.pending_deadline.min(q.deadline_ms);
            q.packets.push(p);
        }
        if dropped > 0 {
            shared.drops.add(self.worker, dropped);
        }
        if queries > 0 {
            shared.queries.add(self.worker, queries);
        }
    }

    fn push_packets(&mut self, batch: &mut PacketBatch, out: &mut Outputs<'_>, now: u64) {
        let mut done = 0;
        for p in batch.iter_mut() {
            match self.known_header(P::next_hop(p), now) {
                Some(h) => p.push_mac_header_bytes(&h),
                None => break,
            }
            done += 1;
        }
        if done == batch.len() {
            out.push_batch(0, batch);
        } else {
            self.push_slow(batch, done, now, out);
        }
    }

    /// Responses: those for addresses in the table (being queried, or resolved and so
    /// refreshed) are recorded, as Click's documentation has it: a response nobody
    /// asked for must not make an entry (anyone on the link could fill the table, or
    /// claim an address before the router needs it); it is dropped and counted, as is
    /// everything else not recorded.
    fn push_responses(&mut self, batch: &mut PacketBatch, now: u64) {
        let shared = self.shared.clone();
        let mut table = None;
        let (mut recorded, mut dropped) = (0u64, 0u64);
        for p in batch.drain() {
            match shared.protocol.response(p.data()) {
                Some((ip, eth)) => {
                    let t = table.get_or_insert_with(|| shared.table.lock());
                    if !t.has_entry(ip) {
                        dropped += 1;
                        continue;
                    }
                    let Some(eth) = eth.or_else(|| t.usable(ip, now)) else {
                        // Nothing to record: the address is still being queried.
                        dropped += 1;
                        continue;
                    };
                    if t.learn(ip, eth, now) {
                        recorded += 1;
                    } else {
                        dropped += 1;
                    }
                }
                None => dropped += 1,
            }
        }
        drop(table);
        if recorded > 0 {
            shared.responses.add(self.worker, recorded);
        }
        if dropped > 0 {
            shared.drops.add(self.worker, dropped);
        }
    }
}

impl<P: Protocol> Element for Querier<P> {
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let now = self.shared.clock.now(cx);
        if port == 0 {
            // Saved packets whose address resolved leave before newer ones.
            self.sync(now, out);
            self.push_packets(batch, out, now);
        } else {
            self.push_responses(batch, now);
            self.sync(now, out);
        }
    }

    fn is_source(&self) -> bool {
        true
    }

    /// Saved packets wait for what other sources bring: a router whose sources are
    /// done ends, dropping them, as Click's does.
    fn keeps_router_running(&self) -> bool {
        false
    }

    /// Polled so saved packets leave when another worker records their address, or
    /// are dropped at their deadline, with no packet arriving here.
    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        if cx.stop_requested() {
            return TaskStatus::Done;
        }
        // Never `IdleUntil`: a push that saves packets after this call could not undo
        // it, and a busy worker would skip this call (and the packets' release or
        // deadline) for as long as other sources move packets.
        if !self.pending.is_empty() {
            let now = self.shared.clock.now(cx);
            self.sync(now, out);
        }
        TaskStatus::Idle
    }

    fn idle_wait(&mut self) -> IdleWait {
        if self.pending.is_empty() {
            IdleWait::Nothing
        } else {
            IdleWait::Poll
        }
    }
}
