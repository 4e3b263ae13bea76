//! `brickroute sink`: the traffic sink.

use crate::report::{fail, print_json};
use ::bench::net::{enter_netns, stop_on_signals, PacketSocket};
use ::bench::sink::SinkLimits;
use ::bench::stats::SinkStats;
use ::bench::units::{latency, seconds_option, si};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct SinkArgs {
    /// Interface to receive on.
    #[arg(short = 'i', long, default_value = "s0")]
    pub interface: String,
    /// Run in this network namespace (by default, the current one).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Seconds to receive, more than 0 and at most 2^64 - 1 (by default, until SIGINT
    /// or another limit).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Packets the generator sent: loss is counted against it, and the sink stops once
    /// that many have arrived.
    #[arg(long, value_name = "N")]
    pub expect: Option<u64>,
    /// Stop after this many seconds without a stamped frame (once one has arrived).
    #[arg(long, value_name = "S")]
    pub idle: Option<f64>,
    /// UDP destination port of the generator's frames.
    #[arg(long, default_value_t = 9)]
    pub port: u16,
    /// No progress lines.
    #[arg(short, long)]
    pub quiet: bool,
}

fn setup(a: &SinkArgs) -> Result<(PacketSocket, SinkLimits), String> {
    if let Some(ns) = &a.netns {
        enter_netns(ns)?;
    }
    let limits = SinkLimits {
        duration: a.duration.map(|s| seconds_option("--duration", s)).transpose()?,
        expect: a.expect,
        idle: a.idle.map(|s| seconds_option("--idle", s)).transpose()?,
        port: a.port,
    };
    let sock = PacketSocket::open(&a.interface)?;
    sock.tune_for_rx(Duration::from_millis(100))?;
    Ok((sock, limits))
}

/// One progress line: rates over the last interval, latency and loss so far.
pub fn progress_line(s: &SinkStats, pps: f64, bps: f64) -> String {
    let lat = match s.latency() {
        Some(l) => format!("lat p50 {} p99 {}", latency(l.p50_ns), latency(l.p99_ns)),
        None => "lat -".to_string(),
    };
    format!(
        "{}pkt/s  {}bit/s  {}  lost(gaps) {}  reordered {}",
        si(pps),
        si(bps),
        lat,
        s.lost_gaps(),
        s.reordered
    )
}

pub fn main(a: SinkArgs) -> ExitCode {
    let (sock, limits) = match setup(&a) {
        Ok(x) => x,
        Err(e) => return fail("sink", e),
    };
    let stop = stop_on_signals();
    // Progress lines stop at the first that cannot be written (standard error closed);
    // the sink goes on counting until its report.
    let mut show_progress =
        writeln!(std::io::stderr().lock(), "sink {}: listening", a.interface).is_ok() && !a.quiet;
    let (mut last_p, mut last_b, mut last_t) = (0u64, 0u64, Duration::ZERO);
    let ifname = a.interface.clone();
    let mut tick = |s: &SinkStats, t: Duration| {
        let dt = (t - last_t).as_secs_f64();
        if show_progress && dt > 0.05 {
            let pps = (s.delivered - last_p) as f64 / dt;
            let bps = (s.bytes - last_b) as f64 * 8.0 / dt;
            show_progress = writeln!(
                std::io::stderr().lock(),
                "sink {}: {:5.1} s  {}",
                ifname,
                t.as_secs_f64(),
                progress_line(s, pps, bps)
            )
            .is_ok();
        }
        (last_p, last_b, last_t) = (s.delivered, s.bytes, t);
    };
    match ::bench::sink::run(&sock, &limits, stop, &mut tick) {
        Ok(r) => print_json("sink", &serde_json::to_string(&r).expect("report serializes")),
        Err(e) => fail("sink", e),
    }
}
