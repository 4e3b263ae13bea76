//! `NeighborEncap`: Ethernet encapsulation addressed to the next hop's link-layer
//! address from the kernel's neighbour table (ARP for IPv4, Neighbour Discovery for
//! IPv6), so a router with several gateways on one link sends each packet to its own.
//!
//! brickroute's XDP program hands ARP and ND to the kernel, so the kernel resolves
//! neighbours on the router's interfaces and keeps their table; this element reads that
//! table (`io::rtnl::neigh`): a dump at configuration, then a thread that follows the
//! kernel's notifications and publishes each change as a new snapshot the workers pick
//! up at their next batch. A packet whose next hop has no usable entry is counted and
//! held until the address resolves (a few an address, `held.rs`), or sent to output 1
//! once the kernel has failed to resolve the next hop (for an ICMP host unreachable),
//! and the thread asks the kernel to resolve the address (`NTF_USE`), at most once a
//! second per address; it also asks the kernel to check its stale entries again every
//! 30 s, as the kernel does for traffic it sends itself.

mod held;

use crate::control::arg;
use crate::run::strerror;
use crate::services::ServiceThreads;
use graph::args::Args;
use graph::element::*;
use graph::error::ConfigError;
use graph::registry::Registry;
use graph::router::RouterSpec;
use io::rtnl::neigh::{self, NeighMessage, Neighbor};
use io::rtnl::{Family, RouteSocket};
use packet::{Packet, PacketBatch};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the thread waits for a notification before it looks at its stop flag and
/// at the addresses the workers want resolved.
const POLL: Duration = Duration::from_millis(20);

/// An address is asked for again at most this often while packets keep wanting it.
const ASK_AGAIN: Duration = Duration::from_secs(1);

/// How often the thread asks the kernel to check its `STALE` entries again: the
/// kernel does so when it sends to one itself, but the packets brickroute sends do not
/// pass through it, so without this an entry whose neighbour went away or changed its
/// address unannounced would stay in use.
const REVALIDATE: Duration = Duration::from_secs(30);

/// Addresses waiting to be asked for, at most (a flood towards many unresolved
/// addresses must not grow the list without bound; the rest are asked for when their
/// next packets come).
const MAX_WANTED: usize = 4096;

/// A multiplicative hash for the usable entries' addresses: that table is read for
/// every packet, and its keys are neighbours that answered the kernel, not addresses
/// senders choose. (The addresses packets ask for, which senders choose where a route
/// is a connected network's, go in maps with the standard library's keyed hash.)
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
}

type AddrMap<V> = HashMap<u128, V, BuildHasherDefault<AddrHasher>>;

/// One published view of the device's neighbours: the Ethernet header for each usable
/// one (destination, the device's address, the type), and the addresses the kernel
/// failed to resolve.
#[derive(Default)]
struct Snapshot {
    headers: AddrMap<[u8; 14]>,
    failed: HashSet<u128>,
}

/// The configuration's `NeighborEncap` elements, waiting for `run` to follow them.
#[derive(Default)]
pub struct Resolvers {
    pending: Mutex<Vec<Resolver>>,
}

impl Resolvers {
    pub fn new() -> Arc<Resolvers> {
        Arc::new(Resolvers::default())
    }
}

/// What an element's workers and its thread share.
struct Shared {
    declaration: String,
    dev: String,
    ifindex: u32,
    family: Family,
    ethertype: u16,
    snapshot: Mutex<Arc<Snapshot>>,
    /// Bumped after each new snapshot, so a worker takes the lock only when it changed.
    generation: AtomicU64,
    /// Addresses packets found no entry for, for the thread to ask the kernel about
    /// (hashed with the standard library's keyed hash: senders choose these addresses
    /// where the route is a connected network's).
    wanted: Mutex<HashSet<u128>>,
    unresolved: AtomicU64,
    /// Packets that found no entry and were dropped: no room to hold them, or their
    /// address unresolved after `held::WAIT` (or failed, without output 1).
    drops: AtomicU64,
    requests: AtomicU64,
    /// The thread's record: every entry of the device, usable or not, and its own
    /// Ethernet address (for the `table` and `src` handlers).
    entries: Mutex<(HashMap<u128, Neighbor>, [u8; 6])>,
}

impl Shared {
    /// Publishes a snapshot built from `entries` and the device's address `src`.
    fn publish(&self, entries: &HashMap<u128, Neighbor>, src: [u8; 6]) {
        let mut headers = AddrMap::default();
        let failed = entries
            .values()
            .filter(|n| n.state & neigh::NUD_FAILED != 0)
            .map(|n| n.addr)
            .collect();
        for n in entries.values().filter(|n| n.usable()) {
            let mut h = [0u8; 14];
            h[..6].copy_from_slice(&n.lladdr.unwrap_or_default());
            h[6..12].copy_from_slice(&src);
            h[12..].copy_from_slice(&self.ethertype.to_be_bytes());
            headers.insert(n.addr, h);
        }
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(Snapshot { headers, failed });
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn address(&self, a: u128) -> String {
        match self.family {
            Family::V4 => Ipv4Addr::from(a as u32).to_string(),
            Family::V6 => Ipv6Addr::from(a).to_string(),
        }
    }
}

/// An element's thread-to-be: its shared state and the notification socket opened
/// before the first dump (so no change falls between).
struct Resolver {
    shared: Arc<Shared>,
    socket: RouteSocket,
}

/// Starts a thread per element; dropping the returned threads stops them.
pub fn follow(resolvers: &Resolvers, router: &Arc<RouterSpec>) -> ServiceThreads {
    let items = std::mem::take(&mut *resolvers.pending.lock().unwrap_or_else(|e| e.into_inner()));
    ServiceThreads::spawn("neighbors", items, router, |r, _router, stop| r.run(&stop))
}

/// The kernel's entries for one device and family.
fn device_entries(family: Family, ifindex: u32) -> std::io::Result<HashMap<u128, Neighbor>> {
    Ok(neigh::dump_neighbors(family)?
        .into_iter()
        .filter(|n| n.ifindex == ifindex)
        .map(|n| (n.addr, n))
        .collect())
}

impl Resolver {
    fn run(self, stop: &AtomicBool) {
        let s = &self.shared;
        let mut buf = vec![0u8; 1 << 16];
        let mut asked: HashMap<u128, Instant> = HashMap::new();
        let mut resync = false;
        let mut revalidated = Instant::now();
        let mut last_warning = String::new();
        let mut warn = |e: String| {
            // Once per distinct problem, not at every poll.
            if e != last_warning {
                graph::warn!("{}: {}", s.declaration, e);
                last_warning = e;
            }
        };
        while !stop.load(Ordering::Relaxed) {
            if resync {
                self.socket.discard_queued(&mut buf);
                match device_entries(s.family, s.ifindex) {
                    Ok(entries) => {
                        let mut e = s.entries.lock().unwrap_or_else(|e| e.into_inner());
                        e.0 = entries;
                        if let Ok(mac) = neigh::link_address(&s.dev) {
                            e.1 = mac;
                        }
                        s.publish(&e.0, e.1);
                        resync = false;
                    }
                    Err(err) => warn(format!("neighbour dump: {}", strerror(&err))),
                }
            }
            if revalidated.elapsed() >= REVALIDATE {
                revalidated = Instant::now();
                let stale: Vec<u128> = (s.entries.lock().unwrap_or_else(|e| e.into_inner()).0)
                    .values()
                    .filter(|n| n.state == neigh::NUD_STALE)
                    .map(|n| n.addr)
                    .collect();
                s.wanted.lock().unwrap_or_else(|e| e.into_inner()).extend(stale);
            }
            self.ask(&mut asked, &mut warn);
            match self.socket.recv(&mut buf, POLL) {
                Ok(None) => {}
                Ok(Some(n)) => match neigh::parse(&buf[..n]) {
                    Ok(messages) => self.apply(messages, &mut warn),
                    Err(e) => {
                        warn(format!("neighbour notification: {}", std::io::Error::from(e)));
                        resync = true;
                    }
                },
                // Notifications were lost (ENOBUFS), or the socket failed: take the
                // whole table again.
                Err(e) => {
                    if e.raw_os_error() != Some(libc::ENOBUFS) {
                        warn(format!("neighbour notifications: {}", strerror(&e)));
                        std::thread::sleep(POLL);
                    }
                    resync = true;
                }
            }
        }
    }

    /// Applies one datagram's messages, and publishes the result if anything changed.
    /// An error the kernel returned (to a resolution request: the only requests made
    /// on this socket) goes to `warn`.
    fn apply(&self, messages: Vec<NeighMessage>, warn: &mut impl FnMut(String)) {
        let s = &self.shared;
        let mut e = s.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut changed = false;
        for m in messages {
            match m {
                NeighMessage::New(n) if n.family == s.family && n.ifindex == s.ifindex => {
                    changed |= e.0.insert(n.addr, n) != Some(n);
                }
                NeighMessage::Deleted(n) if n.family == s.family && n.ifindex == s.ifindex => {
                    changed |= e.0.remove(&n.addr).is_some();
                }
                NeighMessage::Link => {
                    // The device's own address may have changed.
                    if let Ok(mac) = neigh::link_address(&s.dev) {
                        changed |= e.1 != mac;
                        e.1 = mac;
                    }
                }
                // (A full neighbour table, say: the kernel's "neighbour table
                // overflow".)
                NeighMessage::Error(errno) => warn(format!(
                    "the kernel refused to resolve an address: {}",
                    strerror(&std::io::Error::from_raw_os_error(errno))
                )),
                _ => {}
            }
        }
        if changed {
            s.publish(&e.0, e.1);
        }
    }

    /// Asks the kernel to resolve the addresses packets wanted, each at most once per
    /// `ASK_AGAIN`.
    fn ask(&self, asked: &mut HashMap<u128, Instant>, warn: &mut impl FnMut(String)) {
        let s = &self.shared;
        let wanted = std::mem::take(&mut *s.wanted.lock().unwrap_or_else(|e| e.into_inner()));
        if wanted.is_empty() {
            return;
        }
        let now = Instant::now();
        asked.retain(|_, t| now.duration_since(*t) < ASK_AGAIN);
        for a in wanted {
            if asked.contains_key(&a) {
                continue;
            }
            asked.insert(a, now);
            match self.socket.resolve(s.family, s.ifindex, a) {
                Ok(()) => {
                    s.requests.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => warn(format!(
                    "asking the kernel to resolve {}: {}",
                    s.address(a),
                    strerror(&e)
                )),
            }
        }
    }
}

/// Registers `NeighborEncap`, collecting its elements into `resolvers`.
pub fn register(reg: &mut Registry, resolvers: &Arc<Resolvers>) {
    reg.add(Arc::new(NeighborEncapClass {
        resolvers: resolvers.clone(),
    }));
}

struct NeighborEncapClass {
    resolvers: Arc<Resolvers>,
}

impl ElementClass for NeighborEncapClass {
    fn name(&self) -> &'static str {
        "NeighborEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let dev: String = arg(args.required("DEVNAME"), cx)?;
        let ethertype = arg(args.positional::<u16>("ETHERTYPE"), cx)?.unwrap_or(0x0800);
        arg(args.finish(), cx)?;
        let family = match ethertype {
            0x0800 => Family::V4,
            0x86dd => Family::V6,
            t => {
                return Err(cx.error(format!(
                    "ETHERTYPE {:#06x}: neighbours are resolved for IPv4 (0x0800) or IPv6 (0x86DD) only",
                    t
                )))
            }
        };
        let fail = |what: &str, e: std::io::Error| cx.error(format!("{}: {}", what, strerror(&e)));
        let ifindex =
            crate::kernelroutes::ifindex(&dev).ok_or_else(|| cx.error(format!("no interface '{}'", dev)))?;
        let src = neigh::link_address(&dev).map_err(|e| fail(&format!("'{}'s Ethernet address", dev), e))?;
        // Subscribed before the dump, so that no change falls between the two.
        let socket = RouteSocket::subscribe_neighbors().map_err(|e| fail("route netlink", e))?;
        let entries = device_entries(family, ifindex).map_err(|e| fail("neighbour dump", e))?;
        let shared = Arc::new(Shared {
            declaration: format!("{} :: NeighborEncap", cx.name),
            dev,
            ifindex,
            family,
            ethertype,
            snapshot: Mutex::new(Arc::default()),
            generation: AtomicU64::new(0),
            wanted: Mutex::new(HashSet::new()),
            unresolved: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            entries: Mutex::new((entries, src)),
        });
        {
            let e = shared.entries.lock().unwrap_or_else(|e| e.into_inner());
            shared.publish(&e.0, e.1);
        }
        self.resolvers
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Resolver {
                shared: shared.clone(),
                socket,
            });
        Ok(Arc::new(NeighborEncapSpec {
            shared,
            noutputs: cx.noutputs,
        }))
    }
}

struct NeighborEncapSpec {
    shared: Arc<Shared>,
    noutputs: usize,
}

impl ElementSpec for NeighborEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        let s = &self.shared;
        Box::new(NeighborEncap {
            shared: s.clone(),
            generation: s.generation.load(Ordering::Acquire),
            snapshot: s.snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            v6: s.family == Family::V6,
            failed_port: if self.noutputs > 1 { 1 } else { DROP },
            misses: Vec::new(),
            held: held::Held::default(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        ["table", "src", "unresolved", "drops", "requests"]
            .into_iter()
            .map(HandlerInfo::read)
            .collect()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        match name {
            "table" => {
                let e = s.entries.lock().unwrap_or_else(|e| e.into_inner());
                let mut v: Vec<&Neighbor> = e.0.values().collect();
                v.sort_by_key(|n| n.addr);
                let mut out = String::new();
                for n in v {
                    let mac = n.lladdr.map_or("-".to_string(), |m| mac_text(&m));
                    let _ = writeln!(out, "{} {} {}", s.address(n.addr), mac, state_text(n.state));
                }
                Some(out)
            }
            "src" => Some(mac_text(&s.entries.lock().unwrap_or_else(|e| e.into_inner()).1)),
            "unresolved" => Some(s.unresolved.load(Ordering::Relaxed).to_string()),
            "drops" => Some(s.drops.load(Ordering::Relaxed).to_string()),
            "requests" => Some(s.requests.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{:02x}", b))
        .collect::<Vec<_>>()
        .join(":")
}

/// The state as `ip neigh` names it.
fn state_text(state: u16) -> &'static str {
    use io::rtnl::neigh::*;
    match state {
        NUD_INCOMPLETE => "INCOMPLETE",
        NUD_REACHABLE => "REACHABLE",
        NUD_STALE => "STALE",
        NUD_DELAY => "DELAY",
        NUD_PROBE => "PROBE",
        NUD_FAILED => "FAILED",
        NUD_NOARP => "NOARP",
        NUD_PERMANENT => "PERMANENT",
        _ => "NONE",
    }
}

struct NeighborEncap {
    shared: Arc<Shared>,
    /// This worker's snapshot, as of `generation`.
    snapshot: Arc<Snapshot>,
    generation: u64,
    v6: bool,
    /// Where a packet whose next hop the kernel failed to resolve goes: output 1 when
    /// there is one, else `DROP`. (One whose next hop is still being resolved, or not
    /// asked about yet, is held.)
    failed_port: u8,
    /// This batch's addresses without an entry.
    misses: Vec<u128>,
    /// This worker's packets waiting for their next hop.
    held: held::Held,
}

/// The next-hop address of `p`: its destination annotation.
#[inline]
fn next_hop(p: &Packet, v6: bool) -> u128 {
    if v6 {
        u128::from_be_bytes(p.anno().dst_ip6())
    } else {
        u128::from(u32::from_be_bytes(p.anno().dst_ip()))
    }
}

impl NeighborEncap {
    #[cold]
    #[inline(never)]
    fn refresh(&mut self, generation: u64) {
        self.generation = generation;
        self.snapshot = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
    }

    #[cold]
    #[inline(never)]
    fn want(&mut self) {
        let s = &self.shared;
        s.unresolved
            .fetch_add(self.misses.len() as u64, Ordering::Relaxed);
        let mut w = s.wanted.lock().unwrap_or_else(|e| e.into_inner());
        for &a in &self.misses {
            if w.len() < MAX_WANTED {
                w.insert(a);
            }
        }
        self.misses.clear();
    }

    /// Takes the newest snapshot if it changed; then, if packets are held and the
    /// snapshot is new to them or one of them waited too long, sends on (or drops)
    /// those it settles. (One snapshot for both, so that no packet is held behind an
    /// address the batch's snapshot has.)
    #[inline]
    fn sync(&mut self, out: &mut Outputs<'_>) {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.refresh(g);
        }
        if !self.held.is_empty() {
            self.release(out);
        }
    }

    /// Drops (and counts) what is still held: the router stops.
    fn drop_held(&mut self) {
        let n = std::mem::take(&mut self.held).len() as u64;
        if n > 0 {
            self.shared.drops.fetch_add(n, Ordering::Relaxed);
        }
    }

    #[cold]
    #[inline(never)]
    fn release(&mut self, out: &mut Outputs<'_>) {
        let dropped = self.held.release(
            &self.snapshot,
            self.generation,
            self.failed_port,
            Instant::now(),
            out,
        );
        if dropped > 0 {
            self.shared.drops.fetch_add(dropped, Ordering::Relaxed);
        }
    }

    /// The packets of `batch` from `done` on (the first `done` have their header): each
    /// with an entry and none held before it is sent; the others are held, or sent to
    /// the failed port when the kernel failed to resolve their address.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, batch: &mut PacketBatch, done: usize, out: &mut Outputs<'_>) {
        let now = Instant::now();
        let mut dropped = 0u64;
        for (i, mut p) in batch.drain().enumerate() {
            if i < done {
                out.push(0, p);
                continue;
            }
            let a = next_hop(&p, self.v6);
            if !self.held.holds(a) {
                if let Some(h) = self.snapshot.headers.get(&a) {
                    p.push_mac_header_bytes(h);
                    out.push(0, p);
                    continue;
                }
            }
            self.misses.push(a);
            if self.snapshot.failed.contains(&a) {
                if self.failed_port == DROP {
                    dropped += 1;
                } else {
                    out.push(usize::from(self.failed_port), p);
                }
            } else if self.held.hold(a, p, now).is_err() {
                dropped += 1;
            }
        }
        if dropped > 0 {
            self.shared.drops.fetch_add(dropped, Ordering::Relaxed);
        }
        if !self.misses.is_empty() {
            self.want();
        }
    }
}

impl Element for NeighborEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        self.sync(out);
        // Every packet with an entry, and none held to go first: the whole batch.
        let mut done = 0;
        if self.held.is_empty() {
            let (snapshot, v6) = (&*self.snapshot, self.v6);
            for p in batch.iter_mut() {
                match snapshot.headers.get(&next_hop(p, v6)) {
                    Some(h) => p.push_mac_header_bytes(h),
                    None => break,
                }
                done += 1;
            }
            if done == batch.len() {
                out.push_batch(0, batch);
                return;
            }
        }
        self.push_slow(batch, done, out);
    }

    /// Polled while packets are held, so they leave when their address resolves even
    /// if no other packet comes.
    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        if cx.stop_requested() {
            self.drop_held();
            return TaskStatus::Done;
        }
        self.sync(out);
        TaskStatus::Idle
    }

    fn is_source(&self) -> bool {
        true
    }

    /// It only serves the packets other sources bring.
    fn keeps_router_running(&self) -> bool {
        false
    }

    fn idle_wait(&mut self) -> IdleWait {
        if self.held.is_empty() {
            IdleWait::Nothing
        } else {
            IdleWait::Poll
        }
    }
}

/// A worker that finishes without a stop request (its sources done) drops what its
/// element still holds with it: counted too.
impl Drop for NeighborEncap {
    fn drop(&mut self) {
        self.drop_held();
    }
}
