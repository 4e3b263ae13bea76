//! `brickroute bench`: the measurement experiments.

use runtime::bench::{pipeline, PipelineOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Runs a shipped configuration over in-memory multi-queue ports (RSS-steered,
    /// one queue pair per worker) and reports packets/s and cycles/packet per worker.
    Pipeline(PipelineArgs),
}

#[derive(clap::Args)]
pub struct PipelineArgs {
    /// Application: `forward` (conf/forward.click), `route` (conf/router.click) or
    /// `route6` (conf/router6.click, UDP/IPv6 frames of at least 66 bytes).
    #[arg(long, default_value = "forward")]
    app: String,
    /// Frame size on the wire in bytes (64 to 1518, FCS included).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Random BGP-like routes added to the route table (apps route and route6).
    #[arg(long, default_value_t = 0)]
    routes: usize,
    /// Process exactly N packets (default 10,000,000 unless --seconds is given).
    #[arg(long, conflicts_with = "seconds")]
    packets: Option<u64>,
    /// Run for S seconds with endless traffic.
    #[arg(long)]
    seconds: Option<f64>,
    /// Distinct flows in the traffic.
    #[arg(long, default_value_t = 1024)]
    flows: usize,
    /// Receive batch k_p (FromDevice BURST).
    #[arg(long, default_value_t = 32)]
    kp: usize,
    /// Transmit batch k_n (ToDevice BURST).
    #[arg(long, default_value_t = 16)]
    kn: usize,
    /// Directory of the shipped configurations.
    #[arg(long, default_value = "conf")]
    conf_dir: PathBuf,
    /// Do not pin workers to cores.
    #[arg(long)]
    no_pin: bool,
    /// Print one line of JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Time every element call and print where the cycles went, element by element
    /// (the timing adds two TSC reads a call, so the run itself is slower).
    #[arg(long)]
    profile: bool,
    /// Application run right after, with the same frame size, workers, flows, batches
    /// and packets (or seconds) and no added routes, to compare cycles a packet with in
    /// the same run: `forward`, `route`, `route6` or `none`. Default: `forward` for the
    /// route apps (RouteBricks' yardstick, minimal forwarding), `none` for forward.
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
    }
}

fn app_config(app: &str) -> Result<&'static str, String> {
    match app {
        "forward" => Ok("forward"),
        "route" => Ok("router"),
        "route6" => Ok("router6"),
        _ => Err(format!("unknown app '{}' (known: forward, route, route6)", app)),
    }
}

fn run_pipeline(a: PipelineArgs) -> ExitCode {
    let conf = match app_config(&a.app) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brickroute bench pipeline: {}", e);
            return ExitCode::from(2);
        }
    };
    if !(64..=1518).contains(&a.size) {
        eprintln!("brickroute bench pipeline: --size must be between 64 and 1518 bytes");
        return ExitCode::from(2);
    }
    // The baseline app's name and configuration.
    let baseline = match a.baseline.as_deref() {
        None if a.app == "forward" => None,
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
        conf_dir: a.conf_dir,
        size: a.size,
        packets: a.packets,
        seconds: a.seconds,
        threads: a.threads.max(1),
        routes: a.routes,
        flows: a.flows.max(1),
        rx_burst: a.kp,
        tx_burst: a.kn,
        pin: !a.no_pin,
        profile: a.profile,
        baseline: baseline.map(|(_, conf)| conf.to_string()),
        rounds: a.rounds as usize,
        ..PipelineOptions::default()
    };
    let run = pipeline(&opts);
    match run {
        Ok(mut r) => {
            r.app = a.app.clone();
            // (Reported under the application's name, not its configuration's.)
            if let (Some(b), Some((app, _))) = (r.baseline.as_mut(), baseline) {
                b.app = app.to_string();
            }
            if a.json {
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
