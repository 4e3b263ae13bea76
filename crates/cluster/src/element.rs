//! `VLBSwitch(NODE [, keywords SCHEME, RATE, BURST, FLOWLET, FLOWLETS, SEED, DOWN,
//! HEARTBEAT, TIMEOUT])`: the input server's side of a Valiant-load-balanced mesh (see
//! [`crate::vlb`]).
//!
//! It has one output for each server of the mesh, so the mesh's size is its output
//! count, and as many inputs, plus optionally one for heartbeats (see
//! [`crate::heartbeat`]). A packet pushed into input `j` leaves for output server `j`; it goes
//! out on output `k`, the internal link to server `k`: `k = j` when it goes straight
//! there (or stays, when `j` is this server, NODE), another server when it is balanced
//! through that server. The configuration writes the output server into the packet
//! before this element (an `EtherEncap` whose destination address names server `j`),
//! so the intermediate and output servers switch it by that address without looking up
//! its IP destination again, as RouteBricks did.
//!
//! Each worker balances on its own, without locks: its Direct VLB share is RATE / N /
//! workers for each output server (RSS gives each worker a like share of the flows),
//! and its flowlet table holds the flows it sees.
//!
//! With HEARTBEAT, worker 0 sends a heartbeat out of every output but its own at that
//! interval, and heartbeats pushed into the last input (number N) mark their senders
//! heard. A server not heard from for TIMEOUT counts as down, as if written to the
//! `down` handler, until it is heard again; each worker looks at most once a
//! millisecond, at its next batch.

use crate::flow::flow_hash;
use crate::heartbeat::{self, Liveness};
use crate::vlb::{Balancer, Config, Scheme, MAX_FLOWLET_SLOTS, MIN_DIRECT_BURST};
use graph::args::{Args, Bandwidth, Interval};
use graph::element::*;
use graph::elements::shared::SharedSettings;
use graph::error::ConfigError;
use graph::registry::Registry;
use graph::stats::WorkerCounters;
use packet::{Packet, PacketBatch};
use std::sync::Arc;

/// RouteBricks' flowlet gap (δ = 100 ms).
const DEFAULT_FLOWLET_NS: u64 = 100_000_000;
const DEFAULT_FLOWLET_SLOTS: u32 = 16_384;
/// The direct share's burst: this long at the share's rate, and at least
/// [`MIN_DIRECT_BURST`].
const DEFAULT_BURST_NS: u64 = 1_000_000;
/// TIMEOUT, in heartbeat intervals, when not given: three heartbeats may be lost.
const DEFAULT_TIMEOUT_INTERVALS: u64 = 4;
/// How late a heartbeat may leave: a worker without traffic sleeps up to 10 ms (the
/// runtime's longest idle sleep) before it sends the next round. TIMEOUT must allow
/// for it besides the interval.
const SEND_LATENESS_NS: u64 = 10_000_000;
/// How often a worker looks for servers that fell silent or spoke up again.
const SILENCE_CHECK_NS: u64 = 1_000_000;

/// Adds the cluster crate's element classes to a router's registry.
pub fn register(r: &mut Registry) {
    r.add(Arc::new(VlbSwitchClass));
}

pub struct VlbSwitchClass;

impl ElementClass for VlbSwitchClass {
    fn name(&self) -> &'static str {
        "VLBSwitch"
    }

    fn port_count(&self) -> PortCount {
        PortCount::parse("1-/1-")
    }

    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let node = args.required::<u32>("NODE").map_err(e)?;
        let scheme = args.keyword::<String>("SCHEME").map_err(e)?;
        let rate = args.keyword::<Bandwidth>("RATE").map_err(e)?;
        let burst = args.keyword::<Interval>("BURST").map_err(e)?;
        let flowlet = args.keyword::<Interval>("FLOWLET").map_err(e)?;
        let slots = args.keyword::<u32>("FLOWLETS").map_err(e)?;
        let seed = args.keyword::<u64>("SEED").map_err(e)?;
        let down = args.keyword::<String>("DOWN").map_err(e)?;
        let heartbeat = args.keyword::<Interval>("HEARTBEAT").map_err(e)?;
        let timeout = args.keyword::<Interval>("TIMEOUT").map_err(e)?;
        args.finish().map_err(e)?;

        let nodes = cx.noutputs;
        if nodes < 2 {
            return Err(cx.error(format!(
                "a mesh has at least 2 servers: connect an input and an output for each (this has {})",
                nodes
            )));
        }
        let heartbeat_input = match cx.ninputs {
            n if n == nodes => false,
            n if n == nodes + 1 => true,
            n => {
                return Err(cx.error(format!(
                    "{} outputs (servers) take {} inputs, or {} with the heartbeat input; this has {}",
                    nodes,
                    nodes,
                    nodes + 1,
                    n
                )))
            }
        };
        let heartbeat_ns = match heartbeat.map(|i| i.0) {
            Some(0) => return Err(cx.error("HEARTBEAT must be longer than 0")),
            h => h,
        };
        let timeout_ns = match (heartbeat_ns, timeout.map(|i| i.0)) {
            (None, Some(_)) => return Err(cx.error("TIMEOUT is for HEARTBEAT: give the interval heartbeats come at")),
            (None, None) if heartbeat_input => {
                return Err(cx.error(format!(
                    "input {} takes heartbeats: give HEARTBEAT, the interval they come at",
                    nodes
                )))
            }
            (Some(_), Some(_)) if !heartbeat_input => {
                return Err(cx.error(format!(
                    "TIMEOUT is for watching heartbeats, which come into input {}: connect it",
                    nodes
                )))
            }
            (Some(h), Some(t)) if t <= h.saturating_add(SEND_LATENESS_NS) => {
                return Err(cx.error(
                    "TIMEOUT must be longer than HEARTBEAT plus 10ms (a server is silent for a whole interval between heartbeats, and a quiet worker sends up to 10ms late)",
                ))
            }
            (Some(h), t) => Some(t.unwrap_or(
                h.saturating_mul(DEFAULT_TIMEOUT_INTERVALS)
                    .max(h.saturating_add(2 * SEND_LATENESS_NS)),
            )),
            (None, None) => None,
        };
        let scheme = match scheme {
            None => Scheme::Direct,
            Some(s) => Scheme::parse(&s)
                .ok_or_else(|| cx.error(format!("SCHEME is 'direct' or 'vlb', not '{}'", s)))?,
        };
        let rate = match (scheme, rate) {
            (Scheme::Direct, None) => {
                return Err(cx.error(
                    "SCHEME direct needs RATE, the rate of this server's external ports (such as 10Gbps)",
                ))
            }
            // At least a byte a second: the share of each worker and output server
            // (down to a 1024 x 256th of it) stays a positive number.
            (Scheme::Direct, Some(Bandwidth(r))) if !(r.is_finite() && r >= 1.0) => {
                return Err(cx.error("RATE must be at least 8bps"));
            }
            (Scheme::Vlb, Some(_)) => {
                return Err(cx.error("RATE is for SCHEME direct; vlb balances everything"))
            }
            (_, r) => r.map_or(0.0, |b| b.0),
        };
        let slots = slots.unwrap_or(DEFAULT_FLOWLET_SLOTS);
        if !slots.is_power_of_two() || slots as usize > MAX_FLOWLET_SLOTS {
            return Err(cx.error(format!(
                "FLOWLETS is a power of two up to {}, not {}",
                MAX_FLOWLET_SLOTS, slots
            )));
        }
        let flowlet_gap = match flowlet.map_or(DEFAULT_FLOWLET_NS, |i| i.0) {
            0 => None,
            ns => Some(ns),
        };
        let config = Config {
            node: node as usize,
            nodes,
            scheme,
            direct_rate: rate / nodes as f64,
            direct_burst: 0.0,
            flowlet_gap,
            flowlet_slots: slots as usize,
            seed: seed.unwrap_or(u64::from(node) + 1),
        };
        let ns_per_tick = 1e9 / graph::tsc::tsc_hz();
        let now = (graph::tsc::rdtsc() as f64 * ns_per_tick) as u64;
        let spec = VlbSwitchSpec {
            liveness: heartbeat_input
                .then(|| timeout_ns.map(|t| Arc::new(Liveness::new(node as usize, nodes, t, now))))
                .flatten(),
            config,
            burst_ns: burst.map_or(DEFAULT_BURST_NS, |i| i.0),
            ns_per_tick,
            totals: Arc::new(std::array::from_fn(|_| WorkerCounters::new(cx.workers))),
            down: Arc::new(SharedSettings::new(Vec::new())),
            heartbeat_ns,
        };
        if let Some(down) = down {
            let down = parse_servers(&down, &spec.config).map_err(|m| cx.error(format!("DOWN: {}", m)))?;
            spec.down.write(|d| *d = down);
        }
        // Refuses what the balancer would (a NODE outside the mesh) while the
        // configuration's position is at hand.
        spec.worker_config(WorkerInfo { index: 0, count: 1 })
            .check()
            .map_err(|m| cx.error(m))?;
        Ok(Arc::new(spec))
    }
}

/// The handlers' counts in the order of [`COUNT_HANDLERS`] and then the heartbeats
/// received, each a line a worker (graph's [`WorkerCounters`]): a worker adds its
/// batch's with plain stores.
type Totals = [WorkerCounters; 5];

const COUNT_HANDLERS: [&str; 4] = ["local", "direct", "balanced", "flowlet_hits"];
const HEARTBEATS: usize = 4;

struct VlbSwitchSpec {
    /// The whole server's configuration: `direct_rate` is its share for each output
    /// server before it is split between workers.
    config: Config,
    burst_ns: u64,
    ns_per_tick: f64,
    totals: Arc<Totals>,
    /// The servers marked down through the `down` handler.
    down: Arc<SharedSettings<Vec<usize>>>,
    /// The interval worker 0 sends heartbeats at.
    heartbeat_ns: Option<u64>,
    /// When each server was last heard, with a heartbeat input.
    liveness: Option<Arc<Liveness>>,
}

impl VlbSwitchSpec {
    fn worker_config(&self, w: WorkerInfo) -> Config {
        let direct_rate = self.config.direct_rate / w.count.max(1) as f64;
        Config {
            direct_rate,
            direct_burst: (direct_rate * self.burst_ns as f64 * 1e-9).max(MIN_DIRECT_BURST),
            // Workers draw different intermediates.
            seed: self.config.seed ^ (w.index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ..self.config.clone()
        }
    }
}

impl ElementSpec for VlbSwitchSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        let mut balancer = Balancer::new(self.worker_config(w)).expect("checked when the element was built");
        let (down_generation, down) = self.down.snapshot();
        balancer.set_down(&down);
        if let Some(l) = &self.liveness {
            // The router starts (again): every server has TIMEOUT from now to be heard,
            // before this worker looks for silent ones.
            l.restart((graph::tsc::rdtsc() as f64 * self.ns_per_tick) as u64);
        }
        Box::new(VlbSwitch {
            balancer,
            down: self.down.clone(),
            down_generation,
            written_down: down,
            liveness: self.liveness.clone(),
            silent: Vec::new(),
            next_check: 0,
            sender: self.heartbeat_ns.filter(|_| w.index == 0).map(|interval| Sender {
                interval,
                next: 0,
                seq: 0,
            }),
            ns_per_tick: self.ns_per_tick,
            totals: self.totals.clone(),
            worker: w.index,
            ports: Vec::new(),
        })
    }

    fn handlers(&self) -> Vec<HandlerInfo> {
        let mut h: Vec<HandlerInfo> = COUNT_HANDLERS.into_iter().map(HandlerInfo::read).collect();
        h.push(HandlerInfo::read_write("down"));
        if self.liveness.is_some() {
            h.extend(["silent", "heard_ms", "heartbeats"].map(HandlerInfo::read));
        }
        h
    }

    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "down").then(|| {
            let down = parse_servers(value, &self.config)?;
            self.down.write(|d| *d = down);
            Ok(())
        })
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let list = |v: Vec<usize>| v.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" ");
        if name == "down" {
            return Some(list(self.down.read().clone()));
        }
        if let Some(l) = &self.liveness {
            let now = (graph::tsc::rdtsc() as f64 * self.ns_per_tick) as u64;
            match name {
                "silent" => return Some(list(l.silent(now))),
                "heard_ms" => {
                    let ages: Vec<String> = l.ages_ms(now).iter().map(|a| a.to_string()).collect();
                    return Some(ages.join(" "));
                }
                "heartbeats" => return Some(self.totals[HEARTBEATS].sum().to_string()),
                _ => {}
            }
        }
        let which = COUNT_HANDLERS.iter().position(|&h| h == name)?;
        Some(self.totals[which].sum().to_string())
    }
}

/// The servers a `down` write names: numbers of other servers of the mesh, separated
/// by spaces or commas; nothing for none.
fn parse_servers(value: &str, config: &Config) -> Result<Vec<usize>, String> {
    let mut down = Vec::new();
    for word in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        let k: usize = word.parse().map_err(|_| {
            format!(
                "'{}' is not a server number (down takes server numbers, 0 to {})",
                word,
                config.nodes - 1
            )
        })?;
        if k >= config.nodes {
            return Err(format!("server {} is not in a mesh of {}", k, config.nodes));
        }
        if k == config.node {
            return Err(format!("server {} is this server", k));
        }
        if !down.contains(&k) {
            down.push(k);
        }
    }
    down.sort_unstable();
    Ok(down)
}

/// Worker 0's heartbeats: the interval, when the next round is due (ns) and its
/// sequence number.
struct Sender {
    interval: u64,
    next: u64,
    seq: u32,
}

struct VlbSwitch {
    balancer: Balancer,
    /// The spec's down servers, and the generation of them the balancer has.
    down: Arc<SharedSettings<Vec<usize>>>,
    down_generation: u64,
    /// The servers written down (the `down` handler, DOWN) at that generation.
    written_down: Vec<usize>,
    liveness: Option<Arc<Liveness>>,
    /// The servers found silent at the last look, and when to look next (ns).
    silent: Vec<usize>,
    next_check: u64,
    sender: Option<Sender>,
    ns_per_tick: f64,
    totals: Arc<Totals>,
    worker: usize,
    /// Each packet's output, reused batch to batch.
    ports: Vec<u32>,
}

impl Element for VlbSwitch {
    fn push(&mut self, port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, cx: &mut Context<'_>) {
        let now = (cx.now_tsc() as f64 * self.ns_per_tick) as u64;
        if port == self.balancer.config().nodes {
            self.take_heartbeats(batch, now);
            return;
        }
        // A `down` write reaches each worker at its next batch: one load a batch.
        let mut changed = false;
        if self.down.generation() != self.down_generation {
            let (generation, down) = self.down.snapshot();
            self.written_down = down;
            self.down_generation = generation;
            changed = true;
        }
        if let Some(l) = self.liveness.as_ref().filter(|_| now >= self.next_check) {
            self.next_check = now + SILENCE_CHECK_NS;
            let silent = l.silent(now);
            if silent != self.silent {
                self.silent = silent;
                changed = true;
            }
        }
        if changed {
            let mut down = self.written_down.clone();
            down.extend(self.silent.iter().filter(|k| !self.written_down.contains(k)));
            self.balancer.set_down(&down);
        }
        // Only flowlets need to know a packet's flow.
        let flowlets = self.balancer.config().flowlet_gap.is_some();
        let balancer = &mut self.balancer;
        self.ports.clear();
        self.ports.extend(batch.iter().map(|p| {
            let flow = if flowlets {
                let network = p.network_header_offset().and_then(|o| usize::try_from(o).ok());
                flow_hash(p.data(), network)
            } else {
                0
            };
            let bytes = u32::try_from(p.len()).unwrap_or(u32::MAX);
            balancer.choose(now, port, flow, bytes) as u32
        }));
        out.push_each(batch, &self.ports);
        let c = self.balancer.take_counts();
        for (total, n) in self
            .totals
            .iter()
            .zip([c.local, c.direct, c.balanced, c.flowlet_hits])
        {
            total.add(self.worker, n);
        }
    }

    fn is_source(&self) -> bool {
        self.sender.is_some()
    }

    /// Heartbeats keep no router running: the interfaces' sources do.
    fn keeps_router_running(&self) -> bool {
        false
    }

    fn run(&mut self, out: &mut Outputs<'_>, cx: &mut Context<'_>) -> TaskStatus {
        let Some(s) = self.sender.as_mut() else {
            return TaskStatus::Done;
        };
        if cx.stop_requested() {
            return TaskStatus::Done;
        }
        let tsc = cx.now_tsc();
        let now = (tsc as f64 * self.ns_per_tick) as u64;
        if now < s.next {
            let wait = ((s.next - now) as f64 / self.ns_per_tick) as u64;
            return TaskStatus::IdleUntil(tsc.saturating_add(wait));
        }
        let (node, nodes) = (self.balancer.config().node, self.balancer.config().nodes);
        for k in (0..nodes).filter(|&k| k != node) {
            out.push(k, Packet::from_slice(&heartbeat::frame(node, k, nodes, s.seq)));
        }
        s.seq = s.seq.wrapping_add(1);
        // A round late by more than an interval (a worker held up) is not made up.
        s.next = if now >= s.next.saturating_add(s.interval) {
            now + s.interval
        } else {
            s.next + s.interval
        };
        TaskStatus::Busy
    }

    fn idle_wait(&mut self) -> IdleWait {
        // The worker's sleep is short (milliseconds): heartbeats leave a little late.
        IdleWait::Nothing
    }
}

impl VlbSwitch {
    /// Marks the senders of the heartbeats in `batch` heard at `now`, and drops them.
    fn take_heartbeats(&mut self, batch: &mut PacketBatch, now: u64) {
        let (node, nodes) = (self.balancer.config().node, self.balancer.config().nodes);
        if let Some(l) = &self.liveness {
            let mut n = 0;
            for p in batch.iter() {
                if let Some(from) = heartbeat::sender(p.data(), node, nodes) {
                    l.heard(from, now);
                    n += 1;
                }
            }
            self.totals[HEARTBEATS].add(self.worker, n);
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests;
