//! The mesh: FIFO queues for processors, links and ports, the event heap, and the
//! measurements taken as packets leave (see the model in the parent module).

use super::report::{Latencies, Results};
use super::traffic::Traffic;
use super::{SimConfig, Topology};
use crate::vlb::Balancer;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// What a resource is, for drops and delays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Server,
    /// An n-fly's switching server.
    Switch,
    Link,
    Port,
}

/// Where each resource's queue sits in [`Simulation::queues`], and the queues of the
/// path between two servers.
///
/// Processors come first (0..N), then ports (N..2N). A full mesh's links follow, i→j
/// at 2N + iN + j. An n-fly's follow as the server's uplinks (2N + i), each stage's
/// output links (3N + sN + the position they lead to) and the switching servers
/// (3N + nN + s·N/k + the switch's number in its stage).
struct Layout {
    servers: usize,
    /// k^p for p in 0..=n (so the radix is the second): empty for the full mesh.
    powers: Vec<usize>,
}

impl Layout {
    fn new(cfg: &SimConfig) -> Layout {
        let powers = match cfg.topology {
            Topology::FullMesh => Vec::new(),
            Topology::NFly { radix, .. } => {
                let stages = Topology::stages(radix, cfg.servers).expect("checked: servers = k^n");
                (0..=stages).map(|p| radix.pow(p)).collect()
            }
        };
        Layout {
            servers: cfg.servers,
            powers,
        }
    }

    fn stages(&self) -> usize {
        self.powers.len().saturating_sub(1)
    }

    /// Where the links end and the switching servers begin.
    fn links_end(&self) -> usize {
        let n = self.servers;
        if self.powers.is_empty() {
            2 * n + n * n
        } else {
            3 * n + self.stages() * n
        }
    }

    fn len(&self) -> usize {
        match self.powers.get(1) {
            None => self.links_end(),
            Some(k) => self.links_end() + self.stages() * self.servers / k,
        }
    }

    fn kind(&self, queue: usize) -> Kind {
        let n = self.servers;
        if queue < n {
            Kind::Server
        } else if queue < 2 * n {
            Kind::Port
        } else if queue < self.links_end() {
            Kind::Link
        } else {
            Kind::Switch
        }
    }

    /// Queues from one server to another: 1 in a full mesh, 2n + 1 in an n-fly.
    fn transit_len(&self) -> usize {
        2 * self.stages() + 1
    }

    /// The `step`th queue of the path from server `a` to server `b` (a ≠ b).
    fn transit(&self, a: usize, b: usize, step: usize) -> usize {
        let n = self.servers;
        let pow = &self.powers;
        let Some(&k) = pow.get(1) else {
            return 2 * n + a * n + b;
        };
        if step == 0 {
            return 2 * n + a;
        }
        // Stage s sets digit p = n−1−s of the position: the digits above it are
        // already b's, the digits below still a's.
        let stages = pow.len() - 1;
        let s = (step - 1) / 2;
        let (low, high) = (pow[stages - 1 - s], pow[stages - s]);
        if step % 2 == 1 {
            // The switch: the position before this stage without digit p.
            let before = b / high * high + a % high;
            let switch = before / high * low + before % low;
            3 * n + stages * n + s * (n / k) + switch
        } else {
            let after = b / low * low + a % low;
            3 * n + s * n + after
        }
    }
}

/// A FIFO queue in front of one work-conserving server, with a drop-tail buffer.
struct Queue {
    ps_per_byte: f64,
    /// When the last packet accepted leaves.
    free_at: u64,
    /// Bytes accepted that have not left yet, and when each packet leaves, in order.
    held: u64,
    leaving: VecDeque<(u64, u32)>,
    served_bytes: u64,
    dropped: u64,
}

impl Queue {
    fn new(gbps: f64) -> Queue {
        Queue {
            ps_per_byte: 8000.0 / gbps,
            free_at: 0,
            held: 0,
            leaving: VecDeque::new(),
            served_bytes: 0,
            dropped: 0,
        }
    }

    /// Takes a packet of `bytes` arriving at `now`: when its last bit leaves, or `None`
    /// when it does not fit in the buffer (and is dropped).
    fn offer(&mut self, now: u64, bytes: u32, buffer: u64) -> Option<u64> {
        while let Some(&(at, b)) = self.leaving.front() {
            if at > now {
                break;
            }
            self.held -= u64::from(b);
            self.leaving.pop_front();
        }
        if self.held + u64::from(bytes) > buffer {
            self.dropped += 1;
            return None;
        }
        let service = (f64::from(bytes) * self.ps_per_byte).round() as u64;
        let leaves = now.max(self.free_at) + service;
        self.free_at = leaves;
        self.held += u64::from(bytes);
        self.leaving.push_back((leaves, bytes));
        self.served_bytes += u64::from(bytes);
        Some(leaves)
    }
}

/// A packet in the mesh.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packet {
    /// When its input server received it.
    born: u64,
    flow: u64,
    seq: u32,
    bytes: u32,
    input: u16,
    /// The server its input server sent it to: the output server when it goes direct
    /// (or is local), else the intermediate.
    next: u16,
    dest: u16,
    /// How many resources of its path it has left.
    hop: u8,
}

enum What {
    /// Server `input` starts a flow.
    Start { input: usize },
    /// The flow in this slot sends a packet.
    Send { slot: u32 },
    /// A packet arrives at the resource its `hop` names.
    Arrive(Packet),
    /// The servers but the failed one mark it down.
    Detect,
}

struct Event {
    at: u64,
    /// Breaks ties between events at the same time: first scheduled, first handled.
    order: u64,
    what: What,
}

impl PartialEq for Event {
    fn eq(&self, o: &Event) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Event) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Event {
    /// Reversed: the heap's greatest is the earliest event.
    fn cmp(&self, o: &Event) -> Ordering {
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

pub(crate) struct Simulation {
    cfg: SimConfig,
    /// See [`Layout`].
    queues: Vec<Queue>,
    layout: Layout,
    balancers: Vec<Balancer>,
    traffic: Traffic,
    heap: BinaryHeap<Event>,
    scheduled: u64,
    propagation_ps: u64,
    offered_packets: u64,
    offered_bytes: u64,
    delivered_packets: u64,
    delivered_bytes: u64,
    reordered: u64,
    /// For each flow, 1 + the highest sequence number delivered (0: none yet).
    delivered_above: Vec<u32>,
    latencies: Latencies,
    /// The failed server and when it fails (ps).
    failed: Option<(usize, u64)>,
    dropped_failed: u64,
    lost_in_transit: u64,
}

impl Simulation {
    /// An empty mesh (no traffic yet); `cfg` must have passed its check.
    pub(crate) fn new(cfg: &SimConfig) -> Result<Simulation, String> {
        let n = cfg.servers;
        let layout = Layout::new(cfg);
        let mut queues = Vec::with_capacity(layout.len());
        queues.extend((0..n).map(|_| Queue::new(cfg.server_gbps)));
        queues.extend((0..n).map(|_| Queue::new(cfg.port_gbps)));
        queues.extend((2 * n..layout.links_end()).map(|_| Queue::new(cfg.link_gbps)));
        if let Topology::NFly { switch_gbps, .. } = cfg.topology {
            queues.extend((layout.links_end()..layout.len()).map(|_| Queue::new(switch_gbps)));
        }
        let balancers = (0..n)
            .map(|node| Balancer::new(cfg.balancer(node)))
            .collect::<Result<_, _>>()?;
        Ok(Simulation {
            cfg: cfg.clone(),
            queues,
            layout,
            balancers,
            traffic: Traffic::new(cfg),
            heap: BinaryHeap::new(),
            scheduled: 0,
            propagation_ps: cfg.propagation_ns * 1000,
            offered_packets: 0,
            offered_bytes: 0,
            delivered_packets: 0,
            delivered_bytes: 0,
            reordered: 0,
            delivered_above: Vec::new(),
            latencies: Latencies::default(),
            failed: cfg.failure.map(|f| (f.server, f.at_ns * 1000)),
            dropped_failed: 0,
            lost_in_transit: 0,
        })
    }

    fn schedule(&mut self, at: u64, what: What) {
        self.scheduled += 1;
        self.heap.push(Event {
            at,
            order: self.scheduled,
            what,
        });
    }

    /// Schedules the flows in progress at time 0 and each server's first new flow.
    pub(crate) fn start_traffic(&mut self) {
        if let Some(f) = self.cfg.failure {
            if let Some(after) = f.detected_after_ns {
                self.schedule((f.at_ns + after) * 1000, What::Detect);
            }
        }
        for input in 0..self.cfg.servers {
            for (at, slot) in self.traffic.in_progress(input) {
                self.schedule(at, What::Send { slot });
            }
            if let Some(at) = self.traffic.next_start(input, 0) {
                self.schedule(at, What::Start { input });
            }
        }
    }

    /// Offers one packet at `at_ps` to server `input`'s processor, sent on to `next`
    /// (bypassing the balancer), for output server `dest`.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn inject(
        &mut self,
        at_ps: u64,
        input: usize,
        next: usize,
        dest: usize,
        bytes: u32,
        flow: u64,
        seq: u32,
    ) {
        self.offered_packets += 1;
        self.offered_bytes += u64::from(bytes);
        let p = Packet {
            born: at_ps,
            flow,
            seq,
            bytes,
            input: input as u16,
            next: next as u16,
            dest: dest as u16,
            hop: 0,
        };
        self.schedule(at_ps, What::Arrive(p));
    }

    /// Handles every event: the traffic until the end of the duration, then the drain.
    pub(crate) fn run(&mut self) {
        while let Some(e) = self.heap.pop() {
            match e.what {
                What::Start { input } => {
                    let slot = self.traffic.start(input);
                    self.send(slot, e.at);
                    if let Some(at) = self.traffic.next_start(input, e.at) {
                        self.schedule(at, What::Start { input });
                    }
                }
                What::Send { slot } => self.send(slot, e.at),
                What::Arrive(p) => self.arrive(p, e.at),
                What::Detect => {
                    let failed = self.cfg.failure.map(|f| f.server);
                    for (node, b) in self.balancers.iter_mut().enumerate() {
                        if Some(node) != failed {
                            b.set_down(failed.as_slice());
                        }
                    }
                }
            }
        }
    }

    fn send(&mut self, slot: u32, now: u64) {
        let (sent, next_send) = self.traffic.send(slot, now);
        if let Some(at) = next_send {
            self.schedule(at, What::Send { slot });
        }
        let next = self.balancers[sent.input].choose(now / 1000, sent.dest, sent.hash, sent.bytes);
        self.offered_packets += 1;
        self.offered_bytes += u64::from(sent.bytes);
        let p = Packet {
            born: now,
            flow: sent.flow,
            seq: sent.seq,
            bytes: sent.bytes,
            input: sent.input as u16,
            next: next as u16,
            dest: sent.dest as u16,
            hop: 0,
        };
        self.arrive(p, now);
    }

    /// The queue a packet is at: processors and the paths between them in turn, then
    /// the port.
    fn queue_of(&self, p: &Packet) -> usize {
        let n = self.cfg.servers;
        let (i, k, d) = (usize::from(p.input), usize::from(p.next), usize::from(p.dest));
        let processor = |s: usize| s;
        let port = |s: usize| n + s;
        let t = self.layout.transit_len();
        let hop = usize::from(p.hop);
        if hop == 0 {
            processor(i)
        } else if i == d {
            // Local: processed once.
            port(d)
        } else if hop <= t {
            self.layout.transit(i, k, hop - 1)
        } else if hop == t + 1 {
            processor(k)
        } else if k == d {
            // Direct: the next server is the output server.
            port(d)
        } else if hop <= 2 * t + 1 {
            self.layout.transit(k, d, hop - t - 2)
        } else if hop == 2 * t + 2 {
            processor(d)
        } else {
            port(d)
        }
    }

    fn kind(&self, queue: usize) -> Kind {
        self.layout.kind(queue)
    }

    fn arrive(&mut self, mut p: Packet, now: u64) {
        let q = self.queue_of(&p);
        if let Some((server, at)) = self.failed {
            if q == server && now >= at {
                self.dropped_failed += 1;
                if usize::from(p.input) != server && usize::from(p.dest) != server {
                    self.lost_in_transit += 1;
                }
                return;
            }
        }
        let Some(leaves) = self.queues[q].offer(now, p.bytes, self.cfg.buffer_bytes) else {
            return;
        };
        match self.kind(q) {
            Kind::Port => self.deliver(&p, leaves),
            Kind::Link => {
                p.hop += 1;
                self.schedule(leaves + self.propagation_ps, What::Arrive(p));
            }
            Kind::Server | Kind::Switch => {
                p.hop += 1;
                self.schedule(leaves, What::Arrive(p));
            }
        }
    }

    /// Counts a packet out of its output port at `at`. Its flow's packets all leave by
    /// that port, in the order they reached it, which is the order of these calls.
    fn deliver(&mut self, p: &Packet, at: u64) {
        self.delivered_packets += 1;
        self.delivered_bytes += u64::from(p.bytes);
        self.latencies.add((at - p.born) / 1000);
        let flow = p.flow as usize;
        if flow >= self.delivered_above.len() {
            self.delivered_above.resize(flow + 1, 0);
        }
        let above = &mut self.delivered_above[flow];
        if p.seq + 1 < *above {
            self.reordered += 1;
        } else {
            *above = p.seq + 1;
        }
    }

    pub(crate) fn results(&self) -> Results {
        let n = self.cfg.servers;
        let dropped = |kind: Kind| -> u64 {
            (0..self.queues.len())
                .filter(|&q| self.kind(q) == kind)
                .map(|q| self.queues[q].dropped)
                .sum()
        };
        let duration_ns = self.cfg.duration_ns as f64;
        // Bits served over bits the rate could serve in the duration (Gbps = bits/ns).
        let server_load = (0..n)
            .map(|s| self.queues[s].served_bytes as f64 * 8.0 / (self.cfg.port_gbps * duration_ns))
            .collect();
        let utilisation =
            |q: usize, gbps: f64| self.queues[q].served_bytes as f64 * 8.0 / (gbps * duration_ns);
        let link_utilisation = match self.cfg.topology {
            Topology::FullMesh => (0..n)
                .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
                .map(|(i, j)| utilisation(2 * n + i * n + j, self.cfg.link_gbps))
                .collect(),
            Topology::NFly { .. } => (2 * n..self.layout.links_end())
                .map(|q| utilisation(q, self.cfg.link_gbps))
                .collect(),
        };
        let switch_utilisation = match self.cfg.topology {
            Topology::FullMesh => Vec::new(),
            Topology::NFly { switch_gbps, .. } => (self.layout.links_end()..self.layout.len())
                .map(|q| utilisation(q, switch_gbps))
                .collect(),
        };
        let mut counts = crate::vlb::Counts::default();
        for b in &self.balancers {
            counts.add(&b.counts());
        }
        Results {
            scheme: self.cfg.scheme,
            offered_packets: self.offered_packets,
            offered_bytes: self.offered_bytes,
            delivered_packets: self.delivered_packets,
            delivered_bytes: self.delivered_bytes,
            dropped_server: dropped(Kind::Server),
            dropped_switch: dropped(Kind::Switch),
            dropped_link: dropped(Kind::Link),
            dropped_port: dropped(Kind::Port),
            dropped_failed: self.dropped_failed,
            lost_in_transit: self.lost_in_transit,
            reordered: self.reordered,
            latency_mean_us: self.latencies.mean_ns() / 1000.0,
            latency_p99_us: self.latencies.quantile_ns(0.99) / 1000.0,
            server_load,
            link_utilisation,
            switch_utilisation,
            counts,
            flows: self.traffic.started,
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn fly(radix: usize, servers: usize) -> Layout {
        Layout::new(&SimConfig {
            topology: Topology::NFly {
                radix,
                switch_gbps: 40.0,
            },
            ..SimConfig::new(servers)
        })
    }

    /// Every path starts on its server's uplink and ends on its destination's
    /// downlink; each switching server is entered by exactly k links and leaves by
    /// exactly k, as a butterfly's switch has k ports each way; a link leads to one
    /// switch; and every link and switch of the layout is used.
    #[test]
    fn paths_follow_the_butterfly() {
        for (k, n, stages) in [(2, 2, 1), (2, 8, 3), (4, 16, 2), (2, 16, 4), (3, 27, 3)] {
            let l = fly(k, n);
            assert_eq!(l.stages(), stages);
            assert_eq!(l.transit_len(), 2 * stages + 1);
            assert_eq!(l.len(), 3 * n + stages * n + stages * n / k);
            let mut ins: HashMap<usize, HashSet<usize>> = HashMap::new();
            let mut outs: HashMap<usize, HashSet<usize>> = HashMap::new();
            let mut feeds: HashMap<usize, HashSet<usize>> = HashMap::new();
            let mut used = HashSet::new();
            for a in 0..n {
                for b in (0..n).filter(|&b| b != a) {
                    let path: Vec<usize> = (0..l.transit_len()).map(|s| l.transit(a, b, s)).collect();
                    assert_eq!(path[0], 2 * n + a, "{a}->{b}");
                    assert_eq!(*path.last().unwrap(), 3 * n + (stages - 1) * n + b, "{a}->{b}");
                    for (i, &q) in path.iter().enumerate() {
                        let want = if i % 2 == 0 { Kind::Link } else { Kind::Switch };
                        assert_eq!(l.kind(q), want, "{a}->{b} step {i}");
                        used.insert(q);
                        if i % 2 == 1 {
                            ins.entry(q).or_default().insert(path[i - 1]);
                            outs.entry(q).or_default().insert(path[i + 1]);
                            feeds.entry(path[i - 1]).or_default().insert(q);
                        }
                    }
                }
            }
            assert_eq!(ins.len(), stages * n / k);
            assert!(ins.values().all(|s| s.len() == k), "{k}-ary: {ins:?}");
            assert!(outs.values().all(|s| s.len() == k), "{k}-ary: {outs:?}");
            // A link leads to one switch whichever path crosses it.
            assert!(feeds.values().all(|s| s.len() == 1), "{k}-ary: {feeds:?}");
            // Every link but the processors' and ports' queues is on some path.
            assert_eq!(used.len(), l.len() - 2 * n);
        }
    }

    #[test]
    fn a_full_mesh_goes_straight() {
        let l = Layout::new(&SimConfig::new(5));
        assert_eq!((l.transit_len(), l.len()), (1, 10 + 25));
        assert_eq!(l.transit(1, 3, 0), 10 + 5 + 3);
        assert_eq!(l.kind(4), Kind::Server);
        assert_eq!(l.kind(9), Kind::Port);
        assert_eq!(l.kind(34), Kind::Link);
    }
}
