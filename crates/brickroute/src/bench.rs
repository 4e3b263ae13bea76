//! `brickroute bench`: the measurement experiments.

use runtime::bench::{pipeline, BaselineReport, PipelineOptions};
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
        ..PipelineOptions::default()
    };
    let run = pipeline(&opts).and_then(|mut r| {
        if let Some((app, conf)) = baseline {
            r.baseline = Some(run_baseline(&opts, app, conf, r.size)?);
        }
        Ok(r)
    });
    match run {
        Ok(mut r) => {
            r.app = a.app.clone();
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

/// The baseline app `app` (configuration `conf`) over the options of the run before
/// it, at that run's frame size `size` (a route6 run's frames are at least 66 bytes),
/// without routes or profiling.
fn run_baseline(
    opts: &PipelineOptions,
    app: &str,
    conf: &str,
    size: usize,
) -> Result<BaselineReport, String> {
    let b = pipeline(&PipelineOptions {
        app: conf.to_string(),
        size,
        routes: 0,
        profile: false,
        ..opts.clone()
    })
    .map_err(|e| format!("baseline {}: {}", app, e))?;
    Ok(BaselineReport {
        app: app.to_string(),
        mpps: b.mpps,
        cycles_per_packet: b.cycles_per_packet,
    })
}
