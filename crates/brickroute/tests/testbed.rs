//! The namespace testbed, the generator and sink, and `brickroute demo`, run as root
//! through the real binary. Every name carries this process's id; guards remove
//! namespaces and end child processes on every way out, and every wait has a deadline.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip").args(args).output().expect("run ip")
}

fn ip_ok(args: &[&str]) -> String {
    let o = ip(args);
    assert!(
        o.status.success(),
        "ip {:?}: {}",
        args,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn netns_list() -> Vec<String> {
    ip_ok(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// Removes the given namespaces (and a testbed's state) when dropped.
struct NsGuard {
    namespaces: Vec<String>,
    testbed: Option<(String, PathBuf)>,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        if let Some((prefix, dir)) = &self.testbed {
            let _ = Command::new(BIN)
                .args(["testbed", "down", "--prefix", prefix])
                .env("BRICKROUTE_RUN_DIR", dir)
                .output();
        }
        for ns in &self.namespaces {
            if netns_list().contains(ns) {
                let _ = ip(&["netns", "del", ns]);
            }
        }
    }
}

/// A child process killed when dropped.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    /// Waits up to `limit` for the child to exit; kills it and fails after that.
    fn wait(mut self, limit: Duration) -> Output {
        let mut c = self.0.take().expect("child");
        let out = c.stdout.take().map(reader);
        let err = c.stderr.take().map(reader);
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(st) = c.try_wait().expect("try_wait") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("child did not finish within {:?}", limit);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: out.map(|h| h.join().unwrap()).unwrap_or_default(),
            stderr: err.map(|h| h.join().unwrap()).unwrap_or_default(),
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

fn json_line(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in: {}", text));
    serde_json::from_str(line).expect("valid JSON")
}

#[test]
fn testbed_up_builds_namespaces_links_and_neighbours_and_down_removes_them() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let prefix = format!("brt{}u-", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = ["gen", "dut", "sink"]
        .iter()
        .map(|s| format!("{}{}", prefix, s))
        .collect();
    let _guard = NsGuard {
        namespaces: names.clone(),
        testbed: Some((prefix.clone(), dir.path().to_path_buf())),
    };
    let tb = |args: &[&str]| {
        Command::new(BIN)
            .arg("testbed")
            .args(args)
            .args(["--prefix", &prefix])
            .env("BRICKROUTE_RUN_DIR", dir.path())
            .output()
            .unwrap()
    };
    let up = tb(&["up", "--queues", "2"]);
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let list = netns_list();
    for n in &names {
        assert!(list.contains(n), "{} missing from {:?}", n, list);
    }
    let addrs = |ns: &str| ip_ok(&["-n", ns, "-br", "addr", "show"]);
    let (g, d, s) = (&names[0], &names[1], &names[2]);
    assert!(addrs(g).contains("198.18.0.1/24"), "{}", addrs(g));
    assert!(
        addrs(d).contains("198.18.0.2/24") && addrs(d).contains("198.18.1.2/24"),
        "{}",
        addrs(d)
    );
    assert!(addrs(s).contains("198.18.1.1/24"), "{}", addrs(s));
    // Two queues each way on every veth end.
    for (ns, dev) in [(g, "g0"), (d, "d0"), (d, "d1"), (s, "s0")] {
        let j: serde_json::Value =
            serde_json::from_str(&ip_ok(&["-n", ns, "-d", "-j", "link", "show", dev])).unwrap();
        assert_eq!(j[0]["num_tx_queues"], 2, "{} {}", ns, dev);
        assert_eq!(j[0]["num_rx_queues"], 2, "{} {}", ns, dev);
        assert_eq!(j[0]["operstate"], "UP", "{} {}", ns, dev);
    }
    let neigh = ip_ok(&["-n", g, "neigh", "show", "dev", "g0"]);
    assert!(
        neigh.contains("198.18.0.2 lladdr 02:b7:00:00:00:02 PERMANENT"),
        "{}",
        neigh
    );
    let neigh = ip_ok(&["-n", d, "neigh", "show", "dev", "d1"]);
    assert!(
        neigh.contains("198.18.1.1 lladdr 02:b7:00:00:01:01 PERMANENT"),
        "{}",
        neigh
    );
    let lo = ip_ok(&["-n", s, "-br", "link", "show", "lo"]);
    assert!(lo.contains("UNKNOWN") || lo.contains("UP"), "{}", lo);

    // A second `up` with the same prefix refuses and leaves the testbed as it was.
    let again = tb(&["up"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already up"));
    assert!(netns_list().contains(g));

    let down = tb(&["down"]);
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let list = netns_list();
    for n in &names {
        assert!(!list.contains(n), "{} left behind", n);
    }
    assert!(!dir.path().join(format!("testbed-{}.json", prefix)).exists());
    let down = tb(&["down"]);
    assert!(String::from_utf8_lossy(&down.stderr).contains("is up (no state file"));
}

/// A namespace pair joined by one veth: the ceiling path, no router in between.
fn veth_pair(tag: &str) -> (NsGuard, String, String) {
    let pid = std::process::id();
    let (a, b) = (format!("brt{}{}g", pid, tag), format!("brt{}{}s", pid, tag));
    let guard = NsGuard {
        namespaces: vec![a.clone(), b.clone()],
        testbed: None,
    };
    ip_ok(&["netns", "add", &a]);
    ip_ok(&["netns", "add", &b]);
    ip_ok(&[
        "link",
        "add",
        "ga",
        "netns",
        &a,
        "numtxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "sa",
        "netns",
        &b,
        "address",
        "02:00:00:00:00:5a",
        "numrxqueues",
        "2",
    ]);
    ip_ok(&["-n", &a, "link", "set", "ga", "up"]);
    ip_ok(&["-n", &b, "link", "set", "sa", "up"]);
    (guard, a, b)
}

/// Runs a sink on `sa` and a generator on `ga` with `gen_args`; returns both reports.
fn gen_to_sink(
    gns: &str,
    sns: &str,
    expect: u64,
    gen_args: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let mut sink = Command::new(BIN)
        .args(["sink", "--netns", sns, "-i", "sa", "--duration", "30", "-q"])
        .args(["--expect", &expect.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for "listening" so no frame is sent before the sink's socket exists.
    let mut err = BufReader::new(sink.stderr.take().unwrap());
    let sink = ChildGuard(Some(sink));
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("listening"), "sink said: {}", line);
    let gen = Command::new(BIN)
        .args([
            "gen",
            "--netns",
            gns,
            "-i",
            "ga",
            "--dst-mac",
            "02:00:00:00:00:5a",
            "-q",
        ])
        .args(gen_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let g = ChildGuard(Some(gen)).wait(Duration::from_secs(30));
    assert!(g.status.success(), "gen: {}", String::from_utf8_lossy(&g.stderr));
    let s = sink.wait(Duration::from_secs(40));
    assert!(s.status.success(), "sink failed");
    (json_line(&g.stdout), json_line(&s.stdout))
}

#[test]
fn generator_to_sink_delivers_exactly_n_frames_in_order() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (_guard, g, s) = veth_pair("p");
    // 64-byte frames: 60 bytes each on the veth.
    let (gr, sr) = gen_to_sink(
        &g,
        &s,
        4000,
        &["--count", "4000", "--rate", "20000", "--flows", "16"],
    );
    assert_eq!(gr["packets"], 4000);
    assert_eq!(gr["bytes"], 4000 * 60);
    assert_eq!(sr["delivered"], 4000);
    assert_eq!(sr["bytes"], 4000 * 60);
    assert_eq!(sr["lost"], 0);
    assert_eq!(sr["lost_gaps"], 0);
    assert_eq!(sr["reordered"], 0);
    assert_eq!(sr["duplicates"], 0);
    assert_eq!(sr["flows"], 16);
    assert!(sr["latency"]["p50_ns"].as_u64().unwrap() > 0);

    // IMIX: every 12 frames are 7 of 60, 4 of 590 and 1 of 1514 bytes on the wire.
    let (gr, sr) = gen_to_sink(
        &g,
        &s,
        1200,
        &["--count", "1200", "--rate", "10000", "--imix", "--flows", "3"],
    );
    let bytes = 100 * (7 * 60 + 4 * 590 + 1514);
    assert_eq!(gr["bytes"], bytes);
    assert_eq!(sr["delivered"], 1200);
    assert_eq!(sr["bytes"], bytes);
    assert_eq!(
        (sr["lost"].clone(), sr["reordered"].clone(), sr["flows"].clone()),
        (0.into(), 0.into(), 3.into())
    );
}

#[test]
fn generator_refuses_bad_arguments_with_reasons() {
    let run = |args: &[&str]| {
        let o = Command::new(BIN).arg("gen").args(args).output().unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(run(&["--size", "63"]).contains("frame size 63 out of range"));
    assert!(run(&["--rate", "0"]).contains("--rate must be at least 1"));
    assert!(run(&["--netns", "brt-no-such-ns-here"]).contains("network namespace 'brt-no-such-ns-here'"));
    assert!(run(&["--sizes-from", "/nonexistent.pcap"]).contains("/nonexistent.pcap"));
}

/// Starts `brickroute demo ARGS` with its state in a fresh directory; returns the
/// directory, the child, the testbed's name prefix and a guard that removes whatever
/// the demo leaves behind.
fn start_demo(args: &[&str]) -> (tempfile::TempDir, Child, String, NsGuard) {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .arg("demo")
        .args(args)
        .env("BRICKROUTE_RUN_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("brd{}-", child.id());
    let guard = NsGuard {
        namespaces: ["gen", "dut", "sink"]
            .iter()
            .map(|s| format!("{}{}", prefix, s))
            .collect(),
        testbed: Some((prefix.clone(), dir.path().to_path_buf())),
    };
    (dir, child, prefix, guard)
}

#[test]
fn demo_routes_traffic_and_leaves_nothing_behind() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (dir, child, prefix, _guard) = start_demo(&["--seconds", "2", "--rate", "10000", "--flows", "64"]);
    let out = ChildGuard(Some(child)).wait(Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sink JSON  "))
        .unwrap_or_else(|| panic!("no sink JSON in:\n{}", stdout));
    let r: serde_json::Value = serde_json::from_str(json).unwrap();
    assert!(r["delivered"].as_u64().unwrap() > 0, "{}", r);
    assert_eq!(r["flows"], 64);
    assert!(
        netns_list().iter().all(|n| !n.starts_with(&prefix)),
        "namespaces left: {:?}",
        netns_list()
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "state file left behind"
    );
}

#[test]
fn demo_interrupted_tears_everything_down() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (dir, mut child, prefix, _guard) = start_demo(&["--seconds", "60", "--rate", "5000", "--flows", "8"]);
    // Wait for the first line of the live view: everything is running then.
    let err = BufReader::new(child.stderr.take().unwrap());
    let pid = child.id() as i32;
    let child = ChildGuard(Some(child));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in err.lines() {
            let line = line.unwrap_or_default();
            seen.push_str(&line);
            seen.push('\n');
            // A live-view line (`  1.0s   9.999 k ...`), whichever second it is for.
            let time = line.split_whitespace().next().and_then(|w| w.strip_suffix('s'));
            if time.is_some_and(|t| t.parse::<f64>().is_ok()) {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {}
        Ok(Err(seen)) => panic!("demo ended before its live view:\n{}", seen),
        Err(_) => panic!("no live view within 30 s"),
    }
    assert!(
        netns_list().iter().any(|n| n.starts_with(&prefix)),
        "testbed should be up while the demo runs"
    );
    // The router runs in the dut namespace: remember its process id.
    let router_pids: Vec<i32> = ip_ok(&["netns", "pids", &format!("{}dut", prefix)])
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert!(!router_pids.is_empty(), "no router process in the dut namespace");
    // SAFETY: kill(2) on our own child, which has not been reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = child.wait(Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "interrupted demo exits 130");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("(interrupted)"), "{}", stdout);
    assert!(
        netns_list().iter().all(|n| !n.starts_with(&prefix)),
        "namespaces left: {:?}",
        netns_list()
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "state file left behind"
    );
    // The router process has ended too.
    for p in router_pids {
        assert_ne!(
            // SAFETY: signal 0 only checks whether the process exists.
            unsafe { libc::kill(p, 0) },
            0,
            "router process {} still running",
            p
        );
    }
}
