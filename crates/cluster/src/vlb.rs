//! Valiant load balancing: where a packet's input server sends it across the mesh.
//!
//! In a mesh of N servers, each with external ports of total rate R, the server a
//! packet enters by looks up its output server and then sends it either straight
//! there or to an intermediate server, which passes it on to the output server
//! (RouteBricks §3.2). Classic VLB draws the intermediate uniformly for every packet:
//! each internal link then carries at most 2R/N whatever the traffic matrix, and each
//! server handles up to 3R (as input, intermediate and output). Direct VLB first
//! sends up to R/N of the traffic for each output server straight to it and balances
//! only the excess; a uniform matrix then costs each server 2R.
//!
//! Sending a flow's packets over different paths reorders them. A flowlet is a run of
//! a flow's packets each within `flowlet_gap` of the one before: it keeps the path its
//! first packet was given, and the next flowlet may take another (RouteBricks used a
//! gap of 100 ms). Under Direct VLB a flowlet keeps the direct path only while the
//! output server's share lasts; then it is balanced, as a new flowlet, so the direct
//! path never carries more than the share and its burst. Flows are told apart by a 32-bit hash; the table has one slot a
//! hash bucket, and a flow that finds its slot held by another flow starts a new
//! flowlet and takes the slot.
//!
//! Time is in nanoseconds from any fixed origin, so the same [`Balancer`] runs in a
//! router (wall-clock time) and in a simulator (simulated time).

/// The largest mesh: internal links and output servers are element ports, and the
/// output server travels in one byte of the destination MAC address.
pub const MAX_NODES: usize = 256;

/// The largest flowlet table, in slots.
pub const MAX_FLOWLET_SLOTS: usize = 1 << 24;

/// The least direct burst [`Config::direct`] gives: a full-size Ethernet frame, or no
/// such frame could ever go direct.
pub const MIN_DIRECT_BURST: f64 = 1518.0;

/// How an input server spreads what it sends across the mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Classic VLB: every packet (or flowlet) goes to an intermediate server drawn
    /// uniformly from all N; drawing itself or the output server means sending
    /// straight to the output server.
    Vlb,
    /// Direct VLB: up to `direct_rate` bytes a second for each output server go
    /// straight to it; the excess goes to an intermediate drawn from the other N - 2.
    Direct,
}

impl Scheme {
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "vlb" => Some(Scheme::Vlb),
            "direct" => Some(Scheme::Direct),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Vlb => "vlb",
            Scheme::Direct => "direct",
        }
    }
}

/// What a [`Balancer`] is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// This server's index in the mesh.
    pub node: usize,
    /// Servers in the mesh, 2 to [`MAX_NODES`].
    pub nodes: usize,
    pub scheme: Scheme,
    /// Bytes a second each output server may take on the direct path (Direct VLB):
    /// R/N for this server's external rate R.
    pub direct_rate: f64,
    /// Bytes of unused direct share an output server may save for a burst.
    pub direct_burst: f64,
    /// A flow's packet within this many nanoseconds of the flow's previous packet
    /// takes the same path; `None` balances every packet on its own.
    pub flowlet_gap: Option<u64>,
    /// Slots in the flowlet table, a power of two.
    pub flowlet_slots: usize,
    /// Seeds the draw of intermediate servers.
    pub seed: u64,
}

impl Config {
    /// Classic VLB for server `node` of `nodes`, per packet, with a fixed seed.
    pub fn vlb(node: usize, nodes: usize) -> Config {
        Config {
            node,
            nodes,
            scheme: Scheme::Vlb,
            direct_rate: 0.0,
            direct_burst: 0.0,
            flowlet_gap: None,
            flowlet_slots: 4096,
            seed: 1,
        }
    }

    /// Direct VLB for server `node` of `nodes` with external rate `rate` bytes a
    /// second: R/N a second for each output server, 1 ms of it as burst (at least
    /// [`MIN_DIRECT_BURST`]).
    pub fn direct(node: usize, nodes: usize, rate: f64) -> Config {
        let share = rate / nodes as f64;
        Config {
            scheme: Scheme::Direct,
            direct_rate: share,
            direct_burst: (share / 1000.0).max(MIN_DIRECT_BURST),
            ..Config::vlb(node, nodes)
        }
    }

    /// The reason this configuration cannot run, if any.
    pub fn check(&self) -> Result<(), String> {
        if !(2..=MAX_NODES).contains(&self.nodes) {
            return Err(format!(
                "a mesh has 2 to {} servers, not {}",
                MAX_NODES, self.nodes
            ));
        }
        if self.node >= self.nodes {
            return Err(format!(
                "server {} is not in a mesh of {} (servers are numbered from 0)",
                self.node, self.nodes
            ));
        }
        if self.scheme == Scheme::Direct {
            if !(self.direct_rate.is_finite() && self.direct_rate > 0.0) {
                return Err(format!(
                    "the direct rate must be positive, not {}",
                    self.direct_rate
                ));
            }
            if !(self.direct_burst.is_finite() && self.direct_burst >= 0.0) {
                return Err(format!(
                    "the direct burst must be 0 or more, not {}",
                    self.direct_burst
                ));
            }
        }
        if !self.flowlet_slots.is_power_of_two() || self.flowlet_slots > MAX_FLOWLET_SLOTS {
            return Err(format!(
                "the flowlet table has a power of two slots, up to {}, not {}",
                MAX_FLOWLET_SLOTS, self.flowlet_slots
            ));
        }
        if self.flowlet_gap == Some(0) {
            return Err(
                "a flowlet gap of 0 keeps no packet on its flowlet's path; leave it out instead".into(),
            );
        }
        Ok(())
    }
}

/// Packets a balancer has sent, by the path they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// For this server's own external ports: they do not cross the mesh.
    pub local: u64,
    /// Straight to their output server.
    pub direct: u64,
    /// Through an intermediate server.
    pub balanced: u64,
    /// Of `direct` and `balanced`, those that took their flowlet's path rather than a
    /// new decision.
    pub flowlet_hits: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.local += o.local;
        self.direct += o.direct;
        self.balanced += o.balanced;
        self.flowlet_hits += o.flowlet_hits;
    }
}

/// An output server's direct share: a token bucket in bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    tokens: f64,
    at: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    used: bool,
    flow: u32,
    dest: u16,
    next: u16,
    last: u64,
}

/// One input server's balancing state (one a worker in a router: it takes no lock).
pub struct Balancer {
    cfg: Config,
    buckets: Vec<Bucket>,
    slots: Vec<Slot>,
    rng: u64,
    counts: Counts,
    /// When some servers are down: the others, but this one, in order (the servers
    /// that may relay), and which are down. `None` while every server is up.
    relays: Option<(Vec<u16>, Vec<bool>)>,
}

impl Balancer {
    pub fn new(cfg: Config) -> Result<Balancer, String> {
        cfg.check()?;
        let slots = if cfg.flowlet_gap.is_some() {
            cfg.flowlet_slots
        } else {
            0
        };
        Ok(Balancer {
            // Full: a new balancer may send a burst to each server straight away.
            buckets: vec![
                Bucket {
                    tokens: cfg.direct_burst,
                    at: 0
                };
                cfg.nodes
            ],
            slots: vec![Slot::default(); slots],
            // xorshift needs a state other than 0.
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15 | 1,
            counts: Counts::default(),
            relays: None,
            cfg,
        })
    }

    /// Marks the servers in `down` as down and every other as up. A down server relays
    /// nothing: no new decision sends through it, and a flowlet through it is balanced
    /// anew. Traffic whose output server is down still goes there (its routes are the
    /// control plane's to withdraw). This server and servers outside the mesh are
    /// ignored.
    pub fn set_down(&mut self, down: &[usize]) {
        let n = self.cfg.nodes;
        let mut is_down = vec![false; n];
        for &k in down {
            if k < n && k != self.cfg.node {
                is_down[k] = true;
            }
        }
        self.relays = is_down.contains(&true).then(|| {
            let up = (0..n)
                .filter(|&k| k != self.cfg.node && !is_down[k])
                .map(|k| k as u16)
                .collect();
            (up, is_down)
        });
    }

    /// The servers marked down, in order.
    pub fn down(&self) -> Vec<usize> {
        match &self.relays {
            None => Vec::new(),
            Some((_, down)) => (0..down.len()).filter(|&k| down[k]).collect(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Takes the counts, leaving zeros.
    pub fn take_counts(&mut self) -> Counts {
        std::mem::take(&mut self.counts)
    }

    /// The server to send a packet of `bytes` bytes, of the flow hashed to `flow`, to
    /// at time `now` (ns), when its output server is `dest` (below `nodes`): `dest`
    /// itself (direct, or local when `dest` is this server) or an intermediate.
    pub fn choose(&mut self, now: u64, dest: usize, flow: u32, bytes: u32) -> usize {
        debug_assert!(
            dest < self.cfg.nodes,
            "output server {} of {}",
            dest,
            self.cfg.nodes
        );
        if dest == self.cfg.node {
            self.counts.local += 1;
            return dest;
        }
        let bytes = f64::from(bytes);
        if let Some(gap) = self.cfg.flowlet_gap {
            let mask = self.slots.len() - 1;
            let s = self.slots[flow as usize & mask];
            if s.used && s.flow == flow && usize::from(s.dest) == dest && now.saturating_sub(s.last) < gap {
                let next = usize::from(s.next);
                // Direct VLB's share bounds the direct path, flowlets or not: a flowlet
                // on it whose share has run out is balanced from here on, as a new
                // flowlet (else one elephant flow could take a link past R/N). A
                // flowlet through a server now down is balanced anew too.
                let relay_down = matches!(&self.relays, Some((_, down)) if next != dest && down[next]);
                let keep = !relay_down
                    && (next != dest || self.cfg.scheme != Scheme::Direct || {
                        let b = self.refilled(dest, now);
                        b.tokens >= bytes && {
                            b.tokens -= bytes;
                            true
                        }
                    });
                if keep {
                    self.slots[flow as usize & mask].last = now;
                    self.counts.flowlet_hits += 1;
                    if next == dest {
                        self.counts.direct += 1;
                    } else {
                        self.counts.balanced += 1;
                    }
                    return next;
                }
            }
        }
        let next = self.decide(now, dest, bytes);
        if next == dest {
            self.counts.direct += 1;
        } else {
            self.counts.balanced += 1;
        }
        if self.cfg.flowlet_gap.is_some() {
            let mask = self.slots.len() - 1;
            self.slots[flow as usize & mask] = Slot {
                used: true,
                flow,
                dest: dest as u16,
                next: next as u16,
                last: now,
            };
        }
        next
    }

    fn decide(&mut self, now: u64, dest: usize, bytes: f64) -> usize {
        if self.relays.is_some() {
            return self.decide_around_down(now, dest, bytes);
        }
        let n = self.cfg.nodes;
        match self.cfg.scheme {
            Scheme::Vlb => {
                let k = draw(&mut self.rng, n);
                if k == self.cfg.node {
                    dest
                } else {
                    k
                }
            }
            Scheme::Direct => {
                let b = self.refilled(dest, now);
                if b.tokens >= bytes {
                    b.tokens -= bytes;
                    return dest;
                }
                if n == 2 {
                    // No other server to balance over.
                    return dest;
                }
                // The k-th server that is neither this one nor the output server.
                let mut k = draw(&mut self.rng, n - 2);
                let (lo, hi) = (self.cfg.node.min(dest), self.cfg.node.max(dest));
                if k >= lo {
                    k += 1;
                }
                if k >= hi {
                    k += 1;
                }
                k
            }
        }
    }

    /// [`Balancer::decide`] when some servers are down: as if they were not in the
    /// mesh, the intermediate is drawn from the servers up.
    fn decide_around_down(&mut self, now: u64, dest: usize, bytes: f64) -> usize {
        if self.cfg.scheme == Scheme::Direct {
            let b = self.refilled(dest, now);
            if b.tokens >= bytes {
                b.tokens -= bytes;
                return dest;
            }
        }
        let Some((up, _)) = &self.relays else {
            return dest;
        };
        // The relays but the output server.
        let skip = up.binary_search(&(dest as u16)).ok();
        let count = up.len() - usize::from(skip.is_some());
        let pick = match self.cfg.scheme {
            // Classic VLB: the direct path for two of the count + 2 draws (this server
            // and the output server).
            Scheme::Vlb => draw(&mut self.rng, count + 2),
            Scheme::Direct if count == 0 => return dest,
            Scheme::Direct => draw(&mut self.rng, count),
        };
        match skip {
            _ if pick >= count => dest,
            Some(p) if pick >= p => usize::from(up[pick + 1]),
            _ => usize::from(up[pick]),
        }
    }

    fn refilled(&mut self, dest: usize, now: u64) -> &mut Bucket {
        let (rate, burst) = (self.cfg.direct_rate, self.cfg.direct_burst);
        let b = &mut self.buckets[dest];
        if now > b.at {
            b.tokens = (b.tokens + (now - b.at) as f64 * rate * 1e-9).min(burst.max(0.0));
            b.at = now;
        }
        b
    }
}

/// Uniform in `0..n` from the xorshift64* state `rng` (then a multiply instead of a
/// division).
fn draw(rng: &mut u64, n: usize) -> usize {
    let mut x = *rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
    ((r * n as u64) >> 32) as usize
}

#[cfg(test)]
mod tests;
