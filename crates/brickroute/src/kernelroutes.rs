//! `KernelRoutes`: the kernel's IPv4 routing table, kept in a route-lookup element of
//! the running router, so that a routing daemon that programs the kernel (BIRD, FRR,
//! `ip route`) drives brickroute unchanged.
//!
//! At configuration it dumps the table and installs its routes; then a thread follows
//! the kernel's notifications (`io::rtnl`) and writes each change to the lookup
//! element's `ctrl` handler, a datagram's changes at once. Linux moves routes without a
//! notification when a link or an address changes, and a full socket buffer loses
//! notifications (ENOBUFS): both make it dump the table again and write the difference.

use crate::control::{arg, NoPorts};
use crate::run::strerror;
use crate::services::ServiceThreads;
use graph::args::{split_words, Args};
use graph::element::*;
use graph::elements::multipath::{MAX_MEMBERS, MAX_WEIGHT};
use graph::error::ConfigError;
use graph::registry::Registry;
use graph::router::RouterSpec;
use io::rtnl::{self, Family, Message, NextHop, Place, Route, RouteSocket, RTN_UNICAST};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `RTN_BLACKHOLE`, `RTN_UNREACHABLE`, `RTN_PROHIBIT`: routes whose packets the kernel
/// drops (or answers with an ICMP error).
const DROPPING_KINDS: [u8; 3] = [6, 7, 8];

/// `RTPROT_RA`: a route learned from a router advertisement, which the kernel never
/// joins with others into a multipath route.
const RTPROT_RA: u8 = 9;

/// How long the thread waits for a notification before it looks at its stop flag and
/// at a pending resynchronisation.
const POLL: Duration = Duration::from_millis(50);

/// The configuration's `KernelRoutes` elements, waiting for the router to exist.
#[derive(Default)]
pub struct Syncs {
    pending: Mutex<Vec<Arc<Sync>>>,
}

/// One element's settings and counters.
struct Sync {
    declaration: String,
    lookup: String,
    /// Interface names and the lookup element's output for each.
    devices: Vec<(String, usize)>,
    table: u32,
    blackhole: Option<usize>,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    routes: AtomicU64,
    skipped: AtomicU64,
    updates: AtomicU64,
    resyncs: AtomicU64,
}

impl Syncs {
    pub fn new() -> Arc<Syncs> {
        Arc::new(Syncs::default())
    }

    fn all(&self) -> Vec<Arc<Sync>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Checks each element's lookup element and installs the kernel's routes in it:
    /// the router starts with the kernel's table. Returns the syncs to follow the
    /// kernel with, and their notification sockets (opened before the dump, so no
    /// change falls between).
    pub fn install(&self, router: &RouterSpec) -> Result<Vec<Follower>, String> {
        let mut out = Vec::new();
        for s in self.all() {
            let fail = |m: String| format!("{}: {}", s.declaration, m);
            // The lookup element's class says the family of the routes it takes.
            let family = match router.read_handler(&format!("{}.class", s.lookup)).as_deref() {
                Err(_) => return Err(fail(format!("no element '{}'", s.lookup))),
                Ok("RadixIPLookup" | "LinearIPLookup" | "DirectIPLookup") => Family::V4,
                Ok("LookupIP6Route") => Family::V6,
                Ok(class) => {
                    return Err(fail(format!(
                        "'{}' is a {}, not a route table that takes routes (RadixIPLookup, LinearIPLookup, DirectIPLookup, LookupIP6Route)",
                        s.lookup, class
                    )))
                }
            };
            let outputs = router.outputs(&s.lookup).unwrap_or(0);
            for &port in s.devices.iter().map(|(_, p)| p).chain(s.blackhole.iter()) {
                if port >= outputs {
                    return Err(fail(format!(
                        "'{}' has no output {} ({} output{})",
                        s.lookup,
                        port,
                        outputs,
                        if outputs == 1 { "" } else { "s" }
                    )));
                }
            }
            let socket =
                RouteSocket::subscribe().map_err(|e| fail(format!("route netlink: {}", strerror(&e))))?;
            let mut state = State::new(s.clone(), family);
            let mut resync_due = false;
            match state.resync(router) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => graph::warn!("{}: {}", s.declaration, e),
                // The kernel's table is changing too fast for a whole dump (a daemon
                // loading a full table): start without it, and take it once a dump
                // gets through.
                Err(e) if e.interrupted => {
                    graph::warn!(
                        "{}: {}; the router starts without the kernel's routes and takes them once a dump gets through",
                        s.declaration,
                        e.message
                    );
                    resync_due = true;
                }
                Err(e) => return Err(fail(e.message)),
            }
            let skipped = state.skipped.len();
            if skipped > 0 && s.blackhole.is_none() {
                graph::warn!(
                    "{}: {} prefix{} of the kernel's table {} no output here (an interface not listed, or a route type the router cannot take): {} traffic follows shorter routes; BLACKHOLE OUTPUT sends it there instead",
                    s.declaration,
                    skipped,
                    if skipped == 1 { "" } else { "es" },
                    if skipped == 1 { "has" } else { "have" },
                    if skipped == 1 { "its" } else { "their" }
                );
            }
            out.push(Follower {
                state,
                socket,
                resync_due,
            });
        }
        Ok(out)
    }
}

/// A sync ready to follow the kernel's changes.
pub struct Follower {
    state: State,
    socket: RouteSocket,
    /// The dump at configuration did not get through: take the table at once.
    resync_due: bool,
}

/// A dump of the kernel's table that failed; `interrupted`: every attempt was
/// interrupted by changes (worth trying again soon).
struct DumpFailed {
    message: String,
    interrupted: bool,
}

/// Starts a thread per follower; dropping the returned threads stops them.
pub fn follow(followers: Vec<Follower>, router: &Arc<RouterSpec>) -> ServiceThreads {
    ServiceThreads::spawn("kernel-routes", followers, router, |f, router, stop| {
        f.run(&router, &stop)
    })
}

impl Follower {
    fn run(mut self, router: &RouterSpec, stop: &AtomicBool) {
        let mut buf = vec![0u8; 1 << 20];
        // A resynchronisation asked for, and when it is due: 50 ms after the change
        // that asked (so that a burst of link changes makes one), or a second after a
        // failed one.
        let mut resync_at: Option<Instant> = self.resync_due.then(Instant::now);
        let mut last_error = String::new();
        while !stop.load(Ordering::SeqCst) {
            match self.socket.recv(&mut buf, POLL) {
                Ok(Some(n)) => match rtnl::parse(&buf[..n]) {
                    Ok(messages) => {
                        for m in messages {
                            match m {
                                Message::NewRoute(r) => self.state.kernel_add(r),
                                Message::DelRoute(r) => self.state.kernel_remove(&r),
                                Message::LinkAddressOrNexthop => {
                                    resync_at.get_or_insert_with(|| Instant::now() + POLL);
                                }
                                _ => {}
                            }
                        }
                        if let Err(e) = self.state.write(router) {
                            self.warn(&mut last_error, e);
                        }
                    }
                    Err(e) => {
                        self.warn(
                            &mut last_error,
                            format!("route netlink: {}", std::io::Error::from(e)),
                        );
                        resync_at.get_or_insert_with(|| Instant::now() + POLL);
                    }
                },
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    resync_at.get_or_insert_with(|| Instant::now() + POLL);
                }
                Err(e) => {
                    self.warn(&mut last_error, format!("route netlink: {}", strerror(&e)));
                    std::thread::sleep(POLL);
                }
            }
            if resync_at.is_some_and(|t| Instant::now() >= t) {
                resync_at = None;
                // What is queued happened before the dump, which shows it; after lost
                // messages (ENOBUFS) it would undo changes the dump has.
                self.socket.discard_queued(&mut buf);
                match self.state.resync(router) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => self.warn(&mut last_error, e),
                    Err(e) => {
                        self.warn(&mut last_error, e.message);
                        resync_at = Some(Instant::now() + Duration::from_secs(1));
                    }
                }
            }
        }
    }

    /// Says `e` once while it lasts.
    fn warn(&self, last: &mut String, e: String) {
        if *last != e {
            graph::warn!("{}: {}", self.state.sync.declaration, e);
            *last = e;
        }
    }
}

/// A member of what the router's table should hold for a prefix: a gateway (or none)
/// and an output. A prefix has one, or several for a multipath route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hop {
    gateway: Option<u128>,
    port: usize,
}

/// What the router's table should hold for a prefix: one hop, or a multipath route's,
/// each with its weight (1 for a plain route).
type Hops = Vec<(Hop, u16)>;

/// A kernel route of the followed table, as far as the choice between the routes to a
/// prefix goes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KernelHop {
    kind: u8,
    oif: Option<u32>,
    gateway: Option<u128>,
    /// Its next hops are dead (link down): the kernel passes it over.
    dead: bool,
    /// Every next hop of a multipath route (IPv4, or through a nexthop object), which
    /// spreads flows over its live ones (`oif` and `gateway` are the first live one's);
    /// the one hop otherwise.
    hops: Vec<NextHop>,
    /// An IPv6 route the kernel joins with the others of its metric that are too into
    /// one multipath route (as `rt6_qualify_for_ecmp`: a gateway, not from a router
    /// advertisement, no nexthop object).
    sibling: bool,
    /// The nexthop object it goes through, if any.
    nh_id: Option<u32>,
    /// What else the kernel tells routes apart by (protocol, preferred source,
    /// metrics; `Route::identity`).
    identity: (u8, Option<u128>, Vec<u8>),
}

impl KernelHop {
    /// The same route: everything but its liveness (its hops' places and, for a route
    /// of several, their weights, and its nexthop object, tell two routes apart as they
    /// do to the kernel). A route of one hop says no weight: an IPv6 route's message
    /// gives its weight only once it has siblings, and the later message replaces the
    /// route, weight and all.
    fn same(&self, o: &KernelHop) -> bool {
        let places = |k: &KernelHop| {
            let several = k.hops.len() > 1;
            k.hops
                .iter()
                .map(|h| (h.oif, h.gateway, several.then_some(h.weight)))
                .collect::<Vec<_>>()
        };
        (self.kind, self.oif, self.gateway, self.nh_id, &self.identity)
            == (o.kind, o.oif, o.gateway, o.nh_id, &o.identity)
            && places(self) == places(o)
    }
}

/// A prefix: address bits (IPv4 in the low 32) and length.
type Prefix = (u128, u8);

/// The kernel's view of the followed table and what the router's table holds.
struct State {
    sync: Arc<Sync>,
    family: Family,
    /// Interface index -> output, resolved again at each resynchronisation.
    ports: HashMap<u32, usize>,
    /// Routes by prefix, then by metric; of the routes of one metric (IPv6 allows
    /// several, with different next hops; IPv4 with `ip route append`) the kernel
    /// uses the first.
    kernel: HashMap<Prefix, BTreeMap<u32, Vec<KernelHop>>>,
    installed: HashMap<Prefix, Hops>,
    /// Prefixes whose kernel route the router cannot take.
    skipped: HashSet<Prefix>,
    /// Prefixes whose choice may have changed since the last write.
    dirty: HashSet<Prefix>,
}

impl State {
    fn new(sync: Arc<Sync>, family: Family) -> State {
        State {
            sync,
            family,
            ports: HashMap::new(),
            kernel: HashMap::new(),
            installed: HashMap::new(),
            skipped: HashSet::new(),
            dirty: HashSet::new(),
        }
    }

    /// A route of the followed table and family, without a TOS or a source prefix: such
    /// a route applies to some packets only (of that TOS, from that source), which the
    /// router's table cannot say, and the kernel takes another route for the rest.
    fn ours(&self, r: &Route) -> bool {
        r.table == self.sync.table && r.family == self.family && r.tos == 0 && r.src_len == 0
    }

    /// The routes a message describes, as the kernel keeps them: an IPv4 route is one,
    /// whatever its next hops, and so is a route through a nexthop object; an IPv6
    /// multipath route is a sibling route per next hop.
    fn kernel_hops(&self, r: &Route) -> Vec<KernelHop> {
        let hop = |oif, gateway, dead, hops, sibling| KernelHop {
            kind: r.kind,
            oif,
            gateway,
            dead,
            hops,
            sibling,
            nh_id: r.nh_id,
            identity: r.identity.clone(),
        };
        match self.family {
            Family::V6 if r.nh_id.is_none() => r
                .hops
                .iter()
                .map(|h| {
                    let sibling = h.gateway.is_some() && r.identity.0 != RTPROT_RA;
                    hop(h.oif, h.gateway, h.dead, vec![*h], sibling)
                })
                .collect(),
            _ => vec![hop(r.oif, r.gateway, r.dead, r.hops.clone(), false)],
        }
    }

    fn kernel_add(&mut self, r: Route) {
        if !self.ours(&r) {
            return;
        }
        let key = (r.dst, r.len);
        let new = self.kernel_hops(&r);
        let v6 = self.family == Family::V6;
        let hops = self.kernel.entry(key).or_default().entry(r.priority).or_default();
        match r.place {
            // IPv4 replaces the first route of that prefix and metric. IPv6 the first of
            // the same kind: with a gateway, all of them (they are one ECMP route's
            // siblings); without, the first without.
            Place::Replace => {
                let gw = new.first().is_some_and(|h| h.gateway.is_some());
                let at = if v6 {
                    hops.iter().position(|h| h.gateway.is_some() == gw)
                } else {
                    (!hops.is_empty()).then_some(0)
                };
                match at {
                    Some(at) => {
                        if v6 && gw {
                            hops.retain(|h| h.gateway.is_none());
                        } else {
                            hops.remove(at);
                        }
                        let at = at.min(hops.len());
                        hops.splice(at..at, new);
                    }
                    None => hops.extend(new),
                }
            }
            place => {
                for hop in new {
                    if let Some(at) = hops.iter().position(|h| h.same(&hop)) {
                        // The same route again (a dump after notifications): its news.
                        hops[at] = hop;
                    } else if place == Place::First && !v6 {
                        // IPv4 puts an added or prepended route in front; IPv6 adds
                        // every route after those of its metric.
                        hops.insert(0, hop);
                    } else {
                        hops.push(hop);
                    }
                }
            }
        }
        self.dirty.insert(key);
    }

    fn kernel_remove(&mut self, r: &Route) {
        if !self.ours(r) {
            return;
        }
        let key = (r.dst, r.len);
        let gone = self.kernel_hops(r);
        if let Some(by_metric) = self.kernel.get_mut(&key) {
            if let Some(hops) = by_metric.get_mut(&r.priority) {
                for g in &gone {
                    // The route the message names, else one with its next hop, else
                    // (a removal that names no next hop) the first.
                    let at = hops
                        .iter()
                        .position(|h| h.same(g))
                        .or_else(|| hops.iter().position(|h| h.oif == g.oif && h.gateway == g.gateway))
                        .or_else(|| (g.oif.is_none() && g.gateway.is_none()).then_some(0));
                    if let Some(at) = at.filter(|&i| i < hops.len()) {
                        hops.remove(at);
                    }
                }
                if hops.is_empty() {
                    by_metric.remove(&r.priority);
                }
            }
            if by_metric.is_empty() {
                self.kernel.remove(&key);
            }
        }
        self.dirty.insert(key);
    }

    /// The hops for `key`: the kernel's first live route of lowest metric, if the
    /// router can take it (an interface it serves, or a dropping route with BLACKHOLE
    /// given); none when every route is dead (the kernel then takes a shorter prefix's).
    /// A multipath route (an IPv4 route's live next hops, the live IPv6 siblings at the
    /// route's metric) gives each of its hops on an interface the router serves, with
    /// their weights ([`in_lowest_terms`]). `Err` when the kernel's route cannot be taken, with what to install
    /// instead: the BLACKHOLE output, if given.
    fn wanted(&self, key: &Prefix) -> Result<Option<Hops>, Option<Hops>> {
        let drop = self
            .sync
            .blackhole
            .map(|port| vec![(Hop { gateway: None, port }, 1)]);
        let Some((metric, best)) = self.kernel.get(key).and_then(|m| {
            m.iter()
                .find_map(|(metric, routes)| routes.iter().find(|h| !h.dead).map(|h| (metric, h)))
        }) else {
            return Ok(None);
        };
        match best.kind {
            RTN_UNICAST => {
                let members: Vec<NextHop> = if best.sibling {
                    // IPv6 spreads over the siblings of one metric.
                    self.kernel[key][metric]
                        .iter()
                        .filter(|h| !h.dead && h.kind == RTN_UNICAST && h.sibling)
                        .flat_map(|h| h.hops.iter().copied())
                        .collect()
                } else {
                    best.hops.iter().filter(|h| !h.dead).copied().collect()
                };
                // (member, weight): a gateway of the other family is not one the router
                // can address; a member the kernel lists twice counts once, with both
                // weights.
                let mut weighted: Vec<(Hop, u32)> = Vec::new();
                for m in members.into_iter().filter(|m| !m.via_other_family) {
                    if let Some(&port) = m.oif.and_then(|i| self.ports.get(&i)) {
                        let hop = Hop {
                            gateway: m.gateway,
                            port,
                        };
                        match weighted.iter_mut().find(|(h, _)| *h == hop) {
                            Some((_, w)) => *w += u32::from(m.weight),
                            None => weighted.push((hop, u32::from(m.weight))),
                        }
                    }
                }
                if weighted.is_empty() {
                    return Err(drop);
                }
                weighted.truncate(MAX_MEMBERS);
                Ok(Some(in_lowest_terms(&weighted)))
            }
            k if DROPPING_KINDS.contains(&k) && drop.is_some() => Ok(drop),
            _ => Err(drop),
        }
    }

    fn address(&self, a: u128) -> String {
        match self.family {
            Family::V4 => Ipv4Addr::from(a as u32).to_string(),
            Family::V6 => Ipv6Addr::from(a).to_string(),
        }
    }

    /// `PREFIX/LEN [GATEWAY] OUTPUT`, a `[GATEWAY] OUTPUT [weight N]` a member of a
    /// multipath route, or `PREFIX/LEN` for no hop.
    fn route_text(&self, key: &Prefix, hops: Option<&Hops>) -> String {
        let mut text = format!("{}/{}", self.address(key.0), key.1);
        for &(h, weight) in hops.into_iter().flatten() {
            if let Some(g) = h.gateway {
                text.push(' ');
                text.push_str(&self.address(g));
            }
            text.push_str(&format!(" {}", h.port));
            if weight > 1 {
                text.push_str(&format!(" weight {}", weight));
            }
        }
        text
    }

    /// Writes the changes of the dirty prefixes to the lookup element: for IPv4 all at
    /// once through `ctrl` (`set` and `remove` lines), for IPv6 one by one through
    /// `add` (which replaces) and `remove`, LookupIP6Route's `ctrl` taking one command.
    /// A change the element refuses is left out (and reported), never the others.
    fn write(&mut self, router: &RouterSpec) -> Result<(), String> {
        let mut changes: Vec<(Prefix, Option<Hops>)> = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            let want = match self.wanted(&key) {
                Ok(h) => {
                    self.skipped.remove(&key);
                    h
                }
                Err(instead) => {
                    self.skipped.insert(key);
                    instead
                }
            };
            if self.installed.get(&key) != want.as_ref() {
                changes.push((key, want));
            }
        }
        let lookup = self.sync.lookup.clone();
        let mut refused = Vec::new();
        let mut done = vec![false; changes.len()];
        match self.family {
            Family::V4 => {
                let line = |(key, want): &(Prefix, Option<Hops>)| {
                    let verb = if want.is_some() { "set" } else { "remove" };
                    format!("{} {}\n", verb, self.route_text(key, want.as_ref()))
                };
                let text: String = changes.iter().map(line).collect();
                let ctrl = format!("{}.ctrl", lookup);
                if text.is_empty() || router.write_handler(&ctrl, &text).is_ok() {
                    done.fill(true);
                } else {
                    // One by one: a prefix already gone is gone; the others that
                    // are refused are reported, and the rest apply.
                    for (i, change) in changes.iter().enumerate() {
                        let (key, want) = change;
                        done[i] = match router.write_handler(&ctrl, &line(change)) {
                            Ok(()) => true,
                            Err(e) if want.is_none() && e.contains("not found") => true,
                            Err(e) => {
                                refused.push(format!("{}: {}", self.route_text(key, want.as_ref()), e));
                                false
                            }
                        };
                    }
                }
            }
            Family::V6 => {
                for (i, (key, want)) in changes.iter().enumerate() {
                    let handler = if want.is_some() { "add" } else { "remove" };
                    match router.write_handler(
                        &format!("{}.{}", lookup, handler),
                        &self.route_text(key, want.as_ref()),
                    ) {
                        Ok(()) => done[i] = true,
                        Err(e) => refused.push(format!("{}: {}", self.route_text(key, want.as_ref()), e)),
                    }
                }
            }
        }
        let applied = done.iter().filter(|&&d| d).count();
        for ((key, want), _) in changes.into_iter().zip(done).filter(|(_, d)| *d) {
            match want {
                Some(h) => self.installed.insert(key, h),
                None => self.installed.remove(&key),
            };
        }
        let c = &self.sync.counters;
        c.updates.fetch_add(applied as u64, Ordering::Relaxed);
        c.routes.store(self.installed.len() as u64, Ordering::Relaxed);
        c.skipped.store(self.skipped.len() as u64, Ordering::Relaxed);
        match refused.first() {
            None => Ok(()),
            Some(e) => Err(format!(
                "{} refused {} change{} (the first: {})",
                lookup,
                refused.len(),
                if refused.len() == 1 { "" } else { "s" },
                e
            )),
        }
    }

    /// Takes the kernel's table whole again (interfaces resolved again too) and writes
    /// the difference. The outer error is the dump's; the inner one changes refused.
    fn resync(&mut self, router: &RouterSpec) -> Result<Result<(), String>, DumpFailed> {
        self.ports = self
            .sync
            .devices
            .iter()
            .filter_map(|(name, port)| ifindex(name).map(|i| (i, *port)))
            .collect();
        let routes = rtnl::dump_routes(self.family).map_err(|e| DumpFailed {
            message: format!("route netlink: {}", strerror(&e)),
            interrupted: e.kind() == std::io::ErrorKind::Interrupted,
        })?;
        self.dirty.extend(self.kernel.keys().copied());
        self.dirty.extend(self.installed.keys().copied());
        self.kernel.clear();
        for r in routes {
            self.kernel_add(r);
        }
        self.sync.counters.resyncs.fetch_add(1, Ordering::Relaxed);
        Ok(self.write(router))
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Members' weights as the lookup element takes them: if one is above the element's
/// 256, scaled so that the largest is 256 (rounded, at least 1); then in lowest terms
/// (equal ones are all 1, and so is one member's).
fn in_lowest_terms(weighted: &[(Hop, u32)]) -> Hops {
    if let [(h, _)] = weighted {
        return vec![(*h, 1)];
    }
    let most = weighted.iter().map(|&(_, w)| w).max().unwrap_or(1);
    let max = u32::from(MAX_WEIGHT);
    let scaled: Vec<(Hop, u32)> = weighted
        .iter()
        .map(|&(h, w)| {
            (
                h,
                if most > max {
                    ((w * max + most / 2) / most).max(1)
                } else {
                    w
                },
            )
        })
        .collect();
    let common = scaled.iter().fold(0, |g, &(_, w)| gcd(g, w)).max(1);
    scaled.iter().map(|&(h, w)| (h, (w / common) as u16)).collect()
}

pub(crate) fn ifindex(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// Registers `KernelRoutes`, collecting its elements into `syncs`.
pub fn register(reg: &mut Registry, syncs: &Arc<Syncs>) {
    reg.add(Arc::new(KernelRoutesClass { syncs: syncs.clone() }));
}

struct KernelRoutesClass {
    syncs: Arc<Syncs>,
}

impl ElementClass for KernelRoutesClass {
    fn name(&self) -> &'static str {
        "KernelRoutes"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/0")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let lookup: String = arg(args.required("LOOKUP"), cx)?;
        let table = arg(args.keyword::<u32>("TABLE"), cx)?.unwrap_or(254);
        let blackhole = arg(args.keyword::<usize>("BLACKHOLE"), cx)?;
        let mut devices: Vec<(String, usize)> = Vec::new();
        for a in args.rest() {
            let words = split_words(&a);
            let [name, port] = &words[..] else {
                return Err(cx.error(format!("expected 'DEVNAME OUTPUT', not '{}'", a)));
            };
            let port: usize = port
                .parse()
                .map_err(|_| cx.error(format!("OUTPUT expects an output number, not '{}'", port)))?;
            if devices.iter().any(|(n, _)| n == name) {
                return Err(cx.error(format!("interface '{}' given twice", name)));
            }
            devices.push((name.clone(), port));
        }
        if devices.is_empty() {
            return Err(cx.error("no interfaces: give 'DEVNAME OUTPUT' for each"));
        }
        for (name, _) in &devices {
            if ifindex(name).is_none() {
                return Err(cx.error(format!("no interface '{}'", name)));
            }
        }
        let sync = Arc::new(Sync {
            declaration: format!("{} :: KernelRoutes", cx.name),
            lookup,
            devices,
            table,
            blackhole,
            counters: Counters::default(),
        });
        self.syncs
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(sync.clone());
        Ok(Arc::new(KernelRoutesSpec { sync }))
    }
}

struct KernelRoutesSpec {
    sync: Arc<Sync>,
}

impl ElementSpec for KernelRoutesSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(NoPorts)
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        ["routes", "skipped", "updates", "resyncs"]
            .into_iter()
            .map(HandlerInfo::read)
            .collect()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let c = &self.sync.counters;
        let v = match name {
            "routes" => &c.routes,
            "skipped" => &c.skipped,
            "updates" => &c.updates,
            "resyncs" => &c.resyncs,
            _ => return None,
        };
        Some(v.load(Ordering::Relaxed).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_in_lowest_terms_within_256() {
        let hop = |port| Hop { gateway: None, port };
        let weights = |w: &[u32]| {
            let v: Vec<(Hop, u32)> = w.iter().enumerate().map(|(i, &w)| (hop(i), w)).collect();
            in_lowest_terms(&v).iter().map(|&(_, w)| w).collect::<Vec<_>>()
        };
        assert_eq!(weights(&[7]), vec![1]);
        assert_eq!(weights(&[2, 2]), vec![1, 1]);
        assert_eq!(weights(&[4, 6]), vec![2, 3]);
        assert_eq!(weights(&[256, 255]), vec![256, 255]);
        assert_eq!(weights(&[400, 200]), vec![2, 1]);
        // Scaled down, rounded, at least 1; equal after rounding: 1:1.
        assert_eq!(weights(&[512, 255, 1]), vec![256, 128, 1]);
        assert_eq!(weights(&[1000, 999]), vec![1, 1]);
    }
}
