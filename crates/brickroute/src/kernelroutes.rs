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
use graph::args::{split_words, Args};
use graph::element::*;
use graph::error::ConfigError;
use graph::registry::Registry;
use graph::router::RouterSpec;
use io::rtnl::{self, Message, Route, RouteSocket, RTN_UNICAST};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `RTN_BLACKHOLE`, `RTN_UNREACHABLE`, `RTN_PROHIBIT`: routes whose packets the kernel
/// drops (or answers with an ICMP error).
const DROPPING_KINDS: [u8; 3] = [6, 7, 8];

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
            match router.handler_access(&s.lookup, "ctrl") {
                None => return Err(fail(format!("no element '{}'", s.lookup))),
                Some((_, false)) => {
                    return Err(fail(format!(
                        "'{}' is not a route table with a 'ctrl' handler (RadixIPLookup, LinearIPLookup, DirectIPLookup)",
                        s.lookup
                    )))
                }
                Some(_) => {}
            }
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
            let mut state = State::new(s.clone());
            state.resync(router).map_err(fail)?;
            out.push(Follower { state, socket });
        }
        Ok(out)
    }
}

/// A sync ready to follow the kernel's changes.
pub struct Follower {
    state: State,
    socket: RouteSocket,
}

/// Starts a thread per follower; the returned handle stops them.
pub fn follow(followers: Vec<Follower>, router: &Arc<RouterSpec>) -> Following {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = followers
        .into_iter()
        .map(|f| {
            let (router, stop) = (router.clone(), stop.clone());
            std::thread::Builder::new()
                .name("kernel-routes".into())
                .spawn(move || f.run(&router, &stop))
                .expect("spawn kernel routes thread")
        })
        .collect();
    Following { stop, threads }
}

/// The threads following the kernel; dropping it stops them.
pub struct Following {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Following {
    pub fn is_following(&self) -> bool {
        !self.threads.is_empty()
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Follower {
    fn run(mut self, router: &RouterSpec, stop: &AtomicBool) {
        let mut buf = vec![0u8; 1 << 20];
        // A resynchronisation asked for, and since when: done once the notifications
        // pause, or after a second of them.
        let mut resync_since: Option<Instant> = None;
        let mut last_error = String::new();
        while !stop.load(Ordering::SeqCst) {
            match self.socket.recv(&mut buf, POLL) {
                Ok(Some(n)) => match rtnl::parse(&buf[..n]) {
                    Ok(messages) => {
                        for m in messages {
                            match m {
                                Message::NewRoute(r) => self.state.kernel_add(r),
                                Message::DelRoute(r) => self.state.kernel_remove(&r),
                                Message::LinkOrAddress => {
                                    resync_since.get_or_insert_with(Instant::now);
                                }
                                _ => {}
                            }
                        }
                        if let Err(e) = self.state.write(router) {
                            self.warn(&mut last_error, e);
                            resync_since.get_or_insert_with(Instant::now);
                        }
                    }
                    Err(e) => {
                        self.warn(
                            &mut last_error,
                            format!("route netlink: {}", std::io::Error::from(e)),
                        );
                        resync_since.get_or_insert_with(Instant::now);
                    }
                },
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    resync_since.get_or_insert_with(Instant::now);
                }
                Err(e) => {
                    self.warn(&mut last_error, format!("route netlink: {}", strerror(&e)));
                    std::thread::sleep(POLL);
                }
            }
            let due = resync_since.is_some_and(|t| t.elapsed() >= POLL);
            if due {
                resync_since = None;
                if let Err(e) = self.state.resync(router) {
                    self.warn(&mut last_error, e);
                    // Tried again a second later.
                    resync_since = Some(Instant::now() + Duration::from_secs(1) - POLL);
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

/// What the router's table should hold for a prefix: a gateway (or none) and an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hop {
    gateway: Option<u32>,
    port: usize,
}

/// A kernel route of the followed table, as far as the choice between the routes to a
/// prefix goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KernelHop {
    kind: u8,
    oif: Option<u32>,
    gateway: Option<u32>,
}

/// The kernel's view of the followed table and what the router's table holds.
struct State {
    sync: Arc<Sync>,
    /// Interface index -> output, resolved again at each resynchronisation.
    ports: HashMap<u32, usize>,
    /// Routes by prefix, then by metric.
    kernel: HashMap<(u32, u8), BTreeMap<u32, KernelHop>>,
    installed: HashMap<(u32, u8), Hop>,
    /// Prefixes whose kernel route the router cannot take.
    skipped: HashSet<(u32, u8)>,
    /// Prefixes whose choice may have changed since the last write.
    dirty: HashSet<(u32, u8)>,
}

impl State {
    fn new(sync: Arc<Sync>) -> State {
        State {
            sync,
            ports: HashMap::new(),
            kernel: HashMap::new(),
            installed: HashMap::new(),
            skipped: HashSet::new(),
            dirty: HashSet::new(),
        }
    }

    fn ours(&self, r: &Route) -> bool {
        r.table == self.sync.table
    }

    fn kernel_add(&mut self, r: Route) {
        // A TOS-specific route applies to some packets only: the router's table
        // cannot say that, and the kernel prefers the route without TOS for the rest.
        if !self.ours(&r) || r.tos != 0 {
            return;
        }
        let key = (r.dst, r.len);
        let hop = KernelHop {
            kind: r.kind,
            oif: r.oif,
            gateway: r.gateway,
        };
        self.kernel.entry(key).or_default().insert(r.priority, hop);
        self.dirty.insert(key);
    }

    fn kernel_remove(&mut self, r: &Route) {
        if !self.ours(r) || r.tos != 0 {
            return;
        }
        let key = (r.dst, r.len);
        if let Some(by_metric) = self.kernel.get_mut(&key) {
            by_metric.remove(&r.priority);
            if by_metric.is_empty() {
                self.kernel.remove(&key);
            }
        }
        self.dirty.insert(key);
    }

    /// The hop for `key`: the kernel's route of lowest metric, if the router can
    /// take it (an interface it serves, or a dropping route with BLACKHOLE given).
    /// `Err(())` when the kernel has a route the router cannot take.
    fn wanted(&self, key: &(u32, u8)) -> Result<Option<Hop>, ()> {
        let Some(best) = self.kernel.get(key).and_then(|m| m.values().next()) else {
            return Ok(None);
        };
        match best.kind {
            RTN_UNICAST => match best.oif.and_then(|i| self.ports.get(&i)) {
                Some(&port) => Ok(Some(Hop {
                    gateway: best.gateway,
                    port,
                })),
                None => Err(()),
            },
            k if DROPPING_KINDS.contains(&k) => match self.sync.blackhole {
                Some(port) => Ok(Some(Hop { gateway: None, port })),
                None => Err(()),
            },
            _ => Err(()),
        }
    }

    /// Writes the changes of the dirty prefixes to the lookup element, all at once.
    fn write(&mut self, router: &RouterSpec) -> Result<(), String> {
        let mut text = String::new();
        let mut next: Vec<((u32, u8), Option<Hop>)> = Vec::new();
        let mut skipped = Vec::new();
        for key in &self.dirty {
            let want = self.wanted(key);
            skipped.push((*key, want.is_err()));
            let want = want.unwrap_or(None);
            if self.installed.get(key) == want.as_ref() {
                continue;
            }
            let prefix = format!("{}/{}", Ipv4Addr::from(key.0), key.1);
            match want {
                Some(h) => {
                    let _ = match h.gateway {
                        Some(g) => writeln!(text, "set {} {} {}", prefix, Ipv4Addr::from(g), h.port),
                        None => writeln!(text, "set {} {}", prefix, h.port),
                    };
                }
                None => {
                    let _ = writeln!(text, "remove {}", prefix);
                }
            }
            next.push((*key, want));
        }
        if !text.is_empty() {
            router
                .write_handler(&format!("{}.ctrl", self.sync.lookup), &text)
                .map_err(|e| format!("{}.ctrl: {}", self.sync.lookup, e))?;
        }
        let c = &self.sync.counters;
        c.updates.fetch_add(next.len() as u64, Ordering::Relaxed);
        for (key, want) in next {
            match want {
                Some(h) => self.installed.insert(key, h),
                None => self.installed.remove(&key),
            };
        }
        for (key, skip) in skipped {
            if skip {
                self.skipped.insert(key);
            } else {
                self.skipped.remove(&key);
            }
        }
        self.dirty.clear();
        c.routes.store(self.installed.len() as u64, Ordering::Relaxed);
        c.skipped.store(self.skipped.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Takes the kernel's table whole again (interfaces resolved again too) and writes
    /// the difference.
    fn resync(&mut self, router: &RouterSpec) -> Result<(), String> {
        self.ports = self
            .sync
            .devices
            .iter()
            .filter_map(|(name, port)| ifindex(name).map(|i| (i, *port)))
            .collect();
        let routes = rtnl::dump_routes().map_err(|e| format!("route netlink dump: {}", strerror(&e)))?;
        self.dirty.extend(self.kernel.keys().copied());
        self.dirty.extend(self.installed.keys().copied());
        self.kernel.clear();
        for r in routes {
            self.kernel_add(r);
        }
        self.sync.counters.resyncs.fetch_add(1, Ordering::Relaxed);
        self.write(router)
    }
}

fn ifindex(name: &str) -> Option<u32> {
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
