//! `brickroute gen`: the traffic generator.

use crate::report::{fail, print_json};
use ::bench::gen::{GenProgress, Limits};
use ::bench::net::{enter_netns, stop_on_signals, PacketSocket};
use ::bench::testbed;
use ::bench::traffic::{check_flows, parse_mac, Ipv4Net, SizeCycle, TrafficSpec};
use ::bench::units::{seconds_option, si};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct GenArgs {
    /// Interface to send on.
    #[arg(short = 'i', long, default_value = "g0")]
    pub interface: String,
    /// Run in this network namespace (by default, the current one).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Frame size in bytes, 64..1518, FCS included (64 puts 60 bytes on the wire).
    #[arg(long, default_value_t = 64, conflicts_with_all = ["imix", "sizes_from"])]
    pub size: usize,
    /// Simple IMIX: 64, 594 and 1518 byte frames, 7:4:1.
    #[arg(long, conflicts_with = "sizes_from")]
    pub imix: bool,
    /// Frame sizes of a pcap file's packets, in file order, over and over.
    #[arg(long, value_name = "FILE.pcap")]
    pub sizes_from: Option<PathBuf>,
    /// Flows, 1..65536; frames take turns over them. Flow f goes from host f of --src,
    /// UDP source port 1024 + (f mod 64512), to host f of --dst: flows f and f + 64512
    /// have the same 5-tuple when both networks' host counts divide 64512 (as with
    /// /32s); otherwise every flow's 5-tuple is distinct.
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
    /// Packets per second (by default, as fast as the interface takes them).
    #[arg(long, value_name = "PPS")]
    pub rate: Option<u64>,
    /// Seconds to send, more than 0 and at most 2^64 - 1 (10 unless --count is given).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Frames to send.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Destination MAC (the testbed's d0).
    #[arg(long, default_value = testbed::D0_MAC)]
    pub dst_mac: String,
    /// Source MAC (by default, the interface's).
    #[arg(long)]
    pub src_mac: Option<String>,
    /// Source addresses: flows cycle through the network's hosts.
    #[arg(long, default_value = testbed::G0_IP)]
    pub src: String,
    /// Destination addresses: flows cycle through the network's hosts.
    #[arg(long, default_value = testbed::DST_NET)]
    pub dst: String,
    /// UDP destination port (the sink recognises frames by it).
    #[arg(long, default_value_t = 9)]
    pub port: u16,
    /// IPv4 TTL.
    #[arg(long, default_value_t = 64)]
    pub ttl: u8,
    /// No progress lines.
    #[arg(short, long)]
    pub quiet: bool,
}

fn setup(a: &GenArgs) -> Result<(PacketSocket, TrafficSpec, Limits), String> {
    // Every argument is checked before the namespace and the interface are touched, so
    // a mistake is reported as such wherever the generator was meant to run.
    let sizes = if a.imix {
        SizeCycle::imix()
    } else if let Some(f) = &a.sizes_from {
        SizeCycle::from_pcap(f)?
    } else {
        SizeCycle::fixed(a.size).map_err(|e| format!("--size: {}", e))?
    };
    if a.rate == Some(0) {
        return Err("--rate must be at least 1 packet per second".into());
    }
    let duration = match (a.duration, a.count) {
        (Some(d), _) => Some(seconds_option("--duration", d)?),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    check_flows(a.flows)?;
    let src_mac = match &a.src_mac {
        Some(m) => Some(parse_mac(m).map_err(|e| format!("--src-mac: {}", e))?),
        None => None,
    };
    let dst_mac = parse_mac(&a.dst_mac).map_err(|e| format!("--dst-mac: {}", e))?;
    let src: Ipv4Net = a.src.parse().map_err(|e| format!("--src: {}", e))?;
    let dst: Ipv4Net = a.dst.parse().map_err(|e| format!("--dst: {}", e))?;
    if let Some(ns) = &a.netns {
        enter_netns(ns)?;
    }
    let sock = PacketSocket::open(&a.interface)?;
    sock.tune_for_tx()?;
    let src_mac = match src_mac {
        Some(m) => m,
        None => sock.mac()?,
    };
    let spec = TrafficSpec {
        src_mac,
        dst_mac,
        src,
        dst,
        src_port: 1024,
        dst_port: a.port,
        flows: a.flows,
        ttl: a.ttl,
        sizes,
    };
    let limits = Limits {
        duration,
        count: a.count,
        rate: a.rate,
    };
    Ok((sock, spec, limits))
}

pub fn main(a: GenArgs) -> ExitCode {
    let (sock, spec, limits) = match setup(&a) {
        Ok(x) => x,
        Err(e) => return fail("gen", e),
    };
    let stop = stop_on_signals();
    let progress = GenProgress::default();
    let (mut last_p, mut last_b, mut last_t) = (0u64, 0u64, Duration::ZERO);
    // Progress lines stop at the first that cannot be written (standard error closed);
    // the run goes on to its report.
    let mut show_progress = !a.quiet;
    let ifname = a.interface.clone();
    let mut tick = |p: u64, b: u64, t: Duration| {
        let dt = (t - last_t).as_secs_f64();
        if show_progress && dt > 0.05 {
            show_progress = writeln!(
                std::io::stderr().lock(),
                "gen {}: {:5.1} s  {}pkt/s  {}bit/s  ({} sent)",
                ifname,
                t.as_secs_f64(),
                si((p - last_p) as f64 / dt),
                si((b - last_b) as f64 * 8.0 / dt),
                p
            )
            .is_ok();
        }
        (last_p, last_b, last_t) = (p, b, t);
    };
    match ::bench::gen::run(&sock, &spec, &limits, stop, &progress, &mut tick) {
        Ok(r) => print_json("gen", &serde_json::to_string(&r).expect("report serializes")),
        Err(e) => fail("gen", e),
    }
}
