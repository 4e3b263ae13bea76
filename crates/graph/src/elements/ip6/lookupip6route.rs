//! `LookupIP6Route(DADDR/MASK [GW] OUTPUT, ...)`: IPv6 route lookup by the destination
//! IPv6 annotation, as Click 2.x, over [`lpm::Ipv6Lpm`].
//!
//! A packet's annotation is looked up; a route with a gateway (not `::`) sets the
//! annotation to the gateway; the packet leaves on the route's output; a packet with no
//! route is dropped. Routes are kept as Click's `IP6Table` keeps them (a later route
//! for a prefix replaces the earlier one, a removal of a missing route is no error), and
//! the `table` handler lists them in its slot order.
//!
//! brickroute's extension: a multipath route, `DADDR/MASK [GW] OUTPUT [weight N] [GW]
//! OUTPUT [weight N] ...`, has several (gateway, output) members, and each packet takes
//! the member that a hash of its IPv6 source and destination picks, in the members'
//! shares (`multipath.rs`).
//!
//! As in the IPv4 lookup elements (`iplookup.rs`), workers share one table and one
//! lock-free next-hop table, indexed as `hopindex.rs` describes.

use super::{parse_route6, Ipv6Prefix};
use crate::args::{split_words, uncomment, Args, FromArg};
use crate::element::*;
use crate::elements::hopindex::HopIndex;
use crate::elements::multipath::{self, Group, Groups, RouteError, Weighted};
use crate::elements::slots::FreeSlots;
use crate::error::ConfigError;
use lpm::Ipv6Lpm;
use packet::PacketBatch;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Distinct (gateway, output) pairs, output ports included, a table holds at once.
const MAX_HOPS: usize = 1 << 16;

/// A next hop: gateway (0 for none) and output port.
type Member = (u128, u32);

/// A next-hop slot's port for a multipath group, whose members are in `groups`: an
/// output no element has (a worker that read it without them would drop the packet).
const GROUP: u64 = u32::MAX as u64;

pub struct LookupIP6RouteClass;

impl ElementClass for LookupIP6RouteClass {
    fn name(&self) -> &'static str {
        "LookupIP6Route"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("1/-")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let spec = LookupIP6RouteSpec::new(cx.noutputs);
        let mut maxout = -1i64;
        {
            let mut ctl = spec.lock();
            for (i, arg) in args.rest().iter().enumerate() {
                let syntax = || cx.error(format!("argument {} should be DADDR/MASK [GW] OUTPUT", i + 1));
                let (addr, len, hops) = match parse_route6(arg) {
                    Ok(r) if r.2.iter().all(|h| h.0 .1 >= 0) => r,
                    Err(RouteError::Members(e)) => {
                        return Err(cx.error(format!("argument {}: {}", i + 1, e)))
                    }
                    _ => return Err(syntax()),
                };
                let most = hops.iter().map(|h| h.0 .1).max().unwrap_or(0);
                maxout = maxout.max(most);
                if most as usize >= cx.noutputs {
                    // Checked for every route before the error, as Click does after its loop.
                    continue;
                }
                let hops = hops
                    .iter()
                    .map(|&((gw, port), w)| ((gw, port as u32), w))
                    .collect();
                spec.add(&mut ctl, addr, len, hops).map_err(|e| cx.error(e))?;
            }
        }
        if maxout >= cx.noutputs as i64 {
            return Err(cx.error(format!("need {} or more output ports", maxout + 1)));
        }
        Ok(Arc::new(spec))
    }
}

/// One route as the `table` handler lists it.
struct Route {
    addr: u128,
    len: u8,
    /// Its (gateway, output) member, or several for a multipath route.
    hops: Vec<Weighted<Member>>,
    hop: u32,
}

/// Control-side state, behind the spec's mutex.
struct Control {
    /// The routes in Click's slot order: a new route takes the first free slot.
    slots: Vec<Option<Route>>,
    /// The free slots: the lowest is reused first, as in Click.
    free: FreeSlots,
    index: HashMap<(u128, u8), usize>,
    /// Which (gateway, port) pair, or multipath group of them, holds which next-hop
    /// index.
    hop_index: HopIndex<Vec<Weighted<Member>>>,
}

/// A next hop with a gateway, read by workers without locks: the gateway's two halves
/// and the output port ([`GROUP`] for a multipath group, whose members are in
/// `groups`).
#[derive(Default)]
struct Hop {
    gw_hi: AtomicU64,
    gw_lo: AtomicU64,
    port: AtomicU64,
}

/// The configured element, shared by every worker.
pub struct LookupIP6RouteSpec {
    noutputs: usize,
    lpm: Arc<Ipv6Lpm>,
    hops: Arc<[Hop]>,
    groups: Arc<Groups<Member>>,
    ctl: Mutex<Control>,
}

impl LookupIP6RouteSpec {
    fn new(noutputs: usize) -> LookupIP6RouteSpec {
        let direct = direct_ports(noutputs);
        LookupIP6RouteSpec {
            noutputs,
            lpm: Arc::new(Ipv6Lpm::new()),
            hops: (0..MAX_HOPS).map(|_| Hop::default()).collect(),
            groups: Arc::new(Groups::new(MAX_HOPS)),
            ctl: Mutex::new(Control {
                slots: Vec::new(),
                free: FreeSlots::LowestFirst(Default::default()),
                index: HashMap::new(),
                hop_index: HopIndex::new(direct, MAX_HOPS),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Control> {
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next-hop index of a route's members: the port itself for one member without
    /// a gateway, else an index past the ports.
    fn acquire_hop(&self, ctl: &mut Control, hops: &[Weighted<Member>]) -> Result<u32, String> {
        if let [((0, port), _)] = *hops {
            if (port as usize) < direct_ports(self.noutputs) {
                return Ok(ctl.hop_index.port(port));
            }
        }
        let key = hops.to_vec();
        let (h, fresh) = ctl
            .hop_index
            .acquire(&key)
            .ok_or("Virtual port table size limit exceeded")?;
        if fresh {
            // Published to workers by the release in `Ipv6Lpm::insert`, which comes after.
            let (gw, port) = match *hops {
                [((gw, port), _)] => (gw, u64::from(port)),
                _ => (0, GROUP),
            };
            self.groups.set(h, (hops.len() > 1).then(|| Group::new(key)));
            let slot = &self.hops[h as usize];
            slot.gw_hi.store((gw >> 64) as u64, Ordering::Relaxed);
            slot.gw_lo.store(gw as u64, Ordering::Relaxed);
            slot.port.store(port, Ordering::Relaxed);
        }
        Ok(h)
    }

    fn release_hop(&self, ctl: &mut Control, r: &Route) {
        if ctl.hop_index.release(r.hop) {
            // The route is out of the table already.
            ctl.hop_index.retire([(r.hop, r.hops.clone())]);
        }
    }

    /// Click's `IP6Table::add`: replaces a route for the same prefix, then takes the
    /// first free slot.
    fn add(&self, ctl: &mut Control, addr: u128, len: u8, hops: Vec<Weighted<Member>>) -> Result<(), String> {
        let hop = self.acquire_hop(ctl, &hops)?;
        // One store replaces the old route for readers.
        self.lpm.insert(addr, len, hop);
        if let Some(i) = ctl.index.remove(&(addr, len)) {
            if let Some(old) = ctl.free.vacate(&mut ctl.slots, i) {
                self.release_hop(ctl, &old);
            }
        }
        let route = Route { addr, len, hops, hop };
        let i = ctl.free.place(&mut ctl.slots, route);
        ctl.index.insert((addr, len), i);
        Ok(())
    }

    /// Click's `IP6Table::del`: removes the route for the prefix, if there is one.
    fn remove(&self, ctl: &mut Control, addr: u128, len: u8) {
        if let Some(i) = ctl.index.remove(&(addr, len)) {
            self.lpm.remove(addr, len);
            if let Some(old) = ctl.free.vacate(&mut ctl.slots, i) {
                self.release_hop(ctl, &old);
            }
        }
    }

    /// The `add` handler: `DADDR/MASK [GW] OUTPUT`, or a multipath route's members.
    fn add_handler(&self, text: &str) -> Result<(), String> {
        let (addr, len, hops) = parse_route6(&uncomment(text)).map_err(|e| match e {
            RouteError::Members(e) => e,
            RouteError::Syntax => "expected 'DADDR/MASK [GW] OUTPUT'".to_string(),
        })?;
        if hops
            .iter()
            .any(|&((_, port), _)| port < 0 || port as usize >= self.noutputs)
        {
            return Err("output port out of range".to_string());
        }
        let hops = hops
            .iter()
            .map(|&((gw, port), w)| ((gw, port as u32), w))
            .collect();
        let mut ctl = self.lock();
        self.add(&mut ctl, addr, len, hops)
    }

    /// The `remove` handler: `DADDR/MASK`.
    fn remove_handler(&self, text: &str) -> Result<(), String> {
        let words = split_words(&uncomment(text));
        let p = match words.as_slice() {
            [p] => Ipv6Prefix::from_arg(p),
            _ => None,
        }
        .ok_or("expected 'DADDR/MASK'")?;
        let mut ctl = self.lock();
        self.remove(&mut ctl, p.network(), p.len);
        Ok(())
    }

    /// The `ctrl` handler: one `add` or `remove` command.
    fn ctrl(&self, text: &str) -> Result<(), String> {
        let text = text.trim_start();
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        match word {
            "add" => self.add_handler(rest),
            "remove" => self.remove_handler(rest),
            _ => Err("bad command, should be 'add' or 'remove'".to_string()),
        }
    }

    /// The `lookup ADDR` handler (brickroute's, as the IPv4 lookup elements have it from
    /// Click): the output port, followed by the gateway if the route has one; `-1` when
    /// no route matches. A multipath route gives a line per member.
    fn lookup_text(&self, text: &str) -> Result<String, String> {
        let a = Ipv6Addr::from_arg(uncomment(text).trim())
            .ok_or_else(|| format!("expected IPv6 address, not '{}'", text.trim()))?;
        // Pinned until the index's pair is read, as a worker is (see `hopindex.rs`).
        let guard = lpm::pin();
        let Some(h) = self.lpm.lookup_in(&guard, u128::from(a)) else {
            return Ok("-1".to_string());
        };
        if h < direct_ports(self.noutputs) as u32 {
            return Ok(h.to_string());
        }
        let hop = &self.hops[h as usize];
        let port = hop.port.load(Ordering::Relaxed);
        let members = match self.groups.get(h) {
            Some(g) if port == GROUP => g.members().to_vec(),
            _ => vec![((hop.gateway(), port as u32), 1)],
        };
        Ok(multipath::lookup_lines(&members, |gw| {
            Ipv6Addr::from(gw).to_string()
        }))
    }

    /// The `table` handler's text, as Click's `IP6Table::dump`: a heading once any route
    /// has been added, then `DADDR/LEN<TAB>GW<TAB>OUTPUT` per route in slot order (a
    /// multipath route's further members follow as `<TAB>GW<TAB>OUTPUT`).
    fn dump(&self) -> String {
        let ctl = self.lock();
        let mut out = String::new();
        if !ctl.slots.is_empty() {
            out.push_str("# Active routes\n");
        }
        for r in ctl.slots.iter().flatten() {
            let members = multipath::members_text(&r.hops, "\t", |(gw, port)| {
                format!("{}\t{}", Ipv6Addr::from(gw), port)
            });
            let _ = writeln!(out, "{}/{}\t{}", Ipv6Addr::from(r.addr), r.len, members);
        }
        out
    }
}

/// How many output ports are their own next-hop index: all of them, unless an element
/// has more outputs than half the indices.
fn direct_ports(noutputs: usize) -> usize {
    noutputs.min(MAX_HOPS / 2)
}

impl ElementSpec for LookupIP6RouteSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(LookupIP6Route {
            direct: direct_ports(self.noutputs) as u32,
            lpm: self.lpm.clone(),
            hops: self.hops.clone(),
            groups: self.groups.clone(),
            addrs: Vec::new(),
            out: Vec::new(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("table"),
            HandlerInfo::read("lookup"),
            HandlerInfo::write("add"),
            HandlerInfo::write("remove"),
            HandlerInfo::write("ctrl"),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "table").then(|| self.dump())
    }

    fn read_handler_with(&self, name: &str, param: &str) -> Option<Result<String, String>> {
        (name == "lookup").then(|| self.lookup_text(param))
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        match name {
            "add" => Some(self.add_handler(value)),
            "remove" => Some(self.remove_handler(value)),
            "ctrl" => Some(self.ctrl(value)),
            _ => None,
        }
    }
}

/// One worker's instance.
struct LookupIP6Route {
    /// Next-hop indices below this are output ports.
    direct: u32,
    lpm: Arc<Ipv6Lpm>,
    hops: Arc<[Hop]>,
    groups: Arc<Groups<Member>>,
    addrs: Vec<u128>,
    out: Vec<u32>,
}

impl Element for LookupIP6Route {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let LookupIP6Route {
            direct,
            lpm,
            hops,
            groups,
            addrs,
            out: verdicts,
        } = self;
        addrs.clear();
        addrs.extend(batch.iter().map(|p| u128::from_be_bytes(p.anno().dst_ip6())));
        verdicts.resize(addrs.len(), 0);
        // Held until the next-hop slots are read, so that none is reused meanwhile.
        let guard = lpm::pin();
        // Its loads of the table are `Acquire`: the slots read below are up to date.
        lpm.lookup_batch_in(&guard, addrs, verdicts);
        let direct = *direct;
        if verdicts.iter().fold(false, |other, &v| other | (v >= direct)) {
            for (p, v) in batch.iter_mut().zip(verdicts.iter_mut()) {
                if *v < direct || *v == Ipv6Lpm::NO_ROUTE {
                    // An output port already; or no route, a number no output has, so
                    // `Outputs::push_each` drops the packet, as Click kills it.
                    continue;
                }
                let Some(hop) = hops.get(*v as usize) else {
                    continue;
                };
                let port = hop.port.load(Ordering::Relaxed);
                let (gw, port) = if port == GROUP {
                    group_member(groups, *v, p)
                } else {
                    (hop.gateway(), port as u32)
                };
                if gw != 0 {
                    p.set_dst_ip6_anno(gw.to_be_bytes());
                }
                *v = port;
            }
        }
        drop(guard);
        out.push_each(batch, verdicts);
    }
}

impl Hop {
    fn gateway(&self) -> u128 {
        (u128::from(self.gw_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(self.gw_lo.load(Ordering::Relaxed))
    }
}

/// The member of group `h` that packet `p`'s flow takes: picked by a hash of its IPv6
/// source (from its network header; 0 without one) and its destination annotation.
fn group_member(groups: &Groups<Member>, h: u32, p: &packet::Packet) -> Member {
    let Some(group) = groups.get(h) else {
        return (0, GROUP as u32);
    };
    let src = match p.network_header() {
        Some(ip) if ip.len() >= 24 => u128::from_be_bytes(ip[8..24].try_into().unwrap_or([0; 16])),
        _ => 0,
    };
    let dst = u128::from_be_bytes(p.anno().dst_ip6());
    group.pick(multipath::flow_hash6(src, dst))
}

#[cfg(test)]
mod tests;
