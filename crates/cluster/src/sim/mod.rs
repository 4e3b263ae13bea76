//! A discrete-event simulator of a mesh of servers acting as one router, which makes
//! every balancing decision with the router's own [`Balancer`](crate::vlb::Balancer)
//! (one for each input server), so a simulation exercises the code the router runs.
//!
//! # The model
//!
//! - N servers, each with one external port of rate R; a full mesh of internal links
//!   i→j, each of rate L, with a propagation delay.
//! - Three kinds of resource, each a first-in first-out queue in front of one
//!   work-conserving server, with a buffer of a fixed number of bytes: a packet that
//!   would not fit is dropped (drop-tail) and counted by the kind of resource. The
//!   kinds are each server's packet processor (capacity C: every role a server plays
//!   for a packet, input, intermediate or output, costs the packet's bytes at C), each
//!   internal link (rate L) and each external output port (rate R). A packet occupies
//!   its buffer from its arrival until its last bit leaves.
//! - A packet's path: the input server's processor; then, unless it is local, the link
//!   to the next server the balancer chose and that server's processor; if that server
//!   is an intermediate, the link on to the output server and its processor; last, the
//!   output server's external port, whose last bit delivers it. A local packet (output
//!   server = input server) is processed once and goes straight to the port: one pass
//!   through a server is one lookup and one forwarding, whatever its roles.
//! - Events are "a packet arrives at a resource", "a flow starts" and "a flow sends a
//!   packet", handled in time order from one heap. A queue keeps the time it is next
//!   free: a packet arriving at t leaves at max(t, free) + its service time, exact for a
//!   FIFO queue fed in time order. A queue's buffer holds the bytes of the packets
//!   that have not left yet: it keeps their leaving times in order and forgets those
//!   past (constant time per packet, amortised). Times are integer picoseconds: service
//!   times are exact at rates that divide 8,000 Gbps (1, 2.5, 10, 25, 40, 100 ...) and
//!   within half a picosecond at others.
//!
//! # A k-ary n-fly instead of the full mesh
//!
//! A full mesh needs a NIC port a neighbour, so past a few dozen servers the planner
//! ([`crate::plan`]) joins them by a butterfly of switching servers instead, as
//! RouteBricks proposed (SOSP'09 §3.2). [`Topology::NFly`] simulates that layout:
//!
//! - The N servers above (each with its port, its processor and its three VLB roles)
//!   are the n-fly's edge servers. N must be a power of the radix k: N = k^n, so the
//!   butterfly has n stages of N/k switching servers each.
//! - Each edge server has one uplink into the first stage and receives on one downlink
//!   from the last; each switching server takes k links in and passes k on. Every such
//!   link (the uplinks and each stage's outputs, the last stage's being the downlinks)
//!   is a queue of rate L with the propagation delay, L standing for the bundle of NIC
//!   ports the planner gives it (2R for one external port a server).
//! - A switching server is a processor of capacity `switch_gbps`, in front of its k
//!   output links; it only passes packets on (the output server is in the MAC address).
//! - Routing is the butterfly's own, one path for each pair: stage s sets digit n−1−s
//!   of the packet's position, in base k, to the destination's. A packet that the
//!   balancer sends from server a to an intermediate b crosses the n stages to b, and
//!   from b crosses them again to its output server: wherever the mesh uses link a→b,
//!   the n-fly uses this path of 2n + 1 queues.
//! - A path is therefore fixed by its two ends, and some permutations (such as the
//!   transpose matrix, which swaps the high and low halves of a server's digits) load
//!   one link of a middle stage with the traffic of √N − 1 servers (the √Nth sends
//!   to itself). VLB's random
//!   intermediate spreads them again.
//! - Only edge servers fail ([`Failure`]); switching servers and links do not.
//!
//! # Traffic
//!
//! Every input server receives flows. In the steady state (the simulation starts in
//! it, see below) its external port offers `load`·R on average.
//!
//! - A flow has an output server drawn from the traffic matrix: `uniform` (any server,
//!   the input server included), `permutation` (server i sends everything to i+1 mod
//!   N), `transpose` (N = m², server x·m + y sends everything to y·m + x, itself when
//!   x = y) or `hotspot` (a fraction `hot` to server 0, the rest uniform).
//! - Its size in packets is a bounded Pareto variable rounded down: P(size ≥ k) is
//!   proportional to k^-1.2 − 10001^-1.2 for k from 1 to 10,000, a mean of about 4.6
//!   packets ([`mean_flow_packets`]), with a third of the bytes in flows of over 100
//!   packets, as in measured traffic (many mice, most bytes in elephants).
//! - It sends at 1/16 of R on average (a flow is one of many on a port), in bursts as
//!   real sources do: after a packet of b bytes its next comes after an exponential
//!   time of mean b/(R/16). Its packets are therefore spread in time, often closer
//!   than the difference between two paths' delays, and a balancer may send them on
//!   different paths.
//! - Flows start at each server as a Poisson process whose rate gives the load.
//! - Packets have a fixed size, or the IMIX mix of 64, 576 and 1,500 bytes in the
//!   ratio 7:4:1, drawn for each packet.
//! - The simulation starts in the steady state: at time 0 each server already has the
//!   flows a long run would have in progress (a Poisson number with mean `load` × 16,
//!   each with a size drawn in proportion to size × probability and a part already
//!   sent), so there is no ramp up. Flows start and packets are sent only during the
//!   duration; a flow still sending at its end stops there. Then the queues drain:
//!   every offered packet is delivered or dropped.
//!
//! # Balancing
//!
//! Each input server has one [`Balancer`](crate::vlb::Balancer) for all its flows,
//! seeded from the run's seed and the server's number; a flow's hash is a hash of the
//! input server and the flow's number there. The schemes ([`Scheme`]):
//! `direct-only` is a Direct VLB balancer whose direct share is unlimited (the
//! balancer is kept, so its counts read the same way); `vlb` is classic VLB per packet;
//! `direct` is Direct VLB per packet with a direct share of R/N a second for each
//! output server and a burst of 1 ms of it, raised to the largest packet where that is
//! more (with a smaller burst no such packet could ever go direct: 1 ms of R/N is 488
//! bytes at 1 Gbps and 256 servers); `+flowlets` keeps a flow's packets on one path
//! while they come within the flowlet gap of each other.
//!
//! The default flowlet gap of the command line is 100 us, RouteBricks' 100 ms scaled
//! down to our flows, which last microseconds to milliseconds rather than seconds. It
//! is well above the difference between two paths' delays unless queues are long (one
//! link, 0.8 us for 1,000 bytes at 10 Gbps, and 2 us of propagation), so a new flowlet
//! rarely overtakes the one before, and it is above all but a few of a flow's packet
//! gaps (e^-8 of them at R/16), so a flow keeps its path, as RouteBricks found.
//!
//! # Simplifications
//!
//! - The external input port is not a queue: a server's flows may offer more than R for
//!   a while (their sum is a random process with mean `load`·R).
//! - Processors, links and ports are single queues: no per-core queues, no NIC rings,
//!   no batching, no priority; a server's processor serves its three roles in one FIFO.
//! - The buffer is the same number of bytes at every resource.
//! - Links and processors lose nothing but by overflow; there are no errors.
//! - A server balances with one balancer, as one worker would.
//!
//! # A failure
//!
//! A run may fail one server ([`Failure`]) at a time during the traffic: from then on
//! its processor takes nothing (every packet arriving there is dropped, whatever its
//! role: traffic from its port, relayed through it, or for its port), though packets
//! it had already accepted still leave. The other input servers go on balancing
//! through it until they mark it down, a given time after the failure (what heartbeats
//! take, see [`crate::heartbeat`]), or never.
//!
//! # Measurements
//!
//! See [`Results`]: loads and utilisations divide the bytes a resource served (during
//! the run and the drain) by what its rate could serve in the duration, so a resource
//! that is busy throughout and then drains a full buffer shows slightly above 1.

mod net;
mod report;
mod traffic;

pub use report::Results;
pub use traffic::mean_flow_packets;

use crate::vlb::{Config, MAX_NODES};

/// The largest packet the simulator makes.
pub const MAX_PACKET_BYTES: u32 = 9000;
/// The smallest.
pub const MIN_PACKET_BYTES: u32 = 64;
/// A flow sends at R divided by this.
pub const FLOW_RATE_DIVISOR: f64 = 16.0;
/// The largest load the simulator takes: beyond it the queues are simply full.
pub const MAX_LOAD: f64 = 10.0;
/// The longest run, in ns (its picoseconds must fit 64 bits with room to spare).
pub const MAX_DURATION_NS: u64 = 1_000_000_000_000;

/// How each input server spreads its traffic over the mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Every packet straight to its output server: a Direct VLB balancer with an
    /// unlimited direct share.
    DirectOnly,
    /// Classic VLB, each packet on its own.
    Vlb,
    /// Direct VLB, each packet on its own.
    Direct,
    /// Direct VLB with flowlets.
    DirectFlowlets,
    /// Classic VLB with flowlets.
    VlbFlowlets,
}

impl Scheme {
    /// The schemes a comparison runs, in the order it prints them.
    pub const COMPARISON: [Scheme; 4] = [
        Scheme::DirectOnly,
        Scheme::Vlb,
        Scheme::Direct,
        Scheme::DirectFlowlets,
    ];

    pub const ALL: [Scheme; 5] = [
        Scheme::DirectOnly,
        Scheme::Vlb,
        Scheme::Direct,
        Scheme::DirectFlowlets,
        Scheme::VlbFlowlets,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::DirectOnly => "direct-only",
            Scheme::Vlb => "vlb",
            Scheme::Direct => "direct",
            Scheme::DirectFlowlets => "direct+flowlets",
            Scheme::VlbFlowlets => "vlb+flowlets",
        }
    }

    pub fn parse(s: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(s))
    }

    /// Whether it keeps flowlets on their path.
    pub fn uses_flowlets(self) -> bool {
        matches!(self, Scheme::DirectFlowlets | Scheme::VlbFlowlets)
    }
}

/// Which output server a flow goes to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Matrix {
    /// Any server, the input server included, with equal chance.
    Uniform,
    /// Server i sends everything to server i + 1 mod N.
    Permutation,
    /// A fraction `hot` of each server's flows go to server 0, the rest uniformly.
    Hotspot { hot: f64 },
    /// With N = m² servers, server x·m + y sends everything to y·m + x (in an n-fly
    /// of even n, the high half of its digits swapped with the low half).
    Transpose,
}

impl Matrix {
    pub fn name(self) -> &'static str {
        match self {
            Matrix::Uniform => "uniform",
            Matrix::Permutation => "permutation",
            Matrix::Hotspot { .. } => "hotspot",
            Matrix::Transpose => "transpose",
        }
    }
}

/// How the servers are joined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Topology {
    /// A link from every server to every other.
    FullMesh,
    /// A k-ary n-fly of switching servers (see the module documentation).
    NFly {
        /// k: the links each switching server takes in and passes on.
        radix: usize,
        /// Each switching server's packet processor, in Gbps.
        switch_gbps: f64,
    },
}

impl Topology {
    pub fn name(self) -> &'static str {
        match self {
            Topology::FullMesh => "full-mesh",
            Topology::NFly { .. } => "n-fly",
        }
    }

    /// The stages of an n-fly of radix `radix` over `servers` edge servers, when
    /// `servers` is a power of the radix (at least its first).
    pub fn stages(radix: usize, servers: usize) -> Option<u32> {
        if radix < 2 || servers < radix {
            return None;
        }
        let mut stages = 0;
        let mut n = servers;
        while n > 1 {
            if !n.is_multiple_of(radix) {
                return None;
            }
            n /= radix;
            stages += 1;
        }
        Some(stages)
    }
}

/// The size of each packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketSize {
    Fixed(u32),
    /// 64, 576 and 1,500 bytes in the ratio 7:4:1 (a mean of about 354 bytes).
    Imix,
}

impl PacketSize {
    pub fn mean(self) -> f64 {
        match self {
            PacketSize::Fixed(b) => f64::from(b),
            PacketSize::Imix => (7.0 * 64.0 + 4.0 * 576.0 + 1500.0) / 12.0,
        }
    }

    pub fn largest(self) -> u32 {
        match self {
            PacketSize::Fixed(b) => b,
            PacketSize::Imix => 1500,
        }
    }
}

/// A server that fails during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    pub server: usize,
    /// When, from the start of the traffic.
    pub at_ns: u64,
    /// How long after the failure the other servers mark it down (`None`: never).
    pub detected_after_ns: Option<u64>,
}

/// One simulation run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub servers: usize,
    pub topology: Topology,
    /// R, each server's external port, in Gbps.
    pub port_gbps: f64,
    /// L, each internal link (of an n-fly: each uplink, downlink and link between
    /// stages), in Gbps.
    pub link_gbps: f64,
    /// C, each server's packet processor, in Gbps.
    pub server_gbps: f64,
    /// Each internal link's propagation delay.
    pub propagation_ns: u64,
    /// Each resource's buffer.
    pub buffer_bytes: u64,
    /// Offered load at each input server, as a fraction of R.
    pub load: f64,
    pub matrix: Matrix,
    pub packet_size: PacketSize,
    /// Flows start and packets are sent during this long; then the queues drain.
    pub duration_ns: u64,
    pub scheme: Scheme,
    /// The flowlet gap of the flowlet schemes; `None` balances each packet on its own.
    pub flowlet_gap_ns: Option<u64>,
    pub seed: u64,
    pub failure: Option<Failure>,
}

impl SimConfig {
    /// The defaults of `brickroute cluster simulate` for `servers` servers.
    pub fn new(servers: usize) -> SimConfig {
        SimConfig {
            servers,
            topology: Topology::FullMesh,
            port_gbps: 10.0,
            link_gbps: 10.0,
            server_gbps: 22.0,
            propagation_ns: 2_000,
            buffer_bytes: 256 * 1024,
            load: 0.9,
            matrix: Matrix::Uniform,
            packet_size: PacketSize::Fixed(1000),
            duration_ns: 20_000_000,
            scheme: Scheme::Vlb,
            flowlet_gap_ns: Some(100_000),
            seed: 1,
            failure: None,
        }
    }

    /// The reason this run cannot be made, if any, as a sentence for a user.
    pub fn check(&self) -> Result<(), String> {
        if !(2..=MAX_NODES).contains(&self.servers) {
            return Err(format!(
                "a mesh has 2 to {} servers, not {}",
                MAX_NODES, self.servers
            ));
        }
        for (what, gbps) in [
            ("port rate", self.port_gbps),
            ("link rate", self.link_gbps),
            ("server capacity", self.server_gbps),
        ] {
            // Below 1 Mbps a packet's service time in picoseconds stops fitting easily.
            if !(gbps.is_finite() && gbps >= 0.001) {
                return Err(format!("the {} must be at least 0.001 Gbps, not {}", what, gbps));
            }
        }
        if !(self.load.is_finite() && self.load > 0.0 && self.load <= MAX_LOAD) {
            return Err(format!(
                "the load is a fraction of each port's rate above 0 and at most {} (0.9 for 90 %), not {}",
                MAX_LOAD, self.load
            ));
        }
        if let Topology::NFly { radix, switch_gbps } = self.topology {
            if radix < 2 {
                return Err(format!("an n-fly's radix is at least 2, not {}", radix));
            }
            if Topology::stages(radix, self.servers).is_none() {
                return Err(format!(
                    "an n-fly of radix {} joins a power of {} servers ({}, {}, {} ...), not {}",
                    radix,
                    radix,
                    radix,
                    radix * radix,
                    radix * radix * radix,
                    self.servers
                ));
            }
            if !(switch_gbps.is_finite() && switch_gbps >= 0.001) {
                return Err(format!(
                    "the switching servers' capacity must be at least 0.001 Gbps, not {}",
                    switch_gbps
                ));
            }
        }
        if self.matrix == Matrix::Transpose && square_root(self.servers).is_none() {
            return Err(format!(
                "the transpose matrix needs a square number of servers (4, 9, 16, 64, 256 ...), not {}",
                self.servers
            ));
        }
        if let Matrix::Hotspot { hot } = self.matrix {
            if !(hot > 0.0 && hot <= 1.0) {
                return Err(format!("the hot fraction is above 0 and at most 1, not {}", hot));
            }
        }
        if let PacketSize::Fixed(b) = self.packet_size {
            if !(MIN_PACKET_BYTES..=MAX_PACKET_BYTES).contains(&b) {
                return Err(format!(
                    "a packet has {} to {} bytes, not {}",
                    MIN_PACKET_BYTES, MAX_PACKET_BYTES, b
                ));
            }
        }
        let largest = u64::from(self.packet_size.largest());
        if self.buffer_bytes < largest {
            return Err(format!(
                "a buffer of {} bytes cannot hold one {}-byte packet",
                self.buffer_bytes, largest
            ));
        }
        if self.duration_ns == 0 || self.duration_ns > MAX_DURATION_NS {
            return Err(format!(
                "the duration is above 0 and at most {} s, not {} ns",
                MAX_DURATION_NS / 1_000_000_000,
                self.duration_ns
            ));
        }
        if self.propagation_ns > MAX_DURATION_NS {
            return Err(format!(
                "the propagation delay is at most {} s, not {} ns",
                MAX_DURATION_NS / 1_000_000_000,
                self.propagation_ns
            ));
        }
        if self.flowlet_gap_ns == Some(0) {
            return Err("a flowlet gap of 0 keeps no packet on its flowlet's path; give none instead".into());
        }
        if let Some(f) = self.failure {
            if f.server >= self.servers {
                return Err(format!(
                    "server {} cannot fail: the mesh has servers 0 to {}",
                    f.server,
                    self.servers - 1
                ));
            }
            if f.at_ns >= self.duration_ns {
                return Err(format!(
                    "a failure at {} ns comes after the {} ns of traffic",
                    f.at_ns, self.duration_ns
                ));
            }
            if f.detected_after_ns.is_some_and(|d| d > MAX_DURATION_NS) {
                return Err(format!(
                    "a failure is detected within {} s or never",
                    MAX_DURATION_NS / 1_000_000_000
                ));
            }
        }
        Ok(())
    }

    /// The balancer configuration of input server `node`.
    fn balancer(&self, node: usize) -> Config {
        let rate_bytes = self.port_gbps * 1e9 / 8.0;
        let base = match self.scheme {
            Scheme::Vlb | Scheme::VlbFlowlets => Config::vlb(node, self.servers),
            Scheme::Direct | Scheme::DirectFlowlets => {
                let c = Config::direct(node, self.servers, rate_bytes);
                Config {
                    direct_burst: c.direct_burst.max(f64::from(self.packet_size.largest())),
                    ..c
                }
            }
            Scheme::DirectOnly => Config {
                // A share no traffic can exhaust (finite, as the balancer requires).
                direct_rate: 1e30,
                direct_burst: 1e30,
                ..Config::direct(node, self.servers, rate_bytes)
            },
        };
        Config {
            flowlet_gap: if self.scheme.uses_flowlets() {
                self.flowlet_gap_ns
            } else {
                None
            },
            // Far more slots than a server has flows in progress (about 16 × load).
            flowlet_slots: 1024,
            seed: traffic::mix(self.seed, 0xba1a_0000 + node as u64),
            ..base
        }
    }
}

/// The m with m² = `n`, if there is one.
pub(crate) fn square_root(n: usize) -> Option<usize> {
    let m = (n as f64).sqrt().round() as usize;
    (m * m == n).then_some(m)
}

/// Runs one simulation.
pub fn run(cfg: &SimConfig) -> Result<Results, String> {
    cfg.check()?;
    let mut sim = net::Simulation::new(cfg)?;
    sim.start_traffic();
    sim.run();
    Ok(sim.results())
}

#[cfg(test)]
mod tests;
