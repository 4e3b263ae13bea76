//! `brickroute cluster demo`: builds a full mesh of brickroute servers in network
//! namespaces, sends traffic into one server's external port for all of them, and
//! shows where it went: per host delivered, lost and reordered frames, per server the
//! balancing counts (RouteBricks' RB4 on veth pairs, one worker a server).
//!
//! Layout, for N servers (2, 4 or 8): host namespace `h_j` (interface `e_j`) is the
//! external neighbour of server `s_j` (interface `x_j`), and owns 198.19.j.0/24;
//! servers `s_i` and `s_k` are joined by `m_i_k` -- `m_k_i`. The generator in `h_0`
//! sends to 198.19.0.0/(24 - log2 N), flows spread over every host of every server.
//! Everything made is removed at the end, on failure, and on SIGINT or SIGTERM.

use crate::demo::{handler_value, read_all};
use ::bench::net::stop_on_signals;
use ::bench::testbed;
use ::bench::traffic::Ipv4Net;
use cluster::mesh::ServerConfig;
use graph::args::FromArg;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::ChildStderr;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const COUNTERS: [&str; 6] = [
    "vlb.local",
    "vlb.direct",
    "vlb.balanced",
    "vlb.flowlet_hits",
    "relayed.count",
    "delivered.count",
];

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Servers in the mesh: 2, 4 or 8.
    #[arg(long, default_value_t = 4)]
    servers: usize,
    /// VLBSwitch's SCHEME: direct (Direct VLB) or vlb (classic).
    #[arg(long, default_value = "direct")]
    scheme: String,
    /// Direct VLB's RATE, each server's external rate R: R/N a second may go straight
    /// to each output server. The default is below the offered load, so some traffic is
    /// balanced.
    #[arg(long, default_value = "4Mbps")]
    rate: String,
    /// VLBSwitch's FLOWLET gap (`0`: every packet balanced on its own).
    #[arg(long, default_value = "100ms")]
    flowlet: String,
    /// Frames a second from the generator.
    #[arg(long, default_value_t = 20_000)]
    pps: u64,
    /// Flows (1 to 65536), spread over the hosts of every server.
    #[arg(long, default_value_t = 1020)]
    flows: u64,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Servers marked down at every other server (VLBSwitch's DOWN), comma-separated:
    /// they relay nothing, and still deliver their own hosts' traffic.
    #[arg(long, value_delimiter = ',')]
    down: Vec<usize>,
    /// The interval of the servers' heartbeats (VLBSwitch's HEARTBEAT): a server not
    /// heard from for four intervals (at least the interval plus 20 ms) relays nothing
    /// until it is heard again. `0`
    /// sends none.
    #[arg(long, default_value = "50ms")]
    heartbeat: String,
    /// Kills server K's router (SIGKILL) SECONDS into the traffic: the others stop
    /// balancing through it once its heartbeats stop; its own host's traffic is lost.
    #[arg(long, value_name = "K@SECONDS")]
    fail: Option<String>,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// The namespaces and processes the demo made; dropping it removes them.
struct Mesh {
    namespaces: Vec<String>,
    children: Vec<Child>,
    /// `--fail`'s timer: told to give up, and waited for, before the children are
    /// reaped (after that their process ids may be anyone's).
    killer: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Mesh {
    /// Ends `--fail`'s timer (if it has not fired, it never will): from then on the
    /// children may be reaped.
    fn end_timer(&mut self) {
        if let Some((cancel, timer)) = self.killer.take() {
            cancel.store(true, Ordering::Relaxed);
            let _ = timer.join();
        }
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.end_timer();
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    testbed::ip(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map(|_| ())
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{:02x}", b))
        .collect::<Vec<_>>()
        .join(":")
}

fn server_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 1]
}

fn host_mac(j: usize) -> [u8; 6] {
    [2, 0, 0, 0, j as u8, 2]
}

/// Makes `a_dev` in `a` -- `b_dev` in `b`, both up.
fn veth(a: &str, a_dev: &str, a_mac: &str, b: &str, b_dev: &str, b_mac: &str) -> Result<(), String> {
    ip(&[
        "link", "add", a_dev, "netns", a, "address", a_mac, "type", "veth", "peer", "name", b_dev, "netns",
        b, "address", b_mac,
    ])?;
    ip(&["-n", a, "link", "set", a_dev, "up"])?;
    ip(&["-n", b, "link", "set", b_dev, "up"])
}

/// A new namespace without IPv6 (its kernel would send router solicitations into the
/// traffic).
fn namespace(mesh: &mut Mesh, name: String) -> Result<(), String> {
    ip(&["netns", "add", &name])?;
    mesh.namespaces.push(name.clone());
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &name,
            "sysctl",
            "-q",
            "-w",
            "net.ipv6.conf.all.disable_ipv6=1",
        ])
        .process_group(0)
        .output()
        .map_err(|e| format!("sysctl: {}", e))?;
    if !o.status.success() {
        return Err(format!(
            "sysctl in {}: {}",
            name,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(())
}

/// The namespaces and veth pairs of the mesh, recorded in `mesh` as they are made.
fn build_mesh(mesh: &mut Mesh, hosts: &[String], servers: &[String]) -> Result<(), String> {
    let n = servers.len();
    for ns in hosts.iter().chain(servers) {
        namespace(mesh, ns.clone())?;
    }
    for j in 0..n {
        let (e, x) = (format!("e{}", j), format!("x{}", j));
        veth(
            &hosts[j],
            &e,
            &mac(host_mac(j)),
            &servers[j],
            &x,
            &mac(server_mac(j)),
        )?;
    }
    for i in 0..n {
        for k in i + 1..n {
            let (a_dev, b_dev) = (format!("m{}{}", i, k), format!("m{}{}", k, i));
            let (a_mac, b_mac) = (
                format!("02:c0:00:00:{:02x}:{:02x}", i, k),
                format!("02:c0:00:00:{:02x}:{:02x}", k, i),
            );
            veth(&servers[i], &a_dev, &a_mac, &servers[k], &b_dev, &b_mac)?;
        }
    }
    Ok(())
}

/// Frames the generator sent to host `j`'s network, when it sent `sent` frames over
/// `flows` flows to 198.19.0.0/`len`: frames take the flows in turn, and flow `f` goes
/// to the network's host `f`, as the generator picks it ([`Ipv4Net::host`]).
fn expected(j: usize, sent: u64, flows: u64, len: u32) -> u64 {
    let net = Ipv4Net {
        addr: std::net::Ipv4Addr::new(198, 19, 0, 0),
        len: len as u8,
    };
    (0..flows.min(sent))
        .filter(|&f| usize::from(net.host(f).octets()[2]) == j)
        .map(|f| (sent - f).div_ceil(flows))
        .sum()
}

/// Why the demo ended early.
enum Stop {
    Failed(String),
    /// SIGINT, SIGTERM, SIGHUP or SIGQUIT.
    Interrupted,
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Failed(e)
    }
}

impl From<&str> for Stop {
    fn from(e: &str) -> Stop {
        Stop::Failed(e.to_string())
    }
}

pub fn main(a: DemoArgs) -> ExitCode {
    match run(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Failed(e)) => crate::report::fail("cluster demo", e),
        Err(Stop::Interrupted) => {
            graph::warn!("brickroute cluster demo: interrupted");
            ExitCode::from(130)
        }
    }
}

/// Interrupted, if a stop signal has come.
fn check(stop: &AtomicBool) -> Result<(), Stop> {
    if stop.load(Ordering::Relaxed) {
        Err(Stop::Interrupted)
    } else {
        Ok(())
    }
}

/// Waits for `child` to exit, up to `limit`; on a stop signal or at the limit it is
/// killed (and the wait fails).
fn wait_child(child: &mut Child, limit: Duration, stop: &AtomicBool, what: &str) -> Result<ExitStatus, Stop> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| format!("waiting for {}: {}", what, e))?
        {
            return Ok(st);
        }
        let interrupted = stop.load(Ordering::Relaxed);
        if interrupted || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(if interrupted {
                Stop::Interrupted
            } else {
                Stop::Failed(format!(
                    "{} did not finish within {} s; killed",
                    what,
                    limit.as_secs()
                ))
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(a: DemoArgs) -> Result<(), Stop> {
    if ![2, 4, 8].contains(&a.servers) {
        return Err(format!("--servers is 2, 4 or 8, not {}", a.servers).into());
    }
    if !(1..=65536).contains(&a.flows) {
        return Err(format!("--flows is 1 to 65536, not {}", a.flows).into());
    }
    if a.pps == 0 {
        return Err("--pps must be above 0".into());
    }
    let duration = ::bench::units::seconds_option("--seconds", a.seconds)?;
    let balancing = match a.scheme.as_str() {
        "direct" => format!("RATE {}, FLOWLET {}", a.rate, a.flowlet),
        "vlb" => format!("SCHEME vlb, FLOWLET {}", a.flowlet),
        s => return Err(format!("--scheme is direct or vlb, not '{}'", s).into()),
    };
    if let Some(k) = a.down.iter().find(|&&k| k >= a.servers) {
        return Err(format!("--down {}: servers are 0 to {}", k, a.servers - 1).into());
    }
    let heartbeat = match graph::args::Interval::from_arg(&a.heartbeat) {
        Some(graph::args::Interval(0)) => String::new(),
        Some(_) => format!("HEARTBEAT {}", a.heartbeat),
        None => {
            return Err(format!(
                "--heartbeat is a time such as 50ms or 0 for none, not '{}'",
                a.heartbeat
            )
            .into())
        }
    };
    let fail = a.fail.as_deref().map(|f| parse_fail(f, a.servers)).transpose()?;
    if let Some((_, at)) = fail.filter(|&(_, at)| at >= duration) {
        return Err(format!(
            "--fail at {} s: the traffic lasts {} s (--seconds)",
            at.as_secs_f64(),
            duration.as_secs_f64()
        )
        .into());
    }
    testbed::require_root()?;
    let stop = stop_on_signals();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program's path: {}", e))?;
    let n = a.servers;
    let len = 24 - n.trailing_zeros();
    let prefix = format!("brc{}-", std::process::id());
    let hosts: Vec<String> = (0..n).map(|j| format!("{}h{}", prefix, j)).collect();
    let servers: Vec<String> = (0..n).map(|j| format!("{}s{}", prefix, j)).collect();
    let mut mesh = Mesh {
        namespaces: Vec::new(),
        children: Vec::new(),
        killer: None,
    };
    // A stop signal during setup may kill an `ip` it runs: then the failure is the
    // signal's.
    let built = build_mesh(&mut mesh, &hosts, &servers);
    check(stop)?;
    built?;

    let routes: Vec<(String, usize)> = (0..n).map(|j| (format!("198.19.{}.0/24", j), j)).collect();
    let mut routers = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let config = ServerConfig {
            node: i,
            external: format!("x{}", i),
            external_mac: server_mac(i),
            next_hop_mac: host_mac(i),
            links: (0..n).map(|k| (k != i).then(|| format!("m{}{}", i, k))).collect(),
            routes: routes.clone(),
            balancing: {
                let down: Vec<String> = a
                    .down
                    .iter()
                    .filter(|&&k| k != i)
                    .map(|k| k.to_string())
                    .collect();
                if down.is_empty() {
                    balancing.clone()
                } else {
                    format!("{}, DOWN {}", balancing, down.join(" "))
                }
            },
            heartbeat: heartbeat.clone(),
            device: "METHOD PACKET".into(),
            extra: String::new(),
        }
        .click()?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", server]).arg(&exe).args([
            "run",
            "--threads",
            "1",
            "--no-summary",
            "-e",
            &config,
        ]);
        for h in COUNTERS {
            cmd.args(["-h", h]);
        }
        // Each child in a process group of its own: a Ctrl-C at the terminal reaches
        // the demo alone, which stops them in order.
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start server {}: {}", i, e))?;
        let out = read_all(child.stdout.take().expect("piped"));
        let err = read_all(child.stderr.take().expect("piped"));
        mesh.children.push(child);
        routers.push((out, Some(err)));
    }
    wait_for_routers(&mut mesh, &servers, &mut routers, stop)?;

    let mut sinks = Vec::new();
    // The sinks' standard error stays open to the end, so they never write into a
    // closed pipe.
    let mut sink_errs: Vec<BufReader<ChildStderr>> = Vec::new();
    for (j, h) in hosts.iter().enumerate() {
        let mut child = Command::new(&exe)
            .args([
                "sink",
                "--netns",
                h,
                "-i",
                &format!("e{}", j),
                "--idle",
                "2",
                "-q",
            ])
            .args(["--duration", &format!("{}", a.seconds + 30.0)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start a sink: {}", e))?;
        let mut err = BufReader::new(child.stderr.take().expect("piped"));
        let mut line = String::new();
        let _ = err.read_line(&mut line);
        if !line.contains("listening") {
            check(stop)?;
            return Err(format!("the sink in {} did not start: {}", h, line.trim()).into());
        }
        sinks.push(child.stdout.take().map(read_all).expect("piped"));
        mesh.children.push(child);
        sink_errs.push(err);
    }
    check(stop)?;

    let mut gen = Command::new(&exe)
        .args(["gen", "--netns", &hosts[0], "-i", "e0", "-q"])
        .args(["--dst-mac", &mac(server_mac(0)), "--src", "198.18.0.1"])
        .args(["--dst", &format!("198.19.0.0/{}", len)])
        .args(["--flows", &a.flows.to_string(), "--rate", &a.pps.to_string()])
        .args(["--duration", &format!("{}", duration.as_secs_f64())])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run the generator: {}", e))?;
    let (gen_out, gen_err) = (
        read_all(gen.stdout.take().expect("piped")),
        read_all(gen.stderr.take().expect("piped")),
    );
    if let Some((k, at)) = fail {
        mesh.killer = Some(kill_later(mesh.children[k].id(), at, stop));
    }
    let status = wait_child(
        &mut gen,
        duration + Duration::from_secs(30),
        stop,
        "the generator",
    )?;
    let (gen_out, gen_err) = (
        gen_out.join().unwrap_or_default(),
        gen_err.join().unwrap_or_default(),
    );
    if !status.success() {
        return Err(format!("the generator failed: {}", gen_err.trim()).into());
    }
    let gen: serde_json::Value =
        serde_json::from_str(&gen_out).map_err(|e| format!("gen's report: {}", e))?;
    let sent = gen["packets"]
        .as_u64()
        .ok_or("gen's report has no packet count")?;

    // The sinks end 2 s after their last frame; then the servers, whose counters the
    // run prints as it stops.
    let mut sink_reports = Vec::new();
    for (j, out) in sinks.into_iter().enumerate() {
        let what = format!("the sink in {}", hosts[j]);
        wait_child(&mut mesh.children[n + j], Duration::from_secs(40), stop, &what)?;
        let text = out.join().unwrap_or_default();
        let report: serde_json::Value =
            serde_json::from_str(text.trim()).map_err(|e| format!("{}'s report: {}", what, e))?;
        sink_reports.push(report);
    }
    let n_sinks = sink_reports.len();
    // The servers are reaped next: `--fail`'s timer must be over first.
    mesh.end_timer();
    for c in &mut mesh.children[..n] {
        // SAFETY: kill(2) on our own child's process id, which we have not reaped yet.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    }
    let mut counters: Vec<Option<Vec<u64>>> = Vec::new();
    for (i, (out, err)) in routers.into_iter().enumerate() {
        let what = format!("server {}", i);
        let status = wait_child(&mut mesh.children[i], Duration::from_secs(5), stop, &what)?;
        let out = out.join().unwrap_or_default();
        let values: Option<Vec<u64>> = COUNTERS.iter().map(|h| handler_value(&out, h)).collect();
        if fail.is_some_and(|(k, _)| k == i) {
            counters.push(None);
            continue;
        }
        let Some(values) = values else {
            let err = err.map(|e| e.join().unwrap_or_default()).unwrap_or_default();
            return Err(format!("{} ended without its counters ({}): {}", what, status, err.trim()).into());
        };
        counters.push(Some(values));
    }

    let rows: Vec<(u64, u64, u64)> = (0..n_sinks)
        .map(|j| {
            let r = &sink_reports[j];
            (
                expected(j, sent, a.flows, len),
                r["delivered"].as_u64().unwrap_or(0),
                r["reordered"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    if a.json {
        let hosts: Vec<serde_json::Value> = rows
            .iter()
            .map(|&(e, d, r)| serde_json::json!({"expected": e, "delivered": d, "reordered": r}))
            .collect();
        let servers: Vec<serde_json::Value> = counters
            .iter()
            .map(|c| match c {
                Some(c) => serde_json::json!({"local": c[0], "direct": c[1], "balanced": c[2],
                    "flowlet_hits": c[3], "relayed": c[4], "delivered": c[5]}),
                None => serde_json::Value::Null,
            })
            .collect();
        let failed = fail.map(|(k, at)| serde_json::json!({"server": k, "seconds": at.as_secs_f64()}));
        let report = serde_json::json!({"servers": n, "scheme": a.scheme, "flowlet": a.flowlet,
            "heartbeat": if heartbeat.is_empty() { "0" } else { a.heartbeat.as_str() },
            "failed": failed, "sent": sent, "hosts": hosts, "server_counts": servers});
        println!("{}", report);
        return Ok(());
    }
    println!(
        "cluster demo: {} servers in a full mesh, {} ({}), one worker each",
        n,
        if a.scheme == "direct" {
            "Direct VLB"
        } else {
            "classic VLB"
        },
        balancing
    );
    println!(
        "traffic: {} frames over {} flows from h0 into s0, to 198.19.0.0/{} (host j owns 198.19.j.0/24)",
        sent, a.flows, len
    );
    match (&fail, heartbeat.is_empty()) {
        (Some((k, at)), false) => println!(
            "s{} killed {:.1} s into the traffic; heartbeats every {}: the others stop balancing through it when they miss four",
            k,
            at.as_secs_f64(),
            a.heartbeat
        ),
        (Some((k, at)), true) => println!(
            "s{} killed {:.1} s into the traffic; no heartbeats: the others go on balancing through it",
            k,
            at.as_secs_f64()
        ),
        (None, false) => println!("heartbeats every {}", a.heartbeat),
        (None, true) => {}
    }
    println!();
    println!(
        "{:<6}{:>10}{:>11}{:>8}{:>11}{:>12}",
        "host", "expected", "delivered", "lost", "reordered", "reordering"
    );
    for (j, &(e, d, r)) in rows.iter().enumerate() {
        let pct = if d > 0 { 100.0 * r as f64 / d as f64 } else { 0.0 };
        println!(
            "{:<6}{:>10}{:>11}{:>8}{:>11}{:>11.3}%",
            format!("h{}", j),
            e,
            d,
            e.saturating_sub(d),
            r,
            pct
        );
    }
    println!();
    println!(
        "{:<8}{:>8}{:>9}{:>10}{:>14}{:>9}{:>11}",
        "server", "local", "direct", "balanced", "flowlet hits", "relayed", "delivered"
    );
    for (i, c) in counters.iter().enumerate() {
        match c {
            Some(c) => println!(
                "{:<8}{:>8}{:>9}{:>10}{:>14}{:>9}{:>11}",
                format!("s{}", i),
                c[0],
                c[1],
                c[2],
                c[3],
                c[4],
                c[5]
            ),
            None => println!("{:<8}{:>8}", format!("s{}", i), "killed"),
        }
    }
    println!();
    println!("local/direct/balanced: s0's VLBSwitch, by the path each frame took; relayed: frames a server");
    println!("passed on as intermediate; delivered: frames from the mesh a server sent to its host.");
    Ok(())
}

/// `--fail K@SECONDS`: the server and the time into the traffic.
fn parse_fail(text: &str, servers: usize) -> Result<(usize, Duration), String> {
    let bad = || {
        format!(
            "--fail is K@SECONDS (server K killed SECONDS into the traffic), not '{}'",
            text
        )
    };
    let (k, at) = text.split_once('@').ok_or_else(bad)?;
    let k: usize = k.parse().map_err(|_| bad())?;
    let at: f64 = at.parse().map_err(|_| bad())?;
    if k >= servers {
        return Err(format!("--fail {}: servers are 0 to {}", text, servers - 1));
    }
    if k == 0 {
        return Err("--fail 0: server 0 takes the traffic in; fail another".into());
    }
    let at = ::bench::units::seconds_option("--fail", at)?;
    Ok((k, at))
}

/// Sends SIGKILL to process `pid` after `at`, unless a stop signal or the returned
/// flag comes first.
fn kill_later(pid: u32, at: Duration, stop: &'static AtomicBool) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let cancel = Arc::new(AtomicBool::new(false));
    let cancelled = cancel.clone();
    let timer = std::thread::spawn(move || {
        let deadline = Instant::now() + at;
        while Instant::now() < deadline {
            if stop.load(Ordering::Relaxed) || cancelled.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kill(2) on the demo's own child: the mesh reaps its children only
        // after this thread has ended (see `Mesh`'s drop); until the end of the
        // traffic nothing else does.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    (cancel, timer)
}

/// Waits until every server holds a packet socket for each of its interfaces (its
/// devices are open). A server that exits has its error output reported.
fn wait_for_routers(
    mesh: &mut Mesh,
    servers: &[String],
    routers: &mut [(JoinHandle<String>, Option<JoinHandle<String>>)],
    stop: &AtomicBool,
) -> Result<(), Stop> {
    let deadline = Instant::now() + Duration::from_secs(20);
    for (i, ns) in servers.iter().enumerate() {
        loop {
            check(stop)?;
            if let Some(e) = exited_at_start(mesh, routers, i) {
                return Err(e);
            }
            if packet_sockets(ns)? >= servers.len() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("server {} did not open its interfaces within 20 s", i).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A server whose configuration fails later in its build (VLBSwitch's arguments
    // after its interfaces') holds its sockets for a moment before it exits: look
    // once more after a pause, so it is reported as not starting.
    std::thread::sleep(Duration::from_millis(100));
    match (0..servers.len()).find_map(|i| exited_at_start(mesh, routers, i)) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Server `i`'s exit with its error output, if it has exited.
fn exited_at_start(
    mesh: &mut Mesh,
    routers: &mut [(JoinHandle<String>, Option<JoinHandle<String>>)],
    i: usize,
) -> Option<Stop> {
    let st = mesh.children[i].try_wait().ok()??;
    let err = routers[i]
        .1
        .take()
        .map(|e| e.join().unwrap_or_default())
        .unwrap_or_default();
    Some(format!("server {} exited at start ({}): {}", i, st, err.trim()).into())
}

fn packet_sockets(ns: &str) -> Result<usize, String> {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/packet"])
        .output()
        .map_err(|e| format!("reading {}'s packet sockets: {}", ns, e))?;
    Ok(String::from_utf8_lossy(&o.stdout).lines().skip(1).count())
}
