//! Click's IPv4 route-lookup elements: `RadixIPLookup`, `DirectIPLookup`,
//! `StaticIPLookup` and `LinearIPLookup`.
//!
//! All four share one implementation over [`lpm::Ipv4Lpm`]; they differ, as in Click, in
//! their handlers, in how the `table` handler orders and formats routes, and in a few
//! update rules (see [`Flavor`]). Configuration: one route per argument,
//! `ADDR/MASK [GW] OUT`. A packet's destination-address annotation is looked up; a
//! packet whose route has a gateway gets the gateway as its new annotation; the packet
//! leaves on the route's output; packets without a route are dropped.
//!
//! brickroute's extension: a multipath route, `ADDR/MASK [GW] OUT [weight N] [GW] OUT
//! [weight N] ...`, has several (gateway, output) members, and each packet takes the
//! member that a hash of its IPv4 source and destination picks, in the members' shares
//! (`multipath.rs`).
//!
//! Workers share one `Arc<Ipv4Lpm>` and one lock-free next-hop table (gateway and port
//! per next-hop index, see `hopindex.rs`). Handler writes update both in place under a
//! control-side mutex that the data path never takes; each batch costs one pin and one
//! `lookup_batch_in`.

use super::hopindex::HopIndex;
use super::multipath::{self, Group, Groups, RouteError, Weighted};
use crate::args::{split_words, uncomment, Args, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::elements::slots::FreeSlots;
use crate::error::ConfigError;
use lpm::Ipv4Lpm;
use packet::PacketBatch;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Which Click class an element is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Table in insertion-slot order (freed slots reused newest first), tab-separated;
    /// `set` replaces; `remove` needs a matching gateway and port if given.
    Radix,
    /// Table in Click's hash order, tab-separated, with `0.0.0.0` for no gateway; a
    /// `flush` handler; `remove` ignores gateway and port.
    Direct,
    /// Like `Linear` but with no write handlers.
    Static,
    /// Table in slot order (the first free slot is reused), space-separated.
    Linear,
}

/// Distinct (gateway, output) pairs a table can hold at once.
const MAX_HOPS: usize = 1 << 16;

/// A next-hop slot's value for a multipath group: no gateway, and an output no element
/// has (a worker that read it without the group's members would drop the packet).
const GROUP: u64 = u32::MAX as u64;

/// One of the four classes.
pub struct IpLookupClass {
    flavor: Flavor,
}

impl IpLookupClass {
    pub const RADIX: IpLookupClass = IpLookupClass {
        flavor: Flavor::Radix,
    };
    pub const DIRECT: IpLookupClass = IpLookupClass {
        flavor: Flavor::Direct,
    };
    pub const STATIC: IpLookupClass = IpLookupClass {
        flavor: Flavor::Static,
    };
    pub const LINEAR: IpLookupClass = IpLookupClass {
        flavor: Flavor::Linear,
    };
}

impl ElementClass for IpLookupClass {
    fn name(&self) -> &'static str {
        match self.flavor {
            Flavor::Radix => "RadixIPLookup",
            Flavor::Direct => "DirectIPLookup",
            Flavor::Static => "StaticIPLookup",
            Flavor::Linear => "LinearIPLookup",
        }
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let spec = IpLookupSpec::new(self.flavor, cx.noutputs);
        let mut first_err = None;
        {
            let mut ctl = spec.lock();
            for (i, arg) in args.rest().iter().enumerate() {
                match parse_route(arg, false) {
                    Err(RouteError::Members(e)) => {
                        first_err.get_or_insert_with(|| format!("argument {}: {}", i + 1, e));
                    }
                    Ok(r)
                        if r.hops
                            .iter()
                            .all(|&((_, port), _)| port >= 0 && (port as usize) < cx.noutputs) =>
                    {
                        // As in Click, a later route for the same prefix is ignored.
                        if let Err(CmdError::TooManyHops) = spec.add_route(&mut ctl, r, false) {
                            first_err.get_or_insert_with(|| CmdError::TooManyHops.text(self.flavor));
                        }
                    }
                    Ok(_) => {
                        first_err.get_or_insert_with(|| format!("argument {} bad OUTPUT", i + 1));
                    }
                    Err(RouteError::Syntax) => {
                        first_err.get_or_insert_with(|| {
                            format!("argument {} should be 'ADDR/MASK [GATEWAY] OUTPUT'", i + 1)
                        });
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(cx.error(e)),
            None => Ok(Arc::new(spec)),
        }
    }
}

/// A next hop: gateway (0 for none) and output port.
type Member = (u32, i32);

/// A route as Click's `IPRoute`: prefix, and its (gateway, output) member, or several
/// for a multipath route (none in a `remove` request means "any").
#[derive(Clone, Debug, PartialEq, Eq)]
struct Route {
    addr: u32,
    len: u8,
    hops: Vec<Weighted<Member>>,
}

impl Route {
    fn prefix(&self) -> String {
        format!("{}/{}", Ipv4Addr::from(self.addr), self.len)
    }

    /// Click's `IPRoute::unparse` without tabs: `ADDR/MASK GW PORT`, a `GW PORT
    /// [weight N]` a member (a removal's "any" as Click writes it, `- -1`).
    fn unparse(&self) -> String {
        let any = [((0, -1), 1)];
        let hops = if self.hops.is_empty() {
            &any[..]
        } else {
            &self.hops
        };
        let members = multipath::members_text(hops, " ", |(gw, port)| format!("{} {}", gw_text(gw), port));
        format!("{} {}", self.prefix(), members)
    }

    /// Click's tabbed form: columns padded with a second tab when short (a multipath
    /// route's further members follow as `GW<TAB>PORT`, and `<TAB>weight<TAB>N` after
    /// one of weight above 1). `gw` writes a gateway.
    fn unparse_tabs(&self, gw: fn(u32) -> String, out: &mut String) {
        let start = out.len();
        let _ = write!(out, "{}\t", self.prefix());
        if out.len() < start + 17 {
            out.push('\t');
        }
        for (i, &((g, port), weight)) in self.hops.iter().enumerate() {
            if i > 0 {
                out.push('\t');
            }
            let start = out.len();
            let _ = write!(out, "{}\t", gw(g));
            if out.len() < start + 9 {
                out.push('\t');
            }
            let _ = write!(out, "{}", port);
            if weight > 1 {
                let _ = write!(out, "\tweight\t{}", weight);
            }
        }
    }

    /// Click's `IPRoute::match`: same prefix, and same members unless the request names
    /// none.
    fn matches(&self, req: &Route) -> bool {
        self.addr == req.addr && self.len == req.len && (req.hops.is_empty() || self.hops == req.hops)
    }
}

/// A gateway as Click writes it in its untabbed tables: `-` for none.
fn gw_text(gw: u32) -> String {
    if gw == 0 {
        "-".to_string()
    } else {
        Ipv4Addr::from(gw).to_string()
    }
}

/// A gateway as DirectIPLookup's table writes it: `0.0.0.0` for none.
fn gw_dotted(gw: u32) -> String {
    Ipv4Addr::from(gw).to_string()
}

fn mask_of(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Parses `ADDR/MASK [GW] OUT` (Click's `cp_ip_route`), or a multipath route's
/// `ADDR/MASK [GW] OUT [weight N] [GW] OUT [weight N] ...`. In a removal the members may be left out
/// ("any", as a lone gateway or a negative output says too). A gateway may be `-` for
/// none. Masks must be contiguous.
fn parse_route(s: &str, remove: bool) -> Result<Route, RouteError> {
    let words = split_words(s);
    let mut it = words.iter().map(String::as_str);
    let p = it
        .next()
        .and_then(Ipv4Prefix::from_arg)
        .ok_or(RouteError::Syntax)?;
    let len = p.len().ok_or(RouteError::Syntax)?;
    let addr = u32::from(p.addr) & mask_of(len);
    let mut hops = multipath::read_members(&mut it, |w, it, first| {
        // A gateway (or `-`) is followed by its output; an output stands alone.
        let (gw, port) = match (w, Ipv4Addr::from_arg(w)) {
            (_, None) if w != "-" => (0, w),
            (_, a) => match it.next() {
                Some(port) => (a.map_or(0, u32::from), port),
                // As in Click, a removal's lone gateway (no output) means "any".
                None if remove && first => return Ok(None),
                None => return Err(RouteError::Syntax),
            },
        };
        Ok(Some((gw, i32::from_arg(port).ok_or(RouteError::Syntax)?)))
    })?;
    if hops.is_empty() && !remove {
        return Err(RouteError::Syntax);
    }
    // As in Click, a removal's negative output (`- -1`, as a not-found error writes
    // "any") means any route of the prefix.
    if remove && matches!(hops[..], [((_, port), _)] if port < 0) {
        hops.clear();
    }
    Ok(Route { addr, len, hops })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Add,
    Set,
    Remove,
}

enum CmdError {
    Exists(Route),
    NotFound(Route),
    TooManyHops,
}

impl CmdError {
    fn text(&self, flavor: Flavor) -> String {
        match self {
            CmdError::Exists(old) => format!("conflict with existing route '{}'", old.unparse()),
            CmdError::NotFound(_) if flavor == Flavor::Direct => "Entry not found".to_string(),
            CmdError::NotFound(r) => format!("route '{}' not found", r.unparse()),
            CmdError::TooManyHops => "Virtual port table size limit exceeded".to_string(),
        }
    }
}

struct Slot {
    route: Route,
    hop: u32,
    /// Insertion order, for DirectIPLookup's table order.
    seq: u64,
}

/// Control-side state, behind the spec's mutex.
struct Control {
    slots: Vec<Option<Slot>>,
    /// Free slots: RadixIPLookup reuses the newest, the other classes the lowest.
    free: FreeSlots,
    index: HashMap<(u32, u8), usize>,
    /// Which (gateway, port) pair, or multipath group of them, holds which next-hop
    /// index.
    hop_index: HopIndex<Vec<Weighted<Member>>>,
    seq: u64,
    /// While a `ctrl` write runs: its table changes, applied together when it ends
    /// (`Ipv4Lpm::apply`: workers see the write whole; a large one is built into a new
    /// table).
    pending: Option<Vec<(u32, u8, Option<u32>)>>,
    /// Next-hop indices whose last route a `ctrl` write removed, with their pairs:
    /// until the write's changes reach the table, routes there may still name them, so
    /// they are retired only after (and a pair acquired again meanwhile, as when a
    /// failed write is undone, keeps its index).
    held_hops: Vec<(u32, Vec<Weighted<Member>>)>,
}

/// The configured element, shared by every worker.
pub struct IpLookupSpec {
    flavor: Flavor,
    noutputs: usize,
    lpm: Arc<Ipv4Lpm>,
    /// Next-hop index to `gateway << 32 | port`, read by workers without locks; for a
    /// multipath group, [`GROUP`] with its members in `groups`.
    hops: Arc<[AtomicU64]>,
    groups: Arc<Groups<Member>>,
    ctl: Mutex<Control>,
    complaints: Arc<AtomicU32>,
}

impl IpLookupSpec {
    fn new(flavor: Flavor, noutputs: usize) -> IpLookupSpec {
        let direct = direct_ports(noutputs);
        IpLookupSpec {
            flavor,
            noutputs,
            lpm: Arc::new(Ipv4Lpm::new()),
            // The first indices are the output ports themselves (see `acquire_hop`).
            hops: (0..MAX_HOPS)
                .map(|h| AtomicU64::new(if h < direct { h as u64 } else { 0 }))
                .collect(),
            groups: Arc::new(Groups::new(MAX_HOPS)),
            ctl: Mutex::new(Control {
                slots: Vec::new(),
                free: if flavor == Flavor::Radix {
                    FreeSlots::NewestFirst(Vec::new())
                } else {
                    FreeSlots::LowestFirst(Default::default())
                },
                index: HashMap::new(),
                hop_index: HopIndex::new(direct, MAX_HOPS),
                seq: 0,
                pending: None,
                held_hops: Vec::new(),
            }),
            complaints: Arc::new(AtomicU32::new(0)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Control> {
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next-hop index of a route's members. A route without a gateway (the usual
    /// kind) has its output port as index, so a worker needs no table read to route it;
    /// the other pairs, and multipath groups, get indices past the ports.
    fn acquire_hop(&self, ctl: &mut Control, hops: &[Weighted<Member>]) -> Result<u32, CmdError> {
        if let [((0, port), _)] = *hops {
            if port >= 0 && (port as usize) < direct_ports(self.noutputs) {
                return Ok(ctl.hop_index.port(port as u32));
            }
        }
        let key = hops.to_vec();
        let (h, fresh) = ctl.hop_index.acquire(&key).ok_or(CmdError::TooManyHops)?;
        if fresh {
            // Published to workers by the `Release` store of `Ipv4Lpm::insert` (or of
            // `Ipv4Lpm::apply`, in a `ctrl` write), which comes after.
            let value = match *hops {
                [((gw, port), _)] => (u64::from(gw) << 32) | u64::from(port as u32),
                _ => GROUP,
            };
            self.groups.set(h, (hops.len() > 1).then(|| Group::new(key)));
            self.hops[h as usize].store(value, Ordering::Relaxed);
        }
        Ok(h)
    }

    /// The members index `h` stands for. The caller holds the control side's mutex, or
    /// an `lpm` pin from before it read `h` from the table: the index is not reused
    /// meanwhile.
    fn hop_members(&self, h: u32) -> Vec<Weighted<Member>> {
        let v = self.hops[h as usize].load(Ordering::Relaxed);
        match self.groups.get(h) {
            Some(g) if v == GROUP => g.members().to_vec(),
            _ => vec![(((v >> 32) as u32, v as u32 as i32), 1)],
        }
    }

    fn release_hop(&self, ctl: &mut Control, h: u32) {
        if ctl.hop_index.release(h) {
            let pair = self.hop_members(h);
            if ctl.pending.is_some() {
                ctl.held_hops.push((h, pair));
            } else {
                ctl.hop_index.retire([(h, pair)]);
            }
        }
    }

    /// Sets or removes (`None`) a route in the lookup table, or records the change for
    /// the end of the `ctrl` write that makes it.
    fn change_table(&self, ctl: &mut Control, addr: u32, len: u8, hop: Option<u32>) {
        match (&mut ctl.pending, hop) {
            (Some(p), _) => p.push((addr, len, hop)),
            (None, Some(h)) => {
                self.lpm.insert(addr, len, h);
            }
            (None, None) => {
                self.lpm.remove(addr, len);
            }
        }
    }

    /// Adds `r`; with `set`, replaces an existing route for the prefix. Returns the
    /// replaced route.
    fn add_route(&self, ctl: &mut Control, r: Route, set: bool) -> Result<Option<Route>, CmdError> {
        let key = (r.addr, r.len);
        let existing = ctl.index.get(&key).copied();
        if let Some(i) = existing {
            if !set {
                return Err(CmdError::Exists(slot_route(ctl, i).unwrap_or(r)));
            }
        }
        let hop = self.acquire_hop(ctl, &r.hops)?;
        self.change_table(ctl, r.addr, r.len, Some(hop));
        ctl.seq += 1;
        let new = Slot {
            route: r,
            hop,
            seq: ctl.seq,
        };
        let old = match (existing, self.flavor) {
            (Some(i), Flavor::Radix) => {
                // Radix stores the new route in a fresh slot, then frees the old one.
                let j = ctl.free.place(&mut ctl.slots, new);
                ctl.index.insert(key, j);
                ctl.free.vacate(&mut ctl.slots, i)
            }
            (Some(i), _) => {
                // In place, keeping its place in the table's order, as Click's tables
                // replace a route where it is (so an undone write leaves `table` as
                // it was).
                let seq = ctl.slots[i].as_ref().map_or(new.seq, |s| s.seq);
                ctl.slots[i].replace(Slot { seq, ..new })
            }
            (None, _) => {
                let j = ctl.free.place(&mut ctl.slots, new);
                ctl.index.insert(key, j);
                None
            }
        };
        Ok(old.map(|o| {
            self.release_hop(ctl, o.hop);
            o.route
        }))
    }

    /// Removes the route matching `r`; returns it.
    fn remove_route(&self, ctl: &mut Control, r: Route) -> Result<Route, CmdError> {
        let key = (r.addr, r.len);
        let i = match ctl.index.get(&key) {
            Some(&i) => i,
            None => return Err(CmdError::NotFound(r)),
        };
        // DirectIPLookup removes by prefix alone.
        if self.flavor != Flavor::Direct && !slot_route(ctl, i).is_some_and(|s| s.matches(&r)) {
            return Err(CmdError::NotFound(r));
        }
        ctl.index.remove(&key);
        self.change_table(ctl, r.addr, r.len, None);
        let old = ctl.free.vacate(&mut ctl.slots, i).ok_or(CmdError::NotFound(r))?;
        self.release_hop(ctl, old.hop);
        Ok(old.route)
    }

    /// Click's `IPRouteTable::run_command`: parses one route request and applies it;
    /// `log` records how to undo it.
    fn run_command(
        &self,
        ctl: &mut Control,
        cmd: Cmd,
        text: &str,
        log: Option<&mut Vec<(Route, Cmd)>>,
    ) -> Result<(), String> {
        let remove = cmd == Cmd::Remove;
        let route = parse_route(text, remove).map_err(|e| match e {
            RouteError::Members(e) => e,
            RouteError::Syntax if remove => "expected 'ADDR/MASK [GATEWAY OUTPUT]'".to_string(),
            RouteError::Syntax => "expected 'ADDR/MASK [GATEWAY] OUTPUT'".to_string(),
        })?;
        if route
            .hops
            .iter()
            .any(|&((_, port), _)| port < 0 || port as usize >= self.noutputs)
        {
            return Err("bad OUTPUT".to_string());
        }
        let undo = match cmd {
            Cmd::Add | Cmd::Set => match self.add_route(ctl, route.clone(), cmd == Cmd::Set) {
                Ok(Some(old)) => (old, Cmd::Set),
                Ok(None) => (route, Cmd::Add),
                Err(e) => return Err(e.text(self.flavor)),
            },
            Cmd::Remove => match self.remove_route(ctl, route) {
                Ok(old) => (old, Cmd::Remove),
                Err(e) => return Err(e.text(self.flavor)),
            },
        };
        if let Some(log) = log {
            log.push(undo);
        }
        Ok(())
    }

    /// The `ctrl` handler: `add`/`set`/`remove` commands, one per line, all or nothing.
    /// The table changes when the write has been checked whole: with `Ipv4Lpm::apply`,
    /// so workers see the write whole or not at all, and a large write (a full table)
    /// is built into a new table in a bulk build's time.
    fn ctrl(&self, text: &str) -> Result<(), String> {
        let mut ctl = self.lock();
        let text = uncomment(text);
        let mut log = Vec::new();
        let mut result = Ok(());
        ctl.pending = Some(Vec::new());
        for line in text.split('\n') {
            let line = line.trim_start();
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let cmd = match word {
                "" => continue,
                "add" => Cmd::Add,
                "set" => Cmd::Set,
                "remove" => Cmd::Remove,
                _ => {
                    result = Err(format!("bad command '{}'", word));
                    break;
                }
            };
            if let Err(e) = self.run_command(&mut ctl, cmd, rest, Some(&mut log)) {
                result = Err(e);
                break;
            }
        }
        if result.is_err() {
            // None of the write's changes reaches the table; the undoing ones do: they
            // set each prefix back to its route from before the write, under the
            // next-hop index the table has for it (a pair whose last route the write
            // removed keeps its index until the write ends), so undoing needs no new
            // index and cannot fail for want of one.
            ctl.pending = Some(Vec::new());
            while let Some((r, cmd)) = log.pop() {
                let undone = match cmd {
                    Cmd::Remove => self.add_route(&mut ctl, r.clone(), false).map(|_| ()),
                    Cmd::Add => self.remove_route(&mut ctl, r.clone()).map(|_| ()),
                    Cmd::Set => self.add_route(&mut ctl, r.clone(), true).map(|_| ()),
                };
                debug_assert!(undone.is_ok(), "undoing {:?} of {:?} failed", cmd, r);
            }
        }
        let changes = ctl.pending.take().unwrap_or_default();
        self.lpm.apply(&changes);
        let held = std::mem::take(&mut ctl.held_hops);
        ctl.hop_index.retire(held);
        result
    }

    fn flush(&self) {
        let mut ctl = self.lock();
        self.lpm.clear();
        let slots = std::mem::take(&mut ctl.slots);
        for s in slots.into_iter().flatten() {
            self.release_hop(&mut ctl, s.hop);
        }
        ctl.free.clear();
        ctl.index.clear();
        ctl.seq = 0;
    }

    /// The `table` handler's text.
    fn dump(&self) -> String {
        let ctl = self.lock();
        let mut out = String::new();
        match self.flavor {
            Flavor::Radix => {
                for s in ctl.slots.iter().flatten() {
                    s.route.unparse_tabs(gw_text, &mut out);
                    out.push('\n');
                }
            }
            Flavor::Linear | Flavor::Static => {
                for s in ctl.slots.iter().flatten() {
                    out.push_str(&s.route.unparse());
                    out.push('\n');
                }
            }
            Flavor::Direct => {
                // Click walks its prefix hash table bucket by bucket, newest entry first
                // within a bucket; its default-route entry is the oldest of its bucket.
                let mut v: Vec<&Slot> = ctl.slots.iter().flatten().collect();
                v.sort_by_key(|s| {
                    let seq = if s.route.len == 0 { 0 } else { s.seq };
                    (
                        direct_hash(s.route.addr, u32::from(s.route.len)),
                        std::cmp::Reverse(seq),
                    )
                });
                for s in v {
                    s.route.unparse_tabs(gw_dotted, &mut out);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// What Click's `lookup` read handler (a read handler with a parameter) returns for
    /// `addr`: the output port, followed by the gateway if the route has one; `-1` when
    /// there is no route. A multipath route gives a line per member.
    pub fn lookup_text(&self, addr: &str) -> Result<String, String> {
        let a = Ipv4Addr::from_arg(uncomment(addr).trim())
            .ok_or_else(|| format!("expected IP address, not '{}'", addr))?;
        // Pinned until the index's pair is read, as a worker is: a write that frees
        // the index meanwhile cannot give it to another pair before then.
        let guard = lpm::pin();
        let Some(h) = self.lpm.lookup_in(&guard, u32::from(a)) else {
            return Ok("-1".to_string());
        };
        Ok(multipath::lookup_lines(&self.hop_members(h), |gw| {
            Ipv4Addr::from(gw).to_string()
        }))
    }
}

/// The route in slot `i` (`index` only names occupied slots).
fn slot_route(ctl: &Control, i: usize) -> Option<Route> {
    ctl.slots.get(i).and_then(Option::as_ref).map(|s| s.route.clone())
}

/// DirectIPLookup's prefix hash (64K buckets), which decides its `table` order.
fn direct_hash(prefix: u32, len: u32) -> u32 {
    let mut h = prefix ^ (len << 5) ^ (prefix >> (len >> 2)).wrapping_sub(len);
    h ^= (h >> 23) ^ (h >> 15).wrapping_mul(len) ^ (prefix >> 17).wrapping_mul(53);
    h = h.wrapping_sub((prefix >> 3) ^ h.wrapping_shr(len).wrapping_mul(7) ^ (h >> 11).wrapping_mul(103));
    (h ^ (h >> 17)) & 0xffff
}

impl ElementSpec for IpLookupSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(IpLookup {
            flavor: self.flavor,
            direct: direct_ports(self.noutputs) as u32,
            lpm: self.lpm.clone(),
            hops: self.hops.clone(),
            groups: self.groups.clone(),
            complaints: self.complaints.clone(),
            addrs: Vec::new(),
            out: Vec::new(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        let mut h = vec![HandlerInfo::read("table"), HandlerInfo::read("lookup")];
        match self.flavor {
            Flavor::Radix | Flavor::Linear => {
                for n in ["add", "set", "remove", "ctrl"] {
                    h.push(HandlerInfo::write(n));
                }
            }
            Flavor::Direct => {
                for n in ["add", "set", "remove", "ctrl", "flush"] {
                    h.push(HandlerInfo::write(n));
                }
            }
            Flavor::Static => {}
        }
        h
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "table").then(|| self.dump())
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        (name == "lookup").then(|| self.lookup_text(param))
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        let cmd = match (name, self.flavor) {
            (_, Flavor::Static) => return None,
            ("add", _) => Cmd::Add,
            ("set", _) => Cmd::Set,
            ("remove", _) => Cmd::Remove,
            ("ctrl", _) => return Some(self.ctrl(value)),
            ("flush", Flavor::Direct) => {
                self.flush();
                return Some(Ok(()));
            }
            _ => return None,
        };
        let mut ctl = self.lock();
        Some(self.run_command(&mut ctl, cmd, value, None))
    }
}

/// How many output ports are their own next-hop index (for routes without a
/// gateway): all of them, unless an element has more outputs than half the indices.
fn direct_ports(noutputs: usize) -> usize {
    noutputs.min(MAX_HOPS / 2)
}

/// One worker's instance.
struct IpLookup {
    flavor: Flavor,
    /// Next-hop indices below this are output ports (see `IpLookupSpec::acquire_hop`).
    direct: u32,
    lpm: Arc<Ipv4Lpm>,
    hops: Arc<[AtomicU64]>,
    groups: Arc<Groups<Member>>,
    complaints: Arc<AtomicU32>,
    addrs: Vec<u32>,
    out: Vec<u32>,
}

/// The member of group `h` that packet `p`'s flow takes, as a next-hop slot's value
/// (`gateway << 32 | port`): picked by a hash of its IPv4 source (from its network
/// header; 0 without one) and its destination annotation.
fn group_member(groups: &Groups<Member>, h: u32, p: &packet::Packet) -> u64 {
    let Some(group) = groups.get(h) else {
        return GROUP;
    };
    let src = match p.network_header() {
        Some(ip) if ip.len() >= 20 => u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
        _ => 0,
    };
    let dst = u32::from_be_bytes(p.anno().dst_ip());
    let (gw, port) = group.pick(multipath::flow_hash4(src, dst));
    (u64::from(gw) << 32) | u64::from(port as u32)
}

/// Prints a lookup miss as Click does: the first 5 misses of each element (none for
/// DirectIPLookup).
fn complain(flavor: Flavor, complaints: &AtomicU32, dst: [u8; 4]) {
    if flavor == Flavor::Direct || complaints.fetch_add(1, Ordering::Relaxed) >= 5 {
        return;
    }
    match flavor {
        Flavor::Radix => crate::warn!("IPRouteTable: no route for {}", Ipv4Addr::from(dst)),
        _ => crate::warn!("LinearIPLookup: no gw for {:x}", u32::from_ne_bytes(dst)),
    }
}

impl Element for IpLookup {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let IpLookup {
            flavor,
            direct,
            lpm,
            hops,
            groups,
            complaints,
            addrs,
            out: verdicts,
        } = self;
        addrs.clear();
        addrs.extend(batch.iter().map(|p| u32::from_be_bytes(p.anno().dst_ip())));
        verdicts.resize(addrs.len(), 0);
        // Held until the next-hop slots are read: an index freed meanwhile is not given
        // to another pair before then (`hopindex.rs`).
        let guard = lpm::pin();
        // Its loads of the table are `Acquire`: the next-hop slots read below, stored
        // before any route that uses them, are up to date.
        lpm.lookup_batch_in(&guard, addrs, verdicts);
        // Next-hop indices below `direct` are output ports already (routes without a
        // gateway); the others (a gateway, or no route) are resolved in place.
        let direct = *direct;
        if verdicts.iter().fold(false, |other, &v| other | (v >= direct)) {
            for (p, v) in batch.iter_mut().zip(verdicts.iter_mut()) {
                if *v < direct {
                    continue;
                }
                if *v == Ipv4Lpm::NO_ROUTE {
                    complain(*flavor, complaints, p.anno().dst_ip());
                    // No output has this number: `Outputs::push_each` drops the packet.
                    continue;
                }
                let mut hop = hops.get(*v as usize).map_or(0, |x| x.load(Ordering::Relaxed));
                if hop == GROUP {
                    hop = group_member(groups, *v, p);
                }
                let gw = (hop >> 32) as u32;
                if gw != 0 {
                    p.set_dst_ip_anno(gw.to_be_bytes());
                }
                *v = hop as u32;
            }
        }
        drop(guard);
        out.push_each(batch, verdicts);
    }
}

#[cfg(test)]
mod tests;
