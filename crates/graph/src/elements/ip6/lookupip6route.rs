//! `LookupIP6Route(DADDR/MASK [GW] OUTPUT, ...)`: IPv6 route lookup by the destination
//! IPv6 annotation, as Click 2.x, over [`lpm::Ipv6Lpm`].
//!
//! A packet's annotation is looked up; a route with a gateway (not `::`) sets the
//! annotation to the gateway; the packet leaves on the route's output; a packet with no
//! route is dropped. Routes are kept as Click's `IP6Table` keeps them (a later route
//! for a prefix replaces the earlier one, a removal of a missing route is no error), and
//! the `table` handler lists them in its slot order.
//!
//! As in the IPv4 lookup elements (`iplookup.rs`), workers share one table and one
//! lock-free next-hop table, indexed as `hopindex.rs` describes.

use super::{parse_route6, Ipv6Prefix};
use crate::args::{split_words, uncomment, Args, FromArg};
use crate::element::*;
use crate::elements::hopindex::HopIndex;
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
                let (addr, len, gw, port) = parse_route6(arg).filter(|r| r.3 >= 0).ok_or_else(|| {
                    cx.error(format!("argument {} should be DADDR/MASK [GW] OUTPUT", i + 1))
                })?;
                maxout = maxout.max(port);
                if port as usize >= cx.noutputs {
                    // Checked for every route before the error, as Click does after its loop.
                    continue;
                }
                spec.add(&mut ctl, addr, len, gw, port as u32)
                    .map_err(|e| cx.error(e))?;
            }
        }
        if maxout >= cx.noutputs as i64 {
            return Err(cx.error(format!("need {} or more output ports", maxout + 1)));
        }
        Ok(Arc::new(spec))
    }
}

/// One route as the `table` handler lists it.
#[derive(Clone, Copy)]
struct Route {
    addr: u128,
    len: u8,
    gw: u128,
    port: u32,
    hop: u32,
}

/// Control-side state, behind the spec's mutex.
struct Control {
    /// The routes in Click's slot order: a new route takes the first free slot.
    slots: Vec<Option<Route>>,
    /// The free slots: the lowest is reused first, as in Click.
    free: FreeSlots,
    index: HashMap<(u128, u8), usize>,
    /// Which (gateway, port) pair holds which next-hop index.
    hop_index: HopIndex<(u128, u32)>,
}

/// A next hop with a gateway, read by workers without locks: the gateway's two halves
/// and the output port.
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
    ctl: Mutex<Control>,
}

impl LookupIP6RouteSpec {
    fn new(noutputs: usize) -> LookupIP6RouteSpec {
        let direct = direct_ports(noutputs);
        LookupIP6RouteSpec {
            noutputs,
            lpm: Arc::new(Ipv6Lpm::new()),
            hops: (0..MAX_HOPS).map(|_| Hop::default()).collect(),
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

    /// The next-hop index of `(gw, port)`: the port itself without a gateway, else an
    /// index past the ports.
    fn acquire_hop(&self, ctl: &mut Control, gw: u128, port: u32) -> Result<u32, String> {
        if gw == 0 && (port as usize) < direct_ports(self.noutputs) {
            return Ok(ctl.hop_index.port(port));
        }
        let (h, fresh) = ctl
            .hop_index
            .acquire((gw, port))
            .ok_or("Virtual port table size limit exceeded")?;
        if fresh {
            // Published to workers by the release in `Ipv6Lpm::insert`, which comes after.
            let slot = &self.hops[h as usize];
            slot.gw_hi.store((gw >> 64) as u64, Ordering::Relaxed);
            slot.gw_lo.store(gw as u64, Ordering::Relaxed);
            slot.port.store(u64::from(port), Ordering::Relaxed);
        }
        Ok(h)
    }

    fn release_hop(&self, ctl: &mut Control, r: &Route) {
        if ctl.hop_index.release(r.hop) {
            // The route is out of the table already.
            ctl.hop_index.retire([(r.hop, (r.gw, r.port))]);
        }
    }

    /// Click's `IP6Table::add`: replaces a route for the same prefix, then takes the
    /// first free slot.
    fn add(&self, ctl: &mut Control, addr: u128, len: u8, gw: u128, port: u32) -> Result<(), String> {
        let hop = self.acquire_hop(ctl, gw, port)?;
        // One store replaces the old route for readers.
        self.lpm.insert(addr, len, hop);
        if let Some(i) = ctl.index.remove(&(addr, len)) {
            if let Some(old) = ctl.free.vacate(&mut ctl.slots, i) {
                self.release_hop(ctl, &old);
            }
        }
        let route = Route {
            addr,
            len,
            gw,
            port,
            hop,
        };
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

    /// The `add` handler: `DADDR/MASK [GW] OUTPUT`.
    fn add_handler(&self, text: &str) -> Result<(), String> {
        let (addr, len, gw, port) =
            parse_route6(&uncomment(text)).ok_or("expected 'DADDR/MASK [GW] OUTPUT'")?;
        if port < 0 || port as usize >= self.noutputs {
            return Err("output port out of range".to_string());
        }
        let mut ctl = self.lock();
        self.add(&mut ctl, addr, len, gw, port as u32)
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
    /// no route matches.
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
        let gw = (u128::from(hop.gw_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(hop.gw_lo.load(Ordering::Relaxed));
        let port = hop.port.load(Ordering::Relaxed);
        Ok(if gw != 0 {
            format!("{} {}", port, Ipv6Addr::from(gw))
        } else {
            port.to_string()
        })
    }

    /// The `table` handler's text, as Click's `IP6Table::dump`: a heading once any route
    /// has been added, then `DADDR/LEN<TAB>GW<TAB>OUTPUT` per route in slot order.
    fn dump(&self) -> String {
        let ctl = self.lock();
        let mut out = String::new();
        if !ctl.slots.is_empty() {
            out.push_str("# Active routes\n");
        }
        for r in ctl.slots.iter().flatten() {
            let _ = writeln!(
                out,
                "{}/{}\t{}\t{}",
                Ipv6Addr::from(r.addr),
                r.len,
                Ipv6Addr::from(r.gw),
                r.port
            );
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
    addrs: Vec<u128>,
    out: Vec<u32>,
}

impl Element for LookupIP6Route {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let LookupIP6Route {
            direct,
            lpm,
            hops,
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
                let gw = (u128::from(hop.gw_hi.load(Ordering::Relaxed)) << 64)
                    | u128::from(hop.gw_lo.load(Ordering::Relaxed));
                if gw != 0 {
                    p.set_dst_ip6_anno(gw.to_be_bytes());
                }
                *v = hop.port.load(Ordering::Relaxed) as u32;
            }
        }
        drop(guard);
        out.push_each(batch, verdicts);
    }
}

#[cfg(test)]
mod tests;
