//! `ARPQuerier(IP, ETH [, keywords])`: encapsulates IP packets in Ethernet headers
//! addressed to their next hop, resolved with ARP, as Click's element of the same name.
//!
//! The table is the spec's ([`super::table`]), shared by all workers. Each instance
//! keeps the Ethernet header of every next hop it used in a cache of its own, valid
//! until the entry's next poll or expiry, and compares the table's generation once per
//! batch: a batch whose next hops are all cached takes no lock. Packets waiting for an
//! address stay in the instance that saved them; the instance is polled (`run`) while
//! it holds any, so it sends them when another worker's instance records the reply,
//! and drops them when they have waited `PENDING_TIMEOUT_MS`.

use super::clock::Clock;
use super::frame::{self, Arp, BROADCAST_ETH, ETHER_LEN, OP_REPLY, OP_REQUEST};
use super::table::{Limits, Lookup, Save, Table, PENDING_TIMEOUT_MS};
use crate::args::{split_words, Args, EtherAddr, FromArg, Interval, Ipv4Prefix};
use crate::element::*;
use crate::error::ConfigError;
use crate::stats::WorkerCounters;
use packet::anno::VLAN_TCI_ANNO_OFFSET;
use packet::{Packet, PacketBatch};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const DEFAULT_CAPACITY: usize = 2048;
const DEFAULT_TIMEOUT: Interval = Interval(300_000_000_000);
const DEFAULT_POLL_TIMEOUT: Interval = Interval(60_000_000_000);

#[derive(Default)]
pub(crate) struct ARPQuerierClass {
    /// The milliseconds clock unit tests set; `None`: the TSC.
    manual_clock: Option<Arc<AtomicU64>>,
}

impl ARPQuerierClass {
    /// The class with a clock that reads `ms` (milliseconds), for tests.
    #[cfg(test)]
    pub(crate) fn with_clock(ms: Arc<AtomicU64>) -> ARPQuerierClass {
        ARPQuerierClass {
            manual_clock: Some(ms),
        }
    }
}

/// Milliseconds, at least 1 for an interval that is not zero; 0 stays 0 ("never").
fn millis(i: Interval) -> u64 {
    i.0.div_ceil(1_000_000)
}

impl ElementClass for ARPQuerierClass {
    fn name(&self) -> &'static str {
        "ARPQuerier"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("2/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let err = |e: String| cx.error(e);
        if args.keyword::<String>("TABLE").map_err(err)?.is_some() {
            return Err(cx.error(
                "TABLE is not supported: brickroute has no ARPTable element; each ARPQuerier keeps its own table",
            ));
        }
        let ip_arg = args.required::<String>("IP").map_err(err)?;
        let eth_arg = args.positional::<String>("ETH").map_err(err)?;
        let prefix = Ipv4Prefix::from_arg(&ip_arg);
        let (prefix, eth) = match (prefix, eth_arg) {
            (None, None) => {
                return Err(cx.error(format!(
                    "ARPQuerier(NAME) needs AddressInfo to name the addresses, which brickroute does not have; give them as ARPQuerier(IP, ETH), not '{}'",
                    ip_arg
                )))
            }
            (None, Some(_)) => return Err(cx.error("IP expects IP address")),
            (Some(_), None) => return Err(cx.error("missing mandatory ETH argument")),
            (Some(p), Some(e)) => (
                p,
                EtherAddr::from_arg(&e).ok_or_else(|| cx.error("ETH expects Ethernet address"))?,
            ),
        };
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
        let broadcast = args.keyword::<Ipv4Addr>("BROADCAST").map_err(err)?;
        let broadcast_poll = args
            .keyword::<bool>("BROADCAST_POLL")
            .map_err(err)?
            .unwrap_or(false);
        args.finish().map_err(err)?;

        let mask = u32::from(prefix.mask);
        // The prefix's broadcast address, for a prefix that has one (not /31 or /32).
        let broadcast = match broadcast {
            Some(b) => u32::from(b),
            None if mask.count_zeros() >= 2 => u32::from(prefix.addr) | !mask,
            None => u32::MAX,
        };
        let clock = match &self.manual_clock {
            Some(ms) => Clock::Manual(ms.clone()),
            None => Clock::tsc(),
        };
        Ok(Arc::new(ARPQuerierSpec {
            shared: Arc::new(Shared {
                table: Table::new(Limits {
                    capacity,
                    entry_capacity,
                    entry_packet_capacity,
                    timeout_ms: millis(timeout),
                    poll_timeout_ms: millis(poll_timeout),
                }),
                clock,
                eth: eth.0,
                ip: AtomicU32::new(u32::from(prefix.addr)),
                broadcast,
                broadcast_poll,
                queries: WorkerCounters::new(cx.workers),
                responses: WorkerCounters::new(cx.workers),
                drops: WorkerCounters::new(cx.workers),
            }),
            query_port: usize::from(cx.noutputs > 1),
        }))
    }
}

struct Shared {
    table: Table,
    clock: Clock,
    /// This host's Ethernet address: the source of everything sent.
    eth: [u8; 6],
    /// This host's IP address: the sender of queries (the `ipaddr` handler writes it).
    ip: AtomicU32,
    /// Sent to the Ethernet broadcast address, as 255.255.255.255 is.
    broadcast: u32,
    /// Polls go to the broadcast address rather than the known one.
    broadcast_poll: bool,
    queries: WorkerCounters,
    responses: WorkerCounters,
    drops: WorkerCounters,
}

impl Shared {
    /// An ARP query for `target` to `to`, carrying `trigger`'s VLAN annotation.
    fn query(&self, to: [u8; 6], target: u32, trigger: &Packet) -> Packet {
        let arp = Arp {
            op: OP_REQUEST,
            sha: self.eth,
            spa: self.ip.load(Ordering::Relaxed).to_be_bytes(),
            tha: [0; 6],
            tpa: target.to_be_bytes(),
        };
        let mut q = frame::build(to, self.eth, &arp);
        let at = VLAN_TCI_ANNO_OFFSET;
        let tci: [u8; 2] = trigger.anno().user[at..at + 2].try_into().expect("2 bytes");
        q.set_user_anno(at, &tci);
        q
    }

    /// Whether a reply's sender may be recorded: a unicast Ethernet address for a
    /// unicast IP address.
    fn recordable(&self, reply: &Arp) -> bool {
        let ip = u32::from_be_bytes(reply.spa);
        !frame::is_group(reply.sha) && ip != 0 && ip != u32::MAX && ip != self.broadcast && !is_multicast(ip)
    }
}

fn is_multicast(ip: u32) -> bool {
    ip >> 28 == 0xe
}

struct ARPQuerierSpec {
    shared: Arc<Shared>,
    /// Output queries leave on: 1 when there are two outputs.
    query_port: usize,
}

impl ARPQuerierSpec {
    fn insert(&self, value: &str) -> Result<(), String> {
        let words = split_words(value);
        let [ip, eth] = &words[..] else {
            return Err("expected 'IP ETH'".to_string());
        };
        let ip = Ipv4Addr::from_arg(ip).ok_or_else(|| format!("'{}' is not an IP address", ip))?;
        let eth = EtherAddr::from_arg(eth).ok_or_else(|| format!("'{}' is not an Ethernet address", eth))?;
        let now = self.shared.clock.now_outside();
        if self.shared.table.lock().learn(u32::from(ip), eth.0, now) {
            Ok(())
        } else {
            Err("ARP table full: every entry has packets waiting".to_string())
        }
    }

    fn delete(&self, value: &str) -> Result<(), String> {
        let ip =
            Ipv4Addr::from_arg(value).ok_or_else(|| format!("'{}' is not an IP address", value.trim()))?;
        if self.shared.table.lock().delete(u32::from(ip)) {
            Ok(())
        } else {
            Err(format!("no entry for {}", ip))
        }
    }
}

impl ElementSpec for ARPQuerierSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let s = &self.shared;
        Box::new(ARPQuerier {
            shared: s.clone(),
            worker: w.index,
            query_port: self.query_port,
            // Not the table's: the first batch starts from an empty cache either way.
            generation: u64::MAX,
            cache: AddrMap::default(),
            pending: HashMap::new(),
            pending_deadline: u64::MAX,
            broadcast_header: frame::ip_header(BROADCAST_ETH, s.eth),
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
            "broadcast",
        ]
        .into_iter()
        .map(HandlerInfo::read)
        .collect();
        h.push(HandlerInfo::read_write("ipaddr"));
        h.extend(["insert", "delete", "clear"].map(HandlerInfo::write));
        h
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let now = || s.clock.now_outside();
        Some(match name {
            "table" => s.table.lock().text(now()),
            "stats" => format!(
                "{} packets killed\n{} ARP queries sent\n",
                s.drops.sum(),
                s.queries.sum()
            ),
            "queries" => s.queries.sum().to_string(),
            "responses" => s.responses.sum().to_string(),
            "drops" => s.drops.sum().to_string(),
            "count" => s.table.lock().len(now()).to_string(),
            "length" => s.table.lock().saved().to_string(),
            "broadcast" => Ipv4Addr::from(s.broadcast).to_string(),
            "ipaddr" => Ipv4Addr::from(s.ip.load(Ordering::Relaxed)).to_string(),
            _ => return None,
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
            "ipaddr" => match Ipv4Addr::from_arg(value) {
                Some(ip) => {
                    self.shared.ip.store(u32::from(ip), Ordering::Relaxed);
                    Ok(())
                }
                None => Err("IP expects IP address".to_string()),
            },
            _ => return None,
        })
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
}

type AddrMap<V> = HashMap<u32, V, BuildHasherDefault<AddrHasher>>;

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

struct ARPQuerier {
    shared: Arc<Shared>,
    worker: usize,
    query_port: usize,
    /// The table generation `cache` and `pending` were last brought up to.
    generation: u64,
    cache: AddrMap<Cached>,
    pending: HashMap<u32, Pending>,
    /// The earliest `deadline_ms` in `pending` (`u64::MAX` if none).
    pending_deadline: u64,
    broadcast_header: [u8; ETHER_LEN],
}

#[inline]
fn next_hop(p: &Packet) -> u32 {
    u32::from_be_bytes(p.anno().dst_ip())
}

impl ARPQuerier {
    /// The header for a packet to `dst` without asking the table: broadcast and
    /// multicast addresses, and next hops in the cache.
    #[inline]
    fn known_header(&self, dst: u32, now: u64) -> Option<[u8; ETHER_LEN]> {
        if dst == u32::MAX || dst == self.shared.broadcast {
            return Some(self.broadcast_header);
        }
        if is_multicast(dst) {
            // RFC 1112: 01-00-5E and the address's low 23 bits.
            let [_, b, c, d] = dst.to_be_bytes();
            return Some(frame::ip_header(
                [0x01, 0x00, 0x5e, b & 0x7f, c, d],
                self.shared.eth,
            ));
        }
        match self.cache.get(&dst) {
            Some(c) if now < c.recheck_ms => Some(c.header),
            _ => None,
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
                let header = frame::ip_header(eth, shared.eth);
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

    /// IP packets: the first `done` are encapsulated already; the others need the
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
            let dst = next_hop(&p);
            if let Some(h) = self.known_header(dst, now) {
                p.push_mac_header_bytes(&h);
                out.push(0, p);
                continue;
            }
            if dst == 0 {
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
                            let to = if shared.broadcast_poll { BROADCAST_ETH } else { eth };
                            out.push(self.query_port, shared.query(to, dst, &p));
                            queries += 1;
                        }
                        let header = frame::ip_header(eth, shared.eth);
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
                out.push(self.query_port, shared.query(BROADCAST_ETH, dst, &p));
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

    fn push_ip(&mut self, batch: &mut PacketBatch, out: &mut Outputs<'_>, now: u64) {
        let mut done = 0;
        for p in batch.iter_mut() {
            match self.known_header(next_hop(p), now) {
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

    /// ARP frames: replies for addresses in the table (being queried, or resolved
    /// and so refreshed) are recorded, others ignored, as Click's documentation has
    /// it: a reply nobody asked for must not make an entry (anyone on the link could
    /// fill the table, or claim an address before the router needs it); everything
    /// else is dropped.
    fn push_arp(&mut self, batch: &mut PacketBatch, now: u64) {
        let shared = self.shared.clone();
        let mut table = None;
        let (mut recorded, mut dropped) = (0u64, 0u64);
        for p in batch.drain() {
            match frame::parse(p.data()) {
                Some(a) if a.op == OP_REPLY && shared.recordable(&a) => {
                    let t = table.get_or_insert_with(|| shared.table.lock());
                    let ip = u32::from_be_bytes(a.spa);
                    if !t.has_entry(ip) {
                        dropped += 1;
                        continue;
                    }
                    if t.learn(ip, a.sha, now) {
                        recorded += 1;
                    } else {
                        dropped += 1;
                    }
                }
                _ => dropped += 1,
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

impl Element for ARPQuerier {
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let now = self.shared.clock.now(cx);
        if port == 0 {
            // Saved packets whose address resolved leave before newer ones.
            self.sync(now, out);
            self.push_ip(batch, out, now);
        } else {
            self.push_arp(batch, now);
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
