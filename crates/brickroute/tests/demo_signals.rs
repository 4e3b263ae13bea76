//! `brickroute demo` under signals and with its output gone (root needed): whatever
//! stops it, it exits as documented (130 when interrupted) and leaves no namespace,
//! state file or router process behind. Every demo runs in a process group of its
//! own (so a signal to that group reaches the demo and its children, as a terminal's
//! Ctrl-C does, and never this test), with its state in a fresh directory; guards
//! remove whatever a failing demo leaves, and every wait has a deadline.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_brickroute");

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn netns_list() -> Vec<String> {
    let o = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

fn pids_in(ns: &str) -> Vec<i32> {
    let o = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// A running `brickroute demo`: its stderr read line by line on a thread, killed (its
/// whole process group) and its testbed removed when dropped.
struct Demo {
    child: Option<Child>,
    prefix: String,
    dir: tempfile::TempDir,
    lines: Option<mpsc::Receiver<String>>,
    stderr: String,
    stdout: Option<std::thread::JoinHandle<String>>,
    /// Held until the demo and its testbed are gone (the last field: dropped after
    /// `Drop::drop` tore them down).
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// One demo at a time: each runs a generator, a router of two workers and a sink on
/// this machine's two cores, and several at once starve each other's router long enough
/// (a quarter of a second, seen under CI's load) for its receive ring to overflow,
/// which the tests of lossless teardown would take for a lost frame.
static ONE_DEMO: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How a demo ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// What becomes of a standard stream of the demo.
#[derive(Clone, Copy, PartialEq)]
enum Stream {
    Read,
    /// A pipe whose reading end is closed before the demo writes: writes fail (EPIPE).
    Closed,
}

impl Demo {
    fn start(args: &[&str], stdout: Stream, stderr: Stream) -> Demo {
        // (A test that failed holding it poisons it; the next demo runs all the same.)
        let alone = ONE_DEMO.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(BIN)
            .arg("demo")
            .args(args)
            .env("BRICKROUTE_RUN_DIR", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let prefix = format!("brd{}-", child.id());
        let out = child.stdout.take().unwrap();
        let stdout = (stdout == Stream::Read).then(|| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = BufReader::new(out).read_to_string(&mut s);
                s
            })
        });
        let err = child.stderr.take().unwrap();
        let lines = (stderr == Stream::Read).then(|| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    if tx.send(line.unwrap_or_default()).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        Demo {
            child: Some(child),
            prefix,
            dir,
            lines,
            stderr: String::new(),
            stdout,
            _alone: alone,
        }
    }

    /// Waits (up to `limit`) for a line of stderr that `is_it` accepts.
    fn wait_for(&mut self, limit: Duration, is_it: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + limit;
        let lines = self.lines.as_ref().expect("stderr is read");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) => {
                    self.stderr.push_str(&l);
                    self.stderr.push('\n');
                    if is_it(&l) {
                        return;
                    }
                }
                Err(_) => panic!("no such line within {:?}; the demo said:\n{}", limit, self.stderr),
            }
        }
    }

    /// Sends `sig` to the demo alone (`group` false) or to its whole process group, as
    /// a terminal does.
    fn signal(&self, sig: i32, group: bool) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        // SAFETY: kill(2) on our own child (not reaped yet) or on the process group
        // it leads.
        unsafe { libc::kill(if group { -pid } else { pid }, sig) };
    }

    /// Waits (up to `limit`) for the demo to exit.
    fn wait(&mut self, limit: Duration) -> Ended {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                // SAFETY: kill(2) on the process group our unreaped child leads.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                panic!("the demo did not end within {:?}:\n{}", limit, self.stderr);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(lines) = &self.lines {
            while let Ok(l) = lines.recv_timeout(Duration::from_secs(5)) {
                self.stderr.push_str(&l);
                self.stderr.push('\n');
            }
        }
        let stdout = self.stdout.take().map(|h| h.join().unwrap()).unwrap_or_default();
        Ended {
            code: status.code(),
            stdout,
            stderr: std::mem::take(&mut self.stderr),
        }
    }

    /// Asserts that the demo left nothing: no namespace of its prefix, no state file.
    fn assert_nothing_left(&self) {
        let left: Vec<String> = netns_list()
            .into_iter()
            .filter(|n| n.starts_with(&self.prefix))
            .collect();
        assert!(left.is_empty(), "namespaces left: {:?}", left);
        let files: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(files.is_empty(), "state files left: {:?}", files);
    }

    /// The router process (in the dut namespace), once the live view runs.
    fn router_pids(&self) -> Vec<i32> {
        let pids = pids_in(&format!("{}dut", self.prefix));
        assert!(!pids.is_empty(), "no router process in the dut namespace");
        pids
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            // SAFETY: kill(2) on the process group our unreaped child leads.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
        let _ = Command::new(BIN)
            .args(["testbed", "down", "--prefix", &self.prefix])
            .env("BRICKROUTE_RUN_DIR", self.dir.path())
            .output();
    }
}

/// A live-view line's time (`  4.0s   9.999 k ...`): 4.0. (A host that stalls the
/// demo can skip a second's line, so waits take any line from a time on.)
fn live_view_seconds(l: &str) -> Option<f64> {
    l.split_whitespace().next()?.strip_suffix('s')?.parse().ok()
}

fn is_live_view_line(l: &str) -> bool {
    live_view_seconds(l).is_some()
}

/// The word after the first `key` in `text` (the demo's summary, or a line of it).
fn summary_value<'a>(text: &'a str, key: &str) -> &'a str {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("no '{}' in:\n{}", key, text));
    text[at + key.len()..].split_whitespace().next().unwrap()
}

#[test]
fn demo_hangup_and_quit_tear_everything_down_and_exit_130() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for sig in [libc::SIGHUP, libc::SIGQUIT] {
        let mut d = Demo::start(
            &["--seconds", "60", "--rate", "5000", "--flows", "8"],
            Stream::Read,
            Stream::Read,
        );
        d.wait_for(Duration::from_secs(60), is_live_view_line);
        let router = d.router_pids();
        d.signal(sig, false);
        let e = d.wait(Duration::from_secs(30));
        assert_eq!(e.code, Some(130), "signal {}:\n{}", sig, e.stderr);
        assert!(
            e.stdout.contains("(interrupted)"),
            "signal {}:\n{}",
            sig,
            e.stdout
        );
        d.assert_nothing_left();
        for p in router {
            assert!(!alive(p), "signal {}: router process {} still running", sig, p);
        }
    }
}

/// Ctrl-C at the terminal (SIGINT to the process group) while the demo builds its
/// testbed, or while it waits for the router to open its ports: "interrupted", exit
/// 130, nothing left; not a false error about a failed `ip` command or a router that
/// did not start.
#[test]
fn demo_interrupted_while_starting_says_so_and_exits_130() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for phase in ["demo: building testbed", "demo: starting the router"] {
        let mut d = Demo::start(&["--seconds", "60", "--rate", "5000"], Stream::Read, Stream::Read);
        d.wait_for(Duration::from_secs(60), |l| l.starts_with(phase));
        d.signal(libc::SIGINT, true);
        let e = d.wait(Duration::from_secs(60));
        assert_eq!(e.code, Some(130), "at '{}':\n{}", phase, e.stderr);
        assert!(
            e.stderr.contains("brickroute demo: interrupted\n"),
            "at '{}':\n{}",
            phase,
            e.stderr
        );
        assert!(
            !e.stderr.contains("failed") && !e.stderr.contains("did not open"),
            "at '{}':\n{}",
            phase,
            e.stderr
        );
        d.assert_nothing_left();
    }
}

/// Ctrl-C at the terminal during the run reaches the demo, not the router: the demo
/// stops the generator, lets the last frames through the router and only then stops
/// it, so what the generator sent arrives. One flow through two workers arrives in
/// order.
#[test]
fn demo_terminal_interrupt_loses_nothing_and_one_flow_keeps_its_order() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mut d = Demo::start(
        &[
            "--seconds",
            "60",
            "--rate",
            "10000",
            "--threads",
            "2",
            "--flows",
            "1",
        ],
        Stream::Read,
        Stream::Read,
    );
    d.wait_for(Duration::from_secs(60), |l| {
        live_view_seconds(l).is_some_and(|t| t >= 2.0)
    });
    let router = d.router_pids();
    let demo_pid = d.child.as_ref().unwrap().id() as i32;
    for &p in &router {
        // SAFETY: getpgid(2) only reads a process's group id.
        let group = unsafe { libc::getpgid(p) };
        assert_ne!(group, demo_pid, "the router {} is in the demo's process group", p);
    }
    d.signal(libc::SIGINT, true);
    let e = d.wait(Duration::from_secs(30));
    assert_eq!(e.code, Some(130), "{}\n{}", e.stdout, e.stderr);
    let sent: u64 = summary_value(&e.stdout, "generator  sent ").parse().unwrap();
    assert!(sent > 10_000, "{}", e.stdout);
    let sink = e
        .stdout
        .lines()
        .find(|l| l.starts_with("sink       delivered "))
        .unwrap_or_else(|| panic!("no sink line in:\n{}", e.stdout));
    assert_eq!(
        summary_value(sink, "delivered "),
        sent.to_string(),
        "{}",
        e.stdout
    );
    assert_eq!(summary_value(sink, "lost "), "0", "{}", e.stdout);
    assert_eq!(summary_value(sink, "reordered "), "0", "{}", e.stdout);
    assert!(!e.stderr.contains("the router ended with"), "{}", e.stderr);
    d.assert_nothing_left();
    for p in router {
        assert!(!alive(p), "router process {} still running", p);
    }
}

/// With its output gone (`brickroute demo | true`, a closed terminal) the demo does not
/// panic: it runs to its end, removes its testbed and exits as it would have.
#[test]
fn demo_with_its_output_closed_runs_to_its_end_and_cleans_up() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let args = ["--seconds", "1", "--rate", "10000", "--flows", "4"];
    let mut d = Demo::start(&args, Stream::Closed, Stream::Read);
    let e = d.wait(Duration::from_secs(90));
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert!(!e.stderr.contains("panicked"), "{}", e.stderr);
    assert!(e.stderr.contains("demo: removed testbed"), "{}", e.stderr);
    d.assert_nothing_left();
    // (Gone before the next starts: one demo at a time.)
    drop(d);

    let mut d = Demo::start(&args, Stream::Closed, Stream::Closed);
    let e = d.wait(Duration::from_secs(90));
    assert_eq!(e.code, Some(0));
    d.assert_nothing_left();
}

#[test]
fn demo_refuses_bad_flows_and_size_before_building_anything() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for (args, want) in [
        (["--flows", "0"], "--flows must be 1..65536, not 0"),
        (["--flows", "70000"], "--flows must be 1..65536, not 70000"),
        (
            ["--size", "63"],
            "--size: frame size 63 out of range: sizes are 64..1518 bytes (FCS included)",
        ),
    ] {
        let mut d = Demo::start(&args, Stream::Read, Stream::Read);
        let e = d.wait(Duration::from_secs(30));
        assert_eq!(e.code, Some(1), "{:?}: {}", args, e.stderr);
        assert_eq!(e.stderr, format!("brickroute demo: {}\n", want), "{:?}", args);
        assert_eq!(e.stdout, "", "{:?}", args);
        d.assert_nothing_left();
    }
}
