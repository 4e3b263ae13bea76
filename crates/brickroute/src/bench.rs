//! `brickroute bench`: the measurement experiments.

use ::bench::units::seconds_option;
use packet::MAX_BATCH;
use runtime::bench::{pipeline, PipelineOptions, MAX_FLOWS, MAX_RULE_UPDATES, MIN_RULE_UPDATES};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Runs a shipped configuration over in-memory multi-queue ports (RSS-steered,
    /// one queue pair per worker) and reports packets/s and cycles/packet per worker.
    Pipeline(PipelineArgs),
    /// RouteBricks' batching experiment: an application run with each pair of receive
    /// batch k_p and transmit batch k_n, in turns over rounds, each pair's cycles a
    /// packet against the unbatched k_p = k_n = 1 of the same rounds, with a bar chart.
    Batching(crate::batching::BatchingArgs),
    /// RouteBricks' cores-and-queues experiment: an application run with each number of
    /// workers, each owning a queue of every port, in turns over rounds, each count's
    /// packets a second against one worker's of the same rounds.
    Scaling(crate::scaling::ScalingArgs),
    /// What software RSS costs an AF_PACKET interface of several queues: brickroute's
    /// steering program (Toeplitz hash, indirection table, flow rules) run by the
    /// kernel on frames of each kind, against an empty program in the same rounds.
    /// Needs root.
    Rss(crate::rss_bench::RssArgs),
}

/// What the experiments run: the application, its frames and its workers, and how
/// the result is printed.
#[derive(clap::Args)]
pub struct Shape {
    /// Application: `forward` (conf/forward.click), `route` (conf/router.click),
    /// `route6` (conf/router6.click, UDP/IPv6 frames of at least 66 bytes), `ipsec`
    /// (conf/ipsec.click: every packet routed into an AES-128-GCM ESP tunnel) or
    /// `filter` (conf/filter.click: every packet through an IPFilter), `vlb`
    /// (conf/vlb.click: a cluster server's input side, route lookup then Direct VLB) or
    /// `nat` (conf/natpath.click: every flow source-translated by IPRewriter).
    #[arg(long, default_value = "forward")]
    pub app: String,
    /// Frame size on the wire in bytes (64 to 1518, FCS included).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Worker threads (1 to 1024).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Flows in the traffic, 1 to 65536: one template frame each (kept by every
    /// receiving port), with its own random source address and ports, so 5-tuples
    /// are distinct but for chance repeats.
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
    /// Directory of the shipped configurations.
    #[arg(long, default_value = "conf")]
    pub conf_dir: PathBuf,
    /// Do not pin workers to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Print one line of JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The shape's ranges, checked here so that an error names the option.
pub fn check_shape(s: &Shape) -> Result<(), String> {
    if !(64..=1518).contains(&s.size) {
        return Err("--size must be between 64 and 1518 bytes".into());
    }
    if s.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if s.threads > runtime::MAX_WORKERS {
        return Err(format!("--threads must be at most {}", runtime::MAX_WORKERS));
    }
    if !(1..=MAX_FLOWS).contains(&s.flows) {
        return Err(format!("--flows must be from 1 to {}", MAX_FLOWS));
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct PipelineArgs {
    #[command(flatten)]
    shape: Shape,
    /// Random BGP-like routes added to the route table (apps route, route6, ipsec, vlb
    /// and nat).
    #[arg(long, default_value_t = 0)]
    routes: usize,
    /// Deny rules added in front of the IPFilter's own (app filter), none matching the
    /// traffic, so each packet is tested against them all (0 to 65536).
    #[arg(long, default_value_t = 0)]
    rules: usize,
    /// Rewrite the IPFilter's rules this many times a second while the app runs
    /// (app filter, with --rules; 0.01 to 100000): the rules with the last added one
    /// changed, then back, from the moment packets flow until the run ends, by a thread
    /// of its own (unpinned: give it a spare core). With `--baseline filter` the same
    /// filter runs without rewrites beside it.
    #[arg(long, default_value_t = 0.0)]
    rule_updates: f64,
    /// Process exactly N packets (default 10,000,000 unless --seconds is given).
    #[arg(long, conflicts_with = "seconds")]
    packets: Option<u64>,
    /// Run for S seconds with endless traffic (more than 0, at most 2^64 - 1).
    #[arg(long)]
    seconds: Option<f64>,
    /// Receive batch k_p (FromDevice BURST, 1 to 256).
    #[arg(long, default_value_t = 32)]
    kp: usize,
    /// Transmit batch k_n (ToDevice BURST, 1 to 256).
    #[arg(long, default_value_t = 16)]
    kn: usize,
    /// Time every element call and print where the cycles went, element by element
    /// (the timing adds two TSC reads a call, so the run itself is slower).
    #[arg(long)]
    profile: bool,
    /// Application run right after, with the same frame size, workers, flows, batches
    /// and packets (or seconds) and no added routes, to compare cycles a packet with in
    /// the same run: `forward`, `route`, `route6`, `ipsec`, `filter`, `vlb`, `nat` or `none`. Default: `forward`
    /// for the others (RouteBricks' yardstick, minimal forwarding), `none` for forward.
    #[arg(long)]
    baseline: Option<String>,
    /// Run the application and its baseline in turns, N times each, in this one
    /// process, each run a share of the packets (or seconds): cycles/packet is the
    /// median run's and the ratio to the baseline the median of the rounds' ratios, so
    /// that both sides of the ratio come from the same minutes of a shared host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    rounds: u64,
}

pub fn main(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Pipeline(a) => run_pipeline(a),
        BenchCommand::Batching(a) => crate::batching::main(a, app_config),
        BenchCommand::Scaling(a) => crate::scaling::main(a, app_config),
        BenchCommand::Rss(a) => crate::rss_bench::main(a),
    }
}

fn app_config(app: &str) -> Result<&'static str, String> {
    match app {
        "forward" => Ok("forward"),
        "route" => Ok("router"),
        "route6" => Ok("router6"),
        "ipsec" => Ok("ipsec"),
        "filter" => Ok("filter"),
        "vlb" => Ok("vlb"),
        "nat" => Ok("natpath"),
        _ => Err(format!(
            "unknown app '{}' (known: forward, route, route6, ipsec, filter, vlb, nat)",
            app
        )),
    }
}

/// The numeric options' ranges, checked here so that the error names the option (the
/// batches would otherwise fail in the rewritten configuration, blaming its lines).
fn check_ranges(a: &PipelineArgs) -> Result<(), String> {
    check_shape(&a.shape)?;
    for (name, burst) in [("--kp", a.kp), ("--kn", a.kn)] {
        if !(1..=MAX_BATCH).contains(&burst) {
            return Err(format!("{} must be from 1 to {}", name, MAX_BATCH));
        }
    }
    if a.rules > 65536 {
        return Err("--rules must be at most 65536".into());
    }
    if a.rule_updates != 0.0 && !(MIN_RULE_UPDATES..=MAX_RULE_UPDATES).contains(&a.rule_updates) {
        return Err(format!(
            "--rule-updates must be 0, or from {MIN_RULE_UPDATES} to {MAX_RULE_UPDATES} a second"
        ));
    }
    if a.rule_updates > 0.0 && a.rules == 0 {
        return Err("--rule-updates needs --rules: the rules it rewrites".into());
    }
    if let Some(s) = a.seconds {
        seconds_option("--seconds", s)?;
    }
    Ok(())
}

fn run_pipeline(a: PipelineArgs) -> ExitCode {
    let conf = match app_config(&a.shape.app) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brickroute bench pipeline: {}", e);
            return ExitCode::from(2);
        }
    };
    if let Err(e) = check_ranges(&a) {
        eprintln!("brickroute bench pipeline: {}", e);
        return ExitCode::from(2);
    }
    // The baseline app's name and configuration.
    let baseline = match a.baseline.as_deref() {
        None if a.shape.app == "forward" => None,
        None => Some(("forward", "forward")),
        Some("none") => None,
        Some(b) => match app_config(b) {
            Ok(conf) => Some((b, conf)),
            Err(e) => {
                eprintln!("brickroute bench pipeline: --baseline: {} or none", e);
                return ExitCode::from(2);
            }
        },
    };
    let opts = PipelineOptions {
        app: conf.to_string(),
        conf_dir: a.shape.conf_dir,
        size: a.shape.size,
        packets: a.packets,
        seconds: a.seconds,
        threads: a.shape.threads,
        routes: a.routes,
        rules: a.rules,
        rule_updates: a.rule_updates,
        flows: a.shape.flows,
        rx_burst: a.kp,
        tx_burst: a.kn,
        pin: !a.shape.no_pin,
        profile: a.profile,
        baseline: baseline.map(|(_, conf)| conf.to_string()),
        rounds: a.rounds as usize,
        extra_classes: Some(cluster::register),
        ..PipelineOptions::default()
    };
    let run = pipeline(&opts);
    match run {
        Ok(mut r) => {
            r.app = a.shape.app.clone();
            // (Reported under the application's name, not its configuration's.)
            if let (Some(b), Some((app, _))) = (r.baseline.as_mut(), baseline) {
                b.app = app.to_string();
            }
            if a.shape.json {
                println!("{}", r.to_json_line());
            } else {
                print!("{}", r);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("brickroute bench pipeline: {}", e);
            ExitCode::from(1)
        }
    }
}

/// Each run's figures over the rounds of [`in_turns`].
pub struct Turns {
    /// Packets a second (millions), `[run][round]`.
    pub mpps: Vec<Vec<f64>>,
    /// Cycles a packet, `[run][round]`.
    pub cycles: Vec<Vec<f64>>,
    /// The frame size the runs took (a route6 run raises 64 bytes to its least, 66).
    pub size: usize,
}

/// Runs each of `runs` once a round, in turns, for `rounds` rounds, so every run of a
/// round sees the same minutes of a shared host. `name` names a run in an error.
pub fn in_turns(
    runs: &[PipelineOptions],
    rounds: u64,
    name: impl Fn(usize) -> String,
) -> Result<Turns, (String, u8)> {
    let mut t = Turns {
        mpps: vec![Vec::new(); runs.len()],
        cycles: vec![Vec::new(); runs.len()],
        size: runs.first().map_or(0, |r| r.size),
    };
    for _ in 0..rounds {
        for (i, opts) in runs.iter().enumerate() {
            let r = pipeline(opts).map_err(|e| (format!("{}: {}", name(i), e), 1))?;
            t.size = r.size;
            t.mpps[i].push(r.mpps);
            t.cycles[i].push(r.cycles_per_packet);
        }
    }
    Ok(t)
}

/// How an experiment ends: its report (JSON or table) on standard output, or its
/// error, with the exit status the error carries.
pub fn finish(experiment: &str, report: Result<String, (String, u8)>) -> ExitCode {
    match report {
        Ok(text) => {
            print!("{}", text);
            ExitCode::SUCCESS
        }
        Err((e, code)) => {
            eprintln!("brickroute bench {}: {}", experiment, e);
            ExitCode::from(code)
        }
    }
}

/// `len` character cells of bar, in eighths.
pub fn bar(len: f64) -> String {
    const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (len.max(0.0) * 8.0).round() as usize;
    let mut b = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        b.push(EIGHTHS[eighths % 8]);
    }
    b
}
