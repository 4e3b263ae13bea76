//! `KernelTun` and `KernelTap` (and `FromHost`/`ToHost`, the older pair over one TAP
//! device): Click's user-level interfaces to the kernel's own stack
//! through a TUN (IP packets) or TAP (Ethernet frames) device (`io::TunDevice`). The
//! element creates the device, gives the kernel's side ADDR/MASK (and a default route
//! via GATEWAY), emits what the kernel sends into the device on output 0, and writes
//! what it is pushed into the device, as if the interface had received it.
//!
//! Worker 0 reads the device (a source that sleeps on its descriptor when idle); any
//! worker writes. A device named with DEVNAME outlives a `hotconfig` that keeps the
//! element (same name and class): the new configuration takes it over, addresses,
//! routes and all, instead of the kernel removing it and making it again.

use crate::control::arg;
use graph::args::{Args, EtherAddr, Ipv4Prefix};
use graph::element::*;
use graph::error::ConfigError;
use graph::registry::Registry;
use io::{TunDevice, TunKind, TunSettings};
use packet::{Packet, PacketBatch};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The largest MTU: what fits an IPv4 packet's length field.
const MAX_MTU: u32 = 65535;
/// The smallest MTU Click takes: more than an IPv4 header.
const MIN_MTU: u32 = 21;
/// Click's limit on HEADROOM.
const MAX_HEADROOM: usize = 8192;
const ETHER_HEADER: usize = 14;

pub fn register(reg: &mut Registry) {
    reg.add(Arc::new(KernelTunClass { kind: TunKind::Tun }));
    reg.add(Arc::new(KernelTunClass { kind: TunKind::Tap }));
    reg.add(Arc::new(FromHostClass));
    reg.add(Arc::new(ToHostClass));
}

/// A device and what has been set on it, shared by the element's workers and by the
/// element of the same name in a configuration that replaces this one.
struct Device {
    tun: TunDevice,
    /// The element that owns it (a device is never shared by two elements).
    owner: String,
    applied: Mutex<Option<Applied>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Applied {
    settings: TunSettings,
    gateway: Option<Ipv4Addr>,
}

/// Devices with a DEVNAME, by name, while an element holds them.
fn named_devices() -> &'static Mutex<HashMap<String, Weak<Device>>> {
    static DEVICES: std::sync::OnceLock<Mutex<HashMap<String, Weak<Device>>>> = std::sync::OnceLock::new();
    DEVICES.get_or_init(Default::default)
}

struct KernelTunClass {
    kind: TunKind,
}

impl KernelTunClass {
    fn class(&self) -> &'static str {
        match self.kind {
            TunKind::Tun => "KernelTun",
            TunKind::Tap => "KernelTap",
        }
    }
}

impl ElementClass for KernelTunClass {
    fn name(&self) -> &'static str {
        self.class()
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0-1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let prefix: Ipv4Prefix = arg(args.required("ADDR"), cx)?;
        let gateway: Option<Ipv4Addr> = arg(args.positional("GATEWAY"), cx)?;
        let tap: Option<bool> = arg(args.keyword("TAP"), cx)?;
        let headroom: Option<usize> = arg(args.keyword("HEADROOM"), cx)?;
        let burst: usize = arg(args.keyword("BURST"), cx)?.unwrap_or(1);
        let ether: Option<EtherAddr> = arg(args.keyword("ETHER"), cx)?;
        let ignore_overflows: bool = arg(args.keyword("IGNORE_QUEUE_OVERFLOWS"), cx)?.unwrap_or(false);
        let mtu: Option<u32> = arg(args.keyword("MTU"), cx)?;
        let devname: Option<String> = match arg(args.keyword("DEVNAME"), cx)? {
            Some(n) => Some(n),
            None => arg(args.keyword("DEV_NAME"), cx)?,
        };
        arg(args.finish(), cx)?;
        if burst < 1 {
            return Err(cx.error("BURST must be >= 1"));
        }
        if headroom.is_some_and(|h| h > MAX_HEADROOM) {
            return Err(cx.error("HEADROOM too big"));
        }
        // KernelTun(..., TAP true) is a KernelTap, as in Click.
        let kind = match tap {
            Some(true) => TunKind::Tap,
            Some(false) => TunKind::Tun,
            None => self.kind,
        };
        let wanted = Wanted {
            kind,
            devname,
            applied: Some(applied(cx, prefix, gateway, mtu, ether)?),
            mtu,
            headroom,
            burst,
            ignore_overflows,
        };
        Ok(Arc::new(wanted.spec(self.class(), cx)?))
    }
}

/// The checked settings of a device's kernel side.
fn applied(
    cx: &BuildContext,
    prefix: Ipv4Prefix,
    gateway: Option<Ipv4Addr>,
    mtu: Option<u32>,
    ether: Option<EtherAddr>,
) -> Result<Applied, ConfigError> {
    let gateway = gateway.filter(|g| !g.is_unspecified());
    if let Some(g) = gateway {
        let m = u32::from(prefix.mask);
        if u32::from(g) & m != u32::from(prefix.addr) & m {
            return Err(cx.error("bad GATEWAY"));
        }
    }
    check_mtu(cx, mtu)?;
    Ok(Applied {
        settings: TunSettings {
            addr: prefix.addr,
            mask: prefix.mask,
            mtu,
            ether: ether.map(|e| e.0),
        },
        gateway,
    })
}

fn check_mtu(cx: &BuildContext, mtu: Option<u32>) -> Result<(), ConfigError> {
    match mtu {
        Some(m) if m < MIN_MTU => Err(cx.error(format!("MTU must be greater than {}", MIN_MTU - 1))),
        Some(m) if m > MAX_MTU => Err(cx.error(format!("MTU must be at most {}", MAX_MTU))),
        _ => Ok(()),
    }
}

/// A device an element asks for, its arguments checked.
struct Wanted {
    kind: TunKind,
    devname: Option<String>,
    /// The kernel side's settings; `None` leaves the device as it is (FromHost without
    /// DST, for a device set up beforehand).
    applied: Option<Applied>,
    mtu: Option<u32>,
    headroom: Option<usize>,
    burst: usize,
    ignore_overflows: bool,
}

impl Wanted {
    /// Opens the device (see [`open`]) for element `cx.name` of class `class`.
    fn spec(self, class: &'static str, cx: &BuildContext) -> Result<KernelTunSpec, ConfigError> {
        let device =
            open(self.kind, self.devname.as_deref(), self.applied, cx.name).map_err(|e| cx.error(e))?;
        let mtu = self.mtu.unwrap_or(1500) as usize;
        Ok(KernelTunSpec {
            shared: Arc::new(Shared {
                device,
                class,
                // What a read may bring: the MTU and, for a TAP device, the Ethernet
                // header.
                read_len: mtu
                    + if self.kind == TunKind::Tap {
                        ETHER_HEADER
                    } else {
                        0
                    },
                mtu,
                headroom: self.headroom.unwrap_or(packet::DEFAULT_HEADROOM),
                burst: self.burst,
                ignore_overflows: self.ignore_overflows,
                packets: AtomicU64::new(0),
                drops: AtomicU64::new(0),
                complained: Mutex::new(Vec::new()),
                overflow_reported: AtomicBool::new(false),
            }),
            has_error_output: cx.noutputs > 1,
        })
    }
}

/// Click's user-level FromHost: a TAP device named DEVNAME whose kernel side is DST,
/// the frames the kernel sends into it on output 0 (KernelTap with a mandatory name;
/// Click recommends KernelTap).
struct FromHostClass;

impl ElementClass for FromHostClass {
    fn name(&self) -> &'static str {
        "FromHost"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("0/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let devname: String = arg(args.required("DEVNAME"), cx)?;
        let dst: Option<Ipv4Prefix> = arg(args.positional("DST"), cx)?;
        let gateway: Option<Ipv4Addr> = arg(args.keyword("GATEWAY"), cx)?;
        let ether: Option<EtherAddr> = arg(args.keyword("ETHER"), cx)?;
        let headroom: Option<usize> = arg(args.keyword("HEADROOM"), cx)?;
        let mtu: Option<u32> = arg(args.keyword("MTU"), cx)?;
        arg(args.finish(), cx)?;
        if devname.is_empty() {
            return Err(cx.error("must specify device name"));
        }
        if headroom.is_some_and(|h| h > MAX_HEADROOM) {
            return Err(cx.error("HEADROOM too large"));
        }
        let applied = match dst {
            Some(prefix) => Some(applied(cx, prefix, gateway, mtu, ether)?),
            None => {
                check_mtu(cx, mtu)?;
                None
            }
        };
        let wanted = Wanted {
            kind: TunKind::Tap,
            devname: Some(devname),
            applied,
            mtu,
            headroom,
            burst: 1,
            ignore_overflows: false,
        };
        Ok(Arc::new(wanted.spec("FromHost", cx)?))
    }
}

/// Click's user-level ToHost: hands Ethernet frames to the kernel through the TAP
/// device of the FromHost with the same DEVNAME, configured before it (a later
/// configure phase, as Click's).
struct ToHostClass;

impl ElementClass for ToHostClass {
    fn name(&self) -> &'static str {
        "ToHost"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/0")
    }
    fn configure_phase(&self) -> i32 {
        configure_phase::DEFAULT + 1
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let devname: String = arg(args.required("DEVNAME"), cx)?;
        arg(args.finish(), cx)?;
        let from = cx
            .peers_of_class("FromHost")
            .filter_map(|p| spec_as::<KernelTunSpec>(&*p.spec))
            .find(|f| f.shared.name() == devname)
            .ok_or_else(|| {
                cx.error(format!(
                    "ToHost({}) requires an initialized FromHost with the same dev_name",
                    devname
                ))
            })?;
        Ok(Arc::new(ToHostSpec {
            shared: from.shared.clone(),
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct ToHostSpec {
    shared: Arc<Shared>,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for ToHostSpec {
    fn instantiate(&self, _worker: WorkerInfo) -> Box<dyn Element> {
        Box::new(ToHost {
            shared: self.shared.clone(),
            drops: self.drops.clone(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("dev_name"), HandlerInfo::read("drops")]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "dev_name" => self.shared.name().to_string(),
            "drops" => self.drops.load(Ordering::Relaxed).to_string(),
            _ => return None,
        })
    }
}

struct ToHost {
    shared: Arc<Shared>,
    drops: Arc<AtomicU64>,
}

impl Element for ToHost {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for p in batch.drain() {
            if !self.shared.write(&p) {
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The device for element `owner`: the one it had in the configuration this one
/// replaces (DEVNAME given; set up again where the settings changed), or a new one.
fn open(
    kind: TunKind,
    devname: Option<&str>,
    applied: Option<Applied>,
    owner: &str,
) -> Result<Arc<Device>, String> {
    let mut named = named_devices().lock().unwrap_or_else(|e| e.into_inner());
    named.retain(|_, d| d.strong_count() > 0);
    if let Some(name) = devname {
        if let Some(d) = named.get(name).and_then(Weak::upgrade) {
            if d.owner != owner || d.tun.kind() != kind {
                return Err(format!("device {} is in use by '{}'", name, d.owner));
            }
            let mut was = d.applied.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(a) = applied.filter(|a| *was != Some(*a)) {
                set_up(&d.tun, &a, was.and_then(|w| w.gateway))?;
                *was = Some(a);
            }
            drop(was);
            return Ok(d);
        }
    }
    let tun = TunDevice::create(kind, devname).map_err(|e| match devname {
        Some(n) => format!("could not allocate device {}: {}", n, e),
        None => format!("could not allocate a device: {}", e),
    })?;
    if let Some(a) = &applied {
        set_up(&tun, a, None)?;
    }
    let d = Arc::new(Device {
        tun,
        owner: owner.to_string(),
        applied: Mutex::new(applied),
    });
    if let Some(name) = devname {
        named.insert(name.to_string(), Arc::downgrade(&d));
    }
    Ok(d)
}

/// Sets the kernel side of `tun` up; adds the default route unless `had` is that
/// route already.
fn set_up(tun: &TunDevice, a: &Applied, had: Option<Ipv4Addr>) -> Result<(), String> {
    tun.configure(&a.settings)
        .map_err(|e| format!("{}: {}", tun.name(), e))?;
    if let Some(g) = a.gateway.filter(|g| had != Some(*g)) {
        io::rtnl::add_default_route(g)
            .map_err(|e| format!("{}: adding the default route via {}: {}", tun.name(), g, e))?;
    }
    Ok(())
}

struct Shared {
    device: Arc<Device>,
    class: &'static str,
    read_len: usize,
    mtu: usize,
    headroom: usize,
    burst: usize,
    ignore_overflows: bool,
    /// Packets read from the device (Click's `packets`).
    packets: AtomicU64,
    /// Packets not written: too short, no IP header, over the MTU, refused.
    drops: AtomicU64,
    /// The complaints printed already (each once).
    complained: Mutex<Vec<String>>,
    overflow_reported: AtomicBool,
}

impl Shared {
    fn name(&self) -> &str {
        self.device.tun.name()
    }

    /// Says why a packet was not written, once for each reason (a router must not
    /// flood its log at line rate). Returns false, for [`Shared::write`].
    fn refuse(&self, why: String) -> bool {
        let mut said = self.complained.lock().unwrap_or_else(|e| e.into_inner());
        if !said.contains(&why) {
            graph::warn!("{}({}): {}", self.class, self.name(), why);
            said.push(why);
        }
        false
    }

    /// Hands `p` to the kernel; false if it was not written (the caller counts it). A
    /// full queue (ENOBUFS) is said once when IGNORE_QUEUE_OVERFLOWS is set, else as
    /// every other reason.
    fn write(&self, p: &Packet) -> bool {
        let bytes = match self.device.tun.kind() {
            TunKind::Tap => {
                if p.len() < ETHER_HEADER {
                    return self.refuse("packet too small".into());
                }
                if p.len() - ETHER_HEADER > self.mtu {
                    return self.refuse(format!("packet larger than MTU ({})", self.mtu));
                }
                p.data()
            }
            TunKind::Tun => {
                let Some(ip) = p.network_header().filter(|h| h.len() >= 20) else {
                    return self.refuse("no network header".into());
                };
                let version = ip[0] >> 4;
                if version != 4 && version != 6 {
                    return self.refuse(format!("unknown IP version {}", version));
                }
                if ip.len() > self.mtu {
                    return self.refuse(format!("packet larger than MTU ({})", self.mtu));
                }
                ip
            }
        };
        match self.device.tun.write(bytes) {
            Ok(()) => true,
            Err(e)
                if e.raw_os_error() == Some(libc::ENOBUFS)
                    && self.ignore_overflows
                    && self.overflow_reported.swap(true, Ordering::Relaxed) =>
            {
                false
            }
            Err(e) => self.refuse(format!("write failed: {}", e)),
        }
    }
}

struct KernelTunSpec {
    shared: Arc<Shared>,
    has_error_output: bool,
}

impl ElementSpec for KernelTunSpec {
    fn instantiate(&self, worker: WorkerInfo) -> Box<dyn Element> {
        Box::new(KernelTun {
            shared: self.shared.clone(),
            reads: worker.index == 0,
            has_error_output: self.has_error_output,
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("dev_name"),
            HandlerInfo::read("packets"),
            HandlerInfo::read("drops"),
        ]
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        Some(match name {
            "dev_name" => s.name().to_string(),
            "packets" => s.packets.load(Ordering::Relaxed).to_string(),
            "drops" => s.drops.load(Ordering::Relaxed).to_string(),
            _ => return None,
        })
    }
}

struct KernelTun {
    shared: Arc<Shared>,
    /// Worker 0 reads the device; every worker writes.
    reads: bool,
    has_error_output: bool,
}

impl KernelTun {
    /// One packet from the device, if the kernel has one: output 0, or for a TUN
    /// device a packet that is not IPv4 or IPv6 to output 1 (dropped without one).
    fn read_one(&mut self, out: &mut Outputs<'_>, now: packet::Timestamp) -> bool {
        let s = &*self.shared;
        let mut p = Packet::alloc_with_headroom(s.headroom, s.read_len);
        let n = match s.device.tun.read(p.data_mut()) {
            Ok(Some(n)) => n,
            Ok(None) => return false,
            Err(e) => {
                if !(s.ignore_overflows && e.raw_os_error() == Some(libc::ENOBUFS)) {
                    graph::warn!("{}({}): read failed: {}", s.class, s.name(), e);
                }
                return false;
            }
        };
        p.set_len(n);
        s.packets.fetch_add(1, Ordering::Relaxed);
        p.anno_mut().timestamp = now;
        let port = match s.device.tun.kind() {
            TunKind::Tap => {
                p.set_mac_header(0);
                0
            }
            TunKind::Tun => match ip_header_length(p.data()) {
                Some(hlen) => {
                    p.set_network_header(0, hlen);
                    0
                }
                None => 1,
            },
        };
        if port == 0 || self.has_error_output {
            out.push(port, p);
        }
        true
    }
}

/// The header length of the IPv4 or IPv6 packet `b` starts with, if it does (Click's
/// `fake_pcap_force_ip` on a raw IP packet).
fn ip_header_length(b: &[u8]) -> Option<usize> {
    match b.first()? >> 4 {
        4 => {
            let hlen = usize::from(b[0] & 0x0f) * 4;
            (hlen >= 20 && b.len() >= hlen).then_some(hlen)
        }
        6 => (b.len() >= 40).then_some(40),
        _ => None,
    }
}

impl Element for KernelTun {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for p in batch.drain() {
            if !self.shared.write(&p) {
                self.shared.drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn is_source(&self) -> bool {
        self.reads
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let now = cx.now();
        let mut moved = 0;
        while moved < self.shared.burst && self.read_one(out, now) {
            moved += 1;
        }
        if moved > 0 {
            TaskStatus::Busy
        } else {
            TaskStatus::Idle
        }
    }

    fn idle_wait(&mut self) -> IdleWait {
        IdleWait::Readable(self.shared.device.tun.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_headers_are_recognised_as_fake_pcap_does() {
        let mut v4 = vec![0x45u8; 20];
        assert_eq!(ip_header_length(&v4), Some(20));
        v4[0] = 0x46; // 24-byte header, 20 bytes present
        assert_eq!(ip_header_length(&v4), None);
        v4[0] = 0x44; // header length below 20
        assert_eq!(ip_header_length(&v4), None);
        assert_eq!(ip_header_length(&[0x60; 40]), Some(40));
        assert_eq!(ip_header_length(&[0x60; 39]), None);
        assert_eq!(ip_header_length(&[0x08, 0x06]), None);
        assert_eq!(ip_header_length(&[]), None);
    }
}
