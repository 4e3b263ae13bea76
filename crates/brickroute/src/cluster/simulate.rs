//! `brickroute cluster simulate`: runs the mesh simulator (`cluster::sim`) on the same
//! traffic under each balancing scheme and prints what each does to delivery, drops,
//! reordering, latency and the load of servers and links.

use cluster::sim::{self, Failure, Matrix, PacketSize, Results, Scheme, SimConfig, Topology};
use std::fmt::Write as _;
use std::process::ExitCode;

/// A server's packet processor, in units of R, unless --server-capacity says otherwise.
///
/// A uniform matrix costs each server about 3R under classic VLB (3 − 4/N + 2/N² of the
/// load in this model: 2.53R at 8 servers and full load) and about 2R under Direct VLB
/// (2 − 1/N when everything goes direct, plus the bursts above a destination's share
/// that it balances: about 2.05R at 8 servers and full load). 2.2R lies between: at
/// the default 8 servers classic VLB overloads it, at full load and at the default
/// 0.9 (2.28R), and Direct VLB does not.
const DEFAULT_CAPACITY_IN_R: f64 = 2.2;
const DEFAULT_HOT: f64 = 0.25;

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Servers in the mesh, 2 to 256, each with one external port (of an n-fly: its
    /// edge servers, a power of --radix).
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    servers: usize,
    /// How the servers are joined: a full mesh, or a k-ary n-fly of switching servers
    /// (a butterfly, as the planner lays out routers too large for a mesh).
    #[arg(long, value_enum, default_value = "full-mesh")]
    topology: TopologyName,
    /// k: the links each switching server of an n-fly takes in and passes on
    /// [default: 2].
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    radix: Option<usize>,
    /// Each switching server's packet processing capacity, in Gbps [default: k × L,
    /// enough to pass on all its links at their rate].
    #[arg(long, value_name = "GBPS", allow_negative_numbers = true)]
    switch_capacity: Option<f64>,
    /// R: each server's external port rate, in Gbps.
    #[arg(
        long,
        value_name = "GBPS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    rate: f64,
    /// L: each internal link's rate, in Gbps [default: R, as RouteBricks' RB4 had 10 G
    /// links for 10 G ports; in an n-fly 2R, the bundle the planner gives a server of
    /// one external port].
    #[arg(long, value_name = "GBPS", allow_negative_numbers = true)]
    link_rate: Option<f64>,
    /// C: each server's packet processing capacity, in Gbps; every pass of a packet
    /// through a server costs its bytes at C [default: 2.2R, more than Direct VLB's
    /// about 2R under a uniform matrix, less than classic VLB's 2.5R to 3R].
    #[arg(long, value_name = "GBPS", allow_negative_numbers = true)]
    server_capacity: Option<f64>,
    /// Offered load at each server's external port, as a fraction of R.
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true)]
    load: f64,
    /// Traffic matrix: uniform (any output server, its own included), permutation
    /// (server i to i+1 mod N), transpose (N = m² servers: x·m + y to y·m + x),
    /// hotspot (--hot of the traffic to server 0, the rest uniform).
    #[arg(long, value_enum, default_value = "uniform")]
    matrix: MatrixName,
    /// The fraction of each server's traffic a hotspot matrix sends to server 0
    /// [default: 0.25].
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    hot: Option<f64>,
    /// Bytes in each packet (64 to 9000), or imix (64, 576 and 1500 bytes, 7:4:1).
    #[arg(long, value_name = "BYTES|imix", default_value = "1000", value_parser = parse_packet_size)]
    packet_size: PacketSize,
    /// Simulated time during which traffic arrives (then the queues drain): a number
    /// and a unit, ns, us, ms or s.
    #[arg(long, value_name = "TIME", default_value = "20ms", value_parser = parse_time)]
    duration: u64,
    /// Flowlet gap of the +flowlets schemes, or none (every packet balanced on its
    /// own). RouteBricks used 100 ms; our flows last microseconds to milliseconds, so
    /// the default is scaled down with them.
    #[arg(long, value_name = "TIME|none", default_value = "100us", value_parser = parse_gap)]
    flowlet_gap: Gap,
    /// Propagation delay of each internal link.
    #[arg(long, value_name = "TIME", default_value = "2us", value_parser = parse_time)]
    propagation: u64,
    /// Buffer of each processor, link and port, in bytes (drop-tail).
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024)]
    buffer: u64,
    /// Seed of the traffic and of the balancers: the same arguments print the same.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs only this scheme: direct-only, vlb, direct, direct+flowlets or
    /// vlb+flowlets [default: the first four, on the same traffic].
    #[arg(long, value_name = "NAME", value_parser = parse_scheme)]
    scheme: Option<Scheme>,
    /// Fails server K TIME into the traffic: from then on it takes nothing, and the
    /// others balance through it until they mark it down (--detect).
    #[arg(long, value_name = "K@TIME", value_parser = parse_fail)]
    fail: Option<(usize, u64)>,
    /// How long after --fail the other servers mark the failed one down (as heartbeats
    /// would), or none: never.
    #[arg(long, value_name = "TIME|none", default_value = "none", value_parser = parse_gap_or_none)]
    detect: Gap,
    /// One JSON object per run, one a line.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum MatrixName {
    Uniform,
    Permutation,
    Transpose,
    Hotspot,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum TopologyName {
    FullMesh,
    NFly,
}

const DEFAULT_RADIX: usize = 2;

/// A flowlet gap in ns, or none.
#[derive(Clone, Copy)]
struct Gap(Option<u64>);

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    Scheme::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Scheme::ALL.iter().map(|k| k.name()).collect();
        format!("the schemes are {}", names.join(", "))
    })
}

fn parse_packet_size(s: &str) -> Result<PacketSize, String> {
    if s.eq_ignore_ascii_case("imix") {
        return Ok(PacketSize::Imix);
    }
    let bytes: u32 = s
        .parse()
        .map_err(|_| "a packet size is a number of bytes or imix".to_string())?;
    if !(sim::MIN_PACKET_BYTES..=sim::MAX_PACKET_BYTES).contains(&bytes) {
        return Err(format!(
            "a packet has {} to {} bytes",
            sim::MIN_PACKET_BYTES,
            sim::MAX_PACKET_BYTES
        ));
    }
    Ok(PacketSize::Fixed(bytes))
}

/// `20ms`, `2.5us`, `1s`, `500ns` as ns.
fn parse_time(s: &str) -> Result<u64, String> {
    let split = s
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .ok_or_else(|| "a time needs a unit: ns, us, ms or s (such as 20ms)".to_string())?;
    let (number, unit) = s.split_at(split);
    let ns_per_unit = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("the time units are ns, us, ms and s, not '{}'", unit)),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| "a time is a number and a unit, such as 20ms".to_string())?;
    let ns = value * ns_per_unit;
    if !(ns.is_finite() && ns >= 0.0) {
        return Err("a time is 0 or more".into());
    }
    if ns > sim::MAX_DURATION_NS as f64 {
        return Err(format!(
            "a time is at most {} s",
            sim::MAX_DURATION_NS / 1_000_000_000
        ));
    }
    Ok(ns.round() as u64)
}

fn parse_gap(s: &str) -> Result<Gap, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Gap(None));
    }
    match parse_time(s)? {
        0 => Err("a flowlet gap of 0 keeps no packet on its flowlet's path; give none instead".into()),
        ns => Ok(Gap(Some(ns))),
    }
}

/// `K@TIME`: a server and a time into the traffic.
fn parse_fail(s: &str) -> Result<(usize, u64), String> {
    let bad = || {
        format!(
            "--fail is K@TIME (server K fails TIME into the traffic, such as 3@10ms), not '{}'",
            s
        )
    };
    let (k, at) = s.split_once('@').ok_or_else(bad)?;
    Ok((k.parse().map_err(|_| bad())?, parse_time(at)?))
}

/// A time, 0 included, or none.
fn parse_gap_or_none(s: &str) -> Result<Gap, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Gap(None));
    }
    parse_time(s).map(|ns| Gap(Some(ns)))
}

fn config(a: &SimulateArgs) -> Result<SimConfig, String> {
    let matrix = match (a.matrix, a.hot) {
        (MatrixName::Hotspot, hot) => Matrix::Hotspot {
            hot: hot.unwrap_or(DEFAULT_HOT),
        },
        (_, Some(_)) => return Err("--hot is for --matrix hotspot".into()),
        (MatrixName::Uniform, None) => Matrix::Uniform,
        (MatrixName::Permutation, None) => Matrix::Permutation,
        (MatrixName::Transpose, None) => Matrix::Transpose,
    };
    let fly = a.topology == TopologyName::NFly;
    if !fly && (a.radix.is_some() || a.switch_capacity.is_some()) {
        return Err("--radix and --switch-capacity are for --topology n-fly".into());
    }
    let link_gbps = a.link_rate.unwrap_or(if fly { 2.0 * a.rate } else { a.rate });
    let topology = if fly {
        let radix = a.radix.unwrap_or(DEFAULT_RADIX);
        Topology::NFly {
            radix,
            switch_gbps: a.switch_capacity.unwrap_or(radix as f64 * link_gbps),
        }
    } else {
        Topology::FullMesh
    };
    let cfg = SimConfig {
        servers: a.servers,
        topology,
        port_gbps: a.rate,
        link_gbps,
        server_gbps: a.server_capacity.unwrap_or(DEFAULT_CAPACITY_IN_R * a.rate),
        propagation_ns: a.propagation,
        buffer_bytes: a.buffer,
        load: a.load,
        matrix,
        packet_size: a.packet_size,
        duration_ns: a.duration,
        scheme: a.scheme.unwrap_or(Scheme::Vlb),
        flowlet_gap_ns: a.flowlet_gap.0,
        seed: a.seed,
        failure: a.fail.map(|(server, at_ns)| Failure {
            server,
            at_ns,
            detected_after_ns: a.detect.0,
        }),
    };
    if a.fail.is_none() && a.detect.0.is_some() {
        return Err("--detect is for --fail".into());
    }
    cfg.check()?;
    Ok(cfg)
}

pub fn main(args: SimulateArgs) -> ExitCode {
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brickroute cluster simulate: {}", e);
            return ExitCode::from(2);
        }
    };
    let schemes: Vec<Scheme> = match args.scheme {
        Some(s) => vec![s],
        None => Scheme::COMPARISON.to_vec(),
    };
    // The runs are independent: one thread each.
    let runs: Vec<Result<Results, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = schemes
            .iter()
            .map(|&scheme| {
                let c = SimConfig {
                    scheme,
                    ..cfg.clone()
                };
                scope.spawn(move || sim::run(&c))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a simulation thread failed".into()))
            })
            .collect()
    });
    let mut results = Vec::with_capacity(runs.len());
    for r in runs {
        match r {
            Ok(r) => results.push(r),
            Err(e) => {
                eprintln!("brickroute cluster simulate: {}", e);
                return ExitCode::from(2);
            }
        }
    }
    let out = if args.json {
        results.iter().map(|r| json_line(&cfg, r) + "\n").collect()
    } else {
        table(&cfg, &results)
    };
    print!("{}", out);
    ExitCode::SUCCESS
}

fn packet_size_text(p: PacketSize) -> String {
    match p {
        PacketSize::Fixed(b) => format!("{}-byte packets", b),
        PacketSize::Imix => "IMIX packets".into(),
    }
}

fn time_text(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{} us", ns as f64 / 1e3)
    } else {
        format!("{} ns", ns)
    }
}

fn table(cfg: &SimConfig, results: &[Results]) -> String {
    let mut s = String::new();
    let matrix = match cfg.matrix {
        Matrix::Hotspot { hot } => format!("hotspot matrix ({} to server 0)", hot),
        m => format!("{} matrix", m.name()),
    };
    let gap = cfg
        .flowlet_gap_ns
        .map_or("none (per packet)".to_string(), time_text);
    let _ = writeln!(
        s,
        "{} servers: ports R = {} Gbps, links L = {} Gbps ({} propagation), servers C = {} Gbps ({}R)",
        cfg.servers,
        cfg.port_gbps,
        cfg.link_gbps,
        time_text(cfg.propagation_ns),
        cfg.server_gbps,
        round3(cfg.server_gbps / cfg.port_gbps),
    );
    if let Topology::NFly { radix, switch_gbps } = cfg.topology {
        let stages = Topology::stages(radix, cfg.servers).unwrap_or(0) as usize;
        let _ = writeln!(
            s,
            "joined by a {}-ary {}-fly: {} stages of {} switching servers of {} Gbps, each link L",
            radix,
            stages,
            stages,
            cfg.servers / radix,
            switch_gbps
        );
    } else {
        let _ = writeln!(s, "joined by a full mesh");
    }
    let _ = writeln!(
        s,
        "{}, load {}, {}, {} of traffic, flowlet gap {}, buffers {} bytes, seed {}",
        matrix,
        cfg.load,
        packet_size_text(cfg.packet_size),
        time_text(cfg.duration_ns),
        gap,
        cfg.buffer_bytes,
        cfg.seed
    );
    if let Some(r) = results.first() {
        let _ = writeln!(s, "offered {} packets in {} flows", r.offered_packets, r.flows);
    }
    let fly = matches!(cfg.topology, Topology::NFly { .. });
    let (dropped, switch) = if fly {
        ("dropped server/switch/link/port", "switch util")
    } else {
        ("dropped server/link/port", "")
    };
    let w = dropped.len();
    let _ = writeln!(s);
    let header = format!(
        "{:<16} {:>9} {:>w$} {:>8} {:>9} {:>16} {:>12} {:>11} {:>11}",
        "scheme",
        "delivered",
        dropped,
        "balanced",
        "reordered",
        "latency mean/p99",
        "server load",
        "link util",
        switch
    );
    let _ = writeln!(s, "{}", header.trim_end());
    let units = format!(
        "{:<16} {:>9} {:>w$} {:>8} {:>9} {:>16} {:>12} {:>11} {:>11}",
        "",
        "",
        "(packets)",
        "",
        "",
        "(us)",
        "mean/max (R)",
        "mean/max",
        if fly { "mean/max" } else { "" }
    );
    let _ = writeln!(s, "{}", units.trim_end());
    for r in results {
        let c = r.counts;
        let sent = c.direct + c.balanced;
        let balanced = if sent == 0 {
            0.0
        } else {
            c.balanced as f64 / sent as f64
        };
        let (dropped, switch) = if fly {
            (
                format!(
                    "{}/{}/{}/{}",
                    r.dropped_server, r.dropped_switch, r.dropped_link, r.dropped_port
                ),
                format!(
                    "{:.2}/{:.2}",
                    r.mean_switch_utilisation(),
                    r.max_switch_utilisation()
                ),
            )
        } else {
            (
                format!("{}/{}/{}", r.dropped_server, r.dropped_link, r.dropped_port),
                String::new(),
            )
        };
        let row = format!(
            "{:<16} {:>8.2}% {:>w$} {:>7.1}% {:>8.3}% {:>16} {:>12} {:>11} {:>11}",
            r.scheme.name(),
            100.0 * r.delivered_fraction(),
            dropped,
            100.0 * balanced,
            100.0 * r.reordered_fraction(),
            format!("{:.1}/{:.1}", r.latency_mean_us, r.latency_p99_us),
            format!("{:.2}/{:.2}", r.mean_server_load(), r.max_server_load()),
            format!("{:.2}/{:.2}", r.mean_link_utilisation(), r.max_link_utilisation()),
            switch
        );
        let _ = writeln!(s, "{}", row.trim_end());
    }
    if let Some(f) = cfg.failure {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "server {} fails at {}; {}",
            f.server,
            time_text(f.at_ns),
            f.detected_after_ns
                .map_or("the others never mark it down".to_string(), |d| format!(
                    "the others mark it down {} later",
                    time_text(d)
                ))
        );
        let _ = writeln!(
            s,
            "{:<16} {:>26} {:>28}",
            "scheme", "lost at the failed server", "of them relayed through it"
        );
        for r in results {
            let _ = writeln!(
                s,
                "{:<16} {:>26} {:>28}",
                r.scheme.name(),
                r.dropped_failed,
                r.lost_in_transit
            );
        }
    }
    let Some(base) = results.iter().find(|r| r.scheme == Scheme::Vlb) else {
        return s;
    };
    if results.len() < 2 {
        return s;
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<16} {:>9} {:>15} {:>11} {:>9} {:>11}",
        "against vlb", "delivered", "max server load", "max link util", "reordered", "latency p99"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<16} {:>9} {:>15} {:>13} {:>9} {:>11}",
            r.scheme.name(),
            times(r.delivered_fraction(), base.delivered_fraction()),
            times(r.max_server_load(), base.max_server_load()),
            times(r.max_link_utilisation(), base.max_link_utilisation()),
            times(r.reordered_fraction(), base.reordered_fraction()),
            times(r.latency_p99_us, base.latency_p99_us),
        );
    }
    s
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `x` as a multiple of `base`: `0.74x`, or `-` when the base is 0.
fn times(x: f64, base: f64) -> String {
    if base == 0.0 {
        "-".into()
    } else {
        format!("{:.2}x", x / base)
    }
}

fn json_line(cfg: &SimConfig, r: &Results) -> String {
    let c = r.counts;
    let packet_size = match cfg.packet_size {
        PacketSize::Fixed(b) => serde_json::json!(b),
        PacketSize::Imix => serde_json::json!("imix"),
    };
    let hot = match cfg.matrix {
        Matrix::Hotspot { hot } => serde_json::json!(hot),
        _ => serde_json::Value::Null,
    };
    let (fly, radix, stages, switch_gbps) = match cfg.topology {
        Topology::NFly { radix, switch_gbps } => (
            true,
            Some(radix),
            Topology::stages(radix, cfg.servers),
            Some(switch_gbps),
        ),
        Topology::FullMesh => (false, None, None, None),
    };
    let mut line = serde_json::json!({
        "scheme": r.scheme.name(),
        "servers": cfg.servers,
        "matrix": cfg.matrix.name(),
        "hot": hot,
        "load": cfg.load,
        "rate_gbps": cfg.port_gbps,
        "link_rate_gbps": cfg.link_gbps,
        "server_capacity_gbps": cfg.server_gbps,
        "packet_size": packet_size,
        "duration_ns": cfg.duration_ns,
        "flowlet_gap_ns": cfg.flowlet_gap_ns,
        "propagation_ns": cfg.propagation_ns,
        "buffer_bytes": cfg.buffer_bytes,
        "seed": cfg.seed,
        "flows": r.flows,
        "offered": r.offered_packets,
        "offered_bytes": r.offered_bytes,
        "delivered": r.delivered_packets,
        "delivered_bytes": r.delivered_bytes,
        "dropped_server": r.dropped_server,
        "dropped_link": r.dropped_link,
        "dropped_port": r.dropped_port,
        "failed_server": cfg.failure.map(|f| f.server),
        "failed_at_ns": cfg.failure.map(|f| f.at_ns),
        "detected_after_ns": cfg.failure.and_then(|f| f.detected_after_ns),
        "dropped_failed": r.dropped_failed,
        "lost_in_transit": r.lost_in_transit,
        "reordered": r.reordered,
        "reordered_fraction": r.reordered_fraction(),
        "latency_mean_us": r.latency_mean_us,
        "latency_p99_us": r.latency_p99_us,
        "max_server_load": r.max_server_load(),
        "mean_server_load": r.mean_server_load(),
        "max_link_utilisation": r.max_link_utilisation(),
        "mean_link_utilisation": r.mean_link_utilisation(),
        "local": c.local,
        "direct": c.direct,
        "balanced": c.balanced,
        "flowlet_hits": c.flowlet_hits,
    });
    // A second object: one json! of every key passes the macro's recursion limit.
    let topology = serde_json::json!({
        "topology": cfg.topology.name(),
        "radix": radix,
        "stages": stages,
        "switch_capacity_gbps": switch_gbps,
        "dropped_switch": r.dropped_switch,
        "max_switch_utilisation": fly.then(|| r.max_switch_utilisation()),
        "mean_switch_utilisation": fly.then(|| r.mean_switch_utilisation()),
    });
    if let (Some(line), serde_json::Value::Object(more)) = (line.as_object_mut(), topology) {
        line.extend(more);
    }
    line.to_string()
}
