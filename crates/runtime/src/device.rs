//! `FromDevice` and `ToDevice`: elements that receive from and transmit on the queues of
//! the ports in a [`DeviceTable`].
//!
//! `FromDevice(DEVNAME [, QUEUE q, METHOD m, BURST k_p])` polls up to `k_p` packets
//! (default 32) per run from queue `q` of port DEVNAME and pushes them out of output 0
//! as one batch. `ToDevice(DEVNAME [, QUEUE q, BURST k_n, FLUSH_US t, METHOD m])` hands
//! packets to the port in groups of `k_n` (default 16) and sends a partial group once
//! its oldest packet has waited `t` microseconds (default 100).
//!
//! DEVNAME is a port given to the table (the benchmark's in-memory ports) or, with a
//! table made by [`DeviceTable::interfaces`] (`brickroute run`), a network interface of
//! the current namespace, opened when the first element naming it is configured, with
//! one queue per worker, by METHOD `XDP` (AF_XDP, the default) or `PACKET`; all
//! elements naming an interface share its port, so they must agree on METHOD. Of an
//! interface opened with `PACKET` the table turns the kernel's IPv4 forwarding off
//! until it is cleared ([`keep_kernel_out`], [`crate::kernel_forwarding`]).
//!
//! Without QUEUE, worker i uses queue i of the port, so one configuration serves any
//! number of workers (the port needs at least one queue per worker). With `QUEUE q`, a
//! `FromDevice` polls only on worker `q mod workers` (one core per queue); a `ToDevice`
//! transmits on queue q from every worker.
//!
//! No packet is left unsent. A `ToDevice` is also a source whose `run` flushes a
//! partial group on timeout (returning `IdleUntil` the next deadline, so a busy worker
//! need not poll it before then), and flushes everything and finishes
//! (`Done`) when the router is stopping or when no `FromDevice` on its worker can feed
//! it any more. After that its `push` transmits at once, partial groups included, since
//! no timer would flush them. Whatever is still buffered when the worker drops its
//! graph is transmitted then. Every transmitted packet is counted by the port and by the
//! element's `count` handler.

mod port_handlers;
mod rss_config;

use crate::kernel_forwarding::{self, KernelForwarding, KernelForwardingOff};
use graph::args::Args;
use graph::element::*;
use graph::registry::Registry;
use graph::stats::WorkerCounters;
use graph::ConfigError;
use io::{DeviceError, Port};
use packet::{PacketBatch, DEFAULT_BATCH, MAX_BATCH};
use port_handlers::Direction;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default `ToDevice` group size (RouteBricks' k_n).
pub const DEFAULT_TX_BURST: usize = 16;
/// Default `ToDevice` flush timeout, microseconds.
pub const DEFAULT_FLUSH_US: u64 = 100;

/// How a network interface is opened: the `METHOD` argument of `FromDevice` and
/// `ToDevice`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// AF_PACKET sockets ([`io::AfPacketPort`]).
    Packet,
    /// AF_XDP sockets.
    Xdp,
}

/// The method tried first when no element of an interface gives `METHOD`: AF_XDP,
/// falling back to AF_PACKET (with a warning) where the interface cannot take
/// brickroute's XDP program or AF_XDP sockets, or has more receive queues than there
/// are workers (AF_XDP reads one queue per worker, AF_PACKET all of them).
pub const DEFAULT_METHOD: Method = Method::Xdp;

impl Method {
    /// `PACKET` or `XDP` (the configuration's words, any case).
    pub fn parse(s: &str) -> Option<Method> {
        match s.to_ascii_uppercase().as_str() {
            "PACKET" => Some(Method::Packet),
            "XDP" => Some(Method::Xdp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Packet => "PACKET",
            Method::Xdp => "XDP",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Opens network interface `name` of the current network namespace as a port with
/// `queues` queues, by `method` (an AF_XDP port with UMEMs of its own).
pub fn open_interface(name: &str, method: Method, queues: usize) -> Result<Arc<dyn Port>, DeviceError> {
    let umems = io::UmemSet::new(
        io::XdpConfig::default().frames_per_queue,
        io::XdpConfig::default().frame_size,
    );
    open_interface_sharing(name, method, queues, &umems)
}

/// Like [`open_interface`], AF_XDP ports taking worker i's UMEM from `umems`: every
/// interface a router opens goes through here with the router's one set, so a packet
/// received on one AF_XDP interface is sent on another from where it lies.
pub fn open_interface_sharing(
    name: &str,
    method: Method,
    queues: usize,
    umems: &Arc<io::UmemSet>,
) -> Result<Arc<dyn Port>, DeviceError> {
    match method {
        Method::Packet => Ok(Arc::new(io::AfPacketPort::open(
            name,
            queues,
            &io::AfPacketConfig::default(),
        )?)),
        Method::Xdp => Ok(Arc::new(io::XdpPort::open_shared(
            name,
            queues,
            &io::XdpConfig::default(),
            umems,
        )?)),
    }
}

/// Keeps the kernel out of the forwarding path of AF_PACKET interface `name` as
/// `kernel` says (see [`crate::kernel_forwarding`]): with [`KernelForwarding::TurnOff`]
/// its IPv4 forwarding is turned off until the returned guard drops, and the change is
/// told on stderr. Either way, a warning says where the kernel still forwards what
/// arrives on `name` (IPv4 kept on; IPv6, which has no per-interface switch).
pub fn keep_kernel_out(
    name: &str,
    kernel: KernelForwarding,
) -> Result<Option<KernelForwardingOff>, DeviceError> {
    let guard = match kernel {
        KernelForwarding::Keep => None,
        KernelForwarding::TurnOff => {
            let taken = KernelForwardingOff::take(name, &kernel_forwarding::record_dir())
                .map_err(|e| DeviceError::new(name, e.to_string()))?;
            if let Some(n) = &taken.notice {
                graph::warn!("{}", n);
            }
            taken.guard
        }
    };
    for w in kernel_forwarding::forwarding_warnings(name) {
        graph::warn!("{}", w);
    }
    Ok(guard)
}

/// Opens an interface: `(name, method, queues)` to a port.
pub type Opener = dyn Fn(&str, Method, usize) -> Result<Arc<dyn Port>, DeviceError> + Send + Sync;

/// A port in a [`DeviceTable`].
#[derive(Clone)]
pub struct Device {
    pub name: String,
    pub port: Arc<dyn Port>,
    /// How the table opened it; `None` for a port handed to the table ([`DeviceTable::insert`]).
    pub method: Option<Method>,
}

/// The ports a router's `FromDevice` and `ToDevice` elements can name.
///
/// A table holds ports handed to it ([`DeviceTable::insert`]) and, if made with
/// [`DeviceTable::interfaces`], opens network interfaces on first use: the first
/// element that names an interface opens it with one queue per worker, by its METHOD
/// (or [`DEFAULT_METHOD`]); every later `FromDevice` and `ToDevice` naming it share
/// that port.
///
/// It also tracks, per worker, how many `FromDevice` instances still poll, which lets a
/// `ToDevice` on that worker know when no more packets can come. Use one table per
/// router.
#[derive(Default)]
pub struct DeviceTable {
    devices: Mutex<BTreeMap<String, Device>>,
    opener: Option<Box<Opener>>,
    live_rx: Mutex<Vec<Arc<AtomicUsize>>>,
    /// The devices named by the configurations built since [`DeviceTable::begin_build`].
    named: Mutex<BTreeSet<String>>,
    /// The RSS keywords the configuration gave, by device.
    rss_given: rss_config::Given,
    /// The kernel forwarding flags held off for the AF_PACKET interfaces the table
    /// opened; declared after `devices` so the ports close first when the table drops.
    kernel_forwarding: Arc<Mutex<Vec<KernelForwardingOff>>>,
}

impl DeviceTable {
    /// A table of the ports handed to it, opening nothing.
    pub fn new() -> DeviceTable {
        DeviceTable::default()
    }

    /// A table that opens the network interfaces the configuration names, with
    /// [`open_interface_sharing`] and one UMEM per worker for all of them
    /// ([`io::UmemSet::DEFAULT_FRAMES`] frames: half split among the receive sides of
    /// the AF_XDP interfaces, a few batches each when it opens and the rest at the
    /// workers' first polls, once every interface is open; half left for transmit). Of
    /// each
    /// interface opened with METHOD PACKET, the kernel's IPv4 forwarding is turned off
    /// or kept as `kernel` says ([`keep_kernel_out`]); [`DeviceTable::clear`] (or
    /// dropping the table) restores it.
    pub fn interfaces(kernel: KernelForwarding) -> DeviceTable {
        let umems = io::UmemSet::new(io::UmemSet::DEFAULT_FRAMES, io::XdpConfig::default().frame_size);
        let held: Arc<Mutex<Vec<KernelForwardingOff>>> = Arc::default();
        let hold = held.clone();
        let mut table = DeviceTable::with_opener(move |name, method, queues| {
            let port = open_interface_sharing(name, method, queues, &umems)?;
            if method == Method::Packet {
                if let Some(g) = keep_kernel_out(name, kernel)? {
                    hold.lock().unwrap_or_else(|e| e.into_inner()).push(g);
                }
            }
            Ok(port)
        });
        table.kernel_forwarding = held;
        table
    }

    /// A table that opens the names it does not hold with `opener`.
    pub fn with_opener(
        opener: impl Fn(&str, Method, usize) -> Result<Arc<dyn Port>, DeviceError> + Send + Sync + 'static,
    ) -> DeviceTable {
        DeviceTable {
            opener: Some(Box::new(opener)),
            ..DeviceTable::default()
        }
    }

    /// Adds (or replaces) port `name`.
    pub fn insert(&mut self, name: impl Into<String>, port: Arc<dyn Port>) {
        let name = name.into();
        let map = self.devices.get_mut().unwrap_or_else(|e| e.into_inner());
        map.insert(
            name.clone(),
            Device {
                name,
                port,
                method: None,
            },
        );
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Port>> {
        self.map().get(name).map(|d| d.port.clone())
    }

    /// Port names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// The ports, sorted by name.
    pub fn devices(&self) -> Vec<Device> {
        self.map().values().cloned().collect()
    }

    /// Closes the interfaces the table opened (once the router holding them is gone,
    /// their sockets close), forgets every port, then gives the kernel back the
    /// forwarding it had on them.
    pub fn clear(&self) {
        self.map().clear();
        self.kernel_forwarding
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Starts a configuration's build over a table a running configuration uses (a
    /// reconfiguration): from here on [`DeviceTable::named`] lists the devices its
    /// `FromDevice` and `ToDevice` elements name, and its RSS keywords are checked
    /// against each other only, not against the running configuration's.
    pub fn begin_build(&self) {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.rss_given.clear();
    }

    /// The devices named since [`DeviceTable::begin_build`] (or since the table was
    /// made), sorted.
    pub fn named(&self) -> BTreeSet<String> {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Closes the interfaces the table opened whose names are not in `keep` (once the
    /// routers holding them are gone, their sockets close) and gives the kernel back
    /// the forwarding it had on them. Ports handed to the table stay.
    pub fn close_except(&self, keep: &BTreeSet<String>) {
        let closed: Vec<String> = {
            let mut map = self.map();
            let gone: Vec<String> = map
                .values()
                .filter(|d| d.method.is_some() && !keep.contains(&d.name))
                .map(|d| d.name.clone())
                .collect();
            for name in &gone {
                map.remove(name);
            }
            gone
        };
        self.kernel_forwarding
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|g| !closed.iter().any(|n| n == g.interface()));
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Device>> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn live_rx(&self, worker: usize) -> Arc<AtomicUsize> {
        let mut v = self.live_rx.lock().unwrap_or_else(|e| e.into_inner());
        while v.len() <= worker {
            v.push(Arc::new(AtomicUsize::new(0)));
        }
        v[worker].clone()
    }

    /// The port `name`, opened now if the table opens interfaces and this is its first
    /// use; `method` is the element's METHOD, if given. For an element that `receives`,
    /// a port that would miss some of the interface's frames ([`Port::receive_problem`])
    /// is refused, or, newly opened with no METHOD given, replaced by AF_PACKET.
    fn lookup(
        &self,
        name: &str,
        method: Option<Method>,
        receives: bool,
        cx: &BuildContext,
    ) -> Result<Device, ConfigError> {
        self.named
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
        let d = self.lookup_open(name, method, receives, cx)?;
        match d.port.receive_problem().filter(|_| receives) {
            Some(why) => Err(cx.error(format!(
                "cannot receive from device '{}' (METHOD {}): {}: {}",
                name,
                d.method.map_or("?", |m| m.name()),
                name,
                why
            ))),
            None => Ok(d),
        }
    }

    fn lookup_open(
        &self,
        name: &str,
        method: Option<Method>,
        receives: bool,
        cx: &BuildContext,
    ) -> Result<Device, ConfigError> {
        let mut map = self.map();
        if let Some(d) = map.get(name) {
            return match (method, d.method) {
                (Some(_), None) => Err(cx.error(format!(
                    "METHOD applies to network interfaces; device '{}' is not one",
                    name
                ))),
                (Some(m), Some(open)) if m != open => Err(cx.error(format!(
                    "device '{}' is already open with METHOD {} (give every FromDevice and ToDevice of '{}' the same METHOD)",
                    name, open, name
                ))),
                _ => Ok(d.clone()),
            };
        }
        let Some(opener) = &self.opener else {
            let known: Vec<&str> = map.keys().map(|s| s.as_str()).collect();
            return Err(cx.error(if known.is_empty() {
                format!("unknown device '{}' (no devices are configured)", name)
            } else {
                format!("unknown device '{}' (known devices: {})", name, known.join(", "))
            }));
        };
        let queues = cx.workers.max(1);
        let m = method.unwrap_or(DEFAULT_METHOD);
        // Receiving from a port that would miss frames is an error, unless no METHOD
        // was given: then AF_PACKET, which reads every queue, takes its place.
        let opened = opener(name, m, queues).and_then(|port| match port.receive_problem() {
            Some(why) if receives && method.is_none() && m != Method::Packet => {
                Err(DeviceError::new(name, why))
            }
            _ => Ok(port),
        });
        let opened =
            match opened {
                Err(e) if method.is_none() && m != Method::Packet => {
                    // No METHOD given: AF_PACKET works on any interface AF_XDP cannot use.
                    opener(name, Method::Packet, queues)
                        .map(|port| {
                            graph::warn!(
                            "{}: warning: {} :: {}: device '{}' opened with METHOD PACKET (METHOD {}: {})",
                            cx.landmark, cx.name, cx.class, name, m, e
                        );
                            (port, Method::Packet)
                        })
                        .map_err(|_| (m, e))
                }
                Err(e) => Err((m, e)),
                Ok(port) => Ok((port, m)),
            };
        let (port, m) = opened
            .map_err(|(m, e)| cx.error(format!("cannot open device '{}' (METHOD {}): {}", name, m, e)))?;
        if let Some(w) = port.warning() {
            graph::warn!(
                "{}: warning: {} :: {}: device '{}': {}",
                cx.landmark,
                cx.name,
                cx.class,
                name,
                w
            );
        }
        let d = Device {
            name: name.to_string(),
            port,
            method: Some(m),
        };
        map.insert(name.to_string(), d.clone());
        Ok(d)
    }
}

/// Registers `FromDevice` and `ToDevice` over `devices` in `reg`.
pub fn register(reg: &mut Registry, devices: &Arc<DeviceTable>) {
    reg.add(Arc::new(FromDeviceClass {
        devices: devices.clone(),
    }));
    reg.add(Arc::new(ToDeviceClass {
        devices: devices.clone(),
    }));
}

/// The queue an element uses, checked against the port and the number of workers.
fn choose_queue(dev: &Device, queue: Option<usize>, cx: &BuildContext) -> Result<Option<usize>, ConfigError> {
    let nq = dev.port.queues();
    let plural = if nq == 1 { "" } else { "s" };
    match queue {
        Some(q) if q >= nq => Err(cx.error(format!(
            "QUEUE {} out of range: device '{}' has {} queue{}{}",
            q,
            dev.name,
            nq,
            plural,
            if dev.method.is_some() {
                " (an interface has one queue per worker)"
            } else {
                ""
            }
        ))),
        Some(q) => Ok(Some(q)),
        None if cx.workers > nq => Err(cx.error(format!(
            "device '{}' has {} queue{} for {} workers (give QUEUE, or one queue per worker)",
            dev.name, nq, plural, cx.workers
        ))),
        None => Ok(None),
    }
}

/// The element's `METHOD` keyword, if given.
fn method_arg(args: &mut Args, cx: &BuildContext) -> Result<Option<Method>, ConfigError> {
    match args.keyword::<String>("METHOD").map_err(|e| cx.error(e))? {
        None => Ok(None),
        Some(w) => Method::parse(&w)
            .map(Some)
            .ok_or_else(|| cx.error(format!("METHOD must be PACKET or XDP, not '{}'", w))),
    }
}

fn burst_arg(args: &mut Args, default: usize, cx: &BuildContext) -> Result<usize, ConfigError> {
    let b = args
        .keyword::<usize>("BURST")
        .map_err(|e| cx.error(e))?
        .unwrap_or(default);
    if b == 0 || b > MAX_BATCH {
        return Err(cx.error(format!("BURST must be between 1 and {}", MAX_BATCH)));
    }
    Ok(b)
}

/// Read handler `count` and write handler `reset_counts`, shared by both classes, and
/// the handlers of the port ([`port_handlers`]).
fn device_handlers(port: &dyn Port) -> Vec<HandlerInfo> {
    let mut h = vec![HandlerInfo::read("count"), HandlerInfo::write("reset_counts")];
    h.extend(port_handlers::handlers(port));
    h
}

fn read_count(count: &WorkerCounters, name: &str) -> Option<String> {
    (name == "count").then(|| count.sum().to_string())
}

fn write_reset(count: &WorkerCounters, name: &str) -> Option<Result<(), String>> {
    (name == "reset_counts").then(|| {
        count.reset();
        Ok(())
    })
}

pub struct FromDeviceClass {
    devices: Arc<DeviceTable>,
}

impl ElementClass for FromDeviceClass {
    fn name(&self) -> &'static str {
        "FromDevice"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let dev = args.required::<String>("DEVNAME").map_err(|e| cx.error(e))?;
        let queue = args.keyword::<usize>("QUEUE").map_err(|e| cx.error(e))?;
        let burst = burst_arg(args, DEFAULT_BATCH, cx)?;
        let method = method_arg(args, cx)?;
        let rss = rss_config::RssKeywords::take(args, cx)?;
        args.finish().map_err(|e| cx.error(e))?;
        let device = self.devices.lookup(&dev, method, true, cx)?;
        self.devices
            .rss_given
            .apply(&dev, device.method, &*device.port, &rss, cx)?;
        let queue = choose_queue(&device, queue, cx)?;
        Ok(Arc::new(FromDeviceSpec {
            devices: self.devices.clone(),
            port: device.port,
            queue,
            burst,
            count: Arc::new(WorkerCounters::new(cx.workers)),
        }))
    }
}

struct FromDeviceSpec {
    devices: Arc<DeviceTable>,
    port: Arc<dyn Port>,
    queue: Option<usize>,
    burst: usize,
    count: Arc<WorkerCounters>,
}

impl ElementSpec for FromDeviceSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let (queue, active) = match self.queue {
            Some(q) => (q, q % w.count.max(1) == w.index),
            None => (w.index, true),
        };
        let live = active.then(|| {
            let l = self.devices.live_rx(w.index);
            l.fetch_add(1, Ordering::Relaxed);
            l
        });
        Box::new(FromDevice {
            port: self.port.clone(),
            queue,
            burst: self.burst,
            batch: PacketBatch::new(),
            live,
            count: self.count.clone(),
            worker: w.index,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        device_handlers(&*self.port)
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        read_count(&self.count, name).or_else(|| port_handlers::read(&*self.port, Direction::Receive, name))
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        write_reset(&self.count, name).or_else(|| port_handlers::write(&*self.port, name, value))
    }
}

struct FromDevice {
    port: Arc<dyn Port>,
    queue: usize,
    burst: usize,
    batch: PacketBatch,
    /// This worker's count of polling `FromDevice`s, while this one still polls.
    live: Option<Arc<AtomicUsize>>,
    count: Arc<WorkerCounters>,
    /// Index of the worker running this instance: its slot in `count`.
    worker: usize,
}

impl FromDevice {
    fn retire(&mut self) -> TaskStatus {
        if let Some(l) = self.live.take() {
            l.fetch_sub(1, Ordering::Relaxed);
        }
        TaskStatus::Done
    }
}

impl Drop for FromDevice {
    fn drop(&mut self) {
        self.retire();
    }
}

impl Element for FromDevice {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        batch.clear();
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        if self.live.is_none() || cx.stop_requested() {
            return self.retire();
        }
        let n = self.port.rx_burst(self.queue, &mut self.batch, self.burst);
        if n > 0 {
            self.count.add(self.worker, n as u64);
            out.push_batch(0, &mut self.batch);
        }
        if self.port.rx_finished(self.queue) {
            self.retire()
        } else if n > 0 {
            TaskStatus::Busy
        } else {
            TaskStatus::Idle
        }
    }

    fn idle_wait(&mut self) -> IdleWait {
        match self.port.wait_fd(self.queue) {
            Some(fd) => IdleWait::Readable(fd),
            None => IdleWait::Poll,
        }
    }
}

pub struct ToDeviceClass {
    devices: Arc<DeviceTable>,
}

impl ElementClass for ToDeviceClass {
    fn name(&self) -> &'static str {
        "ToDevice"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/0")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let dev = args.required::<String>("DEVNAME").map_err(|e| cx.error(e))?;
        let queue = args.keyword::<usize>("QUEUE").map_err(|e| cx.error(e))?;
        let burst = burst_arg(args, DEFAULT_TX_BURST, cx)?;
        let flush_us = args
            .keyword::<u64>("FLUSH_US")
            .map_err(|e| cx.error(e))?
            .unwrap_or(DEFAULT_FLUSH_US);
        let method = method_arg(args, cx)?;
        let rss = rss_config::RssKeywords::take(args, cx)?;
        args.finish().map_err(|e| cx.error(e))?;
        let device = self.devices.lookup(&dev, method, false, cx)?;
        self.devices
            .rss_given
            .apply(&dev, device.method, &*device.port, &rss, cx)?;
        let queue = choose_queue(&device, queue, cx)?;
        Ok(Arc::new(ToDeviceSpec {
            devices: self.devices.clone(),
            port: device.port,
            queue,
            burst,
            flush: Duration::from_micros(flush_us),
            count: Arc::new(WorkerCounters::new(cx.workers)),
        }))
    }
}

struct ToDeviceSpec {
    devices: Arc<DeviceTable>,
    port: Arc<dyn Port>,
    queue: Option<usize>,
    burst: usize,
    flush: Duration,
    count: Arc<WorkerCounters>,
}

impl ElementSpec for ToDeviceSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ToDevice {
            port: self.port.clone(),
            queue: self.queue.unwrap_or(w.index),
            burst: self.burst,
            flush_ticks: (self.flush.as_secs_f64() * crate::tsc::tsc_hz()) as u64,
            buf: PacketBatch::new(),
            since: None,
            live_rx: self.devices.live_rx(w.index),
            timer_live: true,
            count: self.count.clone(),
            worker: w.index,
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        device_handlers(&*self.port)
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        read_count(&self.count, name).or_else(|| port_handlers::read(&*self.port, Direction::Transmit, name))
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        write_reset(&self.count, name).or_else(|| port_handlers::write(&*self.port, name, value))
    }
}

struct ToDevice {
    port: Arc<dyn Port>,
    queue: usize,
    burst: usize,
    /// The flush timeout in TSC ticks: the timer is read on every pass of the worker,
    /// and a clock_gettime there cost more than the rest of the transmit path.
    flush_ticks: u64,
    /// Packets waiting for a full group.
    buf: PacketBatch,
    /// TSC reading when the oldest packet in `buf` arrived.
    since: Option<u64>,
    live_rx: Arc<AtomicUsize>,
    /// False once `run` returned Done: no timer flushes any more.
    timer_live: bool,
    count: Arc<WorkerCounters>,
    /// Index of the worker running this instance: its slot in `count`.
    worker: usize,
}

impl ToDevice {
    fn flush(&mut self) {
        self.since = None;
        if !self.buf.is_empty() {
            let n = self.port.tx_burst(self.queue, &mut self.buf);
            self.count.add(self.worker, n as u64);
        }
    }
}

impl Drop for ToDevice {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Element for ToDevice {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        if self.buf.is_empty() && batch.len() >= self.burst {
            // At least one whole group: hand the batch to the port as it is, without
            // moving packets (a port takes any number of groups in one call).
            let n = self.port.tx_burst(self.queue, batch);
            self.count.add(self.worker, n as u64);
            return;
        }
        self.buf.append(batch);
        if self.buf.len() >= self.burst {
            self.flush();
        }
        if !self.timer_live {
            self.flush();
        } else if !self.buf.is_empty() && self.since.is_none() {
            self.since = Some(cx.now_tsc());
        }
    }

    fn is_source(&self) -> bool {
        true
    }

    fn run(&mut self, _out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        if cx.stop_requested() || self.live_rx.load(Ordering::Relaxed) == 0 {
            self.flush();
            self.timer_live = false;
            return TaskStatus::Done;
        }
        // Until the partial group's deadline nothing is due here; a group started later
        // (by a push) has a later deadline than now + the timeout.
        let now = cx.now_tsc();
        let deadline = match self.since {
            Some(t) if now.wrapping_sub(t) >= self.flush_ticks => {
                self.flush();
                now
            }
            Some(t) => t,
            None => now,
        };
        TaskStatus::IdleUntil(deadline.saturating_add(self.flush_ticks))
    }

    fn idle_wait(&mut self) -> IdleWait {
        // Nothing has come in for a while: a partial group would only wait for its
        // flush timer, so it leaves now and the worker may sleep.
        self.flush();
        if self.buf.is_empty() {
            IdleWait::Nothing
        } else {
            IdleWait::Poll
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::error::Landmark;
    use graph::testing::Harness;
    use io::MemPort;
    use packet::Packet;
    use std::path::Path;

    fn table(ports: &[(&str, Arc<MemPort>)]) -> Arc<DeviceTable> {
        let mut t = DeviceTable::new();
        for (n, p) in ports {
            t.insert(*n, p.clone() as Arc<dyn Port>);
        }
        Arc::new(t)
    }

    fn frame(i: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, i, 10, 0, 0, 1]);
        f.extend_from_slice(&[0x10, i, 0, 9, 0, 8, 0, 0]);
        f
    }

    fn build_error(class: &dyn ElementClass, config: &str, workers: usize) -> String {
        let lm = Landmark::unknown();
        let cx = BuildContext {
            name: "d",
            class: class.name(),
            landmark: &lm,
            ninputs: 0,
            noutputs: 1,
            base_dir: Path::new("."),
            workers,
            peers: Default::default(),
        };
        match class.build(&mut Args::new(config), &cx) {
            Ok(_) => panic!("{:?} accepted", config),
            Err(e) => e.message,
        }
    }

    #[test]
    fn configuration_errors() {
        let t = table(&[
            ("mem0", Arc::new(MemPort::new(2))),
            ("mem1", Arc::new(MemPort::new(1))),
        ]);
        let fd = FromDeviceClass { devices: t.clone() };
        let td = ToDeviceClass { devices: t.clone() };
        assert_eq!(
            build_error(&fd, "eth0", 1),
            "d :: FromDevice: unknown device 'eth0' (known devices: mem0, mem1)"
        );
        assert_eq!(
            build_error(&td, "eth0", 1),
            "d :: ToDevice: unknown device 'eth0' (known devices: mem0, mem1)"
        );
        assert_eq!(
            build_error(&fd, "mem0, QUEUE 2", 1),
            "d :: FromDevice: QUEUE 2 out of range: device 'mem0' has 2 queues"
        );
        assert_eq!(
            build_error(&td, "mem1", 2),
            "d :: ToDevice: device 'mem1' has 1 queue for 2 workers (give QUEUE, or one queue per worker)"
        );
        assert_eq!(
            build_error(&fd, "mem0, BURST 0", 1),
            "d :: FromDevice: BURST must be between 1 and 256"
        );
        assert_eq!(
            build_error(&fd, "", 1),
            "d :: FromDevice: missing mandatory DEVNAME argument"
        );
        assert_eq!(
            build_error(&td, "mem0, SPEED 3", 1),
            "d :: ToDevice: bad keyword 'SPEED'"
        );
        // In-memory ports spread their frames once, when the benchmark makes them.
        assert_eq!(
            build_error(&fd, "mem0, RSS_TABLE equal 1", 1),
            "d :: FromDevice: RSS_TABLE is for interfaces opened with METHOD PACKET, which spread frames over their queues themselves; device 'mem0': this port does not spread frames over its queues by settings of its own"
        );
        let empty = FromDeviceClass {
            devices: Arc::new(DeviceTable::new()),
        };
        assert_eq!(
            build_error(&empty, "mem0", 1),
            "d :: FromDevice: unknown device 'mem0' (no devices are configured)"
        );
    }

    /// A table that "opens" any name starting with "if" as an in-memory port, records
    /// each opening, and refuses other names as the real opener would.
    /// The openings a fake opener saw: (name, method, queues).
    type OpenLog = Arc<Mutex<Vec<(String, Method, usize)>>>;

    fn fake_interfaces() -> (Arc<DeviceTable>, OpenLog) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let t = DeviceTable::with_opener(move |name, method, queues| {
            l.lock().unwrap().push((name.to_string(), method, queues));
            if name.starts_with("if") {
                Ok(Arc::new(MemPort::new(queues)) as Arc<dyn Port>)
            } else {
                Err(DeviceError::io(
                    name,
                    "find the interface",
                    std::io::Error::from_raw_os_error(19),
                ))
            }
        });
        (Arc::new(t), log)
    }

    fn build(class: &dyn ElementClass, config: &str, workers: usize) -> Result<Arc<dyn ElementSpec>, String> {
        let lm = Landmark::unknown();
        let cx = BuildContext {
            name: "d",
            class: class.name(),
            landmark: &lm,
            ninputs: 0,
            noutputs: 1,
            base_dir: Path::new("."),
            workers,
            peers: Default::default(),
        };
        class.build(&mut Args::new(config), &cx).map_err(|e| e.message)
    }

    #[test]
    fn interfaces_open_once_per_name_with_one_queue_per_worker() {
        let (t, log) = fake_interfaces();
        let fd = FromDeviceClass { devices: t.clone() };
        let td = ToDeviceClass { devices: t.clone() };
        build(&fd, "if0, METHOD PACKET", 3).unwrap();
        build(&td, "if0", 3).unwrap();
        build(&td, "if0, QUEUE 2, METHOD packet", 3).unwrap();
        build(&td, "if1, BURST 8", 3).unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            vec![
                ("if0".to_string(), Method::Packet, 3),
                ("if1".to_string(), DEFAULT_METHOD, 3)
            ]
        );
        let devs = t.devices();
        let summary: Vec<(String, Option<Method>, usize)> = devs
            .iter()
            .map(|d| (d.name.clone(), d.method, d.port.queues()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("if0".to_string(), Some(Method::Packet), 3),
                ("if1".to_string(), Some(Method::Xdp), 3)
            ]
        );
        // Both elements of if0 hold the same port.
        assert!(Arc::ptr_eq(&t.get("if0").unwrap(), &devs[0].port));
        t.clear();
        assert!(t.names().is_empty());
    }

    #[test]
    fn without_method_an_interface_falls_back_to_af_packet_where_af_xdp_fails() {
        let log: OpenLog = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        // "ifx" takes AF_XDP; "ifp" only AF_PACKET (say, a foreign XDP program).
        let t = Arc::new(DeviceTable::with_opener(move |name, method, queues| {
            l.lock().unwrap().push((name.to_string(), method, queues));
            if method == Method::Xdp && name == "ifp" {
                Err(DeviceError::new(
                    name,
                    "an XDP program of another owner is attached",
                ))
            } else {
                Ok(Arc::new(MemPort::new(queues)) as Arc<dyn Port>)
            }
        }));
        let fd = FromDeviceClass { devices: t.clone() };
        build(&fd, "ifx", 1).unwrap();
        build(&fd, "ifp", 1).unwrap();
        let methods: Vec<(String, Option<Method>)> =
            t.devices().iter().map(|d| (d.name.clone(), d.method)).collect();
        assert_eq!(
            methods,
            vec![
                ("ifp".to_string(), Some(Method::Packet)),
                ("ifx".to_string(), Some(Method::Xdp))
            ]
        );
        assert_eq!(
            *log.lock().unwrap(),
            vec![
                ("ifx".to_string(), Method::Xdp, 1),
                ("ifp".to_string(), Method::Xdp, 1),
                ("ifp".to_string(), Method::Packet, 1)
            ]
        );
        // An explicit METHOD XDP does not fall back: the failure is the answer.
        let t2 = Arc::new(DeviceTable::with_opener(|name, method, _| {
            if method == Method::Xdp {
                Err(DeviceError::new(
                    name,
                    "an XDP program of another owner is attached",
                ))
            } else {
                Ok(Arc::new(MemPort::new(1)) as Arc<dyn Port>)
            }
        }));
        let fd2 = FromDeviceClass { devices: t2 };
        assert_eq!(
            build(&fd2, "ifp, METHOD XDP", 1).err().unwrap(),
            "d :: FromDevice: cannot open device 'ifp' (METHOD XDP): ifp: an XDP program of another owner is attached"
        );
    }

    #[test]
    fn interface_errors_name_the_device_and_the_reason() {
        let (t, _) = fake_interfaces();
        let fd = FromDeviceClass { devices: t.clone() };
        let td = ToDeviceClass { devices: t.clone() };
        assert_eq!(
            build(&fd, "nosuch0", 1).err().unwrap(),
            format!(
                "d :: FromDevice: cannot open device 'nosuch0' (METHOD XDP): nosuch0: find the interface: {}",
                std::io::Error::from_raw_os_error(19)
            )
        );
        assert_eq!(
            build(&fd, "if0, METHOD DPDK", 1).err().unwrap(),
            "d :: FromDevice: METHOD must be PACKET or XDP, not 'DPDK'"
        );
        build(&fd, "if0", 2).unwrap();
        assert_eq!(
            build(&td, "if0, METHOD PACKET", 2).err().unwrap(),
            "d :: ToDevice: device 'if0' is already open with METHOD XDP (give every FromDevice and ToDevice of 'if0' the same METHOD)"
        );
        assert_eq!(
            build(&td, "if0, QUEUE 2", 2).err().unwrap(),
            "d :: ToDevice: QUEUE 2 out of range: device 'if0' has 2 queues (an interface has one queue per worker)"
        );
        // A port handed to the table is not an interface: METHOD makes no sense for it.
        let mut plain = DeviceTable::new();
        plain.insert("mem0", Arc::new(MemPort::new(1)) as Arc<dyn Port>);
        let fd = FromDeviceClass {
            devices: Arc::new(plain),
        };
        assert_eq!(
            build(&fd, "mem0, METHOD PACKET", 1).err().unwrap(),
            "d :: FromDevice: METHOD applies to network interfaces; device 'mem0' is not one"
        );
    }

    #[test]
    fn methods_parse_in_any_case_and_missing_interfaces_are_named() {
        for m in [Method::Packet, Method::Xdp] {
            let e = open_interface("brtnosuch9", m, 1).err().unwrap();
            assert!(
                e.to_string().starts_with("brtnosuch9: find the interface: "),
                "{}",
                e
            );
        }
        assert_eq!(Method::parse("xdp"), Some(Method::Xdp));
        assert_eq!(Method::parse("Packet"), Some(Method::Packet));
        assert_eq!(Method::parse("pcap"), None);
    }

    #[test]
    fn from_device_polls_bursts_until_budget_spent() {
        let frames = vec![frame(1), frame(2), frame(3)];
        let port = Arc::new(MemPort::with_traffic(1, &frames, Some(7)));
        let t = table(&[("mem0", port.clone())]);
        let mut h = Harness::new(&FromDeviceClass { devices: t }, "mem0, BURST 3", 0, 1);
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Busy);
        let got: Vec<Vec<u8>> = out[0].iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(got, vec![frame(1), frame(2), frame(3)]);
        let (st, out) = h.run();
        assert_eq!((st, out[0].len()), (TaskStatus::Busy, 3));
        // The last packet comes with Done: the queue's budget is spent.
        let (st, out) = h.run();
        assert_eq!(st, TaskStatus::Done);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &frame(1)[..]);
        assert_eq!(h.read("count"), "7");
        assert_eq!(port.stats(0).rx_packets, 7);
        h.write("reset_counts", "").unwrap();
        assert_eq!(h.read("count"), "0");
    }

    #[test]
    fn from_device_done_when_no_frame_steers_to_its_queue() {
        // Endless traffic whose frames all steer to queue 1: queue 0 never receives.
        let mut reta = classify::Reta::new(2);
        for i in 0..128 {
            reta.set(i, 1).unwrap();
        }
        let port = Arc::new(MemPort::with_reta(reta, &[frame(1)], None));
        let t = table(&[("mem0", port)]);
        let mut h = Harness::new(&FromDeviceClass { devices: t }, "mem0", 0, 1);
        // Worker 0 polls queue 0: finished at once (no frame ever steers there).
        let (st, out) = h.run();
        assert_eq!((st, out[0].len()), (TaskStatus::Done, 0));
    }

    fn pkts(n: usize, len: usize) -> Vec<Packet> {
        (0..n).map(|_| Packet::from_slice(&vec![0xab; len])).collect()
    }

    #[test]
    fn to_device_groups_flushes_on_timeout_and_on_drop() {
        let rx = Arc::new(MemPort::with_traffic(1, &[frame(1)], None));
        let tx = Arc::new(MemPort::new(1));
        let t = table(&[("in", rx), ("out", tx.clone())]);
        // A polling FromDevice on worker 0 keeps ToDevice's timer alive.
        let _src = Harness::new(&FromDeviceClass { devices: t.clone() }, "in", 0, 1);
        let mut h = Harness::new(
            &ToDeviceClass { devices: t.clone() },
            "out, BURST 4, FLUSH_US 0",
            1,
            0,
        );
        // A batch of at least BURST packets leaves at once, as one call to the port.
        assert!(h.push(0, pkts(6, 60)).is_empty());
        assert_eq!(tx.stats(0).tx_packets, 6);
        assert_eq!(h.read("count"), "6");
        // Fewer than BURST wait for more...
        h.push(0, pkts(2, 60));
        h.push(0, pkts(1, 60));
        assert_eq!(tx.stats(0).tx_packets, 6);
        // ...until the group is complete...
        h.push(0, pkts(1, 60));
        assert_eq!(tx.stats(0).tx_packets, 10);
        // ...or the flush timeout passes (FLUSH_US 0: at the next run).
        h.push(0, pkts(2, 60));
        assert_eq!(tx.stats(0).tx_packets, 10);
        let (st, _) = h.run();
        assert!(matches!(st, TaskStatus::IdleUntil(_)), "{:?}", st);
        assert_eq!(tx.stats(0).tx_packets, 12);
        assert_eq!(tx.stats(0).tx_bytes, 720);
        // A whole group passes straight through.
        h.push(0, pkts(4, 100));
        assert_eq!(tx.stats(0).tx_packets, 16);
        // A long timeout: the partial group waits, then leaves when the element drops.
        let mut h2 = Harness::new(
            &ToDeviceClass { devices: t.clone() },
            "out, BURST 4, FLUSH_US 10000000",
            1,
            0,
        );
        h2.push(0, pkts(3, 60));
        let (st, _) = h2.run();
        // Nothing is due before the partial group's deadline, 10 s away.
        let TaskStatus::IdleUntil(deadline) = st else {
            panic!("{:?}", st)
        };
        let ten_s = 10.0 * crate::tsc::tsc_hz();
        let ahead = deadline.saturating_sub(crate::tsc::rdtsc()) as f64;
        assert!(ahead > 0.9 * ten_s && ahead <= ten_s, "{} ticks ahead", ahead);
        assert_eq!(tx.stats(0).tx_packets, 16);
        drop(h2);
        assert_eq!(tx.stats(0).tx_packets, 19);
        // A worker about to sleep asks first: the partial group leaves then, and the
        // element needs no polling while the worker sleeps.
        let mut h3 = Harness::new(
            &ToDeviceClass { devices: t.clone() },
            "out, BURST 4, FLUSH_US 10000000",
            1,
            0,
        );
        h3.push(0, pkts(3, 60));
        assert_eq!(tx.stats(0).tx_packets, 19);
        assert_eq!(h3.element.idle_wait(), IdleWait::Nothing);
        assert_eq!(tx.stats(0).tx_packets, 22);
        assert_eq!(h3.read("count"), "3");
    }

    #[test]
    fn to_device_without_feeding_source_sends_at_once() {
        let tx = Arc::new(MemPort::new(1));
        let t = table(&[("out", tx.clone())]);
        let mut h = Harness::new(&ToDeviceClass { devices: t }, "out, BURST 8", 1, 0);
        h.push(0, pkts(3, 60));
        assert_eq!(tx.stats(0).tx_packets, 0);
        // No FromDevice polls on this worker: run flushes and finishes...
        let (st, _) = h.run();
        assert_eq!(st, TaskStatus::Done);
        assert_eq!(tx.stats(0).tx_packets, 3);
        // ...and later pushes are sent immediately.
        h.push(0, pkts(2, 60));
        assert_eq!(tx.stats(0).tx_packets, 5);
        assert_eq!(h.read("count"), "5");
    }
}
