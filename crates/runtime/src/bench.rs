//! The pipeline benchmark: a shipped configuration run over in-memory ports.
//!
//! [`pipeline`] takes a configuration that reads with `FromDump(...)` and writes with
//! `ToDump(...)` (the shipped `conf/forward.click` and `conf/router.click`) and rewrites
//! it: the k-th `FromDump` becomes `FromDevice(memK, BURST k_p)` and the k-th `ToDump`
//! becomes `ToDevice(memK, BURST k_n)`. Port memK has one queue pair per worker; the
//! ports of the `FromDump`s replay a template of UDP/IPv4 frames of one size, one frame
//! per flow, spread over the queues by RSS. The packet budget (`packets`) is split
//! exactly over ports and queues; with `seconds` the traffic is endless and the run is
//! stopped after that long.
//!
//! Destinations are addresses the configuration routes out of an interface: the
//! configuration's route lookup element (`RadixIPLookup`, or any `*IPLookup`) has
//! outputs that lead to a `ToDump` ("forwarding outputs"); flows go to addresses inside
//! the routes on those outputs, never to a more specific route on another output (the
//! router's own addresses). `routes N` adds N random prefixes on the forwarding outputs
//! and aims the flows into them, so lookups walk a large table.
//!
//! A baseline (`baseline`, another configuration) runs with the same frame size, flows,
//! workers and batches and no routes, right after the run, or with `rounds` above one in
//! turns with it: both are built first, then run alternately, each run a share of the
//! seconds or of the packets (the shares add up to the budget exactly, each run taking
//! the next packets of the ports' sequence), and the report gives the median run's
//! cycles a packet and the median of the rounds' ratios.
//!
//! A configuration that routes with `LookupIP6Route` (`conf/router6.click`) gets the
//! same with UDP/IPv6 frames (at least 66 bytes on the wire: a smaller `size` runs, and
//! is reported, as 66) and IPv6 routes, shaped like an IPv6 BGP table (`route6.rs`).
//!
//! Routes are installed through the lookup element's Click handlers after the router is
//! built: one `ctrl` write of them all (Click's batch interface, lines of `add ADDR/LEN
//! OUT`; the lookup elements build a write that large into a new table at once),
//! falling back to one `add` write per route if the element has no `ctrl` handler (or,
//! as LookupIP6Route's, one that takes a single command). Handing the element N routes as configuration arguments would go
//! through the configuration parser, argument splitting and a string per route before
//! the element sees them; the handler path parses each route once and is what a
//! control plane uses at run time, so the install time it reports is meaningful.

mod report;
mod route4;
mod route6;

pub use report::{median, BaselineReport, ElementReport, PipelineReport, WorkerReport};
use route4::{config_routes, pick_destination, random_routes};
pub use route4::{udp_frame, Route};

use crate::device::{register, DeviceTable};
use crate::{tsc, RunStats, Runtime};
use graph::args::split_args;
use graph::lang::FlatConfig;
use graph::registry::Registry;
use graph::router::RouterSpec;
use io::{MemPort, Port};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of [`pipeline`].
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Application name: the configuration is `conf_dir/APP.click` unless `config` is
    /// given.
    pub app: String,
    /// Configuration text to run instead of the file.
    pub config: Option<String>,
    /// Directory of the shipped configurations (and base for relative file names).
    pub conf_dir: PathBuf,
    /// Ethernet frame size on the wire, 64 to 1518 bytes, including the 4-byte FCS the
    /// NIC appends (so a buffer holds `size - 4` bytes).
    pub size: usize,
    /// Exact number of packets to receive, over all ports and queues.
    pub packets: Option<u64>,
    /// Run this long with endless traffic (instead of `packets`).
    pub seconds: Option<f64>,
    /// Workers (one queue pair per worker on every port).
    pub threads: usize,
    /// Random routes to add to the route lookup element.
    pub routes: usize,
    /// Deny rules put in front of the configuration's `IPFilter` rules, none of which
    /// the traffic matches (so every packet is tested against all of them).
    pub rules: usize,
    /// Writes a second of the `IPFilter`'s `config` while the run goes (0: none), each
    /// the `rules` rules with the last one changed, then back: the classifier rule
    /// update experiment.
    pub rule_updates: f64,
    /// Flows in the traffic template, 1 to [`MAX_FLOWS`]: one frame each, with its
    /// own random addresses and ports.
    pub flows: usize,
    /// `FromDevice` BURST (k_p).
    pub rx_burst: usize,
    /// `ToDevice` BURST (k_n).
    pub tx_burst: usize,
    /// Pin worker i to core i.
    pub pin: bool,
    /// Seed of the traffic and route generator.
    pub seed: u64,
    /// Time every element call and report where the cycles went
    /// ([`PipelineReport::elements`]; one run only).
    pub profile: bool,
    /// Another application (a configuration name in `conf_dir`, as `app`) run with the
    /// same frame size, flows, workers, batches and packets or seconds, and no routes,
    /// whose cycles a packet this run's are compared with.
    pub baseline: Option<String>,
    /// Runs in turns: with more than one, the application (and its baseline) run
    /// `rounds` times each, taking turns, each run a share of the seconds or of the
    /// packets (exactly: the shares add up to the packets); cycles a packet is the median run's, and the ratio to the
    /// baseline the median of each round's ratio. One (the default): each runs once,
    /// the baseline right after.
    pub rounds: usize,
    /// Adds element classes from outside the graph library (the cluster's VLBSwitch)
    /// to the registry the configuration is built with.
    pub extra_classes: Option<fn(&mut Registry)>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            app: "forward".into(),
            config: None,
            conf_dir: PathBuf::from("conf"),
            size: 64,
            packets: None,
            seconds: None,
            threads: 1,
            routes: 0,
            rules: 0,
            rule_updates: 0.0,
            flows: 1024,
            rx_burst: packet::DEFAULT_BATCH,
            tx_burst: crate::device::DEFAULT_TX_BURST,
            pin: true,
            seed: 1,
            profile: false,
            baseline: None,
            rounds: 1,
            extra_classes: None,
        }
    }
}

/// The slowest and fastest rewrites of the filter's rules a second.
pub const MIN_RULE_UPDATES: f64 = 0.01;
pub const MAX_RULE_UPDATES: f64 = 100_000.0;

/// Packets run when neither `packets` nor `seconds` is given.
pub const DEFAULT_PACKETS: u64 = 10_000_000;

/// Most flows in the traffic. Each flow is a template frame kept in memory by every
/// receiving port (65,536 flows of 1518 bytes take about 100 MB a port), the frames'
/// IPv4 identification numbers them in 16 bits, and the traffic generator's stamp
/// names as many.
pub const MAX_FLOWS: usize = 1 << 16;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Output ports of element `e` from which a packet can reach an element of class
/// `sink` (following every output of the elements on the way).
fn outputs_reaching(flat: &FlatConfig, e: usize, sink: &str) -> Vec<usize> {
    let mut ports: Vec<usize> = flat
        .connections
        .iter()
        .filter(|c| c.from == e)
        .map(|c| c.from_port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
        .into_iter()
        .filter(|&p| {
            let mut seen = vec![false; flat.elements.len()];
            let mut todo: VecDeque<usize> = flat
                .connections
                .iter()
                .filter(|c| c.from == e && c.from_port == p)
                .map(|c| c.to)
                .collect();
            while let Some(i) = todo.pop_front() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                if flat.elements[i].class == sink {
                    return true;
                }
                todo.extend(flat.connections.iter().filter(|c| c.from == i).map(|c| c.to));
            }
            false
        })
        .collect()
}

/// The UDP/IPv4 traffic template (one frame per flow) and the random routes to install,
/// for a configuration that routes with an IPv4 lookup element (or none).
fn traffic_v4(
    flat: &FlatConfig,
    opts: &PipelineOptions,
    rng: &mut Rng,
) -> Result<(Vec<Vec<u8>>, Option<Install>), String> {
    // Routes: the configuration's, split by whether their output leads to a ToDump.
    let lookup = flat.elements.iter().position(|e| e.class.ends_with("IPLookup"));
    let (mut targets, mut blocked) = (Vec::new(), Vec::new());
    let mut fwd_ports = Vec::new();
    if let Some(l) = lookup {
        fwd_ports = outputs_reaching(flat, l, "ToDump");
        for r in config_routes(&flat.elements[l].config) {
            if fwd_ports.contains(&r.port) {
                targets.push(r);
            } else {
                blocked.push(r);
            }
        }
    }
    let extra = if opts.routes > 0 {
        if lookup.is_none() {
            return Err("routes need a route lookup element (RadixIPLookup) in the configuration".into());
        }
        if fwd_ports.is_empty() {
            return Err(format!(
                "no output of '{}' leads to a ToDump: nowhere to route",
                flat.elements[lookup.unwrap_or(0)].name
            ));
        }
        random_routes(opts.routes, &fwd_ports, rng)
    } else {
        Vec::new()
    };
    if !extra.is_empty() {
        targets = extra.clone();
    }
    if targets.is_empty() {
        // Nothing routed (no lookup element): the benchmarking network 198.18.0.0/15.
        targets.push(Route {
            addr: 0xc612_0000,
            len: 15,
            port: 0,
        });
    }

    // Traffic template: one frame per flow.
    let frames = (0..opts.flows)
        .map(|i| {
            let dst = pick_destination(&targets, &blocked, rng)
                .ok_or_else(|| "no destination address is routed out of an interface".to_string())?;
            let src = 0x6440_0000 | (rng.next() as u32 & 0x003f_ffff); // 100.64.0.0/10
            let sport = 1024 + (rng.next() % 64512) as u16;
            let dport = 1024 + (rng.next() % 64512) as u16;
            Ok(udp_frame(opts.size, src, dst, sport, dport, i as u16))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let install = lookup.filter(|_| !extra.is_empty()).map(|l| Install {
        element: flat.elements[l].name.clone(),
        routes: extra.iter().map(|r| r.to_string()).collect(),
        batched_ctrl: true,
    });
    Ok((frames, install))
}

/// The UDP/IPv6 traffic template and the random routes to install, for a configuration
/// that routes with `LookupIP6Route` (element `l`).
fn traffic_v6(
    flat: &FlatConfig,
    l: usize,
    opts: &PipelineOptions,
    rng: &mut Rng,
) -> Result<(Vec<Vec<u8>>, Option<Install>), String> {
    let fwd_ports = outputs_reaching(flat, l, "ToDump");
    let (mut targets, mut blocked) = (Vec::new(), Vec::new());
    for r in route6::config_routes(&split_args(&flat.elements[l].config)) {
        if fwd_ports.contains(&r.port) {
            targets.push(r);
        } else {
            blocked.push(r);
        }
    }
    if fwd_ports.is_empty() {
        return Err(format!(
            "no output of '{}' leads to a ToDump: nowhere to route",
            flat.elements[l].name
        ));
    }
    let extra = route6::random_routes(opts.routes, &fwd_ports, rng);
    if !extra.is_empty() {
        targets = extra.clone();
    }
    if targets.is_empty() {
        return Err("no destination address is routed out of an interface".into());
    }
    let frames = (0..opts.flows)
        .map(|_| {
            let dst = route6::pick_destination(&targets, &blocked, rng)
                .ok_or_else(|| "no destination address is routed out of an interface".to_string())?;
            // Hosts of 2001:db8:ffff::/48.
            let src = (0x2001_0db8_ffffu128 << 80) | u128::from(rng.next());
            let sport = 1024 + (rng.next() % 64512) as u16;
            let dport = 1024 + (rng.next() % 64512) as u16;
            Ok(route6::udp6_frame(opts.size, src, dst, sport, dport))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let install = (!extra.is_empty()).then(|| Install {
        element: flat.elements[l].name.clone(),
        routes: extra.iter().map(|r| r.to_string()).collect(),
        batched_ctrl: false,
    });
    Ok((frames, install))
}

/// Runs `opts.config` (or `conf_dir/APP.click`) as described in the module docs, and
/// its baseline if it has one.
pub fn pipeline(opts: &PipelineOptions) -> Result<PipelineReport, String> {
    pipeline_flat(&load(opts)?, opts)
}

/// The configuration `opts` names, parsed.
fn load(opts: &PipelineOptions) -> Result<FlatConfig, String> {
    let (text, name) = match &opts.config {
        Some(t) => (t.clone(), format!("<{}>", opts.app)),
        None => {
            let path = opts.conf_dir.join(format!("{}.click", opts.app));
            let t = std::fs::read_to_string(&path).map_err(|e| {
                // The shipped configurations live in the checkout's conf/; the default
                // is relative, so a run from elsewhere needs the directory named.
                let hint = if e.kind() == std::io::ErrorKind::NotFound {
                    " (run from the brickroute checkout or name the configurations' directory with --conf-dir)"
                } else {
                    ""
                };
                format!("{}: {}{}", path.display(), e, hint)
            })?;
            (t, path.display().to_string())
        }
    };
    let mut lib = Registry::with_library();
    if let Some(add) = opts.extra_classes {
        add(&mut lib);
    }
    let is_class = |c: &str| lib.get(c).is_some() || c == "FromDevice" || c == "ToDevice";
    graph::lang::parse_with_classes(&text, &name, &HashMap::new(), &is_class).map_err(|e| e.to_string())
}

/// [`pipeline`] on an already parsed configuration.
pub fn pipeline_flat(flat: &FlatConfig, opts: &PipelineOptions) -> Result<PipelineReport, String> {
    check_options(opts)?;
    let rounds = opts.rounds.max(1);
    if rounds == 1 {
        // The application's run, then the baseline's, each as long as asked.
        let app = Bench::prepare(flat, opts, false)?;
        let stats = app.run(None);
        let mut r = app.report(&[stats]);
        if let Some(base) = &opts.baseline {
            let b = app.prepare_baseline(base, false)?;
            r.baseline = Some(b.report(&[b.run(None)]).as_baseline(base));
        }
        return Ok(r);
    }
    // Rounds: both built first, routes installed once, then run in turns, each turn a
    // share of the seconds, or of the packets (exactly: the shares add up to the
    // packets asked for), so that the two see the same moments of a shared host.
    let app = Bench::prepare(flat, opts, true)?;
    let base = match &opts.baseline {
        Some(name) => Some((name, app.prepare_baseline(name, true)?)),
        None => None,
    };
    let packets = opts.packets.unwrap_or(DEFAULT_PACKETS);
    let (mut app_runs, mut base_runs) = (Vec::new(), Vec::new());
    for round in 1..=rounds as u64 {
        let share = match opts.seconds {
            Some(s) => Share::Seconds(s / rounds as f64),
            // (At most 2^64 packets by 2^32 rounds: the product fits in a u128.)
            None => Share::PacketsUpTo((u128::from(packets) * u128::from(round) / rounds as u128) as u64),
        };
        app_runs.push(app.run(Some(share)));
        if let Some((_, b)) = &base {
            base_runs.push(b.run(Some(share)));
        }
    }
    let mut r = app.report(&app_runs);
    if let Some((name, b)) = &base {
        r.baseline = Some(b.report(&base_runs).as_baseline(name));
    }
    Ok(r)
}

/// The options' own consistency, before anything is built.
fn check_options(opts: &PipelineOptions) -> Result<(), String> {
    if !(64..=1518).contains(&opts.size) {
        return Err(format!("frame size {} out of range (64 to 1518)", opts.size));
    }
    if opts.packets.is_some() && opts.seconds.is_some() {
        return Err("give a packet count or a duration, not both".into());
    }
    if let Some(s) = opts.seconds {
        if s.is_nan() || s <= 0.0 {
            return Err("the duration must be a positive number of seconds".into());
        }
        // The run stops after a `Duration` that long: one too long to be one (beyond
        // 2^64 seconds) is refused here rather than failing the conversion later.
        if Duration::try_from_secs_f64(s).is_err() {
            return Err(format!("the duration must be at most {} seconds", u64::MAX));
        }
    }
    if opts.threads == 0 {
        return Err("at least one worker thread is needed".into());
    }
    if opts.flows == 0 {
        return Err("at least one flow is needed".into());
    }
    if opts.flows > MAX_FLOWS {
        return Err(format!("at most {} flows", MAX_FLOWS));
    }
    // (Checked by the device elements too, but their error names a configuration line
    // that the rewritten BURST is not in.)
    for (what, burst) in [("receive", opts.rx_burst), ("transmit", opts.tx_burst)] {
        if !(1..=packet::MAX_BATCH).contains(&burst) {
            return Err(format!(
                "the {} batch must be from 1 to {} packets",
                what,
                packet::MAX_BATCH
            ));
        }
    }
    if opts.routes > 4_000_000 {
        return Err("at most 4000000 random routes".into());
    }
    if opts.rule_updates != 0.0 && !(MIN_RULE_UPDATES..=MAX_RULE_UPDATES).contains(&opts.rule_updates) {
        return Err(format!(
            "rule updates: 0, or from {MIN_RULE_UPDATES} to {MAX_RULE_UPDATES} a second"
        ));
    }
    if opts.rule_updates > 0.0 && opts.rules == 0 {
        return Err("rule updates need rules to rewrite (rules above 0)".into());
    }
    if opts.rounds > 1 && opts.profile {
        return Err("a profile times one run: give rounds or a profile, not both".into());
    }
    if opts.rounds > 1 && opts.packets.is_some_and(|p| p < opts.rounds as u64) {
        return Err(format!(
            "{} packets cannot be shared over {} rounds",
            opts.packets.unwrap_or(0),
            opts.rounds
        ));
    }
    Ok(())
}

/// The limit of a run of `seconds`, which [`check_options`] found positive and
/// within a [`Duration`] (as is a round's share of them); saturating all the same.
fn run_limit(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

/// Receive port `k`'s part of `packets` shared over `ports` ports: the same for each,
/// the first ones one more where it does not divide.
fn port_share(packets: u64, k: usize, ports: usize) -> u64 {
    packets / ports as u64 + u64::from((k as u64) < packets % ports as u64)
}

/// How much of the traffic one round takes.
#[derive(Clone, Copy)]
enum Share {
    /// Until the receive ports have delivered this many packets since they were built
    /// (this round's share and all rounds' before it).
    PacketsUpTo(u64),
    /// This many seconds.
    Seconds(f64),
}

/// A configuration built over in-memory ports with its routes installed, ready to run.
struct Bench {
    /// The options it runs with (a route6 run's frame size raised to its least).
    opts: PipelineOptions,
    spec: RouterSpec,
    ports: Vec<Arc<MemPort>>,
    /// The first `nrx` ports receive.
    nrx: usize,
    /// The exact packet budget (none with `seconds`; for rounds, each round's).
    packets: Option<u64>,
    route_install_seconds: f64,
    /// The `IPFilter` the rules go into and its two rule sets, when there are rules.
    filter: Option<Filter>,
    /// Each rule write's time while the runs went, microseconds.
    rule_writes: std::sync::Mutex<Vec<f64>>,
}

/// The filter of the rule update experiment: its `config` handler and the two rule
/// sets written in turn.
struct Filter {
    handler: String,
    configs: [String; 2],
}

impl Filter {
    /// `n` deny rules for sources in 11.0.0.0/8 (the traffic comes from 100.64.0.0/10),
    /// then the configuration's own rules `own`; the second set's last deny rule is for
    /// 12.0.0.0/24 instead. Installs the first.
    fn install(spec: &RouterSpec, flat: &FlatConfig, n: usize) -> Result<Filter, String> {
        let f = flat
            .elements
            .iter()
            .find(|e| e.class == "IPFilter")
            .ok_or("rules need an IPFilter in the configuration (app filter)")?;
        let rule = |k: usize| format!("deny src net 11.{}.{}.0/24", k >> 8 & 255, k & 255);
        let mut rules: Vec<String> = (0..n).map(rule).collect();
        let with_own = |rules: &[String]| {
            let mut all = rules.to_vec();
            all.push(f.config.trim().to_string());
            all.join(", ")
        };
        let first = with_own(&rules);
        if let Some(last) = rules.last_mut() {
            *last = "deny src net 12.0.0.0/24".to_string();
        }
        let filter = Filter {
            handler: format!("{}.config", f.name),
            configs: [first, with_own(&rules)],
        };
        spec.write_handler(&filter.handler, &filter.configs[0])
            .map_err(|e| format!("{}: {}", filter.handler, e))?;
        Ok(filter)
    }
}

impl Bench {
    /// Builds the configuration `flat` as `opts` says. `rounds`: the receive ports start
    /// with no packets to deliver, and each round gives them its share.
    fn prepare(flat: &FlatConfig, opts: &PipelineOptions, rounds: bool) -> Result<Bench, String> {
        let threads = opts.threads;
        let packets = match opts.seconds {
            Some(_) => None,
            None if rounds => Some(0),
            None => Some(opts.packets.unwrap_or(DEFAULT_PACKETS)),
        };
        let mut rng = Rng::new(opts.seed);

        let v6 = flat.elements.iter().position(|e| e.class == "LookupIP6Route");
        // A UDP/IPv6 frame takes at least 66 bytes on the wire: smaller sizes run at
        // that, and the report says so.
        let opts = match v6 {
            Some(_) if opts.size < route6::MIN_FRAME + 4 => PipelineOptions {
                size: route6::MIN_FRAME + 4,
                ..opts.clone()
            },
            _ => opts.clone(),
        };
        let (frames, install) = match v6 {
            Some(l) => traffic_v6(flat, l, &opts, &mut rng)?,
            None => traffic_v4(flat, &opts, &mut rng)?,
        };

        // Rewrite FromDump/ToDump into device elements over memK.
        let mut flat = flat.clone();
        let (mut nrx, mut ntx) = (0usize, 0usize);
        for e in flat.elements.iter_mut() {
            if e.class == "FromDump" {
                e.class = "FromDevice".into();
                e.config = format!("mem{}, BURST {}", nrx, opts.rx_burst);
                nrx += 1;
            } else if e.class == "ToDump" {
                e.class = "ToDevice".into();
                e.config = format!("mem{}, BURST {}", ntx, opts.tx_burst);
                ntx += 1;
            }
        }
        if nrx == 0 {
            return Err("the configuration has no FromDump to feed traffic into".into());
        }
        let mut devices = DeviceTable::new();
        let mut ports: Vec<Arc<MemPort>> = Vec::new();
        for k in 0..nrx.max(ntx) {
            let port = if k < nrx {
                MemPort::with_traffic(threads, &frames, packets.map(|n| port_share(n, k, nrx)))
            } else {
                MemPort::new(threads)
            };
            let port = Arc::new(port);
            devices.insert(format!("mem{}", k), port.clone() as Arc<dyn Port>);
            ports.push(port);
        }
        let devices = Arc::new(devices);
        let mut reg = Registry::with_library();
        register(&mut reg, &devices);
        if let Some(add) = opts.extra_classes {
            add(&mut reg);
        }
        let spec = RouterSpec::build(&flat, &reg, &opts.conf_dir, threads).map_err(|e| e.to_string())?;

        let t0 = Instant::now();
        let route_install_seconds = match install {
            Some(i) => {
                install_routes(&spec, &i)?;
                // The tables the installation replaced are freed here, not by the
                // workers' first lookups inside the measured run (a thousand routes
                // added one by one left about 8 ms of frees, which tripled the cycles
                // a packet of a first run of 100,000 packets).
                lpm::reclaim();
                t0.elapsed().as_secs_f64()
            }
            None => 0.0,
        };
        let filter = if opts.rules > 0 || opts.rule_updates > 0.0 {
            Some(Filter::install(&spec, &flat, opts.rules)?)
        } else {
            None
        };
        Ok(Bench {
            opts,
            spec,
            ports,
            nrx,
            packets,
            route_install_seconds,
            filter,
            rule_writes: Default::default(),
        })
    }

    /// One run: the whole budget (or `seconds`), or a round's share.
    fn run(&self, share: Option<Share>) -> RunStats {
        let threads = self.opts.threads;
        let runtime = Runtime::new(threads)
            .pin(self.opts.pin)
            .profile(self.opts.profile);
        // (A round ends with a stop request; the next starts without one.)
        self.spec.stop_flag().clear();
        let rx_ports = &self.ports[..self.nrx];
        let budgeted = self.packets.is_some();
        let limit = match share {
            None => self.opts.seconds.map(run_limit),
            Some(Share::Seconds(s)) => Some(run_limit(s)),
            Some(Share::PacketsUpTo(n)) => {
                for (k, p) in rx_ports.iter().enumerate() {
                    p.set_total(Some(port_share(n, k, self.nrx)));
                }
                None
            }
        };
        let run = || {
            runtime.run_until(&self.spec, limit, || {
                budgeted && rx_ports.iter().all(|p| (0..threads).all(|q| p.rx_finished(q)))
            })
        };
        match &self.filter {
            Some(f) if self.opts.rule_updates > 0.0 => self.run_with_rule_writes(f, run),
            _ => run(),
        }
    }

    /// `run` with a thread beside it that writes the filter's two rule sets in turn,
    /// `rule_updates` times a second, from the moment packets flow until `run` returns
    /// (so not while the workers start); each write that ended while it ran is timed.
    fn run_with_rule_writes(&self, f: &Filter, run: impl FnOnce() -> RunStats) -> RunStats {
        let period = Duration::from_secs_f64(1.0 / self.opts.rule_updates);
        let received = || -> u64 { self.ports[..self.nrx].iter().map(|p| p.totals().rx_packets).sum() };
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let done = &done;
            let received = &received;
            let writer = s.spawn(move || {
                let mut times = Vec::new();
                // Waits `d`; false once the run has ended (its sender dropped, also
                // when it unwinds).
                let wait = |d: Duration| {
                    matches!(
                        stopped.recv_timeout(d),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    )
                };
                let before = received();
                while received() == before {
                    if !wait(Duration::from_micros(100)) {
                        return times;
                    }
                }
                let mut next = Instant::now();
                loop {
                    next += period;
                    if !wait(next.saturating_duration_since(Instant::now())) {
                        return times;
                    }
                    let t = Instant::now();
                    let r = self
                        .spec
                        .write_handler(&f.handler, &f.configs[(times.len() + 1) % 2]);
                    debug_assert!(r.is_ok(), "{:?}", r);
                    if r.is_ok() && !done.load(std::sync::atomic::Ordering::Acquire) {
                        times.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
            });
            let stats = run();
            done.store(true, std::sync::atomic::Ordering::Release);
            drop(stop);
            let times = writer.join().expect("rule writer");
            self.rule_writes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(times);
            stats
        })
    }

    /// The report of `runs` (one, or a round each): packets, seconds and the workers'
    /// figures over all of them; cycles a packet the median run's.
    fn report(&self, runs: &[RunStats]) -> PipelineReport {
        let mut r = report(
            &self.opts,
            self.opts.threads,
            runs,
            &self.ports,
            self.route_install_seconds,
        );
        let writes = self.rule_writes.lock().unwrap_or_else(|e| e.into_inner());
        r.rules = self.opts.rules;
        r.rule_writes = writes.len() as u64;
        r.rule_write_median_us = if writes.is_empty() { 0.0 } else { median(&writes) };
        if self.opts.profile {
            if let [stats] = runs {
                r.elements = element_reports(&self.spec, stats, r.packets);
                r.timer_cycles = timer_cycles();
            }
        }
        r
    }

    /// The baseline `app` beside this run, built: this run's frame size, flows, workers,
    /// batches and packets or seconds (its frames aimed at its own configuration's
    /// routes), no routes, no profile.
    fn prepare_baseline(&self, app: &str, rounds: bool) -> Result<Bench, String> {
        let opts = PipelineOptions {
            app: app.to_string(),
            config: None,
            routes: 0,
            // The same filter without updates, when the baseline is the app itself.
            rules: if app == self.opts.app { self.opts.rules } else { 0 },
            rule_updates: 0.0,
            profile: false,
            baseline: None,
            ..self.opts.clone()
        };
        load(&opts)
            .and_then(|flat| Bench::prepare(&flat, &opts, rounds))
            .map_err(|e| format!("baseline {}: {}", app, e))
    }
}

/// Every called element's profile summed over the workers, the dearest first.
fn element_reports(spec: &RouterSpec, stats: &RunStats, packets: u64) -> Vec<ElementReport> {
    let names: Vec<&str> = spec.element_names().collect();
    let classes: Vec<&str> = spec.element_classes().collect();
    let mut sum = vec![graph::router::ElementProfile::default(); names.len()];
    for w in &stats.workers {
        for (t, p) in sum.iter_mut().zip(&w.profile) {
            *t += *p;
        }
    }
    let mut rows: Vec<ElementReport> = sum
        .iter()
        .enumerate()
        .filter(|(_, p)| p.calls > 0)
        .map(|(i, p)| ElementReport {
            name: names[i].to_string(),
            class: classes[i].to_string(),
            calls: p.calls,
            packets: p.packets,
            cycles_per_call: p.cycles as f64 / p.calls as f64,
            cycles_per_packet: if packets == 0 {
                0.0
            } else {
                p.cycles as f64 / packets as f64
            },
        })
        .collect();
    rows.sort_by(|a, b| b.cycles_per_packet.total_cmp(&a.cycles_per_packet));
    rows
}

/// The least TSC cycles between two back-to-back counter reads, over many tries: what
/// the profile's timing adds to each call.
fn timer_cycles() -> f64 {
    (0..10_000)
        .map(|_| {
            let a = tsc::rdtsc();
            tsc::rdtsc().wrapping_sub(a)
        })
        .min()
        .unwrap_or(0) as f64
}

/// Random routes to give a lookup element: its name, the routes as `add` takes them,
/// and whether its `ctrl` handler takes many `add` lines in one write (the IPv4 lookup
/// elements'; LookupIP6Route's takes one command, as in Click).
struct Install {
    element: String,
    routes: Vec<String>,
    batched_ctrl: bool,
}

/// Adds the routes with one write of the element's `ctrl` handler where it takes them
/// all, else (or if it has no `ctrl`) with its `add` handler one by one.
fn install_routes(spec: &RouterSpec, i: &Install) -> Result<(), String> {
    let ctrl = format!("{}.ctrl", i.element);
    let add = format!("{}.add", i.element);
    if i.batched_ctrl {
        let text: String = i.routes.iter().map(|r| format!("add {}\n", r)).collect();
        match spec.write_handler(&ctrl, &text) {
            Ok(()) => return Ok(()),
            Err(e) if e.starts_with("no '") => {}
            Err(e) => return Err(format!("{}: {}", ctrl, e)),
        }
    }
    for r in &i.routes {
        spec.write_handler(&add, r)
            .map_err(|e| format!("{}: {}", add, e))?;
    }
    Ok(())
}

fn report(
    opts: &PipelineOptions,
    threads: usize,
    runs: &[RunStats],
    ports: &[Arc<MemPort>],
    route_install_seconds: f64,
) -> PipelineReport {
    let packets: u64 = ports.iter().map(|p| p.totals().rx_packets).sum();
    let tx_packets: u64 = ports.iter().map(|p| p.totals().tx_packets).sum();
    let seconds: f64 = runs
        .iter()
        .map(|s| {
            s.workers
                .iter()
                .map(|w| w.elapsed.as_secs_f64())
                .fold(0.0, f64::max)
        })
        .sum();
    let rate = |n: u64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
    // Each worker's figures over all runs.
    let mut all = RunStats {
        tsc_hz: tsc::tsc_hz(),
        ..RunStats::default()
    };
    for s in runs {
        all.add(s);
    }
    let rounds: Vec<f64> = if runs.len() > 1 {
        runs.iter().map(RunStats::cycles_per_packet).collect()
    } else {
        Vec::new()
    };
    PipelineReport {
        app: opts.app.clone(),
        size: opts.size,
        threads,
        routes: opts.routes,
        flows: opts.flows,
        packets,
        tx_packets,
        seconds,
        mpps: rate(packets) / 1e6,
        gbps: rate(packets) * opts.size as f64 * 8.0 / 1e9,
        cycles_per_packet: if rounds.is_empty() {
            all.cycles_per_packet()
        } else {
            median(&rounds)
        },
        rounds,
        empty_poll_share: all.empty_poll_share(),
        tsc_ghz: all.tsc_hz / 1e9,
        route_install_seconds,
        rules: 0,
        rule_writes: 0,
        rule_write_median_us: 0.0,
        workers: all
            .workers
            .iter()
            .map(|w| WorkerReport {
                index: w.index,
                core: w.core,
                packets: w.packets,
                mpps: w.mpps(),
                cycles_per_packet: w.cycles_per_packet(),
                empty_poll_share: w.empty_poll_share(),
            })
            .collect(),
        elements: Vec::new(),
        timer_cycles: 0.0,
        baseline: None,
    }
}

#[cfg(test)]
mod tests {
    use super::route4::RESERVED_FIRST_OCTETS;
    use super::*;
    use crate::tests::{conn, decl};
    use graph::lang::Connection;
    use graph::Landmark;
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    fn forward_flat() -> FlatConfig {
        FlatConfig {
            elements: vec![
                decl("src", "FromDump", "in.pcap, STOP true"),
                decl("c", "Counter", ""),
                decl("q", "Queue", "1000"),
                decl("ToDump@4", "ToDump", "out.pcap"),
            ],
            connections: vec![conn(0, 1), conn(1, 2), conn(2, 3)],
            requirements: vec![],
        }
    }

    fn opts(threads: usize, packets: u64, size: usize) -> PipelineOptions {
        PipelineOptions {
            app: "forward".into(),
            threads,
            packets: Some(packets),
            size,
            flows: 64,
            pin: false,
            ..PipelineOptions::default()
        }
    }

    #[test]
    fn forward_moves_exactly_the_packets_asked_for() {
        for threads in [1, 2] {
            let r = pipeline_flat(&forward_flat(), &opts(threads, 5_003, 64)).unwrap();
            assert_eq!(r.packets, 5_003);
            assert_eq!(r.tx_packets, 5_003);
            assert_eq!(r.workers.len(), threads);
            assert_eq!(r.workers.iter().map(|w| w.packets).sum::<u64>(), 5_003);
            assert_eq!(r.threads, threads);
            let j = r.to_json_line();
            assert!(j.starts_with("{\"app\":\"forward\",\"size\":64,"), "{}", j);
            assert!(j.contains(&format!("\"threads\":{},", threads)));
            assert!(j.contains("\"packets\":5003,"));
            assert!(j.contains("\"mpps\":") && j.contains("\"cycles_per_packet\":"));
            assert!(!j.contains('\n'));
        }
    }

    #[test]
    fn a_profiled_run_says_which_elements_took_which_packets() {
        let mut o = opts(2, 5_003, 64);
        o.profile = true;
        let r = pipeline_flat(&forward_flat(), &o).unwrap();
        assert_eq!(r.packets, 5_003);
        let row = |name: &str| r.elements.iter().find(|e| e.name == name).cloned();
        let c = row("c").expect("the counter was profiled");
        assert_eq!((c.class.as_str(), c.packets), ("Counter", 5_003));
        // Two workers: at least one call each; every packet in some call.
        assert!(c.calls >= 2 && c.calls <= 5_003, "{:?}", c);
        let src = row("src").expect("the source was profiled");
        assert_eq!((src.class.as_str(), src.packets), ("FromDevice", 0));
        let out = row("ToDump@4").expect("the transmit group was profiled");
        assert_eq!((out.class.as_str(), out.packets), ("ToDevice", 5_003));
        // The full-push Queue is skipped by the graph: never called.
        assert!(row("q").is_none());
        assert!(r
            .elements
            .iter()
            .all(|e| e.cycles_per_call > 0.0 && e.cycles_per_packet > 0.0));
        let j = r.to_json_line();
        assert!(j.contains("\"elements\":[{\"name\":"), "{}", j);
        assert!(j.contains("\"class\":\"Counter\",\"calls\":"), "{}", j);

        let plain = pipeline_flat(&forward_flat(), &opts(1, 1_000, 64)).unwrap();
        assert!(plain.elements.is_empty());
        assert!(!plain.to_json_line().contains("elements"));
    }

    #[test]
    fn generated_frames_pass_ip_checks() {
        let port = |from, from_port, to| Connection {
            from,
            from_port,
            to,
            to_port: 0,
            landmark: Landmark::unknown(),
        };
        let flat = FlatConfig {
            elements: vec![
                decl("src", "FromDump", "x"),
                decl("c", "Classifier", "12/0800, -"),
                decl("s", "Strip", "14"),
                decl("chk", "CheckIPHeader", ""),
                decl("ttl", "DecIPTTL", ""),
                decl("u", "Unstrip", "14"),
                decl("out", "ToDump", "y"),
                decl("other", "Discard", ""),
            ],
            connections: vec![
                conn(0, 1),
                conn(1, 2),
                port(1, 1, 7),
                conn(2, 3),
                conn(3, 4),
                conn(4, 5),
                conn(5, 6),
            ],
            requirements: vec![],
        };
        for size in [64, 1518] {
            let r = pipeline_flat(&flat, &opts(2, 2_000, size)).unwrap();
            assert_eq!((r.packets, r.tx_packets), (2_000, 2_000), "size {}", size);
        }
    }

    #[test]
    fn shipped_forward_configuration() {
        let conf_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../conf"));
        let o = PipelineOptions {
            conf_dir,
            ..opts(2, 3_001, 128)
        };
        let r = pipeline(&o).unwrap();
        assert_eq!((r.packets, r.tx_packets), (3_001, 3_001));
        assert_eq!(r.workers.iter().map(|w| w.packets).sum::<u64>(), 3_001);
        // The same from configuration text.
        let o = PipelineOptions {
            config: Some("FromDump(a.pcap) -> c :: Counter -> ToDump(b.pcap);".into()),
            ..opts(1, 77, 64)
        };
        assert_eq!(pipeline(&o).unwrap().tx_packets, 77);
        let o = PipelineOptions {
            app: "nosuchapp".into(),
            conf_dir: PathBuf::from("/nonexistent"),
            ..opts(1, 1, 64)
        };
        let e = pipeline(&o).unwrap_err();
        assert!(e.starts_with("/nonexistent/nosuchapp.click: "), "{e}");
        assert!(e.ends_with("--conf-dir)"), "{e}");
    }

    #[test]
    fn frame_layout() {
        // 64-byte frame on the wire: 60 bytes in the buffer.
        let f = udp_frame(64, 0x6440_0001, 0x0a00_0002, 0x1234, 0x0009, 7);
        let expected: Vec<u8> = [
            &[0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0xff, 0x01, 0x08, 0x00][..],
            &[0x45, 0x00, 0x00, 46, 0x00, 0x07, 0x00, 0x00, 64, 17][..],
            &[0x00, 0x00][..], // checksum, checked below
            &[100, 64, 0, 1, 10, 0, 0, 2][..],
            &[0x12, 0x34, 0x00, 0x09, 0x00, 26, 0x00, 0x00][..],
            &[0u8; 18][..],
        ]
        .concat();
        assert_eq!(f.len(), 60);
        assert_eq!(&f[..24], &expected[..24]);
        assert_eq!(&f[26..], &expected[26..]);
        // A correct header checksum makes the header sum to 0xffff.
        assert_eq!(packet::checksum::checksum(&f[14..34]), 0);
        assert_eq!(udp_frame(1518, 1, 2, 3, 4, 5).len(), 1514);
    }

    #[test]
    fn routes_and_destinations() {
        let flat = FlatConfig {
            elements: vec![
                decl("src", "FromDump", "x"),
                decl(
                    "rt",
                    "RadixIPLookup",
                    "10.0.0.1/32 0, 198.18.0.1/32 0, 10.0.0.0/8 1, 198.18.0.0/16 2, 192.168.0.0/16 10.0.0.9 1",
                ),
                decl("host", "Discard", ""),
                decl("a", "Counter", ""),
                decl("b", "Counter", ""),
                decl("out", "ToDump", "y"),
            ],
            connections: vec![
                conn(0, 1),
                conn(1, 2),
                Connection {
                    from: 1,
                    from_port: 1,
                    to: 3,
                    to_port: 0,
                    landmark: Landmark::unknown(),
                },
                Connection {
                    from: 1,
                    from_port: 2,
                    to: 4,
                    to_port: 0,
                    landmark: Landmark::unknown(),
                },
                conn(3, 5),
                conn(4, 1),
            ],
            requirements: vec![],
        };
        // Output 2 reaches ToDump only through the loop back into rt.
        assert_eq!(outputs_reaching(&flat, 1, "ToDump"), vec![1, 2]);
        let routes = config_routes(&flat.elements[1].config);
        assert_eq!(routes.len(), 5);
        assert_eq!(
            routes[4],
            Route {
                addr: 0xc0a8_0000,
                len: 16,
                port: 1
            }
        );
        let blocked: Vec<Route> = routes.iter().copied().filter(|r| r.port == 0).collect();
        // Only the router's own address in a /31's worth of space: always avoided.
        let tiny = [Route {
            addr: 0x0a00_0000,
            len: 31,
            port: 1,
        }];
        let blocked_tiny = [Route {
            addr: 0x0a00_0001,
            len: 32,
            port: 0,
        }];
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            assert_eq!(
                pick_destination(&tiny, &blocked_tiny, &mut rng),
                Some(0x0a00_0000)
            );
            let d = pick_destination(&routes[2..4], &blocked, &mut rng).unwrap();
            assert!(d >> 24 == 10 || d >> 16 == 0xc612);
            assert!(d != 0x0a00_0001 && d != 0xc612_0001);
        }
        let r = random_routes(5000, &[1, 2], &mut rng);
        let distinct: HashSet<(u32, u8)> = r.iter().map(|r| (r.addr, r.len)).collect();
        assert_eq!(distinct.len(), 5000);
        assert!(r.iter().all(|r| (8..=24).contains(&r.len)
            && r.addr & !r.mask() == 0
            && !RESERVED_FIRST_OCTETS.contains(&(r.addr >> 24))
            && r.addr >> 24 != 0));
        assert_eq!(r.iter().filter(|r| r.port == 1).count(), 2500);
        assert_eq!(
            r[0].to_string(),
            format!("{}/{} 1", Ipv4Addr::from(r[0].addr), r[0].len)
        );
    }

    #[test]
    fn option_errors() {
        let mut o = opts(1, 10, 63);
        assert_eq!(
            pipeline_flat(&forward_flat(), &o).unwrap_err(),
            "frame size 63 out of range (64 to 1518)"
        );
        o.size = 64;
        o.routes = 10;
        assert_eq!(
            pipeline_flat(&forward_flat(), &o).unwrap_err(),
            "routes need a route lookup element (RadixIPLookup) in the configuration"
        );
        o.routes = 0;
        o.seconds = Some(1.0);
        assert_eq!(
            pipeline_flat(&forward_flat(), &o).unwrap_err(),
            "give a packet count or a duration, not both"
        );
        let no_source = FlatConfig {
            elements: vec![decl("s", "InfiniteSource", ""), decl("d", "Discard", "")],
            connections: vec![conn(0, 1)],
            requirements: vec![],
        };
        assert_eq!(
            pipeline_flat(&no_source, &opts(1, 10, 64)).unwrap_err(),
            "the configuration has no FromDump to feed traffic into"
        );
    }

    #[test]
    fn a_duration_beyond_what_a_duration_holds_is_refused_not_a_panic() {
        for rounds in [1, 2] {
            let o = PipelineOptions {
                packets: None,
                seconds: Some(1e20),
                rounds,
                ..opts(1, 10, 64)
            };
            assert_eq!(
                pipeline_flat(&forward_flat(), &o).unwrap_err(),
                "the duration must be at most 18446744073709551615 seconds",
                "rounds {}",
                rounds
            );
        }
        let o = PipelineOptions {
            packets: None,
            seconds: Some(0.0),
            ..opts(1, 10, 64)
        };
        assert_eq!(
            pipeline_flat(&forward_flat(), &o).unwrap_err(),
            "the duration must be a positive number of seconds"
        );
    }

    #[test]
    fn workers_flows_and_batches_out_of_range_are_refused() {
        let refused = |o: PipelineOptions| pipeline_flat(&forward_flat(), &o).unwrap_err();
        assert_eq!(refused(opts(0, 10, 64)), "at least one worker thread is needed");
        assert_eq!(
            refused(PipelineOptions {
                flows: 0,
                ..opts(1, 10, 64)
            }),
            "at least one flow is needed"
        );
        assert_eq!(
            refused(PipelineOptions {
                flows: 65_537,
                ..opts(1, 10, 64)
            }),
            "at most 65536 flows"
        );
        for rx_burst in [0, 257] {
            assert_eq!(
                refused(PipelineOptions {
                    rx_burst,
                    ..opts(1, 10, 64)
                }),
                "the receive batch must be from 1 to 256 packets"
            );
        }
        assert_eq!(
            refused(PipelineOptions {
                tx_burst: 257,
                ..opts(1, 10, 64)
            }),
            "the transmit batch must be from 1 to 256 packets"
        );
        // The limits themselves run.
        let r = pipeline_flat(
            &forward_flat(),
            &PipelineOptions {
                flows: 65_536,
                rx_burst: 256,
                tx_burst: 1,
                ..opts(1, 1_000, 64)
            },
        )
        .unwrap();
        assert_eq!((r.packets, r.tx_packets), (1_000, 1_000));
    }
}
