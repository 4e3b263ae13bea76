//! The offered traffic: flows, their sizes, output servers and packets (see the model in
//! the parent module). Everything a flow does is drawn from a generator seeded by the
//! run's seed, its input server and its number there, so every scheme of a comparison
//! sees the same flows, whatever the order the simulation handles events in.

use super::{Matrix, PacketSize, SimConfig, FLOW_RATE_DIVISOR};

/// Flow sizes in packets: P(size ≥ k) ∝ k^-SHAPE − (MAX + 1)^-SHAPE for k in 1..=MAX.
const FLOW_SIZE_SHAPE: f64 = 1.2;
const MAX_FLOW_PACKETS: usize = 10_000;

/// SplitMix64: a small generator with good statistics from any seed.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix {
    state: u64,
}

impl SplitMix {
    pub(crate) fn new(seed: u64) -> SplitMix {
        SplitMix { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// Exponential with mean `mean`.
    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Poisson with mean `mean` (by Knuth's products, in parts small enough that
    /// e^-part stays far from underflow).
    fn poisson(&mut self, mean: f64) -> u64 {
        const PART: f64 = 30.0;
        let mut left = mean;
        let mut n = 0;
        while left > 0.0 {
            let m = left.min(PART);
            left -= m;
            let floor = (-m).exp();
            let mut product = self.unit();
            while product > floor {
                n += 1;
                product *= self.unit();
            }
        }
        n
    }
}

/// A seed for the part of a run tagged `tag`, from the run's seed.
pub(crate) fn mix(seed: u64, tag: u64) -> u64 {
    SplitMix::new(seed ^ tag.wrapping_mul(0xd605_bbb5_8c8a_bbb1)).next_u64()
}

/// The flow size distribution as cumulative tables, for inverse-transform draws.
struct FlowSizes {
    /// P(size ≤ k) at index k - 1.
    at_most: Vec<f64>,
    /// The same for sizes drawn in proportion to size × probability: the sizes of the
    /// flows in progress at a given time.
    in_progress_at_most: Vec<f64>,
    mean: f64,
}

impl FlowSizes {
    fn new() -> FlowSizes {
        let beyond = ((MAX_FLOW_PACKETS + 1) as f64).powf(-FLOW_SIZE_SHAPE);
        let at_least = |k: usize| ((k as f64).powf(-FLOW_SIZE_SHAPE) - beyond) / (1.0 - beyond);
        let mut at_most = Vec::with_capacity(MAX_FLOW_PACKETS);
        let mut weighted = Vec::with_capacity(MAX_FLOW_PACKETS);
        let (mut cumulative, mut mean) = (0.0, 0.0);
        for k in 1..=MAX_FLOW_PACKETS {
            let p = at_least(k) - at_least(k + 1);
            cumulative += p;
            mean += k as f64 * p;
            at_most.push(cumulative);
            weighted.push(mean);
        }
        let in_progress_at_most = weighted.iter().map(|w| w / mean).collect();
        FlowSizes {
            at_most,
            in_progress_at_most,
            mean,
        }
    }

    fn draw(table: &[f64], rng: &mut SplitMix) -> u32 {
        let u = rng.unit();
        (table.partition_point(|&c| c <= u) + 1).min(MAX_FLOW_PACKETS) as u32
    }
}

/// The mean flow size in packets.
pub fn mean_flow_packets() -> f64 {
    FlowSizes::new().mean
}

/// One packet a flow sends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    /// The flow's number in the run (for reordering).
    pub flow: u64,
    /// What the balancer sees of the flow.
    pub hash: u32,
    pub input: usize,
    pub dest: usize,
    pub seq: u32,
    pub bytes: u32,
}

struct Flow {
    number: u64,
    hash: u32,
    input: u16,
    dest: u16,
    remaining: u32,
    seq: u32,
    rng: SplitMix,
}

/// A server's flow starts.
struct Source {
    rng: SplitMix,
    started: u64,
}

pub(crate) struct Traffic {
    sizes: FlowSizes,
    packet_size: PacketSize,
    matrix: Matrix,
    servers: usize,
    seed: u64,
    end_ps: u64,
    /// Mean time between flow starts at one server.
    flow_interval_ps: f64,
    /// A flow's rate.
    flow_bytes_per_ps: f64,
    /// Flows in progress at a server in the steady state, on average.
    flows_in_progress: f64,
    sources: Vec<Source>,
    flows: Vec<Flow>,
    free: Vec<u32>,
    /// Flows started so far in the run.
    pub started: u64,
}

impl Traffic {
    pub(crate) fn new(cfg: &SimConfig) -> Traffic {
        let sizes = FlowSizes::new();
        let port_bytes_per_ps = cfg.port_gbps / 8000.0;
        let flow_bytes = sizes.mean * cfg.packet_size.mean();
        Traffic {
            flow_interval_ps: flow_bytes / (cfg.load * port_bytes_per_ps),
            flow_bytes_per_ps: port_bytes_per_ps / FLOW_RATE_DIVISOR,
            flows_in_progress: cfg.load * FLOW_RATE_DIVISOR,
            sizes,
            packet_size: cfg.packet_size,
            matrix: cfg.matrix,
            servers: cfg.servers,
            seed: cfg.seed,
            end_ps: cfg.duration_ns * 1000,
            sources: (0..cfg.servers)
                .map(|s| Source {
                    rng: SplitMix::new(mix(cfg.seed, 0x5_0000_0000 + s as u64)),
                    started: 0,
                })
                .collect(),
            flows: Vec::new(),
            free: Vec::new(),
            started: 0,
        }
    }

    /// The flows server `input` has in progress at time 0, each as (the time of its
    /// next packet, its slot for [`Traffic::send`]).
    pub(crate) fn in_progress(&mut self, input: usize) -> Vec<(u64, u32)> {
        let count = self.sources[input].rng.poisson(self.flows_in_progress);
        let mean_gap = self.packet_size.mean() / self.flow_bytes_per_ps;
        let mut out = Vec::new();
        for _ in 0..count {
            let slot = self.new_flow(input, true);
            let flow = &mut self.flows[slot as usize];
            // Gaps are exponential, so the time to its next packet is too.
            let at = flow.rng.exponential(mean_gap) as u64;
            if at < self.end_ps {
                out.push((at, slot));
            } else {
                // It sends nothing in the run: not one of its flows (its number, never
                // seen, goes to the next flow).
                self.free.push(slot);
                self.started -= 1;
            }
        }
        out
    }

    /// When server `input` starts its next flow after `now`, if before the end.
    pub(crate) fn next_start(&mut self, input: usize, now: u64) -> Option<u64> {
        let gap = self.sources[input].rng.exponential(self.flow_interval_ps);
        let at = now as f64 + gap;
        (at < self.end_ps as f64).then_some(at as u64)
    }

    /// Starts a flow at server `input`: its slot, for [`Traffic::send`].
    pub(crate) fn start(&mut self, input: usize) -> u32 {
        self.new_flow(input, false)
    }

    fn new_flow(&mut self, input: usize, in_progress: bool) -> u32 {
        let source = &mut self.sources[input];
        let id = source.started;
        source.started += 1;
        let mut rng = SplitMix::new(mix(self.seed, ((input as u64) << 40) | id));
        let hash = (rng.next_u64() >> 32) as u32;
        let dest = match self.matrix {
            Matrix::Uniform => rng.below(self.servers),
            Matrix::Permutation => (input + 1) % self.servers,
            Matrix::Transpose => {
                let m = super::square_root(self.servers).expect("checked: a square number of servers");
                (input % m) * m + input / m
            }
            Matrix::Hotspot { hot } => {
                if rng.unit() < hot {
                    0
                } else {
                    rng.below(self.servers)
                }
            }
        };
        let (remaining, seq) = if in_progress {
            let size = FlowSizes::draw(&self.sizes.in_progress_at_most, &mut rng);
            let sent = rng.below(size as usize) as u32;
            (size - sent, sent)
        } else {
            (FlowSizes::draw(&self.sizes.at_most, &mut rng), 0)
        };
        let flow = Flow {
            number: self.started,
            hash,
            input: input as u16,
            dest: dest as u16,
            remaining,
            seq,
            rng,
        };
        self.started += 1;
        match self.free.pop() {
            Some(slot) => {
                self.flows[slot as usize] = flow;
                slot
            }
            None => {
                self.flows.push(flow);
                (self.flows.len() - 1) as u32
            }
        }
    }

    /// The packet the flow in `slot` sends at `now`, and when it sends its next, if
    /// before the end (else the flow is over and its slot free).
    pub(crate) fn send(&mut self, slot: u32, now: u64) -> (Sent, Option<u64>) {
        let flow = &mut self.flows[slot as usize];
        let bytes = match self.packet_size {
            PacketSize::Fixed(b) => b,
            PacketSize::Imix => match flow.rng.below(12) {
                0..=6 => 64,
                7..=10 => 576,
                _ => 1500,
            },
        };
        let sent = Sent {
            flow: flow.number,
            hash: flow.hash,
            input: usize::from(flow.input),
            dest: usize::from(flow.dest),
            seq: flow.seq,
            bytes,
        };
        flow.seq += 1;
        flow.remaining -= 1;
        let mut next = None;
        if flow.remaining > 0 {
            let at = now as f64 + flow.rng.exponential(f64::from(bytes) / self.flow_bytes_per_ps);
            if at < self.end_ps as f64 {
                next = Some(at as u64);
            }
        }
        if next.is_none() {
            self.free.push(slot);
        }
        (sent, next)
    }
}
