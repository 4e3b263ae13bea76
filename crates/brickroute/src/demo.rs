//! `brickroute demo`: a testbed, the router in its dut namespace, the sink and the
//! generator for a few seconds, a live view, a summary — and nothing left behind.
//!
//! The generator and the sink run as threads of this process, each moved into its own
//! namespace (`setns` changes only the calling thread's); the router is a child
//! process, `brickroute run` on conf/testbed-router.click (built into the binary) in
//! the dut namespace. A guard tears everything down on every way out: the end of the
//! run, a failure, SIGINT, SIGTERM, SIGHUP or SIGQUIT (signals only set a flag; the
//! main loop sees it), and a panic (the guard's `Drop` runs while unwinding).
//!
//! The router runs in a process group of its own, and so does every `ip` command
//! (`bench::testbed::ip`): a Ctrl-C at the terminal reaches the demo alone, which
//! stops the generator, lets the last frames through and only then stops the router.
//! The demo's own output stops at the first failed write (a closed pipe or terminal)
//! instead of panicking, so it still gets to remove what it made.

use ::bench::gen::{GenProgress, Limits};
use ::bench::net::{enter_netns, stop_on_signals, PacketSocket};
use ::bench::sink::SinkLimits;
use ::bench::stats::{SinkReport, SinkStats};
use ::bench::testbed::{self, Testbed};
use ::bench::traffic::{check_flows, parse_mac, SizeCycle, TrafficSpec};
use ::bench::units::{latency, si};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The router the demo runs.
pub const ROUTER_CONFIG: &str = include_str!("../../../conf/testbed-router.click");

/// Handlers read from the router after the run.
const HANDLERS: [&str; 5] = [
    "out1/cnt.count",
    "out0/cnt.count",
    "chk.drops",
    "tohost.count",
    "nonip.count",
];

#[derive(clap::Args)]
pub struct DemoArgs {
    /// How the router opens its interfaces: XDP (AF_XDP, brickroute's own XDP program)
    /// or PACKET (AF_PACKET).
    #[arg(long, default_value = "XDP")]
    pub method: String,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Packets per second offered (0: as fast as the generator can).
    #[arg(long, default_value_t = 100_000)]
    pub rate: u64,
    /// Frame size in bytes, 64..1518, FCS included.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Router worker threads (and queues per veth).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Flows (distinct UDP 5-tuples).
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
}

/// Set once a write to standard output, or to standard error, has failed (its reader
/// gone, the terminal closed): the demo writes nothing more there, where `println!`
/// would panic, and runs on to its end and its cleanup.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);
static STDERR_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes one line to `w` unless a write there has failed before.
fn write_line(failed: &AtomicBool, mut w: impl Write, line: std::fmt::Arguments) {
    if !failed.load(Ordering::Relaxed) && writeln!(w, "{}", line).is_err() {
        failed.store(true, Ordering::Relaxed);
    }
}

/// `println!` that stops writing at the first failure instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {
        write_line(&STDOUT_FAILED, std::io::stdout().lock(), format_args!($($arg)*))
    };
}

/// `eprintln!` that stops writing at the first failure instead of panicking.
macro_rules! note {
    ($($arg:tt)*) => {
        write_line(&STDERR_FAILED, std::io::stderr().lock(), format_args!($($arg)*))
    };
}

/// Everything the demo made; dropping it removes all of it.
struct Cleanup {
    testbed: Option<Testbed>,
    router: Option<Child>,
}

impl Cleanup {
    /// Asks the router to stop (SIGINT, as Ctrl-C would), waits up to 5 s, then kills it.
    fn stop_router(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.router.take()?;
        // SAFETY: kill(2) on our own child's process id, which we have not reaped yet.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match child.try_wait() {
                Ok(Some(st)) => return Some(st),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    return child.wait().ok();
                }
            }
        }
    }

    fn teardown(&mut self) {
        self.stop_router();
        if let Some(tb) = self.testbed.take() {
            match testbed::down(&tb.prefix) {
                Ok(tb) => note!("demo: removed testbed {}", tb.namespaces.join(", ")),
                Err(e) => note!(
                    "demo: removing the testbed failed: {}\n  retry with: brickroute testbed down --prefix {}",
                    e, tb.prefix
                ),
            }
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Counters of one interface, from `ip -s -j link`.
#[derive(Clone, Copy, Default)]
struct LinkStats {
    rx_packets: u64,
    tx_packets: u64,
}

fn link_stats(ns: &str) -> Result<Vec<(String, LinkStats)>, String> {
    let out = testbed::ip(&["-s", "-j", "-n", ns, "link", "show"].map(String::from))?;
    let v: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("`ip -s -j -n {} link show`: {}", ns, e))?;
    let get = |l: &serde_json::Value, dir: &str| l["stats64"][dir]["packets"].as_u64().unwrap_or(0);
    Ok(v.as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    let name = l["ifname"].as_str().unwrap_or("").to_string();
                    (
                        name,
                        LinkStats {
                            rx_packets: get(l, "rx"),
                            tx_packets: get(l, "tx"),
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

fn dut_counters(ns: &str) -> (u64, u64) {
    let mut r = (0, 0);
    for (name, s) in link_stats(ns).unwrap_or_default() {
        match name.as_str() {
            "d0" => r.0 = s.rx_packets,
            "d1" => r.1 = s.tx_packets,
            _ => {}
        }
    }
    r
}

/// Packet sockets open in namespace `ns` (from its /proc/net/packet): the router's
/// ports show up there once it has opened them.
fn packet_sockets_in(ns: &str) -> Result<usize, String> {
    let ns = ns.to_string();
    std::thread::spawn(move || -> Result<usize, String> {
        enter_netns(&ns)?;
        let t = std::fs::read_to_string("/proc/thread-self/net/packet")
            .map_err(|e| format!("/proc/thread-self/net/packet: {}", e))?;
        Ok(t.lines().count().saturating_sub(1))
    })
    .join()
    .map_err(|_| "reading /proc/net/packet panicked".to_string())?
}

/// Whether the router in namespace `ns` has opened d0 and d1: AF_PACKET ports show up
/// as packet sockets; AF_XDP ports attach their XDP program as the last step of opening.
fn router_ports_open(ns: &str, method: &str) -> Result<bool, String> {
    if method != "XDP" {
        return packet_sockets_in(ns).map(|n| n >= 2);
    }
    for dev in ["d0", "d1"] {
        let o = Command::new("ip")
            .args(["-n", ns, "-d", "link", "show", dev])
            .process_group(0)
            .output()
            .map_err(|e| format!("ip -n {} -d link show {}: {}", ns, dev, e))?;
        if !String::from_utf8_lossy(&o.stdout).contains("prog/xdp") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the sink thread shares with the live view.
#[derive(Clone, Default)]
struct SinkLive {
    delivered: u64,
    bytes: u64,
    p50: Option<u64>,
    p99: Option<u64>,
    lost_gaps: u64,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    note!("brickroute demo: {}", msg);
    ExitCode::from(1)
}

/// The way out after a signal before the traffic started (the cleanup guard removes
/// what was made): exit status 130, as for an interrupted run.
fn interrupted() -> ExitCode {
    note!("brickroute demo: interrupted");
    ExitCode::from(130)
}

pub(crate) fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// The value of handler `name` in Click's `-h` output (`name:` then the value).
pub(crate) fn handler_value(out: &str, name: &str) -> Option<u64> {
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.trim_end() == format!("{}:", name) {
            return lines.next()?.trim().parse().ok();
        }
    }
    None
}

pub fn main(a: DemoArgs) -> ExitCode {
    if let Err(e) = testbed::require_root() {
        return fail(e);
    }
    let stop = stop_on_signals();
    let method = a.method.to_ascii_uppercase();
    if method != "PACKET" && method != "XDP" {
        return fail(format!("--method must be PACKET or XDP, not '{}'", a.method));
    }
    let duration = match ::bench::units::seconds_option("--seconds", a.seconds) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let sizes = match SizeCycle::fixed(a.size) {
        Ok(s) => s,
        Err(e) => return fail(format!("--size: {}", e)),
    };
    if a.threads == 0 || a.threads > testbed::MAX_QUEUES {
        return fail(format!("--threads must be 1..{}", testbed::MAX_QUEUES));
    }
    if let Err(e) = check_flows(a.flows) {
        return fail(e);
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot find this program's path: {}", e)),
    };

    let prefix = format!("brd{}-", std::process::id());
    let mut cleanup = Cleanup {
        testbed: None,
        router: None,
    };
    note!(
        "demo: building testbed '{}' ({} queue(s) per veth)",
        prefix,
        a.threads
    );
    match testbed::up(&prefix, a.threads) {
        Ok(tb) => cleanup.testbed = Some(tb),
        // `up` removed what it made; a step that failed because of the signal is no
        // failure of the testbed.
        Err(_) if stop.load(Ordering::Relaxed) => return interrupted(),
        Err(e) => return fail(e),
    }
    if stop.load(Ordering::Relaxed) {
        return interrupted();
    }
    let tb = cleanup.testbed.clone().expect("testbed is up");

    // The router, in the dut namespace.
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &tb.dut_ns()])
        .arg(&exe)
        .args(["run", "--threads", &a.threads.to_string(), "-e", ROUTER_CONFIG])
        .arg(format!("METHOD={}", method));
    for h in HANDLERS {
        cmd.args(["-h", h]);
    }
    // Its own process group: a Ctrl-C at the terminal must not stop the router before
    // the demo has stopped the generator and let the last frames through.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    note!(
        "demo: starting the router in {} (conf/testbed-router.click, METHOD {}, {} worker(s))",
        tb.dut_ns(),
        method,
        a.threads
    );
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot start the router: {}", e)),
    };
    let router_out = read_all(child.stdout.take().expect("piped"));
    let router_err = read_all(child.stderr.take().expect("piped"));
    cleanup.router = Some(child);

    // Wait until the router has its two interfaces open (or has failed).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // A signal to the whole process group in the moment between the router's start
        // and its move to a group of its own ends the router too: that is an interrupt,
        // not a router that failed.
        if stop.load(Ordering::Relaxed) {
            return interrupted();
        }
        if let Some(Ok(Some(st))) = cleanup.router.as_mut().map(|c| c.try_wait()) {
            cleanup.router = None;
            if stop.load(Ordering::Relaxed) {
                return interrupted();
            }
            let err = router_err.join().unwrap_or_default();
            return fail(format!(
                "the router exited at start ({}):\n{}",
                st,
                err.trim_end()
            ));
        }
        match router_ports_open(&tb.dut_ns(), &method) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => return fail(e),
        }
        if Instant::now() > deadline {
            return fail("the router did not open d0 and d1 within 10 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Sockets exist before their rings and fanout groups are set up: a moment more.
    std::thread::sleep(Duration::from_millis(300));

    // The sink, in the sink namespace.
    let sink_stop = Arc::new(AtomicBool::new(false));
    let live = Arc::new(Mutex::new(SinkLive::default()));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let sink = {
        let (ns, sink_stop, live) = (tb.sink_ns(), sink_stop.clone(), live.clone());
        std::thread::spawn(move || -> Result<SinkReport, String> {
            let sock = enter_netns(&ns)
                .and_then(|_| PacketSocket::open("s0"))
                .and_then(|s| s.tune_for_rx(Duration::from_millis(100)).map(|_| s));
            let sock = match sock {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            let limits = SinkLimits {
                port: 9,
                ..SinkLimits::default()
            };
            let mut tick = |s: &SinkStats, _t: Duration| {
                let l = s.latency();
                *live.lock().unwrap_or_else(|e| e.into_inner()) = SinkLive {
                    delivered: s.delivered,
                    bytes: s.bytes,
                    p50: l.map(|l| l.p50_ns),
                    p99: l.map(|l| l.p99_ns),
                    lost_gaps: s.lost_gaps(),
                };
            };
            ::bench::sink::run(&sock, &limits, &sink_stop, &mut tick)
        })
    };
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return fail(format!("sink: {}", e)),
        Err(_) => return fail("the sink thread ended before it was ready"),
    }

    // The generator, in the gen namespace.
    let progress = Arc::new(GenProgress::default());
    let gen = {
        let (ns, progress) = (tb.gen_ns(), progress.clone());
        let limits = Limits {
            duration: Some(duration),
            count: None,
            rate: (a.rate > 0).then_some(a.rate),
        };
        let flows = a.flows;
        std::thread::spawn(move || {
            enter_netns(&ns)?;
            let sock = PacketSocket::open("g0")?;
            sock.tune_for_tx()?;
            let spec = TrafficSpec {
                src_mac: parse_mac(testbed::G0_MAC)?,
                dst_mac: parse_mac(testbed::D0_MAC)?,
                src: testbed::G0_IP.parse()?,
                dst: testbed::DST_NET.parse()?,
                src_port: 1024,
                dst_port: 9,
                flows,
                ttl: 64,
                sizes,
            };
            ::bench::gen::run(&sock, &spec, &limits, stop, &progress, &mut |_, _, _| {})
        })
    };
    note!(
        "demo: {} s of {} B frames, {} flows, {} -> router -> sink\n",
        a.seconds,
        a.size,
        a.flows,
        if a.rate > 0 {
            format!("{}pkt/s", si(a.rate as f64))
        } else {
            "as fast as the generator can".into()
        }
    );
    note!(
        "{:>6}  {:>10}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}  {:>8}  {:>9}  {:>9}",
        "time",
        "gen pkt/s",
        "router in/s",
        "router out/s",
        "in-out",
        "sink pkt/s",
        "sink bit/s",
        "lost",
        "lat p50",
        "lat p99"
    );

    // Live view, once a second, until the generator is done.
    let t0 = Instant::now();
    let mut prev = (0u64, 0u64, 0u64, 0u64, 0u64); // gen, in, out, sink packets, sink bytes
    let mut prev_t = t0;
    let (base_in, base_out) = dut_counters(&tb.dut_ns());
    while !gen.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
        if prev_t.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let now = Instant::now();
        let dt = (now - prev_t).as_secs_f64();
        let g = progress.packets.load(Ordering::Relaxed);
        let (i, o) = dut_counters(&tb.dut_ns());
        let (i, o) = (i - base_in.min(i), o - base_out.min(o));
        let s = live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let rate = |x: u64, p: u64| si((x.saturating_sub(p)) as f64 / dt);
        note!(
            "{:>5.1}s  {:>10}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}  {:>8}  {:>9}  {:>9}",
            (now - t0).as_secs_f64(),
            rate(g, prev.0),
            rate(i, prev.1),
            rate(o, prev.2),
            i.saturating_sub(o),
            rate(s.delivered, prev.3),
            si((s.bytes.saturating_sub(prev.4)) as f64 * 8.0 / dt),
            s.lost_gaps,
            s.p50.map(latency).unwrap_or_else(|| "-".into()),
            s.p99.map(latency).unwrap_or_else(|| "-".into()),
        );
        prev = (g, i, o, s.delivered, s.bytes);
        prev_t = now;
    }
    let gen_report = gen
        .join()
        .map_err(|_| "the generator panicked".to_string())
        .and_then(|r| r);
    // Let the last frames through the router before the sink stops counting.
    std::thread::sleep(Duration::from_millis(500));
    sink_stop.store(true, Ordering::Relaxed);
    let sink_report = sink
        .join()
        .map_err(|_| "the sink panicked".to_string())
        .and_then(|r| r);
    let (d0_in, d1_out) = dut_counters(&tb.dut_ns());
    let status = cleanup.stop_router();
    let out = router_out.join().unwrap_or_default();
    let err = router_err.join().unwrap_or_default();
    let interrupted = stop.load(Ordering::Relaxed);

    let gen_report = match gen_report {
        Ok(r) => r,
        Err(e) => return fail(format!("generator: {}", e)),
    };
    let mut sink_report = match sink_report {
        Ok(r) => r,
        Err(e) => return fail(format!("sink: {}", e)),
    };
    // Loss against what the generator actually sent.
    let sent = gen_report.packets;
    sink_report.expected = Some(sent);
    sink_report.lost = Some(sent as i64 - sink_report.delivered as i64);
    sink_report.loss = Some(if sent > 0 {
        sent.saturating_sub(sink_report.delivered) as f64 / sent as f64
    } else {
        0.0
    });

    let h = |n: &str| handler_value(&out, n);
    let show = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    say!("");
    say!(
        "== brickroute demo: METHOD {}, {} worker(s), {} B frames, {} flows, {:.1} s{}",
        method,
        a.threads,
        a.size,
        a.flows,
        gen_report.seconds,
        if interrupted { " (interrupted)" } else { "" }
    );
    say!(
        "generator  sent {} packets ({}pkt/s, {}bit/s)",
        sent,
        si(gen_report.pps),
        si(gen_report.bps)
    );
    let (out1, out0) = (h("out1/cnt.count"), h("out0/cnt.count"));
    let dropped = [h("chk.drops"), h("tohost.count"), h("nonip.count")];
    // What d0 received that no element counted: frames the router never read (its
    // receive ring overflowed) or dropped without a counter.
    let unaccounted = match (out1, out0, dropped) {
        (Some(a), Some(b), [Some(c), Some(d), Some(e)]) => Some(d0_in.saturating_sub(a + b + c + d + e)),
        _ => None,
    };
    say!(
        "router     d0 received {}, d1 sent {}; routed out of d1 {}, out of d0 {}; dropped: bad header {}, for the router {}, non-IP {}, not read or uncounted {}",
        d0_in,
        d1_out,
        show(out1),
        show(out0),
        show(dropped[0]),
        show(dropped[1]),
        show(dropped[2]),
        show(unaccounted),
    );
    // The router's own summary: the run's line (workers, packets, ring drops) and each
    // worker's.
    for l in err.lines().filter(|l| l.starts_with("brickroute:")) {
        say!("           {}", l);
    }
    let r = &sink_report;
    say!(
        "sink       delivered {} packets ({}pkt/s, {}bit/s); lost {} ({:.3} %), reordered {} ({:.3} %), duplicates {}",
        r.delivered,
        si(r.pps),
        si(r.bps),
        r.lost.unwrap_or(0),
        r.loss.unwrap_or(0.0) * 100.0,
        r.reordered,
        r.reordering * 100.0,
        r.duplicates
    );
    match &r.latency {
        Some(l) => say!(
            "latency    p50 {}  p90 {}  p99 {}  max {}  (generator to sink, through the router)",
            latency(l.p50_ns),
            latency(l.p90_ns),
            latency(l.p99_ns),
            latency(l.max_ns)
        ),
        None => say!("latency    - (nothing delivered)"),
    }
    say!(
        "sink JSON  {}",
        serde_json::to_string(r).expect("report serializes")
    );
    let router_ok = status.is_some_and(|s| s.success());
    if !router_ok {
        note!("demo: the router ended with {:?}:\n{}", status, err.trim_end());
    }
    cleanup.teardown();
    if interrupted {
        ExitCode::from(130)
    } else if r.delivered > 0 && router_ok {
        ExitCode::SUCCESS
    } else {
        if r.delivered == 0 {
            note!("demo: no packet came through the router");
        }
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_values_from_click_output() {
        let out = "out1/cnt.count:\n1200\nchk.drops:\n3\n\n";
        assert_eq!(handler_value(out, "out1/cnt.count"), Some(1200));
        assert_eq!(handler_value(out, "chk.drops"), Some(3));
        assert_eq!(handler_value(out, "tohost.count"), None);
    }
}
