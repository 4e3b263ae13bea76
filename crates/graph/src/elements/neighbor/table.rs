//! A querier's address-to-Ethernet table (ARPQuerier's, IP6NDSolicitor's), shared by
//! every worker's instance, generic over the protocol address.
//!
//! Workers read it through their own caches of resolved entries and take its lock
//! only for what their caches cannot answer (an address not resolved, an entry due
//! for a poll or about to expire), once per batch. Saved packets stay with the
//! instance that saved them; the table counts them per address and in total, for the
//! capacities. `generation` moves whenever an address becomes usable, changes its
//! Ethernet address or is removed: a worker seeing it move drops its cache and
//! releases the packets it saved for addresses now resolved.

use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Write as _};
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A protocol address the table resolves: an IPv4 address as a `u32`, an IPv6 address
/// as a `u128` (big-endian, so sorting orders them as addresses).
pub(crate) trait NeighborAddr: Copy + Eq + Hash + Ord + Send + Sync + 'static {
    /// Writes the address as people read it (`10.0.0.2`, `2001:db8::2`).
    fn write_text(self, s: &mut String) -> fmt::Result;
}

impl NeighborAddr for u32 {
    fn write_text(self, s: &mut String) -> fmt::Result {
        write!(s, "{}", Ipv4Addr::from(self))
    }
}

impl NeighborAddr for u128 {
    fn write_text(self, s: &mut String) -> fmt::Result {
        write!(s, "{}", Ipv6Addr::from(self))
    }
}

/// Queries (and polls) for one address leave at most this often router-wide: Click's
/// "at most 10 queries a second for any IP address". A packet for an unresolved
/// address sends a query only if none left in the last 100 ms, so a burst of packets
/// sends one query, and a lost query is retried by the next packet 100 ms later.
pub(crate) const QUERY_INTERVAL_MS: u64 = 100;

/// After this many queries (or polls) without an answer, as Click's ARP table...
const PATIENCE: u8 = 10;
/// ... one leaves only every 2 s, until an answer comes.
const SLOW_QUERY_INTERVAL_MS: u64 = 2000;

/// Saved packets whose address has not resolved this long after the first of them
/// was saved are dropped (Linux gives up on an address after about 3 s of probes).
pub(crate) const PENDING_TIMEOUT_MS: u64 = 3000;

/// Expired and abandoned entries are removed at most this often, when the lock is
/// taken anyway.
const SWEEP_INTERVAL_MS: u64 = 1000;

/// The configured bounds; 0 means none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Saved packets in all, router-wide (CAPACITY).
    pub capacity: usize,
    /// Entries, resolved or not (ENTRY_CAPACITY).
    pub entry_capacity: usize,
    /// Saved packets per address (ENTRY_PACKET_CAPACITY).
    pub entry_packet_capacity: usize,
    /// An entry expires this long after its last response (TIMEOUT).
    pub timeout_ms: u64,
    /// Packets to an entry this old send polls (POLL_TIMEOUT).
    pub poll_timeout_ms: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    /// The address answered, or `None` while it is being queried.
    eth: Option<[u8; 6]>,
    /// When the last response came (resolved entries), or when querying began.
    since_ms: u64,
    last_query_ms: Option<u64>,
    /// Queries and polls sent since the last answer (at most 255).
    unanswered: u8,
    /// Packets saved for this address by all workers.
    saved: usize,
}

impl Entry {
    /// An entry being queried from `now`.
    fn new(now: u64) -> Entry {
        Entry {
            eth: None,
            since_ms: now,
            last_query_ms: None,
            unanswered: 0,
            saved: 0,
        }
    }

    /// When the next query or poll may leave.
    fn next_query_ms(&self) -> u64 {
        let interval = if self.unanswered >= PATIENCE {
            SLOW_QUERY_INTERVAL_MS
        } else {
            QUERY_INTERVAL_MS
        };
        self.last_query_ms.map_or(0, |q| q.saturating_add(interval))
    }

    /// A query or poll leaves at `now`.
    fn queried(&mut self, now: u64) {
        self.last_query_ms = Some(now);
        self.unanswered = self.unanswered.saturating_add(1);
    }
}

struct Inner<A> {
    entries: HashMap<A, Entry>,
    saved_total: usize,
    next_sweep_ms: u64,
    /// With ENTRY_CAPACITY only: each entry's address with its `since_ms`, in the order
    /// they were set, oldest first, so eviction takes the oldest entry without a scan
    /// (a new address per packet at the capacity must not cost a walk of the table
    /// under the lock every worker shares). A record whose entry is gone or has been
    /// set again since is stale and skipped when it comes up; the queue is rebuilt
    /// when stale records outnumber the entries.
    age: VecDeque<(A, u64)>,
}

pub(crate) struct Table<A> {
    limits: Limits,
    inner: Mutex<Inner<A>>,
    generation: AtomicU64,
}

/// What the table says about an address a packet wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Usable: send to `eth`. The caller may use this answer without asking again
    /// until `recheck_ms`. `poll`: send a poll now (to `eth`, or broadcast).
    Known {
        eth: [u8; 6],
        recheck_ms: u64,
        poll: bool,
    },
    Unknown,
}

/// What became of a packet for an unresolved address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Save {
    /// Keep it; `query`: send a query for the address now.
    Saved { query: bool },
    /// A capacity is reached: drop it; `query`: send a query for the address now
    /// all the same.
    Full { query: bool },
}

impl<A: NeighborAddr> Table<A> {
    pub(crate) fn new(limits: Limits) -> Table<A> {
        Table {
            limits,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                saved_total: 0,
                next_sweep_ms: 0,
                age: VecDeque::new(),
            }),
            generation: AtomicU64::new(0),
        }
    }

    /// The generation: read once per batch by every worker.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Takes `old`'s resolved entries (a replaced configuration's, on `hotconfig`)
    /// for addresses this table has none for: an entry set here since, by a handler,
    /// is newer. Under ENTRY_CAPACITY the most recently answered go first. Entries
    /// still being queried stay behind with the packets the old workers saved for
    /// them. Returns how many were taken.
    pub(crate) fn take_from(&self, old: &Table<A>) -> usize {
        let mut resolved: Vec<(A, Entry)> = {
            let o = old.inner.lock().unwrap_or_else(|e| e.into_inner());
            o.entries
                .iter()
                .filter(|(_, e)| e.eth.is_some())
                .map(|(a, e)| (*a, Entry { saved: 0, ..*e }))
                .collect()
        };
        resolved.sort_unstable_by(|(a, x), (b, y)| y.since_ms.cmp(&x.since_ms).then(a.cmp(b)));
        let mut t = self.lock();
        let cap = t.limits.entry_capacity;
        let mut taken = 0;
        for (ip, entry) in resolved {
            if cap != 0 && t.inner.entries.len() >= cap {
                break;
            }
            if let std::collections::hash_map::Entry::Vacant(v) = t.inner.entries.entry(ip) {
                v.insert(entry);
                taken += 1;
            }
        }
        if taken > 0 {
            if cap != 0 {
                t.rebuild_age();
            }
            t.bump();
        }
        taken
    }

    pub(crate) fn lock(&self) -> Locked<'_, A> {
        Locked {
            limits: &self.limits,
            generation: &self.generation,
            inner: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// The table, locked.
pub(crate) struct Locked<'a, A> {
    limits: &'a Limits,
    generation: &'a AtomicU64,
    inner: MutexGuard<'a, Inner<A>>,
}

impl<A: NeighborAddr> Locked<'_, A> {
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn expires(&self, e: &Entry) -> u64 {
        match self.limits.timeout_ms {
            0 => u64::MAX,
            t => e.since_ms.saturating_add(t),
        }
    }

    /// `e`'s Ethernet address if it is resolved and not expired at `now`.
    fn usable_entry(&self, e: &Entry, now: u64) -> Option<[u8; 6]> {
        e.eth.filter(|_| now < self.expires(e))
    }

    /// The Ethernet address for `ip`, if usable at `now`.
    pub(crate) fn usable(&self, ip: A, now: u64) -> Option<[u8; 6]> {
        self.inner
            .entries
            .get(&ip)
            .and_then(|e| self.usable_entry(e, now))
    }

    /// Looks `ip` up for a packet to it at `now`; a poll it asks for is counted as
    /// sent.
    pub(crate) fn lookup(&mut self, ip: A, now: u64) -> Lookup {
        self.sweep_if_due(now);
        let limits = *self.limits;
        let Some(e) = self.inner.entries.get(&ip) else {
            return Lookup::Unknown;
        };
        let Some(eth) = self.usable_entry(e, now) else {
            return Lookup::Unknown;
        };
        let expires = self.expires(e);
        let poll_at = match limits.poll_timeout_ms {
            0 => u64::MAX,
            t => e.since_ms.saturating_add(t),
        };
        if now < poll_at {
            return Lookup::Known {
                eth,
                recheck_ms: poll_at.min(expires),
                poll: false,
            };
        }
        let mut next_query = e.next_query_ms();
        let poll = now >= next_query;
        if poll {
            let e = self.inner.entries.get_mut(&ip).expect("looked up");
            e.queried(now);
            next_query = e.next_query_ms();
        }
        Lookup::Known {
            eth,
            recheck_ms: next_query.min(expires),
            poll,
        }
    }

    /// Saves a packet for `ip` at `now`, if the capacities allow. The address is
    /// usually not usable; when it is (it resolved while this worker still holds
    /// older packets for it, which must leave first), no query is asked for. A packet
    /// beyond a capacity is not saved, but its address still gets an entry and a
    /// query when one is due: a host that never answers, filling CAPACITY, must not
    /// keep every other next hop from being resolved.
    pub(crate) fn save(&mut self, ip: A, now: u64) -> Save {
        let limits = *self.limits;
        if !self.inner.entries.contains_key(&ip) && !self.make_room(now) {
            return Save::Full { query: false };
        }
        let usable = self.usable(ip, now).is_some();
        let saved_total = self.inner.saved_total;
        let mut aged = !self.inner.entries.contains_key(&ip);
        let e = self.inner.entries.entry(ip).or_insert_with(|| Entry::new(now));
        if e.eth.is_some() && !usable {
            // Resolved, but too long ago: query it again, from now.
            e.eth = None;
            e.since_ms = now;
            aged = true;
        }
        let query = !usable && now >= e.next_query_ms();
        if query {
            e.queried(now);
        }
        let full = (limits.capacity != 0 && saved_total >= limits.capacity)
            || (limits.entry_packet_capacity != 0 && e.saved >= limits.entry_packet_capacity);
        if !full {
            e.saved += 1;
            self.inner.saved_total += 1;
        }
        if aged {
            self.note_age(ip, now);
        }
        if full {
            Save::Full { query }
        } else {
            Save::Saved { query }
        }
    }

    /// `n` packets saved for `ip` left (sent or dropped).
    pub(crate) fn unsave(&mut self, ip: A, n: usize) {
        if let Some(e) = self.inner.entries.get_mut(&ip) {
            e.saved = e.saved.saturating_sub(n);
        }
        self.inner.saved_total = self.inner.saved_total.saturating_sub(n);
    }

    /// Whether `ip` has an entry: resolved, or being queried.
    pub(crate) fn has_entry(&self, ip: A) -> bool {
        self.inner.entries.contains_key(&ip)
    }

    /// Records a response: `ip` is at `eth`, as of `now`. False if the table is full
    /// of entries holding packets, so it could not be recorded.
    pub(crate) fn learn(&mut self, ip: A, eth: [u8; 6], now: u64) -> bool {
        self.sweep_if_due(now);
        if !self.inner.entries.contains_key(&ip) && !self.make_room(now) {
            return false;
        }
        let before = self.usable(ip, now);
        let e = self.inner.entries.entry(ip).or_insert_with(|| Entry::new(now));
        e.eth = Some(eth);
        e.since_ms = now;
        // As Click's: an answer allows a poll at once, and the queries' patience
        // starts again.
        e.last_query_ms = None;
        e.unanswered = 0;
        self.note_age(ip, now);
        // A refresh of the same address changes nothing workers hold: their cached
        // entries come back for the new expiry when the old one passes.
        if before != Some(eth) {
            self.bump();
        }
        true
    }

    /// Forgets what `ip` resolved to. False if there was no such entry.
    pub(crate) fn delete(&mut self, ip: A) -> bool {
        let Some(e) = self.inner.entries.get_mut(&ip) else {
            return false;
        };
        if e.saved > 0 {
            // Packets wait for it: it goes back to being queried.
            e.eth = None;
        } else {
            self.inner.entries.remove(&ip);
        }
        self.bump();
        true
    }

    pub(crate) fn clear(&mut self) {
        self.inner.entries.retain(|_, e| {
            e.eth = None;
            e.saved > 0
        });
        self.bump();
    }

    /// Entries: all of them, resolved or being queried.
    pub(crate) fn len(&mut self, now: u64) -> usize {
        self.sweep(now);
        self.inner.entries.len()
    }

    pub(crate) fn saved(&self) -> usize {
        self.inner.saved_total
    }

    /// One line per entry, by address, in ARPTable's four columns: the address, 1
    /// for a usable entry (0 for one being queried), the Ethernet address (colon form;
    /// zeros until answered), and the seconds since the last response (since querying
    /// began), printed as Click prints a timestamp.
    pub(crate) fn text(&mut self, now: u64) -> String {
        self.sweep(now);
        let mut ips: Vec<A> = self.inner.entries.keys().copied().collect();
        ips.sort_unstable();
        let mut s = String::new();
        for ip in ips {
            let e = &self.inner.entries[&ip];
            let usable = self.usable_entry(e, now);
            let age = now.saturating_sub(e.since_ms);
            let [a, b, c, d, f, g] = usable.unwrap_or([0; 6]);
            let _ = ip.write_text(&mut s);
            let _ = writeln!(
                s,
                " {} {:02X}:{:02X}:{:02X}:{:02X}:{:02X}:{:02X} {}.{:06}",
                u8::from(usable.is_some()),
                a,
                b,
                c,
                d,
                f,
                g,
                age / 1000,
                age % 1000 * 1000
            );
        }
        s
    }

    fn sweep_if_due(&mut self, now: u64) {
        if now >= self.inner.next_sweep_ms {
            self.sweep(now);
        }
    }

    /// Removes entries no packet waits for that expired, and those queried in vain
    /// for longer than saved packets wait.
    fn sweep(&mut self, now: u64) {
        self.inner.next_sweep_ms = now.saturating_add(SWEEP_INTERVAL_MS);
        let timeout = self.limits.timeout_ms;
        self.inner.entries.retain(|_, e| {
            if e.saved > 0 {
                return true;
            }
            match e.eth {
                Some(_) => timeout == 0 || now < e.since_ms.saturating_add(timeout),
                None => {
                    let last = e.last_query_ms.unwrap_or(e.since_ms).max(e.since_ms);
                    now < last.saturating_add(PENDING_TIMEOUT_MS)
                }
            }
        });
    }

    /// Notes that `ip`'s `since_ms` was set to `now` (with ENTRY_CAPACITY only).
    fn note_age(&mut self, ip: A, now: u64) {
        if self.limits.entry_capacity == 0 {
            return;
        }
        self.inner.age.push_back((ip, now));
        if self.inner.age.len() > 2 * self.inner.entries.len() + 1024 {
            self.rebuild_age();
        }
    }

    /// The age queue from the entries, oldest first, without stale records.
    fn rebuild_age(&mut self) {
        let inner = &mut self.inner;
        let mut live: Vec<(u64, A)> = inner.entries.iter().map(|(a, e)| (e.since_ms, *a)).collect();
        live.sort_unstable();
        inner.age = live.into_iter().map(|(t, a)| (a, t)).collect();
    }

    /// Makes room for one more entry under ENTRY_CAPACITY: sweeps when a sweep is due,
    /// then evicts the entry no packet waits for that was answered (or queried) longest
    /// ago, taken from the age queue. False if every entry holds packets.
    fn make_room(&mut self, now: u64) -> bool {
        let cap = self.limits.entry_capacity;
        if cap == 0 || self.inner.entries.len() < cap {
            return true;
        }
        self.sweep_if_due(now);
        if self.inner.entries.len() < cap {
            return true;
        }
        // Entries holding packets go to the back; at most one pass over the queue.
        let mut budget = self.inner.age.len();
        while budget > 0 {
            budget -= 1;
            let Some((ip, stamp)) = self.inner.age.pop_front() else {
                break;
            };
            let Some(e) = self.inner.entries.get(&ip) else {
                continue;
            };
            if e.since_ms != stamp {
                continue;
            }
            if e.saved > 0 {
                self.inner.age.push_back((ip, stamp));
                continue;
            }
            let resolved = e.eth.is_some();
            self.inner.entries.remove(&ip);
            if resolved {
                self.bump();
            }
            return true;
        }
        false
    }
}
